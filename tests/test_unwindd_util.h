/* SPDX-License-Identifier: MIT */
/*
 * The rig of unwindd's stage tests (test_unwindd, test_unwindd_features): an
 * arena whose ring 0 the test fills (it plays capture) and whose ring 1 it
 * drains (it plays symd), with unwindd between them, run batch by batch.
 */
#ifndef CPA_TEST_UNWINDD_UTIL_H
#define CPA_TEST_UNWINDD_UTIL_H

#include <check.h>
#include <string.h>

#include "shm/arena.h"
#include "shm/records.h"
#include "unwindd/unwindd.h"

struct env {
	struct shm_arena *a;
	struct shm_stage *st;
	struct shm_stage *symd;
	struct shm_ring_prod cap; /* plays capture */
	struct shm_ring_cons in;  /* unwindd's ends */
	struct shm_ring_prod out;
	struct shm_ring_cons sym; /* plays symd */
	struct unwindd *u;
	uint64_t seq;
};

/* One record of ring 1, copied out. */
struct outrec {
	uint16_t type;
	uint32_t len;
	uint8_t data[8192];
};

/* The arena and the test's ends of the rings; unwindd is not there yet. */
static inline void env_arena(struct env *e, uint64_t out_size, uint64_t initial_pos)
{
	struct shm_layout l;

	memset(e, 0, sizeof(*e));
	shm_layout__default(&l, 4096, 16);
	l.rings[SHM_RING_CAPTURE].data_size = 1u << 20;
	l.rings[SHM_RING_UNWIND].data_size = out_size;
	l.rings[SHM_RING_SYMD].data_size = 4096;
	l.initial_pos = initial_pos;
	ck_assert_int_eq(shm_arena__create(&l, &e->a), 0);
	e->st = shm_arena__stage(e->a, SHM_STAGE_UNWINDD);
	e->symd = shm_arena__stage(e->a, SHM_STAGE_SYMD);
	ck_assert_int_eq(shm_arena__open_prod(e->a, SHM_RING_CAPTURE, &e->cap), 0);
	ck_assert_int_eq(shm_arena__open_cons(e->a, SHM_RING_UNWIND, &e->sym), 0);
	e->seq = (1ull << 40) | 1;
}

/* unwindd on its ends of the rings (epoch 7 unless o names one). */
static inline void env_start(struct env *e, const struct unwindd_opts *o)
{
	struct unwindd_opts oo = *o;

	if (!oo.epoch)
		oo.epoch = 7;
	ck_assert_int_eq(shm_arena__open_cons(e->a, SHM_RING_CAPTURE, &e->in), 0);
	ck_assert_int_eq(shm_arena__open_prod(e->a, SHM_RING_UNWIND, &e->out), 0);
	ck_assert_int_eq(unwindd__new(&oo, &e->in, &e->out, e->st, &e->u), 0);
}

static inline void env_free(struct env *e)
{
	unwindd__free(e->u);
	shm_arena__free(e->a);
}

/* Batches until ring 0 is empty; returns the records taken. */
static inline int run_all(struct env *e)
{
	int total = 0, n;

	while ((n = unwindd__batch(e->u, UNWINDD_BATCH)) > 0)
		total += n;
	ck_assert_int_eq(n, 0);
	return total;
}

/* Drain ring 1 into recs; returns how many. */
static inline int pull_all(struct env *e, struct outrec *recs, int max)
{
	struct shm_msg m;
	int n = 0;

	while (shm_ring__peek_sc(&e->sym, &m) == 0) {
		ck_assert_int_lt(n, max);
		ck_assert_uint_le(m.len, sizeof(recs[n].data));
		recs[n].type = m.type;
		recs[n].len = m.len;
		memcpy(recs[n].data, m.data, m.len);
		n++;
	}
	shm_ring__release_sc(&e->sym);
	return n;
}

#endif /* CPA_TEST_UNWINDD_UTIL_H */
