/* SPDX-License-Identifier: MIT */
/*
 * Whole-file reads: the file's bytes into one malloc'd buffer, NUL-terminated
 * (so text can be parsed in place; *ret_len excludes the NUL). Reads to EOF,
 * retrying EINTR and short reads, so /proc and /sys files (st_size 0) work;
 * a regular file's size only sizes the first allocation. Opens with
 * O_CLOEXEC. A file of more than max bytes is -EFBIG (nothing is returned).
 * read_upto() is the read loop under them, for any fd and offset.
 */
#ifndef CPA_FILEIO_H
#define CPA_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/* Keep the first max bytes of a longer file instead of failing with -EFBIG
 * (a process's environ, where the head is what matters). */
#define READ_FULL_TRUNCATE 1u
/* Read from offset 0 with pread, whatever the fd's offset: a /proc or /sys
 * file kept open and read again (the kernel produces its text anew). */
#define READ_FULL_PREAD 2u

/*
 * From an open fd (read from its current offset; the fd stays open) into
 * *buf of *cap bytes, which may start as NULL/0 and is grown with realloc():
 * callers that read the same kind of file often keep one buffer. On error
 * *buf stays valid (and the caller's to free). flags: READ_FULL_*.
 */
int read_full_fd(int fd, unsigned int flags, size_t max, char **buf, size_t *cap, size_t *ret_len);
/* path relative to dirfd (AT_FDCWD: a plain path); buffer as read_full_fd(). */
int read_full_file_at(int dirfd, const char *path, unsigned int flags, size_t max, char **buf,
		      size_t *cap, size_t *ret_len);
/* A fresh buffer in *ret (the caller frees it). */
int read_full_file(const char *path, unsigned int flags, size_t max, char **ret, size_t *ret_len);
/*
 * Up to len bytes into buf: with pread() at off, or off < 0 with read() from
 * the fd's offset; retrying EINTR and short reads, so fewer only at the end of
 * the file. The bytes read, or -errno.
 */
ssize_t read_upto(int fd, void *buf, size_t len, off_t off);

#endif /* CPA_FILEIO_H */
