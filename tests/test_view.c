// SPDX-License-Identifier: MIT
/*
 * cpa-view's pure parts: folded stacks -> tree -> boxes (positions, merging
 * of narrow frames, zoom), the shortening of long names, the key map, and
 * the filter prompt's parser.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "viewer/keymap.h"
#include "viewer/layout.h"
#include "viewer/model.h"
#include "test_util.h"
#include "viewer/tree.h"

static struct strtab names;
static struct vtree tree;

static void setup(void)
{
	memset(&names, 0, sizeof(names));
	ck_assert_int_eq(vtree__init(&tree, &names), 0);
}

static void teardown(void)
{
	vtree__free(&tree);
	strtab__free(&names);
}

static void fold(const char *const *lines, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		ck_assert_int_eq(vtree__add_folded(&tree, lines[i]), 0);
	vtree__sort(&tree);
}

static const struct vbox *box_named(const struct vlayout *l, const char *name)
{
	uint32_t i;

	for (i = 0; i < l->n; i++)
		if (!l->boxes[i].n_merged && !strcmp(vtree__name(&tree, l->boxes[i].node), name))
			return &l->boxes[i];
	return NULL;
}

START_TEST(test_tree_from_folded)
{
	static const char *const in[] = {"main;a;b 6", "main;a;c 2", "main;d 1", "main;d 1",
					 "main;a;b;sys_read_[k] 1"};
	uint32_t m, a, b, k;

	fold(in, 5);
	ck_assert_uint_eq(tree.nodes[0].total, 11);
	m = vtree__child(&tree, 0, strtab__find(&names, "main", 4));
	a = vtree__child(&tree, m, strtab__find(&names, "a", 1));
	b = vtree__child(&tree, a, strtab__find(&names, "b", 1));
	k = vtree__child(&tree, b, strtab__find(&names, "sys_read", 8));
	ck_assert_uint_ne(k, VNODE_NONE);
	ck_assert_uint_eq(tree.nodes[m].total, 11);
	ck_assert_uint_eq(tree.nodes[a].total, 9);
	ck_assert_uint_eq(tree.nodes[b].total, 7);
	ck_assert_uint_eq(tree.nodes[b].self, 6);
	ck_assert_uint_eq(tree.nodes[k].cls, VCLS_KERNEL);
	/* the two "main;d" lines are one node */
	ck_assert_uint_eq(tree.nodes[vtree__child(&tree, m, strtab__find(&names, "d", 1))].total,
			  2);
	/* sorted: a (9) before d (2) */
	ck_assert_uint_eq(tree.nodes[m].child, a);
}
END_TEST

START_TEST(test_layout_boxes)
{
	static const char *const in[] = {"a;b 6", "a;c 2", "d 2"};
	struct vlayout l = {0};
	const struct vbox *b;

	fold(in, 3);
	ck_assert_int_eq(vlayout__build(&l, &tree, 0, 10, 10, 1), 0);
	ck_assert_uint_eq(l.n, 5);
	ck_assert_uint_eq(l.depth, 3);
	/* sorted by (depth, x) */
	ck_assert_uint_eq(l.boxes[0].depth, 0);
	ck_assert_uint_eq(l.boxes[0].w, 10);
	b = box_named(&l, "a");
	ck_assert_uint_eq(b->x, 0);
	ck_assert_uint_eq(b->w, 8);
	b = box_named(&l, "d");
	ck_assert_uint_eq(b->x, 8);
	ck_assert_uint_eq(b->w, 2);
	b = box_named(&l, "b");
	ck_assert_uint_eq(b->x, 0);
	ck_assert_uint_eq(b->w, 6);
	ck_assert_uint_eq(b->depth, 2);
	b = box_named(&l, "c");
	ck_assert_uint_eq(b->x, 6);
	ck_assert_uint_eq(b->w, 2);
	/* zoom into a: a is the full width, d is gone */
	ck_assert_int_eq(vlayout__build(&l, &tree,
					vtree__child(&tree, 0, strtab__find(&names, "a", 1)), 80,
					10, 1),
			 0);
	ck_assert_uint_eq(l.n, 3);
	ck_assert_uint_eq(l.boxes[0].w, 80);
	ck_assert_uint_eq(box_named(&l, "b")->w, 60);
	ck_assert_uint_eq(box_named(&l, "c")->x, 60);
	ck_assert_ptr_null(box_named(&l, "d"));
	/* max_depth cuts rows */
	ck_assert_int_eq(vlayout__build(&l, &tree, 0, 10, 2, 1), 0);
	ck_assert_uint_eq(l.depth, 2);
	ck_assert_ptr_null(box_named(&l, "b"));
	vlayout__free(&l);
}
END_TEST

START_TEST(test_layout_merge)
{
	char line[64];
	struct vlayout l = {0};
	uint32_t i, merged = 0, run = 0, first = 0;

	ck_assert_int_eq(vtree__add_folded(&tree, "big 900"), 0);
	for (i = 0; i < 10; i++) {
		snprintf(line, sizeof(line), "tiny%u 10", i);
		ck_assert_int_eq(vtree__add_folded(&tree, line), 0);
	}
	vtree__sort(&tree);
	/* 20 columns: big takes 18, the ten tiny ones 0.2 each: one merged box of 2 */
	ck_assert_int_eq(vlayout__build(&l, &tree, 0, 20, 10, 3), 0);
	for (i = 0; i < l.n; i++) {
		if (!l.boxes[i].n_merged)
			continue;
		merged++;
		run = i;
		first = l.boxes[i].node;
		ck_assert_uint_eq(l.boxes[i].n_merged, 10);
		ck_assert_uint_eq(l.boxes[i].x, 18);
		ck_assert_uint_eq(l.boxes[i].w, 2);
		ck_assert_uint_eq(l.boxes[i].value, 100);
	}
	ck_assert_uint_eq(merged, 1);
	ck_assert_ptr_null(box_named(&l, "tiny0"));
	ck_assert_uint_eq(box_named(&l, "big")->w, 18);
	/* zoomed into the merged box (40 columns): it is the top row, full width;
	 * its ten frames below it, 4 columns each */
	ck_assert_int_eq(vlayout__find_run(&l, first, 10), (int)run);
	ck_assert_int_eq(vlayout__build_run(&l, &tree, first, 10, 40, 10, 3), 0);
	ck_assert_uint_eq(l.boxes[0].depth, 0);
	ck_assert_uint_eq(l.boxes[0].n_merged, 10);
	ck_assert_uint_eq(l.boxes[0].w, 40);
	ck_assert_uint_eq(l.boxes[0].value, 100);
	for (i = 0; i < 10; i++) {
		snprintf(line, sizeof(line), "tiny%u", i);
		ck_assert_ptr_nonnull(box_named(&l, line));
		ck_assert_uint_eq(box_named(&l, line)->depth, 1);
		ck_assert_uint_eq(box_named(&l, line)->w, 4);
	}
	/* wide enough: no merging */
	ck_assert_int_eq(vlayout__build(&l, &tree, 0, 1000, 10, 3), 0);
	ck_assert_ptr_nonnull(box_named(&l, "tiny9"));
	vlayout__free(&l);
}
END_TEST

/* Any tree: a row's boxes never overlap and lie inside their parent. */
START_TEST(test_layout_no_overlap)
{
	struct vlayout l = {0};
	uint64_t seed = 7;
	uint32_t i, j;
	char line[256];

	for (i = 0; i < 400; i++) {
		int n = 0, d, depth;

		seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
		depth = 1 + (int)(seed >> 60) % 8;
		for (d = 0; d < depth; d++)
			n += snprintf(line + n, sizeof(line) - (size_t)n, "%sf%llu", d ? ";" : "",
				      (unsigned long long)((seed >> (8 + d * 4)) % 5));
		snprintf(line + n, sizeof(line) - (size_t)n, " %llu",
			 (unsigned long long)(1 + (seed >> 40) % 1000));
		ck_assert_int_eq(vtree__add_folded(&tree, line), 0);
	}
	vtree__sort(&tree);
	ck_assert_int_eq(vlayout__build(&l, &tree, 0, 77, 100, 2), 0);
	for (i = 0; i < l.n; i++) {
		const struct vbox *b = &l.boxes[i];

		ck_assert_uint_le(b->x + b->w, 77);
		if (i + 1 < l.n && l.boxes[i + 1].depth == b->depth)
			ck_assert_uint_le(b->x + b->w, l.boxes[i + 1].x);
		if (b->depth && !b->n_merged) {
			/* inside the parent's box */
			for (j = 0; j < l.n; j++)
				if (l.boxes[j].node == tree.nodes[b->node].parent &&
				    !l.boxes[j].n_merged)
					break;
			ck_assert_uint_lt(j, l.n);
			ck_assert_uint_ge(b->x, l.boxes[j].x);
			ck_assert_uint_le(b->x + b->w, l.boxes[j].x + l.boxes[j].w);
		}
	}
	vlayout__free(&l);
}
END_TEST

START_TEST(test_label)
{
	static const char cxx[] = "std::vector<int, std::allocator<int> >::push_back(int const&)";
	char buf[256];

	ck_assert_str_eq(vlayout__label("main", 10, "~", buf, sizeof(buf)), "main");
	ck_assert_str_eq(vlayout__label(cxx, 100, "~", buf, sizeof(buf)), cxx);
	/* argument list and template arguments go first */
	ck_assert_str_eq(vlayout__label(cxx, 30, "~", buf, sizeof(buf)), "std::vector::push_back");
	/* then leading namespaces */
	ck_assert_str_eq(vlayout__label(cxx, 17, "~", buf, sizeof(buf)), "vector::push_back");
	ck_assert_str_eq(vlayout__label(cxx, 15, "~", buf, sizeof(buf)), "push_back");
	/* then the tail, with a one-column ellipsis */
	ck_assert_str_eq(vlayout__label(cxx, 5, "~", buf, sizeof(buf)), "push~");
	ck_assert_str_eq(vlayout__label(cxx, 5, "\u2026", buf, sizeof(buf)), "push\u2026");
	ck_assert_uint_eq(vlayout__cols(buf), 5);
	/* Rust legacy hashes */
	ck_assert_str_eq(vlayout__label("core::ptr::drop_in_place::h0123456789abcdef", 30, "~", buf,
					sizeof(buf)),
			 "core::ptr::drop_in_place");
	/* markers keep their brackets; (anonymous namespace) stays */
	ck_assert_str_eq(vlayout__label("[lost: capture ring_full]", 10, "~", buf, sizeof(buf)),
			 "[lost: ca~");
	ck_assert_str_eq(
		vlayout__label("(anonymous namespace)::helper(int)", 30, "~", buf, sizeof(buf)),
		"(anonymous namespace)::helper");
	ck_assert_str_eq(vlayout__label("abc", 0, "~", buf, sizeof(buf)), "");
	ck_assert_str_eq(vlayout__label("abc", 1, "~", buf, sizeof(buf)), "~");
}
END_TEST

START_TEST(test_keymap)
{
	const struct vkey *k;
	size_t n, i, j;

	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 'q'), VA_QUIT);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, '/'), VA_SEARCH);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, '#'), VA_SEARCH_SEL);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 'n'), VA_MATCH_NEXT);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 'N'), VA_MATCH_PREV);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, '\t'), VA_TOP);
	ck_assert_int_eq(vkeymap__lookup(VV_TOP, '\t'), VA_TOP);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 'j'), VA_DOWN);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 0402), VA_DOWN); /* KEY_DOWN */
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, '\r'), VA_ENTER);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 27), VA_BACK);
	ck_assert_int_eq(vkeymap__lookup(VV_TOP, 's'), VA_SORT_SELF);
	ck_assert_int_eq(vkeymap__lookup(VV_TOP, 't'), VA_SORT_TOTAL);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, '['), VA_RANGE_PREV);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, ':'), VA_FILTER);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 'A'), VA_MARK_A);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 'B'), VA_MARK_B);
	/* view-specific: sorting is for the table, n/h are for the flamegraph */
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 's'), VA_NONE);
	ck_assert_int_eq(vkeymap__lookup(VV_TOP, 'n'), VA_NONE);
	ck_assert_int_eq(vkeymap__lookup(VV_TOP, 'h'), VA_NONE);
	/* help: q and Esc close it, ^C quits */
	ck_assert_int_eq(vkeymap__lookup(VV_HELP, 'q'), VA_HELP);
	ck_assert_int_eq(vkeymap__lookup(VV_HELP, 3), VA_QUIT);
	ck_assert_int_eq(vkeymap__lookup(VV_FLAME, 'y'), VA_NONE);
	/* one action per (key, view): no entry is shadowed by an earlier one */
	k = vkeymap__table(&n);
	for (i = 0; i < n; i++)
		for (j = i + 1; j < n; j++)
			ck_assert_msg(k[i].key != k[j].key || !(k[i].views & k[j].views),
				      "key %d bound twice", k[i].key);
	/* what the help lists has a text */
	for (i = 0; i < n; i++)
		if (k[i].name)
			ck_assert_ptr_nonnull(k[i].help);
}
END_TEST

START_TEST(test_filter_parse)
{
	struct vfilter f;
	char err[128], d[256];

	vfilter__init(&f);
	ck_assert(vfilter__selects_all(&f));
	ck_assert_int_eq(
		vfilter__parse(&f, "pid=12 comm=nginx cpu=0-3,7 kind=on,lost", err, sizeof(err)),
		0);
	ck_assert_int_eq(f.pid, 12);
	ck_assert_str_eq(f.comm, "nginx");
	ck_assert(f.has_cpus);
	ck_assert_uint_eq(f.cpus[0], 0x8f);
	ck_assert_uint_eq(f.kinds, VK_ON | VK_LOST);
	ck_assert(!vfilter__selects_all(&f));
	vfilter__describe(&f, d, sizeof(d));
	ck_assert_str_eq(d, "pid=12 comm=nginx cpu=0-3,7 kind=on,lost");
	/* grouping and kernel frames survive a new filter; "" clears the filter */
	f.group = VG_CPU;
	f.kernel = false;
	ck_assert_int_eq(vfilter__parse(&f, "", err, sizeof(err)), 0);
	ck_assert(vfilter__selects_all(&f));
	ck_assert_int_eq(f.group, VG_CPU);
	ck_assert(!f.kernel);
	/* errors leave the filter as it was */
	ck_assert_int_eq(vfilter__parse(&f, "kind=probe probe=3 env=prod", err, sizeof(err)), 0);
	ck_assert_int_eq(f.probe, 3);
	vfilter__describe(&f, d, sizeof(d));
	ck_assert_str_eq(d, "env=prod kind=probe probe=3");
	ck_assert_int_eq(vfilter__parse(&f, "pid=7", err, sizeof(err)), 0);
	ck_assert_int_eq(vfilter__parse(&f, "bogus=1", err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "unknown filter 'bogus'"));
	ck_assert_int_eq(vfilter__parse(&f, "pid=abc", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(vfilter__parse(&f, "kind=sideways", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(vfilter__parse(&f, "probe=-1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(vfilter__parse(&f, "cpu=3-1", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(vfilter__parse(&f, "pid", err, sizeof(err)), -EINVAL);
	ck_assert_int_eq(f.pid, 7);
}
END_TEST

START_TEST(test_tree_match)
{
	struct vtree other;
	uint32_t a, b;

	ck_assert_int_eq(vtree__init(&other, &names), 0);
	ck_assert_int_eq(vtree__add_folded(&tree, "main;a;b 5"), 0);
	ck_assert_int_eq(vtree__add_folded(&other, "main;x 1"), 0);
	ck_assert_int_eq(vtree__add_folded(&other, "main;a;b 9"), 0);
	a = vtree__child(&tree, 0, strtab__find(&names, "main", 4));
	b = vtree__child(&tree, vtree__child(&tree, a, strtab__find(&names, "a", 1)),
			 strtab__find(&names, "b", 1));
	ck_assert_uint_eq(other.nodes[vtree__match(&tree, b, &other)].total, 9);
	ck_assert_int_eq(vtree__add_folded(&tree, "main;y 1"), 0);
	ck_assert_uint_eq(
		vtree__match(&tree, vtree__child(&tree, a, strtab__find(&names, "y", 1)), &other),
		VNODE_NONE);
	vtree__free(&other);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("view");
	TCase *tc = tcase_create("pure");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_tree_from_folded);
	tcase_add_test(tc, test_layout_boxes);
	tcase_add_test(tc, test_layout_merge);
	tcase_add_test(tc, test_layout_no_overlap);
	tcase_add_test(tc, test_label);
	tcase_add_test(tc, test_keymap);
	tcase_add_test(tc, test_filter_parse);
	tcase_add_test(tc, test_tree_match);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
