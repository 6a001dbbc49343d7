/* SPDX-License-Identifier: MIT */
/* /tmp/perf-PID.map text -> symd's jitmap__load(), lookups at the addresses it names, then
 * jitmap__update() with the second half and timed lookups. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "symd/jitmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	struct jitmap *j = NULL;
	char path[256];
	uint64_t start;

	fuzz__write("perf-1.map", data, size, path, sizeof(path));
	if (jitmap__load("", path, SIZE_MAX, NULL, &j) < 0)
		return 0;
	while (p < end) {
		uint64_t a = fuzz__line_addr(&p, end);

		for (int d = -1; d <= 1; d++) {
			const char *s = jitmap__lookup(j, a + (uint64_t)d, &start);

			if (s && strlen(s) == SIZE_MAX)
				__builtin_trap(); /* reads the whole name */
		}
	}
	/* the JIT appends (or rewrites) its map: the second half read again */
	fuzz__write("perf-1.map", data + size / 2, size - size / 2, path, sizeof(path));
	if (jitmap__update(j, "", path, SIZE_MAX, NULL, jitmap__read_ns(j) + 1, JITMAP_REREAD) >= 0)
		for (p = (const char *)data; p < end;) {
			uint64_t a = fuzz__line_addr(&p, end);
			const char *s = jitmap__lookup_at(j, a, jitmap__read_ns(j), &start);

			if (s && strlen(s) == SIZE_MAX)
				__builtin_trap();
		}
	jitmap__bytes(j);
	jitmap__free(j);
	return 0;
}
