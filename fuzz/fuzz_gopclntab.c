/* SPDX-License-Identifier: MIT */
/* A .gopclntab section -> common/gopclntab: every function (up to 4096), its
 * lookup, frame size, funcFlag and line at its entry and middle. */
#include <string.h>

#include "common/gopclntab.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gopclntab t;
	uint32_t i;

	if (gopclntab__init(&t, data, size, 0) < 0)
		return 0;
	for (i = 0; i < t.nfunc && i < 4096; i++) {
		struct gofunc f, g;
		const char *file;
		int32_t v, line;
		uint8_t flag;

		if (gopclntab__func(&t, i, &f) < 0)
			continue;
		if (f.end < f.entry || !f.name || strlen(f.name) > size)
			__builtin_trap();
		if (gopclntab__find(&t, f.entry, &g) == 0 &&
		    (g.entry > f.entry || g.end <= f.entry))
			__builtin_trap();
		(void)gopclntab__find(&t, f.end, &g);
		(void)gopclntab__sp(&t, &f, f.entry, &v);
		(void)gopclntab__sp(&t, &f, f.entry + (f.end - f.entry) / 2, &v);
		(void)gopclntab__flag(&t, &f, &flag);
		if (gopclntab__line(&t, &f, f.entry, &file, &line) == 0 && strlen(file) > size)
			__builtin_trap();
	}
	return 0;
}
