/* SPDX-License-Identifier: MIT */
/*
 * What every bench program does the same way: its messages on stderr, the
 * SIGINT/SIGTERM flag its loops poll, a shell command line.
 */
#ifndef CPA_BENCH_UTIL_H
#define CPA_BENCH_UTIL_H

#include <signal.h>
#include <stddef.h>

#include "common/macro.h"

/* Set by SIGINT / SIGTERM once bench_catch_signals() ran. */
extern volatile sig_atomic_t bench_interrupted;

/* SIGINT and SIGTERM set bench_interrupted; SIGPIPE is ignored. */
void bench_catch_signals(void);

/* "<program>: <message>\n" on stderr. */
void bench_say(const char *fmt, ...) _printf_(1, 2);

/* qsort() comparator of doubles, ascending. */
int bench_cmp_double(const void *a, const void *b);

/* The median of v[0..n) (n > 0), which it sorts in place; even n: the mean of the middle two. */
double bench_median(double *v, size_t n);

/* system() of a formatted command line (at most 12 KiB): its status. */
int bench_sh(const char *fmt, ...) _printf_(1, 2);

#endif /* CPA_BENCH_UTIL_H */
