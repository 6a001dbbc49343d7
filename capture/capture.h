/* SPDX-License-Identifier: MIT */
/*
 * The capture stage: sample on-CPU stacks with BPF and feed ring 0.
 * Lifecycle as in docs/pipeline.md; what is recorded in docs/capture.md.
 */
#ifndef CPA_CAPTURE_CAPTURE_H
#define CPA_CAPTURE_CAPTURE_H

#include "shm/arena.h"

/* The poll deadline policy (CAP_POLL_*) lives in cap_emit.h, next to the
 * commit policy it works with. */

/* Run until STOP or SIGTERM. Returns 0 after a clean exit (state EXITED),
 * -errno after a failure (state FAILED). */
int capture__run(struct shm_arena *a);

/* Ask the run loop to leave quickly (from a signal handler). */
void capture__request_exit(void);

#endif /* CPA_CAPTURE_CAPTURE_H */
