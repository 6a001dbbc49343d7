// SPDX-License-Identifier: MIT
/* unwindd in its process: options from the config block, the daemon's new
 * and finish hooks (unwindd.h). */
#include <string.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "unwindd.h"

#define DEFAULT_CACHE_MB 1024u /* CPA's --max_cache_size_mb default */
/* Leaving with loss records and no room in ring 1 (symd may be restarting):
 * under DRAIN up to half the monitor's drain timeout, on SIGTERM a second. */
#define FINISH_LOSS_WAIT_NS	 (10 * NSEC_PER_SEC)
#define FINISH_LOSS_WAIT_TERM_NS (NSEC_PER_SEC)

int unwindd_opts_from_config(const struct shm_stage_ctx *ctx, struct unwindd_opts *o,
			     struct shm_ring_prod *hint)
{
	const struct cpa_config *cfg = ctx->cfg;
	int r;

	memset(o, 0, sizeof(*o));
	/* The generation grows on every (re)start; the low half counts the
	 * epochs of one lifetime (module id roll-over). */
	o->epoch = (uint64_t)ctx->generation << 32;
	o->max_cache_bytes =
		(uint64_t)(cfg->max_cache_size_mb ? cfg->max_cache_size_mb : DEFAULT_CACHE_MB)
		<< 20;
	o->peer = shm_arena__stage(ctx->arena, SHM_STAGE_SYMD);
	o->bench = cfg->flags & CPA_CFG_BENCH;
	o->bench_interval_ns =
		(uint64_t)(cfg->record_interval_s ? cfg->record_interval_s : 1) * NSEC_PER_SEC;
	o->debug_pid = cfg->debug_pid;
	o->debug_freq = cfg->debug_freq;
	/* The config block's arrays are NUL-terminated by the monitor; a
	 * hostile or torn one must not make us read past them. */
	if (memchr(cfg->debug_path, 0, sizeof(cfg->debug_path)))
		o->debug_path = cfg->debug_path;
	if (memchr(cfg->parse_env_values, 0, sizeof(cfg->parse_env_values)) &&
	    memchr(cfg->record_env_name, 0, sizeof(cfg->record_env_name))) {
		o->env_values = cfg->parse_env_values;
		o->env_keys = cfg->record_env_name;
	}
	/* The adaptive stack copy: the bounds capture uses, hints on their ring. */
	r = shm_arena__find_ring(ctx->arena, SHM_STAGE_UNWINDD, SHM_STAGE_CAPTURE);
	if (r >= 0 && !(cfg->flags & CPA_CFG_KERNEL_STACK_ONLY) && cfg->stack_size &&
	    cfg->backend == CPA_BACKEND_BPF) {
		r = shm_arena__open_prod(ctx->arena, (unsigned int)r, hint);
		if (r < 0)
			return log_error_errno(r, "open the hint ring as producer: %m");
		o->hint = hint;
		o->ustack_start = cfg->stack_size;
		o->ustack_cap = cpa_config__stack_cap(cfg->stack_size);
	}
	o->fault_kill_batches = ctx->fault_kill_batches;
	return 0;
}

int unwindd__open(const struct shm_stage_ctx *ctx, void **ret)
{
	struct unwindd_opts o;
	struct shm_ring_prod hint;
	struct unwindd *u = NULL;
	int r;

	r = unwindd_opts_from_config(ctx, &o, &hint);
	if (r < 0)
		return r;
	r = unwindd__new(&o, ctx->in, ctx->out, ctx->st, &u);
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

int unwindd__close(void *u, enum shm_stage_end how)
{
	unsigned int left;

	if (how == SHM_END_FAILED)
		return 0;
	/* Pending loss records wait for room in ring 1 (symd may be restarting). */
	left = unwindd__finish(u, how == SHM_END_TERM || how == SHM_END_ORPHAN
					  ? FINISH_LOSS_WAIT_TERM_NS
					  : FINISH_LOSS_WAIT_NS);
	if (left)
		log_warn("ring 1 full at exit: %u loss aggregate(s) not sent", left);
	return 0;
}
