/* SPDX-License-Identifier: MIT */
/*
 * The synthetic store of cpa-view's tests, written through the real store
 * writer by bench/vgen.h (which bench_view_gen uses too).
 */
#ifndef CPA_TEST_VIEW_UTIL_H
#define CPA_TEST_VIEW_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "bench/vgen.h"

/*
 * The test store: 10 minutes from 10:00:00 local on 2026-11-20, per second
 *   app:1000  main;run_loop;hot_function                       60 on-CPU
 *   app:1000  main;run_loop;grow_function                       5 on-CPU (40 from 10:05:00)
 *   app:1000  main;run_loop;cold_function;parse_request         20 on-CPU
 *   db:2000   main;worker;std::vector<...>::push_back(...)      10 on-CPU
 *   app:1000  main;run_loop;wait_event;schedule_[k]            10 off-CPU
 * and 7 lost samples at 10:01:40, 3 degraded ones (pressure) at 10:03:20.
 * Metrics every second (vgen_metrics): system busy 25%, app:1000 on CPU 800 ms
 * with 100 switches and run-queue waits in bucket 14 (16 us); from 10:05:00
 * busy 95%, 400 switches, waits in bucket 20 (1 ms). One policy trigger
 * "burst" of app:1000 from 10:02:00 to 10:02:30 (VT_TRIG_AT, VT_TRIG_LEN).
 */
#define VT_SECS	     600
#define VT_HOT	     60
#define VT_GROW0     5
#define VT_GROW1     40
#define VT_COLD	     20
#define VT_VEC	     10
#define VT_OFF	     10
#define VT_LOST	     7
#define VT_DEGRADED  3
#define VT_LONG_NAME "std::vector<int, std::allocator<int> >::push_back(int const&)"
#define VT_TRIG_AT   120 /* seconds after 10:00:00 */
#define VT_TRIG_LEN  30

static inline uint64_t vt_base_ns(void)
{
	struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 20, .tm_hour = 10, .tm_isdst = -1};

	return (uint64_t)mktime(&tm) * 1000000000ULL;
}

static inline int vt_write_store(const char *root)
{
	struct vgen *g = calloc(1, sizeof(*g));
	uint32_t hot, grow, cold, vec, off, deg, app, db;
	uint64_t base = vt_base_ns();
	uint32_t s, k;
	int r = 0;

	if (!g || vgen_open(g, root, 2) < 0) {
		free(g);
		return -1;
	}
	app = vgen_str(g, "app");
	db = vgen_str(g, "db");
	hot = vgen_stack(g, "main;run_loop;hot_function");
	grow = vgen_stack(g, "main;run_loop;grow_function");
	cold = vgen_stack(g, "main;run_loop;cold_function;parse_request");
	vec = vgen_stack(g, "main;worker;" VT_LONG_NAME);
	off = vgen_stack(g, "main;run_loop;wait_event;schedule_[k]");
	deg = vgen_stack(g, "[degraded: no user stack]");
	for (s = 0; s < VT_SECS && !r; s++) {
		uint64_t t = base + (uint64_t)s * 1000000000ULL;
		uint32_t ng = s < VT_SECS / 2 ? VT_GROW0 : VT_GROW1;

		for (k = 0; k < VT_HOT && !r; k++)
			r = vgen_sample(g, t + k * 1000, hot, 1000, 1000, k % 2, CPA_KIND_ONCPU, 1,
					app, app);
		for (k = 0; k < ng && !r; k++)
			r = vgen_sample(g, t + k * 1000, grow, 1000, 1001, k % 2, CPA_KIND_ONCPU, 1,
					app, app);
		for (k = 0; k < VT_COLD && !r; k++)
			r = vgen_sample(g, t + k * 1000, cold, 1000, 1000, 0, CPA_KIND_ONCPU, 1,
					app, app);
		for (k = 0; k < VT_VEC && !r; k++)
			r = vgen_sample(g, t + k * 1000, vec, 2000, 2000, 1, CPA_KIND_ONCPU, 1, db,
					db);
		for (k = 0; k < VT_OFF && !r; k++)
			r = vgen_sample(g, t + k * 1000, off, 1000, 1000, 0, CPA_KIND_OFFCPU,
					2000000, app, app);
		if (s == 100)
			r = vgen_loss(g, t + 500000000ULL, VT_LOST);
		for (k = 0; s == 200 && k < VT_DEGRADED && !r; k++)
			r = vgen_sample(g, t + k * 1000, deg, 1000, 1000, 0, CPA_KIND_ONCPU, 1, app,
					app);
		if (!r)
			r = s < VT_SECS / 2 ? vgen_metrics(g, t, 50, 800, 100, 14)
					    : vgen_metrics(g, t, 190, 800, 400, 20);
		if (!r && s == VT_TRIG_AT)
			r = vgen_trigger(g, t, CPA_PE_START, t + VT_TRIG_LEN * 1000000000ULL);
		if (!r && s == VT_TRIG_AT + VT_TRIG_LEN)
			r = vgen_trigger(g, t, CPA_PE_END, 0);
	}
	vgen_close(g);
	free(g);
	return r;
}

#endif /* CPA_TEST_VIEW_UTIL_H */
