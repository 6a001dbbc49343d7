// SPDX-License-Identifier: MIT
/*
 * unwindd: the second stage. Consumes ring 0 (SHM_RING_CAPTURE), produces
 * ring 1 (SHM_RING_UNWIND). The process and its loop are common/daemon.h
 * and shm/stage_loop.h (docs/pipeline.md); this is the table of its hooks.
 */
#include <string.h>

#include "common/daemon.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "shm/fault.h"
#include "unwindd.h"

/*
 * Input wait. Each wakeup costs ~135 us of CPU on a busy 2-CPU VM of the
 * kind we run on (220 us idle), as much as unwinding dozens of samples, so
 * unwindd wakes once per capture batch: capture wakes it when it goes to
 * sleep with records in ring 0 (shm_ring__flush_sp(), once per SHM_BATCH_MS
 * while samples flow), and we wake symd the same way (.loop.wake_next). A burst
 * wakes us sooner (WAKE_BYTES, ~150 samples with 8 KiB stacks, at most an
 * eighth of the ring so that capture keeps room for a poll's samples).
 * WAIT_MS is only the fallback while records flow; when a wait brought
 * nothing the deadline doubles up to WAIT_IDLE_MS, within a quarter of the
 * monitor's hang timeout (the heartbeat; 2.5 s by default).
 */
#define WAKE_BYTES   (1024u * 1024)
#define WAIT_MS	     (SHM_BATCH_MS + 500)
#define WAIT_IDLE_MS 4000
#define HEARTBEAT_NS (250 * NSEC_PER_MSEC)
/* DICT_RESET must precede everything; while symd is slow or down and ring 1
 * has no room for it, retry this often. Input waits in ring 0 meanwhile
 * (capture degrades there). */
#define FULL_RETRY_MS		 10
#define FINISH_LOSS_WAIT_NS	 (10 * NSEC_PER_SEC)
#define FINISH_LOSS_WAIT_TERM_NS (NSEC_PER_SEC)
#define DEFAULT_CACHE_MB	 1024u /* CPA's --max_cache_size_mb default */

static int stage_new(struct shm_arena *arena, struct shm_stage *st, struct shm_ring_cons *in,
		     struct shm_ring_prod *out, void **ret)
{
	const struct cpa_config *cfg = shm_arena__config(arena);
	struct unwindd_opts o = {0};
	struct shm_ring_prod hint;
	struct unwindd *u = NULL;
	int r;

	/* The generation grows on every (re)start; the low half counts the
	 * epochs of one lifetime (module id roll-over). */
	o.epoch = (uint64_t)__atomic_load_n(&st->generation, __ATOMIC_RELAXED) << 32;
	o.max_cache_bytes =
		(uint64_t)(cfg->max_cache_size_mb ? cfg->max_cache_size_mb : DEFAULT_CACHE_MB)
		<< 20;
	o.peer = shm_arena__stage(arena, SHM_STAGE_SYMD);
	o.bench = cfg->flags & CPA_CFG_BENCH;
	o.bench_interval_ns =
		(uint64_t)(cfg->record_interval_s ? cfg->record_interval_s : 1) * NSEC_PER_SEC;
	o.debug_pid = cfg->debug_pid;
	o.debug_freq = cfg->debug_freq;
	/* The config block's arrays are NUL-terminated by the monitor; a
	 * hostile or torn one must not make us read past them. */
	if (memchr(cfg->debug_path, 0, sizeof(cfg->debug_path)))
		o.debug_path = cfg->debug_path;
	if (memchr(cfg->parse_env_values, 0, sizeof(cfg->parse_env_values)) &&
	    memchr(cfg->record_env_name, 0, sizeof(cfg->record_env_name))) {
		o.env_values = cfg->parse_env_values;
		o.env_keys = cfg->record_env_name;
	}
	/* The adaptive stack copy: the bounds capture uses, hints on their ring. */
	r = shm_arena__find_ring(arena, SHM_STAGE_UNWINDD, SHM_STAGE_CAPTURE);
	if (r >= 0 && !(cfg->flags & CPA_CFG_KERNEL_STACK_ONLY) && cfg->stack_size &&
	    cfg->backend == CPA_BACKEND_BPF) {
		r = shm_arena__open_prod(arena, (unsigned int)r, &hint);
		if (r < 0)
			return log_error_errno(r, "open the hint ring as producer: %m");
		o.hint = &hint;
		o.ustack_start = cfg->stack_size;
		o.ustack_cap = cpa_config__stack_cap(cfg->stack_size);
	}
	r = shm_fault__kill_after_commit(SHM_STAGE_UNWINDD, (uint32_t)(o.epoch >> 32));
	if (r < 0)
		return log_error_errno(r, "%s: malformed", SHM_FAULT_KILL_ENV);
	if (r)
		log_warn("test knob %s: this life dies after its batch %d", SHM_FAULT_KILL_ENV, r);
	o.fault_kill_batches = (unsigned int)r;
	r = unwindd__new(&o, in, out, st, &u);
	if (r < 0)
		return log_error_errno(r, "set up: %m");
	if (unwindd__resume_seq(u))
		log_info("resuming after seq %#llx", (unsigned long long)unwindd__resume_seq(u));
	log_info("running: epoch %#llx, cache cap %llu MiB", (unsigned long long)o.epoch,
		 (unsigned long long)(o.max_cache_bytes >> 20));
	if (o.env_values && *o.env_values)
		log_info("unwinding only processes whose env value (first of '%s', else SYSTEM) "
			 "is one of '%s'",
			 o.env_keys, o.env_values);
	if (o.bench)
		log_info("bench: unwind statistics every %llu s",
			 (unsigned long long)(o.bench_interval_ns / NSEC_PER_SEC));
	*ret = u;
	return 0;
}

static int stage_batch(void *u, unsigned int max)
{
	return unwindd__batch(u, max);
}

static void stage_tick(void *u, uint64_t now_ns)
{
	unwindd__tick(u, now_ns);
}

static void stage_on_drain(void *u)
{
	(void)u;
	log_info("draining");
}

static void stage_finish(void *u, int r, bool draining, bool terminated)
{
	unsigned int left;

	(void)draining;
	if (r < 0)
		return;
	/* Pending loss records wait for room in ring 1 (symd may be restarting):
	 * under DRAIN up to half the monitor's drain timeout, on SIGTERM a second. */
	left = unwindd__finish(u, terminated ? FINISH_LOSS_WAIT_TERM_NS : FINISH_LOSS_WAIT_NS);
	if (left)
		log_warn("ring 1 full at exit: %u loss aggregate(s) not sent", left);
}

static void stage_free(void *u)
{
	unwindd__free(u);
}

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.name = "unwindd",
		.id = SHM_STAGE_UNWINDD,
		.in_ring = SHM_RING_CAPTURE,
		.out_ring = SHM_RING_UNWIND,
		.new = stage_new,
		.finish = stage_finish,
		.free = stage_free,
		.loop.batch = stage_batch,
		.loop.tick = stage_tick,
		.loop.on_drain = stage_on_drain,
		.loop.clock = CLOCK_MONOTONIC,
		.loop.batch_max = UNWINDD_BATCH,
		.loop.heartbeat_ns = HEARTBEAT_NS,
		.loop.wake_bytes = WAKE_BYTES,
		.loop.wake_ring_div = 8,
		.loop.wait_ms = WAIT_MS,
		.loop.wait_idle_ms = WAIT_IDLE_MS,
		.loop.backoff = SHM_WAIT_BACKOFF_EMPTY,
		.loop.busy_ms = FULL_RETRY_MS,
		.loop.wake_next = true,
	};

	return daemon__main(&d, argc, argv);
}
