// SPDX-License-Identifier: MIT
/*
 * storer: the last stage (its row in shm/stage.c: ring 2 in, the store
 * out), writing the store with io_uring + zstd. The process and its loop
 * are common/daemon.h and shm/stage_loop.h (docs/pipeline.md), its set-up
 * from the config block storer__open(); this is the table of its hooks.
 */
#include "common/daemon.h"
#include "common/timeutil.h"
#include "storer.h"

#define HEARTBEAT_NS (NSEC_PER_SEC / 4)

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.id = SHM_STAGE_STORER,
		.new = storer__open,
		.finish = storer__close,
		.free = storer__free,
		.loop.batch = storer__batch,
		.loop.tick = storer__tick,
		/* The writer decides: wake on STORER_WAKE_BYTES of new input,
		 * sleep until the open block is due (at most STORER_IDLE_MS). */
		.loop.wait_for = storer__wait_for,
		.loop.clock = CLOCK_REALTIME, /* block deadlines are sample time */
		.loop.batch_max = STORER_BATCH,
		.loop.heartbeat_ns = HEARTBEAT_NS,
	};

	return daemon__main(&d, argc, argv);
}
