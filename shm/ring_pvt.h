/* SPDX-License-Identifier: MIT */
/*
 * Inline fast paths of the shm ring. Private: include shm/ring.h instead.
 *
 * The ordering contract is written once, at the top of shm/ring.c; the tags
 * [P1] [C1] ... in the comments below refer to it.
 */
#ifndef CPA_SHM_RING_PVT_H
#define CPA_SHM_RING_PVT_H

#ifndef CPA_SHM_RING_H
#error "include shm/ring.h, not shm/ring_pvt.h"
#endif

#include <errno.h>

#define shm__load_acquire(p)	 __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define shm__load_relaxed(p)	 __atomic_load_n((p), __ATOMIC_RELAXED)
#define shm__store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define shm__store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static inline uint64_t shm__rec_total(uint32_t len)
{
	return ((uint64_t)len + SHM_REC_HDR_SIZE + SHM_REC_ALIGN - 1) &
	       ~(uint64_t)(SHM_REC_ALIGN - 1);
}

/* Header as one 8-byte word: len in the low half, type and flags above. */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	       "header word layout assumes little endian");
static inline uint64_t shm__hdr_word(uint32_t len, uint16_t type)
{
	return (uint64_t)len | ((uint64_t)type << 32);
}

static inline int shm_ring__reserve_sp(struct shm_ring_prod *p, uint32_t len, uint16_t type,
				       void **ret_data)
{
	uint64_t total = shm__rec_total(len);
	uint64_t off = p->head & p->mask;
	uint8_t *rec = p->data + off;

	/* Fast path: fits before the end of the data area and in the space we
	 * already know is free. Anything else (refresh cons_pos, PAD, errors)
	 * is shm_ring__reserve_slow(). */
	if (__builtin_expect(len > p->max_len || total > p->size - off ||
				     p->head + total - p->cons_cache > p->size,
			     0))
		return shm_ring__reserve_slow(p, len, type, ret_data);

	__builtin_memcpy(rec, &(uint64_t){shm__hdr_word(len, type)}, 8);
	p->last_rec = p->head;
	p->head += total;
	*ret_data = rec + SHM_REC_HDR_SIZE;
	return 0;
}

static inline void shm_ring__trim_sp(struct shm_ring_prod *p, uint32_t new_len)
{
	struct shm_rec *rec = (struct shm_rec *)(p->data + (p->last_rec & p->mask));

	if (new_len >= rec->len)
		return;
	rec->len = new_len;
	p->head = p->last_rec + shm__rec_total(new_len);
}

static inline void shm_ring__abort_sp(struct shm_ring_prod *p)
{
	p->head = p->committed;
}

static inline void shm_ring__commit_sp(struct shm_ring_prod *p)
{
	if (p->head == p->committed)
		return;
	p->committed = p->head;
	/*
	 * [P1] pairs with [C1]: record bytes are visible before the position
	 * that covers them (seq_cst is a superset of release).
	 * [P3] pairs with [C4]: seq_cst store of prod_pos, then seq_cst load of
	 * waiting; the consumer does the mirror image, so one of us sees the
	 * other (Dekker). On x86 the store is one xchg, the price of a fence.
	 */
	__atomic_store_n(&p->ctrl->prod_pos, p->head, __ATOMIC_SEQ_CST);
	if (__builtin_expect(__atomic_load_n(&p->ctrl->waiting, __ATOMIC_SEQ_CST) != 0, 0))
		shm_ring__wake_slow(p);
}

static inline int shm__peek_one(struct shm_ring_cons *c, struct shm_msg *ret)
{
	uint64_t off = c->tail & c->mask, hdr, total;

	/* Fast path: a committed, non-PAD record we can see in prod_cache. One
	 * 8-byte copy of the header: the checks and the caller see the same
	 * values whatever the other side scribbles afterwards. */
	if (__builtin_expect(c->tail != c->prod_cache, 1)) {
		__builtin_memcpy(&hdr, c->data + off, 8);
		total = shm__rec_total((uint32_t)hdr);
		if (__builtin_expect((uint16_t)(hdr >> 32) != SHM_REC_TYPE_PAD &&
					     total <= c->prod_cache - c->tail &&
					     total <= c->size - off,
				     1)) {
			ret->data = c->data + off + SHM_REC_HDR_SIZE;
			ret->len = (uint32_t)hdr;
			ret->type = (uint16_t)(hdr >> 32);
			ret->flags = (uint16_t)(hdr >> 48);
			c->tail += total;
			return 0;
		}
	}
	return shm_ring__peek_slow(c, ret);
}

static inline int shm_ring__peek_sc(struct shm_ring_cons *c, struct shm_msg *ret)
{
	return shm__peek_one(c, ret);
}

static inline int shm_ring__peek_batch_sc(struct shm_ring_cons *c, struct shm_msg *msgs,
					  unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++) {
		int r = shm__peek_one(c, &msgs[i]);

		if (r == -EAGAIN)
			break;
		if (r < 0)
			return r;
	}
	return (int)i;
}

static inline void shm_ring__release_sc(struct shm_ring_cons *c)
{
	/* [C3] pairs with [P2]: our reads of the records are done before the space is reused. */
	shm__store_release(&c->ctrl->cons_pos, c->tail);
}

static inline void shm_ring__release_mark_sc(struct shm_ring_cons *c, uint64_t mark)
{
	/* [C5]: mark first; a crash between the two stores leaves a mark that is
	 * ahead of cons_pos, which the restart rule in ring.c allows for. */
	shm__store_relaxed(&c->ctrl->cons_mark, mark);
	shm_ring__release_sc(c);
}

static inline uint64_t shm_ring__tail_sc(const struct shm_ring_cons *c)
{
	return c->tail;
}

static inline void shm_ring__release_upto_mark_sc(struct shm_ring_cons *c, uint64_t pos,
						  uint64_t mark)
{
	/* [C5] as above; [C3] for the records before pos. */
	shm__store_relaxed(&c->ctrl->cons_mark, mark);
	shm__store_release(&c->ctrl->cons_pos, pos);
}

static inline uint64_t shm_ring__pending_sc(struct shm_ring_cons *c)
{
	/* [C1] again: a fresh look at the producer. */
	uint64_t prod = shm__load_acquire(&c->ctrl->prod_pos);

	if (prod - c->tail > c->size)
		return 0;
	c->prod_cache = prod;
	return prod - c->tail;
}

#endif /* CPA_SHM_RING_PVT_H */
