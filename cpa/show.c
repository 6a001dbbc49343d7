// SPDX-License-Identifier: MIT
/*
 * `cpa show`: range and folded export of a store (docs/cpa-cli.md).
 *
 * Lines scripts parse are printed byte for byte as CPA printed them:
 *	Record Time From [ HH:MM:SS.mmm ] to [ HH:MM:SS.mmm ] Records Num: N
 *	Export Record Time From [ HH:MM:SS.mmm - HH:MM:SS.mmm ]
 *	Write  [ HH:MM:SS.mmm - HH:MM:SS.mmm ] Record to <path>, Stack Type <n>
 * Folded line: label;...;root_frame;...;leaf_frame; COUNT
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/macro.h"
#include "show.h"
#include "storer/store.h"

#define NS	       1000000000ULL
#define SHOW_CPU_BITS  8192u
#define LINE_MAX_BYTES (64u << 10)

struct fold_ent {
	char *line; /* labels and frames, ends with ';' */
	uint64_t value;
	uint32_t hash;
};

struct fold {
	struct fold_ent *ents;
	uint32_t n, cap;
	uint32_t *slots;
	uint32_t nslots;
};

struct show_ctx {
	const struct show_opts *o;
	struct fold f;
	char *buf; /* line being built */
	size_t len;
	bool oom;
	int64_t min_sec, max_sec;
	uint64_t rows;
};

static uint32_t fold_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u;

	while (len--)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

static int fold_grow(struct fold *f)
{
	uint32_t ns = f->nslots ? f->nslots * 2 : 1024, i;
	uint32_t *s = calloc(ns, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (i = 0; i < f->n; i++) {
		uint32_t h = f->ents[i].hash & (ns - 1);

		while (s[h])
			h = (h + 1) & (ns - 1);
		s[h] = i + 1;
	}
	free(f->slots);
	f->slots = s;
	f->nslots = ns;
	return 0;
}

static int fold_add(struct fold *f, const char *line, size_t len, uint64_t value)
{
	uint32_t h = fold_hash(line, len), i;
	char *c;

	if ((uint64_t)(f->n + 1) * 2 > f->nslots && fold_grow(f) < 0)
		return -ENOMEM;
	i = h & (f->nslots - 1);
	while (f->slots[i]) {
		struct fold_ent *e = &f->ents[f->slots[i] - 1];

		if (e->hash == h && strlen(e->line) == len && !memcmp(e->line, line, len)) {
			e->value += value;
			return 0;
		}
		i = (i + 1) & (f->nslots - 1);
	}
	if (f->n == f->cap) {
		uint32_t nc = f->cap ? f->cap * 2 : 256;
		struct fold_ent *e = realloc(f->ents, nc * sizeof(*e));

		if (!e)
			return -ENOMEM;
		f->ents = e;
		f->cap = nc;
	}
	c = strndup(line, len);
	if (!c)
		return -ENOMEM;
	f->ents[f->n] = (struct fold_ent){.line = c, .value = value, .hash = h};
	f->n++;
	f->slots[i] = f->n;
	return 0;
}

static void fold_free(struct fold *f)
{
	uint32_t i;

	for (i = 0; i < f->n; i++)
		free(f->ents[i].line);
	free(f->ents);
	free(f->slots);
	memset(f, 0, sizeof(*f));
}

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct fold_ent *)a)->line, ((const struct fold_ent *)b)->line);
}

/* Append s, with ';' and newlines made harmless: they would split the folded line. */
static void put(struct show_ctx *c, const char *s, const char *suffix)
{
	size_t n = strlen(s), k = suffix ? strlen(suffix) : 0, i;

	if (c->len + n + k + 1 >= LINE_MAX_BYTES) {
		c->oom = true; /* absurdly deep: truncate, never overflow */
		return;
	}
	for (i = 0; i < n; i++) {
		char ch = s[i];

		c->buf[c->len++] = ch == ';' ? ':' : (ch == '\n' || ch == '\r') ? ' ' : ch;
	}
	if (k)
		memcpy(c->buf + c->len, suffix, k);
	c->len += k;
	c->buf[c->len++] = ';';
}

static const char *kind_name(unsigned int k)
{
	static const char *const names[] = {"oncpu", "offcpu", "probe"};

	return k < ARRAY_SIZE(names) ? names[k] : "?";
}

static int on_sample(void *ctx, const struct store_sample *s)
{
	struct show_ctx *c = ctx;
	const struct show_opts *o = c->o;
	char tmp[256];
	uint32_t i;
	int r;

	c->len = 0;
	if (o->show_raw) {
		snprintf(tmp, sizeof(tmp), "raw:pid=%u,tid=%u,cpu=%u,cgroup=%llu,kind=%s,probe=%u",
			 s->pid, s->tid, s->cpu, (unsigned long long)s->cgroup_id,
			 kind_name(s->kind), s->probe_id);
		put(c, tmp, NULL);
	}
	if (!o->no_env)
		put(c, s->env[0] ? s->env : "SYSTEM", NULL);
	if (s->lost) {
		put(c, "[lost]", NULL);
	} else {
		const char *pc = s->pcomm[0] ? s->pcomm : s->comm[0] ? s->comm : "[unknown]";

		if (o->no_pid) {
			put(c, pc, NULL);
		} else {
			snprintf(tmp, sizeof(tmp), "%s:%u", pc, s->pid);
			put(c, tmp, NULL);
		}
		if (o->show_thread_name)
			put(c, s->comm[0] ? s->comm : pc, NULL);
	}
	/* Stored leaf first, kernel frames first: print user root..leaf, then kernel root..leaf. */
	for (i = s->n_frames; i-- > s->n_kframes;)
		put(c, s->frames[i]->name, NULL);
	for (i = s->n_kframes; i-- > 0;) {
		const struct store_frame *f = s->frames[i];

		put(c, f->name, (f->flags & CPA_FF_MARKER) ? NULL : "_[k]");
	}
	r = fold_add(&c->f, c->buf, c->len, s->kind == CPA_KIND_OFFCPU ? s->weight : s->count);
	if (r < 0)
		return r;
	if (!c->rows || s->sec < c->min_sec)
		c->min_sec = s->sec;
	if (!c->rows || s->sec > c->max_sec)
		c->max_sec = s->sec;
	c->rows++;
	return 0;
}

static void fmt_tod(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / NS);
	struct tm tm;

	localtime_r(&t, &tm);
	snprintf(buf, len, "%02d:%02d:%02d.%03u", tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned int)(ns % NS / 1000000));
}

/* "HH:MM:SS" -> seconds of the day, or -EINVAL. */
static long parse_tod(const char *s)
{
	unsigned int h, m, sec;
	char extra;

	if (sscanf(s, "%2u:%2u:%2u%c", &h, &m, &sec, &extra) != 3 || h > 23 || m > 59 || sec > 59)
		return -EINVAL;
	return (long)h * 3600 + m * 60 + sec;
}

/* Local midnight (unix seconds) of the day holding t. */
static int64_t local_midnight(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
	tm.tm_isdst = -1;
	return (int64_t)mktime(&tm);
}

static void on_notice(void *ctx, const char *msg)
{
	(void)ctx;
	/* The block being written right now looks torn to a reader: not news. */
	if (strstr(msg, "torn"))
		log_debug("%s", msg);
	else
		log_warn("%s", msg);
}

static int write_prof(struct show_ctx *c, const char *path)
{
	FILE *f = fopen(path, "we");
	uint32_t i;

	if (!f)
		return log_error_errno(-errno, "open '%s': %m", path);
	qsort(c->f.ents, c->f.n, sizeof(*c->f.ents), ent_cmp);
	for (i = 0; i < c->f.n; i++)
		fprintf(f, "%s %llu\n", c->f.ents[i].line, (unsigned long long)c->f.ents[i].value);
	if (ferror(f) | (fclose(f) != 0))
		return log_error_errno(-(errno ? errno : EIO), "write '%s': %m", path);
	return 0;
}

int show_run(const struct show_opts *o)
{
	_cleanup_free_ uint8_t *cpus = NULL;
	struct store_reader *r = NULL;
	struct store_filter filt;
	struct show_ctx c = {.o = o};
	char dir[PATH_MAX + 256], err[512], a[32], b[32], outp[PATH_MAX];
	uint64_t first, last, recs;
	long stod = -1, etod = -1;
	int64_t day0, t0, n;
	int ret;

	log_set_subsystem("show");
	if (o->verbose)
		log_set_level(LOG_LVL_DEBUG);
	if (!o->read || !*o->read) {
		log_error("--read DIR is required: a store dir (cpa_YYMMDD...) or the store root");
		return -EINVAL;
	}
	if (o->output_num <= 0) {
		log_error("--output_num must be > 0, got %ld", o->output_num);
		return -EINVAL;
	}
	if (o->starttime && (stod = parse_tod(o->starttime)) < 0) {
		log_error("bad --starttime '%s': want HH:MM:SS", o->starttime);
		return -EINVAL;
	}
	if (o->endtime && (etod = parse_tod(o->endtime)) < 0) {
		log_error("bad --endtime '%s': want HH:MM:SS", o->endtime);
		return -EINVAL;
	}
	store_filter__init(&filt);
	filt.pid = o->target_pid;
	filt.comm = o->target_comm;
	filt.env = o->target_env;
	filt.cgroup_id = o->target_cgroup_id;
	if (o->target_cpu) {
		cpus = calloc(SHOW_CPU_BITS / 8, 1);
		if (!cpus)
			return log_error_errno(-ENOMEM, "cpu set: %m");
		if (store_cpulist__parse(o->target_cpu, cpus, SHOW_CPU_BITS) < 0) {
			log_error("bad --target_cpu '%s': want a list like 1-3,5", o->target_cpu);
			return -EINVAL;
		}
		filt.cpu_set = cpus;
		filt.cpu_set_bits = SHOW_CPU_BITS;
	}

	if (store_dir__is_store(o->read)) {
		snprintf(dir, sizeof(dir), "%s", o->read);
	} else {
		ret = store_root__pick(o->read, stod, dir, sizeof(dir));
		if (ret == -ENOENT) {
			log_error(
				"no cpa store in '%s' (want a cpa_YYMMDD... dir or the root holding them)",
				o->read);
			return ret;
		}
		if (ret < 0)
			return log_error_errno(ret, "read store root '%s': %m", o->read);
	}
	ret = store_reader__open_err(dir, on_notice, NULL, &r, err, sizeof(err));
	if (ret < 0) {
		log_error("%s", err);
		return ret;
	}
	ret = store_reader__range(r, &first, &last, &recs);
	if (ret < 0) {
		log_error("%s", store_reader__error(r));
		goto out;
	}
	if (o->show_range) {
		fmt_tod(first, a, sizeof(a));
		fmt_tod(last, b, sizeof(b));
		printf("Record Time From [ %s ] to [ %s ] Records Num: %llu\n", a, b,
		       (unsigned long long)recs);
		fflush(stdout);
		goto out;
	}

	/* Times of day are within the store's own day: that of its first record. */
	day0 = local_midnight((int64_t)(first / NS));
	t0 = stod >= 0 ? day0 + stod : (int64_t)(first / NS);
	n = o->output_num;
	if (etod >= 0) {
		n = day0 + etod - t0;
		if (n <= 0) {
			log_error("--endtime %s is not after the start", o->endtime);
			ret = -EINVAL;
			goto out;
		}
	}
	if (n > 366L * 86400) {
		log_error("--output_num %lld is more than a year of records", (long long)n);
		ret = -EINVAL;
		goto out;
	}
	fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
	fmt_tod((uint64_t)(t0 + n) * NS, b, sizeof(b));
	printf("Export Record Time From [ %s - %s ]\n", a, b);
	fflush(stdout);
	if (show_export_wanted(o)) { /* pprof, svg, speedscope, diffs, split: show_export.c */
		ret = show_export(o, r, dir, &filt, t0, n);
		goto out;
	}

	c.buf = malloc(LINE_MAX_BYTES);
	if (!c.buf) {
		ret = log_error_errno(-ENOMEM, "line buffer: %m");
		goto out;
	}
	ret = store_reader__query(r, (uint64_t)t0 * NS, (uint64_t)(t0 + n) * NS, &filt, on_sample,
				  &c);
	if (ret < 0) {
		log_error_errno(ret, "read '%s': %m", dir);
		goto out;
	}
	if (!c.rows) {
		fmt_tod(first, outp, sizeof(outp));
		fmt_tod(last, err, sizeof(err));
		log_error("no records in [ %s - %s ] of '%s' (it holds %s - %s)", a, b, dir, outp,
			  err);
		ret = -ENODATA;
		goto out;
	}
	if (o->output_prof && *o->output_prof)
		snprintf(outp, sizeof(outp), "%s", o->output_prof);
	else
		snprintf(outp, sizeof(outp), "cpa_%s_%lld.prof", a, (long long)n);
	ret = write_prof(&c, outp);
	if (ret < 0)
		goto out;
	fmt_tod((uint64_t)c.min_sec * NS, a, sizeof(a));
	fmt_tod((uint64_t)(c.max_sec + 1) * NS, b, sizeof(b));
	printf("Write  [ %s - %s ] Record to %s, Stack Type %u\n", a, b, outp, c.f.n);
	fflush(stdout);
	if (o->verbose) {
		struct store_read_stats st;

		store_reader__stats(r, &st);
		log_debug(
			"blocks: %llu indexed, %llu read, %llu dict reads, %llu corrupt, %llu torn",
			(unsigned long long)st.blocks_indexed, (unsigned long long)st.blocks_read,
			(unsigned long long)st.dict_reads, (unsigned long long)st.blocks_corrupt,
			(unsigned long long)st.blocks_torn);
	}
	ret = 0;
out:
	fold_free(&c.f);
	free(c.buf);
	store_reader__free(r);
	return ret;
}

/* For show_export.c (show.h). */
void show_fmt_tod(uint64_t ns, char *buf, size_t len)
{
	fmt_tod(ns, buf, len);
}

long show_parse_tod(const char *s)
{
	return parse_tod(s);
}

int64_t show_local_midnight(int64_t t)
{
	return local_midnight(t);
}

void show_on_notice(void *ctx, const char *msg)
{
	on_notice(ctx, msg);
}
