/* SPDX-License-Identifier: MIT */
/*
 * Private on-disk layout of the store (docs/store-format.md has the table and
 * the reasoning). Every multi-byte field is little-endian; x86-64 and arm64
 * are, so the structs are written as they are and _Static_assert'ed.
 */
#ifndef CPA_STORE_FMT_H
#define CPA_STORE_FMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define STORE_SEG_MAGIC	  0x3147455341504355ULL /* "UCPASEG1" */
#define STORE_IDX_MAGIC	  0x5844494150435543ULL /* "CUCPAIDX" */
#define STORE_BLOCK_MAGIC 0x42415043u		/* "CPAB" */

#define STORE_BLOCK_DATA 1u
#define STORE_BF_DICT	 1u /* a dictionary section precedes the rows */
#define STORE_BF_METRICS 2u /* 1.1: a metrics section follows the rows (store_metrics.c) */
#define STORE_BF_SEQ	 4u /* 1.2: the data section ends with the block's highest seq */

/* Hard caps a reader enforces before it allocates anything. */
#define STORE_MAX_SECTION    (64u << 20)
#define STORE_MAX_BLOCK_SPAN 255u /* seconds between t_min and t_max of a block */
#define STORE_MAX_FRAMES     512u

/* Segment file header: 64 bytes at offset 0 of seg_NNNNNN.cps. */
struct store_seg_hdr {
	uint64_t magic;
	uint16_t major;
	uint16_t minor;
	uint32_t hdr_size;
	uint32_t seg_no;
	uint32_t flags;
	uint64_t created_ns;
	uint8_t _reserved[28];
	uint32_t crc; /* crc32c of the 60 bytes above */
};
_Static_assert(sizeof(struct store_seg_hdr) == 64, "segment header");

/* Block header: 56 bytes, then dict_zlen + data_zlen bytes. */
struct store_block_hdr {
	uint32_t magic;
	uint8_t major;
	uint8_t minor;
	uint8_t type;
	uint8_t flags;
	uint64_t t_min_ns;
	uint64_t t_max_ns;
	uint32_t dict_zlen;
	uint32_t dict_rawlen;
	uint32_t dict_crc;
	uint32_t data_zlen;
	uint32_t data_rawlen;
	uint32_t data_crc;
	uint32_t n_samples;
	uint32_t crc; /* crc32c of the 52 bytes above */
};
_Static_assert(sizeof(struct store_block_hdr) == 56, "block header");

/* index file: header, then one entry per block in completion order. */
struct store_idx_hdr {
	uint64_t magic;
	uint16_t major;
	uint16_t minor;
	uint32_t entry_size;
	uint64_t created_ns;
	uint32_t _reserved;
	uint32_t crc; /* crc32c of the 28 bytes above */
};
_Static_assert(sizeof(struct store_idx_hdr) == 32, "index header");

struct store_idx_entry {
	uint32_t seg_no;
	uint32_t off; /* of the block header in the segment */
	uint32_t len; /* header + sections */
	uint32_t t_min_s;
	uint16_t span_s; /* t_max_s - t_min_s */
	uint8_t n_sec;	 /* seconds with data in the block */
	uint8_t flags;	 /* STORE_BF_* copy: lets a reader skip dict-less blocks */
	uint32_t crc;	 /* crc32c of the 20 bytes above */
};
_Static_assert(sizeof(struct store_idx_entry) == 24, "index entry");

uint32_t store_crc32c(uint32_t crc, const void *buf, size_t len);
/* open(path) read-only for a reader: O_NONBLOCK (a FIFO put in place of a
 * store file must not hang us), then the fd only if it is a regular file:
 * else -EFTYPE-like -EINVAL. fd or -errno. */
int store_open_regular(const char *path);

static inline uint32_t store_crc(const void *buf, size_t len)
{
	return store_crc32c(0, buf, len);
}

/* Growable byte buffer. */
struct sbuf {
	uint8_t *p;
	size_t len, cap;
	bool oom;
};

int sbuf__reserve(struct sbuf *b, size_t more);
void sbuf__free(struct sbuf *b);

static inline void sbuf__put(struct sbuf *b, const void *src, size_t n)
{
	/* n == 0 (an empty string): b->p may still be NULL, and NULL + 0 is UB */
	if (!n || sbuf__reserve(b, n) < 0)
		return;
	memcpy(b->p + b->len, src, n);
	b->len += n;
}

static inline void sbuf__varint(struct sbuf *b, uint64_t v)
{
	if (sbuf__reserve(b, 10) < 0)
		return;
	while (v >= 0x80) {
		b->p[b->len++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->len++] = (uint8_t)v;
}

static inline uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzigzag(uint64_t v)
{
	return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* Bounds-checked reader over a decoded section. */
struct rbuf {
	const uint8_t *p;
	size_t len, pos;
	bool bad;
};

static inline uint64_t rbuf__varint(struct rbuf *r)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	while (r->pos < r->len && shift < 64) {
		uint8_t c = r->p[r->pos++];

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
		shift += 7;
	}
	r->bad = true;
	return 0;
}

static inline const uint8_t *rbuf__bytes(struct rbuf *r, uint64_t n)
{
	const uint8_t *p;

	if (r->bad || n > r->len - r->pos) {
		r->bad = true;
		return NULL;
	}
	p = r->p + r->pos;
	r->pos += n;
	return p;
}

#endif /* CPA_STORE_FMT_H */
