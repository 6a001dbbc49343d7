// SPDX-License-Identifier: MIT
/*
 * symd: the third stage (its row in shm/stage.c: ring 1 in, ring 2 out).
 * The process and its loop are common/daemon.h and shm/stage_loop.h
 * (docs/pipeline.md: batches, deadline waits, marks, DRAIN, SIGTERM,
 * heartbeat), its set-up from the config block opts.c; this is the table
 * of its hooks.
 */
#include "common/daemon.h"
#include "common/timeutil.h"
#include "symd.h"
#include "symd_opts.h"

#define SYMD_BATCH 256
/*
 * Adaptive deadline: every wakeup costs ~135 us of CPU on a busy 2-CPU VM
 * (220 us idle), whatever it finds. While samples flow unwindd wakes us
 * once per batch it passes on (SHM_BATCH_MS's worth: shm_ring__flush_sp()), or
 * a burst does (SYMD_WAKE_BYTES, at most half the ring), or a kick (DRAIN);
 * SYMD_WAIT_MIN_MS is only the fallback (SYMD_WAIT_SMALL_MS after a wake
 * that brought little: unwindd's batches come up to SHM_BATCH_IDLE_MS apart
 * then). A deadline that passes doubles it up to SYMD_WAIT_MAX_MS; once
 * that one passes too, the waits have no
 * deadline while no loss aggregate waits to be sent (idle_no_deadline): an
 * idle symd sleeps until unwindd or a kick wakes it, no heartbeat needed.
 * The storer is not woken per batch: it has nothing to do before its
 * block's deadline, and the records wait in ring 2.
 */
#define SYMD_WAIT_MIN_MS   (SHM_BATCH_MS + 500)	     /* deadline while records flow */
#define SYMD_WAIT_MAX_MS   4000			     /* loss flush */
#define SYMD_WAIT_SMALL_MS (SHM_BATCH_IDLE_MS + 500) /* ... while little flows */
#define SYMD_WAKE_BYTES	   (64u << 10)
#define SYMD_HELD_SLEEP_MS 10 /* output held: the storer is behind */
#define SYMD_HEARTBEAT_NS  (200 * NSEC_PER_MSEC)

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.id = SHM_STAGE_SYMD,
		.new = symd__open,
		.finish = symd__close,
		.free = symd__free,
		.loop.batch = symd__step,
		.loop.tick = symd__tick,
		.loop.clock = CLOCK_MONOTONIC,
		.loop.batch_max = SYMD_BATCH,
		.loop.heartbeat_ns = SYMD_HEARTBEAT_NS,
		.loop.wake_bytes = SYMD_WAKE_BYTES,
		.loop.wake_ring_div = 2,
		.loop.wait_ms = SYMD_WAIT_MIN_MS,
		.loop.wait_idle_ms = SYMD_WAIT_MAX_MS,
		.loop.wait_small_ms = SYMD_WAIT_SMALL_MS,
		.loop.backoff = SHM_WAIT_BACKOFF_TIMEOUT,
		.loop.idle_no_deadline = true,
		.loop.busy_ms = SYMD_HELD_SLEEP_MS,
		/* Output held can make a batch take nothing: leave only
		 * once the producer's leftovers are all in. */
		.loop.drain_until_empty = true,
	};

	symd__heap_setup();
	return daemon__main(&d, argc, argv);
}
