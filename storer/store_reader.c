// SPDX-License-Identifier: MIT
/*
 * Store reader, the API (store.h): open a store dir or a set of them, free,
 * stats, the time range; picking a dir under a root. The jobs around it live
 * apart (store_reader_pvt.h):
 *
 *   open --> segments, headers, index, scan of the rest (store_read_index.c)
 *   query --> blocks of the range (store_read_block.c: checked sections,
 *             the walk) --> dictionary (store_read_dict.c) --> rows
 *             (store_read_rows.c)
 *   metrics, events, triggers (store_read_metrics.c)
 *
 * Trusts nothing on disk: a bad block is reported through the notice
 * callback and skipped; a block past the end of its file (torn tail) is
 * skipped; a block the index does not know of is found by scanning.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "store_dir_pvt.h"
#include "store_reader_pvt.h"

void store_read__notice(struct store_reader *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!r->notice)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	r->notice(r->ctx, msg);
}

int store_read__fail(struct store_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return err;
}

int store_reader__open_err(const char *dir, store_notice_fn fn, void *ctx,
			   struct store_reader **ret, char *err, size_t errlen)
{
	struct store_reader *r;
	int e;

	if (err && errlen)
		err[0] = 0;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->notice = fn;
	r->ctx = ctx;
	r->dict_seg = -1;
	snprintf(r->dir, sizeof(r->dir), "%s", dir);
	r->dctx = ZSTD_createDCtx();
	r->fptrs = calloc(STORE_MAX_FRAMES + 1, sizeof(*r->fptrs));
	if (!r->dctx || !r->fptrs) {
		e = -ENOMEM;
		goto out_free;
	}
	e = store_read__segs(r);
	if (e < 0)
		goto out_free;
	if (!r->n_seg) {
		e = store_read__fail(r, -ENOENT, "'%s' holds no cpa store (no seg_*.cps files)",
				     dir);
		goto out_free;
	}
	e = store_read__blocks(r);
	if (e < 0)
		goto out_free;
	*ret = r;
	return 0;

out_free:
	if (err && errlen)
		snprintf(err, errlen, "%s", r->err[0] ? r->err : strerror(-e));
	store_reader__free(r);
	return e;
}

int store_reader__open(const char *dir, store_notice_fn fn, void *ctx, struct store_reader **ret)
{
	return store_reader__open_err(dir, fn, ctx, ret, NULL, 0);
}

const char *store_reader__error(const struct store_reader *r)
{
	return r->err;
}

void store_reader__free(struct store_reader *r)
{
	uint32_t i;

	if (!r)
		return;
	for (i = 0; i < r->n_subs; i++)
		store_reader__free(r->subs[i]);
	free(r->subs);
	free(r->seg_base);
	for (i = 0; i < r->n_seg; i++) {
		rseg__close(&r->segs[i]);
		free(r->segs[i].blocks);
	}
	free(r->segs);
	rdict__free(&r->dict);
	ZSTD_freeDCtx(r->dctx);
	free(r->zbuf);
	free(r->rawbuf);
	free(r->fptrs);
	free(r->rowbuf);
	free(r);
}

static void stats_add(struct store_read_stats *to, const struct store_read_stats *s)
{
	to->blocks_indexed += s->blocks_indexed;
	to->blocks_read += s->blocks_read;
	to->dict_reads += s->dict_reads;
	to->blocks_corrupt += s->blocks_corrupt;
	to->blocks_torn += s->blocks_torn;
	to->blocks_recovered += s->blocks_recovered;
	to->bytes_read += s->bytes_read;
	to->rows += s->rows;
	to->bytes_skipped += s->bytes_skipped;
	to->segs_skipped += s->segs_skipped;
}

void store_reader__stats(const struct store_reader *r, struct store_read_stats *ret)
{
	*ret = r->st;
	for (uint32_t i = 0; i < r->n_subs; i++) {
		struct store_read_stats s;

		store_reader__stats(r->subs[i], &s);
		stats_add(ret, &s);
	}
}

static uint32_t max_seg_no(const struct store_reader *r)
{
	return r->n_seg ? r->segs[r->n_seg - 1].seg_no : 0;
}

int store_reader__open_set(const char *const *dirs, uint32_t n, store_notice_fn fn, void *ctx,
			   struct store_reader **ret, char *err, size_t errlen)
{
	struct store_reader *r;
	uint64_t base = 0;
	int e;

	if (n == 1)
		return store_reader__open_err(dirs[0], fn, ctx, ret, err, errlen);
	if (!n)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->subs = calloc(n, sizeof(*r->subs));
	r->seg_base = calloc(n, sizeof(*r->seg_base));
	if (!r->subs || !r->seg_base) {
		store_reader__free(r);
		return -ENOMEM;
	}
	snprintf(r->dir, sizeof(r->dir), "%s", dirs[n - 1]);
	for (uint32_t i = 0; i < n; i++) {
		e = store_reader__open_err(dirs[i], fn, ctx, &r->subs[r->n_subs], err, errlen);
		if (e < 0) {
			store_reader__free(r);
			return e;
		}
		r->seg_base[r->n_subs] = (uint32_t)base;
		base += max_seg_no(r->subs[r->n_subs]);
		r->n_subs++;
		if (base > UINT32_MAX / 2) {
			store_reader__free(r);
			return -E2BIG;
		}
	}
	*ret = r;
	return 0;
}

/* A copy of r's segments and blocks for a fork: files not open, no dictionary applied. */
static int segs_copy(struct store_reader *w, const struct store_reader *r)
{
	w->segs = calloc(MAX(r->n_seg, 1u), sizeof(*w->segs));
	if (!w->segs)
		return -ENOMEM;
	w->cap_seg = MAX(r->n_seg, 1u);
	for (uint32_t i = 0; i < r->n_seg; i++) {
		const struct rseg *s = &r->segs[i];
		struct rseg *d = &w->segs[w->n_seg];

		*d = *s;
		d->fd = -1;
		d->blocks = malloc((size_t)MAX(s->n, 1u) * sizeof(*d->blocks));
		if (!d->blocks)
			return -ENOMEM;
		d->cap = MAX(s->n, 1u);
		w->n_seg++;
		for (uint32_t k = 0; k < s->n; k++) {
			d->blocks[k] = s->blocks[k];
			d->blocks[k].dict_done = false;
			if (d->blocks[k].bad)
				d->blocks[k].bad |= RB_KNOWN;
		}
	}
	return 0;
}

int store_reader__fork(const struct store_reader *r, store_notice_fn fn, void *ctx,
		       struct store_reader **ret)
{
	struct store_reader *w = calloc(1, sizeof(*w));

	if (!w)
		return -ENOMEM;
	snprintf(w->dir, sizeof(w->dir), "%s", r->dir);
	w->notice = fn;
	w->ctx = ctx;
	w->dict_seg = -1;
	if (r->subs) {
		w->subs = calloc(r->n_subs, sizeof(*w->subs));
		w->seg_base = calloc(r->n_subs, sizeof(*w->seg_base));
		if (!w->subs || !w->seg_base)
			goto fail;
		for (; w->n_subs < r->n_subs; w->n_subs++) {
			w->seg_base[w->n_subs] = r->seg_base[w->n_subs];
			if (store_reader__fork(r->subs[w->n_subs], fn, ctx, &w->subs[w->n_subs]) <
			    0)
				goto fail;
		}
		*ret = w;
		return 0;
	}
	w->dctx = ZSTD_createDCtx();
	w->fptrs = calloc(STORE_MAX_FRAMES + 1, sizeof(*w->fptrs));
	if (!w->dctx || !w->fptrs || segs_copy(w, r) < 0)
		goto fail;
	*ret = w;
	return 0;

fail:
	store_reader__free(w);
	return -ENOMEM;
}

void store_reader__sync(struct store_reader *r, struct store_reader *w)
{
	struct store_read_stats *a = &r->st, *b = &w->st;

	for (uint32_t i = 0; i < r->n_subs && i < w->n_subs; i++)
		store_reader__sync(r->subs[i], w->subs[i]);
	/* a block both found bad was counted by both: once here */
	for (uint32_t si = 0; si < r->n_seg && si < w->n_seg; si++)
		for (uint32_t k = 0; k < r->segs[si].n && k < w->segs[si].n; k++) {
			struct rblock *rb = &r->segs[si].blocks[k];
			struct rblock *wb = &w->segs[si].blocks[k];

			if (rb->off != wb->off || (wb->bad & RB_KNOWN) || !(wb->bad | rb->bad))
				continue;
			if (wb->bad && !rb->bad)
				rb->bad = wb->bad;
			else if (wb->bad == RB_TORN && b->blocks_torn)
				b->blocks_torn--;
			else if (wb->bad && b->blocks_corrupt)
				b->blocks_corrupt--;
			wb->bad = rb->bad | RB_KNOWN; /* (one r found: w skips it too) */
		}
	stats_add(a, b); /* (a fork's open-time counts are 0) */
	memset(b, 0, sizeof(*b));
}

void store_reader__join(struct store_reader *r, struct store_reader *w)
{
	store_reader__sync(r, w);
	store_reader__free(w);
}

/* Exact ns time of a block edge from its header; the index has seconds only. */
static uint64_t block_edge_ns(struct store_reader *r, struct rseg *s, const struct rblock *b,
			      bool first)
{
	struct store_block_hdr h;
	uint64_t fallback = first ? (uint64_t)b->t_min_s * NSEC_PER_SEC
				  : ((uint64_t)b->t_min_s + b->span_s) * NSEC_PER_SEC;
	int fd = store_open_regular(s->path);
	int e;

	r->st.bytes_read += sizeof(h);
	if (fd < 0)
		return fallback;
	e = store_read__pread_exact(fd, &h, sizeof(h), b->off);
	close(fd);
	if (e < 0 || !store_read__hdr_ok(&h))
		return fallback;
	return first ? h.t_min_ns : h.t_max_ns;
}

int store_reader__range(struct store_reader *r, uint64_t *ret_first_ns, uint64_t *ret_last_ns,
			uint64_t *ret_records)
{
	const struct rblock *fb = NULL, *lb = NULL;
	struct rseg *fs = NULL, *ls = NULL;
	struct sec_runs iv = {0};
	uint64_t records = 0;
	int64_t run0, run1; /* unused: sec_runs__count() gives them */
	uint32_t si, i;

	if (r->subs) {
		bool any = false;

		*ret_records = 0;
		for (i = 0; i < r->n_subs; i++) {
			uint64_t a, b, k;

			if (store_reader__range(r->subs[i], &a, &b, &k) < 0)
				continue;
			if (!any || a < *ret_first_ns)
				*ret_first_ns = a;
			if (!any || b > *ret_last_ns)
				*ret_last_ns = b;
			*ret_records += k;
			any = true;
		}
		return any ? 0
			   : store_read__fail(r, -ENODATA, "store '%s' holds no records", r->dir);
	}

	/*
	 * Records = seconds holding data. A block whose seconds are all present
	 * (n_sec == span + 1, the steady case) is an interval; intervals are
	 * merged so a second split over two blocks counts once. A sparse block
	 * adds its own count.
	 */
	for (si = 0; si < r->n_seg; si++) {
		struct rseg *s = &r->segs[si];

		for (i = 0; i < s->n; i++) {
			const struct rblock *b = &s->blocks[i];

			if (b->bad)
				continue;
			if (b->n_sec == (uint32_t)b->span_s + 1) {
				if (sec_runs__add(&iv, (int64_t)b->t_min_s,
						  (int64_t)b->t_min_s + b->span_s) < 0) {
					free(iv.v);
					return -ENOMEM;
				}
			} else {
				records += b->n_sec;
			}
			if (!fb || b->t_min_s < fb->t_min_s) {
				fb = b;
				fs = s;
			}
			if (!lb || (uint64_t)b->t_min_s + b->span_s >=
					   (uint64_t)lb->t_min_s + lb->span_s) {
				lb = b;
				ls = s;
			}
		}
	}
	records += sec_runs__count(&iv, &run0, &run1);
	free(iv.v);
	if (!fb)
		return store_read__fail(r, -ENODATA, "store '%s' holds no records", r->dir);
	*ret_first_ns = block_edge_ns(r, fs, fb, true);
	*ret_last_ns = block_edge_ns(r, ls, lb, false);
	if (*ret_last_ns < *ret_first_ns)
		*ret_last_ns = *ret_first_ns;
	*ret_records = records;
	return 0;
}

/* ------------------------------------------------ picking a dir under a root */

static long local_tod(uint64_t ns)
{
	time_t t = (time_t)(ns / NSEC_PER_SEC);
	struct tm tm;

	localtime_r(&t, &tm);
	return tm.tm_hour * 3600L + tm.tm_min * 60L + tm.tm_sec;
}

struct shut_ctx {
	const char *root;
	char *buf;
	size_t len;
};

/* A cpa_* dir of root that cannot be listed (not readable by this user): its
 * path into buf, -errno; 0 for one that can, or is no dir. */
static int shut_dir(void *ctx, const char *name)
{
	struct shut_ctx *c = ctx;
	DIR *d;

	snprintf(c->buf, c->len, "%s/%s", c->root, name);
	d = opendir(c->buf);
	if (d) {
		closedir(d);
		return 0;
	}
	return errno == ENOTDIR || errno == ENOENT ? 0 : -errno;
}

/*
 * The store dir under root for local time-of-day tod_s (-1: the newest): the
 * newest cpa_* dir whose records span that time of day, else the newest one
 * holding records (a run that captured nothing leaves an empty dir), else the
 * newest.
 */
int store_root__pick(const char *root, long tod_s, char *buf, size_t len)
{
	char **names;
	uint32_t n, i;
	bool have_data = false;
	int ret = store_root__list(root, &names, &n);

	if (ret < 0)
		return ret;
	if (!n) {
		struct shut_ctx c = {root, buf, len};

		store_root__list_free(names, n);
		/* none readable: say why, not that there is none */
		ret = store_dir__for_each_store(root, shut_dir, &c);
		return ret < 0 ? ret : -ENOENT;
	}
	snprintf(buf, len, "%s/%s", root, names[n - 1]);
	for (i = n; i-- > 0;) {
		char p[PATH_MAX + 256];
		struct store_reader *r;
		uint64_t a, b, recs;
		bool data, hit;

		snprintf(p, sizeof(p), "%s/%s", root, names[i]);
		if (store_reader__open(p, NULL, NULL, &r) < 0)
			continue;
		data = store_reader__range(r, &a, &b, &recs) == 0;
		hit = data && tod_s >= 0 && local_tod(a) <= tod_s && tod_s <= local_tod(b);
		store_reader__free(r);
		if (data && !have_data) {
			snprintf(buf, len, "%s", p);
			have_data = true;
		}
		if (hit)
			snprintf(buf, len, "%s", p);
		if (hit || (have_data && tod_s < 0))
			break;
	}
	store_root__list_free(names, n);
	return 0;
}

#define DAY_NAME_LEN 10 /* "cpa_YYMMDD" */

int store_root__day_dirs(const char *root, const char *picked, char ***ret_dirs, uint32_t *ret_n)
{
	const char *base = strrchr(picked, '/') ? strrchr(picked, '/') + 1 : picked;
	char **names = NULL, **out;
	uint32_t n = 0, k = 0;
	int r = store_root__list(root, &names, &n);

	if (r < 0)
		return r;
	out = calloc(n + 1, sizeof(*out));
	if (!out) {
		store_root__list_free(names, n);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++) {
		char p[PATH_MAX + 256];
		struct store_reader *sr;
		uint64_t a, b, recs;
		bool data;

		if (strncmp(names[i], base, DAY_NAME_LEN) ||
		    (names[i][DAY_NAME_LEN] && names[i][DAY_NAME_LEN] != '_'))
			continue;
		snprintf(p, sizeof(p), "%s/%s", root, names[i]);
		if (store_reader__open(p, NULL, NULL, &sr) < 0)
			continue;
		data = store_reader__range(sr, &a, &b, &recs) == 0;
		store_reader__free(sr);
		if (!data)
			continue;
		out[k] = strdup(p);
		if (!out[k])
			break;
		k++;
	}
	store_root__list_free(names, n);
	*ret_dirs = out;
	*ret_n = k;
	return 0;
}
