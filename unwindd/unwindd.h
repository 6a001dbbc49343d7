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

#include "common/ratelimit.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/stage.h"
#include "ubench.h"
#include "walk.h"

#define UNWINDD_BATCH	   256 /* input records per batch */
#define UNWINDD_LOSS_SLOTS 32  /* distinct (stage, reason, kind) pending */
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
	uint32_t peer_gen;  /* symd generation our definitions were sent to */
	uint64_t skip_upto; /* input mark at start: seq <= this was passed on already */
	uint64_t mark;	    /* highest input seq handled */
	bool reset_sent;

	uint64_t now_ns; /* CLOCK_MONOTONIC at the start of the batch */
	uint64_t last_sweep_ns;
	uint64_t walk_complex_seen; /* walker's complex_rows already counted */

	struct ratelimit rate; /* the stage's rate_limit, over now_ns */

	struct unwindd_loss loss[UNWINDD_LOSS_SLOTS];
	unsigned int n_loss;

	/* Per-sample scratch: no allocation on the hot path. */
	struct cpa_uframe uf[CPA_MAX_UFRAMES + 1];
	struct ubin *touched[CPA_MAX_UFRAMES + 1];
	unsigned int n_touched;

	/* --bench: NULL when off (then no clock call on the hot path). */
	struct ubench *bench;

	/* --debug_option: the dump, and the binaries the sample being dumped used. */
	struct udump *dump;
	bool dumping;	       /* the sample in hand is being dumped */
	uint64_t dump_maps_ns; /* the dumped pid's maps refresh_ns last dumped; ~0 = never */
	struct ubin *dump_bins[CPA_MAX_UFRAMES + 1];
	unsigned int n_dump_bins;

	/* --parse_env_values: per-pid decisions (environ read once per pid). */
	struct uenv **envs;
	uint32_t envs_mask;
	uint32_t n_envs;
	char *env_buf; /* UNWINDD_ENVIRON_MAX + 1, allocated when the filter is on */
	size_t env_cap;
	uint64_t env_skipped;
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

/* ---- the unwinder seam, shared by the stage and cpa-unwind-replay ---- */

enum unwindd_find_how {
	UNWINDD_FIND_IP = 1u << 0,    /* pc is the interrupted ip (a miss means stale maps) */
	UNWINDD_FIND_TABLE = 1u << 1, /* the caller wants loc->table (CFI walk) */
};

/* Resolve pc: 0 and ret (table may be NULL), or -ENOENT. */
typedef int (*unwindd_find_fn)(void *ctx, uint64_t pc, unsigned int how, struct unw_loc *ret);

/*
 * User frames of one sample into out[CPA_MAX_UFRAMES + 1], leaf first. The
 * hybrid rule of docs/unwindd.md: the CFI walk when the sample carries user
 * registers and stack bytes (kept when it reached the end, a JIT region, or
 * is at least as deep as the kernel's FP chain), the FP chain otherwise.
 * *ret_fp_deeper tells that the FP chain won over a CFI walk. Returns the
 * enum cpa_unwind_stop.
 */
int unwindd__unwind(const struct cpa_sample *s, const uint64_t *ufp, const uint8_t *stack,
		    unwindd_find_fn find, void *ctx, struct cpa_uframe *out, unsigned int *ret_n,
		    bool *ret_fp_deeper);

/* Whether value (len bytes) is one of the comma list's items. */
bool unwindd__list_has(const char *list, const char *value, size_t len);

#endif /* CPA_UNWINDD_UNWINDD_H */
