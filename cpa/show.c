// SPDX-License-Identifier: MIT
/*
 * `cpa show`: range and folded export of a store, compatible with CPA's command
 * line (the compatibility reference kept with the project brief; docs/cli.md).
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

#include "common/cpulist.h"
#include "common/intern.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "show.h"
#include "storer/store.h"

#define NS	       NSEC_PER_SEC
#define LINE_MAX_BYTES (64u << 10)

/* Folded lines (labels and frames, each ending with ';') -> summed value. */
struct fold {
	struct intern lines;
	uint64_t *values; /* values[id - 1] */
	uint32_t cap;
};

/* What one export gathers: the folded lines and the seconds they span. */
struct show_acc {
	struct fold f;
	int64_t min_sec, max_sec;
	uint64_t rows;
};

struct show_ctx {
	const struct show_opts *o;
	/* [0]: what --kind selects; with the default (auto) [0] holds the
	 * on-CPU rows and [1] the off-CPU ones, and the export is [1] when the
	 * window has any (a --offcpu run shows off-CPU, as CPA did). */
	struct show_acc acc[2];
	char *buf; /* line being built */
	size_t len;
	bool oom;
};

static int fold_add(struct fold *f, const char *line, size_t len, uint64_t value)
{
	uint32_t id;
	int r = intern__get(&f->lines, line, (uint32_t)len, &id);

	if (r < 0)
		return r;
	if (r == 1) {
		if (id > f->cap) {
			uint32_t nc = f->cap ? f->cap * 2 : 256;
			uint64_t *v = realloc(f->values, nc * sizeof(*v));

			if (!v)
				return -ENOMEM;
			f->values = v;
			f->cap = nc;
		}
		f->values[id - 1] = 0;
	}
	f->values[id - 1] += value;
	return 0;
}

static void fold_free(struct fold *f)
{
	intern__free(&f->lines);
	free(f->values);
	memset(f, 0, sizeof(*f));
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
	bool off = s->kind == CPA_KIND_OFFCPU;
	struct show_acc *acc = &c->acc[0];
	char tmp[256];
	uint32_t i;
	int r;

	if ((o->kind == SHOW_KIND_ON && off) || (o->kind == SHOW_KIND_OFF && !off))
		return 0;
	if (o->kind == SHOW_KIND_AUTO && off)
		acc = &c->acc[1];
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
	r = fold_add(&acc->f, c->buf, c->len, off ? s->weight : s->count);
	if (r < 0)
		return r;
	if (!acc->rows || s->sec < acc->min_sec)
		acc->min_sec = s->sec;
	if (!acc->rows || s->sec > acc->max_sec)
		acc->max_sec = s->sec;
	acc->rows++;
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

static int id_cmp(const void *a, const void *b, void *arg)
{
	return intern__cmp(arg, *(const uint32_t *)a, *(const uint32_t *)b);
}

/* The folded lines in byte order, one "line value" each. */
static int write_prof(const struct show_acc *acc, const char *path)
{
	const struct fold *fd = &acc->f;
	uint32_t n = intern__count(&fd->lines), i;
	_cleanup_free_ uint32_t *ids = malloc((n ? n : 1) * sizeof(*ids));
	FILE *f;

	if (!ids)
		return log_error_errno(-ENOMEM, "sort folded lines: %m");
	for (i = 0; i < n; i++)
		ids[i] = i + 1;
	qsort_r(ids, n, sizeof(*ids), id_cmp, (void *)&fd->lines);
	f = fopen(path, "we");
	if (!f)
		return log_error_errno(-errno, "open '%s': %m", path);
	for (i = 0; i < n; i++) {
		uint32_t len;
		const char *line = intern__key(&fd->lines, ids[i], &len);

		fprintf(f, "%.*s %llu\n", (int)len, line,
			(unsigned long long)fd->values[ids[i] - 1]);
	}
	if (ferror(f) | (fclose(f) != 0))
		return log_error_errno(-(errno ? errno : EIO), "write '%s': %m", path);
	return 0;
}

static long local_tod(uint64_t ns)
{
	time_t t = (time_t)(ns / NS);
	struct tm tm;

	localtime_r(&t, &tm);
	return tm.tm_hour * 3600L + tm.tm_min * 60L + tm.tm_sec;
}

/*
 * The store dir under root for local time-of-day tod_s (-1: the newest): the
 * newest cpa_* dir whose records span that time of day, else the newest.
 */
static int pick_store(const char *root, long tod_s, char *buf, size_t len)
{
	char **names;
	uint32_t n, i;
	int ret = store_root__list(root, &names, &n);

	if (ret < 0)
		return ret;
	if (!n) {
		store_root__list_free(names, n);
		return -ENOENT;
	}
	snprintf(buf, len, "%s/%s", root, names[n - 1]);
	for (i = n; tod_s >= 0 && i-- > 0;) {
		char p[PATH_MAX + 256];
		struct store_reader *r;
		uint64_t a, b, recs;
		bool hit;

		snprintf(p, sizeof(p), "%s/%s", root, names[i]);
		if (store_reader__open(p, NULL, NULL, &r) < 0)
			continue;
		hit = store_reader__range(r, &a, &b, &recs) == 0 && local_tod(a) <= tod_s &&
		      tod_s <= local_tod(b);
		store_reader__free(r);
		if (hit) {
			snprintf(buf, len, "%s", p);
			break;
		}
	}
	store_root__list_free(names, n);
	return 0;
}

/* What the options ask for, checked: the filter, and the times of day (-1 = none). */
static int parse_request(const struct show_opts *o, struct store_filter *filt, uint64_t **ret_cpus,
			 long *ret_stod, long *ret_etod)
{
	if (!o->read || !*o->read) {
		log_error("--read DIR is required: a store dir (cpa_YYMMDD...) or the store root");
		return -EINVAL;
	}
	if (o->split_path) {
		log_error("--split_path is not supported yet by this cpa");
		return -EOPNOTSUPP;
	}
	if (o->output_num <= 0) {
		log_error("--output_num must be > 0, got %ld", o->output_num);
		return -EINVAL;
	}
	if (o->starttime && (*ret_stod = parse_tod(o->starttime)) < 0) {
		log_error("bad --starttime '%s': want HH:MM:SS", o->starttime);
		return -EINVAL;
	}
	if (o->endtime && (*ret_etod = parse_tod(o->endtime)) < 0) {
		log_error("bad --endtime '%s': want HH:MM:SS", o->endtime);
		return -EINVAL;
	}
	store_filter__init(filt);
	filt->pid = o->target_pid;
	filt->comm = o->target_comm;
	filt->env = o->target_env;
	filt->cgroup_id = o->target_cgroup_id;
	if (o->target_cpu) {
		uint64_t *cpus = calloc(CPULIST_WORDS(CPULIST_MAX_CPUS), sizeof(*cpus));

		if (!cpus)
			return log_error_errno(-ENOMEM, "cpu set: %m");
		*ret_cpus = cpus;
		if (cpulist__parse(o->target_cpu, cpus, CPULIST_MAX_CPUS, NULL) < 0) {
			log_error("bad --target_cpu '%s': want a list like 1-3,5", o->target_cpu);
			return -EINVAL;
		}
		filt->cpu_set = cpus;
		filt->cpu_set_bits = CPULIST_MAX_CPUS;
	}
	return 0;
}

/* --read names a store dir, or a root to pick one from by --starttime. */
static int open_store(const struct show_opts *o, long stod, char *dir, size_t len,
		      struct store_reader **ret)
{
	char err[512];
	int r;

	if (store_dir__is_store(o->read)) {
		snprintf(dir, len, "%s", o->read);
	} else {
		r = pick_store(o->read, stod, dir, len);
		if (r == -ENOENT) {
			log_error(
				"no cpa store in '%s' (want a cpa_YYMMDD... dir or the root holding them)",
				o->read);
			return r;
		}
		if (r < 0)
			return log_error_errno(r, "read store root '%s': %m", o->read);
	}
	r = store_reader__open_err(dir, on_notice, NULL, ret, err, sizeof(err));
	if (r < 0)
		log_error("%s", err);
	return r;
}

/* The export window [*ret_t0, *ret_t0 + *ret_n) in unix seconds. */
static int select_window(const struct show_opts *o, uint64_t first, long stod, long etod,
			 int64_t *ret_t0, int64_t *ret_n)
{
	/* Times of day are within the store's own day: that of its first record. */
	int64_t day0 = local_midnight((int64_t)(first / NS));
	int64_t t0 = stod >= 0 ? day0 + stod : (int64_t)(first / NS), n = o->output_num;

	if (etod >= 0) {
		n = day0 + etod - t0;
		if (n <= 0) {
			log_error("--endtime %s is not after the start", o->endtime);
			return -EINVAL;
		}
	}
	if (n > 366L * 86400) {
		log_error("--output_num %lld is more than a year of records", (long long)n);
		return -EINVAL;
	}
	*ret_t0 = t0;
	*ret_n = n;
	return 0;
}

/* Every row of the window through the filter, folded into c. */
static int read_window(struct store_reader *r, const char *dir, int64_t t0, int64_t n,
		       const struct store_filter *filt, struct show_ctx *c)
{
	int ret;

	c->buf = malloc(LINE_MAX_BYTES);
	if (!c->buf)
		return log_error_errno(-ENOMEM, "line buffer: %m");
	ret = store_reader__query(r, (uint64_t)t0 * NS, (uint64_t)(t0 + n) * NS, filt, on_sample,
				  c);
	if (ret < 0)
		return log_error_errno(ret, "read '%s': %m", dir);
	return 0;
}

static void log_read_stats(const struct store_reader *r)
{
	struct store_read_stats st;

	store_reader__stats(r, &st);
	log_debug("blocks: %llu indexed, %llu read, %llu dict reads, %llu corrupt, %llu torn",
		  (unsigned long long)st.blocks_indexed, (unsigned long long)st.blocks_read,
		  (unsigned long long)st.dict_reads, (unsigned long long)st.blocks_corrupt,
		  (unsigned long long)st.blocks_torn);
}

/* The export: window, read and fold, write the .prof, and CPA's lines around it. */
static int run_export(const struct show_opts *o, struct store_reader *r, const char *dir,
		      uint64_t first, uint64_t last, long stod, long etod,
		      const struct store_filter *filt)
{
	struct show_ctx c = {.o = o};
	const struct show_acc *acc;
	char a[32], b[32], ha[32], hb[32], outp[PATH_MAX];
	int64_t t0, n;
	int ret;

	ret = select_window(o, first, stod, etod, &t0, &n);
	if (ret < 0)
		return ret;
	fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
	fmt_tod((uint64_t)(t0 + n) * NS, b, sizeof(b));
	printf("Export Record Time From [ %s - %s ]\n", a, b);
	fflush(stdout);

	ret = read_window(r, dir, t0, n, filt, &c);
	if (ret < 0)
		goto out;
	acc = &c.acc[o->kind == SHOW_KIND_AUTO && c.acc[1].rows ? 1 : 0];
	if (!acc->rows) {
		fmt_tod(first, ha, sizeof(ha));
		fmt_tod(last, hb, sizeof(hb));
		log_error("no records in [ %s - %s ] of '%s' (it holds %s - %s)", a, b, dir, ha,
			  hb);
		ret = -ENODATA;
		goto out;
	}
	if (o->output_prof && *o->output_prof)
		snprintf(outp, sizeof(outp), "%s", o->output_prof);
	else
		snprintf(outp, sizeof(outp), "cpa_%s_%lld.prof", a, (long long)n);
	ret = write_prof(acc, outp);
	if (ret < 0)
		goto out;
	fmt_tod((uint64_t)acc->min_sec * NS, a, sizeof(a));
	fmt_tod((uint64_t)(acc->max_sec + 1) * NS, b, sizeof(b));
	printf("Write  [ %s - %s ] Record to %s, Stack Type %u\n", a, b, outp,
	       intern__count(&acc->f.lines));
	fflush(stdout);
	if (o->verbose)
		log_read_stats(r);
out:
	fold_free(&c.acc[0].f);
	fold_free(&c.acc[1].f);
	free(c.buf);
	return ret;
}

int show_run(const struct show_opts *o)
{
	_cleanup_free_ uint64_t *cpus = NULL;
	struct store_reader *r = NULL;
	struct store_filter filt;
	char dir[PATH_MAX + 256], a[32], b[32];
	uint64_t first, last, recs;
	long stod = -1, etod = -1;
	int ret;

	log_set_subsystem("show");
	if (o->verbose)
		log_set_level(LOG_LVL_DEBUG);
	ret = parse_request(o, &filt, &cpus, &stod, &etod);
	if (ret < 0)
		return ret;
	ret = open_store(o, stod, dir, sizeof(dir), &r);
	if (ret < 0)
		return ret;
	ret = store_reader__range(r, &first, &last, &recs);
	if (ret < 0) {
		log_error("%s", store_reader__error(r));
	} else if (o->show_range) {
		fmt_tod(first, a, sizeof(a));
		fmt_tod(last, b, sizeof(b));
		printf("Record Time From [ %s ] to [ %s ] Records Num: %llu\n", a, b,
		       (unsigned long long)recs);
		fflush(stdout);
	} else {
		ret = run_export(o, r, dir, first, last, stod, etod, &filt);
	}
	store_reader__free(r);
	return ret;
}
