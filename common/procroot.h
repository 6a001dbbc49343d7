/* SPDX-License-Identifier: MIT */
/*
 * Whose files a process sees: the stages that read other processes' binaries
 * (unwindd, symd) open them through /proc/PID/map_files or /proc/PID/root,
 * and a path as we see it only where it names the same file. A process in
 * another mount namespace (a container, `unshare -m`) or under another root
 * (chroot) may see another file, or none, at the same path.
 */
#ifndef CPA_PROCROOT_H
#define CPA_PROCROOT_H

#include <stdint.h>

enum {
	PROC_ROOT_OURS = 0,  /* same mount namespace and root as ours */
	PROC_ROOT_OTHER = 1, /* its own: look up its paths under /proc/PID/root */
};

/*
 * Where pid's paths resolve, from <proc>/PID/root and <proc>/PID/ns/mnt (proc
 * NULL: "/proc"): PROC_ROOT_OURS or PROC_ROOT_OTHER, -errno when it cannot
 * be told (the process is gone: -ENOENT; no right to look: -EACCES). A proc
 * without ns/mnt (a test's scratch tree) compares the roots only.
 */
int proc_root_kind(const char *proc, uint32_t pid);

#endif /* CPA_PROCROOT_H */
