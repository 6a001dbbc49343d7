// SPDX-License-Identifier: MIT
#include "procroot.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/stat.h>

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int proc_root_kind(const char *proc, uint32_t pid)
{
	/* Ours do not change while we run: looked at once per thread. */
	static _Thread_local struct stat self_root, self_mnt;
	static _Thread_local bool have_root, have_mnt, looked;
	struct stat st;
	char path[300];

	if (!looked) {
		have_root = stat("/", &self_root) == 0;
		have_mnt = stat("/proc/self/ns/mnt", &self_mnt) == 0;
		looked = true;
	}
	if (!proc)
		proc = "/proc";
	snprintf(path, sizeof(path), "%s/%u/root", proc, pid);
	if (stat(path, &st) < 0)
		return -errno;
	if (!have_root || !same_file(&st, &self_root))
		return PROC_ROOT_OTHER;
	/* The same root directory seen from another mount namespace may have
	 * other mounts under it (`unshare -m` and a tmpfs over a directory). */
	snprintf(path, sizeof(path), "%s/%u/ns/mnt", proc, pid);
	if (stat(path, &st) < 0) {
		if (errno != ENOENT)
			return -errno;
		/* Gone meanwhile, or a tree without namespaces. */
		snprintf(path, sizeof(path), "%s/%u/root", proc, pid);
		return stat(path, &st) < 0 ? -errno : PROC_ROOT_OURS;
	}
	return have_mnt && same_file(&st, &self_mnt) ? PROC_ROOT_OURS : PROC_ROOT_OTHER;
}
