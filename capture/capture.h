/* SPDX-License-Identifier: MIT */
/*
 * The capture stage: sample on-CPU stacks with BPF and feed ring 0.
 * Lifecycle as in docs/pipeline.md; what is recorded in docs/capture.md.
 *
 * The same object shape as every stage (new/batch/tick/finish/free); its
 * loop is its own (capture/main.c): it is fed by the kernel's buffers, not
 * by a ring, so it polls those instead of waiting on a ring.
 */
#ifndef CPA_CAPTURE_CAPTURE_H
#define CPA_CAPTURE_CAPTURE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/arena.h"

/* The poll deadline policy (CAP_POLL_*, cap_poll_next_ms()) lives in
 * cap_emit.h, next to the commit policy it works with. */

struct capture;

/* Check the config, open ring 0, load and attach the sampler (BPF, or the
 * perf backend as a fallback). term: the SIGTERM flag (a graceful stop
 * stops waiting for room once it is set). Logs what failed. */
int capture__new(struct shm_arena *a, struct shm_stage *st, const volatile sig_atomic_t *term,
		 struct capture **ret);
/* Poll the kernel buffers up to wait_ms, emit and commit what came: how many
 * records, -EINTR, or -errno after a failure (logged). */
/* End of a batch: wake unwindd if it sleeps and ring 0 holds records. */
void capture__flush(struct capture *c);
int capture__batch(struct capture *c, int wait_ms);
/* After every batch (now_ns CLOCK_MONOTONIC): once a second the clock and
 * the kernel-side statistics; loss records. -errno (logged) when the
 * sequence space is used up. */
int capture__tick(struct capture *c, uint64_t now_ns);
/* ms until the next once-a-second tick is due (the poll never sleeps past it). */
int capture__next_tick_ms(const struct capture *c, uint64_t now_ns);
/* Why capture stops: how long it may wait for room in ring 0 for the loss
 * records it still holds. */
enum cap_finish {
	/* STOP from the monitor: up to a second (unwindd reads on; a SIGTERM
	 * meanwhile cuts it short). */
	CAP_FINISH_STOP,
	/* SIGTERM from a live monitor: no wait; the next generation folds what
	 * this one produced and did not deliver into lost_with_capture. */
	CAP_FINISH_TERM,
	/* The monitor is gone (SIGTERM by PR_SET_PDEATHSIG): nobody will fold
	 * this generation, so wait like STOP while unwindd's orphan drain reads
	 * ring 0 (docs/pipeline.md, "Stopping"). */
	CAP_FINISH_ORPHAN,
};

/* Stop sampling, drain the kernel buffers into ring 0, flush losses. */
int capture__finish(struct capture *c, enum cap_finish how);
void capture__free(struct capture *c);

#endif /* CPA_CAPTURE_CAPTURE_H */
