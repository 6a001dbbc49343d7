/* SPDX-License-Identifier: MIT */
/*
 * Private to the store writer: the open block (rows aggregated per second
 * and key), the segment dictionary it refers to, and the block encoder.
 *
 *   sample --> row key (sec, stack, pid, tid, cpu, cgroup, kind, comm, pcomm, env, probe)
 *          --> open block rows (count, weight summed; open addressing on the key)
 *   close: [hdr 56][zstd(dict delta)][zstd(rows)]   (docs/store-format.md)
 *
 * Segment dictionary ids are per segment file: strings, modules, frames and
 * stacks interned (common/intern.h) in first-use order; a block carries the
 * ids added since the previous block (its dictionary delta).
 */
#ifndef CPA_STORE_BLOCK_PVT_H
#define CPA_STORE_BLOCK_PVT_H

#include <stdbool.h>
#include <stdint.h>
#include <zstd.h>

#include "common/intern.h"
#include "shm/records.h"
#include "store_fmt.h"
#include "store_tab.h"

struct seg_mod_key {
	uint32_t kind;
	uint32_t path_sid;
	uint8_t bid_len;
	uint8_t bid[CPA_BUILD_ID_MAX];
	uint8_t _pad[3];
};

struct seg_frame_key {
	uint32_t name_sid;
	uint32_t mod_sid;
	uint32_t flags;
	uint32_t _pad;
	uint64_t offset;
};

/* Stack key: u32 (n | nk << 16), then n segment frame ids, leaf first. */
#define SEG_STACK_KEY_MAX (1 + CPA_MAX_STACK_FRAMES)

struct seg_dict {
	struct intern str, mod, frame, stack;
	uint32_t emitted_str, emitted_mod, emitted_frame, emitted_stack;
};

/* Id of key in t (1..n), or -ENOMEM. */
int seg_dict__intern(struct intern *t, const void *key, uint32_t len);
/* A new segment: every id starts over. */
void seg_dict__reset(struct seg_dict *d);
/* What the last encoded block carried is now known to a reader. */
void seg_dict__mark_emitted(struct seg_dict *d);
void seg_dict__free(struct seg_dict *d);

struct row_key {
	int64_t sec;
	uint64_t cgroup;
	uint32_t stack, pid, tid, cpu, comm, pcomm, env, probe;
	uint32_t kind, _pad;
};

struct row {
	struct row_key k;
	uint64_t count, weight;
	uint32_t hash;
};

struct block {
	bool open;
	int64_t base_s; /* aligned start of the interval it collects */
	uint64_t t_min_ns, t_max_ns;
	uint64_t samples;     /* incl. the counts of loss rows */
	uint64_t lost_rec;    /* of which the writer's own [lost: storer ...] rows */
	uint64_t lost_rec_io; /* of lost_rec, the [lost: storer io_errors] row */
	VEC(struct row) rows;
	uint32_t *slots;
	uint32_t nslots;
	struct sbuf metrics; /* encoded CPA_REC_METRICS records (store_metrics.c) */
	uint32_t n_metrics;
	struct sbuf events; /* encoded CPA_REC_EVENT records */
	uint32_t n_events;
	uint64_t seq_hi; /* the highest seq of the records taken, 0 = none */
};

/* Add count and weight to key's row. 0 or -ENOMEM. */
int block__add(struct block *k, const struct row_key *key, uint64_t count, uint64_t weight);
/* Widen the block's [t_min_ns, t_max_ns] to t. */
void block__time(struct block *k, uint64_t t);
/* A record with seq was taken into the block. */
static inline void block__seq(struct block *k, uint64_t seq)
{
	if (seq > k->seq_hi)
		k->seq_hi = seq;
}
/* The seq trailer (STORE_BF_SEQ) at the end of a decoded data section of len bytes:
 * true with the seq, false when it is malformed. */
bool store_block__seq_trailer(const uint8_t *p, size_t len, uint64_t *ret_seq);
/* Closed and empty; memory kept for the next one. */
void block__reset(struct block *k);
void block__free(struct block *k);

struct store_enc {
	ZSTD_CCtx *cctx;
	struct sbuf raw_dict, raw_data;
	uint32_t *order;
	uint32_t order_cap;
};

/* One encoded block: header + compressed sections in buf (malloc'ed, the caller's). */
struct store_encoded {
	uint8_t *buf;
	uint32_t len;	  /* of buf */
	uint64_t raw_len; /* header + sections before zstd */
	uint32_t nsec;	  /* distinct seconds in the rows */
	uint8_t flags;	  /* STORE_BF_* of the header */
};

int store_enc__init(struct store_enc *e, int zstd_level);
void store_enc__free(struct store_enc *e);
/* Encode block k with d's dictionary delta. 0, -ENOMEM or -EIO (zstd). */
int store_enc__block(struct store_enc *e, const struct block *k, const struct seg_dict *d,
		     struct store_encoded *ret);

#endif /* CPA_STORE_BLOCK_PVT_H */
