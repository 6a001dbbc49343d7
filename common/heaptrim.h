// SPDX-License-Identifier: MIT
/*
 * Giving freed heap back to the kernel. glibc keeps freed chunks inside the heap (and up to
 * M_TRIM_THRESHOLD at its top): a stage whose caches evict, reset or go idle keeps its
 * RSS at the high-water mark unless it trims. heap_trim__maybe() on a stage's tick calls
 * malloc_trim(0) once the heap's free bytes (mallinfo2().fordblks) grew by `more` since
 * the last trim (or their lowest since: reuse lowers them), so a heap whose free space
 * stays put is not trimmed over and over (trimmed pages still count as free).
 */
#ifndef CPA_HEAPTRIM_H
#define CPA_HEAPTRIM_H

#include <malloc.h>
#include <stdbool.h>
#include <stddef.h>

struct heap_trim {
	size_t low; /* free heap bytes after the last trim, or the lowest seen since */
};

static inline bool heap_trim__maybe(struct heap_trim *t, size_t more)
{
	size_t f = mallinfo2().fordblks;

	if (f < t->low)
		t->low = f;
	if (f - t->low < more)
		return false;
	malloc_trim(0);
	t->low = mallinfo2().fordblks;
	return true;
}

#endif /* CPA_HEAPTRIM_H */
