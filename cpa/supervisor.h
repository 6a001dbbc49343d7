/* SPDX-License-Identifier: MIT */
/*
 * The supervisor side of docs/pipeline.md: spawn the four stages with the
 * arena on fd 3, watch them (exit, hang), restart with backoff, stop them in
 * pipeline order, talk to systemd. See docs/supervisor.md.
 */
#ifndef CPA_CLI_SUPERVISOR_H
#define CPA_CLI_SUPERVISOR_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/arena.h"

struct supervisor_params {
	const char *stage_dir;	     /* where capture, unwindd, symd, storer live */
	bool verbose;		     /* pass --verbose to stages, per-stage stats lines */
	uint64_t duration_ms;	     /* 0 = until a signal */
	uint64_t hang_timeout_ms;    /* heartbeat older than this: SIGKILL + restart */
	uint64_t start_timeout_ms;   /* the same while STARTING, if longer (BPF load) */
	uint64_t stop_timeout_ms;    /* capture STOP -> SIGTERM -> SIGKILL steps */
	uint64_t drain_timeout_ms;   /* per consumer DRAIN -> SIGKILL */
	uint64_t stats_every_ms;     /* 0 = no statistics lines */
	unsigned int max_fast_fails; /* start failures in a row before giving up (never ran) */
	uint64_t healthy_ms;	     /* up this long: failure streak and backoff reset */
};

/* Defaults (10 s hang, 60 s start, 5 s stop, 20 s drain, 5 fast failures, 60 s
 * healthy), overridable for tests by CPA_HANG_TIMEOUT_MS, CPA_START_TIMEOUT_MS,
 * CPA_STOP_TIMEOUT_MS, CPA_DRAIN_TIMEOUT_MS, CPA_MAX_FAST_FAILS and CPA_HEALTHY_MS. -EINVAL
 * (logged) for a malformed variable. */
int supervisor_params__init(struct supervisor_params *p);

/*
 * Run the pipeline until stopped. The caller has blocked SIGCHLD, SIGINT,
 * SIGTERM and SIGHUP. Returns the process exit code: 0 when every stage
 * stopped and drained, SHM_EXIT_PERMANENT when a stage exited so (its cause
 * logged, not restarted), 1 otherwise (give-up, forced kill, set-up error).
 */
int supervisor__run(struct shm_arena *arena, const struct supervisor_params *p);

/*
 * The RLIMIT_AS backstop of a stage with a cache cap of mb MiB: twice the cap
 * plus 1 GiB for the rest of the process (arena, libraries, stacks, malloc
 * arenas, mapped binaries). The cap itself is the stage's own accounting
 * (it evicts); this only keeps a runaway from taking the host. 0: none (no
 * cache: capture, storer; or a sanitizer build, whose shadow memory needs
 * terabytes of address space).
 */
uint64_t supervisor__as_limit(enum shm_stage_id id, uint64_t mb);

#endif /* CPA_CLI_SUPERVISOR_H */
