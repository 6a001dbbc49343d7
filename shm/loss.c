// SPDX-License-Identifier: MIT
/* Pending LOSS aggregates; the behaviour is documented in loss.h. */
#include "loss.h"
#include "arena.h"
#include "stage.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

int shm_loss__add(struct shm_loss_table *t, uint32_t stage, uint32_t reason, uint32_t kind,
		  uint64_t count, uint64_t weight, uint64_t seq, uint64_t time_ns)
{
	struct cpa_loss *l = NULL, *same_reason = NULL;
	int r = 0;

	for (unsigned int i = 0; i < t->n; i++) {
		struct cpa_loss *x = &t->ent[i];

		if (x->stage != stage || x->reason != reason)
			continue;
		same_reason = x;
		if (x->kind == kind) {
			l = x;
			break;
		}
	}
	if (!l && t->n < SHM_LOSS_SLOTS) {
		l = &t->ent[t->n++];
		*l = (struct cpa_loss){.stage = stage, .reason = reason, .kind = kind};
	}
	if (!l) {
		/* Full (never in practice): keep the count, blur the detail. */
		l = same_reason ? same_reason : &t->ent[SHM_LOSS_SLOTS - 1];
		r = -ENOSPC;
	}
	l->count += count;
	l->weight += weight ? weight : count;
	if (seq > l->seq)
		l->seq = seq;
	if (time_ns > l->time_ns)
		l->time_ns = time_ns;
	return r;
}

int shm_loss__flush(struct shm_loss_table *t, shm_loss_emit_fn emit, void *ctx)
{
	unsigned int i, j, sent = 0;
	int r = 0;

	/* Insertion sort by seq: a few entries, and stable. */
	for (i = 1; i < t->n; i++)
		for (j = i; j > 0 && t->ent[j - 1].seq > t->ent[j].seq; j--) {
			struct cpa_loss x = t->ent[j];

			t->ent[j] = t->ent[j - 1];
			t->ent[j - 1] = x;
		}
	for (i = 0; i < t->n; i++) {
		r = emit(ctx, &t->ent[i]);
		if (r < 0)
			break;
		sent++;
	}
	if (sent) {
		memmove(t->ent, t->ent + sent, (t->n - sent) * sizeof(t->ent[0]));
		t->n -= sent;
	}
	return r < 0 ? r : 0;
}

uint64_t shm_loss__count(const struct shm_loss_table *t)
{
	uint64_t n = 0;

	for (unsigned int i = 0; i < t->n; i++)
		n += t->ent[i].count;
	return n;
}

void shm_loss__publish(const struct shm_loss_table *t, struct shm_stage *st, unsigned int gauge_idx)
{
	shm_stage__cnt_set(st, gauge_idx, shm_loss__count(t));
}

uint64_t shm_loss__carry(struct shm_loss_table *t, struct shm_stage *st, unsigned int gauge_idx,
			 uint32_t stage, unsigned int lost_idx, uint64_t seq, uint64_t time_ns)
{
	uint64_t n = shm_stage__cnt(st, gauge_idx);

	if (!n)
		return 0;
	shm_stage__cnt_add(st, lost_idx, n);
	(void)shm_loss__add(t, stage, lost_idx, CPA_KIND_ONCPU, n, n, seq, time_ns);
	return n;
}

/* SAMPLE, FRAMES and SAMPLE_OUT start alike: read through cpa_sample's offsets. */
#define SAME_AT(f)                                                           \
	(offsetof(struct cpa_sample, f) == offsetof(struct cpa_frames, f) && \
	 offsetof(struct cpa_sample, f) == offsetof(struct cpa_sample_out, f))
_Static_assert(SAME_AT(time_ns) && SAME_AT(weight) && SAME_AT(kind), "sample records start alike");
#define SAMPLE_HEAD (offsetof(struct cpa_sample, kind) + sizeof(uint16_t))

static bool rec_is_sample(uint16_t type)
{
	return type == CPA_REC_SAMPLE || type == CPA_REC_FRAMES || type == CPA_REC_SAMPLE_OUT;
}

/* Records that start with their own seq. */
static bool rec_has_seq(uint16_t type)
{
	return rec_is_sample(type) || type == CPA_REC_TASK || type == CPA_REC_LOSS ||
	       type == CPA_REC_MAP || type == CPA_REC_METRICS || type == CPA_REC_EVENT ||
	       type == CPA_REC_PYCODE;
}

/* Walk ring idx's records not released (a private consumer that never
 * releases); with t, fold those with a seq above `above` into it (samples
 * counted in *ret_n, LOSS records' counts in *ret_l). The highest seq seen. */
static uint64_t held_walk(struct shm_arena *a, int idx, uint64_t above, enum shm_stage_id id,
			  unsigned int reason, struct shm_loss_table *t, uint64_t *ret_n,
			  uint64_t *ret_l)
{
	struct shm_ring_cons c;
	struct shm_msg m;
	uint64_t hi = 0;

	if (idx < 0 || shm_arena__open_cons(a, (unsigned int)idx, &c) < 0)
		return 0;
	while (shm_ring__peek_sc(&c, &m) == 0) {
		uint64_t seq;

		if (!rec_has_seq(m.type) || m.len < sizeof(uint64_t))
			continue;
		memcpy(&seq, m.data, sizeof(seq));
		if (seq > hi)
			hi = seq;
		if (!t || seq <= above)
			continue;
		if (rec_is_sample(m.type) && m.len >= SAMPLE_HEAD) {
			const uint8_t *x = m.data;
			uint64_t time_ns, weight;
			uint16_t kind;

			memcpy(&time_ns, x + offsetof(struct cpa_sample, time_ns), sizeof(time_ns));
			memcpy(&weight, x + offsetof(struct cpa_sample, weight), sizeof(weight));
			memcpy(&kind, x + offsetof(struct cpa_sample, kind), sizeof(kind));
			(void)shm_loss__add(t, id, reason, kind, 1, weight, seq, time_ns);
			(*ret_n)++;
		} else if (m.type == CPA_REC_LOSS && m.len >= sizeof(struct cpa_loss)) {
			const struct cpa_loss *l = m.data;

			(void)shm_loss__add(t, l->stage, l->reason, l->kind, l->count, l->weight,
					    seq, l->time_ns);
			(*ret_l) += l->count;
		}
	}
	return hi;
}

static uint64_t ring_mark(struct shm_arena *a, int idx)
{
	struct shm_ring_ctrl *c = idx >= 0 ? shm_arena__ring_mem(a, (unsigned int)idx, NULL) : NULL;

	return c ? __atomic_load_n(&c->cons_mark, __ATOMIC_ACQUIRE) : 0;
}

uint64_t shm_loss__passed(struct shm_arena *a, enum shm_stage_id id)
{
	const struct shm_stage_desc *d = &shm_stages[id];
	uint64_t passed = ring_mark(a, d->ring_in), out;

	out = ring_mark(a, d->ring_out);
	if (out > passed)
		passed = out;
	out = held_walk(a, d->ring_out, 0, id, 0, NULL, NULL, NULL);
	return out > passed ? out : passed;
}

uint64_t shm_loss__held(struct shm_arena *a, enum shm_stage_id id, uint64_t stored,
			struct shm_loss_table *t)
{
	const struct shm_stage_desc *d = &shm_stages[id];
	struct shm_stage *st = shm_arena__stage(a, id);
	uint64_t passed = shm_loss__passed(a, id), samples = 0, losses = 0, pend;

	if (stored > passed)
		passed = stored;
	held_walk(a, d->ring_in, passed, id, d->lost_at_stop, t, &samples, &losses);
	pend = d->loss_pending ? shm_stage__cnt(st, d->loss_pending) : 0;
	if (pend)
		(void)shm_loss__add(t, id, d->lost_at_stop, CPA_KIND_ONCPU, pend, pend, passed + 1,
				    clock_ns(CLOCK_REALTIME));
	shm_stage__cnt_add(st, d->lost_at_stop, samples + pend);
	/* What its producer could not send when it stopped: capture leaves the
	 * loss aggregates ring 0 had no room for in its gauge (this stage kept
	 * the ring full). They go on with the rest, once. */
	if (d->up < SHM_STAGE_MAX && shm_stages[d->up].role == SHM_ROLE_PRODUCER &&
	    shm_stages[d->up].loss_pending) {
		struct shm_stage *up = shm_arena__stage(a, d->up);
		uint64_t n = shm_stage__cnt(up, shm_stages[d->up].loss_pending);

		if (n) {
			(void)shm_loss__add(t, d->up, SHM_CNT_DROP_RING_FULL, CPA_KIND_ONCPU, n, n,
					    passed + 1, clock_ns(CLOCK_REALTIME));
			shm_stage__cnt_set(up, shm_stages[d->up].loss_pending, 0);
			losses += n;
		}
	}
	return samples + pend + losses;
}
