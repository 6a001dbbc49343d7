// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * On-CPU sampling, probe-triggered samples and task events for capture. See bpf/profile.h for the
 * records and docs/capture.md for what is recorded and why.
 *
 * Cost model (the whole point of this file): one ring buffer record per
 * sample, as long as what it holds (rec_mode DYNPTR: reserved at run time at
 * the copy's size, every byte written once, straight into the record; where
 * the kernel cannot, SCRATCH: built in a per-CPU slot, output at its used
 * length), no wakeup per record.
 */
#include "vmlinux.h"

#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/usdt.bpf.h>

#include "bpf/profile.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

#define PF_KTHREAD 0x00200000 /* include/linux/sched.h: I am a kernel thread */
#define PF_EXITING 0x00000004 /* include/linux/sched.h: getting shut down */

/* Knobs: set by capture between open and load, constants for the verifier. */
const volatile __u32 target_tgid = 0; /* 0 = every process */
const volatile bool filter_comm = false;
const volatile char comm_filter[CPA_BPF_COMM_LEN] = {};
const volatile __u32 stack_size = 0;  /* most user stack bytes to copy (the cap); 0 = none */
const volatile __u32 stack_start = 0; /* bytes for a process not in ustack_size */
const volatile __u32 rec_size = sizeof(struct cpa_bpf_sample); /* cpa_bpf_oncpu_size() */
const volatile __u32 rec_mode = CPA_BPF_REC_FIXED;	       /* enum cpa_bpf_rec_mode */
const volatile bool kernel_only = false;		       /* no user regs/stacks at all */
const volatile bool with_idle = false;			       /* sample pid 0 too */
const volatile __u64 wakeup_bytes = 0; /* force a wakeup once this much is pending; 0 never */
/* Set by capture while it sleeps through an idle host's stretched tick
 * (docs/metrics.md, "Idle host"): the record that brings it to 0 wakes it.
 * Plain decrements: two CPUs may take the same step, never past 0. */
__s64 wake_left = 0;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22); /* resized by capture before load */
} rb SEC(".maps");

/* Per process copy size, learned by unwindd, written by capture (bpf/profile.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPA_BPF_USTACK_SLOTS);
	__type(key, __u32);   /* tgid % CPA_BPF_USTACK_SLOTS */
	__type(value, __u64); /* bytes << 32 | tgid; 0 = empty */
} ustack_size SEC(".maps");

/*
 * CPA_BPF_REC_SCRATCH: the sample is built here, then bpf_ringbuf_output()
 * copies its used length into the ring. Two slots per CPU (slot cpu * 2 +
 * probe): the cpu-clock program can interrupt an fentry probe program on its
 * CPU (kprobe/uprobe/tracepoint programs hold bpf_prog_active, which keeps
 * it out). Entries and value size (rec_size) set by capture before load.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct cpa_bpf_sample));
} sample_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CPA_BPF_STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &idx);

	if (v)
		*v += 1;
}

static __always_inline bool comm_match(const char *c)
{
	for (int i = 0; i < CPA_BPF_COMM_LEN; i++) {
		if (c[i] != comm_filter[i])
			return false;
		if (!c[i])
			return true;
	}
	return true;
}

/*
 * Thread comm or group-leader comm matches the filter (or there is none).
 * The pid filter is applied by the callers before they read any comm.
 */
static __always_inline bool comm_wanted(struct task_struct *task, const char *comm)
{
	char pcomm[CPA_BPF_COMM_LEN];

	if (!filter_comm || comm_match(comm))
		return true;
	BPF_CORE_READ_STR_INTO(&pcomm, task, group_leader, comm);
	return comm_match(pcomm);
}

static __always_inline __u64 submit_flags(void)
{
	/* A wakeup costs ~5 us here; capture polls on a deadline instead and
	 * only needs a nudge when the buffer is filling up faster than that. */
	__s64 left = wake_left;

	if (left > 0) {
		wake_left = left - 1;
		if (left == 1)
			return BPF_RB_FORCE_WAKEUP;
	}
	if (wakeup_bytes && bpf_ringbuf_query(&rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes)
		return BPF_RB_FORCE_WAKEUP;
	return BPF_RB_NO_WAKEUP;
}

/*
 * The user stack copy and the FP chain through bpf_loop(), where the kernel
 * has it (5.17+; capture sets use_bpf_loop, CPA_BPF_USTACK_COPY=unrolled
 * clears it): the verifier checks a callback once for all its calls, while
 * an unrolled loop is checked once per iteration and per way the iterations
 * before it ended, which passes its 1M instructions with copies over 32 KiB
 * (or with the FP chain walked over a copy: scratch and fixed records).
 */
const volatile bool use_bpf_loop = false;

static __always_inline bool use_loop(void)
{
	return use_bpf_loop && bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop);
}

/*
 * Copy up to want bytes (at most stack_size) from sp upward, page by page:
 * the first chunk ends at sp's page boundary, the next ones are whole pages.
 * A failing page ends the copy, so the top of a short stack (or a stack
 * whose next page is not mapped) still yields everything below it. Into
 * s->stack, or with d into the dynptr record d at CPA_BPF_STACK_OFF: a slice
 * of one page per chunk (a slice's length must be a constant, hence the
 * record's page of slack past want). Returns the bytes copied.
 * With use_loop(), one chunk per bpf_loop() callback.
 */
#define CPA_BPF_STACK_OFF  sizeof(struct cpa_bpf_sample)
#define CPA_BPF_MAX_CHUNKS (CPA_BPF_MAX_STACK / CPA_BPF_PAGE + 1)

/* One copy's constants, and the bytes copied so far (written, never read, by
 * the callback: a value the verifier need not track from one call to the
 * next). */
struct ustack_copy {
	struct cpa_bpf_sample *s;
	struct bpf_dynptr *d;
	__u64 sp, want, first;
	__u64 copied;
};

/*
 * Chunk i of the copy: its offset follows from i alone (the first chunk
 * ends at sp's page boundary), so every call is the same to the verifier.
 * Into the dynptr record (d) or the record's memory (s), one callback each:
 * a branch on which would be checked both ways.
 */
static __always_inline long copy_chunk(__u32 i, struct ustack_copy *c, bool dynptr)
{
	__u64 off, len, want = c->want;
	void *dst;

	if (i == 0) {
		off = 0;
		len = c->first;
	} else {
		off = c->first + (__u64)(i - 1) * CPA_BPF_PAGE;
		len = CPA_BPF_PAGE;
	}
	if (off >= want)
		return 1;
	if (len > want - off)
		len = want - off;
	/* Explicit bounds for the verifier, checked on the very registers
	 * used below: off < stack_size and len <= one page, and the record
	 * has a page of slack past stack_size. */
	barrier_var(len);
	barrier_var(off);
	if (len > CPA_BPF_PAGE || off >= stack_size)
		return 1;
	if (dynptr) {
		dst = bpf_dynptr_data(c->d, CPA_BPF_STACK_OFF + off, CPA_BPF_PAGE);
		if (!dst)
			return 1;
	} else {
		dst = c->s->stack + off;
	}
	if (bpf_probe_read_user(dst, len, (const void *)(c->sp + off)))
		return 1;
	c->copied = off + len;
	return 0;
}

static long copy_chunk_dynptr(__u32 i, void *ctx)
{
	return copy_chunk(i, ctx, true);
}

static long copy_chunk_mem(__u32 i, void *ctx)
{
	return copy_chunk(i, ctx, false);
}

static __always_inline __u32 copy_ustack(struct cpa_bpf_sample *s, struct bpf_dynptr *d, __u64 sp,
					 __u64 want)
{
	/* 64-bit throughout: u32 arithmetic leaves the verifier sign doubts. */
	__u64 off = 0, len, rem, addr = sp;
	void *dst;

	if (use_loop()) {
		struct ustack_copy c = {
			.s = s,
			.d = d,
			.sp = sp,
			.want = want < stack_size ? want : stack_size,
			.first = CPA_BPF_PAGE - (sp & (CPA_BPF_PAGE - 1)),
		};

		if (d)
			bpf_loop(CPA_BPF_MAX_CHUNKS, copy_chunk_dynptr, &c, 0);
		else
			bpf_loop(CPA_BPF_MAX_CHUNKS, copy_chunk_mem, &c, 0);
		off = c.copied;
		return off <= stack_size ? (__u32)off : 0;
	}
	for (int i = 0; i < CPA_BPF_MAX_CHUNKS; i++) {
		if (off >= want || off >= stack_size)
			break;
		len = CPA_BPF_PAGE - (addr & (CPA_BPF_PAGE - 1));
		rem = want - off;
		if (len > rem)
			len = rem;
		/* As in copy_chunk(). */
		barrier_var(len);
		barrier_var(off);
		if (len > CPA_BPF_PAGE || off >= stack_size)
			break;
		if (d) {
			dst = bpf_dynptr_data(d, CPA_BPF_STACK_OFF + off, CPA_BPF_PAGE);
			if (!dst)
				break;
		} else {
			dst = s->stack + off;
		}
		if (bpf_probe_read_user(dst, len, (const void *)addr))
			break;
		off += len;
		addr += len;
	}
	return (__u32)off;
}

/*
 * How many bytes to copy: the process's learned size (ustack_size, else
 * stack_start), at most stack_size, and no more than can be stack at all. Bytes above a
 * thread's stack top are not frames: copying them costs BPF time, capture's
 * memmove and ring 0 space for nothing, and most samples of a shallow thread
 * are mostly such bytes.
 *  - Thread of a glibc/musl process: the thread pointer (fsbase) is the
 *    TCB, placed at the top of the thread's stack mapping with the static
 *    TLS just below it and the stack below that, so no frame lies at or
 *    above fsbase. The main thread's TCB is elsewhere (not within
 *    stack_size above sp), so this never clamps it.
 *  - Main thread: mm->start_stack is sp at process entry (argc); above it
 *    are only argv/envp/auxv and their strings. A little slack keeps
 *    _start's own frame (it pops argc and realigns) inside the copy.
 * Any other layout (own stacks, Go) fails the range checks: full copy.
 */
#define START_STACK_SLACK 256

static __always_inline __u64 ustack_want(struct task_struct *task, __u64 sp, bool leader,
					 __u32 tgid)
{
	__u32 slot = tgid % CPA_BPF_USTACK_SLOTS;
	__u64 *learned = bpf_map_lookup_elem(&ustack_size, &slot), e = learned ? *learned : 0;
	__u64 top = task->thread.fsbase, want = (__u32)e == tgid ? e >> 32 : stack_start;

	if (want > stack_size)
		want = stack_size;

	if (top > sp && top - sp < want)
		want = top - sp;
	if (leader && task->mm) {
		top = task->mm->start_stack + START_STACK_SLACK;
		if (top > sp && top - sp < want)
			want = top - sp;
	}
	return want;
}

/*
 * The frame-pointer chain, read from the stack bytes already copied (no
 * second user access for the frames they cover), then with one 16-byte
 * user read per frame above them. The kernel's walker (bpf_get_stack with
 * BPF_F_USER_STACK) reads at whatever rbp holds: in code built without
 * frame pointers that is garbage, and the faulting read costs ~2 us per
 * sample here. We only follow an rbp that points into the stack above sp
 * and grows, so non-FP code ends the chain for free; with jump, once per
 * chain it may go down to another stack (Go's switch from g0 back to a
 * goroutine's; not off-CPU: that program would pass the verifier's 1M
 * instructions).
 */
#define FP_MAX_SPAN   (8ull << 20) /* a frame pointer this far above sp is not one */
#define USER_ADDR_END (1ull << 47) /* x86-64 user code is below this (4-level paging) */

/* The FP chain's walk state for bpf_loop(): step i adds ufp[i + 1], so the
 * count is written, never read, by the callback. */
struct fp_chain {
	struct cpa_bpf_sample *s;
	__u64 sp, fp, lo, copied;
	__u32 n;
	bool jump;
};

static __always_inline long fp_step(__u32 i, struct fp_chain *c, bool from_copy)
{
	struct cpa_bpf_sample *s = c->s;
	__u64 sp = c->sp, fp = c->fp, lo = c->lo, off, frame[2];
	__u32 n = i + 1;

	if (fp < lo || fp - lo > FP_MAX_SPAN || (fp & 7))
		return 1;
	off = fp - sp;
	barrier_var(off);
	if (from_copy && off + 16 <= c->copied && off <= stack_size) {
		frame[0] = *(__u64 *)(s->stack + off);
		frame[1] = *(__u64 *)(s->stack + off + 8);
	} else if (bpf_probe_read_user(frame, sizeof(frame), (const void *)fp)) {
		return 1;
	}
	if (!frame[1])
		return 1;
	barrier_var(n);
	if (n >= CPA_BPF_MAX_UFP)
		return 1;
	s->ufp[n] = frame[1];
	c->n = n + 1;
	if (frame[0] <= fp) {
		/* As in fp_walk(). */
		if (!c->jump || lo != sp || !frame[0])
			return 1;
		c->lo = frame[0];
	}
	c->fp = frame[0];
	return 0;
}

static long fp_step_user(__u32 i, void *ctx)
{
	return fp_step(i, ctx, false);
}

static long fp_step_copy(__u32 i, void *ctx)
{
	return fp_step(i, ctx, true);
}

static __always_inline __s32 fp_walk(struct cpa_bpf_sample *s, struct bpf_dynptr *d, __u64 copied,
				     bool jump)
{
	__u64 sp = s->regs.sp, fp = s->regs.bp, lo = sp, off, frame[2];
	__u32 n = 1;

	s->ufp[0] = s->regs.ip;
	if (use_loop()) {
		struct fp_chain c = {.s = s,
				     .sp = sp,
				     .fp = fp,
				     .lo = lo,
				     .copied = copied,
				     .n = 1,
				     .jump = jump};

		/* A dynptr record's chain is walked before the copy. */
		if (d)
			bpf_loop(CPA_BPF_MAX_UFP - 1, fp_step_user, &c, 0);
		else
			bpf_loop(CPA_BPF_MAX_UFP - 1, fp_step_copy, &c, 0);
		n = c.n;
		return n <= CPA_BPF_MAX_UFP ? (__s32)(n * sizeof(__u64)) : 0;
	}
	for (int i = 0; i < CPA_BPF_MAX_UFP - 1; i++) {
		if (fp < lo || fp - lo > FP_MAX_SPAN || (fp & 7))
			break;
		off = fp - sp;
		barrier_var(off);
		/* A dynptr record's chain is walked before the copy, in user
		 * memory (fill_sample()). */
		if (!d && off + 16 <= copied && off <= stack_size) {
			frame[0] = *(__u64 *)(s->stack + off);
			frame[1] = *(__u64 *)(s->stack + off + 8);
		} else if (bpf_probe_read_user(frame, sizeof(frame), (const void *)fp)) {
			break;
		}
		if (!frame[1])
			break;
		barrier_var(n);
		if (n >= CPA_BPF_MAX_UFP)
			break;
		s->ufp[n++] = frame[1];
		if (frame[0] <= fp) {
			/* Go's systemstack, mcall and morestack run their callee
			 * on g0's stack with rbp still the goroutine's, which may
			 * lie below: one such jump is followed (lo moves once). */
			if (!jump || lo != sp || !frame[0])
				break;
			lo = frame[0];
		}
		fp = frame[0];
	}
	return (__s32)(n * sizeof(__u64));
}

/*
 * All user registers: the interrupted context's own when the sample hit user
 * mode (perf_event context reads must be 8 bytes wide: field by field), else
 * the context saved at kernel entry, in one read of the task's pt_regs.
 */
static __always_inline void read_user_regs(struct cpa_bpf_sample *s, struct task_struct *task,
					   const struct cpa_bpf_regs *ir, bool in_user)
{
	if (in_user) {
		s->regs.r15 = ir->r15;
		s->regs.r14 = ir->r14;
		s->regs.r13 = ir->r13;
		s->regs.r12 = ir->r12;
		s->regs.bp = ir->bp;
		s->regs.bx = ir->bx;
		s->regs.r11 = ir->r11;
		s->regs.r10 = ir->r10;
		s->regs.r9 = ir->r9;
		s->regs.r8 = ir->r8;
		s->regs.ax = ir->ax;
		s->regs.cx = ir->cx;
		s->regs.dx = ir->dx;
		s->regs.si = ir->si;
		s->regs.di = ir->di;
		s->regs.orig_ax = ir->orig_ax;
		s->regs.ip = ir->ip;
		s->regs.cs = ir->cs;
		s->regs.flags = ir->flags;
		s->regs.sp = ir->sp;
		s->regs.ss = ir->ss;
	} else if (bpf_probe_read_kernel(&s->regs, sizeof(s->regs),
					 (const void *)bpf_task_pt_regs(task))) {
		__builtin_memset(&s->regs, 0, sizeof(s->regs));
	}
}

/*
 * Per-probe rate limit: at most probe_rate samples per second per probe
 * (second of bpf_ktime_get_ns). The window is shared by all CPUs; two CPUs
 * crossing a second boundary at once may both reset it, so the limit is
 * approximate by a few hits at boundaries, never unbounded. Skipped hits
 * are counted per probe for capture's LOSS records.
 */
struct probe_window {
	__u64 sec;
	__u64 n;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPA_BPF_PROBE_MAX);
	__type(key, __u32);
	__type(value, struct probe_window);
} probe_win SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CPA_BPF_PROBE_MAX *CPA_BPF_PSTAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} probe_stats SEC(".maps");

const volatile __u64 probe_rate = 0; /* samples per second per probe; 0 = no limit */

/* The budget's lower limit per probe (struct cpa_bpf_probe_ctl), written by capture. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPA_BPF_PROBE_MAX);
	__type(key, __u32);
	__type(value, struct cpa_bpf_probe_ctl);
} probe_ctl SEC(".maps");

static __always_inline void probe_stat_add(__u32 probe_id, __u32 what, __u64 n)
{
	__u32 k = probe_id * CPA_BPF_PSTAT_MAX + what;
	__u64 *v = bpf_map_lookup_elem(&probe_stats, &k);

	if (v)
		*v += n;
}

static __always_inline void probe_stat_inc(__u32 probe_id, __u32 what)
{
	probe_stat_add(probe_id, what, 1);
}

static __always_inline bool probe_admit(__u32 probe_id)
{
	struct cpa_bpf_probe_ctl *ctl;
	struct probe_window *w;
	__u64 sec, limit = probe_rate;

	if (probe_id >= CPA_BPF_PROBE_MAX)
		return false;
	probe_stat_inc(probe_id, CPA_BPF_PSTAT_HITS);
	/* The budget may lower the limit (thin), never raise it. */
	ctl = bpf_map_lookup_elem(&probe_ctl, &probe_id);
	if (ctl && ctl->thin_rate && (!limit || ctl->thin_rate < limit))
		limit = ctl->thin_rate;
	if (!limit)
		return true;
	w = bpf_map_lookup_elem(&probe_win, &probe_id);
	if (!w)
		return false;
	sec = bpf_ktime_get_ns() / 1000000000ull;
	if (w->sec != sec) {
		w->sec = sec;
		w->n = 0;
	}
	if (__sync_fetch_and_add(&w->n, 1) < limit)
		return true;
	probe_stat_inc(probe_id, CPA_BPF_PSTAT_SKIPPED);
	return false;
}

/*
 * Is task's sample without a user part (kernel thread, idle)?
 */
static __always_inline bool sample_kthread(struct task_struct *task, __u32 tid)
{
	return tid == 0 || (task->flags & PF_KTHREAD);
}

/*
 * The user stack bytes a sample of task will copy (ustack_want() at its user
 * sp), 0 without a copy. Known before anything is reserved, so a dynptr
 * record is reserved at its size.
 */
static __always_inline __u64 sample_want(struct task_struct *task, const struct cpa_bpf_regs *ir,
					 bool in_user, __u32 tgid, __u32 tid)
{
	struct pt_regs *ur;
	__u64 sp;

	if (!stack_size || kernel_only || sample_kthread(task, tid))
		return 0;
	if (in_user) {
		sp = ir->sp;
	} else {
		ur = (struct pt_regs *)bpf_task_pt_regs(task);
		sp = BPF_CORE_READ(ur, sp);
	}
	return ustack_want(task, sp, tid == tgid, tgid);
}

/*
 * Python (bpf/profile.h, docs/unwinding.md "Python"): the sampled thread's
 * interpreter frames, when capture found a CPython in its process. The thread
 * state is _PyRuntime's current one when it is this thread's (the GIL
 * holder, 3.10/3.11), else the one of the main interpreter's list whose
 * thread_id is this thread's pthread_self() (its fsbase on x86-64 glibc).
 * Then the frame chain from it, CPA_BPF_MAX_PYFRAMES frames at most, one
 * user read per frame. Built in a per-CPU buffer; the caller copies py_n
 * frames behind the stack bytes.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH); /* an exit not seen never fills it */
	__uint(max_entries, CPA_BPF_PY_PROCS);
	__type(key, __u32); /* tgid */
	__type(value, struct cpa_bpf_py_proc);
} py_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CPA_BPF_PY_SLOTS);
	__type(key, __u32);   /* tgid % CPA_BPF_PY_SLOTS */
	__type(value, __u32); /* tgid of a py_procs entry */
} py_slots SEC(".maps");

/* Is tgid a Python process (py_procs): one inlined array load. */
static __always_inline bool py_process(__u32 tgid)
{
	__u32 slot = tgid % CPA_BPF_PY_SLOTS, *t = bpf_map_lookup_elem(&py_slots, &slot);

	return t && *t == tgid;
}

struct py_buf {
	struct cpa_bpf_pyframe f[CPA_BPF_MAX_PYFRAMES];
	__u8 rd[CPA_BPF_PY_READ];
	struct cpa_bpf_py_proc pp; /* the process's entry, copied */
	__u64 self;		   /* the thread's pthread_self() */
	__u64 ts;		   /* thread state searched, then found */
	__u64 fr;		   /* next frame to read */
	__u32 n;
	__u32 status;
	__u32 wake; /* the process's first walk with frames (cpa_bpf_py_proc.woke) */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2); /* cpu-clock, and a probe it interrupted */
	__type(key, __u32);
	__type(value, struct py_buf);
} py_scratch SEC(".maps");

/* The u64 at off of a frame read into rd: 0 when off is not in it. */
static __always_inline __u64 py_u64(const __u8 *rd, __u32 off)
{
	__u64 v = 0;

	off &= CPA_BPF_PY_READ - 1;
	if (off > CPA_BPF_PY_READ - 8)
		return 0;
	__builtin_memcpy(&v, rd + off, sizeof(v));
	return v;
}

static __always_inline __u64 py_read_ptr(__u64 addr)
{
	__u64 v = 0;

	if (bpf_probe_read_user(&v, sizeof(v), (const void *)addr))
		return 0;
	return v;
}

/* bpf_loop() callbacks (verified once, whatever the count): ctx is the key
 * of the CPU's py_scratch slot. */
static long py_thread_cb(__u32 i, void *ctx)
{
	struct py_buf *b = bpf_map_lookup_elem(&py_scratch, ctx);

	if (!b || !b->ts)
		return 1;
	if (py_read_ptr(b->ts + b->pp.ts_thread_id) == b->self)
		return 1; /* found: b->ts */
	b->ts = py_read_ptr(b->ts + b->pp.ts_next);
	return 0;
}

static long py_frame_cb(__u32 i, void *ctx)
{
	struct py_buf *b = bpf_map_lookup_elem(&py_scratch, ctx);
	__u64 code, instr, chk;
	__u32 n;

	if (!b)
		return 1;
	n = b->n;
	if (!b->fr) {
		b->status = CPA_BPF_PY_OK;
		return 1;
	}
	if (bpf_probe_read_user(b->rd, sizeof(b->rd), (const void *)b->fr)) {
		b->status = CPA_BPF_PY_READ_FAIL;
		return 1;
	}
	code = py_u64(b->rd, b->pp.fr_code);
	if (b->pp.entry_mode == CPA_BPF_PY_ENTRY_CSTACK &&
	    b->rd[b->pp.fr_owner & (CPA_BPF_PY_READ - 1)] == 3) {
		/* A C call's shim frame: the one before it was the outermost
		 * of its evaluation. */
		if (n > 0 && n <= CPA_BPF_MAX_PYFRAMES)
			b->f[n - 1].code |= CPA_BPF_PY_ENTRY;
	} else {
		if (n >= CPA_BPF_MAX_PYFRAMES) {
			b->status = CPA_BPF_PY_TRUNC;
			return 1;
		}
		if (b->pp.entry_mode == CPA_BPF_PY_ENTRY_ALL ||
		    (b->pp.entry_mode == CPA_BPF_PY_ENTRY_FLAG &&
		     b->rd[b->pp.fr_entry & (CPA_BPF_PY_READ - 1)]))
			code |= CPA_BPF_PY_ENTRY;
		instr = py_u64(b->rd, b->pp.fr_instr);
		if (b->pp.entry_mode != CPA_BPF_PY_ENTRY_ALL)
			instr = instr - (code & ~CPA_BPF_PY_ENTRY) < (1ull << 31)
					? instr - (code & ~CPA_BPF_PY_ENTRY)
					: 0xffffffffu;
		chk = py_read_ptr((code & ~CPA_BPF_PY_ENTRY) + b->pp.co_check);
		b->f[n].code = code;
		b->f[n].instr = (__u32)instr;
		b->f[n].check = (__u32)(chk ^ (chk >> 32));
		b->n = n + 1;
	}
	b->fr = py_u64(b->rd, b->pp.fr_previous);
	return 0;
}

/*
 * Walk tgid's Python frames into slot key's py_buf: returns its struct
 * (b->n frames, b->status, b->pp.version), or NULL: not a Python process.
 * The thread state: _PyRuntime's current one when it is this thread's (the
 * GIL holder, 3.10/3.11), else the main interpreter's list searched for the
 * one whose thread_id is this thread's pthread_self(). Needs bpf_loop()
 * (5.17): without it, no Python frames.
 */
static __always_inline struct py_buf *py_walk(__u32 tgid, __u64 self, __u32 *key)
{
	const struct cpa_bpf_py_proc *pp = bpf_map_lookup_elem(&py_procs, &tgid);
	struct py_buf *b = bpf_map_lookup_elem(&py_scratch, key);
	__u64 ts;

	if (!pp || !b)
		return NULL;
	b->pp = *pp;
	b->n = 0;
	b->wake = 0;
	b->status = pp->status;
	/* A launcher's entry (pending): its first sample wakes capture to
	 * read the libpython mapping that completes it (py_exec()). */
	if (pp->status == CPA_BPF_PY_PENDING && !b->pp.woke) {
		((struct cpa_bpf_py_proc *)pp)->woke = 1;
		b->wake = 1;
	}
	if (pp->status != CPA_BPF_PY_OK)
		return b;
	if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_loop)) {
		b->status = CPA_BPF_PY_READ_FAIL;
		return b;
	}
	b->self = self;
	b->ts = 0;
	if (pp->rt_tstate_current != CPA_BPF_PY_NONE) {
		ts = py_read_ptr(pp->runtime + pp->rt_tstate_current);
		if (ts && py_read_ptr(ts + pp->ts_thread_id) == self)
			b->ts = ts;
	}
	if (!b->ts) {
		ts = py_read_ptr(pp->runtime + pp->rt_interp_head);
		b->ts = ts ? py_read_ptr(ts + pp->is_tstate_head) : 0;
		bpf_loop(CPA_BPF_PY_THREADS, py_thread_cb, key, 0);
	}
	if (!b->ts) {
		b->status = CPA_BPF_PY_NO_TSTATE;
		return b;
	}
	b->fr = py_read_ptr(b->ts + pp->ts_frame);
	if (b->fr && pp->cf_frame != CPA_BPF_PY_NONE)
		b->fr = py_read_ptr(b->fr + pp->cf_frame);
	b->status = CPA_BPF_PY_TRUNC;
	bpf_loop(CPA_BPF_MAX_PYFRAMES + 8, py_frame_cb, key, 0);
	/* The process's first frames: capture is woken for its code objects
	 * (one write per process; two CPUs at once may both wake it). */
	if (b->n && !b->pp.woke) {
		((struct cpa_bpf_py_proc *)pp)->woke = 1;
		b->wake = 1;
	}
	return b;
}

/*
 * py_walk() as a global function: the verifier checks it once, on its own,
 * rather than once per state its callers reach it in (the scratch and fixed
 * records' copy and FP walk before it passed 1M instructions). 1 when slot
 * key's py_buf holds a walk (or a status) of tgid.
 */
__noinline int py_walk_global(__u32 tgid, __u64 self, __u32 key)
{
	return py_walk(tgid, self, &key) != NULL;
}

/*
 * The Python part of sample s (record_sample()): py_ver/py_status/py_n in
 * s, the frames copied to dst (the record's bytes after the stack, d NULL)
 * or into d at that offset. True: the process's first sample with frames,
 * to be submitted with a forced wakeup (py_flags()).
 */
static __always_inline bool py_sample(struct cpa_bpf_sample *s, struct bpf_dynptr *d, void *dst,
				      struct task_struct *task, __u32 tgid, __u32 kind)
{
	__u32 key = kind == CPA_BPF_KIND_PROBE, n, len;
	struct py_buf *b;

	if (kernel_only || (s->flags & CPA_BPF_F_KERNEL_THREAD))
		return false;
	if (!py_walk_global(tgid, task->thread.fsbase, key))
		return false;
	b = bpf_map_lookup_elem(&py_scratch, &key);
	if (!b)
		return false;
	if (b->status == CPA_BPF_PY_PENDING)
		return b->wake; /* no interpreter yet: a sample without Python */
	s->py_ver = b->pp.version;
	s->py_status = (__u16)b->status;
	n = b->n;
	if (n > CPA_BPF_MAX_PYFRAMES)
		n = CPA_BPF_MAX_PYFRAMES;
	len = n * sizeof(struct cpa_bpf_pyframe);
	barrier_var(len);
	if (len > CPA_BPF_PY_AREA)
		return false;
	if (d) {
		if (bpf_dynptr_write(d, CPA_BPF_STACK_OFF + s->stack_len, b->f, len, 0))
			return false;
	} else if (bpf_probe_read_kernel(dst, len, b->f)) {
		return false;
	}
	s->py_n = n;
	return b->wake;
}

/* py_sample() into a record built in place (scratch slot or fixed
 * reservation, rec_size bytes: the Python area follows the stack's cap). */
static __always_inline bool py_record(struct cpa_bpf_sample *s, struct task_struct *task,
				      __u32 tgid, __u32 kind, bool py)
{
	__u64 sl = s->stack_len;

	barrier_var(sl);
	if (!py || sl > stack_size)
		return false;
	return py_sample(s, NULL, (void *)s->stack + sl, task, tgid, kind);
}

/*
 * A sample's submit flags: a Python process's first sample with frames
 * (py_sample() true) wakes capture now, so that it reads the code objects
 * while the process lives, however short its life (capture/cap_pyname.h);
 * its later ones wait for capture's poll like any other.
 */
static __always_inline __u64 py_flags(bool wake)
{
	__u64 f = submit_flags();

	return wake ? BPF_RB_FORCE_WAKEUP : f;
}

/*
 * Everything of a sample but its type and time: ids, comms, kernel stack,
 * user regs, user stack copy (want bytes, sample_want()) and FP chain of
 * task (the current task). ir is the interrupted context when in_user
 * (perf_event), else unused: the user regs are the task's saved ones; kskip
 * leaf kernel frames are left out (a tracepoint's own BPF frames). The one
 * sample builder: on-CPU and probe samples (through record_sample(), into
 * the ring buffer record or the scratch slot) and off-CPU stacks (into the
 * stash, kind OFFCPU) all use it. s is the record's fixed part; the stack
 * bytes go to s->stack, or with d (a dynptr record) behind s in d.
 */
static __always_inline void fill_sample(void *ctx, struct cpa_bpf_sample *s, struct bpf_dynptr *d,
					__u64 want, struct task_struct *task,
					const struct cpa_bpf_regs *ir, bool in_user, __u32 kskip,
					__u32 tgid, __u32 tid, const char *comm, __u32 kind,
					__u32 probe_id)
{
	bool kthread = sample_kthread(task, tid);
	__u32 flags = 0;

	s->kind = kind;
	s->probe_id = probe_id;
	s->cgroup_id = bpf_get_current_cgroup_id();
	s->pid = tgid;
	s->tid = tid;
	s->cpu = bpf_get_smp_processor_id();
	__builtin_memcpy(s->comm, comm, CPA_BPF_COMM_LEN);
	/* The group leader's comm is the thread's own for the main thread:
	 * no second task_struct to pull into the cache then. */
	if (tid == tgid)
		__builtin_memcpy(s->pcomm, comm, CPA_BPF_COMM_LEN);
	else
		BPF_CORE_READ_STR_INTO(&s->pcomm, task, group_leader, comm);

	if (!in_user) {
		flags |= CPA_BPF_F_IN_KERNEL;
		s->kstack_len = bpf_get_stack(ctx, s->kstack, sizeof(s->kstack),
					      kskip & BPF_F_SKIP_FIELD_MASK);
	} else {
		s->kstack_len = 0;
	}

	s->ufp_len = 0;
	s->stack_len = 0;
	s->py_n = 0; /* py_sample() */
	s->py_ver = 0;
	s->py_status = 0;
	if (kthread || kernel_only)
		__builtin_memset(&s->regs, 0, sizeof(s->regs));
	if (kthread) {
		flags |= CPA_BPF_F_KERNEL_THREAD;
	} else if (!kernel_only) {
		read_user_regs(s, task, ir, in_user);
		flags |= CPA_BPF_F_USER_REGS;
		if (stack_size) {
			/* A dynptr record's FP chain comes first: the copy's
			 * many exits then end the program instead of each
			 * walking the chain again in the verifier (1M insns). */
			if (d)
				s->ufp_len = fp_walk(s, d, 0, kind != CPA_BPF_KIND_OFFCPU);
			s->stack_len = copy_ustack(s, d, s->regs.sp, want);
			if (s->stack_len == 0) {
				flags |= CPA_BPF_F_NO_USTACK;
				stat_inc(CPA_BPF_STAT_NO_USTACK);
				/* In execve past its point of no return the old
				 * stack went with the old mm, in exit with the
				 * mm's teardown: say so, the walk is not what
				 * failed. */
				if (bpf_core_field_exists(task->in_execve) &&
				    BPF_CORE_READ_BITFIELD_PROBED(task, in_execve))
					flags |= CPA_BPF_F_IN_EXEC;
				else if (task->flags & PF_EXITING)
					flags |= CPA_BPF_F_IN_EXIT;
			} else if (s->stack_len < want) {
				flags |= CPA_BPF_F_USTACK_TRUNC;
				stat_inc(CPA_BPF_STAT_USTACK_TRUNC);
			}
			if (!d)
				s->ufp_len =
					fp_walk(s, d, s->stack_len, kind != CPA_BPF_KIND_OFFCPU);
		} else {
			s->ufp_len = bpf_get_stack(ctx, s->ufp, sizeof(s->ufp), BPF_F_USER_STACK);
		}
	}
	s->flags = flags;
}

/* Trigger policies' probes (below): false when this hit is not wanted. */
static __always_inline bool policy_probe_pass(__u32 tgid, __u32 probe_id);

static __always_inline void count_rb_lost(__u32 kind, __u32 probe_id)
{
	if (kind == CPA_BPF_KIND_PROBE)
		probe_stat_inc(probe_id, CPA_BPF_PSTAT_RB_LOST);
	else
		stat_inc(CPA_BPF_STAT_RB_LOST);
}

/*
 * The pid/comm filters, then one full sample (fill_sample()) into the ring
 * buffer, the way rec_mode says (bpf/profile.h, enum cpa_bpf_rec_mode):
 * reserved at the size it needs (dynptr), built in a per-CPU scratch slot and
 * output at its used length (scratch), or reserved at the cap (fixed). Every
 * sample source (cpu-clock, probes) goes through here, so they all unwind
 * alike; off-CPU builds its stash entry with fill_sample() too.
 */
static __always_inline int record_sample(void *ctx, const struct cpa_bpf_regs *ir, bool in_user,
					 __u32 kind, __u32 probe_id)
{
	__u64 id = bpf_get_current_pid_tgid(), want;
	__u32 tgid = id >> 32, tid = (__u32)id, key;
	struct task_struct *task;
	struct cpa_bpf_sample *s;
	struct bpf_dynptr d;
	char comm[CPA_BPF_COMM_LEN];
	bool py, wake;

	if (tid == 0 && !with_idle)
		return 0;
	/* With --pid most runs are other processes' ticks: leave before
	 * touching anything else (a filtered run is then ~0.2 us). */
	if (target_tgid && tgid != target_tgid) {
		stat_inc(CPA_BPF_STAT_FILTERED);
		return 0;
	}
	task = bpf_get_current_task_btf();
	bpf_get_current_comm(comm, sizeof(comm));
	if (!comm_wanted(task, comm)) {
		stat_inc(CPA_BPF_STAT_FILTERED);
		return 0;
	}
	if (kind == CPA_BPF_KIND_PROBE &&
	    (!policy_probe_pass(tgid, probe_id) || !probe_admit(probe_id)))
		return 0;
	/* What this generation produced, delivered or not: the map is pinned,
	 * so a successor counts what died with a killed capture. */
	stat_inc(CPA_BPF_STAT_PRODUCED);
	want = sample_want(task, ir, in_user, tgid, tid);
	py = py_process(tgid);

	if (rec_mode == CPA_BPF_REC_DYNPTR) {
		/* A page of slack past want: copy_ustack()'s slices. */
		__u32 size = CPA_BPF_STACK_OFF + (want ? want + CPA_BPF_PAGE : 0) +
			     (py ? CPA_BPF_PY_AREA : 0);

		if (bpf_ringbuf_reserve_dynptr(&rb, size, 0, &d)) {
			bpf_ringbuf_discard_dynptr(&d, 0);
			count_rb_lost(kind, probe_id);
			return 0;
		}
		s = bpf_dynptr_data(&d, 0, sizeof(*s));
		if (!s) { /* cannot happen: the record is at least that long */
			bpf_ringbuf_discard_dynptr(&d, 0);
			return 0;
		}
		s->type = CPA_BPF_REC_SAMPLE;
		s->time_ns = bpf_ktime_get_boot_ns();
		fill_sample(ctx, s, &d, want, task, ir, in_user, 0, tgid, tid, comm, kind,
			    probe_id);
		wake = py && py_sample(s, &d, NULL, task, tgid, kind);
		bpf_ringbuf_submit_dynptr(&d, py_flags(wake));
		return 0;
	}
	if (rec_mode == CPA_BPF_REC_SCRATCH) {
		__u64 len;

		key = bpf_get_smp_processor_id() * 2 + (kind == CPA_BPF_KIND_PROBE);
		s = bpf_map_lookup_elem(&sample_scratch, &key);
		if (!s)
			return 0;
		s->type = CPA_BPF_REC_SAMPLE;
		s->time_ns = bpf_ktime_get_boot_ns();
		fill_sample(ctx, s, NULL, want, task, ir, in_user, 0, tgid, tid, comm, kind,
			    probe_id);
		wake = py_record(s, task, tgid, kind, py);
		len = CPA_BPF_STACK_OFF + s->stack_len + s->py_n * sizeof(struct cpa_bpf_pyframe);
		if (len > rec_size)
			len = rec_size;
		if (bpf_ringbuf_output(&rb, s, len, py_flags(wake)))
			count_rb_lost(kind, probe_id);
		return 0;
	}
	s = bpf_ringbuf_reserve(&rb, rec_size, 0);
	if (!s) {
		count_rb_lost(kind, probe_id);
		return 0;
	}
	s->type = CPA_BPF_REC_SAMPLE;
	s->time_ns = bpf_ktime_get_boot_ns();
	fill_sample(ctx, s, NULL, want, task, ir, in_user, 0, tgid, tid, comm, kind, probe_id);
	wake = py_record(s, task, tgid, kind, py);
	bpf_ringbuf_submit(s, py_flags(wake));
	return 0;
}

/*
 * Trigger policies (docs/metrics.md): while a policy raises a target's
 * frequency, capture runs the cpu-clock events at the raised rate and sets
 * boost_div; every other process keeps one sample in boost_div per CPU, so
 * it stays at the base rate.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPA_BPF_POLICY_TARGETS);
	__type(key, __u32);   /* tgid */
	__type(value, __u32); /* enum cpa_bpf_policy_flag */
} policy_targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} boost_ctr SEC(".maps");

volatile __u32 boost_div = 1;		  /* written by capture; 1 = no boost */
const volatile bool offcpu_gated = false; /* off-CPU only for CPA_BPF_POLICY_OFFCPU targets */

static __always_inline bool policy_has(__u32 tgid, __u32 flag)
{
	__u32 *f = bpf_map_lookup_elem(&policy_targets, &tgid);

	return f && (*f & flag);
}

/*
 * Probes of the policies: one counted per process for a probe_rate item
 * (policy_rate_probes: hits into policy_hits, the sample goes on as any
 * --probe's), or attached by a trigger for its targets only
 * (policy_attach_probes: the hits of other processes are filtered out).
 */
const volatile __u32 policy_rate_probes = 0;
const volatile __u32 policy_attach_probes = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPA_BPF_POLICY_HITS);
	__type(key, struct cpa_bpf_policy_hit);
	__type(value, __u64);
} policy_hits SEC(".maps");

static __always_inline bool policy_probe_pass(__u32 tgid, __u32 probe_id)
{
	struct cpa_bpf_policy_hit k = {.tgid = tgid, .probe_id = probe_id};
	__u64 one = 1, *n;
	__u32 bit;

	if (probe_id >= CPA_BPF_PROBE_MAX)
		return true; /* probe_admit() refuses it */
	bit = 1u << probe_id;
	if (policy_attach_probes & bit) {
		if (policy_has(tgid, CPA_BPF_POLICY_PROBE(probe_id)))
			return true;
		stat_inc(CPA_BPF_STAT_FILTERED);
		return false;
	}
	if (!(policy_rate_probes & bit))
		return true;
	n = bpf_map_lookup_elem(&policy_hits, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else if (bpf_map_update_elem(&policy_hits, &k, &one, BPF_NOEXIST) < 0 &&
		 (n = bpf_map_lookup_elem(&policy_hits, &k)))
		__sync_fetch_and_add(n, 1);
	return true;
}

/* Under a boost: false for the samples of other processes beyond the base rate. */
static __always_inline bool boost_keep(void)
{
	__u32 div = boost_div, k = 0, *c;

	if (div <= 1 || policy_has(bpf_get_current_pid_tgid() >> 32, CPA_BPF_POLICY_BOOST))
		return true;
	c = bpf_map_lookup_elem(&boost_ctr, &k);
	if (!c)
		return true;
	return (*c)++ % div == 0;
}

SEC("perf_event")
int cpa_on_cpu(struct bpf_perf_event_data *ctx)
{
	const struct cpa_bpf_regs *ir = (const struct cpa_bpf_regs *)&ctx->regs;

	if (!boost_keep())
		return 0;
	return record_sample(ctx, ir, (ir->cs & 3) == 3, CPA_BPF_KIND_ONCPU, 0);
}

/*
 * --probe programs (docs/capture.md, "Probes"). capture attaches each spec
 * with its index as the BPF cookie; one program serves every spec of its
 * program type.
 */

/*
 * One probe run: record_sample() between two clock reads, the run and its
 * ns counted per probe before any filter (every run is one trap of a
 * uprobe, wanted or not). capture weighs them against --probe_budget.
 */
static __always_inline int probe_run(void *ctx, const struct cpa_bpf_regs *ir, bool in_user,
				     __u32 probe_id)
{
	__u64 t0 = bpf_ktime_get_ns();
	int r = record_sample(ctx, ir, in_user, CPA_BPF_KIND_PROBE, probe_id);

	if (probe_id < CPA_BPF_PROBE_MAX) {
		probe_stat_inc(probe_id, CPA_BPF_PSTAT_RUNS);
		probe_stat_add(probe_id, CPA_BPF_PSTAT_RUN_NS, bpf_ktime_get_ns() - t0);
	}
	return r;
}

/* uprobe: and uretprobe: (usdt: too, through libbpf's usdt attach): the
 * context is the user registers at the hit. */
SEC("uprobe")
int cpa_probe_user(struct pt_regs *ctx)
{
	return probe_run(ctx, (const struct cpa_bpf_regs *)ctx, true,
			 (__u32)bpf_get_attach_cookie(ctx));
}

/* The trap calibration's uprobe (capture/cap_bpf.c): nothing but the trap. */
SEC("uprobe")
int cpa_probe_calib(struct pt_regs *ctx)
{
	return 0;
}

/* usdt: libbpf's USDT attach uses the BPF cookie itself; ours is the USDT cookie. */
SEC("usdt")
int cpa_probe_usdt(struct pt_regs *ctx)
{
	return probe_run(ctx, (const struct cpa_bpf_regs *)ctx, true, (__u32)bpf_usdt_cookie(ctx));
}

/* kprobe: and kretprobe: the context is kernel registers; user regs are the
 * task's saved ones. Never attached on kernels without kprobes. */
SEC("kprobe")
int cpa_probe_kernel(struct pt_regs *ctx)
{
	return probe_run(ctx, NULL, false, (__u32)bpf_get_attach_cookie(ctx));
}

/*
 * fentry:FUNC and fexit:FUNC (BTF trampolines: kernel functions without
 * kprobes). A tracing program is bound to its target at load time, so each
 * probe id has its own pair; capture sets the target of the ones in use and
 * loads only those. The id is the slot, no cookie needed.
 */
#define CPA_FENTRY_SLOT(i)                             \
	SEC("fentry")                                  \
	int cpa_fentry##i(unsigned long long *ctx)     \
	{                                              \
		return probe_run(ctx, NULL, false, i); \
	}                                              \
	SEC("fexit")                                   \
	int cpa_fexit##i(unsigned long long *ctx)      \
	{                                              \
		return probe_run(ctx, NULL, false, i); \
	}

CPA_FENTRY_SLOT(0)
CPA_FENTRY_SLOT(1)
CPA_FENTRY_SLOT(2)
CPA_FENTRY_SLOT(3)
CPA_FENTRY_SLOT(4)
CPA_FENTRY_SLOT(5)
CPA_FENTRY_SLOT(6)
CPA_FENTRY_SLOT(7)
_Static_assert(CPA_BPF_PROBE_MAX == 8, "one fentry/fexit pair per probe id");

/* tracepoint:GROUP:NAME (perf-event attach, so it can carry a cookie). */
SEC("tracepoint")
int cpa_probe_tp(void *ctx)
{
	return probe_run(ctx, NULL, false, (__u32)bpf_get_attach_cookie(ctx));
}

static __always_inline int emit_task(struct task_struct *p, __u32 kind)
{
	__u32 tgid = BPF_CORE_READ(p, tgid);
	struct cpa_bpf_task *t;
	char comm[CPA_BPF_COMM_LEN];

	if (BPF_CORE_READ(p, flags) & PF_KTHREAD)
		return 0;
	if (target_tgid && tgid != target_tgid)
		return 0;
	BPF_CORE_READ_STR_INTO(&comm, p, comm);
	if (!comm_wanted(p, comm))
		return 0;
	t = bpf_ringbuf_reserve(&rb, sizeof(*t), 0);
	if (!t) {
		stat_inc(CPA_BPF_STAT_TASK_LOST);
		return 0;
	}
	t->type = CPA_BPF_REC_TASK;
	t->kind = kind;
	t->time_ns = bpf_ktime_get_boot_ns();
	t->pid = tgid;
	t->tid = BPF_CORE_READ(p, pid);
	__builtin_memcpy(t->comm, comm, sizeof(comm));
	/* Where its paths resolve once it is gone (docs/unwindd.md). */
	t->mnt_ns = kind == CPA_BPF_TASK_EXEC ? BPF_CORE_READ(p, nsproxy, mnt_ns, ns.inum) : 0;
	t->_pad0 = 0;
	bpf_ringbuf_submit(t, submit_flags());
	return 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CPA_BPF_PY_EXECS);
	__type(key, struct cpa_bpf_py_exec);
	__type(value, struct cpa_bpf_py_proc);
} py_execs SEC(".maps");

/*
 * An exec of an interpreter capture knows (py_execs): its py_procs entry now.
 * The executed file's own name (a symlink's target, a script's interpreter)
 * must say python: an inode number the interpreter's file had before an
 * upgrade may be another file's now. The comm need not: a venv's entry point
 * or a link named otherwise runs the same interpreter. A python file without
 * a template (capture has not resolved it yet, or a launcher whose libpython
 * maps next) is entered pending (CPA_BPF_PY_PENDING): its first sample wakes
 * capture (py_walk()), which reads its mappings then and completes the entry;
 * one that is never sampled costs capture nothing.
 */
static __always_inline void py_exec(struct task_struct *p, struct linux_binprm *bprm)
{
	struct cpa_bpf_py_exec k = {};
	struct cpa_bpf_py_proc *t, e = {};
	__u32 tgid = p->tgid, slot = tgid % CPA_BPF_PY_SLOTS;
	const unsigned char *name = BPF_CORE_READ(bprm, file, f_path.dentry, d_name.name);
	char c[8];

	if (bpf_probe_read_kernel(c, sizeof(c), name) || c[0] != 'p' || c[1] != 'y' ||
	    c[2] != 't' || c[3] != 'h' || c[4] != 'o' || c[5] != 'n')
		return;
	k.ino = BPF_CORE_READ(bprm, file, f_inode, i_ino);
	k.dev = BPF_CORE_READ(bprm, file, f_inode, i_sb, s_dev);
	t = bpf_map_lookup_elem(&py_execs, &k);
	if (t) {
		e = *t;
		e.runtime += BPF_CORE_READ(p, mm, start_code);
	}
	e.woke = 0;
	if (bpf_map_update_elem(&py_procs, &tgid, &e, BPF_ANY) == 0)
		bpf_map_update_elem(&py_slots, &slot, &tgid, BPF_ANY);
}

/* comm is already the new image's name here (set in begin_new_exec). */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(cpa_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 tgid = p->tgid, slot = tgid % CPA_BPF_PY_SLOTS, *t;

	/* The old image's entry (a forked Python's child running another
	 * program) goes now; py_exec() enters the new one if it is Python. */
	if (py_process(tgid) && bpf_map_delete_elem(&py_procs, &tgid) == 0) {
		t = bpf_map_lookup_elem(&py_slots, &slot);
		if (t && *t == tgid)
			*t = 0;
	}
	if (!target_tgid || tgid == target_tgid)
		py_exec(p, bprm);
	return emit_task(p, CPA_BPF_TASK_EXEC);
}

/*
 * A process forked by a Python (multiprocessing, a prefork server's workers)
 * runs its parent's interpreter at the same addresses: its entry now, so its
 * first samples have their Python frames, rather than after capture's next
 * poll, up to a second later (capture copies it too, from the FORK event).
 * A thread (clone in the same process) needs nothing: py_procs is per tgid.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(cpa_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ptgid = parent->tgid, tgid = child->tgid, slot = tgid % CPA_BPF_PY_SLOTS;
	struct cpa_bpf_py_proc *pp, e;

	if (tgid == ptgid || !py_process(ptgid))
		return 0;
	pp = bpf_map_lookup_elem(&py_procs, &ptgid);
	if (!pp)
		return 0;
	e = *pp;
	e.woke = 0; /* its own first sample wakes capture: the code objects are its own */
	if (bpf_map_update_elem(&py_procs, &tgid, &e, BPF_ANY) == 0)
		bpf_map_update_elem(&py_slots, &slot, &tgid, BPF_ANY);
	return 0;
}

/*
 * Every exiting thread passes here; the process is gone for unwindd only
 * when the last one leaves. do_exit() decrements signal->live before the
 * tracepoint on every kernel we support, so 0 means "last thread".
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(cpa_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid, slot = tgid % CPA_BPF_PY_SLOTS, *t;

	if (BPF_CORE_READ(p, signal, live.counter) != 0)
		return 0;
	/* A Python process's entry goes with it (capture never sees exits). */
	if (bpf_map_delete_elem(&py_procs, &tgid) == 0) {
		t = bpf_map_lookup_elem(&py_slots, &slot);
		if (t && *t == tgid)
			*t = 0;
	}
	return emit_task(p, CPA_BPF_TASK_EXIT);
}

/*
 * Off-CPU (--offcpu): docs/capture.md "Off-CPU". Separate from the on-CPU
 * path but for fill_sample().
 *
 * One stash entry per (thread, place): the stack the thread had when it
 * blocked there. A place is the state and user ip/sp/bp, hashed into the key,
 * and the return addresses among the 256 stack bytes above sp: which words
 * those are is decided once, when the entry's stack is built, and only they
 * must match later (a timestamp or heap pointer a caller keeps there changes
 * at every block and would make every block a new place).
 * sched_switch, prev side: the entry of the place it blocks at is found or
 * created; only a new entry (or another place with the same key) builds the
 * stack (the thread is current here, so its user memory is readable). Then
 * acct_ns = now marks it blocked and offcpu_cur remembers the place for the
 * wake-up. next side: acct_ns is taken (xchg to 0) and the span
 * acct_ns..now, if the block passes the min/max filter, is added to
 * pending_ns. cpa_offcpu_flush (run by capture just after every wall-clock
 * second and at stop) emits, per entry, the pending ns plus the span so far
 * of a thread still blocked there (moving acct_ns to now with a
 * compare-and-swap), and deletes entries idle for ten seconds (two for a
 * place used once). A thread that blocks at a few places 10000 times a
 * second costs a few records a second; one blocked for an hour has a record
 * in every second.
 */
const volatile bool offcpu = false;
const volatile __u32 offcpu_states = CPA_BPF_OFFCPU_R | CPA_BPF_OFFCPU_S | CPA_BPF_OFFCPU_D;
const volatile __u64 offcpu_min_ns = 0; /* whole block shorter than this: not recorded */
const volatile __u64 offcpu_max_ns = 0; /* longer than this: not recorded further; 0 = none */
const volatile __u32 offcpu_rec_size = sizeof(struct cpa_bpf_offcpu); /* cpa_bpf_offcpu_size() */

/* tp_btf programs see two frames of their own on the kernel stack: the
 * program and bpf_trace_run4. */
#define OFFCPU_KSKIP	     2
#define OFFCPU_IDLE_FLUSHES  10 /* an entry idle this many flushes in a row is deleted */
#define OFFCPU_IDLE_ONE_SHOT 2	/* ... one used once only (e.g. a preemption at some ip) */

struct offcpu_key {
	__u32 tid;
	__u32 _pad;
	__u64 place; /* hash of the place */
};

/* Value size set by capture to offcpu_rec_size before load. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(struct offcpu_key));
	__uint(value_size, sizeof(struct cpa_bpf_offcpu));
} offcpu_stash SEC(".maps");

/* tid -> the place hash of its current (or last) block. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, __u64);
} offcpu_cur SEC(".maps");

/* One zeroed value of the stash's size: the source of a new entry. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, sizeof(struct cpa_bpf_offcpu));
} offcpu_zero SEC(".maps");

#define TASK_INTERRUPTIBLE   0x0001
#define TASK_UNINTERRUPTIBLE 0x0002
#define TASK_DEAD	     0x0080

static __always_inline __u32 offcpu_state(bool preempt, unsigned int prev_state, char *letter)
{
	if (preempt || prev_state == 0) {
		*letter = 'R';
		return CPA_BPF_OFFCPU_R;
	}
	if (prev_state & TASK_UNINTERRUPTIBLE) {
		*letter = 'D';
		return CPA_BPF_OFFCPU_D;
	}
	if (prev_state & TASK_INTERRUPTIBLE) {
		*letter = 'S';
		return CPA_BPF_OFFCPU_S;
	}
	return 0; /* stopped, traced, dead: not off-CPU time we report */
}

/*
 * e's stack as a record carrying weight ns at time, submitted unless gen_check
 * and e was rewritten meanwhile (a hash collision: torn, dropped, counted).
 * With dynptr records it is as long as e's copy (the stash entry is sized at
 * the cap, 8 x --stack_size: copying all of it per block cost ring space and
 * time); else reserved and copied at the cap.
 */
static __always_inline void offcpu_emit(struct cpa_bpf_offcpu *e, __u64 weight, __u64 time,
					bool gen_check, __u64 gen, __u64 flags)
{
	struct cpa_bpf_offcpu *r;

	if (rec_mode == CPA_BPF_REC_DYNPTR) {
		__u64 len = offsetof(struct cpa_bpf_offcpu, s) + CPA_BPF_STACK_OFF + e->s.stack_len;
		struct bpf_dynptr d;

		if (len > offcpu_rec_size)
			len = offcpu_rec_size;
		if (bpf_ringbuf_reserve_dynptr(&rb, len, 0, &d)) {
			bpf_ringbuf_discard_dynptr(&d, 0);
			stat_inc(CPA_BPF_STAT_OFFCPU_LOST);
			return;
		}
		bpf_dynptr_write(&d, 0, e, len, 0);
		bpf_dynptr_write(&d, offsetof(struct cpa_bpf_offcpu, weight_ns), &weight,
				 sizeof(weight), 0);
		bpf_dynptr_write(&d,
				 offsetof(struct cpa_bpf_offcpu, s) +
					 offsetof(struct cpa_bpf_sample, time_ns),
				 &time, sizeof(time), 0);
		if (gen_check && __sync_fetch_and_add(&e->gen, 0) != gen) {
			bpf_ringbuf_discard_dynptr(&d, 0);
			stat_inc(CPA_BPF_STAT_OFFCPU_TORN);
			return;
		}
		bpf_ringbuf_submit_dynptr(&d, flags);
		return;
	}
	r = bpf_ringbuf_reserve(&rb, offcpu_rec_size, 0);
	if (!r) {
		stat_inc(CPA_BPF_STAT_OFFCPU_LOST);
		return;
	}
	bpf_probe_read_kernel(r, offcpu_rec_size, e);
	r->weight_ns = weight;
	r->s.time_ns = time;
	if (gen_check && __sync_fetch_and_add(&e->gen, 0) != gen) {
		bpf_ringbuf_discard(r, 0);
		stat_inc(CPA_BPF_STAT_OFFCPU_TORN);
		return;
	}
	bpf_ringbuf_submit(r, flags);
}

static __always_inline bool offcpu_len_ok(__u64 len)
{
	return len >= offcpu_min_ns && (!offcpu_max_ns || len <= offcpu_max_ns);
}

/* Where a task blocks: its user ip/sp/bp (the key's hash) and the words
 * above sp, among which the return addresses tell two callers apart that
 * reach one ip with one sp and bp. Per CPU: too big for the BPF stack. */
struct offcpu_place {
	__u64 ip, sp, bp;
	__u64 words[CPA_BPF_PLACE_WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct offcpu_place);
} offcpu_place_buf SEC(".maps");

static __always_inline __u64 offcpu_place(struct task_struct *task, char letter,
					  struct offcpu_place *pl)
{
	struct pt_regs *ur = (struct pt_regs *)bpf_task_pt_regs(task);
	__u64 h = 0xcbf29ce484222325ull ^ (__u64)letter;

	pl->ip = BPF_CORE_READ(ur, ip);
	pl->sp = BPF_CORE_READ(ur, sp);
	pl->bp = BPF_CORE_READ(ur, bp);
	if (kernel_only) {
		__builtin_memset(pl->words, 0, sizeof(pl->words));
	} else if (bpf_probe_read_user(pl->words, sizeof(pl->words), (const void *)pl->sp) < 0) {
		/* A failed read zeroes its buffer. The stack's last page: the
		 * words up to its end. */
		__u32 n = 4096 - (pl->sp & 4095);

		if (n < sizeof(pl->words))
			bpf_probe_read_user(pl->words, n, (const void *)pl->sp);
	}
	h = (h ^ pl->ip) * 0x100000001b3ull;
	h = (h ^ pl->sp) * 0x100000001b3ull;
	h = (h ^ pl->bp) * 0x100000001b3ull;
	return h;
}

/*
 * Whether a stack word is a return address: a user address (not a small
 * integer, not a pointer into this stack) just after a call instruction
 * (x86-64: e8 rel32, or ff /2 of 2 to 7 bytes: call *reg, *(mem), *disp(mem),
 * *rip+disp32, *table(,idx,8)). Reads 8 bytes of code, so it runs only when
 * an entry's stack is built; a data word that passes by chance (under 1 %)
 * costs a rebuild when it changes, never a wrong stack. A global function:
 * the verifier checks it once, not once per word and path.
 */
__noinline int ret_addr_like(__u64 v, __u64 sp)
{
	__u8 b[8];

	if (v < (1ull << 32) || v >= USER_ADDR_END || v - (sp - FP_MAX_SPAN) < 2 * FP_MAX_SPAN)
		return 0;
	if (bpf_probe_read_user(b, sizeof(b), (const void *)(v - 8)))
		return 0;
	if (b[3] == 0xe8)
		return 1;
	for (int k = 2; k <= 7; k++)
		if (b[8 - k] == 0xff && ((b[9 - k] >> 3) & 7) == 2)
			return 1;
	return 0;
}

static __always_inline __u32 offcpu_place_mask(const struct offcpu_place *pl)
{
	__u32 mask = 0;

	for (int i = 0; i < CPA_BPF_PLACE_WORDS; i++)
		if (ret_addr_like(pl->words[i], pl->sp))
			mask |= 1u << i;
	return mask;
}

/* The key of a second place at one ip/sp/bp (offcpu_block()). */
static __always_inline __u64 offcpu_place_alt(__u64 h, __u32 mask, const struct offcpu_place *pl)
{
	h = (h ^ 0x9e3779b97f4a7c15ull) * 0x100000001b3ull;
	for (int i = 0; i < CPA_BPF_PLACE_WORDS; i++)
		if (mask & (1u << i))
			h = (h ^ pl->words[i]) * 0x100000001b3ull;
	return h;
}

static __always_inline bool offcpu_same_place(const struct cpa_bpf_offcpu *e, char letter,
					      const struct offcpu_place *pl)
{
	if (e->type != CPA_BPF_REC_OFFCPU || e->state != letter || e->s.regs.ip != pl->ip ||
	    e->s.regs.sp != pl->sp || e->s.regs.bp != pl->bp)
		return false;
	for (int i = 0; i < CPA_BPF_PLACE_WORDS; i++)
		if ((e->place_mask & (1u << i)) && e->place[i] != pl->words[i])
			return false;
	return true;
}

static __always_inline void offcpu_block(void *ctx, struct task_struct *prev, bool preempt,
					 unsigned int prev_state)
{
	__u64 id = bpf_get_current_pid_tgid(), p, now, *cur;
	__u32 tgid = id >> 32, tid = (__u32)id, zkey = 0;
	struct offcpu_key key = {.tid = tid};
	struct offcpu_place *pl;
	struct cpa_bpf_offcpu *e;
	char comm[CPA_BPF_COMM_LEN];
	char letter = 0;
	void *zero;

	if (tid == 0 || (prev->flags & PF_KTHREAD))
		return;
	if (prev_state & TASK_DEAD) {
		/* Its stash entries go at the next flush that finds them idle. */
		bpf_map_delete_elem(&offcpu_cur, &tid);
		return;
	}
	if (!(offcpu_state(preempt, prev_state, &letter) & offcpu_states))
		return;
	if (target_tgid && tgid != target_tgid)
		return;
	if (offcpu_gated && !policy_has(tgid, CPA_BPF_POLICY_OFFCPU))
		return;
	if (filter_comm) {
		bpf_get_current_comm(comm, sizeof(comm));
		if (!comm_wanted(prev, comm))
			return;
	}

	pl = bpf_map_lookup_elem(&offcpu_place_buf, &zkey);
	if (!pl)
		return;
	key.place = offcpu_place(prev, letter, pl);
	e = bpf_map_lookup_elem(&offcpu_stash, &key);
	if (e && !offcpu_same_place(e, letter, pl)) {
		/* Another caller reaching this ip with this sp and bp: its own
		 * entry, keyed by its words where the first one's return
		 * addresses are (two callers alternating must not rebuild). */
		key.place = offcpu_place_alt(key.place, e->place_mask, pl);
		e = bpf_map_lookup_elem(&offcpu_stash, &key);
	}
	if (!e) {
		zero = bpf_map_lookup_elem(&offcpu_zero, &zkey);
		if (!zero)
			return;
		bpf_map_update_elem(&offcpu_stash, &key, zero, BPF_NOEXIST);
		e = bpf_map_lookup_elem(&offcpu_stash, &key);
		if (!e) {
			stat_inc(CPA_BPF_STAT_OFFCPU_NOSTASH);
			return;
		}
	}
	now = bpf_ktime_get_boot_ns();
	if (!offcpu_same_place(e, letter, pl)) {
		/* New entry, or another place with the same hash: what the old
		 * one gathered goes out before it is overwritten. */
		p = __sync_lock_test_and_set(&e->pending_ns, 0);
		if (p)
			offcpu_emit(e, p, now, false, 0, submit_flags());
		stat_inc(CPA_BPF_STAT_OFFCPU_BUILD);
		/* Odd gen while rewriting: a flush copying meanwhile drops its copy. */
		__sync_fetch_and_add(&e->gen, 1);
		e->type = CPA_BPF_REC_OFFCPU;
		e->state = letter;
		e->s.type = CPA_BPF_REC_SAMPLE;
		bpf_get_current_comm(comm, sizeof(comm));
		fill_sample(ctx, &e->s, NULL, sample_want(prev, NULL, false, tgid, tid), prev, NULL,
			    false, OFFCPU_KSKIP, tgid, tid, comm, CPA_BPF_KIND_OFFCPU, 0);
		__builtin_memcpy(e->place, pl->words, sizeof(pl->words));
		e->place_mask = offcpu_place_mask(pl);
		e->uses = 0;
		__sync_fetch_and_add(&e->gen, 1);
	}
	e->start_ns = now;
	e->idle = 0;
	if (e->uses < 2)
		e->uses++;
	/* Published last: from here on the thread counts as blocked. */
	__sync_lock_test_and_set(&e->acct_ns, now);
	cur = bpf_map_lookup_elem(&offcpu_cur, &tid);
	if (cur && *cur != key.place) {
		/* A thread blocks at one place at a time: one still marked
		 * blocked elsewhere missed its wake-up; it must not be flushed. */
		struct offcpu_key old = {.tid = tid, .place = *cur};
		struct cpa_bpf_offcpu *o = bpf_map_lookup_elem(&offcpu_stash, &old);

		if (o && __sync_lock_test_and_set(&o->acct_ns, 0))
			stat_inc(CPA_BPF_STAT_OFFCPU_TORN);
	}
	if (cur)
		*cur = key.place; /* a hash update costs more than this lookup */
	else
		bpf_map_update_elem(&offcpu_cur, &tid, &key.place, BPF_ANY);
}

static __always_inline void offcpu_wake(struct task_struct *next)
{
	struct offcpu_key key = {.tid = next->pid};
	struct cpa_bpf_offcpu *e;
	__u64 from, now, *place;

	if (!key.tid)
		return;
	place = bpf_map_lookup_elem(&offcpu_cur, &key.tid);
	if (!place)
		return;
	key.place = *place;
	e = bpf_map_lookup_elem(&offcpu_stash, &key);
	if (!e)
		return;
	from = __sync_lock_test_and_set(&e->acct_ns, 0);
	if (!from)
		return;
	now = bpf_ktime_get_boot_ns();
	if (now > from && offcpu_len_ok(now - e->start_ns))
		__sync_fetch_and_add(&e->pending_ns, now - from);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(cpa_offcpu_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	offcpu_block(ctx, prev, preempt, prev_state);
	offcpu_wake(next);
	return 0;
}

static long offcpu_flush_one(struct bpf_map *map, struct offcpu_key *key, struct cpa_bpf_offcpu *e,
			     __u64 *now)
{
	__u64 from = e->acct_ns, gen = e->gen, to = *now, w = 0, *cur;

	if (gen & 1)
		return 0; /* being rewritten: its pending ns went out with the old stack */
	if (offcpu_gated && !policy_has(e->s.pid, CPA_BPF_POLICY_OFFCPU)) {
		/* A policy's off-CPU window is over: nothing after it. */
		__sync_lock_test_and_set(&e->acct_ns, 0);
		__sync_lock_test_and_set(&e->pending_ns, 0);
		if (++e->idle >= OFFCPU_IDLE_FLUSHES)
			bpf_map_delete_elem(map, key);
		return 0;
	}
	cur = bpf_map_lookup_elem(&offcpu_cur, &key->tid);
	if (from && (!cur || *cur != key->place)) {
		/* Not where its thread is (or was last) blocked: a missed wake-up. */
		if (__sync_val_compare_and_swap(&e->acct_ns, from, 0) == from)
			stat_inc(CPA_BPF_STAT_OFFCPU_TORN);
		from = 0;
	}
	if (from && to > from && offcpu_len_ok(to - e->start_ns) &&
	    __sync_val_compare_and_swap(&e->acct_ns, from, to) == from)
		w = to - from; /* still blocked: the span so far */
	w += __sync_lock_test_and_set(&e->pending_ns, 0);
	if (!w) {
		/* Idle for OFFCPU_IDLE_FLUSHES seconds: forget the place (its
		 * thread may be gone). Not sooner: a block that looked the entry
		 * up just before the delete would write into a freed element,
		 * which the hash map may hand out again at once. A place used
		 * once (a CPU-bound thread preempted at some ip, a short-lived
		 * process) is unlikely to come back: it goes after a second,
		 * or such places would hold a 38 KiB entry each for ten. */
		if (!from &&
		    ++e->idle >= (e->uses > 1 ? OFFCPU_IDLE_FLUSHES : OFFCPU_IDLE_ONE_SHOT))
			bpf_map_delete_elem(map, key);
		return 0;
	}
	/* Rewritten while we copied (a hash collision): torn, dropped (counted). */
	offcpu_emit(e, w, to, true, gen, 0);
	return 0;
}

/* Not attached: capture runs it (BPF_PROG_TEST_RUN) every wall-clock second and at stop. */
SEC("raw_tp")
int cpa_offcpu_flush(void *ctx)
{
	__u64 now = bpf_ktime_get_boot_ns();

	/* The entries walked: capture's offcpu_places gauge. */
	return bpf_for_each_map_elem(&offcpu_stash, offcpu_flush_one, &now, 0);
}
