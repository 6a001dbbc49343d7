/* SPDX-License-Identifier: MIT */
/*
 * Child processes for the end-to-end tests (test_e2e, test_probe): spawn with
 * pipes, wait, read everything a pipe says. Failures are Check assertions.
 */
#ifndef CPA_TEST_PROC_H
#define CPA_TEST_PROC_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

/* Start argv with stdout to a pipe (*ret_out) and stderr inherited. */
pid_t spawn(char *const argv[], int *ret_out);
/* The same with stdin from a pipe too (*ret_in, NULL: inherited; NULL ret_out:
 * stdout inherited). */
pid_t spawn_io(char *const argv[], int *ret_in, int *ret_out);
/* Start argv with stdin/stdout/stderr from these fds (-1: inherited). */
pid_t spawn_fds(char *const argv[], int in, int out, int err);
/* Start argv with stdout to a pipe (*ret_out, NULL: inherited), stderr to err_path
 * (NULL: inherited), the NAME=value strings of env added to its environment. */
pid_t spawn_env(char *const argv[], int *ret_out, const char *err_path, char *const env[]);
/*
 * A folded stack (or its part from the first ';') of a spawned child before
 * its exec: still in the test's own fork path (spawn_fds_env()), under the
 * program's pid but not the program. A loaded host samples it there (2 of 98
 * samples once): tests that judge a program's stacks leave these out.
 */
bool stack_before_exec(const char *stack);
/* Exit code, or 128 + signal. */
int wait_exit(pid_t pid, struct rusage *ru);
/* Read everything from fd into a malloc'd NUL-terminated string; closes fd. */
char *slurp_fd(int fd);
/* Run argv to completion; returns its stdout, *ret_rc its exit code. */
char *run(char *const argv[], int *ret_rc);
/* Run a shell command line built from fmt; the test fails unless it exits 0. */
void run_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Start argv (a `cpa monitor`) with stdout and stderr to the file log; returns
 * its pid once the log says "all stages running". The test fails on an ERROR
 * line or after timeout_s. */
pid_t spawn_monitor(char *const argv[], const char *log, int timeout_s);
/* Wait until the log of a `cpa monitor` says "all stages running"; the test
 * fails on an ERROR line or after timeout_s. */
void wait_monitor_up(const char *log, int timeout_s);
/* The whole store of a stopped monitor, folded ("comm:pid;root;...;leaf COUNT"
 * lines), into the file prof: `cpa show` over its whole time range. Returns the
 * text (the caller frees it); the test fails if cpa show does. */
char *monitor_fold_all(const char *cpa, const char *store, const char *prof);
/* Wait for the n programs pids (each must exit 0), give the pipeline settle_s
 * seconds, stop the monitor mon (SIGINT, exit 0), then monitor_fold_all(). */
char *monitor_stop_fold(pid_t mon, const pid_t *pids, int n, unsigned int settle_s, const char *cpa,
			const char *store, const char *prof);
/* The same with --kind (on, off, all; NULL: the default). */
char *monitor_fold_kind(const char *cpa, const char *store, const char *prof, const char *kind);
/* For each line "comm:pid;root;...;leaf COUNT" of pid in the folded text prof:
 * fn(ctx, stack, count), stack = ";root;...;leaf" (a copy fn may cut up). */
void fold_lines_of(const char *prof, pid_t pid, void (*fn)(void *ctx, char *stack, long count),
		   void *ctx);
/* An empty store directory <scratch>/store in buf (test_scratch(tag)): a
 * monitor's <store>.log beside it stays in the test's scratch directory. */
/* The pid of the monitor mon's stage process named comm, 0 if none. */
pid_t monitor_stage_pid(pid_t mon, const char *comm);
void scratch_store(const char *tag, char *buf, size_t len);
/* Run the one test t (timeout_s) of a suite in its own TCase: test_run_suite()'s
 * exit code. */
int run_one_test(Suite *s, TCase *tc, const TTest *t, int timeout_s);
/* For main(), outside a running test: 77 (with a line saying why) unless root with
 * kernel BTF and $CPA_BUILD_DIR, else 0 and bin_dir = $CPA_BUILD_DIR/bin. */
int test_e2e_ready(char *bin_dir, size_t len);
/* Exit 77 unless root with kernel BTF; bin_dir = $CPA_BUILD_DIR/bin. */
void test_need_root_bpf(char *bin_dir, size_t len);

#endif /* CPA_TEST_PROC_H */
