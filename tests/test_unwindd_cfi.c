// SPDX-License-Identifier: MIT
/*
 * unwindd end to end over the DWARF seam: a real -O2 -fomit-frame-pointer
 * process (the CFI fixture, run under ptrace by tests/fixtures/cfi) is
 * stopped at a known stack; its registers and stack copy become a SAMPLE as
 * capture would send it; the unwindd stage resolves it through its own maps
 * cache (live /proc/PID/maps, build-ids, lazily built CFI tables) and the
 * FRAMES it emits name the expected functions. The same sample without its
 * stack bytes falls back to the (here useless) FP chain.
 *
 * Needs ptrace of a child (exit 77 when that is not allowed).
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "test_util.h"
#include "tests/fixtures/cfi/cfi_capture.h"
#include "unwindd/unwindd.h"

#define FIXTURE	  CFI_FIXTURE_DIR "/cfi_fixture"
#define NEAR_WRAP (0ull - 3 * 4096 + 8)

struct env {
	struct shm_arena *a;
	struct shm_stage *st;
	struct shm_ring_prod cap;
	struct shm_ring_cons in;
	struct shm_ring_prod out;
	struct shm_ring_cons sym;
	struct unwindd *u;
};

static void env_init(struct env *e)
{
	struct unwindd_opts o = {.epoch = 1};
	struct shm_layout l;

	memset(e, 0, sizeof(*e));
	shm_layout__default(&l, CPA_MAX_STACK_COPY, 8);
	l.initial_pos = NEAR_WRAP;
	ck_assert_int_eq(shm_arena__create(&l, &e->a), 0);
	e->st = shm_arena__stage(e->a, SHM_STAGE_UNWINDD);
	ck_assert_int_eq(shm_arena__open_prod(e->a, SHM_RING_CAPTURE, &e->cap), 0);
	ck_assert_int_eq(shm_arena__open_cons(e->a, SHM_RING_UNWIND, &e->sym), 0);
	ck_assert_int_eq(shm_arena__open_cons(e->a, SHM_RING_CAPTURE, &e->in), 0);
	ck_assert_int_eq(shm_arena__open_prod(e->a, SHM_RING_UNWIND, &e->out), 0);
	ck_assert_int_eq(unwindd__new(&o, &e->in, &e->out, e->st, &e->u), 0);
}

static void env_free(struct env *e)
{
	unwindd__free(e->u);
	shm_arena__free(e->a);
}

/*
 * A SAMPLE as capture sends it for an FP-less process: the kernel's FP chain
 * is the ip and, past it, garbage (here: the ip again), n_ufp entries. The
 * first slen bytes of the stack copy go along; 0 = a degraded sample.
 */
static void push_n(struct env *e, uint64_t seq, pid_t pid, pid_t tid, const struct cap_sample *s,
		   uint32_t slen, unsigned int n_ufp)
{
	uint32_t len = (uint32_t)(sizeof(struct cpa_sample) + 8 * n_ufp + slen);
	struct cpa_sample *r;
	uint8_t *p;

	ck_assert_int_eq(shm_ring__reserve_sp(&e->cap, len, CPA_REC_SAMPLE, (void **)&r), 0);
	memset(r, 0, sizeof(*r));
	r->seq = seq;
	r->pid = (uint32_t)pid;
	r->tid = (uint32_t)tid;
	r->weight = 1;
	r->flags = CPA_SF_USER_REGS | (slen ? 0 : CPA_SF_DEGRADED);
	memcpy(&r->regs, &s->regs, sizeof(r->regs));
	r->stack_sp = s->base;
	r->n_ufp = (uint16_t)n_ufp;
	r->stack_len = slen;
	p = (uint8_t *)(r + 1);
	for (unsigned int i = 0; i < n_ufp; i++)
		memcpy(p + 8 * i, &s->regs.ip, 8);
	memcpy(p + 8 * n_ufp, s->bytes, slen);
	shm_ring__commit_sp(&e->cap);
}

static void push(struct env *e, uint64_t seq, pid_t pid, pid_t tid, const struct cap_sample *s,
		 bool with_stack)
{
	push_n(e, seq, pid, tid, s, with_stack ? s->len : 0, 1);
}

/* Name of an output frame, through the fixture helper's own view of the
 * process (independent of unwindd's maps cache). */
static const char *frame_name(struct cap_proc *cp, const struct cpa_uframe *f, char *buf,
			      size_t len)
{
	uint64_t look = (f->flags & CPA_UF_LEAF) ? f->pc : f->pc - 1;
	struct cpa_uframe t = *f;
	struct unw_loc loc;
	const char *name, *path, *base;

	if (cap_find(cp, look, &loc) < 0)
		return "?";
	/* unwindd's offset for the frame is the helper's, undone by the -1. */
	ck_assert_uint_eq(f->offset, loc.file_off + ((f->flags & CPA_UF_LEAF) ? 0 : 1));
	t.module_id = loc.module_id;
	name = cap_proc__sym(cp, &t);
	if (name)
		return name;
	path = cap_proc__path(cp, loc.module_id);
	base = path ? strrchr(path, '/') : NULL;
	snprintf(buf, len, "[%s]", base ? base + 1 : "?");
	return buf;
}

START_TEST(test_fp_less_chain_through_stage)
{
	static char names[4096];
	char *argv[] = {(char *)"cfi_fixture", (char *)"chain", NULL};
	struct cap_proc *cp = calloc(1, sizeof(*cp));
	const struct cpa_frames *f[3] = {NULL, NULL, NULL};
	const struct cpa_uframe *uf;
	struct cap_sample s;
	struct shm_msg m;
	struct env e;
	unsigned int i, nf = 0, mods = 0;
	pid_t pid, tid;
	char *p = names;

	ck_assert_ptr_nonnull(cp);
	ck_assert_int_eq(cap_spawn(FIXTURE, argv, &pid), 0);
	ck_assert_int_eq(cap_run_to_trap(pid, &tid), 0);
	ck_assert_int_eq(cap_proc__load(cp, pid), 0);
	ck_assert_int_eq(cap_sample__take(cp, tid, CPA_MAX_STACK_COPY, &s), 0);

	/* The process stays stopped while unwindd reads its /proc entries. */
	env_init(&e);
	push(&e, 10, pid, tid, &s, true);
	push(&e, 11, pid, tid, &s, false);
	push_n(&e, 12, pid, tid, &s, 16, 3); /* copy too short, FP chain longer */
	ck_assert_int_eq(unwindd__batch(e.u, UNWINDD_BATCH), 3);

	while (shm_ring__peek_sc(&e.sym, &m) == 0) {
		if (m.type == CPA_REC_MODULE) {
			const struct cpa_module_def *d = m.data;

			ck_assert(cpa_rec_module_ok(d, m.len));
			ck_assert_uint_eq(d->pid, (uint32_t)pid);
			if (d->kind == CPA_MOD_FILE)
				ck_assert_uint_gt(d->build_id_len, 0);
			mods++;
		} else if (m.type == CPA_REC_FRAMES) {
			ck_assert_uint_lt(nf, 3);
			ck_assert(cpa_rec_frames_ok(m.data, m.len));
			f[nf++] = m.data;
		}
	}
	ck_assert_uint_eq(nf, 3);
	ck_assert_uint_ge(mods, 3); /* fixture, libcfifix.so, libc */

	/* With the stack copy: the CFI walk, to the outermost frame. */
	ck_assert_uint_eq(f[0]->stop_reason, CPA_STOP_END);
	ck_assert(!(f[0]->flags & CPA_SF_UNWIND_PARTIAL));
	uf = (const void *)(f[0] + 1);
	for (i = 0; i < f[0]->n_uframes; i++) {
		char buf[300];

		p += snprintf(p, (size_t)(names + sizeof(names) - p), "%s%s", i ? " " : "",
			      frame_name(cp, &uf[i], buf, sizeof(buf)));
	}
	ck_assert_msg(strncmp(names, "stop_here chain_d lib_c lib_b chain_a main", 42) == 0,
		      "frames: %s", names);
	ck_assert(uf[0].flags & CPA_UF_LEAF);

	/* Without it: the FP chain, which for this code is the ip alone. */
	ck_assert_uint_eq(f[1]->stop_reason, CPA_STOP_FP);
	ck_assert_uint_eq(f[1]->n_uframes, 1);

	/* A copy too short: the partial CFI walk stands (stop_here chain_d,
	 * READ), not the longer garbage FP chain, and nothing is marked FP. */
	ck_assert_uint_eq(f[2]->stop_reason, CPA_STOP_READ);
	ck_assert(f[2]->flags & CPA_SF_UNWIND_PARTIAL);
	ck_assert_uint_eq(f[2]->n_uframes, 2);
	uf = (const void *)(f[2] + 1);
	{
		char b0[300], b1[300];

		ck_assert_str_eq(frame_name(cp, &uf[0], b0, sizeof(b0)), "stop_here");
		ck_assert_str_eq(frame_name(cp, &uf[1], b1, sizeof(b1)), "chain_d");
	}
	ck_assert(!(uf[1].flags & CPA_UF_FP));
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_FP_DEEPER), 1);

	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_STOP_END), 1);
	ck_assert_uint_ge(shm_stage__cnt(e.st, UNW_CNT_FRAMES), 7);
	/* The tables built for the walk are accounted for. */
	unwindd__tick(e.u, clock_ns(CLOCK_MONOTONIC));
	ck_assert_uint_gt(shm_stage__cnt(e.st, UNW_CNT_CACHE_BYTES), 64 * 1024);

	shm_ring__release_sc(&e.sym);
	env_free(&e);
	cap_kill(pid);
	cap_sample__done(&s);
	cap_proc__done(cp);
	free(cp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("unwindd_cfi");
	TCase *tc;
	char *argv[] = {(char *)"cfi_fixture", (char *)"chain", NULL};
	pid_t pid = 0, tid;

	if (access(FIXTURE, X_OK) != 0) {
		fprintf(stderr, "test_unwindd_cfi: %s not built\n", FIXTURE);
		return EXIT_FAILURE;
	}
	/* Probe: can we trace a child here (containers may forbid ptrace)? */
	if (cap_spawn(FIXTURE, argv, &pid) < 0 || cap_run_to_trap(pid, &tid) < 0) {
		if (pid > 0)
			cap_kill(pid);
		fprintf(stderr, "test_unwindd_cfi: cannot ptrace a child: skipped\n");
		return TEST_SKIP;
	}
	cap_kill(pid);

	tc = TEST_TCASE(s, "seam", test_fp_less_chain_through_stage);
	tcase_set_timeout(tc, 60);
	return test_run_suite(s);
}
