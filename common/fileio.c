// SPDX-License-Identifier: MIT
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "array.h"
#include "macro.h"

#define READ_FULL_FIRST (4u << 10) /* first buffer when the size is unknown */

ssize_t read_upto(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = off < 0 ? read(fd, (char *)buf + done, len - done)
				    : pread(fd, (char *)buf + done, len - done, off + (off_t)done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int read_full_fd(int fd, unsigned int flags, size_t max, char **buf, size_t *cap, size_t *ret_len)
{
	size_t len = 0, first = READ_FULL_FIRST, limit;
	struct stat st;
	int r;

	if (max > SIZE_MAX / 2)
		max = SIZE_MAX / 2; /* limit + 1 below must not wrap */
	/* Bytes we may read: one past max tells a longer file, unless we keep its head. */
	limit = flags & READ_FULL_TRUNCATE ? max : max + 1;
	/* A regular file says its size: read it in one go (+1 for the NUL, +1 to see EOF). */
	if (!(flags & READ_FULL_PREAD) && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
	    st.st_size > 0)
		first = (uint64_t)st.st_size < limit ? (size_t)st.st_size + 2 : limit + 1;
	first = MIN(first, limit + 1);
	if (!*buf || *cap < first) {
		r = array_resize((void **)buf, cap, first, 1);
		if (r < 0)
			return r;
	}
	while (len < limit) {
		size_t want;
		ssize_t n;

		if (*cap - len < 2) { /* room for one byte and the NUL */
			r = array_resize((void **)buf, cap, MIN(*cap * 2, limit + 1), 1);
			if (r < 0)
				return r;
		}
		want = MIN(*cap - len - 1, limit - len);
		n = read_upto(fd, *buf + len, want, flags & READ_FULL_PREAD ? (off_t)len : -1);
		if (n < 0)
			return (int)n;
		len += (size_t)n;
		if ((size_t)n < want)
			break; /* the end of the file */
	}
	if (len > max)
		return -EFBIG;
	(*buf)[len] = '\0';
	*ret_len = len;
	return 0;
}

int read_full_file_at(int dirfd, const char *path, unsigned int flags, size_t max, char **buf,
		      size_t *cap, size_t *ret_len)
{
	_cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	return read_full_fd(fd, flags, max, buf, cap, ret_len);
}

int read_full_file(const char *path, unsigned int flags, size_t max, char **ret, size_t *ret_len)
{
	char *buf = NULL;
	size_t cap = 0;
	int r;

	r = read_full_file_at(AT_FDCWD, path, flags, max, &buf, &cap, ret_len);
	if (r < 0) {
		free(buf);
		return r;
	}
	*ret = buf;
	return 0;
}
