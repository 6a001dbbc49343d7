/* SPDX-License-Identifier: MIT */
/*
 * What cpa costs the host, read from the outside: CPU and memory of a
 * process from /proc, the run time of capture's BPF programs from bpf_stats,
 * the machine's busy share from /proc/stat. `cpa ctl cost` (cpa/ctl.c) and
 * the benches (bench/overhead.c, churn.c, fidelity.c) read through these.
 * Every reader returns 0 (or a count) or -errno and does not log.
 *
 * CPU comes from schedstat (nanoseconds, summed over the live threads)
 * rather than from /proc/PID/stat (10 ms ticks): an idle agent uses a few
 * milliseconds in 20 s, below the tick. stat's utime/stime still give the
 * user/system split.
 */
#ifndef CPA_COMMON_COST_H
#define CPA_COMMON_COST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One process at one instant. */
struct cost_proc {
	uint64_t cpu_ns;	 /* sum of /proc/PID/task/<tid>/schedstat run time */
	uint64_t utime, stime;	 /* /proc/PID/stat, clock ticks (all threads, dead ones too) */
	uint64_t vcsw, ivcsw;	 /* voluntary / involuntary context switches, all threads */
	uint64_t rss_kb, pss_kb; /* smaps_rollup (only filled by cost_proc_mem) */
	uint64_t hwm_kb;	 /* VmHWM: peak RSS */
};

int cost_proc_read(pid_t pid, struct cost_proc *ret);
int cost_proc_mem(pid_t pid, struct cost_proc *p);

#define COST_MAX_PROGS 64

/* The BPF programs of one capture process, found through its fdinfo. */
struct cost_bpf_set {
	uint32_t ids[COST_MAX_PROGS];
	int n;
};

struct cost_bpf {
	uint64_t sample_ns, sample_cnt; /* cpa_on_cpu */
	uint64_t all_ns, all_cnt;	/* every cpa program of that capture */
};

/* Program ids held by capture_pid (prog fds and bpf_link fds), those whose
 * name is one of bpf/profile.bpf.c's programs. Returns how many. */
int cost_bpf_find(pid_t capture_pid, struct cost_bpf_set *ret);
int cost_bpf_read(const struct cost_bpf_set *set, struct cost_bpf *ret);

/* One program's name (in full, from its BTF; NULL: not wanted) and its
 * bpf_stats totals; -ENOENT once it is gone. The totals only grow while
 * run-time statistics are on (kernel.bpf_stats_enabled or a holder of
 * BPF_ENABLE_STATS). */
int cost_bpf_prog(uint32_t id, char *name, size_t name_size, uint64_t *ret_ns, uint64_t *ret_cnt);

/*
 * One --probe of a capture, from its BPF maps (bpf/profile.h "probe_stats",
 * "probe_ctl"): totals since capture attached it, the trap time capture
 * calibrated and what the budget did to it.
 */
#define COST_MAX_PROBES 8

struct cost_probe {
	uint64_t runs;	  /* program runs: one trap each (uprobes) */
	uint64_t run_ns;  /* ns the program ran, measured inside it */
	uint64_t hits;	  /* runs past the pid/comm filters */
	uint64_t skipped; /* hits over the rate limit or the budget's */
	uint64_t trap_ps; /* calibrated trap time per run, ps (0: kernel probe) */
	uint32_t thin_rate;
	uint32_t state; /* enum cpa_bpf_probe_state: attached, thinned, detached, refused, gone */
};

/* The probes of the capture whose programs set holds: -ENOENT when its
 * programs hold no probe maps. */
int cost_probe_read(const struct cost_bpf_set *set, struct cost_probe ret[COST_MAX_PROBES]);

/* Machine-wide busy and total jiffies from /proc/stat. */
int cost_machine_busy(uint64_t *ret_busy, uint64_t *ret_total);

#endif /* CPA_COMMON_COST_H */
