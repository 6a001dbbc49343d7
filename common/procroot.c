// SPDX-License-Identifier: MIT
#include "procroot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "timeutil.h"

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

/* openat2 refused once (per thread): ENOSYS, or EPERM from a seccomp
 * profile that predates it (Docker's before 20.10). */
static _Thread_local bool no_openat2;

/* path (absolute) under the directory dfd as an O_PATH fd (of flags,
 * O_NOFOLLOW and O_DIRECTORY kept): nothing opened yet, whatever it is. */
static int path_fd_at(int dfd, const char *path, int flags)
{
	int pflags = O_PATH | O_CLOEXEC | (flags & (O_NOFOLLOW | O_DIRECTORY));
	struct open_how how = {
		.flags = (uint64_t)pflags,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd = -1;

	if (path[0] != '/')
		return -ENOENT; /* "[vdso]", a name: no file under root */
	if (!no_openat2) {
		/* EAGAIN: a rename or mount under root raced the walk. */
		for (int i = 0; i < 3; i++) {
			fd = (int)syscall(SYS_openat2, dfd, path, &how, sizeof(how));
			if (fd >= 0 || errno != EAGAIN)
				break;
		}
		if (fd >= 0)
			return fd;
		if (errno != ENOSYS && errno != EPERM)
			return -errno;
		/* EPERM: openat2 itself refused (a seccomp filter; O_PATH
		 * needs no permission on the file, nor do the resolve flags). */
		log_debug("openat2: %s: this thread's lookups of a process's paths resolve as "
			  "<root><path> (absolute symlinks in our root)",
			  strerror(errno));
		no_openat2 = true;
	}
	/* As <root><path> would: relative to root, absolute links in ours. */
	path += strspn(path, "/");
	fd = openat(dfd, path[0] ? path : ".", pflags);
	return fd < 0 ? -errno : fd;
}

int proc_root_dir(const char *root)
{
	int fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* path under root as an O_PATH fd, as path_fd_at(). */
static int root_path_fd(const char *root, const char *path, int flags)
{
	_cleanup_close_ int dfd = -1;
	int fd;

	if (!root[0]) {
		fd = open(path, O_PATH | O_CLOEXEC | (flags & (O_NOFOLLOW | O_DIRECTORY)));
		return fd < 0 ? -errno : fd;
	}
	if (path[0] != '/')
		return -ENOENT;
	dfd = proc_root_dir(root);
	return dfd < 0 ? dfd : path_fd_at(dfd, path, flags);
}

int proc_root_open(const char *root, const char *path, int flags)
{
	_cleanup_close_ int pfd = root_path_fd(root, path, flags);
	char self[40];
	struct stat st;
	int fd;

	if (pfd < 0)
		return pfd;
	if (flags & O_PATH)
		return TAKE_FD(pfd); /* nothing opened: no type to refuse */
	if (fstat(pfd, &st) < 0)
		return -errno;
	/* A FIFO would block open() for a writer that never comes; a device
	 * node (a root container can mknod) opened by us is the host's. */
	if (flags & O_DIRECTORY ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return S_ISLNK(st.st_mode) ? -ELOOP : S_ISDIR(st.st_mode) ? -EISDIR : -EPERM;
	/* The inode looked at, opened (a magic link: no lookup again). */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, (flags & ~(O_NOFOLLOW | O_DIRECTORY)) | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* st's type as flags asked: 0 or -ENOTDIR. */
static int stat_kind(const struct stat *st, int flags)
{
	return flags & O_DIRECTORY && !S_ISDIR(st->st_mode) ? -ENOTDIR : 0;
}

int proc_root_statat(int root_fd, const char *path, int flags, struct stat *st)
{
	_cleanup_close_ int fd = path_fd_at(root_fd, path, flags);

	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? -errno : stat_kind(st, flags);
}

int proc_root_stat(const char *root, const char *path, int flags, struct stat *st)
{
	_cleanup_close_ int dfd = -1;

	if (!root[0]) {
		if (fstatat(AT_FDCWD, path, st, flags & O_NOFOLLOW ? AT_SYMLINK_NOFOLLOW : 0) < 0)
			return -errno;
		return stat_kind(st, flags);
	}
	if (path[0] != '/')
		return -ENOENT;
	dfd = proc_root_dir(root);
	return dfd < 0 ? dfd : proc_root_statat(dfd, path, flags, st);
}

uint32_t proc_mnt_ns(const char *proc, uint32_t pid)
{
	char path[300];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%u/ns/mnt", proc ? proc : "/proc", pid);
	return stat(path, &st) == 0 ? (uint32_t)st.st_ino : 0;
}

uint32_t proc_mnt_self(void)
{
	static _Thread_local uint32_t self;
	static _Thread_local bool looked;
	struct stat st;

	if (!looked) {
		self = stat("/proc/self/ns/mnt", &st) == 0 ? (uint32_t)st.st_ino : 0;
		looked = true;
	}
	return self;
}

void proc_mnt_note(struct proc_mnt_tab *t, uint32_t pid, uint32_t ns)
{
	t->slot[pid % PROC_MNT_SLOTS].pid = pid;
	t->slot[pid % PROC_MNT_SLOTS].ns = ns;
	t->slot[pid % PROC_MNT_SLOTS].exited = false;
}

void proc_mnt_exit(struct proc_mnt_tab *t, uint32_t pid)
{
	if (t->slot[pid % PROC_MNT_SLOTS].pid == pid)
		t->slot[pid % PROC_MNT_SLOTS].exited = true;
}

uint32_t proc_mnt_of(const struct proc_mnt_tab *t, uint32_t pid)
{
	return pid && t->slot[pid % PROC_MNT_SLOTS].pid == pid ? t->slot[pid % PROC_MNT_SLOTS].ns
							       : 0;
}

/* The next process of an opendir()ed <proc> with its mount namespace (0:
 * unknown); false at the end. */
static bool next_proc_ns(DIR *dir, const char *proc, uint32_t *pid, uint32_t *ns)
{
	struct dirent *d;

	while ((d = readdir(dir))) {
		char *end;
		unsigned long n = strtoul(d->d_name, &end, 10);

		if (d->d_name[0] < '1' || d->d_name[0] > '9' || *end || n > UINT32_MAX)
			continue;
		*pid = (uint32_t)n;
		*ns = proc_mnt_ns(proc, *pid);
		return true;
	}
	return false;
}

uint32_t proc_mnt_seed(const char *proc, struct proc_mnt_tab *t)
{
	DIR *dir = opendir(proc ? proc : "/proc");
	uint32_t n = 0, pid, ns;

	if (!dir)
		return 0;
	while (next_proc_ns(dir, proc, &pid, &ns))
		if (ns) {
			proc_mnt_note(t, pid, ns);
			n++;
		}
	closedir(dir);
	return n;
}

/* A live process of each mount namespace the last walk of <proc> met, and
 * of each found since (open addressing from ns % PROC_MNT_PEERS, at most
 * PROC_MNT_PROBE slots on: a host's few dozen namespaces, systemd's services
 * among them, all fit; were they more, the one the walk is for wins its
 * first slot), per thread. */
struct mnt_peer_slot {
	uint32_t ns, pid;
};

struct mnt_peers {
	struct mnt_peer_slot slot[PROC_MNT_PEERS];
	uint64_t walk_ns;     /* when, 0: never */
	uint64_t walk_gap_ns; /* the least time to the next: see proc_mnt_peer() */
};

#define PROC_MNT_PROBE 16u

/* ns's slot; else (add) a free one on its run, else its first; else NULL. */
static struct mnt_peer_slot *peer_slot(struct mnt_peers *t, uint32_t ns, bool add)
{
	for (unsigned int i = 0; i < PROC_MNT_PROBE; i++) {
		struct mnt_peer_slot *s = &t->slot[(ns + i) % PROC_MNT_PEERS];

		if (s->ns == ns)
			return s;
		if (!s->ns)
			return add ? s : NULL;
	}
	return add ? &t->slot[ns % PROC_MNT_PEERS] : NULL;
}

static void mnt_walk(struct mnt_peers *t, const char *proc, uint32_t want)
{
	DIR *dir = opendir(proc);
	uint32_t pid, ns;

	memset(t->slot, 0, sizeof(t->slot));
	if (!dir)
		return;
	while (next_proc_ns(dir, proc, &pid, &ns)) {
		struct mnt_peer_slot *s = ns ? peer_slot(t, ns, true) : NULL;

		if (s && s->ns != ns && (!s->ns || ns == want)) {
			s->ns = ns;
			s->pid = pid;
		}
	}
	closedir(dir);
}

/* A process tab names in ns that has not exited (as far as tab knows) and
 * is there: at most PROC_MNT_TRIES looked at. */
static uint32_t mnt_of_tab(const struct proc_mnt_tab *tab, const char *proc, uint32_t ns)
{
	unsigned int i, tries = 0;

	for (i = 0; tab && i < PROC_MNT_SLOTS && tries < PROC_MNT_TRIES; i++) {
		if (tab->slot[i].ns != ns || tab->slot[i].exited || !tab->slot[i].pid)
			continue;
		tries++;
		if (proc_mnt_ns(proc, tab->slot[i].pid) == ns)
			return tab->slot[i].pid;
	}
	return 0;
}

uint32_t proc_mnt_peer(const char *proc, const struct proc_mnt_tab *tab, uint32_t ns)
{
	static _Thread_local struct mnt_peers t;
	struct mnt_peer_slot *p;
	uint64_t now;
	uint32_t pid;

	if (!ns || ns == proc_mnt_self())
		return 0;
	if (!proc)
		proc = "/proc";
	p = peer_slot(&t, ns, false);
	if (p && proc_mnt_ns(proc, p->pid) == ns)
		return p->pid;
	pid = mnt_of_tab(tab, proc, ns);
	if (pid) {
		p = peer_slot(&t, ns, true);
		p->ns = ns;
		p->pid = pid;
		return pid;
	}
	now = clock_ns(CLOCK_MONOTONIC);
	if (t.walk_ns && now - t.walk_ns < t.walk_gap_ns)
		return 0;
	t.walk_ns = now;
	mnt_walk(&t, proc, ns);
	/* A walk stats every process: on a host of 30,000 that is tens of ms,
	 * and a churn of containers may ask for one each time. The next comes
	 * PROC_MNT_WALK_COST times its duration later at least: walks take at
	 * most 1/PROC_MNT_WALK_COST of a CPU. */
	t.walk_gap_ns = MAX(PROC_MNT_WALK_NS,
			    (clock_ns(CLOCK_MONOTONIC) - now) * (uint64_t)PROC_MNT_WALK_COST);
	p = peer_slot(&t, ns, false);
	return p ? p->pid : 0;
}
