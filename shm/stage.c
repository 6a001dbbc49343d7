// SPDX-License-Identifier: MIT
#include "counters.h"
#include "stage.h"

#include <string.h>

#include "common/timeutil.h"

void shm_stage__heartbeat(struct shm_stage *st)
{
	__atomic_store_n(&st->heartbeat_ns, clock_kernel_ns(CLOCK_MONOTONIC), __ATOMIC_RELAXED);
}

const char *shm_stage_name(enum shm_stage_id id)
{
	static const char *const names[SHM_STAGE_MAX] = {
		[SHM_STAGE_CAPTURE] = "capture",
		[SHM_STAGE_UNWINDD] = "unwindd",
		[SHM_STAGE_SYMD] = "symd",
		[SHM_STAGE_STORER] = "storer",
	};

	return (unsigned int)id < SHM_STAGE_MAX ? names[id] : "?";
}

enum shm_stage_id shm_stage_by_name(const char *name, size_t len)
{
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		const char *n = shm_stage_name((enum shm_stage_id)i);

		if (strlen(n) == len && !memcmp(name, n, len))
			return (enum shm_stage_id)i;
	}
	return SHM_STAGE_MAX;
}

const char *shm_state_name(enum shm_stage_state s)
{
	static const char *const names[] = {
		[SHM_STATE_NONE] = "none",	 [SHM_STATE_STARTING] = "starting",
		[SHM_STATE_RUNNING] = "running", [SHM_STATE_DRAINING] = "draining",
		[SHM_STATE_EXITED] = "exited",	 [SHM_STATE_FAILED] = "failed",
	};

	return (unsigned int)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

const char *shm_counter_name(enum shm_stage_id id, unsigned int idx)
{
	static const char *const common[SHM_CNT_COMMON_MAX] = {
		[SHM_CNT_IN] = "in",
		[SHM_CNT_OUT] = "out",
		[SHM_CNT_BYTES_IN] = "bytes_in",
		[SHM_CNT_BYTES_OUT] = "bytes_out",
		[SHM_CNT_ERRORS] = "errors",
		[SHM_CNT_DROP_RING_FULL] = "drop_ring_full",
		[SHM_CNT_DEGRADED] = "degraded",
		[SHM_CNT_DROP_RATE] = "drop_rate_limit",
		[SHM_CNT_DROP_CORRUPT] = "drop_corrupt",
		[SHM_CNT_DROP_DUP] = "drop_dup",
		[SHM_CNT_WAKEUPS] = "wakeups",
		[SHM_CNT_BATCHES] = "batches",
	};
	static const char *const capture[CAP_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
		"samples",	 "bpf_ringbuf_lost", "bpf_no_ustack",
		"bpf_filtered",	 "task_events",	     "ustack_bytes",
		"offcpu",	 "offcpu_ns",	     "offcpu_untracked",
		"probe_skipped", "ustack_hints",     "map_events",
		"map_lost",	 "produced",	     "lost_with_capture",
		"gen_acct_done", "gen_acct_next",    "gen_acct_head",
		"gen_carry",	 "gen_bpf_synced",   "gen_tick_ns",
		"gen_rate",	 "gen_pinned",	     "not_sampled_while_down",
		"offcpu_builds", "offcpu_places",
	};
	static const char *const unwindd[UNW_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
		"frames",	"stop_end",	 "stop_no_map",	 "stop_no_cfi",
		"stop_read",	"stop_depth",	 "stop_anon",	 "stop_bad",
		"maps_refresh", "maps_fail",	 "modules",	 "cfi_expr_rows",
		"fp_deeper",	"cache_evict",	 "cache_bytes",	 "env_skipped",
		"dump_errors",	"ustack_hints",	 "stop_deleted", "map_events",
		"hist_hits",	"ustack_misses", "loss_pending", "lost_pending_at_kill",
		"stop_exec",	"stop_exit",
	};
	static const char *const symd[SYM_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
		"lookups",
		"hits",
		"misses",
		"ksyms",
		"bin_open_fail",
		"bin_rejected",
		"strings",
		"stacks",
		"cache_evict",
		"cache_bytes",
		"jit_refused",
		"loss_pending",
		"lost_pending_at_kill",
	};
	static const char *const storer[STO_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
		"samples",	"blocks",	 "bytes_raw",	 "bytes_disk",
		"write_errors", "trimmed_files", "lost_samples",
	};
	const char *const *tab;
	unsigned int n;

	if (idx < SHM_CNT_COMMON_MAX)
		return common[idx];
	if (idx < SHM_CNT_STAGE_BASE)
		return NULL;
	switch (id) {
	case SHM_STAGE_CAPTURE:
		tab = capture, n = CAP_CNT_MAX_;
		break;
	case SHM_STAGE_UNWINDD:
		tab = unwindd, n = UNW_CNT_MAX_;
		break;
	case SHM_STAGE_SYMD:
		tab = symd, n = SYM_CNT_MAX_;
		break;
	case SHM_STAGE_STORER:
		tab = storer, n = STO_CNT_MAX_;
		break;
	default:
		return NULL;
	}
	return idx < n ? tab[idx - SHM_CNT_STAGE_BASE] : NULL;
}

bool shm_counter_is_gauge(enum shm_stage_id id, unsigned int idx)
{
	return (id == SHM_STAGE_CAPTURE && idx >= CAP_CNT_GEN_ACCT_DONE &&
		idx <= CAP_CNT_GEN_PINNED) ||
	       (id == SHM_STAGE_UNWINDD &&
		(idx == UNW_CNT_CACHE_BYTES || idx == UNW_CNT_LOSS_PENDING)) ||
	       (id == SHM_STAGE_SYMD &&
		(idx == SYM_CNT_CACHE_BYTES || idx == SYM_CNT_LOSS_PENDING));
}
