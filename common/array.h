/* SPDX-License-Identifier: MIT */
/*
 * The one growable-array helper: realloc() with the size computed without
 * overflow. Header-only; returns 0 or -ENOMEM (also when elements * size
 * would pass PTRDIFF_MAX), and leaves *p and *cap as they were on error.
 *
 *	if (array_grow((void **)&v, &cap, n + 1, sizeof(*v)) < 0)
 *		return -ENOMEM;
 *	v[n++] = x;
 *
 * array_grow() doubles the capacity (first ARRAY_GROW_MIN elements, or first
 * with the .._first forms) until it holds need elements; array_resize() sets it to exactly n
 *elements (a buffer whose size the caller chooses). The ..32 forms are for uint32_t counts: the
 * capacity stays <= ARRAY32_MAX, so a count or 1-based index fits an int.
 */
#ifndef CPA_ARRAY_H
#define CPA_ARRAY_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#define ARRAY_GROW_MIN 16
#define ARRAY32_MAX    (UINT32_C(1) << 30)

/* *p to exactly n elements of elem bytes (n > 0): 0 or -ENOMEM. */
static inline int array_resize(void **p, size_t *cap, size_t n, size_t elem)
{
	void *np;

	if (!n || !elem || n > PTRDIFF_MAX / elem) /* more than malloc() hands out */
		return -ENOMEM;
	np = realloc(*p, n * elem);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = n;
	return 0;
}

/* Capacity past cap that holds need (cap < need <= max): doubled from cap or
 * first (also for memory that is not malloc()'s: mmap(), mremap()). */
static inline size_t array_next_cap(size_t cap, size_t need, size_t first, size_t max)
{
	size_t nc = cap ? cap : first ? first : 1;

	while (nc < need)
		nc = nc > max / 2 ? max : nc * 2;
	return nc < max ? nc : max;
}

/* Room for need elements of elem bytes in *p: 0 (also when there is room) or
 * -ENOMEM. The first capacity is first elements (a buffer sized for its use,
 * or a table whose capacity a memory cap counts, keeps its own steps). */
static inline int array_grow_first(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return 0;
	return array_resize(p, cap, array_next_cap(*cap, need, first, SIZE_MAX), elem);
}

static inline int array_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	return array_grow_first(p, cap, need, elem, ARRAY_GROW_MIN);
}

/* The same for a uint32_t capacity. */
static inline int array_grow32_first(void **p, uint32_t *cap, size_t need, size_t elem,
				     uint32_t first)
{
	size_t c = *cap;
	int r;

	if (need <= c)
		return 0;
	if (need > ARRAY32_MAX)
		return -ENOMEM;
	r = array_resize(p, &c, array_next_cap(c, need, first, ARRAY32_MAX), elem);
	if (r == 0)
		*cap = (uint32_t)c;
	return r;
}

static inline int array_grow32(void **p, uint32_t *cap, size_t need, size_t elem)
{
	return array_grow32_first(p, cap, need, elem, ARRAY_GROW_MIN);
}

#endif /* CPA_ARRAY_H */
