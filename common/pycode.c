// SPDX-License-Identifier: MIT
#include "pycode.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"

static const struct pycode_layout layouts[] = {
	{10, 104, 112, 112, 40, 120, 0, 48, 72}, /* no co_qualname: co_name */
	{11, 112, 120, 128, 72, 136, 184, 48, 72},
	{12, 112, 120, 128, 68, 136, 192, 40, 56},
	{13, 112, 120, 128, 68, 136, 200, 40, 56},
};

const struct pycode_layout *pycode__layout(unsigned int minor)
{
	for (size_t i = 0; i < ARRAY_SIZE(layouts); i++)
		if (layouts[i].minor == minor)
			return &layouts[i];
	return NULL;
}

static bool addr_ok(uint64_t addr)
{
	return addr && addr < (1ull << 47);
}

/* Every segment read, or the reader's error (-EINVAL: an address no user
 * process has). */
static int read_segs(pycode_read_fn rd, void *ctx, const struct pycode_seg *s, unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		if (!addr_ok(s[i].addr))
			return -EINVAL;
	return rd(ctx, s, n);
}

/* A str's header (48 bytes at obj): where its characters are, how many
 * (at most PYCODE_MAX_STR) and how wide; false when not a compact str. */
struct str_at {
	uint64_t addr;
	uint32_t len, kind;
};

static bool str_parse(const struct pycode_layout *l, uint64_t obj, const uint8_t *hdr,
		      struct str_at *ret)
{
	uint64_t len;
	uint32_t state, kind;

	memcpy(&len, hdr + 16, 8);
	memcpy(&state, hdr + 32, 4);
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || (kind != 1 && kind != 2 && kind != 4))
		return false; /* not compact */
	ret->len = (uint32_t)MIN(len, (uint64_t)PYCODE_MAX_STR);
	ret->kind = kind;
	ret->addr = obj + ((state & (1u << 6)) ? l->ascii_size : l->compact_size);
	return true;
}

/* The characters raw of s as UTF-8. */
static char *str_utf8(const struct str_at *s, const uint8_t *raw)
{
	char *out = malloc(s->len * 4 + 1);
	size_t o = 0;

	if (!out)
		return NULL;
	for (uint32_t i = 0; i < s->len; i++) {
		uint32_t c = s->kind == 1   ? raw[i]
			     : s->kind == 2 ? ((const uint16_t *)raw)[i]
					    : ((const uint32_t *)raw)[i];

		if (c < 0x80) {
			out[o++] = (char)(c ? c : '?');
		} else if (c < 0x800) {
			out[o++] = (char)(0xc0 | c >> 6);
			out[o++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			out[o++] = (char)(0xe0 | c >> 12);
			out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[o++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[o++] = (char)(0xf0 | c >> 18);
			out[o++] = (char)(0x80 | ((c >> 12) & 0x3f));
			out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[o++] = (char)(0x80 | (c & 0x3f));
		}
	}
	out[o] = '\0';
	return out;
}

void pycode__info_clear(struct pycode_info *info)
{
	free(info->qualname);
	free(info->filename);
	free(info->linetab);
	memset(info, 0, sizeof(*info));
}

/*
 * Three reads, each of several segments (one process_vm_readv in capture):
 * the object; its type's name pointer, its two strs' headers and its line
 * table's length; the type's name, the characters and the line table. The
 * type's name must be "code" before anything else is believed.
 */
int pycode__read(pycode_read_fn rd, void *ctx, const struct pycode_layout *l, uint64_t code,
		 size_t max_linetab, struct pycode_info *c)
{
	uint8_t co[256], qh[48], fh[48], qraw[PYCODE_MAX_STR * 4], fraw[PYCODE_MAX_STR * 4];
	uint64_t type, qn, fn, lt, lt_len = 0, tp_name;
	struct str_at qs, fs;
	char tname[8];
	int32_t first;
	uint64_t ck;
	int r;

	memset(c, 0, sizeof(*c));
	r = read_segs(rd, ctx, &(struct pycode_seg){code, co, sizeof(co)}, 1);
	if (r < 0)
		return r == -ESRCH ? r : -EINVAL;
	memcpy(&type, co + 8, 8);
	memcpy(&qn, co + l->co_qualname, 8);
	memcpy(&fn, co + l->co_filename, 8);
	memcpy(&lt, co + l->co_linetable, 8);
	memcpy(&first, co + l->co_firstlineno, 4);
	memcpy(&ck, co + l->co_firstlineno, 8);
	r = read_segs(rd, ctx,
		      (struct pycode_seg[]){{type + 24, &tp_name, 8},
					    {qn, qh, sizeof(qh)},
					    {fn, fh, sizeof(fh)},
					    {lt + 16, &lt_len, 8}},
		      4);
	if (r < 0)
		return r == -ESRCH ? r : -EINVAL;
	if (!str_parse(l, qn, qh, &qs) || !str_parse(l, fn, fh, &fs))
		return -EINVAL;
	c->linetab_size = lt_len;
	if (lt_len <= max_linetab) {
		c->linetab = malloc(lt_len ? lt_len : 1);
		if (!c->linetab)
			return -ENOMEM;
	}
	{
		struct pycode_seg s[] = {
			{tp_name, tname, 5},
			{qs.addr, qraw, (size_t)qs.len * qs.kind},
			{fs.addr, fraw, (size_t)fs.len * fs.kind},
			{lt + 32, c->linetab, c->linetab ? lt_len : 0},
		};

		/* an empty string's or line table's segment is read as none */
		for (unsigned int i = 1; i < ARRAY_SIZE(s); i++)
			if (!s[i].len)
				s[i].addr = tp_name;
		r = read_segs(rd, ctx, s, ARRAY_SIZE(s));
		if (r < 0 && r != -ESRCH && c->linetab) {
			/* the names without the line table */
			r = read_segs(rd, ctx, s, 3);
			lt_len = 0;
		}
		if (r < 0) {
			pycode__info_clear(c);
			return r == -ESRCH ? r : -EINVAL;
		}
	}
	if (memcmp(tname, "code", 5)) {
		pycode__info_clear(c);
		return -EINVAL;
	}
	c->qualname = str_utf8(&qs, qraw);
	c->filename = str_utf8(&fs, fraw);
	if (!c->qualname || !c->filename) {
		pycode__info_clear(c);
		return -ENOMEM;
	}
	c->firstlineno = first > 0 ? (uint32_t)first : 0;
	c->check = (uint32_t)(ck ^ (ck >> 32));
	if (c->linetab)
		c->linetab_len = lt_len;
	return 0;
}
