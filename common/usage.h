/* SPDX-License-Identifier: MIT */
/*
 * The option loop of a small program's main(): getopt_long() that answers
 * 'h' (--help) and a bad option itself, the way every such program does.
 * Header-only; depends on nothing but libc.
 */
#ifndef CPA_USAGE_H
#define CPA_USAGE_H

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The next option of argv, as getopt_long(); -1 at the end. 'h' prints
 * usage on stdout and exits 0; an unknown option or a missing value ('?')
 * prints it on stderr and exits 2. Meant for main() before it holds anything.
 */
static inline int getopt_or_usage(int argc, char **argv, const char *shortopts,
				  const struct option *longopts, void (*usage)(FILE *f))
{
	int c = getopt_long(argc, argv, shortopts, longopts, NULL);

	if (c == 'h' || c == '?') {
		usage(c == 'h' ? stdout : stderr);
		exit(c == 'h' ? 0 : 2);
	}
	return c;
}

#endif /* CPA_USAGE_H */
