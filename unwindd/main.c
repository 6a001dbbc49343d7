// SPDX-License-Identifier: MIT
/*
 * unwindd: the second stage (its row in shm/stage.c: ring 0 in, ring 1
 * out). The process and its loop are common/daemon.h and shm/stage_loop.h
 * (docs/pipeline.md), its set-up from the config block opts.c; this is the
 * table of its hooks.
 */
#include "common/daemon.h"
#include "common/log.h"
#include "unwindd.h"

/*
 * Input wait. Each wakeup costs ~135 us of CPU on a busy 2-CPU VM of the
 * kind we run on (220 us idle), as much as unwinding dozens of samples, so
 * unwindd wakes once per capture batch: capture wakes it when it goes to
 * sleep with records in ring 0 (shm_ring__flush_sp(), once per SHM_BATCH_MS
 * while samples flow, up to SHM_BATCH_IDLE_MS while little does: then our
 * deadline is WAIT_SMALL_MS), and we wake symd the same way
 * (.loop.wake_next). A burst wakes us sooner (WAKE_BYTES, ~150 samples with
 * 8 KiB stacks, at most an eighth of the ring so that capture keeps room for
 * a poll's samples).
 * WAIT_MS is only the fallback while records flow; when a wait brought
 * nothing the deadline doubles up to WAIT_IDLE_MS, and once a wait that long
 * brought nothing the waits have no deadline (idle_no_deadline): an idle
 * unwindd sleeps until capture or a kick wakes it, and needs no heartbeat
 * meanwhile (SHM_SLOT_ASLEEP).
 */
#define WAKE_BYTES    (1024u * 1024)
#define WAIT_MS	      (SHM_BATCH_MS + 500)
#define WAIT_IDLE_MS  4000
#define WAIT_SMALL_MS (SHM_BATCH_IDLE_MS + 500)
#define HEARTBEAT_NS  (250 * NSEC_PER_MSEC)
/* DICT_RESET must precede everything; while symd is slow or down and ring 1
 * has no room for it, retry this often. Input waits in ring 0 meanwhile
 * (capture degrades there). */
#define FULL_RETRY_MS 10

static void stage_on_drain(void *u)
{
	(void)u;
	log_debug("draining"); /* the monitor's "draining unwindd" line says it */
}

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.id = SHM_STAGE_UNWINDD,
		.new = unwindd__open,
		.finish = unwindd__close,
		.free = unwindd__free,
		.loop.batch = unwindd__batch,
		.loop.tick = unwindd__tick,
		.loop.on_drain = stage_on_drain,
		.loop.clock = CLOCK_MONOTONIC,
		.loop.batch_max = UNWINDD_BATCH,
		.loop.heartbeat_ns = HEARTBEAT_NS,
		.loop.wake_bytes = WAKE_BYTES,
		.loop.wake_ring_div = 8,
		.loop.wait_ms = WAIT_MS,
		.loop.wait_idle_ms = WAIT_IDLE_MS,
		.loop.wait_small_ms = WAIT_SMALL_MS,
		.loop.backoff = SHM_WAIT_BACKOFF_EMPTY,
		.loop.idle_no_deadline = true,
		.loop.busy_ms = FULL_RETRY_MS,
		.loop.wake_next = true,
	};

	return daemon__main(&d, argc, argv);
}
