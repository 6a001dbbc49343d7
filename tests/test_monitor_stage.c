// SPDX-License-Identifier: MIT
/*
 * A fake pipeline stage for test_monitor: built four times, as capture,
 * unwindd, symd and storer (its role is its file name). It runs on the real
 * stage skeleton (common/daemon.h, shm/stage_loop.h) with real rings in the
 * real arena on fd 3, with fake work:
 * capture produces a sequence-numbered record every few ms, the others pass
 * records along, the storer counts them. The test steers it with files in
 * $FAKE_CTL_DIR:
 *
 *   crash-<stage>   raise SIGSEGV (the file is removed first)
 *   hang-<stage>    stop heartbeating (the monitor should SIGKILL it)
 *
 * and environment variables FAKE_FAIL_START=<stage> (exit 2 before RUNNING,
 * like a capture without BPF), FAKE_SLOW_START=<stage>:<ms> (sit that long in
 * STARTING without a heartbeat, like capture while the verifier checks its BPF),
 * FAKE_PERMANENT=<stage> (a cause in its block, then exit SHM_EXIT_PERMANENT
 * through the daemon shell, like a capture without privilege) and
 * FAKE_IGNORE_DRAIN=<stage>. Lifecycle events
 * are appended to $FAKE_CTL_DIR/events as "<stage> <event> ..." lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/daemon.h"
#include "shm/arena.h"
#include "shm/counters.h"

/* The stage at hand (one process, one stage). */
static struct fake {
	const char *name;
	enum shm_stage_id id;
	struct shm_stage *st;
	struct shm_ring_cons *in;
	struct shm_ring_prod *out; /* NULL for the storer */
	uint64_t mark;		   /* highest seq passed on */
	bool hanging;
} fake;

static const char *ctl_dir(void)
{
	const char *d = getenv("FAKE_CTL_DIR");

	return d ? d : "/tmp";
}

static void event(const char *stage, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void event(const char *stage, const char *fmt, ...)
{
	char path[4096], line[512];
	va_list ap;
	int fd, n;

	snprintf(path, sizeof(path), "%s/events", ctl_dir());
	n = snprintf(line, sizeof(line), "%s ", stage);
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	line[n++] = '\n';
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd >= 0) {
		(void)!write(fd, line, (size_t)n);
		close(fd);
	}
}

static int take_file(const char *what, const char *stage)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/%s-%s", ctl_dir(), what, stage);
	return unlink(path) == 0;
}

static bool env_is(const char *name, const char *stage)
{
	const char *v = getenv(name);

	return v && !strcmp(v, stage);
}

/* Crash and hang on request. A hang stops heartbeating until SIGTERM/SIGKILL. */
static void ctl_files(void)
{
	if (take_file("crash", fake.name)) {
		event(fake.name, "crash");
		signal(SIGSEGV, SIG_DFL); /* past sanitizers' handlers: a real crash */
		raise(SIGSEGV);
	}
	if (take_file("hang", fake.name)) {
		event(fake.name, "hang");
		fake.hanging = true;
	}
	while (fake.hanging && !daemon_term)
		usleep(50000);
}

static void fake_start(void)
{
	event(fake.name, "start gen=%u notify=%s", fake.st->generation,
	      getenv("NOTIFY_SOCKET") ? "set" : "none");
}

static int fake_new(const struct shm_stage_ctx *ctx, void **ret)
{
	if (ctx->st->pid != getpid()) {
		fprintf(stderr, "%s: block pid %d is not mine\n", fake.name, ctx->st->pid);
		return -ESRCH;
	}
	if (env_is("FAKE_PERMANENT", fake.name)) {
		event(fake.name, "permanent");
		shm_stage__permanent(ctx->st, "fake cause: the remedy the test names");
		return -EPERM;
	}
	fake.st = ctx->st;
	fake.in = ctx->in;
	fake.out = ctx->out;
	fake.mark = ctx->in ? shm_ring__mark_sc(ctx->in) : 0;
	fake_start();
	*ret = &fake;
	return 0;
}

/* Pass sequence-numbered records along; the storer counts them. */
static int fake_batch(void *obj, unsigned int max)
{
	struct shm_msg msgs[64];
	uint64_t hi = fake.mark;
	int n;

	(void)obj;
	ctl_files();
	n = shm_ring__peek_batch_sc(fake.in, msgs, max < 64 ? max : 64);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		uint64_t seq;
		void *p;

		if (msgs[i].len != 8) {
			shm_stage__cnt_add(fake.st, SHM_CNT_DROP_CORRUPT, 1);
			continue;
		}
		memcpy(&seq, msgs[i].data, 8);
		shm_stage__cnt_add(fake.st, SHM_CNT_IN, 1);
		if (seq <= fake.mark) {
			shm_stage__cnt_add(fake.st, SHM_CNT_DROP_DUP, 1);
			continue;
		}
		hi = seq;
		if (!fake.out) {
			shm_stage__cnt_add(fake.st, STO_CNT_SAMPLES, 1);
			continue;
		}
		if (shm_ring__reserve_sp(fake.out, 8, 1, &p) < 0) {
			shm_stage__cnt_add(fake.st, SHM_CNT_DROP_RING_FULL, 1);
			continue;
		}
		memcpy(p, &seq, 8);
		shm_stage__cnt_add(fake.st, SHM_CNT_OUT, 1);
	}
	if (n > 0) {
		if (fake.out)
			shm_ring__commit_sp(fake.out);
		shm_ring__release_mark_sc(fake.in, hi);
		fake.mark = hi;
		shm_stage__cnt_add(fake.st, SHM_CNT_BATCHES, 1);
		return n;
	}
	/* Asked to ignore DRAIN: keep "busy" instead of leaving. */
	if (shm_stage__cmd(fake.st) == SHM_CMD_DRAIN && env_is("FAKE_IGNORE_DRAIN", fake.name))
		return -ENOBUFS;
	return 0;
}

static int fake_tick(void *obj, uint64_t now_ns)
{
	(void)obj;
	(void)now_ns;
	return 0;
}

static int fake_finish(void *obj, enum shm_stage_end how)
{
	(void)obj;
	if (how == SHM_END_FAILED)
		return 0;
	if (how == SHM_END_STOPPED) {
		event(fake.name, "stop out=%llu",
		      (unsigned long long)shm_stage__cnt(fake.st, SHM_CNT_OUT));
		return 0;
	}
	if (how == SHM_END_TERM || how == SHM_END_ORPHAN) {
		event(fake.name, "sigterm");
		return 0;
	}
	event(fake.name, "drain in=%llu out=%llu samples=%llu",
	      (unsigned long long)shm_stage__cnt(fake.st, SHM_CNT_IN),
	      (unsigned long long)shm_stage__cnt(fake.st, SHM_CNT_OUT),
	      (unsigned long long)(fake.out ? 0 : shm_stage__cnt(fake.st, STO_CNT_SAMPLES)));
	return 0;
}

static void fake_free(void *obj)
{
	(void)obj;
}

/* capture's input source: a sequence-numbered record every few ms. */
static int fake_poll(void *obj)
{
	static uint64_t counter;
	void *p;

	(void)obj;
	ctl_files();
	if (daemon_term)
		return 0;
	/* FAKE_QUIET: a record only when asked (emit-capture), and flushed. */
	if (getenv("FAKE_QUIET") && !take_file("emit", fake.name)) {
		usleep(50000);
		return 0;
	}
	if (shm_ring__reserve_sp(fake.out, 8, 1, &p) == 0) {
		uint64_t seq = ((uint64_t)fake.st->generation << 40) | ++counter;

		memcpy(p, &seq, 8);
		shm_ring__commit_sp(fake.out);
		shm_stage__cnt_add(fake.st, SHM_CNT_OUT, 1);
		shm_stage__cnt_add(fake.st, CAP_CNT_SAMPLES, 1);
	} else {
		shm_stage__cnt_add(fake.st, SHM_CNT_DROP_RING_FULL, 1);
	}
	if (getenv("FAKE_QUIET"))
		shm_ring__flush_sp(fake.out);
	usleep(5000);
	return 1;
}

int main(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const char *fds = getenv("CPA_ARENA_FD"), *slow;
	size_t n;
	struct daemon_stage d = {
		.new = fake_new,
		.finish = fake_finish,
		.free = fake_free,
		.loop.batch = fake_batch,
		.loop.tick = fake_tick,
		.loop.clock = CLOCK_MONOTONIC,
		.loop.batch_max = 64,
		.loop.heartbeat_ns = 0, /* every turn */
		.loop.wake_bytes = 1,
		.loop.wait_ms = 100,
		.loop.wait_idle_ms = 100,
		.loop.busy_ms = 50,
	};

	fake.name = name;
	fake.id = shm_stage_by_name(name, strlen(name));
	if (fake.id == SHM_STAGE_MAX || !fds || strcmp(fds, "3")) {
		fprintf(stderr, "%s: no arena on fd 3: run me from `cpa monitor`\n", name);
		return 2;
	}
	if (env_is("FAKE_FAIL_START", name)) {
		fprintf(stderr, "%s: failing at start as asked\n", name);
		return 2;
	}
	slow = getenv("FAKE_SLOW_START");
	n = strlen(name);
	if (slow && !strncmp(slow, name, n) && slow[n] == ':') {
		long ms = strtol(slow + n + 1, NULL, 10);

		event(name, "slow-start");
		nanosleep(&(struct timespec){ms / 1000, ms % 1000 * 1000000}, NULL);
	}
	d.id = fake.id;
	/* FAKE_IDLE: idle consumers wait with no deadline, as unwindd and symd do. */
	d.loop.idle_no_deadline = getenv("FAKE_IDLE") != NULL;
	if (shm_stages[fake.id].role == SHM_ROLE_PRODUCER) {
		d.loop.poll = fake_poll;
		d.loop.batch = NULL;
	}
	return daemon__main(&d, argc, argv);
}
