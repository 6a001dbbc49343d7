// SPDX-License-Identifier: MIT
/* Flamegraph layout and name shortening (layout.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "layout.h"

struct lctx {
	struct vlayout *l;
	const struct vtree *t;
	unsigned __int128 width; /* scale: x = off * width / total */
	uint64_t total;
	uint32_t max_depth, min_w;
	int err;
};

static uint32_t col(const struct lctx *c, uint64_t off)
{
	return c->total ? (uint32_t)((unsigned __int128)off * c->width / c->total) : 0;
}

static void emit(struct lctx *c, uint32_t node, uint32_t n_merged, uint32_t x, uint32_t w,
		 uint32_t depth, uint64_t value)
{
	struct vlayout *l = c->l;
	struct vbox *b;

	if (array_grow32((void **)&l->boxes, &l->cap, (size_t)l->n + 1, sizeof(*l->boxes)) < 0) {
		c->err = -ENOMEM;
		return;
	}
	b = &l->boxes[l->n++];
	*b = (struct vbox){
		.node = node, .n_merged = n_merged, .x = x, .w = w, .depth = depth, .value = value};
	if (depth + 1 > l->depth)
		l->depth = depth + 1;
}

static void place_kids(struct lctx *c, uint32_t first, uint32_t count, uint64_t off,
		       uint32_t depth);

static void place(struct lctx *c, uint32_t node, uint64_t off, uint32_t depth)
{
	const struct vnode *n = &c->t->nodes[node];
	uint32_t x = col(c, off);

	emit(c, node, 0, x, col(c, off + n->total) - x, depth, n->total);
	if (depth + 1 >= c->max_depth || c->err)
		return;
	place_kids(c, n->child, UINT32_MAX, off, depth + 1);
}

/* count siblings from first (UINT32_MAX: to the last) at depth, from off on. */
static void place_kids(struct lctx *c, uint32_t first, uint32_t count, uint64_t off, uint32_t depth)
{
	uint32_t k, i = 0, run_first = VNODE_NONE, run_n = 0;
	uint64_t koff = off, run_off = 0, run_val = 0;

	for (k = first;; k = c->t->nodes[k].next, i++) {
		const struct vnode *kn = k != VNODE_NONE && i < count ? &c->t->nodes[k] : NULL;
		uint32_t kx = kn ? col(c, koff) : 0, kw = kn ? col(c, koff + kn->total) - kx : 0;
		bool narrow = kn && kw < c->min_w;

		/* A run of narrow siblings ends: one merged box, or the lone frame itself. */
		if (run_n && !narrow) {
			uint32_t rx = col(c, run_off), rw = col(c, run_off + run_val) - rx;

			if (run_n == 1 && rw)
				place(c, run_first, run_off, depth);
			else if (rw)
				emit(c, run_first, run_n, rx, rw, depth, run_val);
			run_n = 0;
		}
		if (!kn)
			break;
		if (narrow) {
			if (!run_n) {
				run_first = k;
				run_off = koff;
				run_val = 0;
			}
			run_n++;
			run_val += kn->total;
		} else {
			place(c, k, koff, depth);
		}
		koff += kn->total;
	}
}

static int box_cmp(const void *a, const void *b)
{
	const struct vbox *x = a, *y = b;

	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return x->x < y->x ? -1 : x->x > y->x;
}

int vlayout__build(struct vlayout *l, const struct vtree *t, uint32_t zoom, uint32_t width,
		   uint32_t max_depth, uint32_t min_w)
{
	struct lctx c = {
		.l = l, .t = t, .width = width, .max_depth = max_depth, .min_w = min_w ? min_w : 1};

	l->n = 0;
	l->depth = 0;
	if (zoom >= t->n || !max_depth || !width)
		return 0;
	c.total = t->nodes[zoom].total;
	place(&c, zoom, 0, 0);
	if (c.err)
		return c.err;
	qsort(l->boxes, l->n, sizeof(*l->boxes), box_cmp);
	return 0;
}

int vlayout__build_run(struct vlayout *l, const struct vtree *t, uint32_t first, uint32_t n,
		       uint32_t width, uint32_t max_depth, uint32_t min_w)
{
	struct lctx c = {
		.l = l, .t = t, .width = width, .max_depth = max_depth, .min_w = min_w ? min_w : 1};
	uint32_t k, i;

	l->n = 0;
	l->depth = 0;
	if (first >= t->n || !n || !max_depth || !width)
		return 0;
	for (k = first, i = 0; k != VNODE_NONE && i < n; k = t->nodes[k].next, i++)
		c.total += t->nodes[k].total;
	emit(&c, first, i, 0, width, 0, c.total);
	if (max_depth > 1 && !c.err)
		place_kids(&c, first, i, 0, 1);
	if (c.err)
		return c.err;
	qsort(l->boxes, l->n, sizeof(*l->boxes), box_cmp);
	return 0;
}

int vlayout__find_run(const struct vlayout *l, uint32_t first, uint32_t n)
{
	int any = -1;
	uint32_t i;

	for (i = 0; i < l->n; i++) {
		if (l->boxes[i].node != first || !l->boxes[i].n_merged)
			continue;
		if (l->boxes[i].n_merged == n)
			return (int)i;
		if (any < 0)
			any = (int)i;
	}
	return any;
}

void vlayout__free(struct vlayout *l)
{
	free(l->boxes);
	memset(l, 0, sizeof(*l));
}

int vlayout__find(const struct vlayout *l, uint32_t node)
{
	uint32_t i;

	for (i = 0; i < l->n; i++)
		if (l->boxes[i].node == node && !l->boxes[i].n_merged)
			return (int)i;
	return -1;
}

int vlayout__at(const struct vlayout *l, uint32_t depth, uint32_t x)
{
	uint32_t i;

	for (i = 0; i < l->n; i++) {
		const struct vbox *b = &l->boxes[i];

		if (b->depth == depth && x >= b->x && x < b->x + b->w)
			return (int)i;
	}
	return -1;
}

/* ------------------------------------------------------------ labels */

size_t vlayout__cols(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

/* Byte offset of the first n display columns of s. */
static size_t cols_bytes(const char *s, size_t n)
{
	size_t i = 0, c = 0;

	while (s[i]) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (c == n)
				break;
			c++;
		}
		i++;
	}
	return i;
}

/* Drop balanced (open ... close) groups; "(anonymous namespace)" stays readable. */
static void strip_groups(char *s, char open, char close)
{
	char *w = s;
	const char *r = s;
	int depth = 0;

	for (; *r; r++) {
		if (*r == open && !(open == '(' && !strncmp(r, "(anonymous", 10) && !depth)) {
			depth++;
			continue;
		}
		if (*r == close && depth) {
			depth--;
			continue;
		}
		if (!depth)
			*w++ = *r;
	}
	*w = '\0';
}

/* Rust legacy mangling leaves "::h<16 hex>" at the end. */
static void strip_rust_hash(char *s)
{
	size_t n = strlen(s), i;

	if (n < 19 || strncmp(s + n - 19, "::h", 3))
		return;
	for (i = n - 16; i < n; i++)
		if (!strchr("0123456789abcdef", s[i]))
			return;
	s[n - 19] = '\0';
}

char *vlayout__label(const char *name, uint32_t w, const char *ellipsis, char *buf, size_t len)
{
	char tmp[1024];
	const char *p;
	size_t cut;

	if (!len)
		return buf;
	buf[0] = '\0';
	if (!w)
		return buf;
	if (vlayout__cols(name) <= w) {
		snprintf(buf, len, "%s", name);
		return buf;
	}
	snprintf(tmp, sizeof(tmp), "%s", name);
	strip_rust_hash(tmp);
	if (tmp[0] != '[') { /* markers keep their brackets */
		strip_groups(tmp, '(', ')');
		strip_groups(tmp, '<', '>');
	}
	p = tmp;
	while (vlayout__cols(p) > w) {
		const char *ns = strstr(p, "::");

		if (!ns || !ns[2])
			break;
		p = ns + 2;
	}
	if (vlayout__cols(p) <= w) {
		snprintf(buf, len, "%s", p);
		return buf;
	}
	cut = cols_bytes(p, w - 1);
	snprintf(buf, len, "%.*s%s", (int)cut, p, ellipsis);
	return buf;
}
