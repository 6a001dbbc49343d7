// SPDX-License-Identifier: MIT
/*
 * The metrics section (format 1.1, docs/store-format.md "Metrics section"):
 * per-second CPA_REC_METRICS records, encoded after a data section's rows
 * when the block flag STORE_BF_METRICS is set. A 1.0 reader decodes the rows
 * and never looks past them, so it skips the section without knowing it.
 *
 * Records are written in the columnar encoding v5 (a group starts with varint
 * 0, 5 and its length; no v1 record's time_ns is 0): the records one writer
 * appends to a section in a row are one group, written column after column
 * (headers, which keys ran again since the previous second as a bitmap, the
 * new keys, flags, comms new to the group, the values of every entry in the
 * order of their comms, the rare extras), so that what repeats from second
 * to second and from run to run of a program is contiguous for zstd; the
 * group is written again whole at each record added. The two durations are
 * kept to 7 significant bits of µs (within 1/128, or 0.5 µs below 128 µs;
 * the figures users see within 1 %, docs/metrics.md "Stored precision").
 * Records of released stores (v1), of development builds (v2: per record,
 * differences against a 1024-slot table, durations to 8 significant bits),
 * of v3 stores (v4's columns with the keys and values as differences to the
 * previous ones, durations to 8 and 6 significant bits) and of v4 stores
 * (v5's values in entry order, no length) are still read; a group of a
 * newer version is skipped by its length (STORE_METRICS_NEWER).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/macro.h"
#include "store.h"
#include "store_fmt.h"
#include "store_metrics_pvt.h"

#define ROW_COLUMNS 13 /* of the data section (store_block.c) */

static void hist_put(struct sbuf *b, const uint32_t *h)
{
	unsigned int nz = 0, i, prev = 0;

	for (i = 0; i < CPA_METRICS_HIST; i++)
		nz += h[i] != 0;
	sbuf__varint(b, nz);
	for (i = 0; i < CPA_METRICS_HIST; i++) {
		if (!h[i])
			continue;
		sbuf__varint(b, i - prev);
		sbuf__varint(b, h[i]);
		prev = i;
	}
}

static bool hist_get(struct rbuf *r, uint32_t *h)
{
	uint64_t nz = rbuf__varint(r), i, at = 0, v;

	if (nz > CPA_METRICS_HIST)
		return false;
	for (i = 0; i < nz; i++) {
		at += rbuf__varint(r);
		if (at >= CPA_METRICS_HIST)
			return false;
		v = rbuf__varint(r); /* once: MIN() evaluates twice */
		h[at] = (uint32_t)MIN(v, UINT32_MAX);
	}
	return !r->bad;
}

/* The system part both encodings write alike: load, /proc/stat, PSI. */
static void sys_put(struct sbuf *b, const struct cpa_metrics *m)
{
	unsigned int i;

	for (i = 0; i < 3; i++)
		sbuf__varint(b, m->load_milli[i]);
	sbuf__varint(b, m->nr_cpus);
	sbuf__varint(b, m->cpu_busy_ticks);
	sbuf__varint(b, m->cpu_iowait_ticks);
	sbuf__varint(b, m->cpu_idle_ticks);
	/* PSI: value + 1, 0 = not present */
	for (i = 0; i < CPA_PSI_MAX; i++) {
		sbuf__varint(b, ((uint64_t)m->psi_some_us[i] + 1) & 0xffffffffu);
		sbuf__varint(b, ((uint64_t)m->psi_full_us[i] + 1) & 0xffffffffu);
	}
}

static void sys_get(struct rbuf *r, struct cpa_metrics *m)
{
	unsigned int i;
	uint64_t v;

	for (i = 0; i < 3; i++)
		m->load_milli[i] = (uint32_t)rbuf__varint(r);
	m->nr_cpus = (uint32_t)rbuf__varint(r);
	m->cpu_busy_ticks = rbuf__varint(r);
	m->cpu_iowait_ticks = rbuf__varint(r);
	m->cpu_idle_ticks = rbuf__varint(r);
	for (i = 0; i < CPA_PSI_MAX; i++) {
		v = rbuf__varint(r);
		m->psi_some_us[i] = v ? (uint32_t)(v - 1) : CPA_METRICS_PSI_NONE;
		v = rbuf__varint(r);
		m->psi_full_us[i] = v ? (uint32_t)(v - 1) : CPA_METRICS_PSI_NONE;
	}
}

static void hw_put(struct sbuf *b, const struct cpa_metrics *m)
{
	sbuf__varint(b, m->hw_cycles);
	sbuf__varint(b, m->hw_instructions);
	sbuf__varint(b, m->hw_cache_misses);
}

static void hw_get(struct rbuf *r, struct cpa_metrics *m)
{
	m->hw_cycles = rbuf__varint(r);
	m->hw_instructions = rbuf__varint(r);
	m->hw_cache_misses = rbuf__varint(r);
}

void store_metrics__encode_v1(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents)
{
	unsigned int i, j;

	sbuf__varint(b, m->time_ns);
	sbuf__varint(b, m->interval_ms);
	sbuf__varint(b, m->flags);
	sys_put(b, m);
	hw_put(b, m);
	sbuf__varint(b, m->dropped);
	sbuf__varint(b, m->n_ents);
	for (i = 0; i < m->n_ents; i++) {
		const struct cpa_metrics_ent *e = &ents[i];
		size_t cl = strnlen(e->comm, CPA_COMM_LEN);

		sbuf__varint(b, e->kind);
		sbuf__varint(b, e->id);
		sbuf__varint(b, cl);
		sbuf__put(b, e->comm, cl);
		sbuf__varint(b, e->oncpu_ns);
		sbuf__varint(b, e->runq_ns);
		sbuf__varint(b, e->runq_n);
		sbuf__varint(b, e->slices);
		for (j = 0; j < CPA_MR_MAX; j++)
			sbuf__varint(b, e->switches[j]);
		hist_put(b, e->runq_hist);
		hist_put(b, e->slice_hist);
	}
}

/* ---------------------------------------------------------------- v2 */

#define V2_VERSION 2
#define COMM_SLOTS 1024 /* the comm table: slot = hash(kind, id); a new key replaces */

enum v2_rec_flag {
	V2_R_RESET = 1u << 0, /* the encoder starts afresh: clear the state */
};

enum v2_ent_flag {			  /* above the kind (bits 0..1) */
		   V2_E_COMM = 1u << 2,	  /* comm follows */
		   V2_E_HIST = 1u << 3,	  /* the two histograms follow */
		   V2_E_IOWAIT = 1u << 4, /* the iowait switch count follows (else 0) */
		   V2_E_SLICES = 1u << 5, /* slices follows (else the sum of the switches) */
};

/* The values of an entry as written; V_WAITS is runq_n - (preempted +
 * voluntary): a task is put on a CPU about once per switch out, so it is
 * mostly 0 or 1 where runq_n is as large as the switch counts. */
enum { V_ONCPU, V_RUNQ, V_PREEMPT, V_SLEEP, V_WAITS, V_MAX };

struct comm_slot {
	uint32_t key; /* kind << 30 | id, 0 = empty */
	char comm[CPA_COMM_LEN];
	uint64_t prev[V_MAX]; /* the values last written for key (durations as dur_code()) */
};

/* A duration to 8 significant bits: below 256 itself, else (e << 8) | m for
 * m << e with m in [128, 255], rounded to nearest. */
static uint64_t dur_code(uint64_t v)
{
	unsigned int e;
	uint64_t m;

	if (v < 256)
		return v;
	e = 63 - (unsigned int)__builtin_clzll(v) - 7;
	m = (v + (1ull << (e - 1))) >> e;
	if (m == 256) {
		m = 128;
		e++;
	}
	return ((uint64_t)e << 8) | m;
}

static uint64_t dur_value(uint64_t code)
{
	unsigned int e = (unsigned int)(code >> 8);

	if (code < 256)
		return code;
	return e <= 64 - 8 ? (code & 255) << e : UINT64_MAX;
}

struct v2_state {
	uint64_t time_ns;
	struct comm_slot comm[COMM_SLOTS];
};

static uint32_t comm_key(const struct cpa_metrics_ent *e)
{
	return ((uint32_t)(e->kind & 3) << 30) | (e->id & 0x3fffffffu);
}

static struct comm_slot *comm_slot(struct v2_state *s, uint32_t key)
{
	return &s->comm[(key * 2654435761u) >> 22];
}

_Static_assert(COMM_SLOTS == 1u << 10, "comm_slot() takes the top 10 bits");

/* Make cs hold key with comm c (cl bytes), its values afresh if the key is
 * new to it: true when the comm has to be written (a new one, or a key new
 * to the slot with a comm; a key without one, a CPU, needs none). */
static bool slot_set(struct comm_slot *cs, uint32_t key, const char *c, size_t cl)
{
	bool is_new = cs->key != key;

	if (!is_new && !memcmp(cs->comm, c, cl) && !cs->comm[cl])
		return false;
	if (is_new)
		memset(cs->prev, 0, sizeof(cs->prev));
	cs->key = key;
	memset(cs->comm, 0, sizeof(cs->comm));
	memcpy(cs->comm, c, cl);
	return cl || !is_new;
}

/* The encoder's state belongs to one sbuf (a block's metrics section) and is
 * good while nothing else wrote to it: a new section (len 0) or another
 * writer's section (owner, len) start afresh, the latter with V2_R_RESET. */
static _Thread_local struct {
	const struct sbuf *owner;
	size_t len;
	struct v2_state st;
} enc;

static int ent_cmp(const void *x, const void *y)
{
	const struct cpa_metrics_ent *a = *(const struct cpa_metrics_ent *const *)x;
	const struct cpa_metrics_ent *b = *(const struct cpa_metrics_ent *const *)y;
	uint32_t ka = comm_key(a), kb = comm_key(b);

	return ka < kb ? -1 : ka > kb;
}

static bool hist_any(const uint32_t *h)
{
	for (unsigned int i = 0; i < CPA_METRICS_HIST; i++)
		if (h[i])
			return true;
	return false;
}

/* The flags an entry's extras need (IOWAIT, SLICES, HIST), its extras, and
 * back: v2 and v3 write them alike. */
static uint32_t extras_flags(const struct cpa_metrics_ent *e)
{
	uint32_t fl = 0;

	if (hist_any(e->runq_hist) || hist_any(e->slice_hist))
		fl |= V2_E_HIST;
	if (e->switches[CPA_MR_IOWAIT])
		fl |= V2_E_IOWAIT;
	if (e->slices !=
	    e->switches[CPA_MR_PREEMPT] + e->switches[CPA_MR_SLEEP] + e->switches[CPA_MR_IOWAIT])
		fl |= V2_E_SLICES;
	return fl;
}

static void extras_put(struct sbuf *b, const struct cpa_metrics_ent *e, uint64_t fl)
{
	if (fl & V2_E_IOWAIT)
		sbuf__varint(b, e->switches[CPA_MR_IOWAIT]);
	if (fl & V2_E_SLICES)
		sbuf__varint(b, e->slices);
	if (fl & V2_E_HIST) {
		hist_put(b, e->runq_hist);
		hist_put(b, e->slice_hist);
	}
}

static bool extras_get(struct rbuf *r, struct cpa_metrics_ent *e, uint64_t fl)
{
	if (fl & V2_E_IOWAIT)
		e->switches[CPA_MR_IOWAIT] = rbuf__varint(r);
	e->slices = fl & V2_E_SLICES ? rbuf__varint(r)
				     : e->switches[CPA_MR_PREEMPT] + e->switches[CPA_MR_SLEEP] +
					       e->switches[CPA_MR_IOWAIT];
	if ((fl & V2_E_HIST) && (!hist_get(r, e->runq_hist) || !hist_get(r, e->slice_hist)))
		return false;
	return !r->bad;
}

/* A v2 or v3 record's header: the time as a difference to *time_ns (then
 * the record's), interval, flags, the parts the flags say, n entries. */
static void hdr_put(struct sbuf *b, const struct cpa_metrics *m, unsigned int n, uint64_t *time_ns)
{
	sbuf__varint(b, zigzag((int64_t)(m->time_ns - *time_ns)));
	*time_ns = m->time_ns;
	sbuf__varint(b, m->interval_ms);
	sbuf__varint(b, m->flags);
	if (m->flags & CPA_MF_SYSTEM) {
		sys_put(b, m);
		sbuf__varint(b, m->dropped);
	}
	if (m->flags & CPA_MF_HW)
		hw_put(b, m);
	sbuf__varint(b, n);
}

static bool hdr_get(struct rbuf *r, struct cpa_metrics *m, uint64_t *time_ns)
{
	uint64_t v;

	*time_ns += (uint64_t)unzigzag(rbuf__varint(r));
	m->time_ns = *time_ns;
	m->interval_ms = (uint32_t)rbuf__varint(r);
	m->flags = (uint16_t)rbuf__varint(r);
	if (m->flags & CPA_MF_SYSTEM) {
		sys_get(r, m);
		m->dropped = (uint32_t)rbuf__varint(r);
	}
	if (m->flags & CPA_MF_HW)
		hw_get(r, m);
	v = rbuf__varint(r);
	if (r->bad || v > CPA_METRICS_PER_REC)
		return false;
	m->n_ents = (uint16_t)v;
	return true;
}

void store_metrics__encode_v2(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents)
{
	const struct cpa_metrics_ent *order[CPA_METRICS_PER_REC];
	struct comm_slot *slots[CPA_METRICS_PER_REC];
	uint32_t fls[CPA_METRICS_PER_REC];
	unsigned int i, j, n = MIN(m->n_ents, CPA_METRICS_PER_REC), rflags = 0;
	uint32_t prev_key = 0;

	if (b->len == 0 || enc.owner != b || enc.len != b->len) {
		memset(&enc.st, 0, sizeof(enc.st));
		rflags = b->len ? V2_R_RESET : 0;
		enc.owner = b;
	}
	sbuf__varint(b, 0);
	sbuf__varint(b, V2_VERSION);
	sbuf__varint(b, rflags);
	hdr_put(b, m, n, &enc.st.time_ns);
	for (i = 0; i < n; i++)
		order[i] = &ents[i];
	qsort(order, n, sizeof(order[0]), ent_cmp);
	for (i = 0; i < n; i++) {
		const struct cpa_metrics_ent *e = order[i];
		uint32_t key = comm_key(e), fl = e->kind & 3;
		struct comm_slot *cs = comm_slot(&enc.st, key);
		size_t cl = strnlen(e->comm, CPA_COMM_LEN - 1);

		fl |= extras_flags(e);
		if (slot_set(cs, key, e->comm, cl))
			fl |= V2_E_COMM;
		sbuf__varint(b, fl);
		/* key order: the kind's first entry has the difference to the last
		 * key, which crosses the kind bits; still small beside them */
		sbuf__varint(b, zigzag((int64_t)key - (int64_t)prev_key));
		prev_key = key;
		if (fl & V2_E_COMM) {
			sbuf__varint(b, cl);
			sbuf__put(b, e->comm, cl);
		}
		fls[i] = fl;
		slots[i] = cs;
	}
	/* Then the values: the keys above repeat from second to second, and
	 * zstd finds them whole when no value is in between. */
	for (i = 0; i < n; i++) {
		const struct cpa_metrics_ent *e = order[i];
		struct comm_slot *cs = slots[i];
		uint32_t fl = fls[i];
		uint64_t v[V_MAX] = {dur_code(e->oncpu_ns), dur_code(e->runq_ns),
				     e->switches[CPA_MR_PREEMPT], e->switches[CPA_MR_SLEEP],
				     e->runq_n - e->switches[CPA_MR_PREEMPT] -
					     e->switches[CPA_MR_SLEEP]};

		for (j = 0; j < V_MAX; j++) {
			sbuf__varint(b, zigzag((int64_t)(v[j] - cs->prev[j])));
			cs->prev[j] = v[j];
		}
		extras_put(b, e, fl);
	}
	enc.len = b->len;
}

/* One v2 record after its leading 0 and version into m and ents; false: malformed. */
static bool decode_v2(struct rbuf *r, struct v2_state *st, struct cpa_metrics *m,
		      struct cpa_metrics_ent *ents)
{
	struct comm_slot *slots[CPA_METRICS_PER_REC];
	uint64_t rflags, fls[CPA_METRICS_PER_REC];
	uint32_t prev_key = 0;
	unsigned int i;

	rflags = rbuf__varint(r);
	if (rflags & V2_R_RESET)
		memset(st, 0, sizeof(*st));
	if (!hdr_get(r, m, &st->time_ns))
		return false;
	for (i = 0; i < m->n_ents; i++) {
		struct cpa_metrics_ent *e = &ents[i];
		uint64_t fl = rbuf__varint(r), cl;
		uint32_t key = (uint32_t)((int64_t)prev_key + unzigzag(rbuf__varint(r)));
		struct comm_slot *cs = comm_slot(st, key);

		prev_key = key;
		fls[i] = fl;
		slots[i] = cs;
		e->kind = (uint16_t)(fl & 3);
		e->id = key & 0x3fffffffu;
		if (fl & V2_E_COMM) {
			const uint8_t *c;

			cl = rbuf__varint(r);
			if (cl >= CPA_COMM_LEN)
				return false;
			c = rbuf__bytes(r, cl);
			if (!c)
				return false;
			slot_set(cs, key, (const char *)c, cl);
		} else if (cs->key != key) {
			slot_set(cs, key, "", 0); /* never written for this key: no comm (a CPU) */
		}
		memcpy(e->comm, cs->comm, CPA_COMM_LEN);
	}
	for (i = 0; i < m->n_ents; i++) {
		struct cpa_metrics_ent *e = &ents[i];
		struct comm_slot *cs = slots[i];
		uint64_t fl = fls[i];

		for (unsigned int j = 0; j < V_MAX; j++)
			cs->prev[j] += (uint64_t)unzigzag(rbuf__varint(r));
		e->oncpu_ns = dur_value(cs->prev[V_ONCPU]);
		e->runq_ns = dur_value(cs->prev[V_RUNQ]);
		e->switches[CPA_MR_PREEMPT] = cs->prev[V_PREEMPT];
		e->switches[CPA_MR_SLEEP] = cs->prev[V_SLEEP];
		e->runq_n = cs->prev[V_WAITS] + cs->prev[V_PREEMPT] + cs->prev[V_SLEEP];
		if (!extras_get(r, e, fl))
			return false;
	}
	return !r->bad;
}

/* ---------------------------------------------------------------- v3 */

/* v3 (stores before v4; its encoder is kept for the tests and the bench)
 * writes the records that one writer appends to a section in a row as one
 * group, column after column (docs/store-format.md): the record headers, the
 * keys, the comms new to the group, then each value of every entry, so that
 * what repeats from second to second (the same processes, values unchanged
 * or zero) is contiguous for zstd. The group is written again whole at each
 * record added to it, from the columns kept here. */
#define V3_VERSION 3
#define V4_VERSION 4
#define V5_VERSION 5 /* and after: 0, version, the group's length, then the group */
/* significant bits of the durations in µs: on-CPU time within 1/256 (a
 * process's share of a CPU is shown in whole percent), run-queue delay 1/64 */
#define ONCPU_BITS 8
#define RUNQ_BITS  6

enum { C_HDR, C_KEY, C_FL, C_COMM, C_VAL, C_EXTRA = C_VAL + V_MAX, C_MAX };

/* A duration in ns to whole µs (rounded to nearest), then to bits
 * significant bits (rounded to nearest), as a dense code (consecutive codes
 * are consecutive values): below 2^bits µs itself, else (e + 1) * H + m - H
 * for m << e with m in [H, 2H), H = 2^(bits - 1). */
static uint64_t dur3_code(uint64_t ns, unsigned int bits)
{
	const uint64_t h = 1ull << (bits - 1);
	uint64_t v = ns / 1000 + (ns % 1000 >= 500), m;
	unsigned int e;

	if (v < 2 * h)
		return v;
	e = 63 - (unsigned int)__builtin_clzll(v) - (bits - 1);
	m = (v >> e) + ((v >> (e - 1)) & 1);
	if (m == 2 * h) {
		m = h;
		e++;
	}
	return (e + 1) * h + m - h;
}

static uint64_t dur3_value(uint64_t code, unsigned int bits)
{
	const uint64_t h = 1ull << (bits - 1);
	uint64_t e, m;

	if (code < 2 * h)
		return code * 1000;
	e = code / h - 1;
	m = code - e * h;
	return e <= 64 - bits - 10 ? (m << e) * 1000 : UINT64_MAX;
}

/* v3's state: every key of the group has its own slot (an open-addressing
 * table, half full at most), unlike v2's table where keys could evict each
 * other and start their values afresh. */
struct ktab {
	struct comm_slot *s;
	uint32_t cap, n; /* cap: a power of 2 */
	uint64_t time_ns;
};

/* key's slot (*fresh: new to the table, its comm empty and values 0), the
 * table grown when half full; NULL: no memory. */
static struct comm_slot *ktab_get(struct ktab *t, uint32_t key, bool *fresh)
{
	struct comm_slot *s;
	uint32_t i;

	if (2 * (t->n + 1) > t->cap) {
		struct ktab o = *t;

		t->cap = o.cap ? 2 * o.cap : 256;
		t->s = calloc(t->cap, sizeof(*t->s));
		if (!t->s) {
			*t = o;
			return NULL;
		}
		t->n = 0;
		for (i = 0; i < o.cap; i++) {
			if (!o.s[i].key)
				continue;
			s = ktab_get(t, o.s[i].key, fresh);
			*s = o.s[i];
		}
		free(o.s);
	}
	/* key 0 (kind 0, id 0) is never written: entries have a kind */
	for (i = (key * 2654435761u) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		s = &t->s[i];
		*fresh = !s->key;
		if (s->key == key || !s->key)
			break;
	}
	if (*fresh) {
		memset(s, 0, sizeof(*s));
		s->key = key;
		t->n++;
	}
	return s;
}

static void ktab_clear(struct ktab *t)
{
	if (t->s)
		memset(t->s, 0, sizeof(*t->s) * t->cap);
	t->n = 0;
	t->time_ns = 0;
}

/* A group writer: the group in owner, its keys' state. */
struct grp_w {
	const struct sbuf *owner;
	size_t start, len;
	uint64_t nrec;
	struct ktab st;
};

/* Start a new group in b unless b ends with w's (true: started). */
static bool grp_begin(struct grp_w *w, struct sbuf *b, struct sbuf *col, unsigned int n)
{
	if (b->len && w->owner == b && w->len == b->len)
		return false;
	ktab_clear(&w->st);
	for (unsigned int i = 0; i < n; i++)
		col[i].len = 0;
	w->owner = b;
	w->start = b->len;
	w->nrec = 0;
	return true;
}

static void ents_sort(const struct cpa_metrics_ent **order, const struct cpa_metrics_ent *ents,
		      unsigned int n)
{
	for (unsigned int i = 0; i < n; i++)
		order[i] = &ents[i];
	qsort(order, n, sizeof(order[0]), ent_cmp);
}

static _Thread_local struct {
	struct grp_w w;
	struct sbuf col[C_MAX];
} g3;

/* v4's comm table: the comms written in the group so far, each once; an
 * entry's comm is then its index + 1 (0: the comm follows, and joins). */
#define CTAB_MAX 4096

struct ctab {
	char (*c)[CPA_COMM_LEN];
	size_t n, cap;
	uint16_t *h; /* the writer's: comm hash slot -> index + 1, 2 * CTAB_MAX slots */
};

static bool ctab_add(struct ctab *t, const char *c)
{
	if (t->n >= CTAB_MAX)
		return true;
	if (array_grow((void **)&t->c, &t->cap, t->n + 1, sizeof(*t->c)) < 0)
		return false;
	memcpy(t->c[t->n++], c, CPA_COMM_LEN);
	return true;
}

/* The writer's slot of comm c (NUL-padded): holding its index + 1, or 0. */
static uint16_t *ctab_slot(struct ctab *t, const char *c)
{
	uint32_t h = 2166136261u, i;

	for (i = 0; i < CPA_COMM_LEN; i++)
		h = (h ^ (uint8_t)c[i]) * 16777619u;
	for (i = h & (2 * CTAB_MAX - 1);; i = (i + 1) & (2 * CTAB_MAX - 1))
		if (!t->h[i] || !memcmp(t->c[t->h[i] - 1], c, CPA_COMM_LEN))
			return &t->h[i];
}

/* e's comm into the comms column when its key's slot cs needs it, or always
 * with force: V2_E_COMM then, else 0; with t (v4, v5) as a reference to the
 * table when it holds it. */
static uint32_t comm_put(struct sbuf *col, struct ctab *t, struct comm_slot *cs,
			 const struct cpa_metrics_ent *e, bool force)
{
	size_t cl = strnlen(e->comm, CPA_COMM_LEN - 1);
	char pad[CPA_COMM_LEN] = {0};
	uint16_t *slot;

	if (!slot_set(cs, comm_key(e), e->comm, cl) && !force)
		return 0;
	if (t) {
		size_t n = t->n;

		memcpy(pad, e->comm, cl);
		slot = ctab_slot(t, pad);
		sbuf__varint(col, *slot);
		if (*slot)
			return V2_E_COMM;
		if (!ctab_add(t, pad))
			col->oom = true;
		else if (t->n > n)
			*slot = (uint16_t)t->n;
	}
	sbuf__varint(col, cl);
	sbuf__put(col, e->comm, cl);
	return V2_E_COMM;
}

/* A group (its marker, version, nrec records, its n columns) written at
 * start in b, b then ending with it. */
static void grp_write(struct sbuf *b, size_t start, unsigned int version, uint64_t nrec,
		      const struct sbuf *col, unsigned int n)
{
	b->len = start;
	sbuf__varint(b, 0);
	sbuf__varint(b, version);
	if (version >= V5_VERSION) { /* the length of what follows: n and the columns */
		size_t len = 1;

		for (uint64_t v = nrec; v >= 0x80; v >>= 7)
			len++;
		for (unsigned int i = 0; i < n; i++)
			len += col[i].len;
		sbuf__varint(b, len);
	}
	sbuf__varint(b, nrec);
	for (unsigned int i = 0; i < n; i++) {
		sbuf__put(b, col[i].p, col[i].len);
		b->oom |= col[i].oom;
	}
}

void store_metrics__encode_v3(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents)
{
	const struct cpa_metrics_ent *order[CPA_METRICS_PER_REC];
	unsigned int i, j, n = MIN(m->n_ents, CPA_METRICS_PER_REC);
	struct sbuf *c = g3.col;
	uint32_t prev_key = 0;

	grp_begin(&g3.w, b, c, C_MAX);
	hdr_put(&c[C_HDR], m, n, &g3.w.st.time_ns);
	ents_sort(order, ents, n);
	for (i = 0; i < n; i++) {
		const struct cpa_metrics_ent *e = order[i];
		uint32_t key = comm_key(e), fl = 0;
		bool fresh;
		struct comm_slot *cs = ktab_get(&g3.w.st, key, &fresh);
		uint64_t v[V_MAX] = {
			dur3_code(e->oncpu_ns, ONCPU_BITS), dur3_code(e->runq_ns, RUNQ_BITS),
			e->switches[CPA_MR_PREEMPT], e->switches[CPA_MR_SLEEP],
			e->runq_n - e->switches[CPA_MR_PREEMPT] - e->switches[CPA_MR_SLEEP]};

		if (!cs) {
			b->oom = true;
			g3.w.owner = NULL;
			return;
		}
		sbuf__varint(&c[C_KEY], zigzag((int64_t)key - (int64_t)prev_key));
		prev_key = key;
		fl = comm_put(&c[C_COMM], NULL, cs, e, false);
		for (j = 0; j < V_MAX; j++) {
			sbuf__varint(&c[C_VAL + j], zigzag((int64_t)(v[j] - cs->prev[j])));
			cs->prev[j] = v[j];
		}
		fl |= extras_flags(e);
		sbuf__varint(&c[C_FL], fl >> 2);
		extras_put(&c[C_EXTRA], e, fl);
	}
	grp_write(b, g3.w.start, V3_VERSION, ++g3.w.nrec, c, C_MAX);
	g3.w.len = b->len;
}

/* Per entry of a v3 group while it decodes. */
struct v3_ent {
	struct comm_slot *cs;
	bool fresh; /* the key is new to its slot here: the values start from 0 */
	uint64_t v[V_MAX], fl;
};

/* A v3 or v4 group while it decodes: its records, their entries one after
 * the other, and the keys' state. */
struct grp {
	struct cpa_metrics *ms;
	struct cpa_metrics_ent *ents;
	struct v3_ent *x;
	struct ktab st;
	struct ctab ct; /* v4 */
	uint64_t nrec, n_ent;
};

static void grp_free(struct grp *g)
{
	free(g->ct.c);
	free(g->ms);
	free(g->ents);
	free(g->x);
	free(g->st.s);
}

/* The group's count and headers, then room for its entries, each of which
 * takes at least ent_min bytes of what is left. */
static int grp_start(struct rbuf *r, uint64_t max_rec, size_t ent_min, struct grp *g)
{
	uint64_t i;

	g->st.cap = 256;
	g->nrec = rbuf__varint(r);
	if (r->bad || !g->nrec || g->nrec > max_rec)
		return -EBADMSG;
	g->ms = calloc(g->nrec, sizeof(*g->ms));
	if (!g->ms)
		return -ENOMEM;
	for (i = 0; i < g->nrec; i++) {
		if (!hdr_get(r, &g->ms[i], &g->st.time_ns))
			return -EBADMSG;
		g->n_ent += g->ms[i].n_ents;
	}
	if (g->n_ent > (r->len - r->pos) / ent_min)
		return -EBADMSG;
	while (g->st.cap < 2 * (g->n_ent + 1))
		g->st.cap *= 2; /* ktab_get() then never grows it */
	g->ents = calloc(g->n_ent + 1, sizeof(*g->ents));
	g->x = calloc(g->n_ent + 1, sizeof(*g->x));
	g->st.s = calloc(g->st.cap, sizeof(*g->st.s));
	return g->ents && g->x && g->st.s ? 0 : -ENOMEM;
}

/* The flags column, then the comms of the entries with COMM (v5: and of
 * those whose key is new to the group), which their keys take (an entry
 * without has its key's). */
static int grp_comms(struct rbuf *r, struct grp *g, unsigned int version)
{
	const bool v4 = version >= V4_VERSION;
	uint64_t at, ref;

	for (at = 0; at < g->n_ent; at++) {
		g->x[at].fl = rbuf__varint(r) << 2;
		if (version >= V5_VERSION && g->x[at].fresh)
			g->x[at].fl |= V2_E_COMM;
	}
	for (at = 0; at < g->n_ent && !r->bad; at++) {
		struct comm_slot *cs = g->x[at].cs;
		uint64_t cl;
		const uint8_t *p;

		ref = g->x[at].fl & V2_E_COMM && v4 ? rbuf__varint(r) : 0;
		if (ref > g->ct.n)
			return -EBADMSG;
		if (ref) {
			memcpy(g->ents[at].comm, g->ct.c[ref - 1], CPA_COMM_LEN);
		} else if (g->x[at].fl & V2_E_COMM) {
			cl = rbuf__varint(r);
			if (cl >= CPA_COMM_LEN || !(p = rbuf__bytes(r, cl)))
				return -EBADMSG;
			memcpy(g->ents[at].comm, p, cl);
			if (v4 && !ctab_add(&g->ct, g->ents[at].comm))
				return -ENOMEM;
		}
		if ((g->x[at].fl & V2_E_COMM) || g->x[at].fresh)
			memcpy(cs->comm, g->ents[at].comm, CPA_COMM_LEN);
		else
			memcpy(g->ents[at].comm, cs->comm, CPA_COMM_LEN);
	}
	return r->bad ? -EBADMSG : 0;
}

/* The extras column, then the group to the caller. */
/* The entries' values from their decoded columns (v3: each duration its own
 * code width; v4, v5: one width for both). */
static void grp_values(struct grp *g, unsigned int on_bits, unsigned int rq_bits)
{
	for (uint64_t at = 0; at < g->n_ent; at++) {
		struct cpa_metrics_ent *e = &g->ents[at];
		const uint64_t *v = g->x[at].v;

		e->oncpu_ns = dur3_value(v[V_ONCPU], on_bits);
		e->runq_ns = dur3_value(v[V_RUNQ], rq_bits);
		e->switches[CPA_MR_PREEMPT] = v[V_PREEMPT];
		e->switches[CPA_MR_SLEEP] = v[V_SLEEP];
		e->runq_n = v[V_WAITS] + v[V_PREEMPT] + v[V_SLEEP];
	}
}

static int grp_end(struct rbuf *r, struct grp *g, struct cpa_metrics **ret_ms,
		   struct cpa_metrics_ent **ret_ents, uint64_t *ret_nrec)
{
	for (uint64_t at = 0; at < g->n_ent; at++)
		if (!extras_get(r, &g->ents[at], g->x[at].fl))
			return -EBADMSG;
	if (r->bad)
		return -EBADMSG;
	*ret_ms = TAKE_PTR(g->ms);
	*ret_ents = TAKE_PTR(g->ents);
	*ret_nrec = g->nrec;
	return 0;
}

/* One v3 group after its leading 0 and version into ms (nrec records) and
 * ents (their entries, one after the other); -EBADMSG: malformed. */
static int decode_v3(struct rbuf *r, uint64_t max_rec, struct cpa_metrics **ret_ms,
		     struct cpa_metrics_ent **ret_ents, uint64_t *ret_nrec)
{
	_cleanup_(grp_free) struct grp g = {0};
	uint64_t i, j, at;
	int ret;

	/* an entry takes at least a byte: its key, its flags, its values */
	ret = grp_start(r, max_rec, 2 + V_MAX, &g);
	if (ret)
		return ret;
	for (i = at = 0; i < g.nrec; i++) {
		uint32_t prev_key = 0;

		for (j = 0; j < g.ms[i].n_ents; j++, at++) {
			uint32_t key = (uint32_t)((int64_t)prev_key + unzigzag(rbuf__varint(r)));

			prev_key = key;
			g.ents[at].kind = (uint16_t)(key >> 30);
			g.ents[at].id = key & 0x3fffffffu;
			g.x[at].cs = ktab_get(&g.st, key, &g.x[at].fresh);
		}
	}
	ret = grp_comms(r, &g, V3_VERSION);
	if (ret)
		return ret;
	for (j = 0; j < V_MAX; j++) {
		for (at = 0; at < g.n_ent; at++) {
			struct comm_slot *cs = g.x[at].cs;

			if (g.x[at].fresh)
				cs->prev[j] = 0;
			cs->prev[j] += (uint64_t)unzigzag(rbuf__varint(r));
			g.x[at].v[j] = cs->prev[j];
		}
	}
	grp_values(&g, ONCPU_BITS, RUNQ_BITS);
	return grp_end(r, &g, ret_ms, ret_ents, ret_nrec);
}

/* ---------------------------------------------------------------- v4 */

/* v4 is v3's group with (docs/store-format.md "v4 group"):
 * - a record's keys told against the previous second's: a bitmap of those
 *   that ran again, then the new ones, so that a steady process costs a bit;
 * - the values as they are, not against the key's previous second (two
 *   seconds of a noisy value differ by more than either is);
 * - the durations to 7 significant bits (within 1/128, docs/metrics.md
 *   "Stored precision"), their high part (the exponent) and their low 6
 *   bits in columns of their own: the low bits are noise that zstd cannot
 *   shrink, and mixed with the rest they kept it from shrinking that;
 * - the preempted and voluntary switches in one byte, the rest of a count
 *   above 14 apart. */
#define DUR4_BITS 7  /* significant bits of a duration */
#define SW_MAX	  15 /* in the switches byte: the count - 15 follows as a varint */

enum {
	F_HDR,
	F_MEMB,
	F_KEY,
	F_FL,
	F_COMM,
	F_ONCPU,
	F_RUNQ,
	F_SW,
	F_SW_ESC,
	F_WAITS,
	F_ONCPU_LO,
	F_RUNQ_LO,
	F_EXTRA,
	F_MAX
};

/* A duration in ns to a dense code of bits significant bits of µs, as
 * dur3_code() but rounded to nearest once, from the ns (dur3_value() reads
 * it): below 2^bits µs the µs count, else (e + 1) * H + m - H for m << e µs,
 * m in [H, 2H), H = 2^(bits - 1). */
static uint64_t dur4_code(uint64_t ns, unsigned int bits)
{
	const uint64_t h = 1ull << (bits - 1);
	uint64_t us = ns / 1000 + (ns % 1000 >= 500), unit, m;
	unsigned int e;

	if (us < 2 * h)
		return us;
	e = 63 - (unsigned int)__builtin_clzll(ns / 1000 ? ns / 1000 : 1);
	e = e > bits - 1 ? e - (bits - 1) : 0;
	unit = 1000ull << e;
	m = ns / unit + (ns % unit >= unit / 2);
	if (m >= 2 * h) {
		m = h;
		e++;
	}
	return (e + 1) * h + m - h;
}

struct keylist {
	uint32_t *k;
	size_t n, cap;
};

static bool keylist_add(struct keylist *l, uint32_t key)
{
	if (array_grow((void **)&l->k, &l->cap, l->n + 1, sizeof(*l->k)) < 0)
		return false;
	l->k[l->n++] = key;
	return true;
}

/* The keys of the previous second and of this one so far: a record's bitmap
 * covers the previous second's keys after those the second's earlier
 * records covered (cursor), up to the record's last key. */
struct members {
	struct keylist prev, cur;
	uint64_t sec_ns;
	size_t cursor;
	uint32_t last_new; /* the second's previous new key */
};

static void members_second(struct members *mb, uint64_t time_ns)
{
	struct keylist t;

	if (time_ns == mb->sec_ns)
		return;
	t = mb->prev;
	mb->prev = mb->cur;
	mb->cur = t;
	mb->cur.n = 0;
	mb->cursor = 0;
	mb->sec_ns = time_ns;
	mb->last_new = (uint32_t)CPA_MK_PROC << 30;
}

/* v5 is v4's group with (docs/store-format.md "v5 group"):
 * - the value columns (durations, switches, waits) in the order of the
 *   entries' comms, then keys, then their place in the group (v5_order()),
 *   which the reader knows before it reads them: the runs of a program
 *   (the same comm) are next to each other, the same process's seconds too,
 *   and zstd finds what they repeat;
 * - the durations to DUR5_BITS significant bits. */
#define DUR5_BITS DUR4_BITS

/* An entry's place in v5's value columns: by comm (NUL-padded), key, then
 * its place in the group. */
struct v5_key {
	char comm[CPA_COMM_LEN];
	uint32_t key, at;
};

static int v5_cmp(const void *x, const void *y)
{
	const struct v5_key *a = x, *b = y;
	int c = memcmp(a->comm, b->comm, CPA_COMM_LEN);

	if (c)
		return c;
	if (a->key != b->key)
		return a->key < b->key ? -1 : 1;
	return a->at < b->at ? -1 : a->at > b->at;
}

/* An entry's values as v4 and v5 write them (the durations as codes). */
struct v45_val {
	uint64_t on, rq, p, s, waits;
};

/* A v4 or v5 group writer. */
struct g45 {
	struct grp_w w;
	struct sbuf col[F_MAX];
	struct members mb;
	struct ctab ct;
	/* v5: the group's entries so far in value order (the first sorted of
	 * them; those after, this record's), their values by place */
	struct v5_key *k, *t;
	struct v45_val *v;
	size_t n, sorted, cap_k, cap_t, cap_v;
};

static _Thread_local struct g45 g4, g5;

const struct sbuf *store_metrics__v4_columns(unsigned int *n)
{
	*n = F_MAX;
	return g4.col;
}

const struct sbuf *store_metrics__v5_columns(unsigned int *n)
{
	*n = F_MAX;
	return g5.col;
}

/* The membership of a record's n entries (order: in key order) into c. */
static bool members_put(struct members *mb, struct sbuf *c,
			const struct cpa_metrics_ent *const *order, unsigned int n)
{
	size_t cand = 0, at, j = 0;
	uint8_t *bits;

	while (n && mb->cursor + cand < mb->prev.n &&
	       mb->prev.k[mb->cursor + cand] <= comm_key(order[n - 1]))
		cand++;
	sbuf__varint(&c[F_MEMB], cand);
	at = c[F_MEMB].len;
	if (sbuf__reserve(&c[F_MEMB], (cand + 7) / 8) < 0)
		return false;
	bits = c[F_MEMB].p + at;
	memset(bits, 0, (cand + 7) / 8);
	c[F_MEMB].len += (cand + 7) / 8;
	for (unsigned int i = 0; i < n; i++) {
		uint32_t key = comm_key(order[i]);

		while (j < cand && mb->prev.k[mb->cursor + j] < key)
			j++;
		if (j < cand && mb->prev.k[mb->cursor + j] == key) {
			bits[j / 8] |= (uint8_t)(1u << (j % 8));
			j++;
		} else {
			sbuf__varint(&c[F_KEY], zigzag((int64_t)key - (int64_t)mb->last_new));
			mb->last_new = key;
		}
		if (!keylist_add(&mb->cur, key))
			return false;
	}
	mb->cursor += cand;
	return true;
}

static struct v45_val values_of(const struct cpa_metrics_ent *e, unsigned int bits)
{
	uint64_t p = e->switches[CPA_MR_PREEMPT], s = e->switches[CPA_MR_SLEEP];

	return (struct v45_val){dur4_code(e->oncpu_ns, bits), dur4_code(e->runq_ns, bits), p, s,
				e->runq_n - p - s};
}

static void values_put(struct sbuf *c, const struct v45_val *v, unsigned int bits)
{
	const unsigned int lb = bits - 1;
	uint8_t lo[2] = {(uint8_t)(v->on & ((1u << lb) - 1)), (uint8_t)(v->rq & ((1u << lb) - 1))},
		sw;

	sbuf__varint(&c[F_ONCPU], v->on >> lb);
	sbuf__varint(&c[F_RUNQ], v->rq >> lb);
	sbuf__put(&c[F_ONCPU_LO], &lo[0], 1);
	sbuf__put(&c[F_RUNQ_LO], &lo[1], 1);
	sw = (uint8_t)(MIN(v->p, SW_MAX) << 4 | MIN(v->s, SW_MAX));
	sbuf__put(&c[F_SW], &sw, 1);
	if (v->p >= SW_MAX)
		sbuf__varint(&c[F_SW_ESC], v->p - SW_MAX);
	if (v->s >= SW_MAX)
		sbuf__varint(&c[F_SW_ESC], v->s - SW_MAX);
	sbuf__varint(&c[F_WAITS], zigzag((int64_t)v->waits));
}

/* v5: e (at in the group) joins the group's entries. */
static bool v5_add(struct g45 *g, const struct cpa_metrics_ent *e)
{
	size_t cl = strnlen(e->comm, CPA_COMM_LEN - 1);
	struct v5_key *k;

	if (array_grow((void **)&g->k, &g->cap_k, g->n + 1, sizeof(*g->k)) < 0 ||
	    array_grow((void **)&g->v, &g->cap_v, g->n + 1, sizeof(*g->v)) < 0)
		return false;
	k = &g->k[g->n];
	memset(k->comm, 0, sizeof(k->comm));
	memcpy(k->comm, e->comm, cl);
	k->key = comm_key(e);
	k->at = (uint32_t)g->n;
	g->v[g->n++] = values_of(e, DUR5_BITS);
	return true;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

/* v5: the value columns of the group's entries afresh, in v5_cmp() order:
 * this record's entries sorted and merged into the sorted ones, then each
 * column written in one pass (the group is rewritten at every record). */
static bool v5_values(struct g45 *g)
{
	static const unsigned int vcol[] = {F_ONCPU, F_RUNQ,	 F_SW,	   F_SW_ESC,
					    F_WAITS, F_ONCPU_LO, F_RUNQ_LO};
	const unsigned int lb = DUR5_BITS - 1;
	uint8_t *p[ARRAY_SIZE(vcol)];
	size_t i, a = 0, b = g->sorted;

	if (g->n > g->sorted) /* a record of no entries: g->k may be NULL */
		qsort(g->k + g->sorted, g->n - g->sorted, sizeof(*g->k), v5_cmp);
	if (array_grow((void **)&g->t, &g->cap_t, g->n, sizeof(*g->t)) < 0)
		return false;
	for (i = 0; i < g->n; i++)
		g->t[i] = b >= g->n || (a < g->sorted && v5_cmp(&g->k[a], &g->k[b]) < 0)
				  ? g->k[a++]
				  : g->k[b++];
	{
		struct v5_key *x = g->k;
		size_t c = g->cap_k;

		g->k = g->t;
		g->cap_k = g->cap_t;
		g->t = x;
		g->cap_t = c;
	}
	g->sorted = g->n;
	for (i = 0; i < ARRAY_SIZE(vcol); i++) {
		g->col[vcol[i]].len = 0;
		if (sbuf__reserve(&g->col[vcol[i]], 20 * g->n + 1) < 0)
			return false;
		p[i] = g->col[vcol[i]].p;
	}
	for (i = 0; i < g->n; i++) { /* as values_put() */
		const struct v45_val *v = &g->v[g->k[i].at];

		p[0] = put_varint(p[0], v->on >> lb);
		p[1] = put_varint(p[1], v->rq >> lb);
		*p[2]++ = (uint8_t)(MIN(v->p, SW_MAX) << 4 | MIN(v->s, SW_MAX));
		if (v->p >= SW_MAX)
			p[3] = put_varint(p[3], v->p - SW_MAX);
		if (v->s >= SW_MAX)
			p[3] = put_varint(p[3], v->s - SW_MAX);
		p[4] = put_varint(p[4], zigzag((int64_t)v->waits));
		*p[5]++ = (uint8_t)(v->on & ((1u << lb) - 1));
		*p[6]++ = (uint8_t)(v->rq & ((1u << lb) - 1));
	}
	for (i = 0; i < ARRAY_SIZE(vcol); i++)
		g->col[vcol[i]].len = (size_t)(p[i] - g->col[vcol[i]].p);
	return true;
}

unsigned int store_metrics__test_version;

static void encode_v45(struct g45 *g, unsigned int version, struct sbuf *b,
		       const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	const struct cpa_metrics_ent *order[CPA_METRICS_PER_REC];
	unsigned int i, n = MIN(m->n_ents, CPA_METRICS_PER_REC);
	struct sbuf *c = g->col;

	if (grp_begin(&g->w, b, c, F_MAX)) {
		g->mb.prev.n = g->mb.cur.n = 0;
		g->mb.sec_ns = 0;
		g->ct.n = 0;
		g->n = g->sorted = 0;
		if (!g->ct.h && !(g->ct.h = calloc(2 * CTAB_MAX, sizeof(*g->ct.h))))
			goto oom;
		memset(g->ct.h, 0, 2 * CTAB_MAX * sizeof(*g->ct.h));
	}
	hdr_put(&c[F_HDR], m, n, &g->w.st.time_ns);
	members_second(&g->mb, m->time_ns);
	ents_sort(order, ents, n);
	if (!members_put(&g->mb, c, order, n))
		goto oom;
	for (i = 0; i < n; i++) {
		const struct cpa_metrics_ent *e = order[i];
		uint32_t key = comm_key(e), fl = 0;
		bool fresh;
		struct comm_slot *cs = ktab_get(&g->w.st, key, &fresh);
		struct v45_val v;

		if (!cs)
			goto oom;
		/* v5: a key new to the group always has its comm, which its flags
		 * then do not say */
		fl = comm_put(&c[F_COMM], &g->ct, cs, e, fresh && version >= V5_VERSION);
		if (fresh && version >= V5_VERSION)
			fl &= ~V2_E_COMM;
		if (version < V5_VERSION) {
			v = values_of(e, DUR4_BITS);
			values_put(c, &v, DUR4_BITS);
		} else if (!v5_add(g, e)) {
			goto oom;
		}
		fl |= extras_flags(e);
		sbuf__varint(&c[F_FL], fl >> 2);
		extras_put(&c[F_EXTRA], e, fl);
	}
	if (version >= V5_VERSION && !v5_values(g))
		goto oom;
	grp_write(b, g->w.start, version, ++g->w.nrec, c, F_MAX);
	g->w.len = b->len;
	return;
oom:
	b->oom = true;
	g->w.owner = NULL;
}

void store_metrics__encode_v4(struct sbuf *b, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents)
{
	encode_v45(&g4, V4_VERSION, b, m, ents);
}

void store_metrics__encode(struct sbuf *b, const struct cpa_metrics *m,
			   const struct cpa_metrics_ent *ents)
{
	encode_v45(&g5, store_metrics__test_version ? store_metrics__test_version : V5_VERSION, b,
		   m, ents);
}

/* The keys of a v4 group's records (ms, nrec) into ents and x: the
 * membership column (m), then the new keys (r). */
static int keys_get(struct rbuf *m, struct rbuf *r, const struct cpa_metrics *ms, uint64_t nrec,
		    struct ktab *st, struct cpa_metrics_ent *ents, struct v3_ent *x)
{
	struct members mb = {0};
	uint64_t i, j, at = 0;
	int ret = -EBADMSG;

	for (i = 0; i < nrec; i++) {
		unsigned int n = ms[i].n_ents, got = 0, nn, a = 0, bb = 0;
		uint32_t nk[CPA_METRICS_PER_REC];
		const uint8_t *bits;
		uint64_t c;

		members_second(&mb, ms[i].time_ns);
		c = rbuf__varint(m);
		if (m->bad || c > mb.prev.n - mb.cursor)
			goto out;
		bits = rbuf__bytes(m, (c + 7) / 8);
		if (!bits && c)
			goto out;
		for (j = 0; j < c; j++)
			got += (bits[j / 8] >> (j % 8)) & 1;
		if (got > n)
			goto out;
		nn = n - got;
		for (j = 0; j < nn; j++) {
			mb.last_new = (uint32_t)((int64_t)mb.last_new + unzigzag(rbuf__varint(r)));
			nk[j] = mb.last_new;
		}
		if (r->bad)
			goto out;
		/* the keys that ran again and the new ones, merged in key order */
		for (j = 0; j < n; j++, at++) {
			uint32_t key;

			while (a < c && !((bits[a / 8] >> (a % 8)) & 1))
				a++;
			if (a < c && (bb >= nn || mb.prev.k[mb.cursor + a] <= nk[bb]))
				key = mb.prev.k[mb.cursor + a++];
			else
				key = nk[bb++];
			ents[at].kind = (uint16_t)(key >> 30);
			ents[at].id = key & 0x3fffffffu;
			x[at].cs = ktab_get(st, key, &x[at].fresh);
			if (!x[at].cs || !keylist_add(&mb.cur, key)) {
				ret = -ENOMEM;
				goto out;
			}
		}
		mb.cursor += c;
	}
	ret = 0;
out:
	free(mb.prev.k);
	free(mb.cur.k);
	return ret;
}

/* v5: the order of a group's value columns (v5_cmp()), its entries' keys
 * and comms read; NULL: no memory. */
static uint32_t *v5_order(const struct grp *g)
{
	_cleanup_free_ struct v5_key *k = calloc(g->n_ent + 1, sizeof(*k));
	uint32_t *ord = calloc(g->n_ent + 1, sizeof(*ord));

	if (!k || !ord) {
		free(ord);
		return NULL;
	}
	for (uint64_t at = 0; at < g->n_ent; at++) {
		memcpy(k[at].comm, g->ents[at].comm, CPA_COMM_LEN);
		k[at].key = comm_key(&g->ents[at]);
		k[at].at = (uint32_t)at;
	}
	qsort(k, g->n_ent, sizeof(*k), v5_cmp);
	for (uint64_t i = 0; i < g->n_ent; i++)
		ord[i] = k[i].at;
	return ord;
}

/* One v4 or v5 group after its leading 0 and version, as decode_v3(). */
static int decode_v45(struct rbuf *r, unsigned int version, uint64_t max_rec,
		      struct cpa_metrics **ret_ms, struct cpa_metrics_ent **ret_ents,
		      uint64_t *ret_nrec)
{
	_cleanup_(grp_free) struct grp g = {0};
	_cleanup_free_ uint32_t *ord = NULL;
	const unsigned int bits = version == V4_VERSION ? DUR4_BITS : DUR5_BITS, lb = bits - 1;
	const uint8_t *sw, *lo[2];
	struct rbuf memb;
	uint64_t i, k, c;
	int ret;

	/* an entry takes at least 6 bytes: flags, 2 durations, low bits, switches, waits */
	ret = grp_start(r, max_rec, 6, &g);
	if (ret)
		return ret;
	memb = (struct rbuf){.p = r->p + r->pos, .len = r->len - r->pos};
	for (i = 0; i < g.nrec; i++) { /* to the membership column's end */
		c = rbuf__varint(r);
		if (r->bad || c > g.n_ent || !rbuf__bytes(r, (c + 7) / 8))
			return -EBADMSG;
	}
	ret = keys_get(&memb, r, g.ms, g.nrec, &g.st, g.ents, g.x);
	if (!ret)
		ret = grp_comms(r, &g, version);
	if (ret)
		return ret;
	if (version >= V5_VERSION && !(ord = v5_order(&g)))
		return -ENOMEM;
#define AT(k) (ord ? ord[k] : (k)) /* the entry of the value columns' k-th */
	for (k = 0; k < g.n_ent; k++)
		g.x[AT(k)].v[V_ONCPU] = rbuf__varint(r);
	for (k = 0; k < g.n_ent; k++)
		g.x[AT(k)].v[V_RUNQ] = rbuf__varint(r);
	sw = rbuf__bytes(r, g.n_ent);
	if (!sw)
		return -EBADMSG;
	for (k = 0; k < g.n_ent; k++) {
		uint64_t *v = g.x[AT(k)].v;

		v[V_PREEMPT] = sw[k] >> 4;
		v[V_SLEEP] = sw[k] & SW_MAX;
		if (v[V_PREEMPT] == SW_MAX)
			v[V_PREEMPT] += rbuf__varint(r);
		if (v[V_SLEEP] == SW_MAX)
			v[V_SLEEP] += rbuf__varint(r);
	}
	for (k = 0; k < g.n_ent; k++)
		g.x[AT(k)].v[V_WAITS] = (uint64_t)unzigzag(rbuf__varint(r));
	lo[0] = rbuf__bytes(r, g.n_ent);
	lo[1] = rbuf__bytes(r, g.n_ent);
	if (!lo[0] || !lo[1])
		return -EBADMSG;
	for (k = 0; k < g.n_ent; k++) {
		uint64_t *v = g.x[AT(k)].v;

		v[V_ONCPU] = v[V_ONCPU] << lb | (lo[0][k] & ((1u << lb) - 1));
		v[V_RUNQ] = v[V_RUNQ] << lb | (lo[1][k] & ((1u << lb) - 1));
	}
#undef AT
	grp_values(&g, bits, bits);
	return grp_end(r, &g, ret_ms, ret_ents, ret_nrec);
}

static void str_put(struct sbuf *b, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	sbuf__varint(b, n);
	sbuf__put(b, s, n);
}

static bool str_get(struct rbuf *r, char *dst, size_t max)
{
	uint64_t n = rbuf__varint(r);
	const uint8_t *p;

	if (r->bad || n >= max)
		return false;
	p = rbuf__bytes(r, n);
	if (!p)
		return false;
	memcpy(dst, p, n);
	dst[n] = '\0';
	return true;
}

void store_metrics__encode_event(struct sbuf *b, const struct cpa_policy_event *ev)
{
	sbuf__varint(b, ev->time_ns);
	sbuf__varint(b, ev->end_ns);
	sbuf__varint(b, ev->kind);
	sbuf__varint(b, ev->item);
	sbuf__varint(b, ev->cmp);
	sbuf__varint(b, ev->pid);
	sbuf__varint(b, ev->actions);
	sbuf__varint(b, ev->freq);
	sbuf__varint(b, ev->stack_size);
	sbuf__put(b, &ev->threshold, sizeof(double)); /* IEEE 754, little-endian */
	sbuf__put(b, &ev->value, sizeof(double));
	str_put(b, ev->policy, CPA_POLICY_NAME_LEN - 1);
	str_put(b, ev->comm, CPA_COMM_LEN - 1);
}

static int decode_events(struct rbuf *r, uint64_t t0_ns, uint64_t t1_ns, store_event_fn fn,
			 void *ctx)
{
	uint64_t n = rbuf__varint(r), i;
	int ret;

	if (r->bad || n > r->len)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		struct cpa_policy_event ev = {0};
		const uint8_t *d;

		ev.time_ns = rbuf__varint(r);
		ev.end_ns = rbuf__varint(r);
		ev.kind = (uint16_t)rbuf__varint(r);
		ev.item = (uint16_t)rbuf__varint(r);
		ev.cmp = (uint16_t)rbuf__varint(r);
		ev.pid = (uint32_t)rbuf__varint(r);
		ev.actions = (uint32_t)rbuf__varint(r);
		ev.freq = (uint32_t)rbuf__varint(r);
		ev.stack_size = (uint32_t)rbuf__varint(r);
		d = rbuf__bytes(r, 2 * sizeof(double));
		if (!d || !str_get(r, ev.policy, sizeof(ev.policy)) ||
		    !str_get(r, ev.comm, sizeof(ev.comm)))
			return -EBADMSG;
		memcpy(&ev.threshold, d, sizeof(double));
		memcpy(&ev.value, d + sizeof(double), sizeof(double));
		if (ev.time_ns < t0_ns || ev.time_ns >= t1_ns || !fn)
			continue;
		ret = fn(ctx, &ev);
		if (ret)
			return ret;
	}
	return 0;
}

int store_metrics__offset(const uint8_t *p, size_t len, size_t *ret_off)
{
	struct rbuf r = {.p = p, .len = len};
	uint64_t n = rbuf__varint(&r), i;

	if (r.bad || n > len)
		return -EBADMSG;
	for (i = 0; i < n * ROW_COLUMNS && !r.bad; i++)
		rbuf__varint(&r);
	if (r.bad)
		return -EBADMSG;
	*ret_off = r.pos;
	return 0;
}

int store_metrics__decode(const uint8_t *p, size_t len, uint64_t t0_ns, uint64_t t1_ns,
			  store_metrics_fn fn, store_event_fn efn, void *ctx)
{
	struct rbuf r = {.p = p, .len = len};
	_cleanup_free_ struct cpa_metrics_ent *ents = NULL;
	_cleanup_free_ struct v2_state *st = NULL;
	uint64_t nrec = rbuf__varint(&r), i, j, k;
	bool newer = false;
	int ret;

	if (r.bad || nrec > len)
		return -EBADMSG;
	ents = calloc(CPA_METRICS_PER_REC, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	for (i = 0; i < nrec; i++) {
		struct cpa_metrics m = {0};
		uint64_t v;

		m.time_ns = rbuf__varint(&r);
		v = m.time_ns || r.bad ? 1 : rbuf__varint(&r); /* v1, else the version */
		if (v >= V3_VERSION) {
			_cleanup_free_ struct cpa_metrics *ms = NULL;
			_cleanup_free_ struct cpa_metrics_ent *es = NULL;
			uint64_t n = 0, glen = v >= V5_VERSION ? rbuf__varint(&r) : 0;
			struct rbuf gr = r;

			if (v >= V5_VERSION) { /* the group is the next glen bytes */
				if (r.bad || glen > r.len - r.pos)
					return -EBADMSG;
				gr = (struct rbuf){.p = r.p + r.pos, .len = glen};
				r.pos += glen;
			}
			if (v > V5_VERSION) { /* newer than this reader: its records skipped */
				n = rbuf__varint(&gr);
				if (gr.bad || !n || n > nrec - i)
					return -EBADMSG;
				newer = true;
				i += n - 1;
				continue;
			}
			if (v == V3_VERSION)
				ret = decode_v3(&r, nrec - i, &ms, &es, &n);
			else if (v == V4_VERSION)
				ret = decode_v45(&r, V4_VERSION, nrec - i, &ms, &es, &n);
			else if (!(ret = decode_v45(&gr, V5_VERSION, nrec - i, &ms, &es, &n)) &&
				 gr.pos != gr.len)
				ret = -EBADMSG; /* not the group's length */
			if (ret)
				return ret;
			for (j = k = 0; j < n; k += ms[j].n_ents, j++) {
				if (ms[j].time_ns < t0_ns || ms[j].time_ns >= t1_ns || !fn)
					continue;
				ret = fn(ctx, &ms[j], es + k);
				if (ret)
					return ret;
			}
			i += n - 1;
			continue;
		}
		if (v == V2_VERSION) {
			if (!st && !(st = calloc(1, sizeof(*st))))
				return -ENOMEM;
			memset(ents, 0, sizeof(*ents) * CPA_METRICS_PER_REC);
			if (!decode_v2(&r, st, &m, ents))
				return -EBADMSG;
			goto got;
		}
		if (!m.time_ns)
			return -EBADMSG;
		m.interval_ms = (uint32_t)rbuf__varint(&r);
		m.flags = (uint16_t)rbuf__varint(&r);
		sys_get(&r, &m);
		hw_get(&r, &m);
		m.dropped = (uint32_t)rbuf__varint(&r);
		v = rbuf__varint(&r);
		if (r.bad || v > CPA_METRICS_PER_REC)
			return -EBADMSG;
		m.n_ents = (uint16_t)v;
		memset(ents, 0, sizeof(*ents) * CPA_METRICS_PER_REC);
		for (j = 0; j < m.n_ents; j++) {
			struct cpa_metrics_ent *e = &ents[j];
			const uint8_t *c;
			uint64_t cl;

			e->kind = (uint16_t)rbuf__varint(&r);
			e->id = (uint32_t)rbuf__varint(&r);
			cl = rbuf__varint(&r);
			if (cl >= CPA_COMM_LEN)
				return -EBADMSG;
			c = rbuf__bytes(&r, cl);
			if (!c)
				return -EBADMSG;
			memcpy(e->comm, c, cl);
			e->oncpu_ns = rbuf__varint(&r);
			e->runq_ns = rbuf__varint(&r);
			e->runq_n = rbuf__varint(&r);
			e->slices = rbuf__varint(&r);
			for (k = 0; k < CPA_MR_MAX; k++)
				e->switches[k] = rbuf__varint(&r);
			if (!hist_get(&r, e->runq_hist) || !hist_get(&r, e->slice_hist))
				return -EBADMSG;
		}
		if (r.bad)
			return -EBADMSG;
got:
		if (m.time_ns < t0_ns || m.time_ns >= t1_ns || !fn)
			continue;
		ret = fn(ctx, &m, ents);
		if (ret)
			return ret;
	}
	ret = decode_events(&r, t0_ns, t1_ns, efn, ctx);
	return ret ? ret : newer ? STORE_METRICS_NEWER : 0;
}
