/* SPDX-License-Identifier: MIT */
/*
 * A test knob for the replay a producer's restart causes (shm/dedup.h;
 * docs/supervisor.md, "Knobs for tests"):
 *
 *   CPA_FAULT_KILL_AFTER_COMMIT=STAGE:N:G[,STAGE:N:G...]
 *
 * Lives 1..G of STAGE (its generation; a stage between two rings, unwindd
 * or symd) SIGKILL themselves right after committing the output of their
 * N-th batch and before releasing that batch's input. That is the window in
 * which a kill makes the successor send a batch again; random kills land in
 * it rarely (the futex wake of the commit is where a pending signal is
 * delivered). Read once at start, by common/daemon.c for every such stage
 * (shm_stage_ctx.fault_kill_batches); unset costs one untaken branch per
 * batch. The storer reads it itself (storer__new()): its N-th release that
 * raises the mark, once the blocks' writes landed.
 *
 * Library code: no logging.
 */
#ifndef CPA_SHM_FAULT_H
#define CPA_SHM_FAULT_H

#include <signal.h>
#include <stdint.h>

#include "stage.h"

#define SHM_FAULT_KILL_ENV "CPA_FAULT_KILL_AFTER_COMMIT"

/* N for this stage and generation, 0 when off, -EINVAL when the variable
 * is malformed (the stage refuses to start: a test asked for something). */
int shm_fault__kill_after_commit(enum shm_stage_id id, uint32_t generation);

/* Between the output commit and the input release: count a batch down,
 * die on the last one. */
static inline void shm_fault__commit_point(unsigned int *left)
{
	if (__builtin_expect(*left != 0, 0) && --*left == 0)
		raise(SIGKILL);
}

#endif /* CPA_SHM_FAULT_H */
