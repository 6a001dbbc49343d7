/* SPDX-License-Identifier: MIT */
/*
 * The process around a pipeline stage, written once (docs/pipeline.md):
 * argv (--verbose/-v, --help/-h), the arena on fd SHM_ARENA_FD, the config
 * version check, signals (SIGTERM without SA_RESTART so it cuts a futex
 * sleep short; SIGINT and SIGPIPE ignored: the monitor orchestrates
 * shutdown), the log subsystem, the error messages, the final state.
 *
 * A stage's main.c is a table of its hooks: new/batch/tick/finish/free and
 * its wait parameters in .loop (shm/stage_loop.h), or .run for a stage with
 * its own loop (capture, fed by the BPF ring buffer, not by a ring).
 */
#ifndef CPA_DAEMON_H
#define CPA_DAEMON_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "shm/stage_loop.h"

struct cpa_config;

struct daemon_stage {
	const char *name; /* log subsystem and usage */
	enum shm_stage_id id;
	int in_ring;  /* consumed ring index (enum shm_ring_id), -1 = none */
	int out_ring; /* produced ring index, -1 = none */

	/* Set up the stage object over the opened rings; log what failed. */
	int (*new)(struct shm_arena *a, struct shm_stage *st, struct shm_ring_cons *in,
		   struct shm_ring_prod *out, void **ret);
	/* After the loop: r its result, draining/terminated how it ended. */
	void (*finish)(void *obj, int r, bool draining, bool terminated);
	void (*free)(void *obj);
	/* The loop's hooks and wait parameters (st, in, obj and term are
	 * filled in here). */
	struct shm_stage_loop loop;

	/* Instead of new/loop/finish/free: the stage's own run, which sets
	 * its states (it watches daemon_term for SIGTERM). */
	int (*run)(struct shm_arena *a, struct shm_stage *st);
};

/* Set by the SIGTERM handler. */
extern volatile sig_atomic_t daemon_term;

/* The capabilities (bit CAP_*) a stage keeps after its start-up; the
 * others are dropped for good, and no_new_privs is set. */
uint64_t daemon__caps_kept(enum shm_stage_id id);

/* main() of a stage: 0 after a clean exit, 1 after a failure, 2 for a bad
 * command line or no arena. */
/* A stage's longest sleep: a quarter of the monitor's hang timeout (its
 * config block), so a heartbeat per sleep always beats it. */
int daemon__wait_cap_ms(const struct cpa_config *cfg);

int daemon__main(const struct daemon_stage *d, int argc, char **argv);

#endif /* CPA_DAEMON_H */
