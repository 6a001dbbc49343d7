/* SPDX-License-Identifier: MIT */
/*
 * bench_overhead: what the harness reads from /proc, from BPF and from the
 * arena. Every helper returns 0 (or a count) or -errno and does not log.
 */
#ifndef CPA_BENCH_OVERHEAD_H
#define CPA_BENCH_OVERHEAD_H

#include <stdint.h>
#include <sys/types.h>

#include "shm/arena.h"

/* One process at one instant. */
struct ovh_proc {
	uint64_t cpu_ns;	 /* sum of /proc/PID/task/<tid>/schedstat run time */
	uint64_t utime, stime;	 /* /proc/PID/stat, clock ticks (all threads, dead ones too) */
	uint64_t vcsw, ivcsw;	 /* voluntary / involuntary context switches, all threads */
	uint64_t rss_kb, pss_kb; /* smaps_rollup (only filled by ovh_proc_mem) */
	uint64_t hwm_kb;	 /* VmHWM: peak RSS */
};

int ovh_proc_read(pid_t pid, struct ovh_proc *ret);
int ovh_proc_mem(pid_t pid, struct ovh_proc *p);

#define OVH_MAX_PROGS 64

/* The BPF programs of one capture process, found through its fdinfo. */
struct ovh_bpf_set {
	uint32_t ids[OVH_MAX_PROGS];
	int n;
};

struct ovh_bpf {
	uint64_t sample_ns, sample_cnt; /* cpa_on_cpu */
	uint64_t all_ns, all_cnt;	/* every cpa program of that capture */
};

/* Program ids held by capture_pid (prog fds and bpf_link fds), those whose
 * name is one of bpf/profile.bpf.c's programs. Returns how many. */
int ovh_bpf_find(pid_t capture_pid, struct ovh_bpf_set *ret);
int ovh_bpf_read(const struct ovh_bpf_set *set, struct ovh_bpf *ret);

/* The memfd "cpa-arena" of monitor pid, attached (validated). */
int ovh_arena_open(pid_t monitor_pid, struct shm_arena **ret);

/* Apparent size of the regular files under dir: *ret the visible ones (the store proper),
 * *ret_hidden the dot files (storer journal) except the monitor pid file. */
int ovh_dir_bytes(const char *dir, uint64_t *ret, uint64_t *ret_hidden);

/* The whole of a store as `cpa show` folded stacks in out (cpa: the executable). */
int ovh_cpa_export(const char *cpa, const char *store, const char *out);

/* Machine-wide busy and total jiffies from /proc/stat. */
int ovh_machine_busy(uint64_t *ret_busy, uint64_t *ret_total);

#endif /* CPA_BENCH_OVERHEAD_H */
