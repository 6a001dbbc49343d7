// SPDX-License-Identifier: MIT
/*
 * The exports (export/export*.c) over a store written by the real store writer:
 * the pprof file decoded back (gunzip + a protobuf reader of our own), the
 * two-count folded diff, the SVG (xmllint, merge of sub-pixel frames, diff
 * colours) and speedscope JSON against the schema of the speedscope npm
 * package (ajv; both installed by the export_npm fixture).
 *
 * The store: 20 seconds from 10:00:00 UTC. Stack 1 is sampled 30 times a
 * second in the first 10 s and 10 times in the last 10, stack 2 the other way
 * round (the hot path switches half-way); stack 3 is off-CPU, 2 switches a
 * second of 1 ms each. freq 100 (period 10 ms). A policy trigger "burst" of
 * pid 1001 (stack 1's process) covers seconds 5..7 (TRIG_S0, TRIG_S1).
 */
#include <check.h>
#include <dirent.h>
#include <sched.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "export/export.h"
#include "storer/store.h"
#include "test_store_util.h"
#include "test_util.h"

#define NSEC	     20
#define FREQ	     100
#define PERIOD	     (1000000000ull / FREQ)
#define OFF_NS	     1000000ull
#define TRIG_S0	     5
#define TRIG_S1	     8
#define RATE(s, sec) ((s) == 1 ? ((sec) < 10 ? 30 : 10) : (s) == 2 ? ((sec) < 10 ? 10 : 30) : 2)

static char *root;
static char store[1024];
static bool with_triggers;  /* export_range() marks the store's policy triggers */
static bool by_rows;	    /* export_range() reads by rows (export__add_rows()) */
static uint32_t seg_secs;   /* build_store()'s segment length, 0 = the default (an hour) */
static bool no_pid, no_env; /* export_range()'s label switches (--no_pid, --no_env) */

static void build_store(void)
{
	struct store_writer_opts o = {
		.record_interval = 1, .freq = FREQ, .segment_seconds = seg_secs};
	struct store_writer *w;
	uint64_t seq = 1, base = t_base_ns();
	uint32_t sec, s, k;

	w = t_store_new(&o, &root);
	t_defs(w, 3, 0);
	for (sec = 0; sec < NSEC; sec++) {
		if (sec == TRIG_S0 || sec == TRIG_S1) {
			/* item 1 = cpu_percent, cmp 1 = '>', actions freq + offcpu */
			struct cpa_policy_event ev = {.seq = seq++,
						      .time_ns = base + sec * T_NS,
						      .end_ns = base + TRIG_S1 * T_NS,
						      .threshold = 50,
						      .value = 183.2,
						      .pid = 1001,
						      .kind = sec == TRIG_S0 ? CPA_PE_START
									     : CPA_PE_END,
						      .item = 1,
						      .cmp = 1,
						      .actions = 3,
						      .freq = 499,
						      .policy = "burst",
						      .comm = "app"};

			ck_assert_int_eq(store_writer__add_event(w, &ev), 0);
		}
		for (s = 1; s <= 3; s++)
			for (k = 0; k < RATE(s, sec); k++) {
				struct cpa_sample_out smp;

				t_sample(&smp, seq++, base + sec * T_NS + k * 20000000ull, s, 0);
				if (s == 3) {
					smp.kind = CPA_KIND_OFFCPU;
					smp.weight = OFF_NS;
				}
				ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
			}
	}
	t_store_close(w, root, store, sizeof(store));
}

static void setup(void)
{
	t_utc();
	build_store();
}

static void teardown(void)
{
	with_triggers = false;
	by_rows = false;
	seg_secs = 0;
	no_pid = no_env = false;
	t_rm_rf(root);
	free(root);
}

/* Export [from, to) seconds (and a base range when bto > bfrom) to path. */
static void export_range(enum export_format f, uint32_t from, uint32_t to, uint32_t bfrom,
			 uint32_t bto, const char *path, struct export_stats *st)
{
	struct export_opts eo = {.no_pid = no_pid,
				 .no_env = no_env,
				 .freq = FREQ,
				 .t0_ns = t_base_ns() + from * T_NS,
				 .t1_ns = t_base_ns() + to * T_NS};
	struct store_reader *r;
	struct exporter *e;
	struct store_filter flt;

	store_filter__init(&flt);
	ck_assert_int_eq(store_reader__open(store, NULL, NULL, &r), 0);
	ck_assert_int_eq(export__new(f, &eo, &e), 0);
	if (with_triggers) {
		struct store_trigger *t;
		size_t n;

		ck_assert_int_eq(store_reader__triggers(r, eo.t0_ns, eo.t1_ns, &t, &n), 0);
		for (size_t i = 0; i < n; i++)
			ck_assert_int_eq(export__add_trigger(e, &t[i]), 0);
		free(t);
	}
	if (by_rows)
		ck_assert_int_eq(
			store_reader__query_rows(r, eo.t0_ns, eo.t1_ns, &flt, export__add_rows, e),
			0);
	else
		ck_assert_int_eq(store_reader__query(r, eo.t0_ns, eo.t1_ns, &flt, export__add, e),
				 0);
	if (bto > bfrom && by_rows)
		ck_assert_int_eq(store_reader__query_rows(r, t_base_ns() + bfrom * T_NS,
							  t_base_ns() + bto * T_NS, &flt,
							  export__add_base_rows, e),
				 0);
	else if (bto > bfrom)
		ck_assert_int_eq(store_reader__query(r, t_base_ns() + bfrom * T_NS,
						     t_base_ns() + bto * T_NS, &flt,
						     export__add_base, e),
				 0);
	ck_assert_msg(export__write(e, path) == 0, "write: %s", export__error(e));
	if (st)
		export__stats(e, st);
	export__free(e);
	store_reader__free(r);
}

static int sh(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* ---------------------------------------------------------------- a protobuf reader */

struct pb {
	const uint8_t *p, *end;
};

static uint64_t pb_varint(struct pb *b)
{
	uint64_t v = 0;
	int sh_ = 0;

	while (b->p < b->end) {
		uint8_t c = *b->p++;

		v |= (uint64_t)(c & 0x7f) << sh_;
		if (!(c & 0x80))
			return v;
		sh_ += 7;
		ck_assert_int_lt(sh_, 64);
	}
	ck_abort_msg("truncated varint");
	return 0;
}

/* Next field: returns the field number, 0 at the end; *sub for wire type 2. */
static uint32_t pb_next(struct pb *b, uint64_t *val, struct pb *sub)
{
	uint64_t tag, len;

	if (b->p >= b->end)
		return 0;
	tag = pb_varint(b);
	switch (tag & 7) {
	case 0:
		*val = pb_varint(b);
		break;
	case 2:
		len = pb_varint(b);
		ck_assert_uint_le(len, (uint64_t)(b->end - b->p));
		sub->p = b->p;
		sub->end = b->p + len;
		b->p += len;
		break;
	default:
		ck_abort_msg("unexpected wire type %d", (int)(tag & 7));
	}
	return (uint32_t)(tag >> 3);
}

#define MAXN 8192

struct dlabel {
	uint64_t key, str;
	int64_t num;
};

struct dsample {
	uint64_t loc[64];
	uint32_t nloc;
	int64_t v[3];
	struct dlabel lab[16];
	uint32_t nlab;
};

struct dprof {
	char *str[MAXN];
	uint32_t nstr;
	uint64_t st_type[4], st_unit[4];
	uint32_t nst;
	struct dsample smp[MAXN];
	uint32_t nsmp;
	struct {
		uint64_t id, start, limit, off, file, build_id;
	} map[64];
	uint32_t nmap;
	struct {
		uint64_t id, map, addr, func;
	} loc[MAXN];
	uint32_t nloc;
	struct {
		uint64_t id, name;
	} fn[MAXN];
	uint32_t nfn;
	int64_t time_nanos, duration, period;
	uint64_t default_type;
};

static void decode_packed(struct pb *sub, uint64_t *out, uint32_t *n, uint32_t max)
{
	while (sub->p < sub->end) {
		ck_assert_uint_lt(*n, max);
		out[(*n)++] = pb_varint(sub);
	}
}

static void decode(const uint8_t *raw, size_t len, struct dprof *d)
{
	struct pb b = {raw, raw + len}, sub, s2, s3;
	uint64_t v = 0;
	uint32_t f, g, n;

	memset(d, 0, sizeof(*d));
	while ((f = pb_next(&b, &v, &sub))) {
		switch (f) {
		case 1:
			while ((g = pb_next(&sub, &v, &s2)))
				(g == 1 ? d->st_type : d->st_unit)[d->nst] = v;
			d->nst++;
			break;
		case 2: {
			struct dsample *s = &d->smp[d->nsmp++];
			uint64_t vals[3];

			ck_assert_uint_lt(d->nsmp, MAXN);
			while ((g = pb_next(&sub, &v, &s2))) {
				if (g == 1) {
					decode_packed(&s2, s->loc, &s->nloc, 64);
				} else if (g == 2) {
					n = 0;
					decode_packed(&s2, vals, &n, 3);
					ck_assert_uint_eq(n, 3);
					s->v[0] = (int64_t)vals[0];
					s->v[1] = (int64_t)vals[1];
					s->v[2] = (int64_t)vals[2];
				} else if (g == 3) {
					struct dlabel *l = &s->lab[s->nlab++];
					uint32_t h;

					while ((h = pb_next(&s2, &v, &s3))) {
						if (h == 1)
							l->key = v;
						else if (h == 2)
							l->str = v;
						else if (h == 3)
							l->num = (int64_t)v;
					}
				}
			}
			break;
		}
		case 3: {
			uint64_t *m = &d->map[d->nmap++].id;

			while ((g = pb_next(&sub, &v, &s2)))
				if (g >= 1 && g <= 6)
					m[g - 1] = v;
			break;
		}
		case 4: {
			uint64_t *l = &d->loc[d->nloc++].id;

			while ((g = pb_next(&sub, &v, &s2))) {
				if (g >= 1 && g <= 3)
					l[g - 1] = v;
				if (g == 4)
					while (pb_next(&s2, &v, &s3) == 1)
						l[3] = v;
			}
			break;
		}
		case 5: {
			uint64_t *fn = &d->fn[d->nfn++].id;

			while ((g = pb_next(&sub, &v, &s2)))
				if (g <= 2)
					fn[g - 1] = v;
			break;
		}
		case 6:
			ck_assert_uint_lt(d->nstr, MAXN);
			d->str[d->nstr++] = strndup((const char *)sub.p, (size_t)(sub.end - sub.p));
			break;
		case 9:
			d->time_nanos = (int64_t)v;
			break;
		case 10:
			d->duration = (int64_t)v;
			break;
		case 12:
			d->period = (int64_t)v;
			break;
		case 14:
			d->default_type = v;
			break;
		}
	}
}

static uint8_t *gunzip_file(const char *path, size_t *ret_len)
{
	size_t zlen, cap = 1 << 20;
	char *z = test_slurp(path, &zlen);
	uint8_t *out = malloc(cap);
	z_stream s = {0};
	int r;

	ck_assert_ptr_nonnull(out);
	ck_assert_msg((uint8_t)z[0] == 0x1f && (uint8_t)z[1] == 0x8b, "not gzip");
	ck_assert_int_eq(inflateInit2(&s, 15 + 16), Z_OK);
	s.next_in = (uint8_t *)z;
	s.avail_in = (uInt)zlen;
	s.next_out = out;
	s.avail_out = (uInt)cap;
	r = inflate(&s, Z_FINISH);
	ck_assert_int_eq(r, Z_STREAM_END);
	*ret_len = s.total_out;
	inflateEnd(&s);
	free(z);
	return out;
}

static void dprof_free(struct dprof *d)
{
	uint32_t i;

	for (i = 0; i < d->nstr; i++)
		free(d->str[i]);
}

static const char *label_str(const struct dprof *d, const struct dsample *s, const char *key)
{
	uint32_t i;

	for (i = 0; i < s->nlab; i++)
		if (!strcmp(d->str[s->lab[i].key], key))
			return d->str[s->lab[i].str];
	return NULL;
}

static bool label_num(const struct dprof *d, const struct dsample *s, const char *key, int64_t *ret)
{
	uint32_t i;

	for (i = 0; i < s->nlab; i++)
		if (!strcmp(d->str[s->lab[i].key], key)) {
			*ret = s->lab[i].num;
			return true;
		}
	return false;
}

static struct dprof dp;

/* The exported pprof decodes to the store's contents. */
START_TEST(test_pprof_decode)
{
	char path[1100];
	uint8_t *raw;
	size_t len;
	uint32_t i, j, on = 0, off = 0;
	int64_t sum[3] = {0};
	bool have_kernel = false, have_app = false;

	snprintf(path, sizeof(path), "%s/out.pb.gz", root);
	export_range(EXPORT_PPROF, 0, NSEC, 0, 0, path, NULL);
	raw = gunzip_file(path, &len);
	decode(raw, len, &dp);
	free(raw);

	ck_assert_str_eq(dp.str[0], "");
	ck_assert_uint_eq(dp.nst, 3);
	ck_assert_str_eq(dp.str[dp.st_type[0]], "samples");
	ck_assert_str_eq(dp.str[dp.st_unit[0]], "count");
	ck_assert_str_eq(dp.str[dp.st_type[1]], "cpu");
	ck_assert_str_eq(dp.str[dp.st_unit[1]], "nanoseconds");
	ck_assert_str_eq(dp.str[dp.st_type[2]], "off-cpu");
	ck_assert_str_eq(dp.str[dp.st_unit[2]], "nanoseconds");
	ck_assert_str_eq(dp.str[dp.default_type], "cpu");
	ck_assert_int_eq(dp.period, (int64_t)PERIOD);
	ck_assert_int_eq(dp.time_nanos, (int64_t)t_base_ns());
	ck_assert_int_eq(dp.duration, (int64_t)(NSEC * T_NS));

	for (i = 0; i < dp.nmap; i++) {
		if (!strcmp(dp.str[dp.map[i].file], "[kernel]"))
			have_kernel = true;
		if (!strcmp(dp.str[dp.map[i].file], "/usr/bin/app")) {
			ck_assert_str_eq(dp.str[dp.map[i].build_id],
					 "deadbeef0102030405060708090a0b0c0d0e0f10");
			have_app = true;
		}
	}
	ck_assert(have_kernel && have_app);
	/* Kernel mapping last: pprof calls mapping 1 the main binary. */
	ck_assert_str_eq(dp.str[dp.map[dp.nmap - 1].file], "[kernel]");

	for (i = 0; i < dp.nsmp; i++) {
		const struct dsample *s = &dp.smp[i];
		const char *kind = label_str(&dp, s, "kind");
		int64_t pid, tid, cpu, cg, stack;

		for (j = 0; j < 3; j++)
			sum[j] += s->v[j];
		ck_assert_ptr_nonnull(kind);
		ck_assert(label_num(&dp, s, "pid", &pid) && label_num(&dp, s, "tid", &tid) &&
			  label_num(&dp, s, "cpu", &cpu) && label_num(&dp, s, "cgroup", &cg));
		ck_assert_str_eq(label_str(&dp, s, "env"), "ENV_A");
		ck_assert_str_eq(label_str(&dp, s, "comm"), "worker");
		/* t_sample: pid = 1000 + stack % 3 */
		stack = pid - 1000 == 0 ? 3 : pid - 1000;
		ck_assert_int_eq(cg, 0x100000000ll + stack % 2);
		ck_assert_uint_eq(s->nloc, T_STACK_FRAMES(stack));
		/* Leaf first; every location names the frame of the store, at its offset. */
		for (j = 0; j < s->nloc; j++) {
			uint32_t fid = t_stack_frame((uint32_t)stack, j), k, m;
			char name[160];

			t_frame_name(fid, name, sizeof(name));
			k = (uint32_t)s->loc[j] - 1;
			ck_assert_uint_eq(dp.loc[k].id, s->loc[j]);
			ck_assert_str_eq(dp.str[dp.fn[dp.loc[k].func - 1].name], name);
			for (m = 0; m < dp.nmap && dp.map[m].id != dp.loc[k].map; m++)
				;
			ck_assert_uint_lt(m, dp.nmap);
			if (fid <= T_KFRAMES)
				ck_assert_uint_eq(dp.loc[k].addr, t_frame_off(fid));
			else
				ck_assert_uint_eq(dp.loc[k].addr - dp.map[m].start + dp.map[m].off,
						  t_frame_off(fid));
		}
		if (!strcmp(kind, "offcpu")) {
			ck_assert_int_eq(stack, 3);
			off++;
		} else {
			ck_assert_str_eq(kind, "oncpu");
			on++;
		}
	}
	ck_assert(on > 0 && off > 0);
	/* samples: every row's count; cpu: on-CPU samples x period; off-cpu: blocked ns. */
	ck_assert_int_eq(sum[0], (10 * 30 + 10 * 10) * 2 + NSEC * 2);
	ck_assert_int_eq(sum[1], (int64_t)((10 * 30 + 10 * 10) * 2 * PERIOD));
	ck_assert_int_eq(sum[2], (int64_t)(NSEC * 2 * OFF_NS));
	dprof_free(&dp);
}
END_TEST

/* [0, to) seconds as pprof, by rows into path and sample by sample into
 * path2: the same bytes. */
static void pprof_both_ways(uint32_t to, const char *path, const char *path2)
{
	size_t la, lb;
	char *x, *y;

	by_rows = true;
	export_range(EXPORT_PPROF, 0, to, 0, 0, path, NULL);
	by_rows = false;
	export_range(EXPORT_PPROF, 0, to, 0, 0, path2, NULL);
	x = test_slurp(path, &la);
	y = test_slurp(path2, &lb);
	ck_assert_msg(la == lb && !memcmp(x, y, la), "%s and %s differ", path, path2);
	free(x);
	free(y);
}

/*
 * More threads than the pprof writer's caches hold (a context per thread and
 * kind; 5,000 of them), each sampled once a second for two seconds with its
 * own tid, cpu and kind: one sample per thread, holding both seconds, by rows
 * and sample by sample the same bytes.
 */
#define MANY_T 5000
START_TEST(test_pprof_many_threads)
{
	struct store_writer_opts o = {.record_interval = 1, .freq = FREQ};
	uint64_t seq = 1, base = t_base_ns();
	char *mroot, path[1100], path2[1100];
	static bool seen[MANY_T];
	struct store_writer *w;
	uint8_t *raw;
	size_t len;
	uint32_t i;

	w = t_store_new(&o, &mroot);
	t_defs(w, 3, 0);
	for (uint32_t sec = 0; sec < 2; sec++)
		for (uint32_t t = 0; t < MANY_T; t++) {
			struct cpa_sample_out smp;

			t_sample(&smp, seq++, base + sec * T_NS + t, 1 + t % 3, 0);
			smp.pid = 50000 + t / 4;
			smp.tid = 100000 + t;
			smp.cpu = t % 8;
			if (t % 5 == 0) {
				smp.kind = CPA_KIND_OFFCPU;
				smp.weight = OFF_NS;
			}
			ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		}
	t_store_close(w, mroot, store, sizeof(store));
	snprintf(path, sizeof(path), "%s/rows.pb.gz", root);
	snprintf(path2, sizeof(path2), "%s/samples.pb.gz", root);
	pprof_both_ways(2, path, path2);

	raw = gunzip_file(path, &len);
	decode(raw, len, &dp);
	free(raw);
	ck_assert_uint_eq(dp.nsmp, MANY_T);
	memset(seen, 0, sizeof(seen));
	for (i = 0; i < dp.nsmp; i++) {
		const struct dsample *s = &dp.smp[i];
		const char *kind = label_str(&dp, s, "kind");
		int64_t pid, tid, cpu, t;

		ck_assert(label_num(&dp, s, "pid", &pid) && label_num(&dp, s, "tid", &tid) &&
			  label_num(&dp, s, "cpu", &cpu));
		t = tid - 100000;
		ck_assert(t >= 0 && t < MANY_T && !seen[t]);
		seen[t] = true;
		ck_assert_int_eq(pid, 50000 + t / 4);
		ck_assert_int_eq(cpu, t % 8);
		ck_assert_uint_eq(s->nloc, T_STACK_FRAMES(1 + t % 3));
		ck_assert_int_eq(s->v[0], 2);
		ck_assert_str_eq(kind, t % 5 == 0 ? "offcpu" : "oncpu");
		ck_assert_int_eq(s->v[1], t % 5 == 0 ? 0 : (int64_t)(2 * PERIOD));
		ck_assert_int_eq(s->v[2], t % 5 == 0 ? (int64_t)(2 * OFF_NS) : 0);
	}
	dprof_free(&dp);
	t_rm_rf(mroot);
	free(mroot);
}
END_TEST

/*
 * pprof and the label switches (docs/export.md): two processes of the same
 * names ("app", thread "worker"), pids 2001 and 2002, envs ENV_A and ENV_B,
 * the same stack on the same cpu and cgroup, 3 samples a second each for 4
 * seconds. --no_pid drops the pid and tid labels, --no_env the env label;
 * with both the two processes are one sample of 24. By rows and sample by
 * sample the same bytes; read back by the decoder and go tool pprof -tags.
 */
static const char *const label_keys[] = {"pid", "tid", "env"};

START_TEST(test_pprof_label_switches)
{
	struct store_writer_opts o = {.record_interval = 1, .freq = FREQ};
	uint64_t seq = 1, base = t_base_ns();
	struct {
		struct cpa_str_def d;
		char s[8];
	} envb = {.d = {.id = 6, .len = 5}, .s = "ENV_B"};
	char *lroot, path[1100], path2[1100], *out;
	struct store_writer *w;
	size_t len;
	uint8_t *raw;
	int rc;

	w = t_store_new(&o, &lroot);
	t_defs(w, 3, 0);
	store_writer__def_str(w, &envb.d, envb.s);
	for (uint32_t sec = 0; sec < 4; sec++)
		for (uint32_t p = 0; p < 2; p++)
			for (uint32_t k = 0; k < 3; k++) {
				struct cpa_sample_out smp;

				t_sample(&smp, seq++, base + sec * T_NS + p * 1000 + k, 1, 0);
				smp.pid = smp.tid = 2001 + p;
				smp.env_id = p ? 6 : T_STR_ENV;
				ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
			}
	t_store_close(w, lroot, store, sizeof(store));
	for (int k = 0; k < 4; k++) {
		uint32_t want = k == 3 ? 1 : 2;
		int64_t sum = 0, num;

		no_pid = k & 1;
		no_env = k & 2;
		snprintf(path, sizeof(path), "%s/lab%d.pb.gz", root, k);
		snprintf(path2, sizeof(path2), "%s/lab%d.samples.pb.gz", root, k);
		pprof_both_ways(4, path, path2);
		raw = gunzip_file(path, &len);
		decode(raw, len, &dp);
		free(raw);
		ck_assert_msg(dp.nsmp == want,
			      "case %d (no_pid %d, no_env %d): %u samples, want %u", k, no_pid,
			      no_env, dp.nsmp, want);
		for (uint32_t i = 0; i < dp.nsmp; i++) {
			const struct dsample *s = &dp.smp[i];

			sum += s->v[0];
			ck_assert_msg(label_num(&dp, s, "pid", &num) == !no_pid,
				      "case %d: pid label %s", k, no_pid ? "present" : "absent");
			ck_assert_msg(label_num(&dp, s, "tid", &num) == !no_pid,
				      "case %d: tid label %s", k, no_pid ? "present" : "absent");
			ck_assert_msg((label_str(&dp, s, "env") != NULL) == !no_env,
				      "case %d: env label %s", k, no_env ? "present" : "absent");
			/* what no switch drops stays */
			ck_assert_str_eq(label_str(&dp, s, "comm"), "worker");
			ck_assert_str_eq(label_str(&dp, s, "process"), "app");
			ck_assert(label_num(&dp, s, "cpu", &num) &&
				  label_num(&dp, s, "cgroup", &num));
			ck_assert_str_eq(label_str(&dp, s, "kind"), "oncpu");
		}
		ck_assert_int_eq(sum, 2 * 4 * 3);
		dprof_free(&dp);
		if (system("go version >/dev/null 2>&1") != 0)
			continue; /* the decode above is the check without go */
		out = test_cmd_out(
			&rc, "HOME=/tmp go tool pprof -tags -sample_index=samples '%s' 2>&1", path);
		ck_assert_msg(rc == 0 && strstr(out, " comm: Total 24"), "pprof -tags: %s", out);
		for (size_t j = 0; j < sizeof(label_keys) / sizeof(label_keys[0]); j++) {
			char key[32];
			bool dropped = j < 2 ? no_pid : no_env;

			snprintf(key, sizeof(key), " %s: Total 24", label_keys[j]);
			ck_assert_msg((strstr(out, key) == NULL) == dropped,
				      "case %d: pprof -tags %s '%s': %s", k,
				      dropped ? "shows" : "lacks", key, out);
		}
		free(out);
	}
	t_rm_rf(lroot);
	free(lroot);
}
END_TEST

/* A pprof diff: the base's samples negated and labelled pprof::base. */
START_TEST(test_pprof_diff)
{
	char path[1100];
	uint8_t *raw;
	size_t len;
	uint32_t i;
	int64_t by_stack[4] = {0};

	snprintf(path, sizeof(path), "%s/diff.pb.gz", root);
	export_range(EXPORT_PPROF, 10, 20, 0, 10, path, NULL);
	raw = gunzip_file(path, &len);
	decode(raw, len, &dp);
	free(raw);
	for (i = 0; i < dp.nsmp; i++) {
		const struct dsample *s = &dp.smp[i];
		const char *base = label_str(&dp, s, "pprof::base");
		int64_t pid;

		ck_assert(label_num(&dp, s, "pid", &pid));
		ck_assert_msg((s->v[0] < 0) == (base != NULL), "sign and base label disagree");
		by_stack[pid - 1000 == 0 ? 3 : pid - 1000] += s->v[0];
	}
	ck_assert_int_eq(by_stack[1], 10 * 10 - 10 * 30); /* shrank by 200 samples */
	ck_assert_int_eq(by_stack[2], 10 * 30 - 10 * 10); /* grew by 200 */
	ck_assert_int_eq(by_stack[3], 0);
	dprof_free(&dp);
}
END_TEST

/* The path of stack s as the folded export writes it (labels env;comm:pid). */
static void folded_path(uint32_t s, char *buf, size_t len)
{
	uint32_t n = T_STACK_FRAMES(s), nk = T_STACK_KFRAMES(s), j;
	char name[160];

	snprintf(buf, len, "ENV_A;%s:%u;", s % 3 == 2 ? "db" : "app", 1000 + s % 3);
	for (j = n; j-- > nk;) {
		t_frame_name(t_stack_frame(s, j), name, sizeof(name));
		strcat(buf, name);
		strcat(buf, ";");
	}
	for (j = nk; j-- > 0;) {
		t_frame_name(t_stack_frame(s, j), name, sizeof(name));
		strcat(buf, name);
		strcat(buf, "_[k];");
	}
}

/* Folded diff: "stack BASE NEW"; the switched paths move in opposite directions. */
START_TEST(test_folded_diff)
{
	char path[1100], line[4096], *text, *p;
	uint32_t s;

	snprintf(path, sizeof(path), "%s/diff.prof", root);
	export_range(EXPORT_FOLDED, 10, 20, 0, 10, path, NULL);
	text = test_slurp(path, NULL);
	for (s = 1; s <= 3; s++) {
		unsigned long long a, b;

		folded_path(s, line, sizeof(line));
		p = strstr(text, line);
		ck_assert_msg(p != NULL, "no line for stack %u in\n%s", s, text);
		ck_assert_int_eq(sscanf(p + strlen(line), " %llu %llu", &a, &b), 2);
		if (s == 1)
			ck_assert(a == 300 && b == 100);
		else if (s == 2)
			ck_assert(a == 100 && b == 300);
		else
			ck_assert(a == 10 * 2 * OFF_NS && b == 10 * 2 * OFF_NS);
	}
	free(text);
}
END_TEST

/* Sum of the shares in the <title>s of frames named name ("name (..., P%)"). */
static double svg_share(const char *svg, const char *name)
{
	char pat[256];
	const char *p = svg;
	double sum = 0;

	snprintf(pat, sizeof(pat), "<title>%s (", name);
	while ((p = strstr(p, pat))) {
		const char *e = strstr(p, "%)</title>"), *c;

		ck_assert_ptr_nonnull(e);
		for (c = e; c > p && c[-1] != ' '; c--)
			;
		sum += strtod(c, NULL);
		p = e;
	}
	return sum;
}

/* Fill of the first frame titled "title (" (after the one titled "from (" when
 * given: a frame's subtree follows it in the file, depth first). */
static void fill_of(const char *svg, const char *from, const char *title, int *r, int *g, int *b)
{
	char pat[300];
	const char *p = svg;

	if (from) {
		snprintf(pat, sizeof(pat), "<title>%s (", from);
		p = strstr(p, pat);
		ck_assert_ptr_nonnull(p);
	}
	snprintf(pat, sizeof(pat), "<title>%s (", title);
	p = strstr(p, pat);
	ck_assert_msg(p != NULL, "no frame '%s'", title);
	p = strstr(p, "fill=\"rgb(");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "fill=\"rgb(%d,%d,%d)", r, g, b), 3);
}

/* Fill of stack s's leaf frame drawn under the process label. */
static void leaf_fill(const char *svg, const char *label, uint32_t s, int *r, int *g, int *b)
{
	char name[160];

	t_frame_name(t_stack_frame(s, 0), name, sizeof(name));
	strcat(name, T_STACK_KFRAMES(s) ? "_[k]" : "");
	fill_of(svg, label, name, r, g, b);
}

START_TEST(test_svg)
{
	char path[1100], cmd[1300], name[160], *text;
	double share, expect;

	snprintf(path, sizeof(path), "%s/out.svg", root);
	export_range(EXPORT_SVG, 0, NSEC, 0, 0, path, NULL);
	snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", path);
	ck_assert_int_eq(sh(cmd), 0);
	text = test_slurp(path, NULL);
	/* Stack 1's leaf: its share of the time (on-CPU samples x period + off-CPU ns). */
	t_frame_name(t_stack_frame(1, 0), name, sizeof(name));
	strcat(name, T_STACK_KFRAMES(1) ? "_[k]" : "");
	share = svg_share(text, name);
	expect = 100.0 * 400 * PERIOD / (800.0 * PERIOD + NSEC * 2 * OFF_NS);
	ck_assert_msg(share > expect - 0.01 && share < expect + 0.01, "share %.3f, expected %.3f",
		      share, expect);
	ck_assert_ptr_nonnull(strstr(text, "data-cpa-ready"));
	ck_assert_ptr_nonnull(strstr(text, "<script"));
	/* off-CPU stack 3 (pid 1000, alone under its label) in the blue palette */
	ck_assert_ptr_nonnull(strstr(text, "blue: off-CPU"));
	{
		int rr, gg, bb;

		leaf_fill(text, "app:1000", 3, &rr, &gg, &bb);
		ck_assert_msg(bb >= 220 && bb > rr && bb > gg, "off-CPU frame is rgb(%d,%d,%d)", rr,
			      gg, bb);
		/* and an on-CPU one (stack 1's leaf under app:1001) is not */
		leaf_fill(text, "app:1001", 1, &rr, &gg, &bb);
		ck_assert_msg(rr > bb, "on-CPU frame is rgb(%d,%d,%d)", rr, gg, bb);
	}
	free(text);
}
END_TEST

/* Red/blue diff SVG: stack 1 shrank (blue), stack 2 grew (red). */
START_TEST(test_svg_diff)
{
	char path[1100], pat[300], *text;
	int rr, gg, bb;

	snprintf(path, sizeof(path), "%s/diff.svg", root);
	export_range(EXPORT_SVG, 10, 20, 0, 10, path, NULL);
	text = test_slurp(path, NULL);
	ck_assert_ptr_nonnull(strstr(text, "red: grew, blue: shrank"));
	/* pid labels: app:1001 holds stack 1, db:1002 stack 2 */
	fill_of(text, NULL, "app:1001", &rr, &gg, &bb);
	ck_assert_msg(bb == 255 && rr < 255, "shrunk frame is rgb(%d,%d,%d)", rr, gg, bb);
	fill_of(text, NULL, "db:1002", &rr, &gg, &bb);
	ck_assert_msg(rr == 255 && bb < 255, "grown frame is rgb(%d,%d,%d)", rr, gg, bb);
	/* Magnitudes: each range's share of its own total time (samples x period + ns). */
	{
		double tot = 400.0 * PERIOD + 10 * 2 * OFF_NS;

		snprintf(pat, sizeof(pat),
			 "<title>app:1001 (base %.2f%%, new %.2f%%, %+.2f points)",
			 100.0 * 300 * PERIOD / tot, 100.0 * 100 * PERIOD / tot,
			 100.0 * -200.0 * PERIOD / tot);
		ck_assert_msg(strstr(text, pat) != NULL, "no '%s'", pat);
		snprintf(pat, sizeof(pat), "<title>db:1002 (base %.2f%%, new %.2f%%, %+.2f points)",
			 100.0 * 100 * PERIOD / tot, 100.0 * 300 * PERIOD / tot,
			 100.0 * 200.0 * PERIOD / tot);
		ck_assert_msg(strstr(text, pat) != NULL, "no '%s'", pat);
	}
	free(text);
}
END_TEST

/* 100,000 distinct stacks at 1,200 px: every frame drawn is a pixel or wider,
 * the rest is merged and counted. Rows are made by hand (no store needed). */
START_TEST(test_svg_100k_stacks)
{
	struct export_opts eo = {.freq = FREQ, .t0_ns = 0, .t1_ns = T_NS};
	struct store_frame fr[8], *fp[8];
	char names[8][32], path[1100], cmd[1300], *text, *p;
	struct export_stats st;
	struct exporter *e;
	uint32_t i, j, drawn = 0;

	ck_assert_int_eq(export__new(EXPORT_SVG, &eo, &e), 0);
	for (i = 0; i < 8; i++) {
		memset(&fr[i], 0, sizeof(fr[i]));
		fr[i].name = names[i];
		fr[i].module = "/usr/bin/app";
		fp[i] = &fr[i];
	}
	for (i = 0; i < 100000; i++) {
		struct store_sample s = {.count = 1 + (i % 7 == 0) * 500,
					 .weight = 1,
					 .pid = 1,
					 .comm = "app",
					 .pcomm = "app",
					 .env = "",
					 .stack_id = i + 1,
					 .n_frames = 8,
					 .frames = (const struct store_frame *const *)fp};

		/* Leaf first, 8 levels: main, five levels of fan-out 10, one distinct
		 * frame per stack, a common leaf: 100,000 distinct stacks. */
		for (j = 0; j < 8; j++) {
			uint32_t level = 7 - j, d = 1, k;

			for (k = 1; k < level && level <= 5; k++)
				d *= 10;
			if (level == 0)
				snprintf(names[j], sizeof(names[j]), "main");
			else if (level <= 5)
				snprintf(names[j], sizeof(names[j]), "f%u_%u", level, i / d % 10);
			else if (level == 6)
				snprintf(names[j], sizeof(names[j]), "g_%u", i);
			else
				snprintf(names[j], sizeof(names[j]), "leaf");
		}
		ck_assert_int_eq(export__add(e, &s), 0);
	}
	snprintf(path, sizeof(path), "%s/many.svg", root);
	ck_assert_int_eq(export__write(e, path), 0);
	export__stats(e, &st);
	export__free(e);
	ck_assert_uint_gt(st.merged, 0);
	snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", path);
	ck_assert_int_eq(sh(cmd), 0);
	text = test_slurp(path, NULL);
	for (p = text; (p = strstr(p, "<rect x=")); p++) {
		double w;
		char *wp = strstr(p, "width=\"");

		ck_assert_ptr_nonnull(wp);
		w = strtod(wp + 7, NULL);
		if (strstr(p, "height=\"15\"") && strstr(p, "height=\"15\"") < strchr(p, '>'))
			ck_assert_msg(w >= 1.0, "a frame %.2f px wide", w);
		drawn++;
	}
	fprintf(stderr, "100k stacks: %u rects, %llu frames merged\n", drawn,
		(unsigned long long)st.merged);
	ck_assert_ptr_nonnull(strstr(text, "narrower than a pixel merged"));
	free(text);
}
END_TEST

/* speedscope JSON validates against the schema the npm package ships. */
START_TEST(test_speedscope_schema)
{
	const char *b = getenv("CPA_BUILD_DIR"), *src = getenv("CPA_SOURCE_DIR");
	char path[1100], cmd[4096], schema[1100];
	struct export_stats st;

	ck_assert(b && src);
	snprintf(schema, sizeof(schema),
		 "%s/npm/node_modules/speedscope/dist/release/file-format-schema.json", b);
	ck_assert_msg(access(schema, R_OK) == 0,
		      "%s missing: the export_npm fixture (npm install) did not run", schema);
	snprintf(path, sizeof(path), "%s/out.speedscope.json", root);
	export_range(EXPORT_SPEEDSCOPE, 0, NSEC, 0, 0, path, &st);
	ck_assert_uint_eq(st.stacks, 3);
	snprintf(cmd, sizeof(cmd),
		 "NODE_PATH='%s/npm/node_modules' node '%s/tests/export_schema.js' '%s' '%s'", b,
		 src, schema, path);
	ck_assert_int_eq(sh(cmd), 0);
}
END_TEST

/* Every row of [from, to) of the store at dir, as text: a canonical dump. */
struct dump {
	char *buf;
	size_t len, cap;
	uint64_t samples;
};

static int dump_row(void *ctx, const struct store_sample *s)
{
	struct dump *d = ctx;
	char line[8192];
	int n = snprintf(line, sizeof(line), "%lld %u %u %u %u %llu %u %d %s %s %s %llu %llu |",
			 (long long)s->sec, s->pid, s->tid, s->cpu, s->probe_id,
			 (unsigned long long)s->cgroup_id, s->kind, s->lost, s->comm, s->pcomm,
			 s->env, (unsigned long long)s->count, (unsigned long long)s->weight);
	uint32_t i, j;

	for (i = 0; i < s->n_frames && n < (int)sizeof(line) - 512; i++) {
		const struct store_frame *f = s->frames[i];

		n += snprintf(line + n, sizeof(line) - (size_t)n, " %s@%s+%llx/%x/%d/", f->name,
			      f->module, (unsigned long long)f->offset, f->flags, i < s->n_kframes);
		for (j = 0; j < f->build_id_len; j++)
			n += snprintf(line + n, sizeof(line) - (size_t)n, "%02x", f->build_id[j]);
	}
	line[n++] = '\n';
	if (d->len + (size_t)n + 1 > d->cap) {
		d->cap = (d->cap + (size_t)n + 1) * 2;
		d->buf = realloc(d->buf, d->cap);
		ck_assert_ptr_nonnull(d->buf);
	}
	memcpy(d->buf + d->len, line, (size_t)n);
	d->len += (size_t)n;
	d->buf[d->len] = 0;
	d->samples += s->count;
	return 0;
}

static void dump_store(const char *dir, uint64_t t0, uint64_t t1, struct dump *d)
{
	struct store_reader *r;
	struct store_filter flt;

	memset(d, 0, sizeof(*d));
	store_filter__init(&flt);
	ck_assert_int_eq(store_reader__open(dir, NULL, NULL, &r), 0);
	ck_assert_int_eq(store_reader__query(r, t0, t1, &flt, dump_row, d), 0);
	store_reader__free(r);
}

/* --split_path: a window as a new store holds exactly the window's rows. */
START_TEST(test_split)
{
	uint64_t t0 = t_base_ns() + 5 * T_NS, t1 = t_base_ns() + 15 * T_NS, first, last, recs,
		 samples;
	char sroot[1100], sdir[1100];
	struct store_split *sp;
	struct store_reader *r;
	struct store_filter flt;
	struct dump a, b, all;

	snprintf(sroot, sizeof(sroot), "%s/split", root);
	store_filter__init(&flt);
	ck_assert_int_eq(store_split__new(sroot, FREQ, &sp), 0);
	ck_assert_int_eq(store_reader__open(store, NULL, NULL, &r), 0);
	ck_assert_int_eq(store_reader__query(r, t0, t1, &flt, store_split__add, sp), 0);
	store_reader__free(r);
	ck_assert_int_eq(store_split__close(sp, &samples, sdir, sizeof(sdir)), 0);
	store_split__free(sp);
	ck_assert(store_dir__is_store(sdir));

	dump_store(store, t0, t1, &a);
	dump_store(sdir, t0, t1, &b);
	dump_store(sdir, 0, UINT64_MAX / 2, &all);
	ck_assert_uint_eq(samples, a.samples);
	ck_assert_uint_eq(a.samples, (5 * 30 + 5 * 10) * 2 + 10 * 2);
	/* Nothing outside the window, and the window reads back identically. */
	ck_assert_str_eq(all.buf, b.buf);
	ck_assert_str_eq(a.buf, b.buf);
	ck_assert_int_eq(store_reader__open(sdir, NULL, NULL, &r), 0);
	ck_assert_int_eq(store_reader__range(r, &first, &last, &recs), 0);
	store_reader__free(r);
	ck_assert_uint_ge(first, t0);
	ck_assert_uint_lt(last, t1);
	ck_assert_uint_eq(recs, 10);
	free(a.buf);
	free(b.buf);
	free(all.buf);
}
END_TEST

/* A diff across two store dirs (yesterday vs today): the halves of the store
 * split into two stores, each read by its own reader, ids kept apart. */
START_TEST(test_diff_two_stores)
{
	char dirs[2][1100], roots[2][1100], path[1100], line[4096], *text, *p;
	struct export_opts eo = {.freq = FREQ, .t0_ns = 0, .t1_ns = UINT64_MAX / 2};
	struct store_filter flt;
	struct exporter *e;
	int h;

	store_filter__init(&flt);
	for (h = 0; h < 2; h++) {
		struct store_split *sp;
		struct store_reader *r;

		snprintf(roots[h], sizeof(roots[h]), "%s/half%d", root, h);
		ck_assert_int_eq(store_split__new(roots[h], FREQ, &sp), 0);
		ck_assert_int_eq(store_reader__open(store, NULL, NULL, &r), 0);
		ck_assert_int_eq(store_reader__query(r, t_base_ns() + h * 10 * T_NS,
						     t_base_ns() + (h + 1) * 10 * T_NS, &flt,
						     store_split__add, sp),
				 0);
		store_reader__free(r);
		ck_assert_int_eq(store_split__close(sp, NULL, dirs[h], sizeof(dirs[h])), 0);
		store_split__free(sp);
	}
	ck_assert_int_eq(export__new(EXPORT_FOLDED, &eo, &e), 0);
	for (h = 1; h >= 0; h--) {
		struct store_reader *r;

		ck_assert_int_eq(store_reader__open(dirs[h], NULL, NULL, &r), 0);
		export__new_source(e);
		ck_assert_int_eq(store_reader__query(r, eo.t0_ns, eo.t1_ns, &flt,
						     h ? export__add : export__add_base, e),
				 0);
		store_reader__free(r);
	}
	snprintf(path, sizeof(path), "%s/two.prof", root);
	ck_assert_int_eq(export__write(e, path), 0);
	export__free(e);
	text = test_slurp(path, NULL);
	folded_path(1, line, sizeof(line));
	p = strstr(text, line);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(strstr(p + strlen(line), " 300 100\n") == p + strlen(line) ? p
											 : NULL);
	folded_path(2, line, sizeof(line));
	p = strstr(text, line);
	ck_assert_ptr_nonnull(p);
	ck_assert_ptr_nonnull(strstr(p + strlen(line), " 100 300\n") == p + strlen(line) ? p
											 : NULL);
	free(text);
}
END_TEST

/* ---------------------------------------------------------------- policy triggers */

#define TRIG_TEXT "10:00:05-10:00:08 policy burst pid 1001 (app): cpu_percent 183.20 > 50.00"

/* pprof: a comment per trigger, the label trigger=burst on exactly the samples
 * of pid 1001 in seconds 5..7: decoded here and read by go tool pprof. */
START_TEST(test_pprof_triggers)
{
	char path[1100], *o;
	uint8_t *raw;
	size_t len;
	int64_t in = 0, pid;
	int rc;

	with_triggers = true;
	snprintf(path, sizeof(path), "%s/trig.pb.gz", root);
	export_range(EXPORT_PPROF, 0, NSEC, 0, 0, path, NULL);
	raw = gunzip_file(path, &len);
	decode(raw, len, &dp);
	free(raw);
	for (uint32_t i = 0; i < dp.nsmp; i++) {
		const char *t = label_str(&dp, &dp.smp[i], "trigger");

		if (!t)
			continue;
		ck_assert_str_eq(t, "burst");
		ck_assert(label_num(&dp, &dp.smp[i], "pid", &pid) && pid == 1001);
		in += dp.smp[i].v[0];
	}
	/* stack 1 (pid 1001) at 30 a second in seconds 5, 6, 7 */
	ck_assert_int_eq(in, 3 * 30);
	dprof_free(&dp);
	if (system("go version >/dev/null 2>&1") != 0)
		return; /* the decode above is the check without go */
	o = test_cmd_out(&rc, "HOME=/tmp go tool pprof -comments '%s' 2>&1", path);
	ck_assert_msg(rc == 0 && strstr(o, "trigger " TRIG_TEXT ", actions freq=499 offcpu=1"),
		      "pprof -comments: %s", o);
	free(o);
	o = test_cmd_out(&rc, "HOME=/tmp go tool pprof -tags -sample_index=samples '%s' 2>&1",
			 path);
	ck_assert_msg(rc == 0 && strstr(o, "trigger: Total 90") && strstr(o, "burst"),
		      "pprof -tags: %s", o);
	free(o);
	o = test_cmd_out(
		&rc,
		"HOME=/tmp go tool pprof -top -sample_index=samples -tagfocus=trigger=burst "
		"'%s' 2>&1",
		path);
	ck_assert_msg(rc == 0 && strstr(o, "Showing nodes accounting for 90,"),
		      "pprof -tagfocus: %s", o);
	free(o);
}
END_TEST

/* SVG: the triggers in the subtitle; speedscope: a profile of the window,
 * valid against speedscope's schema. */
START_TEST(test_svg_speedscope_triggers)
{
	const char *b = getenv("CPA_BUILD_DIR"), *src = getenv("CPA_SOURCE_DIR");
	char path[1100], cmd[4096], *text, *p;

	with_triggers = true;
	snprintf(path, sizeof(path), "%s/trig.svg", root);
	export_range(EXPORT_SVG, 0, NSEC, 0, 0, path, NULL);
	snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", path);
	ck_assert_int_eq(sh(cmd), 0);
	text = test_slurp(path, NULL);
	p = strstr(text, "<text id=\"subtitle\"");
	ck_assert_ptr_nonnull(p);
	ck_assert_msg(strstr(p, "policy triggers: 10:00:05-10:00:08 policy burst pid 1001 (app): "
				"cpu_percent 183.20 &gt; 50.00"),
		      "%.400s", p);
	free(text);

	ck_assert(b && src);
	snprintf(path, sizeof(path), "%s/trig.speedscope.json", root);
	export_range(EXPORT_SPEEDSCOPE, 0, NSEC, 0, 0, path, NULL);
	snprintf(cmd, sizeof(cmd),
		 "NODE_PATH='%s/npm/node_modules' node '%s/tests/export_schema.js' "
		 "'%s/npm/node_modules/speedscope/dist/release/file-format-schema.json' '%s'",
		 b, src, b, path);
	ck_assert_int_eq(sh(cmd), 0);
	text = test_slurp(path, NULL);
	p = strstr(text,
		   "\"name\":\"[trigger 10:00:05-10:00:08 policy burst pid 1001] / app:1001\"");
	ck_assert_msg(p, "no trigger profile in %.2000s", text);
	/* its weights: 90 on-CPU samples of 10 ms */
	ck_assert_ptr_nonnull(strstr(p, "\"endValue\":900000000}"));
	free(text);
}
END_TEST

/* ---------------------------------------------------------------- hand-made rows */

/* One row of n frames (leaf first) named by names[], in process pcomm. */
static void add_row(struct exporter *e, const char *pcomm, const char *comm, const char *env,
		    uint32_t stack_id, const char *const *names, uint32_t n, uint64_t count)
{
	struct store_frame fr[300];
	const struct store_frame *fp[300];
	struct store_sample s = {.sec = 1,
				 .count = count,
				 .weight = count,
				 .pid = 4242,
				 .tid = 4243,
				 .kind = CPA_KIND_ONCPU,
				 .comm = comm,
				 .pcomm = pcomm,
				 .env = env,
				 .stack_id = stack_id,
				 .n_frames = n};

	ck_assert_uint_le(n, 300);
	for (uint32_t i = 0; i < n; i++) {
		fr[i] = (struct store_frame){
			.name = names[i], .module = "/usr/bin/app", .offset = 0x1000 + 16 * i};
		fp[i] = &fr[i];
	}
	s.frames = fp;
	ck_assert_int_eq(export__add(e, &s), 0);
}

/* The SVG of two stacks (leaf first) of count c1 and c2, read back. */
static char *svg_of(const struct export_opts *eo, const char *const *st1, uint32_t n1, uint64_t c1,
		    const char *const *st2, uint32_t n2, uint64_t c2)
{
	char path[1100];
	struct exporter *e;

	ck_assert_int_eq(export__new(EXPORT_SVG, eo, &e), 0);
	add_row(e, "app", "app", "", 1, st1, n1, c1);
	add_row(e, "app", "app", "", 2, st2, n2, c2);
	snprintf(path, sizeof(path), "%s/two.svg", root);
	ck_assert_msg(export__write(e, path) == 0, "%s", export__error(e));
	export__free(e);
	return test_slurp(path, NULL);
}

/* The <svg> element's height attribute, and the y of the root frame "all". */
static void svg_geometry(const char *svg, unsigned int *height, double *root_y)
{
	const char *p = strstr(svg, "<svg ");
	char *t;

	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(strstr(p, "height=\"") + 8, "%u", height), 1);
	t = strstr(svg, "<title>all (");
	ck_assert_ptr_nonnull(t);
	ck_assert_int_eq(sscanf(strstr(t, " y=\"") + 4, "%lf", root_y), 1);
}

/*
 * SVG geometry: a heavy stack 3 frames deep and a 250-frame stack of one
 * sample in 100,000 (far narrower than a pixel). The image is as tall as what
 * is drawn, not as the deep stack, and the root is on the first screen.
 */
START_TEST(test_svg_height)
{
	struct export_opts eo = {.freq = FREQ};
	const char *deep[250], *hot[3] = {"hot_leaf", "hot_mid", "main"};
	char *text;
	unsigned int h;
	double y;

	for (int i = 0; i < 250; i++)
		deep[i] = i == 249 ? "main" : "recurse";
	text = svg_of(&eo, hot, 3, 100000, deep, 250, 1);
	svg_geometry(text, &h, &y);
	/* env, process, main, hot_mid, hot_leaf, and the root: 6 rows of 16 px + margins */
	ck_assert_msg(h <= 6 * 16 + 100, "svg height %u for 6 rows drawn", h);
	ck_assert_msg(y < 100, "root frame at y=%g of %u: below the first screen", y, h);
	free(text);
}
END_TEST

/* Decoded characters of XML text up to '<' (an entity is one). */
static size_t xml_chars(const char *p)
{
	size_t n = 0;

	for (; *p && *p != '<'; n++) {
		if (*p == '&')
			p = strchr(p, ';') + 1;
		else if ((unsigned char)*p >= 0x80)
			for (p++; ((unsigned char)*p & 0xc0) == 0x80; p++)
				;
		else
			p++;
	}
	return n;
}

/* Every frame's label fits its box: at most (width - 6) / 7 characters of 7 px. */
static void check_labels(const char *svg)
{
	const char *p = svg;
	uint32_t n = 0;

	while ((p = strstr(p, "<rect x=\""))) {
		double w;
		const char *t, *wa = strstr(p, "width=\"");

		ck_assert_int_eq(sscanf(wa + 7, "%lf", &w), 1);
		t = strstr(p, "<text ");
		ck_assert_ptr_nonnull(t);
		t = strchr(t, '>') + 1;
		if (strncmp(p - 3, "\"/>", 3) && strstr(p, "</g>") > t) { /* a frame's box */
			size_t c = xml_chars(t), max = w > 14 ? (size_t)((w - 6) / 7) : 0;

			ck_assert_msg(c <= max,
				      "label of %zu chars in a %.1f px box (%zu fit): %.80s", c, w,
				      max, t);
			n++;
		}
		p = t;
	}
	ck_assert_uint_gt(n, 3);
}

/* Labels cut to their box once: no "..." of the escaping plus ".." of the cut. */
START_TEST(test_svg_labels)
{
	struct export_opts eo = {.freq = FREQ, .width = 400};
	char longname[300], *text;
	const char *st1[2], *st2[2] = {"short_leaf", "main"};

	memset(longname, 'x', sizeof(longname) - 1);
	memcpy(longname, "a_very_long_function_name<&>", 28);
	longname[sizeof(longname) - 1] = 0;
	st1[0] = longname;
	st1[1] = "main";
	text = svg_of(&eo, st1, 2, 70, st2, 2, 30);
	check_labels(text);
	ck_assert_ptr_nonnull(strstr(text, ">a_very_long_function_name&lt;&amp;&gt;x"));
	free(text);
}
END_TEST

/* The speedscope file opens on the heaviest profile: app:1001 and db:1002 hold
 * 4 s each, app:1000 (first by name) 40 ms of off-CPU time. */
START_TEST(test_speedscope_active)
{
	char path[1100], *text, *p;
	unsigned int active, idx = 0;
	unsigned long long v, best = 0;

	snprintf(path, sizeof(path), "%s/a.speedscope.json", root);
	export_range(EXPORT_SPEEDSCOPE, 0, NSEC, 0, 0, path, NULL);
	text = test_slurp(path, NULL);
	p = strstr(text, "\"activeProfileIndex\":");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p + 21, "%u", &active), 1);
	for (p = text; (p = strstr(p, "\"endValue\":")); p++, idx++) {
		ck_assert_int_eq(sscanf(p + 11, "%llu", &v), 1);
		best = v > best ? v : best;
	}
	ck_assert_uint_eq(idx, 3);
	for (p = text, idx = 0; idx <= active; idx++)
		p = strstr(p, "\"endValue\":") + 1;
	ck_assert_int_eq(sscanf(p + 10, "%llu", &v), 1);
	ck_assert_msg(v == best && best == 400 * PERIOD,
		      "activeProfileIndex %u holds %llu, the heaviest %llu", active, v, best);
	free(text);
}
END_TEST

/*
 * Hostile names (bytes that are not UTF-8, control characters, markup
 * characters, a name of 5,000 bytes) in the process, thread, env and frame
 * names, through each format's consumer: xmllint, speedscope's schema,
 * go tool pprof, and the folded lines read back.
 */
/*
 * Every format, read by rows (a key resolved once) and sample by sample: the
 * same bytes, with and without the policy triggers (pprof's labels,
 * speedscope's trigger profiles), with a diff base.
 */
START_TEST(test_rows_same_as_samples)
{
	static const enum export_format fmts[] = {EXPORT_FOLDED, EXPORT_PPROF, EXPORT_SVG,
						  EXPORT_SPEEDSCOPE};
	char a[1100], b[1100];

	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
		for (int k = 0; k < 4; k++) {
			struct export_stats sa, sb;
			size_t la, lb;
			char *x, *y;
			bool diff = k & 2 && fmts[i] != EXPORT_SPEEDSCOPE;

			with_triggers = k & 1;
			snprintf(a, sizeof(a), "%s/samples", root);
			snprintf(b, sizeof(b), "%s/rows", root);
			by_rows = false;
			export_range(fmts[i], 0, NSEC, diff ? 2 : 0, diff ? 12 : 0, a, &sa);
			by_rows = true;
			export_range(fmts[i], 0, NSEC, diff ? 2 : 0, diff ? 12 : 0, b, &sb);
			x = test_slurp(a, &la);
			y = test_slurp(b, &lb);
			ck_assert_msg(la > 100 && la == lb && !memcmp(x, y, la),
				      "format %d, case %d: %zu vs %zu bytes", (int)fmts[i], k, la,
				      lb);
			ck_assert_uint_eq(sa.rows[0], sb.rows[0]);
			ck_assert_uint_eq(sa.rows[1], sb.rows[1]);
			ck_assert_uint_eq(sa.stacks, sb.stacks);
			free(x);
			free(y);
		}
}
END_TEST

/*
 * The same samples in one segment and in several (a segment every 3 seconds,
 * each with its own stack and string ids): every format the same bytes, read
 * by rows and sample by sample. The caches that outlive a segment (the name
 * tree's runs and paths) must give what one segment's walk gives.
 */
START_TEST(test_segments_same_as_one)
{
	static const enum export_format fmts[] = {EXPORT_FOLDED, EXPORT_PPROF, EXPORT_SVG,
						  EXPORT_SPEEDSCOPE};
	char one[1024], *one_root = root, a[1100], b[1100];
	DIR *d;
	struct dirent *de;
	int segs = 0;

	snprintf(one, sizeof(one), "%s", store);
	seg_secs = 3;
	build_store();
	d = opendir(store);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		segs += !strncmp(de->d_name, "seg_", 4);
	closedir(d);
	ck_assert_int_ge(segs, 3);
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++)
		for (int k = 0; k < 4; k++) {
			char many[1024];
			size_t la, lb;
			char *x, *y;

			with_triggers = k & 1;
			by_rows = k & 2;
			snprintf(many, sizeof(many), "%s", store);
			snprintf(a, sizeof(a), "%s/one", root);
			snprintf(b, sizeof(b), "%s/many", root);
			snprintf(store, sizeof(store), "%s", one);
			export_range(fmts[i], 0, NSEC, 0, 0, a, NULL);
			snprintf(store, sizeof(store), "%s", many);
			export_range(fmts[i], 0, NSEC, 0, 0, b, NULL);
			x = test_slurp(a, &la);
			y = test_slurp(b, &lb);
			ck_assert_msg(la > 100 && la == lb && !memcmp(x, y, la),
				      "format %d, case %d: %zu vs %zu bytes", (int)fmts[i], k, la,
				      lb);
			free(x);
			free(y);
		}
	t_rm_rf(one_root);
	free(one_root);
}
END_TEST

START_TEST(test_hostile_names)
{
	const char *b = getenv("CPA_BUILD_DIR"), *src = getenv("CPA_SOURCE_DIR");
	static char huge[5000];
	const char *names[] = {"bad\xff\xfe utf8 \xc3",
			       "ctl\x01\x1b[31m\x7f\ttab",
			       "<tag a=\"1\" b='2'>&amp;",
			       "over\xc0\xaflong \xed\xa0\x80 surr",
			       huge,
			       "main"};
	const char *exts[] = {"svg", "speedscope.json", "pb.gz", "prof"};
	enum export_format fmts[] = {EXPORT_SVG, EXPORT_SPEEDSCOPE, EXPORT_PPROF, EXPORT_FOLDED};
	struct export_opts eo = {.freq = FREQ, .t0_ns = T_NS, .t1_ns = 2 * T_NS};
	char path[1100], cmd[4096], *o;
	int rc;

	memset(huge, 'L', sizeof(huge) - 1);
	memcpy(huge + 100, "\xe2\x82", 2); /* a cut character in the middle */
	ck_assert(b && src);
	for (int k = 0; k < 4; k++) {
		struct exporter *e;

		ck_assert_int_eq(export__new(fmts[k], &eo, &e), 0);
		add_row(e, "proc\xff<&>\"'\x01", "thr\x80\n\r;x", "env\xfe;\x02", 1, names, 6, 10);
		add_row(e, huge, "\xc3", "", 2, names + 1, 5, 20);
		snprintf(path, sizeof(path), "%s/hostile.%s", root, exts[k]);
		ck_assert_msg(export__write(e, path) == 0, "%s: %s", exts[k], export__error(e));
		export__free(e);
		switch (fmts[k]) {
		case EXPORT_SVG:
			snprintf(cmd, sizeof(cmd), "xmllint --noout '%s'", path);
			ck_assert_msg(sh(cmd) == 0, "xmllint rejects %s", path);
			break;
		case EXPORT_SPEEDSCOPE:
			snprintf(cmd, sizeof(cmd),
				 "NODE_PATH='%s/npm/node_modules' node '%s/tests/export_schema.js' "
				 "'%s/npm/node_modules/speedscope/dist/release/"
				 "file-format-schema.json' '%s'",
				 b, src, b, path);
			ck_assert_msg(sh(cmd) == 0, "speedscope's schema rejects %s", path);
			break;
		case EXPORT_PPROF:
			if (system("go version >/dev/null 2>&1") != 0)
				break;
			o = test_cmd_out(&rc, "HOME=/tmp go tool pprof -raw '%s' 2>&1", path);
			ck_assert_msg(rc == 0 && strstr(o, "<tag a=\"1\" b='2'>&amp;"),
				      "pprof -raw: %.2000s", o);
			free(o);
			/* profile.proto is proto3: its strings must be UTF-8 (iconv reads them) */
			{
				size_t len;
				uint8_t *raw = gunzip_file(path, &len);
				FILE *sf;

				decode(raw, len, &dp);
				free(raw);
				snprintf(cmd, sizeof(cmd), "%s/strings", root);
				sf = fopen(cmd, "w");
				ck_assert_ptr_nonnull(sf);
				for (uint32_t i = 0; i < dp.nstr; i++)
					fprintf(sf, "%s\n", dp.str[i]);
				fclose(sf);
				dprof_free(&dp);
				o = test_cmd_out(&rc, "iconv -f UTF-8 -t UTF-8 '%s' >/dev/null",
						 cmd);
				ck_assert_msg(rc == 0, "strings of %s are not UTF-8", path);
				free(o);
			}
			break;
		default: {
			/* two lines "stack value", nothing split */
			char *text = test_slurp(path, NULL), *l, *save = NULL;
			int lines = 0;

			for (l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
				char *sp = strrchr(l, ' ');

				ck_assert_ptr_nonnull(sp);
				ck_assert_msg(!strcmp(sp + 1, "10") || !strcmp(sp + 1, "20"),
					      "folded line: %.200s", l);
				lines++;
			}
			ck_assert_int_eq(lines, 2);
			free(text);
		}
		}
	}
}
END_TEST

/* ---------------------------------------------------------------- a full disk */

static char mnt[PATH_MAX];

/* A tmpfs of size bytes (root only) on a scratch dir: test_tmpfs(). */
static int small_fs(const char *size)
{
	char opts[64];

	snprintf(opts, sizeof(opts), "size=%s", size);
	return test_tmpfs(mnt, sizeof(mnt), "xfull", opts);
}

static void small_fs_gone(void)
{
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}

/* Entries of dir (less . and ..) into buf, space separated. */
static int list_dir(const char *dir, char *buf, size_t len)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	buf[0] = 0;
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			snprintf(buf + strlen(buf), len - strlen(buf), "%s ", de->d_name);
			n++;
		}
	closedir(d);
	return n;
}

/*
 * Exports onto a full disk fail and leave what was there: the previous file
 * whole, no temporary file; a --split_path leaves no store dir and no
 * .cpa-lock. A split that succeeds leaves no .cpa-lock either.
 */
START_TEST(test_full_disk)
{
	static const char old[] = "the previous export\n";
	char path[PATH_MAX + 64], names[4096], sroot[PATH_MAX + 64], filler[PATH_MAX + 64], *text;
	struct store_split *sp;
	struct store_reader *r;
	struct store_filter flt;
	struct exporter *e;
	struct export_opts eo = {.freq = FREQ, .t1_ns = UINT64_MAX / 2};
	uint64_t samples;
	FILE *f;
	int fd;

	/* a split that works: no lock note left in its root */
	snprintf(sroot, sizeof(sroot), "%s/ok-split", root);
	store_filter__init(&flt);
	ck_assert_int_eq(store_split__new(sroot, FREQ, &sp), 0);
	ck_assert_int_eq(store_reader__open(store, NULL, NULL, &r), 0);
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, &flt, store_split__add, sp), 0);
	ck_assert_int_eq(store_split__close(sp, &samples, NULL, 0), 0);
	store_split__free(sp);
	ck_assert_int_eq(list_dir(sroot, names, sizeof(names)), 1);
	ck_assert_msg(!strstr(names, ".cpa-lock"), "left in the split's root: %s", names);

	if (geteuid() != 0) {
		fprintf(stderr,
			"test_full_disk: needs root (mounts a tmpfs): the disk part skipped\n");
		store_reader__free(r);
		return;
	}
	ck_assert_int_eq(small_fs("256k"), 0);
	snprintf(path, sizeof(path), "%s/out.svg", mnt);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(old, f);
	fclose(f);
	/* fill the disk */
	snprintf(filler, sizeof(filler), "%s/filler", mnt);
	fd = open(filler, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	{
		static char blk[4096];

		while (write(fd, blk, sizeof(blk)) > 0)
			;
	}
	close(fd);

	for (int k = 0; k < 2; k++) {
		ck_assert_int_eq(export__new(k ? EXPORT_PPROF : EXPORT_SVG, &eo, &e), 0);
		ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, &flt, export__add, e),
				 0);
		ck_assert_int_lt(export__write(e, path), 0);
		export__free(e);
		text = test_slurp(path, NULL);
		ck_assert_msg(!strcmp(text, old), "a failed export left %zu bytes: %.40s",
			      strlen(text), text);
		free(text);
		ck_assert_int_eq(list_dir(mnt, names, sizeof(names)), 2);
	}

	/* --split_path onto the full disk, then with a little room (the store dir
	 * made, blocks failing): a split that fails leaves nothing */
	snprintf(sroot, sizeof(sroot), "%s/split", mnt);
	ck_assert_int_eq(mkdir(sroot, 0755), 0);
	for (int k = 0; k < 4; k++) {
		struct stat fst;
		int rc;

		ck_assert_int_eq(stat(filler, &fst), 0);
		ck_assert_int_eq(truncate(filler, fst.st_size - (k ? 8192 : 0)), 0);
		rc = store_split__new(sroot, FREQ, &sp);
		if (rc == 0) {
			rc = store_reader__query(r, 0, UINT64_MAX / 2, &flt, store_split__add, sp);
			if (rc == 0)
				rc = store_split__close(sp, &samples, NULL, 0);
			store_split__free(sp);
		}
		ck_assert_msg(k || rc < 0, "a split onto a full disk succeeded");
		if (rc < 0) {
			ck_assert_msg(list_dir(sroot, names, sizeof(names)) == 0,
				      "a failed split left in its root: %s", names);
		} else {
			/* it fit: whole, then out of the way */
			struct dump d;

			ck_assert_int_eq(list_dir(sroot, names, sizeof(names)), 1);
			*strchr(names, ' ') = 0;
			snprintf(path, sizeof(path), "%.900s/%.64s", sroot, names);
			dump_store(path, 0, UINT64_MAX / 2, &d);
			ck_assert_uint_eq(d.samples, samples);
			free(d.buf);
			t_rm_rf(path);
		}
	}
	store_reader__free(r);
	small_fs_gone();
}
END_TEST

/*
 * The full-disk case's tmpfs does not outlive a case that fails after mounting
 * it (a check failure exits the process): no stale mounts on the host.
 */
START_TEST(test_full_disk_unmounted)
{
	char where[PATH_MAX];
	int p[2], st;
	bool left;
	pid_t pid;
	ssize_t n;

	if (geteuid() != 0) {
		fprintf(stderr, "test_full_disk_unmounted: needs root (mounts a tmpfs): skipped\n");
		return;
	}
	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* as a case that fails right after small_fs(): exit, no cleanup */
		int r = small_fs("64k");

		dprintf(p[1], "%s", r == 0 && test_mounted(mnt) ? mnt : "");
		_exit(1);
	}
	close(p[1]);
	n = read(p[0], where, sizeof(where) - 1);
	where[n > 0 ? n : 0] = 0;
	close(p[0]);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(where[0], "the tmpfs was not mounted");
	left = test_mounted(where);
	if (left)
		umount2(where, MNT_DETACH);
	rmdir(where);
	ck_assert_msg(!left, "'%s' still mounted after its case failed", where);
}
END_TEST

/*
 * pprof source lines through go tool pprof: rows whose frames are in
 * cpa-workload (built with -g) at file offsets inside main and clock_ns,
 * as --pc_locations stores them. -lines names workload.c:LINE, -list main
 * prints the source with the samples on it, and the header's "File:" names
 * the host (mapping 1), not a library.
 */
START_TEST(test_pprof_lines)
{
	const char *b = getenv("CPA_BUILD_DIR");
	struct export_opts eo = {.freq = FREQ, .t0_ns = T_NS, .t1_ns = 2 * T_NS, .title = "cpa t"};
	unsigned long long m_off, c_off, off, va;
	char wl[1100], bid_hex[64], path[1100], host[256] = "", *o;
	struct store_frame fr[3];
	const struct store_frame *st1[2] = {&fr[0], &fr[1]}, *st2[1] = {&fr[2]};
	struct store_sample s = {
		.sec = 1, .pid = 7, .tid = 7, .comm = "wl", .pcomm = "wl", .env = ""};
	struct exporter *e;
	int rc;

	ck_assert_ptr_nonnull(b);
	if (system("go version >/dev/null 2>&1") != 0)
		return;
	snprintf(wl, sizeof(wl), "%s/bin/cpa-workload", b);
	ck_assert_msg(access(wl, R_OK) == 0, "%s: build target cpa-workload", wl);
	/* file offset of a symbol: through the executable PT_LOAD */
	o = test_cmd_out(&rc, "readelf -lW '%s' | awk '$1 == \"LOAD\" && / E / {print $2, $3}'",
			 wl);
	ck_assert_int_eq(sscanf(o, "%llx %llx", &off, &va), 2);
	free(o);
	o = test_cmd_out(&rc, "nm --defined-only '%s' | awk '$3 == \"main\" {print $1}'", wl);
	ck_assert_int_eq(sscanf(o, "%llx", &m_off), 1);
	free(o);
	o = test_cmd_out(&rc, "nm --defined-only '%s' | awk '$3 == \"clock_ns\" {print $1}'", wl);
	ck_assert_int_eq(sscanf(o, "%llx", &c_off), 1);
	free(o);
	m_off = m_off - va + off;
	c_off = c_off - va + off;
	o = test_cmd_out(&rc, "readelf -n '%s' | awk '/Build ID/ {print $3}'", wl);
	ck_assert_int_eq(sscanf(o, "%63s", bid_hex), 1);
	free(o);
	memset(fr, 0, sizeof(fr));
	for (int i = 0; i < 3; i++) {
		fr[i].module = wl;
		fr[i].build_id_len = (uint8_t)(strlen(bid_hex) / 2);
		for (int k = 0; k < fr[i].build_id_len; k++)
			sscanf(bid_hex + 2 * k, "%2hhx", &fr[i].build_id[k]);
	}
	fr[0].name = "clock_ns";
	fr[0].offset = c_off + 8;
	fr[1].name = "main";
	fr[1].offset = m_off + 0x40;
	fr[2].name = "main";
	fr[2].offset = m_off + 0x100;
	ck_assert_int_eq(export__new(EXPORT_PPROF, &eo, &e), 0);
	s.stack_id = 1, s.n_frames = 2, s.frames = st1, s.count = s.weight = 30;
	ck_assert_int_eq(export__add(e, &s), 0);
	s.stack_id = 2, s.n_frames = 1, s.frames = st2, s.count = s.weight = 70;
	ck_assert_int_eq(export__add(e, &s), 0);
	snprintf(path, sizeof(path), "%s/lines.pb.gz", root);
	ck_assert_msg(export__write(e, path) == 0, "%s", export__error(e));
	export__free(e);

	o = test_cmd_out(&rc, "HOME=/tmp go tool pprof -top -lines -sample_index=samples '%s' 2>&1",
			 path);
	ck_assert_msg(rc == 0 && strstr(o, "workload.c:") && strstr(o, "main ") &&
			      strstr(o, "clock_ns "),
		      "pprof -lines: %s", o);
	gethostname(host, sizeof(host) - 1);
	ck_assert_msg(strstr(o, "File: ") && !strncmp(strstr(o, "File: ") + 6, host, strlen(host)),
		      "the header's File: does not name the host %s: %.300s", host, o);
	free(o);
	/* from /tmp: pprof's -list trims a source path at the base name of its cwd
	 * (build/tests would cut .../tests/workload/workload.c) */
	o = test_cmd_out(
		&rc,
		"cd /tmp && HOME=/tmp go tool pprof -list '^main$' -sample_index=samples '%s' 2>&1",
		path);
	ck_assert_msg(rc == 0 && strstr(o, "ROUTINE ======================== main in ") &&
			      strstr(o, "workload.c") && strstr(o, "int main(int argc"),
		      "pprof -list main: %s", o);
	free(o);
}
END_TEST

START_TEST(test_format_names)
{
	enum export_format f;

	ck_assert_int_eq(export__format_of_path("x.pb.gz", &f), 0);
	ck_assert_int_eq(f, EXPORT_PPROF);
	ck_assert_int_eq(export__format_of_path("a/b.speedscope.json", &f), 0);
	ck_assert_int_eq(f, EXPORT_SPEEDSCOPE);
	ck_assert_int_eq(export__format_of_path("x.svg", &f), 0);
	ck_assert_int_eq(f, EXPORT_SVG);
	ck_assert_int_eq(export__format_of_path("x.prof", &f), 0);
	ck_assert_int_eq(f, EXPORT_FOLDED);
	ck_assert_int_eq(export__format_of_path("x.json", &f), -ENOENT);
	ck_assert_int_eq(export__parse_format("pprof", &f), 0);
	ck_assert_int_eq(f, EXPORT_PPROF);
	ck_assert_int_eq(export__parse_format("perf", &f), -EINVAL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("export");
	TCase *tc = tcase_create("export");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_pprof_decode);
	tcase_add_test(tc, test_pprof_diff);
	tcase_add_test(tc, test_pprof_many_threads);
	tcase_add_test(tc, test_pprof_label_switches);
	tcase_add_test(tc, test_folded_diff);
	tcase_add_test(tc, test_svg);
	tcase_add_test(tc, test_svg_diff);
	tcase_add_test(tc, test_svg_100k_stacks);
	tcase_add_test(tc, test_speedscope_schema);
	tcase_add_test(tc, test_format_names);
	tcase_add_test(tc, test_pprof_triggers);
	tcase_add_test(tc, test_svg_speedscope_triggers);
	tcase_add_test(tc, test_split);
	tcase_add_test(tc, test_diff_two_stores);
	tcase_add_test(tc, test_rows_same_as_samples);
	tcase_add_test(tc, test_segments_same_as_one);
	tcase_add_test(tc, test_svg_height);
	tcase_add_test(tc, test_svg_labels);
	tcase_add_test(tc, test_speedscope_active);
	tcase_add_test(tc, test_hostile_names);
	tcase_add_test(tc, test_full_disk);
	tcase_add_test(tc, test_full_disk_unmounted);
	tcase_add_test(tc, test_pprof_lines);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
