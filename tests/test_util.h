/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the Check test programs: the skip code, the environment
 * (CPA_STRESS=1 asks for bigger runs, TSan for smaller ones), a runner, a test
 * case from a list of tests, and reading a whole fd, file or command's output.
 */
#ifndef CPA_TEST_UTIL_H
#define CPA_TEST_UTIL_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* Run a suite; exit 0 when every case passed, 1 otherwise. */
static inline int test_run_suite(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
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
	char path[PATH_MAX], out[] = "/tmp/cpa-test-out-XXXXXX", err[] = "/tmp/cpa-test-err-XXXXXX";
	const char *argv[64] = {path};
	int ofd = mkstemp(out), efd = mkstemp(err), n = 1, status;
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
