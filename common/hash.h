/* SPDX-License-Identifier: MIT */
/*
 * The one hash function of the tree: 64-bit, for byte strings and packed id
 * arrays (hash tables, intern tables, caches). Header-only so hot loops inline
 * it; not for anything on disk or across processes (the value may change).
 * A table that keeps 32-bit hashes takes the low half: (uint32_t)hash64(...).
 */
#ifndef CPA_HASH_H
#define CPA_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* The murmur3 finalizer: every input bit reaches every output bit. */
static inline uint64_t hash64_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

static inline uint64_t hash64(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ (len * 0x100000001b3ULL);

	while (len >= 8) {
		uint64_t w;

		memcpy(&w, p, 8);
		h = (h ^ hash64_mix(w)) * 0x100000001b3ULL;
		p += 8;
		len -= 8;
	}
	if (len) {
		uint64_t w = 0;

		memcpy(&w, p, len);
		h = (h ^ hash64_mix(w ^ 0xa5)) * 0x100000001b3ULL;
	}
	return hash64_mix(h);
}

#endif /* CPA_HASH_H */
