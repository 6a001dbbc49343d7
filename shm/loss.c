// SPDX-License-Identifier: MIT
/* Pending LOSS aggregates; the behaviour is documented in loss.h. */
#include "loss.h"
#include "stage.h"

#include <errno.h>
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
