/* SPDX-License-Identifier: MIT */
/*
 * symd: turns (binary, file offset) frames from unwindd into names, interns
 * strings, frames and stacks into ids and sends the storer samples plus the
 * definitions they need. See docs/symd.md.
 *
 * The stage is built as a library (cpa_symd_core) around one object, struct
 * symd, so that tests drive the very batch function main.c runs, over a
 * real arena. The module pieces (ELF symbols, kallsyms, names, intern
 * tables) are declared here too because the tests check them one by one.
 */
#ifndef CPA_SYMD_H
#define CPA_SYMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/intern.h" /* struct intern: strings, frames, stacks, modules */
#include "shm/config.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/stage.h"

/* Hostile-input caps (docs/symd.md). */
#define SYMD_MAX_FILE_SIZE (512ull << 20) /* ELF files we open at all */
#define SYMD_MAX_SYMBOLS   (4u << 20)	  /* per symbol table */
#define SYMD_MAX_SECTIONS  65535u
#define SYMD_MAX_LOADS	   64u		   /* PT_LOAD headers kept */
#define SYMD_MAX_NAME	   1024u	   /* printed frame name, bytes */
#define SYMD_MAX_DEBUGDATA (256ull << 20)  /* decompressed .gnu_debugdata */
#define SYMD_BIN_TIME_NS   (3000000000ull) /* per binary load */
#define SYMD_MAX_KSYMS	   (4u << 20)
#define SYMD_MAX_JIT_SYMS  (1u << 20)
#define SYMD_MAX_ENVIRON   (1u << 20)
#define SYMD_MAX_UMODS	   (1u << 18) /* unwindd module definitions kept */

/* ---- names.c: printable names ---- */
/* Demangle (C++, Rust) and shorten (Go, unless keep_go) raw into buf (NUL
 * terminated, truncated to cap); returns the length. */
size_t symd_name__format(const char *raw, bool is_go, bool keep_go, char *buf, size_t cap);
/* Go: "github.com/x/y/pkg.(*T).M" -> "pkg.(*T).M". */
size_t symd_name__go_short(const char *name, char *buf, size_t cap);
const char *symd_basename(const char *path);

/* ---- elfsym.c: one binary's symbols ---- */
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

/* What identifies a file for opening: the module as unwindd described it. */
struct symd_file_ref {
	const char *path; /* as the process pid sees it */
	uint32_t pid;	  /* 0: no process, path is ours (tests) */
	uint64_t map_start;
	uint64_t map_end;
	uint64_t dev, ino; /* of the mapped file; dev 0: unknown (known by build-id) */
	const uint8_t *build_id;
	uint8_t build_id_len;
};

/* Open the module's file as the process sees it (/proc/PID/map_files, else
 * /proc/PID/root + path; the path as we see it only once the process is gone
 * and only when it is the mapped file: same dev/inode, or same build-id), read
 * its symbols plus those of a debug file (looked up under /proc/PID/root for a
 * process in another mount namespace or root) / MiniDebugInfo. -ENOENT/-EACCES
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

/* ---- bincache.c: binaries by build-id + dev+ino (or dev+ino), LRU, capped ---- */
struct bincache;
struct bincache_stats {
	uint64_t bytes;
	uint64_t evictions;
	uint64_t rejected;
	uint64_t open_fail;
	uint64_t loads;		/* load attempts (each may take up to SYMD_BIN_TIME_NS) */
	uint64_t loaded;	/* ... of them that gave a binary */
	uint64_t bid_conflicts; /* files loaded whose build-id another one with other symbols has */
};
int bincache__new(uint64_t budget, const struct symd_paths *paths, struct bincache **ret);
void bincache__free(struct bincache *c);
/* Binary of a module (loaded on first use; failures cached for a while).
 * NULL when it cannot be had. The pointer is valid until the next get.
 * now_ns 0: read the clock only if needed (not on a hit). */
struct symbin *bincache__get(struct bincache *c, const struct symd_file_ref *ref, uint64_t dev,
			     uint64_t ino, uint64_t now_ns);
void bincache__stats(const struct bincache *c, struct bincache_stats *ret);
/* A new byte budget (the perf maps' share moved), evicting down to it now. */
void bincache__set_budget(struct bincache *c, uint64_t budget);
/* Drop the binary with this build-id (a debug file arrived): the next get
 * loads it again. */
void bincache__forget(struct bincache *c, const uint8_t *build_id, uint8_t len);

/* ---- debuginfod.c: debug files fetched by build-id, in a thread ---- */
struct dfetch;
struct dfetch_stats {
	uint64_t asked;	  /* build-ids queued */
	uint64_t fetched; /* debug files now in the cache */
	uint64_t failed;  /* not found, server down, aborted */
	uint64_t dropped; /* not queued: queue or asked-set full */
	uint64_t trimmed; /* cached files removed to stay under the cap */
};
/* Start the fetching thread (libdebuginfod is dlopen()ed here). urls as in
 * DEBUGINFOD_URLS; cache_dir is created; files over cap_bytes are trimmed
 * oldest first. -ENOENT: no libdebuginfod.so.1. */
int dfetch__new(const char *urls, const char *cache_dir, uint64_t cap_bytes, struct dfetch **ret);
void dfetch__free(struct dfetch *df);
/* Queue a fetch (once per build-id per lifetime; never blocks on it). */
void dfetch__want(struct dfetch *df, const uint8_t *id, uint8_t len);
/* A build-id whose debug file arrived since the last call; false if none. */
bool dfetch__done(struct dfetch *df, uint8_t *id, uint8_t *len);
void dfetch__stats(struct dfetch *df, struct dfetch_stats *ret);

/* ---- ksyms.c: /proc/kallsyms ---- */
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

/* ---- procinfo.c: JIT symbol maps (/tmp/perf-PID.map) ---- */
struct jitmap;
/*
 * Load a perf map of at most max_bytes of memory (file bytes + entries; the
 * file alone at most 256 MiB): -EFBIG past it. With uids (the process's real
 * and effective uid), the file must be a regular file (not a symlink: opened
 * O_NOFOLLOW) owned by one of them or by root and not writable by others,
 * else -EPERM; NULL skips that check (tests, fuzzing).
 */
int jitmap__load(const char *path, size_t max_bytes, const uint32_t *uids, struct jitmap **ret);
void jitmap__free(struct jitmap *j);
const char *jitmap__lookup(const struct jitmap *j, uint64_t pc, uint64_t *ret_start);
size_t jitmap__bytes(const struct jitmap *j);

/* ---- symd.c: the stage ---- */
struct symd_opts {
	const struct cpa_config *cfg;
	struct shm_stage *stage;
	struct shm_ring_cons *in;
	struct shm_ring_prod *out;
	uint32_t generation;
	struct symd_paths paths; /* NULL members take the defaults */
	/* Test knob: die after committing the output of this batch (shm/fault.h). */
	unsigned int fault_kill_batches;
};

struct symd;

int symd__new(const struct symd_opts *o, struct symd **ret);
void symd__free(void *s);
/* Process up to max_records input records; commit output and release the
 * input with its mark once. Returns the records consumed (0 = none pending
 * or output held back), or -errno (-EBADMSG: corrupt input ring). */
int symd__batch(struct symd *s, unsigned int max_records);
/* Periodic work: loss records, kallsyms reload check, gauges. now_ns is
 * CLOCK_MONOTONIC. Returns 0. */
int symd__tick(void *s, uint64_t now_ns);
/* The process's malloc policy for binary loads (main.c, once): blocks up to
 * SYMD_HEAP_MMAP_MIN come from the heap, which keeps up to twice that free
 * at its top; symd__tick() trims it once loads stop. */
#define SYMD_HEAP_MMAP_MIN (32u << 20)
void symd__heap_setup(void);
/* Before leaving: send the pending loss report, update the gauges. */
void symd__finish(struct symd *s);
/* True when output is held back for lack of room in the output ring. */
bool symd__output_held(const struct symd *s);

#endif /* CPA_SYMD_H */
