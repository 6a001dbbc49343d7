// SPDX-License-Identifier: MIT
/*
 * u64map and strtab (vmap.h): the viewer's interning. Sized for the 24-hour
 * store: ~250k distinct (segment, stack) pairs and ~100k distinct names.
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

/* ------------------------------------------------------------ strtab */

static uint64_t str_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 1099511628211ULL;
	return hash64_mix(h);
}

static bool str_eq(const char *a, const char *s, size_t len)
{
	return !strncmp(a, s, len) && a[len] == '\0';
}

uint32_t strtab__find(const struct strtab *t, const char *s, size_t len)
{
	uint32_t j;

	if (!t->cap_slots)
		return 0;
	j = (uint32_t)str_hash(s, len) & (t->cap_slots - 1);
	while (t->slots[j]) {
		if (str_eq(t->strs[t->slots[j] - 1], s, len))
			return t->slots[j];
		j = (j + 1) & (t->cap_slots - 1);
	}
	return 0;
}

static int slots_grow(struct strtab *t)
{
	uint32_t ncap = t->cap_slots ? t->cap_slots * 2 : 1024, i;
	uint32_t *ns = calloc(ncap, sizeof(*ns));

	if (!ns)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		const char *s = t->strs[i];
		uint32_t j = (uint32_t)str_hash(s, strlen(s)) & (ncap - 1);

		while (ns[j])
			j = (j + 1) & (ncap - 1);
		ns[j] = i + 1;
	}
	free(t->slots);
	t->slots = ns;
	t->cap_slots = ncap;
	return 0;
}

static char *chunk_alloc(struct strtab *t, size_t len)
{
	char *p;

	if (t->chunk_used + len > t->chunk_cap) {
		size_t cap = len > 65536 ? len : 65536;

		if (t->n_chunks == t->cap_chunks) {
			uint32_t nc = t->cap_chunks ? t->cap_chunks * 2 : 16;
			char **np = realloc(t->chunks, nc * sizeof(*np));

			if (!np)
				return NULL;
			t->chunks = np;
			t->cap_chunks = nc;
		}
		t->chunk = malloc(cap);
		if (!t->chunk)
			return NULL;
		t->chunks[t->n_chunks++] = t->chunk;
		t->chunk_used = 0;
		t->chunk_cap = cap;
	}
	p = t->chunk + t->chunk_used;
	t->chunk_used += len;
	return p;
}

uint32_t strtab__intern(struct strtab *t, const char *s, size_t len)
{
	uint32_t id = strtab__find(t, s, len), j;
	char *p;

	if (id)
		return id;
	if ((t->n + 1) * 2 > t->cap_slots && slots_grow(t) < 0)
		return 0;
	if (t->n == t->cap_strs) {
		uint32_t nc = t->cap_strs ? t->cap_strs * 2 : 1024;
		char **np = realloc(t->strs, nc * sizeof(*np));

		if (!np)
			return 0;
		t->strs = np;
		t->cap_strs = nc;
	}
	p = chunk_alloc(t, len + 1);
	if (!p)
		return 0;
	memcpy(p, s, len);
	p[len] = '\0';
	t->strs[t->n++] = p;
	j = (uint32_t)str_hash(s, len) & (t->cap_slots - 1);
	while (t->slots[j])
		j = (j + 1) & (t->cap_slots - 1);
	t->slots[j] = t->n;
	return t->n;
}

const char *strtab__str(const struct strtab *t, uint32_t id)
{
	return id && id <= t->n ? t->strs[id - 1] : "";
}

void strtab__free(struct strtab *t)
{
	uint32_t i;

	for (i = 0; i < t->n_chunks; i++)
		free(t->chunks[i]);
	free(t->chunks);
	free(t->strs);
	free(t->slots);
	memset(t, 0, sizeof(*t));
}
