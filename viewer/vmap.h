/* SPDX-License-Identifier: MIT */
/*
 * Two small hash tables of the viewer: a u64 -> u32 map (stack cache, group
 * ids, aggregation keys) and a string interner (frame names, modules, group
 * labels) handing out dense ids from 1. Open addressing, linear probing,
 * power-of-two sizes; nothing is ever removed, only cleared.
 *
 * Local helpers: fold into common/ when the tree grows a shared interner.
 */
#ifndef CPA_VMAP_H
#define CPA_VMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/hash.h"

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

struct strtab {
	char **strs;	 /* id - 1 -> string (owned, in chunks) */
	uint32_t *slots; /* hash slot -> id, 0 empty */
	uint32_t n, cap_strs, cap_slots;
	char *chunk;
	size_t chunk_used, chunk_cap;
	char **chunks;
	uint32_t n_chunks, cap_chunks;
};

/* Id of s (len bytes), interning it on first sight: > 0, or 0 on ENOMEM. */
uint32_t strtab__intern(struct strtab *t, const char *s, size_t len);
/* Id of s if known, else 0. */
uint32_t strtab__find(const struct strtab *t, const char *s, size_t len);
/* String of id ("" for 0 or an unknown id). */
const char *strtab__str(const struct strtab *t, uint32_t id);
void strtab__free(struct strtab *t);

#endif /* CPA_VMAP_H */
