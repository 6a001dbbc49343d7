/* SPDX-License-Identifier: MIT */
/*
 * Per-second rate limit (a stage's rate_limit, samples/s, set live by
 * `cpa ctl`). A window opens at the first event after the previous window's
 * second has passed and admits `limit` events. The time is an argument, so
 * the caller picks the clock: capture counts seconds of sample time, the
 * other stages the batch's CLOCK_MONOTONIC. A time that goes backwards opens
 * a new window. Header-only: it runs once per sample.
 */
#ifndef CPA_RATELIMIT_H
#define CPA_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "timeutil.h"

struct ratelimit {
	uint64_t begin_ns; /* of the current window */
	uint64_t n;	   /* events seen in it, admitted or not */
};

/* Whether one more event at now_ns is within limit per second; limit 0 means no limit. */
static inline bool ratelimit__ok(struct ratelimit *rl, uint64_t limit, uint64_t now_ns)
{
	if (!limit)
		return true;
	if (now_ns < rl->begin_ns || now_ns - rl->begin_ns >= NSEC_PER_SEC) {
		rl->begin_ns = now_ns;
		rl->n = 0;
	}
	return ++rl->n <= limit;
}

#endif /* CPA_RATELIMIT_H */
