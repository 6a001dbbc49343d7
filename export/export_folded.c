// SPDX-License-Identifier: MIT
/*
 * Folded stacks from the name tree: one line per stack, sorted like
 * `cpa show`'s .prof. With a diff base, two counts per line, base first
 * (the difffolded.pl convention flamegraph.pl reads):
 *	env;comm:pid;root;...;leaf; BASE NEW
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "export_int.h"

struct fline {
	char *s;
	uint64_t v[2];
};

static int fline_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fline *)a)->s, ((const struct fline *)b)->s);
}

/* "name;name;...;" of node (root excluded) into a malloc'd string. */
static char *path_of(const struct tree *t, uint32_t node)
{
	size_t len = 0, pos;
	uint32_t n;
	char *s;

	for (n = node; n; n = t->nodes[n].parent)
		len += strlen(tree__name(t, n)) + 1;
	s = malloc(len + 1);
	if (!s)
		return NULL;
	s[len] = 0;
	pos = len;
	for (n = node; n; n = t->nodes[n].parent) {
		const char *nm = tree__name(t, n);
		size_t k = strlen(nm);

		s[--pos] = ';';
		pos -= k;
		memcpy(s + pos, nm, k);
	}
	return s;
}

int export_folded__write(struct exporter *e, FILE *f)
{
	const struct tree *t = &e->tree;
	struct fline *l = calloc(t->n, sizeof(*l));
	uint32_t i, n = 0;
	int r = 0;

	if (!l)
		return export__fail(e, -ENOMEM, "folded: out of memory");
	for (i = 1; i < t->n; i++) {
		const struct tnode *nd = &t->nodes[i];

		if (!tval_folded(&nd->self[0]) && !tval_folded(&nd->self[1]))
			continue;
		l[n].s = path_of(t, i);
		if (!l[n].s) {
			r = export__fail(e, -ENOMEM, "folded: out of memory");
			goto out;
		}
		l[n].v[0] = tval_folded(&nd->self[0]);
		l[n].v[1] = tval_folded(&nd->self[1]);
		n++;
	}
	qsort(l, n, sizeof(*l), fline_cmp);
	for (i = 0; i < n; i++) {
		if (e->have_base)
			fprintf(f, "%s %llu %llu\n", l[i].s, (unsigned long long)l[i].v[1],
				(unsigned long long)l[i].v[0]);
		else
			fprintf(f, "%s %llu\n", l[i].s, (unsigned long long)l[i].v[0]);
	}
	e->st.stacks = n;
out:
	for (i = 0; i < n; i++)
		free(l[i].s);
	free(l);
	return r;
}
