// SPDX-License-Identifier: MIT
/*
 * cpa-wl-malloc FILE: malloc() + free() in a loop until killed, the number
 * of malloc() calls so far in the first 8 bytes of FILE (a shared mapping,
 * updated every 256 calls), so that a test or bench reads the rate from the
 * outside without stopping it. Prints "pid N" once the loop runs.
 *
 * The workload of the probe budget (test_probe budget, bench_probe): a
 * uprobe on libc's malloc traps on every call.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	void *volatile sink;
	volatile uint64_t *count;
	uint64_t n = 0;
	int fd;

	if (argc != 2) {
		fprintf(stderr, "usage: %s COUNT_FILE\n", argv[0]);
		return 2;
	}
	fd = open(argv[1], O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, 4096) < 0) {
		perror(argv[1]);
		return 1;
	}
	count = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (count == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	*count = 0;
	printf("pid %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		for (int i = 0; i < 256; i++) {
			sink = malloc(16 + (size_t)(i & 7));
			free(sink);
		}
		n += 256;
		*count = n;
	}
}
