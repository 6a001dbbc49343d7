// SPDX-License-Identifier: MIT
/*
 * HotSpot's attach protocol (what jcmd speaks), in C: ask a JVM to write its
 * perf map with `Compiler.perfmap` (JDK 17+) without starting a JVM.
 *
 * 1. If the JVM's attach listener is not up (no socket /tmp/.java_pidN in its
 *    mount namespace, N its pid there), create .attach_pidN in its cwd (else
 *    its /tmp) and send SIGQUIT: the JVM's signal thread sees the file and
 *    starts the listener, which binds the socket.
 * 2. Connect, send "1\0jcmd\0Compiler.perfmap\0\0\0" (protocol 1, command,
 *    three arguments), read the reply ("0\n" and the command's output) to
 *    EOF. The JVM has written /tmp/perf-N.map by then.
 *
 * The JVM accepts a peer of its own euid/egid (or root), and an attach file
 * owned by its euid or root: a child takes the JVM's ids, does the above
 * under a 5 s alarm and exits; the caller never waits on it.
 */
#include "jvm.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "common/procroot.h"

#define JVM_CHILDREN_MAX 8 /* requests running at once */
#define JVM_CHILD_SECS	 5 /* a request's child gives up after this */

static pid_t jvm_children[JVM_CHILDREN_MAX];

void jvm__reap(void)
{
	for (unsigned int i = 0; i < JVM_CHILDREN_MAX; i++)
		if (jvm_children[i] > 0 && waitpid(jvm_children[i], NULL, WNOHANG) != 0)
			jvm_children[i] = 0;
}

bool jvm__is_jvm(const char *proc, uint32_t pid)
{
	_cleanup_free_ char *maps = NULL;
	char path[128];
	size_t len;

	snprintf(path, sizeof(path), "%s/%u/maps", proc, pid);
	if (read_full_file(path, READ_FULL_TRUNCATE, 4u << 20, &maps, &len) < 0)
		return false;
	return strstr(maps, "/libjvm.so\n") != NULL;
}

/* Names looked up relative to dirfds: dir[0] the JVM's cwd, dir[1] its /tmp
 * (-1: none), both as it sees them. */
struct jvm_req {
	uint32_t pid;
	uint32_t uid, gid;
	int dir[2];
	char sock[32];	 /* .java_pidN, in dir[1] */
	char attach[32]; /* .attach_pidN, in dir[0] else dir[1] */
};

/* The JVM's euid, egid and whether it catches SIGQUIT (bit 3 of SigCgt). */
static int jvm_status(const char *proc, uint32_t pid, struct jvm_req *q)
{
	_cleanup_free_ char *st = NULL;
	unsigned int r, e;
	unsigned long long cgt;
	char path[128], *l;
	size_t len;
	int err;

	snprintf(path, sizeof(path), "%s/%u/status", proc, pid);
	err = read_full_file(path, READ_FULL_TRUNCATE, 1u << 16, &st, &len);
	if (err < 0)
		return err;
	l = strstr(st, "\nUid:");
	if (!l || sscanf(l + 5, "%u %u", &r, &e) != 2)
		return -EINVAL;
	q->uid = e;
	l = strstr(st, "\nGid:");
	if (!l || sscanf(l + 5, "%u %u", &r, &e) != 2)
		return -EINVAL;
	q->gid = e;
	l = strstr(st, "\nSigCgt:");
	if (!l || sscanf(l + 8, "%llx", &cgt) != 1)
		return -EINVAL;
	if (!(cgt & (1ull << (SIGQUIT - 1))))
		return -EPERM; /* -Xrs: SIGQUIT would kill it */
	return 0;
}

static void child_sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};

	nanosleep(&ts, NULL);
}

/*
 * The socket named name in dir, itself: connect() follows a symlink there,
 * and its target would resolve in our root (any socket of the host). Taken
 * only when owned by our euid (the JVM's), as HotSpot's own client checks,
 * and connected to through /proc/self/fd/S (that very inode).
 */
static int child_connect(int dir, const char *name)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	int fd = -1, s = openat(dir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;

	if (s < 0)
		return -1;
	if (fstat(s, &st) == 0 && S_ISSOCK(st.st_mode) && st.st_uid == geteuid()) {
		snprintf(a.sun_path, sizeof(a.sun_path), "/proc/self/fd/%d", s);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
			close(fd);
			fd = -1;
		}
	}
	close(s);
	return fd;
}

/*
 * The attach file in dir: made (1: to be removed after), or there already
 * as a regular file of ours (0: the JVM takes it as well; left as found).
 * Never an open of what a name there leads to (a symlink, a FIFO, a device):
 * O_EXCL. -1: none.
 */
static int child_attach(int dir, const char *name)
{
	struct stat st;
	int a;

	if (dir < 0)
		return -1;
	a = openat(dir, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (a >= 0) {
		close(a);
		return 1;
	}
	if (errno == EEXIST && fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	    S_ISREG(st.st_mode) && st.st_uid == geteuid())
		return 0;
	return -1;
}

/* The child: syscalls only (the parent may have threads). */
static _Noreturn void jvm_child(const struct jvm_req *q)
{
	static const char cmd[] = "1\0jcmd\0Compiler.perfmap\0\0";
	struct sigaction sa = {.sa_handler = SIG_DFL};
	sigset_t set;
	char buf[512];
	int fd = -1, made = -1, dir = -1;

	sigaction(SIGALRM, &sa, NULL);
	sigemptyset(&set);
	sigaddset(&set, SIGALRM);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	alarm(JVM_CHILD_SECS);
	if (getegid() != q->gid && (syscall(SYS_setgroups, 0, NULL) < 0 ||
				    syscall(SYS_setresgid, q->gid, q->gid, q->gid) < 0))
		_exit(2);
	if (geteuid() != q->uid && syscall(SYS_setresuid, q->uid, q->uid, q->uid) < 0)
		_exit(2);
	fd = child_connect(q->dir[1], q->sock);
	if (fd < 0) {
		for (int i = 0; i < 2 && made < 0; i++) {
			dir = q->dir[i];
			made = child_attach(dir, q->attach);
		}
		if (made < 0 || kill((pid_t)q->pid, SIGQUIT) < 0)
			_exit(3);
		for (int i = 0; i < (JVM_CHILD_SECS * 1000 - 500) / 5 && fd < 0; i++) {
			child_sleep_ms(5);
			fd = child_connect(q->dir[1], q->sock);
		}
		if (made)
			unlinkat(dir, q->attach, 0);
		if (fd < 0)
			_exit(4);
	}
	if (write(fd, cmd, sizeof(cmd)) != (ssize_t)sizeof(cmd))
		_exit(5);
	while (read(fd, buf, sizeof(buf)) > 0)
		; /* the JVM replies once the map is written */
	_exit(0);
}

/* Wait up to wait_ns for the child of slot: 1 when it wrote the map. */
static int jvm_wait(unsigned int slot, uint64_t wait_ns)
{
	int fd = (int)syscall(SYS_pidfd_open, jvm_children[slot], 0), status, r;
	struct pollfd pf = {.fd = fd, .events = POLLIN};

	if (fd < 0)
		return 0;
	r = poll(&pf, 1, (int)(wait_ns / 1000000));
	close(fd);
	if (r <= 0 || waitpid(jvm_children[slot], &status, WNOHANG) != jvm_children[slot])
		return 0;
	jvm_children[slot] = 0;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int jvm__request_perfmap(const char *proc, uint32_t pid, uint32_t nspid, uint64_t wait_ns)
{
	struct jvm_req q = {.pid = pid};
	_cleanup_close_ int tmp = -1, cwd = -1;
	char root[256];
	unsigned int slot;
	pid_t c;
	int err;

	jvm__reap();
	for (slot = 0; slot < JVM_CHILDREN_MAX && jvm_children[slot] > 0; slot++)
		;
	if (slot == JVM_CHILDREN_MAX)
		return -EBUSY;
	err = jvm_status(proc, pid, &q);
	if (err < 0)
		return err;
	/* Its /tmp as it sees it (an absolute symlink there resolves in its
	 * root: common/procroot.h), and its cwd, handed to the child as fds. */
	snprintf(root, sizeof(root), "%s/%u/root", proc, pid);
	tmp = proc_root_open(root, "/tmp", O_PATH | O_DIRECTORY);
	if (tmp < 0)
		return tmp;
	snprintf(root, sizeof(root), "%s/%u/cwd", proc, pid);
	cwd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	q.dir[0] = cwd;
	q.dir[1] = tmp;
	snprintf(q.sock, sizeof(q.sock), ".java_pid%u", nspid);
	snprintf(q.attach, sizeof(q.attach), ".attach_pid%u", nspid);
	c = fork();
	if (c < 0)
		return -errno;
	if (c == 0)
		jvm_child(&q);
	jvm_children[slot] = c;
	return wait_ns ? jvm_wait(slot, wait_ns) : 0;
}
