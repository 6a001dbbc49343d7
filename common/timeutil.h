/* SPDX-License-Identifier: MIT */
/*
 * Time in nanoseconds: the one conversion of a struct timespec, and the unit
 * constants. Header-only (inlined on hot paths); depends on nothing but libc.
 * Every clock read in the tree goes through clock_ns() or clock_kernel_ns(),
 * so "which clock" is always spelled at the call site.
 *
 * Which of the two: a reading that crosses a process boundary (the stage
 * heartbeat in the arena, compared by the monitor and `cpa ctl`) or meets a
 * kernel timestamp (BPF's boot time) uses clock_kernel_ns(): the kernel's
 * clock, which an LD_PRELOAD interposer cannot shift per process. Everything
 * else uses clock_ns() through libc, so a clock interposer such as
 * libfaketime moves the wall clock the store is dated by, as CPA's
 * date-rotation tests expect (docs/pipeline.md, "Clocks").
 */
#ifndef CPA_TIMEUTIL_H
#define CPA_TIMEUTIL_H

#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

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

/* Now on clock id as the kernel keeps it: a system call, not libc's
 * (interposable) clock_gettime(). Not for hot paths (no vDSO). */
static inline uint64_t clock_kernel_ns(clockid_t id)
{
	struct timespec ts;

	if (syscall(SYS_clock_gettime, id, &ts) < 0)
		return 0;
	return timespec_to_ns(&ts);
}

/* Local midnight (unix seconds) of the day holding unix second t (DST aware). */
static inline int64_t local_midnight(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_isdst = -1;
	return (int64_t)mktime(&tm);
}

#endif /* CPA_TIMEUTIL_H */
