// SPDX-License-Identifier: MIT
/*
 * CFI table builder: parses .eh_frame / .debug_frame itself (the format is
 * small and a linear pass over every FDE's CFA program yields all rows at
 * once, where dwarf_cfi_addrframe() would re-run the program per row) and
 * compiles the rows into the packed table of cfi_pvt.h.
 *
 * Build is the slow path (once per binary); nothing here runs per sample.
 */
#include <elf.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "common/array.h"
#include "common/hash.h"
#include "common/macro.h"
#include "cfi_pvt.h"

/* DWARF call frame instructions */
#define DW_CFA_advance_loc	  0x40
#define DW_CFA_offset		  0x80
#define DW_CFA_restore		  0xc0
#define DW_CFA_nop		  0x00
#define DW_CFA_set_loc		  0x01
#define DW_CFA_advance_loc1	  0x02
#define DW_CFA_advance_loc2	  0x03
#define DW_CFA_advance_loc4	  0x04
#define DW_CFA_offset_extended	  0x05
#define DW_CFA_restore_extended	  0x06
#define DW_CFA_undefined	  0x07
#define DW_CFA_same_value	  0x08
#define DW_CFA_register		  0x09
#define DW_CFA_remember_state	  0x0a
#define DW_CFA_restore_state	  0x0b
#define DW_CFA_def_cfa		  0x0c
#define DW_CFA_def_cfa_register	  0x0d
#define DW_CFA_def_cfa_offset	  0x0e
#define DW_CFA_def_cfa_expression 0x0f
#define DW_CFA_expression	  0x10
#define DW_CFA_offset_extended_sf 0x11
#define DW_CFA_def_cfa_sf	  0x12
#define DW_CFA_def_cfa_offset_sf  0x13
#define DW_CFA_val_offset	  0x14
#define DW_CFA_val_offset_sf	  0x15
#define DW_CFA_val_expression	  0x16
#define DW_CFA_GNU_args_size	  0x2e
#define DW_CFA_GNU_neg_off_ext	  0x2f

/* pointer encodings (.eh_frame) */
#define DW_EH_PE_absptr	  0x00
#define DW_EH_PE_uleb128  0x01
#define DW_EH_PE_udata2	  0x02
#define DW_EH_PE_udata4	  0x03
#define DW_EH_PE_udata8	  0x04
#define DW_EH_PE_sleb128  0x09
#define DW_EH_PE_sdata2	  0x0a
#define DW_EH_PE_sdata4	  0x0b
#define DW_EH_PE_sdata8	  0x0c
#define DW_EH_PE_pcrel	  0x10
#define DW_EH_PE_datarel  0x30
#define DW_EH_PE_indirect 0x80
#define DW_EH_PE_omit	  0xff

/* remember_state nesting we accept; compilers use 1, hand asm rarely 2 */
#define CFI_STATE_STACK 8

/* ------------------------------------------------------------------ reader */

/* An encoded pointer; sec_addr is the address of the section's first byte. */
static uint64_t rd_ptr(struct cfi_rd *r, uint8_t enc, const uint8_t *sec, uint64_t sec_addr)
{
	uint64_t pos = sec_addr + (uint64_t)(r->p - sec);
	uint64_t v;

	if (enc == DW_EH_PE_omit)
		return 0;
	switch (enc & 0x0f) {
	case DW_EH_PE_absptr:
	case DW_EH_PE_udata8:
	case DW_EH_PE_sdata8:
		v = cfi_rd_u(r, 8);
		break;
	case DW_EH_PE_uleb128:
		v = cfi_rd_uleb(r);
		break;
	case DW_EH_PE_udata2:
		v = cfi_rd_u(r, 2);
		break;
	case DW_EH_PE_sdata2:
		v = (uint64_t)(int64_t)(int16_t)cfi_rd_u(r, 2);
		break;
	case DW_EH_PE_udata4:
		v = cfi_rd_u(r, 4);
		break;
	case DW_EH_PE_sdata4:
		v = (uint64_t)(int64_t)(int32_t)cfi_rd_u(r, 4);
		break;
	case DW_EH_PE_sleb128:
		v = (uint64_t)cfi_rd_sleb(r);
		break;
	default:
		r->bad = true;
		return 0;
	}
	switch (enc & 0x70) {
	case 0:
		break;
	case DW_EH_PE_pcrel:
		v += pos;
		break;
	default:
		/* textrel/datarel/funcrel never appear in FDE addresses on x86-64 */
		r->bad = true;
	}
	/* indirect only appears on personality pointers, which we skip */
	return v;
}

/* Offsets scaled by the data alignment factor: wraps instead of overflowing (fuzzed input). */
static int64_t scale(uint64_t v, int64_t factor)
{
	return (int64_t)(v * (uint64_t)factor);
}

/* --------------------------------------------------------------- row state */

struct state {
	uint8_t cfa_kind;
	uint8_t cfa_reg;
	int64_t cfa_off; /* or expr pool offset */
	uint8_t rk[CFI_S_NR];
	int64_t ro[CFI_S_NR];
};

static int dwreg_slot(uint64_t reg)
{
	switch (reg) {
	case DW_RA:
		return CFI_S_RA;
	case DW_RBP:
		return CFI_S_RBP;
	case DW_RBX:
		return CFI_S_RBX;
	case DW_R12:
	case DW_R13:
	case DW_R14:
	case DW_R15:
		return CFI_S_R12 + (int)(reg - DW_R12);
	default:
		return -1;
	}
}

struct raw_row {
	uint64_t start, end; /* file offsets */
	uint32_t rule;
	uint32_t prio; /* lower wins on overlap: source, then input order */
};

struct builder {
	/* file offset mapping from PT_LOAD */
	GElf_Phdr load[16];
	unsigned int n_load;

	struct raw_row *rows;
	size_t n_rows, cap_rows;

	struct cfi_xrule *x;
	size_t n_x, cap_x;
	uint32_t *xhash; /* open addressing, index + 1 */
	size_t xhash_cap;

	uint8_t *expr;
	size_t expr_len, expr_cap;

	uint32_t prio;
	size_t n_complex, n_expr;
};

/* Pool an expression; returns its offset or -errno. Identical expressions share. */
static int64_t pool_expr(struct builder *b, const uint8_t *p, uint64_t len)
{
	size_t off;
	int r;

	if (len > UINT16_MAX)
		return -EINVAL;
	/* the few expressions of a binary repeat (PLT, signal frame): linear dedup is fine */
	for (off = 0; off + 2 <= b->expr_len;) {
		uint16_t l;

		memcpy(&l, b->expr + off, 2);
		if (l == len && !memcmp(b->expr + off + 2, p, len))
			return (int64_t)off;
		off += 2 + l;
	}
	r = array_grow((void **)&b->expr, &b->expr_cap, b->expr_len + 2 + len, 1);
	if (r < 0)
		return r;
	off = b->expr_len;
	uint16_t l16 = (uint16_t)len;
	memcpy(b->expr + off, &l16, 2);
	memcpy(b->expr + off + 2, p, len);
	b->expr_len += 2 + len;
	if (off > INT32_MAX)
		return -EFBIG;
	return (int64_t)off;
}

static uint64_t xrule_hash(const struct cfi_xrule *x)
{
	return hash64(x, sizeof(*x));
}

static int xhash_insert(struct builder *b, uint32_t idx)
{
	size_t mask = b->xhash_cap - 1;
	size_t h = xrule_hash(&b->x[idx]) & mask;

	while (b->xhash[h])
		h = (h + 1) & mask;
	b->xhash[h] = idx + 1;
	return 0;
}

static int64_t intern_x(struct builder *b, const struct cfi_xrule *x)
{
	size_t mask, h;
	int r;

	if (b->n_x * 2 >= b->xhash_cap) {
		size_t ncap = b->xhash_cap ? b->xhash_cap * 2 : 256;
		uint32_t *nh = calloc(ncap, sizeof(*nh));

		if (!nh)
			return -ENOMEM;
		free(b->xhash);
		b->xhash = nh;
		b->xhash_cap = ncap;
		for (size_t i = 0; i < b->n_x; i++)
			xhash_insert(b, (uint32_t)i);
	}
	mask = b->xhash_cap - 1;
	for (h = xrule_hash(x) & mask; b->xhash[h]; h = (h + 1) & mask)
		if (!memcmp(&b->x[b->xhash[h] - 1], x, sizeof(*x)))
			return b->xhash[h] - 1;
	if (b->n_x >= CFI_X_MAX)
		return -EFBIG;
	r = array_grow((void **)&b->x, &b->cap_x, b->n_x + 1, sizeof(*x));
	if (r < 0)
		return r;
	b->x[b->n_x] = *x;
	b->xhash[h] = (uint32_t)b->n_x + 1;
	return (int64_t)b->n_x++;
}

/* Compile a state into a rule word (interning a side rule when needed). */
static int64_t compile_state(struct builder *b, const struct state *s, bool signal, bool *is_x,
			     bool *has_expr)
{
	uint32_t w;
	struct cfi_xrule x;
	int64_t idx;

	*has_expr = s->cfa_kind == CFI_CFA_EXPR;
	for (int i = 0; i < CFI_S_NR; i++)
		if (s->rk[i] == CFI_R_EXPR || s->rk[i] == CFI_R_VAL_EXPR)
			*has_expr = true;

	if (!signal && s->cfa_kind == CFI_CFA_REG &&
	    (s->cfa_reg == DW_RSP || s->cfa_reg == DW_RBP) && s->cfa_off >= 0 &&
	    s->cfa_off <= CFI_CFA_OFF_MAX && s->rk[CFI_S_RA] == CFI_R_OFF &&
	    s->ro[CFI_S_RA] == -8 &&
	    (s->rk[CFI_S_RBP] == CFI_R_SAME ||
	     (s->rk[CFI_S_RBP] == CFI_R_OFF && s->ro[CFI_S_RBP] % 8 == 0 &&
	      s->ro[CFI_S_RBP] >= -1024 && s->ro[CFI_S_RBP] <= 1016))) {
		w = s->cfa_reg == DW_RSP ? CFI_K_RSP : CFI_K_RBP;
		if (s->rk[CFI_S_RBP] == CFI_R_OFF)
			w |= 1u << 2 | ((uint32_t)(uint8_t)(int8_t)(s->ro[CFI_S_RBP] / 8)) << 3;
		w |= (uint32_t)s->cfa_off << 11;
		*is_x = false;
		return w;
	}

	memset(&x, 0, sizeof(x));
	x.cfa_kind = s->cfa_kind;
	x.cfa_reg = s->cfa_reg;
	if (s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX)
		return -ERANGE;
	x.cfa_off = (int32_t)s->cfa_off;
	x.flags = (signal ? CFI_XF_SIGNAL : 0) | (*has_expr ? CFI_XF_EXPR : 0);
	for (int i = 0; i < CFI_S_NR; i++) {
		if (s->ro[i] < INT32_MIN || s->ro[i] > INT32_MAX)
			return -ERANGE;
		x.r[i].kind = s->rk[i];
		x.r[i].off = (int32_t)s->ro[i];
	}
	idx = intern_x(b, &x);
	if (idx < 0)
		return idx;
	*is_x = true;
	return CFI_K_X | (uint32_t)idx << 2;
}

static bool vaddr_to_off(const struct builder *b, uint64_t v, uint64_t *off, uint64_t *seg_end)
{
	for (unsigned int i = 0; i < b->n_load; i++) {
		const GElf_Phdr *ph = &b->load[i];

		if (v >= ph->p_vaddr && v < ph->p_vaddr + ph->p_filesz) {
			*off = v - ph->p_vaddr + ph->p_offset;
			*seg_end = ph->p_offset + ph->p_filesz;
			return true;
		}
	}
	return false;
}

static int emit_row(struct builder *b, uint64_t vstart, uint64_t vend, const struct state *s,
		    bool signal)
{
	uint64_t off, seg_end;
	bool is_x, has_expr;
	int64_t w;
	int r;

	if (vend <= vstart)
		return 0;
	if (!vaddr_to_off(b, vstart, &off, &seg_end))
		return 0; /* not in a loaded segment: nothing can execute there */
	w = compile_state(b, s, signal, &is_x, &has_expr);
	if (w == -ERANGE)
		return 0; /* absurd offsets: treat as no CFI for this range */
	if (w < 0)
		return (int)w;
	r = array_grow((void **)&b->rows, &b->cap_rows, b->n_rows + 1, sizeof(*b->rows));
	if (r < 0)
		return r;
	b->rows[b->n_rows++] = (struct raw_row){
		.start = off,
		.end = MIN(off + (vend - vstart), seg_end),
		.rule = (uint32_t)w,
		.prio = b->prio++,
	};
	return 0;
}

/* ------------------------------------------------------------ CIE and FDE */

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint64_t ra_reg;
	uint8_t fde_enc;
	bool has_z, signal;
	const uint8_t *insns, *insns_end;
	struct state init;
};

struct section {
	const uint8_t *d;
	size_t len;
	uint64_t addr;
	bool eh;	   /* .eh_frame, else .debug_frame */
	bool inflated;	   /* d is libelf's inflated copy, not the file's bytes */
	uint64_t file_off; /* of the section in the file, when not inflated */
};

/* Run a CFA program; emits rows when loc advances, if fde. */
static int run_cfa(struct builder *b, const struct section *sec, const struct cie *cie,
		   const uint8_t *p, const uint8_t *end, struct state *s, bool fde, uint64_t loc,
		   uint64_t fend)
{
	struct state stack[CFI_STATE_STACK];
	unsigned int depth = 0;
	struct cfi_rd r = {p, end, false};
	int ret;

	while (r.p < r.end && !r.bad) {
		uint8_t op = *r.p++;
		uint64_t reg, nloc = loc, len;
		int64_t off, e;
		int slot;

		switch (op & 0xc0) {
		case DW_CFA_advance_loc:
			nloc = loc + (op & 0x3f) * cie->code_align;
			goto advance;
		case DW_CFA_offset:
			off = scale(cfi_rd_uleb(&r), cie->data_align);
			slot = dwreg_slot(op & 0x3f);
			if (slot >= 0) {
				s->rk[slot] = CFI_R_OFF;
				s->ro[slot] = off;
			}
			continue;
		case DW_CFA_restore:
			slot = dwreg_slot(op & 0x3f);
			if (slot >= 0) {
				s->rk[slot] = cie->init.rk[slot];
				s->ro[slot] = cie->init.ro[slot];
			}
			continue;
		}
		switch (op) {
		case DW_CFA_nop:
			break;
		case DW_CFA_set_loc:
			nloc = rd_ptr(&r, sec->eh ? cie->fde_enc : DW_EH_PE_absptr, sec->d,
				      sec->addr);
			goto advance;
		case DW_CFA_advance_loc1:
			nloc = loc + cfi_rd_u(&r, 1) * cie->code_align;
			goto advance;
		case DW_CFA_advance_loc2:
			nloc = loc + cfi_rd_u(&r, 2) * cie->code_align;
			goto advance;
		case DW_CFA_advance_loc4:
			nloc = loc + cfi_rd_u(&r, 4) * cie->code_align;
			goto advance;
		case DW_CFA_offset_extended:
		case DW_CFA_val_offset:
			reg = cfi_rd_uleb(&r);
			off = scale(cfi_rd_uleb(&r), cie->data_align);
			goto set_off;
		case DW_CFA_offset_extended_sf:
		case DW_CFA_val_offset_sf:
			reg = cfi_rd_uleb(&r);
			off = scale((uint64_t)cfi_rd_sleb(&r), cie->data_align);
			goto set_off;
		case DW_CFA_GNU_neg_off_ext:
			reg = cfi_rd_uleb(&r);
			off = scale(-cfi_rd_uleb(&r), cie->data_align);
set_off:
			slot = dwreg_slot(reg);
			if (slot >= 0) {
				s->rk[slot] =
					(op == DW_CFA_val_offset || op == DW_CFA_val_offset_sf)
						? CFI_R_VAL_OFF
						: CFI_R_OFF;
				s->ro[slot] = off;
			}
			break;
		case DW_CFA_restore_extended:
			slot = dwreg_slot(cfi_rd_uleb(&r));
			if (slot >= 0) {
				s->rk[slot] = cie->init.rk[slot];
				s->ro[slot] = cie->init.ro[slot];
			}
			break;
		case DW_CFA_undefined:
		case DW_CFA_same_value:
			slot = dwreg_slot(cfi_rd_uleb(&r));
			if (slot >= 0) {
				s->rk[slot] = op == DW_CFA_undefined ? CFI_R_UNDEF : CFI_R_SAME;
				s->ro[slot] = 0;
			}
			break;
		case DW_CFA_register:
			slot = dwreg_slot(cfi_rd_uleb(&r));
			reg = cfi_rd_uleb(&r);
			if (slot >= 0) {
				s->rk[slot] = CFI_R_REG;
				s->ro[slot] = (int64_t)reg;
			}
			break;
		case DW_CFA_remember_state:
			if (depth >= CFI_STATE_STACK)
				return -EINVAL;
			stack[depth++] = *s;
			break;
		case DW_CFA_restore_state: {
			/* the CFA rule is part of the saved state per DWARF 5 6.4.2.4 */
			if (!depth)
				return -EINVAL;
			*s = stack[--depth];
			break;
		}
		case DW_CFA_def_cfa:
			s->cfa_kind = CFI_CFA_REG;
			reg = cfi_rd_uleb(&r);
			s->cfa_reg = (uint8_t)MIN(reg, 255u);
			s->cfa_off = (int64_t)cfi_rd_uleb(&r);
			break;
		case DW_CFA_def_cfa_sf:
			s->cfa_kind = CFI_CFA_REG;
			reg = cfi_rd_uleb(&r);
			s->cfa_reg = (uint8_t)MIN(reg, 255u);
			s->cfa_off = scale((uint64_t)cfi_rd_sleb(&r), cie->data_align);
			break;
		case DW_CFA_def_cfa_register:
			if (s->cfa_kind != CFI_CFA_REG)
				return -EINVAL; /* no offset to keep after an expression */
			reg = cfi_rd_uleb(&r);
			s->cfa_reg = (uint8_t)MIN(reg, 255u);
			break;
		case DW_CFA_def_cfa_offset:
			if (s->cfa_kind != CFI_CFA_REG)
				return -EINVAL; /* cfa_off holds an expression's pool offset */
			s->cfa_off = (int64_t)cfi_rd_uleb(&r);
			break;
		case DW_CFA_def_cfa_offset_sf:
			if (s->cfa_kind != CFI_CFA_REG)
				return -EINVAL;
			s->cfa_off = scale((uint64_t)cfi_rd_sleb(&r), cie->data_align);
			break;
		case DW_CFA_def_cfa_expression:
			len = cfi_rd_uleb(&r);
			if (r.bad || len > (uint64_t)(r.end - r.p))
				return -EINVAL;
			e = pool_expr(b, r.p, len);
			if (e < 0)
				return (int)e;
			r.p += len;
			s->cfa_kind = CFI_CFA_EXPR;
			s->cfa_off = e;
			break;
		case DW_CFA_expression:
		case DW_CFA_val_expression:
			slot = dwreg_slot(cfi_rd_uleb(&r));
			len = cfi_rd_uleb(&r);
			if (r.bad || len > (uint64_t)(r.end - r.p))
				return -EINVAL;
			if (slot >= 0) {
				e = pool_expr(b, r.p, len);
				if (e < 0)
					return (int)e;
				s->rk[slot] = op == DW_CFA_expression ? CFI_R_EXPR : CFI_R_VAL_EXPR;
				s->ro[slot] = e;
			}
			r.p += len;
			break;
		case DW_CFA_GNU_args_size:
			cfi_rd_uleb(&r);
			break;
		default:
			return -EINVAL;
		}
		continue;
advance:
		if (r.bad)
			break;
		if (fde) {
			if (nloc > fend)
				nloc = fend;
			if (nloc > loc) {
				ret = emit_row(b, loc, nloc, s, cie->signal);
				if (ret < 0)
					return ret;
			}
		}
		loc = MAX(loc, nloc);
	}
	if (r.bad)
		return -EINVAL;
	if (fde && loc < fend)
		return emit_row(b, loc, fend, s, cie->signal);
	return 0;
}

static int parse_cie(struct builder *b, const struct section *sec, const uint8_t *p,
		     const uint8_t *end, struct cie *cie)
{
	struct cfi_rd r = {p, end, false};
	const char *aug;
	uint8_t version;
	const uint8_t *aug_end = NULL;

	memset(cie, 0, sizeof(*cie));
	cie->fde_enc = DW_EH_PE_absptr;
	version = (uint8_t)cfi_rd_u(&r, 1);
	if (version != 1 && version != 3 && version != 4)
		return -EINVAL;
	aug = (const char *)r.p;
	while (r.p < r.end && *r.p)
		r.p++;
	if (r.p >= r.end)
		return -EINVAL;
	r.p++;
	if (!strcmp(aug, "eh")) /* ancient GCC: an eh_ptr follows */
		cfi_rd_u(&r, 8);
	if (version == 4) {
		if (cfi_rd_u(&r, 1) != 8)
			return -EINVAL;
		cfi_rd_u(&r, 1); /* segment selector size */
	}
	cie->code_align = cfi_rd_uleb(&r);
	cie->data_align = cfi_rd_sleb(&r);
	cie->ra_reg = version == 1 ? cfi_rd_u(&r, 1) : cfi_rd_uleb(&r);
	if (cie->ra_reg != DW_RA)
		return -EINVAL;
	if (aug[0] == 'z') {
		uint64_t alen = cfi_rd_uleb(&r);

		if (r.bad || alen > (uint64_t)(r.end - r.p))
			return -EINVAL;
		aug_end = r.p + alen;
		cie->has_z = true;
		for (const char *a = aug + 1; *a; a++) {
			switch (*a) {
			case 'R':
				cie->fde_enc = (uint8_t)cfi_rd_u(&r, 1);
				break;
			case 'L':
				cfi_rd_u(&r, 1);
				break;
			case 'P': {
				uint8_t enc = (uint8_t)cfi_rd_u(&r, 1);

				rd_ptr(&r, enc & 0x7f, sec->d, sec->addr);
				break;
			}
			case 'S':
				cie->signal = true;
				break;
			default:
				/* 'B', 'G' and unknown letters: the z length lets us skip */
				break;
			}
		}
		r.p = aug_end;
	} else if (aug[0]) {
		if (strcmp(aug, "eh"))
			return -EINVAL; /* unknown augmentation without z: cannot skip */
	}
	if (r.bad)
		return -EINVAL;
	/* defaults: CFA undefined until the program says, callee-saved regs same */
	cie->init.cfa_kind = CFI_CFA_REG;
	cie->init.cfa_reg = DW_RSP;
	cie->init.cfa_off = 8;
	cie->init.rk[CFI_S_RA] = CFI_R_UNDEF;
	cie->insns = r.p;
	cie->insns_end = end;
	return run_cfa(b, sec, cie, cie->insns, cie->insns_end, &cie->init, false, 0, 0);
}

/* A tiny cache: FDEs of one CIE come in runs, and there are few CIEs. */
struct cie_cache {
	uint64_t off[8];
	struct cie cie[8];
	unsigned int n, next;
};

static int get_cie(struct builder *b, const struct section *sec, struct cie_cache *cc, uint64_t off,
		   struct cie **ret)
{
	struct cfi_rd r;
	uint64_t len, id;
	unsigned int slot;
	int err;

	for (unsigned int i = 0; i < cc->n; i++)
		if (cc->off[i] == off) {
			*ret = &cc->cie[i];
			return 0;
		}
	if (off >= sec->len)
		return -EINVAL;
	r = (struct cfi_rd){sec->d + off, sec->d + sec->len, false};
	len = cfi_rd_u(&r, 4);
	if (len == 0xffffffffu) {
		len = cfi_rd_u(&r, 8);
		if (r.bad || len > (uint64_t)(r.end - r.p))
			return -EINVAL;
		r.end = r.p + len;
		id = cfi_rd_u(&r, sec->eh ? 4 : 8); /* .eh_frame ids are 4 bytes in any format */
		if (!sec->eh && id != ~0ull)
			return -EINVAL;
	} else {
		if (r.bad || len > (uint64_t)(r.end - r.p))
			return -EINVAL;
		r.end = r.p + len;
		id = cfi_rd_u(&r, 4);
		if (!sec->eh && id != 0xffffffffu)
			return -EINVAL;
	}
	if (sec->eh && id != 0)
		return -EINVAL;
	slot = cc->n < ARRAY_SIZE(cc->off) ? cc->n++ : cc->next++ % ARRAY_SIZE(cc->off);
	cc->off[slot] = ~0ull;
	err = parse_cie(b, sec, r.p, r.end, &cc->cie[slot]);
	if (err < 0)
		return err;
	cc->off[slot] = off;
	*ret = &cc->cie[slot];
	return 0;
}

/*
 * One entry of a section at *pos: a CIE (skipped: parsed when an FDE refers to
 * it) or an FDE. With run, an FDE's program is run and its rows emitted;
 * without, only its header is read into ret_loc/ret_range (0 range: nothing to
 * do). Moves *pos to the next entry. Returns 1 for an FDE, 0 for anything
 * else worth skipping, -ENOENT at the end of the section (terminator or
 * broken framing: the entries before it count), -ENOMEM/-EFBIG.
 */
static int parse_entry(struct builder *b, const struct section *sec, struct cie_cache *cc,
		       size_t *pos, bool run, uint64_t *ret_loc, uint64_t *ret_range)
{
	struct cfi_rd r = {sec->d + *pos, sec->d + sec->len, false};
	uint64_t len, id, cie_off, loc, range;
	const uint8_t *id_pos, *entry_end;
	bool is64 = false;
	struct cie *cie;
	struct state s;
	int err;

	if (*pos + 4 > sec->len)
		return -ENOENT;
	len = cfi_rd_u(&r, 4);
	if (len == 0) {
		if (sec->eh)
			return -ENOENT; /* .eh_frame terminator */
		*pos += 4;
		return 0;
	}
	if (len == 0xffffffffu) {
		len = cfi_rd_u(&r, 8);
		is64 = true;
	}
	if (r.bad || len > (uint64_t)(r.end - r.p))
		return -ENOENT; /* broken framing: keep the rows of the entries before it */
	entry_end = r.p + len;
	r.end = entry_end;
	id_pos = r.p;
	id = cfi_rd_u(&r, is64 && !sec->eh ? 8 : 4);
	*pos = (size_t)(entry_end - sec->d);

	if (sec->eh ? id == 0 : id == (is64 ? ~0ull : 0xffffffffu))
		return 0; /* a CIE: parsed when an FDE refers to it */
	if (sec->eh) {
		if (id > (uint64_t)(id_pos - sec->d))
			return 0;
		cie_off = (uint64_t)(id_pos - sec->d) - id;
	} else {
		cie_off = id;
	}
	err = get_cie(b, sec, cc, cie_off, &cie);
	if (err == -ENOMEM || err == -EFBIG)
		return err;
	if (err < 0)
		return 0; /* one odd CIE (foreign RA column, unknown augmentation) */
	if (sec->eh) {
		loc = rd_ptr(&r, cie->fde_enc, sec->d, sec->addr);
		range = rd_ptr(&r, cie->fde_enc & 0x0f, sec->d, sec->addr);
	} else {
		loc = cfi_rd_u(&r, 8);
		range = cfi_rd_u(&r, 8);
	}
	if (cie->has_z) {
		uint64_t alen = cfi_rd_uleb(&r);

		if (r.bad || alen > (uint64_t)(r.end - r.p))
			return 0;
		r.p += alen;
	}
	if (r.bad)
		return 0;
	if (!range || loc + range < loc)
		return 0; /* discarded by the linker (COMDAT, gc-sections) */
	*ret_loc = loc;
	*ret_range = range;
	if (!run)
		return 1;
	s = cie->init;
	err = run_cfa(b, sec, cie, r.p, entry_end, &s, true, loc, loc + range);
	/* a malformed program keeps the rows it produced before the error */
	if (err == -ENOMEM || err == -EFBIG)
		return err;
	return 1;
}

static int parse_section(struct builder *b, const struct section *sec)
{
	struct cie_cache cc = {.n = 0};
	size_t pos = 0;
	uint64_t loc, range;
	int r;

	while ((r = parse_entry(b, sec, &cc, &pos, true, &loc, &range)) >= 0)
		;
	return r == -ENOENT ? 0 : r;
}

/* ----------------------------------------------------------------- the ELF */

/* A compressed .eh_frame/.debug_frame is refused when it would inflate past
 * 256 MiB, or past 32 times its compressed size when that is over 16 MiB (real
 * CFI packs 4-6x; more is a zlib bomb). */
#define CFI_MAX_INFLATED  (256ull << 20)
#define CFI_INFLATE_MIN	  (16ull << 20)
#define CFI_INFLATE_RATIO 32u

static int find_section(Elf *elf, const char *name, struct section *ret, bool eh)
{
	size_t shstrndx;
	Elf_Scn *scn = NULL;

	if (elf_getshdrstrndx(elf, &shstrndx) < 0)
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *n;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			return -EINVAL;
		n = elf_strptr(elf, shstrndx, sh.sh_name);
		if (!n || strcmp(n, name))
			continue;
		if (sh.sh_type == SHT_NOBITS)
			return -ENODATA; /* stripped into a debug file */
		if (sh.sh_flags & SHF_COMPRESSED) {
			GElf_Chdr ch;

			/* libelf allocates ch_size before inflating: a header
			 * claiming gigabytes (or a zlib bomb) is refused first. */
			if (!gelf_getchdr(scn, &ch) || ch.ch_size > CFI_MAX_INFLATED ||
			    ch.ch_size > MAX(CFI_INFLATE_MIN, sh.sh_size * CFI_INFLATE_RATIO) ||
			    elf_compress(scn, 0, 0) < 0)
				return -EINVAL;
		}
		d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || !d->d_size)
			return -ENODATA;
		*ret = (struct section){
			d->d_buf,    d->d_size, sh.sh_addr, eh, !!(sh.sh_flags & SHF_COMPRESSED),
			sh.sh_offset};
		return 0;
	}
	return -ENODATA;
}

static void elf_endp(Elf **e)
{
	if (*e)
		elf_end(*e);
}

static int check_elf(Elf *e, Elf **ret)
{
	GElf_Ehdr eh;

	if (!e)
		return -EINVAL;
	if (elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh.e_machine != EM_X86_64) {
		elf_end(e);
		return -EINVAL;
	}
	*ret = e;
	return 0;
}

static int open_elf(int fd, Elf **ret)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	/* private mmap: elf_compress() on a debug file rewrites section data in place */
	return check_elf(elf_begin(fd, ELF_C_READ_MMAP_PRIVATE, NULL), ret);
}

/* An image we mapped read-only: libelf reads it in place (native byte order,
 * no conversion) and inflates compressed sections into its own buffers. */
static int open_elf_mem(void *img, size_t len, Elf **ret)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	return check_elf(elf_memory(img, len), ret);
}

static int load_phdrs(struct builder *b, Elf *e)
{
	size_t n;

	if (elf_getphdrnum(e, &n) < 0)
		return -EINVAL;
	for (size_t i = 0; i < n && b->n_load < ARRAY_SIZE(b->load); i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph))
			return -EINVAL;
		if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X))
			b->load[b->n_load++] = ph;
	}
	return b->n_load ? 0 : -ENODATA;
}

static int raw_row_cmp(const void *a, const void *b)
{
	const struct raw_row *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->prio < y->prio ? -1 : x->prio > y->prio;
}

static atomic_uint cfi_gen_next = 1;

/* Sort, clip overlaps, fill gaps, merge equal neighbours, lay out the table. */
static int finish(struct builder *b, struct cfi_table **ret)
{
	_cleanup_free_ uint32_t *st = NULL, *ru = NULL;
	size_t n = 0, cap, off;
	uint64_t base, cur, span;
	struct cfi_table *t;
	uint32_t n_pages;
	uint8_t *m;

	if (!b->n_rows)
		return -ENODATA;
	qsort(b->rows, b->n_rows, sizeof(*b->rows), raw_row_cmp);
	base = b->rows[0].start;
	cap = 2 * b->n_rows + 2;
	st = malloc(cap * sizeof(*st));
	ru = malloc(cap * sizeof(*ru));
	if (!st || !ru)
		return -ENOMEM;
	cur = base;
	for (size_t i = 0; i < b->n_rows; i++) {
		struct raw_row *rr = &b->rows[i];
		uint64_t s = MAX(rr->start, cur);

		if (rr->end <= s)
			continue; /* fully shadowed by an earlier (higher priority) row */
		if (rr->end - base > UINT32_MAX)
			return -EFBIG;
		if (s > cur) {
			if (!n || ru[n - 1] != CFI_K_GAP) {
				st[n] = (uint32_t)(cur - base);
				ru[n++] = CFI_K_GAP;
			}
		}
		if (!n || ru[n - 1] != rr->rule) {
			st[n] = (uint32_t)(s - base);
			ru[n++] = rr->rule;
		}
		cur = rr->end;
	}
	span = cur - base;
	st[n] = (uint32_t)span; /* sentinel: lookups of keys >= span never reach it */
	ru[n++] = CFI_K_GAP;

	for (size_t i = 0; i < n; i++) {
		if (CFI_RULE_KIND(ru[i]) != CFI_K_X)
			continue;
		b->n_complex++;
		if (b->x[CFI_RULE_X(ru[i])].flags & CFI_XF_EXPR)
			b->n_expr++;
	}

	n_pages = (uint32_t)((span + (1u << CFI_PAGE_SHIFT) - 1) >> CFI_PAGE_SHIFT);
	off = ALIGN_UP(sizeof(*t), 8);
	size_t o_row = off;
	off = ALIGN_UP(off + n * sizeof(struct cfi_row), 8);
	size_t o_page = off;
	off = ALIGN_UP(off + ((size_t)n_pages + 1) * 4, 8);
	size_t o_x = off;
	off = ALIGN_UP(off + b->n_x * sizeof(struct cfi_xrule), 8);
	size_t o_expr = off;
	off += b->expr_len;

	m = calloc(1, off);
	if (!m)
		return -ENOMEM;
	t = (struct cfi_table *)m;
	for (size_t i = 0; i < n; i++)
		((struct cfi_row *)(m + o_row))[i] = (struct cfi_row){st[i], ru[i]};
	{
		uint32_t *page = (uint32_t *)(m + o_page);
		size_t row = 0;

		for (uint32_t p = 0; p <= n_pages; p++) {
			uint64_t key = (uint64_t)p << CFI_PAGE_SHIFT;

			while (row + 1 < n && st[row + 1] <= key)
				row++;
			page[p] = (uint32_t)row;
		}
	}
	if (b->n_x)
		memcpy(m + o_x, b->x, b->n_x * sizeof(struct cfi_xrule));
	if (b->expr_len)
		memcpy(m + o_expr, b->expr, b->expr_len);
	*t = (struct cfi_table){
		.gen = atomic_fetch_add(&cfi_gen_next, 1),
		.n_rows = (uint32_t)n,
		.base = base,
		.span = span,
		.n_pages = n_pages,
		.n_x = (uint32_t)b->n_x,
		.expr_len = (uint32_t)b->expr_len,
		.n_complex_rows = (uint32_t)b->n_complex,
		.n_expr_rows = (uint32_t)b->n_expr,
		.row = (const struct cfi_row *)(m + o_row),
		.page = (const uint32_t *)(m + o_page),
		.x = (const struct cfi_xrule *)(m + o_x),
		.expr = m + o_expr,
		.bytes = off,
	};
	*ret = t;
	return 0;
}

static void builder_done(struct builder *b)
{
	free(b->rows);
	free(b->x);
	free(b->xhash);
	free(b->expr);
}

/*
 * Rows for code that has no FDE by construction (docs/unwinding.md, sources 4
 * and 5), only where no FDE reaches and only in a binary that has FDEs (one
 * without any keeps "no CFI": the walker's frame-pointer fallback). Found
 * once per binary against every FDE's extent, as file offsets: the builder's
 * raw rows (whole table) or the index's spans (lazy chunks, which then only
 * emit the ones over them).
 *
 * - The ELF entry point is the outermost frame by definition (the kernel
 *   jumps there with nothing to return to), but not every entry has an FDE
 *   saying so: Debian's ld.so `_start` (`mov %rsp,%rdi; call _dl_start`) and
 *   the `_dl_start_user` right after it (`call _dl_init`, then a jump to the
 *   program's entry) have none, so every sample in the loader or in a
 *   library's constructor ended "no cfi" one frame short (a whole-machine
 *   parallel build: 4 % of all samples, 10 % of cmake's). "Return address
 *   undefined" over the FDE-less code from the entry to the next FDE, at
 *   most ENTRY_GAP_MAX bytes, within the segment.
 * - `.init` and `.fini` come from glibc's crti.o/crtn.o, which carry no CFI:
 *   a library's `_init` runs every constructor of that library. Their code is
 *   fixed: [endbr64] `sub $8,%rsp` ... `add $8,%rsp; ret`. Where a section is
 *   exactly that shape: CFA = rsp + 8 up to the sub, rsp + 16 up to the ret,
 *   rsp + 8 on it; anything else gets none.
 */
#define ENTRY_GAP_MAX 256
#define SYNTH_MAX     7 /* the entry, three rows per crt section */

enum synth_kind { SYN_OUTERMOST, SYN_CFA8, SYN_CFA16 };

struct synth {
	uint64_t vstart, vend; /* vaddrs, as emit_row() takes them */
	uint64_t off;	       /* file offset of vstart */
	uint8_t kind;
};

struct synth_set {
	struct synth v[SYNTH_MAX];
	unsigned int n;
};

/* FDE extents: raw rows or index spans, both starting with u64 start, end. */
struct span_view {
	const uint8_t *p;
	size_t n, stride;
};

static void span_at(const struct span_view *sv, size_t i, uint64_t *start, uint64_t *end)
{
	memcpy(start, sv->p + i * sv->stride, sizeof(*start));
	memcpy(end, sv->p + i * sv->stride + sizeof(*start), sizeof(*end));
}

static void synth_add(struct synth_set *set, uint64_t vstart, uint64_t vend, uint64_t off,
		      enum synth_kind kind)
{
	if (set->n < SYNTH_MAX && vend > vstart)
		set->v[set->n++] = (struct synth){vstart, vend, off, (uint8_t)kind};
}

static void synth_entry(const struct builder *b, uint64_t entry, const struct span_view *sv,
			struct synth_set *set)
{
	uint64_t off, seg_end, end, st, en;

	if (!entry || !vaddr_to_off(b, entry, &off, &seg_end))
		return;
	end = MIN(seg_end, off + ENTRY_GAP_MAX);
	for (size_t i = 0; i < sv->n; i++) {
		span_at(sv, i, &st, &en);
		if (st <= off && off < en)
			return; /* an FDE covers the entry: it rules */
		if (st > off && st < end)
			end = st;
	}
	synth_add(set, entry, entry + (end - off), off, SYN_OUTERMOST);
}

static void synth_crt(const struct builder *b, Elf *e, const char *name, const struct span_view *sv,
		      struct synth_set *set)
{
	static const uint8_t endbr[] = {0xf3, 0x0f, 0x1e, 0xfa}, sub[] = {0x48, 0x83, 0xec, 0x08},
			     tail[] = {0x48, 0x83, 0xc4, 0x08, 0xc3};
	uint64_t a, off, seg_end, st, en;
	struct section sec;
	size_t k = 0;

	if (find_section(e, name, &sec, false) < 0 || sec.len < sizeof(sub) + sizeof(tail) + 4)
		return;
	if (!memcmp(sec.d, endbr, sizeof(endbr)))
		k = sizeof(endbr);
	if (memcmp(sec.d + k, sub, sizeof(sub)) ||
	    memcmp(sec.d + sec.len - sizeof(tail), tail, sizeof(tail)) ||
	    !vaddr_to_off(b, sec.addr, &off, &seg_end))
		return;
	for (size_t i = 0; i < sv->n; i++) {
		span_at(sv, i, &st, &en);
		if (st < off + sec.len && off < en)
			return;
	}
	a = sec.addr;
	synth_add(set, a, a + k + sizeof(sub), off, SYN_CFA8);
	synth_add(set, a + k + sizeof(sub), a + sec.len - 1, off + k + sizeof(sub), SYN_CFA16);
	synth_add(set, a + sec.len - 1, a + sec.len, off + sec.len - 1, SYN_CFA8);
}

static void synth_find(const struct builder *b, Elf *e, const struct span_view *sv,
		       struct synth_set *set)
{
	GElf_Ehdr eh;

	set->n = 0;
	if (!sv->n)
		return;
	synth_entry(b, gelf_getehdr(e, &eh) ? eh.e_entry : 0, sv, set);
	synth_crt(b, e, ".init", sv, set);
	synth_crt(b, e, ".fini", sv, set);
}

/* Emit the rows of set that reach into the file offsets [lo, hi). */
static int synth_emit(struct builder *b, const struct synth_set *set, uint64_t lo, uint64_t hi)
{
	for (unsigned int i = 0; i < set->n; i++) {
		const struct synth *y = &set->v[i];
		struct state s = {.cfa_kind = CFI_CFA_REG,
				  .cfa_reg = DW_RSP,
				  .cfa_off = y->kind == SYN_CFA16 ? 16 : 8};
		int r;

		if (y->off >= hi || y->off + (y->vend - y->vstart) <= lo)
			continue;
		for (int j = 0; j < CFI_S_NR; j++)
			s.rk[j] = CFI_R_SAME;
		if (y->kind == SYN_OUTERMOST) {
			s.rk[CFI_S_RA] = CFI_R_UNDEF;
		} else {
			s.rk[CFI_S_RA] = CFI_R_OFF;
			s.ro[CFI_S_RA] = -8;
		}
		r = emit_row(b, y->vstart, y->vend, &s, false);
		if (r < 0)
			return r;
	}
	return 0;
}

int cfi_table__build(int elf_fd, int debug_fd, struct cfi_table **ret)
{
	_cleanup_(elf_endp) Elf *e = NULL;
	_cleanup_(elf_endp) Elf *d = NULL;
	struct builder b;
	struct section sec;
	bool any = false;
	int r;

	if (elf_fd < 0 || !ret)
		return -EINVAL;
	memset(&b, 0, sizeof(b));
	r = open_elf(elf_fd, &e);
	if (r < 0)
		return r;
	r = load_phdrs(&b, e);
	if (r < 0)
		return r;

	/*
	 * Sources in priority order: .eh_frame is what the runtime itself
	 * trusts; .debug_frame (here or in the debug file) only fills holes.
	 */
	if (find_section(e, ".eh_frame", &sec, true) == 0) {
		r = parse_section(&b, &sec);
		if (r < 0)
			goto out;
		any = true;
	}
	if (find_section(e, ".debug_frame", &sec, false) == 0) {
		r = parse_section(&b, &sec);
		if (r < 0)
			goto out;
		any = true;
	}
	if (debug_fd >= 0 && open_elf(debug_fd, &d) == 0 &&
	    find_section(d, ".debug_frame", &sec, false) == 0) {
		r = parse_section(&b, &sec);
		if (r < 0)
			goto out;
		any = true;
	}
	if (any) {
		struct span_view sv = {(const uint8_t *)b.rows, b.n_rows, sizeof(*b.rows)};
		struct synth_set set;

		synth_find(&b, e, &sv, &set);
		r = synth_emit(&b, &set, 0, UINT64_MAX);
		if (r < 0)
			goto out;
	}
	r = any ? finish(&b, ret) : -ENODATA;
out:
	builder_done(&b);
	return r;
}

void cfi_table__free(struct cfi_table *t)
{
	free(t);
}

size_t cfi_table__bytes(const struct cfi_table *t)
{
	return t ? t->bytes : 0;
}

size_t cfi_table__rows(const struct cfi_table *t)
{
	return t ? t->n_rows : 0;
}

size_t cfi_table__complex_rows(const struct cfi_table *t)
{
	return t ? t->n_complex_rows : 0;
}

size_t cfi_table__expr_rows(const struct cfi_table *t)
{
	return t ? t->n_expr_rows : 0;
}

int cfi_table__row(const struct cfi_table *t, size_t i, uint64_t *ret_start, uint64_t *ret_end,
		   uint32_t *ret_rule)
{
	if (!t || i + 1 >= t->n_rows)
		return -ERANGE;
	if (ret_start)
		*ret_start = t->base + t->row[i].start;
	if (ret_end)
		*ret_end = t->base + t->row[i + 1].start;
	if (ret_rule)
		*ret_rule = t->row[i].rule;
	return 0;
}

/* ------------------------------------------------------------- lazy index */

/*
 * The index keeps, per chunk of 2^CFI_CHUNK_SHIFT file-offset bytes, the FDEs
 * whose range overlaps it (as a key: source << CFI_KEY_SRC_SHIFT | the FDE's
 * offset in its section; keys in increasing order are the whole table's
 * priority order), and builds a chunk's table on its first lookup with the
 * same code as cfi_table__build(). The row covering a pc is the first one in
 * (start, priority) order that contains it, and every row that contains a pc
 * of the chunk comes from an FDE that overlaps the chunk, so a chunk's table
 * answers exactly like the whole table for the pcs of the chunk.
 *
 * The sections are read from our own read-only private mapping of the file
 * (page cache pages: nothing copied), and the pages the header pass touched
 * are dropped from our page tables after it (MADV_DONTNEED), those of chunk
 * builds every 16 builds, so they do not stay in our RSS/PSS. Only a
 * compressed section is copied (heap).
 */
#define CFI_CHUNK_SHIFT	  16
#define CFI_KEY_SRC_SHIFT 30
#define CFI_KEY_POS_MASK  ((1u << CFI_KEY_SRC_SHIFT) - 1)
#define CFI_SRC_MAX	  3

struct cfi_index {
	GElf_Phdr load[16];
	unsigned int n_load;
	struct section sec[CFI_SRC_MAX];
	unsigned int n_sec;
	void *copy[CFI_SRC_MAX]; /* inflated sections (heap), else NULL */
	void *map[2];		 /* the ELF and the debug file (private) */
	size_t map_len[2];
	struct synth_set synth; /* rows for code without FDEs (synth_find) */
	uint64_t base;		/* file offset of chunk 0 */
	uint32_t n_chunks;
	uint32_t *first; /* n_chunks + 1: keys of chunk c are key[first[c]..first[c+1]) */
	uint32_t *key;
	struct cfi_table **chunk; /* NULL: not built yet; CHUNK_NONE: no rows there */
	uint32_t n_built;
	uint32_t built_at_drop; /* n_built when the file pages were last dropped */
	uint32_t built_at_look; /* n_built at the last cfi_index__drop_quiet() */
	bool stale;		/* the file shrank under our mapping: no more builds */
	size_t bytes;
};

static struct cfi_table chunk_none;
#define CHUNK_NONE (&chunk_none)

struct fde_span {
	uint64_t start, end; /* file offsets */
	uint32_t key;
};

static void unmap_file(void *m, size_t len)
{
	if (m)
		munmap(m, len);
}

void cfi_index__free(struct cfi_index *x)
{
	if (!x)
		return;
	for (uint32_t c = 0; x->chunk && c < x->n_chunks; c++)
		if (x->chunk[c] != CHUNK_NONE)
			free(x->chunk[c]);
	for (unsigned int i = 0; i < CFI_SRC_MAX; i++)
		free(x->copy[i]);
	unmap_file(x->map[0], x->map_len[0]);
	unmap_file(x->map[1], x->map_len[1]);
	free(x->chunk);
	free(x->first);
	free(x->key);
	free(x);
}

/* Map the whole file; no page is read until a section is parsed. Private and
 * writable only because libelf rewrites a compressed section's header in
 * place when it inflates it (elf_compress): copy-on-write, never the file. */
static int map_file(int fd, void **ret, size_t *ret_len)
{
	struct stat st;
	void *m;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (st.st_size <= 0)
		return -EINVAL;
	m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	if (m == MAP_FAILED)
		return -errno;
	*ret = m;
	*ret_len = (size_t)st.st_size;
	return 0;
}

/*
 * Point a section found by libelf at our own mapping (or at a heap copy of
 * libelf's inflated data), so it outlives the Elf handle.
 */
static int index_add_section(struct cfi_index *x, const struct section *s, const void *map,
			     size_t map_len)
{
	struct section *d = &x->sec[x->n_sec];

	if (s->len > CFI_KEY_POS_MASK)
		return -EFBIG;
	*d = *s;
	if (s->inflated) {
		void *c = malloc(s->len);

		if (!c)
			return -ENOMEM;
		memcpy(c, s->d, s->len);
		x->copy[x->n_sec] = c;
		x->bytes += s->len;
		d->d = c;
	} else {
		if (s->file_off > map_len || s->len > map_len - s->file_off)
			return -EINVAL;
		d->d = (const uint8_t *)map + s->file_off;
	}
	x->n_sec++;
	return 0;
}

static void index_drop_pages(struct cfi_index *x)
{
	for (unsigned int i = 0; i < 2; i++)
		if (x->map[i])
			madvise(x->map[i], x->map_len[i], MADV_DONTNEED);
	x->built_at_drop = x->n_built;
}

/*
 * A file we mapped can be truncated under us (a binary rewritten in place:
 * `cp` over it): touching a page past the new end raises SIGBUS. Every parse
 * of a mapped section runs under this guard; a SIGBUS there jumps back and the
 * index stops building chunks. Everything the parse allocates hangs off its
 * context, which the caller frees either way. The handler is installed once,
 * in front of whatever handled SIGBUS before (the default, a sanitizer's):
 * outside a guarded parse it puts that one back and returns, so the fault
 * happens again and goes where it would have gone without us.
 */
static _Thread_local sigjmp_buf *bus_jb;
static struct sigaction bus_old;

static void bus_handler(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (bus_jb)
		siglongjmp(*bus_jb, 1);
	sigaction(sig, &bus_old, NULL);
}

static void bus_install(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = bus_handler;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGBUS, &sa, &bus_old);
}

static int guarded(int (*fn)(void *), void *arg)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	sigjmp_buf jb;
	int r;

	pthread_once(&once, bus_install);
	if (sigsetjmp(jb, 0)) { /* SA_NODEFER: no mask to restore */
		bus_jb = NULL;
		return -ESTALE;
	}
	bus_jb = &jb;
	r = fn(arg);
	bus_jb = NULL;
	return r;
}

struct scan_ctx {
	const struct cfi_index *x;
	Elf *e;			 /* the ELF, for synth_find() */
	struct synth_set *synth; /* x's, filled once the spans are known */
	struct builder b;
	struct fde_span *v;
	size_t n, cap;
};

/* Read every FDE header (no CFA program runs) into spans, in key order. */
static int index_scan(void *arg)
{
	struct scan_ctx *k = arg;
	const struct cfi_index *x = k->x;
	int r = 0;

	for (unsigned int src = 0; src < x->n_sec && r >= 0; src++) {
		struct cie_cache cc = {.n = 0};
		size_t pos = 0, at;
		uint64_t loc, range, off, seg_end;

		for (at = pos;
		     (r = parse_entry(&k->b, &x->sec[src], &cc, &pos, false, &loc, &range)) >= 0;
		     at = pos) {
			if (r == 0 || !vaddr_to_off(&k->b, loc, &off, &seg_end))
				continue; /* rows of it could not land in the table either */
			r = array_grow((void **)&k->v, &k->cap, k->n + 1, sizeof(*k->v));
			if (r < 0)
				break;
			k->v[k->n++] = (struct fde_span){
				.start = off,
				.end = MIN(off + range, seg_end),
				.key = (uint32_t)src << CFI_KEY_SRC_SHIFT | (uint32_t)at,
			};
		}
		if (r == -ENOENT)
			r = 0;
	}
	if (r >= 0) {
		struct span_view sv = {(const uint8_t *)k->v, k->n, sizeof(*k->v)};

		/* the crt sections' bytes are read through the mapping: guarded
		 * like the headers */
		synth_find(&k->b, k->e, &sv, k->synth);
	}
	return r;
}

static int index_layout(struct cfi_index *x, const struct fde_span *v, size_t n)
{
	uint64_t lo = UINT64_MAX, hi = 0;
	uint32_t total = 0;

	for (size_t i = 0; i < n; i++) {
		lo = MIN(lo, v[i].start);
		hi = MAX(hi, v[i].end);
	}
	for (unsigned int i = 0; i < x->synth.n; i++) {
		lo = MIN(lo, x->synth.v[i].off);
		hi = MAX(hi, x->synth.v[i].off + (x->synth.v[i].vend - x->synth.v[i].vstart));
	}
	if (lo >= hi)
		return -ENODATA;
	if (hi - lo > UINT32_MAX)
		return -EFBIG;
	x->base = lo & ~((1ull << CFI_CHUNK_SHIFT) - 1);
	x->n_chunks = (uint32_t)(((hi - 1 - x->base) >> CFI_CHUNK_SHIFT) + 1);
	x->first = calloc((size_t)x->n_chunks + 1, sizeof(*x->first));
	x->chunk = calloc(x->n_chunks, sizeof(*x->chunk));
	if (!x->first || !x->chunk)
		return -ENOMEM;
	/* count, prefix sums, fill (in key order: v is) */
	for (size_t i = 0; i < n; i++) {
		if (v[i].end <= v[i].start)
			continue;
		for (uint64_t c = (v[i].start - x->base) >> CFI_CHUNK_SHIFT;
		     c <= (v[i].end - 1 - x->base) >> CFI_CHUNK_SHIFT; c++) {
			x->first[c + 1]++;
			total++;
		}
	}
	for (uint32_t c = 0; c < x->n_chunks; c++)
		x->first[c + 1] += x->first[c];
	x->key = malloc(((size_t)total + 1) * sizeof(*x->key));
	if (!x->key)
		return -ENOMEM;
	{
		_cleanup_free_ uint32_t *fill = malloc((size_t)x->n_chunks * sizeof(*fill));

		if (!fill)
			return -ENOMEM;
		memcpy(fill, x->first, (size_t)x->n_chunks * sizeof(*fill));
		for (size_t i = 0; i < n; i++) {
			if (v[i].end <= v[i].start)
				continue;
			for (uint64_t c = (v[i].start - x->base) >> CFI_CHUNK_SHIFT;
			     c <= (v[i].end - 1 - x->base) >> CFI_CHUNK_SHIFT; c++)
				x->key[fill[c]++] = v[i].key;
		}
	}
	x->bytes += sizeof(*x) + ((size_t)x->n_chunks + 1) * sizeof(*x->first) +
		    (size_t)x->n_chunks * sizeof(*x->chunk) + ((size_t)total + 1) * sizeof(*x->key);
	return 0;
}

int cfi_index__build(int elf_fd, int debug_fd, struct cfi_index **ret)
{
	_cleanup_(elf_endp) Elf *e = NULL;
	_cleanup_(elf_endp) Elf *d = NULL;
	struct scan_ctx k;
	struct cfi_index *x;
	struct builder b;
	struct section sec;
	int r;

	if (elf_fd < 0 || !ret)
		return -EINVAL;
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	memset(&b, 0, sizeof(b));
	/* one mapping, ours, read by libelf too (no second mmap/munmap per
	 * binary: an munmap is a TLB shootdown, costly on a small VM) */
	r = map_file(elf_fd, &x->map[0], &x->map_len[0]);
	if (r < 0)
		goto fail;
	r = open_elf_mem(x->map[0], x->map_len[0], &e);
	if (r < 0)
		goto fail;
	r = load_phdrs(&b, e);
	if (r < 0)
		goto fail;
	memcpy(x->load, b.load, sizeof(x->load));
	x->n_load = b.n_load;
	/* the sources in cfi_table__build()'s priority order */
	if (find_section(e, ".eh_frame", &sec, true) == 0 &&
	    (r = index_add_section(x, &sec, x->map[0], x->map_len[0])) < 0)
		goto fail;
	if (find_section(e, ".debug_frame", &sec, false) == 0 &&
	    (r = index_add_section(x, &sec, x->map[0], x->map_len[0])) < 0)
		goto fail;
	if (debug_fd >= 0 && map_file(debug_fd, &x->map[1], &x->map_len[1]) == 0 &&
	    open_elf_mem(x->map[1], x->map_len[1], &d) == 0 &&
	    find_section(d, ".debug_frame", &sec, false) == 0) {
		r = index_add_section(x, &sec, x->map[1], x->map_len[1]);
		if (r < 0)
			goto fail;
	}
	r = -ENODATA;
	if (!x->n_sec)
		goto fail;
	memset(&k, 0, sizeof(k));
	k.x = x;
	k.e = e;
	k.synth = &x->synth;
	k.b.n_load = x->n_load;
	memcpy(k.b.load, x->load, sizeof(k.b.load));
	r = guarded(index_scan, &k);
	if (r >= 0)
		r = index_layout(x, k.v, k.n);
	builder_done(&k.b);
	free(k.v);
	if (r < 0)
		goto fail;
	index_drop_pages(x);
	*ret = x;
	return 0;
fail:
	/* libelf first: its handles point into the mappings */
	elf_endp(&d);
	d = NULL;
	elf_endp(&e);
	e = NULL;
	cfi_index__free(x);
	return r;
}

/* Add the keys of chunk c to *keys (merged, in order, without duplicates). */
static int chunk_keys(const struct cfi_index *x, uint32_t c, uint32_t **keys, size_t *n)
{
	const uint32_t *k = x->key + x->first[c];
	size_t m = x->first[c + 1] - x->first[c], i = 0, j = 0, o = 0;
	_cleanup_free_ uint32_t *out = NULL;

	if (!m)
		return 0;
	out = malloc((*n + m) * sizeof(*out));
	if (!out)
		return -ENOMEM;
	while (i < *n || j < m) {
		uint32_t v;

		if (j >= m || (i < *n && (*keys)[i] <= k[j]))
			v = (*keys)[i++];
		else
			v = k[j++];
		if (!o || out[o - 1] != v)
			out[o++] = v;
	}
	free(*keys);
	*keys = TAKE_PTR(out);
	*n = o;
	return 0;
}

struct chunk_ctx {
	const struct cfi_index *x;
	const uint32_t *keys;
	size_t n;
	uint64_t lo, hi; /* the chunk's file offsets */
	struct builder b;
};

static int chunk_parse(void *arg)
{
	struct chunk_ctx *k = arg;
	struct cie_cache cc[CFI_SRC_MAX];
	int r;

	memset(cc, 0, sizeof(cc));
	for (size_t i = 0; i < k->n; i++) {
		unsigned int src = k->keys[i] >> CFI_KEY_SRC_SHIFT;
		size_t pos = k->keys[i] & CFI_KEY_POS_MASK;
		uint64_t loc, range;

		r = parse_entry(&k->b, &k->x->sec[src], &cc[src], &pos, true, &loc, &range);
		if (r == -ENOMEM || r == -EFBIG)
			return r;
	}
	return synth_emit(&k->b, &k->x->synth, k->lo, k->hi);
}

static int chunk_build(struct cfi_index *x, uint32_t c, struct cfi_table **ret)
{
	_cleanup_free_ uint32_t *keys = NULL;
	uint64_t lo = x->base + ((uint64_t)c << CFI_CHUNK_SHIFT);
	uint64_t hi = lo + (1ull << CFI_CHUNK_SHIFT);
	struct chunk_ctx k;
	size_t n = 0;
	int r;

	memset(&k, 0, sizeof(k));
	k.lo = lo;
	k.hi = hi;
	/* the synthesized rows were checked against every FDE at index time:
	 * only this chunk's keys are needed */
	r = chunk_keys(x, c, &keys, &n);
	if (r < 0)
		return r;
	k.x = x;
	k.keys = keys;
	k.n = n;
	k.b.n_load = x->n_load;
	memcpy(k.b.load, x->load, sizeof(k.b.load));
	r = guarded(chunk_parse, &k);
	if (r == -ESTALE)
		x->stale = true;
	if (r >= 0)
		r = finish(&k.b, ret);
	builder_done(&k.b);
	return r;
}

int cfi_index__table(struct cfi_index *x, uint64_t file_off, const struct cfi_table **ret)
{
	struct cfi_table *t = NULL;
	uint64_t c;
	int r;

	*ret = NULL;
	if (!x || file_off < x->base || x->stale)
		return 0;
	c = (file_off - x->base) >> CFI_CHUNK_SHIFT;
	if (c >= x->n_chunks)
		return 0;
	if (likely(x->chunk[c])) {
		if (x->chunk[c] != CHUNK_NONE)
			*ret = x->chunk[c];
		return 0;
	}
	r = chunk_build(x, (uint32_t)c, &t);
	if (r < 0) {
		/* no rows there, or a build that fails fails again (a file cut
		 * short under us: every later one too, x->stale) */
		x->chunk[c] = CHUNK_NONE;
		return r == -ENOMEM ? r : 0;
	}
	x->chunk[c] = t;
	x->n_built++;
	x->bytes += t->bytes;
	/* The file pages the builds read stay in our page tables (and PSS)
	 * until dropped: every 16 builds, not every build (a re-fault costs
	 * more than the build on a small VM). */
	if (!(x->n_built % 16))
		index_drop_pages(x);
	*ret = t;
	return 0;
}

bool cfi_index__drop_quiet(struct cfi_index *x)
{
	bool quiet;

	if (!x)
		return false;
	quiet = x->n_built != x->built_at_drop && x->n_built == x->built_at_look;
	if (quiet)
		index_drop_pages(x);
	x->built_at_look = x->n_built;
	return quiet;
}

size_t cfi_index__bytes(const struct cfi_index *x)
{
	return x ? x->bytes : 0;
}

void cfi_index__chunks(const struct cfi_index *x, uint32_t *ret_built, uint32_t *ret_total)
{
	*ret_built = x ? x->n_built : 0;
	*ret_total = x ? x->n_chunks : 0;
}
