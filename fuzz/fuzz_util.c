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
#include "shm/records.h"
#include "shm/ring.h"

static char scratch[PATH_MAX];

static void scratch_rm(void)
{
	if (scratch[0])
		fuzz__rm_rf(scratch);
}

const char *fuzz__dir(void)
{
	if (!scratch[0]) {
		const char *tmp = getenv("TMPDIR");

		snprintf(scratch, sizeof(scratch), "%s/cpa-fuzz-XXXXXX",
			 tmp && *tmp ? tmp : "/tmp");
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

void fuzz__feed(const uint8_t *data, size_t size, struct shm_ring_prod *p,
		void (*take)(void *ctx, bool tick), void *ctx)
{
	size_t pos = 0;

	while (pos + 4 <= size) {
		uint16_t type, len;
		void *d;

		memcpy(&type, data + pos, 2);
		memcpy(&len, data + pos + 2, 2);
		pos += 4;
		if (len > size - pos)
			len = (uint16_t)(size - pos);
		if (shm_ring__reserve_sp(p, len, type, &d) < 0) {
			/* full: let the consumer take what is there */
			shm_ring__commit_sp(p);
			take(ctx, false);
			if (shm_ring__reserve_sp(p, len, type, &d) < 0)
				break;
		}
		memcpy(d, data + pos, len);
		pos += len;
		if (type == CPA_REC_LOSS || (pos & 0x3ff) < 4) {
			shm_ring__commit_sp(p);
			take(ctx, true);
		}
	}
	shm_ring__commit_sp(p);
}

uint64_t fuzz__line_addr(const char **pos, const char *end)
{
	const char *p = *pos, *eol = memchr(p, '\n', (size_t)(end - p));
	char num[17];
	size_t n = 0;

	if (p + 2 <= end && p[0] == '0' && p[1] == 'x')
		p += 2;
	while (p + n < end && n < 16 && p[n] && strchr("0123456789abcdefABCDEF", p[n]))
		n++;
	memcpy(num, p, n);
	num[n] = 0;
	*pos = eol ? eol + 1 : end;
	return strtoull(num, NULL, 16);
}
