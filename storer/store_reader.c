// SPDX-License-Identifier: MIT
/*
 * Store reader. Trusts nothing on disk: every length is checked against the
 * file size and the section caps before anything is allocated, every section
 * against its crc32c, every id against the dictionary it names. A bad block
 * is reported through the notice callback and skipped; a block past the end
 * of its file (torn tail) is skipped; a block the index does not know of is
 * found by scanning between and after the indexed blocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/cpulist.h"
#include "common/macro.h"
#include "common/policy.h"
#include "common/timeutil.h"
#include "store.h"
#include "store_dir_pvt.h"
#include "store_fmt.h"
#include "store_metrics_pvt.h"

#define MAX_INDEX_BYTES (64u << 20)
/* A gap in dictionary ids (a lost section) larger than this is a lie. */
#define DICT_MAX_GAP (1u << 20)

struct rblock {
	uint32_t off, len;
	uint32_t t_min_s;
	uint16_t span_s;
	uint8_t n_sec, flags;
	bool dict_done; /* its dictionary section was applied (or found bad) */
	bool bad;
};

struct rmod {
	const char *path;
	uint8_t bid_len;
	uint8_t bid[CPA_BUILD_ID_MAX];
};

struct rstack {
	uint32_t off; /* into stack_frames */
	uint16_t n, nk;
};

struct rdict {
	char **strs;
	uint32_t n_str, cap_str;
	struct rmod *mods;
	uint32_t n_mod, cap_mod;
	struct store_frame *frames;
	uint32_t n_frame, cap_frame;
	struct rstack *stacks;
	uint32_t n_stack, cap_stack;
	uint32_t *stack_frames;
	uint32_t n_sf, cap_sf;
};

struct rseg {
	uint32_t seg_no;
	bool skipped; /* not read: not a regular file, a copy of another, unreadable */
	char path[PATH_MAX + 256];
	int fd;
	uint64_t size;
	struct rblock *blocks;
	uint32_t n, cap;
};

struct store_reader {
	char dir[PATH_MAX];
	store_notice_fn notice;
	void *ctx;
	char err[512];
	struct rseg *segs;
	uint32_t n_seg, cap_seg;
	int dict_seg; /* index of the segment whose dictionary is loaded, -1 none */
	struct rdict dict;
	ZSTD_DCtx *dctx;
	uint8_t *zbuf, *rawbuf;
	size_t zcap, rawcap;
	const struct store_frame **fptrs;
	struct store_read_stats st;
	/* A set of store dirs read as one (store_reader__open_set()): the
	 * readers of the dirs, oldest first, and the number added to each
	 * one's segment numbers so (seg, stack_id) stays unique. */
	struct store_reader **subs;
	uint32_t *seg_base;
	uint32_t n_subs;
};

static const char LOST_DICT[] = STORE_DICT_LOST;
static const struct store_frame unknown_frame = {
	.name = "[unknown stack]", .module = "", .flags = CPA_FF_MARKER};

_printf_(2, 3) static void notice(struct store_reader *r, const char *fmt, ...)
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

_printf_(3, 4) static int fail(struct store_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return err;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t esz)
{
	uint32_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	if (need > (1u << 28))
		return -ENOMEM;
	nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	np = realloc(*p, (size_t)nc * esz);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

static ssize_t pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

/* All of len bytes at off: 0, -ENODATA when the file ends first, or -errno. */
static int pread_exact(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n = pread_full(fd, buf, len, off);

	if (n < 0)
		return (int)n;
	return (size_t)n == len ? 0 : -ENODATA;
}

static bool block_hdr_ok(const struct store_block_hdr *h)
{
	return h->magic == STORE_BLOCK_MAGIC &&
	       h->crc == store_crc(h, offsetof(struct store_block_hdr, crc)) &&
	       h->type == STORE_BLOCK_DATA && h->dict_rawlen <= STORE_MAX_SECTION &&
	       h->data_rawlen <= STORE_MAX_SECTION && h->dict_zlen <= STORE_MAX_SECTION &&
	       h->data_zlen <= STORE_MAX_SECTION && h->t_max_ns >= h->t_min_ns &&
	       h->t_max_ns / NSEC_PER_SEC - h->t_min_ns / NSEC_PER_SEC <= UINT16_MAX &&
	       (h->dict_zlen == 0) == (h->dict_rawlen == 0);
}

static uint32_t block_len(const struct store_block_hdr *h)
{
	return (uint32_t)sizeof(*h) + h->dict_zlen + h->data_zlen;
}

/* ------------------------------------------------------------ dictionary */

static void dict_clear(struct rdict *d)
{
	uint32_t i;

	for (i = 0; i < d->n_str; i++)
		if (d->strs[i] != LOST_DICT)
			free(d->strs[i]);
	d->n_str = d->n_mod = d->n_frame = d->n_stack = d->n_sf = 0;
}

static void dict_free(struct rdict *d)
{
	dict_clear(d);
	free(d->strs);
	free(d->mods);
	free(d->frames);
	free(d->stacks);
	free(d->stack_frames);
	memset(d, 0, sizeof(*d));
}

static const char *dict_str(const struct rdict *d, uint64_t id)
{
	if (!id)
		return "";
	if (id > d->n_str)
		return LOST_DICT;
	return d->strs[id - 1];
}

/* Entries come with their first id; a gap (a lost dictionary section) is
 * filled with placeholders so later ids still line up. */
static int dict_apply(struct rdict *d, const uint8_t *p, size_t len)
{
	struct rbuf b = {.p = p, .len = len};
	uint64_t first, n, i, j;

	/* strings */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_str + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_str + 1 < first) {
		if (grow((void **)&d->strs, &d->cap_str, d->n_str + 1, sizeof(char *)) < 0)
			return -ENOMEM;
		d->strs[d->n_str++] = (char *)LOST_DICT;
	}
	for (i = 0; i < n; i++) {
		uint64_t sl = rbuf__varint(&b);
		const uint8_t *s = rbuf__bytes(&b, sl);
		char *c;

		if (!s)
			return -EBADMSG;
		if (first + i <= d->n_str)
			continue;
		if (grow((void **)&d->strs, &d->cap_str, d->n_str + 1, sizeof(char *)) < 0)
			return -ENOMEM;
		c = malloc(sl + 1);
		if (!c)
			return -ENOMEM;
		memcpy(c, s, sl);
		c[sl] = 0;
		d->strs[d->n_str++] = c;
	}
	/* modules */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_mod + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_mod + 1 < first) {
		if (grow((void **)&d->mods, &d->cap_mod, d->n_mod + 1, sizeof(*d->mods)) < 0)
			return -ENOMEM;
		d->mods[d->n_mod++] = (struct rmod){.path = LOST_DICT};
	}
	for (i = 0; i < n; i++) {
		struct rmod m = {0};
		const uint8_t *bid;

		rbuf__varint(&b); /* kind */
		m.path = dict_str(d, rbuf__varint(&b));
		m.bid_len = (uint8_t)rbuf__varint(&b);
		if (m.bid_len > CPA_BUILD_ID_MAX)
			return -EBADMSG;
		bid = rbuf__bytes(&b, m.bid_len);
		if (!bid)
			return -EBADMSG;
		memcpy(m.bid, bid, m.bid_len);
		if (first + i <= d->n_mod)
			continue;
		if (grow((void **)&d->mods, &d->cap_mod, d->n_mod + 1, sizeof(*d->mods)) < 0)
			return -ENOMEM;
		d->mods[d->n_mod++] = m;
	}
	/* frames */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_frame + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_frame + 1 < first) {
		if (grow((void **)&d->frames, &d->cap_frame, d->n_frame + 1, sizeof(*d->frames)) <
		    0)
			return -ENOMEM;
		d->frames[d->n_frame++] = (struct store_frame){
			.name = LOST_DICT, .module = "", .flags = CPA_FF_MARKER};
	}
	for (i = 0; i < n; i++) {
		struct store_frame f = {0};
		uint64_t name = rbuf__varint(&b), mod = rbuf__varint(&b);

		f.flags = (uint32_t)rbuf__varint(&b);
		f.offset = rbuf__varint(&b);
		if (b.bad)
			return -EBADMSG;
		f.name = dict_str(d, name);
		f.module = "";
		if (mod && mod <= d->n_mod) {
			const struct rmod *m = &d->mods[mod - 1];

			f.module = m->path;
			f.build_id_len = m->bid_len;
			memcpy(f.build_id, m->bid, m->bid_len);
		}
		if (first + i <= d->n_frame)
			continue;
		if (grow((void **)&d->frames, &d->cap_frame, d->n_frame + 1, sizeof(*d->frames)) <
		    0)
			return -ENOMEM;
		d->frames[d->n_frame++] = f;
	}
	/* stacks */
	first = rbuf__varint(&b);
	n = rbuf__varint(&b);
	if (b.bad || n > len || first == 0 || first > (1u << 28))
		return -EBADMSG;
	if (first > d->n_stack + 1 + DICT_MAX_GAP)
		return -EBADMSG;
	while (d->n_stack + 1 < first) {
		if (grow((void **)&d->stacks, &d->cap_stack, d->n_stack + 1, sizeof(*d->stacks)) <
		    0)
			return -ENOMEM;
		d->stacks[d->n_stack++] = (struct rstack){.n = 0};
	}
	for (i = 0; i < n; i++) {
		uint64_t nf = rbuf__varint(&b), nk = rbuf__varint(&b);
		struct rstack s = {.off = d->n_sf, .n = (uint16_t)nf, .nk = (uint16_t)nk};
		int64_t prev = 0;
		bool keep = first + i > d->n_stack;

		if (b.bad || nf > STORE_MAX_FRAMES || nk > nf)
			return -EBADMSG;
		if (keep && grow((void **)&d->stack_frames, &d->cap_sf, d->n_sf + (uint32_t)nf,
				 sizeof(uint32_t)) < 0)
			return -ENOMEM;
		for (j = 0; j < nf; j++) {
			int64_t fid = prev + unzigzag(rbuf__varint(&b));

			prev = fid;
			if (b.bad)
				return -EBADMSG;
			if (keep)
				d->stack_frames[d->n_sf++] =
					fid >= 1 && (uint64_t)fid <= d->n_frame ? (uint32_t)fid : 0;
		}
		if (!keep)
			continue;
		if (grow((void **)&d->stacks, &d->cap_stack, d->n_stack + 1, sizeof(*d->stacks)) <
		    0)
			return -ENOMEM;
		d->stacks[d->n_stack++] = s;
	}
	return 0;
}

/* ------------------------------------------------------------ block I/O */

static int ensure(uint8_t **p, size_t *cap, size_t need)
{
	uint8_t *np;

	if (need <= *cap)
		return 0;
	np = realloc(*p, need);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = need;
	return 0;
}

/*
 * Read a block's header and its dictionary section (data too when want_data),
 * verify, and decompress the wanted section into r->rawbuf. Returns the raw
 * length, or -EBADMSG (corrupt, reported), -ENODATA (torn), -errno.
 */
static int read_section(struct store_reader *r, struct rseg *s, struct rblock *b, bool data,
			struct store_block_hdr *ret_h)
{
	struct store_block_hdr h;
	uint32_t zoff, zlen, rawlen, crc, want;
	size_t got;
	int e;

	if ((uint64_t)b->off + b->len > s->size) {
		r->st.blocks_torn++;
		b->bad = true;
		notice(r, "%s: block at %u runs past the end of the file (torn tail), skipped",
		       s->path, b->off);
		return -ENODATA;
	}
	want = data ? b->len : MIN(b->len, (uint32_t)sizeof(h) + STORE_MAX_SECTION);
	if (!data) {
		/* Header first, then just the dictionary section. */
		e = pread_exact(s->fd, &h, sizeof(h), b->off);
		if (e == -ENODATA)
			goto torn;
		if (e < 0)
			return e;
		if (!block_hdr_ok(&h) || block_len(&h) != b->len)
			goto corrupt;
		want = (uint32_t)sizeof(h) + h.dict_zlen;
	}
	e = ensure(&r->zbuf, &r->zcap, want);
	if (e < 0)
		return e;
	e = pread_exact(s->fd, r->zbuf, want, b->off);
	if (e == -ENODATA)
		goto torn;
	if (e < 0)
		return e;
	r->st.bytes_read += want;
	memcpy(&h, r->zbuf, sizeof(h));
	if (!block_hdr_ok(&h) || block_len(&h) != b->len)
		goto corrupt;
	if (h.major > STORE_VERSION_MAJOR)
		goto corrupt;
	if (data) {
		zoff = (uint32_t)sizeof(h) + h.dict_zlen;
		zlen = h.data_zlen;
		rawlen = h.data_rawlen;
		crc = h.data_crc;
	} else {
		zoff = sizeof(h);
		zlen = h.dict_zlen;
		rawlen = h.dict_rawlen;
		crc = h.dict_crc;
	}
	if (store_crc(r->zbuf + zoff, zlen) != crc)
		goto corrupt;
	if (ret_h)
		*ret_h = h;
	if (!zlen)
		return 0;
	e = ensure(&r->rawbuf, &r->rawcap, rawlen);
	if (e < 0)
		return e;
	got = ZSTD_decompressDCtx(r->dctx, r->rawbuf, rawlen, r->zbuf + zoff, zlen);
	if (ZSTD_isError(got) || got != rawlen)
		goto corrupt;
	return (int)rawlen;

torn:
	r->st.blocks_torn++;
	b->bad = true;
	notice(r, "%s: block at %u is cut short (torn tail), skipped", s->path, b->off);
	return -ENODATA;
corrupt:
	r->st.blocks_corrupt++;
	b->bad = true;
	notice(r, "%s: block at %u is corrupt (bad header, length or checksum), skipped", s->path,
	       b->off);
	return -EBADMSG;
}

static void seg_close(struct rseg *s)
{
	if (s->fd >= 0)
		close(s->fd);
	s->fd = -1;
}

/* Load the dictionary of segment si up to and including block upto. */
static int load_dict(struct store_reader *r, uint32_t si, uint32_t upto)
{
	struct rseg *s = &r->segs[si];
	uint32_t i;

	if (r->dict_seg != (int)si) {
		dict_clear(&r->dict);
		if (r->dict_seg >= 0) {
			struct rseg *o = &r->segs[r->dict_seg];

			for (i = 0; i < o->n; i++)
				o->blocks[i].dict_done = false;
		}
		r->dict_seg = (int)si;
	}
	for (i = 0; i <= upto && i < s->n; i++) {
		struct rblock *b = &s->blocks[i];
		int n;

		if (b->dict_done || !(b->flags & STORE_BF_DICT))
			continue;
		b->dict_done = true;
		if (b->bad)
			continue;
		n = read_section(r, s, b, false, NULL);
		if (n == -ENOMEM)
			return n;
		if (n < 0)
			continue;
		r->st.dict_reads++;
		if (dict_apply(&r->dict, r->rawbuf, (size_t)n) < 0) {
			r->st.blocks_corrupt++;
			b->bad = true;
			notice(r, "%s: block at %u has a malformed dictionary, skipped", s->path,
			       b->off);
		}
	}
	return 0;
}

/* ------------------------------------------------------------ rows */

struct drow {
	int64_t sec;
	uint64_t cgroup, count, weight;
	uint32_t pid, tid, cpu, kind, comm, pcomm, env, probe, stack;
};

static bool filter_ok(const struct store_reader *r, const struct store_filter *f,
		      const struct drow *d)
{
	if (!f)
		return true;
	if (f->pid >= 0 && (int64_t)d->pid != f->pid)
		return false;
	if (f->cgroup_id >= 0 && d->cgroup != (uint64_t)f->cgroup_id)
		return false;
	if (f->probe_id >= 0 && (d->kind != CPA_KIND_PROBE || (int64_t)d->probe != f->probe_id))
		return false;
	if (f->cpu_set && !cpulist__test(f->cpu_set, f->cpu_set_bits, d->cpu))
		return false;
	if (f->comm && strcmp(dict_str(&r->dict, d->comm), f->comm) &&
	    strcmp(dict_str(&r->dict, d->pcomm), f->comm))
		return false;
	if (f->env && strcmp(dict_str(&r->dict, d->env), f->env))
		return false;
	return true;
}

static int emit_rows(struct store_reader *r, struct rseg *s, const uint8_t *p, size_t len,
		     int64_t base_s, int64_t t0s, int64_t t1s, const struct store_filter *f,
		     store_sample_fn fn, void *ctx)
{
	struct rbuf b = {.p = p, .len = len};
	_cleanup_free_ struct drow *rows = NULL;
	uint64_t n = rbuf__varint(&b), i;
	int ret;

	/* A row costs at least 13 bytes: a larger count is a lie. */
	if (b.bad || n > len / 13 + 1)
		return -EBADMSG;
	rows = calloc(n ? n : 1, sizeof(*rows));
	if (!rows)
		return -ENOMEM;
#define COLUMN(stmt)                                                     \
	do {                                                             \
		for (i = 0; i < n; i++) {                                \
			struct drow *d = &rows[i];                       \
			const struct drow *pv = i ? &rows[i - 1] : NULL; \
			uint64_t v = rbuf__varint(&b);                   \
			(void)pv;                                        \
			stmt;                                            \
		}                                                        \
	} while (0)
	COLUMN(d->sec = (pv ? pv->sec : base_s) + (int64_t)MIN(v, (uint64_t)UINT16_MAX));
	COLUMN(d->pid = (uint32_t)((pv ? (int64_t)pv->pid : 0) + unzigzag(v)));
	COLUMN(d->tid = (uint32_t)((int64_t)d->pid + unzigzag(v)));
	COLUMN(d->cpu = (uint32_t)v);
	COLUMN(d->cgroup = (pv ? pv->cgroup : 0) + (uint64_t)unzigzag(v));
	COLUMN(d->kind = (uint32_t)v);
	COLUMN(d->comm = (uint32_t)((pv ? (int64_t)pv->comm : 0) + unzigzag(v)));
	COLUMN(d->pcomm = (uint32_t)((pv ? (int64_t)pv->pcomm : 0) + unzigzag(v)));
	COLUMN(d->env = (uint32_t)((pv ? (int64_t)pv->env : 0) + unzigzag(v)));
	COLUMN(d->probe = (uint32_t)v);
	COLUMN(d->stack = (uint32_t)((pv ? (int64_t)pv->stack : 0) + unzigzag(v)));
	COLUMN(d->count = v);
	COLUMN(d->weight = d->count + (uint64_t)unzigzag(v));
#undef COLUMN
	if (b.bad)
		return -EBADMSG;

	for (i = 0; i < n; i++) {
		const struct drow *d = &rows[i];
		struct store_sample smp;
		uint32_t j;

		if (d->sec < t0s || d->sec >= t1s || !filter_ok(r, f, d))
			continue;
		memset(&smp, 0, sizeof(smp));
		smp.sec = d->sec;
		smp.cgroup_id = d->cgroup;
		smp.count = d->count;
		smp.weight = d->weight;
		smp.pid = d->pid;
		smp.tid = d->tid;
		smp.cpu = d->cpu;
		smp.probe_id = d->probe;
		smp.kind = (uint16_t)d->kind;
		smp.comm = dict_str(&r->dict, d->comm);
		smp.pcomm = dict_str(&r->dict, d->pcomm);
		smp.env = dict_str(&r->dict, d->env);
		smp.seg = s->seg_no;
		smp.stack_id = d->stack;
		if (d->stack >= 1 && d->stack <= r->dict.n_stack &&
		    r->dict.stacks[d->stack - 1].n) {
			const struct rstack *st = &r->dict.stacks[d->stack - 1];

			for (j = 0; j < st->n; j++) {
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
		r->st.rows++;
		ret = fn(ctx, &smp);
		if (ret)
			return ret;
	}
	return 0;
}

struct set_query {
	store_sample_fn fn;
	void *ctx;
	uint32_t seg_base;
};

static int set_row(void *ctx, const struct store_sample *s)
{
	struct set_query *q = ctx;
	struct store_sample c = *s;

	c.seg += q->seg_base;
	return q->fn(q->ctx, &c);
}

static int set_query(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
		     const struct store_filter *f, store_sample_fn fn, void *ctx)
{
	for (uint32_t i = 0; i < r->n_subs; i++) {
		struct set_query q = {fn, ctx, r->seg_base[i]};
		int ret = store_reader__query(r->subs[i], t0_ns, t1_ns, f, set_row, &q);

		if (ret)
			return ret;
	}
	return 0;
}

/* ------------------------------------------------------------ block walk */

static bool block_in(const struct rblock *b, int64_t t0s, int64_t t1s)
{
	return (int64_t)b->t_min_s < t1s && (int64_t)b->t_min_s + b->span_s >= t0s;
}

/* The segment's file open (on demand; closed once a walk is done with it).
 * 0, or -errno with a notice: the caller skips the segment. */
static int seg_ensure_open(struct store_reader *r, struct rseg *s)
{
	if (s->fd >= 0)
		return 0;
	s->fd = store_open_regular(s->path);
	if (s->fd >= 0)
		return 0;
	notice(r, "%s: %s, skipped", s->path, strerror(-s->fd));
	s->fd = -1;
	return -EIO;
}

/*
 * The blocks of seconds [t0s, t1s) carrying the flags need, segment by
 * segment in block order: each segment is opened as the walk enters it and
 * closed as it leaves; with dict, the segment's dictionary is loaded up to
 * its last block in the range first. Bad blocks are passed over.
 */
struct blk_iter {
	int64_t t0s, t1s;
	uint8_t need; /* STORE_BF_* the block must have */
	bool dict;
	uint32_t si, i;
	int64_t last; /* last block of segment si in the range; -1: not entered */
};

static void blk_iter_init(struct blk_iter *it, uint64_t t0_ns, uint64_t t1_ns, uint8_t need,
			  bool dict)
{
	*it = (struct blk_iter){
		.t0s = (int64_t)(t0_ns / NSEC_PER_SEC),
		.t1s = (int64_t)((t1_ns + NSEC_PER_SEC - 1) / NSEC_PER_SEC),
		.need = need,
		.dict = dict,
		.last = -1,
	};
}

/* 1 with the next block in *ret_s, *ret_b; 0 at the end; -ENOMEM. */
static int blk_next(struct store_reader *r, struct blk_iter *it, struct rseg **ret_s,
		    struct rblock **ret_b)
{
	for (; it->si < r->n_seg; it->si++, it->last = -1) {
		struct rseg *s = &r->segs[it->si];

		if (it->last < 0) {
			for (uint32_t i = 0; i < s->n; i++)
				if ((s->blocks[i].flags & it->need) == it->need &&
				    block_in(&s->blocks[i], it->t0s, it->t1s))
					it->last = i;
			if (it->last < 0 || seg_ensure_open(r, s) < 0) {
				it->last = -1;
				continue;
			}
			if (it->dict) {
				int ret = load_dict(r, it->si, (uint32_t)it->last);

				if (ret < 0)
					return ret;
			}
			it->i = 0;
		}
		while (it->i <= (uint32_t)it->last) {
			struct rblock *b = &s->blocks[it->i++];

			if (b->bad || (b->flags & it->need) != it->need ||
			    !block_in(b, it->t0s, it->t1s))
				continue;
			*ret_s = s;
			*ret_b = b;
			return 1;
		}
		seg_close(s);
	}
	return 0;
}

static int query_one(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
		     const struct store_filter *f, store_sample_fn fn, void *ctx)
{
	struct blk_iter it;
	struct rseg *s;
	struct rblock *b;
	int ret;

	blk_iter_init(&it, t0_ns, t1_ns, 0, true);
	while ((ret = blk_next(r, &it, &s, &b)) > 0) {
		struct store_block_hdr h;
		int n = read_section(r, s, b, true, &h);

		if (n == -ENOMEM)
			return n;
		if (n < 0)
			continue;
		r->st.blocks_read++;
		ret = emit_rows(r, s, r->rawbuf, (size_t)n, (int64_t)(h.t_min_ns / NSEC_PER_SEC),
				it.t0s, it.t1s, f, fn, ctx);
		if (ret == -EBADMSG) {
			r->st.blocks_corrupt++;
			b->bad = true;
			notice(r, "%s: block at %u has malformed rows, skipped", s->path, b->off);
			continue;
		}
		if (ret)
			return ret;
	}
	return ret;
}

int store_reader__query(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			const struct store_filter *f, store_sample_fn fn, void *ctx)
{
	if (r->subs)
		return set_query(r, t0_ns, t1_ns, f, fn, ctx);
	return query_one(r, t0_ns, t1_ns, f, fn, ctx);
}

/* ------------------------------------------------------------ metrics */

/* Format 1.1's metrics sections (docs/metrics.md): no dictionary needed. */
static int metrics_walk(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns, store_metrics_fn fn,
			store_event_fn efn, void *ctx)
{
	struct blk_iter it;
	struct rseg *s;
	struct rblock *b;
	int ret;

	/* A set (every run of a day): each run's metrics in turn. */
	for (uint32_t i = 0; i < r->n_subs; i++) {
		ret = metrics_walk(r->subs[i], t0_ns, t1_ns, fn, efn, ctx);
		if (ret)
			return ret;
	}
	blk_iter_init(&it, t0_ns, t1_ns, STORE_BF_METRICS, false);
	while ((ret = blk_next(r, &it, &s, &b)) > 0) {
		struct store_block_hdr h;
		size_t off;
		int n = read_section(r, s, b, true, &h);

		if (n == -ENOMEM)
			return n;
		if (n < 0 || !(h.flags & STORE_BF_METRICS))
			continue;
		ret = store_metrics__offset(r->rawbuf, (size_t)n, &off);
		if (!ret)
			ret = store_metrics__decode(r->rawbuf + off, (size_t)n - off, t0_ns, t1_ns,
						    fn, efn, ctx);
		if (ret == -EBADMSG) {
			r->st.blocks_corrupt++;
			notice(r, "%s: block at %u has a malformed metrics section, skipped",
			       s->path, b->off);
			continue;
		}
		if (ret)
			return ret;
	}
	return ret;
}

int store_reader__metrics(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			  store_metrics_fn fn, void *ctx)
{
	return metrics_walk(r, t0_ns, t1_ns, fn, NULL, ctx);
}

int store_reader__events(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns, store_event_fn fn,
			 void *ctx)
{
	return metrics_walk(r, t0_ns, t1_ns, NULL, fn, ctx);
}

/* ------------------------------------------------------------ triggers */

struct trig_acc {
	uint64_t t0_ns;
	struct store_trigger *v;
	size_t n, cap;
};

static int on_trig_event(void *ctx, const struct cpa_policy_event *ev)
{
	struct trig_acc *a = ctx;
	struct store_trigger *t;

	if (ev->kind == CPA_PE_END) {
		/* the oldest open START of the same policy and target */
		for (size_t i = 0; i < a->n; i++) {
			t = &a->v[i];
			if (!t->end_recorded && !t->start_before && t->ev.pid == ev->pid &&
			    !strncmp(t->ev.policy, ev->policy, sizeof(ev->policy))) {
				t->end_ns = ev->time_ns;
				t->end_recorded = true;
				return 0;
			}
		}
	} else if (ev->kind != CPA_PE_START) {
		return 0;
	}
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 16;
		struct store_trigger *nv = realloc(a->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = nc;
	}
	t = &a->v[a->n++];
	*t = (struct store_trigger){.ev = *ev};
	if (ev->kind == CPA_PE_START) {
		t->start_ns = ev->time_ns;
		t->end_ns = MAX(ev->end_ns, ev->time_ns);
	} else {
		t->start_ns = MIN(a->t0_ns, ev->time_ns);
		t->end_ns = ev->time_ns;
		t->end_recorded = t->start_before = true;
	}
	return 0;
}

static int trig_cmp(const void *x, const void *y)
{
	const struct store_trigger *a = x, *b = y;

	return a->start_ns < b->start_ns ? -1 : a->start_ns > b->start_ns;
}

int store_reader__triggers(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			   struct store_trigger **ret, size_t *ret_n)
{
	struct trig_acc a = {.t0_ns = t0_ns};
	int e = store_reader__events(r, t0_ns, t1_ns, on_trig_event, &a);

	if (e < 0) {
		free(a.v);
		return e;
	}
	if (a.n)
		qsort(a.v, a.n, sizeof(*a.v), trig_cmp);
	*ret = a.v;
	*ret_n = a.n;
	return 0;
}

void store_trigger__describe(const struct store_trigger *t, char *buf, size_t len)
{
	const struct cpa_policy_event *e = &t->ev;
	char item[64], acts[128];
	size_t o;

	o = (size_t)snprintf(buf, len, "policy %.*s pid %u (%.*s)", (int)sizeof(e->policy),
			     e->policy, e->pid, (int)sizeof(e->comm), e->comm);
	if (e->kind != CPA_PE_START || o >= len)
		return; /* an END only: the start (and what fired) is before the range */
	/* the stored item and actions carry probe ids (POLICY_EV_ITEM/ACTIONS):
	 * the policy file's words, as `cpa show --triggers` prints them */
	policy_item_format(item, sizeof(item), e->item);
	policy_actions_format(acts, sizeof(acts), e->actions, e->freq, e->stack_size);
	snprintf(buf + o, len - o, ": %s %.2f %s %.2f, actions%s", item, e->value,
		 policy_cmp_name((enum policy_cmp)e->cmp), e->threshold, acts);
}

/* ------------------------------------------------------------ open */

static int block_cmp(const void *a, const void *b)
{
	const struct rblock *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

static int seg_add_block(struct rseg *s, const struct rblock *b)
{
	if (grow((void **)&s->blocks, &s->cap, s->n + 1, sizeof(*b)) < 0)
		return -ENOMEM;
	s->blocks[s->n++] = *b;
	return 0;
}

static struct rseg *seg_find(struct store_reader *r, uint32_t seg_no)
{
	uint32_t lo = 0, hi = r->n_seg;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (r->segs[mid].seg_no == seg_no)
			return &r->segs[mid];
		if (r->segs[mid].seg_no < seg_no)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct rseg *x = a, *y = b;

	return x->seg_no < y->seg_no ? -1 : x->seg_no > y->seg_no;
}

/*
 * A read window over a segment for the scan: header checks and magic
 * searches are served from one buffer, so resynchronising over garbage
 * (even a segment made of nothing but block magics) costs one read per
 * window, not one per candidate; holes of a sparse file are skipped with
 * SEEK_DATA rather than read as zeros.
 */
#define SCAN_WIN (256u << 10)

struct scan_win {
	int fd;
	uint64_t start; /* file offset of buf[0] */
	size_t n;	/* valid bytes */
	uint8_t *buf;
};

/* The bytes [pos, pos + len) (len <= SCAN_WIN), or NULL past what the file has. */
static const uint8_t *win_get(struct scan_win *w, uint64_t pos, size_t len, uint64_t end)
{
	ssize_t n;

	if (pos >= w->start && pos + len <= w->start + w->n)
		return w->buf + (pos - w->start);
	if (pos + len > end)
		return NULL;
	n = pread_full(w->fd, w->buf, (size_t)MIN((uint64_t)SCAN_WIN, end - pos), pos);
	w->start = pos;
	w->n = n < 0 ? 0 : (size_t)n;
	return len <= w->n ? w->buf : NULL;
}

/* Next offset in [pos, end) where a block magic starts, or end. */
static uint64_t find_magic(struct scan_win *w, uint64_t pos, uint64_t end)
{
	const uint32_t m = STORE_BLOCK_MAGIC;

	while (pos + 4 <= end) {
		const uint8_t *p, *hit;
		uint64_t lim;
		off_t data;

		if (!(pos >= w->start && pos + 4 <= w->start + w->n)) {
			/* Refill; jump over a hole first. */
			data = lseek(w->fd, (off_t)pos, SEEK_DATA);
			if (data < 0 && errno == ENXIO)
				return end;
			if (data > (off_t)pos)
				pos = (uint64_t)data;
			if (pos + 4 > end || !win_get(w, pos, 4, end))
				return end;
		}
		lim = MIN(w->start + w->n, end); /* >= pos + 4 */
		p = w->buf + (pos - w->start);
		hit = memmem(p, (size_t)(lim - pos), &m, 4);
		if (hit)
			return pos + (uint64_t)(hit - p);
		pos = lim - 3;
	}
	return end;
}

static void note_skipped(struct store_reader *r, struct rseg *s, uint64_t from, uint64_t to,
			 bool torn)
{
	r->st.bytes_skipped += to - from;
	if (torn) {
		r->st.blocks_torn++;
		notice(r,
		       "%s: %llu bytes at %llu cut short at the end (torn tail, crash mid-write), skipped",
		       s->path, (unsigned long long)(to - from), (unsigned long long)from);
	} else {
		notice(r, "%s: %llu unreadable bytes at %llu, skipped", s->path,
		       (unsigned long long)(to - from), (unsigned long long)from);
	}
}

/* Blocks in [pos, end) the index did not list (a crash between a block and
 * its index entry, or a lost index). Headers are trusted only with a valid
 * crc; a run of garbage is reported once. */
static int scan_region(struct store_reader *r, struct rseg *s, uint64_t pos, uint64_t end,
		       bool at_tail)
{
	struct scan_win w = {.fd = s->fd};
	uint64_t bad_from = UINT64_MAX;
	bool cut = false; /* the bad run starts like a block cut short: torn at the tail */

	w.buf = malloc(SCAN_WIN);
	if (!w.buf)
		return -ENOMEM;
	while (pos < end) {
		struct store_block_hdr h;
		const uint8_t *p;
		struct rblock b;

		if (end - pos < sizeof(h)) {
			if (bad_from == UINT64_MAX) {
				bad_from = pos;
				cut = true;
			}
			break;
		}
		p = win_get(&w, pos, sizeof(h), end);
		if (!p)
			break;
		memcpy(&h, p, sizeof(h));
		if (!block_hdr_ok(&h)) {
			if (bad_from == UINT64_MAX) {
				bad_from = pos;
				cut = h.magic == STORE_BLOCK_MAGIC;
			}
			pos = find_magic(&w, pos + 1, end);
			/* A cut block is the last thing in its file: more magics
			 * after it are garbage, not a tear. */
			cut = cut && pos == end;
			continue;
		}
		if (pos + block_len(&h) > end) {
			/* Runs past the end: torn when this is the tail, else
			 * garbage that happens to look like a header. */
			if (bad_from == UINT64_MAX) {
				bad_from = pos;
				cut = true;
			}
			if (at_tail) {
				pos = end;
				break;
			}
			pos = find_magic(&w, pos + 1, end);
			continue;
		}
		if (bad_from != UINT64_MAX) {
			note_skipped(r, s, bad_from, pos, false);
			bad_from = UINT64_MAX;
		}
		b = (struct rblock){
			.off = (uint32_t)pos,
			.len = block_len(&h),
			.t_min_s = (uint32_t)(h.t_min_ns / NSEC_PER_SEC),
			.span_s = (uint16_t)(h.t_max_ns / NSEC_PER_SEC - h.t_min_ns / NSEC_PER_SEC),
			.n_sec = (uint8_t)MIN(
				h.t_max_ns / NSEC_PER_SEC - h.t_min_ns / NSEC_PER_SEC + 1, 255u),
			.flags = h.flags,
		};
		if (seg_add_block(s, &b) < 0) {
			free(w.buf);
			return -ENOMEM;
		}
		r->st.blocks_recovered++;
		pos += b.len;
	}
	if (bad_from != UINT64_MAX && bad_from < end)
		note_skipped(r, s, bad_from, end, at_tail && cut);
	free(w.buf);
	return 0;
}

static int seg_add(void *ctx, const char *name, uint32_t no)
{
	struct store_reader *r = ctx;
	struct rseg *s;

	if (grow((void **)&r->segs, &r->cap_seg, r->n_seg + 1, sizeof(*r->segs)) < 0)
		return -ENOMEM;
	s = &r->segs[r->n_seg++];
	memset(s, 0, sizeof(*s));
	s->seg_no = no;
	s->fd = -1;
	snprintf(s->path, sizeof(s->path), "%s/%s", r->dir, name);
	return 0;
}

static int open_segments(struct store_reader *r)
{
	int ret = store_dir__for_each_seg(r->dir, seg_add, r);

	if (ret == -ENOMEM)
		return ret;
	if (ret < 0)
		return fail(r, ret, "cannot open store '%s': %s", r->dir, strerror(-ret));
	if (r->n_seg)
		qsort(r->segs, r->n_seg, sizeof(*r->segs), seg_cmp);
	return 0;
}

static int fail_newer(struct store_reader *r, unsigned int major, unsigned int minor)
{
	return fail(
		r, -EPROTONOSUPPORT,
		"store '%s' has format version %u.%u, newer than the %d.%d this cpa reads: use a newer cpa",
		r->dir, major, minor, STORE_VERSION_MAJOR, STORE_VERSION_MINOR);
}

static void seg_skip(struct store_reader *r, struct rseg *s, const char *why)
{
	notice(r, "%s: %s, skipped", s->path, why);
	s->skipped = true;
	seg_close(s);
	s->size = 0;
	r->st.segs_skipped++;
}

static int check_seg_hdr(struct store_reader *r, struct rseg *s)
{
	struct store_seg_hdr h;
	struct stat sb;
	ssize_t n;

	s->fd = store_open_regular(s->path);
	if (s->fd < 0) {
		notice(r, "%s: %s, skipped", s->path,
		       s->fd == -EINVAL ? "not a regular file" : strerror(-s->fd));
		s->fd = -1;
		s->skipped = true;
		r->st.segs_skipped++;
		return 0;
	}
	if (fstat(s->fd, &sb) < 0) {
		seg_skip(r, s, strerror(errno));
		return 0;
	}
	s->size = (uint64_t)sb.st_size;
	/* Offsets are u32 and the writer rotates at 1 GiB: the rest of a
	 * larger file is not ours. */
	if (s->size > UINT32_MAX) {
		notice(r, "%s: %llu bytes, larger than a segment can be: reading the first 4 GiB",
		       s->path, (unsigned long long)s->size);
		r->st.bytes_skipped += s->size - UINT32_MAX;
		s->size = UINT32_MAX;
	}
	n = pread_full(s->fd, &h, sizeof(h), 0);
	if (n != (ssize_t)sizeof(h) || h.magic != STORE_SEG_MAGIC ||
	    h.crc != store_crc(&h, offsetof(struct store_seg_hdr, crc))) {
		/* The checksum first: a flipped version byte is corruption, not
		 * a newer format. Still scan it: blocks are self-describing. */
		notice(r, "%s: bad segment header (corrupt), scanning its blocks", s->path);
		if (s->size < sizeof(h))
			s->size = 0;
		return 0;
	}
	if (h.major > STORE_VERSION_MAJOR)
		return fail_newer(r, h.major, h.minor);
	if (h.seg_no != s->seg_no) {
		char why[96];

		/* A copy of another segment under a name of its own would count
		 * its samples twice. */
		snprintf(why, sizeof(why), "its header says segment %u (a copy?)", h.seg_no);
		seg_skip(r, s, why);
	}
	return 0;
}

static int read_index(struct store_reader *r)
{
	char path[PATH_MAX + 8];
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *buf = NULL;
	struct store_idx_hdr h;
	struct stat sb;
	uint64_t off;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/index", r->dir);
	fd = store_open_regular(path);
	if (fd == -EINVAL)
		notice(r, "%s: not a regular file, rebuilding the index from the segments", path);
	if (fd < 0)
		return 0; /* no index: the scan finds everything */
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < sizeof(h))
		return 0;
	n = pread_full(fd, &h, sizeof(h), 0);
	/* The checksum first: a flipped byte in the version is a corrupt
	 * header, not a newer format. */
	if (n != (ssize_t)sizeof(h) || h.magic != STORE_IDX_MAGIC ||
	    h.crc != store_crc(&h, offsetof(struct store_idx_hdr, crc))) {
		notice(r, "%s: bad index header (corrupt), rebuilding the index from the segments",
		       path);
		return 0;
	}
	if (h.major > STORE_VERSION_MAJOR)
		return fail_newer(r, h.major, h.minor);
	if (h.entry_size != sizeof(struct store_idx_entry)) {
		notice(r, "%s: bad index header, rebuilding the index from the segments", path);
		return 0;
	}
	if ((uint64_t)sb.st_size > MAX_INDEX_BYTES) {
		notice(r, "%s: index too large, scanning segments instead", path);
		return 0;
	}
	buf = malloc((size_t)sb.st_size);
	if (!buf)
		return -ENOMEM;
	n = pread_full(fd, buf, (size_t)sb.st_size, 0);
	if (n < 0)
		return (int)n;
	for (off = sizeof(h); off + sizeof(struct store_idx_entry) <= (uint64_t)n;
	     off += sizeof(struct store_idx_entry)) {
		struct store_idx_entry e;
		struct rblock b;
		struct rseg *s;

		memcpy(&e, buf + off, sizeof(e));
		if (e.crc != store_crc(&e, offsetof(struct store_idx_entry, crc)))
			continue; /* torn or never written (a hole left by a failed write) */
		s = seg_find(r, e.seg_no);
		if (!s || s->skipped || e.len < sizeof(struct store_block_hdr))
			continue; /* segment trimmed by retention, or not read */
		b = (struct rblock){.off = e.off,
				    .len = e.len,
				    .t_min_s = e.t_min_s,
				    .span_s = e.span_s,
				    .n_sec = e.n_sec,
				    .flags = e.flags};
		if (seg_add_block(s, &b) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Sort, drop duplicates and overlaps, then scan the gaps and the tail. */
static int seg_finish(struct store_reader *r, struct rseg *s)
{
	uint32_t i, k = 0, n;
	uint64_t pos = sizeof(struct store_seg_hdr);
	int ret;

	if (s->fd < 0)
		return 0;
	if (s->n)
		qsort(s->blocks, s->n, sizeof(*s->blocks), block_cmp);
	for (i = 0; i < s->n; i++) {
		const struct rblock *b = &s->blocks[i];

		if (k && b->off < (uint64_t)s->blocks[k - 1].off + s->blocks[k - 1].len)
			continue;
		if ((uint64_t)b->off + b->len > s->size) {
			/* Indexed, but the file ends first (a torn write, a
			 * truncated copy): not readable, so not in the range.
			 * The scan below reports the bytes that are there. */
			if (b->off >= s->size) {
				r->st.blocks_torn++;
				notice(r,
				       "%s: indexed block at %u lies past the end of the file, skipped",
				       s->path, b->off);
			}
			continue;
		}
		s->blocks[k++] = *b;
	}
	s->n = k;
	n = s->n;
	for (i = 0; i < n; i++) {
		const struct rblock *b = &s->blocks[i];

		if (b->off > pos) {
			ret = scan_region(r, s, pos, MIN((uint64_t)b->off, s->size), false);
			if (ret < 0)
				return ret;
		}
		pos = MAX(pos, (uint64_t)b->off + b->len);
	}
	if (pos < s->size) {
		ret = scan_region(r, s, pos, s->size, true);
		if (ret < 0)
			return ret;
	}
	if (s->n != n)
		qsort(s->blocks, s->n, sizeof(*s->blocks), block_cmp);
	r->st.blocks_indexed += s->n;
	seg_close(s);
	return 0;
}

int store_reader__open_err(const char *dir, store_notice_fn fn, void *ctx,
			   struct store_reader **ret, char *err, size_t errlen)
{
	struct store_reader *r;
	uint32_t i;
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
	e = open_segments(r);
	if (e < 0)
		goto out_free;
	if (!r->n_seg) {
		e = fail(r, -ENOENT, "'%s' holds no cpa store (no seg_*.cps files)", dir);
		goto out_free;
	}
	for (i = 0; i < r->n_seg; i++) {
		e = check_seg_hdr(r, &r->segs[i]);
		if (e < 0)
			goto out_free;
	}
	e = read_index(r);
	if (e < 0)
		goto out_free;
	for (i = 0; i < r->n_seg; i++) {
		e = seg_finish(r, &r->segs[i]);
		if (e < 0)
			goto out_free;
	}
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
		seg_close(&r->segs[i]);
		free(r->segs[i].blocks);
	}
	free(r->segs);
	dict_free(&r->dict);
	ZSTD_freeDCtx(r->dctx);
	free(r->zbuf);
	free(r->rawbuf);
	free(r->fptrs);
	free(r);
}

void store_reader__stats(const struct store_reader *r, struct store_read_stats *ret)
{
	*ret = r->st;
	for (uint32_t i = 0; i < r->n_subs; i++) {
		struct store_read_stats s;

		store_reader__stats(r->subs[i], &s);
		ret->blocks_indexed += s.blocks_indexed;
		ret->blocks_read += s.blocks_read;
		ret->dict_reads += s.dict_reads;
		ret->blocks_corrupt += s.blocks_corrupt;
		ret->blocks_torn += s.blocks_torn;
		ret->blocks_recovered += s.blocks_recovered;
		ret->bytes_read += s.bytes_read;
		ret->rows += s.rows;
		ret->bytes_skipped += s.bytes_skipped;
		ret->segs_skipped += s.segs_skipped;
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
	e = pread_exact(fd, &h, sizeof(h), b->off);
	close(fd);
	if (e < 0 || !block_hdr_ok(&h))
		return fallback;
	return first ? h.t_min_ns : h.t_max_ns;
}

struct ival {
	uint64_t a, b; /* seconds [a, b] */
};

static int ival_cmp(const void *x, const void *y)
{
	const struct ival *p = x, *q = y;

	return p->a < q->a ? -1 : p->a > q->a;
}

int store_reader__range(struct store_reader *r, uint64_t *ret_first_ns, uint64_t *ret_last_ns,
			uint64_t *ret_records)
{
	const struct rblock *fb = NULL, *lb = NULL;
	struct rseg *fs = NULL, *ls = NULL;
	_cleanup_free_ struct ival *iv = NULL;
	uint64_t records = 0, end = 0;
	uint32_t si, i, n = 0, cap = 0;

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
		return any ? 0 : fail(r, -ENODATA, "store '%s' holds no records", r->dir);
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
				if (grow((void **)&iv, &cap, n + 1, sizeof(*iv)) < 0)
					return -ENOMEM;
				iv[n++] =
					(struct ival){b->t_min_s, (uint64_t)b->t_min_s + b->span_s};
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
	if (!fb)
		return fail(r, -ENODATA, "store '%s' holds no records", r->dir);
	if (n)
		qsort(iv, n, sizeof(*iv), ival_cmp);
	for (i = 0; i < n; i++) {
		uint64_t a = MAX(iv[i].a, end);

		if (iv[i].b + 1 > a)
			records += iv[i].b + 1 - a;
		end = MAX(end, iv[i].b + 1);
	}
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
		store_root__list_free(names, n);
		return -ENOENT;
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
