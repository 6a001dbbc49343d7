/* SPDX-License-Identifier: MIT */
/*
 * Intern table: byte-string keys (a name, a packed struct, an array of u32
 * ids) -> dense u32 ids 1..n, in insertion order. Keys are copied into one
 * pool, so an entry costs 16 bytes + 4..8 bytes of slots + the key itself,
 * and intern__key(id) is the reverse map. Open addressing with linear probing
 * over an id array (load factor <= 1/2), hashed with hash64() (common/hash.h).
 *
 * Usage:
 *	struct intern t;           // or = {0}: a zeroed table is an empty one
 *	intern__init(&t);
 *	r = intern__get(&t, key, len, &id);  // 1: new id, 0: known id, <0: -errno
 *	id = intern__find(&t, key, len);     // 0 when absent, never inserts
 *	k = intern__key(&t, id, &len);
 *	intern__reset(&t);  // forget every key, keep the memory (reuse per segment)
 *	intern__free(&t);   // give the memory back; the table is empty and usable
 *
 * Per-id data (a count, a value) lives with the caller, in an array indexed
 * by id - 1, grown when intern__get() returns 1. Memory accounting for a cap
 * is intern__bytes(). By default keys are stored without alignment padding
 * and without a terminating NUL: a key read back may be unaligned (memcpy it
 * out), and a string is compared with its length (intern__cmp() orders keys
 * like memcmp() then shorter first, which is strcmp() order for strings).
 * intern__init_flags() asks for more (the flags outlive intern__free()):
 *	INTERN_ALIGN8  every key starts 8-byte aligned: intern__key() may be
 *	               read as the struct or u32 array that was interned;
 *	INTERN_NUL     a NUL is stored after every key (not part of it):
 *	               intern__str() reads a string key back as a C string.
 * A pointer from intern__key()/intern__str() is good until the next
 * intern__get() (the pool may move); never intern a key from the table.
 */
#ifndef CPA_INTERN_H
#define CPA_INTERN_H

#include <stddef.h>
#include <stdint.h>

#define INTERN_MAX_IDS (UINT32_C(1) << 31) /* ids fit an int return as well */

#define INTERN_ALIGN8 (UINT32_C(1) << 0)
#define INTERN_NUL    (UINT32_C(1) << 1)

struct intern_ent {
	uint64_t off;  /* of the key in pool */
	uint32_t len;  /* of the key */
	uint32_t hash; /* low half of hash64(): saves most memcmp()s and rehashes */
};

struct intern {
	uint32_t *slots;	 /* open addressing: 0 = empty, else an id */
	uint32_t nslots;	 /* 0 or a power of two */
	uint32_t n;		 /* ids handed out: 1..n */
	uint32_t cap;		 /* entries allocated */
	struct intern_ent *ents; /* ents[id - 1] */
	uint8_t *pool;		 /* the keys, back to back */
	size_t pool_len, pool_cap;
	uint32_t flags; /* INTERN_* */
};

void intern__init(struct intern *t);
void intern__init_flags(struct intern *t, uint32_t flags);
void intern__free(struct intern *t);
void intern__reset(struct intern *t);
/* Id of key in *ret_id: 1 if it was new (ids are dense: the new id is n),
 * 0 if known, -ENOMEM (also past INTERN_MAX_IDS ids). */
int intern__get(struct intern *t, const void *key, uint32_t len, uint32_t *ret_id);
/* Id of key, or 0 if absent. */
uint32_t intern__find(const struct intern *t, const void *key, uint32_t len);
/* Key of id (1..n), or NULL for an id the table did not hand out; ret_len may be NULL. */
const void *intern__key(const struct intern *t, uint32_t id, uint32_t *ret_len);
/* Key of id as a C string (INTERN_NUL tables); "" for 0, an unknown id or another table. */
const char *intern__str(const struct intern *t, uint32_t id);
/* <0, 0, >0 as key a sorts before, equal to, after key b (for qsort of ids). */
int intern__cmp(const struct intern *t, uint32_t a, uint32_t b);
/* Bytes allocated (slots, entries, pool): what a memory cap counts. */
size_t intern__bytes(const struct intern *t);

static inline uint32_t intern__count(const struct intern *t)
{
	return t->n;
}

#endif /* CPA_INTERN_H */
