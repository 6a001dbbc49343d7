/* SPDX-License-Identifier: MIT */
/*
 * The rig of unwindd's stage tests (test_unwindd, test_unwindd_features): an
 * arena whose ring 0 the test fills (it plays capture) and whose ring 1 it
 * drains (it plays symd), with unwindd between them, run batch by batch;
 * and a real sample of the test's own thread.
 */
#ifndef CPA_TEST_UNWINDD_UTIL_H
#define CPA_TEST_UNWINDD_UTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* Our own stack, as the kernel would copy it: ASan's redzones are not
 * errors here. */
__attribute__((no_sanitize_address, noinline, unused)) static void
stack_copy(uint8_t *dst, uint64_t sp, uint32_t len)
{
	const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)sp;
	uint32_t i;

	for (i = 0; i < len; i++)
		dst[i] = src[i];
}

/* End of the mapping that holds addr (from /proc/self/maps), or 0. */
static inline uint64_t mapping_end(uint64_t addr)
{
	unsigned long lo, hi;
	char line[512];
	uint64_t end = 0;
	FILE *f = fopen("/proc/self/maps", "re");

	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && addr >= lo && addr < hi)
			end = hi;
	fclose(f);
	return end;
}

/* A real sample of this thread (seq e->seq++, comm "selftest"): registers and
 * a copy of the stack as capture would take them, so the CFI walk runs end to
 * end through our find. Like capture, the copy stops at the end of the stack
 * mapping: with ASLR and a small environment the main thread's stack top can
 * be under len away. stack: len bytes of room. */
__attribute__((noinline, unused)) static void take_sample(struct env *e, uint8_t *stack,
							  uint32_t len)
{
	uint64_t ip, sp, bp, ufp[1], end;
	struct cpa_sample *s;
	uint8_t *p;
	uint32_t rl;

	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	end = mapping_end(sp);
	ck_assert_uint_gt(end, sp);
	if (end - sp < len)
		len = (uint32_t)(end - sp);
	rl = (uint32_t)(sizeof(*s) + 8 + len);
	stack_copy(stack, sp, len);
	ufp[0] = ip;
	ck_assert_int_eq(shm_ring__reserve_sp(&e->cap, rl, CPA_REC_SAMPLE, (void **)&s), 0);
	memset(s, 0, sizeof(*s));
	s->seq = e->seq++;
	s->pid = (uint32_t)getpid();
	s->tid = s->pid;
	s->flags = CPA_SF_USER_REGS;
	s->regs.ip = ip;
	s->regs.sp = sp;
	s->regs.bp = bp;
	s->stack_sp = sp;
	s->n_ufp = 1;
	s->stack_len = len;
	snprintf(s->comm, sizeof(s->comm), "selftest");
	p = (uint8_t *)(s + 1);
	memcpy(p, ufp, 8);
	memcpy(p + 8, stack, len);
	shm_ring__commit_sp(&e->cap);
}

#endif /* CPA_TEST_UNWINDD_UTIL_H */
