/* SPDX-License-Identifier: MIT */
/*
 * --bench: CPA's per-interval unwind statistics. The stage times every user
 * unwind (clock_gettime(CLOCK_MONOTONIC) before and after unwind_user() only)
 * and adds it here; once per record interval ubench__tick() prints one line
 * of totals and one line of the latency histogram through common/log.h:
 *
 *   bench: 1.00s samples 49 rate 49.0/s lat_us avg 2.41 min 0.80 max 12.30 frames/sample 11.2
 *          env_skipped 0 stop end=47 read=2
 *   bench: hist_us <1:3 1-2:20 2-4:21 4-8:4 8-16:1 16-32:0 ... 512-1K:0 >=1K:0
 *
 * followed by CPA's two lines, in CPA's form, for the scripts that parse them
 * (only the buckets that are not empty; no histogram line without samples):
 *
 *   Bench DWARF Unwind: count=49 rate=49.00/s avg=2.41 us min=0.80 us max=12.30 us
 *   Bench DWARF Histogram: <1us=3 1-4us=41 4-16us=5
 *
 * Nothing here allocates or does I/O except ubench__tick()'s two log lines.
 * When --bench is off the stage holds no ubench and makes no timing call.
 */
#ifndef CPA_UNWINDD_UBENCH_H
#define CPA_UNWINDD_UBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/records.h"

/* log2 buckets of microseconds: <1, 1-2, 2-4, ..., 512-1024, >=1024. */
#define UBENCH_BUCKETS 12

/* CPA's buckets of microseconds: <1, 1-4, 4-16, 16-64, 64-256, then doubling
 * to 2048-4096; ours adds >=4096 (CPA's last bucket has no upper end). */
#define UBENCH_CPA_BUCKETS 10

struct ubench {
	uint64_t interval_ns;
	uint64_t start_ns; /* CLOCK_MONOTONIC start of the current interval */

	/* The current interval. */
	uint64_t samples; /* user unwinds timed */
	uint64_t frames;  /* user frames they produced */
	uint64_t lat_sum_ns;
	uint64_t lat_min_ns;
	uint64_t lat_max_ns;
	uint64_t env_skipped; /* samples not unwound: --parse_env_values */
	uint64_t hist[UBENCH_BUCKETS];
	uint64_t cpa_hist[UBENCH_CPA_BUCKETS];
	uint64_t stop[CPA_STOP_MAX];

	uint64_t intervals; /* lines printed, for tests */
};

void ubench__init(struct ubench *b, uint64_t interval_ns, uint64_t now_ns);

/* Bucket index of a latency (exposed for tests). */
unsigned int ubench__bucket(uint64_t lat_ns);
unsigned int ubench__cpa_bucket(uint64_t lat_ns);

/* One timed unwind: its latency, frames and stop reason. */
static inline void ubench__add(struct ubench *b, uint64_t lat_ns, unsigned int frames, int stop)
{
	b->samples++;
	b->frames += frames;
	b->lat_sum_ns += lat_ns;
	if (lat_ns < b->lat_min_ns)
		b->lat_min_ns = lat_ns;
	if (lat_ns > b->lat_max_ns)
		b->lat_max_ns = lat_ns;
	b->hist[ubench__bucket(lat_ns)]++;
	b->cpa_hist[ubench__cpa_bucket(lat_ns)]++;
	if (stop >= 0 && stop < CPA_STOP_MAX)
		b->stop[stop]++;
}

/*
 * Format the interval's two lines into line1/line2 (for the log and for
 * tests); elapsed_ns is the interval's real length.
 */
void ubench__format(const struct ubench *b, uint64_t elapsed_ns, char *line1, size_t len1,
		    char *line2, size_t len2);

/* CPA's two lines of the interval ("Bench DWARF Unwind: ...", "Bench DWARF
 * Histogram: ..."); line2 is "" when the interval had no sample. */
void ubench__format_cpa(const struct ubench *b, uint64_t elapsed_ns, char *line1, size_t len1,
			char *line2, size_t len2);

/* When an interval has passed: log its four lines, start the next. True if it printed. */
bool ubench__tick(struct ubench *b, uint64_t now_ns);

#endif /* CPA_UNWINDD_UBENCH_H */
