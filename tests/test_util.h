/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the Check test programs: the skip code, the environment
 * (CPA_STRESS=1 asks for bigger runs, TSan for smaller ones), scratch
 * directories, a runner, a test case from a list of tests, and reading a whole
 * fd, file or command's output.
 */
#ifndef CPA_TEST_UTIL_H
#define CPA_TEST_UTIL_H

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"

#define TEST_SKIP 77

static inline bool test_stress(void)
{
	const char *s = getenv("CPA_STRESS");

	return s && *s && strcmp(s, "0") != 0;
}

/* True when built with ThreadSanitizer (work is scaled down there). */
static inline bool test_under_tsan(void)
{
#if defined(__SANITIZE_THREAD__)
	return true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
	return true;
#else
	return false;
#endif
#else
	return false;
#endif
}

/* Local second of the day of t: what `cpa show --starttime` takes. */
static inline long test_sod(time_t t)
{
	struct tm tm;

	localtime_r(&t, &tm);
	return tm.tm_hour * 3600L + tm.tm_min * 60 + tm.tm_sec;
}

/* A second of the day as HH:MM:SS. */
static inline void test_hms(char *buf, size_t len, long s)
{
	snprintf(buf, len, "%02d:%02d:%02d", (int)(s / 3600 % 24), (int)(s / 60 % 60),
		 (int)(s % 60));
}

/*
 * Scratch space. test_scratch("e2e") makes a fresh directory and returns its
 * path (malloc'd): inside the run's directory during test_run_suite(), else
 * $TMPDIR/cpa-e2e-XXXXXX. The process that made it removes it when it exits 0
 * or 77 (a Check case that passed: Check ends a failed case with _exit(1), a
 * crash or a timeout ends it without exit handlers), after it killed and
 * reaped what is left of its process group (Check runs each case in a group of
 * its own), so that no monitor or stage writes there during the removal; on any
 * other exit it keeps it and prints its path. The run's directory is
 * $TMPDIR/<ctest name>-XXXXXX (CPA_TEST_NAME, set by tests/CMakeLists.txt):
 * test_run_suite() removes it when every case passed, else prints what the
 * failed cases left in it. $TMPDIR defaults to /tmp.
 */
#define TEST_SCRATCH_ENV "CPA_TEST_SCRATCH"

static inline const char *test_tmpdir(void)
{
	const char *t = getenv("TMPDIR");

	return t && *t ? t : "/tmp";
}

static inline int test_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0 && errno != ENOENT)
		fprintf(stderr, "test: remove %s: %s\n", path, strerror(errno));
	return 0;
}

/* rm -rf path (it does not follow symlinks). */
static inline void test_rm_rf(const char *path)
{
	nftw(path, test_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Kill and reap the other processes of our process group when we lead it. */
static inline void test_reap_group(void)
{
	pid_t self = getpid();

	if (getpgrp() != self)
		return;
	for (int round = 0; round < 500; round++) {
		DIR *d = opendir("/proc");
		struct dirent *de;
		int left = 0;

		if (!d)
			return;
		while ((de = readdir(d))) {
			char path[64], buf[512], *p, state;
			int pid = atoi(de->d_name), pgrp, fd;
			ssize_t n;

			if (pid <= 0 || pid == self)
				continue;
			snprintf(path, sizeof(path), "/proc/%d/stat", pid);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			n = read(fd, buf, sizeof(buf) - 1);
			close(fd);
			buf[n > 0 ? n : 0] = 0;
			p = strrchr(buf, ')'); /* pid (comm) state ppid pgrp */
			if (!p || sscanf(p + 1, " %c %*d %d", &state, &pgrp) != 2 || pgrp != self ||
			    state == 'Z' || state == 'X')
				continue;
			kill(pid, SIGKILL);
			left++;
		}
		closedir(d);
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
		if (!left)
			return;
		usleep(10000);
	}
}

struct test_scratch_dir {
	struct test_scratch_dir *next; /* reachable, for LeakSanitizer */
	pid_t pid;
	char path[];
};

static struct test_scratch_dir *test_scratch_dirs;

static inline void test_scratch_exit(int status, void *arg)
{
	struct test_scratch_dir *s = arg;

	if (getpid() != s->pid) /* a fork of the process that made it */
		return;
	if (status == 0 || status == TEST_SKIP) {
		test_reap_group();
		test_rm_rf(s->path);
	} else {
		fprintf(stderr, "test scratch kept: %s\n", s->path);
	}
}

/* A fresh directory for this test, removed if it passes (above); no Check call,
 * so fuzz/seeds.c may use it. */
static inline char *test_scratch(const char *tag)
{
	const char *run = getenv(TEST_SCRATCH_ENV);
	size_t len = strlen(test_tmpdir()) + strlen(tag) + 16 + (run ? strlen(run) : 0);
	struct test_scratch_dir *s = malloc(sizeof(*s) + len);

	if (!s)
		abort();
	if (run && *run)
		snprintf(s->path, len, "%s/%s-XXXXXX", run, tag);
	else
		snprintf(s->path, len, "%s/cpa-%s-XXXXXX", test_tmpdir(), tag);
	if (!mkdtemp(s->path)) {
		fprintf(stderr, "mkdtemp %s: %s\n", s->path, strerror(errno));
		abort();
	}
	s->pid = getpid();
	s->next = test_scratch_dirs;
	test_scratch_dirs = s;
	if (on_exit(test_scratch_exit, s) != 0)
		abort();
	return strdup(s->path);
}

/* test_scratch() into buf (len bytes). */
static inline char *test_scratch_in(char *buf, size_t len, const char *tag)
{
	char *p = test_scratch(tag);

	if ((size_t)snprintf(buf, len, "%s", p) >= len) {
		fprintf(stderr, "test scratch %s: longer than %zu bytes\n", p, len - 1);
		abort();
	}
	free(p);
	return buf;
}

/*
 * A tmpfs (mount options opts, e.g. "size=64k"; root only) on a new scratch
 * dir (test_scratch_in(buf, len, tag)), in a mount namespace of this test
 * process's own: the mount goes with the process whatever the outcome (a
 * failed check exits without cleaning up, a timeout kills it), and the
 * processes it starts see it. 0 when mounted, else -errno (the dir removed).
 */
static inline int test_tmpfs(char *buf, size_t len, const char *tag, const char *opts)
{
	test_scratch_in(buf, len, tag);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("tmpfs", buf, "tmpfs", 0, opts) < 0) {
		int r = -errno;

		rmdir(buf);
		return r;
	}
	return 0;
}

/* path is a mount point in this process's mount namespace. */
static inline bool test_mounted(const char *path)
{
	char line[PATH_MAX + 512], want[PATH_MAX + 4];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	bool hit = false;

	if (!f)
		return false;
	/* "id parent major:minor root mount-point ...": the mount point is field 5 */
	snprintf(want, sizeof(want), " %s ", path);
	while (!hit && fgets(line, sizeof(line), f)) {
		char *p = line;

		for (int i = 0; i < 4 && p; i++)
			p = strchr(p + 1, ' ');
		hit = p && !strncmp(p, want, strlen(want));
	}
	fclose(f);
	return hit;
}

/* mkstemp() of a file named tag-XXXXXX in the run's directory (test_scratch()),
 * else in $TMPDIR, its path in buf (len bytes); the caller removes it. */
static inline int test_mkstemp(char *buf, size_t len, const char *tag)
{
	const char *run = getenv(TEST_SCRATCH_ENV);

	snprintf(buf, len, "%s/%s-XXXXXX", run && *run ? run : test_tmpdir(), tag);
	return mkstemp(buf);
}

/* Run a suite; exit 0 when every case passed, 1 otherwise. The cases' scratch
 * directories go in one of the run's (test_scratch()). */
static inline int test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	const char *name = getenv("CPA_TEST_NAME");
	char run[PATH_MAX];
	int failed;

	snprintf(run, sizeof(run), "%s/%s-XXXXXX", test_tmpdir(),
		 name && *name ? name : program_invocation_short_name);
	if (!mkdtemp(run) || chmod(run, 0755) != 0) { /* 0755: tests that run as nobody */
		fprintf(stderr, "mkdtemp %s: %s\n", run, strerror(errno));
		return EXIT_FAILURE;
	}
	setenv(TEST_SCRATCH_ENV, run, 1);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (!failed) {
		test_rm_rf(run);
	} else if (rmdir(run) != 0) {
		DIR *d = opendir(run);
		struct dirent *de;

		while (d && (de = readdir(d)))
			if (de->d_name[0] != '.')
				fprintf(stderr, "test scratch kept: %s/%s\n", run, de->d_name);
		if (d)
			closedir(d);
	}
	unsetenv(TEST_SCRATCH_ENV);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/*
 * A test case of the tests listed, in that order, added to s; it returns the
 * TCase for a timeout, fixtures or loop tests:
 *	tc = TEST_TCASE(s, "maps", test_maps_parse_fixture, test_maps_parse_hostile);
 */
#define TEST_TCASE(s, name, ...) \
	test_tcase_of((s), (name), (const TTest *const[]){__VA_ARGS__, NULL})

static inline TCase *test_tcase_of(Suite *s, const char *name, const TTest *const *tests)
{
	TCase *tc = tcase_create(name);

	for (; *tests; tests++)
		tcase_add_test(tc, *tests);
	suite_add_tcase(s, tc);
	return tc;
}

/* Everything fd says until EOF in a malloc'd NUL-terminated buffer, *ret_len
 * (may be NULL) its length; fd stays open. */
static inline char *test_read_all(int fd, size_t *ret_len)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		ck_assert_int_eq(array_grow((void **)&buf, &cap, len + 2, 1), 0);
	}
	buf[len] = 0;
	if (ret_len)
		*ret_len = len;
	return buf;
}

/* The file at path, whole (NUL-terminated, *ret_len its length, may be NULL). */
static inline char *test_slurp(const char *path, size_t *ret_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf;

	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	buf = test_read_all(fd, ret_len);
	close(fd);
	return buf;
}

/* Stdout of the shell command made from fmt; *rc (may be NULL) its exit code,
 * 128 when it did not exit. */
static inline char *test_cmd_out(int *rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static inline char *test_cmd_out(int *rc, const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	FILE *p;
	char *buf;
	int st;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	buf = test_read_all(fileno(p), NULL);
	st = pclose(p);
	if (rc)
		*rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
	return buf;
}

/* What a built program printed, and how it exited (-1: killed by a signal). */
struct test_run {
	int code;
	char out[16384];
	char err[16384];
};

static inline void test_slurp_fd(int fd, char *buf, size_t len)
{
	ssize_t n = pread(fd, buf, len - 1, 0);

	buf[n > 0 ? n : 0] = 0;
	close(fd);
}

/* Run CPA_BUILD_DIR/bin/<exe> with args (NULL-terminated), stdout and stderr captured. */
static inline void test_run_bin(struct test_run *r, const char *exe, const char *const *args)
{
	const char *b = getenv("CPA_BUILD_DIR");
	char path[PATH_MAX], out[PATH_MAX], err[PATH_MAX];
	const char *argv[64] = {path};
	int ofd = test_mkstemp(out, sizeof(out), "out"),
	    efd = test_mkstemp(err, sizeof(err), "err");
	int n = 1, status;
	pid_t pid;

	ck_assert_int_ge(ofd, 0);
	ck_assert_int_ge(efd, 0);
	unlink(out);
	unlink(err);
	snprintf(path, sizeof(path), "%s/bin/%s", b ? b : ".", exe);
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		dup2(ofd, 1);
		dup2(efd, 2);
		execv(path, (char **)argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	r->code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
	test_slurp_fd(ofd, r->out, sizeof(r->out));
	test_slurp_fd(efd, r->err, sizeof(r->err));
}

#endif /* CPA_TEST_UTIL_H */
