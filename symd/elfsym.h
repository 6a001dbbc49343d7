/* SPDX-License-Identifier: MIT */
/*
 * symd: one binary's symbols (elfsym.c): a bounded ELF reader over a file
 * that may be hostile, its symbol tables, debug files and MiniDebugInfo,
 * function starts from .eh_frame_hdr. Hostile-input caps: docs/symd.md.
 */
#ifndef CPA_SYMD_ELFSYM_H
#define CPA_SYMD_ELFSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/records.h" /* CPA_BUILD_ID_MAX */

#define SYMD_MAX_FILE_SIZE (512ull << 20) /* ELF files we open at all */
#define SYMD_MAX_SYMBOLS   (4u << 20)	  /* per symbol table */
#define SYMD_MAX_SECTIONS  65535u
#define SYMD_MAX_LOADS	   64u		   /* PT_LOAD headers kept */
#define SYMD_MAX_DEBUGDATA (256ull << 20)  /* decompressed .gnu_debugdata */
#define SYMD_BIN_TIME_NS   (3000000000ull) /* per binary load */

struct symd_sym {
	uint64_t addr;
	uint32_t size;
	uint32_t name;	/* raw name, offset in pool */
	uint32_t fmt;	/* formatted name, offset in pool; 0 = not yet */
	uint32_t flags; /* SYMD_SYM_* */
};

enum {
	SYMD_SYM_PLT = 1u << 0, /* a PLT stub: printed "<name>@plt" */
};

/* One function's range from an FDE of .eh_frame (through .eh_frame_hdr's
 * sorted table): start relative to the binary's first PT_LOAD vaddr. */
struct symd_fde {
	uint32_t start;
	uint32_t size; /* 0: unknown, up to the next FDE */
};

struct symd_load {
	uint64_t off;
	uint64_t vaddr;
	uint64_t filesz;
};

enum symbin_src {
	SYMBIN_SRC_SYMTAB = 1u << 0,
	SYMBIN_SRC_DYNSYM = 1u << 1,
	SYMBIN_SRC_DEBUG_BUILDID = 1u << 2,
	SYMBIN_SRC_DEBUGLINK = 1u << 3,
	SYMBIN_SRC_MINIDEBUG = 1u << 4,
	SYMBIN_SRC_FDE = 1u << 5,	 /* function starts from .eh_frame_hdr */
	SYMBIN_SRC_PLT = 1u << 6,	 /* PLT stubs named from their relocations */
	SYMBIN_SRC_DEBUGINFOD = 1u << 7, /* debug file from the debuginfod cache */
	SYMBIN_SRC_GOPCLNTAB = 1u << 8,	 /* a stripped Go binary's own .gopclntab */
};

struct symbin {
	struct symd_sym *syms; /* sorted by addr, one per addr */
	uint32_t nsyms;
	uint32_t nloads;
	struct symd_load loads[SYMD_MAX_LOADS];
	char *pool; /* names; offset 0 is "" */
	size_t pool_len;
	size_t pool_cap;
	struct symd_fde *fdes; /* sorted by start */
	uint32_t nfdes;
	uint64_t fde_base; /* vaddr the fde starts are relative to */
	uint32_t src;	   /* enum symbin_src */
	bool is_go;
	bool refused; /* loaded, but a part was refused as hostile (.gnu_debugdata bomb) */
	uint8_t build_id[CPA_BUILD_ID_MAX];
	uint8_t build_id_len;
};

/* Where to look for separate debug files. Tests point these at temp dirs. */
struct symd_paths {
	const char *debug_root;	      /* default /usr/lib/debug */
	const char *kallsyms;	      /* default /proc/kallsyms */
	const char *modules;	      /* default /proc/modules */
	const char *proc;	      /* default /proc */
	const char *debuginfod_cache; /* <dir>/<build-id hex>/debuginfo; NULL = none */
};

struct proc_mnt_tab; /* common/procroot.h */

/* What identifies a file for opening: the module as unwindd described it. */
struct symd_file_ref {
	const char *path; /* as the process pid sees it */
	uint32_t pid;	  /* 0: no process, path is ours (tests) */
	uint64_t map_start;
	uint64_t map_end;
	uint64_t dev, ino; /* of the mapped file; dev 0: unknown (known by build-id) */
	const uint8_t *build_id;
	uint8_t build_id_len;
	/* pid's mount namespace (0: unknown): once pid is gone, its path is
	 * looked up under a live process of it (common/procroot.h), one of
	 * mnt_tab's first (may be NULL) */
	uint32_t mnt_ns;
	const struct proc_mnt_tab *mnt_tab;
};

/* Open the module's file as the process sees it (/proc/PID/map_files, else
 * /proc/PID/root + path; the path as we see it only once the process is gone
 * and only when it is the mapped file: same dev/inode, or same build-id; a
 * gone process's first under the root of a live one of its mount namespace),
 * read its symbols plus those of a debug file (looked up under /proc/PID/root
 * for a process in another mount namespace or root, or that live one's) /
 * MiniDebugInfo. -ENOENT/-EACCES
 * when it cannot be opened, -ESTALE when only another file is there,
 * -EBADMSG/-EFBIG/-E2BIG/-ETIME when refused. */
int symbin__load(const struct symd_paths *paths, const struct symd_file_ref *ref,
		 struct symbin **ret);
/* Same from an ELF image in memory (the vDSO, tests). */
int symbin__load_mem(const void *img, size_t size, struct symbin **ret);
void symbin__free(struct symbin *b);
size_t symbin__bytes(const struct symbin *b);
/* Map a file offset to the ELF virtual address; -ENOENT if in no PT_LOAD. */
int symbin__off_to_vaddr(const struct symbin *b, uint64_t off, uint64_t *ret_vaddr);
/* Symbol covering file offset off: formatted name (valid until the next
 * lookup into b) and the symbol start as a file offset. -ENOENT if none. */
int symbin__lookup(struct symbin *b, uint64_t off, bool keep_go, const char **ret_name,
		   uint64_t *ret_sym_off);
/* Start (file offset) of the function holding file offset off, from the
 * FDEs of .eh_frame: the identity of a function without a symbol. -ENOENT
 * if no FDE covers it. */
int symbin__func_start(const struct symbin *b, uint64_t off, uint64_t *ret_start_off);

#endif /* CPA_SYMD_ELFSYM_H */
