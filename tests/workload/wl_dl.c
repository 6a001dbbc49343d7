// SPDX-License-Identifier: MIT
/*
 * libcpawl-dl: the library cpa-wl-churn --dlopen loads, works in and unloads
 * before it exits. Never linked: its functions are named in a profile only
 * if the mapping it lived in is known after it is gone.
 */
#include <stdint.h>

uint64_t wl_dl_spin(uint64_t n, uint64_t seed);
uint64_t wl_dl_work(uint64_t n, uint64_t seed);

__attribute__((noinline)) uint64_t wl_dl_spin(uint64_t n, uint64_t seed)
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

__attribute__((noinline)) uint64_t wl_dl_work(uint64_t n, uint64_t seed)
{
	uint64_t r = wl_dl_spin(n, seed);

	__asm__ volatile("" : "+r"(r)); /* keep this frame: no tail call */
	return r;
}
