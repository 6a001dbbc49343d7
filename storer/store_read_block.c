// SPDX-License-Identifier: MIT
/*
 * Store reader, block I/O (store_reader_pvt.h): a block's sections read,
 * checked against their crc32c and decompressed; a segment's dictionary
 * loaded up to a block; the walk over the blocks of a time range. A bad
 * block is reported through the notice callback and skipped; a block past
 * the end of its file (torn tail) is skipped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/timeutil.h"
#include "store_reader_pvt.h"

int store_read__pread_exact(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = read_upto(fd, buf, len, (off_t)off);

	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -ENODATA;
}

bool store_read__hdr_ok(const struct store_block_hdr *h)
{
	return h->magic == STORE_BLOCK_MAGIC &&
	       h->crc == store_crc(h, offsetof(struct store_block_hdr, crc)) &&
	       h->type == STORE_BLOCK_DATA && h->dict_rawlen <= STORE_MAX_SECTION &&
	       h->data_rawlen <= STORE_MAX_SECTION && h->dict_zlen <= STORE_MAX_SECTION &&
	       h->data_zlen <= STORE_MAX_SECTION && h->t_max_ns >= h->t_min_ns &&
	       h->t_max_ns / NSEC_PER_SEC - h->t_min_ns / NSEC_PER_SEC <= UINT16_MAX &&
	       (h->dict_zlen == 0) == (h->dict_rawlen == 0);
}

uint32_t store_read__block_len(const struct store_block_hdr *h)
{
	return (uint32_t)sizeof(*h) + h->dict_zlen + h->data_zlen;
}

static int ensure(uint8_t **p, size_t *cap, size_t need)
{
	uint8_t *np;

	if (need <= *cap)
		return 0;
	np = realloc(*p, need);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = need;
	return 0;
}

int store_read__section(struct store_reader *r, struct rseg *s, struct rblock *b, bool data,
			struct store_block_hdr *ret_h)
{
	struct store_block_hdr h;
	uint32_t zoff, zlen, rawlen, crc, want;
	size_t got;
	int e;

	if ((uint64_t)b->off + b->len > s->size) {
		r->st.blocks_torn++;
		b->bad = RB_TORN;
		store_read__notice(
			r, "%s: block at %u runs past the end of the file (torn tail), skipped",
			s->path, b->off);
		return -ENODATA;
	}
	want = data ? b->len : MIN(b->len, (uint32_t)sizeof(h) + STORE_MAX_SECTION);
	if (!data) {
		/* Header first, then just the dictionary section. */
		e = store_read__pread_exact(s->fd, &h, sizeof(h), b->off);
		if (e == -ENODATA)
			goto torn;
		if (e < 0)
			return e;
		if (!store_read__hdr_ok(&h) || store_read__block_len(&h) != b->len)
			goto corrupt;
		want = (uint32_t)sizeof(h) + h.dict_zlen;
	}
	e = ensure(&r->zbuf, &r->zcap, want);
	if (e < 0)
		return e;
	e = store_read__pread_exact(s->fd, r->zbuf, want, b->off);
	if (e == -ENODATA)
		goto torn;
	if (e < 0)
		return e;
	r->st.bytes_read += want;
	memcpy(&h, r->zbuf, sizeof(h));
	if (!store_read__hdr_ok(&h) || store_read__block_len(&h) != b->len)
		goto corrupt;
	if (h.major > STORE_VERSION_MAJOR)
		goto corrupt;
	if (data) {
		zoff = (uint32_t)sizeof(h) + h.dict_zlen;
		zlen = h.data_zlen;
		rawlen = h.data_rawlen;
		crc = h.data_crc;
	} else {
		zoff = sizeof(h);
		zlen = h.dict_zlen;
		rawlen = h.dict_rawlen;
		crc = h.dict_crc;
	}
	if (store_crc(r->zbuf + zoff, zlen) != crc)
		goto corrupt;
	if (ret_h)
		*ret_h = h;
	if (!zlen)
		return 0;
	e = ensure(&r->rawbuf, &r->rawcap, rawlen);
	if (e < 0)
		return e;
	got = ZSTD_decompressDCtx(r->dctx, r->rawbuf, rawlen, r->zbuf + zoff, zlen);
	if (ZSTD_isError(got) || got != rawlen)
		goto corrupt;
	return (int)rawlen;

torn:
	r->st.blocks_torn++;
	b->bad = RB_TORN;
	store_read__notice(r, "%s: block at %u is cut short (torn tail), skipped", s->path, b->off);
	return -ENODATA;
corrupt:
	r->st.blocks_corrupt++;
	b->bad = true;
	store_read__notice(r,
			   "%s: block at %u is corrupt (bad header, length or checksum), skipped",
			   s->path, b->off);
	return -EBADMSG;
}

void rseg__close(struct rseg *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

/* Load the dictionary of segment si up to and including block upto. */
static int load_dict(struct store_reader *r, uint32_t si, uint32_t upto)
{
	struct rseg *s = &r->segs[si];
	uint32_t i;

	if (r->dict_seg != (int)si) {
		rdict__clear(&r->dict);
		if (r->dict_seg >= 0) {
			struct rseg *o = &r->segs[r->dict_seg];

			for (i = 0; i < o->n; i++)
				o->blocks[i].dict_done = false;
		}
		r->dict_seg = (int)si;
	}
	for (i = 0; i <= upto && i < s->n; i++) {
		struct rblock *b = &s->blocks[i];
		int n;

		if (b->dict_done || !(b->flags & STORE_BF_DICT))
			continue;
		b->dict_done = true;
		if (b->bad)
			continue;
		n = store_read__section(r, s, b, false, NULL);
		if (n == -ENOMEM)
			return n;
		if (n < 0)
			continue;
		r->st.dict_reads++;
		if (rdict__apply(&r->dict, r->rawbuf, (size_t)n) < 0) {
			r->st.blocks_corrupt++;
			b->bad = true;
			store_read__notice(r, "%s: block at %u has a malformed dictionary, skipped",
					   s->path, b->off);
		}
	}
	return 0;
}

static bool block_in(const struct rblock *b, int64_t t0s, int64_t t1s)
{
	return (int64_t)b->t_min_s < t1s && (int64_t)b->t_min_s + b->span_s >= t0s;
}

/* Every second of the block's span holds rows, as its index entry says. */
bool rblock__full(const struct rblock *b)
{
	return b->indexed && b->n_sec == (uint32_t)b->span_s + 1;
}

static bool it_wants(const struct blk_iter *it, const struct rblock *b)
{
	return (b->flags & it->need) == it->need && block_in(b, it->t0s, it->t1s) &&
	       !(it->skip_full && rblock__full(b));
}

/* The segment's file open (on demand; closed once a walk is done with it).
 * 0, or -errno with a notice: the caller skips the segment. */
static int seg_ensure_open(struct store_reader *r, struct rseg *s)
{
	if (s->fd >= 0)
		return 0;
	s->fd = store_open_regular(s->path);
	if (s->fd >= 0)
		return 0;
	store_read__notice(r, "%s: %s, skipped", s->path, strerror(-s->fd));
	s->fd = -1;
	return -EIO;
}

void blk_iter__init(struct blk_iter *it, uint64_t t0_ns, uint64_t t1_ns, uint8_t need, bool dict)
{
	*it = (struct blk_iter){
		.t0s = (int64_t)(t0_ns / NSEC_PER_SEC),
		.t1s = (int64_t)((t1_ns + NSEC_PER_SEC - 1) / NSEC_PER_SEC),
		.need = need,
		.dict = dict,
		.last = -1,
	};
}

int blk_iter__next(struct store_reader *r, struct blk_iter *it, struct rseg **ret_s,
		   struct rblock **ret_b)
{
	for (; it->si < r->n_seg; it->si++, it->last = -1) {
		struct rseg *s = &r->segs[it->si];

		if (it->last < 0) {
			for (uint32_t i = 0; i < s->n; i++)
				if (it_wants(it, &s->blocks[i]))
					it->last = i;
			if (it->last < 0 || seg_ensure_open(r, s) < 0) {
				it->last = -1;
				continue;
			}
			if (it->dict) {
				int ret = load_dict(r, it->si, (uint32_t)it->last);

				if (ret < 0)
					return ret;
			}
			it->i = 0;
		}
		while (it->i <= (uint32_t)it->last) {
			struct rblock *b = &s->blocks[it->i++];

			if (b->bad || !it_wants(it, b))
				continue;
			*ret_s = s;
			*ret_b = b;
			return 1;
		}
		rseg__close(s);
	}
	return 0;
}
