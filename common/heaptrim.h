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
#include <stdint.h>

struct heap_trim {
	size_t low;   /* free heap bytes after the last trim, or the lowest seen since */
	uint64_t key; /* heap_trim__maybe_moved(): the caller's figure at the last look */
	bool looked;
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

/*
 * heap_trim__maybe() only when key moved since the last look: a figure of the
 * caller's that changes whenever its long-lived memory does (a cache's bytes,
 * its loads, evictions, epochs). mallinfo2() walks every free chunk of every
 * arena (10-60 us on the VMs we run on, docs/bench.md), which a wakeup of an
 * idle stage whose caches did not move need not pay; what such a wakeup frees
 * is its own scratch, reused by the next one.
 */
static inline bool heap_trim__maybe_moved(struct heap_trim *t, size_t more, uint64_t key)
{
	if (t->looked && key == t->key)
		return false;
	t->key = key;
	t->looked = true;
	return heap_trim__maybe(t, more);
}

#endif /* CPA_HEAPTRIM_H */
