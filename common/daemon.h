/* SPDX-License-Identifier: MIT */
/*
 * The process around a pipeline stage, written once (docs/pipeline.md):
 * argv (--verbose/-v, --help/-h), the arena on fd SHM_ARENA_FD, the config
 * version check, signals (SIGTERM without SA_RESTART so it cuts a futex
 * sleep short; SIGINT and SIGPIPE ignored: the monitor orchestrates
 * shutdown), the log subsystem, the error messages, the final state.
 *
 * What differs between stages as processes (name, rings, upstream,
 * capabilities, role) is their row in the stage table (shm/stage.h); a
 * stage's main.c is a table of its hooks: new/finish/free and its loop's
 * hooks and wait parameters in .loop (shm/stage_loop.h). The loop is the
 * same for every stage: a producer fed by the kernel (capture) has a poll
 * hook in place of batch and the ring wait.
 */
#ifndef CPA_DAEMON_H
#define CPA_DAEMON_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/stage_loop.h"

struct cpa_config;

struct daemon_stage {
	enum shm_stage_id id; /* its row in shm_stages */

	/* Set up the stage object over what ctx holds (its rings opened, the
	 * fault knob read); log what failed. */
	int (*new)(const struct shm_stage_ctx *ctx, void **ret);
	/* After the loop (how: SHM_END_FAILED after a hard error): finish
	 * what is in hand. 0, or -errno when that failed (logged). */
	int (*finish)(void *obj, enum shm_stage_end how);
	void (*free)(void *obj);
	/* The loop's hooks and wait parameters (st, in, obj, term, next and
	 * up are filled in here). */
	struct shm_stage_loop loop;
};

/* Set by the SIGTERM handler. */
extern volatile sig_atomic_t daemon_term;

/* main() of a stage: 0 after a clean exit, 1 after a failure, 2 for a bad
 * command line or no arena, SHM_EXIT_PERMANENT after a failure whose cause
 * the stage wrote with shm_stage__permanent() (shm/stage.h). The capabilities of its row are kept,
 * the others dropped for good, and no_new_privs is set. */
int daemon__main(const struct daemon_stage *d, int argc, char **argv);

#endif /* CPA_DAEMON_H */
