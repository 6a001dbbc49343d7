// SPDX-License-Identifier: MIT
/*
 * The shared-library half of the test workload: the leaf of every known
 * chain lives here, so a correct stack crosses a DSO boundary.
 */
#include <stdint.h>

/* Built a second time as libcpawl-dl (cpa-wl-churn --dlopen): the same code
 * under names of its own, never linked, only dlopen()ed. */
#ifdef WL_DL
#define wl_lib_spin wl_dl_spin
#define wl_lib_work wl_dl_work
#endif

#include "wl_lib.h"

__attribute__((noinline)) uint64_t wl_lib_spin(uint64_t n, uint64_t seed)
{
	uint64_t x = seed | 1;

	while (n--) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		__asm__ volatile("" : "+r"(x));
	}
	return x;
}

__attribute__((noinline)) uint64_t wl_lib_work(uint64_t n, uint64_t seed)
{
	uint64_t r = wl_lib_spin(n, seed);

	__asm__ volatile("" : "+r"(r)); /* keep this frame: no tail call */
	return r;
}
