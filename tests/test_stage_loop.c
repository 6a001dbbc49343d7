// SPDX-License-Identifier: MIT
/*
 * The stage skeleton's shm/ half over a real arena: shm_stage__attach's
 * config check, shm_stage__run (RUNNING, batches, DRAIN, SIGTERM, busy
 * retry, hard errors; a poll source with STOP), the rate limit, the
 * pending LOSS table and what a consumer killed at stop held.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "shm/counters.h"
#include "shm/dedup.h"
#include "shm/fault.h"
#include "shm/loss.h"
#include "shm/stage_loop.h"
#include "test_util.h"

static struct shm_arena *arena_new(void)
{
	struct shm_layout l;
	struct shm_arena *a;

	shm_layout__default(&l, 4096, 16);
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	return a;
}

START_TEST(test_attach_checks_config)
{
	struct shm_arena *a = arena_new(), *b = NULL;
	struct shm_stage *st = NULL;
	int fd;

	fd = dup(shm_arena__fd(a));
	ck_assert_int_eq(shm_stage__attach(fd, SHM_STAGE_SYMD, &b, &st), 0);
	ck_assert_ptr_eq(st, shm_arena__stage(b, SHM_STAGE_SYMD));
	shm_arena__free(b);

	/* A config block of another build is refused, the fd stays ours. */
	shm_arena__config(a)->version = CPA_CONFIG_VERSION + 1;
	fd = dup(shm_arena__fd(a));
	ck_assert_int_eq(shm_stage__attach(fd, SHM_STAGE_SYMD, &b, &st), -EPROTO);
	close(fd);
	shm_arena__free(a);
}
END_TEST

/* A stage object that takes the input records and counts what it saw. */
struct obj {
	struct shm_ring_cons *in;
	int busy;	/* return -ENOBUFS this many times first */
	int fail;	/* return this error from the batch (0: none) */
	uint64_t taken; /* records */
	unsigned int ticks;
	volatile sig_atomic_t *term; /* set after the first records (SIGTERM) */
};

static int obj_batch(void *p, unsigned int max)
{
	struct obj *o = p;
	struct shm_msg m[16];
	int n;

	if (o->fail)
		return o->fail;
	if (o->busy > 0) {
		o->busy--;
		return -ENOBUFS;
	}
	n = shm_ring__peek_batch_sc(o->in, m, max < 16 ? max : 16);
	if (n > 0) {
		o->taken += (uint64_t)n;
		shm_ring__release_sc(o->in);
		if (o->term)
			*o->term = 1;
	}
	return n;
}

static int obj_tick(void *p, uint64_t now_ns)
{
	(void)now_ns;
	((struct obj *)p)->ticks++;
	return 0;
}

struct fixture {
	struct shm_arena *a;
	struct shm_stage *st;
	struct shm_ring_prod out;
	struct shm_ring_cons in;
	struct obj o;
	struct shm_stage_loop l;
	volatile sig_atomic_t term;
};

static void fixture_init(struct fixture *f, unsigned int records)
{
	memset(f, 0, sizeof(*f));
	f->a = arena_new();
	f->st = shm_arena__stage(f->a, SHM_STAGE_UNWINDD);
	ck_assert_int_eq(shm_arena__open_prod(f->a, SHM_RING_CAPTURE, &f->out), 0);
	ck_assert_int_eq(shm_arena__open_cons(f->a, SHM_RING_CAPTURE, &f->in), 0);
	for (unsigned int i = 0; i < records; i++) {
		void *p;

		ck_assert_int_eq(shm_ring__reserve_sp(&f->out, 8, CPA_REC_SAMPLE, &p), 0);
		memset(p, 0, 8);
	}
	shm_ring__commit_sp(&f->out);
	f->o.in = &f->in;
	f->l = (struct shm_stage_loop){
		.st = f->st,
		.in = &f->in,
		.obj = &f->o,
		.term = &f->term,
		.batch = obj_batch,
		.tick = obj_tick,
		.clock = CLOCK_MONOTONIC,
		.batch_max = 4,
		.heartbeat_ns = 0,
		.wake_bytes = 1,
		.wait_ms = 10,
		.wait_idle_ms = 20,
		.busy_ms = 1,
	};
}

/* DRAIN: RUNNING, then DRAINING; every record taken, then the loop leaves. */
START_TEST(test_run_drains)
{
	struct fixture f;

	fixture_init(&f, 10);
	f.o.busy = 2;
	__atomic_store_n(&f.st->cmd, SHM_CMD_DRAIN, __ATOMIC_RELEASE);
	ck_assert_int_eq(shm_stage__run(&f.l), 0);
	ck_assert(f.l.draining);
	ck_assert_int_eq(f.l.end, SHM_END_DRAINED);
	ck_assert_int_eq(shm_stage__state(f.st), SHM_STATE_DRAINING);
	ck_assert_uint_eq(f.o.taken, 10);
	ck_assert_int_eq(f.o.busy, 0);
	/* A tick after every batch, the busy ones included: 2 busy, 3 with
	 * records (4 + 4 + 2), 1 empty. */
	ck_assert_uint_eq(f.o.ticks, 6);
	ck_assert_uint_gt(f.st->heartbeat_ns, 0);
	shm_stage__exit(f.st, 0);
	ck_assert_int_eq(shm_stage__state(f.st), SHM_STATE_EXITED);
	shm_arena__free(f.a);
}
END_TEST

/* SIGTERM: the loop leaves after the batch in hand, input left in the ring. */
START_TEST(test_run_sigterm)
{
	struct fixture f;

	fixture_init(&f, 10);
	f.o.term = &f.term;
	ck_assert_int_eq(shm_stage__run(&f.l), 0);
	ck_assert(!f.l.draining);
	ck_assert_int_eq(f.l.end, SHM_END_TERM);
	ck_assert_int_eq(shm_stage__state(f.st), SHM_STATE_RUNNING);
	ck_assert_uint_eq(f.o.taken, 4);
	ck_assert_uint_gt(shm_ring__pending_sc(&f.in), 0);
	shm_arena__free(f.a);
}
END_TEST

/* An idle input: the loop waits (each wait counted) until SIGTERM. */
static struct fixture *alarm_f;

static void on_alarm(int sig)
{
	(void)sig;
	alarm_f->term = 1;
}

START_TEST(test_run_waits_idle)
{
	struct sigaction sa = {.sa_handler = on_alarm};
	struct fixture f;

	fixture_init(&f, 0);
	alarm_f = &f;
	sigemptyset(&sa.sa_mask);
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	alarm(1);
	ck_assert_int_eq(shm_stage__run(&f.l), 0);
	ck_assert_uint_gt(shm_stage__cnt(f.st, SHM_CNT_WAKEUPS), 0);
	ck_assert_uint_eq(f.o.taken, 0);
	signal(SIGALRM, SIG_DFL);
	shm_arena__free(f.a);
}
END_TEST

/* The other side of test_run_idle_no_deadline: a producer, then SIGTERM. */
static void *idle_peer(void *p)
{
	struct fixture *f = p;
	void *ring = shm_arena__ring_mem(f->a, SHM_RING_CAPTURE, NULL), *rec;
	uint64_t wakeups;

	/* Idle: after two waits with a deadline it sleeps without one, flagged. */
	usleep(400 * 1000);
	wakeups = shm_stage__cnt(f->st, SHM_CNT_WAKEUPS);
	ck_assert_uint_le(wakeups, 3);
	ck_assert_uint_eq(shm_stage__cnt(f->st, SHM_SLOT_ASLEEP), 1);
	ck_assert(shm_ring__asleep(ring));
	/* A record and the producer's end-of-batch flush wake it at once. */
	ck_assert_int_eq(shm_ring__reserve_sp(&f->out, 8, CPA_REC_SAMPLE, &rec), 0);
	memset(rec, 0, 8);
	shm_ring__commit_sp(&f->out);
	shm_ring__flush_sp(&f->out);
	for (int i = 0; i < 500 && !__atomic_load_n(&f->o.taken, __ATOMIC_RELAXED); i++)
		usleep(10 * 1000);
	ck_assert_uint_eq(__atomic_load_n(&f->o.taken, __ATOMIC_RELAXED), 1);
	f->term = 1;
	shm_ring__kick(ring);
	return NULL;
}

/* idle_no_deadline: an idle loop sleeps until its producer or a kick wakes it,
 * flagged asleep (no heartbeat needed) meanwhile. */
START_TEST(test_run_idle_no_deadline)
{
	struct fixture f;
	pthread_t t;

	fixture_init(&f, 0);
	f.l.idle_no_deadline = true;
	ck_assert_int_eq(pthread_create(&t, NULL, idle_peer, &f), 0);
	ck_assert_int_eq(shm_stage__run(&f.l), 0);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_int_eq(f.l.end, SHM_END_TERM);
	ck_assert_uint_eq(f.o.taken, 1);
	ck_assert_uint_eq(shm_stage__cnt(f.st, SHM_SLOT_ASLEEP), 0);
	shm_arena__free(f.a);
}
END_TEST

/* A hard error of the batch ends the loop with it; the caller sets FAILED. */
START_TEST(test_run_error)
{
	struct fixture f;

	fixture_init(&f, 1);
	f.o.fail = -EBADMSG;
	ck_assert_int_eq(shm_stage__run(&f.l), -EBADMSG);
	shm_stage__exit(f.st, -EBADMSG);
	ck_assert_int_eq(shm_stage__state(f.st), SHM_STATE_FAILED);
	shm_arena__free(f.a);
}
END_TEST

/* An input source that is not a ring (capture's poll): STOP after the
 * third poll; -EINTR goes on; a tick's error ends the loop. */
struct src {
	struct shm_stage *st;
	unsigned int polls, ticks;
	int tick_err;
};

static int src_poll(void *p)
{
	struct src *s = p;

	if (++s->polls == 2)
		return -EINTR;
	if (s->polls == 3)
		__atomic_store_n(&s->st->cmd, SHM_CMD_STOP, __ATOMIC_RELEASE);
	return 1;
}

static int src_tick(void *p, uint64_t now_ns)
{
	struct src *s = p;

	(void)now_ns;
	s->ticks++;
	return s->tick_err;
}

START_TEST(test_run_poll)
{
	struct shm_arena *a = arena_new();
	struct shm_stage *st = shm_arena__stage(a, SHM_STAGE_CAPTURE);
	volatile sig_atomic_t term = 0;
	struct src s = {.st = st};
	struct shm_stage_loop l = {
		.st = st,
		.obj = &s,
		.term = &term,
		.poll = src_poll,
		.tick = src_tick,
		.clock = CLOCK_MONOTONIC,
	};

	ck_assert_int_eq(shm_stage__run(&l), 0);
	ck_assert_int_eq(l.end, SHM_END_STOPPED);
	ck_assert_uint_eq(s.polls, 3);
	ck_assert_uint_eq(s.ticks, 3);
	ck_assert_uint_gt(st->heartbeat_ns, 0);

	/* SIGTERM from a live parent: TERM, no orphan drain without upstream. */
	__atomic_store_n(&st->cmd, SHM_CMD_NONE, __ATOMIC_RELEASE);
	term = 1;
	ck_assert_int_eq(shm_stage__run(&l), 0);
	ck_assert_int_eq(l.end, SHM_END_TERM);
	ck_assert(!l.orphaned);

	term = 0;
	s = (struct src){.st = st, .tick_err = -EOVERFLOW};
	ck_assert_int_eq(shm_stage__run(&l), -EOVERFLOW);
	ck_assert_uint_eq(s.ticks, 1);
	shm_arena__free(a);
}
END_TEST

START_TEST(test_rate_limit)
{
	struct shm_arena *a = arena_new();
	struct shm_stage *st = shm_arena__stage(a, SHM_STAGE_SYMD);
	struct shm_rate r = {0};
	unsigned int ok = 0;

	for (int i = 0; i < 10; i++)
		ok += shm_rate__admit(&r, st, 5 * NSEC_PER_SEC + (uint64_t)i);
	ck_assert_uint_eq(ok, 10); /* no limit */
	st->rate_limit = 3;
	ok = 0;
	for (int i = 0; i < 10; i++)
		ok += shm_rate__admit(&r, st, 6 * NSEC_PER_SEC + (uint64_t)i);
	ck_assert_uint_eq(ok, 3);
	ck_assert(shm_rate__admit(&r, st, 7 * NSEC_PER_SEC)); /* a new second */
	shm_arena__free(a);
}
END_TEST

struct sink {
	struct cpa_loss got[SHM_LOSS_SLOTS + 1];
	unsigned int n;
	unsigned int room; /* records that fit */
};

static int sink_emit(void *ctx, const struct cpa_loss *l)
{
	struct sink *s = ctx;

	if (s->n >= s->room)
		return -ENOBUFS;
	s->got[s->n++] = *l;
	return 0;
}

START_TEST(test_loss_table)
{
	struct shm_loss_table t = {0};
	struct sink s = {.room = 2};

	/* Same key: aggregated, highest seq and time kept, weight = count
	 * when the loss has none. */
	ck_assert_int_eq(shm_loss__add(&t, 1, SHM_CNT_DROP_RATE, 0, 1, 0, 30, 300), 0);
	ck_assert_int_eq(shm_loss__add(&t, 1, SHM_CNT_DROP_RATE, 0, 2, 0, 20, 200), 0);
	ck_assert_int_eq(shm_loss__add(&t, 2, SHM_CNT_DROP_RING_FULL, 1, 1, 500, 10, 100), 0);
	ck_assert_int_eq(shm_loss__add(&t, 2, SHM_CNT_DROP_RING_FULL, 0, 1, 0, 30, 100), 0);
	ck_assert_uint_eq(shm_loss__pending(&t), 3);

	/* Oldest seq first, equal seqs in arrival order; what does not fit stays. */
	ck_assert_int_eq(shm_loss__flush(&t, sink_emit, &s), -ENOBUFS);
	ck_assert_uint_eq(s.n, 2);
	ck_assert_uint_eq(s.got[0].seq, 10);
	ck_assert_uint_eq(s.got[0].weight, 500);
	ck_assert_uint_eq(s.got[1].seq, 30);
	ck_assert_uint_eq(s.got[1].stage, 1);
	ck_assert_uint_eq(s.got[1].count, 3);
	ck_assert_uint_eq(s.got[1].weight, 3);
	ck_assert_uint_eq(s.got[1].time_ns, 300);
	ck_assert_uint_eq(shm_loss__pending(&t), 1);
	s.room = 3;
	ck_assert_int_eq(shm_loss__flush(&t, sink_emit, &s), 0);
	ck_assert_uint_eq(s.got[2].stage, 2);
	ck_assert_uint_eq(s.got[2].kind, 0);
	ck_assert_uint_eq(shm_loss__pending(&t), 0);

	/* Full: a new kind joins its (stage, reason), a new reason the last
	 * entry; no count is lost. */
	for (uint32_t i = 0; i < SHM_LOSS_SLOTS; i++)
		ck_assert_int_eq(shm_loss__add(&t, 1, 100 + i, 0, 1, 0, i, 0), 0);
	ck_assert_int_eq(shm_loss__add(&t, 1, 100, 2, 5, 0, 99, 0), -ENOSPC);
	ck_assert_uint_eq(t.ent[0].count, 6);
	ck_assert_uint_eq(t.ent[0].seq, 99);
	ck_assert_int_eq(shm_loss__add(&t, 3, 7, 0, 4, 0, 1, 0), -ENOSPC);
	ck_assert_uint_eq(t.ent[SHM_LOSS_SLOTS - 1].count, 5);
	ck_assert_uint_eq(shm_loss__pending(&t), SHM_LOSS_SLOTS);
}
END_TEST

/*
 * What a storer killed at stop held (shm_loss__held()): ring 2's samples not
 * released above the higher of the ring's mark and the seq the store's tail
 * holds (stored): a block whose write landed before the kill is not lost.
 */
START_TEST(test_loss_held_cutoff)
{
	static const struct {
		uint64_t stored, held;
	} c[] = {{0, 7}, {2, 7}, {8, 2}, {10, 0}};

	for (unsigned int i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct shm_arena *a = arena_new();
		struct shm_stage *st = shm_arena__stage(a, SHM_STAGE_STORER);
		struct shm_loss_table t = {0};
		struct shm_ring_prod p;
		struct shm_ring_cons cons;
		struct shm_msg m;

		ck_assert_int_eq(shm_arena__open_prod(a, SHM_RING_SYMD, &p), 0);
		for (uint64_t seq = 1; seq <= 10; seq++) {
			struct cpa_sample_out o = {.seq = seq, .time_ns = seq, .weight = 1};
			void *rec;

			ck_assert_int_eq(
				shm_ring__reserve_sp(&p, sizeof(o), CPA_REC_SAMPLE_OUT, &rec), 0);
			memcpy(rec, &o, sizeof(o));
		}
		shm_ring__commit_sp(&p);
		/* Released up to seq 3 (the mark); 4..10 still in the ring. */
		ck_assert_int_eq(shm_arena__open_cons(a, SHM_RING_SYMD, &cons), 0);
		for (int k = 0; k < 3; k++)
			ck_assert_int_eq(shm_ring__peek_sc(&cons, &m), 0);
		shm_ring__release_mark_sc(&cons, 3);
		ck_assert_uint_eq(shm_loss__passed(a, SHM_STAGE_STORER), 3);

		ck_assert_uint_eq(shm_loss__held(a, SHM_STAGE_STORER, c[i].stored, &t), c[i].held);
		ck_assert_uint_eq(shm_loss__count(&t), c[i].held);
		ck_assert_uint_eq(shm_stage__cnt(st, shm_stages[SHM_STAGE_STORER].lost_at_stop),
				  c[i].held);
		if (c[i].held)
			ck_assert_uint_eq(t.ent[0].seq, 10);
		shm_arena__free(a);
	}
}
END_TEST

/* The consumer's rule (shm/dedup.h): what a restarted producer sends again
 * is a copy; a loss is one only inside the window its START reset names. */
START_TEST(test_dedup_rule)
{
	struct shm_dedup d;

	shm_dedup__init(&d, 10); /* our predecessor passed up to 10 on */
	ck_assert(shm_dedup__copy(&d, 10, false));
	ck_assert(shm_dedup__copy(&d, 9, true));
	ck_assert(!shm_dedup__copy(&d, 11, false));
	for (uint64_t q = 11; q <= 20; q++)
		shm_dedup__pass(&d, q);
	/* A loss at the last seq (a corrupt record's) is not a copy. */
	ck_assert(!shm_dedup__copy(&d, 20, true));

	/* The producer restarts having released up to 15: 16..20 come again. */
	shm_dedup__producer_start(&d, 15);
	ck_assert(shm_dedup__copy(&d, 16, false));
	ck_assert(shm_dedup__copy(&d, 20, false));
	ck_assert(shm_dedup__copy(&d, 16, true));
	ck_assert(shm_dedup__copy(&d, 20, true));
	ck_assert(!shm_dedup__copy(&d, 15, true)); /* its lost_pending_at_kill */
	ck_assert(!shm_dedup__copy(&d, 21, false));
	ck_assert(!shm_dedup__copy(&d, 21, true));
	shm_dedup__pass(&d, 21);

	/* Restarted after releasing everything we saw: no window. */
	shm_dedup__producer_start(&d, 21);
	ck_assert(!shm_dedup__copy(&d, 21, true));
	ck_assert(shm_dedup__copy(&d, 21, false));
}
END_TEST

/* CPA_FAULT_KILL_AFTER_COMMIT: per stage and generation; malformed refused. */
START_TEST(test_fault_knob)
{
	static const char *const bad[] = {"unwindd",	"unwindd:5",	"unwindd:0:3",
					  "unwind:5:3", "unwindd:5:3,", "unwindd:5:3;symd:1:1",
					  "symd:x:1"};

	unsetenv(SHM_FAULT_KILL_ENV);
	ck_assert_int_eq(shm_fault__kill_after_commit(SHM_STAGE_UNWINDD, 1), 0);
	ck_assert_int_eq(setenv(SHM_FAULT_KILL_ENV, "unwindd:5:3,symd:7:1", 1), 0);
	ck_assert_int_eq(shm_fault__kill_after_commit(SHM_STAGE_UNWINDD, 1), 5);
	ck_assert_int_eq(shm_fault__kill_after_commit(SHM_STAGE_UNWINDD, 3), 5);
	ck_assert_int_eq(shm_fault__kill_after_commit(SHM_STAGE_UNWINDD, 4), 0);
	ck_assert_int_eq(shm_fault__kill_after_commit(SHM_STAGE_SYMD, 1), 7);
	ck_assert_int_eq(shm_fault__kill_after_commit(SHM_STAGE_SYMD, 2), 0);
	ck_assert_int_eq(shm_fault__kill_after_commit(SHM_STAGE_STORER, 1), 0);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(setenv(SHM_FAULT_KILL_ENV, bad[i], 1), 0);
		ck_assert_msg(shm_fault__kill_after_commit(SHM_STAGE_UNWINDD, 1) == -EINVAL, "%s",
			      bad[i]);
	}
	unsetenv(SHM_FAULT_KILL_ENV);

	/* The point itself: counts down, the last one kills (in a child). */
	{
		pid_t pid = fork();
		int status;

		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			unsigned int left = 3;

			shm_fault__commit_point(&left);
			shm_fault__commit_point(&left);
			if (left != 1)
				_exit(1);
			shm_fault__commit_point(&left);
			_exit(2);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("stage_loop");
	TEST_TCASE(s, "stage_loop", test_attach_checks_config, test_run_drains, test_run_sigterm,
		   test_run_waits_idle, test_run_idle_no_deadline, test_run_error, test_run_poll,
		   test_rate_limit, test_loss_table, test_loss_held_cutoff, test_dedup_rule,
		   test_fault_knob);
	return test_run_suite(s);
}
