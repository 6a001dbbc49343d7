// SPDX-License-Identifier: MIT
/*
 * bench_root_stat: what unwindd pays per mapping event of a process in
 * another mount namespace to find the file the process sees at the mapped
 * path (unwindd/ucache.c bin_of_event(), common/procroot.h), CPU time per
 * lookup, side by side in one run:
 *
 *   stat        stat("<proc>/PID/root" + path): before the lookups resolved
 *               inside the root (an absolute symlink led to our files)
 *   root_stat   proc_root_stat(): the root opened O_PATH, openat2 of the
 *               path in it, fstat
 *   root held   proc_root_dir() once per process, proc_root_statat() for
 *               each path (unwindd holds the root for a burst: root_fd())
 *
 * Each round starts PROCS fresh processes (`unshare -m sleep`: cold
 * /proc/PID, as after an exec) per way and looks up the 3 files a dynamic
 * binary maps, twice (6 events a process, as after an exec). Usage:
 * bench_root_stat [rounds] (default 5); the median of rounds, µs per lookup
 * (CLOCK_THREAD_CPUTIME_ID: the neighbours' load does not count). Root.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/procroot.h"
#include "common/timeutil.h"

#define PROCS 200
#define WAYS  3

static const char *const files[] = {"/usr/bin/sleep", "/usr/lib/x86_64-linux-gnu/libc.so.6",
				    "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"};
#define NFILES ((int)(sizeof(files) / sizeof(files[0])))

/* One process's lookups, the way way: how many found. */
static int lookups(int way, pid_t pid)
{
	char root[64], full[300];
	struct stat st;
	int found = 0, dfd = -1;

	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	for (int i = 0; i < 2 * NFILES; i++) {
		const char *path = files[i % NFILES];

		if (way == 0) {
			snprintf(full, sizeof(full), "%s%s", root, path);
			found += stat(full, &st) == 0;
		} else if (way == 1) {
			found += proc_root_stat(root, path, 0, &st) == 0;
		} else {
			if (dfd < 0)
				dfd = proc_root_dir(root);
			found += dfd >= 0 && proc_root_statat(dfd, path, 0, &st) == 0;
		}
	}
	if (dfd >= 0)
		close(dfd);
	return found;
}

/* µs of CPU per lookup over PROCS fresh processes; -1 when one failed. */
static double round_of(int way)
{
	pid_t pids[PROCS];
	uint64_t t0;
	int found = 0, i;

	for (i = 0; i < PROCS; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			execlp("unshare", "unshare", "-m", "sleep", "60", (char *)NULL);
			_exit(127);
		}
	}
	sleep(1); /* all exec'd into their namespace */
	t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	for (i = 0; i < PROCS; i++)
		found += lookups(way, pids[i]);
	t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	for (i = 0; i < PROCS; i++)
		kill(pids[i], SIGKILL);
	for (i = 0; i < PROCS; i++)
		waitpid(pids[i], NULL, 0);
	return found == PROCS * 2 * NFILES ? (double)t0 / 1e3 / (PROCS * 2 * NFILES) : -1;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	static const char *const names[WAYS] = {"stat", "root_stat", "root held"};
	int rounds = argc > 1 ? atoi(argv[1]) : 5;
	double *us[WAYS];

	if (rounds < 1 || geteuid() != 0) {
		fprintf(stderr, "usage: bench_root_stat [rounds] (as root)\n");
		return 2;
	}
	for (int w = 0; w < WAYS; w++)
		us[w] = calloc((size_t)rounds, sizeof(double));
	for (int r = 0; r < rounds; r++)
		for (int w = 0; w < WAYS; w++) /* by turns */
			if ((us[w][r] = round_of(w)) < 0) {
				fprintf(stderr, "%s: a lookup failed\n", names[w]);
				return 1;
			}
	printf("%-10s %8s %8s %8s  (us of CPU per lookup, %d rounds of %d processes)\n", "way",
	       "median", "min", "max", rounds, PROCS);
	for (int w = 0; w < WAYS; w++) {
		qsort(us[w], (size_t)rounds, sizeof(double), cmp_double);
		printf("%-10s %8.2f %8.2f %8.2f\n", names[w], us[w][rounds / 2], us[w][0],
		       us[w][rounds - 1]);
		free(us[w]);
	}
	return 0;
}
