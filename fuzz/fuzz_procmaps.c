/* SPDX-License-Identifier: MIT */
/* /proc/PID/maps text -> procmaps__next() over every line, then the vDSO size. */
#include <string.h>

#include "fuzz_util.h"
#include "unwindd/procmaps.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *pos = (const char *)data, *end = pos + size;
	struct procmaps_entry e;
	uint64_t sum = 0;

	while (pos < end) {
		const char *before = pos;

		if (procmaps__next(&pos, end, &e) > 0) {
			/* Touch the path: it must lie inside the input. */
			if (e.path_len)
				sum += (uint8_t)e.path[0] + (uint8_t)e.path[e.path_len - 1];
			sum += e.start ^ e.end;
			if (e.kind == PROCMAPS_VDSO)
				sum += procmaps__vdso_size((const char *)data, size, e.start);
		}
		if (pos <= before || pos > end)
			__builtin_trap(); /* no progress or past the buffer */
	}
	return sum == 42 ? 0 : 0; /* sum keeps the reads */
}
