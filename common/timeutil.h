/* SPDX-License-Identifier: MIT */
/*
 * Time in nanoseconds: the one conversion of a struct timespec, and the unit
 * constants. Header-only (inlined on hot paths); depends on nothing but libc.
 * Every clock read in the tree goes through clock_ns(), so "which clock" is
 * always spelled at the call site.
 */
#ifndef CPA_TIMEUTIL_H
#define CPA_TIMEUTIL_H

#include <stdint.h>
#include <time.h>

#define NSEC_PER_USEC 1000ull
#define NSEC_PER_MSEC 1000000ull
#define NSEC_PER_SEC  1000000000ull
#define USEC_PER_SEC  1000000ull
#define MSEC_PER_SEC  1000ull

static inline uint64_t timespec_to_ns(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * NSEC_PER_SEC + (uint64_t)ts->tv_nsec;
}

static inline struct timespec ns_to_timespec(uint64_t ns)
{
	return (struct timespec){.tv_sec = (time_t)(ns / NSEC_PER_SEC),
				 .tv_nsec = (long)(ns % NSEC_PER_SEC)};
}

/* Now on clock id, in ns (0 if the clock cannot be read, which the kernel
 * only does for an invalid id). */
static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts) < 0)
		return 0;
	return timespec_to_ns(&ts);
}

#endif /* CPA_TIMEUTIL_H */
