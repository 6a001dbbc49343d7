// SPDX-License-Identifier: MIT
/*
 * One intern table for everything symd numbers (strings, frames, stacks,
 * modules): keys are byte blobs copied into a pool, ids are dense from 1 so
 * the per-id arrays double as the reverse map. Open addressing with linear
 * probing over an id array keeps a lookup to one or two cache lines.
 */
#include "symd.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

uint64_t symd_hash(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (len * 0x100000001b3ULL);

	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		h = (h ^ mix64(w)) * 0x100000001b3ULL;
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t w = 0;

		memcpy(&w, p, len);
		h = (h ^ mix64(w ^ 0xa5)) * 0x100000001b3ULL;
	}
	return mix64(h);
}

void intern__init(struct intern *t)
{
	memset(t, 0, sizeof(*t));
}

void intern__fini(struct intern *t)
{
	free(t->slots);
	free(t->hash);
	free(t->off);
	free(t->len);
	free(t->pool);
	memset(t, 0, sizeof(*t));
}

void intern__clear(struct intern *t)
{
	/* Give the memory back: a clear happens when we are over budget. */
	intern__fini(t);
}

size_t intern__bytes(const struct intern *t)
{
	return (size_t)t->nslots * 4 + (size_t)t->cap * (8 + 8 + 4) + t->pool_cap;
}

static int intern__grow_slots(struct intern *t)
{
	uint32_t nslots = t->nslots ? t->nslots * 2 : 1024, i;
	uint32_t *slots;

	if (nslots < t->nslots)
		return -ENOMEM;
	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 1; i <= t->n; i++) {
		uint32_t pos = (uint32_t)t->hash[i - 1] & (nslots - 1);

		while (slots[pos])
			pos = (pos + 1) & (nslots - 1);
		slots[pos] = i;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
	return 0;
}

static int intern__grow_ids(struct intern *t)
{
	uint32_t cap = t->cap ? t->cap * 2 : 512;
	uint64_t *h, *o;
	uint32_t *l;

	if (cap < t->cap)
		return -ENOMEM;
	h = realloc(t->hash, cap * sizeof(*h));
	if (!h)
		return -ENOMEM;
	t->hash = h;
	o = realloc(t->off, cap * sizeof(*o));
	if (!o)
		return -ENOMEM;
	t->off = o;
	l = realloc(t->len, cap * sizeof(*l));
	if (!l)
		return -ENOMEM;
	t->len = l;
	t->cap = cap;
	return 0;
}

int intern__get(struct intern *t, const void *key, uint32_t len, uint32_t *ret_id)
{
	uint64_t h = symd_hash(key, len);
	uint32_t pos, id;
	int r;

	if (t->nslots) {
		for (pos = (uint32_t)h & (t->nslots - 1); (id = t->slots[pos]);
		     pos = (pos + 1) & (t->nslots - 1)) {
			if (t->hash[id - 1] == h && t->len[id - 1] == len &&
			    !memcmp(t->pool + t->off[id - 1], key, len)) {
				*ret_id = id;
				return 0;
			}
		}
	}

	if (t->n == UINT32_MAX - 1)
		return -ENOMEM;
	/* Keep the load factor under 1/2. */
	if ((uint64_t)(t->n + 1) * 2 > t->nslots) {
		r = intern__grow_slots(t);
		if (r < 0)
			return r;
	}
	if (t->n == t->cap) {
		r = intern__grow_ids(t);
		if (r < 0)
			return r;
	}
	if (t->pool_len + len > t->pool_cap) {
		size_t cap = t->pool_cap ? t->pool_cap : 4096;
		uint8_t *p;

		while (cap < t->pool_len + len)
			cap *= 2;
		p = realloc(t->pool, cap);
		if (!p)
			return -ENOMEM;
		t->pool = p;
		t->pool_cap = cap;
	}
	if (len)
		memcpy(t->pool + t->pool_len, key, len);
	id = ++t->n;
	t->hash[id - 1] = h;
	t->off[id - 1] = t->pool_len;
	t->len[id - 1] = len;
	t->pool_len += len;

	for (pos = (uint32_t)h & (t->nslots - 1); t->slots[pos]; pos = (pos + 1) & (t->nslots - 1))
		;
	t->slots[pos] = id;
	*ret_id = id;
	return 1;
}

const void *intern__key(const struct intern *t, uint32_t id, uint32_t *ret_len)
{
	if (id == 0 || id > t->n)
		return NULL;
	*ret_len = t->len[id - 1];
	return t->pool + t->off[id - 1];
}
