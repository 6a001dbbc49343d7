/* SPDX-License-Identifier: MIT */
/* /tmp/perf-PID.map text -> symd's jitmap__load(), then lookups at the addresses it names. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "symd/procinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	struct jitmap *j = NULL;
	char path[256];
	uint64_t start;

	fuzz__write("perf-1.map", data, size, path, sizeof(path));
	if (jitmap__load(path, SIZE_MAX, NULL, &j) < 0)
		return 0;
	while (p < end) {
		uint64_t a = fuzz__line_addr(&p, end);

		for (int d = -1; d <= 1; d++) {
			const char *s = jitmap__lookup(j, a + (uint64_t)d, &start);

			if (s && strlen(s) == SIZE_MAX)
				__builtin_trap(); /* reads the whole name */
		}
	}
	jitmap__bytes(j);
	jitmap__free(j);
	return 0;
}
