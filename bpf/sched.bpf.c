// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * Scheduler metrics for capture (docs/metrics.md): per process and per CPU,
 * time on CPU, run-queue latency, time slices and context switches, aggregated
 * here and read once a second by capture (capture/cap_sched.c). bpf/sched.h is
 * the contract. Two ways, capture loads one (both for bench_sched_error):
 *
 * - counters (--sched_metrics default): cpa_sched_iter, a task iterator that
 *   capture runs once a second. It reads the kernel's own per-task counters
 *   (sum_exec_runtime, sched_info.run_delay/pcount, nvcsw/nivcsw) and adds the
 *   change since its last pass to the process (sched_iprocs) and to the CPU the
 *   task last ran on (sched_icpus); cpa_sched_free does the same for a thread
 *   as it is freed, so the threads that live less than a second count too. Its
 *   cost is per task and second plus per exit, whatever the switch rate; no
 *   histograms.
 * - exact (--sched_metrics=full): three tp_btf programs on the scheduler's
 *   hottest tracepoints; each does one task-storage lookup per task it touches,
 *   one hash lookup per process and a handful of atomic adds, per event.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "bpf/sched.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define TASK_UNINTERRUPTIBLE 0x0002

/* Per thread: when it became runnable, when it got the CPU (0 = not known). */
struct sched_task {
	__u64 ready_ns;
	__u64 on_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sched_task);
} sched_tasks SEC(".maps");

/* Per process (tgid) over the current second: capture takes and deletes them. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPA_SCHED_PROCS);
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_procs SEC(".maps");

/* Per CPU, cumulative since load (only that CPU writes its slot): capture
 * keeps the previous read and takes the difference. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPA_SCHED_CPUS);
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_zero SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CPA_SCHED_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} sched_stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&sched_stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline struct cpa_sched_val *proc_val(void *map, struct task_struct *t)
{
	__u32 tgid = t->tgid, zk = 0;
	struct cpa_sched_val *v = bpf_map_lookup_elem(map, &tgid), *z;

	if (v)
		return v;
	z = bpf_map_lookup_elem(&sched_zero, &zk);
	if (!z)
		return NULL;
	bpf_probe_read_kernel_str(z->comm, sizeof(z->comm), t->group_leader->comm);
	if (bpf_map_update_elem(map, &tgid, z, BPF_NOEXIST) < 0 &&
	    !bpf_map_lookup_elem(map, &tgid)) {
		stat_inc(CPA_SCHED_STAT_PROC_FULL);
		return NULL;
	}
	return bpf_map_lookup_elem(map, &tgid);
}

static __always_inline struct cpa_sched_val *cpu_val(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&sched_cpus, &cpu);
}

static __always_inline struct sched_task *task_get(struct task_struct *t)
{
	struct sched_task *s =
		bpf_task_storage_get(&sched_tasks, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (!s)
		stat_inc(CPA_SCHED_STAT_NO_STORAGE);
	return s;
}

static __always_inline void ready(struct task_struct *t)
{
	struct sched_task *s;

	if (!t->pid)
		return;
	s = task_get(t);
	if (s && !s->ready_ns)
		s->ready_ns = bpf_ktime_get_ns();
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(cpa_sched_wakeup, struct task_struct *p)
{
	ready(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(cpa_sched_wakeup_new, struct task_struct *p)
{
	ready(p);
	return 0;
}

static __always_inline void slice_end(struct task_struct *prev, bool preempt,
				      unsigned int prev_state, __u64 now)
{
	struct cpa_sched_val *pv, *cv;
	struct sched_task *s;
	__u64 slice;
	__u32 why, b;

	if (!prev->pid)
		return;
	s = task_get(prev);
	if (!s)
		return;
	if (preempt || prev_state == 0) {
		why = CPA_SCHED_PREEMPT;
		s->ready_ns = now; /* back on the run queue right away */
	} else {
		why = (prev_state & TASK_UNINTERRUPTIBLE) || BPF_CORE_READ_BITFIELD(prev, in_iowait)
			      ? CPA_SCHED_IOWAIT
			      : CPA_SCHED_SLEEP;
		s->ready_ns = 0; /* the wakeup sets it */
	}
	if (!s->on_ns)
		return; /* went on CPU before we were loaded */
	slice = now - s->on_ns;
	s->on_ns = 0;
	b = cpa_sched_bucket(slice);
	pv = proc_val(&sched_procs, prev);
	if (pv) {
		__sync_fetch_and_add(&pv->oncpu_ns, slice);
		__sync_fetch_and_add(&pv->slices, 1);
		__sync_fetch_and_add(&pv->switches[why], 1);
		__sync_fetch_and_add(&pv->slice_hist[b], 1);
	}
	cv = cpu_val();
	if (cv) {
		cv->oncpu_ns += slice;
		cv->slices += 1;
		cv->switches[why] += 1;
		cv->slice_hist[b] += 1;
	}
}

static __always_inline void slice_start(struct task_struct *next, __u64 now)
{
	struct cpa_sched_val *pv, *cv;
	struct sched_task *s;
	__u64 lat;
	__u32 b;

	if (!next->pid)
		return;
	s = task_get(next);
	if (!s)
		return;
	s->on_ns = now;
	if (!s->ready_ns || s->ready_ns > now) {
		s->ready_ns = 0;
		return;
	}
	lat = now - s->ready_ns;
	s->ready_ns = 0;
	b = cpa_sched_bucket(lat);
	pv = proc_val(&sched_procs, next);
	if (pv) {
		__sync_fetch_and_add(&pv->runq_ns, lat);
		__sync_fetch_and_add(&pv->runq_n, 1);
		__sync_fetch_and_add(&pv->runq_hist[b], 1);
	}
	cv = cpu_val();
	if (cv) {
		cv->runq_ns += lat;
		cv->runq_n += 1;
		cv->runq_hist[b] += 1;
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(cpa_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();

	slice_end(prev, preempt, prev_state, now);
	slice_start(next, now);
	return 0;
}

/* ------------------------------------------------------------ counters */

/* Per thread: its counters as the last pass saw them. */
struct sched_seen {
	__u64 runtime, run_delay, pcount, nvcsw, nivcsw;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct sched_seen);
} sched_seen SEC(".maps");

/* As sched_procs and sched_cpus, written by the counters' programs only.
 * Preallocated: a new process each second is an insert, which then takes a
 * free element instead of an allocation (capture shrinks the unused way's
 * hash to one entry, so the memory is that of one). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPA_SCHED_PROCS);
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_iprocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPA_SCHED_CPUS);
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_icpus SEC(".maps");

/* CLOCK_MONOTONIC ns when capture started the previous pass; 0 = none yet. */
volatile __u64 sched_since_ns;

struct task_struct___old {
	unsigned int cpu;
} __attribute__((preserve_access_index));

static __always_inline __u32 task_cpu_of(struct task_struct *t)
{
	if (bpf_core_field_exists(t->thread_info.cpu))
		return BPF_CORE_READ(t, thread_info.cpu);
	return BPF_CORE_READ((struct task_struct___old *)t, cpu);
}

/*
 * What t did since the pass (or exit) that last saw it, into its process and
 * its last CPU. Atomic adds: a thread's end (cpa_sched_free) may account on
 * another CPU while the iterator runs.
 */
static __always_inline void account(struct task_struct *t, bool freeing)
{
	struct sched_seen now, *s, zero = {};
	struct cpa_sched_val *pv, *cv;
	__u64 vol, invol, rt, rd, pc;
	__u32 cpu;

	if (!t->pid)
		return;
	now.runtime = t->se.sum_exec_runtime;
	now.run_delay = t->sched_info.run_delay;
	now.pcount = t->sched_info.pcount;
	now.nvcsw = t->nvcsw;
	now.nivcsw = t->nivcsw;
	s = bpf_task_storage_get(&sched_seen, t, 0, 0);
	if (!s && freeing) {
		/* born and gone between two passes: all of it, no storage made */
		if (!sched_since_ns || t->start_time < sched_since_ns)
			return;
		s = &zero;
	} else if (!s) {
		s = bpf_task_storage_get(&sched_seen, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
		if (!s) {
			stat_inc(CPA_SCHED_STAT_NO_STORAGE);
			return;
		}
		/* There before the first pass: its past is not this second's.
		 * Born since the last pass: all of its counts are (s is zero). */
		if (!sched_since_ns || t->start_time < sched_since_ns) {
			*s = now;
			return;
		}
	}
	if (now.runtime == s->runtime && now.nvcsw == s->nvcsw && now.nivcsw == s->nivcsw) {
		s->run_delay = now.run_delay; /* did not run (a wait may have ended at 0) */
		s->pcount = now.pcount;
		return;
	}
	vol = now.nvcsw - s->nvcsw;
	invol = now.nivcsw - s->nivcsw;
	rt = now.runtime - s->runtime;
	rd = now.run_delay - s->run_delay;
	pc = now.pcount - s->pcount;
	*s = now;
	pv = proc_val(&sched_iprocs, t);
	if (pv) {
		__sync_fetch_and_add(&pv->oncpu_ns, rt);
		__sync_fetch_and_add(&pv->runq_ns, rd);
		__sync_fetch_and_add(&pv->runq_n, pc);
		__sync_fetch_and_add(&pv->slices, vol + invol);
		__sync_fetch_and_add(&pv->switches[CPA_SCHED_PREEMPT], invol);
		__sync_fetch_and_add(&pv->switches[CPA_SCHED_SLEEP], vol);
	}
	cpu = task_cpu_of(t);
	cv = bpf_map_lookup_elem(&sched_icpus, &cpu);
	if (cv) {
		__sync_fetch_and_add(&cv->oncpu_ns, rt);
		__sync_fetch_and_add(&cv->runq_ns, rd);
		__sync_fetch_and_add(&cv->runq_n, pc);
		__sync_fetch_and_add(&cv->slices, vol + invol);
		__sync_fetch_and_add(&cv->switches[CPA_SCHED_PREEMPT], invol);
		__sync_fetch_and_add(&cv->switches[CPA_SCHED_SLEEP], vol);
	}
}

SEC("iter/task")
int cpa_sched_iter(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;

	if (t)
		account(t, false);
	return 0;
}

/* A thread gone between two passes: its last part, once per thread as its
 * task_struct is freed (after its last switch, so its counters are final; at
 * sched_process_exit the exit path's own run time would be missed). The cost
 * follows the thread exit rate, not the switch rate. */
SEC("tp_btf/sched_process_free")
int BPF_PROG(cpa_sched_free, struct task_struct *p)
{
	account(p, true);
	return 0;
}
