// SPDX-License-Identifier: MIT
/*
 * speedscope JSON (https://www.speedscope.app/file-format-schema.json):
 * one "sampled" profile per process (the "comm:pid" label; with
 * --show_thread_name the thread label is the first frame of its stacks),
 * named by its labels ("env / comm:pid"), sorted by name. Frames are shared.
 * Samples are the aggregated stacks (root first) with weights in
 * nanoseconds (on-CPU samples x period + off-CPU ns), or in samples when the
 * store's frequency is unknown. activeProfileIndex names the profile with
 * the most time, the one speedscope opens on. speedscope's "left heavy" and "sandwich"
 * views read them as they are, its time-order view shows them in name order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "export_int.h"

/* A JSON string: escapes, and bytes that are not UTF-8 become U+FFFD. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	while (*s) {
		unsigned char c = (unsigned char)*s;
		size_t n = export__utf8_len(s);

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else if (!n)
			fputs("\\ufffd", f);
		else
			fwrite(s, 1, n, f);
		s += n ? n : 1;
	}
	fputc('"', f);
}

/* Depth of the process label: below env (unless --no_env). */
static uint32_t process_depth(const struct export_opts *o)
{
	return o->no_env ? 1 : 2;
}

/* Push nd's children on stk (n entries) so that they pop in name order. */
static uint32_t push_children(const struct tree *t, uint32_t nd, uint32_t *stk, uint32_t n)
{
	uint32_t k = n, c, i;

	for (c = t->nodes[nd].first_child; c; c = t->nodes[c].next_sibling)
		stk[n++] = c;
	for (i = 0; i < (n - k) / 2; i++) {
		uint32_t tmp = stk[k + i];

		stk[k + i] = stk[n - 1 - i];
		stk[n - 1 - i] = tmp;
	}
	return n;
}

/* Is node nd a profile of its own (a process label, or a shallower leaf)? */
static bool is_profile(const struct tree *t, uint32_t pd, uint32_t nd)
{
	return t->nodes[nd].depth == pd ||
	       (nd && !t->nodes[nd].first_child && t->nodes[nd].depth < pd);
}

/* Index of the profile holding the most time: the one speedscope opens on. */
static int heaviest(const struct exporter *e, uint32_t *stk, uint32_t *ret)
{
	const struct tree *t = &e->tree;
	uint32_t pd = process_depth(&e->o), n = 0, idx = 0, i;
	uint64_t best_v = 0;
	uint64_t *tot = calloc(t->n, sizeof(*tot));

	if (!tot)
		return -ENOMEM;
	/* Parents have smaller ids than their children: sum from the leaves up. */
	for (i = t->n; i-- > 1;) {
		tot[i] += tval_time(&t->nodes[i].self[0], e->o.freq);
		tot[t->nodes[i].parent] += tot[i];
	}
	*ret = 0;
	stk[n++] = 0;
	while (n) {
		uint32_t nd = stk[--n];

		if (is_profile(t, pd, nd)) {
			if (tot[nd] > best_v)
				best_v = tot[nd], *ret = idx;
			idx++;
			continue;
		}
		n = push_children(t, nd, stk, n);
	}
	free(tot);
	return 0;
}

static int write_profile(struct exporter *e, FILE *f, uint32_t proc, const uint32_t *fidx,
			 uint32_t *path, uint32_t *stk, bool first)
{
	const struct tree *t = &e->tree;
	uint32_t n = 0, base = t->nodes[proc].depth, i, c, nsamples = 0;
	uint64_t total = 0;
	bool samples_first = true;
	char name[1024];
	size_t nl = 0;

	/* name: the labels from the top down to the process */
	for (c = proc; c; c = t->nodes[c].parent) {
		const char *nm = tree__name(t, c);
		size_t k = strlen(nm);

		if (nl + k + 3 >= sizeof(name))
			break;
		memmove(name + k + (nl ? 3 : 0), name, nl);
		memcpy(name, nm, k);
		if (nl)
			memcpy(name + k, " / ", 3);
		nl += k + (nl ? 3 : 0);
	}
	name[nl] = 0;
	fputs(first ? "\n{\"type\":\"sampled\",\"name\":" : ",\n{\"type\":\"sampled\",\"name\":",
	      f);
	json_str(f, name);
	fprintf(f, ",\"unit\":\"%s\",\"startValue\":0,\"samples\":[",
		e->o.freq ? "nanoseconds" : "none");
	/* Depth first over the process's subtree; path[d] = frame at depth base + 1 + d. */
	stk[n++] = proc;
	while (n) {
		uint32_t nd = stk[--n];
		uint64_t v;

		if (nd != proc) {
			uint32_t d = t->nodes[nd].depth - base - 1;

			path[d] = fidx[t->nodes[nd].name];
			v = tval_time(&t->nodes[nd].self[0], e->o.freq);
			if (v) {
				fputs(samples_first ? "[" : ",[", f);
				for (i = 0; i <= d; i++)
					fprintf(f, i ? ",%u" : "%u", path[i]);
				fputc(']', f);
				samples_first = false;
				nsamples++;
			}
		}
		n = push_children(t, nd, stk, n);
	}
	fputs("],\"weights\":[", f);
	/* the same walk again for the weights */
	samples_first = true;
	n = 0;
	stk[n++] = proc;
	while (n) {
		uint32_t nd = stk[--n];
		uint64_t v = nd == proc ? 0 : tval_time(&t->nodes[nd].self[0], e->o.freq);

		if (v) {
			fprintf(f, samples_first ? "%llu" : ",%llu", (unsigned long long)v);
			samples_first = false;
			total += v;
		}
		n = push_children(t, nd, stk, n);
	}
	fprintf(f, "],\"endValue\":%llu}", (unsigned long long)total);
	e->st.stacks += nsamples;
	return 0;
}

int export_speedscope__write(struct exporter *e, FILE *f)
{
	struct tree *t = &e->tree;
	uint32_t pd = process_depth(&e->o), i, nf = 0, *fidx = NULL, *path = NULL, *stk = NULL,
		 active;
	uint8_t *used = NULL;
	bool first = true;
	int r;

	if (e->have_base)
		return export__fail(e, -EOPNOTSUPP,
				    "speedscope has no diff view: export the two ranges apart");
	r = tree__link(t);
	if (r < 0)
		return export__fail(e, r, "speedscope: out of memory");
	fidx = calloc(xtab__count(&t->names), sizeof(*fidx));
	used = calloc(xtab__count(&t->names), 1);
	path = calloc(t->max_depth + 2, sizeof(*path));
	stk = calloc(2 * ((size_t)t->n + 1), sizeof(*stk)); /* outer walk, inner walk */
	if (!fidx || !used || !path || !stk) {
		r = export__fail(e, -ENOMEM, "speedscope: out of memory");
		goto out;
	}
	if (heaviest(e, stk, &active) < 0) {
		r = export__fail(e, -ENOMEM, "speedscope: out of memory");
		goto out;
	}
	/* Frames: every name used below a process label, numbered in first-use order. */
	for (i = 1; i < t->n; i++)
		if (t->nodes[i].depth > pd)
			used[t->nodes[i].name] = 1;
	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\","
	      "\"exporter\":\"cpa\",\"name\":",
	      f);
	json_str(f, e->o.title ? e->o.title : "cpa");
	fprintf(f, ",\"activeProfileIndex\":%u,\"shared\":{\"frames\":[", active);
	for (i = 0; i < xtab__count(&t->names); i++) {
		if (!used[i])
			continue;
		fidx[i] = nf;
		fputs(nf ? ",{\"name\":" : "{\"name\":", f);
		json_str(f, xtab__str(&t->names, i));
		fputc('}', f);
		nf++;
	}
	fputs("]},\"profiles\":[", f);
	/* Processes in name order: a depth-first walk down to the process depth. */
	{
		uint32_t n = 0;

		stk[n++] = 0;
		while (n) {
			uint32_t nd = stk[--n];

			if (is_profile(t, pd, nd)) {
				write_profile(e, f, nd, fidx, path, stk + t->n + 1, first);
				first = false;
				continue;
			}
			n = push_children(t, nd, stk, n);
		}
	}
	fputs("\n]}\n", f);
	r = 0;
out:
	free(fidx);
	free(used);
	free(path);
	free(stk);
	return r;
}
