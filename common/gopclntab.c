// SPDX-License-Identifier: MIT
/*
 * .gopclntab reader (gopclntab.h). Layout (Go's runtime/symtab.go, and
 * debug/gosym/pclntab.go for the versions):
 *
 *   header: u32 magic | 0 0 | u8 quantum | u8 ptrsize | ptrsize words:
 *     1.18+: nfunc nfiles textStart funcname cutab filetab pctab functab
 *     1.16:  nfunc nfiles           funcname cutab filetab pctab functab
 *   functab: nfunc x {entry, funcoff} + end pc; fields u32 (entry relative
 *     to text) from 1.18, uintptr before
 *   _func at functab + funcoff: entry (u32 / uintptr), then u32 fields
 *     nameoff args deferreturn pcsp pcfile pcln npcdata cuOffset, 1.20+
 *     startLine, then u8 funcID flag
 *   pc-value tables at pctab + off: (zigzag value delta, pc delta / quantum)
 *     uvarint pairs, value starting at -1, ended by a 0 value delta.
 */
#include "gopclntab.h"

#include <errno.h>
#include <string.h>

#define GO116_MAGIC 0xfffffffau
#define GO118_MAGIC 0xfffffff0u
#define GO120_MAGIC 0xfffffff1u

/* A pc-value table longer than this many steps is corrupt (a function of
 * a million instructions would be one). */
#define PCVALUE_STEPS (1u << 20)

static int rd32(const struct gopclntab *t, uint64_t off, uint32_t *v)
{
	if (off > t->len || t->len - off < 4)
		return -EINVAL;
	memcpy(v, t->data + off, 4);
	return 0;
}

static int rd64(const struct gopclntab *t, uint64_t off, uint64_t *v)
{
	if (off > t->len || t->len - off < 8)
		return -EINVAL;
	memcpy(v, t->data + off, 8);
	return 0;
}

static int rdfield(const struct gopclntab *t, uint64_t off, uint64_t *v)
{
	uint32_t w;

	if (t->field == 8)
		return rd64(t, off, v);
	if (rd32(t, off, &w) < 0)
		return -EINVAL;
	*v = w;
	return 0;
}

/* A NUL-terminated string at off inside the section. */
static const char *str_at(const struct gopclntab *t, uint64_t off)
{
	if (off >= t->len || !memchr(t->data + off, '\0', t->len - off))
		return NULL;
	return (const char *)t->data + off;
}

int gopclntab__init(struct gopclntab *t, const void *data, size_t len, uint64_t text_va)
{
	const uint8_t *p = data;
	uint64_t w[8];
	uint32_t magic, i, nw;

	memset(t, 0, sizeof(*t));
	if (!data || len < 8)
		return -EINVAL;
	memcpy(&magic, p, 4);
	if (magic == GO118_MAGIC)
		t->version = 118;
	else if (magic == GO120_MAGIC)
		t->version = 120;
	else if (magic == GO116_MAGIC)
		t->version = 116;
	else
		return -EINVAL;
	if (p[4] || p[5])
		return -EINVAL;
	if (p[7] != 8 || !p[6])
		return -EOPNOTSUPP; /* 32-bit */
	t->data = p;
	t->len = len;
	t->quantum = p[6];
	nw = t->version >= 118 ? 8 : 7;
	for (i = 0; i < nw; i++)
		if (rd64(t, 8 + 8 * i, &w[i]) < 0)
			return -EINVAL;
	t->field = t->version >= 118 ? 4 : 8;
	if (w[0] == 0 || w[0] > UINT32_MAX / 2)
		return -EINVAL;
	t->nfunc = (uint32_t)w[0];
	if (t->version >= 118) {
		t->text = text_va ? text_va : w[2];
		t->funcnametab = w[3];
		t->cutab = w[4];
		t->filetab = w[5];
		t->pctab = w[6];
		t->functab = w[7];
	} else {
		t->funcnametab = w[2];
		t->cutab = w[3];
		t->filetab = w[4];
		t->pctab = w[5];
		t->functab = w[6];
	}
	if (t->funcnametab >= len || t->cutab > len || t->filetab > len || t->pctab >= len ||
	    t->functab >= len || (len - t->functab) / (2 * t->field) < t->nfunc ||
	    len - t->functab - 2ull * t->field * t->nfunc < t->field)
		return -EINVAL;
	return 0;
}

/* Entry pc of functab slot i (i == nfunc: the end of the last function). */
static int slot_pc(const struct gopclntab *t, uint32_t i, uint64_t *pc)
{
	if (rdfield(t, t->functab + 2ull * i * t->field, pc) < 0)
		return -EINVAL;
	if (t->version >= 118)
		*pc += t->text;
	return 0;
}

int gopclntab__func(const struct gopclntab *t, uint32_t i, struct gofunc *ret)
{
	uint64_t funcoff, rec, name_off;
	uint32_t nameoff;

	if (i >= t->nfunc)
		return -EINVAL;
	if (slot_pc(t, i, &ret->entry) < 0 || slot_pc(t, i + 1, &ret->end) < 0 ||
	    rdfield(t, t->functab + (2ull * i + 1) * t->field, &funcoff) < 0)
		return -EINVAL;
	if (ret->end < ret->entry || funcoff > UINT32_MAX)
		return -EINVAL;
	rec = t->functab + funcoff;
	if (rd32(t, rec + t->field, &nameoff) < 0)
		return -EINVAL;
	name_off = t->funcnametab + nameoff;
	ret->name = str_at(t, name_off);
	if (!ret->name)
		return -EINVAL;
	ret->off = (uint32_t)funcoff;
	ret->index = i;
	return 0;
}

int gopclntab__find(const struct gopclntab *t, uint64_t pc, struct gofunc *ret)
{
	uint32_t lo = 0, hi = t->nfunc; /* slot lo <= pc < slot hi */
	uint64_t v;

	if (slot_pc(t, 0, &v) < 0 || pc < v)
		return -ENOENT;
	if (slot_pc(t, t->nfunc, &v) < 0 || pc >= v)
		return -ENOENT;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (slot_pc(t, mid, &v) < 0)
			return -EINVAL;
		if (v <= pc)
			lo = mid;
		else
			hi = mid;
	}
	if (gopclntab__func(t, lo, ret) < 0)
		return -EINVAL;
	return pc >= ret->entry && pc < ret->end ? 0 : -ENOENT;
}

static int uvarint(const struct gopclntab *t, uint64_t *off, uint32_t *v)
{
	uint32_t r = 0;
	unsigned int shift;

	for (shift = 0; shift < 35; shift += 7) {
		uint8_t b;

		if (*off >= t->len)
			return -EINVAL;
		b = t->data[(*off)++];
		r |= (uint32_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = r;
			return 0;
		}
	}
	return -EINVAL;
}

/* The value of the pc-value table at field n of f's record, at pc. */
static int pcvalue(const struct gopclntab *t, const struct gofunc *f, unsigned int n, uint64_t pc,
		   int32_t *ret)
{
	uint64_t at = f->entry, p;
	uint32_t tab, uv, pcd, steps;
	int32_t val = -1;

	if (pc < f->entry || pc >= f->end)
		return -ENOENT;
	if (rd32(t, t->functab + f->off + t->field + 4ull * (n - 1), &tab) < 0)
		return -EINVAL;
	if (!tab)
		return -ENOENT;
	p = t->pctab + tab;
	for (steps = 0; steps < PCVALUE_STEPS; steps++) {
		if (uvarint(t, &p, &uv) < 0)
			return -EINVAL;
		if (uv == 0 && steps)
			return -ENOENT; /* the table ends before pc */
		/* Go's int32 addition wraps; unsigned here, as signed overflow is UB */
		val = (int32_t)((uint32_t)val + (-(uv & 1) ^ (uv >> 1)));
		if (uvarint(t, &p, &pcd) < 0)
			return -EINVAL;
		at += (uint64_t)pcd * t->quantum;
		if (pc < at) {
			*ret = val;
			return 0;
		}
	}
	return -EINVAL;
}

int gopclntab__sp(const struct gopclntab *t, const struct gofunc *f, uint64_t pc, int32_t *ret)
{
	int32_t v;
	int r = pcvalue(t, f, 4, pc, &v);

	if (r < 0)
		return r;
	if (v < 0 || v > (1 << 26))
		return -EINVAL;
	*ret = v;
	return 0;
}

int gopclntab__line(const struct gopclntab *t, const struct gofunc *f, uint64_t pc,
		    const char **ret_file, int32_t *ret_line)
{
	uint32_t cu, foff;
	int32_t fno, line;
	int r;

	r = pcvalue(t, f, 5, pc, &fno);
	if (r < 0)
		return r;
	r = pcvalue(t, f, 6, pc, &line);
	if (r < 0)
		return r;
	if (fno < 0 || rd32(t, t->functab + f->off + t->field + 4ull * 7, &cu) < 0)
		return -EINVAL;
	if (rd32(t, t->cutab + 4ull * ((uint64_t)cu + (uint32_t)fno), &foff) < 0 ||
	    foff == UINT32_MAX)
		return -EINVAL;
	*ret_file = str_at(t, t->filetab + foff);
	if (!*ret_file)
		return -EINVAL;
	*ret_line = line;
	return 0;
}

int gopclntab__flag(const struct gopclntab *t, const struct gofunc *f, uint8_t *ret)
{
	/* entry, 8 u32 (nameoff .. cuOffset), 1.20's startLine, funcID */
	uint64_t off = t->functab + f->off + t->field + 8 * 4 + (t->version >= 120 ? 4 : 0) + 1;

	if (off >= t->len)
		return -EINVAL;
	*ret = t->data[off];
	return 0;
}
