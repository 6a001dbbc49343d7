/* SPDX-License-Identifier: MIT */
/*
 * The run configuration, as one fixed-size block in the arena. `cpa monitor`
 * fills it from its command line before it starts any stage; stages read it
 * at start (and again after a restart). Only fixed-width types and
 * NUL-terminated fixed arrays: it crosses process boundaries.
 */
#ifndef CPA_SHM_CONFIG_H
#define CPA_SHM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CPA_CONFIG_MAGIC   0x47464e4341504355ULL /* "UCPACNFG" */
#define CPA_PATH_MAX	   1024
#define CPA_COMM_LEN	   16
#define CPA_ENV_LIST_MAX   512
#define CPA_PROBE_MAX	   8
#define CPA_PROBE_SPEC_MAX 256

enum cpa_backend {
	CPA_BACKEND_BPF,
	CPA_BACKEND_PERF,
};

/* Boolean switches (flags word). */
enum cpa_config_flag {
	CPA_CFG_KERNEL_STACK_ONLY = 1u << 0, /* --kernel_stack */
	CPA_CFG_OFFCPU = 1u << 1,	     /* --offcpu */
	CPA_CFG_DISABLE_SYM = 1u << 2,	     /* --disable_sym */
	CPA_CFG_FULL_PATH = 1u << 3,	     /* --include_full_path */
	CPA_CFG_STRIP_NAME_OFF = 1u << 4,    /* --strip_name_disable */
	CPA_CFG_ONESHOT = 1u << 5,	     /* --oneshot */
	CPA_CFG_BENCH = 1u << 6,	     /* --bench */
	CPA_CFG_VERBOSE = 1u << 7,	     /* --verbose */
	CPA_CFG_WITH_IDLE = 1u << 8,	     /* sample the idle task (pid 0) too */
	CPA_CFG_FORCE_USTACK = 1u << 9,	     /* copy user stacks even on kernels with the NMI bug */
	CPA_CFG_PC_LOCATIONS = 1u << 10,     /* --pc_locations: symd keeps one frame per pc */
	CPA_CFG_SCHED_METRICS = 1u << 11,    /* --sched_metrics: capture loads bpf/sched.bpf.c */
	CPA_CFG_GO_SHORT = 1u << 12,	     /* --go_short_names: cut Go package paths */
	CPA_CFG_SCHED_FULL = 1u << 13,	     /* --sched_metrics=full: the per-event programs */
};

/* Off-CPU states (--offcpu_state); the same bits as bpf/profile.h's. */
enum cpa_offcpu_state {
	CPA_OFFCPU_STATE_R = 1u << 0, /* preempted */
	CPA_OFFCPU_STATE_S = 1u << 1, /* sleeping (interruptible) */
	CPA_OFFCPU_STATE_D = 1u << 2, /* uninterruptible, mostly I/O */
	CPA_OFFCPU_STATE_ALL = 7,
};

struct cpa_config {
	uint64_t magic;
	uint32_t version; /* CPA_CONFIG_VERSION */
	uint32_t flags;	  /* enum cpa_config_flag */

	uint32_t backend; /* enum cpa_backend */
	uint32_t freq;	  /* Hz per CPU */
	uint32_t record_interval_s;
	uint32_t persistent_day;
	uint32_t stack_size; /* user stack bytes copied per sample */
	uint32_t max_queue_size;
	uint32_t max_cache_size_mb;
	uint32_t max_store_size_mb;
	uint32_t log_print_cycles;
	int32_t target_pid; /* -1 = all */
	uint32_t nr_cpus;   /* possible CPUs, as the monitor saw them */
	uint32_t debug_pid; /* --debug_option PID,FREQ,PATH; 0 = off */
	uint32_t debug_freq;
	uint32_t nr_probes;
	uint64_t offcpu_min_ns; /* off-CPU: blocks shorter than this are not recorded */
	uint64_t offcpu_max_ns; /* ... nor longer than this; 0 = no limit */
	uint32_t offcpu_states; /* off-CPU states recorded: CPA_OFFCPU_STATE_* bits */
	uint32_t probe_budget;
	uint64_t start_realtime_ns;   /* when the monitor started */
	uint64_t probe_rate;	      /* --probe_rate: samples/s per probe, 0 = no limit */
	uint32_t debuginfod_cache_mb; /* cap of <store_dir>/.debuginfod */
	/* The monitor's hang timeout (ms; 0 = 10 s): a stage sleeps at most a
	 * quarter of it, so its heartbeat is never what makes it look hung. */
	uint32_t hang_timeout_ms;
	/* --sched_metrics=sampled:N: the sampled programs, 1 in N events;
	 * 0 = not sampled (the task counters, or full) */
	uint32_t sched_sample;
	uint32_t _pad0;

	char comm[CPA_COMM_LEN]; /* --comm, "" = all */
	char store_dir[CPA_PATH_MAX];
	char output_prof[CPA_PATH_MAX];
	char btf_path[CPA_PATH_MAX];
	char debug_path[CPA_PATH_MAX];
	char record_env_name[CPA_ENV_LIST_MAX];	 /* comma list */
	char parse_env_values[CPA_ENV_LIST_MAX]; /* comma list */
	char probes[CPA_PROBE_MAX][CPA_PROBE_SPEC_MAX];
	char debuginfod_urls[CPA_PATH_MAX]; /* --debuginfod / DEBUGINFOD_URLS; "" = off */
	char policy_path[CPA_PATH_MAX];	    /* --policy FILE (capture evaluates it); "" = none */
};

#define CPA_CONFIG_VERSION 1

/* --sched_metrics=sampled[:N] (docs/metrics.md): N when not given, and its range. */
#define CPA_SCHED_SAMPLE_DEFAULT 16u
#define CPA_SCHED_SAMPLE_MAX	 65536u

/*
 * The adaptive user stack copy (docs/capture.md): stack_size is what a
 * process gets until unwindd has learned what its walks need; unwindd may
 * then lower it, or raise it (walks that ran out of bytes) up to this cap,
 * 4x stack_size and at most 64 KiB (32 KiB with the default 8 KiB). BPF
 * sample records are as long as the bytes copied (bpf/profile.h, rec_mode),
 * but off-CPU stash entries are sized at the cap: with 8x (64 KiB) the
 * off-CPU test saw 93.8-96.4 % of the blocked time instead of 98 % (the
 * larger entries of a BPF_F_NO_PREALLOC hash), so 4x it stays.
 */
#define CPA_STACK_CAP_MULT 4u
#define CPA_STACK_CAP_MAX  65536u

static inline uint32_t cpa_config__stack_cap(uint32_t stack_size)
{
	uint64_t cap = (uint64_t)stack_size * CPA_STACK_CAP_MULT;

	if (cap > CPA_STACK_CAP_MAX)
		cap = CPA_STACK_CAP_MAX;
	return cap < stack_size ? stack_size : (uint32_t)cap;
}

_Static_assert(sizeof(struct cpa_config) % 8 == 0, "config block is 8-byte sized");

#endif /* CPA_SHM_CONFIG_H */
