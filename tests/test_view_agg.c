// SPDX-License-Identifier: MIT
/*
 * cpa-view's aggregation of a range (model.c: rows read a block at a time,
 * summed by the (stack, group) pair kept in each stack id's slot) gives the
 * sums of reading the same range sample by sample (store_reader__query()):
 * every node of the call tree, for every grouping, with filters, kernel
 * frames off, cold and from the chunk cache, switching groupings back and
 * forth (the slots' kept pairs are per grouping); read by one worker and by
 * two (threads taking the range's pieces from both ends, their sums merged:
 * a sample dropped or counted twice by the merge fails a node), also over a
 * corrupt block, which is skipped and counted once.
 *
 * The store: 2 h 10 min from 10:00:00 local on 2026-11-20 (3 hourly segments),
 * AG_RATE samples a second over 12 stacks (some with kernel frames), 3
 * processes with 2 threads each over 4 CPUs, one sample in five off-CPU; a
 * stack runs in every process, thread and CPU. Process 1001 has no process
 * name (its thread name is used); process 1002 execs from 'sh' to 'xz' after
 * the first hour. A loss record every 10 minutes.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cpulist.h"
#include "storer/store_fmt.h"
#include "test_store_util.h"
#include "test_util.h"
#include "test_view_util.h"
#include "viewer/model.h"

#define AG_SECS	  7800
#define AG_RATE	  10
#define AG_STACKS 12

static char *tmp_root, store[PATH_MAX];

static void setup(void)
{
	struct vgen *g = calloc(1, sizeof(*g));
	uint64_t base = vt_base_ns();
	uint32_t st[AG_STACKS], comm[3], sh, xz;
	char buf[256];

	tmp_root = t_mkdtemp();
	ck_assert_ptr_nonnull(tmp_root);
	snprintf(store, sizeof(store), "%s/store", tmp_root);
	ck_assert_int_eq(mkdir(store, 0755), 0);
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(vgen_open(g, store, 4), 0);
	comm[0] = vgen_str(g, "app");
	comm[1] = vgen_str(g, "worker");
	sh = vgen_str(g, "sh");
	xz = vgen_str(g, "xz");
	for (uint32_t i = 0; i < AG_STACKS; i++) {
		if (i % 4 == 3)
			snprintf(buf, sizeof(buf), "main;io_%u;libc_read;sys_read_[k];schedule_[k]",
				 i);
		else
			snprintf(buf, sizeof(buf), "main;part_%u;leaf_%u", i % 3, i);
		st[i] = vgen_stack(g, buf);
	}
	for (uint64_t s = 0; s < AG_SECS; s++) {
		uint64_t t = base + s * 1000000000ULL;

		comm[2] = s < 3600 ? sh : xz;
		for (uint32_t k = 0; k < AG_RATE; k++) {
			uint32_t p = (uint32_t)(k + s) % 3, pid = 1000 + p;
			uint32_t stack = st[(k * 7 + s) % AG_STACKS];
			bool off = k % 5 == 0;

			ck_assert_int_eq(vgen_sample(g, t + k * 1000ULL, stack, pid,
						     pid + (k / 3) % 2, (uint32_t)(k + s / 7) % 4,
						     off ? CPA_KIND_OFFCPU : CPA_KIND_ONCPU,
						     off ? 5000 + k : 1, comm[p],
						     p == 1 ? 0 : comm[p]),
					 0);
		}
		if (s % 600 == 300)
			ck_assert_int_eq(vgen_loss(g, t + 500000000ULL, 3), 0);
	}
	vgen_close(g);
	free(g);
}

static void teardown(void)
{
	t_rm_rf(tmp_root);
	free(tmp_root);
}

/* The reference: sums by path ("label;frame;...") of every prefix, one sample at a time. */
struct ref {
	const struct vfilter *f;
	struct strtab paths;
	uint64_t *sum;
	uint32_t cap;
	uint64_t total, rows;
};

static bool ref_kind_ok(const struct vfilter *f, const struct store_sample *s)
{
	if (s->lost)
		return f->kinds & VK_LOST;
	if (s->kind == CPA_KIND_ONCPU)
		return f->kinds & VK_ON;
	if (s->kind == CPA_KIND_OFFCPU)
		return f->kinds & VK_OFF;
	return f->kinds & VK_PROBE;
}

static void ref_add(struct ref *r, const char *path, size_t len, uint64_t v)
{
	uint32_t id = strtab__intern(&r->paths, path, len);

	/* (no ck_assert per sample: each one costs Check a write) */
	if (!id)
		ck_abort_msg("out of memory");
	if (id >= r->cap) {
		uint32_t old = r->cap;

		r->cap = id * 2 + 64;
		r->sum = realloc(r->sum, r->cap * sizeof(*r->sum));
		if (!r->sum)
			ck_abort_msg("out of memory");
		memset(r->sum + old, 0, (r->cap - old) * sizeof(*r->sum));
	}
	r->sum[id] += v;
}

static int ref_sample(void *ctx, const struct store_sample *s)
{
	struct ref *r = ctx;
	const struct vfilter *f = r->f;
	char path[4096];
	size_t n = 0;
	uint32_t i, last;

	if (!ref_kind_ok(f, s))
		return 0;
	r->total += s->count;
	r->rows++;
	if (!s->lost) { /* the group box, as model.c's group_of() names it */
		switch (f->group) {
		case VG_PROCESS:
			n = (size_t)snprintf(path, sizeof(path), "%s:%u;",
					     store_sample__proc_name(s), s->pid);
			break;
		case VG_THREAD:
			n = (size_t)snprintf(path, sizeof(path), "%s:%u;",
					     s->comm[0] ? s->comm : "[unknown]", s->tid);
			break;
		case VG_CGROUP:
			n = (size_t)snprintf(path, sizeof(path), "cgroup:%llu;",
					     (unsigned long long)s->cgroup_id);
			break;
		case VG_ENV:
			n = (size_t)snprintf(path, sizeof(path), "%s;",
					     s->env[0] ? s->env : "SYSTEM");
			break;
		case VG_CPU:
			n = (size_t)snprintf(path, sizeof(path), "cpu:%u;", s->cpu);
			break;
		default:
			break;
		}
		if (n)
			ref_add(r, path, n - 1, s->count);
	}
	/* stored leaf first, kernel frames first: root first is user, then kernel */
	last = f->kernel ? 0 : s->n_kframes;
	for (i = s->n_frames; i-- > last;) {
		n += (size_t)snprintf(path + n, sizeof(path) - n, "%s;", s->frames[i]->name);
		if (n >= sizeof(path))
			ck_abort_msg("path too long");
		ref_add(r, path, n - 1, s->count);
	}
	return 0;
}

/* Path of node i of t, "a;b;c" from under the root. */
static size_t node_path(const struct vtree *t, uint32_t i, char *buf, size_t len)
{
	size_t n = 0;

	if (t->nodes[i].parent && t->nodes[i].parent != VNODE_NONE)
		n = node_path(t, t->nodes[i].parent, buf, len);
	n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ";" : "", vtree__name(t, i));
	if (n >= len)
		ck_abort_msg("path too long");
	return n;
}

/* The tree and counts of [t0, t1) with f against the sample-by-sample sums. */
static void check_range(struct vmodel *m, struct store_reader *rd, struct vtree *t,
			const struct vfilter *f, int64_t t0, int64_t t1)
{
	struct ref r = {.f = f};
	struct store_filter sf;
	struct vrange_stats st;
	char path[4096];

	ck_assert_int_eq(vmodel__aggregate(m, t0, t1, f, t, &st, NULL), 0);
	vmodel__commit(m);
	store_filter__init(&sf);
	sf.pid = f->pid;
	sf.comm = f->comm[0] ? f->comm : NULL;
	if (f->has_cpus) {
		sf.cpu_set = f->cpus;
		sf.cpu_set_bits = VCPU_BITS;
	}
	ck_assert_int_eq(store_reader__query(rd, (uint64_t)t0 * 1000000000ULL,
					     (uint64_t)t1 * 1000000000ULL, &sf, ref_sample, &r),
			 0);
	ck_assert_uint_eq(st.samples, r.total);
	ck_assert_uint_eq(st.rows, r.rows);
	ck_assert_uint_eq(t->nodes[0].total, r.total);
	/* every node is a prefix of the reference with its sum, and every prefix a node */
	ck_assert_uint_eq(t->n - 1, strtab__count(&r.paths));
	for (uint32_t i = 1; i < t->n; i++) {
		size_t n = node_path(t, i, path, sizeof(path));
		uint32_t id = strtab__find(&r.paths, path, n);

		if (!id || r.sum[id] != t->nodes[i].total)
			ck_abort_msg("group %s filter '%s' [%lld, %lld): %s: %llu, want %llu",
				     vgroup__name(f->group), f->comm, (long long)t0, (long long)t1,
				     path, (unsigned long long)t->nodes[i].total,
				     id ? (unsigned long long)r.sum[id] : 0ULL);
	}
	strtab__free(&r.paths);
	free(r.sum);
}

START_TEST(test_agg_sums)
{
	static struct vmodel m;
	static const char *const filters[] = {"", "kind=off", "pid=1001 kind=on,lost", "cpu=1-2",
					      "comm=xz"};
	static const struct {
		int64_t from, len;
	} rg[] = {{37, AG_SECS - 100}, {0, AG_SECS}, {37, 3000}, {600, 3600}, {0, AG_SECS}};
	static const enum vgroup groups[] = {VG_PROCESS, VG_THREAD, VG_CPU,
					     VG_PROCESS, VG_CGROUP, VG_ENV,
					     VG_NAME,	 VG_THREAD, VG_PROCESS};
	struct store_reader *rd;
	struct vtree t;
	struct vfilter f;
	char err[256];
	int64_t base = (int64_t)(vt_base_ns() / 1000000000ULL);

	for (uint32_t workers = 1; workers <= VWORKERS; workers++) {
		ck_assert_int_eq(vmodel__open(&m, store, err, sizeof(err)), 0);
		m.workers = workers;
		ck_assert_int_eq(store_reader__open_err(m.dir, NULL, NULL, &rd, err, sizeof(err)),
				 0);
		ck_assert_int_eq(vtree__init(&t, &m.names), 0);
		for (size_t gi = 0; gi < sizeof(groups) / sizeof(groups[0]); gi++)
			for (size_t fi = 0; fi < sizeof(filters) / sizeof(filters[0]); fi++) {
				vfilter__init(&f);
				ck_assert_int_eq(vfilter__parse(&f, filters[fi], err, sizeof(err)),
						 0);
				f.group = groups[gi];
				f.kernel = gi % 2 == 0;
				for (size_t i = 0; i < sizeof(rg) / sizeof(rg[0]); i++)
					check_range(&m, rd, &t, &f, base + rg[i].from,
						    base + rg[i].from + rg[i].len);
			}
		ck_assert_uint_gt(m.n_chunks, 0); /* the last ranges came from the cache */
		/* the cold ranges were read by two threads when two are asked for */
		if (workers > 1)
			ck_assert_uint_gt(m.par_loads, 0);
		else
			ck_assert_uint_eq(m.par_loads, 0);
		ck_assert_uint_eq(vmodel__corrupt(&m), 0);
		store_reader__free(rd);
		vtree__free(&t);
		vmodel__free(&m);
	}
}
END_TEST

/* Flip a byte in the data of the store's index entry k: that block is corrupt. */
static void corrupt_block(char *dir, size_t len, uint32_t k)
{
	struct store_idx_entry e;
	char p[PATH_MAX + 400];
	uint8_t b;
	int fd;

	ck_assert_int_eq(t_store_dir(store, dir, len), 0);
	snprintf(p, sizeof(p), "%s/index", dir);
	fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &e, sizeof(e), 32 + (off_t)k * sizeof(e)), (ssize_t)sizeof(e));
	close(fd);
	snprintf(p, sizeof(p), "%s/seg_%06u.cps", dir, e.seg_no);
	fd = open(p, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, e.off + e.len - 2), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, e.off + e.len - 2), 1);
	close(fd);
}

static int count_rows(void *ctx, const struct store_rows *b)
{
	*(uint64_t *)ctx += b->n;
	return 0;
}

/*
 * A corrupt block read by a reader and its fork (store_reader__fork()) is
 * skipped by both and counted once after the join (and after each sync of
 * the viewer's kept fork); the two workers' sums
 * over it are still those of reading sample by sample (which skips it too).
 */
START_TEST(test_agg_corrupt)
{
	static struct vmodel m;
	struct store_reader *rd, *fk;
	struct store_read_stats rs;
	struct vtree t;
	struct vfilter f;
	char err[256], dir[PATH_MAX + 300];
	uint64_t n0 = 0, n1 = 0;
	int64_t base = (int64_t)(vt_base_ns() / 1000000000ULL);

	corrupt_block(dir, sizeof(dir), 40);
	ck_assert_int_eq(store_reader__open_err(dir, NULL, NULL, &rd, err, sizeof(err)), 0);
	ck_assert_int_eq(store_reader__fork(rd, NULL, NULL, &fk), 0);
	ck_assert_int_eq(store_reader__query_rows(rd, 0, UINT64_MAX / 2, NULL, count_rows, &n0), 0);
	ck_assert_int_eq(store_reader__query_rows(fk, 0, UINT64_MAX / 2, NULL, count_rows, &n1), 0);
	ck_assert_uint_eq(n0, n1);
	store_reader__join(rd, fk);
	store_reader__stats(rd, &rs);
	ck_assert_uint_eq(rs.blocks_corrupt, 1);
	ck_assert_uint_eq(rs.rows, 2 * n0);
	/* a fork of a reader that knows the bad block does not count it again */
	ck_assert_int_eq(store_reader__fork(rd, NULL, NULL, &fk), 0);
	n1 = 0;
	ck_assert_int_eq(store_reader__query_rows(fk, 0, UINT64_MAX / 2, NULL, count_rows, &n1), 0);
	ck_assert_uint_eq(n1, n0);
	store_reader__join(rd, fk);
	store_reader__stats(rd, &rs);
	ck_assert_uint_eq(rs.blocks_corrupt, 1);

	ck_assert_int_eq(vmodel__open(&m, store, err, sizeof(err)), 0);
	m.workers = 2;
	ck_assert_int_eq(vtree__init(&t, &m.names), 0);
	vfilter__init(&f);
	check_range(&m, rd, &t, &f, base, base + AG_SECS);
	ck_assert_uint_eq(m.par_loads, 1);
	ck_assert_uint_eq(vmodel__corrupt(&m), 1);
	/* again (another grouping: no cached chunk), through the kept fork (store_reader__sync())
	 */
	f.group = VG_THREAD;
	check_range(&m, rd, &t, &f, base, base + AG_SECS);
	ck_assert_uint_eq(m.par_loads, 2);
	ck_assert_uint_eq(vmodel__corrupt(&m), 1);
	ck_assert_uint_lt(t.nodes[0].total, (uint64_t)AG_SECS * AG_RATE);
	store_reader__free(rd);
	vtree__free(&t);
	vmodel__free(&m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("view_agg");
	TCase *tc = TEST_TCASE(s, "agg", test_agg_sums, test_agg_corrupt);

	tcase_set_timeout(tc, 300);
	tcase_add_checked_fixture(tc, setup, teardown);
	return test_run_suite(s);
}
