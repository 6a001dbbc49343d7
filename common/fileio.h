/* SPDX-License-Identifier: MIT */
/*
 * Whole-file reads: the file's bytes into one malloc'd buffer, NUL-terminated
 * (so text can be parsed in place; *ret_len excludes the NUL). Reads to EOF,
 * retrying EINTR and short reads, so /proc and /sys files (st_size 0) work;
 * a regular file's size only sizes the first allocation. Opens with
 * O_CLOEXEC. A file of more than max bytes is -EFBIG (nothing is returned).
 */
#ifndef CPA_FILEIO_H
#define CPA_FILEIO_H

#include <stddef.h>

/*
 * From an open fd (read from its current offset; the fd stays open) into
 * *buf of *cap bytes, which may start as NULL/0 and is grown with realloc():
 * callers that read the same kind of file often keep one buffer. On error
 * *buf stays valid (and the caller's to free).
 */
int read_full_fd(int fd, size_t max, char **buf, size_t *cap, size_t *ret_len);
/* path relative to dirfd (AT_FDCWD: a plain path); open_flags are added to
 * O_RDONLY | O_CLOEXEC (e.g. O_NOFOLLOW). Buffer as read_full_fd(). */
int read_full_file_at(int dirfd, const char *path, int open_flags, size_t max, char **buf,
		      size_t *cap, size_t *ret_len);
/* A fresh buffer in *ret (the caller frees it). */
int read_full_file(const char *path, size_t max, char **ret, size_t *ret_len);

#endif /* CPA_FILEIO_H */
