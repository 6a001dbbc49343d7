// SPDX-License-Identifier: MIT
/*
 * The store's metrics section (storer/store_metrics.c, docs/store-format.md
 * "Metrics section"): records in the encoding the storer writes (v5) come
 * back as they went in (the two durations within 1/128 of theirs or 0.5 µs:
 * v5 keeps 7 significant bits of µs), also when processes come and go from
 * second to second and a second spans several records; records of released
 * stores (v1), of development builds (v2, within 1/256), of v3 stores
 * (within 1/64 + 0.5 µs) and of v4 stores still read, alone or in one
 * section with v5 ones; an encoder that another section's records
 * interrupted starts afresh instead of referring to the wrong records; a
 * damaged v3, v4 or v5 group is refused (-EBADMSG: the reader skips the
 * section, the block's rows are decoded apart from it) without reading out
 * of bounds; a group of a newer version is skipped by its length, the rest
 * of the section read, and a store of such groups reads its samples, counts
 * no block corrupt and says so once.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "store_metrics_fixtures.h"
#include "store_metrics_pvt.h"
#include "test_store_util.h"
#include "test_util.h"

#define NREC 6

#define GOT_MAX 96 /* records decoded at most */

struct got {
	struct cpa_metrics m[GOT_MAX];
	struct cpa_metrics_ent e[GOT_MAX][CPA_METRICS_PER_REC];
	unsigned int n;
};

static int on_rec(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct got *g = ctx;

	ck_assert_uint_lt(g->n, GOT_MAX);
	g->m[g->n] = *m;
	memcpy(g->e[g->n], ents, sizeof(*ents) * m->n_ents);
	g->n++;
	return 0;
}

/* Second s: a system part in the first record, processes (some with a comm,
 * some exact with histograms and iowait, some from the counters) and CPUs. */
static void make(unsigned int s, struct cpa_metrics *m, struct cpa_metrics_ent *e)
{
	memset(m, 0, sizeof(*m));
	m->time_ns = 1764000000000000000ull + s * 1000000000ull + s * 7;
	m->interval_ms = 1000 + s;
	m->flags = (s % 2 ? CPA_MF_SYSTEM | CPA_MF_HW : CPA_MF_COUNTERS) |
		   (s == 4 ? CPA_MF_SYSTEM | CPA_MF_HW_NA : 0);
	if (m->flags & CPA_MF_SYSTEM) {
		m->load_milli[0] = 1234 + s;
		m->load_milli[2] = 99;
		m->nr_cpus = 2;
		m->cpu_busy_ticks = 150;
		m->cpu_idle_ticks = 50 + s;
		m->psi_some_us[CPA_PSI_CPU] = 4000;
		m->psi_full_us[CPA_PSI_CPU] = CPA_METRICS_PSI_NONE;
		m->psi_some_us[CPA_PSI_IO] = 0;
		m->psi_full_us[CPA_PSI_IO] = 7;
		m->psi_some_us[CPA_PSI_MEM] = m->psi_full_us[CPA_PSI_MEM] = CPA_METRICS_PSI_NONE;
		m->dropped = s;
	}
	if (m->flags & CPA_MF_HW) {
		m->hw_cycles = 3000000000ull + s;
		m->hw_instructions = 2000000000ull;
		m->hw_cache_misses = 12345;
	}
	m->n_ents = (uint16_t)(3 + s % 4);
	for (unsigned int i = 0; i < m->n_ents; i++) {
		struct cpa_metrics_ent *x = &e[i];

		memset(x, 0, sizeof(*x));
		x->kind = i == 0 ? CPA_MK_CPU : CPA_MK_PROC;
		x->id = i == 0 ? s % 2 : 4000000 - 1000 * i + s % 3; /* unordered */
		if (x->kind == CPA_MK_PROC)
			snprintf(x->comm, sizeof(x->comm), i == 2 && s == 3 ? "renamed" : "proc-%u",
				 i);
		x->oncpu_ns = 123456789ull * (i + 1) + s;
		x->runq_ns = 98765ull * i;
		x->runq_n = 17 + i;
		x->switches[CPA_MR_PREEMPT] = 5 + s;
		x->switches[CPA_MR_SLEEP] = 11 * i;
		if (!(m->flags & CPA_MF_COUNTERS)) {
			x->switches[CPA_MR_IOWAIT] = i % 2;
			x->runq_hist[3] = 7;
			x->runq_hist[CPA_METRICS_HIST - 1] = 1;
			x->slice_hist[20 + i] = 9;
		}
		x->slices = x->switches[0] + x->switches[1] + x->switches[2] + (i == 1 && s == 5);
		if (i == 2 && s % 2) { /* a probe's cost (kind 3) round-trips alike */
			memset(x, 0, sizeof(*x));
			x->kind = CPA_MK_PROBE;
			x->id = 1;
			snprintf(x->comm, sizeof(x->comm), "u:libc:malloc");
			x->runq_n = 126000 + s;
			x->oncpu_ns = x->runq_n * 7900;
			x->runq_ns = x->runq_n * 356;
		}
	}
}

static unsigned int tol = 128, slack = 500; /* durations within 1/tol + slack ns */

static bool close_to(uint64_t got, uint64_t want)
{
	uint64_t d = got > want ? got - want : want - got;

	return d <= want / tol + slack;
}

static void check_same(const struct got *g, unsigned int at, unsigned int s)
{
	struct cpa_metrics m;
	struct cpa_metrics_ent e[CPA_METRICS_PER_REC];

	make(s, &m, e);
	ck_assert_uint_eq(g->m[at].time_ns, m.time_ns);
	ck_assert_uint_eq(g->m[at].n_ents, m.n_ents);
	m.seq = g->m[at].seq;
	ck_assert_msg(!memcmp(&g->m[at], &m, sizeof(m)), "record %u: header differs", s);
	/* v2 and v3 keep the entries in id order: find each */
	for (unsigned int i = 0; i < m.n_ents; i++) {
		unsigned int j;

		for (j = 0; j < m.n_ents; j++)
			if (g->e[at][j].id == e[i].id && g->e[at][j].kind == e[i].kind)
				break;
		ck_assert_msg(j < m.n_ents, "record %u: entry %u missing", s, e[i].id);
		ck_assert_msg(close_to(g->e[at][j].oncpu_ns, e[i].oncpu_ns) &&
				      close_to(g->e[at][j].runq_ns, e[i].runq_ns),
			      "record %u: entry %u: on CPU %llu for %llu, run queue %llu for %llu",
			      s, e[i].id, (unsigned long long)g->e[at][j].oncpu_ns,
			      (unsigned long long)e[i].oncpu_ns,
			      (unsigned long long)g->e[at][j].runq_ns,
			      (unsigned long long)e[i].runq_ns);
		e[i].oncpu_ns = g->e[at][j].oncpu_ns;
		e[i].runq_ns = g->e[at][j].runq_ns;
		ck_assert_msg(!memcmp(&g->e[at][j], &e[i], sizeof(e[i])),
			      "record %u: entry %u (%s/%s) differs", s, e[i].id, e[i].comm,
			      g->e[at][j].comm);
	}
}

/* The n records of recs as a section as store_block.c writes it (n, the
 * records, then no events) in out, decoded into g: how many came back. */
static unsigned int decode(struct sbuf *out, const struct sbuf *recs, unsigned int n, struct got *g)
{
	out->len = 0;
	sbuf__varint(out, n);
	sbuf__put(out, recs->p, recs->len);
	sbuf__varint(out, 0);
	memset(g, 0, sizeof(*g));
	ck_assert_int_eq(store_metrics__decode(out->p, out->len, 0, UINT64_MAX, on_rec, NULL, g),
			 0);
	return g->n;
}

static size_t encode(struct sbuf *b, int v, unsigned int from, unsigned int to)
{
	size_t before = b->len;

	for (unsigned int s = from; s < to; s++) {
		struct cpa_metrics m;
		struct cpa_metrics_ent e[CPA_METRICS_PER_REC];

		make(s, &m, e);
		if (v == 1)
			store_metrics__encode_v1(b, &m, e);
		else if (v == 2)
			store_metrics__encode_v2(b, &m, e);
		else if (v == 3)
			store_metrics__encode_v3(b, &m, e);
		else if (v == 4)
			store_metrics__encode_v4(b, &m, e);
		else
			store_metrics__encode(b, &m, e);
	}
	return b->len - before;
}

/* The default tolerance (v4's) back, recs and sec freed. */
static void done(struct sbuf *recs, struct sbuf *sec)
{
	tol = 128;
	slack = 500;
	sbuf__free(recs);
	sbuf__free(sec);
}

/* recs holds records 0..NREC-1: each comes back */
static void check_all(struct sbuf *sec, const struct sbuf *recs, struct got *g)
{
	ck_assert_uint_eq(decode(sec, recs, NREC, g), NREC);
	for (unsigned int s = 0; s < NREC; s++)
		check_same(g, s, s);
}

START_TEST(test_metrics_v5_roundtrip)
{
	struct sbuf recs = {0}, sec = {0}, v1 = {0}, v2 = {0}, v3 = {0}, v4 = {0};
	static struct got g;
	size_t n5, n4, n3, n2, n1;

	n5 = encode(&recs, 5, 0, NREC);
	n4 = encode(&v4, 4, 0, NREC);
	n3 = encode(&v3, 3, 0, NREC);
	n2 = encode(&v2, 2, 0, NREC);
	n1 = encode(&v1, 1, 0, NREC);
	fprintf(stderr,
		"metrics section: v1 %zu bytes, v2 %zu, v3 %zu, v4 %zu, v5 %zu for %d records\n",
		n1, n2, n3, n4, n5, NREC);
	ck_assert_uint_lt(n5, n1);
	check_all(&sec, &recs, &g);
	/* one record alone, and a time range that takes the middle of a group */
	recs.len = 0;
	encode(&recs, 5, 3, 4);
	ck_assert_uint_eq(decode(&sec, &recs, 1, &g), 1);
	check_same(&g, 0, 3);
	recs.len = 0;
	encode(&recs, 5, 0, NREC);
	sec.len = 0;
	sbuf__varint(&sec, NREC);
	sbuf__put(&sec, recs.p, recs.len);
	sbuf__varint(&sec, 0);
	memset(&g, 0, sizeof(g));
	make(2, &g.m[0], g.e[0]);
	ck_assert_int_eq(store_metrics__decode(sec.p, sec.len, g.m[0].time_ns,
					       g.m[0].time_ns + 2000000000ull, on_rec, NULL, &g),
			 0);
	ck_assert_uint_eq(g.n, 2);
	check_same(&g, 1, 3);
	sbuf__free(&recs);
	sbuf__free(&sec);
	sbuf__free(&v1);
	sbuf__free(&v2);
	sbuf__free(&v3);
	sbuf__free(&v4);
}
END_TEST

/* Processes come and go from second to second and a second spans several
 * records (capture's 32 entries each, in pid order or not): each record
 * comes back with its keys, comms and counts exact, its durations within
 * 1/128 or 0.5 µs. */
#define CH_SECS 12 /* at most 8 records each: GOT_MAX */
#define CH_POOL 150

static bool ch_runs(unsigned int pid, unsigned int s)
{
	return ((pid * 2654435761u) ^ (s * 40503u)) % 5 != 0 || pid % 7 == 0;
}

/* the records of second s, their entries in n[] (at most 8 records) */
static unsigned int ch_make(unsigned int s, struct cpa_metrics *m,
			    struct cpa_metrics_ent (*e)[CPA_METRICS_PER_REC])
{
	unsigned int nrec = 0, k = 0;

	for (unsigned int p = 0; p < CH_POOL + 2; p++) {
		bool cpu = p >= CH_POOL;
		struct cpa_metrics_ent *x;

		if (!cpu && !ch_runs(p + 1, s))
			continue;
		if (k == 0 || m[nrec - 1].n_ents == CPA_METRICS_PER_REC || (cpu && k == 1)) {
			memset(&m[nrec], 0, sizeof(m[nrec]));
			m[nrec].time_ns = 1764000000000000000ull + s * 1000000000ull;
			m[nrec].interval_ms = 1000;
			m[nrec].flags = nrec ? CPA_MF_COUNTERS : CPA_MF_COUNTERS | CPA_MF_SYSTEM;
			nrec++;
			k = cpu ? 2 : 1;
		}
		x = &e[nrec - 1][m[nrec - 1].n_ents++];
		memset(x, 0, sizeof(*x));
		x->kind = cpu ? CPA_MK_CPU : CPA_MK_PROC;
		x->id = cpu ? p - CH_POOL : (p + 1) * 3 + (s % 4 == 3 && p % 11 == 0) * 1000;
		if (!cpu)
			snprintf(x->comm, sizeof(x->comm), "p%u", (p + s / 5) % 9);
		x->oncpu_ns = (uint64_t)(p + 1) * (s + 1) * 987654321ull % 1000000007ull;
		x->runq_ns = (uint64_t)(p + 3) * (s + 2) * 12345678ull % 200000000ull;
		x->switches[CPA_MR_PREEMPT] = (p * s) % (s == 5 ? 40 : 14);
		x->switches[CPA_MR_SLEEP] = (p + s) % 23;
		x->runq_n = x->switches[0] + x->switches[1] + (p % 3 == 0);
		x->slices = x->switches[0] + x->switches[1];
	}
	/* records after the first in reverse pid order */
	for (unsigned int r = 1; r < nrec; r++)
		for (unsigned int i = 0; i < m[r].n_ents / 2; i++) {
			struct cpa_metrics_ent t = e[r][i];

			e[r][i] = e[r][m[r].n_ents - 1 - i];
			e[r][m[r].n_ents - 1 - i] = t;
		}
	return nrec;
}

static void churn(int v)
{
	static struct cpa_metrics m[CH_SECS * 8];
	static struct cpa_metrics_ent e[CH_SECS * 8][CPA_METRICS_PER_REC];
	static struct got g;
	struct sbuf recs = {0}, sec = {0};
	unsigned int n = 0;

	memset(&g, 0, sizeof(g));
	for (unsigned int s = 0; s < CH_SECS; s++) {
		unsigned int k = ch_make(s, &m[n], &e[n]);

		for (unsigned int r = 0; r < k; r++)
			if (v == 4)
				store_metrics__encode_v4(&recs, &m[n + r], e[n + r]);
			else
				store_metrics__encode(&recs, &m[n + r], e[n + r]);
		n += k;
	}
	sbuf__varint(&sec, n);
	sbuf__put(&sec, recs.p, recs.len);
	sbuf__varint(&sec, 0);
	ck_assert_int_eq(store_metrics__decode(sec.p, sec.len, 0, UINT64_MAX, on_rec, NULL, &g), 0);
	ck_assert_uint_eq(g.n, n);
	for (unsigned int r = 0; r < n; r++) {
		ck_assert_uint_eq(g.m[r].time_ns, m[r].time_ns);
		ck_assert_uint_eq(g.m[r].n_ents, m[r].n_ents);
		for (unsigned int i = 0; i < m[r].n_ents; i++) {
			struct cpa_metrics_ent w = e[r][i];
			unsigned int j;

			for (j = 0; j < m[r].n_ents; j++)
				if (g.e[r][j].id == w.id && g.e[r][j].kind == w.kind)
					break;
			ck_assert_msg(j < m[r].n_ents, "record %u: %u missing", r, w.id);
			ck_assert_msg(g.e[r][j].oncpu_ns <= w.oncpu_ns + w.oncpu_ns / 128 + 500 &&
					      w.oncpu_ns <=
						      g.e[r][j].oncpu_ns + w.oncpu_ns / 128 + 500,
				      "record %u: %u: on CPU %llu for %llu", r, w.id,
				      (unsigned long long)g.e[r][j].oncpu_ns,
				      (unsigned long long)w.oncpu_ns);
			ck_assert(g.e[r][j].runq_ns <= w.runq_ns + w.runq_ns / 128 + 500 &&
				  w.runq_ns <= g.e[r][j].runq_ns + w.runq_ns / 128 + 500);
			w.oncpu_ns = g.e[r][j].oncpu_ns;
			w.runq_ns = g.e[r][j].runq_ns;
			ck_assert_msg(!memcmp(&g.e[r][j], &w, sizeof(w)),
				      "record %u: entry %u (%s/%s) differs", r, w.id, w.comm,
				      g.e[r][j].comm);
		}
	}
	sbuf__free(&recs);
	sbuf__free(&sec);
}

START_TEST(test_metrics_churn)
{
	churn(5);
	churn(4);
}
END_TEST

/* A group of version v, then a v5 one; then v's alone: each record back. */
static void older_group(struct sbuf *recs, struct sbuf *sec, struct got *g, int v)
{
	recs->len = 0;
	encode(recs, v, 0, 3);
	encode(recs, 5, 3, NREC);
	check_all(sec, recs, g);
	recs->len = 0;
	encode(recs, v, 0, NREC);
	check_all(sec, recs, g);
}

/* Released stores (v1), development builds' (v2), v3 and v4 stores: their
 * records read as they did, alone or in one section with v5 groups. */
START_TEST(test_metrics_v1_to_v4_still_read)
{
	struct sbuf recs = {0}, sec = {0};
	static struct got g;

	tol = 128;
	slack = 500;
	encode(&recs, 1, 0, NREC);
	encode(&recs, 5, 0, NREC);
	ck_assert_uint_eq(decode(&sec, &recs, 2 * NREC, &g), 2 * NREC);
	for (unsigned int s = 0; s < NREC; s++) {
		check_same(&g, s, s);
		check_same(&g, NREC + s, s);
	}
	recs.len = 0;
	encode(&recs, 5, 0, 2);
	encode(&recs, 1, 2, 3); /* a v5 group, v1, a new v5 group */
	encode(&recs, 5, 3, NREC);
	check_all(&sec, &recs, &g);
	older_group(&recs, &sec, &g, 4);
	tol = 64;
	slack = 520;
	older_group(&recs, &sec, &g, 3);
	tol = 256;
	slack = 0;
	recs.len = 0;
	encode(&recs, 2, 0, NREC);
	check_all(&sec, &recs, &g);
	done(&recs, &sec);
}
END_TEST

/* The bytes of a released store (v1), of a v3 and of a v4 store, frozen:
 * read as written. */
START_TEST(test_metrics_fixtures)
{
	struct sbuf recs = {0}, sec = {0};
	static struct got g;
	_cleanup_free_ char *v4 = NULL;
	size_t v4_len = 0;

	_Static_assert(NREC == 6, "the fixtures hold records 0..5");
	sbuf__put(&recs, fixture, FIXTURE_V1_LEN);
	check_all(&sec, &recs, &g);
	tol = 64;
	slack = 520;
	recs.len = 0;
	sbuf__put(&recs, fixture + FIXTURE_V1_LEN, sizeof(fixture) - FIXTURE_V1_LEN);
	check_all(&sec, &recs, &g);
	tol = 128;
	slack = 500;
	recs.len = 0;
	ck_assert_int_eq(
		read_full_file(CPA_FIXTURES "/store_metrics/v4.bin", 0, 1 << 20, &v4, &v4_len), 0);
	ck_assert_uint_eq(v4_len, 614);
	sbuf__put(&recs, v4, v4_len);
	check_all(&sec, &recs, &g);
	done(&recs, &sec);
}
END_TEST

/* Two sections written in turn (two writers): each decodes alone. */
START_TEST(test_metrics_interleaved)
{
	struct sbuf a = {0}, b = {0}, sec = {0};
	static struct got g;

	encode(&a, 5, 0, 2);
	encode(&b, 5, 2, 4);
	encode(&a, 5, 4, 6);
	encode(&b, 5, 1, 2);
	ck_assert_uint_eq(decode(&sec, &a, 4, &g), 4);
	check_same(&g, 0, 0);
	check_same(&g, 1, 1);
	check_same(&g, 2, 4);
	check_same(&g, 3, 5);
	ck_assert_uint_eq(decode(&sec, &b, 3, &g), 3);
	check_same(&g, 0, 2);
	check_same(&g, 1, 3);
	check_same(&g, 2, 1);
	sbuf__free(&a);
	sbuf__free(&b);
	sbuf__free(&sec);
}
END_TEST

static int on_event(void *ctx, const struct cpa_policy_event *ev)
{
	(void)ev;
	(*(unsigned int *)ctx)++;
	return 0;
}

/* Groups of a version newer than this reader (from v5 on a group says its
 * length): their records are skipped, the records around them and the
 * section's events read, and the decoder says so (STORE_METRICS_NEWER)
 * instead of calling the section malformed. */
START_TEST(test_metrics_newer_version_skipped)
{
	struct sbuf a = {0}, b = {0}, c = {0}, d = {0}, sec = {0};
	struct cpa_policy_event ev = {.time_ns = 1764000000000000000ull + 1, .kind = CPA_PE_START};
	static const uint8_t odd[] = {0, 9, 3, 1, 0xff, 0xff}; /* v9: 1 record, 2 bytes */
	static struct got g;
	unsigned int n_ev = 0;

	encode(&a, 5, 0, 2);
	store_metrics__test_version = 6; /* a v6 writer whose layout is v5's */
	encode(&b, 5, 2, 4);
	store_metrics__test_version = 0;
	encode(&c, 1, 4, 5);
	encode(&d, 5, 5, 6);
	sbuf__varint(&sec, NREC + 1);
	sbuf__put(&sec, a.p, a.len);
	sbuf__put(&sec, b.p, b.len);
	sbuf__put(&sec, odd, sizeof(odd));
	sbuf__put(&sec, c.p, c.len);
	sbuf__put(&sec, d.p, d.len);
	sbuf__varint(&sec, 1);
	store_metrics__encode_event(&sec, &ev);
	ck_assert_int_eq(store_metrics__decode(sec.p, sec.len, 0, UINT64_MAX, on_rec, on_event, &g),
			 STORE_METRICS_NEWER);
	ck_assert_uint_eq(g.n, 4);
	check_same(&g, 0, 0);
	check_same(&g, 1, 1);
	check_same(&g, 2, 4);
	check_same(&g, 3, 5);
	n_ev = 0;
	ck_assert_int_eq(
		store_metrics__decode(sec.p, sec.len, 0, UINT64_MAX, NULL, on_event, &n_ev),
		STORE_METRICS_NEWER);
	ck_assert_uint_eq(n_ev, 1);
	/* a newer group's length past the section, or more records than left */
	sec.len = 0;
	sbuf__varint(&sec, 1);
	sbuf__put(&sec, odd, 3);
	ck_assert_int_eq(store_metrics__decode(sec.p, sec.len, 0, UINT64_MAX, NULL, NULL, NULL),
			 -EBADMSG);
	sec.len = 0;
	sbuf__varint(&sec, 1);
	sbuf__put(&sec, (const uint8_t[]){0, 9, 3, 2, 0xff, 0xff, 0}, 7);
	ck_assert_int_eq(store_metrics__decode(sec.p, sec.len, 0, UINT64_MAX, NULL, NULL, NULL),
			 -EBADMSG);
	sbuf__free(&a);
	sbuf__free(&b);
	sbuf__free(&c);
	sbuf__free(&d);
	sbuf__free(&sec);
}
END_TEST

static unsigned int n_notice, n_newer;

static void on_notice(void *ctx, const char *msg)
{
	(void)ctx;
	n_notice++;
	n_newer += strstr(msg, "newer format") != NULL;
}

static int count_samples(void *ctx, const struct store_sample *smp)
{
	*(uint64_t *)ctx += smp->count;
	return 0;
}

static int count_recs(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *e)
{
	(void)m;
	(void)e;
	(*(unsigned int *)ctx)++;
	return 0;
}

/* A store whose metrics a newer cpa wrote: this reader reads every sample,
 * counts no block corrupt, skips the metrics and says so once. */
START_TEST(test_metrics_newer_store)
{
	for (unsigned int ver = 0; ver <= 6; ver += 6) {
		struct store_writer_opts o = {.record_interval = 1};
		struct store_writer *w;
		struct store_reader *r;
		struct store_read_stats st;
		uint64_t base = t_base_ns(), seq = 1, samples = 0;
		unsigned int n_recs = 0;
		char *root = t_mkdtemp(), dir[1024];

		o.root = root;
		store_metrics__test_version = ver;
		ck_assert_int_eq(store_writer__new(&o, &w), 0);
		t_defs(w, 4, 0);
		for (unsigned int s = 0; s < 12; s++) {
			struct cpa_metrics m;
			struct cpa_metrics_ent e[CPA_METRICS_PER_REC];
			struct cpa_sample_out smp;

			make(s % NREC, &m, e);
			m.seq = seq++;
			m.time_ns = base + s * T_NS + 500000000ull;
			ck_assert_int_eq(store_writer__add_metrics(w, &m, e), 0);
			for (uint32_t k = 1; k <= 4; k++) {
				t_sample(&smp, seq++, base + s * T_NS + k * 100000000ull, k, 0);
				ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
			}
		}
		store_writer__free(w);
		store_metrics__test_version = 0;
		ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
		n_notice = n_newer = 0;
		ck_assert_int_eq(store_reader__open(dir, on_notice, NULL, &r), 0);
		ck_assert_int_eq(store_reader__query(r, base, base + 20 * T_NS, NULL, count_samples,
						     &samples),
				 0);
		ck_assert_uint_eq(samples, 12 * 4);
		ck_assert_int_eq(
			store_reader__metrics(r, base, base + 20 * T_NS, count_recs, &n_recs), 0);
		ck_assert_uint_eq(n_recs, ver ? 0 : 12);
		ck_assert_int_eq(
			store_reader__metrics(r, base, base + 20 * T_NS, count_recs, &n_recs), 0);
		store_reader__stats(r, &st);
		ck_assert_uint_eq(st.blocks_corrupt, 0);
		ck_assert_uint_eq(n_newer, ver ? 1 : 0); /* once, over both walks */
		ck_assert_uint_eq(n_notice, n_newer);
		store_reader__free(r);
		t_rm_rf(root);
		free(root);
	}
}
END_TEST

/* A damaged section: refused (-EBADMSG) or read, never out of bounds (the
 * fuzz replay and ASAN builds check the latter); a count of records that the
 * group does not have is refused. */
START_TEST(test_metrics_malformed)
{
	struct sbuf recs = {0}, sec = {0}, bad = {0};
	static struct got g;
	unsigned int refused = 0;

	for (int v = 3; v <= 5; v++) {
		recs.len = 0;
		refused = 0;
		encode(&recs, 1, 0, 1);
		encode(&recs, v, 1, NREC);
		sec.len = 0;
		sbuf__varint(&sec, NREC);
		sbuf__put(&sec, recs.p, recs.len);
		sbuf__varint(&sec, 0);
		for (size_t cut = 1; cut < sec.len; cut++)
			refused += store_metrics__decode(sec.p, cut, 0, UINT64_MAX, NULL, NULL,
							 NULL) == -EBADMSG;
		ck_assert_uint_eq(refused, sec.len - 1);
		for (size_t at = 1; at < sec.len; at++) {
			for (unsigned int x = 1; x < 256; x <<= 1) {
				bad.len = 0;
				sbuf__put(&bad, sec.p, sec.len);
				bad.p[at] ^= (uint8_t)x;
				memset(&g, 0, sizeof(g));
				store_metrics__decode(bad.p, bad.len, 0, UINT64_MAX, on_rec, NULL,
						      &g);
			}
		}
		/* the section claims fewer records than the group holds */
		bad.len = 0;
		sbuf__varint(&bad, NREC - 1);
		sbuf__put(&bad, recs.p, recs.len);
		sbuf__varint(&bad, 0);
		ck_assert_int_eq(
			store_metrics__decode(bad.p, bad.len, 0, UINT64_MAX, NULL, NULL, NULL),
			-EBADMSG);
	}
	sbuf__free(&recs);
	sbuf__free(&sec);
	sbuf__free(&bad);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store_metrics");
	TCase *tc = tcase_create("encoding");

	tcase_add_test(tc, test_metrics_v5_roundtrip);
	tcase_add_test(tc, test_metrics_churn);
	tcase_add_test(tc, test_metrics_v1_to_v4_still_read);
	tcase_add_test(tc, test_metrics_fixtures);
	tcase_add_test(tc, test_metrics_interleaved);
	tcase_add_test(tc, test_metrics_malformed);
	tcase_add_test(tc, test_metrics_newer_version_skipped);
	tcase_add_test(tc, test_metrics_newer_store);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
