// SPDX-License-Identifier: MIT
/*
 * symd executable: consumes ring 1, produces ring 2. The process and its
 * loop are common/daemon.h and shm/stage_loop.h (docs/pipeline.md: batches,
 * deadline waits, marks, DRAIN, SIGTERM, heartbeat); this is the table of
 * its hooks.
 */
#include "symd.h"

#include <errno.h>

#include "common/daemon.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "shm/fault.h"

#define SYMD_BATCH 256
/*
 * Adaptive deadline: every wakeup costs ~135 us of CPU on a busy 2-CPU VM
 * (220 us idle), whatever it finds. While samples flow unwindd wakes us
 * once per batch it passes on (SHM_BATCH_MS's worth: shm_ring__flush_sp()), or
 * a burst does (SYMD_WAKE_BYTES, at most half the ring), or a kick (DRAIN);
 * SYMD_WAIT_MIN_MS is only the fallback. A deadline that passes doubles it
 * up to SYMD_WAIT_MAX_MS, within a quarter of the monitor's hang timeout.
 * The storer is not woken per batch: it has nothing to do before its
 * block's deadline, and the records wait in ring 2.
 */
#define SYMD_WAIT_MIN_MS   (SHM_BATCH_MS + 500) /* deadline while records flow */
#define SYMD_WAIT_MAX_MS   4000			/* heartbeat and loss flush */
#define SYMD_WAKE_BYTES	   (64u << 10)
#define SYMD_HELD_SLEEP_MS 10 /* output held: the storer is behind */
#define SYMD_HEARTBEAT_NS  (200 * NSEC_PER_MSEC)

static int stage_new(struct shm_arena *a, struct shm_stage *st, struct shm_ring_cons *in,
		     struct shm_ring_prod *out, void **ret)
{
	uint32_t gen = __atomic_load_n(&st->generation, __ATOMIC_RELAXED);
	int fault = shm_fault__kill_after_commit(SHM_STAGE_SYMD, gen);
	struct symd *s = NULL;
	int r;

	if (fault < 0)
		return log_error_errno(fault, "%s: malformed", SHM_FAULT_KILL_ENV);
	if (fault)
		log_warn("test knob %s: this life dies after its batch %d", SHM_FAULT_KILL_ENV,
			 fault);
	r = symd__new(&(struct symd_opts){.cfg = shm_arena__config(a),
					  .stage = st,
					  .in = in,
					  .out = out,
					  .generation = gen,
					  .fault_kill_batches = (unsigned int)fault},
		      &s);
	if (r < 0)
		return log_error_errno(r, "set up: %m");
	log_info("running (generation %u, resume after seq %#llx)", gen,
		 (unsigned long long)shm_ring__mark_sc(in));
	*ret = s;
	return 0;
}

static int stage_batch(void *s, unsigned int max)
{
	int n = symd__batch(s, max);

	/* Nothing taken because the storer is behind: let it catch up, keep
	 * our input (the loop sleeps SYMD_HELD_SLEEP_MS). */
	return n == 0 && symd__output_held(s) ? -ENOBUFS : n;
}

static void stage_tick(void *s, uint64_t now_ns)
{
	symd__tick(s, now_ns);
}

static void stage_finish(void *s, int r, bool draining, bool terminated)
{
	(void)draining;
	(void)terminated;
	/* SIGTERM or drained: everything passed on is committed and released
	 * (symd__batch does both per batch); flush our own loss report. */
	if (r >= 0)
		symd__finish(s);
}

static void stage_free(void *s)
{
	symd__free(s);
}

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.name = "symd",
		.id = SHM_STAGE_SYMD,
		.in_ring = SHM_RING_UNWIND,
		.out_ring = SHM_RING_SYMD,
		.new = stage_new,
		.finish = stage_finish,
		.free = stage_free,
		.loop.batch = stage_batch,
		.loop.tick = stage_tick,
		.loop.clock = CLOCK_MONOTONIC,
		.loop.batch_max = SYMD_BATCH,
		.loop.heartbeat_ns = SYMD_HEARTBEAT_NS,
		.loop.wake_bytes = SYMD_WAKE_BYTES,
		.loop.wake_ring_div = 2,
		.loop.wait_ms = SYMD_WAIT_MIN_MS,
		.loop.wait_idle_ms = SYMD_WAIT_MAX_MS,
		.loop.backoff = SHM_WAIT_BACKOFF_TIMEOUT,
		.loop.busy_ms = SYMD_HELD_SLEEP_MS,
		/* Output held can make a batch take nothing: leave only
		 * once the producer's leftovers are all in. */
		.loop.drain_until_empty = true,
	};

	symd__heap_setup();
	return daemon__main(&d, argc, argv);
}
