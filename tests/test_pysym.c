// SPDX-License-Identifier: MIT
/*
 * symd's Python frame names (symd/pysym.h) against real interpreters:
 *  - the line of every code unit of a few functions, from pysym__line() on
 *    the function's co_linetable, equals the interpreter's own co_lines(),
 *    for each CPython 3.10-3.13 the machine has;
 *  - a live Debian python3.11's method is named "K.m (<string>:LINE)" from
 *    its code object's address, and refused (-ESTALE) with another check word.
 * No interpreter at all: 77.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
		char script[] = "/tmp/cpa-pysym-XXXXXX", *out, *line, *save = NULL;
		uint8_t tab[65536];
		size_t n = 0;
		uint32_t first = 0;
		long units = 0, checked = 0;
		int fd, rc;

		if (access(pythons[p].path, X_OK) != 0)
			continue;
		fd = mkstemp(script);
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
 * unit 0's line, then waits on stdin. */
static const char live_py[] =
	"import sys\n"
	"class K:\n"
	"    def m(self):\n"
	"        return 1\n"
	"print(hex(id(K.m.__code__)), K.m.__code__.co_firstlineno, flush=True)\n"
	"sys.stdin.read()\n";

START_TEST(test_pysym_live)
{
	char *argv[] = {"/usr/bin/python3.11", "-c", (char *)live_py, NULL};
	int in[2], out[2], memfd, len;
	char buf[256], name[512], path[64];
	uint64_t code, ck;
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
	ck_assert_msg(sscanf(buf, "%" SCNx64 " %" SCNu32, &code, &first) == 2, "python said: %s",
		      buf);
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
	pysym__free(p);
	close(in[1]);
	close(out[0]);
	kill(pid, SIGKILL);
	wait_exit(pid, NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pysym");
	TCase *tc = tcase_create("pysym");
	bool any = false;

	for (size_t p = 0; p < sizeof(pythons) / sizeof(pythons[0]); p++)
		any = any || access(pythons[p].path, X_OK) == 0;
	if (!any) {
		fprintf(stderr, "skip: no CPython 3.10-3.13\n");
		return 77;
	}
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_pysym_lines);
	tcase_add_test(tc, test_pysym_live);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
