// SPDX-License-Identifier: MIT
/*
 * bench_overhead_wl: cpa-workload-nofp's call chains for a fixed amount of
 * work instead of a fixed time, so bench_overhead can report CPU time per
 * unit of work (a fixed-time program only says how much CPU it was given,
 * which on a shared machine is mostly the neighbours' doing).
 *
 *   main -> wl_main_loop -> wl_path_a -> wl_lib_work -> wl_lib_spin       (main thread)
 *   start_thread -> wl_thread_main -> wl_path_b -> wl_deep x depth -> wl_lib_work
 *                                                        -> wl_lib_spin (each worker)
 *
 * Built like cpa-workload-nofp (-O2 -fomit-frame-pointer, no inlining, no
 * sibling calls) against the same libcpawl-nofp.so. Every thread does
 * --loops calls; prints "pid N" at start and "loops <total>" plus the
 * per-path "path <name> <cpu_ns>" lines at exit.
 *
 * Usage: bench_overhead_wl [--loops N] [--threads N] [--depth D]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "wl_lib.h"

static unsigned long loops = 20000;
static int nthreads = 1, depth = 20;
static uint64_t path_ns[65];

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline)) static uint64_t wl_path_a(uint64_t seed)
{
	uint64_t r = wl_lib_work(200000, seed);

	__asm__ volatile("" : "+r"(r));
	return r;
}

__attribute__((noinline)) static uint64_t wl_deep(int d, uint64_t seed)
{
	uint64_t r;

	if (d <= 0)
		r = wl_lib_work(200000, seed);
	else
		r = wl_deep(d - 1, seed + 1);
	__asm__ volatile("" : "+r"(r)); /* no tail call: every level keeps a frame */
	return r;
}

__attribute__((noinline)) static uint64_t wl_path_b(uint64_t seed)
{
	uint64_t r = wl_deep(depth, seed);

	__asm__ volatile("" : "+r"(r));
	return r;
}

__attribute__((noinline)) static void *wl_thread_main(void *arg)
{
	uintptr_t i = (uintptr_t)arg;
	uint64_t seed = i + 100, acc = 0, t0 = thread_cpu_ns();

	prctl(PR_SET_NAME, "wl-worker");
	for (unsigned long n = 0; n < loops; n++)
		acc += wl_path_b(seed++);
	path_ns[i + 1] = thread_cpu_ns() - t0;
	return (void *)(uintptr_t)(acc & 1);
}

__attribute__((noinline)) static uint64_t wl_main_loop(void)
{
	uint64_t acc = 0, seed = 7, t0 = thread_cpu_ns();

	for (unsigned long n = 0; n < loops; n++)
		acc += wl_path_a(seed++);
	path_ns[0] = thread_cpu_ns() - t0;
	return acc;
}

int main(int argc, char **argv)
{
	pthread_t th[64];
	uint64_t acc, b = 0;
	char *end;
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--loops") && i + 1 < argc)
			loops = strtoul(argv[++i], &end, 10);
		else if (!strcmp(argv[i], "--threads") && i + 1 < argc)
			nthreads = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
			depth = atoi(argv[++i]);
		else {
			fprintf(stderr, "usage: %s [--loops N] [--threads N] [--depth D]\n",
				argv[0]);
			return 2;
		}
	}
	if (!loops || nthreads < 0 || nthreads > 64 || depth < 0 || depth > 200) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	printf("pid %d\n", getpid());
	fflush(stdout);
	for (i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, wl_thread_main, (void *)(uintptr_t)i);
	acc = wl_main_loop();
	for (i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < nthreads; i++)
		b += path_ns[i + 1];
	printf("loops %lu\n", loops * (unsigned long)(nthreads + 1));
	printf("path wl_path_a %llu\n", (unsigned long long)path_ns[0]);
	printf("path wl_path_b %llu\n", (unsigned long long)b);
	return (int)(acc & 0); /* acc keeps the work alive */
}
