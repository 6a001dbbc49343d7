// SPDX-License-Identifier: MIT
#include "cpulist.h"

#include <errno.h>
#include <string.h>

/* A decimal cpu < nbits at *s (no sign, no space, no "0x"), advancing *s. */
static int parse_cpu(const char **s, unsigned int nbits, unsigned int *ret)
{
	uint64_t v = 0;
	const char *p = *s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		v = v * 10 + (uint64_t)(*p - '0');
		if (v >= nbits)
			return -EINVAL;
	}
	*s = p;
	*ret = (unsigned int)v;
	return 0;
}

int cpulist__parse(const char *s, uint64_t *mask, unsigned int nbits, unsigned int *ret_max)
{
	unsigned int max = 0;

	memset(mask, 0, CPULIST_WORDS(nbits) * sizeof(uint64_t));
	if (!s || !*s || *s == '\n')
		return -EINVAL;
	for (;;) {
		unsigned int lo, hi;

		if (parse_cpu(&s, nbits, &lo) < 0)
			return -EINVAL;
		hi = lo;
		if (*s == '-') {
			s++;
			if (parse_cpu(&s, nbits, &hi) < 0 || hi < lo)
				return -EINVAL;
		}
		for (unsigned int c = lo; c <= hi; c++)
			mask[c / 64] |= 1ull << (c % 64);
		if (hi > max)
			max = hi;
		if (*s == ',') {
			s++;
			continue;
		}
		if (*s == '\n')
			s++;
		if (*s)
			return -EINVAL;
		break;
	}
	if (ret_max)
		*ret_max = max;
	return 0;
}

unsigned int cpulist__count(const uint64_t *mask, unsigned int nbits)
{
	unsigned int n = 0, i;

	for (i = 0; i < CPULIST_WORDS(nbits); i++) {
		uint64_t w = mask[i];

		if (i == nbits / 64 && nbits % 64)
			w &= (1ull << (nbits % 64)) - 1;
		n += (unsigned int)__builtin_popcountll(w);
	}
	return n;
}
