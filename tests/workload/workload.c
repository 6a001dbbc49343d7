// SPDX-License-Identifier: MIT
/*
 * cpa-workload: a CPU-bound program with known call chains, for the
 * end-to-end tests, the unwinding accuracy test and the benches.
 *
 *   main -> wl_main_loop -> wl_path_a -> wl_lib_work -> wl_lib_spin   (main thread)
 *   start_thread -> wl_thread_main -> wl_path_b -> wl_deep -> ... (depth
 *            frames) -> wl_lib_work -> wl_lib_spin                  (worker thread(s))
 *
 * Each path measures its own CPU time with CLOCK_THREAD_CPUTIME_ID and the
 * program prints, at exit, one line per path: "path <name> <cpu_ns>", plus
 * "pid <pid>" at start, so a test can compare what the profiler saw with
 * what the workload measured itself.
 *
 * Usage: cpa-workload [--seconds S | --loops N] [--threads N] [--depth D]
 * --loops N is fixed work instead of fixed time: every thread makes N calls
 * of its path and the program prints "loops <total>" at exit, so a bench can
 * report CPU time per unit of work on a machine whose neighbours decide how
 * much CPU a fixed-time run gets.
 * Built twice: with frame pointers (cpa-workload) and without (-nofp).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "wl_lib.h"

/* Exact names in every build: no inlining, no IPA clones (.isra.0, .constprop.0). */
#define WL_FN __attribute__((noinline, noclone))

static double run_seconds = 5.0;
static unsigned long loops; /* 0: run for run_seconds */
static int nthreads = 1;
static int depth = 20;
static atomic_int stop;
static _Atomic uint64_t path_ns[2];

WL_FN static uint64_t wl_path_a(uint64_t seed)
{
	uint64_t r = wl_lib_work(200000, seed);

	__asm__ volatile("" : "+r"(r));
	return r;
}

WL_FN static uint64_t wl_deep(int d, uint64_t seed)
{
	uint64_t r;

	if (d <= 0)
		r = wl_lib_work(200000, seed);
	else
		r = wl_deep(d - 1, seed + 1);
	__asm__ volatile("" : "+r"(r)); /* no tail call: every level keeps a frame */
	return r;
}

WL_FN static uint64_t wl_path_b(uint64_t seed)
{
	uint64_t r = wl_deep(depth, seed);

	__asm__ volatile("" : "+r"(r));
	return r;
}

WL_FN static void *wl_thread_main(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg, acc = 0, t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);

	prctl(PR_SET_NAME, "wl-worker");
	if (loops) {
		for (unsigned long n = 0; n < loops; n++)
			acc += wl_path_b(seed++);
	} else {
		while (!atomic_load(&stop))
			acc += wl_path_b(seed++);
	}
	atomic_fetch_add(&path_ns[1], clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0);
	return (void *)(uintptr_t)(acc & 1);
}

WL_FN static uint64_t wl_main_loop(void)
{
	uint64_t acc = 0, seed = 7, t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), end;

	if (loops) {
		for (unsigned long n = 0; n < loops; n++)
			acc += wl_path_a(seed++);
	} else {
		end = clock_ns(CLOCK_MONOTONIC) + (uint64_t)(run_seconds * 1e9);
		while (clock_ns(CLOCK_MONOTONIC) < end)
			acc += wl_path_a(seed++);
	}
	atomic_fetch_add(&path_ns[0], clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0);
	return acc;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	uint64_t acc;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			run_seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--loops") && i + 1 < argc)
			loops = strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
			depth = atoi(argv[++i]);
		else {
			fprintf(stderr,
				"usage: %s [--seconds S | --loops N] [--threads N] [--depth D]\n",
				argv[0]);
			return 2;
		}
	}
	if (nthreads < 0 || nthreads > 64 || depth < 0 || depth > 200 || run_seconds <= 0) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	printf("pid %d\n", getpid());
	fflush(stdout);

	for (i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, wl_thread_main, (void *)(uintptr_t)(i + 100));
	acc = wl_main_loop();
	atomic_store(&stop, 1);
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);

	if (loops)
		printf("loops %lu\n", loops * (unsigned long)(nthreads + 1));
	printf("path wl_path_a %llu\n", (unsigned long long)atomic_load(&path_ns[0]));
	printf("path wl_path_b %llu\n", (unsigned long long)atomic_load(&path_ns[1]));
	return (int)(acc & 0); /* acc keeps the work alive */
}
