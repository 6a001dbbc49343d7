/* SPDX-License-Identifier: MIT */
/*
 * Trigger policies in capture (docs/metrics.md "Trigger policies"): the
 * --policy file evaluated once a second on the scheduler metrics, its
 * actions applied through the BPF maps, every trigger and undo sent down
 * the pipeline as CPA_REC_EVENT.
 */
#ifndef CPA_CAPTURE_CAP_POLICY_H
#define CPA_CAPTURE_CAP_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "cap_bpf.h"
#include "cap_emit.h"
#include "common/policy.h"

struct cap_policy;

/* Parse path again (the monitor checked it before) against the run's
 * --probe specs (probe id = index). Logs what failed. */
int cap_policy__open(const char *path, uint32_t freq_max, const char *const *probes,
		     unsigned int nr_probes, struct cap_policy **ret);
/* Probe ids counted per process (probe_rate), and attached only by
 * triggers (attach=), for the BPF side (struct cap_bpf_opts). */
void cap_policy__probe_masks(const struct cap_policy *p, uint32_t *ret_rate, uint32_t *ret_attach);
/* Some policy turns off-CPU on: the off-CPU programs must be loaded, gated. */
bool cap_policy__wants_offcpu(const struct cap_policy *p);
/* Some policy reads an item only the exact scheduler metrics give (the
 * run-queue P99 needs the per-event histograms): --sched_metrics=full. */
bool cap_policy__wants_sched_exact(const struct cap_policy *p);
/* The BPF backend the actions go through, the base --freq, the stack copy cap. */
void cap_policy__attach(struct cap_policy *p, struct cap_bpf *bpf, uint32_t base_freq,
			uint32_t stack_cap);
/* One second: the processes that ran (their per-process values filled but
 * thread_count, which is read here when a policy wants it) and the load. */
void cap_policy__second(struct cap_policy *p, struct cap_emit *e, uint64_t now_real_ns,
			struct policy_proc *procs, size_t n, double load1);
/* Capture stops: every action undone, an END event each. */
void cap_policy__undo_all(struct cap_policy *p, struct cap_emit *e, uint64_t now_real_ns);
void cap_policy__free(struct cap_policy *p);

#endif /* CPA_CAPTURE_CAP_POLICY_H */
