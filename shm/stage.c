// SPDX-License-Identifier: MIT
#include "stage.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arena.h"
#include "counters.h"

#include "common/timeutil.h"

void shm_stage__heartbeat(struct shm_stage *st)
{
	__atomic_store_n(&st->heartbeat_ns, clock_kernel_ns(CLOCK_MONOTONIC), __ATOMIC_RELAXED);
}

#define CAPB(c)	       (1ull << (c))
#define GAUGE(i)       (1ull << (i))
#define GAUGES(lo, hi) ((~0ull >> (63 - (hi))) & (~0ull << (lo)))

static const char *const capture_counters[CAP_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
	"samples",	 "bpf_ringbuf_lost",   "bpf_no_ustack",
	"bpf_filtered",	 "task_events",	       "ustack_bytes",
	"offcpu",	 "offcpu_ns",	       "offcpu_untracked",
	"probe_skipped", "ustack_hints",       "map_events",
	"map_lost",	 "produced",	       "lost_with_capture",
	"gen_acct_done", "gen_acct_next",      "gen_acct_head",
	"gen_carry",	 "gen_bpf_synced",     "gen_tick_ns",
	"gen_rate",	 "gen_pinned",	       "not_sampled_while_down",
	"offcpu_builds", "offcpu_places",      "down_since_ns",
	"down_rate",	 "down_pending",       "down_pending_time",
	"gen_alive_ns",	 "loss_pending",       "probe_detached",
	"pycode_sent",	 "pycode_failed",      "pycode_deferred",
	"probe_refused", "pycode_past_budget",
};
static const char *const unwindd_counters[UNW_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
	"frames",	 "stop_end",	 "stop_no_map",
	"stop_no_cfi",	 "stop_read",	 "stop_depth",
	"stop_anon",	 "stop_bad",	 "maps_refresh",
	"maps_fail",	 "modules",	 "cfi_expr_rows",
	"fp_deeper",	 "cache_evict",	 "cache_bytes",
	"env_skipped",	 "dump_errors",	 "ustack_hints",
	"stop_deleted",	 "map_events",	 "hist_hits",
	"ustack_misses", "loss_pending", "lost_pending_at_kill",
	"stop_exec",	 "stop_exit",	 "lost_killed_at_stop",
};
static const char *const symd_counters[SYM_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
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
	"lost_killed_at_stop",
};
static const char *const storer_counters[STO_CNT_MAX_ - SHM_CNT_STAGE_BASE] = {
	"samples",	"blocks",	 "bytes_raw",	 "bytes_disk",
	"write_errors", "trimmed_files", "lost_samples", "lost_killed_at_stop",
};

/*
 * Capabilities (docs/reliability.md, "Privileges"). capture: BPF and perf
 * events (SYS_ADMIN for what the kernel still gates on it: tracefs, some BPF
 * helpers; SYS_RESOURCE/IPC_LOCK for locked BPF memory), /proc/PID of any
 * user (SYS_PTRACE, DAC_READ_SEARCH); it sets up with only these. unwindd,
 * symd: other processes' maps and files (SYS_PTRACE for /proc/PID/maps and
 * /proc/PID/root, CHECKPOINT_RESTORE for /proc/PID/map_files,
 * DAC_READ_SEARCH for binaries we may not read); symd also SYSLOG (kallsyms
 * addresses under kptr_restrict) and SETUID/SETGID (a JVM's perf map is asked
 * for as the JVM's user, symd/jvm.c). storer: none.
 */
#define CAPS_PROCS (CAPB(CAP_SYS_PTRACE) | CAPB(CAP_DAC_READ_SEARCH))

void shm_stage__permanent(struct shm_stage *st, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(st->cause, sizeof(st->cause), fmt, ap);
	va_end(ap);
	if (!st->cause[0])
		snprintf(st->cause, sizeof(st->cause), "a permanent error");
}

int shm_perf_paranoid(void)
{
	char buf[32];
	ssize_t n = -1;
	int fd = open("/proc/sys/kernel/perf_event_paranoid", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	}
	if (n <= 0)
		return 2;
	buf[n] = 0;
	return atoi(buf);
}

const struct shm_stage_desc shm_stages[SHM_STAGE_MAX] = {
	[SHM_STAGE_CAPTURE] =
		{
			.name = "capture",
			.role = SHM_ROLE_PRODUCER,
			.ring_in = -1,
			.ring_out = SHM_RING_CAPTURE,
			.ring_back = -1,
			.up = SHM_STAGE_MAX,
			.caps = CAPB(CAP_BPF) | CAPB(CAP_PERFMON) | CAPB(CAP_SYS_ADMIN) |
				CAPB(CAP_SYS_RESOURCE) | CAPB(CAP_IPC_LOCK) | CAPS_PROCS,
			.caps_first = true,
			.limits = SHM_LIMIT_RATE,
			.drop_cnt = CAP_CNT_BPF_RB_LOST,
			.fold_gauge = CAP_CNT_GEN_PINNED,
			.counters = capture_counters,
			.nr_counters = CAP_CNT_MAX_ - SHM_CNT_STAGE_BASE,
			.loss_pending = CAP_CNT_LOSS_PENDING,
			.gauges = GAUGES(CAP_CNT_GEN_ACCT_DONE, CAP_CNT_GEN_PINNED) |
				  GAUGES(CAP_CNT_DOWN_SINCE_NS, CAP_CNT_LOSS_PENDING),
		},
	[SHM_STAGE_UNWINDD] =
		{
			.name = "unwindd",
			.role = SHM_ROLE_CONSUMER,
			.ring_in = SHM_RING_CAPTURE,
			.ring_out = SHM_RING_UNWIND,
			.ring_back = SHM_RING_HINT,
			.up = SHM_STAGE_CAPTURE,
			.caps = CAPS_PROCS | CAPB(CAP_CHECKPOINT_RESTORE),
			.limits = SHM_LIMIT_MEM | SHM_LIMIT_RATE,
			.counters = unwindd_counters,
			.nr_counters = UNW_CNT_MAX_ - SHM_CNT_STAGE_BASE,
			.gauges = GAUGE(UNW_CNT_CACHE_BYTES) | GAUGE(UNW_CNT_LOSS_PENDING),
			.loss_pending = UNW_CNT_LOSS_PENDING,
			.lost_at_stop = UNW_CNT_LOST_AT_STOP,
		},
	[SHM_STAGE_SYMD] =
		{
			.name = "symd",
			.role = SHM_ROLE_CONSUMER,
			.ring_in = SHM_RING_UNWIND,
			.ring_out = SHM_RING_SYMD,
			.ring_back = -1,
			.up = SHM_STAGE_UNWINDD,
			.caps = CAPS_PROCS | CAPB(CAP_CHECKPOINT_RESTORE) | CAPB(CAP_SYSLOG) |
				CAPB(CAP_SETUID) | CAPB(CAP_SETGID),
			.limits = SHM_LIMIT_MEM | SHM_LIMIT_RATE,
			.counters = symd_counters,
			.nr_counters = SYM_CNT_MAX_ - SHM_CNT_STAGE_BASE,
			.gauges = GAUGE(SYM_CNT_CACHE_BYTES) | GAUGE(SYM_CNT_LOSS_PENDING),
			.loss_pending = SYM_CNT_LOSS_PENDING,
			.lost_at_stop = SYM_CNT_LOST_AT_STOP,
		},
	[SHM_STAGE_STORER] =
		{
			.name = "storer",
			.role = SHM_ROLE_SINK,
			.ring_in = SHM_RING_SYMD,
			.ring_out = -1,
			.ring_back = -1,
			.up = SHM_STAGE_SYMD,
			.limits = SHM_LIMIT_MEM,
			.counters = storer_counters,
			.nr_counters = STO_CNT_MAX_ - SHM_CNT_STAGE_BASE,
			.lost_at_stop = STO_CNT_LOST_AT_STOP,
		},
};

const char *shm_stage_name(enum shm_stage_id id)
{
	return (unsigned int)id < SHM_STAGE_MAX ? shm_stages[id].name : "?";
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

	if (idx < SHM_CNT_COMMON_MAX)
		return common[idx];
	if (idx < SHM_CNT_STAGE_BASE)
		return NULL;
	if ((unsigned int)id >= SHM_STAGE_MAX)
		return NULL;
	idx -= SHM_CNT_STAGE_BASE;
	return idx < shm_stages[id].nr_counters ? shm_stages[id].counters[idx] : NULL;
}

bool shm_counter_is_gauge(enum shm_stage_id id, unsigned int idx)
{
	return (unsigned int)id < SHM_STAGE_MAX && idx < 64 && (shm_stages[id].gauges >> idx & 1);
}
