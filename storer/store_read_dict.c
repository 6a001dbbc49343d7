// SPDX-License-Identifier: MIT
/*
 * The store reader's segment dictionary (store_reader_pvt.h): the strings,
 * modules, frames and stacks of one segment, applied block by block from the
 * dictionary deltas store_block.c encodes (docs/store-format.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_reader_pvt.h"

/* A gap in dictionary ids (a lost section) larger than this is a lie. */
#define DICT_MAX_GAP (1u << 20)

static const char LOST_DICT[] = STORE_DICT_LOST;

void rdict__clear(struct rdict *d)
{
	uint32_t i;

	for (i = 0; i < d->n_str; i++)
		if (d->strs[i] != LOST_DICT)
			free(d->strs[i]);
	d->n_str = d->n_mod = d->n_frame = d->n_stack = d->n_sf = 0;
}

void rdict__free(struct rdict *d)
{
	rdict__clear(d);
	free(d->strs);
	free(d->mods);
	free(d->frames);
	free(d->stacks);
	free(d->stack_frames);
	memset(d, 0, sizeof(*d));
}

const char *rdict__str(const struct rdict *d, uint64_t id)
{
	if (!id)
		return "";
	if (id > d->n_str)
		return LOST_DICT;
	return d->strs[id - 1];
}

/* Entries come with their first id; a gap (a lost dictionary section) is
 * filled with placeholders so later ids still line up. */
int rdict__apply(struct rdict *d, const uint8_t *p, size_t len)
{
	struct rbuf b = {.p = p, .len = len};
	uint64_t first, n, i, j;

	/* strings */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_str + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_str + 1 < first) {
		if (grow((void **)&d->strs, &d->cap_str, d->n_str + 1, sizeof(char *)) < 0)
			return -ENOMEM;
		d->strs[d->n_str++] = (char *)LOST_DICT;
	}
	for (i = 0; i < n; i++) {
		uint64_t sl = rbuf__varint(&b);
		const uint8_t *s = rbuf__bytes(&b, sl);
		char *c;

		if (!s)
			return -EBADMSG;
		if (first + i <= d->n_str)
			continue;
		if (grow((void **)&d->strs, &d->cap_str, d->n_str + 1, sizeof(char *)) < 0)
			return -ENOMEM;
		c = malloc(sl + 1);
		if (!c)
			return -ENOMEM;
		memcpy(c, s, sl);
		c[sl] = 0;
		d->strs[d->n_str++] = c;
	}
	/* modules */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_mod + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_mod + 1 < first) {
		if (grow((void **)&d->mods, &d->cap_mod, d->n_mod + 1, sizeof(*d->mods)) < 0)
			return -ENOMEM;
		d->mods[d->n_mod++] = (struct rmod){.path = LOST_DICT};
	}
	for (i = 0; i < n; i++) {
		struct rmod m = {0};
		const uint8_t *bid;

		rbuf__varint(&b); /* kind */
		m.path = rdict__str(d, rbuf__varint(&b));
		m.bid_len = (uint8_t)rbuf__varint(&b);
		if (m.bid_len > CPA_BUILD_ID_MAX)
			return -EBADMSG;
		bid = rbuf__bytes(&b, m.bid_len);
		if (!bid)
			return -EBADMSG;
		memcpy(m.bid, bid, m.bid_len);
		if (first + i <= d->n_mod)
			continue;
		if (grow((void **)&d->mods, &d->cap_mod, d->n_mod + 1, sizeof(*d->mods)) < 0)
			return -ENOMEM;
		d->mods[d->n_mod++] = m;
	}
	/* frames */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_frame + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_frame + 1 < first) {
		if (grow((void **)&d->frames, &d->cap_frame, d->n_frame + 1, sizeof(*d->frames)) <
		    0)
			return -ENOMEM;
		d->frames[d->n_frame++] = (struct store_frame){
			.name = LOST_DICT, .module = "", .flags = CPA_FF_MARKER};
	}
	for (i = 0; i < n; i++) {
		struct store_frame f = {0};
		uint64_t name = rbuf__varint(&b), mod = rbuf__varint(&b);

		f.flags = (uint32_t)rbuf__varint(&b);
		f.offset = rbuf__varint(&b);
		if (b.bad)
			return -EBADMSG;
		f.name = rdict__str(d, name);
		f.module = "";
		if (mod && mod <= d->n_mod) {
			const struct rmod *m = &d->mods[mod - 1];

			f.module = m->path;
			f.build_id_len = m->bid_len;
			memcpy(f.build_id, m->bid, m->bid_len);
		}
		if (first + i <= d->n_frame)
			continue;
		if (grow((void **)&d->frames, &d->cap_frame, d->n_frame + 1, sizeof(*d->frames)) <
		    0)
			return -ENOMEM;
		d->frames[d->n_frame++] = f;
	}
	/* stacks */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_stack + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_stack + 1 < first) {
		if (grow((void **)&d->stacks, &d->cap_stack, d->n_stack + 1, sizeof(*d->stacks)) <
		    0)
			return -ENOMEM;
		d->stacks[d->n_stack++] = (struct rstack){.n = 0};
	}
	for (i = 0; i < n; i++) {
		uint64_t nf = rbuf__varint(&b), nk = rbuf__varint(&b);
		struct rstack s = {.off = d->n_sf, .n = (uint16_t)nf, .nk = (uint16_t)nk};
		int64_t prev = 0;
		bool keep = first + i > d->n_stack;

		if (b.bad || nf > STORE_MAX_FRAMES || nk > nf)
			return -EBADMSG;
		if (keep && grow((void **)&d->stack_frames, &d->cap_sf, d->n_sf + (uint32_t)nf,
				 sizeof(uint32_t)) < 0)
			return -ENOMEM;
		for (j = 0; j < nf; j++) {
			int64_t fid = prev + unzigzag(rbuf__varint(&b));

			prev = fid;
			if (b.bad)
				return -EBADMSG;
			if (keep)
				d->stack_frames[d->n_sf++] =
					fid >= 1 && (uint64_t)fid <= d->n_frame ? (uint32_t)fid : 0;
		}
		if (!keep)
			continue;
		if (grow((void **)&d->stacks, &d->cap_stack, d->n_stack + 1, sizeof(*d->stacks)) <
		    0)
			return -ENOMEM;
		d->stacks[d->n_stack++] = s;
	}
	return 0;
}
