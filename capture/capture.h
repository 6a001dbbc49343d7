/* SPDX-License-Identifier: MIT */
/*
 * The capture stage: sample on-CPU stacks with BPF and feed ring 0.
 * Lifecycle as in docs/pipeline.md; what is recorded in docs/capture.md.
 *
 * The same object shape as every stage (new/poll/tick/finish/free) on the
 * shared loop (shm/stage_loop.h): it is fed by the kernel's buffers, not
 * by a ring, so its input source is a poll of those (capture__poll).
 */
#ifndef CPA_CAPTURE_CAPTURE_H
#define CPA_CAPTURE_CAPTURE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/stage_loop.h"

/* The poll deadline policy (CAP_POLL_*, cap_poll_next_ms()) lives in
 * cap_emit.h, next to the commit policy it works with. */

struct capture;

/* Check the config, load and attach the sampler (BPF, or the perf backend
 * as a fallback) feeding ctx->out (ring 0). ctx->term: the SIGTERM flag (a
 * graceful stop stops waiting for room once it is set). Logs what failed. */
int capture__new(const struct shm_stage_ctx *ctx, void **ret);
/* The loop's input source (struct shm_stage_loop.poll): wait for the kernel
 * buffers up to the poll deadline (cap_poll_next_ms(), never past the
 * once-a-second tick), emit and commit what came: how many records,
 * -EINTR, or -errno after a failure (logged). */
int capture__poll(void *c);
/* After every poll (now_ns CLOCK_MONOTONIC): the next poll deadline; once a
 * second the clock and the kernel-side statistics; loss records; ring 0
 * flushed to unwindd once per batch period (SHM_BATCH_MS). -errno (logged)
 * when the sequence space is used up. */
int capture__tick(void *c, uint64_t now_ns);
/*
 * Stop sampling, drain the kernel buffers into ring 0, flush losses. How
 * long it may wait for room in ring 0 for the loss records it still holds
 * depends on how the loop ended:
 *  - SHM_END_STOPPED (STOP from the monitor): up to a second (unwindd reads
 *    on; a SIGTERM meanwhile cuts it short);
 *  - SHM_END_TERM (SIGTERM from a live monitor): no wait; the next
 *    generation folds what this one produced and did not deliver into
 *    lost_with_capture;
 *  - SHM_END_ORPHAN (the monitor is gone: SIGTERM by PR_SET_PDEATHSIG):
 *    nobody will fold this generation, so wait like STOP while unwindd's
 *    orphan drain reads ring 0 (docs/pipeline.md, "Stopping");
 *  - SHM_END_FAILED: nothing.
 */
int capture__finish(void *c, enum shm_stage_end how);
void capture__free(void *c);

#endif /* CPA_CAPTURE_CAPTURE_H */
