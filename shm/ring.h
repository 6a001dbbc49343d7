/* SPDX-License-Identifier: MIT */
/*
 * shm ring: a single-producer/single-consumer ring of variable-length records
 * that lives in shared memory (the cpa arena, or any caller-supplied memory).
 *
 * Memory layout of one ring (all offsets, no pointers; see docs/ring.md):
 *
 *   +0    line 0  descriptor: magic, data_size, data_off   (immutable after format)
 *   +64   line 1  producer:   prod_pos                      (written by producer only)
 *   +128  line 2  guard       (keeps adjacent-line prefetch off the producer line)
 *   +192  line 3  consumer:   cons_pos, cons_mark           (written by consumer only)
 *   +256  line 4  guard
 *   +320  line 5  wakeup:     wake_seq (futex word), waiting, wake_bytes
 *   +4096 data    power-of-two bytes of 8-byte aligned records
 *
 * A record is an 8-byte header (len, type, flags) and len payload bytes,
 * padded to 8. A record never wraps: when it does not fit before the end of
 * the data area, the producer fills the tail with a PAD record and starts at
 * offset 0 (see docs/ring.md for why padding and not a double mapping).
 *
 * Producer: shm_ring__reserve_sp() as many records as it likes, fill them,
 * then shm_ring__commit_sp() publishes all of them at once (batched commit).
 * Consumer: shm_ring__peek_sc() (or the batch variant) as many as it likes,
 * then shm_ring__release_sc() returns all of their space at once.
 *
 * Functions ending in _sp may be called only by the single producer, _sc only
 * by the single consumer. Everything returns 0 or -errno, never blocks on the
 * other side (the producer never blocks at all) and never follows a length
 * it has not bounds-checked.
 */
#ifndef CPA_SHM_RING_H
#define CPA_SHM_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHM_RING_MAGIC	   0x474e495241504355ULL /* "UCPARING" */
#define SHM_RING_CTRL_SIZE 4096u		 /* control lines, rounded to a page */
#define SHM_RING_MIN_DATA  4096u
#define SHM_REC_HDR_SIZE   8u
#define SHM_REC_ALIGN	   8u
#define SHM_REC_TYPE_PAD   0u /* filler up to the end of the data area */

/* Shared control lines. Only the layout is public; touch them through the API. */
struct shm_ring_ctrl {
	/* line 0: descriptor, immutable once formatted */
	uint64_t magic;
	uint64_t data_size;
	uint64_t data_off; /* from the start of this struct */
	uint64_t _desc_pad[5];
	/* line 1: producer */
	uint64_t prod_pos;
	uint64_t _prod_pad[7];
	/* line 2: guard */
	uint64_t _guard0[8];
	/* line 3: consumer */
	uint64_t cons_pos;
	uint64_t cons_mark; /* consumer's own resume cookie, published with release */
	uint64_t _cons_pad[6];
	/* line 4: guard */
	uint64_t _guard1[8];
	/* line 5: wakeup */
	uint32_t wake_seq;   /* futex word, bumped by every wake */
	uint32_t waiting;    /* 1 while the consumer sleeps or is about to */
	uint64_t wake_bytes; /* consumer wants a wake once this many bytes are pending */
	uint64_t _wake_pad[6];
};

_Static_assert(sizeof(struct shm_ring_ctrl) == 6 * 64, "ring control is six cache lines");
_Static_assert(offsetof(struct shm_ring_ctrl, prod_pos) == 64, "producer line");
_Static_assert(offsetof(struct shm_ring_ctrl, cons_pos) == 192, "consumer line");
_Static_assert(offsetof(struct shm_ring_ctrl, wake_seq) == 320, "wake line");

/* Record header as it sits in the data area. */
struct shm_rec {
	uint32_t len; /* payload bytes, header excluded */
	uint16_t type;
	uint16_t flags;
};
_Static_assert(sizeof(struct shm_rec) == SHM_REC_HDR_SIZE, "record header is 8 bytes");

/* A record as the consumer sees it: header fields copied once, bounds checked. */
struct shm_msg {
	void *data;
	uint32_t len;
	uint16_t type;
	uint16_t flags;
};

/* Producer-private state (lives in the producer's own memory). */
struct shm_ring_prod {
	struct shm_ring_ctrl *ctrl;
	uint8_t *data;
	uint64_t size;
	uint64_t mask;
	uint64_t head;	     /* next byte to reserve; published by commit */
	uint64_t committed;  /* last value stored to prod_pos */
	uint64_t cons_cache; /* cons_pos as last read */
	uint64_t last_rec;   /* position of the last reserved header (for trim) */
	uint32_t max_len;    /* shm_ring__max_payload(size), computed once */
};

/* Consumer-private state. */
struct shm_ring_cons {
	struct shm_ring_ctrl *ctrl;
	uint8_t *data;
	uint64_t size;
	uint64_t mask;
	uint64_t tail;	     /* next byte to peek; published by release */
	uint64_t prod_cache; /* prod_pos as last read */
};

/* Bytes a ring with data_size bytes of data needs (control + data). */
static inline uint64_t shm_ring__mem_size(uint64_t data_size)
{
	return SHM_RING_CTRL_SIZE + data_size;
}

/* Largest payload a ring accepts: a quarter of the data area, so that the
 * worst-case PAD before a record never makes it impossible to place. */
static inline uint32_t shm_ring__max_payload(uint64_t data_size)
{
	uint64_t m = data_size / 4 - SHM_REC_HDR_SIZE;

	return m > UINT32_MAX ? UINT32_MAX : (uint32_t)m;
}

/*
 * Format a ring in mem (mem_size bytes, mem 64-byte aligned). data_size is
 * mem_size - SHM_RING_CTRL_SIZE and must be a power of two >= 4096.
 * Both positions start at initial_pos, a multiple of 8 (tests start near
 * UINT64_MAX).
 */
int shm_ring__format(void *mem, uint64_t mem_size, uint64_t initial_pos);

/* Check a formatted ring's descriptor and positions; -EBADMSG if corrupt. */
int shm_ring__validate(const void *mem, uint64_t mem_size);

/* Attach as producer/consumer; resumes at the published position. Each
 * touches every page of the data area once, the producer for writing
 * (ring.c, "Prefault"): a few ms per MiB on a shadow-paging VM. */
int shm_ring__open_prod(struct shm_ring_prod *p, void *mem, uint64_t mem_size);
int shm_ring__open_cons(struct shm_ring_cons *c, void *mem, uint64_t mem_size);

/* Producer: reserve len payload bytes; *ret_data points at them.
 * -ENOBUFS when the ring is full (the caller counts it), -EMSGSIZE when len
 * exceeds shm_ring__max_payload(), -EBADMSG if the shared positions are corrupt. */
static inline int shm_ring__reserve_sp(struct shm_ring_prod *p, uint32_t len, uint16_t type,
				       void **ret_data);
/* Shrink the last reserved record to new_len (<= its reserved length). */
static inline void shm_ring__trim_sp(struct shm_ring_prod *p, uint32_t new_len);
/* Drop everything reserved since the last commit. */
static inline void shm_ring__abort_sp(struct shm_ring_prod *p);
/* Publish every reserved record; wakes the consumer if it asked for it. */
static inline void shm_ring__commit_sp(struct shm_ring_prod *p);
/* End of a batch (the producer is about to sleep): wake the consumer if it
 * sleeps and anything committed is unread, whatever wake_bytes it asked
 * for, so a batch goes down the pipeline in one wakeup per stage. */
void shm_ring__flush_sp(struct shm_ring_prod *p);
/* Free bytes as the producer sees them now (refreshes its view). */
uint64_t shm_ring__free_bytes_sp(struct shm_ring_prod *p);

/* Consumer: next record, 0 / -EAGAIN (empty) / -EBADMSG (corrupt ring). */
static inline int shm_ring__peek_sc(struct shm_ring_cons *c, struct shm_msg *ret);
/* Up to n records; returns how many (>= 0) or -EBADMSG. */
static inline int shm_ring__peek_batch_sc(struct shm_ring_cons *c, struct shm_msg *msgs,
					  unsigned int n);
/* Give back the space of every record peeked so far. */
static inline void shm_ring__release_sc(struct shm_ring_cons *c);
/* Same, and publish mark (read back by a restarted consumer). */
static inline void shm_ring__release_mark_sc(struct shm_ring_cons *c, uint64_t mark);
uint64_t shm_ring__mark_sc(const struct shm_ring_cons *c);
/* Position of the next record to peek (for shm_ring__release_upto_mark_sc()). */
static inline uint64_t shm_ring__tail_sc(const struct shm_ring_cons *c);
/* Give back the space of the records peeked before pos only (pos: a value of
 * shm_ring__tail_sc() since the last release) and publish mark: what was
 * peeked after pos stays in the ring for a restarted consumer. */
static inline void shm_ring__release_upto_mark_sc(struct shm_ring_cons *c, uint64_t pos,
						  uint64_t mark);
/* Bytes committed and not yet peeked. */
static inline uint64_t shm_ring__pending_sc(struct shm_ring_cons *c);

/*
 * Consumer: sleep until at least wake_bytes bytes are pending (1 = any
 * record), the deadline passes, or someone kicks the ring. Returns 0 when
 * woken or data is there, -ETIMEDOUT, -EINTR. timeout_ms < 0 waits forever.
 */
int shm_ring__wait_sc(struct shm_ring_cons *c, uint64_t wake_bytes, int timeout_ms);

/* Anyone (the supervisor): wake a sleeping consumer unconditionally. */
void shm_ring__kick(void *mem);
/* Anyone (the supervisor): the consumer sleeps in shm_ring__wait_sc() (or is
 * about to) and nobody has woken it since. */
bool shm_ring__asleep(const void *mem);

/* Slow paths of the inline functions; not for direct use. */
void shm_ring__wake_slow(struct shm_ring_prod *p);
int shm_ring__reserve_slow(struct shm_ring_prod *p, uint32_t len, uint16_t type, void **ret_data);
int shm_ring__peek_slow(struct shm_ring_cons *c, struct shm_msg *ret);

#include "ring_pvt.h"

#endif /* CPA_SHM_RING_H */
