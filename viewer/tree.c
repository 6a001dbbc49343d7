// SPDX-License-Identifier: MIT
/* The call tree (tree.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "tree.h"

static int node_new(struct vtree *t, uint32_t parent, const struct vpath_ent *e)
{
	struct vnode *n;

	if (array_grow32((void **)&t->nodes, &t->cap, (size_t)t->n + 1, sizeof(*t->nodes)) < 0)
		return -ENOMEM;
	n = &t->nodes[t->n];
	memset(n, 0, sizeof(*n));
	n->name = e->name;
	n->module = e->module;
	n->cls = e->cls;
	n->parent = parent;
	n->child = n->next = VNODE_NONE;
	if (parent != VNODE_NONE) {
		n->depth = t->nodes[parent].depth + 1;
		n->next = t->nodes[parent].child;
		t->nodes[parent].child = t->n;
	}
	return (int)t->n++;
}

int vtree__init(struct vtree *t, struct strtab *names)
{
	memset(t, 0, sizeof(*t));
	t->names = names;
	vtree__reset(t);
	return t->n ? 0 : -ENOMEM;
}

void vtree__reset(struct vtree *t)
{
	struct vpath_ent root = {.name = strtab__intern(t->names, "all", 3), .cls = VCLS_ROOT};

	t->n = 0;
	u64map__clear(&t->kids);
	node_new(t, VNODE_NONE, &root);
}

void vtree__free(struct vtree *t)
{
	free(t->nodes);
	u64map__free(&t->kids);
	memset(t, 0, sizeof(*t));
}

uint32_t vtree__child(const struct vtree *t, uint32_t parent, uint32_t name)
{
	uint32_t v = u64map__get(&t->kids, (uint64_t)parent << 32 | name);

	return v == UINT32_MAX ? VNODE_NONE : v;
}

int vtree__add(struct vtree *t, const struct vpath_ent *path, uint32_t n, uint64_t value)
{
	uint32_t cur = 0, i;

	if (!t->n)
		return -ENOMEM;
	t->nodes[0].total += value;
	for (i = 0; i < n; i++) {
		uint32_t c = vtree__child(t, cur, path[i].name);

		if (c == VNODE_NONE) {
			int r = node_new(t, cur, &path[i]);

			if (r < 0)
				return r;
			c = (uint32_t)r;
			if (u64map__put(&t->kids, (uint64_t)cur << 32 | path[i].name, c) < 0)
				return -ENOMEM;
		}
		t->nodes[c].total += value;
		cur = c;
	}
	t->nodes[cur].self += value;
	return 0;
}

static const struct vtree *sort_tree;

static int kid_cmp(const void *a, const void *b)
{
	const struct vnode *x = &sort_tree->nodes[*(const uint32_t *)a];
	const struct vnode *y = &sort_tree->nodes[*(const uint32_t *)b];

	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	return strcmp(strtab__str(sort_tree->names, x->name),
		      strtab__str(sort_tree->names, y->name));
}

void vtree__sort(struct vtree *t)
{
	uint32_t *kids, i;

	kids = malloc((size_t)(t->n ? t->n : 1) * sizeof(*kids));
	if (!kids)
		return; /* unsorted is still correct */
	sort_tree = t;
	for (i = 0; i < t->n; i++) {
		uint32_t k = 0, c, j;

		for (c = t->nodes[i].child; c != VNODE_NONE; c = t->nodes[c].next)
			kids[k++] = c;
		if (k < 2)
			continue;
		qsort(kids, k, sizeof(*kids), kid_cmp);
		t->nodes[i].child = kids[0];
		for (j = 0; j + 1 < k; j++)
			t->nodes[kids[j]].next = kids[j + 1];
		t->nodes[kids[k - 1]].next = VNODE_NONE;
	}
	sort_tree = NULL;
	free(kids);
}

int vtree__add_folded(struct vtree *t, const char *line)
{
	struct vpath_ent path[512];
	const char *sp = strrchr(line, ' '), *p = line;
	uint32_t n = 0;
	char *end;
	unsigned long long v;

	if (!sp)
		return -EINVAL;
	v = strtoull(sp + 1, &end, 10);
	if (end == sp + 1)
		return -EINVAL;
	while (p < sp && n < 512) {
		const char *semi = memchr(p, ';', (size_t)(sp - p));
		size_t len = semi ? (size_t)(semi - p) : (size_t)(sp - p);
		bool k = len > 4 && !memcmp(p + len - 4, "_[k]", 4);

		path[n].name = strtab__intern(t->names, p, k ? len - 4 : len);
		path[n].module = 0;
		path[n].cls = k ? VCLS_KERNEL : p[0] == '[' ? VCLS_MARKER : VCLS_EXE;
		if (!path[n].name)
			return -ENOMEM;
		n++;
		if (!semi)
			break;
		p = semi + 1;
	}
	return vtree__add(t, path, n, v);
}

uint32_t vtree__match(const struct vtree *t, uint32_t node, const struct vtree *other)
{
	uint32_t chain[1024], n = 0, cur = 0;

	if (t->names != other->names || !other->n)
		return VNODE_NONE;
	while (node != 0 && node != VNODE_NONE && n < 1024) {
		chain[n++] = t->nodes[node].name;
		node = t->nodes[node].parent;
	}
	while (n-- > 0) {
		cur = vtree__child(other, cur, chain[n]);
		if (cur == VNODE_NONE)
			return VNODE_NONE;
	}
	return cur;
}
