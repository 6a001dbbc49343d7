// SPDX-License-Identifier: MIT
/*
 * capture's output side without BPF: hand-made BPF records through
 * cap_emit into a real ring of a real arena, read back as a consumer; the
 * code objects cap_pyname reads from a live python3 (none: that test skips).
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/pychild.h"
#include "bpf/profile.h"
#include "capture/cap_emit.h"
#include "capture/cap_pyname.h"
#include "capture/cap_sys.h"
#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/config.h"
#include "shm/counters.h"
#include "shm/records.h"
#include "test_util.h"

#define GEN	  5u
#define STACK_MAX 8192u
#define CLOCK_OFF 1000000000000ll /* boot -> realtime offset used by the tests */

struct fix {
	struct shm_arena *a;
	struct shm_stage *st;
	struct shm_ring_prod prod;
	struct shm_ring_cons cons;
	struct cap_emit e;
};

/* Ring 0 of ring_size data bytes, positions just below the 64-bit wrap. */
static void fix_init(struct fix *f, uint64_t ring_size)
{
	struct shm_layout l;

	memset(f, 0, sizeof(*f));
	memset(&l, 0, sizeof(l));
	l.n_rings = 1;
	l.rings[0].data_size = ring_size;
	l.rings[0].producer = SHM_STAGE_CAPTURE;
	l.rings[0].consumer = SHM_STAGE_UNWINDD;
	l.initial_pos = (UINT64_MAX - 4096) & ~7ull; /* positions are 8-aligned */
	ck_assert_int_eq(shm_arena__create(&l, &f->a), 0);
	f->st = shm_arena__stage(f->a, SHM_STAGE_CAPTURE);
	ck_assert_int_eq(shm_arena__open_prod(f->a, 0, &f->prod), 0);
	ck_assert_int_eq(shm_arena__open_cons(f->a, 0, &f->cons), 0);
	ck_assert_int_eq(cap_emit__init(&f->e, &f->prod, f->st, GEN, STACK_MAX), 0);
	f->e.clock.boot_to_real_ns = CLOCK_OFF;
}

static void fix_free(struct fix *f)
{
	shm_arena__free(f->a);
}

/* A BPF sample as profile.bpf.c lays it out, with nk/nu/slen valid entries. */
static struct cpa_bpf_sample *bpf_sample(uint32_t nk, uint32_t nu, uint32_t slen, size_t *ret_size)
{
	size_t size = cpa_bpf_sample_size(STACK_MAX);
	struct cpa_bpf_sample *s = calloc(1, size);

	ck_assert_ptr_nonnull(s);
	s->type = CPA_BPF_REC_SAMPLE;
	s->flags = CPA_BPF_F_USER_REGS | CPA_BPF_F_IN_KERNEL;
	s->time_ns = 123456789;
	s->cgroup_id = 0xfedcba9876543210ull; /* all 64 bits survive */
	s->pid = 42;
	s->tid = 43;
	s->cpu = 1;
	s->kstack_len = (int32_t)(8 * nk);
	s->ufp_len = (int32_t)(8 * nu);
	s->stack_len = slen;
	memcpy(s->comm, "worker", 7);
	memcpy(s->pcomm, "server", 7);
	s->regs.ip = 0x401000;
	s->regs.sp = 0x7ffc0000f000;
	s->regs.bp = 0x7ffc0000f100;
	s->regs.r15 = 15;
	for (uint32_t i = 0; i < nk; i++)
		s->kstack[i] = 0xffffffff81000000ull + i;
	for (uint32_t i = 0; i < nu; i++)
		s->ufp[i] = 0x401000 + i;
	for (uint32_t i = 0; i < slen; i++)
		s->stack[i] = (uint8_t)(i * 13);
	*ret_size = size;
	return s;
}

static struct shm_msg peek(struct fix *f)
{
	struct shm_msg m;

	ck_assert_int_eq(shm_ring__peek_sc(&f->cons, &m), 0);
	return m;
}

START_TEST(test_sample_conversion)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(3, 2, 100, &size);
	const struct cpa_sample *s;
	const uint64_t *u;
	struct shm_msg m;

	fix_init(&f, 1u << 16);
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	/* Nothing is visible before the batch commit. */
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);
	cap_emit__commit(&f.e);

	m = peek(&f);
	ck_assert_uint_eq(m.type, CPA_REC_SAMPLE);
	ck_assert_uint_eq(m.len, sizeof(*s) + 3 * 8 + 2 * 8 + 100);
	s = m.data;
	ck_assert(cpa_rec_sample_ok(s, m.len));
	ck_assert_uint_eq(s->seq, ((uint64_t)GEN << 40) | 1);
	ck_assert_uint_eq(s->time_ns, 123456789ull + CLOCK_OFF);
	ck_assert_uint_eq(s->cgroup_id, 0xfedcba9876543210ull);
	ck_assert_uint_eq(s->weight, 1);
	ck_assert_uint_eq(s->pid, 42);
	ck_assert_uint_eq(s->tid, 43);
	ck_assert_uint_eq(s->cpu, 1);
	ck_assert_uint_eq(s->kind, CPA_KIND_ONCPU);
	ck_assert_uint_eq(s->flags, CPA_SF_USER_REGS | CPA_SF_IN_KERNEL);
	ck_assert_str_eq(s->comm, "worker");
	ck_assert_str_eq(s->pcomm, "server");
	ck_assert_uint_eq(s->regs.ip, 0x401000);
	ck_assert_uint_eq(s->regs.r15, 15);
	ck_assert_uint_eq(s->stack_sp, 0x7ffc0000f000);
	ck_assert_uint_eq(s->n_kstack, 3);
	ck_assert_uint_eq(s->n_ufp, 2);
	ck_assert_uint_eq(s->stack_len, 100);
	u = (const uint64_t *)(s + 1);
	ck_assert_uint_eq(u[0], 0xffffffff81000000ull);
	ck_assert_uint_eq(u[2], 0xffffffff81000002ull);
	ck_assert_uint_eq(u[3], 0x401000);
	ck_assert_uint_eq(u[4], 0x401001);
	ck_assert_int_eq(memcmp(u + 5, bs->stack, 100), 0);

	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_IN), 1);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_OUT), 1);
	ck_assert_uint_eq(shm_stage__cnt(f.st, CAP_CNT_SAMPLES), 1);
	ck_assert_uint_eq(shm_stage__cnt(f.st, CAP_CNT_USTACK_BYTES), 100);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_BYTES_OUT), m.len);
	free(bs);
	fix_free(&f);
}
END_TEST

START_TEST(test_sample_edge_cases)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(0, 0, 0, &size);
	struct cpa_bpf_task bt = {.type = CPA_BPF_REC_TASK,
				  .kind = CPA_BPF_TASK_EXIT,
				  .time_ns = 7,
				  .pid = 9,
				  .tid = 10,
				  .comm = "gone"};
	const struct cpa_sample *s;
	const struct cpa_task_event *t;
	struct shm_msg m;

	fix_init(&f, 1u << 16);
	/* bpf_get_stack failed in the kernel: flagged, no frames. */
	bs->kstack_len = -14;
	bs->ufp_len = 8 * 500; /* more than fits: clamped */
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	/* Corrupt: longer copy than asked for, record too short, unknown type. */
	bs->stack_len = STACK_MAX + 1;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	bs->stack_len = 16;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, sizeof(*bs) + 8), 0);
	bs->type = 99;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	ck_assert_int_eq(cap_emit__record(&f.e, bs, 2), 0);
	ck_assert_int_eq(cap_emit__record(&f.e, &bt, sizeof(bt)), 0);
	cap_emit__commit(&f.e);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_DROP_CORRUPT), 4);

	m = peek(&f);
	s = m.data;
	ck_assert_uint_eq(m.type, CPA_REC_SAMPLE);
	ck_assert_uint_eq(s->flags, CPA_SF_USER_REGS | CPA_SF_IN_KERNEL | CPA_SF_KSTACK_ERR);
	ck_assert_uint_eq(s->n_kstack, 0);
	ck_assert_uint_eq(s->n_ufp, CPA_MAX_UFRAMES);
	ck_assert_uint_eq(m.len, sizeof(*s) + 8 * CPA_MAX_UFRAMES);

	m = peek(&f);
	t = m.data;
	ck_assert_uint_eq(m.type, CPA_REC_TASK);
	ck_assert_uint_eq(m.len, sizeof(*t));
	ck_assert_uint_eq(t->seq, ((uint64_t)GEN << 40) | 2); /* corrupt ones took no seq */
	ck_assert_uint_eq(t->kind, CPA_TASK_EXIT);
	ck_assert_uint_eq(t->pid, 9);
	ck_assert_uint_eq(t->tid, 10);
	ck_assert_uint_eq(t->time_ns, 7 + CLOCK_OFF);
	ck_assert_str_eq(t->comm, "gone");
	ck_assert_uint_eq(shm_stage__cnt(f.st, CAP_CNT_TASK_EVENTS), 1);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);
	free(bs);
	fix_free(&f);
}
END_TEST

/* A probe hit keeps its kind and probe id; an id past CPA_PROBE_MAX is corrupt. */
START_TEST(test_probe_sample)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(1, 1, 0, &size);
	const struct cpa_sample *s;
	const struct cpa_loss *l;
	struct shm_msg m;

	fix_init(&f, 1u << 16);
	bs->kind = CPA_BPF_KIND_PROBE;
	bs->probe_id = 5;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	bs->probe_id = CPA_PROBE_MAX;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	bs->probe_id = 0;
	bs->kind = 77; /* no such kind */
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	cap_emit__commit(&f.e);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_DROP_CORRUPT), 2);
	m = peek(&f);
	s = m.data;
	ck_assert_uint_eq(s->kind, CPA_KIND_PROBE);
	ck_assert_uint_eq(s->probe_id, 5);
	ck_assert_uint_eq(s->weight, 1);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);

	/* Hits over --probe_rate: a LOSS of kind PROBE naming the probe. */
	cap_emit__loss_add(&f.e, (enum cap_loss_slot)(CAP_LOSS_PROBE_RATE + 3), 40, 7);
	cap_emit__loss_add(&f.e, (enum cap_loss_slot)(CAP_LOSS_PROBE_RB + 1), 2, 8);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, 9, false), 0);
	cap_emit__commit(&f.e);
	for (unsigned int i = 0; i < 2; i++) {
		static const struct cpa_loss want[] = {
			{.probe_id = 3, .reason = CAP_CNT_PROBE_SKIPPED, .count = 40},
			{.probe_id = 1, .reason = CAP_CNT_BPF_RB_LOST, .count = 2},
		};

		m = peek(&f);
		l = m.data;
		ck_assert_uint_eq(l->kind, CPA_KIND_PROBE);
		ck_assert_uint_eq(l->probe_id, want[i].probe_id);
		ck_assert_uint_eq(l->reason, want[i].reason);
		ck_assert_uint_eq(l->count, want[i].count);
	}
	free(bs);
	fix_free(&f);
}
END_TEST

/* The next LOSS record in ring 0: probe_detached of probe id, count samples. */
static void want_detached(struct fix *f, unsigned int id, uint64_t count)
{
	struct shm_msg m = peek(f);
	const struct cpa_loss *l = m.data;

	ck_assert_uint_eq(m.type, CPA_REC_LOSS);
	ck_assert_uint_eq(l->kind, CPA_KIND_PROBE);
	ck_assert_uint_eq(l->probe_id, id);
	ck_assert_uint_eq(l->reason, CAP_CNT_PROBE_DETACHED);
	ck_assert_uint_eq(l->count, count);
}

/*
 * What a probe the budget detached no longer records: test_probe_budget's
 * store once had no [lost: capture probe_detached] row. The probe, hot
 * (874 k hits/s) and thinned to 1 sample/s, was detached after a window of
 * 0.99973 s (874401 runs at 874634/s) that admitted 1 sample: 1/s x
 * 0.99973 s was counted as 0 samples, and so were the 0.5 s to the stop.
 * A window under a second (a late tick) whose one admission fell outside
 * it would even have made the rate 0 for good.
 */
START_TEST(test_probe_detached_rows)
{
	const uint64_t ms = NSEC_PER_MSEC;
	struct fix f;
	struct shm_msg m;
	uint64_t rate;

	fix_init(&f, 1u << 16);
	/* Its hits/s up to its limit in BPF, whatever that window admitted. */
	rate = cap_emit__probe_detached_rate(874401, 999733 * NSEC_PER_USEC, 1);
	ck_assert_uint_eq(rate, 1);
	ck_assert_uint_eq(cap_emit__probe_detached_rate(830000, 950 * ms, 1), 1);
	ck_assert_uint_eq(cap_emit__probe_detached_rate(900000, 1000 * ms, 100), 100);
	ck_assert_uint_eq(cap_emit__probe_detached_rate(50, 1000 * ms, 100), 50);
	ck_assert_uint_eq(cap_emit__probe_detached_rate(3000, 500 * ms, 0), 6000);
	ck_assert_uint_eq(cap_emit__probe_detached_rate(1, 1000 * ms, 0), 1);

	/* Stopped 0.5 s after the detach: the store still says why. */
	ck_assert_uint_eq(cap_emit__probe_detached(&f.e, 2, rate, 500 * ms, true, 10), 1);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, 11, true), 0);
	cap_emit__commit(&f.e);
	want_detached(&f, 2, 1);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);

	/* Ticks a little under a second apart: the fractions add up, and the
	 * one left at the stop counts as a sample (2.997 s at 1/s: 3). */
	ck_assert_uint_eq(cap_emit__probe_detached(&f.e, 1, 1, 999 * ms, false, 20), 0);
	ck_assert_uint_eq(cap_emit__probe_detached(&f.e, 1, 1, 999 * ms, false, 21), 1);
	ck_assert_uint_eq(cap_emit__probe_detached(&f.e, 1, 1, 999 * ms, false, 22), 1);
	ck_assert_uint_eq(cap_emit__probe_detached(&f.e, 1, 1, 0, true, 23), 1);
	/* Nothing left over: the stop adds nothing; a probe not detached never counts. */
	ck_assert_uint_eq(cap_emit__probe_detached(&f.e, 3, 4, 500 * ms, true, 24), 2);
	ck_assert_uint_eq(cap_emit__probe_detached(&f.e, 4, 0, 500 * ms, true, 25), 0);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, 26, true), 0);
	cap_emit__commit(&f.e);
	want_detached(&f, 1, 3);
	want_detached(&f, 3, 2);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);
	fix_free(&f);
}
END_TEST

START_TEST(test_ustack_refused_flagged)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(1, 1, 0, &size);
	struct shm_msg m;

	fix_init(&f, 1u << 16);
	f.e.ustack_refused = true;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	cap_emit__commit(&f.e);
	m = peek(&f);
	ck_assert(((const struct cpa_sample *)m.data)->flags & CPA_SF_NO_USTACK);
	ck_assert_uint_eq(shm_stage__cnt(f.st, CAP_CNT_BPF_NO_USTACK), 1);
	free(bs);
	fix_free(&f);
}
END_TEST

/* Ring full: first the stack bytes go (degraded), then whole samples (dropped),
 * and the drops come back as one LOSS record once there is room. */
START_TEST(test_degrade_then_drop)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(4, 4, STACK_MAX, &size);
	unsigned int full = 0, degraded = 0, n = 0, i;
	uint64_t last_seq = 0, drops, degr;
	const unsigned int total = 40;
	const struct cpa_loss *l;
	struct shm_msg m;
	int left;

	fix_init(&f, 1u << 16);
	for (i = 0; i < total; i++) {
		bs->time_ns = 1000 + i;
		ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	}
	cap_emit__commit(&f.e);
	drops = shm_stage__cnt(f.st, SHM_CNT_DROP_RING_FULL);
	degr = shm_stage__cnt(f.st, SHM_CNT_DEGRADED);
	ck_assert_uint_gt(degr, 0);
	ck_assert_uint_gt(drops, 0);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_OUT) + drops, total);

	/* Ring still full of samples: the loss record may or may not fit;
	 * either way it is not lost. */
	left = cap_emit__flush_losses(&f.e, 5 * NSEC_PER_SEC, false);
	ck_assert_int_ge(left, 0);

	while (shm_ring__peek_sc(&f.cons, &m) == 0) {
		const struct cpa_sample *s = m.data;

		if (m.type == CPA_REC_LOSS)
			break;
		ck_assert_uint_eq(m.type, CPA_REC_SAMPLE);
		ck_assert_uint_gt(s->seq, last_seq);
		last_seq = s->seq;
		n++;
		if (s->flags & CPA_SF_DEGRADED) {
			/* Degraded: kernel + FP stacks and regs kept, bytes gone. */
			ck_assert_uint_eq(s->stack_len, 0);
			ck_assert_uint_eq(s->n_kstack, 4);
			ck_assert_uint_eq(s->n_ufp, 4);
			ck_assert_uint_eq(m.len, sizeof(*s) + 64);
			degraded++;
		} else {
			/* Degrading starts only once the full record no longer fits. */
			ck_assert_uint_eq(degraded, 0);
			ck_assert_uint_eq(s->stack_len, STACK_MAX);
			full++;
		}
	}
	ck_assert_uint_eq(degraded, degr);
	ck_assert_uint_eq(full + degraded, total - drops);
	ck_assert_uint_eq(n, full + degraded);
	shm_ring__release_sc(&f.cons);

	if (left) {
		ck_assert_int_eq(cap_emit__flush_losses(&f.e, 5 * NSEC_PER_SEC, false), 0);
		cap_emit__commit(&f.e);
		m = peek(&f);
	}
	ck_assert_uint_eq(m.type, CPA_REC_LOSS);
	l = m.data;
	ck_assert_uint_eq(m.len, sizeof(*l));
	ck_assert_uint_eq(l->count, drops);
	ck_assert_uint_eq(l->weight, drops);
	ck_assert_uint_eq(l->stage, SHM_STAGE_CAPTURE);
	ck_assert_uint_eq(l->reason, SHM_CNT_DROP_RING_FULL);
	ck_assert_uint_eq(l->kind, CPA_KIND_ONCPU);
	ck_assert_uint_gt(l->seq, last_seq);
	/* Stamped with the first lost sample's time. */
	ck_assert_uint_eq(l->time_ns, 1000 + (total - drops) + CLOCK_OFF);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);
	free(bs);
	fix_free(&f);
}
END_TEST

/* A record too big for the ring at all (max payload) is degraded too. */
START_TEST(test_oversize_degrades)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(2, 2, STACK_MAX, &size);
	struct shm_msg m;

	fix_init(&f, 1u << 14); /* max payload 4 KiB - 8 */
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	cap_emit__commit(&f.e);
	m = peek(&f);
	ck_assert(((const struct cpa_sample *)m.data)->flags & CPA_SF_DEGRADED);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_DEGRADED), 1);
	free(bs);
	fix_free(&f);
}
END_TEST

/* The stage's rate_limit is honoured per second of sample time, live. */
START_TEST(test_rate_limit)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(1, 1, 16, &size);
	const struct cpa_loss *l;
	struct shm_msg m;
	unsigned int samples = 0, i;

	fix_init(&f, 1u << 16);
	f.st->rate_limit = 3;
	for (i = 0; i < 5; i++) {
		bs->time_ns = 10 * NSEC_PER_SEC + i; /* five in one second */
		ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	}
	bs->time_ns = 11 * NSEC_PER_SEC; /* a new second: allowed again */
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	f.st->rate_limit = 0; /* lifted live */
	for (i = 0; i < 5; i++)
		ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, 12 * NSEC_PER_SEC, false), 0);
	cap_emit__commit(&f.e);

	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_DROP_RATE), 2);
	while (shm_ring__peek_sc(&f.cons, &m) == 0) {
		if (m.type == CPA_REC_SAMPLE) {
			samples++;
			continue;
		}
		ck_assert_uint_eq(m.type, CPA_REC_LOSS);
		l = m.data;
		ck_assert_uint_eq(l->reason, SHM_CNT_DROP_RATE);
		ck_assert_uint_eq(l->count, 2);
		ck_assert_uint_eq(l->time_ns, 10 * NSEC_PER_SEC + 3 + CLOCK_OFF);
	}
	ck_assert_uint_eq(samples, 3 + 1 + 5);
	free(bs);
	fix_free(&f);
}
END_TEST

/* An off-CPU record (header + the sample as BPF built it into the stash). */
START_TEST(test_offcpu_conversion)
{
	const size_t hdr = offsetof(struct cpa_bpf_offcpu, s);
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(2, 1, 64, &size);
	struct cpa_bpf_offcpu *bo = calloc(1, hdr + size);
	const struct cpa_sample *s;
	const struct cpa_loss *l;
	struct shm_msg m;

	ck_assert_ptr_nonnull(bo);
	memcpy(&bo->s, bs, size);
	bo->s.kind = CPA_BPF_KIND_OFFCPU; /* fill_sample() at sched_switch */
	bo->type = CPA_BPF_REC_OFFCPU;
	bo->state = 'D';
	bo->weight_ns = 2500000;
	ck_assert_uint_eq(hdr + size, cpa_bpf_offcpu_size(STACK_MAX));
	fix_init(&f, 1u << 16);
	ck_assert_int_eq(cap_emit__record(&f.e, bo, hdr + size), 0);
	cap_emit__commit(&f.e);
	m = peek(&f);
	ck_assert_uint_eq(m.type, CPA_REC_SAMPLE);
	s = m.data;
	ck_assert(cpa_rec_sample_ok(s, m.len));
	ck_assert_uint_eq(s->kind, CPA_KIND_OFFCPU);
	ck_assert_uint_eq(s->weight, 2500000);
	ck_assert_uint_eq(s->offcpu_state, 'D');
	ck_assert_uint_eq(s->n_kstack, 2);
	ck_assert_uint_eq(s->stack_len, 64);
	ck_assert_uint_eq(s->time_ns, 123456789ull + CLOCK_OFF);
	ck_assert_uint_eq(shm_stage__cnt(f.st, CAP_CNT_OFFCPU), 1);
	ck_assert_uint_eq(shm_stage__cnt(f.st, CAP_CNT_OFFCPU_NS), 2500000);

	/* A state that is none of R, S, D: corrupt, dropped. */
	bo->state = 'X';
	ck_assert_int_eq(cap_emit__record(&f.e, bo, hdr + size), 0);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_DROP_CORRUPT), 1);
	/* The sample kind agrees with the record type: off-CPU only inside an
	 * off-CPU record, never an on-CPU sample inside one. */
	bo->state = 'D';
	bo->s.kind = CPA_BPF_KIND_ONCPU;
	ck_assert_int_eq(cap_emit__record(&f.e, bo, hdr + size), 0);
	bs->kind = CPA_BPF_KIND_OFFCPU;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_DROP_CORRUPT), 3);
	ck_assert_uint_eq(shm_stage__cnt(f.st, CAP_CNT_OFFCPU), 1);
	bo->s.kind = CPA_BPF_KIND_OFFCPU;

	/* Dropped off-CPU records are reported as off-CPU losses weighing their ns. */
	bo->state = 'S';
	f.st->rate_limit = 1;
	bo->s.time_ns = 50 * NSEC_PER_SEC;
	ck_assert_int_eq(cap_emit__record(&f.e, bo, hdr + size), 0);
	ck_assert_int_eq(cap_emit__record(&f.e, bo, hdr + size), 0);
	ck_assert_int_eq(cap_emit__record(&f.e, bo, hdr + size), 0);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, 51 * NSEC_PER_SEC, false), 0);
	cap_emit__commit(&f.e);
	m = peek(&f);
	ck_assert_uint_eq(m.type, CPA_REC_SAMPLE);
	m = peek(&f);
	ck_assert_uint_eq(m.type, CPA_REC_LOSS);
	l = m.data;
	ck_assert_uint_eq(l->kind, CPA_KIND_OFFCPU);
	ck_assert_uint_eq(l->reason, SHM_CNT_DROP_RATE);
	ck_assert_uint_eq(l->count, 2);
	ck_assert_uint_eq(l->weight, 2 * 2500000);
	free(bo);
	free(bs);
	fix_free(&f);
}
END_TEST

START_TEST(test_loss_aggregation)
{
	struct fix f;
	const struct cpa_loss *l;
	struct shm_msg m;
	const uint64_t t0 = 100 * NSEC_PER_SEC;

	fix_init(&f, 1u << 16);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, t0, false), 0); /* nothing pending */
	cap_emit__loss_add(&f.e, CAP_LOSS_BPF_RB, 3, t0);
	cap_emit__loss_add(&f.e, CAP_LOSS_BPF_RB, 4, t0 + 10);
	cap_emit__loss_add(&f.e, CAP_LOSS_RING_FULL, 0, t0); /* zero is no loss */
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, t0, false), 0);
	cap_emit__commit(&f.e);
	m = peek(&f);
	l = m.data;
	ck_assert_uint_eq(m.type, CPA_REC_LOSS);
	ck_assert_uint_eq(l->count, 7);
	ck_assert_uint_eq(l->reason, CAP_CNT_BPF_RB_LOST);
	ck_assert_uint_eq(l->kind, CPA_KIND_ONCPU);
	ck_assert_uint_eq(l->probe_id, 0);
	ck_assert_uint_eq(l->time_ns, t0);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);

	/* At most one record per reason per second ... */
	cap_emit__loss_add(&f.e, CAP_LOSS_BPF_RB, 2, t0 + NSEC_PER_SEC / 10);
	cap_emit__loss_add(&f.e, CAP_LOSS_RING_FULL, 1, t0 + NSEC_PER_SEC / 5);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, t0 + NSEC_PER_SEC / 2, false), 1);
	cap_emit__commit(&f.e);
	m = peek(&f); /* RING_FULL had never been sent: it goes at once */
	l = m.data;
	ck_assert_uint_eq(l->reason, SHM_CNT_DROP_RING_FULL);
	ck_assert_uint_eq(l->count, 1);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);
	/* ... the BPF one waits for its second to pass ... */
	cap_emit__loss_add(&f.e, CAP_LOSS_BPF_RB, 1, t0 + NSEC_PER_SEC / 2);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, t0 + NSEC_PER_SEC + 1, false), 0);
	cap_emit__commit(&f.e);
	m = peek(&f);
	l = m.data;
	ck_assert_uint_eq(l->reason, CAP_CNT_BPF_RB_LOST);
	ck_assert_uint_eq(l->count, 3);
	ck_assert_uint_eq(l->time_ns, t0 + NSEC_PER_SEC / 10);
	/* ... unless forced (stop). */
	cap_emit__loss_add(&f.e, CAP_LOSS_BPF_RB, 5, t0 + NSEC_PER_SEC + 2);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, t0 + NSEC_PER_SEC + 3, false), 1);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, t0 + NSEC_PER_SEC + 3, true), 0);
	cap_emit__commit(&f.e);
	m = peek(&f);
	ck_assert_uint_eq(((const struct cpa_loss *)m.data)->count, 5);
	fix_free(&f);
}
END_TEST

/* What a generation delivered, as its successor reads it after a kill
 * (docs/capture.md, loss item 5): samples and sample losses committed to
 * ring 0, never what was only reserved, never the not-sampled estimate. */
START_TEST(test_delivered_gauges)
{
	struct fix f;
	struct shm_ring_prod next;
	struct cpa_bpf_sample *s;
	size_t size;

	fix_init(&f, 1u << 16);
	s = bpf_sample(2, 2, 64, &size);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(cap_emit__record(&f.e, s, size), 0);
	cap_emit__loss_add(&f.e, CAP_LOSS_RING_FULL, 2, 100);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, 100, true), 0);
	cap_emit__commit(&f.e);
	/* Killed now, with 4 more reserved but not committed. */
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(cap_emit__record(&f.e, s, size), 0);
	ck_assert_int_eq(shm_arena__open_prod(f.a, 0, &next), 0);
	ck_assert_uint_eq(cap_emit__prev_delivered(f.st, next.committed), 5);
	/* Killed between the gauges and the publication: not delivered. */
	shm_stage__cnt_set(f.st, CAP_CNT_GEN_ACCT_NEXT, 9);
	shm_stage__cnt_set(f.st, CAP_CNT_GEN_ACCT_HEAD, f.prod.head);
	ck_assert_uint_eq(cap_emit__prev_delivered(f.st, next.committed), 5);
	/* ... and after it (the last gauge not written yet): delivered. */
	cap_emit__commit(&f.e);
	shm_stage__cnt_set(f.st, CAP_CNT_GEN_ACCT_DONE, 5);
	ck_assert_int_eq(shm_arena__open_prod(f.a, 0, &next), 0);
	ck_assert_uint_eq(cap_emit__prev_delivered(f.st, next.committed), 9);
	/* The estimate of samples not taken is no delivery; a killed
	 * generation's LOSS record is. */
	cap_emit__loss_add(&f.e, CAP_LOSS_DOWN, 100, 200);
	cap_emit__loss_add(&f.e, CAP_LOSS_DIED, 7, 200);
	ck_assert_int_eq(cap_emit__flush_losses(&f.e, 200, true), 0);
	cap_emit__commit(&f.e);
	ck_assert_int_eq(shm_arena__open_prod(f.a, 0, &next), 0);
	ck_assert_uint_eq(cap_emit__prev_delivered(f.st, next.committed), 16);
	free(s);
	fix_free(&f);
}
END_TEST

START_TEST(test_seq_exhaustion)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(1, 1, 8, &size);
	struct shm_msg m;

	fix_init(&f, 1u << 16);
	f.e.seq_last = (1ull << 40) - 2;
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), -EOVERFLOW);
	cap_emit__commit(&f.e);
	m = peek(&f);
	ck_assert_uint_eq(((const struct cpa_sample *)m.data)->seq,
			  ((uint64_t)GEN << 40) | ((1ull << 40) - 1));
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), -EAGAIN);
	free(bs);
	fix_free(&f);
}
END_TEST

START_TEST(test_clock_offset)
{
	struct cap_clock c;
	uint64_t boot, real, conv;

	cap_clock__update(&c);
	boot = clock_ns(CLOCK_BOOTTIME);
	real = clock_ns(CLOCK_REALTIME);
	conv = cap_clock__to_real(&c, boot);
	ck_assert_uint_le(conv > real ? conv - real : real - conv, 10 * 1000 * 1000);
}
END_TEST

START_TEST(test_sys_parsers)
{
	unsigned int cpus[16], maj = 0, min = 0;

	ck_assert_int_eq(cap_sys_parse_cpulist("0-3,5,7-8\n", cpus, 16), 7);
	ck_assert_uint_eq(cpus[3], 3);
	ck_assert_uint_eq(cpus[4], 5);
	ck_assert_uint_eq(cpus[6], 8);
	ck_assert_int_eq(cap_sys_parse_cpulist("0\n", cpus, 16), 1);
	ck_assert_int_eq(cap_sys_parse_cpulist("0-31", cpus, 16), -E2BIG);
	ck_assert_int_eq(cap_sys_parse_cpulist("3-1", cpus, 16), -EINVAL);
	ck_assert_int_eq(cap_sys_parse_cpulist("x", cpus, 16), -EINVAL);
	ck_assert_int_eq(cap_sys_parse_cpulist("", cpus, 16), -EINVAL);
	ck_assert_int_gt(cap_sys_online_cpus(cpus, 16), 0);

	ck_assert_int_eq(cap_sys_parse_release("6.18.44-fc-v657", &maj, &min), 0);
	ck_assert_uint_eq(maj, 6);
	ck_assert_uint_eq(min, 18);
	ck_assert_int_eq(cap_sys_parse_release("banana", &maj, &min), -EINVAL);
	ck_assert(!cap_sys_ustack_copy_unsafe("5.18.19"));
	ck_assert(cap_sys_ustack_copy_unsafe("5.19.0-1-amd64"));
	ck_assert(cap_sys_ustack_copy_unsafe("6.1.0-18-amd64"));
	ck_assert(cap_sys_ustack_copy_unsafe("6.3.13"));
	ck_assert(!cap_sys_ustack_copy_unsafe("6.4.0"));
	ck_assert(!cap_sys_ustack_copy_unsafe("6.18.44-fc-v657"));
	ck_assert(!cap_sys_ustack_copy_unsafe("5.15.0-91-generic"));
	ck_assert(!cap_sys_ustack_copy_unsafe("weird"));

	ck_assert_int_eq(cap_sys_tgid_of(getpid()), getpid());
	ck_assert_int_lt(cap_sys_tgid_of(0), 0);
}
END_TEST

/* A big batch is published in slices of at most a quarter of ring 0, so the
 * consumer can start on it (and free room) before the poll batch ends. */
START_TEST(test_commit_by_bytes)
{
	struct fix f;
	size_t size;
	struct cpa_bpf_sample *bs = bpf_sample(4, 4, STACK_MAX, &size);
	uint64_t slice;
	unsigned int i, seen = 0;
	struct shm_msg m;

	fix_init(&f, 1u << 20);
	slice = f.e.commit_bytes;
	ck_assert_uint_eq(slice, (1u << 20) / 4);
	/* Just under one slice: nothing visible yet. */
	for (i = 0; f.e.batch_bytes + sizeof(struct cpa_sample) + 64 + STACK_MAX < slice; i++)
		ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	ck_assert_uint_eq(shm_ring__pending_sc(&f.cons), 0);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_OUT), 0);
	/* The record crossing the slice size publishes the whole slice. */
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	i++;
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_OUT), i);
	ck_assert_uint_eq(f.e.batch_recs, 0);
	while (shm_ring__peek_sc(&f.cons, &m) == 0)
		seen++;
	ck_assert_uint_eq(seen, i);
	/* The rest goes out at the end of the batch, as before. */
	ck_assert_int_eq(cap_emit__record(&f.e, bs, size), 0);
	ck_assert_uint_eq(shm_ring__pending_sc(&f.cons), 0);
	cap_emit__commit(&f.e);
	ck_assert_int_eq(shm_ring__peek_sc(&f.cons, &m), 0);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_CNT_OUT), i + 1);

	/* A small ring commits in quarters of itself. */
	fix_free(&f);
	fix_init(&f, 1u << 16);
	ck_assert_uint_eq(f.e.commit_bytes, (1u << 16) / 4);
	free(bs);
	fix_free(&f);
}
END_TEST

/* The adaptive poll deadline (capture's idle cost and batch size). */
START_TEST(test_poll_deadline)
{
	const uint64_t ms = 1000000;
	int t = CAP_POLL_FLOW_MS;

	/* Nothing arrives: doubles up to the one-second cap, and stays. */
	t = cap_poll_next_ms(CAP_POLL_MIN_MS, 0, 20 * ms);
	ck_assert_int_eq(t, 2 * CAP_POLL_MIN_MS);
	t = CAP_POLL_MIN_MS;
	for (int i = 0; i < 10; i++)
		t = cap_poll_next_ms(t, 0, (uint64_t)t * ms);
	ck_assert_int_eq(t, CAP_POLL_MAX_MS);
	ck_assert_int_eq(cap_poll_next_ms(CAP_POLL_MAX_MS, 0, 1000 * ms), CAP_POLL_MAX_MS);
	ck_assert_int_eq(cap_poll_next_ms(600, 0, 600 * ms), CAP_POLL_MAX_MS);
	ck_assert_int_eq(cap_poll_next_ms(CAP_POLL_MAX_MS, -4, 1 * ms), CAP_POLL_MAX_MS);
	/* Samples flow: the time CAP_POLL_BATCH of them take at that rate. */
	ck_assert_int_eq(cap_poll_next_ms(CAP_POLL_MAX_MS, 8000, 1000 * ms),
			 CAP_POLL_BATCH * 1000 / 8000);
	/* ... up to a second: at 1000 Hz on 2 CPUs one poll per tick. */
	ck_assert_int_eq(cap_poll_next_ms(CAP_POLL_MAX_MS, 2000, 1000 * ms), CAP_POLL_FLOW_MS);
	/* Slow flow: fed at least every CAP_POLL_FLOW_MS. */
	ck_assert_int_eq(cap_poll_next_ms(CAP_POLL_MAX_MS, 1, 1000 * ms), CAP_POLL_FLOW_MS);
	/* A burst: never below the floor. */
	ck_assert_int_eq(cap_poll_next_ms(100, 100000, 10 * ms), CAP_POLL_MIN_MS);
	ck_assert_int_le(CAP_POLL_MAX_MS, 1000); /* the heartbeat is stamped per poll */
}
END_TEST

/* A python3 with two functions f0 and f1 made by exec (file "<string>"):
 * *ret_minor, their code objects' addresses; its stdin kept open in *ret_in
 * (closed: it exits). 0 when there is no python3. */
static pid_t py_codes(unsigned int *ret_minor, uint64_t code[2], int *ret_in)
{
	static const char script[] = "import sys\n"
				     "exec('def f0(): pass\\ndef f1(): pass')\n"
				     "print(sys.version_info[1], id(f0.__code__), id(f1.__code__),"
				     " flush=True)\n"
				     "sys.stdin.read()\n";
	char line[256];
	pid_t pid = py_child(script, line, sizeof(line), ret_in);

	if (pid && sscanf(line, "%u %" SCNu64 " %" SCNu64, ret_minor, &code[0], &code[1]) != 3) {
		close(*ret_in);
		waitpid(pid, NULL, 0);
		return 0;
	}
	return pid;
}

/* ring 0 after one sample through cap_pyname + cap_emit: the code objects'
 * CPA_REC_PYCODE records (codes seen: their bits in *ret_seen), then the
 * sample; every seq above the one before. */
static int pycode_records(struct fix *f, struct cap_pyname *pn, struct cpa_bpf_sample *bs,
			  size_t size, const uint64_t code[2], unsigned int *ret_seen)
{
	uint64_t last = 0, seq;
	int n = 0;

	cap_pyname__sample(pn, &f->e, bs, size);
	ck_assert_int_eq(cap_emit__record(&f->e, bs, size), 0);
	cap_emit__commit(&f->e);
	*ret_seen = 0;
	for (;;) {
		struct shm_msg m = peek(f);
		struct cpa_pycode c;
		const char *b;

		memcpy(&seq, m.data, 8);
		ck_assert_uint_gt(seq, last);
		last = seq;
		if (m.type == CPA_REC_SAMPLE)
			break;
		ck_assert_uint_eq(m.type, CPA_REC_PYCODE);
		ck_assert_uint_ge(m.len, sizeof(c));
		memcpy(&c, m.data, sizeof(c));
		ck_assert_uint_eq(cpa_rec_pycode_size(&c), m.len);
		ck_assert_uint_eq(c.pid, bs->pid);
		ck_assert_uint_eq(c.py_minor, bs->py_ver & 0xff);
		ck_assert_uint_gt(c.linetab_len, 0);
		b = (const char *)m.data + sizeof(c);
		ck_assert_int_eq(c.qualname_len, 2);
		ck_assert_int_eq(c.filename_len, 8);
		ck_assert(!memcmp(b + 2, "<string>", 8));
		ck_assert(c.code == code[0] || c.code == code[1]);
		ck_assert(!memcmp(b, c.code == code[0] ? "f0" : "f1", 2));
		*ret_seen |= c.code == code[0] ? 1 : 2;
		n++;
	}
	shm_ring__release_sc(&f->cons);
	return n;
}

/* A python3 child with two code objects (py_codes()), cap_pyname and ring 0
 * to send them into, and a sample of both as the BPF side makes it. */
struct py2_fix {
	struct cpa_bpf_sample *bs;
	struct cap_pyname *pn;
	unsigned int minor;
	uint64_t code[2];
	struct fix f;
	size_t size;
	pid_t pid;
	int in;
};

/* false: no python3 with a layout here (skipped, said so as name). */
/* Room without end: the reads of a test not about the budget never stop
 * at it (1 ms of reads is two code objects' on a host at load 27). */
static bool room_always(void *ctx)
{
	(void)ctx;
	return true;
}

static bool py2_fix_init(struct py2_fix *p, const char *name)
{
	struct cpa_bpf_pyframe *pf;

	p->pid = py_codes(&p->minor, p->code, &p->in);
	if (!p->pid) {
		fprintf(stderr, "%s: no python3, skipped\n", name);
		return false;
	}
	if (p->minor < 10 || p->minor > 13) {
		fprintf(stderr, "%s: python3.%u has no layout, skipped\n", name, p->minor);
		close(p->in);
		waitpid(p->pid, NULL, 0);
		return false;
	}
	fix_init(&p->f, 1u << 20);
	ck_assert_int_eq(cap_pyname__new(&p->pn, p->f.st), 0);
	cap_pyname__set_room(p->pn, room_always, NULL, UINT64_MAX);
	p->bs = bpf_sample(0, 0, 0, &p->size);
	p->bs->pid = (uint32_t)p->pid;
	p->bs->py_ver = (uint16_t)(0x0300 | p->minor);
	p->bs->py_status = CPA_BPF_PY_OK;
	p->bs->py_n = 2;
	pf = (struct cpa_bpf_pyframe *)p->bs->stack;
	pf[0] = (struct cpa_bpf_pyframe){.code = p->code[1], .instr = 0};
	pf[1] = (struct cpa_bpf_pyframe){.code = p->code[0] | CPA_BPF_PY_ENTRY, .instr = 0};
	return true;
}

/* The child's exit (its stdin closed), once: in < 0 after. */
static void py2_fix_end(struct py2_fix *p)
{
	if (p->in < 0)
		return;
	close(p->in);
	p->in = -1;
	ck_assert_int_eq(waitpid(p->pid, NULL, 0), p->pid);
}

static void py2_fix_free(struct py2_fix *p)
{
	py2_fix_end(p);
	cap_pyname__free(p->pn);
	free(p->bs);
	fix_free(&p->f);
}

/*
 * cap_pyname: a Python sample's code objects are read from the live process
 * and sent before the sample, once per process (not again for the next
 * sample; again after its exit or exec); a gone process's are not sent and
 * its sample still is. Sends ask for fast polls (cap_pyname__soon()) until
 * the process's exit or exec.
 */
START_TEST(test_pyname)
{
	struct py2_fix p;
	unsigned int seen;

	if (!py2_fix_init(&p, "test_pyname"))
		return;
	ck_assert(!cap_pyname__soon(p.pn, clock_ns(CLOCK_MONOTONIC)));
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 2);
	ck_assert_uint_eq(seen, 3);
	ck_assert(cap_pyname__soon(p.pn, clock_ns(CLOCK_MONOTONIC)));
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 0);
	cap_pyname__drop_pid(p.pn, (uint32_t)p.pid + 1);
	ck_assert(cap_pyname__soon(p.pn, clock_ns(CLOCK_MONOTONIC)));
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 0);
	/* Its exit (or exec) ends the fast polls it started. */
	cap_pyname__drop_pid(p.pn, (uint32_t)p.pid);
	ck_assert(!cap_pyname__soon(p.pn, clock_ns(CLOCK_MONOTONIC)));
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 2);
	ck_assert(cap_pyname__soon(p.pn, clock_ns(CLOCK_MONOTONIC)));
	py2_fix_end(&p);
	cap_pyname__drop_pid(p.pn, (uint32_t)p.pid);
	ck_assert(!cap_pyname__soon(p.pn, clock_ns(CLOCK_MONOTONIC)));
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 0);
	ck_assert(!cap_pyname__soon(p.pn, clock_ns(CLOCK_MONOTONIC)));
	/* The stage counters `cpa ctl` shows. */
	ck_assert_uint_eq(shm_stage__cnt(p.f.st, CAP_CNT_PYCODE_SENT), 4);
	ck_assert_uint_ge(shm_stage__cnt(p.f.st, CAP_CNT_PYCODE_FAILED), 1);
	ck_assert_uint_eq(shm_stage__cnt(p.f.st, CAP_CNT_PYCODE_DEFERRED), 0);
	py2_fix_free(&p);
}
END_TEST

/*
 * The resend's age (CAP_PYNAME_RESEND) across the send stamp's wrap: a code
 * object sent, then not sampled while 2^20 records went out (the 16-bit
 * stamp of records / 16 wrapped once, to the same value), is sent again when
 * sampled, like one 1024 records old; one sampled again sooner is not.
 */
START_TEST(test_pyname_wrap)
{
	struct py2_fix p;
	unsigned int seen;

	if (!py2_fix_init(&p, "test_pyname_wrap"))
		return;
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 2);
	cap_pyname__count_sends(p.pn, CAP_PYNAME_RESEND / 2);
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 0);
	/* 2^20 records after the send, with the two of it */
	cap_pyname__count_sends(p.pn, (1u << 20) - CAP_PYNAME_RESEND / 2 - 2);
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 2);
	ck_assert_uint_eq(seen, 3);
	ck_assert_int_eq(pycode_records(&p.f, p.pn, p.bs, p.size, p.code, &seen), 0);
	py2_fix_free(&p);
}
END_TEST

#define BUDGET_CODES 1024 /* ~8 ms of reads at bench_pyname's ~7.5 us each */

/* One poll of cap_pyname over the samples bs[0..n): ring 0 must hold each
 * sample exactly as cap_emit alone makes it (ref[i]), after the code objects'
 * records (each named f<its index in code[]>, marked in sent[]). Their count. */
static unsigned int budget_poll(struct fix *f, struct cap_pyname *pn, struct cpa_bpf_sample **bs,
				size_t size, unsigned int n, uint8_t *const *ref,
				const uint32_t *ref_len, const uint64_t *code, uint8_t *sent)
{
	unsigned int pycodes = 0, samples = 0;
	struct shm_msg m;

	cap_pyname__poll(pn);
	for (unsigned int i = 0; i < n; i++) {
		cap_pyname__sample(pn, &f->e, bs[i], size);
		ck_assert_int_eq(cap_emit__record(&f->e, bs[i], size), 0);
		cap_emit__commit(&f->e);
		while (shm_ring__peek_sc(&f->cons, &m) == 0) {
			struct cpa_pycode c;
			unsigned int k;
			char name[16];

			if (m.type == CPA_REC_SAMPLE) {
				ck_assert_uint_eq(m.len, ref_len[samples]);
				/* All but the sequence number (the first 8 bytes). */
				ck_assert(!memcmp((const uint8_t *)m.data + 8, ref[samples] + 8,
						  m.len - 8));
				samples++;
				continue;
			}
			ck_assert_uint_eq(m.type, CPA_REC_PYCODE);
			memcpy(&c, m.data, sizeof(c));
			for (k = 0; k < BUDGET_CODES && code[k] != c.code; k++)
				;
			ck_assert_uint_lt(k, BUDGET_CODES);
			sent[k] = 1;
			snprintf(name, sizeof(name), "f%u", k);
			ck_assert_uint_eq(c.qualname_len, strlen(name));
			ck_assert(!memcmp((const char *)m.data + sizeof(c), name, strlen(name)));
			pycodes++;
		}
		shm_ring__release_sc(&f->cons);
	}
	ck_assert_uint_eq(samples, n);
	return pycodes;
}

static unsigned int count_sent(const uint8_t *sent)
{
	unsigned int n = 0;

	for (unsigned int i = 0; i < BUDGET_CODES; i++)
		n += sent[i];
	return n;
}

/* A python3 child with BUDGET_CODES distinct functions, sampled at once: NS
 * samples of 64 frames, every code object new, and what cap_emit alone makes
 * of each sample (ring 0 must hold exactly that after the records). */
enum { NS = BUDGET_CODES / CPA_BPF_MAX_PYFRAMES };
struct budget_fix {
	struct cpa_bpf_sample *bs[NS];
	uint8_t *ref[NS], sent[BUDGET_CODES];
	uint32_t ref_len[NS];
	uint64_t code[BUDGET_CODES];
	size_t size;
	pid_t pid;
	int in;
	struct fix f; /* ring 0 and the stage counters */
	struct cap_pyname *pn;
};

/* false: no python3 with a layout here (skipped, said so as name). */
static bool budget_fix_init(struct budget_fix *b, const char *name)
{
	static const char script[] =
		"import sys\n"
		"for i in range(1024): exec(f'def f{i}(): pass', globals())\n"
		"print(sys.version_info[1], *[id(globals()[f'f{i}'].__code__) for i in range(1024)],"
		" flush=True)\n"
		"sys.stdin.read()\n";
	size_t lsize = 64 << 10;
	char *line = malloc(lsize), *p;
	unsigned int minor;
	struct fix f0;

	memset(b, 0, sizeof(*b));
	ck_assert_ptr_nonnull(line);
	b->pid = py_child(script, line, lsize, &b->in);
	if (!b->pid) {
		fprintf(stderr, "%s: no python3, skipped\n", name);
		free(line);
		return false;
	}
	minor = (unsigned int)strtoul(line, &p, 10);
	for (unsigned int i = 0; i < BUDGET_CODES; i++)
		b->code[i] = strtoull(p, &p, 10);
	free(line);
	if (minor < 10 || minor > 13) {
		fprintf(stderr, "%s: python3.%u has no layout, skipped\n", name, minor);
		close(b->in);
		waitpid(b->pid, NULL, 0);
		return false;
	}
	ck_assert_uint_ne(b->code[BUDGET_CODES - 1], 0);
	fix_init(&f0, 1u << 20);
	for (unsigned int i = 0; i < NS; i++) {
		struct cpa_bpf_pyframe *pf;
		struct shm_msg m;

		b->bs[i] = bpf_sample(0, 0, 0, &b->size);
		b->bs[i]->pid = (uint32_t)b->pid;
		b->bs[i]->py_ver = (uint16_t)(0x0300 | minor);
		b->bs[i]->py_status = CPA_BPF_PY_OK;
		b->bs[i]->py_n = CPA_BPF_MAX_PYFRAMES;
		pf = (struct cpa_bpf_pyframe *)b->bs[i]->stack;
		for (unsigned int j = 0; j < CPA_BPF_MAX_PYFRAMES; j++)
			pf[j] = (struct cpa_bpf_pyframe){
				.code = b->code[i * CPA_BPF_MAX_PYFRAMES + j]};
		ck_assert_int_eq(cap_emit__record(&f0.e, b->bs[i], b->size), 0);
		cap_emit__commit(&f0.e);
		m = peek(&f0);
		ck_assert_uint_eq(m.type, CPA_REC_SAMPLE);
		b->ref[i] = malloc(m.len);
		ck_assert_ptr_nonnull(b->ref[i]);
		memcpy(b->ref[i], m.data, m.len);
		b->ref_len[i] = m.len;
		shm_ring__release_sc(&f0.cons);
	}
	fix_free(&f0);
	fix_init(&b->f, 1u << 20);
	ck_assert_int_eq(cap_pyname__new(&b->pn, b->f.st), 0);
	return true;
}

/* One poll over the samples: the code objects sent in it. */
static unsigned int budget_fix_poll(struct budget_fix *b)
{
	return budget_poll(&b->f, b->pn, b->bs, b->size, NS, b->ref, b->ref_len, b->code, b->sent);
}

static void budget_fix_free(struct budget_fix *b)
{
	close(b->in);
	ck_assert_int_eq(waitpid(b->pid, NULL, 0), b->pid);
	cap_pyname__free(b->pn);
	for (unsigned int i = 0; i < NS; i++) {
		free(b->bs[i]);
		free(b->ref[i]);
	}
	fix_free(&b->f);
}

/*
 * cap_pyname's budget: a Python with BUDGET_CODES distinct functions sampled
 * at once (16 samples of 64 frames, every code object new) is more than a
 * poll's CAP_PYNAME_BUDGET_NS of reads. The records stop there: the samples
 * past it go on unchanged (symd names their frames by its own read) and are
 * counted as deferred; the next polls send the rest (the set of what was
 * sent is direct-mapped: a code object evicted by another is sent again).
 */
START_TEST(test_pyname_budget)
{
	unsigned int first, polls;
	struct budget_fix b;

	if (!budget_fix_init(&b, "test_pyname_budget"))
		return;
	first = budget_fix_poll(&b);
	/* The reads stopped at the budget, the samples after went on. */
	ck_assert_uint_ge(first, 1);
	ck_assert_uint_lt(first, BUDGET_CODES);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_SENT), first);
	ck_assert_uint_ge(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_DEFERRED), 1);
	ck_assert_uint_le(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_DEFERRED), NS);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_PAST_BUDGET), 0);
	ck_assert_uint_eq(count_sent(b.sent), first);
	/* The next polls send the rest (at least a read each). */
	for (polls = 1; count_sent(b.sent) < BUDGET_CODES && polls < BUDGET_CODES; polls++)
		ck_assert_uint_ge(budget_fix_poll(&b), 1);
	ck_assert_uint_eq(count_sent(b.sent), BUDGET_CODES);
	ck_assert_uint_ge(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_SENT), BUDGET_CODES);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_FAILED), 0);
	fprintf(stderr, "test_pyname_budget: %u of %u code objects in the first poll, all in %u\n",
		first, BUDGET_CODES, polls);
	budget_fix_free(&b);
}
END_TEST

/* A room function as capture's (cap_pyname__set_room()): room for the first
 * `yes` asks, none after; the records sent when it first said no. */
struct room {
	struct shm_stage *st;
	unsigned int asked, yes;
	uint64_t sent_at_no;
};

static bool room_fn(void *ctx)
{
	struct room *r = ctx;

	if (r->asked++ < r->yes)
		return true;
	if (r->asked == r->yes + 1)
		r->sent_at_no = shm_stage__cnt(r->st, CAP_CNT_PYCODE_SENT);
	return false;
}

/*
 * Past the base budget, reads go on while the buffers have room (capture:
 * the BPF ring buffer nearly empty), each read asked for: the same 1024 code
 * objects as test_pyname_budget all go in one poll while there is room, none
 * deferred; when the room ends, the reads stop there and the samples after
 * go on unchanged, deferred, as at the base budget. Every sample still
 * follows its records and is what cap_emit alone makes of it (budget_poll()).
 */
START_TEST(test_pyname_room)
{
	struct room r = {.yes = UINT32_MAX};
	uint64_t sent0, past0;
	unsigned int first, again;
	struct budget_fix b;

	if (!budget_fix_init(&b, "test_pyname_room"))
		return;
	r.st = b.f.st;
	cap_pyname__set_room(b.pn, room_fn, &r, UINT64_MAX);
	first = budget_fix_poll(&b);
	ck_assert_uint_eq(first, BUDGET_CODES);
	ck_assert_uint_eq(count_sent(b.sent), BUDGET_CODES);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_DEFERRED), 0);
	/* Those past the base budget were asked for, one by one. */
	ck_assert_uint_ge(r.asked, 1);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_PAST_BUDGET), r.asked);
	fprintf(stderr, "test_pyname_room: %u of %u code objects past the base budget\n", r.asked,
		BUDGET_CODES);

	/* BUDGET_CODES = CAP_PYNAME_RESEND records later, the last sample's
	 * code objects are not sent again, the first's first ones are: symd may
	 * have let them go (cap_pyname.h). */
	ck_assert_uint_eq(BUDGET_CODES, CAP_PYNAME_RESEND);
	ck_assert_uint_eq(budget_poll(&b.f, b.pn, &b.bs[NS - 1], b.size, 1, &b.ref[NS - 1],
				      &b.ref_len[NS - 1], b.code, b.sent),
			  0);
	again = budget_poll(&b.f, b.pn, &b.bs[0], b.size, 1, &b.ref[0], &b.ref_len[0], b.code,
			    b.sent);
	ck_assert_uint_ge(again, 1);
	ck_assert_uint_le(again, CPA_BPF_MAX_PYFRAMES);
	/* Sampled again, it settles within a few polls: nothing more to send.
	 * Not always at the next poll: each resend moves the send count on, past
	 * the stamp of another of its code objects sent a little later in the
	 * first poll (how many of them share a stamp depends on the order and
	 * on the 4-way set's evictions, on real addresses: ASLR decides). */
	for (int i = 0;; i++) {
		unsigned int more = budget_poll(&b.f, b.pn, &b.bs[0], b.size, 1, &b.ref[0],
						&b.ref_len[0], b.code, b.sent);

		if (!more)
			break;
		ck_assert_msg(i < 8 && more <= CPA_BPF_MAX_PYFRAMES,
			      "poll %d of the first sample sent %u again (%u at the resend)", i,
			      more, again);
	}

	/* As if the process exec'd (all of it to read again), with room for
	 * 50 reads past the base budget, then none. */
	cap_pyname__drop_pid(b.pn, (uint32_t)b.pid);
	memset(b.sent, 0, sizeof(b.sent));
	sent0 = shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_SENT);
	past0 = shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_PAST_BUDGET);
	r = (struct room){.st = b.f.st, .yes = 50};
	cap_pyname__set_room(b.pn, room_fn, &r, UINT64_MAX);
	first = budget_fix_poll(&b);
	ck_assert_uint_lt(first, BUDGET_CODES);
	ck_assert_uint_gt(r.asked, r.yes);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_PAST_BUDGET) - past0, r.yes);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_SENT), r.sent_at_no);
	ck_assert_uint_eq(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_SENT) - sent0, first);
	ck_assert_uint_ge(shm_stage__cnt(b.f.st, CAP_CNT_PYCODE_DEFERRED), 1);
	/* A max of 0: the base budget alone, the room not asked. */
	r = (struct room){.st = b.f.st, .yes = UINT32_MAX};
	cap_pyname__set_room(b.pn, room_fn, &r, 0);
	ck_assert_uint_lt(budget_fix_poll(&b), BUDGET_CODES);
	ck_assert_uint_eq(r.asked, 0);
	budget_fix_free(&b);
}
END_TEST

static Suite *capture_suite(void)
{
	Suite *s = suite_create("capture");
	TEST_TCASE(s, "emit", test_sample_conversion, test_sample_edge_cases, test_probe_sample,
		   test_probe_detached_rows, test_ustack_refused_flagged, test_degrade_then_drop,
		   test_oversize_degrades, test_rate_limit, test_offcpu_conversion,
		   test_loss_aggregation, test_delivered_gauges, test_seq_exhaustion,
		   test_clock_offset, test_sys_parsers, test_commit_by_bytes, test_poll_deadline,
		   test_pyname, test_pyname_budget, test_pyname_room, test_pyname_wrap);
	return s;
}

int main(void)
{
	return test_run_suite(capture_suite());
}
