/* SPDX-License-Identifier: MIT */
/*
 * The unwinder's hot path: walk a copied user stack with compiled CFI tables
 * (cfi.h). No allocation, no I/O, no libdw: pure arithmetic and bounded reads
 * from the copy. See docs/unwinding.md.
 */
#ifndef CPA_UNWINDD_WALK_H
#define CPA_UNWINDD_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/records.h"

struct cfi_table;

/*
 * Every general-purpose register in DWARF number order, as struct
 * cpa_user_regs (a sample's regs can be copied as is). The caller-saved ones
 * (rax rdx rcx rsi rdi r8-r11) are only known in the leaf frame: a rule of an
 * outer frame that names one of them stops the walk with CPA_STOP_BAD.
 */
struct unw_regs {
	uint64_t ax, dx, cx, bx, si, di, bp, sp;
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t ip;
};
_Static_assert(sizeof(struct unw_regs) == sizeof(struct cpa_user_regs), "unw_regs layout");
_Static_assert(offsetof(struct unw_regs, ip) == offsetof(struct cpa_user_regs, ip),
	       "unw_regs layout");

/* The copied user stack; base is the user address of bytes[0]. */
struct unw_stack {
	const uint8_t *bytes;
	uint64_t base;
	uint32_t len;
};

/*
 * What the caller knows about a pc: the table of the mapped ELF (NULL when it
 * has none), the file offset of pc (pc - map_start + pgoff), the module id to
 * report, and CPA_UF_ANON / CPA_UF_VDSO.
 */
struct unw_loc {
	const struct cfi_table *table;
	uint64_t file_off;
	uint32_t module_id;
	uint32_t flags;
	/* Go code (a find that knows none leaves these as the walker set
	 * them: UNW_GO_NONE, -1): enum unw_go, and the bytes the function
	 * pushed below its entry sp at the pc (.gopclntab pcsp; -1 unknown). */
	uint32_t go;
	int32_t go_sp;
};

enum unw_go {
	UNW_GO_NONE = 0,
	UNW_GO_CODE,	/* a Go function: go_sp sizes its frame where no CFI does */
	UNW_GO_BOTTOM,	/* TOPFRAME: goexit, mstart, rt0_go, sigtramp: the outermost frame */
	UNW_GO_SWITCH,	/* runtime.systemstack, morestack: back to the goroutine's stack */
	UNW_GO_SPWRITE, /* other SPWRITE (mcall, asmcgocall): Go's traceback ends there */
};

/* Resolve pc in the sampled process: 0, or -ENOENT when nothing maps it. */
typedef int (*unw_find_fn)(void *ctx, uint64_t pc, struct unw_loc *ret);

/*
 * Fill out[0..max) leaf first and set *ret_n; returns an enum cpa_unwind_stop
 * saying why the walk ended (CPA_STOP_END when it reached the outermost
 * frame). Frame pcs are the interrupted ip and then return addresses; every
 * frame but the leaf and the one a signal interrupted is looked up at pc - 1
 * (CPA_UF_LEAF marks those that were not). find is called once per frame.
 * Thread-safe: the pc->rule cache is per thread.
 */
int unw_walk(const struct unw_regs *regs, const struct unw_stack *stack, unw_find_fn find,
	     void *ctx, struct cpa_uframe *out, unsigned int max, unsigned int *ret_n);

enum unw_walk_flag {
	/*
	 * Hybrid: where a frame's module has no CFI at all (built without
	 * unwind tables, so frame pointers are its only unwind information)
	 * and rbp points into the stack copy above sp, take the frame-pointer
	 * rule instead of stopping with CPA_STOP_NO_CFI. The frame so
	 * recovered carries CPA_UF_FP. A gap row inside a module that has CFI
	 * (hand-written asm) still stops: there rbp is anybody's register.
	 */
	UNW_F_FP_FALLBACK = 1u << 0,
	/*
	 * At a Go stack switch (UNW_GO_SWITCH or _SPWRITE) the frame is
	 * emitted and the walk returns UNW_STOP_GO_SWITCH: its caller lives
	 * on the other stack, out of the copy; the caller of unw_walk_flags
	 * goes on from there (unwindd: the kernel's frame-pointer chain).
	 * Without the flag such a frame is stepped as any other.
	 */
	UNW_F_GO_SWITCH = 1u << 1,
	/*
	 * JIT code and code without CFI inside a module that has some (V8's
	 * builtins, embedded in node's .text with no FDE) are walked by frame
	 * pointer, as UNW_F_FP_FALLBACK does (same rbp checks, CPA_UF_FP on
	 * the caller), instead of stopping with CPA_STOP_ANON / NO_CFI. An
	 * anonymous frame whose rbp is no frame pointer still stops ANON.
	 */
	UNW_F_FP_JIT = 1u << 2,
};

/* unw_walk_flags() with UNW_F_GO_SWITCH: past every enum cpa_unwind_stop. */
#define UNW_STOP_GO_SWITCH 0x100

/*
 * unw_walk() with enum unw_walk_flag options; unw_walk() is flags = 0.
 * ret_top (may be NULL): the highest stack pointer the walk reached (the last
 * CFA): the copy bytes a complete walk needed lie below it.
 */
int unw_walk_flags(const struct unw_regs *regs, const struct unw_stack *stack, unw_find_fn find,
		   void *ctx, unsigned int flags, struct cpa_uframe *out, unsigned int max,
		   unsigned int *ret_n, uint64_t *ret_top);

/*
 * One step: apply the row of file_off in t to regs (which become the
 * caller's), as for a frame above the leaf (caller-saved registers unknown). Returns 0, or
 * CPA_STOP_END / NO_CFI / READ / BAD. *ret_signal is set when the frame was a signal trampoline
 * (the caller's pc is then exact). The bench drives this directly.
 */
int unw_step(const struct cfi_table *t, uint64_t file_off, struct unw_regs *regs,
	     const struct unw_stack *stack, bool *ret_signal);

/* Counters of the calling thread's walks (monotonic). */
struct unw_stats {
	uint64_t walks;
	uint64_t frames;
	uint64_t cache_hits;
	uint64_t cache_misses;
	uint64_t complex_rows; /* rows evaluated through the side rule table */
	uint64_t signal_frames;
	uint64_t fp_frames;   /* UNW_F_FP_FALLBACK steps taken */
	uint64_t carried_cfa; /* caller CFAs taken from a caller-saved register's sampled value */
};
void unw_stats__read(struct unw_stats *ret);

/* A stop reason's short name for tables and dumps ("no_map", "read", ...;
 * "?" past the enum). */
const char *unw_stop_name(unsigned int stop);

#endif /* CPA_UNWINDD_WALK_H */
