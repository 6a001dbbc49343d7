// SPDX-License-Identifier: MIT
/*
 * The store writer's io_uring write queue (store_wq_pvt.h): submit, reap,
 * retry failed and short writes, and chain a block's index entry to the
 * completion of the block.
 */
#include <errno.h>
#include <fcntl.h>
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

static void retry_push(struct store_wq *q, struct wop *op, uint64_t now)
{
	op->next = NULL;
	op->retry_at_ns = now + NSEC_PER_SEC;
	if (q->retry_tail)
		q->retry_tail->next = op;
	else
		q->retry_head = op;
	q->retry_tail = op;
	q->retry_bytes += op->len;
	/* Over budget: give up the oldest data-only block (op itself too); its
	 * bytes leave a hole the reader skips. Blocks with a dictionary section
	 * (later blocks of the segment name their ids) and the small header,
	 * index and journal writes go only when nothing else is left; the last
	 * op always stays. */
	while (q->retry_bytes > q->max_retry_bytes && q->retry_head != q->retry_tail) {
		struct wop *old = NULL, *prev = NULL, *p, *pp = NULL;

		for (p = q->retry_head; p; pp = p, p = p->next)
			if (p->kind == WOP_BLOCK && !(p->ent.flags & STORE_BF_DICT)) {
				old = p;
				prev = pp;
				break;
			}
		if (!old)
			old = q->retry_head;
		if (prev)
			prev->next = old->next;
		else
			q->retry_head = old->next;
		if (q->retry_tail == old)
			q->retry_tail = prev;
		q->retry_bytes -= old->len;
		if (old->kind == WOP_BLOCK) {
			q->st->dropped_blocks++;
			q->st->lost_samples_dropped += old->n_samples;
			q->st->lost_recorded -= old->n_lost_rec;
			if (old->ent.flags & STORE_BF_DICT)
				q->dict_lost = true;
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
		q->st->last_error = res < 0 ? res : -EIO;
		if (res == -ENOSPC || res == -EDQUOT)
			q->disk_full = true;
		if (op->kind == WOP_FSYNC) {
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
	wop__free(op);
}

void store_wq__reap(struct store_wq *q, bool wait_one)
{
	struct io_uring_cqe *cqe;

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
		io_uring_cqe_seen(&q->ring, cqe);
		q->inflight--;
		op_complete(q, op, res);
		wait_one = false;
	}
}

static int uring_submit_op(struct store_wq *q, struct wop *op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&q->ring);

	if (!sqe) {
		io_uring_submit(&q->ring);
		store_wq__reap(q, q->inflight >= URING_DEPTH);
		sqe = io_uring_get_sqe(&q->ring);
		if (!sqe)
			return -EBUSY;
	}
	if (op->kind == WOP_FSYNC) {
		io_uring_prep_fsync(sqe, op->f->fd, 0);
		q->st->uring_fsyncs++;
	} else {
		io_uring_prep_write(sqe, op->f->fd, op->buf + op->done, op->len - op->done,
				    op->off + op->done);
		q->st->uring_writes++;
	}
	io_uring_sqe_set_data(sqe, op);
	q->inflight++;
	/* A failed submit leaves the sqe queued: it goes with the next one. */
	io_uring_submit(&q->ring);
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
	io_uring_submit(&q->ring);
}

void store_wq__wait(struct store_wq *q)
{
	store_wq__kick(q);
	while (q->inflight)
		store_wq__reap(q, true);
}

void store_wq__drain(struct store_wq *q)
{
	int rounds;

	for (rounds = 0; rounds < 3 && (q->inflight || q->retry_head); rounds++) {
		store_wq__retry_due(q, 0, true);
		store_wq__wait(q);
	}
}

int store_wq__init(struct store_wq *q, uint64_t max_retry_bytes, struct store_writer_stats *st)
{
	int r;

	memset(q, 0, sizeof(*q));
	q->max_retry_bytes = max_retry_bytes;
	q->st = st;
	r = io_uring_queue_init(URING_DEPTH, &q->ring, 0);
	if (r < 0)
		return r;
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
