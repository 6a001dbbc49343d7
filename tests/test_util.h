/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the Check test programs: the skip code, the environment
 * (CPA_STRESS=1 asks for bigger runs, TSan for smaller ones) and a runner.
 */
#ifndef CPA_TEST_UTIL_H
#define CPA_TEST_UTIL_H

#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

#endif /* CPA_TEST_UTIL_H */
