/* SPDX-License-Identifier: (MIT OR GPL-2.0) */
/*
 * The BPF <-> capture contract: the records profile.bpf.c puts in its BPF ring
 * buffer and the statistics it keeps. Included by BPF C (after vmlinux.h) and
 * by user C. Fixed-width types only, explicit padding, sizes asserted.
 *
 * One BPF ring buffer carries two record types, told apart by the first u32:
 *
 *   struct cpa_bpf_sample  (CPA_BPF_REC_SAMPLE), variable size (rec_mode):
 *	+0	header (type, flags, time, ids, lengths, kind, probe, comms)
 *	+88	struct cpa_bpf_regs regs	the user pt_regs, all 168 bytes
 *	+256	u64 kstack[CPA_BPF_MAX_KSTACK]	kernel return addresses, leaf first
 *	+1272	u64 ufp[CPA_BPF_MAX_UFP]	user frame-pointer chain, leaf first
 *	+2288	u32 py_n, u16 py_ver, u16 py_status	the Python frames (below)
 *	+2296	u8  stack[]			user stack bytes from regs.sp up
 *	+2296 + stack_len  struct cpa_bpf_pyframe py[py_n]	a Python process's frames
 *
 *   The record is at least 2296 + stack_len bytes (the ring buffer's record
 *   size says how long): DYNPTR reserves 2288 + want + one page of slack (the
 *   copy writes through one-page slices: a slice's length must be a
 *   constant), SCRATCH outputs exactly 2288 + stack_len, FIXED reserves
 *   cpa_bpf_sample_size(stack_size) (the page of slack there because the
 *   first chunk ends at the page boundary above sp and the verifier bounds
 *   offset and length separately). Only kstack_len/ufp_len/stack_len bytes
 *   of each area are meaningful.
 *
 *   struct cpa_bpf_task (CPA_BPF_REC_TASK): exec, or exit of a thread group.
 */
#ifndef CPA_BPF_PROFILE_H
#define CPA_BPF_PROFILE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define CPA_BPF_COMM_LEN   16
#define CPA_BPF_MAX_KSTACK 127
#define CPA_BPF_MAX_UFP	   127
#define CPA_BPF_PAGE	   4096
#define CPA_BPF_MAX_STACK  65536 /* largest stack_size knob */
/*
 * Map ustack_size: an ARRAY of CPA_BPF_USTACK_SLOTS u64 slots, slot
 * tgid % CPA_BPF_USTACK_SLOTS = (u64)bytes << 32 | tgid, 0 = empty. An array
 * lookup is inlined by the verifier (one load, no helper call, no hashing):
 * at low sampling rates every run starts cache-cold and each line costs. Two
 * processes on one slot: the last hint wins, the other copies stack_start.
 */
#define CPA_BPF_USTACK_SLOTS 32768
#define CPA_BPF_PROBE_MAX    8 /* --probe specs (CPA_PROBE_MAX) */

/* Trigger policies (docs/metrics.md): map "policy_targets", tgid -> these
 * flags, written by capture while a policy's actions are on. */
#define CPA_BPF_POLICY_TARGETS 256
enum cpa_bpf_policy_flag {
	CPA_BPF_POLICY_BOOST = 1u << 0,	 /* sampled at the raised rate */
	CPA_BPF_POLICY_OFFCPU = 1u << 1, /* off-CPU recorded (with offcpu_gated) */
};
/* Flag of a probe a policy attached for this target (attach=): its hits are
 * kept for the targets that have it, the probe being in policy_attach_probes. */
#define CPA_BPF_POLICY_PROBE(id) (1u << (8 + (id)))
/* Map "policy_hits": hits per (process, probe) of the probes in
 * policy_rate_probes (item probe_rate), taken and cleared by capture each second. */
#define CPA_BPF_POLICY_HITS 4096
struct cpa_bpf_policy_hit {
	__u32 tgid;
	__u32 probe_id;
};

/*
 * How a sample gets into the ring buffer (knob rec_mode, chosen by capture):
 * DYNPTR (kernel >= 5.19, bpf_ringbuf_reserve_dynptr) reserves what the copy
 * needs and writes once; SCRATCH (any kernel) builds the sample in a per-CPU
 * array slot and bpf_ringbuf_output()s its used length (a second copy);
 * FIXED reserves every record at the cap (the pre-issue-10 way, for
 * comparison).
 */
enum cpa_bpf_rec_mode {
	CPA_BPF_REC_FIXED = 0,
	CPA_BPF_REC_DYNPTR = 1,
	CPA_BPF_REC_SCRATCH = 2,
};

enum cpa_bpf_rec_type {
	CPA_BPF_REC_SAMPLE = 1,
	CPA_BPF_REC_TASK = 2,
	CPA_BPF_REC_OFFCPU = 3,
};

/*
 * Python (docs/unwinding.md, "Python"): map "py_procs", tgid -> struct
 * cpa_bpf_py_proc, written by capture (cap_python.c) for each process that
 * maps a CPython 3.10-3.13 interpreter. For those the on-CPU and probe
 * samples carry the thread's interpreter frame chain after the stack bytes,
 * leaf first, at most CPA_BPF_MAX_PYFRAMES: per frame the code object's
 * address and its instruction pointer (3.10: f_lasti), read at sample time.
 * The Python area is reserved only for a Python process's samples (dynptr)
 * or in the fixed size of the others (CPA_BPF_PY_AREA in cpa_bpf_oncpu_size()).
 */
#define CPA_BPF_PY_PROCS 8192
/* Map "py_slots": ARRAY of u32, slot tgid % CPA_BPF_PY_SLOTS = tgid when
 * tgid has a py_procs entry, else anything else. Every sample looks here
 * first (an inlined array load, as ustack_size): a hash lookup on a cold
 * cache is what a non-Python sample must not pay. Two Python processes on
 * one slot: the last one registered gets its frames. */
#define CPA_BPF_PY_SLOTS 32768
/* Map "py_execs": HASH (kernel dev, inode) of an interpreter executable
 * capture resolved -> its py_procs entry with runtime = _PyRuntime's
 * distance from mm->start_code. The exec program enters a new process of a
 * known interpreter into py_procs and py_slots itself: its frames from its
 * first sample, not from when capture reads its mapping events. */
#define CPA_BPF_PY_EXECS 64
struct cpa_bpf_py_exec {
	__u64 ino;
	__u32 dev; /* the kernel's dev_t: major << 20 | minor */
	__u32 _pad0;
};
#define CPA_BPF_MAX_PYFRAMES 64
#define CPA_BPF_PY_THREADS   16	    /* thread states searched for the sampled thread's */
#define CPA_BPF_PY_NONE	     0xffff /* an offset the version does not have */
#define CPA_BPF_PY_READ	     128    /* bytes of a frame read at once: every field below */

/* Bit 0 of cpa_bpf_pyframe.code: the frame a C call entered the interpreter
 * with (3.11 is_entry; 3.12+: the frame under a C-stack shim; 3.10: every
 * frame), i.e. the outermost frame of one _PyEval_EvalFrameDefault. */
#define CPA_BPF_PY_ENTRY 1ull

struct cpa_bpf_pyframe {
	__u64 code;  /* PyCodeObject * | CPA_BPF_PY_ENTRY */
	__u32 instr; /* 3.11+: prev_instr (3.13: instr_ptr) - code, bytes; 3.10: f_lasti */
	/* The code object's u64 at co_check folded to 32 bits, read with the
	 * frame: symd names the code object it reads later only if it still
	 * matches (a freed code object's memory may hold another by then). */
	__u32 check;
};

enum cpa_bpf_py_entry_mode {
	CPA_BPF_PY_ENTRY_ALL = 0,    /* 3.10: one frame per evaluation */
	CPA_BPF_PY_ENTRY_FLAG = 1,   /* 3.11: the byte at fr_entry */
	CPA_BPF_PY_ENTRY_CSTACK = 2, /* 3.12+: a frame whose owner byte is 3 is a shim */
};

/* cpa_bpf_sample.py_status (and cpa_bpf_py_proc.status): what the walk got. */
enum cpa_bpf_py_status {
	/* cpa_bpf_py_proc.status only, never a sample's: a python file the exec
	 * program entered without an interpreter address (a launcher whose
	 * libpython maps next, or one capture has not resolved yet); its first
	 * sample wakes capture, which completes the entry from its mappings. */
	CPA_BPF_PY_PENDING = 0,
	CPA_BPF_PY_OK = 1,	/* the whole chain, to its NULL end */
	CPA_BPF_PY_TRUNC,	/* CPA_BPF_MAX_PYFRAMES frames, more beyond */
	CPA_BPF_PY_NO_TSTATE,	/* the thread has no thread state (not a Python thread) */
	CPA_BPF_PY_READ_FAIL,	/* a read of the interpreter's memory failed */
	CPA_BPF_PY_NOSYM,	/* capture: no _PyRuntime symbol in the interpreter */
	CPA_BPF_PY_UNSUPPORTED, /* capture: a version without an offsets table */
	CPA_BPF_PY_STATUS_MAX,
};

/* Where a process's interpreter keeps what the walk reads (offsets in
 * bytes; CPA_BPF_PY_NONE = not in this version). */
struct cpa_bpf_py_proc {
	__u64 runtime;		 /* address of _PyRuntime in the process */
	__u16 version;		 /* 0x030b = 3.11 */
	__u16 status;		 /* CPA_BPF_PY_OK, or NOSYM / UNSUPPORTED: no walk */
	__u16 rt_tstate_current; /* _PyRuntime.gilstate.tstate_current (3.10, 3.11) */
	__u16 rt_interp_head;	 /* _PyRuntime.interpreters.head */
	__u16 is_tstate_head;	 /* PyInterpreterState.threads.head (3.10: tstate_head) */
	__u16 ts_next;
	__u16 ts_thread_id; /* pthread_self() of the thread: its fsbase (x86-64 glibc) */
	__u16 ts_frame;	    /* tstate -> cframe (3.11, 3.12), current_frame (3.13), frame (3.10) */
	__u16 cf_frame;	    /* cframe -> current_frame (3.11, 3.12), else NONE */
	__u16 fr_previous;  /* frame -> previous (3.10: f_back) */
	__u16 fr_code;	    /* f_code (3.13: f_executable) */
	__u16 fr_instr;	    /* prev_instr / instr_ptr / f_lasti */
	__u16 fr_entry;	    /* is_entry (3.11) */
	__u16 fr_owner;	    /* owner (3.12+) */
	__u16 entry_mode;   /* enum cpa_bpf_py_entry_mode */
	__u16 co_check;	    /* PyCodeObject: co_firstlineno and the int after it */
	/* 0 until the process's first sample with Python frames (a pending
	 * entry's: its first sample): the sampler sets it and submits that
	 * sample with a forced wakeup, so capture reads its code objects (its
	 * mappings) while it runs (docs/capture.md, "Python"). Capture enters
	 * a process with 0 and keeps the value an OK entry has. */
	__u16 woke;
	__u16 _pad0[3];
};

/* Sample flags the BPF side sets; same bit values as enum cpa_sample_flag. */
enum cpa_bpf_sample_flag {
	CPA_BPF_F_USER_REGS = 1u << 0,	   /* regs hold the user context */
	CPA_BPF_F_IN_KERNEL = 1u << 1,	   /* the sample interrupted kernel code */
	CPA_BPF_F_USTACK_TRUNC = 1u << 2,  /* a page failed before stack_size bytes */
	CPA_BPF_F_NO_USTACK = 1u << 4,	   /* no user stack byte could be read (or refused) */
	CPA_BPF_F_KERNEL_THREAD = 1u << 6, /* no user part by nature */
	CPA_BPF_F_IN_EXEC = 1u << 8,	   /* NO_USTACK inside execve (task->in_execve) */
	CPA_BPF_F_IN_EXIT = 1u << 9,	   /* NO_USTACK in an exiting task (PF_EXITING) */
};

enum cpa_bpf_task_kind {
	CPA_BPF_TASK_EXEC = 1,
	CPA_BPF_TASK_EXIT = 2, /* last thread of the group is exiting */
};

/* Per-CPU statistics (BPF_MAP_TYPE_PERCPU_ARRAY "stats", one u64 per slot). */
enum cpa_bpf_stat {
	CPA_BPF_STAT_RB_LOST,	     /* sample not recorded: ring buffer full */
	CPA_BPF_STAT_TASK_LOST,	     /* task event not recorded: ring buffer full */
	CPA_BPF_STAT_FILTERED,	     /* sample dropped by the pid/comm filters */
	CPA_BPF_STAT_NO_USTACK,	     /* user stack copy failed (first page unreadable) */
	CPA_BPF_STAT_USTACK_TRUNC,   /* user stack copy stopped early at an unreadable page */
	CPA_BPF_STAT_OFFCPU_LOST,    /* off-CPU record not recorded: ring buffer full */
	CPA_BPF_STAT_OFFCPU_NOSTASH, /* blocked thread not tracked: stash map full */
	CPA_BPF_STAT_OFFCPU_TORN,    /* partial flush dropped: the thread blocked anew meanwhile */
	CPA_BPF_STAT_PRODUCED,	   /* on-CPU/probe samples past the filters: submitted or RB_LOST */
	CPA_BPF_STAT_OFFCPU_BUILD, /* off-CPU stack built into the stash: a new place */
	CPA_BPF_STAT_MAX,
};

/* What started a sample (cpa_bpf_sample.kind); same values as enum cpa_sample_kind. */
enum cpa_bpf_kind {
	CPA_BPF_KIND_ONCPU = 0,
	CPA_BPF_KIND_OFFCPU = 1, /* the sample inside a cpa_bpf_offcpu record */
	CPA_BPF_KIND_PROBE = 2,
};

/*
 * Per-probe statistics (BPF_MAP_TYPE_PERCPU_ARRAY "probe_stats"), slot
 * probe_id * CPA_BPF_PSTAT_MAX + enum cpa_bpf_probe_stat.
 */
enum cpa_bpf_probe_stat {
	CPA_BPF_PSTAT_HITS,    /* hits that passed the filters */
	CPA_BPF_PSTAT_SKIPPED, /* hits over the probe's rate limit (or the budget's): no sample */
	CPA_BPF_PSTAT_RB_LOST, /* admitted, but the ring buffer was full (not in STAT_RB_LOST) */
	CPA_BPF_PSTAT_RUNS,    /* runs of the probe's program, filtered or not: one trap each */
	CPA_BPF_PSTAT_RUN_NS,  /* ns those runs took (bpf_ktime_get_ns() around the program) */
	CPA_BPF_PSTAT_MAX,
};

/*
 * Map "probe_ctl" (ARRAY, CPA_BPF_PROBE_MAX entries): the probe budget
 * (--probe_budget, docs/capture.md "Probe budget"), written by capture, read
 * by the probe programs (thin_rate) and by `cpa ctl cost` (the rest).
 */
enum cpa_bpf_probe_state {
	CPA_BPF_PROBE_ON = 0,	    /* attached, under budget */
	CPA_BPF_PROBE_THINNED = 1,  /* attached, samples capped at thin_rate */
	CPA_BPF_PROBE_DETACHED = 2, /* detached: over budget even thinned to 1/s */
	CPA_BPF_PROBE_REFUSED =
		3, /* never attached: refused by the kernel, or changed since checked */
	CPA_BPF_PROBE_GONE = 4, /* never attached: its file gone since the monitor checked it */
};

struct cpa_bpf_probe_ctl {
	__u64 trap_ps;	 /* measured trap time per run, picoseconds (0: no trap, kernel probes) */
	__u32 thin_rate; /* samples per second the budget allows; 0 = not thinned */
	__u32 state;	 /* enum cpa_bpf_probe_state */
};

/*
 * The x86-64 user pt_regs verbatim (uapi layout, bpf_user_pt_regs_t): every
 * general-purpose register, so any CFA rule evaluates (OpenSSL's AES-GCM
 * keeps its CFA in rax). Same order as the kernel's so the BPF side fills it
 * with one read; capture reorders it into struct cpa_user_regs.
 */
struct cpa_bpf_regs {
	__u64 r15, r14, r13, r12, bp, bx, r11, r10, r9, r8, ax, cx, dx, si, di, orig_ax, ip, cs,
		flags, sp, ss;
};

struct cpa_bpf_sample {
	__u32 type;    /* CPA_BPF_REC_SAMPLE */
	__u32 flags;   /* enum cpa_bpf_sample_flag */
	__u64 time_ns; /* bpf_ktime_get_boot_ns() */
	__u64 cgroup_id;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 cpu;
	__s32 kstack_len; /* bytes in kstack, or -errno from bpf_get_stack */
	__s32 ufp_len;	  /* bytes in ufp, or -errno */
	__u32 stack_len;  /* bytes in stack */
	__u32 kind;	  /* enum cpa_bpf_kind */
	__u32 probe_id;	  /* index of the --probe spec (kind PROBE) */
	char comm[CPA_BPF_COMM_LEN];
	char pcomm[CPA_BPF_COMM_LEN];
	struct cpa_bpf_regs regs;
	__u64 kstack[CPA_BPF_MAX_KSTACK];
	__u64 ufp[CPA_BPF_MAX_UFP];
	__u32 py_n;	 /* struct cpa_bpf_pyframe after the stack bytes */
	__u16 py_ver;	 /* the process's Python (0x030b), 0 = not a Python process */
	__u16 py_status; /* enum cpa_bpf_py_status, 0 with py_ver 0 */
	__u8 stack[];	 /* stack_size + CPA_BPF_PAGE bytes reserved */
};

struct cpa_bpf_task {
	__u32 type; /* CPA_BPF_REC_TASK */
	__u32 kind; /* enum cpa_bpf_task_kind */
	__u64 time_ns;
	__u32 pid;
	__u32 tid;
	char comm[CPA_BPF_COMM_LEN];
	/* EXEC: the mount namespace it runs in (inode of /proc/PID/ns/mnt,
	 * nsproxy->mnt_ns->ns.inum), 0 when unknown */
	__u32 mnt_ns;
	__u32 _pad0;
};

/*
 * Off-CPU (CPA_BPF_REC_OFFCPU): a header, then the blocked thread's stack as
 * an ordinary sample built at sched_switch when it blocked. The same layout is
 * the value of the "offcpu_stash" map (one per thread and place), from which
 * the record is copied when the thread runs again or at a flush.
 */
#define CPA_BPF_PLACE_WORDS 32 /* stack words above sp a place compares: 256 bytes */

enum cpa_bpf_offcpu_state_bit {
	CPA_BPF_OFFCPU_R = 1u << 0, /* preempted (runnable) */
	CPA_BPF_OFFCPU_S = 1u << 1, /* interruptible sleep */
	CPA_BPF_OFFCPU_D = 1u << 2, /* uninterruptible (I/O) */
};

struct cpa_bpf_offcpu {
	__u32 type;	  /* CPA_BPF_REC_OFFCPU */
	__u32 state;	  /* 'R', 'S' or 'D' */
	__u64 weight_ns;  /* blocked ns this record accounts for (ends at s.time_ns) */
	__u64 acct_ns;	  /* stash: boot ns accounted up to while blocked, 0 = running */
	__u64 gen;	  /* stash: odd while the stack is being rewritten */
	__u64 start_ns;	  /* boot ns the block started */
	__u32 place_mask; /* stash: which place[] words are return addresses (bit i) */
	__u32 idle;	  /* stash: flushes in a row that found nothing to send */
	__u32 uses;	  /* stash: blocks at this place since its stack was built, up to 2 */
	__u32 _pad0;
	__u64 pending_ns; /* stash: ns of ended blocks at this place not yet emitted */
	__u64 place[CPA_BPF_PLACE_WORDS]; /* stash: words above regs.sp when the stack was built */
	struct cpa_bpf_sample s;	  /* s.time_ns = end of the span, s.stack as usual */
};

_Static_assert(sizeof(struct cpa_bpf_regs) == 168, "cpa_bpf_regs layout (pt_regs)");
_Static_assert(__builtin_offsetof(struct cpa_bpf_sample, regs) == 88, "cpa_bpf_sample regs");
_Static_assert(__builtin_offsetof(struct cpa_bpf_sample, kstack) == 256, "cpa_bpf_sample kstack");
_Static_assert(__builtin_offsetof(struct cpa_bpf_sample, ufp) == 1272, "cpa_bpf_sample ufp");
_Static_assert(sizeof(struct cpa_bpf_sample) == 2296, "cpa_bpf_sample fixed part");
_Static_assert(sizeof(struct cpa_bpf_py_proc) == 48, "cpa_bpf_py_proc layout");
_Static_assert(sizeof(struct cpa_bpf_task) == 48, "cpa_bpf_task layout");
_Static_assert(__builtin_offsetof(struct cpa_bpf_offcpu, s) == 320, "cpa_bpf_offcpu layout");

/* Most bytes one sample takes in the BPF ring buffer for a given stack_size. */
static inline __u32 cpa_bpf_sample_size(__u32 stack_size)
{
	return (__u32)sizeof(struct cpa_bpf_sample) + (stack_size ? stack_size + CPA_BPF_PAGE : 0);
}

/* The Python frames' area of an on-CPU or probe sample (after the stack bytes). */
#define CPA_BPF_PY_AREA (CPA_BPF_MAX_PYFRAMES * (__u32)sizeof(struct cpa_bpf_pyframe))

/* Most bytes an on-CPU or probe sample takes: the stack and the Python area. */
static inline __u32 cpa_bpf_oncpu_size(__u32 stack_size)
{
	return cpa_bpf_sample_size(stack_size) + CPA_BPF_PY_AREA;
}

/* Bytes one off-CPU record (and stash entry) takes for a given stack_size. */
static inline __u32 cpa_bpf_offcpu_size(__u32 stack_size)
{
	return (__u32) __builtin_offsetof(struct cpa_bpf_offcpu, s) +
	       cpa_bpf_sample_size(stack_size);
}

#endif /* CPA_BPF_PROFILE_H */
