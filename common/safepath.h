/* SPDX-License-Identifier: MIT */
/*
 * Paths cpa writes (store dir, pid and lock files, dumps, exports, push's
 * position): opened without following what another user planted, as
 * systemd's chase() and logrotate do. The walk starts at / (absolute path)
 * or the working directory (relative) and opens one component at a time
 * with O_NOFOLLOW, never letting the kernel resolve a link. The rule:
 *  - a symlink is followed only if owned by root or by us (euid);
 *  - an existing entry (directory or file) in a directory others may write
 *    (group or other write bit, sticky or not) or owned by another user must
 *    be owned by root or by us;
 *  - the file written is a regular file, opened O_NOFOLLOW, with one link
 *    (not a hard link planted to another file); O_TRUNC is applied only once
 *    the opened file passed the checks.
 * Every refusal is -EPERM (or -ELOOP, -ENOTDIR...) with one line in err that
 * names the path and the owner. Library code: no logging.
 *
 * The install's group (CPA_GROUP, a CMake cache variable, default "cpa")
 * owns what cpa creates: directories 0750, files 0640 (cpa_umask()).
 */
#ifndef CPA_SAFEPATH_H
#define CPA_SAFEPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The umask for every file cpa creates: 0027 (directories 0750, files 0640). */
#define CPA_UMASK 0027

/* The install's group's name (CPA_GROUP). */
const char *cpa_group_name(void);

/* The gid of the install's group (CPA_GROUP), or (gid_t)-1 when the host has none. */
gid_t cpa_group_gid(void);

/* Whether the real user is root or a member of the install's group. */
bool cpa_group_member(void);

/* Give fd (a file or directory cpa just created) to the install's group when
 * the host has it and we may (root, or a member); best effort. */
void cpa_group_own(int fd);

/*
 * The directory path, walked safely; with mkdir_p its missing components are
 * created with mode (and given to the install's group). An O_DIRECTORY fd
 * (O_RDONLY, or O_PATH when we may only search it), or -errno with the line
 * in err.
 */
int safe_path__dir(const char *path, bool mkdir_p, mode_t mode, char *err, size_t errlen);

/*
 * The directory that holds path's last component, walked safely: its fd, and
 * the last component in leaf (at most NAME_MAX + 1 bytes). For "create a
 * temp file beside the target, then renameat()": safe_path__parent(), then
 * safe_path__tmpfile(dfd, leaf...), write, renameat(dfd, tmp, dfd, leaf).
 */
int safe_path__parent(const char *path, int *ret_dfd, char *leaf, size_t leaflen, char *err,
		      size_t errlen);

/*
 * Open name in dfd for writing: flags are open(2)'s (O_CREAT, O_TRUNC,
 * O_APPEND, O_RDWR/O_WRONLY, O_EXCL); O_NOFOLLOW | O_CLOEXEC are added.
 * what names the path in err. The fd, or -errno.
 */
int safe_path__openat(int dfd, const char *what, const char *name, int flags, mode_t mode,
		      char *err, size_t errlen);

/* safe_path__parent() + safe_path__openat(): open path for writing. */
int safe_path__open(const char *path, int flags, mode_t mode, char *err, size_t errlen);

/*
 * Whether path could be written now under the rule, without creating it:
 * 0, or -errno with the line in err. For a check up front; the write itself
 * still goes through safe_path__open() or safe_path__parent().
 */
int safe_path__check(const char *path, char *err, size_t errlen);

/*
 * A new file beside leaf in dfd (".<leaf>.XXXXXX", O_EXCL | O_NOFOLLOW), its
 * name in tmp: the fd, or -errno. The caller writes it, then
 * renameat(dfd, tmp, dfd, leaf), or unlinkat(dfd, tmp, 0) on failure.
 */
int safe_path__tmpfile(int dfd, const char *leaf, mode_t mode, char *tmp, size_t tmplen, char *err,
		       size_t errlen);

#endif /* CPA_SAFEPATH_H */
