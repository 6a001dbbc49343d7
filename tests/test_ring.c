// SPDX-License-Identifier: MIT
/*
 * shm ring tests: single-thread semantics, producer/consumer threads (so TSan
 * sees both sides), processes across fork() over a real memfd, kill -9 of
 * either side mid-stream, and corruption of positions and record headers.
 *
 * Positions start near UINT64_MAX so every run crosses the 64-bit wrap.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/ring.h"
#include "test_util.h"

#define NEAR_WRAP (0ull - 3 * 4096) /* 8-aligned, three pages below 2^64 */

/* ---- record content: seq, then bytes that depend on seq and length ---- */

static uint32_t rec_len_for(uint64_t seq, uint32_t max)
{
	uint64_t x = seq * 0x9e3779b97f4a7c15ULL;

	x ^= x >> 29;
	return 8 + (uint32_t)(x % (max - 8 + 1));
}

static void rec_fill(void *p, uint64_t seq, uint32_t len)
{
	uint8_t *b = p;
	uint32_t i;

	memcpy(b, &seq, 8);
	for (i = 8; i < len; i++)
		b[i] = (uint8_t)(seq + i);
}

static bool rec_check(const struct shm_msg *m, uint64_t seq, uint32_t max)
{
	const uint8_t *b = m->data;
	uint64_t got;
	uint32_t i;

	if (m->len != rec_len_for(seq, max) || m->type != 7)
		return false;
	memcpy(&got, b, 8);
	if (got != seq)
		return false;
	for (i = 8; i < m->len; i++)
		if (b[i] != (uint8_t)(seq + i))
			return false;
	return true;
}

static void *ring_mem_new(uint64_t data_size, uint64_t initial)
{
	uint64_t sz = shm_ring__mem_size(data_size);
	void *mem = aligned_alloc(4096, sz);

	ck_assert_ptr_nonnull(mem);
	ck_assert_int_eq(shm_ring__format(mem, sz, initial), 0);
	return mem;
}

/* A ring near the wrap of its positions, with both ends open. */
static void *ring_pair_new(uint64_t data_size, struct shm_ring_prod *p, struct shm_ring_cons *c)
{
	uint64_t sz = shm_ring__mem_size(data_size);
	void *mem = ring_mem_new(data_size, NEAR_WRAP);

	ck_assert_int_eq(shm_ring__open_prod(p, mem, sz), 0);
	ck_assert_int_eq(shm_ring__open_cons(c, mem, sz), 0);
	return mem;
}

/* ---- single thread ---- */

START_TEST(test_basic_roundtrip)
{
	void *mem;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct shm_msg m;
	void *d;
	int i;

	mem = ring_pair_new(4096, &p, &c);
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), -EAGAIN);

	/* Reserved but not committed: invisible. */
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 13, 7, &d), 0);
	rec_fill(d, 1, 13);
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), -EAGAIN);
	shm_ring__commit_sp(&p);
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), 0);
	ck_assert_uint_eq(m.len, 13);
	ck_assert_uint_eq(m.type, 7);
	ck_assert_uint_eq(((uintptr_t)m.data) & 7, 0);
	shm_ring__release_sc(&c);

	/* Many laps of odd sizes: PAD records at every wrap, positions cross 2^64. */
	for (i = 0; i < 5000; i++) {
		uint32_t len = 1 + (uint32_t)(i * 37) % 900;

		ck_assert_int_eq(shm_ring__reserve_sp(&p, len, 7, &d), 0);
		memset(d, (int)(i & 0xff), len);
		shm_ring__commit_sp(&p);
		ck_assert_int_eq(shm_ring__peek_sc(&c, &m), 0);
		ck_assert_uint_eq(m.len, len);
		ck_assert_uint_eq(((uint8_t *)m.data)[len - 1], (uint8_t)(i & 0xff));
		shm_ring__release_sc(&c);
	}
	ck_assert_uint_lt(c.tail, NEAR_WRAP); /* wrapped */
	free(mem);
}
END_TEST

START_TEST(test_full_ring_and_limits)
{
	void *mem;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct shm_msg m;
	void *d;
	int n = 0, r;

	mem = ring_pair_new(4096, &p, &c);
	ck_assert_int_eq(shm_ring__reserve_sp(&p, shm_ring__max_payload(4096) + 1, 7, &d),
			 -EMSGSIZE);

	/* 120 + 8 = 128 bytes each: exactly 32 fit; the 33rd fails at once. */
	while ((r = shm_ring__reserve_sp(&p, 120, 7, &d)) == 0)
		n++;
	ck_assert_int_eq(r, -ENOBUFS);
	ck_assert_int_eq(n, 32);
	ck_assert_uint_eq(shm_ring__free_bytes_sp(&p), 0);
	shm_ring__commit_sp(&p);

	/* Release one: exactly one more fits. */
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), 0);
	shm_ring__release_sc(&c);
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 120, 7, &d), 0);
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 120, 7, &d), -ENOBUFS);
	free(mem);
}
END_TEST

START_TEST(test_trim_abort_batch)
{
	void *mem;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct shm_msg msgs[16];
	void *d;
	int i, n;

	mem = ring_pair_new(8192, &p, &c);

	/* Reserve the maximum, fill less, trim: the record shrinks in place. */
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 1000, 7, &d), 0);
	rec_fill(d, 5, 40);
	shm_ring__trim_sp(&p, 40);
	/* Abort drops everything reserved since the last commit. */
	shm_ring__commit_sp(&p);
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 100, 9, &d), 0);
	shm_ring__abort_sp(&p);

	/* Batched commit: ten records become visible together. */
	for (i = 0; i < 10; i++) {
		ck_assert_int_eq(shm_ring__reserve_sp(&p, 24, 8, &d), 0);
		memset(d, i, 24);
	}
	ck_assert_uint_eq(shm_ring__pending_sc(&c), 48);
	shm_ring__commit_sp(&p);
	ck_assert_uint_eq(shm_ring__pending_sc(&c), 48 + 10 * 32);

	n = shm_ring__peek_batch_sc(&c, msgs, 16);
	ck_assert_int_eq(n, 11);
	ck_assert_uint_eq(msgs[0].len, 40);
	for (i = 1; i < 11; i++) {
		ck_assert_uint_eq(msgs[i].type, 8);
		ck_assert_uint_eq(((uint8_t *)msgs[i].data)[23], (uint8_t)(i - 1));
	}
	/* Nothing released yet: the producer still sees the space as used. */
	ck_assert_uint_eq(shm_ring__free_bytes_sp(&p), 8192 - 48 - 320);
	shm_ring__release_mark_sc(&c, 42);
	ck_assert_uint_eq(shm_ring__free_bytes_sp(&p), 8192);
	ck_assert_uint_eq(shm_ring__mark_sc(&c), 42);
	free(mem);
}
END_TEST

/* ---- threads ---- */

struct thr_ctx {
	void *mem;
	uint64_t mem_size;
	uint64_t n;
	uint32_t max_len;
	bool batch;
	uint64_t full_hits;
	bool ok;
	uint64_t bad_seq;
};

static void *producer_thread(void *arg)
{
	struct thr_ctx *t = arg;
	struct shm_ring_prod p;
	uint64_t seq = 0;

	if (shm_ring__open_prod(&p, t->mem, t->mem_size) < 0)
		return NULL;
	while (seq < t->n) {
		unsigned int k, batch = t->batch ? 1 + (unsigned int)(seq % 31) : 1;

		for (k = 0; k < batch && seq < t->n; k++) {
			uint32_t len = rec_len_for(seq, t->max_len);
			void *d;
			int r = shm_ring__reserve_sp(&p, len, 7, &d);

			if (r == -ENOBUFS) {
				t->full_hits++;
				break;
			}
			if (r < 0)
				return NULL;
			rec_fill(d, seq, len);
			seq++;
		}
		shm_ring__commit_sp(&p);
	}
	return NULL;
}

static void *consumer_thread(void *arg)
{
	struct thr_ctx *t = arg;
	struct shm_ring_cons c;
	struct shm_msg msgs[32];
	uint64_t seq = 0;

	t->ok = false;
	if (shm_ring__open_cons(&c, t->mem, t->mem_size) < 0)
		return NULL;
	while (seq < t->n) {
		int i, n = t->batch ? shm_ring__peek_batch_sc(&c, msgs, 32)
				    : (shm_ring__peek_sc(&c, &msgs[0]) == 0 ? 1 : 0);

		if (n < 0)
			return NULL;
		if (n == 0) {
			shm_ring__wait_sc(&c, 1, 10);
			continue;
		}
		for (i = 0; i < n; i++, seq++) {
			if (!rec_check(&msgs[i], seq, t->max_len)) {
				t->bad_seq = seq;
				return NULL;
			}
		}
		shm_ring__release_sc(&c);
	}
	t->ok = true;
	return NULL;
}

static void run_threads(uint64_t n, uint64_t data_size, uint32_t max_len, bool batch)
{
	struct thr_ctx t = {.n = n, .max_len = max_len, .batch = batch};
	pthread_t pt, ct;

	t.mem_size = shm_ring__mem_size(data_size);
	t.mem = ring_mem_new(data_size, NEAR_WRAP);
	ck_assert_int_eq(pthread_create(&ct, NULL, consumer_thread, &t), 0);
	ck_assert_int_eq(pthread_create(&pt, NULL, producer_thread, &t), 0);
	pthread_join(pt, NULL);
	pthread_join(ct, NULL);
	ck_assert_msg(t.ok, "consumer saw a wrong record at seq %llu",
		      (unsigned long long)t.bad_seq);
	/* A small ring and a fast producer must have met a full ring. */
	ck_assert_uint_gt(t.full_hits, 0);
	free(t.mem);
}

static uint64_t thread_records(void)
{
	if (test_stress())
		return 20000000;
	return test_under_tsan() ? 200000 : 2000000;
}

START_TEST(test_threads_single)
{
	run_threads(thread_records(), 16384, 700, false);
}
END_TEST

START_TEST(test_threads_batch)
{
	run_threads(thread_records(), 65536, 3000, true);
}
END_TEST

/* ---- processes over a real memfd arena ---- */

static struct shm_arena *arena_new(uint64_t data_size)
{
	struct shm_layout l = {.n_rings = 1, .initial_pos = NEAR_WRAP};
	struct shm_arena *a;

	l.rings[0].data_size = data_size;
	l.rings[0].producer = SHM_STAGE_CAPTURE;
	l.rings[0].consumer = SHM_STAGE_UNWINDD;
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	return a;
}

/* Child side: attach by fd like a stage does, produce n records, exit. */
static void child_produce(int fd, uint64_t first, uint64_t n, uint32_t max_len)
{
	struct shm_arena *a;
	struct shm_ring_prod p;
	uint64_t seq = first;

	if (shm_arena__attach(fd, &a) < 0 || shm_arena__open_prod(a, 0, &p) < 0)
		_exit(3);
	while (seq < first + n) {
		uint32_t len = rec_len_for(seq, max_len);
		void *d;
		int r = shm_ring__reserve_sp(&p, len, 7, &d);

		if (r == -ENOBUFS) {
			shm_ring__commit_sp(&p);
			sched_yield();
			continue;
		}
		if (r < 0)
			_exit(4);
		rec_fill(d, seq, len);
		seq++;
		if ((seq & 15) == 0)
			shm_ring__commit_sp(&p);
	}
	shm_ring__commit_sp(&p);
	_exit(0);
}

START_TEST(test_fork_memfd)
{
	const uint64_t n = test_under_tsan() ? 100000 : 1000000;
	struct shm_arena *a = arena_new(1 << 16);
	struct shm_ring_cons c;
	struct shm_msg m;
	uint64_t seq = 0;
	int status;
	pid_t pid;

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		child_produce(dup(shm_arena__fd(a)), 0, n, 2000);

	ck_assert_int_eq(shm_arena__open_cons(a, 0, &c), 0);
	while (seq < n) {
		int r = shm_ring__peek_sc(&c, &m);

		if (r == -EAGAIN) {
			shm_ring__release_sc(&c);
			shm_ring__wait_sc(&c, 1, 50);
			continue;
		}
		ck_assert_int_eq(r, 0);
		ck_assert_msg(rec_check(&m, seq, 2000), "bad record %llu", (unsigned long long)seq);
		seq++;
		if ((seq & 7) == 0)
			shm_ring__release_sc(&c);
	}
	shm_ring__release_sc(&c);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	shm_arena__free(a);
}
END_TEST

/*
 * Consumer killed with SIGKILL at random points and restarted, many times.
 * Each consumer process reports through a pipe the first seq it got and the
 * last seq it released (the mark). Invariant: a restarted consumer starts at
 * exactly (last released + 1): nothing lost, nothing released comes back.
 */
struct cons_report {
	uint64_t first;
	uint64_t released; /* seq of the last released record, UINT64_MAX if none */
};

static void child_consume(int fd, int report_fd, uint32_t max_len)
{
	struct shm_arena *a;
	struct shm_ring_cons c;
	struct shm_msg msgs[8];
	bool first = true;

	if (shm_arena__attach(fd, &a) < 0 || shm_arena__open_cons(a, 0, &c) < 0)
		_exit(3);
	for (;;) {
		int i, n = shm_ring__peek_batch_sc(&c, msgs, 1 + (unsigned int)(random() % 8));
		uint64_t seq = 0;

		if (n < 0)
			_exit(4);
		if (n == 0) {
			shm_ring__wait_sc(&c, 1, 20);
			continue;
		}
		for (i = 0; i < n; i++) {
			memcpy(&seq, msgs[i].data, 8);
			if (!rec_check(&msgs[i], seq, max_len))
				_exit(5);
			if (first) {
				struct cons_report rep = {.first = seq, .released = UINT64_MAX};

				if (write(report_fd, &rep, sizeof(rep)) != sizeof(rep))
					_exit(6);
				first = false;
			}
		}
		shm_ring__release_mark_sc(&c, seq);
	}
}

START_TEST(test_kill_consumer_restart)
{
	const uint64_t n = 300000;
	struct shm_arena *a = arena_new(1 << 15);
	uint64_t expect_first = 0;
	int rounds = 0, pfd[2], status;
	pid_t prod, cons;

	ck_assert_int_eq(pipe(pfd), 0);
	prod = fork();
	ck_assert_int_ge(prod, 0);
	if (prod == 0)
		child_produce(dup(shm_arena__fd(a)), 0, n, 500);

	for (;;) {
		struct shm_ring_cons peek;
		struct cons_report rep;
		uint64_t mark;

		cons = fork();
		ck_assert_int_ge(cons, 0);
		if (cons == 0) {
			srandom((unsigned int)getpid());
			child_consume(dup(shm_arena__fd(a)), pfd[1], 500);
		}
		ck_assert_int_eq(read(pfd[0], &rep, sizeof(rep)), (ssize_t)sizeof(rep));
		/* Resumes exactly after what its predecessor released. */
		ck_assert_uint_eq(rep.first, expect_first);

		usleep(1000 + (useconds_t)(random() % 5000));
		kill(cons, SIGKILL);
		ck_assert_int_eq(waitpid(cons, &status, 0), cons);
		rounds++;

		ck_assert_int_eq(shm_arena__open_cons(a, 0, &peek), 0);
		mark = shm_ring__mark_sc(&peek);
		/* cons_pos may trail the mark by one batch (see ring.c [C5]); it
		 * never leads it. Re-derive the first unreleased seq from cons_pos. */
		{
			struct shm_msg m;
			int r = shm_ring__peek_sc(&peek, &m);

			if (r == -EAGAIN) {
				if (mark == n - 1)
					break; /* everything delivered and released */
				expect_first = mark + 1;
			} else {
				ck_assert_int_eq(r, 0);
				memcpy(&expect_first, m.data, 8);
				ck_assert_uint_le(expect_first, mark + 1);
			}
		}
		if (rounds > 2000)
			ck_abort_msg("consumer never caught up");
	}
	ck_assert_int_eq(waitpid(prod, &status, 0), prod);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert_int_ge(rounds, 2);
	close(pfd[0]);
	close(pfd[1]);
	shm_arena__free(a);
}
END_TEST

/*
 * Producer killed between reserve and commit: the half-written record is
 * never visible, and a restarted producer continues at the committed
 * position with intact records.
 */
START_TEST(test_kill_producer_mid_record)
{
	struct shm_arena *a = arena_new(1 << 14);
	struct shm_ring_cons c;
	struct shm_msg m;
	int pfd[2], status;
	uint64_t seq;
	char ready;
	pid_t pid;

	ck_assert_int_eq(pipe(pfd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct shm_arena *ca;
		struct shm_ring_prod p;
		void *d;

		if (shm_arena__attach(dup(shm_arena__fd(a)), &ca) < 0 ||
		    shm_arena__open_prod(ca, 0, &p) < 0)
			_exit(3);
		for (seq = 0; seq < 10; seq++) {
			if (shm_ring__reserve_sp(&p, rec_len_for(seq, 300), 7, &d) < 0)
				_exit(4);
			rec_fill(d, seq, rec_len_for(seq, 300));
		}
		shm_ring__commit_sp(&p);
		/* Record 10: reserved, half written, never committed. */
		if (shm_ring__reserve_sp(&p, 300, 7, &d) < 0)
			_exit(4);
		memset(d, 0xee, 150);
		if (write(pfd[1], "r", 1) != 1)
			_exit(5);
		pause();
		_exit(0);
	}
	ck_assert_int_eq(read(pfd[0], &ready, 1), 1);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFSIGNALED(status));

	ck_assert_int_eq(shm_arena__open_cons(a, 0, &c), 0);
	for (seq = 0; seq < 10; seq++) {
		ck_assert_int_eq(shm_ring__peek_sc(&c, &m), 0);
		ck_assert(rec_check(&m, seq, 300));
	}
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), -EAGAIN);

	/* The successor resumes at the committed position. */
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		child_produce(dup(shm_arena__fd(a)), 10, 5000, 300);
	for (seq = 10; seq < 5010; seq++) {
		int r;

		while ((r = shm_ring__peek_sc(&c, &m)) == -EAGAIN) {
			shm_ring__release_sc(&c);
			shm_ring__wait_sc(&c, 1, 20);
		}
		ck_assert_int_eq(r, 0);
		ck_assert_msg(rec_check(&m, seq, 300), "bad record %llu after restart",
			      (unsigned long long)seq);
		shm_ring__release_sc(&c);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	close(pfd[0]);
	close(pfd[1]);
	shm_arena__free(a);
}
END_TEST

/* ---- wakeups ---- */

struct wake_ctx {
	void *mem;
	uint64_t mem_size;
	int result;
	uint64_t woke_after_ns;
};

static void *sleeper(void *arg)
{
	struct wake_ctx *w = arg;
	struct shm_ring_cons c;
	uint64_t t0;

	shm_ring__open_cons(&c, w->mem, w->mem_size);
	t0 = clock_ns(CLOCK_MONOTONIC);
	w->result = shm_ring__wait_sc(&c, 1024, 5000);
	w->woke_after_ns = clock_ns(CLOCK_MONOTONIC) - t0;
	return NULL;
}

static void wait_until_asleep(struct shm_ring_ctrl *ctrl)
{
	while (!__atomic_load_n(&ctrl->waiting, __ATOMIC_ACQUIRE))
		usleep(100);
	usleep(2000); /* well inside futex_wait by now */
}

START_TEST(test_wake_batches)
{
	struct wake_ctx w = {0};
	struct shm_ring_prod p;
	struct shm_ring_ctrl *ctrl;
	uint32_t seq0;
	pthread_t t;
	void *d;
	int i;

	w.mem_size = shm_ring__mem_size(1 << 16);
	w.mem = ring_mem_new(1 << 16, NEAR_WRAP);
	ctrl = w.mem;
	ck_assert_int_eq(shm_ring__open_prod(&p, w.mem, w.mem_size), 0);

	/* Nobody asleep: commits never touch the futex. */
	seq0 = ctrl->wake_seq;
	for (i = 0; i < 100; i++) {
		ck_assert_int_eq(shm_ring__reserve_sp(&p, 8, 7, &d), 0);
		shm_ring__commit_sp(&p);
	}
	ck_assert_uint_eq(ctrl->wake_seq, seq0);
	{
		struct shm_ring_cons c;
		struct shm_msg m;

		shm_ring__open_cons(&c, w.mem, w.mem_size);
		while (shm_ring__peek_sc(&c, &m) == 0)
			;
		shm_ring__release_sc(&c);
	}

	/* Asleep waiting for 1 KiB: 16-byte commits below it do not wake it. */
	ck_assert_int_eq(pthread_create(&t, NULL, sleeper, &w), 0);
	wait_until_asleep(ctrl);
	for (i = 0; i < 60; i++) {
		ck_assert_int_eq(shm_ring__reserve_sp(&p, 8, 7, &d), 0);
		shm_ring__commit_sp(&p);
	}
	ck_assert_uint_eq(ctrl->wake_seq, seq0);
	/* Crossing the threshold wakes it exactly once, however many commits follow. */
	for (i = 0; i < 200; i++) {
		ck_assert_int_eq(shm_ring__reserve_sp(&p, 8, 7, &d), 0);
		shm_ring__commit_sp(&p);
	}
	pthread_join(t, NULL);
	ck_assert_int_eq(w.result, 0);
	ck_assert_uint_eq(ctrl->wake_seq, seq0 + 1);
	ck_assert_uint_lt(w.woke_after_ns, 4000000000ull);
	free(w.mem);
}
END_TEST

/* The end of a producer's batch wakes a consumer that asked for more. */
START_TEST(test_flush_wakes_below_threshold)
{
	struct wake_ctx w = {0};
	struct shm_ring_prod p;
	struct shm_ring_ctrl *ctrl;
	uint32_t seq0;
	pthread_t t;
	void *d;

	w.mem_size = shm_ring__mem_size(1 << 16);
	w.mem = ring_mem_new(1 << 16, NEAR_WRAP);
	ctrl = w.mem;
	ck_assert_int_eq(shm_ring__open_prod(&p, w.mem, w.mem_size), 0);
	seq0 = ctrl->wake_seq;

	/* Nobody asleep, or nothing unread: a flush is a load, no futex. */
	shm_ring__flush_sp(&p);
	ck_assert_uint_eq(ctrl->wake_seq, seq0);
	ck_assert_int_eq(pthread_create(&t, NULL, sleeper, &w), 0);
	wait_until_asleep(ctrl);
	shm_ring__flush_sp(&p);
	ck_assert_uint_eq(ctrl->wake_seq, seq0);
	ck_assert_uint_eq(__atomic_load_n(&ctrl->waiting, __ATOMIC_ACQUIRE), 1);

	/* 16 bytes against the 1 KiB it waits for: the commit leaves it
	 * asleep, the flush wakes it (within its 5 s deadline: no timeout). */
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 8, 7, &d), 0);
	shm_ring__commit_sp(&p);
	ck_assert_uint_eq(ctrl->wake_seq, seq0);
	shm_ring__flush_sp(&p);
	shm_ring__flush_sp(&p); /* once per sleep */
	pthread_join(t, NULL);
	ck_assert_int_eq(w.result, 0);
	ck_assert_uint_eq(ctrl->wake_seq, seq0 + 1);
	free(w.mem);
}
END_TEST

START_TEST(test_wait_deadline_and_kick)
{
	uint64_t sz = shm_ring__mem_size(4096);
	void *mem = ring_mem_new(4096, 0);
	struct wake_ctx w = {.mem = mem, .mem_size = sz};
	struct shm_ring_cons c;
	pthread_t t;
	uint64_t t0;

	/* Empty ring: the deadline ends the sleep. */
	ck_assert_int_eq(shm_ring__open_cons(&c, mem, sz), 0);
	t0 = clock_ns(CLOCK_MONOTONIC);
	ck_assert_int_eq(shm_ring__wait_sc(&c, 1, 30), -ETIMEDOUT);
	ck_assert_uint_ge(clock_ns(CLOCK_MONOTONIC) - t0, 25000000ull);
	ck_assert_uint_eq(((struct shm_ring_ctrl *)mem)->waiting, 0);

	/* A kick (the supervisor asking for a drain) wakes an empty sleeper. */
	ck_assert_int_eq(pthread_create(&t, NULL, sleeper, &w), 0);
	wait_until_asleep(mem);
	shm_ring__kick(mem);
	pthread_join(t, NULL);
	ck_assert_int_eq(w.result, 0);
	ck_assert_uint_lt(w.woke_after_ns, 4000000000ull);
	free(mem);
}
END_TEST

/* ---- corruption ---- */

START_TEST(test_corrupt_positions_and_lengths)
{
	uint64_t sz = shm_ring__mem_size(4096);
	void *mem = ring_mem_new(4096, NEAR_WRAP);
	struct shm_ring_ctrl *ctrl = mem;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct shm_msg m;
	struct shm_rec *rec;
	uint64_t saved;
	void *d;
	int i;

	ck_assert_int_eq(shm_ring__open_prod(&p, mem, sz), 0);
	ck_assert_int_eq(shm_ring__open_cons(&c, mem, sz), 0);
	for (i = 0; i < 3; i++) {
		ck_assert_int_eq(shm_ring__reserve_sp(&p, 100, 7, &d), 0);
		shm_ring__commit_sp(&p);
	}

	/* A record length that runs past what was committed. */
	rec = (struct shm_rec *)(c.data + (c.tail & c.mask));
	rec->len = 1u << 30;
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), -EBADMSG);
	rec->len = 100;

	/* A PAD that does not end at the end of the data area. */
	rec->type = SHM_REC_TYPE_PAD;
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), -EBADMSG);
	rec->type = 7;
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), 0);

	/* prod_pos scribbled beyond one ring of cons_pos. */
	saved = ctrl->prod_pos;
	ctrl->prod_pos = ctrl->cons_pos + 3 * 4096;
	c.prod_cache = c.tail; /* force a re-read */
	ck_assert_int_eq(shm_ring__peek_sc(&c, &m), -EBADMSG);
	ck_assert_int_eq(shm_ring__validate(mem, sz), -EBADMSG);
	ctrl->prod_pos = saved;

	/* cons_pos scribbled ahead of the producer. */
	saved = ctrl->cons_pos;
	ctrl->cons_pos = ctrl->prod_pos + 64;
	p.cons_cache = p.head - 4096; /* force a re-read */
	ck_assert_int_eq(shm_ring__reserve_sp(&p, 100, 7, &d), -EBADMSG);
	ctrl->cons_pos = saved;

	/* Descriptor damage is refused at open. */
	ctrl->data_size = 4095;
	ck_assert_int_eq(shm_ring__open_cons(&c, mem, sz), -EBADMSG);
	ctrl->data_size = 1 << 20; /* larger than the memory */
	ck_assert_int_eq(shm_ring__open_prod(&p, mem, sz), -EBADMSG);
	ctrl->data_size = 4096;
	ctrl->magic ^= 1;
	ck_assert_int_eq(shm_ring__validate(mem, sz), -EBADMSG);
	free(mem);
}
END_TEST

/* Random scribbles over committed records: the consumer never reads out of
 * bounds (ASan watches) and only ever reports records inside the ring. */
START_TEST(test_corrupt_fuzz)
{
	uint64_t sz = shm_ring__mem_size(4096);
	void *mem = ring_mem_new(4096, NEAR_WRAP);
	int round;

	srandom(1234);
	for (round = 0; round < 20000; round++) {
		struct shm_ring_prod p;
		struct shm_ring_cons c;
		struct shm_msg m;
		void *d;
		int i, r;

		shm_ring__format(mem, sz, NEAR_WRAP + 8 * (uint64_t)(random() % 1024));
		shm_ring__open_prod(&p, mem, sz);
		shm_ring__open_cons(&c, mem, sz);
		for (i = 0; i < 20; i++) {
			if (shm_ring__reserve_sp(&p, (uint32_t)(random() % 300), 7, &d) < 0)
				break;
		}
		shm_ring__commit_sp(&p);
		for (i = 0; i < 4; i++)
			((uint8_t *)p.data)[random() % 4096] = (uint8_t)random();
		while ((r = shm_ring__peek_sc(&c, &m)) == 0) {
			uint8_t *lo = p.data, *hi = p.data + 4096;

			ck_assert((uint8_t *)m.data >= lo && (uint8_t *)m.data + m.len <= hi);
		}
		ck_assert(r == -EAGAIN || r == -EBADMSG);
	}
	free(mem);
}
END_TEST

static Suite *ring_suite(void)
{
	Suite *s = suite_create("ring");
	TCase *tc;

	TEST_TCASE(s, "single", test_basic_roundtrip, test_full_ring_and_limits,
		   test_trim_abort_batch);

	tc = TEST_TCASE(s, "threads", test_threads_single, test_threads_batch, test_wake_batches,
			test_flush_wakes_below_threshold, test_wait_deadline_and_kick);
	tcase_set_timeout(tc, 300);

	tc = TEST_TCASE(s, "processes", test_fork_memfd, test_kill_consumer_restart,
			test_kill_producer_mid_record);
	tcase_set_timeout(tc, 300);

	tc = TEST_TCASE(s, "corruption", test_corrupt_positions_and_lengths, test_corrupt_fuzz);
	tcase_set_timeout(tc, 120);
	return s;
}

int main(void)
{
	return test_run_suite(ring_suite());
}
