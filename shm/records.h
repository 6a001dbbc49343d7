/* SPDX-License-Identifier: MIT */
/*
 * Records that cross the stage rings. This header is the whole contract
 * between capture, unwindd, symd and storer: fixed-width types, explicit
 * padding, sizes asserted. Variable parts follow the fixed header in the
 * order given; every count is bounds-checked by the reader against the
 * record length (see cpa_rec_*_size() helpers).
 *
 *   capture --(SAMPLE, TASK, LOSS, MAP)--> unwindd
 *   unwindd --(USTACK_HINT)--> capture	(feedback ring: the adaptive stack copy)
 *   unwindd --(DICT_RESET, MODULE, FRAMES, TASK, LOSS)--> symd
 *   symd    --(DICT_RESET, STR, MODULE, FRAME, STACK, SAMPLE_OUT, LOSS)--> storer
 *   capture --(METRICS, EVENT)--> unwindd --> symd --> storer	(forwarded unchanged)
 *   capture --(PYCODE)--> unwindd --> symd	(forwarded unchanged)
 *
 * Sequence numbers: capture gives every SAMPLE/TASK/LOSS/MAP/METRICS/EVENT/PYCODE a seq that grows
 * strictly (generation << 40 | counter, so it also grows across a capture
 * restart). Every later stage keeps the seq of the input record on whatever
 * it derives from it, and publishes the highest seq it has passed on as the
 * ring's consumer mark; after a restart it skips input with seq <= mark.
 * Definition records (DICT_RESET, STR, MODULE, FRAME, STACK) carry no seq:
 * they are idempotent within one dictionary epoch.
 *
 * Ids: a stage that interns things (unwindd: modules; symd: strings, frames,
 * stacks, modules) numbers them from 1 within an epoch and starts every
 * process lifetime with a DICT_RESET carrying a new epoch, after which the
 * consumer forgets every id of that link. Id 0 means "none".
 */
#ifndef CPA_SHM_RECORDS_H
#define CPA_SHM_RECORDS_H

#include <stddef.h>
#include <stdint.h>

enum cpa_rec_type {
	/* 0 is SHM_REC_TYPE_PAD */
	CPA_REC_SAMPLE = 1,  /* capture -> unwindd: struct cpa_sample + stacks */
	CPA_REC_TASK,	     /* exec/exit of a task: struct cpa_task_event */
	CPA_REC_LOSS,	     /* samples lost or degraded upstream: struct cpa_loss */
	CPA_REC_DICT_RESET,  /* struct cpa_dict_reset: forget every id of this link */
	CPA_REC_MODULE,	     /* struct cpa_module_def + path */
	CPA_REC_FRAMES,	     /* unwindd -> symd: struct cpa_frames + pcs + uframes */
	CPA_REC_STR,	     /* symd -> storer: struct cpa_str_def + bytes */
	CPA_REC_FRAME,	     /* symd -> storer: struct cpa_frame_def */
	CPA_REC_STACK,	     /* symd -> storer: struct cpa_stack_def + frame ids */
	CPA_REC_SAMPLE_OUT,  /* symd -> storer: struct cpa_sample_out */
	CPA_REC_USTACK_HINT, /* unwindd -> capture: struct cpa_ustack_hint */
	CPA_REC_MAP,	     /* capture -> unwindd: struct cpa_map_event + path */
	CPA_REC_METRICS,     /* capture -> storer, forwarded as is: struct cpa_metrics + entries */
	CPA_REC_EVENT,	     /* capture -> storer, forwarded as is: struct cpa_policy_event */
	CPA_REC_PYCODE,	     /* capture -> symd, forwarded by unwindd: struct cpa_pycode + bytes */
	CPA_REC_TYPE_MAX,
};

enum cpa_sample_kind {
	CPA_KIND_ONCPU,
	CPA_KIND_OFFCPU, /* weight = blocked nanoseconds */
	CPA_KIND_PROBE,	 /* probe_id says which --probe */
	CPA_KIND_MAX,
};

enum cpa_sample_flag {
	CPA_SF_USER_REGS = 1u << 0,	 /* regs hold the user context */
	CPA_SF_IN_KERNEL = 1u << 1,	 /* the sample interrupted kernel code */
	CPA_SF_USTACK_TRUNC = 1u << 2,	 /* stack copy shorter than asked (clamped) */
	CPA_SF_DEGRADED = 1u << 3,	 /* user stack bytes dropped under pressure */
	CPA_SF_NO_USTACK = 1u << 4,	 /* user stack could not be read at all */
	CPA_SF_KSTACK_ERR = 1u << 5,	 /* kernel stack could not be read */
	CPA_SF_KERNEL_THREAD = 1u << 6,	 /* no user part by nature */
	CPA_SF_UNWIND_PARTIAL = 1u << 7, /* unwindd stopped before the outermost frame */
	/* No user stack inside execve: past its point of no return the old
	 * image's stack went with its address space (CPA_STOP_EXEC). */
	CPA_SF_IN_EXEC = 1u << 8,
	/* No user stack in an exiting task (the mm being torn down, exit_mmap):
	 * CPA_STOP_EXIT. */
	CPA_SF_IN_EXIT = 1u << 9,
};

#define CPA_COMM_LEN	16
#define CPA_MAX_KSTACK	127
#define CPA_MAX_UFRAMES 127 /* the sample's user FP chain (BPF) */
/*
 * User frames of a CFI walk (unwindd): deeper than the FP chain, since an
 * interpreter's recursion (python3's imports: ~4 native frames per Python
 * call) passes 127 native frames. The walk emits at most CPA_MAX_UWALK + 1
 * frames and stops there with CPA_STOP_DEPTH.
 */
#define CPA_MAX_UWALK 255
/* Frames of one stack: kernel, user, a stop marker, an off-CPU state marker. */
#define CPA_MAX_STACK_FRAMES (CPA_MAX_KSTACK + CPA_MAX_UWALK + 1 + 2)
#define CPA_BUILD_ID_MAX     20
#define CPA_MAX_STACK_COPY   65536

/*
 * Every x86-64 general-purpose user register, in DWARF register number order
 * (psABI figure 3.36: rax rdx rcx rbx rsi rdi rbp rsp r8..r15, then the return
 * address column = rip), so an unwinder indexes it by DWARF number. Any CFA or
 * register rule can name any of them (OpenSSL's AES-GCM: CFA = rax + off).
 */
struct cpa_user_regs {
	uint64_t ax, dx, cx, bx, si, di, bp, sp;
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t ip;
};
_Static_assert(sizeof(struct cpa_user_regs) == 136, "user regs");
_Static_assert(offsetof(struct cpa_user_regs, sp) == 7 * 8, "user regs: DWARF order");
_Static_assert(offsetof(struct cpa_user_regs, ip) == 16 * 8, "user regs: DWARF order");

/*
 * CPA_REC_SAMPLE, then:
 *	uint64_t kstack[n_kstack];	kernel return addresses, leaf first
 *	uint64_t ufp[n_ufp];		user FP-chain return addresses, leaf first
 *					(ufp[0] is regs.ip when regs are valid)
 *	uint8_t  stack[stack_len];	user stack bytes copied from stack_sp up
 *	struct cpa_pyframe py[n_py];	a Python process's interpreter frames,
 *					leaf first (docs/unwinding.md, "Python")
 */
struct cpa_sample {
	uint64_t seq;
	uint64_t time_ns; /* CLOCK_REALTIME nanoseconds */
	uint64_t cgroup_id;
	uint64_t weight; /* 1 on-CPU, ns off-CPU, hits for probes */
	uint32_t pid;	 /* tgid */
	uint32_t tid;
	uint32_t cpu;
	uint16_t kind;		  /* enum cpa_sample_kind */
	uint16_t flags;		  /* enum cpa_sample_flag */
	char comm[CPA_COMM_LEN];  /* thread name */
	char pcomm[CPA_COMM_LEN]; /* group leader (process) name */
	struct cpa_user_regs regs;
	uint64_t stack_sp; /* user address of stack[0] */
	uint16_t n_kstack;
	uint16_t n_ufp;
	uint32_t stack_len;
	uint32_t probe_id;
	uint8_t offcpu_state; /* off-CPU: 'R', 'S' or 'D' (state it blocked in); else 0 */
	uint8_t py_minor;     /* 3.<py_minor> interpreter in the process, 0 = not Python */
	uint8_t py_status;    /* enum cpa_py_status, 0 when py_minor is */
	uint8_t n_py;	      /* struct cpa_pyframe after the stack bytes */
};
_Static_assert(sizeof(struct cpa_sample) == 240, "cpa_sample layout");

/*
 * Python frames (capture -> unwindd -> symd): the sampled thread's CPython
 * frame chain as BPF read it, leaf first. symd names them from the code
 * object (/proc/PID/mem) and puts each group (one evaluation: up to and with
 * a frame flagged CPA_PY_ENTRY) in place of one _PyEval_EvalFrameDefault.
 */
#define CPA_MAX_PYFRAMES 64
#define CPA_PY_ENTRY	 1ull /* bit 0 of code: the outermost frame of its evaluation */

struct cpa_pyframe {
	uint64_t code;	/* PyCodeObject * | CPA_PY_ENTRY */
	uint32_t instr; /* 3.11+: prev_instr (3.13: instr_ptr) - code, bytes; 3.10: f_lasti */
	uint32_t check; /* the code object's co_check word at sample time (bpf/profile.h) */
};
_Static_assert(sizeof(struct cpa_pyframe) == 16, "cpa_pyframe layout");

/*
 * CPA_REC_PYCODE (capture -> unwindd -> symd), then char qualname[qualname_len],
 * char filename[filename_len] (no NUL), uint8_t linetab[linetab_len]: a code
 * object of pid as capture read it when it first forwarded a sample with it
 * (once per (pid, code, check) until the process's exit or exec), right before
 * that sample. symd names the sample's frames from it rather than from
 * /proc/PID/mem seconds later, when a short-lived process may be gone or its
 * code objects freed (docs/unwinding.md, "Python").
 */
#define CPA_PYCODE_MAX_LINETAB 8192 /* longer line tables: symd reads them itself */

struct cpa_pycode {
	uint64_t seq;
	uint64_t code; /* PyCodeObject * (no CPA_PY_ENTRY bit) */
	uint32_t pid;
	uint32_t check; /* its co_check word, as a cpa_pyframe's */
	uint32_t firstlineno;
	uint32_t linetab_len;
	uint16_t qualname_len;
	uint16_t filename_len;
	uint8_t py_minor;
	uint8_t pad[3];
};
_Static_assert(sizeof(struct cpa_pycode) == 40, "cpa_pycode layout");

static inline uint64_t cpa_rec_pycode_size(const struct cpa_pycode *c)
{
	return sizeof(*c) + (uint64_t)c->qualname_len + c->filename_len + c->linetab_len;
}

/* Same values as enum cpa_bpf_py_status. */
enum cpa_py_status {
	CPA_PY_OK = 1,	    /* the whole chain */
	CPA_PY_TRUNC,	    /* CPA_MAX_PYFRAMES frames, more beyond */
	CPA_PY_NO_TSTATE,   /* the thread has no Python thread state */
	CPA_PY_READ_FAIL,   /* the interpreter's memory could not be read */
	CPA_PY_NOSYM,	    /* the interpreter has no _PyRuntime symbol */
	CPA_PY_UNSUPPORTED, /* a CPython version without an offsets table */
	CPA_PY_STATUS_MAX,
};

enum cpa_task_event_kind {
	CPA_TASK_EXEC = 1,
	/* The whole process is gone: sent once, by whichever thread left last
	 * (tid is that thread's). Per-pid caches may be dropped after it. */
	CPA_TASK_EXIT,
};

/* CPA_REC_TASK */
struct cpa_task_event {
	uint64_t seq;
	uint64_t time_ns;
	uint32_t pid;
	uint32_t tid;
	uint32_t kind; /* enum cpa_task_event_kind */
	/* EXEC: its mount namespace (the inode of /proc/PID/ns/mnt), 0 when
	 * unknown: where its paths resolve once it is gone (a live process of
	 * that namespace, docs/unwindd.md "Binaries of gone processes") */
	uint32_t mnt_ns;
	char comm[CPA_COMM_LEN];
};
_Static_assert(sizeof(struct cpa_task_event) == 48, "cpa_task_event layout");

enum cpa_map_event_kind {
	CPA_MAP_MMAP = 1, /* an executable mapping appeared (mmap, mprotect +x) */
	CPA_MAP_FORK,	  /* pid was forked from ppid: it starts with ppid's mappings */
	CPA_MAP_EXEC,	  /* pid exec'd: every mapping before time_ns is gone */
};

/*
 * CPA_REC_MAP, then char path[path_len] (no NUL; MMAP only): the address
 * space history of every process, from the kernel's perf mmap2/comm/task
 * events as they happen (docs/capture.md), so that unwindd resolves a
 * sample against the mappings in force at its time_ns even after the
 * process is gone. Only executable mappings are reported. An MMAP that
 * overlaps earlier mappings of pid ends them at time_ns (there is no
 * munmap event: a range is in force until something replaces it, an exec,
 * or the process's exit, CPA_REC_TASK EXIT). FORK is sent for new
 * processes only (not threads); EXEC comes before the new image's MMAPs
 * (the BPF CPA_TASK_EXEC of the same exec comes after them).
 * The file is named by build_id when build_id_len > 0 (the kernel read it
 * at mmap time; dev and ino are 0 then), else by dev and ino.
 */
struct cpa_map_event {
	uint64_t seq;
	uint64_t time_ns; /* CLOCK_REALTIME, the clock of cpa_sample.time_ns */
	uint64_t start;	  /* MMAP: the range [start, start + len) */
	uint64_t len;
	uint64_t pgoff; /* file offset of start, bytes */
	uint64_t ino;
	uint32_t pid;
	uint32_t tid;
	uint32_t ppid; /* FORK: the parent process */
	uint32_t kind; /* enum cpa_map_event_kind */
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t prot;	/* PROT_* */
	uint32_t flags; /* MAP_* */
	uint16_t path_len;
	uint8_t build_id_len;
	uint8_t _pad0[5];
	uint8_t build_id[CPA_BUILD_ID_MAX];
	uint8_t _pad1[4];
};
_Static_assert(sizeof(struct cpa_map_event) == 112, "cpa_map_event layout");

/*
 * CPA_REC_LOSS: count samples of kind were lost for reason at
 * stage around time_ns. reason is an enum shm_counter of that stage
 * (SHM_CNT_DROP_RING_FULL, SHM_CNT_DROP_RATE, CAP_CNT_BPF_RB_LOST, ...).
 * The storer keeps them as "[lost: <stage> <reason>]" stacks. Degraded
 * samples are not losses: they travel on with CPA_SF_DEGRADED set and show
 * up as "[degraded: no user stack]" stacks instead, so nothing counts twice.
 */
struct cpa_loss {
	uint64_t seq;
	uint64_t time_ns;
	uint64_t count;
	uint64_t weight; /* summed weight, when known (off-CPU ns); else = count */
	uint32_t stage;	 /* enum shm_stage_id */
	uint32_t reason; /* counter index of that stage */
	uint32_t kind;
	/* kind PROBE: which probe (0 otherwise). Stages that re-aggregate a
	 * loss they could not forward (shm/loss.h) keep only its count. */
	uint32_t probe_id;
};
_Static_assert(sizeof(struct cpa_loss) == 48, "cpa_loss layout");

/* CPA_REC_DICT_RESET */
struct cpa_dict_reset {
	uint64_t epoch; /* strictly grows per link across restarts */
	/* CPA_RESET_START: the first reset of the sender's life. resume_seq is
	 * the input mark it started from: what it sends with a seq above that
	 * and at or below what the receiver had seen is a batch its
	 * predecessor sent but did not release (shm/dedup.h). */
	uint64_t resume_seq;
	uint32_t flags;
	uint32_t _pad;
};
_Static_assert(sizeof(struct cpa_dict_reset) == 24, "cpa_dict_reset layout");

enum cpa_reset_flags {
	CPA_RESET_START = 1u << 0,
};

enum cpa_module_kind {
	CPA_MOD_FILE = 1, /* an ELF file on disk */
	CPA_MOD_VDSO,	  /* [vdso]: read from the process */
	CPA_MOD_ANON,	  /* JIT / anonymous executable memory */
	CPA_MOD_KERNEL,	  /* [kernel.kallsyms] or a module */
};

/*
 * CPA_REC_MODULE, then char path[path_len] (no NUL).
 * unwindd -> symd: path as the process sees it; symd opens it as
 * /proc/<pid>/map_files/<start>-<end> or /proc/<pid>/root/<path>.
 * symd -> storer: the same record in symd's id space.
 */
struct cpa_module_def {
	uint32_t id;
	uint32_t kind; /* enum cpa_module_kind */
	uint32_t pid;  /* a process that maps it (for /proc/PID/... access) */
	uint32_t path_len;
	uint64_t dev;
	uint64_t ino;
	uint64_t map_start; /* one mapping of it in pid, for map_files/ */
	uint64_t map_end;
	uint8_t build_id_len; /* 0 when the file has none */
	uint8_t _pad0[3];
	uint8_t build_id[CPA_BUILD_ID_MAX];
};
_Static_assert(sizeof(struct cpa_module_def) == 72, "cpa_module_def layout");

enum cpa_uframe_flag {
	CPA_UF_ANON = 1u << 0, /* JIT/anonymous: offset is the absolute pc */
	CPA_UF_VDSO = 1u << 1,
	CPA_UF_SIGNAL = 1u << 2, /* signal trampoline frame */
	CPA_UF_FP = 1u << 3,	 /* recovered through the frame pointer */
	CPA_UF_LEAF = 1u << 4,	 /* the interrupted pc (no -1 adjustment for lookup) */
	/* Looked up in the image an exec had just replaced: a sample inside
	 * execve past its point of no return (CPA_STOP_EXEC). */
	CPA_UF_PRE_EXEC = 1u << 5,
};

struct cpa_uframe {
	uint64_t pc;	 /* absolute address in the process */
	uint64_t offset; /* file offset in the module (pc - start + pgoff) */
	uint32_t module_id;
	uint32_t flags; /* enum cpa_uframe_flag */
};
_Static_assert(sizeof(struct cpa_uframe) == 24, "cpa_uframe layout");

enum cpa_unwind_stop {
	CPA_STOP_NONE, /* not unwound (kernel-only sample) */
	CPA_STOP_END,  /* reached the outermost frame */
	CPA_STOP_NO_MAP,
	CPA_STOP_NO_CFI,
	CPA_STOP_READ, /* needed stack bytes outside the copy */
	CPA_STOP_DEPTH,
	CPA_STOP_ANON, /* JIT/anon region: marker frame */
	CPA_STOP_BAD,  /* nonsense CFA/RA */
	CPA_STOP_FP,   /* frame-pointer chain only (no CFI walk) */
	/* The binary was deleted before unwindd could open it (temporary
	 * build products): its mapping is known, its unwind table is not. */
	CPA_STOP_DELETED,
	/* Taken inside execve after the old image was dropped: the leaf is the
	 * old image's syscall, its callers went with the old address space.
	 * Nothing more exists to unwind: complete, not partial. */
	CPA_STOP_EXEC,
	/* Taken while the process exits, its address space already being torn
	 * down: the leaf is its exit syscall; complete, as CPA_STOP_EXEC. */
	CPA_STOP_EXIT,
	CPA_STOP_MAX,
};

/*
 * CPA_REC_FRAMES, then:
 *	uint64_t kpc[n_kframes];		kernel addresses, leaf first
 *	struct cpa_uframe uframes[n_uframes];	leaf first
 *	struct cpa_pyframe py[n_py];		as the sample's (cpa_sample)
 */
struct cpa_frames {
	uint64_t seq;
	uint64_t time_ns;
	uint64_t cgroup_id;
	uint64_t weight;
	uint32_t pid;
	uint32_t tid;
	uint32_t cpu;
	uint16_t kind;
	uint16_t flags;
	char comm[CPA_COMM_LEN];
	char pcomm[CPA_COMM_LEN];
	uint16_t n_kframes;
	uint16_t n_uframes;
	uint16_t stop_reason; /* enum cpa_unwind_stop */
	uint8_t offcpu_state; /* as cpa_sample.offcpu_state */
	uint8_t py_minor;     /* as cpa_sample's */
	uint32_t probe_id;
	uint8_t py_status; /* as cpa_sample's */
	uint8_t n_py;
	uint16_t _pad1;
};
_Static_assert(sizeof(struct cpa_frames) == 96, "cpa_frames layout");

/* CPA_REC_STR, then char s[len] (no NUL). */
struct cpa_str_def {
	uint32_t id;
	uint32_t len;
};

enum cpa_frame_flag {
	CPA_FF_KERNEL = 1u << 0, /* printed with the _[k] suffix */
	CPA_FF_MARKER = 1u << 1, /* synthetic: [lost: ...], [unwind stopped: ...] */
	CPA_FF_INLINE = 1u << 2,
	CPA_FF_UNSYMBOLIZED = 1u << 3, /* name is 0x<offset> [binary] */
	CPA_FF_PYTHON = 1u << 4, /* a Python function: "qualname (file:line)", offset = line */
};

/* CPA_REC_FRAME */
struct cpa_frame_def {
	uint32_t id;
	uint32_t name_id;   /* STR id of the printed frame */
	uint32_t module_id; /* MODULE id, 0 for kernel/markers */
	uint32_t flags;	    /* enum cpa_frame_flag */
	uint64_t offset;    /* file offset (user) or address (kernel) */
};
_Static_assert(sizeof(struct cpa_frame_def) == 24, "cpa_frame_def layout");

/* CPA_REC_STACK, then uint32_t frame_id[n_frames]: leaf first, kernel frames
 * (n_kframes of them) before user frames. */
struct cpa_stack_def {
	uint32_t id;
	uint16_t n_frames;
	uint16_t n_kframes;
};

/* CPA_REC_SAMPLE_OUT */
struct cpa_sample_out {
	uint64_t seq;
	uint64_t time_ns;
	uint64_t cgroup_id;
	uint64_t weight;
	uint32_t pid;
	uint32_t tid;
	uint32_t cpu;
	uint16_t kind;
	uint16_t flags;
	uint32_t stack_id;
	uint32_t comm_id;  /* STR: thread name */
	uint32_t pcomm_id; /* STR: process name */
	uint32_t env_id;   /* STR: --record_env_name value, 0 = none */
	uint32_t probe_id;
	uint32_t _pad0;
};
_Static_assert(sizeof(struct cpa_sample_out) == 72, "cpa_sample_out layout");

/*
 * CPA_REC_USTACK_HINT (ring SHM_RING_HINT, unwindd -> capture): copy this
 * many user stack bytes per sample of pid from now on (capture clamps it to
 * [CPA_USTACK_HINT_MIN, its cap]; 0 = forget pid: the start size again).
 * No seq: a later hint for the same pid replaces an earlier one, and a lost
 * hint is sent again by the next walk that runs out of bytes.
 */
#define CPA_USTACK_HINT_MIN 1024u
struct cpa_ustack_hint {
	uint32_t pid;
	uint32_t bytes;
	uint64_t time_ns; /* CLOCK_MONOTONIC when unwindd decided */
};
_Static_assert(sizeof(struct cpa_ustack_hint) == 16, "cpa_ustack_hint layout");

/*
 * CPA_REC_METRICS (docs/metrics.md): one second of scheduler and system
 * metrics, then struct cpa_metrics_ent ents[n_ents]. capture sends a second
 * as one or more records with the same time_ns; the first carries the
 * system part (CPA_MF_SYSTEM). unwindd and symd forward it unchanged (its
 * seq rules as a LOSS's); the storer keeps it in the block's metrics section.
 */
#define CPA_METRICS_HIST     40 /* log2 ns buckets: [2^b, 2^(b+1)); 0 holds 0..1 */
#define CPA_METRICS_PER_REC  32 /* entries per record at most */
#define CPA_METRICS_PSI_NONE UINT32_MAX

enum cpa_metrics_flag {
	CPA_MF_SYSTEM = 1u << 0, /* load, /proc/stat, PSI fields are valid */
	CPA_MF_HW = 1u << 1,	 /* hardware counters fields are valid */
	CPA_MF_HW_NA = 1u << 2,	 /* hardware counters not available on this host */
	/* The entries come from the kernel's per-task counters (--sched_metrics
	 * default): no histograms, runq_n = times put on a CPU, the iowait
	 * switches are inside the voluntary ones, CPU rows by a task's last CPU. */
	CPA_MF_COUNTERS = 1u << 3,
	CPA_MF_SCHED_NA = 1u << 4, /* the counters could not be read this second */
	/* The entries come from 1 in N events, each added N times
	 * (--sched_metrics=sampled:N): the fields of full, as estimates. */
	CPA_MF_SAMPLED = 1u << 5,
};

enum cpa_metrics_psi { CPA_PSI_CPU, CPA_PSI_IO, CPA_PSI_MEM, CPA_PSI_MAX };

struct cpa_metrics {
	uint64_t seq;
	uint64_t time_ns;     /* CLOCK_REALTIME: the start of the second covered */
	uint32_t interval_ms; /* length of the interval covered */
	uint16_t n_ents;
	uint16_t flags;		   /* enum cpa_metrics_flag */
	uint32_t load_milli[3];	   /* /proc/loadavg x 1000 */
	uint32_t nr_cpus;	   /* CPUs in /proc/stat */
	uint64_t cpu_busy_ticks;   /* /proc/stat "cpu" deltas, USER_HZ: all but idle+iowait */
	uint64_t cpu_iowait_ticks; /* iowait */
	uint64_t cpu_idle_ticks;   /* idle */
	uint32_t psi_some_us[CPA_PSI_MAX]; /* stall us in the interval; CPA_METRICS_PSI_NONE */
	uint32_t psi_full_us[CPA_PSI_MAX];
	uint64_t hw_cycles, hw_instructions, hw_cache_misses; /* CPA_MF_HW */
	uint32_t dropped;				      /* processes not tracked */
	uint32_t _pad0;
};
_Static_assert(sizeof(struct cpa_metrics) == 120, "cpa_metrics layout");

enum cpa_metrics_kind {
	CPA_MK_PROC = 1, /* id = tgid, comm = process name */
	CPA_MK_CPU,	 /* id = cpu */
	/* id = probe index (--probe), comm = its spec's first 15 bytes;
	 * runq_n = hits (runs of its program, one trap each), oncpu_ns = trap
	 * ns (hits x the trap time calibrated at attach), runq_ns = BPF ns;
	 * the rest 0. Readers that do not know a kind skip its entries. */
	CPA_MK_PROBE,
};

enum cpa_metrics_reason { CPA_MR_PREEMPT, CPA_MR_SLEEP, CPA_MR_IOWAIT, CPA_MR_MAX };

struct cpa_metrics_ent {
	uint32_t id;
	uint16_t kind; /* enum cpa_metrics_kind */
	uint16_t _pad0;
	char comm[CPA_COMM_LEN];
	uint64_t oncpu_ns;
	uint64_t runq_ns; /* summed run-queue latency of runq_n waits */
	uint64_t runq_n;
	uint64_t slices;
	uint64_t switches[CPA_MR_MAX]; /* enum cpa_metrics_reason */
	uint32_t runq_hist[CPA_METRICS_HIST];
	uint32_t slice_hist[CPA_METRICS_HIST];
};
_Static_assert(sizeof(struct cpa_metrics_ent) == 400, "cpa_metrics_ent layout");

/* Size checks for readers: the declared counts fit in len bytes. */
static inline int cpa_rec_sample_ok(const struct cpa_sample *s, uint32_t len)
{
	uint64_t need = sizeof(*s) + 8ull * s->n_kstack + 8ull * s->n_ufp + s->stack_len +
			sizeof(struct cpa_pyframe) * s->n_py;

	return len >= sizeof(*s) && need <= len && s->n_kstack <= CPA_MAX_KSTACK &&
	       s->n_ufp <= CPA_MAX_UFRAMES && s->stack_len <= CPA_MAX_STACK_COPY &&
	       s->n_py <= CPA_MAX_PYFRAMES;
}

static inline int cpa_rec_frames_ok(const struct cpa_frames *f, uint32_t len)
{
	uint64_t need = sizeof(*f) + 8ull * f->n_kframes +
			sizeof(struct cpa_uframe) * f->n_uframes +
			sizeof(struct cpa_pyframe) * f->n_py;

	return len >= sizeof(*f) && need <= len && f->n_kframes <= CPA_MAX_KSTACK &&
	       f->n_uframes <= CPA_MAX_UWALK + 1 && f->n_py <= CPA_MAX_PYFRAMES;
}

static inline int cpa_rec_module_ok(const struct cpa_module_def *m, uint32_t len)
{
	return len >= sizeof(*m) && sizeof(*m) + (uint64_t)m->path_len <= len &&
	       m->build_id_len <= CPA_BUILD_ID_MAX;
}

static inline int cpa_rec_map_ok(const struct cpa_map_event *m, uint32_t len)
{
	return len >= sizeof(*m) && sizeof(*m) + (uint64_t)m->path_len <= len &&
	       m->build_id_len <= CPA_BUILD_ID_MAX;
}

static inline int cpa_rec_str_ok(const struct cpa_str_def *s, uint32_t len)
{
	return len >= sizeof(*s) && sizeof(*s) + (uint64_t)s->len <= len;
}

static inline int cpa_rec_stack_ok(const struct cpa_stack_def *s, uint32_t len)
{
	return len >= sizeof(*s) && sizeof(*s) + 4ull * s->n_frames <= len &&
	       s->n_kframes <= s->n_frames;
}

/*
 * CPA_REC_EVENT (docs/metrics.md "Trigger policies"): a policy fired for a
 * target (kind START: its actions are on until end_ns) or its actions were
 * undone (kind END, time_ns = when). Same seq rules as CPA_REC_METRICS.
 */
#define CPA_POLICY_NAME_LEN 32

enum cpa_policy_event_kind { CPA_PE_START = 1, CPA_PE_END };

struct cpa_policy_event {
	uint64_t seq;
	uint64_t time_ns; /* CLOCK_REALTIME */
	uint64_t end_ns;  /* START: the actions' planned end */
	double threshold;
	double value;  /* START: the item's value in the second that fired */
	uint32_t pid;  /* target process; 0 = system-wide */
	uint16_t kind; /* enum cpa_policy_event_kind */
	uint16_t item; /* enum policy_item (common/policy.h) */
	uint16_t cmp;  /* enum policy_cmp */
	uint16_t _pad0;
	uint32_t actions; /* enum policy_action */
	uint32_t freq;	  /* Hz for the target (action FREQ) */
	uint32_t stack_size;
	char policy[CPA_POLICY_NAME_LEN];
	char comm[CPA_COMM_LEN];
};
_Static_assert(sizeof(struct cpa_policy_event) == 112, "cpa_policy_event layout");

/* The quantile q (0..1) of a CPA_METRICS_HIST log2 histogram in ns,
 * interpolated inside its bucket [2^b, 2^(b+1)); 0 when empty. */
static inline double cpa_metrics_hist_quantile(const uint32_t *h, double q)
{
	uint64_t total = 0, cum = 0;
	double want;
	int b;

	for (b = 0; b < CPA_METRICS_HIST; b++)
		total += h[b];
	if (!total)
		return 0;
	want = q * (double)total;
	for (b = 0; b < CPA_METRICS_HIST; b++) {
		double lo = b ? (double)(1ull << b) : 0, hi = (double)(1ull << (b + 1));

		if (!h[b])
			continue;
		if ((double)(cum + h[b]) >= want)
			return lo + (hi - lo) * (want - (double)cum) / h[b];
		cum += h[b];
	}
	return (double)(1ull << CPA_METRICS_HIST);
}

static inline int cpa_rec_metrics_ok(const struct cpa_metrics *m, uint32_t len)
{
	return len >= sizeof(*m) && m->n_ents <= CPA_METRICS_PER_REC &&
	       sizeof(*m) + sizeof(struct cpa_metrics_ent) * (uint64_t)m->n_ents <= len;
}

#endif /* CPA_SHM_RECORDS_H */
