// SPDX-License-Identifier: MIT
/*
 * capture: the producer of the pipeline (its row in shm/stage.c: ring 0
 * out, fed by the kernel's buffers). The process and its loop are
 * common/daemon.h and shm/stage_loop.h (docs/pipeline.md); this is the
 * table of its hooks. Its input source is one poll of the BPF ring buffer
 * (or the perf backend's buffers) on its own deadline (cap_emit.h), with a
 * heartbeat on every turn: polls are never more than a second apart, or
 * CAP_IDLE_TICK_MAX_NS on an idle host (docs/metrics.md, "Idle host").
 */
#include "capture.h"
#include "common/daemon.h"

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.id = SHM_STAGE_CAPTURE,
		.new = capture__new,
		.finish = capture__finish,
		.free = capture__free,
		.loop.poll = capture__poll,
		.loop.tick = capture__tick,
		.loop.clock = CLOCK_MONOTONIC,
		.loop.heartbeat_ns = 0, /* every poll */
	};

	return daemon__main(&d, argc, argv);
}
