/* SPDX-License-Identifier: MIT */
/*
 * What every bench program does the same way: its messages on stderr, the
 * SIGINT/SIGTERM flag its loops poll, a shell command line.
 */
#ifndef CPA_BENCH_UTIL_H
#define CPA_BENCH_UTIL_H

#include <signal.h>

#include "common/macro.h"

/* Set by SIGINT / SIGTERM once bench_catch_signals() ran. */
extern volatile sig_atomic_t bench_interrupted;

/* SIGINT and SIGTERM set bench_interrupted; SIGPIPE is ignored. */
void bench_catch_signals(void);

/* "<program>: <message>\n" on stderr. */
void bench_say(const char *fmt, ...) _printf_(1, 2);

/* system() of a formatted command line (at most 12 KiB): its status. */
int bench_sh(const char *fmt, ...) _printf_(1, 2);

#endif /* CPA_BENCH_UTIL_H */
