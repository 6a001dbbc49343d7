// SPDX-License-Identifier: MIT
/* Helpers shared by the store writer and reader: crc32c, buffers, tables. */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store.h"
#include "store_fmt.h"
#include "store_tab.h"

/* ------------------------------------------------------------ crc32c */

static uint32_t crc_tab[8][256];
static int crc_init_done;

static void crc_init(void)
{
	uint32_t i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ (0x82f63b78u & -(c & 1));
		crc_tab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (j = 1; j < 8; j++)
			crc_tab[j][i] =
				(crc_tab[j - 1][i] >> 8) ^ crc_tab[0][crc_tab[j - 1][i] & 0xff];
	__atomic_store_n(&crc_init_done, 1, __ATOMIC_RELEASE);
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(uint32_t crc, const uint8_t *p,
							    size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	while (len--)
		c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
	return (uint32_t)c;
}

/* Castagnoli CRC (the one ext4, btrfs and iSCSI use): SSE4.2 when the CPU
 * has it, slicing-by-8 otherwise. Both give the same value. */
uint32_t store_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint32_t c = ~crc;

	if (__builtin_cpu_supports("sse4.2"))
		return ~crc32c_hw(c, p, len);
	/* A benign race: two threads may both build the same table. */
	if (!__atomic_load_n(&crc_init_done, __ATOMIC_ACQUIRE))
		crc_init();
	while (len >= 8) {
		uint32_t lo, hi;

		memcpy(&lo, p, 4);
		memcpy(&hi, p + 4, 4);
		lo ^= c;
		c = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^
		    crc_tab[5][(lo >> 16) & 0xff] ^ crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^
		    crc_tab[2][(hi >> 8) & 0xff] ^ crc_tab[1][(hi >> 16) & 0xff] ^
		    crc_tab[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		c = (c >> 8) ^ crc_tab[0][(c ^ *p++) & 0xff];
	return ~c;
}

/* ------------------------------------------------------------ buffers */

int sbuf__reserve(struct sbuf *b, size_t more)
{
	size_t want;
	uint8_t *p;

	if (b->oom)
		return -ENOMEM;
	if (b->len + more <= b->cap)
		return 0;
	want = b->cap ? b->cap : 256;
	while (want < b->len + more)
		want *= 2;
	p = realloc(b->p, want);
	if (!p) {
		b->oom = true;
		return -ENOMEM;
	}
	b->p = p;
	b->cap = want;
	return 0;
}

void sbuf__free(struct sbuf *b)
{
	free(b->p);
	*b = (struct sbuf){0};
}

/* ------------------------------------------------------------ hashing */

uint32_t store_hash(const void *p, size_t len)
{
	const uint8_t *s = p;
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ len;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, s, 8);
		h = (h ^ (v * 0xff51afd7ed558ccdULL)) * 0xc4ceb9fe1a85ec53ULL;
		h ^= h >> 29;
		s += 8;
		len -= 8;
	}
	while (len--)
		h = (h ^ *s++) * 0x100000001b3ULL;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return (uint32_t)h;
}

static int itab_grow_slots(struct itab *t)
{
	uint32_t ns = t->nslots ? t->nslots * 2 : 64, i;
	uint32_t *s = calloc(ns, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (i = 0; i < t->n; i++) {
		uint32_t h = t->ents[i].hash & (ns - 1);

		while (s[h])
			h = (h + 1) & (ns - 1);
		s[h] = i + 1;
	}
	free(t->slots);
	t->slots = s;
	t->nslots = ns;
	return 0;
}

static uint32_t itab_lookup(const struct itab *t, const void *key, uint32_t len, uint32_t h,
			    uint32_t *ret_slot)
{
	uint32_t i = h & (t->nslots - 1);

	for (;;) {
		uint32_t id = t->slots[i];
		const struct itab_ent *e;

		if (!id) {
			*ret_slot = i;
			return 0;
		}
		e = &t->ents[id - 1];
		if (e->hash == h && e->len == len && !memcmp(t->bytes + e->off, key, len))
			return id;
		i = (i + 1) & (t->nslots - 1);
	}
}

uint32_t itab__find(const struct itab *t, const void *key, uint32_t len)
{
	uint32_t slot;

	if (!t->nslots)
		return 0;
	return itab_lookup(t, key, len, store_hash(key, len), &slot);
}

int itab__intern(struct itab *t, const void *key, uint32_t len, int *ret_new)
{
	uint32_t h = store_hash(key, len), slot, id;

	*ret_new = 0;
	if ((uint64_t)(t->n + 1) * 2 > t->nslots && itab_grow_slots(t) < 0)
		return -ENOMEM;
	id = itab_lookup(t, key, len, h, &slot);
	if (id)
		return (int)id;
	if (t->n >= INT32_MAX - 1)
		return -ENOSPC;
	if (t->n == t->cap) {
		uint32_t nc = t->cap ? t->cap * 2 : 64;
		struct itab_ent *e = realloc(t->ents, nc * sizeof(*e));

		if (!e)
			return -ENOMEM;
		t->ents = e;
		t->cap = nc;
	}
	if (t->blen + len > t->bcap) {
		uint64_t nc = t->bcap ? t->bcap * 2 : 4096;
		uint8_t *b;

		while (nc < t->blen + len)
			nc *= 2;
		b = realloc(t->bytes, nc);
		if (!b)
			return -ENOMEM;
		t->bytes = b;
		t->bcap = nc;
	}
	memcpy(t->bytes + t->blen, key, len);
	t->ents[t->n] = (struct itab_ent){.off = t->blen, .len = len, .hash = h};
	t->blen += len;
	t->n++;
	t->slots[slot] = t->n;
	*ret_new = 1;
	return (int)t->n;
}

void itab__clear(struct itab *t)
{
	t->n = 0;
	t->blen = 0;
	if (t->slots)
		memset(t->slots, 0, (size_t)t->nslots * sizeof(*t->slots));
}

void itab__free(struct itab *t)
{
	free(t->ents);
	free(t->slots);
	free(t->bytes);
	*t = (struct itab){0};
}

int u32map__set(struct u32map *m, uint32_t key, uint32_t val)
{
	uint32_t i;

	if (!key)
		return -EINVAL;
	if ((uint64_t)(m->n + 1) * 2 > m->nslots) {
		uint32_t ns = m->nslots ? m->nslots * 2 : 256, j;
		uint64_t *s = calloc(ns, sizeof(*s));

		if (!s)
			return -ENOMEM;
		for (j = 0; j < m->nslots; j++) {
			uint64_t v = m->slots[j];
			uint32_t h;

			if (!v)
				continue;
			h = (uint32_t)((v >> 32) * 0x9e3779b1u) & (ns - 1);
			while (s[h])
				h = (h + 1) & (ns - 1);
			s[h] = v;
		}
		free(m->slots);
		m->slots = s;
		m->nslots = ns;
	}
	i = (key * 0x9e3779b1u) & (m->nslots - 1);
	while (m->slots[i] && (uint32_t)(m->slots[i] >> 32) != key)
		i = (i + 1) & (m->nslots - 1);
	if (!m->slots[i])
		m->n++;
	m->slots[i] = (uint64_t)key << 32 | val;
	return 0;
}

uint32_t u32map__get(const struct u32map *m, uint32_t key)
{
	uint32_t i;

	if (!m->nslots || !key)
		return 0;
	i = (key * 0x9e3779b1u) & (m->nslots - 1);
	while (m->slots[i]) {
		if ((uint32_t)(m->slots[i] >> 32) == key)
			return (uint32_t)m->slots[i];
		i = (i + 1) & (m->nslots - 1);
	}
	return 0;
}

void u32map__free(struct u32map *m)
{
	free(m->slots);
	*m = (struct u32map){0};
}

/* ------------------------------------------------------------ time, names */

int64_t store_fmt__local_day(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!localtime_r(&tt, &tm))
		return t / 86400;
	/* Days since 1970-01-01 of the local calendar date (civil-from-days inverse). */
	{
		int64_t y = tm.tm_year + 1900, m = tm.tm_mon + 1, d = tm.tm_mday;
		int64_t era, yoe, doy, doe;

		y -= m <= 2;
		era = (y >= 0 ? y : y - 399) / 400;
		yoe = y - era * 400;
		doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
		doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
		return era * 146097 + doe - 719468;
	}
}

void store_fmt__day_name(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!localtime_r(&tt, &tm))
		memset(&tm, 0, sizeof(tm));
	/* CPA's two-digit year; dirs of 2000-2099 sort in time order. */
	snprintf(buf, len, "cpa_%02d%02d%02d", tm.tm_year % 100, tm.tm_mon + 1, tm.tm_mday);
}

int store_cpulist__parse(const char *s, uint8_t *bits, uint32_t nbits)
{
	const char *p = s;

	memset(bits, 0, (nbits + 7) / 8);
	if (!s || !*s)
		return -EINVAL;
	while (*p) {
		char *end;
		unsigned long a, b;

		if (*p < '0' || *p > '9')
			return -EINVAL;
		a = strtoul(p, &end, 10);
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			if (*p < '0' || *p > '9')
				return -EINVAL;
			b = strtoul(p, &end, 10);
			p = end;
		}
		if (b < a || b >= nbits)
			return -EINVAL;
		for (; a <= b; a++)
			bits[a / 8] |= (uint8_t)(1u << (a % 8));
		if (*p == ',')
			p++;
		else if (*p)
			return -EINVAL;
	}
	return 0;
}
