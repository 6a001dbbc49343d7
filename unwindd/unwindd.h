/* SPDX-License-Identifier: MIT */
/*
 * The unwindd stage: SAMPLE records in (ring 0), FRAMES + MODULE out (ring 1).
 * main.c owns the process (arena, signals, sleep); this object owns the work,
 * so tests can run it in-process over real rings.
 *
 *   in:  SAMPLE  -> FRAMES (+ MODULE defs first time a module is used)
 *        TASK    -> forwarded; exit/exec also update the maps cache
 *        LOSS    -> forwarded unchanged
 *   out: DICT_RESET once per lifetime before anything else, and again
 *        (new epoch) when symd restarts or module ids roll over
 *        LOSS for our own drops (ring full, rate limit), aggregated
 *
 * Options beyond the pipeline: --bench (ubench.h), --debug_option (dump.h),
 * --parse_env_values (only processes whose env label is listed are unwound).
 */
#ifndef CPA_UNWINDD_UNWINDD_H
#define CPA_UNWINDD_UNWINDD_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/records.h"
#include "shm/ring.h"
#include "shm/stage.h"
#include "shm/stage_loop.h"
#include "ubench.h"
#include "walk.h"

#define UNWINDD_BATCH 256 /* input records per batch */
/* /proc/PID/environ read for --parse_env_values: symd's bound (SYMD_MAX_ENVIRON),
 * so the label symd stores and our decision come from the same bytes. */
#define UNWINDD_ENVIRON_MAX (1u << 20)

struct ucache;
struct ubin;
struct udump;
struct uenv;

struct unwindd_opts {
	uint64_t epoch;		  /* first DICT_RESET epoch: generation << 32 */
	uint32_t max_module_id;	  /* start a new epoch before ids pass this */
	uint64_t max_cache_bytes; /* --max_cache_size_mb; 0 = no cap */
	uint64_t refresh_ns;	  /* min interval between maps re-reads of one pid */
	uint64_t refresh_ip_ns;	  /* the same when the interrupted ip missed */
	uint64_t dead_grace_ns;	  /* keep an exited pid's maps this long */
	uint64_t idle_ns;	  /* forget pids without samples this long */
	const char *proc_root;	  /* "/proc" (tests: fixtures) */

	/* symd's stage block: a new generation (symd restarted and lost our
	 * module definitions) starts a new epoch. NULL: not watched. */
	const struct shm_stage *peer;

	bool bench;		    /* --bench */
	uint64_t bench_interval_ns; /* record_interval; 0 = 1 s */

	uint32_t debug_pid; /* --debug_option PID,FREQ,PATH; 0 = off */
	uint32_t debug_freq;
	const char *debug_path;
	uint64_t debug_max_bytes; /* 0 = UDUMP_MAX_BYTES */

	/* --parse_env_values V1,V2 (NULL/"" = unwind every process) against the
	 * value of the first --record_env_name key found in /proc/PID/environ,
	 * "SYSTEM" when none is. Both comma lists. */
	const char *env_values;
	const char *env_keys;

	/* The adaptive stack copy: hints go to capture on this ring (copied;
	 * NULL = off). ustack_start is what capture copies for a process it has
	 * no hint for (--stack_size), ustack_cap the most it will copy. */
	const struct shm_ring_prod *hint;
	uint32_t ustack_start;
	uint32_t ustack_cap;

	/* Test knob: die after committing the output of this batch (shm/fault.h). */
	unsigned int fault_kill_batches;
};

/* Defaults for the fields above that are 0. */
void unwindd_opts__defaults(struct unwindd_opts *o);

struct unwindd;

/* The stage object over its rings (in: ring 0, out: ring 1); opaque. */
int unwindd__new(const struct unwindd_opts *o, struct shm_ring_cons *in, struct shm_ring_prod *out,
		 struct shm_stage *st, struct unwindd **ret);
void unwindd__free(void *u);

/* Send DICT_RESET (once). -ENOBUFS while the output ring has no room. */
int unwindd__start(struct unwindd *u);

/* Take up to max input records, emit their output, commit, release with the
 * mark. Returns the number of records taken (0 = input empty), -ENOBUFS if
 * the DICT_RESET is not out yet, -EBADMSG on a corrupt input ring. */
int unwindd__batch(void *u, unsigned int max);

/* Periodic work (>= 4 times a second, idle or not): flush pending loss
 * records, reap exited processes, enforce the cache cap, update gauges.
 * now_ns is CLOCK_MONOTONIC. Returns 0. */
int unwindd__tick(void *u, uint64_t now_ns);

/* Before leaving: whatever we consumed is already committed; flush our
 * pending losses (a tick now). */
/*
 * Leaving: the last tick, and the pending LOSS records sent. When ring 1 has
 * no room for them (symd down: the monitor restarts it meanwhile) it waits up
 * to wait_ns for room, heartbeating, rather than drop them; returns how many
 * aggregates are still pending (then lost: the caller warns).
 */
unsigned int unwindd__finish(struct unwindd *u, uint64_t wait_ns);

/* ---- opts.c: the stage in its process (common/daemon.h) ---- */

/* The options of this life from the arena's config block: cache cap, bench,
 * debug dump, env filter, the fault knob, and the hint ring, opened into
 * *hint when capture takes hints (o->hint then points at it). Logs what
 * failed. */
int unwindd_opts_from_config(const struct shm_stage_ctx *ctx, struct unwindd_opts *o,
			     struct shm_ring_prod *hint);
/* The daemon's new hook: the object over ctx's rings, and what it runs with
 * logged. */
int unwindd__open(const struct shm_stage_ctx *ctx, void **ret);
/* The daemon's finish hook: unwindd__finish() for up to 10 s under DRAIN, a
 * second on SIGTERM; what is still pending is warned about. */
int unwindd__close(void *u, enum shm_stage_end how);

/* Read-only views for opts.c and the tests. */
uint64_t unwindd__resume_seq(const struct unwindd *u); /* input mark at start */
uint64_t unwindd__now(const struct unwindd *u);	       /* clock of the last batch/tick */
struct ucache *unwindd__cache(const struct unwindd *u);
struct ubench *unwindd__bench(const struct unwindd *u); /* NULL without --bench */
struct udump *unwindd__dump(const struct unwindd *u);	/* NULL without --debug_option */
uint64_t unwindd__env_skipped(const struct unwindd *u); /* samples the env filter skipped */
uint32_t unwindd__nr_envs(const struct unwindd *u);	/* pids with an env decision */
/* Sweep the caches on the next tick, whenever the last sweep was (tests). */
void unwindd__sweep_next_tick(struct unwindd *u);

/* ---- the unwinder seam, shared by the stage and cpa-unwind-replay ---- */

enum unwindd_find_how {
	UNWINDD_FIND_IP = 1u << 0,    /* pc is the interrupted ip (a miss means stale maps) */
	UNWINDD_FIND_TABLE = 1u << 1, /* the caller wants loc->table (CFI walk) */
};

/* Resolve pc: 0 and ret (table may be NULL), or -ENOENT. */
typedef int (*unwindd_find_fn)(void *ctx, uint64_t pc, unsigned int how, struct unw_loc *ret);

/*
 * User frames of one sample into out[CPA_MAX_UFRAMES + 1], leaf first. The
 * rule of docs/unwindd.md: the CFI walk when the sample carries user
 * registers and stack bytes (kept whatever its stop reason), the kernel's FP
 * chain only when it does not. *ret_fp_deeper: a partial CFI walk had fewer
 * frames than the FP chain (diagnostic). *ret_top (may be NULL): the highest
 * sp the CFI walk reached, 0 without one. Returns the enum cpa_unwind_stop.
 */
int unwindd__unwind(const struct cpa_sample *s, const uint64_t *ufp, const uint8_t *stack,
		    unwindd_find_fn find, void *ctx, struct cpa_uframe *out, unsigned int *ret_n,
		    bool *ret_fp_deeper, uint64_t *ret_top);

/* Whether value (len bytes) is one of the comma list's items. */
bool unwindd__list_has(const char *list, const char *value, size_t len);

#endif /* CPA_UNWINDD_UNWINDD_H */
