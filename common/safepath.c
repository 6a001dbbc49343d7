// SPDX-License-Identifier: MIT
/* Paths cpa writes, opened without following another user's links: see safepath.h. */
#include "safepath.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "macro.h"

#ifndef CPA_GROUP
#define CPA_GROUP "cpa"
#endif

/* Symlinks one open may follow, as the kernel's MAXSYMLINKS. */
#define SAFE_PATH_MAX_LINKS 40

const char *cpa_group_name(void)
{
	return CPA_GROUP;
}

gid_t cpa_group_gid(void)
{
	struct group *g = getgrnam(CPA_GROUP);

	return g ? g->gr_gid : (gid_t)-1;
}

bool cpa_group_member(void)
{
	gid_t gid = cpa_group_gid(), groups[NGROUPS_MAX];
	int n;

	if (getuid() == 0)
		return true;
	if (gid == (gid_t)-1)
		return false;
	if (getgid() == gid)
		return true;
	n = getgroups(NGROUPS_MAX, groups);
	for (int i = 0; i < n; i++)
		if (groups[i] == gid)
			return true;
	return false;
}

void cpa_group_own(int fd)
{
	gid_t gid = cpa_group_gid();
	struct stat st;

	/* Best effort: the modes alone still keep others out. */
	if (gid == (gid_t)-1 || !cpa_group_member() || fchown(fd, (uid_t)-1, gid) < 0)
		return;
	/* A directory passes its group on to what is created in it. */
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode))
		(void)fchmod(fd, (st.st_mode & 07777) | S_ISGID);
}

static bool owner_ok(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* A directory whose entries another user may have placed. */
static bool dir_shared(const struct stat *d)
{
	return (d->st_mode & (S_IWGRP | S_IWOTH)) || !owner_ok(d->st_uid);
}

/* The words of common/inputfile.c's trust rule, for one rule in every message. */
static int refuse(char *err, size_t errlen, const char *what, const char *kind, const char *shown,
		  uid_t uid)
{
	snprintf(err, errlen, "%s: %s '%s' is owned by uid %u, not by root or uid %u: refused",
		 what, kind, shown, (unsigned int)uid, (unsigned int)geteuid());
	return -EPERM;
}

static int fail(char *err, size_t errlen, const char *what, const char *shown, int r)
{
	snprintf(err, errlen, "%s: '%s': %s", what, shown, strerror(-r));
	return r;
}

/* Append component c to the path shown in messages. */
static void shown_add(char *shown, size_t len, const char *c)
{
	size_t n = strlen(shown);

	if (n && shown[n - 1] != '/' && n + 1 < len)
		shown[n++] = '/', shown[n] = 0;
	snprintf(shown + n, len - n, "%s", c);
}

/* The target of the symlink name in dfd (its stat in st), if we may follow it. */
static int link_read(int dfd, const char *name, const struct stat *st, const char *what,
		     const char *shown, int *links, char *target, size_t len, char *err,
		     size_t errlen)
{
	ssize_t tl;

	if (!owner_ok(st->st_uid))
		return refuse(err, errlen, what, "symlink", shown, st->st_uid);
	if (++*links > SAFE_PATH_MAX_LINKS)
		return fail(err, errlen, what, shown, -ELOOP);
	tl = readlinkat(dfd, name, target, len - 1);
	if (tl < 0)
		return fail(err, errlen, what, shown, -errno);
	target[tl] = 0;
	return 0;
}

/*
 * Walk path from base (an fd on a directory; an absolute path restarts at /)
 * to the directory it names: its O_PATH fd and stat. *links counts the
 * symlinks followed so far.
 */
static int walk(int base, const char *what, const char *path, bool mkdir_p, mode_t mode, int *links,
		struct stat *ret_st, char *err, size_t errlen)
{
	_cleanup_free_ char *rest = NULL;
	char shown[PATH_MAX], comp[NAME_MAX + 1];
	_cleanup_close_ int dfd = -1;
	struct stat dst;
	size_t off = 0;

	rest = strdup(path);
	if (!rest)
		return fail(err, errlen, what, path, -ENOMEM);
	if (*path == '/' || base == AT_FDCWD) {
		dfd = open(*path == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		snprintf(shown, sizeof(shown), "%s", *path == '/' ? "/" : "");
	} else {
		dfd = openat(base, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		*shown = 0;
	}
	if (dfd < 0 || fstat(dfd, &dst) < 0)
		return fail(err, errlen, what, path, -errno);

	for (;;) {
		struct stat est, nst;
		size_t n;
		int nfd, tries = 0;

		while (rest[off] == '/')
			off++;
		if (!rest[off])
			break;
		n = strcspn(rest + off, "/");
		if (n > NAME_MAX)
			return fail(err, errlen, what, path, -ENAMETOOLONG);
		memcpy(comp, rest + off, n);
		comp[n] = 0;
		off += n;
		if (!strcmp(comp, "."))
			continue;
		shown_add(shown, sizeof(shown), comp);
again:
		if (fstatat(dfd, comp, &est, AT_SYMLINK_NOFOLLOW) < 0) {
			int r = -errno;

			if (r != -ENOENT || !mkdir_p)
				return fail(err, errlen, what, shown, r);
			if (mkdirat(dfd, comp, mode) < 0 && errno != EEXIST)
				return fail(err, errlen, what, shown, -errno);
			if (++tries > 3)
				return fail(err, errlen, what, shown, -EAGAIN);
			nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (nfd >= 0) {
				cpa_group_own(nfd);
				close(nfd);
			}
			goto again;
		}
		if (S_ISLNK(est.st_mode)) {
			char target[PATH_MAX];
			char *nrest;
			int r = link_read(dfd, comp, &est, what, shown, links, target,
					  sizeof(target), err, errlen);

			if (r < 0)
				return r;
			if (asprintf(&nrest, "%s/%s", target, rest + off) < 0)
				return fail(err, errlen, what, shown, -ENOMEM);
			free(rest);
			rest = nrest;
			off = 0;
			if (*target == '/') {
				close(dfd);
				dfd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
				if (dfd < 0 || fstat(dfd, &dst) < 0)
					return fail(err, errlen, what, "/", -errno);
			}
			continue;
		}
		if (dir_shared(&dst) && !owner_ok(est.st_uid))
			return refuse(err, errlen, what, "directory", shown, est.st_uid);
		if (!S_ISDIR(est.st_mode))
			return fail(err, errlen, what, shown, -ENOTDIR);
		nfd = openat(dfd, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0)
			return fail(err, errlen, what, shown, -errno);
		if (fstat(nfd, &nst) < 0 || nst.st_dev != est.st_dev || nst.st_ino != est.st_ino) {
			/* replaced between the stat and the open: look again */
			close(nfd);
			if (++tries > 3)
				return fail(err, errlen, what, shown, -EAGAIN);
			goto again;
		}
		close(dfd);
		dfd = nfd;
		dst = nst;
	}
	*ret_st = dst;
	return TAKE_FD(dfd);
}

int safe_path__dir(const char *path, bool mkdir_p, mode_t mode, char *err, size_t errlen)
{
	struct stat st;
	int links = 0, fd, rfd;

	fd = walk(AT_FDCWD, path, path, mkdir_p, mode, &links, &st, err, errlen);
	if (fd < 0)
		return fd;
	/* A real fd when we may read it (flock, getdents); else the O_PATH one. */
	rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rfd < 0)
		return fd;
	close(fd);
	return rfd;
}

/* Split path into its directory (into dir) and last component (into leaf). */
static int split(const char *path, char *dir, size_t dirlen, char *leaf, size_t leaflen)
{
	size_t len = strlen(path), l;
	const char *s;

	while (len > 1 && path[len - 1] == '/')
		len--;
	if (!len || len >= dirlen)
		return -EINVAL;
	for (s = path + len; s > path && s[-1] != '/'; s--)
		;
	l = (size_t)(path + len - s);
	if (!l || l >= leaflen || l > NAME_MAX || (l == 1 && *s == '.') ||
	    (l == 2 && !memcmp(s, "..", 2)))
		return -EINVAL;
	memcpy(leaf, s, l);
	leaf[l] = 0;
	if (s == path)
		snprintf(dir, dirlen, ".");
	else if (s == path + 1)
		snprintf(dir, dirlen, "/");
	else
		snprintf(dir, dirlen, "%.*s", (int)(s - path - 1), path);
	return 0;
}

static int parent_at(int base, const char *what, const char *path, int *links, int *ret_dfd,
		     char *leaf, size_t leaflen, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	struct stat st;
	int r, fd;

	r = split(path, dir, sizeof(dir), leaf, leaflen);
	if (r < 0)
		return fail(err, errlen, what, path, r);
	fd = walk(base, what, dir, false, 0, links, &st, err, errlen);
	if (fd < 0)
		return fd;
	*ret_dfd = fd;
	return 0;
}

int safe_path__parent(const char *path, int *ret_dfd, char *leaf, size_t leaflen, char *err,
		      size_t errlen)
{
	int links = 0;

	return parent_at(AT_FDCWD, path, path, &links, ret_dfd, leaf, leaflen, err, errlen);
}

/* The checks on an opened file: regular, one link, owner as the rule says. */
static int check_file(int fd, const struct stat *dst, const char *what, const char *name, char *err,
		      size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return fail(err, errlen, what, name, -errno);
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: '%s' is not a regular file: refused", what, name);
		return -EPERM;
	}
	if (dir_shared(dst) && !owner_ok(st.st_uid))
		return refuse(err, errlen, what, "file", name, st.st_uid);
	if (st.st_nlink > 1) {
		snprintf(err, errlen, "%s: '%s' has %u hard links: refused", what, name,
			 (unsigned int)st.st_nlink);
		return -EPERM;
	}
	return 0;
}

static int openat_links(int dfd, const char *what, const char *name, int flags, mode_t mode,
			int *links, char *err, size_t errlen)
{
	_cleanup_close_ int fd = -1;
	struct stat dst, lst;
	int r;

	if (fstat(dfd, &dst) < 0)
		return fail(err, errlen, what, name, -errno);
	if (fstatat(dfd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
		/* A link of ours or root's: where it leads, walked the same way. */
		char target[PATH_MAX], leaf[NAME_MAX + 1];
		_cleanup_close_ int tdfd = -1;

		r = link_read(dfd, name, &lst, what, name, links, target, sizeof(target), err,
			      errlen);
		if (r < 0)
			return r;
		r = parent_at(dfd, what, target, links, &tdfd, leaf, sizeof(leaf), err, errlen);
		if (r < 0)
			return r;
		return openat_links(tdfd, what, leaf, flags, mode, links, err, errlen);
	}
	fd = openat(dfd, name, (flags & ~O_TRUNC) | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
	if (fd < 0)
		return fail(err, errlen, what, name, -errno);
	r = check_file(fd, &dst, what, name, err, errlen);
	if (r < 0)
		return r;
	if ((flags & O_TRUNC) && ftruncate(fd, 0) < 0)
		return fail(err, errlen, what, name, -errno);
	return TAKE_FD(fd);
}

int safe_path__openat(int dfd, const char *what, const char *name, int flags, mode_t mode,
		      char *err, size_t errlen)
{
	int links = 0;

	return openat_links(dfd, what, name, flags, mode, &links, err, errlen);
}

int safe_path__open(const char *path, int flags, mode_t mode, char *err, size_t errlen)
{
	char leaf[NAME_MAX + 1];
	_cleanup_close_ int dfd = -1;
	int links = 0, r;

	r = parent_at(AT_FDCWD, path, path, &links, &dfd, leaf, sizeof(leaf), err, errlen);
	if (r < 0)
		return r;
	r = openat_links(dfd, path, leaf, flags, mode, &links, err, errlen);
	if (r >= 0 && (flags & O_CREAT))
		cpa_group_own(r);
	return r;
}

int safe_path__check(const char *path, char *err, size_t errlen)
{
	char leaf[NAME_MAX + 1];
	_cleanup_close_ int dfd = -1;
	struct stat dst, st;
	int links = 0, r;

	r = parent_at(AT_FDCWD, path, path, &links, &dfd, leaf, sizeof(leaf), err, errlen);
	if (r < 0)
		return r;
	if (fstat(dfd, &dst) < 0)
		return fail(err, errlen, path, path, -errno);
	if (fstatat(dfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : fail(err, errlen, path, leaf, -errno);
	if (S_ISLNK(st.st_mode) && !owner_ok(st.st_uid))
		return refuse(err, errlen, path, "symlink", leaf, st.st_uid);
	if (S_ISREG(st.st_mode) && dir_shared(&dst) && !owner_ok(st.st_uid))
		return refuse(err, errlen, path, "file", leaf, st.st_uid);
	if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
		snprintf(err, errlen, "%s: '%s' has %u hard links: refused", path, leaf,
			 (unsigned int)st.st_nlink);
		return -EPERM;
	}
	return 0;
}

int safe_path__tmpfile(int dfd, const char *leaf, mode_t mode, char *tmp, size_t tmplen, char *err,
		       size_t errlen)
{
	for (int i = 0; i < 100; i++) {
		int fd;

		if ((size_t)snprintf(tmp, tmplen, ".%s.%06x", leaf,
				     (unsigned int)((unsigned int)random() ^
						    (unsigned int)getpid() ^ (unsigned int)i) &
					     0xffffff) >= tmplen)
			return fail(err, errlen, leaf, leaf, -ENAMETOOLONG);
		fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd >= 0) {
			cpa_group_own(fd);
			return fd;
		}
		if (errno != EEXIST)
			return fail(err, errlen, leaf, tmp, -errno);
	}
	return fail(err, errlen, leaf, tmp, -EEXIST);
}
