/* SPDX-License-Identifier: MIT */
/*
 * The BPF backend of capture: load bpf/profile.bpf.c, open one cpu-clock
 * perf event per online CPU, attach, and hand every ring buffer record to a
 * callback. libbpf errors are translated here, once, into log lines.
 */
#ifndef CPA_CAPTURE_CAP_BPF_H
#define CPA_CAPTURE_CAP_BPF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/profile.h"
#include "common/probespec.h"

struct cap_bpf;

struct cap_bpf_opts {
	uint32_t target_tgid; /* 0 = all */
	const char *comm;     /* NULL or "" = all */
	uint32_t stack_size;  /* most user stack bytes per sample (the cap); 0 = no copy */
	uint32_t stack_start; /* bytes for a process without a learned size (<= stack_size) */
	bool kernel_only;
	bool with_idle;
	const char *btf_path;  /* NULL or "" = the running kernel's */
	uint32_t ringbuf_size; /* power of two, multiple of the page size */
	uint32_t wakeup_bytes; /* force a wakeup once this much is pending (<= ringbuf_size / 2) */
	/* Off-CPU (sched_switch); docs/capture.md "Off-CPU". */
	bool offcpu;
	bool offcpu_gated;	 /* off-CPU only for policy targets (cap_bpf__policy_target) */
	uint32_t offcpu_states;	 /* enum cpa_bpf_offcpu_state_bit set */
	uint64_t offcpu_min_ns;	 /* blocks shorter than this are not recorded */
	uint64_t offcpu_max_ns;	 /* ... nor longer than this (0 = no limit) */
	uint32_t offcpu_threads; /* (thread, place) pairs tracked at once */
	const struct probe_spec *probes; /* --probe specs, resolved; probe id = index */
	unsigned int nr_probes;		 /* <= CPA_BPF_PROBE_MAX */
	uint32_t probe_rate;		 /* samples/s per probe; 0 = no limit */
	uint32_t probe_budget_ppm;	 /* --probe_budget: millionths of one CPU; 0 = none */
	const char *probe_texts[CPA_BPF_PROBE_MAX]; /* the specs as given, for log lines */
	uint32_t probes_out;  /* ids capture could not resolve: left out, never attached */
	uint32_t probes_gone; /* of probes_out, those whose file is gone (CPA_BPF_PROBE_GONE) */
	/* Trigger policies: probe ids counted per process (probe_rate), and
	 * probe ids attached only by a trigger (attach=: not at start). */
	uint32_t policy_rate_probes, policy_attach_probes;
};

/* Returns 0 to go on, < 0 to stop consuming (that error is returned). */
typedef int (*cap_bpf_record_fn)(void *ctx, const void *data, size_t size);

/* Open, set knobs, load. -E2BIG: the verifier found the programs too complex
 * (a stack_size this kernel cannot take), not logged: the caller says it. */
int cap_bpf__open(const struct cap_bpf_opts *o, cap_bpf_record_fn fn, void *ctx,
		  struct cap_bpf **ret);
/* One cpu-clock event per CPU at freq Hz, the program attached to each,
 * plus the exec/exit tracepoints. */
int cap_bpf__attach(struct cap_bpf *b, const unsigned int *cpus, unsigned int n, uint32_t freq);
/*
 * Attach each probe of the opts with its index as cookie (after
 * cap_bpf__attach). A probe the kernel refuses (an instruction its uprobes
 * cannot take, the file gone, a full uprobe table...) is left out with one
 * warning naming it, its file or function, its offset and the kernel's
 * reason; the others and sampling go on (cap_bpf__probes_refused()).
 */
int cap_bpf__attach_probes(struct cap_bpf *b);
/* The probes left out (bit per id): probes_out and those the kernel refused,
 * at start or when a policy's attach= asked. */
uint32_t cap_bpf__probes_refused(const struct cap_bpf *b);
/* Per-probe hits and skipped hits (enum cpa_bpf_probe_stat), summed over CPUs. */
int cap_bpf__read_probe_stats(struct cap_bpf *b,
			      uint64_t ret[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX]);
/*
 * The probe budget (docs/capture.md "Probe budget"), once a tick: each
 * probe's trap cost (runs x the calibrated trap time) and BPF cost between
 * the totals prev and now, over window_ns. A probe over the budget is
 * thinned (a lower samples/s limit in BPF, its skipped hits still counted);
 * one still over at its floor (its trap alone, or thinned to 1/s) two windows
 * in a row is detached. One log line per decision. Returns the probes
 * detached by this call (bit per id).
 */
uint32_t cap_bpf__probe_budget(struct cap_bpf *b,
			       const uint64_t now[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX],
			       const uint64_t prev[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX],
			       uint64_t window_ns);
/* Samples per second probe id would record had the budget not detached it
 * (0: not detached; cap_emit__probe_detached_rate()): the estimate of what
 * it no longer records ([lost: capture probe_detached]). */
uint64_t cap_bpf__probe_detached_rate(const struct cap_bpf *b, unsigned int id);
/* The calibrated trap time of probe id, picoseconds per run (0: none). */
uint64_t cap_bpf__probe_trap_ps(const struct cap_bpf *b, unsigned int id);
/* Sleep up to timeout_ms for a forced wakeup, then consume what is there.
 * Returns records consumed, -EINTR, or the callback's error. */
int cap_bpf__poll(struct cap_bpf *b, int timeout_ms);
/* Sleep up to timeout_ms until the buffer has a wakeup pending, consuming
 * nothing (cap_bpf__poll(b, 0) does after): 1, 0 on timeout, -EINTR, -errno. */
int cap_bpf__wait(struct cap_bpf *b, int timeout_ms);
/* The epoll fd cap_bpf__wait() sleeps on (readable: a wakeup pending). */
int cap_bpf__epoll_fd(const struct cap_bpf *b);
/* Bytes in the ring buffer not consumed yet (records and their headers;
 * during cap_bpf__poll(), from the record on_record() has on), and its size
 * in *ret_size; the size when it cannot tell. */
uint64_t cap_bpf__rb_unread(const struct cap_bpf *b, uint64_t *ret_size);
/* n > 0: the n-th record the BPF side submits from now wakes cap_bpf__wait()
 * (once); 0: off (the usual wakeups only). */
void cap_bpf__wake_after(struct cap_bpf *b, uint32_t n);
/* Records still to come before that wakeup (0: it came, or off). */
uint64_t cap_bpf__wake_left(const struct cap_bpf *b);
/* Detach everything: no new records after this returns. */
void cap_bpf__detach(struct cap_bpf *b);
/* Emit the blocked time so far of every thread still off-CPU (once a second
 * and at stop). Returns the stash entries (places) it walked, 0 when off-CPU
 * is off. */
int cap_bpf__offcpu_flush(struct cap_bpf *b);

/* Trigger policies (docs/metrics.md). tgid's enum cpa_bpf_policy_flag set
 * (0: none, the entry goes). */
int cap_bpf__policy_target(struct cap_bpf *b, uint32_t tgid, uint32_t flags);
/* Attach (on) or detach a probe of policy_attach_probes; one the kernel
 * refuses is left out as at start (0). */
int cap_bpf__policy_probe(struct cap_bpf *b, unsigned int id, bool on);
/* Take and clear the per-process hits of policy_rate_probes: fn per entry.
 * Returns the entries taken or -errno. */
typedef void (*cap_bpf_hit_fn)(void *ctx, uint32_t tgid, uint32_t probe_id, uint64_t hits);
int cap_bpf__policy_hits(struct cap_bpf *b, cap_bpf_hit_fn fn, void *ctx);
/* cpu-clock events at freq Hz; other processes keep one sample in div (1 = all). */
int cap_bpf__boost(struct cap_bpf *b, uint32_t freq, uint32_t div);
/*
 * Keys 0..n-1 of the array map fd into vals, stride bytes per key (the value
 * size; per-CPU maps: nr_possible 8-byte-rounded values): one batch lookup,
 * per-key lookups where the kernel has no batch. 0 or -errno.
 */
int cap_bpf__array_read(int fd, uint32_t n, void *vals, size_t stride);
/* Keys 0..n-1 of the per-CPU u64 array fd, each summed over nr_possible CPUs. */
int cap_bpf__percpu_sum(int fd, int nr_possible, uint32_t n, uint64_t *ret);
/* Sum of each CPA_BPF_STAT_* slot over all CPUs. */
int cap_bpf__read_stats(struct cap_bpf *b, uint64_t ret[CPA_BPF_STAT_MAX]);
/* Pin the stats map at path (bpffs), so that it outlives this process: the
 * next capture reads what a killed one produced (docs/capture.md). */
int cap_bpf__pin_stats(struct cap_bpf *b, const char *path);
/* The totals of a stats map pinned at path (-ENOENT: none). */
int cap_bpf__read_pinned_stats(const char *path, uint64_t ret[CPA_BPF_STAT_MAX]);
/* Copy bytes of user stack per sample of pid from now on (the BPF side caps
 * it at stack_size); bytes 0 forgets pid (back to stack_start). */
int cap_bpf__ustack_set(struct cap_bpf *b, uint32_t pid, uint32_t bytes);
/* The program's bpf_prog id (for bpftool prog show). */
uint32_t cap_bpf__prog_id(const struct cap_bpf *b);
/* The "py_procs", "py_slots" and "py_execs" maps (bpf/profile.h): cap_python.h writes them. */
int cap_bpf__py_procs_fd(const struct cap_bpf *b);
int cap_bpf__py_slots_fd(const struct cap_bpf *b);
int cap_bpf__py_execs_fd(const struct cap_bpf *b);
void cap_bpf__free(struct cap_bpf *b);

/* Whether the BPF user stack copy runs through bpf_loop() (the kernel has it,
 * 5.17+), which takes any stack_size; else it is unrolled, which the
 * verifier takes up to 32 KiB. CPA_BPF_USTACK_COPY=unrolled forces that. */
bool cap_bpf_copy_loop(void);

/* Ring buffer size for nr_cpus CPUs sampling at freq with stack_size copies,
 * plus a second's budget of nr_probes probes at probe_rate (0 = no limit). */
uint32_t cap_bpf_ringbuf_size(unsigned int nr_cpus, uint32_t freq, uint32_t stack_size,
			      unsigned int nr_probes, uint64_t probe_rate);

#endif /* CPA_CAPTURE_CAP_BPF_H */
