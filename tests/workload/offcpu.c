// SPDX-License-Identifier: MIT
/*
 * cpa-wl-offcpu: a workload with known blocking, for the off-CPU test and
 * bench_overhead's switch-heavy mode.
 *
 * Default mode: prints "pid N", waits for a line on stdin (so a profiler can
 * be attached to the pid first), then runs these threads for --seconds S:
 *   wl_sleep:  spin ~7 ms, then wl_block_sleep: nanosleep 3 ms      (S, ~30 %)
 *   wl_pipe:   spin ~4 ms, then wl_block_pipe: read a reply that a feeder
 *              thread writes 1 ms after the request                   (S, ~20 %)
 *   wl_mutex:  two threads, each wl_block_mutex: lock a shared mutex, hold
 *              it spinning 2 ms, unlock, spin 1 ms                     (S)
 *   wl_fsync:  write 4 KiB to a file and wl_block_fsync: fdatasync it (D)
 *   wl_twin:   sleeps 1 ms through wl_block_twin_a, then 2 ms through
 *              wl_block_twin_b, in turn: both reach nanosleep through
 *              wl_twin_wait with the same sp, only their return addresses
 *              tell them apart                                          (S)
 *   wl_pinned: spins in wl_pinned_spin on CPU 0, next to a hog thread
 *              pinned there too, so both are preempted                 (R)
 * Each blocking call is timed with CLOCK_MONOTONIC around it, and at exit
 * the program prints "block <name> <ns>" and "calls <name> <n>" per path:
 * the truth the profiler's off-CPU weights are compared with.
 *
 * --pingpong: two threads bounce a byte over a pair of pipes as fast as they
 * can for --seconds S (context-switch heavy) and print "loops N".
 *
 * Usage: cpa-wl-offcpu [--seconds S] [--pingpong] [--dir DIR] [--no-wait]
 */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"

#define WL_FN __attribute__((noinline, noclone))

enum { B_SLEEP, B_PIPE, B_MUTEX, B_FSYNC, B_TWIN_A, B_TWIN_B, B_MAX };
static const char *const block_names[B_MAX] = {"sleep", "pipe",	  "mutex",
					       "fsync", "twin_a", "twin_b"};

static atomic_int stop;
static _Atomic uint64_t block_ns[B_MAX], block_calls[B_MAX];
static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static int req_pipe[2], rep_pipe[2];
static const char *dir = "/tmp";

static void add_since(int b, uint64_t t0)
{
	atomic_fetch_add(&block_ns[b], clock_ns(CLOCK_MONOTONIC) - t0);
	atomic_fetch_add(&block_calls[b], 1);
}

WL_FN static void wl_spin(uint64_t ns)
{
	uint64_t end = clock_ns(CLOCK_MONOTONIC) + ns;

	while (clock_ns(CLOCK_MONOTONIC) < end)
		__asm__ volatile("" ::: "memory");
}

WL_FN static void wl_block_sleep(void)
{
	struct timespec ts = {.tv_nsec = 3 * 1000 * 1000};

	nanosleep(&ts, NULL);
}

static void *sleep_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "wl_sleep");
	while (!atomic_load(&stop)) {
		uint64_t t0;

		wl_spin(7 * 1000 * 1000);
		t0 = clock_ns(CLOCK_MONOTONIC);
		wl_block_sleep();
		add_since(B_SLEEP, t0);
	}
	return NULL;
}

WL_FN static ssize_t wl_block_pipe(void)
{
	char c;

	return read(rep_pipe[0], &c, 1);
}

static void *pipe_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "wl_pipe");
	while (!atomic_load(&stop)) {
		uint64_t t0;

		wl_spin(4 * 1000 * 1000);
		if (write(req_pipe[1], "q", 1) != 1)
			break;
		t0 = clock_ns(CLOCK_MONOTONIC);
		if (wl_block_pipe() != 1)
			break;
		add_since(B_PIPE, t0);
	}
	close(req_pipe[1]); /* the feeder's read ends */
	return NULL;
}

static void *feeder_main(void *arg)
{
	struct timespec ts = {.tv_nsec = 1000 * 1000};
	char c;

	(void)arg;
	pthread_setname_np(pthread_self(), "wl_feeder");
	while (read(req_pipe[0], &c, 1) == 1) {
		nanosleep(&ts, NULL);
		if (write(rep_pipe[1], "r", 1) != 1)
			break;
	}
	return NULL;
}

WL_FN static void wl_block_mutex(void)
{
	pthread_mutex_lock(&mtx);
}

static void *mutex_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "wl_mutex");
	while (!atomic_load(&stop)) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

		wl_block_mutex();
		add_since(B_MUTEX, t0);
		wl_spin(2 * 1000 * 1000);
		pthread_mutex_unlock(&mtx);
		wl_spin(1000 * 1000);
	}
	return NULL;
}

WL_FN static int wl_block_fsync(int fd)
{
	return fdatasync(fd);
}

static void *fsync_main(void *arg)
{
	/* Static: a page-sized frame would push the thread's root out of the
	 * profiler's stack copy (one fsync thread only). */
	static char path[4200], buf[4096];
	int fd;

	(void)arg;
	pthread_setname_np(pthread_self(), "wl_fsync");
	snprintf(path, sizeof(path), "%s/cpa-wl-offcpu.XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		perror("mkostemp");
		return NULL;
	}
	unlink(path);
	memset(buf, 'x', sizeof(buf));
	while (!atomic_load(&stop)) {
		uint64_t t0;

		if (pwrite(fd, buf, sizeof(buf), 0) != (ssize_t)sizeof(buf))
			break;
		t0 = clock_ns(CLOCK_MONOTONIC);
		wl_block_fsync(fd);
		add_since(B_FSYNC, t0);
		wl_spin(1000 * 1000);
	}
	close(fd);
	return NULL;
}

WL_FN static int wl_twin_wait(long ns)
{
	struct timespec ts = {.tv_nsec = ns};

	return nanosleep(&ts, NULL);
}

/* Not tail calls (the asm after them): each stays on the stack. */
WL_FN static int wl_block_twin_a(void)
{
	int r = wl_twin_wait(1000 * 1000);

	__asm__ volatile("" ::: "memory");
	return r;
}

WL_FN static int wl_block_twin_b(void)
{
	int r = wl_twin_wait(2000 * 1000);

	__asm__ volatile("" ::: "memory");
	return r;
}

static void *twin_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "wl_twin");
	while (!atomic_load(&stop)) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

		wl_block_twin_a();
		add_since(B_TWIN_A, t0);
		t0 = clock_ns(CLOCK_MONOTONIC);
		wl_block_twin_b();
		add_since(B_TWIN_B, t0);
	}
	return NULL;
}

static void pin_cpu0(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(0, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

WL_FN static void wl_pinned_spin(void)
{
	wl_spin(10 * 1000 * 1000);
}

static void *pinned_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "wl_pinned");
	pin_cpu0();
	while (!atomic_load(&stop))
		wl_pinned_spin();
	return NULL;
}

static void *hog_main(void *arg)
{
	(void)arg;
	pthread_setname_np(pthread_self(), "wl_hog");
	pin_cpu0();
	while (!atomic_load(&stop))
		wl_spin(10 * 1000 * 1000);
	return NULL;
}

/* --pingpong: one byte back and forth, as fast as the scheduler allows. */
static _Atomic uint64_t pp_loops;
static int ping[2], pong[2];

static void *pong_main(void *arg)
{
	char c;

	(void)arg;
	pthread_setname_np(pthread_self(), "wl_pong");
	while (read(ping[0], &c, 1) == 1)
		if (write(pong[1], &c, 1) != 1)
			break;
	return NULL;
}

static int run_pingpong(double seconds)
{
	uint64_t end = clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9), n = 0;
	pthread_t t;
	char c = 'p';

	if (pipe2(ping, O_CLOEXEC) || pipe2(pong, O_CLOEXEC))
		return 1;
	pthread_create(&t, NULL, pong_main, NULL);
	while ((n & 255) || clock_ns(CLOCK_MONOTONIC) < end) {
		if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
			return 1;
		n++;
	}
	close(ping[1]);
	pthread_join(t, NULL);
	atomic_store(&pp_loops, n);
	printf("loops %llu\n", (unsigned long long)n);
	return 0;
}

int main(int argc, char **argv)
{
	void *(*fns[])(void *) = {sleep_main, pipe_main,   feeder_main, mutex_main, mutex_main,
				  fsync_main, pinned_main, hog_main,	twin_main};
	pthread_t th[sizeof(fns) / sizeof(fns[0])];
	double seconds = 4.0;
	bool pingpong = false, wait_go = true;
	char line[16];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc)
			seconds = atof(argv[++i]);
		else if (!strcmp(argv[i], "--pingpong"))
			pingpong = true;
		else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
			dir = argv[++i];
		else if (!strcmp(argv[i], "--no-wait"))
			wait_go = false;
		else {
			fprintf(stderr,
				"usage: %s [--seconds S] [--pingpong] [--dir DIR] [--no-wait]\n",
				argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("pid %d\n", getpid());
	if (wait_go && !fgets(line, sizeof(line), stdin))
		return 1;
	if (pingpong)
		return run_pingpong(seconds);

	if (pipe2(req_pipe, O_CLOEXEC) || pipe2(rep_pipe, O_CLOEXEC))
		return 1;
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		pthread_create(&th[i], NULL, fns[i], NULL);
	wl_spin(0);
	{
		struct timespec ts = {.tv_sec = (time_t)seconds,
				      .tv_nsec = (long)((seconds - (time_t)seconds) * 1e9)};

		nanosleep(&ts, NULL);
	}
	atomic_store(&stop, 1);
	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++)
		pthread_join(th[i], NULL);
	for (int b = 0; b < B_MAX; b++)
		printf("block %s %llu\ncalls %s %llu\n", block_names[b],
		       (unsigned long long)atomic_load(&block_ns[b]), block_names[b],
		       (unsigned long long)atomic_load(&block_calls[b]));
	return 0;
}
