// SPDX-License-Identifier: MIT
/*
 * The store writer's open block and block encoder (store_block_pvt.h): rows
 * aggregated under open addressing, then the dictionary delta and the rows
 * encoded as varint columns and zstd-compressed behind a block header.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "store.h"
#include "store_block_pvt.h"

/* ------------------------------------------------------------ segment dictionary */

int seg_dict__intern(struct intern *t, const void *key, uint32_t len)
{
	uint32_t id;
	int r = intern__get(t, key, len, &id);

	return r < 0 ? r : (int)id;
}

void seg_dict__reset(struct seg_dict *d)
{
	intern__reset(&d->str);
	intern__reset(&d->mod);
	intern__reset(&d->frame);
	intern__reset(&d->stack);
	d->emitted_str = d->emitted_mod = d->emitted_frame = d->emitted_stack = 0;
}

void seg_dict__mark_emitted(struct seg_dict *d)
{
	d->emitted_str = intern__count(&d->str);
	d->emitted_mod = intern__count(&d->mod);
	d->emitted_frame = intern__count(&d->frame);
	d->emitted_stack = intern__count(&d->stack);
}

void seg_dict__free(struct seg_dict *d)
{
	intern__free(&d->str);
	intern__free(&d->mod);
	intern__free(&d->frame);
	intern__free(&d->stack);
}

/* ------------------------------------------------------------ aggregation */

static int rows_grow_slots(struct block *k)
{
	uint32_t ns = k->nslots ? k->nslots * 2 : 1024, i;
	uint32_t *s = calloc(ns, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (i = 0; i < k->rows.n; i++) {
		uint32_t h = k->rows.v[i].hash & (ns - 1);

		while (s[h])
			h = (h + 1) & (ns - 1);
		s[h] = i + 1;
	}
	free(k->slots);
	k->slots = s;
	k->nslots = ns;
	return 0;
}

int block__add(struct block *k, const struct row_key *key, uint64_t count, uint64_t weight)
{
	uint32_t h = (uint32_t)hash64(key, sizeof(*key)), i;
	struct row nr;
	int r;

	if ((uint64_t)(k->rows.n + 1) * 2 > k->nslots && rows_grow_slots(k) < 0)
		return -ENOMEM;
	i = h & (k->nslots - 1);
	while (k->slots[i]) {
		struct row *row = &k->rows.v[k->slots[i] - 1];

		if (row->hash == h && !memcmp(&row->k, key, sizeof(*key))) {
			row->count += count;
			row->weight += weight;
			return 0;
		}
		i = (i + 1) & (k->nslots - 1);
	}
	nr = (struct row){.k = *key, .count = count, .weight = weight, .hash = h};
	r = VEC_PUSH(k->rows, nr);
	if (r < 0)
		return r;
	k->slots[i] = (uint32_t)r;
	return 0;
}

void block__time(struct block *k, uint64_t t)
{
	if (t < k->t_min_ns)
		k->t_min_ns = t;
	if (t > k->t_max_ns)
		k->t_max_ns = t;
}

void block__reset(struct block *k)
{
	k->open = false;
	k->rows.n = 0;
	k->samples = 0;
	k->lost_rec = 0;
	k->lost_rec_io = 0;
	k->metrics.len = 0;
	k->n_metrics = 0;
	k->events.len = 0;
	k->n_events = 0;
	k->seq_hi = 0;
	if (k->slots)
		memset(k->slots, 0, (size_t)k->nslots * sizeof(*k->slots));
}

void block__free(struct block *k)
{
	free(k->rows.v);
	free(k->slots);
	sbuf__free(&k->metrics);
	sbuf__free(&k->events);
	memset(k, 0, sizeof(*k));
}

/* ------------------------------------------------------------ encoder */

static int row_cmp(const void *a, const void *b, void *arg)
{
	const struct row *rows = arg;
	const struct row_key *x = &rows[*(const uint32_t *)a].k;
	const struct row_key *y = &rows[*(const uint32_t *)b].k;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return 0;
}

/* Keys come back from the intern pool unaligned: copied out, never cast. */
static void encode_dict(const struct seg_dict *d, struct sbuf *b)
{
	uint32_t id, len, n_str = intern__count(&d->str), n_mod = intern__count(&d->mod),
			  n_frame = intern__count(&d->frame), n_stack = intern__count(&d->stack);
	const uint8_t *k;

	b->len = 0;
	if (d->emitted_str == n_str && d->emitted_mod == n_mod && d->emitted_frame == n_frame &&
	    d->emitted_stack == n_stack)
		return;
	sbuf__varint(b, d->emitted_str + 1);
	sbuf__varint(b, n_str - d->emitted_str);
	for (id = d->emitted_str + 1; id <= n_str; id++) {
		k = intern__key(&d->str, id, &len);
		sbuf__varint(b, len);
		sbuf__put(b, k, len);
	}
	sbuf__varint(b, d->emitted_mod + 1);
	sbuf__varint(b, n_mod - d->emitted_mod);
	for (id = d->emitted_mod + 1; id <= n_mod; id++) {
		struct seg_mod_key m;

		memcpy(&m, intern__key(&d->mod, id, &len), sizeof(m));
		sbuf__varint(b, m.kind);
		sbuf__varint(b, m.path_sid);
		sbuf__varint(b, m.bid_len);
		sbuf__put(b, m.bid, m.bid_len);
	}
	sbuf__varint(b, d->emitted_frame + 1);
	sbuf__varint(b, n_frame - d->emitted_frame);
	for (id = d->emitted_frame + 1; id <= n_frame; id++) {
		struct seg_frame_key f;

		memcpy(&f, intern__key(&d->frame, id, &len), sizeof(f));
		sbuf__varint(b, f.name_sid);
		sbuf__varint(b, f.mod_sid);
		sbuf__varint(b, f.flags);
		sbuf__varint(b, f.offset);
	}
	sbuf__varint(b, d->emitted_stack + 1);
	sbuf__varint(b, n_stack - d->emitted_stack);
	for (id = d->emitted_stack + 1; id <= n_stack; id++) {
		uint32_t s[SEG_STACK_KEY_MAX], n, nk, j, prev = 0;

		k = intern__key(&d->stack, id, &len);
		memcpy(s, k, MIN(len, (uint32_t)sizeof(s)));
		n = s[0] & 0xffff;
		nk = s[0] >> 16;
		sbuf__varint(b, n);
		sbuf__varint(b, nk);
		/* Frames of one stack tend to be close in id: delta them. */
		for (j = 0; j < n; j++) {
			sbuf__varint(b, zigzag((int64_t)s[1 + j] - (int64_t)prev));
			prev = s[1 + j];
		}
	}
}

/*
 * Rows, column by column (each column of similar small numbers is what zstd
 * compresses best), sorted by (sec, pid, tid, stack) so deltas are small.
 */
static int encode_rows(struct store_enc *e, const struct block *k, struct sbuf *b, int64_t base_s,
		       uint32_t *ret_nsec)
{
	uint32_t n = k->rows.n, i, nsec = 0;
	const struct row *rows = k->rows.v;
	uint32_t *o;
	int64_t prev_sec = INT64_MIN;

	b->len = 0;
	if (n > e->order_cap) {
		o = realloc(e->order, (size_t)n * sizeof(*o));
		if (!o)
			return -ENOMEM;
		e->order = o;
		e->order_cap = n;
	}
	o = e->order;
	for (i = 0; i < n; i++)
		o[i] = i;
	if (n)
		qsort_r(o, n, sizeof(*o), row_cmp, (void *)rows);
	for (i = 0; i < n; i++) {
		if (rows[o[i]].k.sec != prev_sec)
			nsec++;
		prev_sec = rows[o[i]].k.sec;
	}
	*ret_nsec = nsec;

	sbuf__varint(b, n);
#define COLUMN(expr)                                       \
	do {                                               \
		const struct row *p = NULL;                \
		for (i = 0; i < n; i++) {                  \
			const struct row *r = &rows[o[i]]; \
			sbuf__varint(b, (expr));           \
			p = r;                             \
		}                                          \
		(void)p;                                   \
	} while (0)
	COLUMN((uint64_t)(r->k.sec - (p ? p->k.sec : base_s)));
	COLUMN(zigzag((int64_t)r->k.pid - (p ? (int64_t)p->k.pid : 0)));
	COLUMN(zigzag((int64_t)r->k.tid - (int64_t)r->k.pid));
	COLUMN(r->k.cpu);
	COLUMN(zigzag((int64_t)(r->k.cgroup - (p ? p->k.cgroup : 0))));
	COLUMN(r->k.kind);
	COLUMN(zigzag((int64_t)r->k.comm - (p ? (int64_t)p->k.comm : 0)));
	COLUMN(zigzag((int64_t)r->k.pcomm - (p ? (int64_t)p->k.pcomm : 0)));
	COLUMN(zigzag((int64_t)r->k.env - (p ? (int64_t)p->k.env : 0)));
	COLUMN(r->k.probe);
	COLUMN(zigzag((int64_t)r->k.stack - (p ? (int64_t)p->k.stack : 0)));
	COLUMN(r->count);
	/* On-CPU weight equals count: store the difference, mostly zeros. */
	COLUMN(zigzag((int64_t)(r->weight - r->count)));
#undef COLUMN
	return b->oom ? -ENOMEM : 0;
}

static int compress_into(struct store_enc *e, uint8_t *dst, size_t cap, const struct sbuf *src,
			 uint32_t *ret_len)
{
	size_t z;

	if (!src->len) {
		*ret_len = 0;
		return 0;
	}
	z = ZSTD_compress2(e->cctx, dst, cap, src->p, src->len);
	if (ZSTD_isError(z))
		return -EIO;
	*ret_len = (uint32_t)z;
	return 0;
}

int store_enc__block(struct store_enc *e, const struct block *k, const struct seg_dict *d,
		     struct store_encoded *ret)
{
	struct store_block_hdr h;
	uint32_t dz = 0, az = 0, nsec = 0;
	uint8_t *buf;
	size_t cap;
	int r;

	encode_dict(d, &e->raw_dict);
	r = encode_rows(e, k, &e->raw_data, (int64_t)(k->t_min_ns / NSEC_PER_SEC), &nsec);
	if (r < 0)
		return r;
	/* Format 1.1: the metrics section after the rows, where a 1.0 reader stops. */
	if (k->n_metrics || k->n_events) {
		sbuf__varint(&e->raw_data, k->n_metrics);
		sbuf__put(&e->raw_data, k->metrics.p, k->metrics.len);
		sbuf__varint(&e->raw_data, k->n_events);
		sbuf__put(&e->raw_data, k->events.p, k->events.len);
		if (e->raw_data.oom || k->metrics.oom || k->events.oom)
			return -ENOMEM;
	}
	/* Format 1.2: the highest seq last, then its varint's length, so a
	 * restarted storer finds it from the end (store_tail.c); older readers
	 * stop before it. */
	if (k->seq_hi) {
		size_t at = e->raw_data.len;

		sbuf__varint(&e->raw_data, k->seq_hi);
		if (e->raw_data.oom)
			return -ENOMEM;
		sbuf__put(&e->raw_data, &(uint8_t){(uint8_t)(e->raw_data.len - at)}, 1);
	}
	if (e->raw_dict.oom)
		return -ENOMEM;
	cap = sizeof(h) + ZSTD_compressBound(e->raw_dict.len) + ZSTD_compressBound(e->raw_data.len);
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	r = compress_into(e, buf + sizeof(h), cap - sizeof(h), &e->raw_dict, &dz);
	if (!r)
		r = compress_into(e, buf + sizeof(h) + dz, cap - sizeof(h) - dz, &e->raw_data, &az);
	if (r < 0) {
		free(buf);
		return r;
	}
	memset(&h, 0, sizeof(h));
	h.magic = STORE_BLOCK_MAGIC;
	h.major = STORE_VERSION_MAJOR;
	h.minor = STORE_VERSION_MINOR;
	h.type = STORE_BLOCK_DATA;
	h.flags = (dz ? STORE_BF_DICT : 0) | (k->n_metrics || k->n_events ? STORE_BF_METRICS : 0) |
		  (k->seq_hi ? STORE_BF_SEQ : 0);
	h.t_min_ns = k->t_min_ns;
	h.t_max_ns = k->t_max_ns;
	h.dict_zlen = dz;
	h.dict_rawlen = (uint32_t)e->raw_dict.len;
	h.dict_crc = store_crc(buf + sizeof(h), dz);
	h.data_zlen = az;
	h.data_rawlen = (uint32_t)e->raw_data.len;
	h.data_crc = store_crc(buf + sizeof(h) + dz, az);
	h.n_samples = k->samples > UINT32_MAX ? UINT32_MAX : (uint32_t)k->samples;
	h.crc = store_crc(&h, offsetof(struct store_block_hdr, crc));
	memcpy(buf, &h, sizeof(h));
	*ret = (struct store_encoded){
		.buf = buf,
		.len = (uint32_t)(sizeof(h) + dz + az),
		.raw_len = e->raw_dict.len + e->raw_data.len + sizeof(h),
		.nsec = nsec,
		.flags = h.flags,
	};
	return 0;
}

bool store_block__seq_trailer(const uint8_t *p, size_t len, uint64_t *ret_seq)
{
	struct rbuf r;
	uint8_t n;

	if (len < 2)
		return false;
	n = p[len - 1];
	if (!n || n > 10 || n > len - 1)
		return false;
	r = (struct rbuf){.p = p + len - 1 - n, .len = n};
	*ret_seq = rbuf__varint(&r);
	return !r.bad && r.pos == n;
}

int store_enc__init(struct store_enc *e, int zstd_level)
{
	memset(e, 0, sizeof(*e));
	e->cctx = ZSTD_createCCtx();
	if (!e->cctx)
		return -ENOMEM;
	ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, zstd_level);
	/* The header has the lengths and a crc32c: keep the zstd frame minimal. */
	ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_checksumFlag, 0);
	ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_dictIDFlag, 0);
	return 0;
}

void store_enc__free(struct store_enc *e)
{
	ZSTD_freeCCtx(e->cctx);
	sbuf__free(&e->raw_dict);
	sbuf__free(&e->raw_data);
	free(e->order);
	memset(e, 0, sizeof(*e));
}
