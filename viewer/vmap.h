/* SPDX-License-Identifier: MIT */
/*
 * The viewer's two id maps: a u64 -> u32 hash map (stack cache, group ids,
 * aggregation keys; open addressing, linear probing, power-of-two sizes,
 * nothing removed, only cleared) and strtab, the name table (frame names,
 * modules, group labels, export lines): the common intern table
 * (common/intern.h) with string keys read back as C strings, dense ids from 1.
 */
#ifndef CPA_VMAP_H
#define CPA_VMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"
#include "common/intern.h"

struct u64map {
	uint64_t *keys;
	uint32_t *vals; /* 0 = empty slot: values are stored + 1 */
	uint32_t cap, n;
};

/* Value for key, or UINT32_MAX when absent. */
uint32_t u64map__get(const struct u64map *m, uint64_t key);
/* Insert or overwrite; val < UINT32_MAX - 1. 0 or -ENOMEM. */
int u64map__put(struct u64map *m, uint64_t key, uint32_t val);
void u64map__clear(struct u64map *m);
void u64map__free(struct u64map *m);

/* A zeroed strtab is an empty one. */
struct strtab {
	struct intern t; /* INTERN_NUL, set by the first strtab__intern() */
};

/* Id of s (len bytes), interning it on first sight: > 0, or 0 on ENOMEM.
 * s must not point into the table. */
static inline uint32_t strtab__intern(struct strtab *t, const char *s, size_t len)
{
	uint32_t id;

	t->t.flags |= INTERN_NUL;
	if (len > UINT32_MAX || intern__get(&t->t, s, (uint32_t)len, &id) < 0)
		return 0;
	return id;
}

/* Id of s if known, else 0. */
static inline uint32_t strtab__find(const struct strtab *t, const char *s, size_t len)
{
	return len > UINT32_MAX ? 0 : intern__find(&t->t, s, (uint32_t)len);
}

/* Ids handed out: 1..strtab__count(). */
static inline uint32_t strtab__count(const struct strtab *t)
{
	return intern__count(&t->t);
}

/* String of id ("" for 0 or an unknown id); good until the next strtab__intern(). */
static inline const char *strtab__str(const struct strtab *t, uint32_t id)
{
	return intern__str(&t->t, id);
}

static inline void strtab__free(struct strtab *t)
{
	intern__free(&t->t);
}

#endif /* CPA_VMAP_H */
