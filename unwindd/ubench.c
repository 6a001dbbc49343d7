// SPDX-License-Identifier: MIT
#include "ubench.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "walk.h"

static const char *const bucket_names[UBENCH_BUCKETS] = {
	"<1",	 "1-2",	   "2-4",     "4-8",	 "8-16",   "16-32",
	"32-64", "64-128", "128-256", "256-512", "512-1K", ">=1K",
};

static const char *const cpa_bucket_names[UBENCH_CPA_BUCKETS] = {
	"<1us",	     "1-4us",	   "4-16us",	  "16-64us",	 "64-256us",
	"256-512us", "512-1024us", "1024-2048us", "2048-4096us", ">=4096us",
};

/* Upper ends (us, exclusive) of CPA's buckets but the last. */
static const uint64_t cpa_bucket_end_us[UBENCH_CPA_BUCKETS - 1] = {
	1, 4, 16, 64, 256, 512, 1024, 2048, 4096,
};

static void interval_reset(struct ubench *b, uint64_t now_ns)
{
	uint64_t interval = b->interval_ns, intervals = b->intervals;

	memset(b, 0, sizeof(*b));
	b->interval_ns = interval;
	b->intervals = intervals;
	b->start_ns = now_ns;
	b->lat_min_ns = UINT64_MAX;
}

void ubench__init(struct ubench *b, uint64_t interval_ns, uint64_t now_ns)
{
	memset(b, 0, sizeof(*b));
	b->interval_ns = interval_ns ? interval_ns : NSEC_PER_SEC;
	interval_reset(b, now_ns);
}

unsigned int ubench__bucket(uint64_t lat_ns)
{
	uint64_t us = lat_ns / 1000;
	unsigned int i;

	if (!us)
		return 0;
	/* [2^(i-1), 2^i) us -> bucket i; 1024 us and more -> the last. */
	i = 64 - (unsigned int)__builtin_clzll(us);
	return i < UBENCH_BUCKETS - 1 ? i : UBENCH_BUCKETS - 1;
}

unsigned int ubench__cpa_bucket(uint64_t lat_ns)
{
	uint64_t us = lat_ns / 1000;
	unsigned int i;

	for (i = 0; i < UBENCH_CPA_BUCKETS - 1; i++)
		if (us < cpa_bucket_end_us[i])
			break;
	return i;
}

#define APPEND(buf, len, n, ...)                                                        \
	do {                                                                            \
		if ((n) < (len))                                                        \
			(n) += (size_t)snprintf((buf) + (n), (len) - (n), __VA_ARGS__); \
	} while (0)

/* The interval's figures both forms print: seconds, latencies in us (0 without samples). */
struct figures {
	double secs, avg_us, min_us, max_us;
};

static struct figures figures_of(const struct ubench *b, uint64_t elapsed_ns)
{
	struct figures f = {.secs = elapsed_ns ? (double)elapsed_ns / 1e9 : 1.0};

	if (b->samples) {
		f.avg_us = (double)b->lat_sum_ns / (double)b->samples / 1e3;
		f.min_us = (double)b->lat_min_ns / 1e3;
		f.max_us = (double)b->lat_max_ns / 1e3;
	}
	return f;
}

void ubench__format(const struct ubench *b, uint64_t elapsed_ns, char *line1, size_t len1,
		    char *line2, size_t len2)
{
	struct figures f = figures_of(b, elapsed_ns);
	double fps = b->samples ? (double)b->frames / (double)b->samples : 0.0;
	size_t n = 0;
	unsigned int i;
	bool any = false;

	APPEND(line1, len1, n,
	       "bench: %.2fs samples %llu rate %.1f/s lat_us avg %.2f min %.2f max %.2f "
	       "frames/sample %.1f env_skipped %llu stop",
	       f.secs, (unsigned long long)b->samples, (double)b->samples / f.secs, f.avg_us,
	       f.min_us, f.max_us, fps, (unsigned long long)b->env_skipped);
	for (i = 0; i < CPA_STOP_MAX; i++) {
		if (!b->stop[i])
			continue;
		APPEND(line1, len1, n, " %s=%llu", unw_stop_name(i),
		       (unsigned long long)b->stop[i]);
		any = true;
	}
	if (!any)
		APPEND(line1, len1, n, " -");

	n = 0;
	APPEND(line2, len2, n, "bench: hist_us");
	for (i = 0; i < UBENCH_BUCKETS; i++)
		APPEND(line2, len2, n, " %s:%llu", bucket_names[i], (unsigned long long)b->hist[i]);
}

void ubench__format_cpa(const struct ubench *b, uint64_t elapsed_ns, char *line1, size_t len1,
			char *line2, size_t len2)
{
	struct figures f = figures_of(b, elapsed_ns);
	size_t n = 0;
	unsigned int i;

	snprintf(line1, len1,
		 "Bench DWARF Unwind: count=%llu rate=%.2f/s avg=%.2f us min=%.2f us max=%.2f us",
		 (unsigned long long)b->samples, (double)b->samples / f.secs, f.avg_us, f.min_us,
		 f.max_us);
	line2[0] = 0;
	if (!b->samples)
		return;
	APPEND(line2, len2, n, "Bench DWARF Histogram:");
	for (i = 0; i < UBENCH_CPA_BUCKETS; i++)
		if (b->cpa_hist[i])
			APPEND(line2, len2, n, " %s=%llu", cpa_bucket_names[i],
			       (unsigned long long)b->cpa_hist[i]);
}

bool ubench__tick(struct ubench *b, uint64_t now_ns)
{
	char l1[512], l2[320];
	uint64_t elapsed = now_ns - b->start_ns;

	if (now_ns < b->start_ns || elapsed < b->interval_ns)
		return false;
	ubench__format(b, elapsed, l1, sizeof(l1), l2, sizeof(l2));
	log_info("%s", l1);
	log_info("%s", l2);
	ubench__format_cpa(b, elapsed, l1, sizeof(l1), l2, sizeof(l2));
	log_info("%s", l1);
	if (*l2)
		log_info("%s", l2);
	b->intervals++;
	interval_reset(b, now_ns);
	return true;
}
