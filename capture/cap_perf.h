/* SPDX-License-Identifier: MIT */
/*
 * The perf_event-only backend (no BPF) for on-CPU sampling: one cpu-clock
 * event per CPU with an mmap'd ring, samples carrying callchain, user regs
 * and a user stack copy. Each sample is rewritten into the BPF record layout
 * (bpf/profile.h) and handed to the same callback as the BPF backend, so
 * conversion, degradation and loss reporting are shared.
 */
#ifndef CPA_CAPTURE_CAP_PERF_H
#define CPA_CAPTURE_CAP_PERF_H

#include <stdbool.h>
#include <stdint.h>

#include "cap_bpf.h"

struct cap_perf;

struct cap_perf_opts {
	uint32_t target_tgid; /* 0 = all */
	const char *comm;     /* NULL or "" = all */
	uint32_t stack_size;  /* 0 = no user stack copy */
	bool kernel_only;
	bool with_idle;
	uint32_t freq;
};

int cap_perf__open(const struct cap_perf_opts *o, const unsigned int *cpus, unsigned int n,
		   cap_bpf_record_fn fn, void *ctx, struct cap_perf **ret);
/* Sleep up to timeout_ms (woken early past a watermark), then drain every
 * CPU's ring. Returns records handed on, -EINTR, or the callback's error. */
int cap_perf__poll(struct cap_perf *p, int timeout_ms);
/* Stop sampling: no new records after this returns. */
void cap_perf__detach(struct cap_perf *p);
/* Same slots as the BPF statistics map. */
int cap_perf__read_stats(struct cap_perf *p, uint64_t ret[CPA_BPF_STAT_MAX]);
void cap_perf__free(struct cap_perf *p);

#endif /* CPA_CAPTURE_CAP_PERF_H */
