// SPDX-License-Identifier: MIT
/*
 * A fake pipeline stage for test_monitor: built four times, as capture,
 * unwindd, symd and storer (its role is its file name). It follows the stage
 * side of docs/pipeline.md with real rings in the real arena on fd 3:
 * capture produces a sequence-numbered record every few ms, the others pass
 * records along, the storer counts them. The test steers it with files in
 * $FAKE_CTL_DIR:
 *
 *   crash-<stage>   raise SIGSEGV (the file is removed first)
 *   hang-<stage>    stop heartbeating (the monitor should SIGKILL it)
 *
 * and environment variables FAKE_FAIL_START=<stage> (exit 2 before RUNNING,
 * like a capture without BPF) and FAKE_IGNORE_DRAIN=<stage>. Lifecycle events
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

#include "shm/arena.h"
#include "shm/counters.h"

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

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

int main(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
	const char *fds = getenv("CPA_ARENA_FD");
	struct shm_ring_prod out;
	struct shm_ring_cons in;
	struct shm_arena *a;
	struct shm_stage *st;
	struct sigaction sa = {.sa_handler = on_term};
	enum shm_stage_id id = SHM_STAGE_MAX;
	bool has_in, has_out, hanging = false;
	uint64_t counter = 0, mark;
	uint32_t gen;

	(void)argc;
	for (int i = 0; i < SHM_STAGE_MAX; i++)
		if (!strcmp(name, shm_stage_name((enum shm_stage_id)i)))
			id = (enum shm_stage_id)i;
	if (id == SHM_STAGE_MAX || !fds || strcmp(fds, "3")) {
		fprintf(stderr, "%s: no arena on fd 3: run me from `cpa monitor`\n", name);
		return 2;
	}
	if (env_is("FAKE_FAIL_START", name)) {
		fprintf(stderr, "%s: failing at start as asked\n", name);
		return 2;
	}
	if (shm_arena__attach(3, &a) < 0) {
		fprintf(stderr, "%s: attach failed\n", name);
		return 2;
	}
	signal(SIGINT, SIG_IGN); /* the monitor orchestrates the shutdown */
	sigaction(SIGTERM, &sa, NULL);
	st = shm_arena__stage(a, id);
	gen = st->generation;
	if (st->pid != getpid()) {
		fprintf(stderr, "%s: block pid %d is not mine\n", name, st->pid);
		return 3;
	}
	has_in = id != SHM_STAGE_CAPTURE;
	has_out = id != SHM_STAGE_STORER;
	if (has_in && shm_arena__open_cons(a, (unsigned int)id - 1, &in) < 0)
		return 4;
	if (has_out && shm_arena__open_prod(a, (unsigned int)id, &out) < 0)
		return 4;
	mark = has_in ? shm_ring__mark_sc(&in) : 0;
	shm_stage__heartbeat(st);
	shm_stage__set_state(st, SHM_STATE_RUNNING);
	event(name, "start gen=%u notify=%s", gen, getenv("NOTIFY_SOCKET") ? "set" : "none");

	for (;;) {
		enum shm_stage_cmd cmd = shm_stage__cmd(st);
		struct shm_msg msgs[64];
		uint64_t hi = mark;
		int n;

		if (!hanging)
			shm_stage__heartbeat(st);
		if (take_file("crash", name)) {
			event(name, "crash");
			signal(SIGSEGV, SIG_DFL); /* past sanitizers' handlers: a real crash */
			raise(SIGSEGV);
		}
		if (take_file("hang", name)) {
			event(name, "hang");
			hanging = true;
		}
		if (got_term) {
			event(name, "sigterm");
			shm_stage__set_state(st, SHM_STATE_EXITED);
			shm_arena__free(a);
			return 0;
		}
		if (hanging) {
			usleep(50000);
			continue;
		}

		if (id == SHM_STAGE_CAPTURE) {
			void *p;

			if (cmd == SHM_CMD_STOP) {
				event(name, "stop out=%llu",
				      (unsigned long long)shm_stage__cnt(st, SHM_CNT_OUT));
				shm_stage__set_state(st, SHM_STATE_EXITED);
				shm_arena__free(a);
				return 0;
			}
			if (shm_ring__reserve_sp(&out, 8, 1, &p) == 0) {
				uint64_t seq = ((uint64_t)gen << 40) | ++counter;

				memcpy(p, &seq, 8);
				shm_ring__commit_sp(&out);
				shm_stage__cnt_add(st, SHM_CNT_OUT, 1);
				shm_stage__cnt_add(st, CAP_CNT_SAMPLES, 1);
			} else {
				shm_stage__cnt_add(st, SHM_CNT_DROP_RING_FULL, 1);
			}
			usleep(5000);
			continue;
		}

		n = shm_ring__peek_batch_sc(&in, msgs, 64);
		if (n < 0)
			return 5;
		for (int i = 0; i < n; i++) {
			uint64_t seq;
			void *p;

			if (msgs[i].len != 8) {
				shm_stage__cnt_add(st, SHM_CNT_DROP_CORRUPT, 1);
				continue;
			}
			memcpy(&seq, msgs[i].data, 8);
			shm_stage__cnt_add(st, SHM_CNT_IN, 1);
			if (seq <= mark) {
				shm_stage__cnt_add(st, SHM_CNT_DROP_DUP, 1);
				continue;
			}
			hi = seq;
			if (!has_out) {
				shm_stage__cnt_add(st, STO_CNT_SAMPLES, 1);
				continue;
			}
			if (shm_ring__reserve_sp(&out, 8, 1, &p) < 0) {
				shm_stage__cnt_add(st, SHM_CNT_DROP_RING_FULL, 1);
				continue;
			}
			memcpy(p, &seq, 8);
			shm_stage__cnt_add(st, SHM_CNT_OUT, 1);
		}
		if (n > 0) {
			if (has_out)
				shm_ring__commit_sp(&out);
			shm_ring__release_mark_sc(&in, hi);
			mark = hi;
			shm_stage__cnt_add(st, SHM_CNT_BATCHES, 1);
			continue;
		}
		if (cmd == SHM_CMD_DRAIN && !env_is("FAKE_IGNORE_DRAIN", name)) {
			event(name, "drain in=%llu out=%llu samples=%llu",
			      (unsigned long long)shm_stage__cnt(st, SHM_CNT_IN),
			      (unsigned long long)shm_stage__cnt(st, SHM_CNT_OUT),
			      (unsigned long long)(has_out ? 0
							   : shm_stage__cnt(st, STO_CNT_SAMPLES)));
			shm_stage__set_state(st, SHM_STATE_EXITED);
			shm_arena__free(a);
			return 0;
		}
		if (shm_ring__wait_sc(&in, 1, 100) == 0)
			shm_stage__cnt_add(st, SHM_CNT_WAKEUPS, 1);
	}
}
