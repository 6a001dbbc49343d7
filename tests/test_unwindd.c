// SPDX-License-Identifier: MIT
/*
 * unwindd tests: /proc/PID/maps parsing (fixtures), build-id reading from a
 * binary compiled here, pc -> (module, file offset) against this process's
 * own maps (checked by reading the file bytes at the offset back), the maps
 * cache (throttle, exec, exit grace, cap), and the stage over real arena
 * rings: FRAMES/MODULE output, exactly-once, corrupt input, ring-full loss.
 * The last cases run build/bin/unwindd itself (drain and SIGTERM).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "shm/records.h"
#include "test_unwindd_util.h"
#include "test_util.h"
#include "unwindd/elfid.h"
#include "unwindd/procmaps.h"
#include "unwindd/ucache.h"
#include "unwindd/unwindd.h"

#define NEAR_WRAP (0ull - 3 * 4096 + 8) /* 8-aligned, crosses 2^64 in the first pages */
#define FIX_PID	  4242u

static const char *fixtures(void)
{
	static char dir[1024];
	const char *src = getenv("CPA_SOURCE_DIR");

	snprintf(dir, sizeof(dir), "%s/tests/fixtures/unwindd", src ? src : ".");
	return dir;
}

/* A /proc look-alike: proc/<pid>/maps files only. */
static const char *fixture_proc(void)
{
	static char dir[1100];

	snprintf(dir, sizeof(dir), "%s/proc", fixtures());
	return dir;
}

static const char *self_exe(void)
{
	static char path[1024];
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);

	ck_assert_int_gt(n, 0);
	path[n] = 0;
	return path;
}

static char *slurp(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	ck_assert_msg(f != NULL, "open %s", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = malloc((size_t)n + 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(fread(buf, 1, (size_t)n, f), n);
	fclose(f);
	*ret_len = (size_t)n;
	return buf;
}

static bool path_eq(const struct procmaps_entry *e, const char *s)
{
	return e->path_len == strlen(s) && memcmp(e->path, s, e->path_len) == 0;
}

/* Functions whose addresses the tests resolve. noinline + used: they exist
 * in .text of this executable with bytes we can compare against the file. */
int test_marker_fn(int x);
__attribute__((noinline, used)) int test_marker_fn(int x)
{
	return x * 3 + 1;
}

/* ---------------------------------------------------------------- maps */

START_TEST(test_maps_parse_fixture)
{
	char path[1100];
	struct procmaps_entry e[16];
	const char *pos, *end;
	size_t len;
	char *buf;
	int n = 0, bad = 0, r;

	snprintf(path, sizeof(path), "%s/maps_basic.txt", fixtures());
	buf = slurp(path, &len);
	pos = buf;
	end = buf + len;
	while ((r = procmaps__next(&pos, end, &e[n])) != 0) {
		if (r < 0) {
			bad++;
			continue;
		}
		ck_assert_int_lt(n, 15);
		n++;
	}
	ck_assert_int_eq(bad, 1);
	ck_assert_int_eq(n, 12);

	ck_assert_uint_eq(e[1].start, 0x55d0c8a02000ull);
	ck_assert_uint_eq(e[1].end, 0x55d0c8a07000ull);
	ck_assert_uint_eq(e[1].pgoff, 0x2000);
	ck_assert_uint_eq(e[1].ino, 1312);
	ck_assert_uint_eq(e[1].dev, makedev(0xfd, 0x01));
	ck_assert(e[1].exec && !e[0].exec);
	ck_assert_int_eq(e[1].kind, PROCMAPS_FILE);
	ck_assert(path_eq(&e[1], "/usr/bin/cat"));

	ck_assert_int_eq(e[3].kind, PROCMAPS_ANON); /* [heap] */
	ck_assert(e[4].exec);
	ck_assert_int_eq(e[4].kind, PROCMAPS_ANON); /* rwxp, no path: JIT */
	ck_assert_int_eq(e[4].path_len, 0);
	ck_assert_int_eq(e[5].kind, PROCMAPS_ANON); /* [anon:v8 jit] */
	ck_assert(path_eq(&e[5], "[anon:v8 jit]"));

	ck_assert_uint_eq(e[6].dev, makedev(0x103, 0x02));
	ck_assert_uint_eq(e[6].pgoff, 0x28000);
	ck_assert(path_eq(&e[6], "/usr/lib/x86_64-linux-gnu/libc.so.6"));

	/* Spaces in the path are kept, " (deleted)" is cut. */
	ck_assert(path_eq(&e[7], "/opt/my app/lib with space.so"));
	ck_assert(e[7].deleted);
	ck_assert_int_eq(e[7].kind, PROCMAPS_FILE);

	ck_assert_int_eq(e[8].kind, PROCMAPS_ANON); /* [stack] */
	ck_assert(!e[9].exec);			    /* [vvar] */
	ck_assert_int_eq(e[10].kind, PROCMAPS_VDSO);
	ck_assert(e[10].exec);
	/* Last line without '\n'. */
	ck_assert_int_eq(e[11].kind, PROCMAPS_VSYSCALL);
	ck_assert(e[11].exec);
	ck_assert_uint_eq(e[11].start, 0xffffffffff600000ull);
	free(buf);
}
END_TEST

START_TEST(test_maps_parse_hostile)
{
	static const char *const bad[] = {
		"",
		"-\n",
		"12345\n",
		"1000-0800 r-xp 0 fd:01 1 /x\n",      /* end < start */
		"1000-2000 r-x",		      /* truncated perms */
		"1000-2000 r-xp zz fd:01 1 /x\n",     /* bad offset */
		"11112222333344445-2 r-xp 0 0:0 0\n", /* 17 hex digits */
		"1000-2000 r-xp 0 fffff:01 1 /x\n",   /* major too large */
		"1000-2000 r-xp 0 fd:01 99999999999999999999999 /x\n",
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		const char *pos = bad[i], *end = bad[i] + strlen(bad[i]);
		struct procmaps_entry e;
		int r = procmaps__next(&pos, end, &e);

		ck_assert_msg(r <= 0, "line %u parsed", i);
		ck_assert(pos <= end);
		if (*bad[i])
			ck_assert_int_eq(r, -EBADMSG);
	}
}
END_TEST

/* ---------------------------------------------------------------- build-id */

/* The build-id readelf -n prints for path, as bytes; length or -1. */
static int readelf_build_id(const char *path, uint8_t *out, int max)
{
	char cmd[1200], line[512];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "readelf -n '%s' 2>/dev/null", path);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *s = strstr(line, "Build ID:");

		if (!s)
			continue;
		s += strlen("Build ID:");
		while (*s == ' ')
			s++;
		n = 0;
		while (n < max && s[0] && s[1] && s[0] != '\n') {
			unsigned int b;

			if (sscanf(s, "%2x", &b) != 1)
				break;
			out[n++] = (uint8_t)b;
			s += 2;
		}
		break;
	}
	pclose(p);
	return n;
}

START_TEST(test_build_id_compiled)
{
	char dir[PATH_MAX], src[PATH_MAX + 64], bin[PATH_MAX + 64], cmd[3 * PATH_MAX];
	uint8_t id[ELFID_MAX], want[ELFID_MAX];
	uint8_t len = 0;
	int fd, wn;
	FILE *f;

	ck_assert_int_eq(elfid__init(), 0);
	test_scratch_in(dir, sizeof(dir), "unw");
	snprintf(src, sizeof(src), "%s/tiny.c", dir);
	snprintf(bin, sizeof(bin), "%s/tiny", dir);
	f = fopen(src, "we");
	ck_assert_ptr_nonnull(f);
	fputs("int main(void) { return 0; }\n", f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "cc -O0 -Wl,--build-id=sha1 -o %s %s 2>/dev/null", bin, src);
	ck_assert_msg(system(cmd) == 0, "cc failed: %s", cmd);
	wn = readelf_build_id(bin, want, ELFID_MAX);
	ck_assert_int_eq(wn, 20);

	fd = open(bin, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elfid__from_fd(fd, id, &len), 0);
	ck_assert_int_eq(len, 20);
	ck_assert_mem_eq(id, want, 20);
	close(fd);

	/* No build-id at all: -ENOENT, not garbage. */
	snprintf(cmd, sizeof(cmd), "cc -O0 -Wl,--build-id=none -o %s %s 2>/dev/null", bin, src);
	ck_assert_int_eq(system(cmd), 0);
	fd = open(bin, O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(elfid__from_fd(fd, id, &len), -ENOENT);
	close(fd);

	/* Not ELF. */
	fd = open(src, O_RDONLY | O_CLOEXEC);
	ck_assert_int_eq(elfid__from_fd(fd, id, &len), -ENOEXEC);
	close(fd);

	test_rm_rf(dir);
}
END_TEST

START_TEST(test_build_id_self_and_vdso)
{
	uint8_t id[ELFID_MAX], want[ELFID_MAX];
	uint8_t len = 0;
	int fd, wn;

	ck_assert_int_eq(elfid__init(), 0);
	wn = readelf_build_id(self_exe(), want, ELFID_MAX);
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	if (wn > 0) {
		ck_assert_int_eq(elfid__from_fd(fd, id, &len), 0);
		ck_assert_int_eq(len, wn);
		ck_assert_mem_eq(id, want, (size_t)wn);
	}
	close(fd);

	/* The kernel's vDSO carries a build-id note too. */
	if (getauxval(AT_SYSINFO_EHDR)) {
		const void *img = (const void *)getauxval(AT_SYSINFO_EHDR);

		ck_assert_int_eq(elfid__from_mem(img, 2 * 4096, id, &len), 0);
		ck_assert_int_gt(len, 0);
	}
}
END_TEST

/* ---------------------------------------------------------------- ucache */

static struct ucache *cache_new(const char *root, uint64_t refresh_ns, struct shm_stage *st)
{
	struct ucache_opts o = {
		.refresh_ns = refresh_ns,
		.refresh_ip_ns = 10 * 1000000ull,
		.dead_grace_ns = 2 * NSEC_PER_SEC,
		.idle_ns = 300 * NSEC_PER_SEC,
		.proc_root = root,
		.st = st,
	};
	struct ucache *c = NULL;

	ck_assert_int_eq(ucache__new(&o, &c), 0);
	return c;
}

/* Read len bytes at offset of the file behind loc, as this process maps it. */
static void check_file_bytes(const struct uloc *l, uint64_t pc, size_t len)
{
	char path[128];
	uint8_t buf[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/self/map_files/%llx-%llx",
		 (unsigned long long)l->map->start, (unsigned long long)l->map->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(path, sizeof(path), "%s", l->bin->path);
		fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, (off_t)l->file_off), (ssize_t)len);
	ck_assert_mem_eq(buf, (const void *)(uintptr_t)pc, len);
	close(fd);
}

START_TEST(test_pc_to_offset_self)
{
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct ucache *c = cache_new("/proc", 100 * 1000000ull, NULL);
	struct uproc *p = ucache__proc(c, (uint32_t)getpid(), now);
	uint64_t pc_exe = (uint64_t)(uintptr_t)&test_marker_fn;
	uint64_t pc_libc = (uint64_t)(uintptr_t)&getpid;
	uint8_t want[ELFID_MAX];
	struct uloc l, l2;
	int wn;

	ck_assert_ptr_nonnull(p);
	/* Executable: offset such that the file bytes there are the code. */
	ck_assert_int_eq(ucache__find(c, p, pc_exe, now, &l), 0);
	ck_assert_ptr_nonnull(l.bin);
	ck_assert_uint_eq(l.file_off, pc_exe - l.map->start + l.map->pgoff);
	ck_assert_uint_eq(l.flags, 0);
	ck_assert_uint_gt(l.module_id, 0);
	ck_assert_ptr_nonnull(strstr(l.bin->path, "test_unwindd"));
	check_file_bytes(&l, pc_exe, 32);
	/* Identity read from the file matches readelf's view. */
	wn = readelf_build_id(self_exe(), want, ELFID_MAX);
	ck_assert(l.bin->identified);
	ck_assert_int_eq(l.bin->build_id_len, wn > 0 ? wn : 0);
	if (wn > 0)
		ck_assert_mem_eq(l.bin->build_id, want, (size_t)wn);
	ck_assert_uint_eq(l.bin->def_pid, (uint32_t)getpid());
	ck_assert_uint_eq(l.bin->def_start, l.map->start);

	/* libc: a different module with its own id. */
	ck_assert_int_eq(ucache__find(c, p, pc_libc, now, &l2), 0);
	ck_assert_ptr_nonnull(l2.bin);
	ck_assert_ptr_ne(l2.bin, l.bin);
	ck_assert_uint_ne(l2.module_id, l.module_id);
	ck_assert_ptr_nonnull(strstr(l2.bin->path, "libc"));
	ck_assert_int_gt(l2.bin->build_id_len, 0);
	check_file_bytes(&l2, pc_libc, 32);

	/* vDSO */
	if (getauxval(AT_SYSINFO_EHDR)) {
		uint64_t pc = getauxval(AT_SYSINFO_EHDR) + 0x100;

		ck_assert_int_eq(ucache__find(c, p, pc, now, &l), 0);
		ck_assert_uint_eq(l.flags, CPA_UF_VDSO);
		ck_assert_uint_eq(l.bin->mod_kind, CPA_MOD_VDSO);
		ck_assert_uint_eq(l.file_off, 0x100);
		ck_assert_int_gt(l.bin->build_id_len, 0);
	}

	/* A pc nowhere. */
	ck_assert_int_eq(ucache__find(c, p, 0x10, now, &l), -ENOENT);
	ucache__free(c);
}
END_TEST

START_TEST(test_refresh_throttle_and_anon)
{
	struct shm_stage st = {0};
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct ucache *c = cache_new("/proc", 3600 * NSEC_PER_SEC, &st);
	struct uproc *p = ucache__proc(c, (uint32_t)getpid(), now);
	uint64_t refreshes;
	struct uloc l;
	void *jit, *jit2;

	ck_assert_int_eq(ucache__find(c, p, (uint64_t)(uintptr_t)&test_marker_fn, now, &l), 0);
	refreshes = st.cnt[UNW_CNT_MAPS_REFRESH];
	ck_assert_uint_eq(refreshes, 1);

	/* New executable anonymous memory after the read: a miss, and the
	 * throttle keeps us from re-reading per sample. */
	jit = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(jit, MAP_FAILED);
	ck_assert_int_eq(ucache__find(c, p, (uint64_t)(uintptr_t)jit + 8, now + 1, &l), -ENOENT);
	ck_assert_int_eq(ucache__find(c, p, (uint64_t)(uintptr_t)jit + 8, now + 2, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], refreshes);
	/* An interrupted ip that misses: stale maps for sure, so only the
	 * short ip floor applies. */
	ck_assert_int_eq(ucache__find_ip(c, p, (uint64_t)(uintptr_t)jit + 8, now + 3, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], refreshes);
	ck_assert_int_eq(
		ucache__find_ip(c, p, (uint64_t)(uintptr_t)jit, now + NSEC_PER_SEC / 50, &l), 0);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], refreshes + 1);
	ck_assert_uint_eq(l.flags, CPA_UF_ANON);
	refreshes++;
	now += NSEC_PER_SEC / 50;

	/* More new code: a return address there waits for the long throttle ... */
	jit2 = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(jit2, MAP_FAILED);
	ck_assert_int_eq(ucache__find(c, p, (uint64_t)(uintptr_t)jit2 + 8, now + 1, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], refreshes);

	/* ... past it: re-read, and anon resolves as JIT. */
	ck_assert_int_eq(
		ucache__find(c, p, (uint64_t)(uintptr_t)jit2 + 8, now + 3601 * NSEC_PER_SEC, &l),
		0);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], refreshes + 1);
	ck_assert_ptr_null(l.bin);
	ck_assert_uint_eq(l.module_id, 0);
	ck_assert_uint_eq(l.flags, CPA_UF_ANON);
	ck_assert_uint_eq(l.file_off, (uint64_t)(uintptr_t)jit2 + 8);
	munmap(jit, 4096);
	munmap(jit2, 4096);
	ucache__free(c);
}
END_TEST

START_TEST(test_fixture_proc_exec_exit)
{
	struct shm_stage st = {0};
	struct ucache *c = cache_new(fixture_proc(), 100 * 1000000ull, &st);
	uint64_t now = 1000 * NSEC_PER_SEC;
	struct uproc *p = ucache__proc(c, FIX_PID, now);
	struct uloc l;
	uint32_t app_id;

	/* app: pc 0x401234 in the r-xp at 0x401000 with pgoff 0x1000. */
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now, &l), 0);
	ck_assert_uint_eq(l.file_off, 0x1234);
	ck_assert_str_eq(l.bin->path, "/opt/fix/app");
	ck_assert_uint_eq(l.bin->ino, 100);
	/* No such file: identity is path + dev/ino for now, retried later. */
	ck_assert(!l.bin->identified);
	ck_assert_int_eq(l.bin->build_id_len, 0);
	ck_assert_uint_gt(l.bin->ident_retry_ns, now);
	ck_assert_uint_eq(l.bin->def_pid, FIX_PID);
	app_id = l.module_id;
	ck_assert_int_eq(ucache__find(c, p, 0x7f1000400010ull, now, &l), 0);
	ck_assert_uint_eq(l.file_off, 0x4010);
	ck_assert_str_eq(l.bin->path, "/opt/fix/libtwo.so");
	ck_assert_int_eq(ucache__find(c, p, 0x7f0000000100ull, now, &l), 0);
	ck_assert_uint_eq(l.flags, CPA_UF_ANON);
	ck_assert_int_eq(ucache__find(c, p, 0xffffffffff600400ull, now, &l), 0);
	ck_assert_uint_eq(l.flags, CPA_UF_ANON);
	ck_assert_uint_eq(l.file_off, 0xffffffffff600400ull);
	ck_assert_str_eq(l.bin->path, "[vsyscall]");
	ck_assert_int_eq(ucache__find(c, p, 0x7ffff7fc1010ull, now, &l), 0);
	ck_assert_uint_eq(l.flags, CPA_UF_VDSO);
	ck_assert_uint_eq(l.file_off, 0x10);

	/* A second process mapping the same (dev, ino): the same module. */
	{
		struct uproc *q = ucache__proc(c, 4343, now);

		ck_assert_int_eq(ucache__find(c, q, 0x400100, now, &l), 0);
		ck_assert_uint_eq(l.module_id, app_id);
		ck_assert_uint_eq(l.file_off, 0x100);
		ck_assert_int_eq(ucache__nr_bins(c), 3);
	}

	/* exec: maps forgotten, re-read at once (no throttle). */
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 2);
	ucache__task_exec(c, FIX_PID, 0);
	ck_assert_int_eq(p->n_maps, 0);
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now + 1, &l), 0);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);

	/* exit: still resolves inside the grace period, never re-read, then gone. */
	ucache__task_exit(c, FIX_PID, now + 10, now + 10);
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now + 20, &l), 0);
	ck_assert_int_eq(ucache__find(c, p, 0x999999, now + 10 * NSEC_PER_SEC, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);
	ucache__sweep(c, now + NSEC_PER_SEC);
	ck_assert_ptr_nonnull(ucache__proc_peek(c, FIX_PID));
	ucache__sweep(c, now + 3 * NSEC_PER_SEC);
	ck_assert_ptr_null(ucache__proc_peek(c, FIX_PID));
	ck_assert_ptr_nonnull(ucache__proc_peek(c, 4343));

	/* A pid with no maps file: counted, throttled. */
	p = ucache__proc(c, 999999, now);
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_FAIL], 1);
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now + 1, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_FAIL], 1);
	ucache__free(c);
}
END_TEST

#define MS (NSEC_PER_SEC / 1000)

/* A pc that missed a read does not cause another one: not for the same page,
 * not as an interrupted ip, not within the same batch; a process whose reads
 * keep missing is re-read less and less often; exec starts over. */
START_TEST(test_neg_cache_known_missing)
{
	struct shm_stage st = {0};
	struct ucache *c = cache_new(fixture_proc(), 100 * MS, &st);
	uint64_t now = 1000 * NSEC_PER_SEC, t;
	struct uproc *p = ucache__proc(c, FIX_PID, now);
	struct uloc l;

	ck_assert_int_eq(ucache__find(c, p, 0x401234, now, &l), 0);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 1);

	/* Unknown pc past the throttle: one read, still missing. */
	t = now + 200 * MS;
	ck_assert_int_eq(ucache__find(c, p, 0x10000000, t, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 2);
	ck_assert_uint_eq(p->n_neg, 1);
	ck_assert_uint_eq(p->miss_level, 1);
	/* Known missing: no read, however late, whatever the offset in the page. */
	ck_assert_int_eq(ucache__find(c, p, 0x10000000, t + 10 * NSEC_PER_SEC, &l), -ENOENT);
	ck_assert_int_eq(ucache__find(c, p, 0x10000ff8, t + 11 * NSEC_PER_SEC, &l), -ENOENT);
	ck_assert_int_eq(ucache__find_ip(c, p, 0x10000010, t + 12 * NSEC_PER_SEC, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 2);

	/* Another unknown pc: the throttle has doubled (200 ms) ... */
	ck_assert_int_eq(ucache__find(c, p, 0x20000000, t + 150 * MS, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 2);
	/* ... past it, a read (still missing: 400 ms next). */
	t += 13 * NSEC_PER_SEC;
	ck_assert_int_eq(ucache__find(c, p, 0x20000000, t, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);
	ck_assert_uint_eq(p->miss_level, 2);
	ck_assert_int_eq(ucache__find(c, p, 0x30000000, t + 300 * MS, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);
	/* A miss in the batch that read the maps is as good as a read. */
	ck_assert_int_eq(ucache__find(c, p, 0x40000000, t, &l), -ENOENT);
	ck_assert_int_eq(ucache__find(c, p, 0x40000000, t + 10 * NSEC_PER_SEC, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);
	ck_assert_uint_eq(p->n_neg, 3);
	/* Mapped pcs still resolve without reads. */
	ck_assert_int_eq(ucache__find(c, p, 0x7f1000400010ull, t + 10 * NSEC_PER_SEC, &l), 0);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);

	/* The knowledge ages: past neg_ttl (30 s) a known page is read again. */
	ck_assert_int_eq(ucache__find(c, p, 0x10000000, t + 31 * NSEC_PER_SEC, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 4);

	/* exec: a new address space, nothing known, no backoff. */
	t += 40 * NSEC_PER_SEC;
	ucache__task_exec(c, FIX_PID, 0);
	ck_assert_uint_eq(p->n_neg, 0);
	ck_assert_uint_eq(p->miss_level, 0);
	ck_assert_int_eq(ucache__find(c, p, 0x10000000, t, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 5);
	ck_assert_int_eq(ucache__find(c, p, 0x10000000, t + 10 * NSEC_PER_SEC, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 5);
	ucache__free(c);
}
END_TEST

static void write_maps(const char *dir, const char *text)
{
	char path[PATH_MAX + 16];
	FILE *f;

	snprintf(path, sizeof(path), "%s/7/maps", dir);
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

/*
 * A process in another root (a container) names its debug file by build-id
 * under its /usr/lib/debug; whatever it put there must not stop unwindd. A
 * FIFO there: open(O_RDONLY) waits for a writer that never comes. The call
 * runs in a child under a 20 s alarm (a regular-file check returns at once).
 */
START_TEST(test_cfi_debug_fifo_in_root)
{
	char dir[512], path[4096], maps[512];
	uint8_t bid[ELFID_MAX], n = 0;
	struct stat sb;
	int status, fd;
	pid_t c;

	ck_assert_int_eq(elfid__init(), 0);
	test_scratch_in(dir, sizeof(dir), "unw-fifo");
	snprintf(path, sizeof(path), "%s/7", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "mkdir -p %s/7/root/bin && cp /bin/true %s/7/root/bin/x", dir,
		 dir);
	ck_assert_int_eq(system(path), 0);
	snprintf(path, sizeof(path), "%s/7/root/bin/x", dir);
	ck_assert_int_eq(stat(path, &sb), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elfid__from_fd(fd, bid, &n), 0);
	close(fd);
	ck_assert_uint_ge(n, 2);
	snprintf(maps, sizeof(maps), "00400000-00500000 r-xp 00000000 fd:01 %llu /bin/x\n",
		 (unsigned long long)sb.st_ino);
	write_maps(dir, maps);
	{
		int k = snprintf(
			path, sizeof(path),
			"mkdir -p %s/7/root/usr/lib/debug/.build-id/%02x && mkfifo %s/7/root/usr/lib/debug/.build-id/%02x/",
			dir, bid[0], dir, bid[0]);

		for (unsigned int i = 1; i < n; i++)
			k += snprintf(path + k, sizeof(path) - (size_t)k, "%02x", bid[i]);
		snprintf(path + k, sizeof(path) - (size_t)k, ".debug");
	}
	ck_assert_int_eq(system(path), 0);
	c = fork();
	ck_assert_int_ge(c, 0);
	if (c == 0) {
		uint64_t now = 1000 * NSEC_PER_SEC;
		struct ucache *uc = cache_new(dir, NSEC_PER_SEC, NULL);
		struct uproc *p = ucache__proc(uc, 7, now);
		struct uloc l;

		signal(SIGALRM, SIG_DFL); /* not check's: it kills the group */
		alarm(20);
		if (ucache__find(uc, p, 0x400100, now, &l) != 0 || !l.bin)
			_exit(3);
		p->last_use = now;
		(void)ucache__cfi(uc, p, &l);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(c, &status, 0), c);
	ck_assert_msg(!WIFSIGNALED(status),
		      "ucache__cfi() hung on the container's FIFO (signal %d)",
		      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	test_rm_rf(dir);
}
END_TEST

/* A library mapped after our read is found: a miss on a pc not known to be
 * missing re-reads once the throttle allows, and a known-missing page that
 * got mapped since is found after any later read. */
START_TEST(test_neg_cache_new_library)
{
	static const char app[] = "00401000-00480000 r-xp 00001000 fd:01 100 /opt/fix/app\n";
	static const char more[] =
		"00401000-00480000 r-xp 00001000 fd:01 100 /opt/fix/app\n"
		"7f1000400000-7f1000500000 r-xp 00004000 fd:01 300 /opt/fix/libtwo.so\n"
		"7f3000000000-7f3000100000 r-xp 00000000 fd:01 400 /opt/fix/libnew.so\n";
	char dir[PATH_MAX], path[PATH_MAX + 8];
	struct shm_stage st = {0};
	uint64_t now = 1000 * NSEC_PER_SEC;
	struct ucache *c;
	struct uproc *p;
	struct uloc l;

	test_scratch_in(dir, sizeof(dir), "unw-neg");
	snprintf(path, sizeof(path), "%s/7", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	write_maps(dir, app);
	c = cache_new(dir, 100 * MS, &st);
	p = ucache__proc(c, 7, now);

	ck_assert_int_eq(ucache__find(c, p, 0x401234, now, &l), 0);
	ck_assert_int_eq(ucache__find(c, p, 0x7f1000400010ull, now + 200 * MS, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 2);
	ck_assert_uint_eq(p->miss_level, 1);

	write_maps(dir, more);
	/* Known missing since the last read: still no read. */
	ck_assert_int_eq(ucache__find(c, p, 0x7f1000400010ull, now + 300 * MS, &l), -ENOENT);
	/* New pc, but inside the (doubled) throttle: no read yet ... */
	ck_assert_int_eq(ucache__find(c, p, 0x7f3000000010ull, now + 300 * MS, &l), -ENOENT);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 2);
	/* ... after it: read, found, backoff over. */
	ck_assert_int_eq(ucache__find(c, p, 0x7f3000000010ull, now + 400 * MS, &l), 0);
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);
	ck_assert_str_eq(l.bin->path, "/opt/fix/libnew.so");
	ck_assert_uint_eq(l.file_off, 0x10);
	ck_assert_uint_eq(p->miss_level, 0);
	/* The read dropped the page that is mapped now from the missing ones. */
	ck_assert_uint_eq(p->n_neg, 0);
	ck_assert_int_eq(ucache__find(c, p, 0x7f1000400010ull, now + 400 * MS, &l), 0);
	ck_assert_str_eq(l.bin->path, "/opt/fix/libtwo.so");
	ck_assert_uint_eq(st.cnt[UNW_CNT_MAPS_REFRESH], 3);
	ucache__free(c);
	test_rm_rf(dir);
}
END_TEST

/* A binary first seen in a process that is already gone (its /proc entry
 * cannot open the file, and the path does not exist in our own root either:
 * another mount namespace) is identified later from a live one, and its
 * definition is marked for re-sending. */
START_TEST(test_identify_retry_from_live_process)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], line[1400], cmd[3 * PATH_MAX], prog[PATH_MAX + 64];
	const char *exe = self_exe();
	uint8_t want[ELFID_MAX];
	uint64_t now = 1000 * NSEC_PER_SEC;
	struct ucache *c;
	struct uproc *p;
	struct stat sb;
	struct uloc l;
	struct ubin *b;
	int i, wn;
	FILE *f;

	test_scratch_in(dir, sizeof(dir), "unw-proc");
	/* The program as pid 2's root shows it, at a path ours does not have. */
	snprintf(path, sizeof(path), "%s/rootfs", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(prog, sizeof(prog), "%s/rootfs/cpa-unw-prog", dir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", exe, prog);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(stat(prog, &sb), 0);
	snprintf(line, sizeof(line), "400000-500000 r-xp 00000000 %02x:%02x %llu %s\n",
		 major(sb.st_dev), minor(sb.st_dev), (unsigned long long)sb.st_ino,
		 "/cpa-unw-prog");
	for (i = 1; i <= 2; i++) {
		snprintf(path, sizeof(path), "%s/%d", dir, i);
		ck_assert_int_eq(mkdir(path, 0700), 0);
		snprintf(path, sizeof(path), "%s/%d/maps", dir, i);
		f = fopen(path, "we");
		ck_assert_ptr_nonnull(f);
		fputs(line, f);
		fclose(f);
	}
	/* pid 2 is "alive": its root/ shows its file system. */
	snprintf(path, sizeof(path), "%s/2/root", dir);
	snprintf(cmd, sizeof(cmd), "%s/rootfs", dir);
	ck_assert_int_eq(symlink(cmd, path), 0);

	c = cache_new(dir, 100 * 1000000ull, NULL);
	p = ucache__proc(c, 1, now);
	ck_assert_int_eq(ucache__find(c, p, 0x400010, now, &l), 0);
	b = l.bin;
	ck_assert(!b->identified);
	b->def_sent = true; /* as if the partial definition went out */

	p = ucache__proc(c, 2, now);
	ck_assert_int_eq(ucache__find(c, p, 0x400010, now + 1, &l), 0);
	ck_assert(!b->identified); /* not before the retry time */
	ck_assert_int_eq(ucache__find(c, p, 0x400010, now + 2 * NSEC_PER_SEC, &l), 0);
	ck_assert(b->identified);
	ck_assert(!b->def_sent);
	ck_assert_uint_eq(b->def_pid, 2);
	wn = readelf_build_id(prog, want, ELFID_MAX);
	if (wn > 0) {
		ck_assert_int_eq(b->build_id_len, wn);
		ck_assert_mem_eq(b->build_id, want, (size_t)wn);
	}
	ucache__free(c);
	test_rm_rf(dir);
}
END_TEST

START_TEST(test_cache_cap_live)
{
	struct shm_stage st = {0};
	struct ucache *c = cache_new(fixture_proc(), 1, &st); /* no cap yet */
	uint64_t now = 1000 * NSEC_PER_SEC;
	struct uproc *p;
	struct uloc l;

	p = ucache__proc(c, FIX_PID, now);
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now, &l), 0);
	ck_assert_int_eq(ucache__nr_bins(c), 3);
	/* Under 1 GiB: nothing to do. */
	ucache__set_max_bytes(c, 1ull << 30);
	ck_assert_int_eq(ucache__nr_procs(c), 1);
	/* cpa ctl mem: a cap under what is held evicts at once, no sweep needed. */
	ucache__set_max_bytes(c, 1);
	ck_assert_int_eq(ucache__nr_procs(c), 0);
	ck_assert_int_eq(ucache__nr_bins(c), 0);
	ck_assert_uint_ge(st.cnt[UNW_CNT_CACHE_EVICT], 3);
	/* Still usable: the process is read again on its next sample. */
	p = ucache__proc(c, FIX_PID, now + 2);
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now + 2, &l), 0);
	ucache__free(c);
}
END_TEST

START_TEST(test_cache_cap_evicts)
{
	struct shm_stage st = {0};
	struct ucache_opts o = {
		.max_bytes = 1, /* everything evictable goes */
		.refresh_ns = 1,
		.dead_grace_ns = NSEC_PER_SEC,
		.idle_ns = 300 * NSEC_PER_SEC,
		.proc_root = fixture_proc(),
		.st = &st,
	};
	struct ucache *c = NULL;
	uint64_t now = 1000 * NSEC_PER_SEC;
	struct uproc *p;
	struct uloc l;

	ck_assert_int_eq(ucache__new(&o, &c), 0);
	p = ucache__proc(c, FIX_PID, now);
	ck_assert_int_eq(ucache__find(c, p, 0x401234, now, &l), 0);
	ck_assert_int_eq(ucache__nr_bins(c), 3);
	/* Referenced binaries stay while their process is cached ... */
	ucache__task_exit(c, FIX_PID, now, now);
	ucache__sweep(c, now + 2 * NSEC_PER_SEC);
	/* ... and once it is gone, nothing refers to them: evicted. */
	ck_assert_int_eq(ucache__nr_procs(c), 0);
	ck_assert_int_eq(ucache__nr_bins(c), 0);
	ck_assert_uint_ge(st.cnt[UNW_CNT_CACHE_EVICT], 3);

	/* Over the cap with live processes: idle ones are dropped, re-read later. */
	p = ucache__proc(c, 4343, now);
	ck_assert_int_eq(ucache__find(c, p, 0x400100, now, &l), 0);
	ucache__sweep(c, now + 1);
	ck_assert_int_eq(ucache__nr_procs(c), 0);
	ck_assert_int_eq(ucache__nr_bins(c), 0);
	ucache__free(c);
}
END_TEST

/* ---------------------------------------------------------------- stage */

static void env_init(struct env *e, uint64_t out_size, const char *proc_root)
{
	env_arena(e, out_size, NEAR_WRAP);
	env_start(e, &(struct unwindd_opts){.proc_root = proc_root});
}

static uint64_t push_sample(struct env *e, uint64_t seq, uint32_t pid, uint16_t flags,
			    const uint64_t *ufp, unsigned int n_ufp, const uint64_t *k,
			    unsigned int n_k, const void *stack, uint32_t stack_len)
{
	uint32_t len = (uint32_t)(sizeof(struct cpa_sample) + 8 * (n_ufp + n_k) + stack_len);
	struct cpa_sample *s;
	uint8_t *p;

	ck_assert_int_eq(shm_ring__reserve_sp(&e->cap, len, CPA_REC_SAMPLE, (void **)&s), 0);
	memset(s, 0, sizeof(*s));
	s->seq = seq;
	s->time_ns = 1234567;
	s->weight = 1;
	s->pid = pid;
	s->tid = pid;
	s->cpu = 1;
	s->kind = CPA_KIND_ONCPU;
	s->flags = flags;
	snprintf(s->comm, sizeof(s->comm), "worker");
	snprintf(s->pcomm, sizeof(s->pcomm), "app");
	if (n_ufp)
		s->regs.ip = ufp[0];
	s->n_kstack = (uint16_t)n_k;
	s->n_ufp = (uint16_t)n_ufp;
	s->stack_len = stack_len;
	p = (uint8_t *)(s + 1);
	if (n_k)
		memcpy(p, k, 8 * n_k);
	if (n_ufp)
		memcpy(p + 8 * n_k, ufp, 8 * n_ufp);
	if (stack_len)
		memcpy(p + 8 * (n_k + n_ufp), stack, stack_len);
	shm_ring__commit_sp(&e->cap);
	return seq;
}

static void push_raw(struct env *e, uint16_t type, const void *data, uint32_t len)
{
	void *d;

	ck_assert_int_eq(shm_ring__reserve_sp(&e->cap, len, type, &d), 0);
	memcpy(d, data, len);
	shm_ring__commit_sp(&e->cap);
}

static const struct cpa_module_def *find_module(struct outrec *recs, int n, uint32_t id)
{
	int i;

	for (i = 0; i < n; i++) {
		const struct cpa_module_def *m = (const void *)recs[i].data;

		if (recs[i].type == CPA_REC_MODULE && m->id == id)
			return m;
	}
	return NULL;
}

START_TEST(test_stage_frames_and_modules)
{
	static struct outrec recs[64];
	struct env e;
	uint64_t ufp[3] = {
		(uint64_t)(uintptr_t)&test_marker_fn + 4,
		(uint64_t)(uintptr_t)&getpid + 2,
		(uint64_t)(uintptr_t)&test_marker_fn + 8,
	};
	uint64_t k[2] = {0xffffffff81000010ull, 0xffffffff81000020ull};
	const struct cpa_frames *f;
	const struct cpa_uframe *uf;
	const struct cpa_module_def *m0, *m1;
	int n, i, frames_at = -1, n_mod = 0;
	pid_t me = getpid();

	env_init(&e, 1u << 16, "/proc");
	push_sample(&e, e.seq, (uint32_t)me, CPA_SF_USER_REGS, ufp, 3, k, 2, NULL, 0);
	ck_assert_int_eq(run_all(&e), 1);
	n = pull_all(&e, recs, 64);

	/* DICT_RESET first, with our epoch. */
	ck_assert_int_ge(n, 4);
	ck_assert_int_eq(recs[0].type, CPA_REC_DICT_RESET);
	ck_assert_uint_eq(((const struct cpa_dict_reset *)recs[0].data)->epoch, 7);
	for (i = 1; i < n; i++) {
		if (recs[i].type == CPA_REC_MODULE) {
			ck_assert_int_eq(frames_at, -1); /* defs before their first use */
			ck_assert(cpa_rec_module_ok((const void *)recs[i].data, recs[i].len));
			n_mod++;
		} else if (recs[i].type == CPA_REC_FRAMES) {
			frames_at = i;
		}
	}
	ck_assert_int_eq(n_mod, 2);
	ck_assert_int_ge(frames_at, 0);
	f = (const void *)recs[frames_at].data;
	ck_assert(cpa_rec_frames_ok(f, recs[frames_at].len));
	ck_assert_uint_eq(f->seq, e.seq);
	ck_assert_uint_eq(f->pid, (uint32_t)me);
	ck_assert_str_eq(f->comm, "worker");
	ck_assert_uint_eq(f->n_kframes, 2);
	ck_assert_uint_eq(f->n_uframes, 3);
	ck_assert_uint_eq(f->stop_reason, CPA_STOP_FP);
	ck_assert_mem_eq(f + 1, k, sizeof(k));
	uf = (const void *)((const uint8_t *)(f + 1) + sizeof(k));
	ck_assert_uint_eq(uf[0].pc, ufp[0]);
	ck_assert_uint_eq(uf[0].flags, CPA_UF_LEAF);
	ck_assert_uint_eq(uf[1].flags, CPA_UF_FP);
	ck_assert_uint_eq(uf[2].flags, CPA_UF_FP);
	ck_assert_uint_eq(uf[0].module_id, uf[2].module_id);
	ck_assert_uint_ne(uf[0].module_id, uf[1].module_id);
	ck_assert_uint_eq(uf[2].offset - uf[0].offset, 4);

	m0 = find_module(recs, n, uf[0].module_id);
	m1 = find_module(recs, n, uf[1].module_id);
	ck_assert_ptr_nonnull(m0);
	ck_assert_ptr_nonnull(m1);
	ck_assert_uint_eq(m0->kind, CPA_MOD_FILE);
	ck_assert_uint_eq(m0->pid, (uint32_t)me);
	ck_assert_uint_le(m0->map_start, ufp[0]);
	ck_assert_uint_gt(m0->map_end, ufp[0]);
	ck_assert_ptr_nonnull(memmem(m0 + 1, m0->path_len, "test_unwindd", 12));
	ck_assert_ptr_nonnull(memmem(m1 + 1, m1->path_len, "libc", 4));
	ck_assert_int_gt(m1->build_id_len, 0);

	/* The same modules again: no new definitions. */
	push_sample(&e, e.seq + 1, (uint32_t)me, CPA_SF_USER_REGS, ufp, 3, k, 2, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 64);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(recs[0].type, CPA_REC_FRAMES);

	ck_assert_uint_eq(shm_stage__cnt(e.st, SHM_CNT_IN), 2);
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_FRAMES), 6);
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_MODULES), 2);
	ck_assert_uint_eq(shm_ring__mark_sc(&e.in), e.seq + 1);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_kernel_only_and_unmapped)
{
	static struct outrec recs[16];
	uint64_t k[1] = {0xffffffff81000010ull};
	uint64_t bad[2] = {0x10, 0x20};
	const struct cpa_frames *f;
	const struct cpa_uframe *uf;
	struct env e;
	int n;

	env_init(&e, 1u << 16, "/proc");
	/* Kernel thread: no user part, no maps read. */
	push_sample(&e, e.seq, 2, CPA_SF_KERNEL_THREAD, NULL, 0, k, 1, NULL, 0);
	/* User pc in no mapping: an [unknown] leaf, partial. */
	push_sample(&e, e.seq + 1, (uint32_t)getpid(), CPA_SF_USER_REGS, bad, 2, k, 1, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 16);
	ck_assert_int_eq(n, 3);
	f = (const void *)recs[1].data;
	ck_assert_uint_eq(f->n_uframes, 0);
	ck_assert_uint_eq(f->stop_reason, CPA_STOP_NONE);
	ck_assert_ptr_null(ucache__proc_peek(unwindd__cache(e.u), 2));
	f = (const void *)recs[2].data;
	ck_assert_uint_eq(f->n_uframes, 1);
	ck_assert_uint_eq(f->stop_reason, CPA_STOP_NO_MAP);
	ck_assert(f->flags & CPA_SF_UNWIND_PARTIAL);
	uf = (const void *)((const uint8_t *)(f + 1) + 8);
	ck_assert_uint_eq(uf[0].module_id, 0);
	ck_assert_uint_eq(uf[0].offset, 0x10);
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_STOP_NO_MAP), 1);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_task_and_loss_forwarded)
{
	static struct outrec recs[16];
	struct cpa_task_event t = {0};
	struct cpa_loss l = {0};
	uint64_t ufp[1] = {0x401234};
	struct env e;
	int n;

	env_init(&e, 1u << 16, fixture_proc());
	push_sample(&e, e.seq, FIX_PID, CPA_SF_USER_REGS, ufp, 1, NULL, 0, NULL, 0);
	l.seq = e.seq + 1;
	l.count = 5;
	l.weight = 5;
	l.stage = SHM_STAGE_CAPTURE;
	l.reason = CAP_CNT_BPF_RB_LOST;
	push_raw(&e, CPA_REC_LOSS, &l, sizeof(l));
	t.seq = e.seq + 2;
	t.pid = FIX_PID;
	t.tid = FIX_PID + 7; /* the last thread to leave need not be the leader */
	t.kind = CPA_TASK_EXIT;
	push_raw(&e, CPA_REC_TASK, &t, sizeof(t));
	/* Queued before the exit was seen downstream: still resolved. */
	push_sample(&e, e.seq + 3, FIX_PID, CPA_SF_USER_REGS, ufp, 1, NULL, 0, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 16);
	/* RESET, MODULE, FRAMES, LOSS, TASK, FRAMES */
	ck_assert_int_eq(n, 6);
	ck_assert_int_eq(recs[1].type, CPA_REC_MODULE);
	ck_assert_int_eq(recs[3].type, CPA_REC_LOSS);
	ck_assert_uint_eq(recs[3].len, sizeof(l));
	ck_assert_mem_eq(recs[3].data, &l, sizeof(l));
	ck_assert_int_eq(recs[4].type, CPA_REC_TASK);
	ck_assert_mem_eq(recs[4].data, &t, sizeof(t));
	ck_assert_int_eq(recs[5].type, CPA_REC_FRAMES);
	ck_assert_uint_eq(((const struct cpa_frames *)recs[5].data)->n_uframes, 1);
	ck_assert_uint_eq(
		((const struct cpa_uframe *)(recs[5].data + sizeof(struct cpa_frames)))->offset,
		0x1234);
	/* Reaped after the grace period. */
	ck_assert_ptr_nonnull(ucache__proc_peek(unwindd__cache(e.u), FIX_PID));
	unwindd__tick(e.u, clock_ns(CLOCK_MONOTONIC) + 10 * NSEC_PER_SEC);
	ck_assert_ptr_null(ucache__proc_peek(unwindd__cache(e.u), FIX_PID));
	ck_assert_uint_gt(shm_stage__cnt(e.st, UNW_CNT_CACHE_BYTES), 0);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_regs_without_chain)
{
	static struct outrec recs[8];
	struct cpa_sample s = {0};
	const struct cpa_frames *f;
	const struct cpa_uframe *uf;
	struct env e;

	env_init(&e, 1u << 16, fixture_proc());
	s.seq = e.seq;
	s.pid = FIX_PID;
	s.tid = FIX_PID;
	s.flags = CPA_SF_USER_REGS;
	s.regs.ip = 0x401234;
	push_raw(&e, CPA_REC_SAMPLE, &s, sizeof(s));
	run_all(&e);
	ck_assert_int_eq(pull_all(&e, recs, 8), 3); /* RESET, MODULE, FRAMES */
	f = (const void *)recs[2].data;
	ck_assert_uint_eq(f->n_uframes, 1);
	uf = (const void *)(f + 1);
	ck_assert_uint_eq(uf[0].offset, 0x1234);
	ck_assert_uint_eq(uf[0].flags, CPA_UF_LEAF);
	env_free(&e);
}
END_TEST

/* Module ids are never reused in an epoch, so cache churn grows them; before
 * they pass the limit a new epoch starts, with the cached binaries
 * renumbered from 1 and defined again. */
START_TEST(test_stage_module_id_rollover)
{
	static struct outrec recs[32];
	uint64_t a[3] = {0x401234, 0x7f1000000010ull, 0x7f1000400010ull};
	struct unwindd_opts o = {
		.epoch = 5ull << 32,
		.max_module_id = 10,
		.max_cache_bytes = 1, /* every sweep evicts everything */
	};
	const struct cpa_frames *f;
	const struct cpa_uframe *uf;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);
	struct env e;
	int i, n, k;

	env_arena(&e, 1u << 16, NEAR_WRAP);
	o.proc_root = fixture_proc();
	ck_assert_int_eq(shm_arena__open_cons(e.a, SHM_RING_CAPTURE, &e.in), 0);
	ck_assert_int_eq(shm_arena__open_prod(e.a, SHM_RING_UNWIND, &e.out), 0);
	ck_assert_int_eq(unwindd__new(&o, &e.in, &e.out, e.st, &e.u), 0);

	/* vdso = 1, vsyscall = 2; each round brings app, libone, libtwo anew. */
	for (k = 0; k < 3; k++) {
		push_sample(&e, e.seq + (uint64_t)k, FIX_PID, 0, a, 3, NULL, 0, NULL, 0);
		run_all(&e);
		n = pull_all(&e, recs, 32);
		ck_assert_int_eq(n, k == 0 ? 5 : 4);
		ck_assert_int_eq(recs[n - 1].type, CPA_REC_FRAMES);
		f = (const void *)recs[n - 1].data;
		uf = (const void *)(f + 1);
		ck_assert_uint_eq(uf[0].module_id, 3 + 3 * (uint32_t)k);
		unwindd__tick(e.u, now + (uint64_t)(k + 1) * NSEC_PER_SEC);
		ck_assert_int_eq(ucache__nr_bins(unwindd__cache(e.u)), 0);
	}
	/* ids 9..11 were handed out: past 10, so the next batch starts epoch + 1. */
	push_sample(&e, e.seq + 3, FIX_PID, 0, a, 3, NULL, 0, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 32);
	ck_assert_int_eq(n, 5); /* RESET, 3 x MODULE, FRAMES */
	ck_assert_int_eq(recs[0].type, CPA_REC_DICT_RESET);
	ck_assert_uint_eq(((const struct cpa_dict_reset *)recs[0].data)->epoch, (5ull << 32) + 1);
	f = (const void *)recs[4].data;
	uf = (const void *)(f + 1);
	for (i = 0; i < 3; i++) {
		const struct cpa_module_def *m = (const void *)recs[1 + i].data;

		ck_assert_int_eq(recs[1 + i].type, CPA_REC_MODULE);
		ck_assert_uint_eq(uf[i].module_id, m->id);
		ck_assert_uint_le(m->id, 5);
	}
	env_free(&e);
}
END_TEST

/* main() reads its clock before the batch and ticks with it afterwards: a
 * process the batch just used must survive that tick (it once looked 2^64 ns
 * idle, so every batch re-read its maps), and so must a fresh exit's grace. */
START_TEST(test_stage_tick_clock_before_batch)
{
	static struct outrec recs[16];
	uint64_t ufp[1] = {0x401234};
	uint64_t before;
	struct env e;

	env_init(&e, 1u << 16, fixture_proc());
	before = clock_ns(CLOCK_MONOTONIC);
	push_sample(&e, e.seq + 1, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	run_all(&e);
	(void)pull_all(&e, recs, 16);
	ck_assert_uint_eq(e.st->cnt[UNW_CNT_MAPS_REFRESH], 1);
	unwindd__tick(e.u, before);
	ck_assert_ptr_nonnull(ucache__proc_peek(unwindd__cache(e.u), FIX_PID));
	unwindd__sweep_next_tick(e.u); /* sweep again on the next tick */
	ucache__task_exit(unwindd__cache(e.u), FIX_PID, unwindd__now(e.u), unwindd__now(e.u));
	unwindd__tick(e.u, before);
	ck_assert_ptr_nonnull(ucache__proc_peek(unwindd__cache(e.u), FIX_PID));

	push_sample(&e, e.seq + 2, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	run_all(&e);
	ck_assert_int_eq(pull_all(&e, recs, 16), 1);
	ck_assert_uint_eq(e.st->cnt[UNW_CNT_MAPS_REFRESH], 1);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_exactly_once)
{
	static struct outrec recs[16];
	uint64_t ufp[1] = {0x401234};
	struct shm_ring_cons c0;
	struct env e;
	uint64_t mark;
	int n, i, frames = 0;

	env_arena(&e, 1u << 16, NEAR_WRAP);
	mark = e.seq + 10;
	/* A previous unwindd passed on everything up to mark. */
	ck_assert_int_eq(shm_arena__open_cons(e.a, SHM_RING_CAPTURE, &c0), 0);
	shm_ring__release_mark_sc(&c0, mark);
	env_start(&e, &(struct unwindd_opts){.proc_root = fixture_proc()});
	ck_assert_uint_eq(unwindd__resume_seq(e.u), mark);

	push_sample(&e, mark - 1, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	push_sample(&e, mark, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	push_sample(&e, mark + 1, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	ck_assert_int_eq(run_all(&e), 3);
	n = pull_all(&e, recs, 16);
	for (i = 0; i < n; i++) {
		if (recs[i].type == CPA_REC_FRAMES) {
			frames++;
			ck_assert_uint_eq(((const struct cpa_frames *)recs[i].data)->seq, mark + 1);
		}
	}
	ck_assert_int_eq(frames, 1);
	ck_assert_uint_eq(shm_stage__cnt(e.st, SHM_CNT_DROP_DUP), 2);
	ck_assert_uint_eq(shm_ring__mark_sc(&e.in), mark + 1);

	/* Restart: a new lifetime resumes after mark + 1 and re-sends its defs. */
	unwindd__free(e.u);
	e.u = NULL;
	push_sample(&e, mark + 1, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	push_sample(&e, mark + 2, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	env_start(&e, &(struct unwindd_opts){.proc_root = fixture_proc()});
	run_all(&e);
	n = pull_all(&e, recs, 16);
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(recs[0].type, CPA_REC_DICT_RESET);
	ck_assert_int_eq(recs[1].type, CPA_REC_MODULE);
	ck_assert_int_eq(recs[2].type, CPA_REC_FRAMES);
	ck_assert_uint_eq(((const struct cpa_frames *)recs[2].data)->seq, mark + 2);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_corrupt_skipped)
{
	static struct outrec recs[16];
	uint64_t ufp[1] = {0x401234};
	struct cpa_sample s = {0};
	uint8_t junk[8] = {1, 2, 3};
	const struct cpa_loss *l;
	struct env e;
	int n, i, frames = 0, losses = 0;

	env_init(&e, 1u << 16, fixture_proc());
	/* Counts larger than the record. */
	s.seq = e.seq;
	s.pid = FIX_PID;
	s.n_kstack = 100;
	push_raw(&e, CPA_REC_SAMPLE, &s, sizeof(s));
	/* Shorter than a header. */
	push_raw(&e, CPA_REC_SAMPLE, junk, sizeof(junk));
	/* Unknown type. */
	push_raw(&e, 99, junk, sizeof(junk));
	/* Short task record. */
	push_raw(&e, CPA_REC_TASK, junk, sizeof(junk));
	push_sample(&e, e.seq + 1, FIX_PID, 0, ufp, 1, NULL, 0, NULL, 0);
	ck_assert_int_eq(run_all(&e), 5);
	ck_assert_uint_eq(shm_stage__cnt(e.st, SHM_CNT_DROP_CORRUPT), 4);
	n = pull_all(&e, recs, 16);
	for (i = 0; i < n; i++) {
		if (recs[i].type == CPA_REC_FRAMES)
			frames++;
		if (recs[i].type == CPA_REC_LOSS) {
			losses++;
			l = (const void *)recs[i].data;
			ck_assert_uint_eq(l->stage, SHM_STAGE_UNWINDD);
			ck_assert_uint_eq(l->reason, SHM_CNT_DROP_CORRUPT);
			ck_assert_uint_eq(l->count, 4);
		}
	}
	ck_assert_int_eq(frames, 1);
	ck_assert_int_eq(losses, 1);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_ring_full_loss)
{
	static struct outrec recs[256];
	uint64_t ufp[4] = {0x401234, 0x401300, 0x401400, 0x401500};
	uint64_t k[8] = {0};
	unsigned int pushed = 64, i;
	uint64_t last = 0, frames = 0, seq_prev = 0;
	const struct cpa_loss *l = NULL;
	struct env e;
	int n;

	env_init(&e, 4096, fixture_proc());
	for (i = 0; i < pushed; i++)
		last = push_sample(&e, e.seq + i, FIX_PID, 0, ufp, 4, k, 8, NULL, 0);
	run_all(&e);
	ck_assert_uint_gt(shm_stage__cnt(e.st, SHM_CNT_DROP_RING_FULL), 0);
	/* Nothing waits on the output ring: the input was consumed anyway. */
	ck_assert_uint_eq(shm_ring__pending_sc(&e.in), 0);
	ck_assert_uint_eq(shm_ring__mark_sc(&e.in), last);

	/* symd catches up; the next tick reports the drops. */
	n = pull_all(&e, recs, 256);
	unwindd__tick(e.u, clock_ns(CLOCK_MONOTONIC));
	n += pull_all(&e, recs + n, 256 - n);
	for (i = 0; i < (unsigned int)n; i++) {
		if (recs[i].type == CPA_REC_FRAMES) {
			const struct cpa_frames *f = (const void *)recs[i].data;

			ck_assert_uint_gt(f->seq, seq_prev);
			seq_prev = f->seq;
			frames++;
		} else if (recs[i].type == CPA_REC_LOSS) {
			l = (const void *)recs[i].data;
			ck_assert_uint_gt(l->seq, seq_prev);
			seq_prev = l->seq;
		}
	}
	ck_assert_ptr_nonnull(l);
	ck_assert_uint_eq(l->stage, SHM_STAGE_UNWINDD);
	ck_assert_uint_eq(l->reason, SHM_CNT_DROP_RING_FULL);
	ck_assert_uint_eq(l->count, shm_stage__cnt(e.st, SHM_CNT_DROP_RING_FULL));
	ck_assert_uint_eq(l->seq, last);
	ck_assert_uint_eq(frames + l->count, pushed);
	env_free(&e);
}
END_TEST

/* Drops still pending (ring 1 full) when unwindd is killed: their input is
 * released, so the count waits in the arena and the successor sends it. */
START_TEST(test_stage_pending_loss_survives_kill)
{
	static struct outrec recs[256];
	uint64_t ufp[4] = {0x401234, 0x401300, 0x401400, 0x401500};
	uint64_t k[8] = {0}, dropped, frames = 0, carried = 0;
	unsigned int pushed = 64, i;
	struct env e;
	int n;

	env_init(&e, 4096, fixture_proc());
	for (i = 0; i < pushed; i++)
		push_sample(&e, e.seq + i, FIX_PID, 0, ufp, 4, k, 8, NULL, 0);
	run_all(&e);
	dropped = shm_stage__cnt(e.st, SHM_CNT_DROP_RING_FULL);
	ck_assert_uint_gt(dropped, 0);
	ck_assert_uint_eq(shm_ring__pending_sc(&e.in), 0);
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_LOSS_PENDING), dropped);

	/* SIGKILL: the object goes without a flush; symd drains ring 1; a
	 * new unwindd starts on the same arena. */
	unwindd__free(e.u);
	n = pull_all(&e, recs, 256);
	env_start(&e, &(struct unwindd_opts){.proc_root = fixture_proc()});
	unwindd__tick(e.u, clock_ns(CLOCK_MONOTONIC));
	ck_assert_int_eq(unwindd__batch(e.u, 64), 0);
	unwindd__tick(e.u, clock_ns(CLOCK_MONOTONIC));
	n += pull_all(&e, recs + n, 256 - n);
	for (i = 0; i < (unsigned int)n; i++) {
		const struct cpa_loss *l = (const void *)recs[i].data;

		if (recs[i].type == CPA_REC_FRAMES)
			frames++;
		else if (recs[i].type == CPA_REC_LOSS) {
			ck_assert_uint_eq(l->stage, SHM_STAGE_UNWINDD);
			ck_assert_uint_eq(l->reason, UNW_CNT_LOST_AT_KILL);
			carried += l->count;
		}
	}
	ck_assert_uint_eq(carried, dropped);
	ck_assert_uint_eq(frames + carried, pushed);
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_LOSS_PENDING), 0);
	env_free(&e);
}
END_TEST

/* symd (the ring 1 consumer) catches up after a while. */
static void *late_symd(void *arg)
{
	struct env *e = arg;
	static struct outrec recs[256];

	nanosleep(&(struct timespec){.tv_nsec = 300 * 1000 * 1000}, NULL);
	return (void *)(intptr_t)pull_all(e, recs, 256);
}

/* Leaving with losses pending and ring 1 full (symd down while the monitor
 * stops): unwindd waits for room instead of dropping them (issue 14, 4). */
START_TEST(test_stage_finish_waits_for_room)
{
	uint64_t ufp[4] = {0x401234, 0x401300, 0x401400, 0x401500};
	uint64_t k[8] = {0};
	struct env e;
	pthread_t t;

	env_init(&e, 4096, fixture_proc());
	for (unsigned int i = 0; i < 64; i++)
		push_sample(&e, e.seq + i, FIX_PID, 0, ufp, 4, k, 8, NULL, 0);
	run_all(&e);
	ck_assert_uint_gt(shm_stage__cnt(e.st, SHM_CNT_DROP_RING_FULL), 0);
	/* No wait: nothing fits, the count stays pending (and published). */
	ck_assert_uint_gt(unwindd__finish(e.u, 0), 0);
	ck_assert_uint_gt(shm_stage__cnt(e.st, UNW_CNT_LOSS_PENDING), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, late_symd, &e), 0);
	ck_assert_uint_eq(unwindd__finish(e.u, 10 * NSEC_PER_SEC), 0);
	pthread_join(t, NULL);
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_LOSS_PENDING), 0);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_reset_waits_for_room)
{
	struct outrec *recs = calloc(64, sizeof(*recs));
	struct shm_ring_prod filler;
	struct env e;
	int k = 0;
	void *d;

	/* symd is stuck: the output ring is full before unwindd starts. */
	env_arena(&e, 4096, NEAR_WRAP);
	ck_assert_int_eq(shm_arena__open_prod(e.a, SHM_RING_UNWIND, &filler), 0);
	while (shm_ring__reserve_sp(&filler, 256, 42, &d) == 0)
		k++;
	while (shm_ring__reserve_sp(&filler, 0, 42, &d) == 0)
		k++;
	shm_ring__commit_sp(&filler);
	env_start(&e, &(struct unwindd_opts){.proc_root = fixture_proc()});

	/* No DICT_RESET, so no output at all, and the input stays queued. */
	push_sample(&e, e.seq, FIX_PID, 0, NULL, 0, NULL, 0, NULL, 0);
	ck_assert_int_eq(unwindd__batch(e.u, 16), -ENOBUFS);
	ck_assert_uint_gt(shm_ring__pending_sc(&e.in), 0);

	ck_assert_int_eq(pull_all(&e, recs, 64), k);
	ck_assert_int_eq(unwindd__batch(e.u, 16), 1);
	ck_assert_int_eq(pull_all(&e, recs, 64), 2);
	ck_assert_int_eq(recs[0].type, CPA_REC_DICT_RESET);
	ck_assert_int_eq(recs[1].type, CPA_REC_FRAMES);
	free(recs);
	env_free(&e);
}
END_TEST

START_TEST(test_stage_cfi_walk_seam)
{
	static struct outrec recs[32];
	static uint8_t stack[16384];
	const struct cpa_frames *f = NULL;
	const struct cpa_uframe *uf;
	struct env e;
	int n, i;

	env_init(&e, 1u << 16, "/proc");
	take_sample(&e, stack, 4096);
	run_all(&e);
	n = pull_all(&e, recs, 32);
	for (i = 0; i < n; i++)
		if (recs[i].type == CPA_REC_FRAMES)
			f = (const void *)recs[i].data;
	ck_assert_ptr_nonnull(f);
	/* The FP chain had one frame; the walk got further than that. */
	ck_assert_uint_gt(f->n_uframes, 1);
	ck_assert_uint_ne(f->stop_reason, CPA_STOP_FP);
	uf = (const void *)(f + 1);
	ck_assert(uf[0].flags & CPA_UF_LEAF);
	ck_assert_uint_gt(uf[0].module_id, 0);
	ck_assert_ptr_nonnull(find_module(recs, n, uf[0].module_id));
	ck_assert_ptr_nonnull(find_module(recs, n, uf[1].module_id));
	env_free(&e);
}
END_TEST

/* ---------------------------------------------------------------- process */

static pid_t spawn_unwindd(struct env *e)
{
	const char *bd = getenv("CPA_BUILD_DIR");
	char path[1024];
	pid_t pid;

	snprintf(path, sizeof(path), "%s/bin/unwindd", bd ? bd : ".");
	ck_assert_msg(access(path, X_OK) == 0, "%s not built", path);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = dup(shm_arena__fd(e->a)); /* drops CLOEXEC */

		if (fd < 0 || dup2(fd, 3) < 0)
			_exit(100);
		execl(path, path, (char *)NULL);
		_exit(101);
	}
	return pid;
}

static void wait_state(struct shm_stage *st, enum shm_stage_state want)
{
	int i;

	for (i = 0; i < 1000 && shm_stage__state(st) != want; i++)
		usleep(10000);
	ck_assert_int_eq(shm_stage__state(st), want);
}

START_TEST(test_process_drain)
{
	static struct outrec recs[16];
	uint64_t ufp[1] = {0x10};
	struct env e;
	pid_t pid;
	int status, n, i;
	bool frames = false;

	env_arena(&e, 1u << 16, NEAR_WRAP);
	e.st->generation = 3;
	e.st->state = SHM_STATE_STARTING;
	pid = spawn_unwindd(&e);
	wait_state(e.st, SHM_STATE_RUNNING);
	ck_assert_uint_gt(e.st->heartbeat_ns, 0);
	push_sample(&e, e.seq, (uint32_t)getpid(), 0, ufp, 1, NULL, 0, NULL, 0);
	__atomic_store_n(&e.st->cmd, SHM_CMD_DRAIN, __ATOMIC_RELEASE);
	shm_ring__kick(shm_arena__ring_mem(e.a, SHM_RING_CAPTURE, NULL));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(shm_stage__state(e.st), SHM_STATE_EXITED);
	n = pull_all(&e, recs, 16);
	ck_assert_int_ge(n, 2);
	ck_assert_int_eq(recs[0].type, CPA_REC_DICT_RESET);
	ck_assert_uint_eq(((const struct cpa_dict_reset *)recs[0].data)->epoch, 3ull << 32);
	for (i = 0; i < n; i++)
		frames |= recs[i].type == CPA_REC_FRAMES;
	ck_assert(frames);
	ck_assert_uint_eq(shm_stage__cnt(e.st, SHM_CNT_IN), 1);
	shm_arena__free(e.a);
}
END_TEST

START_TEST(test_process_sigterm_and_no_arena)
{
	const char *bd = getenv("CPA_BUILD_DIR");
	char cmd[1200];
	struct env e;
	pid_t pid;
	int status;

	env_arena(&e, 1u << 16, NEAR_WRAP);
	pid = spawn_unwindd(&e);
	wait_state(e.st, SHM_STATE_RUNNING);
	ck_assert_int_eq(kill(pid, SIGINT), 0); /* ignored: the monitor decides */
	usleep(50000);
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(shm_stage__state(e.st), SHM_STATE_EXITED);
	shm_arena__free(e.a);

	/* Run by hand: exit 2 with a clear message. */
	snprintf(cmd, sizeof(cmd), "%s/bin/unwindd 3>&- 2>/dev/null", bd ? bd : ".");
	status = system(cmd);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 2);
}
END_TEST

static Suite *unwindd_suite(void)
{
	Suite *s = suite_create("unwindd");
	TCase *tc;

	TEST_TCASE(s, "maps", test_maps_parse_fixture, test_maps_parse_hostile);

	TEST_TCASE(s, "build_id", test_build_id_compiled, test_build_id_self_and_vdso);

	TEST_TCASE(s, "ucache", test_pc_to_offset_self, test_refresh_throttle_and_anon,
		   test_fixture_proc_exec_exit, test_neg_cache_known_missing,
		   test_neg_cache_new_library, test_identify_retry_from_live_process,
		   test_cache_cap_evicts, test_cache_cap_live);

	TEST_TCASE(s, "stage", test_stage_frames_and_modules, test_stage_kernel_only_and_unmapped,
		   test_stage_task_and_loss_forwarded, test_stage_regs_without_chain,
		   test_stage_module_id_rollover, test_stage_exactly_once,
		   test_stage_tick_clock_before_batch, test_stage_corrupt_skipped,
		   test_stage_ring_full_loss, test_stage_pending_loss_survives_kill,
		   test_stage_finish_waits_for_room, test_stage_reset_waits_for_room,
		   test_stage_cfi_walk_seam);

	tc = TEST_TCASE(s, "fifo", test_cfi_debug_fifo_in_root);
	tcase_set_timeout(tc, 60);
	tc = TEST_TCASE(s, "process", test_process_drain, test_process_sigterm_and_no_arena);
	tcase_set_timeout(tc, 60);
	return s;
}

int main(void)
{
	return test_run_suite(unwindd_suite());
}
