/* SPDX-License-Identifier: MIT */
/*
 * capture's output side: turn BPF ring buffer records into ring 0 records
 * (shm/records.h), number them, degrade or drop them when ring 0 is full, and
 * report every drop downstream as aggregated CPA_REC_LOSS records.
 *
 * No BPF and no syscalls besides clock_gettime here, so the unit test drives
 * it with hand-made records against a real arena.
 */
#ifndef CPA_CAPTURE_CAP_EMIT_H
#define CPA_CAPTURE_CAP_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/profile.h"
#include "common/timeutil.h"
#include "shm/ring.h"
#include "shm/stage.h"

#define CAP_SEQ_COUNTER_BITS 40
#define CAP_LOSS_INTERVAL_NS NSEC_PER_SEC /* at most one LOSS record per reason per second */
#define CAP_COMMIT_BATCH     256	  /* records per commit inside one long poll batch */
#define CAP_COMMIT_BYTES     (256u << 10) /* ... or bytes (at most a quarter of ring 0) */

/*
 * Poll deadline, adaptive (docs/capture.md): a wakeup costs 135 us of CPU on
 * a busy 2-CPU VM of the kind we run on (a bare nanosleep loop, 250 ms
 * period, schedstat), 220 us on an idle one, so capture sleeps as long as
 * it can, and wakes the pipeline once per batch (shm_ring__flush_sp()).
 *  - While samples flow, the next deadline is the time CAP_POLL_BATCH records
 *    take at the rate just seen, within [CAP_POLL_MIN_MS, CAP_POLL_FLOW_MS]:
 *    up to 1000 Hz on every CPU of a 2-CPU host a batch is a second, and
 *    the poll coincides with the once-a-second tick (one wakeup for both).
 *    Nothing needs it sooner: the mappings come from the kernel's events.
 *  - Polls that find nothing double it up to CAP_POLL_MAX_MS: an idle
 *    capture wakes once a second, for the heartbeat and the stats tick.
 *  - A burst does not wait for the deadline: the BPF side forces a wakeup
 *    once wakeup_bytes are pending.
 * The deadline is also the STOP latency (the command is read after a poll).
 */
#define CAP_POLL_MIN_MS	 20
#define CAP_POLL_FLOW_MS 1000
#define CAP_POLL_MAX_MS	 1000
#define CAP_POLL_BATCH	 2048

/* Boot-time (what BPF stamps) to CLOCK_REALTIME, recomputed every second so
 * that a stepped wall clock is followed within a second. */
struct cap_clock {
	int64_t boot_to_real_ns;
};

void cap_clock__update(struct cap_clock *c);

static inline uint64_t cap_clock__to_real(const struct cap_clock *c, uint64_t boot_ns)
{
	return (uint64_t)((int64_t)boot_ns + c->boot_to_real_ns);
}

/* Why samples were lost; one pending LOSS aggregate per slot. */
enum cap_loss_slot {
	CAP_LOSS_RING_FULL, /* ring 0 full: SHM_CNT_DROP_RING_FULL */
	CAP_LOSS_BPF_RB,    /* BPF ring buffer full: CAP_CNT_BPF_RB_LOST */
	CAP_LOSS_RATE,	    /* over the stage's rate_limit: SHM_CNT_DROP_RATE */
	CAP_LOSS_DIED, /* produced by a killed generation, never delivered: CAP_CNT_LOST_DIED */
	CAP_LOSS_DOWN, /* estimated not taken while no capture ran: CAP_CNT_DOWN_EST */
	/* The same reasons for off-CPU samples (kind OFFCPU, weight = ns). */
	CAP_LOSS_OFF_RING_FULL,
	CAP_LOSS_OFF_BPF_RB,
	CAP_LOSS_OFF_RATE,
	/* kind PROBE, one slot per probe id from each of these: hits over
	 * --probe_rate (CAP_CNT_PROBE_SKIPPED), BPF ring buffer full
	 * (CAP_CNT_BPF_RB_LOST), estimated not taken since --probe_budget
	 * detached the probe (CAP_CNT_PROBE_DETACHED: not produced, so not in
	 * the produced/delivered accounting), and one row per capture for a
	 * probe left out at attach (CAP_CNT_PROBE_REFUSED, not produced either) */
	CAP_LOSS_PROBE_RATE,
	CAP_LOSS_PROBE_RB = CAP_LOSS_PROBE_RATE + CPA_BPF_PROBE_MAX,
	CAP_LOSS_PROBE_DET = CAP_LOSS_PROBE_RB + CPA_BPF_PROBE_MAX,
	CAP_LOSS_PROBE_REF = CAP_LOSS_PROBE_DET + CPA_BPF_PROBE_MAX,
	CAP_LOSS_MAX = CAP_LOSS_PROBE_REF + CPA_BPF_PROBE_MAX,
};

struct cap_loss_pending {
	uint64_t count;
	uint64_t weight;       /* off-CPU: blocked ns lost; on-CPU: = count */
	uint64_t time_ns;      /* CLOCK_REALTIME of the first loss in the aggregate */
	uint64_t last_emit_ns; /* CLOCK_REALTIME of the last LOSS record sent */
};

struct cap_emit {
	struct shm_ring_prod *ring;
	struct shm_stage *st;
	uint64_t seq_hi;   /* generation << CAP_SEQ_COUNTER_BITS */
	uint64_t seq_last; /* counter part of the last seq handed out */
	struct cap_clock clock;
	uint32_t stack_max;  /* stack_size asked for; longer copies are corrupt */
	bool ustack_refused; /* user stacks wanted but refused on this kernel */
	uint32_t batch_recs; /* reserved since the last commit */
	uint64_t batch_bytes;
	uint64_t commit_bytes; /* commit inside a batch past this many bytes */
	struct shm_rate rate;  /* per second of sample time */
	struct cap_loss_pending loss[CAP_LOSS_MAX];
	/* per probe: probe_detached samples x 1e9 not counted yet (a fraction) */
	uint64_t det_carry[CPA_BPF_PROBE_MAX];
	/* On-CPU/probe samples and their losses reserved in ring 0 by this
	 * generation: published with each commit (CAP_CNT_GEN_ACCT_*), so
	 * the next generation knows what a killed one delivered. */
	uint64_t acct;
};

int cap_emit__init(struct cap_emit *e, struct shm_ring_prod *ring, struct shm_stage *st,
		   uint32_t generation, uint32_t stack_max);

/*
 * One record from the BPF ring buffer (struct cpa_bpf_sample or
 * cpa_bpf_task, size bytes). Returns 0 when it was emitted, degraded,
 * dropped or skipped as corrupt (each counted), -EOVERFLOW when the sequence
 * space of this generation is used up (restart needed).
 */
int cap_emit__record(struct cap_emit *e, const void *data, size_t size);

/*
 * One mapping history record (struct cpa_map_event with time_ns still on the
 * boot-time clock, then path_len bytes at path): numbered, its time made
 * CLOCK_REALTIME like the samples'. 0, or -EOVERFLOW as cap_emit__record().
 */
struct cpa_map_event;
int cap_emit__map(struct cap_emit *e, const struct cpa_map_event *m, const char *path);

/*
 * A zeroed record of type and len bytes in ring 0 whose first 8 bytes are a
 * new seq (records that carry one and are made outside this file:
 * CPA_REC_METRICS). A full ring is counted as a drop (no LOSS record: not a
 * sample). -EOVERFLOW when the sequence space is used up.
 */
int cap_emit__reserve_seq(struct cap_emit *e, uint16_t type, uint32_t len, void **ret);

/* Count n samples lost for slot at CLOCK_REALTIME time_ns. */
void cap_emit__loss_add(struct cap_emit *e, enum cap_loss_slot slot, uint64_t n, uint64_t time_ns);
/* The same with the weight those samples had (off-CPU: blocked ns). */
void cap_emit__loss_add_weight(struct cap_emit *e, enum cap_loss_slot slot, uint64_t n,
			       uint64_t weight, uint64_t time_ns);

/*
 * What a probe the budget detached would have recorded per second, from its
 * last window of window_ns before the detach: its hits/s, up to its limit in
 * BPF (limit: thin_rate, else --probe_rate; 0 = none), at least 1 if it had
 * hits. Not the samples it admitted in that window: at a limit of a few per
 * second, the limiter's seconds may put none of them in it.
 */
uint64_t cap_emit__probe_detached_rate(uint64_t hits, uint64_t window_ns, uint32_t limit);

/*
 * The samples detached probe would have taken at rate per second over
 * win_ns (a window after the detach), counted in its [lost: capture
 * probe_detached] aggregate at CLOCK_REALTIME time_ns; the fraction of a
 * sample is carried to the next window. end (capture stops): a fraction
 * left counts as one sample, so a detached probe leaves a row however soon
 * the run ends. Returns the samples counted.
 */
uint64_t cap_emit__probe_detached(struct cap_emit *e, unsigned int probe, uint64_t rate,
				  uint64_t win_ns, bool end, uint64_t time_ns);

/* Samples in the loss aggregates not sent yet. */
uint64_t cap_emit__losses_pending(const struct cap_emit *e);

/*
 * Send pending LOSS aggregates whose last record is at least a second old
 * (all of them with force). Returns how many slots are still pending
 * (ring 0 had no room), 0 when everything went out.
 */
int cap_emit__flush_losses(struct cap_emit *e, uint64_t now_real_ns, bool force);

/*
 * The next poll deadline in ms after a poll that brought n records (< 0: an
 * error or EINTR, counted as none) dt_ns after the previous one, cur_ms
 * being the deadline used.
 */
int cap_poll_next_ms(int cur_ms, int n, uint64_t dt_ns);

/* Publish everything reserved so far (end of each poll batch, and every
 * commit_bytes or CAP_COMMIT_BATCH records inside one), and what it
 * accounts for (CAP_CNT_GEN_ACCT_*). */
void cap_emit__commit(struct cap_emit *e);

/*
 * What the previous generation, which left its gauges in st, delivered to
 * ring 0: GEN_ACCT_NEXT if its last commit was published (ring 0's
 * published position reached GEN_ACCT_HEAD), else GEN_ACCT_DONE.
 * prod_pos: ring 0's published position as a new producer opened it.
 */
uint64_t cap_emit__prev_delivered(const struct shm_stage *st, uint64_t prod_pos);

#endif /* CPA_CAPTURE_CAP_EMIT_H */
