/* SPDX-License-Identifier: MIT */
/* /proc/kallsyms text -> symd's ksyms__load(), then lookups at the addresses it names. */
#include <stdlib.h>
#include <string.h>

#include "fuzz_util.h"
#include "symd/ksyms.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ksyms k = {0};
	char path[256];
	const char *p = (const char *)data, *end = p + size;
	const char *name, *mod;
	uint64_t start;

	fuzz__write("kallsyms", data, size, path, sizeof(path));
	if (ksyms__load(&k, path) < 0) {
		ksyms__fini(&k);
		return 0;
	}
	/* Look up every line's address, one byte past it and one before. */
	while (p < end) {
		uint64_t a = fuzz__line_addr(&p, end);

		for (int d = -1; d <= 1; d++)
			if (ksyms__lookup(&k, a + (uint64_t)d, &name, &mod, &start) == 0 && !name)
				__builtin_trap();
	}
	ksyms__bytes(&k);
	ksyms__fini(&k);
	return 0;
}
