// SPDX-License-Identifier: MIT
/*
 * bench_metrics_store's second table: fewer metrics rows (docs/bench.md
 * "Metrics store"), each policy applied to the store's records and encoded
 * for real in v5 beside the store as it is (the same 5 s groups, zstd level
 * 3, each group alone), then decoded and compared with the store's values
 * (exact in a store written in v1). A threshold T, for each of:
 *
 *   P1  a process seen in one 5 s block only whose on-CPU time over its life
 *       is under T is folded, with the others of its comm, into one row per
 *       (comm, second) holding their sums and how many processes they were;
 *   P2  a process seen in more than one block, in the seconds where its
 *       on-CPU time and run-queue delay are both under T, is kept as one row
 *       per (process, block) holding the sums and how many seconds (where it
 *       has two such seconds or more in the block; one stays as it is);
 *   P1+P2 both;
 *   none  no process rows at all: the floor of this lever (the headers, the
 *         CPUs' rows).
 *
 * The folded rows are entries of kind 0 (no reader knows it; a real format
 * would name it) in their second's records, keys first as capture writes
 * them: id = the comm's number in the store (P1), or FOLD_BLOCK | pid (P2,
 * in the block's last second). Their counts (processes or seconds) are a
 * column of varints after the group, compressed with it.
 *
 * What a user loses, against the store's values: the share of process
 * entries, on-CPU and run-queue time no longer per (process, second); the
 * processes gone from the per-process table (P1, `cpa show --sched`); the
 * largest relative error of the figures bench_metrics_store's first table
 * checks, the kept rows per (process, second), per process over the store,
 * per (comm, second) with a (process, block) row spread evenly over its
 * block's seconds as a reader would show it (and the largest absolute error
 * there, in ms of on-CPU time in a second: 10 ms is 1 % of a CPU).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/macro.h"
#include "metrics_policy.h"
#include "store_metrics_pvt.h"

#define BLOCK_NS   (5ull * 1000000000ull)
#define MAXPID	   65536
#define FOLD_BLOCK (1u << 29)

struct sec {
	struct cpa_metrics hdr; /* its first record's, with the system part */
	struct cpa_metrics_ent *e;
	size_t n, cap;
	unsigned int blk;
};

struct pinfo {
	unsigned int blk0, blk1;
	double on, rq, waits;
	bool seen;
};

struct store {
	struct sec *s;
	size_t ns, caps;
	size_t *blk0; /* the first second of each block; blk0[nblk] = ns */
	unsigned int nblk;
	char (*comm)[CPA_COMM_LEN];
	size_t ncomm, capcomm;
	struct pinfo *p;
	double *want; /* [comm * ns + sec]: on-CPU ns per (comm, second) */
	double ents, on, rq;
	int err;
};

struct pol {
	bool p1, p2, none; /* none: no process rows at all (the floor) */
	double t_ns;
};

struct res {
	double bytes, rows, fold_ents, fold_on, fold_rq, gone, gone_on;
	double sec_on, sec_rq, proc_on, proc_rq, comm_rel, comm_abs;
	uint64_t bad;	   /* decoded rows that do not match what was encoded */
	double *gon, *grq; /* per pid */
	double *got;	   /* as store.want */
};

/* c's number in the store's comms, SIZE_MAX if none */
static size_t comm_find(const struct store *st, const char *c)
{
	for (size_t i = 0; i < st->ncomm; i++)
		if (!strncmp(st->comm[i], c, CPA_COMM_LEN))
			return i;
	return SIZE_MAX;
}

/* c's number, c added if new (SIZE_MAX: no memory) */
static size_t comm_idx(struct store *st, const char *c)
{
	size_t i = comm_find(st, c);

	if (i != SIZE_MAX)
		return i;
	if (array_grow((void **)&st->comm, &st->capcomm, st->ncomm + 1, sizeof(*st->comm)) < 0)
		return SIZE_MAX;
	memset(st->comm[st->ncomm], 0, CPA_COMM_LEN);
	strncpy(st->comm[st->ncomm], c, CPA_COMM_LEN - 1);
	return st->ncomm++;
}

static int on_rec(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct store *st = ctx;
	struct sec *s = st->ns ? &st->s[st->ns - 1] : NULL;

	if (!s || s->hdr.time_ns != m->time_ns) {
		if (array_grow((void **)&st->s, &st->caps, st->ns + 1, sizeof(*st->s)) < 0)
			return -ENOMEM;
		s = &st->s[st->ns++];
		memset(s, 0, sizeof(*s));
		s->hdr = *m;
	}
	if (array_grow((void **)&s->e, &s->cap, s->n + m->n_ents + 1, sizeof(*s->e)) < 0)
		return -ENOMEM;
	memcpy(s->e + s->n, ents, m->n_ents * sizeof(*ents));
	s->n += m->n_ents;
	return 0;
}

static bool is_proc(const struct cpa_metrics_ent *e)
{
	return e->kind == CPA_MK_PROC && e->id < MAXPID;
}

/* The blocks, the processes' lives and sums, the comms' seconds. */
static int store_index(struct store *st)
{
	uint64_t t0 = 0;

	st->blk0 = calloc(st->ns + 1, sizeof(*st->blk0));
	st->p = calloc(MAXPID, sizeof(*st->p));
	if (!st->blk0 || !st->p)
		return -ENOMEM;
	for (size_t i = 0; i < st->ns; i++) {
		struct sec *s = &st->s[i];

		if (!i || s->hdr.time_ns - t0 >= BLOCK_NS) {
			st->blk0[st->nblk++] = i;
			t0 = s->hdr.time_ns;
		}
		s->blk = st->nblk - 1;
		for (size_t j = 0; j < s->n; j++) {
			const struct cpa_metrics_ent *e = &s->e[j];
			struct pinfo *p;

			if (!is_proc(e))
				continue;
			p = &st->p[e->id];
			if (!p->seen)
				p->blk0 = s->blk;
			p->seen = true;
			p->blk1 = s->blk;
			p->on += (double)e->oncpu_ns;
			p->rq += (double)e->runq_ns;
			p->waits += (double)e->runq_n;
			st->ents++;
			st->on += (double)e->oncpu_ns;
			st->rq += (double)e->runq_ns;
			if (comm_idx(st, e->comm) == SIZE_MAX)
				return -ENOMEM;
		}
	}
	st->blk0[st->nblk] = st->ns;
	st->want = calloc(st->ncomm * st->ns + 1, sizeof(*st->want));
	if (!st->want)
		return -ENOMEM;
	for (size_t i = 0; i < st->ns; i++)
		for (size_t j = 0; j < st->s[i].n; j++)
			if (is_proc(&st->s[i].e[j]))
				st->want[comm_idx(st, st->s[i].e[j].comm) * st->ns + i] +=
					(double)st->s[i].e[j].oncpu_ns;
	return 0;
}

static void ent_add(struct cpa_metrics_ent *d, const struct cpa_metrics_ent *e)
{
	d->oncpu_ns += e->oncpu_ns;
	d->runq_ns += e->runq_ns;
	d->runq_n += e->runq_n;
	d->slices += e->slices;
	for (unsigned int i = 0; i < CPA_MR_MAX; i++)
		d->switches[i] += e->switches[i];
	for (unsigned int i = 0; i < CPA_METRICS_HIST; i++) {
		d->runq_hist[i] += e->runq_hist[i];
		d->slice_hist[i] += e->slice_hist[i];
	}
}

/* A row of the policy's output and its count (kind 0 only). */
struct orow {
	struct cpa_metrics_ent e;
	uint32_t count;
};

struct obuf {
	struct orow *r;
	size_t n, cap;
};

static struct orow *orow_add(struct obuf *o)
{
	if (array_grow((void **)&o->r, &o->cap, o->n + 1, sizeof(*o->r)) < 0)
		return NULL;
	memset(&o->r[o->n], 0, sizeof(o->r[0]));
	return &o->r[o->n++];
}

static int orow_cmp(const void *x, const void *y)
{
	const struct orow *a = x, *b = y;

	return a->e.id < b->e.id ? -1 : a->e.id > b->e.id;
}

/* One second's rows as capture writes them: records of up to
 * CPA_METRICS_PER_REC entries, the system part in the first. */
static void emit_sec(struct sbuf *g, struct sbuf *cnt, const struct sec *s, const struct obuf *o,
		     uint64_t *nrec)
{
	struct cpa_metrics h = s->hdr;
	struct cpa_metrics_ent ents[CPA_METRICS_PER_REC];
	size_t i = 0;

	do {
		unsigned int k = (unsigned int)MIN(o->n - i, (size_t)CPA_METRICS_PER_REC);

		for (unsigned int j = 0; j < k; j++) {
			ents[j] = o->r[i + j].e;
			if (!ents[j].kind)
				sbuf__varint(cnt, o->r[i + j].count);
		}
		h.n_ents = (uint16_t)k;
		store_metrics__encode(g, &h, ents);
		h.flags &= (uint16_t) ~(CPA_MF_SYSTEM | CPA_MF_HW | CPA_MF_HW_NA);
		i += k;
		++*nrec;
	} while (i < o->n);
}

struct dctx {
	struct store *st;
	struct res *r;
	size_t at, end; /* the block's seconds */
	size_t b0;
};

static const struct cpa_metrics_ent *exact_of(const struct sec *s, uint32_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->e[i].kind == CPA_MK_PROC && s->e[i].id == pid)
			return &s->e[i];
	return NULL;
}

static int on_dec(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct dctx *d = ctx;
	struct store *st = d->st;
	struct res *r = d->r;
	const struct sec *s;

	while (d->at < d->end && st->s[d->at].hdr.time_ns != m->time_ns)
		d->at++;
	if (d->at == d->end) {
		r->bad += m->n_ents + 1;
		return 0;
	}
	s = &st->s[d->at];
	for (unsigned int i = 0; i < m->n_ents; i++) {
		const struct cpa_metrics_ent *g = &ents[i], *w;
		size_t c = comm_find(st, g->comm);

		if (g->kind != CPA_MK_PROC && g->kind) /* CPUs: as in the first table */
			continue;
		if (c == SIZE_MAX) {
			r->bad++;
			continue;
		}
		if (g->kind == CPA_MK_PROC && g->id < MAXPID) {
			w = exact_of(s, g->id);
			if (!w || strncmp(w->comm, g->comm, CPA_COMM_LEN) ||
			    w->runq_n != g->runq_n) {
				r->bad++;
				continue;
			}
			if (w->oncpu_ns >= 50000)
				r->sec_on = dmax(r->sec_on,
						 rel((double)g->oncpu_ns, (double)w->oncpu_ns));
			if (w->runq_n && w->runq_ns / w->runq_n >= 50000)
				r->sec_rq = dmax(r->sec_rq,
						 rel((double)g->runq_ns, (double)w->runq_ns));
			r->gon[g->id] += (double)g->oncpu_ns;
			r->grq[g->id] += (double)g->runq_ns;
			r->got[c * st->ns + d->at] += (double)g->oncpu_ns;
		} else if (!g->kind && !(g->id & FOLD_BLOCK)) {
			if (g->id - 1 != c)
				r->bad++;
			r->got[c * st->ns + d->at] += (double)g->oncpu_ns;
		} else if (!g->kind) {
			uint32_t pid = g->id & ~FOLD_BLOCK;
			double k = (double)(d->end - d->b0);

			if (pid >= MAXPID) {
				r->bad++;
				continue;
			}
			r->gon[pid] += (double)g->oncpu_ns;
			r->grq[pid] += (double)g->runq_ns;
			for (size_t j = d->b0; j < d->end; j++)
				r->got[c * st->ns + j] += (double)g->oncpu_ns / k;
		}
	}
	return 0;
}

/* Decode the block's group g (nrec records) into r. */
static int block_check(struct store *st, struct res *r, const struct sbuf *g, uint64_t nrec,
		       unsigned int b)
{
	struct sbuf s = {0};
	struct dctx d = {.st = st, .r = r, .at = st->blk0[b], .end = st->blk0[b + 1]};
	int e;

	d.b0 = d.at;
	sbuf__varint(&s, nrec);
	sbuf__put(&s, g->p, g->len);
	sbuf__varint(&s, 0);
	e = s.oom ? -ENOMEM : store_metrics__decode(s.p, s.len, 0, UINT64_MAX, on_dec, NULL, &d);
	sbuf__free(&s);
	return e < 0 ? e : 0;
}

/* The policy's rows of block b, encoded and checked. */
static int block_run(struct store *st, const struct pol *pl, struct res *r, unsigned int b,
		     uint32_t *quiet, struct obuf *o, struct obuf *brow)
{
	struct sbuf g = {0}, cnt = {0}, all = {0};
	const size_t s0 = st->blk0[b], s1 = st->blk0[b + 1];
	uint64_t nrec = 0;
	int e = -ENOMEM; /* until the block is encoded */

	/* P2: the quiet seconds of each long-lived process in the block */
	for (size_t i = s0; i < s1; i++)
		for (size_t j = 0; j < st->s[i].n; j++) {
			const struct cpa_metrics_ent *x = &st->s[i].e[j];

			if (is_proc(x))
				quiet[x->id] = 0;
		}
	for (size_t i = s0; i < s1; i++)
		for (size_t j = 0; j < st->s[i].n; j++) {
			const struct cpa_metrics_ent *x = &st->s[i].e[j];

			if (is_proc(x) && (double)x->oncpu_ns < pl->t_ns &&
			    (double)x->runq_ns < pl->t_ns)
				quiet[x->id]++;
		}
	brow->n = 0;
	for (size_t i = s0; i < s1; i++) {
		const struct sec *s = &st->s[i];
		size_t nfold = 0;

		o->n = 0;
		for (size_t j = 0; j < s->n; j++) {
			const struct cpa_metrics_ent *x = &s->e[j];
			const struct pinfo *p = is_proc(x) ? &st->p[x->id] : NULL;
			bool one = p && p->blk0 == p->blk1;
			struct orow *w = NULL;
			struct obuf *to = o;
			uint32_t id = 0;

			if (pl->none && p) {
				r->fold_ents++;
				r->fold_on += (double)x->oncpu_ns;
				r->fold_rq += (double)x->runq_ns;
				continue;
			}
			if (pl->p1 && one && p->on < pl->t_ns) {
				id = (uint32_t)comm_idx(st, x->comm) + 1;
			} else if (pl->p2 && is_proc(x) && !one && quiet[x->id] >= 2 &&
				   (double)x->oncpu_ns < pl->t_ns &&
				   (double)x->runq_ns < pl->t_ns) {
				id = FOLD_BLOCK | x->id;
				to = brow;
			}
			if (!id) {
				if (!(w = orow_add(o)))
					goto out;
				w->e = *x;
				continue;
			}
			r->fold_ents++;
			r->fold_on += (double)x->oncpu_ns;
			r->fold_rq += (double)x->runq_ns;
			for (size_t k = 0; k < to->n && !w; k++)
				if (!to->r[k].e.kind && to->r[k].e.id == id)
					w = &to->r[k];
			if (!w) {
				if (!(w = orow_add(to)))
					goto out;
				w->e.id = id;
				nfold += to == o;
			}
			memcpy(w->e.comm, x->comm, CPA_COMM_LEN);
			ent_add(&w->e, x);
			w->count++;
		}
		if (i == s1 - 1)
			for (size_t k = 0; k < brow->n; k++) {
				struct orow *w = orow_add(o);

				if (!w)
					goto out;
				*w = brow->r[k];
				nfold++;
			}
		/* keys first, as capture writes them: the kind-0 rows, then the
		 * kept ones in their order */
		if (nfold) {
			struct orow *t = malloc(o->n * sizeof(*t));
			size_t a = 0;

			if (!t)
				goto out;
			for (size_t k = 0; k < o->n; k++)
				if (!o->r[k].e.kind)
					t[a++] = o->r[k];
			qsort(t, a, sizeof(*t), orow_cmp);
			for (size_t k = 0; k < o->n; k++)
				if (o->r[k].e.kind)
					t[a++] = o->r[k];
			memcpy(o->r, t, o->n * sizeof(*t));
			free(t);
		}
		r->rows += (double)o->n;
		emit_sec(&g, &cnt, s, o, &nrec);
	}
	sbuf__put(&all, g.p, g.len);
	sbuf__put(&all, cnt.p, cnt.len);
	if (g.oom || cnt.oom || all.oom)
		goto out;
	r->bytes += zsize(all.p, all.len) + 1; /* + the varint count, about */
	e = block_check(st, r, &g, nrec, b);
out:
	sbuf__free(&g);
	sbuf__free(&cnt);
	sbuf__free(&all);
	return e;
}

static int pol_run(struct store *st, const struct pol *pl, struct res *r, const double *base,
		   uint32_t *quiet)
{
	struct obuf o = {0}, brow = {0};
	int e = 0;

	memset(r, 0, sizeof(*r));
	r->gon = calloc(MAXPID, sizeof(*r->gon));
	r->grq = calloc(MAXPID, sizeof(*r->grq));
	r->got = calloc(st->ncomm * st->ns + 1, sizeof(*r->got));
	if (!r->gon || !r->grq || !r->got)
		e = -ENOMEM;
	for (unsigned int b = 0; b < st->nblk && !e; b++)
		e = block_run(st, pl, r, b, quiet, &o, &brow);
	free(o.r);
	free(brow.r);
	if (e)
		return e;
	for (size_t i = 0; i < MAXPID; i++) {
		const struct pinfo *p = &st->p[i];

		if (!p->seen)
			continue;
		if (pl->none || (pl->p1 && p->blk0 == p->blk1 && p->on < pl->t_ns)) {
			r->gone++;
			r->gone_on += p->on;
			continue;
		}
		if (p->on >= 100e3)
			r->proc_on = dmax(r->proc_on, rel(r->gon[i], p->on));
		if (p->waits && p->rq / p->waits >= 50e3)
			r->proc_rq = dmax(r->proc_rq, rel(r->grq[i], p->rq));
	}
	for (size_t i = 0; i < st->ncomm * st->ns; i++) {
		double w = st->want[i], g = r->got[i];

		if (w >= 50e3)
			r->comm_rel = dmax(r->comm_rel, rel(g, w));
		if (base)
			r->comm_abs = dmax(r->comm_abs, g > base[i] ? g - base[i] : base[i] - g);
	}
	return 0;
}

static void store_free(struct store *st)
{
	for (size_t i = 0; i < st->ns; i++)
		free(st->s[i].e);
	free(st->s);
	free(st->blk0);
	free(st->comm);
	free(st->p);
	free(st->want);
}

int metrics_policy__run(const char *dir)
{
	static const double ts[] = {0.5e6, 1e6, 2e6, 1e300};
	struct store st = {0};
	struct store_reader *rd;
	uint32_t *quiet = NULL;
	struct res base = {0};
	double secs;
	int e = store_reader__open(dir, NULL, NULL, &rd);

	if (e < 0)
		return e;
	e = store_reader__metrics(rd, 1000000000ull * 1000000000ull, 4000000000ull * 1000000000ull,
				  on_rec, &st);
	store_reader__free(rd);
	if (!e && st.ns < 2)
		e = -ENODATA;
	if (!e)
		e = store_index(&st);
	if (!e && !(quiet = calloc(MAXPID, sizeof(*quiet))))
		e = -ENOMEM;
	if (e) {
		store_free(&st);
		return e;
	}
	secs = (double)(st.s[st.ns - 1].hdr.time_ns - st.s[0].hdr.time_ns) / 1e9 + 1;
	printf("  policies beside v5, %.1f process entries/s (T: threshold, all: any; fold: "
	       "entries, on-CPU, run-queue no longer per (process, second); gone: processes\n"
	       "  no longer in the per-process table; largest relative error of sec: the kept "
	       "(process, second) rows, proc: per process, comm: per (comm, second),\n"
	       "  +ms: its largest difference from v5's in ms of on-CPU time in a second, 10 ms = "
	       "1 %% of a CPU; bad: rows that did not decode as encoded):\n",
	       st.ents / secs);
	printf("  %-6s %4s %6s %6s %6s %6s %7s %6s %6s %12s %13s %13s %15s %4s\n", "policy", "T ms",
	       "rows/s", "B/s", "B/p", "vs v5", "fold %", "on %", "rq %", "gone (on %)",
	       "sec on/rq %", "proc on/rq %", "comm % / +ms", "bad");
	for (unsigned int k = 0; k < 2 + 3 * ARRAY_SIZE(ts) && !e; k++) {
		struct pol pl = {.p1 = k && (k - 1) % 3 != 1,
				 .p2 = k && (k - 1) % 3 != 0,
				 .none = k == 1 + 3 * ARRAY_SIZE(ts),
				 .t_ns = k ? ts[MIN(k - 1, 3 * ARRAY_SIZE(ts) - 1) / 3] : 0};
		struct res r;
		char t[8];

		e = pol_run(&st, &pl, &r, base.got, quiet);
		if (pl.none || pl.t_ns > 1e18)
			snprintf(t, sizeof(t), "%s", pl.none ? "-" : "all");
		else
			snprintf(t, sizeof(t), "%.1f", pl.t_ns / 1e6);
		if (!e)
			printf("  %-6s %4s %6.1f %6.0f %6.2f %6.2f %7.1f %6.1f %6.1f %5.0f (%4.1f) "
			       "%5.2f / %5.2f %5.2f / %5.2f %7.2f / %5.2f %4llu\n",
			       !k		? "v5"
			       : pl.none	? "none"
			       : pl.p1 && pl.p2 ? "P1+P2"
			       : pl.p1		? "P1"
						: "P2",
			       t, r.rows / secs, r.bytes / secs, r.bytes / st.ents,
			       k ? r.bytes / base.bytes : 1, 100 * r.fold_ents / st.ents,
			       100 * r.fold_on / st.on, st.rq ? 100 * r.fold_rq / st.rq : 0, r.gone,
			       100 * r.gone_on / st.on, 100 * r.sec_on, 100 * r.sec_rq,
			       100 * r.proc_on, 100 * r.proc_rq, 100 * r.comm_rel, r.comm_abs / 1e6,
			       (unsigned long long)r.bad);
		free(r.gon);
		free(r.grq);
		if (k)
			free(r.got);
		else
			base = r;
	}
	free(base.got);
	free(quiet);
	store_free(&st);
	return e;
}
