// SPDX-License-Identifier: MIT
/*
 * store_read__sort_blocks() (storer/store_read_index.c): a segment's blocks
 * in offset order, checked against qsort() on the same input: the sorted case
 * (left as it is), a few increasing runs (merged), many runs, duplicated
 * offsets and random input (qsort). Order and every field must match.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "storer/store_reader_pvt.h"
#include "test_util.h"

static uint64_t rng = 88172645463325252ull;

static uint32_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)rng;
}

static int ref_cmp(const void *a, const void *b)
{
	const struct rblock *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Every field but off random, so a block swapped or copied wrong shows. */
static struct rblock blk(uint32_t off)
{
	return (struct rblock){.off = off,
			       .len = next(),
			       .t_min_s = next(),
			       .span_s = (uint16_t)next(),
			       .n_sec = (uint8_t)next(),
			       .flags = (uint8_t)next(),
			       .indexed = next() & 1,
			       .dict_done = next() & 1,
			       .bad = (uint8_t)next()};
}

static void check_against_qsort(const struct rblock *in, uint32_t n, const char *what)
{
	struct rblock *a = malloc((n + 1) * sizeof(*a)), *b = malloc((n + 1) * sizeof(*b));

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	memcpy(a, in, n * sizeof(*a));
	memcpy(b, in, n * sizeof(*b));
	store_read__sort_blocks(a, n);
	qsort(b, n, sizeof(*b), ref_cmp);
	for (uint32_t i = 0; i < n; i++) {
		ck_assert_msg(a[i].off == b[i].off && a[i].len == b[i].len &&
				      a[i].t_min_s == b[i].t_min_s && a[i].span_s == b[i].span_s &&
				      a[i].n_sec == b[i].n_sec && a[i].flags == b[i].flags &&
				      a[i].indexed == b[i].indexed &&
				      a[i].dict_done == b[i].dict_done && a[i].bad == b[i].bad,
			      "%s, n %u: block %u differs from qsort's (off %u, want %u)", what, n,
			      i, a[i].off, b[i].off);
	}
	free(a);
	free(b);
}

/* nrun increasing runs of the offsets 64, 64 + 4096, ...: dealt out in turn
 * (interleaved runs), or in nrun chunks, the last chunk first. */
static void make_runs(struct rblock *v, uint32_t n, uint32_t nrun, bool interleave)
{
	uint32_t k = 0;

	for (uint32_t r = 0; r < nrun; r++)
		for (uint32_t i = 0; i < n; i++)
			if (interleave ? i % nrun == r : (uint64_t)i * nrun / n == nrun - 1 - r)
				v[k++] = blk(64 + i * 4096);
}

START_TEST(test_sorted_and_runs)
{
	static const uint32_t sizes[] = {0, 1, 2, 3, 17, 1000, 3600};
	struct rblock *v = malloc(3600 * sizeof(*v));

	ck_assert_ptr_nonnull(v);
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		uint32_t n = sizes[si];

		for (uint32_t nrun = 1; nrun <= 12; nrun++) {
			if (nrun > n && n)
				break;
			make_runs(v, n, nrun, true);
			check_against_qsort(v, n, "interleaved runs");
			make_runs(v, n, nrun, false);
			check_against_qsort(v, n, "runs");
		}
		/* the runs in reverse: the tail's blocks first */
		for (uint32_t i = 0; i < n; i++)
			v[i] = blk(64 + (n - 1 - i) * 100);
		check_against_qsort(v, n, "reversed");
	}
	free(v);
}
END_TEST

START_TEST(test_duplicates)
{
	struct rblock v[600];

	/* sorted with an offset twice (an index entry written again) */
	for (uint32_t i = 0; i < 600; i++)
		v[i] = blk(100 + i * 10);
	v[300].off = v[299].off;
	check_against_qsort(v, 600, "sorted, one duplicate");
	/* two runs sharing offsets: the merge meets equal heads */
	for (uint32_t i = 0; i < 300; i++) {
		v[i] = blk(100 + i * 10);
		v[300 + i] = blk(100 + i * 20);
	}
	check_against_qsort(v, 600, "two runs, shared offsets");
	/* all equal */
	for (uint32_t i = 0; i < 600; i++)
		v[i] = blk(4096);
	check_against_qsort(v, 600, "all equal");
	/* random offsets with many duplicates */
	for (uint32_t i = 0; i < 600; i++)
		v[i] = blk(next() % 50);
	check_against_qsort(v, 600, "random, duplicates");
}
END_TEST

START_TEST(test_random)
{
	struct rblock *v = malloc(5000 * sizeof(*v));

	ck_assert_ptr_nonnull(v);
	for (int rep = 0; rep < 50; rep++) {
		uint32_t n = next() % 5000;

		for (uint32_t i = 0; i < n; i++)
			v[i] = blk(next());
		check_against_qsort(v, n, "random");
		/* sorted, then a few blocks swapped: many short runs */
		qsort(v, n, sizeof(*v), ref_cmp);
		for (uint32_t k = 0; n > 1 && k < 1u + (uint32_t)rep % 20; k++) {
			uint32_t a = next() % n, b = next() % n;
			struct rblock t = v[a];

			v[a] = v[b];
			v[b] = t;
		}
		check_against_qsort(v, n, "sorted, some swapped");
	}
	free(v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_blocksort");

	TEST_TCASE(s, "sort", test_sorted_and_runs, test_duplicates, test_random);
	return test_run_suite(s);
}
