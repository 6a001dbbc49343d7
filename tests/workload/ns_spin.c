// SPDX-License-Identifier: MIT
/*
 * cpa-ns-spin-inside / cpa-ns-spin-host: the same program under two sets of
 * names (NS_LEAF, NS_MID), for test_priv's mount namespace case: one is
 * what a process in its own namespace runs at a path, the other what the
 * host has at the same path. Spins for argv[1] seconds (CPU time). With
 * argv[2] and argv[3]: then creates the file argv[2] and sleeps until the
 * file argv[3] exists (at most 120 s), so that the test reads the profile
 * while the process still lives.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static __attribute__((noinline)) void NS_LEAF(double until)
{
	while (cpu_s() < until)
		for (unsigned int i = 0; i < 100000; i++)
			sink += i;
}

static __attribute__((noinline)) void NS_MID(double until)
{
	NS_LEAF(until);
	sink++;
}

int main(int argc, char **argv)
{
	NS_MID(cpu_s() + (argc > 1 ? atof(argv[1]) : 1.0));
	if (argc > 3) {
		int fd = open(argv[2], O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

		if (fd < 0)
			return 1;
		close(fd);
		for (int i = 0; i < 6000 && access(argv[3], F_OK); i++)
			usleep(20000);
	}
	return 0;
}
