/* SPDX-License-Identifier: MIT */
/*
 * symd: kernel symbols from /proc/kallsyms, reloaded when the set of modules
 * changes (ksyms.c).
 */
#ifndef CPA_SYMD_KSYMS_H
#define CPA_SYMD_KSYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SYMD_MAX_KSYMS (4u << 20)

/*
 * Compact: vmlinux text symbols (t/T/w/W) sharing the upper 32 address bits
 * of the first one take 8 bytes (32-bit offset from base, name); module
 * symbols and any far vmlinux symbol take 16 in a side table. Names live in
 * one pool ("__pfx_foo" is named "foo" and shares its bytes). All three
 * arrays are mmap'd and trimmed to size, so a reload gives the memory back
 * to the kernel instead of leaving it in the allocator.
 */
struct ksym {
	uint32_t off;  /* addr - base */
	uint32_t name; /* pool offset; top bit: pad bytes before it are its too */
};

struct ksym_far {
	uint64_t addr;
	uint32_t name; /* pool offset */
	uint32_t mod;  /* pool offset of the module name, 0 = vmlinux */
};

struct ksyms {
	struct ksym *syms; /* sorted by (off, name) */
	uint32_t n;
	uint32_t nfar;
	struct ksym_far *far; /* sorted by (addr, name) */
	uint64_t base;
	uint32_t pad; /* bytes of padding before a KSYM_PAD entry */
	char *pool;
	size_t pool_len;
	size_t mapped; /* bytes mapped for the three arrays */
	bool zeroed;   /* kptr_restrict hid the addresses */
	bool loaded;
	uint64_t modules_hash;
	uint64_t next_check_ns;
};

int ksyms__load(struct ksyms *k, const char *kallsyms_path);
void ksyms__fini(struct ksyms *k);
/* Name and module (NULL for vmlinux) of the text symbol covering addr. */
int ksyms__lookup(const struct ksyms *k, uint64_t addr, const char **ret_name, const char **ret_mod,
		  uint64_t *ret_start);
/* Hash of the modules file (to notice loads/unloads); 0 if unreadable. */
uint64_t ksyms__modules_hash(const char *modules_path);
size_t ksyms__bytes(const struct ksyms *k);

#endif /* CPA_SYMD_KSYMS_H */
