// SPDX-License-Identifier: MIT
/*
 * Store reader, rows (store_reader_pvt.h): a block's row columns decoded
 * (docs/store-format.md), filtered and handed out as samples with their
 * frames from the segment dictionary: store_reader__query().
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cpulist.h"
#include "common/timeutil.h"
#include "store_reader_pvt.h"

static const struct store_frame unknown_frame = {
	.name = "[unknown stack]", .module = "", .flags = CPA_FF_MARKER};

static bool filter_ok(const struct store_reader *r, const struct store_filter *f,
		      const struct store_row *d)
{
	if (!f)
		return true;
	if (f->pid >= 0 && (int64_t)d->pid != f->pid)
		return false;
	if (f->cgroup_id >= 0 && d->cgroup_id != (uint64_t)f->cgroup_id)
		return false;
	if (f->probe_id >= 0 && (d->kind != CPA_KIND_PROBE || (int64_t)d->probe_id != f->probe_id))
		return false;
	if (f->cpu_set && !cpulist__test(f->cpu_set, f->cpu_set_bits, d->cpu))
		return false;
	if (f->comm && strcmp(rdict__str(&r->dict, d->comm), f->comm) &&
	    strcmp(rdict__str(&r->dict, d->pcomm), f->comm))
		return false;
	if (f->env && strcmp(rdict__str(&r->dict, d->env), f->env))
		return false;
	return true;
}

/* f selects some rows only (not by time). */
static bool filters(const struct store_filter *f)
{
	return f && (f->pid >= 0 || f->cgroup_id >= 0 || f->probe_id >= 0 || f->cpu_set ||
		     f->comm || f->env);
}

void store_rows__sample(const struct store_rows *b, size_t i, struct store_sample *ret)
{
	struct store_reader *r = b->r;
	const struct store_row *d = &b->rows[i];
	struct store_sample smp;

	memset(&smp, 0, sizeof(smp));
	smp.sec = d->sec;
	smp.cgroup_id = d->cgroup_id;
	smp.count = d->count;
	smp.weight = d->weight;
	smp.pid = d->pid;
	smp.tid = d->tid;
	smp.cpu = d->cpu;
	smp.probe_id = d->probe_id;
	smp.kind = (uint16_t)d->kind;
	smp.comm = rdict__str(&r->dict, d->comm);
	smp.pcomm = rdict__str(&r->dict, d->pcomm);
	smp.env = rdict__str(&r->dict, d->env);
	smp.seg = b->seg;
	smp.stack_id = d->stack_id;
	if (d->stack_id >= 1 && d->stack_id <= r->dict.n_stack &&
	    r->dict.stacks[d->stack_id - 1].n) {
		const struct rstack *st = &r->dict.stacks[d->stack_id - 1];

		for (uint32_t j = 0; j < st->n; j++) {
			uint32_t fid = r->dict.stack_frames[st->off + j];

			r->fptrs[j] = fid ? &r->dict.frames[fid - 1] : &unknown_frame;
		}
		smp.n_frames = st->n;
		smp.n_kframes = st->nk;
	} else {
		r->fptrs[0] = &unknown_frame;
		smp.n_frames = 1;
	}
	smp.frames = r->fptrs;
	smp.lost = smp.n_frames == 1 && (r->fptrs[0]->flags & CPA_FF_MARKER) &&
		   !strncmp(r->fptrs[0]->name, "[lost:", 6);
	*ret = smp;
}

/* rbuf__varint() with its one- and two-byte cases (most deltas) inline. */
static inline uint64_t col_varint(struct rbuf *b)
{
	if (b->len - b->pos >= 2) {
		const uint8_t *p = b->p + b->pos;

		if (p[0] < 0x80) {
			b->pos++;
			return p[0];
		}
		if (p[1] < 0x80) {
			b->pos += 2;
			return (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
		}
	} else if (b->pos < b->len && b->p[b->pos] < 0x80) {
		return b->p[b->pos++];
	}
	return rbuf__varint(b);
}

/* Past n varints of b: a column not read (its values' last bytes counted, 8 at a time). */
static void col_skip(struct rbuf *b, uint64_t n)
{
	uint64_t w;

	while (n >= 8 && b->len - b->pos >= 8) {
		memcpy(&w, b->p + b->pos, 8);
		/* bytes below 0x80: one 1 a byte, summed into the top byte */
		n -= ((~w & 0x8080808080808080ULL) >> 7) * 0x0101010101010101ULL >> 56;
		b->pos += 8;
	}
	while (n-- > 0 && !b->bad)
		rbuf__varint(b);
}

/* A block's rows decoded column by column, those of [t0s, t1s) passing f to fn as one batch.
 * A column is taken eight one-byte values (most of them: small deltas) at a time where it can
 * (eight zeros, as often, as a copy);
 * its deltas run in a register (a), not through the row before. */
static int emit_rows(struct store_reader *r, struct rseg *s, const uint8_t *p, size_t len,
		     int64_t base_s, int64_t t0s, int64_t t1s, const struct store_filter *f,
		     store_rows_fn fn, void *ctx)
{
	struct rbuf b = {.p = p, .len = len};
	struct store_row *rows;
	struct store_rows batch = {.r = r, .seg = s->seg_no};
	uint64_t n = rbuf__varint(&b), i;
	size_t k = 0;
	uint32_t skip = f ? f->skip : 0;

	/* A row costs at least 13 bytes: a larger count is a lie. */
	if (b.bad || n > len / 13 + 1)
		return -EBADMSG;
	/* the filter's own columns are read */
	if (f && f->cgroup_id >= 0)
		skip &= ~STORE_COL_CGROUP;
	if (f && f->cpu_set)
		skip &= ~STORE_COL_CPU;
	if (f && f->env)
		skip &= ~STORE_COL_ENV;
	/* every field is set below, but a skipped column's: 0 where the buffer
	 * (kept from block to block) may hold one from before */
	if (n > r->rowcap) {
		free(r->rowbuf);
		r->rowcap = 0;
		r->row_cols = 0;
		r->rowbuf = calloc(n, sizeof(*r->rowbuf));
		if (!r->rowbuf)
			return -ENOMEM;
		r->rowcap = (uint32_t)n;
	}
	rows = r->rowbuf;
	if (skip & r->row_cols) {
		uint32_t z = skip & r->row_cols;

		for (i = 0; i < r->rowcap; i++) {
			if (z & STORE_COL_TID)
				rows[i].tid = 0;
			if (z & STORE_COL_CPU)
				rows[i].cpu = 0;
			if (z & STORE_COL_CGROUP)
				rows[i].cgroup_id = 0;
			if (z & STORE_COL_ENV)
				rows[i].env = 0;
			if (z & STORE_COL_WEIGHT)
				rows[i].weight = 0;
		}
		r->row_cols &= ~z;
	}
	r->row_cols |= ~skip & STORE_COL_ALL;

#define COLUMN(stmt)                                                          \
	for (i = 0; i < n;) {                                                 \
		uint64_t w_, m_;                                              \
		if (n - i >= 8 && b.len - b.pos >= 8) {                       \
			memcpy(&w_, b.p + b.pos, 8);                          \
			m_ = w_ & 0x8080808080808080ULL;                      \
			if (!w_) { /* eight zeros: stmt folds to a copy */    \
				b.pos += 8;                                   \
				for (int k_ = 0; k_ < 8; k_++, i++) {         \
					struct store_row *d = &rows[i];       \
					const uint64_t v = 0;                 \
					stmt;                                 \
				}                                             \
				continue;                                     \
			}                                                     \
			/* the one-byte values before the first longer one */ \
			int l_ = m_ ? __builtin_ctzll(m_) >> 3 : 8;           \
			b.pos += (size_t)l_;                                  \
			for (int k_ = 0; k_ < l_; k_++, i++, w_ >>= 8) {      \
				struct store_row *d = &rows[i];               \
				uint64_t v = w_ & 0xff;                       \
				stmt;                                         \
			}                                                     \
			if (!m_)                                              \
				continue;                                     \
		}                                                             \
		struct store_row *d = &rows[i++];                             \
		uint64_t v = col_varint(&b);                                  \
		stmt;                                                         \
	}
#define DELTA32(field)                                                       \
	do {                                                                 \
		uint32_t a = 0;                                              \
		COLUMN(d->field = a = (uint32_t)((int64_t)a + unzigzag(v))); \
	} while (0)
	{
		int64_t a = base_s;

		COLUMN(d->sec = a += (int64_t)MIN(v, (uint64_t)UINT16_MAX));
	}
	DELTA32(pid);
	if (skip & STORE_COL_TID)
		col_skip(&b, n);
	else
		COLUMN(d->tid = (uint32_t)((int64_t)d->pid + unzigzag(v)));
	if (skip & STORE_COL_CPU)
		col_skip(&b, n);
	else
		COLUMN(d->cpu = (uint32_t)v);
	if (skip & STORE_COL_CGROUP) {
		col_skip(&b, n);
	} else {
		uint64_t a = 0;

		COLUMN(d->cgroup_id = a += (uint64_t)unzigzag(v));
	}
	COLUMN(d->kind = (uint32_t)v);
	DELTA32(comm);
	DELTA32(pcomm);
	if (skip & STORE_COL_ENV)
		col_skip(&b, n);
	else
		DELTA32(env);
	COLUMN(d->probe_id = (uint32_t)v);
	DELTA32(stack_id);
	COLUMN(d->count = v);
	if (skip & STORE_COL_WEIGHT)
		col_skip(&b, n);
	else
		COLUMN(d->weight = d->count + (uint64_t)unzigzag(v));
#undef DELTA32
#undef COLUMN
	if (b.bad)
		return -EBADMSG;

	/* The rows wanted, moved up in place (each is read before it is overwritten);
	 * all of them when nothing is filtered and the block is inside the range. */
	if (n && !filters(f) && rows[0].sec >= t0s && rows[n - 1].sec < t1s)
		k = n;
	for (i = k; i < n; i++) {
		const struct store_row *d = &rows[i];

		if (d->sec < t0s || d->sec >= t1s || !filter_ok(r, f, d))
			continue;
		if (k != i)
			rows[k] = *d;
		k++;
	}
	if (!k)
		return 0;
	r->st.rows += k;
	batch.rows = rows;
	batch.n = k;
	return fn(ctx, &batch);
}

/* store_reader__query() over the batches: one sample per row. */
struct sample_args {
	store_sample_fn fn;
	void *ctx;
};

static int batch_samples(void *ctx, const struct store_rows *b)
{
	const struct sample_args *a = ctx;
	struct store_sample smp;
	int ret;

	for (size_t i = 0; i < b->n; i++) {
		store_rows__sample(b, i, &smp);
		ret = a->fn(a->ctx, &smp);
		if (ret)
			return ret;
	}
	return 0;
}

struct set_query {
	store_rows_fn fn;
	void *ctx;
	uint32_t seg_base;
};

static int set_batch(void *ctx, const struct store_rows *b)
{
	const struct set_query *q = ctx;
	struct store_rows c = *b;

	c.seg += q->seg_base;
	return q->fn(q->ctx, &c);
}

static int set_query(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
		     const struct store_filter *f, store_rows_fn fn, void *ctx)
{
	for (uint32_t i = 0; i < r->n_subs; i++) {
		struct set_query q = {fn, ctx, r->seg_base[i]};
		int ret = store_reader__query_rows(r->subs[i], t0_ns, t1_ns, f, set_batch, &q);

		if (ret)
			return ret;
	}
	return 0;
}

/* What one block's decoded rows are given to (walk_rows()). */
typedef int (*rows_fn)(struct store_reader *r, struct rseg *s, const uint8_t *p, size_t len,
		       int64_t base_s, void *arg);

/* The data section of every block of the walk to fn; a block whose rows are
 * malformed (fn: -EBADMSG) is marked bad and passed over. */
static int walk_rows(struct store_reader *r, struct blk_iter *it, rows_fn fn, void *arg)
{
	struct rseg *s;
	struct rblock *b;
	int ret;

	while ((ret = blk_iter__next(r, it, &s, &b)) > 0) {
		struct store_block_hdr h;
		int n = store_read__section(r, s, b, true, &h);

		if (n == -ENOMEM)
			return n;
		if (n < 0)
			continue;
		r->st.blocks_read++;
		ret = fn(r, s, r->rawbuf, (size_t)n, (int64_t)(h.t_min_ns / NSEC_PER_SEC), arg);
		if (ret == -EBADMSG) {
			r->st.blocks_corrupt++;
			b->bad = true;
			store_read__notice(r, "%s: block at %u has malformed rows, skipped",
					   s->path, b->off);
			continue;
		}
		if (ret)
			return ret;
	}
	return ret;
}

struct query_args {
	int64_t t0s, t1s;
	const struct store_filter *f;
	store_rows_fn fn;
	void *ctx;
};

static int query_rows(struct store_reader *r, struct rseg *s, const uint8_t *p, size_t len,
		      int64_t base_s, void *arg)
{
	const struct query_args *q = arg;

	return emit_rows(r, s, p, len, base_s, q->t0s, q->t1s, q->f, q->fn, q->ctx);
}

int store_reader__query_rows(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			     const struct store_filter *f, store_rows_fn fn, void *ctx)
{
	struct blk_iter it;
	struct query_args q = {.f = f, .fn = fn, .ctx = ctx};

	if (r->subs)
		return set_query(r, t0_ns, t1_ns, f, fn, ctx);
	blk_iter__init(&it, t0_ns, t1_ns, 0, true);
	q.t0s = it.t0s;
	q.t1s = it.t1s;
	return walk_rows(r, &it, query_rows, &q);
}

int store_reader__query(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			const struct store_filter *f, store_sample_fn fn, void *ctx)
{
	struct sample_args a = {fn, ctx};

	return store_reader__query_rows(r, t0_ns, t1_ns, f, batch_samples, &a);
}

/* ---- the seconds holding rows: store_reader__records() */

int sec_runs__add(struct sec_runs *ss, int64_t a, int64_t b)
{
	if (ss->n) {
		struct sec_run *l = &ss->v[ss->n - 1];

		if (a >= l->a && a <= l->b + 1) {
			if (b > l->b)
				l->b = b;
			return 0;
		}
		if (a < l->a)
			ss->unsorted = true;
	}
	if (grow((void **)&ss->v, &ss->cap, ss->n + 1, sizeof(*ss->v)) < 0)
		return -ENOMEM;
	ss->v[ss->n++] = (struct sec_run){a, b};
	return 0;
}

static int run_cmp(const void *x, const void *y)
{
	const struct sec_run *p = x, *q = y;

	return p->a < q->a ? -1 : p->a > q->a;
}

uint64_t sec_runs__count(struct sec_runs *ss, int64_t *ret_first, int64_t *ret_last)
{
	int64_t end = INT64_MIN, last = 0;
	uint64_t n = 0;

	if (ss->unsorted) {
		qsort(ss->v, ss->n, sizeof(*ss->v), run_cmp);
		ss->unsorted = false;
	}
	/* The union of the runs, in order of their starts. */
	for (uint32_t i = 0; i < ss->n; i++) {
		int64_t a = MAX(ss->v[i].a, end);

		if (ss->v[i].b >= a)
			n += (uint64_t)(ss->v[i].b - a + 1);
		if (ss->v[i].b + 1 > end)
			end = ss->v[i].b + 1;
		if (!i || ss->v[i].b > last)
			last = ss->v[i].b;
	}
	*ret_first = ss->n ? ss->v[0].a : 0;
	*ret_last = last;
	return n;
}

/* The distinct seconds of one block's rows (its sec column only) onto arg, a struct sec_runs. */
static int block_secs(struct store_reader *r, struct rseg *s, const uint8_t *p, size_t len,
		      int64_t base_s, void *arg)
{
	struct sec_runs *ss = arg;
	struct rbuf b = {.p = p, .len = len};
	uint64_t n = rbuf__varint(&b), i;
	int64_t sec = base_s;

	(void)r, (void)s;
	if (b.bad || n > len / 13 + 1)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		uint64_t v = rbuf__varint(&b);

		sec += (int64_t)MIN(v, (uint64_t)UINT16_MAX);
		if (b.bad)
			return -EBADMSG;
		/* Rows are sorted by second: the rows of a second after its first add nothing. */
		if (ss->n && sec >= ss->v[ss->n - 1].a && sec <= ss->v[ss->n - 1].b)
			continue;
		if (sec_runs__add(ss, sec, sec) < 0)
			return -ENOMEM;
	}
	return 0;
}

/*
 * The seconds of a block whose index entry says all of them hold rows (the
 * steady case) are taken from the index; the others' rows are read: metrics
 * or trigger seconds without samples, blocks found by a scan (a rebuilt index).
 */
static int secs_collect(struct store_reader *r, struct sec_runs *ss)
{
	struct blk_iter it;
	int ret;

	if (r->subs) {
		for (uint32_t i = 0; i < r->n_subs; i++) {
			ret = secs_collect(r->subs[i], ss);
			if (ret < 0)
				return ret;
		}
		return 0;
	}
	for (uint32_t si = 0; si < r->n_seg; si++)
		for (uint32_t i = 0; i < r->segs[si].n; i++) {
			const struct rblock *b = &r->segs[si].blocks[i];

			if (b->bad || !rblock__full(b))
				continue;
			if (sec_runs__add(ss, (int64_t)b->t_min_s,
					  (int64_t)b->t_min_s + b->span_s) < 0)
				return -ENOMEM;
		}
	blk_iter__init(&it, 0, UINT64_MAX - NSEC_PER_SEC, 0, false);
	it.skip_full = true;
	return walk_rows(r, &it, block_secs, ss);
}

int store_reader__records(struct store_reader *r, int64_t *ret_first_s, int64_t *ret_last_s,
			  uint64_t *ret_records)
{
	struct sec_runs ss = {0};
	int ret = secs_collect(r, &ss);

	if (ret == 0)
		*ret_records = sec_runs__count(&ss, ret_first_s, ret_last_s);
	free(ss.v);
	return ret;
}
