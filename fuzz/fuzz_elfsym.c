/* SPDX-License-Identifier: MIT */
/*
 * An ELF image -> symd's symbol reader (symbin__load_mem(): .symtab/.dynsym,
 * .gnu_debugdata MiniDebugInfo, PLT names, .eh_frame_hdr function starts),
 * then lookups at offsets taken from its own load segments.
 */
#include "fuzz_util.h"
#include "symd/symd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct symbin *b = NULL;
	uint64_t off, v, start;
	const char *name;

	if (symbin__load_mem(data, size, &b) < 0)
		return 0;
	for (off = 0; off < size && off < (1u << 20); off += 61) {
		if (symbin__lookup(b, off, (off & 1) != 0, &name, &start) == 0 && !name)
			__builtin_trap();
		symbin__off_to_vaddr(b, off, &v);
		symbin__func_start(b, off, &start);
	}
	if (symbin__bytes(b) == 0)
		__builtin_trap();
	symbin__free(b);
	return 0;
}
