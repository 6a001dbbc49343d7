// SPDX-License-Identifier: MIT
/*
 * cpa-view's loading of a range: the aggregation with its cache of closed
 * chunks (model.c) gives the same sums as reading every row, and the loader
 * thread (view.c) hands over the picture of the newest request, stops for a
 * newer one and for quitting. Runs under TSan (label tsan).
 *
 * The store: 2 hours from 10:00:00 local on 2026-11-20, LD_RATE samples a
 * second: sample k of a second has stack k % 10 ("main;part_P;leaf_S"), pid
 * 1000 + k % 4, and is off-CPU when k % 5 == 0.
 */
#include <check.h>
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_util.h"
#include "test_view_util.h"
#include "viewer/model.h"
#include "viewer/view.h"

#define LD_SECS 7200
#define LD_RATE 100
#define LD_ON	80 /* of LD_RATE */

static char tmp_root[PATH_MAX], store[PATH_MAX + 8];

static void setup(void)
{
	struct vgen *g = calloc(1, sizeof(*g));
	uint64_t base = vt_base_ns();
	uint32_t st[10], comm;
	char buf[512];

	test_scratch_in(tmp_root, sizeof(tmp_root), "view-load");
	snprintf(store, sizeof(store), "%s/store", tmp_root);
	ck_assert_int_eq(mkdir(store, 0755), 0);
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(vgen_open(g, store, 2), 0);
	comm = vgen_str(g, "app");
	for (uint32_t i = 0; i < 10; i++) {
		snprintf(buf, sizeof(buf), "main;part_%u;leaf_%u", i % 3, i);
		st[i] = vgen_stack(g, buf);
	}
	for (uint64_t s = 0; s < LD_SECS; s++)
		for (uint32_t k = 0; k < LD_RATE; k++)
			ck_assert_int_eq(vgen_sample(g, base + s * 1000000000ULL + k * 1000ULL,
						     st[k % 10], 1000 + k % 4, 1000 + k % 4, k % 2,
						     k % 5 ? CPA_KIND_ONCPU : CPA_KIND_OFFCPU, 1,
						     comm, comm),
					 0);
	vgen_close(g);
	free(g);
}

static void teardown(void)
{
	test_rm_rf(tmp_root);
}

static int64_t t10(void)
{
	return (int64_t)(vt_base_ns() / 1000000000ULL);
}

/* Samples of leaf_i in tree t (group process: app:PID;main;part_;leaf_i). */
static uint64_t leaf_total(const struct vtree *t, uint32_t i)
{
	char name[32];
	uint32_t id, n;
	uint64_t sum = 0;

	snprintf(name, sizeof(name), "leaf_%u", i);
	id = strtab__find(t->names, name, strlen(name));
	for (n = 0; id && n < t->n; n++)
		if (t->nodes[n].name == id)
			sum += t->nodes[n].total;
	return sum;
}

/* Every range the same as read row by row: cold, then from the cache (warm),
 * whole chunks, partial ones, the open end, filtered. */
START_TEST(test_chunk_cache)
{
	static struct vmodel cached, plain;
	static const struct {
		int64_t from, len;
	} rg[] = {{0, LD_SECS}, {0, 3600},   {600, 1200}, {37, 3000},
		  {5000, 2200}, {7000, 200}, {1799, 2},	  {0, LD_SECS}};
	struct vtree tc, tp;
	struct vrange_stats sc, sp;
	struct vfilter f;
	char err[256];

	ck_assert_int_eq(vmodel__open(&cached, store, err, sizeof(err)), 0);
	ck_assert_int_eq(vmodel__open(&plain, store, err, sizeof(err)), 0);
	ck_assert_int_eq(vtree__init(&tc, &cached.names), 0);
	ck_assert_int_eq(vtree__init(&tp, &plain.names), 0);
	for (int pass = 0; pass < 2; pass++) {
		vfilter__init(&f);
		if (pass)
			ck_assert_int_eq(vfilter__parse(&f, "pid=1001 kind=on", err, sizeof(err)),
					 0);
		for (size_t i = 0; i < sizeof(rg) / sizeof(rg[0]); i++) {
			int64_t t0 = t10() + rg[i].from, t1 = t0 + rg[i].len;
			uint64_t want = (uint64_t)rg[i].len * (pass ? LD_RATE / 4 - 5 : LD_RATE);

			ck_assert_int_eq(vmodel__aggregate(&cached, t0, t1, &f, &tc, &sc, NULL), 0);
			vmodel__commit(&cached);
			/* plain: its cache dropped every time (another filter in between) */
			{
				struct vfilter other = f;

				other.group = VG_CPU;
				ck_assert_int_eq(vmodel__aggregate(&plain, t0, t0 + 1, &other, &tp,
								   &sp, NULL),
						 0);
			}
			ck_assert_int_eq(vmodel__aggregate(&plain, t0, t1, &f, &tp, &sp, NULL), 0);
			ck_assert_uint_eq(sc.samples, want);
			ck_assert_uint_eq(sc.samples, sp.samples);
			ck_assert_uint_eq(sc.on, sp.on);
			ck_assert_uint_eq(sc.off, sp.off);
			ck_assert_uint_eq(sc.rows, sp.rows);
			ck_assert_uint_eq(tc.nodes[0].total, want);
			ck_assert_uint_eq(tc.n, tp.n);
			for (uint32_t l = 0; l < 10; l++)
				ck_assert_uint_eq(leaf_total(&tc, l), leaf_total(&tp, l));
			/* the timeline's exact counts, unfiltered */
			if (!pass)
				ck_assert_uint_eq(vmodel__sec_total(&cached, t0), LD_RATE);
		}
	}
	ck_assert_uint_gt(cached.n_chunks, 0);
	vtree__free(&tc);
	vtree__free(&tp);
	vmodel__free(&cached);
	vmodel__free(&plain);
}
END_TEST

/* The viewer's own state on a curses terminal on /dev/null (as bench_view). */
static SCREEN *scr;
static FILE *devnull;

static void app_open(struct vapp *a)
{
	struct vview_opts o = {.store = store};

	setenv("COLUMNS", "100", 1);
	setenv("LINES", "30", 1);
	devnull = fopen("/dev/null", "w");
	ck_assert_ptr_nonnull(devnull);
	ck_assert_int_eq(vapp__init(a, &o), 0);
	scr = newterm("xterm", devnull, stdin);
	ck_assert_ptr_nonnull(scr);
}

static void app_close(struct vapp *a)
{
	vapp__free(a);
	endwin();
	delscreen(scr);
	fclose(devnull);
}

START_TEST(test_loader_thread)
{
	struct vapp *a = calloc(1, sizeof(*a));

	ck_assert_ptr_nonnull(a);
	app_open(a);
	/* the whole store, superseded at once by its first hour */
	vapp__set_range(a, t10(), t10() + LD_SECS);
	vapp__render(a);
	vapp__set_range(a, t10(), t10() + 3600);
	vapp__render(a);
	vapp__wait(a);
	ck_assert(!vapp__loading(a));
	ck_assert_int_eq(a->r0, t10());
	ck_assert_int_eq(a->r1, t10() + 3600);
	ck_assert_uint_eq(a->st.samples, 3600ULL * LD_RATE);
	ck_assert_uint_eq(a->st.on, 3600ULL * LD_ON);
	ck_assert_uint_eq(a->tree.nodes[0].total, 3600ULL * LD_RATE);
	ck_assert_uint_eq(leaf_total(&a->tree, 3), 3600ULL * LD_RATE / 10);
	vapp__render(a);
	/* keys while loading: a range key is taken, a tree key waits */
	vapp__set_range(a, t10(), t10() + LD_SECS);
	vapp__render(a);
	vapp__key(a, '-');
	vapp__key(a, 'n');
	vapp__render(a);
	vapp__wait(a);
	ck_assert_uint_eq(a->st.samples, (uint64_t)(a->r1 - a->r0) * LD_RATE);
	/* filtered: the picture is of the filter's rows */
	ck_assert_int_eq(vfilter__parse(&a->f, "kind=off", a->err, sizeof(a->err)), 0);
	vapp__set_range(a, t10() + 600, t10() + 1200);
	vapp__render(a);
	vapp__wait(a);
	ck_assert_uint_eq(a->st.samples, 600ULL * (LD_RATE - LD_ON));
	ck_assert_uint_eq(a->st.on, 0);
	/* quit while a load runs: it stops, and everything is freed */
	vfilter__init(&a->f);
	vapp__set_range(a, t10(), t10() + LD_SECS);
	vapp__render(a);
	vapp__key(a, 'q');
	ck_assert(a->quit);
	app_close(a);
	free(a);
}
END_TEST

/* One case: both tests write the same 2-hour store (setup). */
int main(void)
{
	Suite *s = suite_create("view_load");
	TCase *tc = TEST_TCASE(s, "load", test_chunk_cache, test_loader_thread);

	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup, teardown);
	return test_run_suite(s);
}
