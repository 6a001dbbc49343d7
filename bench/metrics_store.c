// SPDX-License-Identifier: MIT
/*
 * bench_metrics_store DIR...: what a store's scheduler metrics cost on disk,
 * per encoding, side by side (docs/bench.md "Metrics store"). The metrics
 * records of each store dir (cpa_...) are read back, grouped in blocks of 5 s
 * as the storer groups them, encoded in each encoding (v1 of released stores,
 * v2 of development builds, v3, v4, and v5 which the storer writes), and
 * zstd-compressed at the storer's level 3, alone (in a block they share a
 * zstd frame with the rows: a little less). Prints bytes per second of each
 * and bytes per process-second (an entry of a process in a second), then the
 * zstd bytes of each v4 and v5 column, the CPU time of the v4 and v5
 * encoders (the storer's part: each record as it comes, its group rewritten),
 * then what v4 and v5 change in the figures users see, against the store's
 * values (exact in a v1 store):
 *
 *   sec    per (process, second): on-CPU ms (cpa-view's % of a CPU, the
 *          --sched_csv oncpu_ms) and mean run-queue delay (runq_mean_us),
 *          where the value is at least 50 µs (below it the whole-µs rounding
 *          of both encodings is 0.5 µs, above 1 %)
 *   proc   per process over the store (cpa show --sched's ONCPU_MS and
 *          RQ_MEAN rows), where ONCPU_MS shows at least 0.1
 *   comm   per (comm, second) summed (cpa-view's series with a comm filter)
 *
 * each as the largest relative error; counts (waits, switches, slices),
 * keys and comms must come back exact (the "exact" column counts entries that
 * did not). Then the same store in v5 with fewer rows, by the policies of
 * metrics_policy.c, and what each costs users.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "common/array.h"
#include "common/macro.h"
#include "metrics_policy.h"
#include "store_metrics_pvt.h"

#define BLOCK_NS (5ull * 1000000000ull)
#define NENC	 5
#define MAXPROC	 65536

struct rec {
	struct cpa_metrics m;
	struct cpa_metrics_ent *e;
};

/* summed per process (pid) for the proc error: input, v4, v5 */
struct psum {
	double oncpu[3], runq[3], waits;
};

struct acc {
	struct sbuf v[NENC];
	unsigned int n;
	uint64_t block_t0, t_min, t_max, ents, procs;
	double z[NENC], raw[NENC], col[2][32];
	uint64_t enc_ns[NENC]; /* CPU time in the encoders */
	unsigned int ncol;
	struct rec *recs;
	size_t nrecs, caprecs;
	/* errors: [v4, v5] */
	double sec_on[2], sec_rq[2], comm_on[2];
	uint64_t inexact[2];
	struct psum *ps;
};

static void (*const enc[NENC])(struct sbuf *, const struct cpa_metrics *,
			       const struct cpa_metrics_ent *) = {
	store_metrics__encode_v1, store_metrics__encode_v2, store_metrics__encode_v3,
	store_metrics__encode_v4, store_metrics__encode};

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double zsize(const void *p, size_t len)
{
	size_t cap = ZSTD_compressBound(len), z;
	void *dst;

	if (!len)
		return 0;
	dst = malloc(cap);
	if (!dst)
		return 0;
	z = ZSTD_compress(dst, cap, p, len, 3);
	free(dst);
	return ZSTD_isError(z) ? 0 : (double)z;
}

double dmax(double x, double y)
{
	return x > y ? x : y;
}

double rel(double got, double want)
{
	return want ? (got > want ? got - want : want - got) / want : got ? 1 : 0;
}

struct cmp {
	struct acc *a;
	unsigned int k; /* 0 v4, 1 v5 */
	size_t at;
};

static bool same_counts(const struct cpa_metrics_ent *x, const struct cpa_metrics_ent *y)
{
	return x->id == y->id && x->kind == y->kind && !memcmp(x->comm, y->comm, CPA_COMM_LEN) &&
	       x->runq_n == y->runq_n && x->slices == y->slices &&
	       !memcmp(x->switches, y->switches, sizeof(x->switches)) &&
	       !memcmp(x->runq_hist, y->runq_hist, sizeof(x->runq_hist)) &&
	       !memcmp(x->slice_hist, y->slice_hist, sizeof(x->slice_hist));
}

/* Per (comm, second): the sums of the second's processes by comm, input vs
 * got, flushed into the largest error when the second ends. */
struct csum {
	char comm[CPA_COMM_LEN];
	double want, got;
};

static struct {
	struct csum *v;
	size_t n, cap;
	uint64_t time_ns;
} cs[2];

static void comm_flush(struct acc *a, unsigned int k)
{
	for (size_t i = 0; i < cs[k].n; i++)
		if (cs[k].v[i].want >= 50e3)
			a->comm_on[k] = dmax(a->comm_on[k], rel(cs[k].v[i].got, cs[k].v[i].want));
	cs[k].n = 0;
}

static int comm_add(struct acc *a, unsigned int k, uint64_t time_ns,
		    const struct cpa_metrics_ent *w, const struct cpa_metrics_ent *g)
{
	size_t i;

	if (time_ns != cs[k].time_ns)
		comm_flush(a, k);
	cs[k].time_ns = time_ns;
	for (i = 0; i < cs[k].n; i++)
		if (!strncmp(cs[k].v[i].comm, w->comm, CPA_COMM_LEN))
			break;
	if (i == cs[k].n) {
		if (array_grow((void **)&cs[k].v, &cs[k].cap, cs[k].n + 1, sizeof(*cs[k].v)) < 0)
			return -ENOMEM;
		memset(&cs[k].v[i], 0, sizeof(cs[k].v[i]));
		memcpy(cs[k].v[i].comm, w->comm, CPA_COMM_LEN);
		cs[k].n++;
	}
	cs[k].v[i].want += (double)w->oncpu_ns;
	cs[k].v[i].got += (double)g->oncpu_ns;
	return 0;
}

static int on_dec(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct cmp *c = ctx;
	struct acc *a = c->a;
	const struct rec *r = &a->recs[c->at++];

	if (m->time_ns != r->m.time_ns || m->n_ents != r->m.n_ents) {
		a->inexact[c->k] += r->m.n_ents;
		return 0;
	}
	/* the encoders write a record's entries in key order: match by key */
	for (unsigned int i = 0; i < m->n_ents; i++) {
		const struct cpa_metrics_ent *w = &r->e[i], *g = NULL;

		for (unsigned int j = 0; j < m->n_ents && !g; j++)
			if (ents[j].id == w->id && ents[j].kind == w->kind)
				g = &ents[j];
		if (!g || !same_counts(w, g)) {
			a->inexact[c->k]++;
			continue;
		}
		if (w->oncpu_ns >= 50000)
			a->sec_on[c->k] = dmax(a->sec_on[c->k],
					       rel((double)g->oncpu_ns, (double)w->oncpu_ns));
		if (w->runq_n && w->runq_ns / w->runq_n >= 50000)
			a->sec_rq[c->k] =
				dmax(a->sec_rq[c->k], rel((double)g->runq_ns, (double)w->runq_ns));
		if (w->kind == CPA_MK_PROC && comm_add(a, c->k, m->time_ns, w, g) < 0)
			return -ENOMEM;
		if (w->kind == CPA_MK_PROC && w->id < MAXPROC) {
			struct psum *p = &a->ps[w->id];

			if (!c->k) {
				p->oncpu[0] += (double)w->oncpu_ns;
				p->runq[0] += (double)w->runq_ns;
				p->waits += (double)w->runq_n;
			}
			p->oncpu[1 + c->k] += (double)g->oncpu_ns;
			p->runq[1 + c->k] += (double)g->runq_ns;
		}
	}
	return 0;
}

static void check(struct acc *a, unsigned int k, const struct sbuf *b)
{
	struct sbuf s = {0};
	struct cmp c = {.a = a, .k = k};

	sbuf__varint(&s, a->nrecs);
	sbuf__put(&s, b->p, b->len);
	sbuf__varint(&s, 0);
	if (store_metrics__decode(s.p, s.len, 0, UINT64_MAX, on_dec, NULL, &c) < 0 ||
	    c.at != a->nrecs)
		a->inexact[k] += 1000000;
	comm_flush(a, k);
	sbuf__free(&s);
}

static void block_end(struct acc *a)
{
	const struct sbuf *(*const cols[2])(unsigned int *) = {store_metrics__v4_columns,
							       store_metrics__v5_columns};
	unsigned int nc;

	if (!a->n)
		return;
	for (unsigned int k = 0; k < 2; k++) {
		const struct sbuf *col = cols[k](&nc);

		for (unsigned int i = 0; i < nc && i < 32; i++)
			a->col[k][i] += zsize(col[i].p, col[i].len);
	}
	a->ncol = nc;
	check(a, 0, &a->v[3]);
	check(a, 1, &a->v[4]);
	for (unsigned int i = 0; i < NENC; i++) {
		a->z[i] += zsize(a->v[i].p, a->v[i].len) + 1; /* + the varint count, about */
		a->raw[i] += (double)a->v[i].len;
		a->v[i].len = 0;
	}
	for (size_t i = 0; i < a->nrecs; i++)
		free(a->recs[i].e);
	a->nrecs = 0;
	a->n = 0;
}

static int on_rec(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct acc *a = ctx;
	struct rec *r;

	if (a->n && m->time_ns - a->block_t0 >= BLOCK_NS)
		block_end(a);
	if (!a->n)
		a->block_t0 = m->time_ns;
	if (!a->t_min || m->time_ns < a->t_min)
		a->t_min = m->time_ns;
	if (m->time_ns > a->t_max)
		a->t_max = m->time_ns;
	for (unsigned int i = 0; i < NENC; i++) {
		uint64_t t0 = cpu_ns();

		enc[i](&a->v[i], m, ents);
		a->enc_ns[i] += cpu_ns() - t0;
	}
	if (array_grow((void **)&a->recs, &a->caprecs, a->nrecs + 1, sizeof(*a->recs)) < 0)
		return -ENOMEM;
	r = &a->recs[a->nrecs++];
	r->m = *m;
	r->e = malloc(sizeof(*ents) * (m->n_ents + 1u));
	if (!r->e)
		return -ENOMEM;
	memcpy(r->e, ents, sizeof(*ents) * m->n_ents);
	a->n++;
	a->ents += m->n_ents;
	for (unsigned int i = 0; i < m->n_ents; i++)
		a->procs += ents[i].kind == CPA_MK_PROC;
	return 0;
}

static void proc_err(const struct acc *a, double *on, double *rq)
{
	on[0] = on[1] = rq[0] = rq[1] = 0;
	for (size_t i = 0; i < MAXPROC; i++) {
		const struct psum *p = &a->ps[i];

		for (unsigned int k = 0; k < 2; k++) {
			if (p->oncpu[0] >= 100e3)
				on[k] = dmax(on[k], rel(p->oncpu[1 + k], p->oncpu[0]));
			if (p->waits && p->runq[0] / p->waits >= 50e3)
				rq[k] = dmax(rq[k], rel(p->runq[1 + k], p->runq[0]));
		}
	}
}

static const char *const col_name[] = {"hdr",	   "memb",    "key",  "flags",	"comm",
				       "oncpu",	   "runq",    "sw",   "sw_esc", "waits",
				       "oncpu_lo", "runq_lo", "extra"};

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s STORE_DIR...\n", argv[0]);
		return 2;
	}
	printf("%-22s %4s %7s %6s %7s %7s %7s %7s %7s %6s %6s %6s %6s %6s\n", "store", "secs",
	       "procs/s", "CPUs/s", "v1 B/s", "v2 B/s", "v3 B/s", "v4 B/s", "v5 B/s", "v1 B/p",
	       "v2 B/p", "v3 B/p", "v4 B/p", "v5 B/p");
	for (int i = 1; i < argc; i++) {
		struct store_reader *r;
		struct acc a = {0};
		double secs, pon[2], prq[2];
		int e = store_reader__open(argv[i], NULL, NULL, &r);

		if (e < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(-e));
			return 1;
		}
		a.ps = calloc(MAXPROC, sizeof(*a.ps));
		if (!a.ps)
			return 1;
		e = store_reader__metrics(r, 1000000000ull * 1000000000ull,
					  4000000000ull * 1000000000ull, on_rec, &a);
		block_end(&a);
		store_reader__free(r);
		if (e < 0 || a.t_max <= a.t_min) {
			fprintf(stderr, "%s: no metrics (%s)\n", argv[i], strerror(-e));
			return 1;
		}
		secs = (double)(a.t_max - a.t_min) / 1e9 + 1;
		printf("%-22.22s %4.0f %7.1f %6.1f", argv[i], secs, (double)a.procs / secs,
		       (double)(a.ents - a.procs) / secs);
		for (unsigned int k = 0; k < NENC; k++)
			printf(" %7.0f", a.z[k] / secs);
		for (unsigned int k = 0; k < NENC; k++)
			printf(" %6.2f", a.z[k] / (double)a.procs);
		printf("\n");
		for (unsigned int v = 0; v < 2; v++) {
			printf("  v%u columns, zstd alone, B/s:", 4 + v);
			for (unsigned int k = 0; k < a.ncol && k < ARRAY_SIZE(col_name); k++)
				printf(" %s %.0f", col_name[k], a.col[v][k] / secs);
			printf("\n");
		}
		printf("  encoder CPU, µs per second of data, v4 / v5: %.0f / %.0f\n",
		       (double)a.enc_ns[3] / 1e3 / secs, (double)a.enc_ns[4] / 1e3 / secs);
		proc_err(&a, pon, prq);
		printf("  largest relative error, v4 / v5: sec oncpu %.2f / %.2f %%, runq %.2f / "
		       "%.2f %%; proc oncpu %.3f / %.3f %%, runq %.3f / %.3f %%; comm oncpu %.2f / "
		       "%.2f %%; not exact %llu / %llu\n",
		       100 * a.sec_on[0], 100 * a.sec_on[1], 100 * a.sec_rq[0], 100 * a.sec_rq[1],
		       100 * pon[0], 100 * pon[1], 100 * prq[0], 100 * prq[1], 100 * a.comm_on[0],
		       100 * a.comm_on[1], (unsigned long long)a.inexact[0],
		       (unsigned long long)a.inexact[1]);
		e = metrics_policy__run(argv[i]);
		if (e < 0) {
			fprintf(stderr, "%s: policies: %s\n", argv[i], strerror(-e));
			return 1;
		}
		for (unsigned int k = 0; k < NENC; k++)
			sbuf__free(&a.v[k]);
		free(a.recs);
		free(a.ps);
	}
	return 0;
}
