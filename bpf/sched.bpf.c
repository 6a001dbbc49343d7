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
 * - sampled (--sched_metrics=sampled[:N]): three more tp_btf programs on the
 *   same tracepoints that measure one in N run-queue waits and one in N slices
 *   (per CPU, a countdown with a random restart) and add each as N of them.
 *   The other events cost a per-CPU array slot, one or two loads of the
 *   pending table and a compare: no task storage, no hash, no clock.
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
	__uint(map_flags, BPF_F_MMAPABLE); /* capture reads it in place */
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_cpus SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_zero SEC(".maps");

/* Statistics (enum cpa_sched_stat): rare events, so shared counters that
 * capture reads in place (.bss) rather than a per-CPU map and a syscall. */
__u64 sched_stats[CPA_SCHED_STAT_MAX];

static __always_inline void stat_inc(__u32 idx)
{
	if (idx < CPA_SCHED_STAT_MAX)
		__sync_fetch_and_add(&sched_stats[idx], 1);
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

/* A way's two wakeup programs, name and name_new, each calling fn(p). */
#define WAKEUP_PROGS(name, fn)                          \
	SEC("tp_btf/sched_wakeup")                      \
	int BPF_PROG(name, struct task_struct *p)       \
	{                                               \
		fn(p);                                  \
		return 0;                               \
	}                                               \
	SEC("tp_btf/sched_wakeup_new")                  \
	int BPF_PROG(name##_new, struct task_struct *p) \
	{                                               \
		fn(p);                                  \
		return 0;                               \
	}

WAKEUP_PROGS(cpa_sched_wakeup, ready)

/* Why prev leaves the CPU (enum cpa_sched_reason). */
static __always_inline __u32 leave_reason(struct task_struct *prev, bool preempt,
					  unsigned int prev_state)
{
	if (preempt || prev_state == 0)
		return CPA_SCHED_PREEMPT;
	return (prev_state & TASK_UNINTERRUPTIBLE) || BPF_CORE_READ_BITFIELD(prev, in_iowait)
		       ? CPA_SCHED_IOWAIT
		       : CPA_SCHED_SLEEP;
}

#define WAIT CPA_SCHED_REASON_MAX /* add()'s what: a run-queue wait, not a slice */

struct fields {
	__u64 *sum, *n, *why; /* why: NULL for a wait */
	__u32 *hist;
};

static __always_inline void fields_of(struct cpa_sched_val *v, __u32 what, __u32 b,
				      struct fields *f)
{
	if (what == WAIT) {
		f->sum = &v->runq_ns;
		f->n = &v->runq_n;
		f->why = NULL;
		f->hist = &v->runq_hist[b];
	} else {
		f->sum = &v->oncpu_ns;
		f->n = &v->slices;
		f->why = &v->switches[what];
		f->hist = &v->slice_hist[b];
	}
}

/* What ended for t: a slice (what = why it left) or a run-queue wait (what =
 * WAIT) of ns, counted w times, into its process in pmap and this CPU's slot
 * of cmap. */
static __always_inline void add(void *pmap, void *cmap, struct task_struct *t, __u32 what, __u64 ns,
				__u64 w)
{
	__u32 b = cpa_sched_bucket(ns), cpu = bpf_get_smp_processor_id();
	struct cpa_sched_val *v = proc_val(pmap, t);
	struct fields f;

	if (v) {
		fields_of(v, what, b, &f);
		__sync_fetch_and_add(f.sum, ns * w);
		__sync_fetch_and_add(f.n, w);
		__sync_fetch_and_add(f.hist, w);
		if (f.why)
			__sync_fetch_and_add(f.why, w);
	}
	v = bpf_map_lookup_elem(cmap, &cpu);
	if (v) { /* only this CPU writes its slot */
		fields_of(v, what, b, &f);
		*f.sum += ns * w;
		*f.n += w;
		*f.hist += w;
		if (f.why)
			*f.why += w;
	}
}

static __always_inline void slice_end(struct task_struct *prev, bool preempt,
				      unsigned int prev_state, __u64 now)
{
	struct sched_task *s;
	__u32 why;

	if (!prev->pid)
		return;
	s = task_get(prev);
	if (!s)
		return;
	why = leave_reason(prev, preempt, prev_state);
	/* preempted: back on the run queue right away; else the wakeup sets it */
	s->ready_ns = why == CPA_SCHED_PREEMPT ? now : 0;
	if (!s->on_ns)
		return; /* went on CPU before we were loaded */
	add(&sched_procs, &sched_cpus, prev, why, now - s->on_ns, 1);
	s->on_ns = 0;
}

static __always_inline void slice_start(struct task_struct *next, __u64 now)
{
	struct sched_task *s;

	if (!next->pid)
		return;
	s = task_get(next);
	if (!s)
		return;
	s->on_ns = now;
	if (s->ready_ns && s->ready_ns <= now)
		add(&sched_procs, &sched_cpus, next, WAIT, now - s->ready_ns, 1);
	s->ready_ns = 0;
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
	__uint(map_flags, BPF_F_MMAPABLE); /* capture reads it in place */
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

/*
 * The same pass as cpa_sched_iter without the seq_file: capture runs it with
 * one BPF_PROG_TEST_RUN. The open-coded task iterator (6.7+) walks the thread
 * lists under RCU; the task/ iterator looks each task up by pid, creates and
 * reads a file, and cost about twice as much per task (docs/metrics.md).
 * Capture falls back to cpa_sched_iter where this does not load.
 */
extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task,
			     unsigned int flags) __weak __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __weak __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __weak __ksym;
extern void bpf_rcu_read_lock(void) __weak __ksym;
extern void bpf_rcu_read_unlock(void) __weak __ksym;

SEC("syscall")
int cpa_sched_walk(void *ctx)
{
	struct bpf_iter_task it;
	struct task_struct *t;

	bpf_rcu_read_lock();
	bpf_iter_task_new(&it, NULL, BPF_TASK_ITER_ALL_THREADS);
	while ((t = bpf_iter_task_next(&it)))
		account(t, false);
	bpf_iter_task_destroy(&it);
	bpf_rcu_read_unlock();
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

/* ------------------------------------------------------------- sampled */

/* 1 in sched_sample_n ready events and slices is measured, each added as
 * sched_sample_n of them; capture sets it before the load (--sched_metrics=
 * sampled:N). */
const volatile __u32 sched_sample_n = 16;

/* Per CPU: the countdowns and the slice measured on this CPU. A slice begins
 * and ends on the CPU it runs on, so the running thread's mark lives here. */
struct sched_scpu {
	__u32 ready_left; /* ready events (wakeups, preemptions) until the next sampled one */
	__u32 slice_left; /* switches in until the next sampled slice */
	__u32 slice_pid;  /* the thread whose slice this CPU measures; 0 = none */
	__u32 _pad;
	__u64 slice_on_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sched_scpu);
} sched_sstate SEC(".maps");

/* As sched_procs and sched_cpus, written by the sampled programs only. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPA_SCHED_PROCS);
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_sprocs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPA_SCHED_CPUS);
	__uint(map_flags, BPF_F_MMAPABLE); /* capture reads it in place */
	__type(key, __u32);
	__type(value, struct cpa_sched_val);
} sched_scpus SEC(".maps");

/*
 * The threads a sampled ready event marked, waiting for a CPU (which may be
 * another CPU than the waker's): slot pid % CPA_SCHED_PEND holds
 * pid << PEND_SHIFT | the ready time's low PEND_SHIFT bits (one 64-bit word:
 * a reader never sees half of another thread's mark). The thread's switch in
 * takes the mark; its switch out drops a mark of its own it left unused. Two
 * marked threads in one slot: the later wins, the earlier wait is not counted.
 */
#define PEND_SHIFT 42 /* 2^42 ns = 73 min; pids are below 2^22 */
#define PEND_TMASK ((1ull << PEND_SHIFT) - 1)
__u64 sched_pend[CPA_SCHED_PEND];

static __always_inline __u64 *pend_slot(__u32 pid)
{
	return &sched_pend[pid & (CPA_SCHED_PEND - 1)];
}

static __always_inline struct sched_scpu *scpu(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&sched_sstate, &k);
}

/* Is this the sampled event? Gaps are uniform in [1, 2N - 1] (mean N): a
 * fixed stride would see the same thread each time in a periodic pattern
 * (a ping-pong alternates two threads on a CPU). */
static __always_inline bool sample_tick(__u32 *left)
{
	__u32 n = sched_sample_n;

	if (*left > 1) {
		*left -= 1;
		return false;
	}
	*left = n > 1 ? 1 + bpf_get_prandom_u32() % (2 * n - 1) : 1;
	return true;
}

static __always_inline void sready(struct task_struct *p)
{
	struct sched_scpu *c = scpu();
	__u32 pid = p->pid;
	__u64 *slot;

	if (!c || !pid || !sample_tick(&c->ready_left))
		return;
	slot = pend_slot(pid);
	if (*slot >> PEND_SHIFT == pid)
		return; /* woken again before it ran: the wait began at the first */
	*slot = (__u64)pid << PEND_SHIFT | (bpf_ktime_get_ns() & PEND_TMASK);
}

WAKEUP_PROGS(cpa_sched_swakeup, sready)

SEC("tp_btf/sched_switch")
int BPF_PROG(cpa_sched_sswitch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	struct sched_scpu *c = scpu();
	__u32 ppid = prev->pid, npid = next->pid;
	__u64 now = 0, *slot, v, lat;

	if (!c)
		return 0;
	if (ppid) {
		if (c->slice_pid == ppid) {
			now = bpf_ktime_get_ns();
			c->slice_pid = 0;
			add(&sched_sprocs, &sched_scpus, prev,
			    leave_reason(prev, preempt, prev_state), now - c->slice_on_ns,
			    sched_sample_n);
		}
		slot = pend_slot(ppid);
		/* preempted: runnable again from now, a ready event as a wakeup */
		if ((preempt || prev_state == 0) && sample_tick(&c->ready_left)) {
			if (!now)
				now = bpf_ktime_get_ns();
			*slot = (__u64)ppid << PEND_SHIFT | (now & PEND_TMASK);
		} else if (*slot >> PEND_SHIFT == ppid) {
			*slot = 0; /* a wakeup while it ran: its wait begins later */
		}
	}
	if (!npid)
		return 0;
	slot = pend_slot(npid);
	v = *slot;
	if (v >> PEND_SHIFT == npid) {
		*slot = 0;
		if (!now)
			now = bpf_ktime_get_ns();
		lat = (now - v) & PEND_TMASK;
		if (lat < (1ull << (PEND_SHIFT - 1))) /* else a mark made just after now */
			add(&sched_sprocs, &sched_scpus, next, WAIT, lat, sched_sample_n);
	}
	if (sample_tick(&c->slice_left)) {
		if (!now)
			now = bpf_ktime_get_ns();
		c->slice_pid = npid;
		c->slice_on_ns = now;
	}
	return 0;
}
