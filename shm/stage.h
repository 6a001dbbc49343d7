/* SPDX-License-Identifier: MIT */
/*
 * Stage control blocks: one per stage process, in the arena. The supervisor
 * writes pid/generation/cmd/rate_limit; the stage writes state, heartbeat and
 * its counters. Every field has exactly one writer; readers use relaxed loads
 * (they want a recent value, not an ordering).
 */
#ifndef CPA_SHM_STAGE_H
#define CPA_SHM_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/timeutil.h"

enum shm_stage_id {
	SHM_STAGE_CAPTURE,
	SHM_STAGE_UNWINDD,
	SHM_STAGE_SYMD,
	SHM_STAGE_STORER,
	SHM_STAGE_MAX,
};

enum shm_stage_state {
	SHM_STATE_NONE,	    /* never started */
	SHM_STATE_STARTING, /* spawned, attaching */
	SHM_STATE_RUNNING,
	SHM_STATE_DRAINING, /* asked to stop: finishing its input */
	SHM_STATE_EXITED,   /* left cleanly; its output ring is final */
	SHM_STATE_FAILED,   /* left with an error */
};

/* Supervisor -> stage commands (the cmd word). */
enum shm_stage_cmd {
	SHM_CMD_NONE,
	SHM_CMD_DRAIN, /* finish the input ring (its producer is gone), flush, exit */
	SHM_CMD_STOP,  /* capture: stop sampling, flush, exit */
};

/* Counters every stage keeps, then stage-specific ones (see counter names). */
enum shm_counter {
	SHM_CNT_IN,  /* records taken from the input */
	SHM_CNT_OUT, /* records committed to the output */
	SHM_CNT_BYTES_IN,
	SHM_CNT_BYTES_OUT,
	SHM_CNT_ERRORS,
	SHM_CNT_DROP_RING_FULL, /* output ring full: record dropped */
	SHM_CNT_DEGRADED,	/* output ring nearly full: record shrunk (e.g. no stack copy) */
	SHM_CNT_DROP_RATE,	/* over the stage's rate limit */
	SHM_CNT_DROP_CORRUPT,	/* malformed input record skipped */
	SHM_CNT_DROP_DUP,	/* already passed on before a restart (sequence check) */
	SHM_CNT_WAKEUPS,	/* times the stage woke from a sleep */
	SHM_CNT_BATCHES,	/* input batches processed */
	SHM_CNT_COMMON_MAX,
	/* Not a counter (no name, never printed): 1 while the stage sleeps in
	 * its input wait (shm_stage__run()), where it needs no heartbeat: the
	 * supervisor does not count it as hung until the ring's producer (or a
	 * kick) woke it and it still does not beat (docs/pipeline.md). */
	SHM_SLOT_ASLEEP = SHM_CNT_COMMON_MAX,
	/* Stage-specific counters start here; names via shm_counter_name(). */
	SHM_CNT_STAGE_BASE = 16,
	SHM_CNT_MAX = 64,
};

struct shm_stage {
	/* line 0: identity and supervision */
	uint32_t id;
	uint32_t state;	       /* enum shm_stage_state, written by the stage */
	int32_t pid;	       /* written by the supervisor at spawn */
	uint32_t generation;   /* bumped by the supervisor on every (re)start */
	uint64_t heartbeat_ns; /* kernel CLOCK_MONOTONIC (clock_kernel_ns), by the stage */
	uint64_t rate_limit;   /* records/s, 0 = unlimited; supervisor writes, live */
	uint32_t cmd;	       /* enum shm_stage_cmd, supervisor writes */
	uint32_t exit_code;    /* last exit status as seen by the supervisor */
	uint64_t started_ns;   /* kernel CLOCK_MONOTONIC of this generation's start */
	uint64_t restarts;     /* supervisor-owned count of restarts */
	uint64_t mem_limit_mb; /* cache cap (unwindd, symd, storer), MiB; 0 = the config's
				* max_cache_size_mb; supervisor sets at start, cpa ctl
				* changes it live, the stage applies it on its tick */
	/* lines 1..8: counters, owned by the stage */
	uint64_t cnt[SHM_CNT_MAX];
	/* lines 9..12: why this life cannot run, one line (cause: remedy), set
	 * by shm_stage__permanent() before the stage exits SHM_EXIT_PERMANENT;
	 * the supervisor clears it at spawn and reads it once it has reaped
	 * the stage */
	char cause[256];
};

_Static_assert(offsetof(struct shm_stage, cnt) == 64, "counters start on their own line");
_Static_assert(sizeof(struct shm_stage) == 64 + 8 * SHM_CNT_MAX + 256, "stage block size");

/*
 * The stage exit-code contract (docs/supervisor.md, "Permanent errors").
 * 0: a clean exit; 1: a failure (restarted); 2: a bad command line or no
 * arena. SHM_EXIT_PERMANENT: an error a restart cannot fix (no privilege,
 * a configuration this kernel refuses): the stage said why in its block's
 * cause; the supervisor does not restart it, logs that line, stops the
 * pipeline and `cpa monitor` exits with the same code (sysexits.h's
 * EX_CONFIG; the systemd unit's RestartPreventExitStatus=).
 */
#define SHM_EXIT_PERMANENT 78

/* The cause of the commonest one, without root: capture and the monitor's
 * preflight say it in the same words (%d: kernel.perf_event_paranoid). */
#define SHM_CAUSE_NOPRIV                                                                      \
	"needs root or CAP_PERFMON+CAP_BPF (kernel.perf_event_paranoid=%d): run as root, or " \
	"install with cpa-setcap (docs/packaging.md, \"Without root\")"

/* Write the cause line (printf format) into st->cause; the stage then
 * exits SHM_EXIT_PERMANENT (common/daemon.c does when a cause is set). */
void shm_stage__permanent(struct shm_stage *st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* kernel.perf_event_paranoid, or 2 (the kernel's default) if unreadable. */
int shm_perf_paranoid(void);

static inline void shm_stage__cnt_add(struct shm_stage *st, unsigned int idx, uint64_t n)
{
	/* Single writer: a load and a store, no locked RMW on the hot path. */
	uint64_t v = __atomic_load_n(&st->cnt[idx], __ATOMIC_RELAXED);

	__atomic_store_n(&st->cnt[idx], v + n, __ATOMIC_RELAXED);
}

/* Gauges (shm_counter_is_gauge()): the same single writer, a level. */
static inline void shm_stage__cnt_set(struct shm_stage *st, unsigned int idx, uint64_t v)
{
	__atomic_store_n(&st->cnt[idx], v, __ATOMIC_RELAXED);
}

static inline uint64_t shm_stage__cnt(const struct shm_stage *st, unsigned int idx)
{
	return __atomic_load_n(&st->cnt[idx], __ATOMIC_RELAXED);
}

static inline void shm_stage__set_state(struct shm_stage *st, enum shm_stage_state s)
{
	__atomic_store_n(&st->state, (uint32_t)s, __ATOMIC_RELEASE);
}

static inline enum shm_stage_state shm_stage__state(const struct shm_stage *st)
{
	return (enum shm_stage_state)__atomic_load_n(&st->state, __ATOMIC_ACQUIRE);
}

static inline enum shm_stage_cmd shm_stage__cmd(const struct shm_stage *st)
{
	return (enum shm_stage_cmd)__atomic_load_n(&st->cmd, __ATOMIC_ACQUIRE);
}

static inline uint64_t shm_stage__rate_limit(const struct shm_stage *st)
{
	return __atomic_load_n(&st->rate_limit, __ATOMIC_RELAXED);
}

/*
 * The stage's rate limit (records/s, rate_limit above, live), counted per
 * second of now_ns: true when one more record may pass now.
 */
struct shm_rate {
	uint64_t sec; /* the second n counts */
	uint64_t n;
};

static inline bool shm_rate__admit(struct shm_rate *r, const struct shm_stage *st, uint64_t now_ns)
{
	uint64_t limit = shm_stage__rate_limit(st), sec;

	if (__builtin_expect(!limit, 1))
		return true;
	sec = now_ns / NSEC_PER_SEC;
	if (sec != r->sec) {
		r->sec = sec;
		r->n = 0;
	}
	return ++r->n <= limit;
}

/* Stamp the heartbeat with the kernel's CLOCK_MONOTONIC now (clock_kernel_ns()). */
void shm_stage__heartbeat(struct shm_stage *st);

/*
 * The stage table (shm/stage.c): everything the arena, the daemon and the
 * supervisor know about a stage, one row each. Adding a stage is one id
 * above, one row there (with its counter names in shm/counters.h) and one
 * folder with its main.c (docs/pipeline.md, "Adding a stage").
 */
enum shm_stage_role {
	/* Fed by the kernel (BPF ring buffer, perf events), not by a ring:
	 * its loop polls those (shm_stage_loop.poll). Stopped by STOP, first;
	 * not restarted during a stop. */
	SHM_ROLE_PRODUCER,
	/* ring_in -> ring_out. Stopped by DRAIN, in pipeline order. */
	SHM_ROLE_CONSUMER,
	/* ring_in -> out of the arena (the store). Stopped by DRAIN. */
	SHM_ROLE_SINK,
};

/* What the supervisor and cpa ctl apply to a stage (limits). cpa ctl rate
 * writes any stage's rate_limit; only the stages with SHM_LIMIT_RATE read it. */
#define SHM_LIMIT_MEM  (1u << 0) /* a cache under mem_limit_mb (cpa ctl mem) + RLIMIT_AS */
#define SHM_LIMIT_RATE (1u << 1) /* it applies rate_limit (shm_rate__admit) */

struct shm_stage_desc {
	const char *name; /* executable, log subsystem, cpa ctl */
	enum shm_stage_role role;
	int ring_in;	      /* enum shm_ring_id it consumes; -1: none */
	int ring_out;	      /* ... it produces; -1: none */
	int ring_back;	      /* ... it produces towards up (feedback); -1: none */
	enum shm_stage_id up; /* the stage feeding ring_in; SHM_STAGE_MAX: none */
	uint64_t caps;	      /* capabilities kept once set up (bit CAP_*) */
	bool caps_first;      /* drop to caps before set-up, not after it */
	unsigned int limits;  /* SHM_LIMIT_* */
	/* A counter of its own the monitor's stats add to its drops (0: none). */
	unsigned int drop_cnt;
	/* A gauge that, non-zero after a death, means only a successor counts
	 * what that life lost: one is started during a stop (0: none). */
	unsigned int fold_gauge;
	/* Consumers: the gauge of its pending LOSS aggregates (shm_loss__publish;
	 * 0: none), and the reason under which the monitor counts what a stage
	 * killed at stop held (docs/pipeline.md, "Stopping"). */
	unsigned int loss_pending;
	unsigned int lost_at_stop;
	const char *const *counters; /* names of slots SHM_CNT_STAGE_BASE.. */
	unsigned int nr_counters;
	uint64_t gauges; /* bit i: slot i is a level (shm_counter_is_gauge) */
};

extern const struct shm_stage_desc shm_stages[SHM_STAGE_MAX];

const char *shm_stage_name(enum shm_stage_id id);
/* The stage named by the len bytes at name (need not end there), or
 * SHM_STAGE_MAX when none is. */
enum shm_stage_id shm_stage_by_name(const char *name, size_t len);
const char *shm_state_name(enum shm_stage_state s);
/* Name of counter idx of stage id, or NULL if that slot is unused. */
const char *shm_counter_name(enum shm_stage_id id, unsigned int idx);
/* True for slots that hold a level (e.g. cache bytes), not a monotonic count:
 * print them as values, never as deltas. */
bool shm_counter_is_gauge(enum shm_stage_id id, unsigned int idx);

#endif /* CPA_SHM_STAGE_H */
