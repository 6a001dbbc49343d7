/* SPDX-License-Identifier: MIT */
/*
 * Private hash tables of the store writer and reader.
 *
 * itab: interns byte strings (a string, a packed frame, a packed stack) into
 * dense ids 1..n; the bytes live in one arena so an entry costs 12 bytes plus
 * its key. u32map: sparse u32 -> u32 (symd ids are dense in practice, but a
 * hostile or buggy producer must not make us allocate 4 G entries).
 */
#ifndef CPA_STORE_TAB_H
#define CPA_STORE_TAB_H

#include <stddef.h>
#include <stdint.h>

struct itab_ent {
	uint64_t off; /* into bytes */
	uint32_t len;
	uint32_t hash;
};

struct itab {
	struct itab_ent *ents; /* ents[id - 1] */
	uint32_t n, cap;
	uint32_t *slots; /* open addressing, 0 = empty, else id */
	uint32_t nslots; /* power of two */
	uint8_t *bytes;
	uint64_t blen, bcap;
};

/* Id of key (existing or new, *ret_new says which), or -ENOMEM. */
int itab__intern(struct itab *t, const void *key, uint32_t len, int *ret_new);
/* Id of key or 0. */
uint32_t itab__find(const struct itab *t, const void *key, uint32_t len);
static inline const void *itab__key(const struct itab *t, uint32_t id, uint32_t *ret_len)
{
	const struct itab_ent *e = &t->ents[id - 1];

	*ret_len = e->len;
	return t->bytes + e->off;
}
void itab__clear(struct itab *t);
void itab__free(struct itab *t);
static inline size_t itab__mem(const struct itab *t)
{
	return (size_t)t->cap * sizeof(struct itab_ent) + (size_t)t->nslots * 4 + t->bcap;
}

struct u32map {
	uint64_t *slots; /* key << 32 | value; key 0 is never stored */
	uint32_t n, nslots;
};

int u32map__set(struct u32map *m, uint32_t key, uint32_t val);
/* 0 when absent. */
uint32_t u32map__get(const struct u32map *m, uint32_t key);
void u32map__free(struct u32map *m);

uint32_t store_hash(const void *p, size_t len);

#endif /* CPA_STORE_TAB_H */
