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

struct rd {
	pycode_read_fn fn;
	void *ctx;
	bool gone;
};

static int mem_read(struct rd *r, uint64_t addr, void *buf, size_t len)
{
	int e;

	if (!addr || addr >= (1ull << 47))
		return -EINVAL;
	e = r->fn(r->ctx, addr, buf, len);
	if (e == -ESRCH)
		r->gone = true;
	return e;
}

static int read_ptr(struct rd *r, uint64_t addr, uint64_t *ret)
{
	return mem_read(r, addr, ret, sizeof(*ret));
}

/* A str object as UTF-8 (compact strings: every str a code object holds). */
static char *read_str(struct rd *r, const struct pycode_layout *l, uint64_t obj)
{
	uint8_t hdr[48], raw[PYCODE_MAX_STR * 4];
	uint64_t len;
	uint32_t state, kind, i;
	char *out;
	size_t o = 0;

	if (mem_read(r, obj, hdr, sizeof(hdr)) < 0)
		return NULL;
	memcpy(&len, hdr + 16, 8);
	memcpy(&state, hdr + 32, 4);
	kind = (state >> 2) & 7;
	if (!(state & (1u << 5)) || (kind != 1 && kind != 2 && kind != 4))
		return NULL; /* not compact */
	len = MIN(len, (uint64_t)PYCODE_MAX_STR);
	if (mem_read(r, obj + ((state & (1u << 6)) ? l->ascii_size : l->compact_size), raw,
		     len * kind) < 0)
		return NULL;
	out = malloc(len * 4 + 1);
	if (!out)
		return NULL;
	for (i = 0; i < len; i++) {
		uint32_t c = kind == 1	 ? raw[i]
			     : kind == 2 ? ((uint16_t *)raw)[i]
					 : ((uint32_t *)raw)[i];

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

/* Is obj a code object: its type's tp_name is "code". */
static bool is_code(struct rd *r, uint64_t obj)
{
	uint64_t type, name;
	char buf[8];

	return read_ptr(r, obj + 8, &type) == 0 && read_ptr(r, type + 24, &name) == 0 &&
	       mem_read(r, name, buf, 5) == 0 && !memcmp(buf, "code", 5);
}

void pycode__info_clear(struct pycode_info *info)
{
	free(info->qualname);
	free(info->filename);
	free(info->linetab);
	memset(info, 0, sizeof(*info));
}

int pycode__read(pycode_read_fn fn, void *ctx, const struct pycode_layout *l, uint64_t code,
		 size_t max_linetab, struct pycode_info *c)
{
	struct rd r = {.fn = fn, .ctx = ctx};
	uint8_t co[256];
	uint64_t qn, fn_, lt, lt_len, ck;
	int32_t first;

	memset(c, 0, sizeof(*c));
	if (!is_code(&r, code))
		return r.gone ? -ESRCH : -EINVAL;
	if (mem_read(&r, code, co, sizeof(co)) < 0)
		return r.gone ? -ESRCH : -EINVAL;
	memcpy(&qn, co + l->co_qualname, 8);
	memcpy(&fn_, co + l->co_filename, 8);
	memcpy(&lt, co + l->co_linetable, 8);
	memcpy(&first, co + l->co_firstlineno, 4);
	memcpy(&ck, co + l->co_firstlineno, 8);
	c->qualname = read_str(&r, l, qn);
	c->filename = read_str(&r, l, fn_);
	if (!c->qualname || !c->filename) {
		pycode__info_clear(c);
		return r.gone ? -ESRCH : -EINVAL;
	}
	c->firstlineno = first > 0 ? (uint32_t)first : 0;
	c->check = (uint32_t)(ck ^ (ck >> 32));
	/* bytes: ob_size at 16, the bytes at 32 */
	if (read_ptr(&r, lt + 16, &lt_len) == 0) {
		c->linetab_size = lt_len;
		if (lt_len <= max_linetab && (c->linetab = malloc(lt_len ? lt_len : 1)) &&
		    mem_read(&r, lt + 32, c->linetab, lt_len) == 0)
			c->linetab_len = lt_len;
	}
	return 0;
}
