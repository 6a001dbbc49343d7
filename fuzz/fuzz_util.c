/* SPDX-License-Identifier: MIT */
/* Helpers of the fuzz targets (fuzz_util.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_util.h"

static char scratch[64];

static void scratch_rm(void)
{
	if (scratch[0])
		fuzz__rm_rf(scratch);
}

const char *fuzz__dir(void)
{
	if (!scratch[0]) {
		snprintf(scratch, sizeof(scratch), "/tmp/cpa-fuzz-XXXXXX");
		if (!mkdtemp(scratch)) {
			perror("fuzz: mkdtemp");
			exit(1);
		}
		atexit(scratch_rm);
	}
	return scratch;
}

static int write_all(int fd, const void *data, size_t size)
{
	const char *p = data;

	while (size) {
		ssize_t n = write(fd, p, size);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		size -= (size_t)n;
	}
	return 0;
}

void fuzz__write(const char *name, const void *data, size_t size, char *buf, size_t len)
{
	int fd;

	snprintf(buf, len, "%s/%s", fuzz__dir(), name);
	fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write_all(fd, data, size) < 0) {
		perror("fuzz: write");
		exit(1);
	}
	close(fd);
}

int fuzz__memfd(const void *data, size_t size)
{
	int fd = memfd_create("cpa-fuzz", MFD_CLOEXEC);

	if (fd < 0 || write_all(fd, data, size) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		perror("fuzz: memfd");
		exit(1);
	}
	return fd;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void fuzz__rm_rf(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
