/* SPDX-License-Identifier: MIT */
/*
 * bench_overhead: what the harness reads from /proc, from BPF and from the
 * arena. Every helper returns 0 (or a count) or -errno and does not log.
 */
#ifndef CPA_BENCH_OVERHEAD_H
#define CPA_BENCH_OVERHEAD_H

#include <stdint.h>
#include <sys/types.h>

#include "common/cost.h"
#include "shm/arena.h"

/* The memfd "cpa-arena" of monitor pid, attached (validated). */
int ovh_arena_open(pid_t monitor_pid, struct shm_arena **ret);

/* Apparent size of the regular files under dir: *ret the visible ones (the store proper),
 * *ret_hidden the dot files (storer journal) except the monitor pid file. */
int ovh_dir_bytes(const char *dir, uint64_t *ret, uint64_t *ret_hidden);

/* The whole of a store as `cpa show` folded stacks in out (cpa: the executable). */
int ovh_cpa_export(const char *cpa, const char *store, const char *out);

#endif /* CPA_BENCH_OVERHEAD_H */
