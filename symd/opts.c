// SPDX-License-Identifier: MIT
/* symd in its process: see symd_opts.h. */
#include <errno.h>

#include "common/log.h"
#include "symd.h"
#include "symd_opts.h"

int symd__open(const struct shm_stage_ctx *ctx, void **ret)
{
	const struct symd_opts o = {
		.cfg = ctx->cfg,
		.stage = ctx->st,
		.in = ctx->in,
		.out = ctx->out,
		.generation = ctx->generation,
		.fault_kill_batches = ctx->fault_kill_batches,
	};
	struct symd *s = NULL;
	int r = symd__new(&o, &s);

	if (r < 0)
		return log_error_errno(r, "set up: %m");
	log_info("running (generation %u, resume after seq %#llx)", ctx->generation,
		 (unsigned long long)shm_ring__mark_sc(ctx->in));
	*ret = s;
	return 0;
}

int symd__step(void *s, unsigned int max)
{
	int n = symd__batch(s, max);

	return n == 0 && symd__output_held(s) ? -ENOBUFS : n;
}

int symd__close(void *s, enum shm_stage_end how)
{
	if (how != SHM_END_FAILED)
		symd__finish(s);
	return 0;
}
