// SPDX-License-Identifier: MIT
#include "inputfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"

static const char *file_kind(mode_t m)
{
	return S_ISFIFO(m)   ? "a FIFO"
	       : S_ISCHR(m)  ? "a character device"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISSOCK(m) ? "a socket"
			     : "not a file";
}

int input_file__check_trust(const char *what, const struct stat *sb, char *err, size_t errlen)
{
	if (sb->st_uid != 0 && sb->st_uid != geteuid()) {
		snprintf(err, errlen,
			 "%s: owned by uid %u, not by root or uid %u: refused (whoever can write "
			 "it decides how cpa runs)",
			 what, (unsigned int)sb->st_uid, (unsigned int)geteuid());
		return -EPERM;
	}
	if (sb->st_mode & S_IWOTH) {
		snprintf(err, errlen, "%s: writable by anyone (mode %04o): refused", what,
			 (unsigned int)(sb->st_mode & 07777));
		return -EPERM;
	}
	if ((sb->st_mode & S_IWGRP) && sb->st_gid != 0 && sb->st_gid != getegid()) {
		snprintf(err, errlen, "%s: writable by group %u (mode %04o): refused", what,
			 (unsigned int)sb->st_gid, (unsigned int)(sb->st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

int input_file__open(const char *what, const char *path, unsigned int flags, int *ret_fd, char *err,
		     size_t errlen)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	struct stat sb;
	int r;

	if (fd < 0 || fstat(fd, &sb) < 0) {
		r = -errno;
		snprintf(err, errlen, "%s: %s", what, strerror(-r));
		return r;
	}
	if (S_ISDIR(sb.st_mode)) {
		snprintf(err, errlen, "%s: is a directory, not a file", what);
		return -EISDIR;
	}
	if (!S_ISREG(sb.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file (%s): refused", what,
			 file_kind(sb.st_mode));
		return -EINVAL;
	}
	if (flags & INPUT_FILE_TRUSTED) {
		r = input_file__check_trust(what, &sb, err, errlen);
		if (r < 0)
			return r;
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}
