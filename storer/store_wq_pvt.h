/* SPDX-License-Identifier: MIT */
/*
 * Private to the store writer: the io_uring write queue. Every byte the
 * writer puts on disk (segment and index headers, blocks, index entries,
 * journal records) is an op here. A failed or short write is retried a
 * second later at the same offset; past max_retry_bytes of waiting ops the
 * oldest is given up (a block leaves a hole the reader skips). A block's
 * index entry is queued only once the block's own write completed, so an
 * index entry never points at bytes that were not handed to the kernel.
 * Ops are numbered as they are first prepared: a barrier (store_wq__barrier())
 * is passed once every op numbered before it completed (into the page cache,
 * or failed and went to the retry list): what a later SIGKILL cannot take
 * back, whereas a write still queued for io-wq is cancelled by the exit.
 *
 *   store_wq__submit(block op) --IORING_OP_WRITE--> seg_NNNNNN.cps
 *        completion --> [idx entry 24] --IORING_OP_WRITE--> index
 *        error/short --> retry list (1 s later, bounded in bytes)
 *
 * For tests, CPA_FAULT_IO (read at store_wq__init()) makes selected
 * submissions fail: "write:N:M" turns writes N+1..N+M (counted from 1 over
 * every write submitted, retries included) into a no-op completing with
 * -EIO, "short:N:M" submits only half of those writes (a real short write),
 * "fsync:N:M" fails fsyncs N+1..N+M with -EIO; comma-separated.
 */
#ifndef CPA_STORE_WQ_PVT_H
#define CPA_STORE_WQ_PVT_H

#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "store_fmt.h"

/* An open file shared by the ops that write it. */
struct sfile {
	int fd;
	uint32_t refs; /* ops in flight or waiting for retry, + 1 while current */
};

/* A store dir being written: where completed blocks' index entries go. */
struct sdir {
	char path[PATH_MAX + 128];
	struct sfile *idx;
	uint64_t idx_off; /* next index entry goes here */
	uint32_t refs;
};

enum wop_kind {
	WOP_BLOCK, /* a block: on success, its index entry follows */
	WOP_RAW,   /* a file header, an index entry or journal records */
	WOP_FSYNC,
};

struct wop {
	struct wop *next;	       /* retry list */
	struct wop *fl_prev, *fl_next; /* in flight, oldest first */
	uint64_t seq;		       /* barrier number, set when (re)prepared */
	bool flying;		       /* on the in-flight list */
	bool retried;		       /* ... after a failure (store_wq.retrying) */
	enum wop_kind kind;
	struct sfile *f;
	struct sdir *dir; /* WOP_BLOCK: where its index entry goes */
	uint8_t *buf;
	uint32_t len, done;
	uint64_t n_samples;  /* WOP_BLOCK: samples (incl. lost) it holds, lost if given up, */
	uint64_t n_lost_rec; /* but for its own [lost: storer ...] rows: recorded again */
	uint64_t n_lost_io;  /* of n_lost_rec, the [lost: storer io_errors] row */
	int err;	     /* the last failure of this op, 0 if none */
	bool fault;	     /* CPA_FAULT_IO: submitted as a no-op, completes with -EIO */
	uint64_t off;
	uint64_t retry_at_ns;
	struct store_idx_entry ent;
	uint8_t inline_buf[sizeof(struct store_idx_entry)];
};

enum wq_fault_kind { WQ_FAULT_WRITE, WQ_FAULT_SHORT, WQ_FAULT_FSYNC, WQ_FAULT_MAX_ };

/* CPA_FAULT_IO: submissions after+1 .. after+count of a kind are hit. */
struct wq_fault {
	uint64_t after, count;
};

/* A failure that counts as an I/O error ([lost: storer io_errors]) rather
 * than a full disk or another refusal ([lost: storer write_errors]). */
static inline bool wq_err_is_io(int err)
{
	return err == -EIO;
}

struct store_wq {
	struct io_uring ring;
	bool ring_ok;
	bool disk_full;	   /* a write met ENOSPC/EDQUOT: the writer trims the oldest data */
	bool dict_lost;	   /* a block with a dictionary section was given up: the rest of
			    * its segment names ids nobody will read, start a new one */
	bool dict_lost_io; /* ... and it failed with EIO */
	bool fsync_failed; /* an fsync failed: what it covered may not be on the device */
	struct wq_fault fault[WQ_FAULT_MAX_];
	uint32_t inflight; /* prepared or submitted, not yet reaped */
	/* Those ops, by seq (a short write's rest keeps its place). */
	struct wop *fly_head, *fly_tail;
	uint64_t seq_next;  /* the next op's seq */
	uint32_t retrying;  /* of them, retries of failed ops: not healthy yet */
	bool defer_taskrun; /* IORING_SETUP_DEFER_TASKRUN: reap gets the events first */
	struct wop *retry_head, *retry_tail;
	uint64_t retry_bytes, max_retry_bytes;
	struct store_writer_stats *st; /* the writer's: write and drop counters */
};

/* Takes fd (closed if there is no memory for the sfile): NULL or the sfile. */
struct sfile *sfile__new(int fd);
/* open(path, flags | O_CLOEXEC, 0644) as an sfile: 0 or -errno. */
int sfile__open(const char *path, int flags, struct sfile **ret);
void sfile__put(struct sfile *f);
void sdir__put(struct sdir *d);
/* Frees op and drops its file and dir references. Accepts NULL. */
void wop__free(struct wop *op);

/* Reads CPA_FAULT_IO: -EINVAL when it is set and malformed. */
int store_wq__init(struct store_wq *q, uint64_t max_retry_bytes, struct store_writer_stats *st);
/* Gives up whatever still waits for a retry. Call store_wq__drain() first. */
void store_wq__exit(struct store_wq *q);
/*
 * Queue op (taken): prepared now (submitted by the next store_wq__kick(), or
 * at once when the ring is full), or retried later when the ring stays full.
 */
void store_wq__submit(struct store_wq *q, struct wop *op);
/* A copy of buf written to f at off. 0 or -ENOMEM. */
int store_wq__write(struct store_wq *q, struct sfile *f, uint64_t off, const void *buf,
		    uint32_t len);
/* fsync f once what was queued before it is written. 0 or -ENOMEM. */
int store_wq__fsync(struct store_wq *q, struct sfile *f);
/* Reap completions (wait for one first when wait_one). */
void store_wq__reap(struct store_wq *q, bool wait_one);
/* Resubmit ops whose retry time passed (all of them when all). */
void store_wq__retry_due(struct store_wq *q, uint64_t now_ns, bool all);
/*
 * Push what was prepared since the last kick to the kernel, in one
 * io_uring_enter: the buffered writes ext4 hands to io-wq wake its one worker
 * once per kick, not once per write, and their completions wait for the next
 * reap instead of waking us (store_wq__init()). The writer kicks before the
 * input a write carries may be released (store_writer__kick()) and at the
 * end of each tick.
 */
void store_wq__kick(struct store_wq *q);
/* The ops prepared so far, for store_wq__passed(). */
static inline uint64_t store_wq__barrier(const struct store_wq *q)
{
	return q->seq_next;
}
/* Every op prepared before barrier b completed (its completion reaped). */
static inline bool store_wq__passed(const struct store_wq *q, uint64_t b)
{
	return !q->fly_head || q->fly_head->seq >= b;
}
/* Submit what was prepared and reap until barrier b is passed, at most
 * timeout_ms (a write stuck in the kernel, dirty throttling). */
void store_wq__wait_passed(struct store_wq *q, uint64_t b, int timeout_ms);
/* Wait for everything in flight. */
void store_wq__wait(struct store_wq *q);
/* Retry and wait, a bounded number of rounds (a disk that keeps failing does
 * not hold the caller forever); q->retry_head says whether ops are left. */
void store_wq__drain(struct store_wq *q);

#endif /* CPA_STORE_WQ_PVT_H */
