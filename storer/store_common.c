// SPDX-License-Identifier: MIT
/* Helpers shared by the store writer and reader: crc32c, buffers, tables. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/hash.h"
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
	if (b->oom)
		return -ENOMEM;
	if (array_grow_first((void **)&b->p, &b->cap, b->len + more, 1, 256) < 0) {
		b->oom = true;
		return -ENOMEM;
	}
	return 0;
}

void sbuf__free(struct sbuf *b)
{
	free(b->p);
	*b = (struct sbuf){0};
}

/* ------------------------------------------------------------ tables */

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
			h = hash32_fib((uint32_t)(v >> 32)) & (ns - 1);
			while (s[h])
				h = (h + 1) & (ns - 1);
			s[h] = v;
		}
		free(m->slots);
		m->slots = s;
		m->nslots = ns;
	}
	i = hash32_fib(key) & (m->nslots - 1);
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
	i = hash32_fib(key) & (m->nslots - 1);
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

int store_open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat sb;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}
