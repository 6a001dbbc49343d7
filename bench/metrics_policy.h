/* SPDX-License-Identifier: MIT */
/*
 * bench_metrics_store's two halves: the encodings (metrics_store.c) and the
 * row policies beside v5 (metrics_policy.c, docs/bench.md "Metrics store").
 */
#ifndef CPA_BENCH_METRICS_POLICY_H
#define CPA_BENCH_METRICS_POLICY_H

#include <stddef.h>

/* zstd level 3 (the storer's) bytes of p, len; 0 for none */
double zsize(const void *p, size_t len);
/* |got - want| / want (1 where want is 0 and got is not) */
double rel(double got, double want);
double dmax(double x, double y);

/* The policies' table of the store dir: 0, or -errno. */
int metrics_policy__run(const char *dir);

#endif /* CPA_BENCH_METRICS_POLICY_H */
