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

#include <stdbool.h>
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

/*
 * Open path (absolute, as the process sees it) under root, where a process's
 * paths resolve: "" is ours; else a directory such as "<proc>/PID/root".
 * Every component resolves inside root: an absolute symlink met on the way
 * (a container's /usr/lib/debug/.build-id/ab/cd.debug -> /opt/x.debug, its
 * /usr/lib -> /) and ".." stop at root, never reach our files
 * (openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), Linux 5.6). Where
 * openat2 is refused (ENOSYS: an older kernel; EPERM: a seccomp profile that
 * predates it) root and path are joined and opened as before, said at debug
 * level once per thread (each thread finds out for itself).
 *
 * Only a regular file is opened (a directory with O_DIRECTORY): whatever is
 * there is first opened O_PATH (no open of a device, no wait on a FIFO) and
 * looked at, then that very inode reopened with flags through
 * /proc/self/fd/N. A FIFO, socket or device node is -EPERM (a process may put
 * one at any path it controls, a root container may mknod), a directory
 * -EISDIR, a symlink with O_NOFOLLOW -ELOOP. With O_PATH in flags the O_PATH
 * fd is returned, whatever the file. flags as open()'s (O_CLOEXEC added);
 * an fd, else -errno (-ENOENT for a path under root that is not absolute).
 */
int proc_root_open(const char *root, const char *path, int flags);

/*
 * stat() of path under root, resolved as proc_root_open() does (one O_PATH
 * openat2 and fstat; "": a plain stat()): flags 0, O_NOFOLLOW (lstat()) or
 * O_DIRECTORY (-ENOTDIR unless a directory). 0, else -errno.
 */
struct stat;
int proc_root_stat(const char *root, const char *path, int flags, struct stat *st);

/*
 * The same in steps, for many paths under one root: root (not "") opened
 * O_PATH as a directory (an fd, else -errno), then proc_root_statat() of
 * each path in it (the second open and the fstat only).
 */
int proc_root_dir(const char *root);
int proc_root_statat(int root_fd, const char *path, int flags, struct stat *st);

/*
 * Gone processes of another mount namespace (docs/unwindd.md, "Binaries of
 * gone processes"). A path resolves the same for every process of one mount
 * namespace (and root): once a process is gone, with its /proc/PID/root, its
 * files are looked up under the root of a live process of its namespace, and
 * taken only when provably the mapped file (dev and inode, or build-id).
 *
 * Mount namespaces are named by their inode (that of /proc/PID/ns/mnt, the
 * kernel's ns.inum, which capture's exec events carry).
 */

/* The mount namespace of pid (proc NULL: "/proc"); 0 when it cannot be told. */
uint32_t proc_mnt_ns(const char *proc, uint32_t pid);

/* Ours (/proc/self/ns/mnt, looked at once per thread); 0 when unknown. */
uint32_t proc_mnt_self(void);

/*
 * Which mount namespace each process exec'd into, by pid, kept past its exit:
 * a direct-mapped table (pid % PROC_MNT_SLOTS), a slot overwritten by the next
 * exec there. A stale entry (a reused pid) costs at most a failed lookup: what
 * it finds is checked against the mapped file.
 */
#define PROC_MNT_SLOTS 4096u
struct proc_mnt_tab {
	struct {
		uint32_t pid, ns;
		bool exited; /* its exit event came: no peer for others */
	} slot[PROC_MNT_SLOTS];
};

/* pid exec'd (or was forked) into ns (0: unknown). */
void proc_mnt_note(struct proc_mnt_tab *t, uint32_t pid, uint32_t ns);
/* pid exited: its namespace stays known, it is no peer any more. */
void proc_mnt_exit(struct proc_mnt_tab *t, uint32_t pid);
/* pid's namespace as noted, 0 when unknown. */
uint32_t proc_mnt_of(const struct proc_mnt_tab *t, uint32_t pid);

/*
 * Every process of <proc> (NULL: "/proc") noted in t with its namespace, one
 * stat each: those that exec'd before we started have no exec event to tell
 * it (docs/unwindd.md, "Seed"). Returns how many were noted.
 */
uint32_t proc_mnt_seed(const char *proc, struct proc_mnt_tab *t);

/*
 * A live process in mount namespace ns other than ours (0, ours or none
 * found: 0). The one found last for ns is kept (per thread, PROC_MNT_PEERS
 * slots, open addressing by ns) and checked with one stat per call; else a
 * process tab (may
 * be NULL) noted in ns and saw no exit of (at most PROC_MNT_TRIES of them
 * checked: a stage behind its events takes the gone for alive); else one
 * walk of <proc> notes a process of each namespace it meets (past
 * PROC_MNT_PEERS of them a collision keeps the first, but ns wins): the processes of a namespace
 * that exec'd before we started (those the seed noted are in tab). Walks are PROC_MNT_WALK_NS apart
 * at least, however many namespaces come and go (a sandboxed build makes one per action), and
 * PROC_MNT_WALK_COST times the last one's duration: at most 0.5 % of a CPU on a host of any size.
 */
#define PROC_MNT_PEERS	   1024u
#define PROC_MNT_TRIES	   16u
#define PROC_MNT_WALK_NS   1000000000ull
#define PROC_MNT_WALK_COST 200u /* a walk's duration times this to the next */
uint32_t proc_mnt_peer(const char *proc, const struct proc_mnt_tab *tab, uint32_t ns);

#endif /* CPA_PROCROOT_H */
