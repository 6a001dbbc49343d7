/* SPDX-License-Identifier: MIT */
/*
 * The unwindd stage: SAMPLE records in (ring 0), FRAMES + MODULE out (ring 1).
 * main.c owns the process (arena, signals, sleep); this object owns the work,
 * so tests can run it in-process over real rings.
 *
 *   in:  SAMPLE  -> FRAMES (+ MODULE defs first time a module is used)
 *        TASK    -> forwarded; exit/exec also update the maps cache
 *        LOSS    -> forwarded unchanged
 *   out: DICT_RESET once per lifetime before anything else
 *        LOSS for our own drops (ring full, rate limit), aggregated
 */
#ifndef CPA_UNWINDD_UNWINDD_H
#define CPA_UNWINDD_UNWINDD_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/records.h"
#include "shm/ring.h"
#include "shm/stage.h"

#define UNWINDD_BATCH	   256 /* input records per batch */
#define UNWINDD_LOSS_SLOTS 32  /* distinct (stage, reason, kind) pending */

struct ucache;

struct unwindd_opts {
	uint64_t epoch;		  /* first DICT_RESET epoch: generation << 32 */
	uint32_t max_module_id;	  /* start a new epoch before ids pass this */
	uint64_t max_cache_bytes; /* --max_cache_size_mb; 0 = no cap */
	uint64_t refresh_ns;	  /* min interval between maps re-reads of one pid */
	uint64_t refresh_ip_ns;	  /* the same when the interrupted ip missed */
	uint64_t dead_grace_ns;	  /* keep an exited pid's maps this long */
	uint64_t idle_ns;	  /* forget pids without samples this long */
	const char *proc_root;	  /* "/proc" (tests: fixtures) */
};

/* Defaults for the fields above that are 0. */
void unwindd_opts__defaults(struct unwindd_opts *o);

struct unwindd_loss {
	uint64_t seq; /* highest seq folded in: keeps the output ordered */
	uint64_t time_ns;
	uint64_t count;
	uint64_t weight;
	uint32_t stage;
	uint32_t reason;
	uint32_t kind;
	bool used;
};

struct unwindd {
	struct unwindd_opts o;
	struct shm_ring_cons *in;
	struct shm_ring_prod *out;
	struct shm_stage *st;
	struct ucache *cache;

	uint64_t epoch;	    /* current dictionary epoch */
	uint64_t skip_upto; /* input mark at start: seq <= this was passed on already */
	uint64_t mark;	    /* highest input seq handled */
	bool reset_sent;

	uint64_t now_ns; /* CLOCK_MONOTONIC at the start of the batch */
	uint64_t last_sweep_ns;
	uint64_t walk_complex_seen; /* walker's complex_rows already counted */

	/* rate limit: records admitted in the current second */
	uint64_t rate_sec;
	uint64_t rate_n;

	struct unwindd_loss loss[UNWINDD_LOSS_SLOTS];
	unsigned int n_loss;

	/* Per-sample scratch: no allocation on the hot path. */
	struct cpa_uframe uf[CPA_MAX_UFRAMES + 1];
	struct ubin *touched[CPA_MAX_UFRAMES + 1];
	unsigned int n_touched;
};

int unwindd__new(const struct unwindd_opts *o, struct shm_ring_cons *in, struct shm_ring_prod *out,
		 struct shm_stage *st, struct unwindd **ret);
void unwindd__free(struct unwindd *u);

/* Send DICT_RESET (once). -ENOBUFS while the output ring has no room. */
int unwindd__start(struct unwindd *u);

/* Take up to max input records, emit their output, commit, release with the
 * mark. Returns the number of records taken (0 = input empty), -ENOBUFS if
 * the DICT_RESET is not out yet, -EBADMSG on a corrupt input ring. */
int unwindd__process_batch(struct unwindd *u, unsigned int max);

/* Periodic work (>= 4 times a second, idle or not): flush pending loss
 * records, reap exited processes, enforce the cache cap, update gauges. */
void unwindd__tick(struct unwindd *u, uint64_t now_ns);

uint64_t unwindd_now_ns(void);

#endif /* CPA_UNWINDD_UNWINDD_H */
