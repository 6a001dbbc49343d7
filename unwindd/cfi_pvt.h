/* SPDX-License-Identifier: MIT */
/*
 * Internals of the compiled CFI table shared by cfi.c (builder) and walk.c
 * (hot path). Nothing here is part of the interface.
 *
 * Layout of one table (one allocation, arrays 8-byte aligned):
 *
 *   struct cfi_table | row[n_rows] | page[n_pages+1] u32 | xrule[n_x] | expr pool
 *
 *   row[i]    { u32 start, u32 rule }: 8 bytes. start = file offset - base;
 *             row i ends at row[i+1].start (the last row is always a gap
 *             sentinel). Start and rule share a cache line, so the binary
 *             search's last probe already holds the answer.
 *   page[p]   index of the row covering key p << CFI_PAGE_SHIFT, so a lookup
 *             binary-searches only rows page[p] .. page[p+1]: with 256-byte
 *             pages that is ~5 rows of libc, 2-3 probes, ~0.7 B/row of index.
 *
 * Packed rule word (bit 0 first):
 *
 *   kind:2 = CFI_K_RSP | CFI_K_RBP:
 *     | kind:2 | rbp_saved:1 | rbp_off8:8 (signed, x8) | cfa_off:21 |
 *     CFA = rsp|rbp + cfa_off, RA at CFA - 8,
 *     rbp = rbp_saved ? *(CFA + 8 * rbp_off8) : rbp (same value)
 *   kind:2 = CFI_K_X:   | kind:2 | index into xrule[]:30 |
 *   kind:2 = CFI_K_GAP: no CFI for these addresses
 */
#ifndef CPA_UNWINDD_CFI_PVT_H
#define CPA_UNWINDD_CFI_PVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "cfi.h"

/*
 * A bounded little-endian reader over DWARF bytes, shared by the table
 * builder (cfi.c) and the expression evaluator (walk.c). Any read past the
 * end sets bad, moves p to the end and yields 0; callers check bad once.
 */
struct cfi_rd {
	const uint8_t *p, *end;
	bool bad;
};

static inline uint64_t cfi_rd_u(struct cfi_rd *r, unsigned int n)
{
	uint64_t v = 0;

	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = true;
		r->p = r->end;
		return 0;
	}
	memcpy(&v, r->p, n); /* x86-64: little endian host and target */
	r->p += n;
	return v;
}

/* LEB128, unsigned or sign-extended; bits past 64 are dropped. */
static inline uint64_t cfi_rd_leb(struct cfi_rd *r, bool is_signed)
{
	uint64_t v = 0;
	unsigned int shift = 0;

	while (r->p < r->end) {
		uint8_t b = *r->p++;

		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (is_signed && shift < 64 && (b & 0x40))
				v |= ~0ull << shift;
			return v;
		}
	}
	r->bad = true;
	return 0;
}

static inline uint64_t cfi_rd_uleb(struct cfi_rd *r)
{
	return cfi_rd_leb(r, false);
}

static inline int64_t cfi_rd_sleb(struct cfi_rd *r)
{
	return (int64_t)cfi_rd_leb(r, true);
}

#ifndef CFI_PAGE_SHIFT
#define CFI_PAGE_SHIFT 8
#endif

enum cfi_kind {
	CFI_K_RSP = 0,
	CFI_K_RBP = 1,
	CFI_K_X = 2,
	CFI_K_GAP = 3,
};

#define CFI_RULE_KIND(w)      ((w)&3u)
#define CFI_RULE_RBP_SAVED(w) (((w) >> 2) & 1u)
#define CFI_RULE_RBP_OFF(w)   ((int64_t)(int8_t)(((w) >> 3) & 0xffu) * 8)
#define CFI_RULE_CFA_OFF(w)   ((w) >> 11)
#define CFI_RULE_X(w)	      ((w) >> 2)
#define CFI_CFA_OFF_MAX	      ((1u << 21) - 1)
#define CFI_X_MAX	      ((1u << 30) - 1)

/* DWARF register numbers of x86-64 (psABI figure 3.36). */
enum cfi_dwreg {
	DW_RAX = 0,
	DW_RDX,
	DW_RCX,
	DW_RBX,
	DW_RSI,
	DW_RDI,
	DW_RBP,
	DW_RSP,
	DW_R12 = 12,
	DW_R13,
	DW_R14,
	DW_R15,
	DW_RA = 16,
};

/* Registers a rule can restore; the walker tracks exactly these. */
enum cfi_slot {
	CFI_S_RA,
	CFI_S_RBP,
	CFI_S_RBX,
	CFI_S_R12,
	CFI_S_R13,
	CFI_S_R14,
	CFI_S_R15,
	CFI_S_NR,
};

enum cfi_reg_rule {
	CFI_R_SAME = 0, /* callee-saved default: unchanged */
	CFI_R_UNDEF,	/* no value (RA undefined marks the outermost frame) */
	CFI_R_OFF,	/* saved at CFA + off */
	CFI_R_VAL_OFF,	/* value is CFA + off */
	CFI_R_REG,	/* value is in DWARF register off */
	CFI_R_EXPR,	/* saved at eval(expr) (CFA pushed first) */
	CFI_R_VAL_EXPR, /* value is eval(expr) */
};

enum cfi_cfa_rule {
	CFI_CFA_REG = 0, /* DWARF reg + off */
	CFI_CFA_EXPR,	 /* eval(expr) */
};

enum cfi_xflag {
	CFI_XF_SIGNAL = 1u << 0, /* 'S' augmentation: signal trampoline */
	CFI_XF_EXPR = 1u << 1,	 /* some rule is an expression */
};

struct cfi_xreg {
	uint8_t kind; /* enum cfi_reg_rule */
	uint8_t _pad[3];
	int32_t off; /* offset, register number, or expr pool offset */
};

/* A full rule, for the rows the packed word cannot express. */
struct cfi_xrule {
	uint8_t cfa_kind; /* enum cfi_cfa_rule */
	uint8_t cfa_reg;
	uint8_t flags; /* enum cfi_xflag */
	uint8_t _pad;
	int32_t cfa_off; /* offset, or expr pool offset */
	struct cfi_xreg r[CFI_S_NR];
};
_Static_assert(sizeof(struct cfi_xrule) == 64, "cfi_xrule layout");

struct cfi_row {
	uint32_t start;
	uint32_t rule;
};
_Static_assert(sizeof(struct cfi_row) == 8, "cfi_row is the 8 bytes per row");

/* Each pooled expression: u16 length, then the DWARF expression bytes. */

struct cfi_table {
	uint32_t gen; /* unique per build: the walker's pc cache tags with it */
	uint32_t n_rows;
	uint64_t base; /* file offset of key 0 */
	uint64_t span; /* keys are < span */
	uint32_t n_pages;
	uint32_t n_x;
	uint32_t expr_len;
	uint32_t n_complex_rows;
	uint32_t n_expr_rows;
	uint32_t _pad0;
	const struct cfi_row *row;
	const uint32_t *page;
	const struct cfi_xrule *x;
	const uint8_t *expr;
	size_t bytes;
};

/*
 * Rule word for file offset off, or CFI_K_GAP. Hot path: a page lookup and a
 * binary search over the few rows of that page.
 */
static inline uint32_t cfi_table__lookup(const struct cfi_table *t, uint64_t off)
{
	uint64_t key64 = off - t->base;
	uint32_t key, lo, hi;

	if (key64 >= t->span)
		return CFI_K_GAP;
	key = (uint32_t)key64;
	lo = t->page[key >> CFI_PAGE_SHIFT];
	hi = t->page[(key >> CFI_PAGE_SHIFT) + 1];
	/*
	 * Branchless search of [lo, hi] (invariant: row[lo].start <= key): the
	 * few rows of a page share one or two cache lines, so mispredicted
	 * branches, not loads, would dominate.
	 */
	for (uint32_t n = hi - lo + 1; n > 1;) {
		uint32_t half = n >> 1;

		lo = t->row[lo + half].start <= key ? lo + half : lo;
		n -= half;
	}
	return t->row[lo].rule;
}

#endif /* CPA_UNWINDD_CFI_PVT_H */
