/* SPDX-License-Identifier: MIT */
/*
 * The address-space history of every process, as the kernel tells it: one
 * PERF_COUNT_SW_DUMMY event per CPU with mmap2 (+ build-id), comm (exec) and
 * task (fork) records and an mmap'd ring each. capture drains them before
 * each drain of the sample buffer, so a mapping reaches ring 0 before any
 * sample that ran in it, and emits them as CPA_REC_MAP (shm/records.h). unwindd
 * keeps them as a per-process history with timestamps (docs/unwindd.md), so
 * samples of processes that are gone by then are still resolved.
 */
#ifndef CPA_CAPTURE_CAP_MMAPEV_H
#define CPA_CAPTURE_CAP_MMAPEV_H

#include <stdint.h>

#include "cap_emit.h"

struct cap_mmapev;

/* Open the events on cpus[n] (target_tgid: only that process's events, 0 =
 * all). Logs what failed; -errno. */
int cap_mmapev__open(const unsigned int *cpus, unsigned int n, uint32_t target_tgid,
		     struct cap_emit *emit, struct cap_mmapev **ret);
/* Emit every record pending in the rings, in time order: how many, or
 * -EOVERFLOW from cap_emit__map(). */
int cap_mmapev__drain(struct cap_mmapev *m);
/* Records the kernel dropped (PERF_RECORD_LOST) so far. */
uint64_t cap_mmapev__lost(const struct cap_mmapev *m);
/* Add each ring to epfd (EPOLLIN: half full, its wakeup watermark). */
int cap_mmapev__watch(const struct cap_mmapev *m, int epfd);
/* Tell py (NULL: nobody) of each mapping event before it is emitted. */
struct cap_python;
void cap_mmapev__set_python(struct cap_mmapev *m, struct cap_python *py);
void cap_mmapev__free(struct cap_mmapev *m);

#endif /* CPA_CAPTURE_CAP_MMAPEV_H */
