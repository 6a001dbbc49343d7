// SPDX-License-Identifier: MIT
#include "cap_emit.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "bpf/profile.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/config.h"
#include "shm/counters.h"
#include "shm/records.h"

_Static_assert(CPA_BPF_COMM_LEN == CPA_COMM_LEN, "comm sizes agree");
_Static_assert(CPA_BPF_MAX_KSTACK == CPA_MAX_KSTACK, "kernel stack depth agrees");
_Static_assert(CPA_BPF_MAX_UFP == CPA_MAX_UFRAMES, "user FP depth agrees");
_Static_assert(CPA_BPF_MAX_STACK == CPA_MAX_STACK_COPY, "stack copy limit agrees");
_Static_assert((int)CPA_BPF_F_USER_REGS == (int)CPA_SF_USER_REGS &&
		       (int)CPA_BPF_F_IN_KERNEL == (int)CPA_SF_IN_KERNEL &&
		       (int)CPA_BPF_F_USTACK_TRUNC == (int)CPA_SF_USTACK_TRUNC &&
		       (int)CPA_BPF_F_NO_USTACK == (int)CPA_SF_NO_USTACK &&
		       (int)CPA_BPF_F_KERNEL_THREAD == (int)CPA_SF_KERNEL_THREAD &&
		       (int)CPA_BPF_F_IN_EXEC == (int)CPA_SF_IN_EXEC &&
		       (int)CPA_BPF_F_IN_EXIT == (int)CPA_SF_IN_EXIT,
	       "BPF sample flags are cpa_sample flags");
_Static_assert((int)CPA_BPF_KIND_ONCPU == (int)CPA_KIND_ONCPU &&
		       (int)CPA_BPF_KIND_OFFCPU == (int)CPA_KIND_OFFCPU &&
		       (int)CPA_BPF_KIND_PROBE == (int)CPA_KIND_PROBE,
	       "BPF sample kinds are cpa_sample kinds");
_Static_assert(CPA_BPF_PROBE_MAX == CPA_PROBE_MAX, "probe count agrees");

#define CAP_BPF_FLAGS_MASK                                                    \
	(CPA_BPF_F_USER_REGS | CPA_BPF_F_IN_KERNEL | CPA_BPF_F_USTACK_TRUNC | \
	 CPA_BPF_F_NO_USTACK | CPA_BPF_F_KERNEL_THREAD | CPA_BPF_F_IN_EXEC | CPA_BPF_F_IN_EXIT)

static const unsigned int loss_reason[CAP_LOSS_MAX] = {
	[CAP_LOSS_RING_FULL] = SHM_CNT_DROP_RING_FULL,
	[CAP_LOSS_BPF_RB] = CAP_CNT_BPF_RB_LOST,
	[CAP_LOSS_RATE] = SHM_CNT_DROP_RATE,
	[CAP_LOSS_DIED] = CAP_CNT_LOST_DIED,
	[CAP_LOSS_DOWN] = CAP_CNT_DOWN_EST,
	[CAP_LOSS_OFF_RING_FULL] = SHM_CNT_DROP_RING_FULL,
	[CAP_LOSS_OFF_BPF_RB] = CAP_CNT_BPF_RB_LOST,
	[CAP_LOSS_OFF_RATE] = SHM_CNT_DROP_RATE,
	[CAP_LOSS_PROBE_RATE... CAP_LOSS_PROBE_RB - 1] = CAP_CNT_PROBE_SKIPPED,
	[CAP_LOSS_PROBE_RB... CAP_LOSS_PROBE_DET - 1] = CAP_CNT_BPF_RB_LOST,
	[CAP_LOSS_PROBE_DET... CAP_LOSS_PROBE_REF - 1] = CAP_CNT_PROBE_DETACHED,
	[CAP_LOSS_PROBE_REF... CAP_LOSS_MAX - 1] = CAP_CNT_PROBE_REFUSED,
};

static bool loss_offcpu(unsigned int slot)
{
	return slot >= CAP_LOSS_OFF_RING_FULL && slot <= CAP_LOSS_OFF_RATE;
}

void cap_clock__update(struct cap_clock *c)
{
	/* Sandwich the realtime read between two boot-time reads: the midpoint
	 * is the best estimate of "the same instant" on both clocks. */
	uint64_t b0 = clock_kernel_ns(CLOCK_BOOTTIME);
	uint64_t r = clock_ns(CLOCK_REALTIME);
	uint64_t b1 = clock_kernel_ns(CLOCK_BOOTTIME);

	c->boot_to_real_ns = (int64_t)(r - (b0 + (b1 - b0) / 2));
}

int cap_emit__init(struct cap_emit *e, struct shm_ring_prod *ring, struct shm_stage *st,
		   uint32_t generation, uint32_t stack_max)
{
	if (!ring || !st || stack_max > CPA_MAX_STACK_COPY)
		return -EINVAL;
	memset(e, 0, sizeof(*e));
	e->ring = ring;
	e->st = st;
	e->seq_hi = (uint64_t)generation << CAP_SEQ_COUNTER_BITS;
	e->stack_max = stack_max;
	/* Sliced commits let unwindd start on a big batch while we fill the
	 * rest: a poll's worth of 8 KiB stacks at high rates is more than ring
	 * 0 holds, and the consumer can only free what it was shown. */
	e->commit_bytes = MIN((uint64_t)CAP_COMMIT_BYTES, ring->size / 4);
	cap_clock__update(&e->clock);
	return 0;
}

/* Checked before a reservation, so a record is never reserved without a seq. */
static bool seq_exhausted(const struct cap_emit *e)
{
	/* The counter must not spill into the generation bits: the next
	 * generation (a restart) is what keeps seq growing past this. */
	return e->seq_last + 1 >= (1ull << CAP_SEQ_COUNTER_BITS);
}

static uint64_t seq_next(struct cap_emit *e)
{
	return e->seq_hi | ++e->seq_last;
}

/* Reserve in ring 0; the caller counts a failure. */
static int out_reserve(struct cap_emit *e, uint32_t len, uint16_t type, void **ret)
{
	int r = shm_ring__reserve_sp(e->ring, len, type, ret);

	if (r < 0)
		return r;
	e->batch_recs++;
	e->batch_bytes += len;
	return 0;
}

static void out_maybe_commit(struct cap_emit *e)
{
	/* A long batch (a backlog after a stall) is published in slices so the
	 * consumer can start on it and free space while we go on. */
	if (e->batch_bytes >= e->commit_bytes || e->batch_recs >= CAP_COMMIT_BATCH)
		cap_emit__commit(e);
}

/*
 * The next poll deadline from what the last poll brought: n records over
 * dt_ns since the poll before it (CAP_POLL_* in cap_emit.h say why).
 */
int cap_poll_next_ms(int cur_ms, int n, uint64_t dt_ns)
{
	uint64_t ms;

	if (n <= 0)
		return cur_ms >= CAP_POLL_MAX_MS / 2 ? CAP_POLL_MAX_MS : MAX(cur_ms * 2, 1);
	/* Time CAP_POLL_BATCH records take at this rate. */
	ms = dt_ns * CAP_POLL_BATCH / (uint64_t)n / 1000000;
	if (ms < CAP_POLL_MIN_MS)
		return CAP_POLL_MIN_MS;
	return ms > CAP_POLL_FLOW_MS ? CAP_POLL_FLOW_MS : (int)ms;
}

void cap_emit__commit(struct cap_emit *e)
{
	if (!e->batch_recs)
		return;
	/* A kill between the two gauges is told apart by ring 0's published
	 * position: the commit's seq_cst store orders the gauges before it. */
	shm_stage__cnt_set(e->st, CAP_CNT_GEN_ACCT_NEXT, e->acct);
	shm_stage__cnt_set(e->st, CAP_CNT_GEN_ACCT_HEAD, e->ring->head);
	shm_ring__commit_sp(e->ring);
	shm_stage__cnt_set(e->st, CAP_CNT_GEN_ACCT_DONE, e->acct);
	/* A gap's estimate is carried (capture.c, down_carry()) until committed. */
	shm_stage__cnt_set(e->st, CAP_CNT_DOWN_PENDING, e->loss[CAP_LOSS_DOWN].count);
	shm_stage__cnt_add(e->st, SHM_CNT_OUT, e->batch_recs);
	shm_stage__cnt_add(e->st, SHM_CNT_BYTES_OUT, e->batch_bytes);
	e->batch_recs = 0;
	e->batch_bytes = 0;
}

uint64_t cap_emit__prev_delivered(const struct shm_stage *st, uint64_t prod_pos)
{
	uint64_t head = shm_stage__cnt(st, CAP_CNT_GEN_ACCT_HEAD);

	return shm_stage__cnt(st, head && prod_pos >= head ? CAP_CNT_GEN_ACCT_NEXT
							   : CAP_CNT_GEN_ACCT_DONE);
}

void cap_emit__loss_add_weight(struct cap_emit *e, enum cap_loss_slot slot, uint64_t n,
			       uint64_t weight, uint64_t time_ns)
{
	struct cap_loss_pending *l = &e->loss[slot];

	if (!n)
		return;
	if (!l->count)
		l->time_ns = time_ns;
	l->count += n;
	l->weight += weight;
}

void cap_emit__loss_add(struct cap_emit *e, enum cap_loss_slot slot, uint64_t n, uint64_t time_ns)
{
	cap_emit__loss_add_weight(e, slot, n, n, time_ns);
}

uint64_t cap_emit__probe_detached_rate(uint64_t hits, uint64_t window_ns, uint32_t limit)
{
	double rate = window_ns ? (double)hits * 1e9 / (double)window_ns : 0;

	/* Not what that window admitted: at a limit of a few per second the
	 * limiter's second (bpf_ktime_get_ns()) may put none of them in a
	 * window of about one second, and the estimate would be 0 for good. */
	if (limit && rate > limit)
		return limit;
	return hits ? MAX((uint64_t)(rate + 0.5), 1) : 0;
}

uint64_t cap_emit__probe_detached(struct cap_emit *e, unsigned int probe, uint64_t rate,
				  uint64_t win_ns, bool end, uint64_t time_ns)
{
	uint64_t *carry, d;

	if (probe >= CPA_BPF_PROBE_MAX)
		return 0;
	carry = &e->det_carry[probe];
	/* rate x ns, whole samples out, the fraction carried to the next tick */
	*carry += rate * win_ns;
	d = *carry / NSEC_PER_SEC;
	*carry %= NSEC_PER_SEC;
	if (end && *carry) {
		d++; /* a part of a sample at the stop is one: a detached probe leaves its row */
		*carry = 0;
	}
	cap_emit__loss_add(e, (enum cap_loss_slot)(CAP_LOSS_PROBE_DET + probe), d, time_ns);
	return d;
}

uint64_t cap_emit__losses_pending(const struct cap_emit *e)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < CAP_LOSS_MAX; i++)
		n += e->loss[i].count;
	return n;
}

int cap_emit__flush_losses(struct cap_emit *e, uint64_t now_real_ns, bool force)
{
	int left = 0;

	for (unsigned int i = 0; i < CAP_LOSS_MAX; i++) {
		struct cap_loss_pending *l = &e->loss[i];
		struct cpa_loss *rec;

		if (!l->count)
			continue;
		if (!force && l->last_emit_ns &&
		    now_real_ns - l->last_emit_ns < CAP_LOSS_INTERVAL_NS) {
			left++;
			continue;
		}
		if (seq_exhausted(e))
			return -EOVERFLOW;
		if (out_reserve(e, sizeof(*rec), CPA_REC_LOSS, (void **)&rec) < 0) {
			left++;
			continue;
		}
		*rec = (struct cpa_loss){
			.seq = seq_next(e),
			.time_ns = l->time_ns,
			.count = l->count,
			.weight = l->weight,
			.stage = SHM_STAGE_CAPTURE,
			.reason = loss_reason[i],
			.kind = i >= CAP_LOSS_PROBE_RATE ? CPA_KIND_PROBE
				: loss_offcpu(i)	 ? CPA_KIND_OFFCPU
							 : CPA_KIND_ONCPU,
			.probe_id = i >= CAP_LOSS_PROBE_RATE
					    ? (i - CAP_LOSS_PROBE_RATE) % CPA_BPF_PROBE_MAX
					    : 0,
		};
		if (rec->kind != CPA_KIND_OFFCPU && i != CAP_LOSS_DOWN && i < CAP_LOSS_PROBE_DET)
			e->acct += l->count;
		l->count = 0;
		l->weight = 0;
		l->last_emit_ns = now_real_ns;
	}
	out_maybe_commit(e);
	return left;
}

/* What an off-CPU record adds to its sample (whose kind is OFFCPU); else weight 1. */
struct sample_meta {
	uint8_t state;
	uint64_t weight;
};

static int emit_sample(struct cap_emit *e, const struct cpa_bpf_sample *bs, size_t size,
		       const struct sample_meta *m)
{
	bool off = bs->kind == CPA_BPF_KIND_OFFCPU;
	uint32_t nk = 0, nu = 0, slen = bs->stack_len, len, npy = bs->py_n;
	uint16_t flags = (uint16_t)(bs->flags & CAP_BPF_FLAGS_MASK);
	uint64_t time_ns = cap_clock__to_real(&e->clock, bs->time_ns);
	struct cpa_sample *s;
	uint8_t *p;
	int r;

	/* The kernel wrote it, but it crossed a boundary: check before trusting. */
	if (seq_exhausted(e))
		return -EOVERFLOW;
	if (slen > e->stack_max || npy > CPA_MAX_PYFRAMES ||
	    size < sizeof(*bs) + slen + sizeof(struct cpa_pyframe) * npy ||
	    (bs->kind != CPA_BPF_KIND_ONCPU && bs->kind != CPA_BPF_KIND_PROBE && !off) ||
	    bs->probe_id >= CPA_BPF_PROBE_MAX) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_CORRUPT, 1);
		return 0;
	}
	/* The stage's rate_limit (samples/s, live from `cpa ctl`), per second of sample time. */
	if (!shm_rate__admit(&e->rate, e->st, time_ns)) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_RATE, 1);
		cap_emit__loss_add_weight(e, off ? CAP_LOSS_OFF_RATE : CAP_LOSS_RATE, 1, m->weight,
					  time_ns);
		return 0;
	}
	if (bs->kstack_len > 0)
		nk = MIN((uint32_t)bs->kstack_len / 8, CPA_MAX_KSTACK);
	else if (bs->kstack_len < 0 && (flags & CPA_SF_IN_KERNEL))
		flags |= CPA_SF_KSTACK_ERR;
	if (bs->ufp_len > 0)
		nu = MIN((uint32_t)bs->ufp_len / 8, CPA_MAX_UFRAMES);
	if (e->ustack_refused && (flags & CPA_SF_USER_REGS)) {
		flags |= CPA_SF_NO_USTACK;
		shm_stage__cnt_add(e->st, CAP_CNT_BPF_NO_USTACK, 1);
	}

	len = (uint32_t)sizeof(*s) + 8 * (nk + nu) + (uint32_t)sizeof(struct cpa_pyframe) * npy;
	r = out_reserve(e, len + slen, CPA_REC_SAMPLE, (void **)&s);
	if (r < 0 && slen) {
		/* Nearly full: keep what unwinding cannot live without (kernel
		 * stack, FP chain, registers) and drop the bulky copy. */
		r = out_reserve(e, len, CPA_REC_SAMPLE, (void **)&s);
		if (r == 0) {
			slen = 0;
			flags |= CPA_SF_DEGRADED;
			shm_stage__cnt_add(e->st, SHM_CNT_DEGRADED, 1);
		}
	}
	if (r < 0) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_RING_FULL, 1);
		cap_emit__loss_add_weight(e, off ? CAP_LOSS_OFF_RING_FULL : CAP_LOSS_RING_FULL, 1,
					  m->weight, time_ns);
		return 0;
	}

	memset(s, 0, sizeof(*s));
	s->seq = seq_next(e);
	s->time_ns = time_ns;
	s->cgroup_id = bs->cgroup_id;
	s->weight = m->weight;
	s->offcpu_state = m->state;
	s->pid = bs->pid;
	s->tid = bs->tid;
	s->cpu = bs->cpu;
	s->kind = (uint16_t)bs->kind;
	s->probe_id = bs->probe_id;
	s->flags = flags;
	memcpy(s->comm, bs->comm, CPA_COMM_LEN);
	memcpy(s->pcomm, bs->pcomm, CPA_COMM_LEN);
	s->comm[CPA_COMM_LEN - 1] = '\0';
	s->pcomm[CPA_COMM_LEN - 1] = '\0';
	s->regs = (struct cpa_user_regs){
		.ax = bs->regs.ax,
		.dx = bs->regs.dx,
		.cx = bs->regs.cx,
		.bx = bs->regs.bx,
		.si = bs->regs.si,
		.di = bs->regs.di,
		.bp = bs->regs.bp,
		.sp = bs->regs.sp,
		.r8 = bs->regs.r8,
		.r9 = bs->regs.r9,
		.r10 = bs->regs.r10,
		.r11 = bs->regs.r11,
		.r12 = bs->regs.r12,
		.r13 = bs->regs.r13,
		.r14 = bs->regs.r14,
		.r15 = bs->regs.r15,
		.ip = bs->regs.ip,
	};
	s->stack_sp = bs->regs.sp;
	s->n_kstack = (uint16_t)nk;
	s->n_ufp = (uint16_t)nu;
	s->stack_len = slen;
	s->py_minor = (uint8_t)(bs->py_ver & 0xff);
	s->py_status = bs->py_ver ? (uint8_t)bs->py_status : 0;
	s->n_py = (uint8_t)npy;
	if (!off)
		e->acct++;

	p = (uint8_t *)(s + 1);
	memcpy(p, bs->kstack, 8ull * nk);
	p += 8ull * nk;
	memcpy(p, bs->ufp, 8ull * nu);
	p += 8ull * nu;
	if (slen) {
		memcpy(p, bs->stack, slen);
		shm_stage__cnt_add(e->st, CAP_CNT_USTACK_BYTES, slen);
		p += slen;
	}
	/* The Python frames follow the stack bytes the BPF record had, which
	 * a degraded sample dropped: from there, not from p. */
	memcpy(p, bs->stack + bs->stack_len, sizeof(struct cpa_pyframe) * npy);
	out_maybe_commit(e);
	return 0;
}

/* An off-CPU span: the blocked thread's stack, weighted by the ns it spans. */
static int emit_offcpu(struct cap_emit *e, const struct cpa_bpf_offcpu *bo, size_t size)
{
	const size_t hdr = offsetof(struct cpa_bpf_offcpu, s);
	struct sample_meta m = {.weight = bo->weight_ns};

	if ((bo->state != 'R' && bo->state != 'S' && bo->state != 'D') ||
	    bo->s.kind != CPA_BPF_KIND_OFFCPU) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_CORRUPT, 1);
		return 0;
	}
	m.state = (uint8_t)bo->state;
	shm_stage__cnt_add(e->st, CAP_CNT_OFFCPU, 1);
	shm_stage__cnt_add(e->st, CAP_CNT_OFFCPU_NS, bo->weight_ns);
	return emit_sample(e, &bo->s, size - hdr, &m);
}

static int emit_task(struct cap_emit *e, const struct cpa_bpf_task *bt)
{
	struct cpa_task_event *t;

	if (seq_exhausted(e))
		return -EOVERFLOW;
	if (bt->kind != CPA_BPF_TASK_EXEC && bt->kind != CPA_BPF_TASK_EXIT) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_CORRUPT, 1);
		return 0;
	}
	/* Not a sample: counted as a drop, but no LOSS record (that would
	 * show up as lost samples in the profile). */
	if (out_reserve(e, sizeof(*t), CPA_REC_TASK, (void **)&t) < 0) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_RING_FULL, 1);
		return 0;
	}
	memset(t, 0, sizeof(*t));
	t->seq = seq_next(e);
	t->time_ns = cap_clock__to_real(&e->clock, bt->time_ns);
	t->pid = bt->pid;
	t->tid = bt->tid;
	t->kind = bt->kind == CPA_BPF_TASK_EXEC ? CPA_TASK_EXEC : CPA_TASK_EXIT;
	t->mnt_ns = bt->kind == CPA_BPF_TASK_EXEC ? bt->mnt_ns : 0;
	memcpy(t->comm, bt->comm, CPA_COMM_LEN);
	t->comm[CPA_COMM_LEN - 1] = '\0';
	shm_stage__cnt_add(e->st, CAP_CNT_TASK_EVENTS, 1);
	out_maybe_commit(e);
	return 0;
}

int cap_emit__reserve_seq(struct cap_emit *e, uint16_t type, uint32_t len, void **ret)
{
	int r;

	if (seq_exhausted(e))
		return -EOVERFLOW;
	if (len < sizeof(uint64_t))
		return -EINVAL;
	r = out_reserve(e, len, type, ret);
	if (r < 0) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_RING_FULL, 1);
		return r;
	}
	memset(*ret, 0, len);
	*(uint64_t *)*ret = seq_next(e);
	return 0;
}

int cap_emit__record(struct cap_emit *e, const void *data, size_t size)
{
	uint32_t type;

	shm_stage__cnt_add(e->st, SHM_CNT_IN, 1);
	shm_stage__cnt_add(e->st, SHM_CNT_BYTES_IN, size);
	if (size < sizeof(type)) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_CORRUPT, 1);
		return 0;
	}
	memcpy(&type, data, sizeof(type));
	if (type == CPA_BPF_REC_SAMPLE && size >= sizeof(struct cpa_bpf_sample)) {
		static const struct sample_meta oncpu = {.weight = 1};
		const struct cpa_bpf_sample *bs = data;

		if (bs->kind == CPA_BPF_KIND_OFFCPU) { /* only inside an off-CPU record */
			shm_stage__cnt_add(e->st, SHM_CNT_DROP_CORRUPT, 1);
			return 0;
		}
		shm_stage__cnt_add(e->st, CAP_CNT_SAMPLES, 1);
		return emit_sample(e, data, size, &oncpu);
	}
	if (type == CPA_BPF_REC_OFFCPU && size >= sizeof(struct cpa_bpf_offcpu))
		return emit_offcpu(e, data, size);
	if (type == CPA_BPF_REC_TASK && size >= sizeof(struct cpa_bpf_task))
		return emit_task(e, data);
	shm_stage__cnt_add(e->st, SHM_CNT_DROP_CORRUPT, 1);
	return 0;
}

int cap_emit__map(struct cap_emit *e, const struct cpa_map_event *m, const char *path)
{
	struct cpa_map_event *out;
	uint32_t len = (uint32_t)sizeof(*out) + m->path_len;

	if (seq_exhausted(e))
		return -EOVERFLOW;
	/* Not a sample: counted as a drop, but no LOSS record (as for TASK). */
	if (out_reserve(e, len, CPA_REC_MAP, (void **)&out) < 0) {
		shm_stage__cnt_add(e->st, SHM_CNT_DROP_RING_FULL, 1);
		return 0;
	}
	memcpy(out, m, sizeof(*out));
	memcpy(out + 1, path, m->path_len);
	out->seq = seq_next(e);
	out->time_ns = cap_clock__to_real(&e->clock, m->time_ns);
	shm_stage__cnt_add(e->st, CAP_CNT_MAP_EVENTS, 1);
	out_maybe_commit(e);
	return 0;
}
