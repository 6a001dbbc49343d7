/* SPDX-License-Identifier: MIT */
/*
 * The stage side of docs/pipeline.md, written once: attach the arena and
 * check its config block, then the loop every stage runs (heartbeat, STOP,
 * DRAIN, the orphan drain, batch, tick, adaptive wait on the input ring,
 * wakeup counting; or a poll of the input source of a stage fed by the
 * kernel). A stage fills a struct shm_stage_loop with its hooks and wait
 * parameters; common/daemon.c drives the process around it.
 *
 * Library code: no logging; every function returns 0 or -errno.
 */
#ifndef CPA_SHM_STAGE_LOOP_H
#define CPA_SHM_STAGE_LOOP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "arena.h"

/*
 * Attach the arena on fd and find stage id's block. -EPROTO when the config
 * block is missing or of another magic/version (a stage of another build);
 * other -errno from shm_arena__attach(). Takes ownership of fd on success.
 */
int shm_stage__attach(int fd, enum shm_stage_id id, struct shm_arena **ret_arena,
		      struct shm_stage **ret_st);

/* Stamp the heartbeat and leave: EXITED when r >= 0, else FAILED. */
void shm_stage__exit(struct shm_stage *st, int r);

/* How the input wait's deadline grows while the input is idle. */
enum shm_wait_backoff {
	/* Double after a wait whose following batch found nothing; any
	 * record brings it back to wait_ms. */
	SHM_WAIT_BACKOFF_EMPTY,
	/* Double after a wait that timed out (whatever it found); a wakeup by
	 * the producer (wake_bytes arrived, or DRAIN) brings it back. */
	SHM_WAIT_BACKOFF_TIMEOUT,
};

/* What a stage's new hook builds on (common/daemon.c fills it in from the
 * stage table, shm/stage.h). */
struct shm_stage_ctx {
	struct shm_arena *arena;
	struct cpa_config *cfg;
	struct shm_stage *st;
	uint32_t generation;	   /* of this life */
	struct shm_ring_cons *in;  /* its ring_in, opened; NULL: none */
	struct shm_ring_prod *out; /* its ring_out, opened; NULL: none */
	/* CPA_FAULT_KILL_AFTER_COMMIT for this life (shm/fault.h), 0: off. */
	unsigned int fault_kill_batches;
	const volatile sig_atomic_t *term; /* set by the SIGTERM handler */
};

/* How the loop ended: what the stage's finish may still do. */
enum shm_stage_end {
	SHM_END_FAILED,	 /* a hard error: finish only what is safe */
	SHM_END_DRAINED, /* DRAIN, the input done: nobody hurries us */
	SHM_END_STOPPED, /* STOP (a producer): nobody hurries us */
	SHM_END_TERM,	 /* SIGTERM from a live monitor (a restart): leave promptly */
	/* SIGTERM after the monitor died (the orphan drain ran, for a stage
	 * with an upstream) or during a DRAIN: leave soon, but what is left
	 * has nobody else. */
	SHM_END_ORPHAN,
};

struct shm_stage_loop {
	struct shm_stage *st;
	struct shm_ring_cons *in;
	void *obj;
	const volatile sig_atomic_t *term; /* set by the SIGTERM handler */

	/*
	 * Up to max input records: how many were taken (0 = nothing to do),
	 * -ENOBUFS when the output side is busy (the loop ticks, sleeps
	 * busy_ms and tries again, keeping the input), other -errno fails.
	 */
	int (*batch)(void *obj, unsigned int max);
	/*
	 * The input source when it is not a ring (capture: the kernel's
	 * buffers), in place of batch and the ring wait: one wait on it (the
	 * stage sizes the deadline) and what came: records taken, -EINTR (a
	 * signal cut the wait short) or -errno, which fails.
	 */
	int (*poll)(void *obj);
	/* Periodic work, after every batch; now_ns on clock `clock`. -errno
	 * fails (the stage cannot go on); 0 otherwise. */
	int (*tick)(void *obj, uint64_t now_ns);
	/* Optional: the wait's wake bytes and deadline, decided by the stage
	 * (no backoff then; a deadline < 0: none, the stage has nothing due
	 * until input comes). Without it: wake_bytes and the backoff below. */
	void (*wait_for)(void *obj, uint64_t now_ns, uint64_t *ret_wake_bytes, int *ret_ms);
	/* Optional: called once when DRAIN is seen (the caller logs). */
	void (*on_drain)(void *obj);

	clockid_t clock;	    /* of the now_ns handed to tick and wait_for */
	unsigned int batch_max;	    /* records per batch */
	uint64_t heartbeat_ns;	    /* heartbeat at most this often */
	uint64_t wake_bytes;	    /* wake the consumer once this much input waits, */
	unsigned int wake_ring_div; /* but at most ring size / this (0: no cap) */
	int wait_ms;		    /* deadline while records flow */
	int wait_idle_ms;	    /* longest deadline while idle */
	enum shm_wait_backoff backoff;
	/* Once a wait at wait_idle_ms brought nothing, the next waits have no
	 * deadline while the stage holds no loss aggregates (its row's
	 * loss_pending gauge is 0): an idle stage sleeps until its producer
	 * or a kick wakes it. Its sleep needs no heartbeat (SHM_SLOT_ASLEEP). */
	bool idle_no_deadline;
	/* Optional (0: none): the deadline, at least, after a wake cycle that
	 * took fewer than SHM_BATCH_SMALL_RECS records per SHM_BATCH_MS since
	 * the wait before it began, while no loss aggregate waits (the
	 * stretched batch below: the producer wakes us that rarely); a wait
	 * this long that brings nothing makes the stage idle. */
	int wait_small_ms;
	int busy_ms; /* sleep after -ENOBUFS */
	/* Longest sleep whatever the above say (0: none). */
	int wait_cap_ms;
	/* Wake the next stage before each sleep when we left it records (its
	 * own deadline can then be long: a second of samples costs each stage
	 * one wakeup, ~135 us of CPU on this kind of VM, docs/pipeline.md). */
	bool wake_next;
	struct shm_ring_prod *next; /* our output ring, for wake_next (daemon.c) */
	/* Under DRAIN leave only once the input ring is empty, not after the
	 * first empty batch (a batch can take nothing while output is held). */
	bool drain_until_empty;

	/*
	 * Optional: the stage feeding our input. With it, a SIGTERM that
	 * comes after our parent (the monitor) died (PR_SET_PDEATHSIG) is an
	 * orphan drain, not a quick exit: the arena dies with the last stage,
	 * so the input is consumed until the upstream stage has left (EXITED,
	 * FAILED or gone) and the input is empty, for at most
	 * SHM_ORPHAN_DRAIN_NS (docs/reliability.md, "Kills and hangs").
	 */
	const struct shm_stage *up;

	/* Out: DRAIN was seen (the stage's finish may depend on it). */
	bool draining;
	/* Out: the orphan drain above ran. */
	bool orphaned;
	/* Out: how it ended (after a 0 return). */
	enum shm_stage_end end;
};

#define SHM_ORPHAN_DRAIN_NS (5 * NSEC_PER_SEC)

/*
 * The pipeline's batch period while samples flow: capture wakes unwindd at
 * most about this often (shm_ring__flush_sp() at a tick at least 3/4 of it
 * after the last), unwindd wakes symd once per batch it takes, and their own
 * deadlines while records flow lie past it. More input than a consumer's
 * wake_bytes wakes it sooner. A wakeup costs 135-220 us of CPU on the VMs we
 * run on (docs/pipeline.md): at 49 Hz on 2 CPUs one wakeup per stage per
 * second was half the pipeline's cost per sample. The storer writes a block
 * every 5 s, so nothing a reader sees is later than before.
 */
#define SHM_BATCH_MS 2000

/*
 * Batches are sized by time and volume: a batch period that carries fewer
 * than SHM_BATCH_SMALL_RECS records into ring 0 (an idle host: a metrics
 * record or two a second, a few samples and task events) stretches, up to
 * SHM_BATCH_IDLE_MS: capture flushes ring 0 once that many records wait, or
 * that long after the last flush, and unwindd and symd wait that long after
 * a wake cycle that took fewer per batch period (wait_small_ms), so each
 * stage wakes once per stretched batch. A batch period that carries more is
 * flushed at SHM_BATCH_MS as before; bytes wake a consumer sooner anyway
 * (its wake_bytes). Records carry their own times: only when a reader sees
 * them moves (docs/pipeline.md, "Latency budget").
 */
#define SHM_BATCH_IDLE_MS    10000
#define SHM_BATCH_SMALL_RECS 64

/*
 * Mark the stage RUNNING and loop until SIGTERM (*term), STOP or, under
 * DRAIN, until the input is done. 0 then (l->end says which), or the first
 * hard -errno of batch, poll, tick or the wait (-EBADMSG: corrupt input
 * ring). Leaves the state to the caller.
 */
int shm_stage__run(struct shm_stage_loop *l);

#endif /* CPA_SHM_STAGE_LOOP_H */
