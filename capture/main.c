// SPDX-License-Identifier: MIT
/*
 * capture: spawned by `cpa monitor` with the arena on fd 3. The process is
 * common/daemon.h (docs/pipeline.md); the loop is its own: capture produces
 * ring 0 from the kernel's buffers, it consumes no ring.
 */
#include <errno.h>
#include <unistd.h>

#include "cap_emit.h"
#include "capture.h"
#include "common/daemon.h"
#include "common/macro.h"
#include "common/timeutil.h"

/* Until STOP or SIGTERM; the state is ours to set (RUNNING, EXITED, FAILED). */
static int run(struct shm_arena *a, struct shm_stage *st)
{
	struct capture *c = NULL;
	int r, timeout_ms = CAP_POLL_FLOW_MS;
	uint64_t now, last, flushed;
	pid_t parent = getppid();
	enum cap_finish how;

	shm_stage__heartbeat(st);
	r = capture__new(a, st, &daemon_term, &c);
	if (r < 0)
		goto out;
	shm_stage__set_state(st, SHM_STATE_RUNNING);
	now = last = flushed = clock_ns(CLOCK_MONOTONIC);
	while (!daemon_term && shm_stage__cmd(st) != SHM_CMD_STOP) {
		shm_stage__heartbeat(st);
		/* Never sleep past the once-a-second tick: it stamps the
		 * heartbeat, so an idle capture wakes exactly once a second. */
		r = capture__batch(c, MIN(timeout_ms, capture__next_tick_ms(c, now)));
		if (r < 0 && r != -EINTR)
			goto out;
		now = clock_ns(CLOCK_MONOTONIC);
		if (r != -EINTR) {
			timeout_ms = cap_poll_next_ms(timeout_ms, r, now - last);
			last = now;
		}
		r = capture__tick(c, now);
		if (r < 0)
			goto out;
		/* About to sleep: unwindd gets the batch period's samples in
		 * one wakeup (more than its wake_bytes woke it already). */
		if (now - flushed >= SHM_BATCH_MS * NSEC_PER_MSEC / 4 * 3) {
			capture__flush(c);
			flushed = now;
		}
	}
	how = !daemon_term	    ? CAP_FINISH_STOP
	      : getppid() == parent ? CAP_FINISH_TERM
				    : CAP_FINISH_ORPHAN;
	r = capture__finish(c, how);
out:
	capture__free(c);
	shm_stage__exit(st, r);
	return r;
}

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.name = "capture",
		.id = SHM_STAGE_CAPTURE,
		.run = run,
	};

	return daemon__main(&d, argc, argv);
}
