// SPDX-License-Identifier: MIT
#include "intern.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "hash.h"

void intern__init(struct intern *t)
{
	memset(t, 0, sizeof(*t));
}

void intern__init_flags(struct intern *t, uint32_t flags)
{
	memset(t, 0, sizeof(*t));
	t->flags = flags;
}

void intern__free(struct intern *t)
{
	uint32_t flags = t->flags;

	free(t->slots);
	free(t->ents);
	free(t->pool);
	memset(t, 0, sizeof(*t));
	t->flags = flags;
}

void intern__reset(struct intern *t)
{
	t->n = 0;
	t->pool_len = 0;
	if (t->slots)
		memset(t->slots, 0, (size_t)t->nslots * sizeof(*t->slots));
}

size_t intern__bytes(const struct intern *t)
{
	return (size_t)t->nslots * sizeof(*t->slots) + (size_t)t->cap * sizeof(*t->ents) +
	       t->pool_cap;
}

static int grow_slots(struct intern *t)
{
	uint32_t nslots = t->nslots ? t->nslots * 2 : 1024, i;
	uint32_t *slots;

	if (nslots < t->nslots)
		return -ENOMEM;
	slots = calloc(nslots, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		uint32_t pos = t->ents[i].hash & (nslots - 1);

		while (slots[pos])
			pos = (pos + 1) & (nslots - 1);
		slots[pos] = i + 1;
	}
	free(t->slots);
	t->slots = slots;
	t->nslots = nslots;
	return 0;
}

/* Id of key, else 0 with *ret_pos the empty slot that ends its probe. */
static uint32_t lookup(const struct intern *t, const void *key, uint32_t len, uint32_t h,
		       uint32_t *ret_pos)
{
	uint32_t pos, id;

	for (pos = h & (t->nslots - 1); (id = t->slots[pos]); pos = (pos + 1) & (t->nslots - 1)) {
		const struct intern_ent *e = &t->ents[id - 1];

		if (e->hash == h && e->len == len && (!len || !memcmp(t->pool + e->off, key, len)))
			return id;
	}
	*ret_pos = pos;
	return 0;
}

uint32_t intern__find(const struct intern *t, const void *key, uint32_t len)
{
	uint32_t pos;

	if (!t->nslots)
		return 0;
	return lookup(t, key, len, (uint32_t)hash64(key, len), &pos);
}

int intern__get(struct intern *t, const void *key, uint32_t len, uint32_t *ret_id)
{
	uint32_t h = (uint32_t)hash64(key, len), pos, id;
	size_t off, need;
	int r;

	/* Keep the load factor under 1/2 (grown before the probe, so the
	 * empty slot the probe ends on is the one to fill). */
	if ((uint64_t)(t->n + 1) * 2 > t->nslots) {
		r = grow_slots(t);
		if (r < 0)
			return r;
	}
	id = lookup(t, key, len, h, &pos);
	if (id) {
		*ret_id = id;
		return 0;
	}
	if (t->n >= INTERN_MAX_IDS)
		return -ENOMEM;
	if (t->n == t->cap) {
		size_t cap = t->cap; /* <= INTERN_MAX_IDS: fits */

		r = array_grow_first((void **)&t->ents, &cap, (size_t)t->n + 1, sizeof(*t->ents),
				     512);
		if (r < 0)
			return r;
		t->cap = (uint32_t)cap;
	}
	/* The key at off (aligned if asked), then its NUL if asked. */
	off = t->flags & INTERN_ALIGN8 ? (t->pool_len + 7) & ~(size_t)7 : t->pool_len;
	need = (size_t)len + !!(t->flags & INTERN_NUL);
	r = array_grow_first((void **)&t->pool, &t->pool_cap, off + need, 1, 4096);
	if (r < 0)
		return r;
	if (len)
		memcpy(t->pool + off, key, len);
	if (t->flags & INTERN_NUL)
		t->pool[off + len] = '\0';
	t->ents[t->n] = (struct intern_ent){.off = off, .len = len, .hash = h};
	t->pool_len = off + need;
	id = ++t->n;
	t->slots[pos] = id;
	*ret_id = id;
	return 1;
}

const void *intern__key(const struct intern *t, uint32_t id, uint32_t *ret_len)
{
	if (id == 0 || id > t->n)
		return NULL;
	if (ret_len)
		*ret_len = t->ents[id - 1].len;
	return t->pool + t->ents[id - 1].off;
}

const char *intern__str(const struct intern *t, uint32_t id)
{
	if (!(t->flags & INTERN_NUL) || id == 0 || id > t->n)
		return "";
	return (const char *)t->pool + t->ents[id - 1].off;
}

int intern__cmp(const struct intern *t, uint32_t a, uint32_t b)
{
	const struct intern_ent *x = &t->ents[a - 1], *y = &t->ents[b - 1];
	uint32_t len = x->len < y->len ? x->len : y->len;
	int c = len ? memcmp(t->pool + x->off, t->pool + y->off, len) : 0;

	if (c)
		return c;
	return x->len < y->len ? -1 : x->len > y->len;
}
