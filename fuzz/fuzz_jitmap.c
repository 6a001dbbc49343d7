/* SPDX-License-Identifier: MIT */
/* /tmp/perf-PID.map text -> symd's jitmap__load(), then lookups at the addresses it names. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "symd/symd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	struct jitmap *j = NULL;
	char path[256];
	uint64_t start;

	fuzz__write("perf-1.map", data, size, path, sizeof(path));
	if (jitmap__load(path, &j) < 0)
		return 0;
	while (p < end) {
		const char *eol = memchr(p, '\n', (size_t)(end - p));
		char num[17];
		size_t n = 0;
		uint64_t a;

		while (p + n < end && n < 16 && p[n] && strchr("0123456789abcdefABCDEFx", p[n]))
			n++;
		memcpy(num, p, n);
		num[n] = 0;
		a = strtoull(num, NULL, 16);
		for (int d = -1; d <= 1; d++) {
			const char *s = jitmap__lookup(j, a + (uint64_t)d, &start);

			if (s && strlen(s) == SIZE_MAX)
				__builtin_trap(); /* reads the whole name */
		}
		p = eol ? eol + 1 : end;
	}
	jitmap__bytes(j);
	jitmap__free(j);
	return 0;
}
