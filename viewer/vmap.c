// SPDX-License-Identifier: MIT
/*
 * u64map (vmap.h), sized for the 24-hour store: ~250k distinct (segment,
 * stack) pairs. strtab is common/intern.h, inline in vmap.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vmap.h"

static int u64map_grow(struct u64map *m)
{
	uint32_t ncap = m->cap ? m->cap * 2 : 256, i;
	uint64_t *nk = calloc(ncap, sizeof(*nk));
	uint32_t *nv = calloc(ncap, sizeof(*nv));

	if (!nk || !nv) {
		free(nk);
		free(nv);
		return -ENOMEM;
	}
	for (i = 0; i < m->cap; i++) {
		uint32_t j;

		if (!m->vals[i])
			continue;
		j = (uint32_t)hash64_mix(m->keys[i]) & (ncap - 1);
		while (nv[j])
			j = (j + 1) & (ncap - 1);
		nk[j] = m->keys[i];
		nv[j] = m->vals[i];
	}
	free(m->keys);
	free(m->vals);
	m->keys = nk;
	m->vals = nv;
	m->cap = ncap;
	return 0;
}

uint32_t u64map__get(const struct u64map *m, uint64_t key)
{
	uint32_t j;

	if (!m->cap)
		return UINT32_MAX;
	j = (uint32_t)hash64_mix(key) & (m->cap - 1);
	while (m->vals[j]) {
		if (m->keys[j] == key)
			return m->vals[j] - 1;
		j = (j + 1) & (m->cap - 1);
	}
	return UINT32_MAX;
}

int u64map__put(struct u64map *m, uint64_t key, uint32_t val)
{
	uint32_t j;

	if ((m->n + 1) * 2 > m->cap && u64map_grow(m) < 0)
		return -ENOMEM;
	j = (uint32_t)hash64_mix(key) & (m->cap - 1);
	while (m->vals[j]) {
		if (m->keys[j] == key) {
			m->vals[j] = val + 1;
			return 0;
		}
		j = (j + 1) & (m->cap - 1);
	}
	m->keys[j] = key;
	m->vals[j] = val + 1;
	m->n++;
	return 0;
}

void u64map__clear(struct u64map *m)
{
	if (m->cap)
		memset(m->vals, 0, m->cap * sizeof(*m->vals));
	m->n = 0;
}

void u64map__free(struct u64map *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}
