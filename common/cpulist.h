/* SPDX-License-Identifier: MIT */
/*
 * The cpu-list syntax of the kernel and of the CLI: "0-3,8,10-11". One
 * parser, one output shape: a bitmap of u64 words (cpu c is bit c % 64 of
 * word c / 64), which the caller sizes for nbits cpus.
 */
#ifndef CPA_CPULIST_H
#define CPA_CPULIST_H

#include <stdbool.h>
#include <stdint.h>

#define CPULIST_MAX_CPUS     8192 /* a bitmap this wide holds any cpu the kernel numbers */
#define CPULIST_WORDS(nbits) (((nbits) + 63) / 64)

/*
 * Parse s into mask (CPULIST_WORDS(nbits) words, cleared first). Decimal
 * cpus and lo-hi ranges joined by ',', no spaces; one trailing '\n' is
 * allowed (the form of /sys/devices/system/cpu/online). 0, with the highest
 * cpu in *ret_max (may be NULL), or -EINVAL: empty list, bad syntax, hi < lo,
 * or a cpu >= nbits.
 */
int cpulist__parse(const char *s, uint64_t *mask, unsigned int nbits, unsigned int *ret_max);

static inline bool cpulist__test(const uint64_t *mask, unsigned int nbits, unsigned int cpu)
{
	return cpu < nbits && (mask[cpu / 64] >> (cpu % 64)) & 1;
}

/* Cpus set in mask. */
unsigned int cpulist__count(const uint64_t *mask, unsigned int nbits);

#endif /* CPA_CPULIST_H */
