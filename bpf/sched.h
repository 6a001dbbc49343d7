/* SPDX-License-Identifier: MIT */
/*
 * The scheduler-metrics BPF program (bpf/sched.bpf.c) <-> capture contract:
 * the per-process and per-CPU aggregates it keeps in its maps and capture
 * reads and clears once a second (capture/cap_sched.c, docs/metrics.md).
 * Shared by BPF C and user space: fixed-width types only.
 */
#ifndef CPA_BPF_SCHED_H
#define CPA_BPF_SCHED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define CPA_SCHED_COMM_LEN 16
/* log2 buckets of nanoseconds: bucket b counts values in [2^b, 2^(b+1)),
 * bucket 0 also 0 and 1; the last bucket everything from 2^39 ns (~9 min). */
#define CPA_SCHED_HIST	40
#define CPA_SCHED_PROCS 8192 /* processes tracked per second; more are counted as dropped */
#define CPA_SCHED_CPUS	512
/* Slots of the sampled way's table of marked threads (a power of 2). */
#define CPA_SCHED_PEND 4096

/* Why a task left the CPU (sched_switch's prev). */
enum cpa_sched_reason {
	CPA_SCHED_PREEMPT, /* still runnable (TASK_RUNNING) or preempted */
	CPA_SCHED_SLEEP,   /* voluntary: interruptible sleep and the rest */
	CPA_SCHED_IOWAIT,  /* TASK_UNINTERRUPTIBLE or in_iowait */
	CPA_SCHED_REASON_MAX,
};

/* One process (key: tgid) or one CPU (key: cpu) over the current second. */
struct cpa_sched_val {
	__u64 oncpu_ns;			      /* time on CPU (ended slices) */
	__u64 runq_ns;			      /* summed run-queue latency */
	__u64 runq_n;			      /* run-queue waits measured */
	__u64 slices;			      /* slices ended (= switches out) */
	__u64 switches[CPA_SCHED_REASON_MAX]; /* by enum cpa_sched_reason */
	__u32 runq_hist[CPA_SCHED_HIST];      /* wakeup/preempt -> on CPU, log2 ns */
	__u32 slice_hist[CPA_SCHED_HIST];     /* on CPU -> off CPU, log2 ns */
	char comm[CPA_SCHED_COMM_LEN];	      /* group leader's comm (process entries) */
};

/* Statistics of the BPF side (global "sched_stats" in .bss, capture reads it in place). */
enum cpa_sched_stat {
	CPA_SCHED_STAT_PROC_FULL,  /* a process found no room in the map */
	CPA_SCHED_STAT_NO_STORAGE, /* task storage could not be created */
	CPA_SCHED_STAT_MAX,
};

static inline unsigned int cpa_sched_bucket(__u64 v)
{
	unsigned int b = 0;

	/* Plain shifts: the verifier and the compiler both like them. */
	if (v >= (1ull << 32)) {
		v >>= 32;
		b += 32;
	}
	if (v >= (1ull << 16)) {
		v >>= 16;
		b += 16;
	}
	if (v >= (1ull << 8)) {
		v >>= 8;
		b += 8;
	}
	if (v >= (1ull << 4)) {
		v >>= 4;
		b += 4;
	}
	if (v >= (1ull << 2)) {
		v >>= 2;
		b += 2;
	}
	if (v >= 2)
		b += 1;
	return b < CPA_SCHED_HIST ? b : CPA_SCHED_HIST - 1;
}

#endif /* CPA_BPF_SCHED_H */
