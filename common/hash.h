/* SPDX-License-Identifier: MIT */
/*
 * The hash functions of the tree, header-only so hot loops inline them:
 *
 *  hash64(p, len)     bytes (names, packed structs, id arrays) -> 64 bits:
 *                     hash tables, intern tables, caches. In-process only:
 *                     its values may change. A table that keeps 32-bit
 *                     hashes takes the low half: (uint32_t)hash64(...).
 *  hash64_mix(x)      a u64 key (pid, address, packed pair) -> 64 bits, every
 *                     input bit reaching every output bit. In-process only.
 *  hash32_fib(x),     multiplicative (Fibonacci) hashing of a dense id: one
 *  hash64_fib(x)      multiply; the high bits are the well-mixed ones.
 *                     In-process only.
 *  hash_fnv1a64(p, n) FNV-1a 64, byte at a time. Its values must never change:
 *                     the arena header's checksum (shm/arena.h) is computed
 *                     with it by one process and checked by another.
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

static inline uint32_t hash32_fib(uint32_t x)
{
	return x * 0x9e3779b1u;
}

static inline uint64_t hash64_fib(uint64_t x)
{
	return x * 0x9e3779b97f4a7c15ULL;
}

/* Fixed: shared between processes (see above). */
static inline uint64_t hash_fnv1a64(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

#endif /* CPA_HASH_H */
