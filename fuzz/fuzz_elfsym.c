/* SPDX-License-Identifier: MIT */
/*
 * An ELF image -> symd's symbol reader: symbin__load() on a file (.symtab or
 * .dynsym, a .gnu_debuglink next to it, .gnu_debugdata MiniDebugInfo, PLT
 * names, .eh_frame_hdr function starts) and symbin__load_mem() (what the
 * vDSO takes), then lookups every 61 bytes.
 */
#include <stdio.h>

#include "fuzz_util.h"
#include "symd/elfsym.h"

static void lookups(struct symbin *b, size_t size)
{
	uint64_t off, v, start;
	const char *name;

	for (off = 0; off < size && off < (1u << 20); off += 61) {
		if (symbin__lookup(b, off, (off & 1) != 0, &name, &start) == 0 && !name)
			__builtin_trap();
		symbin__off_to_vaddr(b, off, &v);
		symbin__func_start(b, off, &start);
	}
	if (symbin__bytes(b) == 0)
		__builtin_trap();
	symbin__free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct symd_paths paths = {.debug_root = "/nonexistent"};
	struct symd_file_ref ref;
	struct symbin *b = NULL;
	char path[256], proc[300];

	fuzz__write("lib.so", data, size, path, sizeof(path));
	/* an absent /proc: no process is looked at, the plain path is opened */
	snprintf(proc, sizeof(proc), "%s/proc", fuzz__dir());
	paths.proc = proc;
	ref = (struct symd_file_ref){.path = path};
	if (symbin__load(&paths, &ref, &b) == 0)
		lookups(b, size);
	if (symbin__load_mem(data, size, &b) == 0)
		lookups(b, size);
	return 0;
}
