/* SPDX-License-Identifier: MIT */
/*
 * Per-second scheduler and system metrics (docs/metrics.md): loads
 * bpf/sched.bpf.c beside the sampler, and once a second reads and clears its
 * maps, reads load average, /proc/stat and PSI, and emits CPA_REC_METRICS
 * records into ring 0.
 */
#ifndef CPA_CAPTURE_CAP_SCHED_H
#define CPA_CAPTURE_CAP_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#include "cap_emit.h"
#include "cap_policy.h"
#include "shm/records.h"

struct cap_sched;

/* Load and attach (btf_path: NULL = the kernel's). exact: the per-event
 * programs (histograms; --sched_metrics=full); else sample >= 2: the sampled
 * programs, 1 in sample events weighted (--sched_metrics=sampled:N); else the
 * task iterator run once a second (docs/metrics.md). Logs what failed. */
int cap_sched__open(const char *btf_path, bool exact, unsigned int sample, struct cap_sched **ret);
/* Once a second: one second of metrics into ring 0 through e, then the
 * trigger policies evaluated on them (pol, NULL = none); extra[n_extra]
 * entries appended (the probes' costs). -EOVERFLOW when the
 * sequence space is used up; other failures are counted. */
int cap_sched__tick(struct cap_sched *s, struct cap_emit *e, uint64_t now_real_ns,
		    struct cap_policy *pol, const struct cpa_metrics_ent *extra,
		    unsigned int n_extra);
/* Entries alone (extra above: the probes' costs, CPA_MK_PROBE) as a second of
 * metrics without the system part, when no scheduler metrics run. */
int cap_sched__emit_ents(struct cap_emit *e, uint64_t time_ns, uint32_t interval_ms,
			 const struct cpa_metrics_ent *ents, unsigned int n);
void cap_sched__free(struct cap_sched *s);

#endif /* CPA_CAPTURE_CAP_SCHED_H */
