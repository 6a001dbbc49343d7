// SPDX-License-Identifier: MIT
/*
 * The store writer's io_uring write queue (store_wq_pvt.h): submit, reap,
 * retry failed and short writes, and chain a block's index entry to the
 * completion of the block.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "store_wq_pvt.h"

#define URING_DEPTH 64u

struct sfile *sfile__new(int fd)
{
	struct sfile *f = calloc(1, sizeof(*f));

	if (!f) {
		close(fd);
		return NULL;
	}
	f->fd = fd;
	f->refs = 1;
	return f;
}

int sfile__open(const char *path, int flags, struct sfile **ret)
{
	int fd = open(path, flags | O_CLOEXEC, 0644);

	if (fd < 0)
		return -errno;
	*ret = sfile__new(fd);
	return *ret ? 0 : -ENOMEM;
}

void sfile__put(struct sfile *f)
{
	if (f && --f->refs == 0) {
		close(f->fd);
		free(f);
	}
}

void sdir__put(struct sdir *d)
{
	if (d && --d->refs == 0) {
		sfile__put(d->idx);
		free(d);
	}
}

void wop__free(struct wop *op)
{
	if (!op)
		return;
	if (op->buf != op->inline_buf)
		free(op->buf);
	sfile__put(op->f);
	sdir__put(op->dir);
	free(op);
}

static int uring_submit_op(struct store_wq *q, struct wop *op);

/* Off the in-flight list: it completed (or was never submitted). */
static void fly_unlink(struct store_wq *q, struct wop *op)
{
	if (!op->flying)
		return;
	if (op->fl_prev)
		op->fl_prev->fl_next = op->fl_next;
	else
		q->fly_head = op->fl_next;
	if (op->fl_next)
		op->fl_next->fl_prev = op->fl_prev;
	else
		q->fly_tail = op->fl_prev;
	op->fl_prev = op->fl_next = NULL;
	op->flying = false;
	q->retrying -= op->retried;
	op->retried = false;
}

/* On the in-flight list with the next seq; a short write's rest keeps its
 * place and seq: a barrier after the op waits for all of it. */
static void fly_link(struct store_wq *q, struct wop *op)
{
	if (op->flying)
		return;
	op->seq = q->seq_next++;
	op->fl_next = NULL;
	op->fl_prev = q->fly_tail;
	if (q->fly_tail)
		q->fly_tail->fl_next = op;
	else
		q->fly_head = op;
	q->fly_tail = op;
	op->flying = true;
	op->retried = op->err != 0;
	q->retrying += op->retried;
}

/* Which waiting op goes first when the retry budget runs out: lowest rank;
 * 3, a file header, never. */
static int give_up_rank(const struct wop *op)
{
	if (op->kind == WOP_BLOCK)
		return op->ent.flags & STORE_BF_DICT ? 2 : 0;
	return op->off ? 1 : 3;
}

static void retry_push(struct store_wq *q, struct wop *op, uint64_t now)
{
	/* Not in flight: a barrier does not wait for a retry (the disk may stay
	 * full), the op counts as lost if it is given up. */
	fly_unlink(q, op);
	op->next = NULL;
	op->retry_at_ns = now + NSEC_PER_SEC;
	if (q->retry_tail)
		q->retry_tail->next = op;
	else
		q->retry_head = op;
	q->retry_tail = op;
	q->retry_bytes += op->len;
	/* Over budget: give up the oldest data-only block (op itself too); its
	 * bytes leave a hole the reader skips. Next the small index entries and
	 * journal records (the reader finds a block without an entry by its
	 * scan), then blocks with a dictionary section (later blocks of the
	 * segment name their ids: the writer starts a new segment). File
	 * headers (segment, index, journal: without one a file reads only by a
	 * scan, with a warning; 64 bytes or less, one per file) are never given
	 * up here; the last op always stays. */
	while (q->retry_bytes > q->max_retry_bytes && q->retry_head != q->retry_tail) {
		struct wop *old = NULL, *prev = NULL, *p, *pp = NULL;
		int best = 3;

		for (p = q->retry_head; p && best; pp = p, p = p->next) {
			int rank = give_up_rank(p);

			if (rank < best) {
				best = rank;
				old = p;
				prev = pp;
			}
		}
		if (!old)
			break;
		if (prev)
			prev->next = old->next;
		else
			q->retry_head = old->next;
		if (q->retry_tail == old)
			q->retry_tail = prev;
		q->retry_bytes -= old->len;
		if (old->kind == WOP_BLOCK) {
			bool io = wq_err_is_io(old->err);

			q->st->dropped_blocks++;
			q->st->lost_samples_dropped += old->n_samples;
			if (io)
				q->st->lost_io += old->n_samples;
			q->st->lost_recorded -= old->n_lost_rec;
			q->st->lost_io_recorded -= old->n_lost_io;
			if (old->ent.flags & STORE_BF_DICT) {
				q->dict_lost = true;
				q->dict_lost_io = io;
			}
		}
		wop__free(old);
	}
}

void store_wq__submit(struct store_wq *q, struct wop *op)
{
	if (uring_submit_op(q, op) < 0)
		retry_push(q, op, clock_ns(CLOCK_REALTIME));
}

static void op_complete(struct store_wq *q, struct wop *op, int res)
{
	if (res < 0 || (res == 0 && op->kind != WOP_FSYNC)) {
		q->st->write_errors++;
		op->err = res < 0 ? res : -EIO;
		q->st->last_error = op->err;
		if (res == -ENOSPC || res == -EDQUOT)
			q->disk_full = true;
		if (op->kind == WOP_FSYNC) {
			/* Not retried (after a failed fsync the kernel may have
			 * dropped the dirty pages: a second one would succeed
			 * and prove nothing); the writer rolls the segment. */
			q->st->fsync_errors++;
			q->fsync_failed = true;
			fly_unlink(q, op);
			wop__free(op);
			return;
		}
		retry_push(q, op, clock_ns(CLOCK_REALTIME));
		return;
	}
	if (op->kind != WOP_FSYNC) {
		op->done += (uint32_t)res;
		if (op->done < op->len) {
			/* Short write: the rest goes at the matching offset. */
			store_wq__submit(q, op);
			return;
		}
	}
	if (op->kind == WOP_BLOCK && op->dir) {
		struct sdir *d = op->dir;
		struct wop *ie = calloc(1, sizeof(*ie));

		if (ie) {
			ie->kind = WOP_RAW;
			ie->f = d->idx;
			d->idx->refs++;
			memcpy(ie->inline_buf, &op->ent, sizeof(op->ent));
			ie->buf = ie->inline_buf;
			ie->len = sizeof(op->ent);
			ie->off = d->idx_off;
			d->idx_off += sizeof(op->ent);
			q->st->bytes_disk += ie->len;
			store_wq__submit(q, ie);
		}
		/* No memory for the entry: the reader's tail scan still finds the block. */
	}
	fly_unlink(q, op);
	wop__free(op);
}

void store_wq__reap(struct store_wq *q, bool wait_one)
{
	struct io_uring_cqe *cqe;

	/* DEFER_TASKRUN: the completions io-wq left us are posted only now. */
	if (q->defer_taskrun && q->inflight && !wait_one)
		(void)io_uring_get_events(&q->ring);

	for (;;) {
		int r = wait_one ? io_uring_wait_cqe(&q->ring, &cqe)
				 : io_uring_peek_cqe(&q->ring, &cqe);
		struct wop *op;
		int res;

		if (r < 0) {
			if (r == -EINTR && wait_one)
				continue;
			return;
		}
		op = io_uring_cqe_get_data(cqe);
		res = cqe->res;
		if (op->fault) {
			op->fault = false;
			res = -EIO;
		}
		io_uring_cqe_seen(&q->ring, cqe);
		q->inflight--;
		op_complete(q, op, res);
		wait_one = false;
	}
}

/* CPA_FAULT_IO: is submission n (from 0) of this kind to fail? */
static bool fault_hit(const struct store_wq *q, enum wq_fault_kind k, uint64_t n)
{
	const struct wq_fault *f = &q->fault[k];

	return n >= f->after && n - f->after < f->count;
}

/* Hand what was prepared to the kernel; a failed submit leaves the sqes
 * queued: they go with the next one. */
static void uring_flush(struct store_wq *q)
{
	if (io_uring_sq_ready(&q->ring))
		io_uring_submit(&q->ring);
}

static int uring_submit_op(struct store_wq *q, struct wop *op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		uring_flush(q);
		store_wq__reap(q, q->inflight >= URING_DEPTH);
		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe)
			return -EBUSY;
	}
	if (op->kind == WOP_FSYNC) {
		op->fault = fault_hit(q, WQ_FAULT_FSYNC, q->st->uring_fsyncs++);
		if (op->fault)
			io_uring_prep_nop(sqe);
		else
			io_uring_prep_fsync(sqe, op->f->fd, 0);
	} else {
		uint32_t len = op->len - op->done;

		op->fault = fault_hit(q, WQ_FAULT_WRITE, q->st->uring_writes);
		if (fault_hit(q, WQ_FAULT_SHORT, q->st->uring_writes) && len > 1)
			len /= 2;
		q->st->uring_writes++;
		if (op->fault)
			io_uring_prep_nop(sqe);
		else
			io_uring_prep_write(sqe, op->f->fd, op->buf + op->done, len,
					    op->off + op->done);
	}
	io_uring_sqe_set_data(sqe, op);
	q->inflight++;
	fly_link(q, op);
	/* The kick submits it, with the rest of this wakeup's. */
	return 0;
}

int store_wq__write(struct store_wq *q, struct sfile *f, uint64_t off, const void *buf,
		    uint32_t len)
{
	struct wop *op = calloc(1, sizeof(*op));

	if (!op)
		return -ENOMEM;
	op->kind = WOP_RAW;
	op->f = f;
	f->refs++;
	op->buf = malloc(len);
	if (!op->buf) {
		wop__free(op);
		return -ENOMEM;
	}
	memcpy(op->buf, buf, len);
	op->len = len;
	op->off = off;
	q->st->bytes_disk += len;
	store_wq__submit(q, op);
	return 0;
}

int store_wq__fsync(struct store_wq *q, struct sfile *f)
{
	struct wop *op = calloc(1, sizeof(*op));

	if (!op)
		return -ENOMEM;
	op->kind = WOP_FSYNC;
	op->f = f;
	f->refs++;
	/* Not retried: a failed fsync is counted, the data writes are what retry. */
	if (uring_submit_op(q, op) < 0)
		wop__free(op);
	return 0;
}

void store_wq__retry_due(struct store_wq *q, uint64_t now_ns, bool all)
{
	while (q->retry_head && (all || q->retry_head->retry_at_ns <= now_ns)) {
		struct wop *op = q->retry_head;

		q->retry_head = op->next;
		if (!q->retry_head)
			q->retry_tail = NULL;
		q->retry_bytes -= op->len;
		if (uring_submit_op(q, op) < 0) {
			retry_push(q, op, now_ns);
			return;
		}
	}
}

void store_wq__kick(struct store_wq *q)
{
	uring_flush(q);
}

void store_wq__wait_passed(struct store_wq *q, uint64_t b, int timeout_ms)
{
	uint64_t until = clock_ns(CLOCK_MONOTONIC) + (uint64_t)timeout_ms * NSEC_PER_MSEC;

	while (!store_wq__passed(q, b)) {
		struct __kernel_timespec ts;
		struct io_uring_cqe *cqe;
		uint64_t now = clock_ns(CLOCK_MONOTONIC);
		int r;

		if (now >= until)
			break;
		ts.tv_sec = (long long)((until - now) / NSEC_PER_SEC);
		ts.tv_nsec = (long long)((until - now) % NSEC_PER_SEC);
		uring_flush(q);
		/* Runs our deferred task work: the completions are posted. */
		r = io_uring_wait_cqe_timeout(&q->ring, &cqe, &ts);
		if (r < 0 && r != -EINTR && r != -ETIME)
			break;
		store_wq__reap(q, false);
	}
}

void store_wq__wait(struct store_wq *q)
{
	/* A completion may queue more (an index entry, the rest of a short
	 * write): submitted before the next wait. */
	while (q->inflight) {
		uring_flush(q);
		store_wq__reap(q, true);
	}
}

void store_wq__drain(struct store_wq *q)
{
	int rounds;

	for (rounds = 0; rounds < 3 && (q->inflight || q->retry_head); rounds++) {
		store_wq__retry_due(q, 0, true);
		store_wq__wait(q);
	}
}

/* A CPA_FAULT_IO spec into f[WQ_FAULT_MAX_]: 0 or -EINVAL. */
static int parse_fault(const char *spec, struct wq_fault *f)
{
	static const char *const kinds[WQ_FAULT_MAX_] = {"write", "short", "fsync"};
	const char *p = spec;

	memset(f, 0, WQ_FAULT_MAX_ * sizeof(*f));
	while (*p) {
		unsigned long long after, count;
		int k, n = -1;

		for (k = 0; k < WQ_FAULT_MAX_; k++) {
			size_t len = strlen(kinds[k]);

			if (!strncmp(p, kinds[k], len) && p[len] == ':') {
				p += len + 1;
				break;
			}
		}
		if (k == WQ_FAULT_MAX_ || sscanf(p, "%llu:%llu%n", &after, &count, &n) != 2 ||
		    n < 0 || !count)
			return -EINVAL;
		p += n;
		if (*p && (*p++ != ',' || !*p))
			return -EINVAL;
		f[k].after = after;
		f[k].count = count;
	}
	return 0;
}

int store_wq__init(struct store_wq *q, uint64_t max_retry_bytes, struct store_writer_stats *st)
{
	const char *spec = getenv("CPA_FAULT_IO");
	int r;

	memset(q, 0, sizeof(*q));
	q->max_retry_bytes = max_retry_bytes;
	q->st = st;
	if (spec && *spec && parse_fault(spec, q->fault) < 0)
		return -EINVAL;
	/*
	 * A write io-wq ran leaves its completion to us as task work, which
	 * wakes our sleep at once, one wakeup per write (COOP_TASKRUN only
	 * spares the IPI). With DEFER_TASKRUN it waits until we reap
	 * (io_uring_get_events()): the data is written by then all the same.
	 * One bounded worker: the writes of a kick run one after the other on
	 * it (they did: io-wq serializes the writes of a file), one worker
	 * wakeup per kick, and no second worker is started and retired for
	 * them. Before 6.1: neither, as before.
	 */
	r = io_uring_queue_init(URING_DEPTH, &q->ring,
				IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	q->defer_taskrun = r == 0;
	if (r == -EINVAL)
		r = io_uring_queue_init(URING_DEPTH, &q->ring, 0);
	if (r < 0)
		return r;
	{
		unsigned int max_workers[2] = {1, 0}; /* bounded: 1; unbounded: as is */

		(void)io_uring_register_iowq_max_workers(&q->ring, max_workers);
	}
	q->ring_ok = true;
	return 0;
}

void store_wq__exit(struct store_wq *q)
{
	if (!q->ring_ok)
		return;
	while (q->retry_head) {
		struct wop *op = q->retry_head;

		q->retry_head = op->next;
		wop__free(op);
	}
	q->retry_tail = NULL;
	io_uring_queue_exit(&q->ring);
	q->ring_ok = false;
}
