/* SPDX-License-Identifier: MIT */
/*
 * Private tables of the store writer (the intern table of segment
 * dictionaries is common/intern.h).
 *
 * u32map: sparse u32 -> u32 (symd ids are dense in practice, but a hostile
 * or buggy producer must not make us allocate 4 G entries). VEC: a growable
 * array whose push returns the 1-based index of the new element.
 */
#ifndef CPA_STORE_TAB_H
#define CPA_STORE_TAB_H

#include <stddef.h>
#include <stdint.h>

#include "common/array.h"

struct u32map {
	uint64_t *slots; /* key << 32 | value; key 0 is never stored */
	uint32_t n, nslots;
};

int u32map__set(struct u32map *m, uint32_t key, uint32_t val);
/* 0 when absent. */
uint32_t u32map__get(const struct u32map *m, uint32_t key);
void u32map__free(struct u32map *m);

#define VEC(T)                   \
	struct {                 \
		T *v;            \
		uint32_t n, cap; \
	}

#define VEC_PUSH(vec, val)                                                                      \
	({                                                                                      \
		int _r = array_grow32_first((void **)&(vec).v, &(vec).cap, (size_t)(vec).n + 1, \
					    sizeof(*(vec).v), 64);                              \
		if (!_r)                                                                        \
			(vec).v[(vec).n++] = (val);                                             \
		_r < 0 ? _r : (int)(vec).n; /* 1-based index */                                 \
	})

#endif /* CPA_STORE_TAB_H */
