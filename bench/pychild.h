/* SPDX-License-Identifier: MIT */
/*
 * A python3 child for the benches and tests that read a live interpreter's
 * code objects (bench_pyname, test_capture): `python3 -c script`, its stdin
 * a pipe kept open (closing it ends a script that reads stdin), its first
 * line of output returned.
 */
#ifndef CPA_BENCH_PYCHILD_H
#define CPA_BENCH_PYCHILD_H

#include <stddef.h>
#include <sys/types.h>

/* The child's pid with its first line in line[len] and its stdin in *ret_in,
 * or 0 (no python3, or no line: the child is reaped). */
pid_t py_child(const char *script, char *line, size_t len, int *ret_in);

#endif /* CPA_BENCH_PYCHILD_H */
