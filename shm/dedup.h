/* SPDX-License-Identifier: MIT */
/*
 * The exactly-once rule of a stage that takes sequenced records from the
 * stage before it (symd from unwindd, the storer from symd). The contract is
 * in docs/pipeline.md, "Exactly once across restarts".
 *
 * A record can arrive twice in two ways:
 * - We restarted. Our predecessor may have passed on records it had not yet
 *   released. It left the highest seq it passed on as the ring's mark, and we
 *   start from that mark (shm_ring__mark_sc()).
 * - The producer restarted between committing a batch's output and
 *   releasing that batch's input. Its successor reads the batch again and
 *   sends it again. It says so in the first DICT_RESET of its life
 *   (CPA_RESET_START, with resume_seq = the input mark it started from).
 *   Everything it sends with a seq in (resume_seq, the highest seq we had
 *   seen] is a copy.
 *
 * Samples, task events, metrics and policy events each carry a seq of their
 * own that no other record has, and they arrive in increasing order. So one
 * at or below the highest seq seen is a copy, whatever the reason.
 * LOSS records reuse seqs: a stage's own loss carries the seq of the sample
 * it dropped (or its last seq when it cannot know), and a successor's
 * lost_pending_at_kill carries its resume mark. So a loss is a copy only at
 * or below our own start mark, or inside the producer's replay window.
 *
 * Header only, no state outside the struct.
 */
#ifndef CPA_SHM_DEDUP_H
#define CPA_SHM_DEDUP_H

#include <stdbool.h>
#include <stdint.h>

struct shm_dedup {
	uint64_t resume; /* our start mark: our predecessor passed on seq <= this */
	uint64_t high;	 /* highest seq passed on, from resume on */
	/* The producer's replayed seqs: (replay_lo, replay_hi]; empty when equal. */
	uint64_t replay_lo;
	uint64_t replay_hi;
};

static inline void shm_dedup__init(struct shm_dedup *d, uint64_t mark)
{
	*d = (struct shm_dedup){.resume = mark, .high = mark};
}

/* A DICT_RESET with CPA_RESET_START came: the producer's new life resumed
 * from resume_seq. What we saw above it, it sends again. */
static inline void shm_dedup__producer_start(struct shm_dedup *d, uint64_t resume_seq)
{
	if (resume_seq < d->high) {
		d->replay_lo = resume_seq;
		d->replay_hi = d->high;
	} else {
		d->replay_lo = d->replay_hi = 0;
	}
}

/* true: a copy of a record already passed on (count it SHM_CNT_DROP_DUP). */
static inline bool shm_dedup__copy(const struct shm_dedup *d, uint64_t seq, bool loss)
{
	if (!loss)
		return seq <= d->high;
	return seq <= d->resume || (seq > d->replay_lo && seq <= d->replay_hi);
}

/* The record was taken (passed on, or dropped and accounted as our own loss). */
static inline void shm_dedup__pass(struct shm_dedup *d, uint64_t seq)
{
	if (seq > d->high)
		d->high = seq;
}

#endif /* CPA_SHM_DEDUP_H */
