// SPDX-License-Identifier: MIT
/*
 * symd's Python frame names (symd/pysym.h) against real interpreters:
 *  - the line of every code unit of a few functions, from pysym__line() on
 *    the function's co_linetable, equals the interpreter's own co_lines(),
 *    for each CPython 3.10-3.13 the machine has;
 *  - a live Debian python3.11's method is named "K.m (<string>:LINE)" from
 *    its code object's address, and refused (-ESTALE) with another check word;
 *    once the process exited, another code object's read through the same
 *    open /proc/PID/mem says the process is gone (-ESRCH), not freed;
 *    read as capture reads it (common/pycode.h) and primed into a new pysym
 *    (CPA_REC_PYCODE), it is named the same after the process is gone;
 *  - an exit drops exactly the pid's entries, and looks through the slots
 *    only for a pid that holds some (a fixture /proc: fake 3.12 code objects);
 *  - a code object at an address whose earlier one was named is named
 *    after itself (the same fixture).
 * No interpreter at all: the fixture test alone.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/pycode.h"
#include "symd/pysym.h"
#include "test_proc.h"
#include "test_util.h"

static const struct {
	unsigned int minor;
	const char *path;
} pythons[] = {
	{10, "/root/.pyenv/versions/3.10.13/bin/python3.10"},
	{11, "/usr/bin/python3.11"},
	{11, "/root/.pyenv/versions/3.11.7/bin/python3.11"},
	{12, "/root/.pyenv/versions/3.12.1/bin/python3.12"},
	{13, "/root/.pyenv/versions/3.13.0/bin/python3.13"},
};

/* Prints per code object "C <linetable hex> <firstlineno> <units>", then
 * "U <unit> <line>" for each code unit co_lines() covers (line 0: none). */
static const char lines_py[] =
	"import sys\n"
	"src = '''\n"
	"def f(x):\n"
	"    y = x + 1\n"
	"    for i in range(3):\n"
	"        y += i\n"
	"\n"
	"    try:\n"
	"        z = [i * 2 for i in range(y)]\n"
	"    except Exception:\n"
	"        z = None\n"
	"    return (y,\n"
	"            z)\n"
	"class K:\n"
	"    def m(self, a, b=2):\n"
	"        if a:\n"
	"            return a * b\n"
	"        return b\n"
	"'''\n"
	"mod = compile(src, 'fixture.py', 'exec')\n"
	"def walk(co):\n"
	"    yield co\n"
	"    for c in co.co_consts:\n"
	"        if hasattr(c, 'co_code'):\n"
	"            yield from walk(c)\n"
	"for co in walk(mod):\n"
	"    print('C', co.co_linetable.hex() or '-', co.co_firstlineno, len(co.co_code) // 2)\n"
	"    for s, e, l in co.co_lines():\n"
	"        for b in range(s, e, 2):\n"
	"            print('U', b // 2, l or 0)\n";

START_TEST(test_pysym_lines)
{
	int tried = 0;

	for (size_t p = 0; p < sizeof(pythons) / sizeof(pythons[0]); p++) {
		char script[PATH_MAX], *out, *line, *save = NULL;
		uint8_t tab[65536];
		size_t n = 0;
		uint32_t first = 0;
		long units = 0, checked = 0;
		int fd, rc;

		if (access(pythons[p].path, X_OK) != 0)
			continue;
		fd = test_mkstemp(script, sizeof(script), "pysym");
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, lines_py, sizeof(lines_py) - 1),
				 (ssize_t)(sizeof(lines_py) - 1));
		close(fd);
		out = test_cmd_out(&rc, "'%s' '%s'", pythons[p].path, script);
		unlink(script);
		ck_assert_msg(rc == 0, "%s: %s", pythons[p].path, out);
		for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char hex[131072];
			long u, l;

			if (sscanf(line, "C %131071s %" SCNu32 " %ld", hex, &first, &units) == 3) {
				n = 0;
				for (size_t i = 0; hex[0] != '-' && hex[i] && hex[i + 1]; i += 2) {
					unsigned int b;

					ck_assert(sscanf(hex + i, "%2x", &b) == 1);
					tab[n++] = (uint8_t)b;
				}
			} else if (sscanf(line, "U %ld %ld", &u, &l) == 2) {
				uint32_t got =
					pysym__line(pythons[p].minor, tab, n, first, (uint64_t)u);

				ck_assert_msg(got == (uint32_t)l, "%s: unit %ld: line %u, want %ld",
					      pythons[p].path, u, got, l);
				checked++;
			}
		}
		fprintf(stderr, "%s: %ld code units' lines as co_lines()\n", pythons[p].path,
			checked);
		ck_assert_int_gt(checked, 50);
		free(out);
		tried++;
	}
	ck_assert_int_gt(tried, 0);
}
END_TEST

/* The live method: prints the code object's address, its co_code offset
 * unit 0's line and another function's code object's address, then waits on
 * stdin. */
static const char live_py[] =
	"import sys\n"
	"class K:\n"
	"    def m(self):\n"
	"        return 1\n"
	"def g():\n"
	"    return 2\n"
	"print(hex(id(K.m.__code__)), K.m.__code__.co_firstlineno, hex(id(g.__code__)),\n"
	"      flush=True)\n"
	"sys.stdin.read()\n";

/* pycode_read_fn over an open /proc/PID/mem (ctx: its fd). */
static int fd_read(void *ctx, const struct pycode_seg *s, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (pread(*(int *)ctx, s[i].buf, s[i].len, (off_t)s[i].addr) != (ssize_t)s[i].len)
			return -EFAULT;
	return 0;
}

START_TEST(test_pysym_live)
{
	struct pycode_info info;
	char *argv[] = {"/usr/bin/python3.11", "-c", (char *)live_py, NULL};
	int in[2], out[2], memfd, len;
	char buf[256], name[512], path[64];
	uint64_t code, code_g, ck;
	uint32_t first, line, check;
	struct pysym *p;
	ssize_t n;
	pid_t pid;

	if (access(argv[0], X_OK) != 0)
		return;
	ck_assert_int_eq(pipe(in), 0);
	ck_assert_int_eq(pipe(out), 0);
	pid = spawn_fds(argv, in[0], out[1], -1);
	close(in[0]);
	close(out[1]);
	/* one line, maybe in several reads */
	for (size_t got = 0; !memchr(buf, '\n', got);) {
		n = read(out[0], buf + got, sizeof(buf) - 1 - got);
		ck_assert_int_gt(n, 0);
		got += (size_t)n;
		buf[got] = 0;
	}
	ck_assert_msg(sscanf(buf, "%" SCNx64 " %" SCNu32 " %" SCNx64, &code, &first, &code_g) == 3,
		      "python said: %s", buf);
	/* the check word as BPF reads it: 8 bytes at co_firstlineno (3.11: 72) */
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	memfd = open(path, O_RDONLY);
	ck_assert_int_ge(memfd, 0);
	ck_assert_int_eq(pread(memfd, &ck, 8, (off_t)(code + 72)), 8);
	close(memfd);
	check = (uint32_t)(ck ^ (ck >> 32));
	ck_assert_int_eq(pysym__new(NULL, &p), 0);
	/* 3.11: instr is prev_instr - code; co_code_adaptive at 184 */
	len = pysym__name(p, (uint32_t)pid, 11, code, 184 + 2, check, name, sizeof(name), &line);
	ck_assert_msg(len > 0, "pysym__name: %d", len);
	snprintf(buf, sizeof(buf), "K.m (<string>:%u)", first + 1);
	ck_assert_str_eq(name, buf);
	ck_assert_int_eq(line, first + 1);
	ck_assert_int_eq(pysym__name(p, (uint32_t)pid, 11, code, 184 + 2, check + 1, name,
				     sizeof(name), &line),
			 -ESTALE);
	/* capture's read (common/pycode.h), primed into a symd that names it
	 * after the process is gone (CPA_REC_PYCODE) */
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	memfd = open(path, O_RDONLY);
	ck_assert_int_ge(memfd, 0);
	ck_assert_int_eq(pycode__read(fd_read, &memfd, pycode__layout(11), code, 8192, &info), 0);
	close(memfd);
	ck_assert_uint_eq(info.check, check);
	close(in[1]);
	close(out[0]);
	kill(pid, SIGKILL);
	wait_exit(pid, NULL);
	/* p's /proc/PID/mem is still open (it reads 0 bytes now): K.m stays
	 * named from its slot, g()'s read says the process is gone (-ESRCH, a
	 * sample's "process gone before naming"), not a freed code object */
	len = pysym__name(p, (uint32_t)pid, 11, code, 184 + 2, check, name, sizeof(name), &line);
	ck_assert_msg(len > 0, "pysym__name, cached after exit: %d", len);
	ck_assert_str_eq(name, buf);
	ck_assert_int_eq(
		pysym__name(p, (uint32_t)pid, 11, code_g, 184 + 2, 0, name, sizeof(name), &line),
		-ESRCH);
	pysym__free(p);
	ck_assert_int_eq(pysym__new(NULL, &p), 0);
	ck_assert_int_eq(
		pysym__name(p, (uint32_t)pid, 11, code, 184 + 2, check, name, sizeof(name), &line),
		-ESRCH);
	pysym__prime(p, (uint32_t)pid, code, &info);
	ck_assert_ptr_null(info.qualname);
	len = pysym__name(p, (uint32_t)pid, 11, code, 184 + 2, check, name, sizeof(name), &line);
	ck_assert_msg(len > 0, "pysym__name, primed: %d", len);
	ck_assert_str_eq(name, buf);
	ck_assert_uint_eq(pysym__primed(p), 1);
	pysym__free(p);
}
END_TEST

/* A fake 3.12 code object in a fixture's <root>/<pid>/mem (a sparse file,
 * offset = address): type name "code", qualname and filename compact ASCII
 * strs, an empty line table. Its check word. */
#define FX_CODE 0x10000u

static void put_at(int fd, uint64_t addr, const void *p, size_t n)
{
	ck_assert_int_eq(pwrite(fd, p, n, (off_t)addr), (ssize_t)n);
}

static void put_u64(int fd, uint64_t addr, uint64_t v)
{
	put_at(fd, addr, &v, 8);
}

static void put_str(int fd, uint64_t addr, const char *s)
{
	uint32_t state = 1u << 2 | 1u << 5 | 1u << 6; /* kind 1, compact, ascii */

	put_u64(fd, addr + 16, strlen(s));
	put_at(fd, addr + 32, &state, 4);
	put_at(fd, addr + 40, s, strlen(s)); /* 3.12's sizeof(PyASCIIObject) */
}

/* pid's memory now holds a code object qualname, first line first, at
 * FX_CODE (the file written anew: the same inode, as a process's memory). */
static uint32_t fake_code(const char *root, uint32_t pid, const char *qualname, int32_t first)
{
	char path[PATH_MAX + 32];
	uint64_t ck;
	int fd;

	snprintf(path, sizeof(path), "%s/%u/mem", root, pid);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	ck_assert_int_ge(fd, 0);
	put_u64(fd, FX_CODE + 8, 0x11000);  /* ob_type */
	put_u64(fd, 0x11000 + 24, 0x12000); /* tp_name */
	put_at(fd, 0x12000, "code", 5);
	put_at(fd, FX_CODE + 68, &first, 4); /* co_firstlineno */
	put_u64(fd, FX_CODE + 112, 0x14000); /* co_filename */
	put_u64(fd, FX_CODE + 128, 0x13000); /* co_qualname */
	put_u64(fd, FX_CODE + 136, 0x15000); /* co_linetable: 0 bytes */
	put_str(fd, 0x13000, qualname);
	put_str(fd, 0x14000, "fx.py");
	put_u64(fd, 0x15000 + 16, 0);
	put_u64(fd, 0x16000, 0); /* the file's end past all of it */
	ck_assert_int_eq(pread(fd, &ck, 8, FX_CODE + 68), 8);
	close(fd);
	return (uint32_t)(ck ^ (ck >> 32));
}

/* A scratch directory for a fake /proc, as a path relative to the case's cwd,
 * there made its parent: pysym keeps at most 63 bytes of its root, and
 * $TMPDIR may be longer. */
static void fake_root(char *root, size_t len)
{
	char *slash;

	test_scratch_in(root, len, "pysym-proc");
	slash = strrchr(root, '/');
	*slash = '\0';
	ck_assert_int_eq(chdir(root), 0);
	memmove(root, slash + 1, strlen(slash + 1) + 1);
}

static uint32_t fake_proc(const char *root, uint32_t pid, const char *qualname)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%u", root, pid);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	return fake_code(root, pid, qualname, 7);
}

START_TEST(test_pysym_drop)
{
	char root[PATH_MAX], name[512], path[PATH_MAX + 32];
	uint32_t line, ck_a, ck_b;
	struct pysym *p;

	fake_root(root, sizeof(root));
	ck_a = fake_proc(root, 4242, "A.f");
	ck_b = fake_proc(root, 4343, "B.g");
	ck_assert_int_eq(pysym__new(root, &p), 0);
	ck_assert_int_gt(pysym__name(p, 4242, 12, FX_CODE, 0, ck_a, name, sizeof(name), &line), 0);
	ck_assert_str_eq(name, "A.f (fx.py)");
	ck_assert_int_gt(pysym__name(p, 4343, 12, FX_CODE, 0, ck_b, name, sizeof(name), &line), 0);
	ck_assert_str_eq(name, "B.g (fx.py)");
	ck_assert_uint_eq(pysym__held(p, 4242), 1);
	ck_assert_uint_eq(pysym__held(p, 4343), 1);

	/* The exits of a churning host: none of them holds a slot, none costs a scan. */
	for (uint32_t pid = 1; pid < 40000; pid++)
		if (pid != 4242 && pid != 4343)
			pysym__drop_pid(p, pid);
	ck_assert_uint_eq(pysym__scans(p), 0);

	/* 4242's files are gone: its name is not read again, 4343's stays cached. */
	for (uint32_t pid = 4242; pid <= 4343; pid += 101) {
		snprintf(path, sizeof(path), "%s/%u/mem", root, pid);
		ck_assert_int_eq(unlink(path), 0);
		snprintf(path, sizeof(path), "%s/%u", root, pid);
		ck_assert_int_eq(rmdir(path), 0);
	}
	pysym__drop_pid(p, 4242);
	ck_assert_uint_eq(pysym__scans(p), 1);
	ck_assert_uint_eq(pysym__held(p, 4242), 0);
	ck_assert_uint_eq(pysym__held(p, 4343), 1);
	ck_assert_int_eq(pysym__name(p, 4242, 12, FX_CODE, 0, ck_a, name, sizeof(name), &line),
			 -ESRCH);
	ck_assert_int_gt(pysym__name(p, 4343, 12, FX_CODE, 0, ck_b, name, sizeof(name), &line), 0);
	ck_assert_str_eq(name, "B.g (fx.py)");
	pysym__drop_pid(p, 4242); /* again: nothing left to look for */
	ck_assert_uint_eq(pysym__scans(p), 1);
	pysym__drop_pid(p, 4343);
	ck_assert_uint_eq(pysym__held(p, 4343), 0);
	ck_assert_uint_eq(pysym__scans(p), 2);
	pysym__free(p);
	ck_assert_int_eq(rmdir(root), 0);
}
END_TEST

/*
 * A code object freed and its memory given to another (pymalloc hands a
 * freed block of the size class out first: tests/workload/py_reuse.py): the
 * cached slot of (pid, address) is the old one's. A sample of the new one
 * (its check word) is named after it, not refused for as long as the process
 * lives; a sample of the old one taken before is still refused.
 */
/* pid's frame at FX_CODE with check word ck is named want. */
static void fx_named(struct pysym *p, uint32_t pid, uint32_t ck, const char *want)
{
	char name[512];
	uint32_t line;

	ck_assert_int_gt(pysym__name(p, pid, 12, FX_CODE, 0, ck, name, sizeof(name), &line), 0);
	ck_assert_str_eq(name, want);
}

/* The fixture's pid is gone. */
static void fx_gone(const char *root, uint32_t pid)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%u/mem", root, pid);
	ck_assert_int_eq(unlink(path), 0);
	snprintf(path, sizeof(path), "%s/%u", root, pid);
	ck_assert_int_eq(rmdir(path), 0);
}

START_TEST(test_pysym_reuse)
{
	char root[PATH_MAX], name[512];
	uint32_t line, warm, hot;
	struct pysym *p;

	fake_root(root, sizeof(root));
	warm = fake_proc(root, 4545, "warm");
	ck_assert_int_eq(pysym__new(root, &p), 0);
	fx_named(p, 4545, warm, "warm (fx.py)");
	hot = fake_code(root, 4545, "hot", 9);
	ck_assert_uint_ne(warm, hot);
	for (int i = 0; i < 3; i++)
		fx_named(p, 4545, hot, "hot (fx.py)");
	/* a late sample of the freed one, then the new one's again */
	ck_assert_int_eq(pysym__name(p, 4545, 12, FX_CODE, 0, warm, name, sizeof(name), &line),
			 -ESTALE);
	fx_named(p, 4545, hot, "hot (fx.py)");
	ck_assert_uint_eq(pysym__held(p, 4545), 1);
	pysym__free(p);
	fx_gone(root, 4545);
	ck_assert_int_eq(rmdir(root), 0);
}
END_TEST

/* Many Python processes: the per-pid counts stay exact through slot
 * collisions (a later pid takes an earlier one's slot) and the table's
 * deletions. A pid's name is served with its files gone iff it holds a slot. */
START_TEST(test_pysym_drop_many)
{
	enum { NPROC = 3000, BASE = 100000 };
	char root[PATH_MAX], name[512], path[PATH_MAX + 32];
	static uint32_t ck[NPROC];
	uint32_t line, held = 0;
	struct pysym *p;

	fake_root(root, sizeof(root));
	for (uint32_t i = 0; i < NPROC; i++)
		ck[i] = fake_proc(root, BASE + i * 7, "M.f");
	ck_assert_int_eq(pysym__new(root, &p), 0);
	for (uint32_t i = 0; i < NPROC; i++)
		ck_assert_int_gt(pysym__name(p, BASE + i * 7, 12, FX_CODE, 0, ck[i], name,
					     sizeof(name), &line),
				 0);
	for (uint32_t i = 0; i < NPROC; i++) {
		snprintf(path, sizeof(path), "%s/%u/mem", root, BASE + i * 7);
		ck_assert_int_eq(unlink(path), 0);
		snprintf(path, sizeof(path), "%s/%u", root, BASE + i * 7);
		ck_assert_int_eq(rmdir(path), 0);
	}
	ck_assert_int_eq(rmdir(root), 0);
	for (uint32_t i = 0; i < NPROC; i += 2)
		pysym__drop_pid(p, BASE + i * 7);
	for (uint32_t i = 0; i < NPROC; i++) {
		uint32_t pid = BASE + i * 7, h = pysym__held(p, pid);
		int r = pysym__name(p, pid, 12, FX_CODE, 0, ck[i], name, sizeof(name), &line);

		ck_assert_uint_le(h, 1);
		if (i % 2 == 0)
			ck_assert_uint_eq(h, 0);
		ck_assert_msg((r > 0) == (h == 1), "pid %u: held %u, name %d", pid, h, r);
		held += h;
	}
	/* 1500 in 8192 slots, 4-way: most of them kept theirs */
	ck_assert_uint_gt(held, 1000);
	pysym__free(p);
}
END_TEST

/*
 * A process whose samples all run main() while capture's records bring new
 * code objects by the thousand (tests/workload/py_many.py): the one every
 * sample names stays cached, through 18,000 records of the same process at
 * addresses close to it, and is named after the process is gone. (With a
 * direct-mapped cache on a multiplicative hash's low bits, the process's
 * code objects shared 512 slots: main() went at the first of them to land on
 * its slot, and a sample after the exit said "process gone before naming".)
 */
START_TEST(test_pysym_flood)
{
	enum { ROUNDS = 300, PER = 60 };
	char root[PATH_MAX];
	struct pysym *p;
	uint32_t ck, ck_other;
	uint64_t k = 0;

	fake_root(root, sizeof(root));
	ck = fake_proc(root, 4646, "main");
	ck_other = fake_proc(root, 4747, "other");
	ck_assert_int_eq(pysym__new(root, &p), 0);
	fx_named(p, 4646, ck, "main (fx.py)");
	/* another process named since: 4646's /proc/PID/mem is not open */
	fx_named(p, 4747, ck_other, "other (fx.py)");
	fx_gone(root, 4646);
	fx_gone(root, 4747);
	ck_assert_int_eq(rmdir(root), 0);
	for (int r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < PER; i++) {
			struct pycode_info info = {
				.qualname = strdup("chain"),
				.filename = strdup("fx.py"),
				.firstlineno = 1,
				.check = 1,
			};

			ck_assert_ptr_nonnull(info.qualname);
			ck_assert_ptr_nonnull(info.filename);
			pysym__prime(p, 4646, FX_CODE + 16 * ++k, &info);
		}
		fx_named(p, 4646, ck, "main (fx.py)");
	}
	ck_assert_uint_eq(pysym__primed(p), ROUNDS * PER);
	pysym__free(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pysym");
	TCase *tc = tcase_create("pysym");
	bool any = false;

	for (size_t p = 0; p < sizeof(pythons) / sizeof(pythons[0]); p++)
		any = any || access(pythons[p].path, X_OK) == 0;
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pysym_drop);
	tcase_add_test(tc, test_pysym_drop_many);
	tcase_add_test(tc, test_pysym_reuse);
	tcase_add_test(tc, test_pysym_flood);
	if (any) {
		tcase_add_test(tc, test_pysym_lines);
		tcase_add_test(tc, test_pysym_live);
	} else {
		fprintf(stderr, "no CPython 3.10-3.13: the fixture test alone\n");
	}
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
