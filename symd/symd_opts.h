/* SPDX-License-Identifier: MIT */
/* symd in its process (opts.c): the daemon's hooks (common/daemon.h) that
 * are more than a symd.c function. */
#ifndef CPA_SYMD_OPTS_H
#define CPA_SYMD_OPTS_H

#include "shm/stage_loop.h"

/* new: the options of this life from ctx (the config block, rings,
 * generation, fault knob), the object, what it runs with logged. */
int symd__open(const struct shm_stage_ctx *ctx, void **ret);
/* batch: symd__batch(), -ENOBUFS when it took nothing because the storer is
 * behind (output held): the loop sleeps and keeps our input. */
int symd__step(void *s, unsigned int max);
/* finish: SIGTERM or drained, everything passed on is committed and
 * released (symd__batch does both per batch); our own loss report goes out. */
int symd__close(void *s, enum shm_stage_end how);

#endif /* CPA_SYMD_OPTS_H */
