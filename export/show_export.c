// SPDX-License-Identifier: MIT
/*
 * `cpa show --format pprof|svg|speedscope` and diffs (--diff_base_*): feeds
 * the store reader's rows to an exporter (export.h) and writes its file.
 * The plain folded .prof stays show.c's. docs/export.md.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/log.h"
#include "export.h"
#include "common/timeutil.h"
#include "show.h"
#include "storer/store.h"

#define NS 1000000000ULL

/* item appended to the list in buf: "a, b, item". */
static void list_add(char *buf, size_t len, bool given, const char *item)
{
	size_t k = strlen(buf);

	if (given && k < len)
		snprintf(buf + k, len - k, "%s%s", k ? ", " : "", item);
}

/* Option name (long) given: by the parser's record, else non_default. */
static bool given(const struct show_opts *o, const char *name, bool non_default)
{
	return o->given ? o->given(o->given_ctx, name) : non_default;
}

/* The label switches the user gave (and --show_raw when raw) onto buf's list. */
static void list_labels(const struct show_opts *o, bool raw, char *buf, size_t len)
{
	list_add(buf, len, o->no_pid, "--no_pid");
	list_add(buf, len, o->no_env, "--no_env");
	list_add(buf, len, o->show_thread_name, "--show_thread_name");
	list_add(buf, len, raw && o->show_raw, "--show_raw");
}

/* What only a profile takes, given: onto buf's list. */
static void list_profile(const struct show_opts *o, char *buf, size_t len)
{
	list_add(buf, len, o->output_prof, "-o");
	list_add(buf, len, o->format, "--format");
	list_add(buf, len, o->diff_base_read || o->diff_base_start || o->diff_base_end,
		 "--diff_base_*");
	list_add(buf, len, o->split_path, "--split_path");
	list_add(buf, len, given(o, "kind", o->kind != SHOW_KIND_AUTO), "--kind");
	list_labels(o, true, buf, len);
}

/* The filters but --target_pid and --target_comm (and --probe_id, which prints
 * its spec, unless probe), given: onto buf's list. */
static void list_filters(const struct show_opts *o, bool probe, char *buf, size_t len)
{
	list_add(buf, len, o->target_env, "--target_env");
	list_add(buf, len, o->target_cpu, "--target_cpu");
	list_add(buf, len, given(o, "target_cgroup_id", o->target_cgroup_id >= 0),
		 "--target_cgroup_id");
	list_add(buf, len, probe && given(o, "probe_id", o->probe_id >= 0), "--probe_id");
}

/* What the store's range (--show_range) or cpa-view (--use_cui) does not take. */
static void warn_range_view(const struct show_opts *o)
{
	char x[512] = "";

	list_add(x, sizeof(x), o->use_cui && o->show_range, "--show_range");
	list_add(x, sizeof(x), given(o, "output_num", o->output_num != 1), "-n");
	list_add(x, sizeof(x), !o->use_cui && o->endtime, "--endtime");
	list_profile(o, x, sizeof(x));
	list_add(x, sizeof(x), given(o, "target_pid", o->target_pid >= 0), "--target_pid");
	list_add(x, sizeof(x), o->target_comm, "--target_comm");
	list_filters(o, o->use_cui, x, sizeof(x));
	list_add(x, sizeof(x), o->sched || o->sched_csv || o->sched_json, "--sched*");
	list_add(x, sizeof(x), o->triggers, "--triggers");
	if (x[0] && o->use_cui)
		log_warn("--use_cui runs cpa-view on --read from --starttime to --endtime: %s not "
			 "used (the viewer has its own filters)",
			 x);
	else if (x[0])
		log_warn("--show_range prints the store's range only: %s not used", x);
}

/*
 * Without --format, -o's suffix picks the format and any other suffix is
 * folded text (CPA's rule); a suffix that reads as another format's
 * (x.pprof, x.json, X.SVG) would get folded text silently. -ENOENT when path
 * looks like no format, else the one it looks like.
 */
static int format_look_alike(const char *path, enum export_format *ret)
{
	static const struct {
		const char *suffix;
		enum export_format fmt;
	} alike[] = {
		{"pprof", EXPORT_PPROF},
		{"pb", EXPORT_PPROF},
		{"gz", EXPORT_PPROF},
		{"svg", EXPORT_SVG},
		{"html", EXPORT_SVG},
		{"json", EXPORT_SPEEDSCOPE},
		{"speedscope", EXPORT_SPEEDSCOPE},
	};
	const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');

	if (!dot || (slash && dot < slash))
		return -ENOENT;
	for (unsigned int i = 0; i < sizeof(alike) / sizeof(alike[0]); i++)
		if (!strcasecmp(dot + 1, alike[i].suffix)) {
			*ret = alike[i].fmt;
			return 0;
		}
	return -ENOENT;
}

void show_warn_unused(const struct show_opts *o)
{
	enum export_format fmt = EXPORT_FOLDED, sfx;
	bool diff = o->diff_base_read || o->diff_base_start || o->diff_base_end;
	char x[512] = "";

	if (o->use_cui || o->show_range) {
		warn_range_view(o);
		return;
	}
	if (show_sched_wanted(o)) {
		/* metrics and triggers, no profile: what only a profile takes is not used */
		list_profile(o, x, sizeof(x));
		list_filters(o, true, x, sizeof(x));
		if (x[0])
			log_warn("%s prints the scheduler metrics or the policy triggers, not a "
				 "profile: %s not used (--target_pid and --target_comm select)",
				 o->triggers && !o->sched && !o->sched_csv && !o->sched_json
					 ? "--triggers"
					 : "--sched",
				 x);
		return;
	}
	if (o->split_path) {
		list_add(x, sizeof(x), o->format, "--format");
		list_add(x, sizeof(x), o->output_prof, "-o");
		list_labels(o, true, x, sizeof(x));
		if (x[0])
			log_warn(
				"--split_path writes a store, every field of each row kept: %s not "
				"used (a cpa show of the new store takes the label switches)",
				x);
		return;
	}
	if (o->format && export__parse_format(o->format, &fmt) < 0)
		return; /* show_export() says so */
	if (!o->format && o->output_prof && export__format_of_path(o->output_prof, &fmt) < 0 &&
	    format_look_alike(o->output_prof, &sfx) == 0)
		log_warn("-o '%s' looks like %s, but only %s picks it: writing folded stacks "
			 "(--format %s writes %s)",
			 o->output_prof, export__format_name(sfx), export__suffix(sfx),
			 export__format_name(sfx), export__format_name(sfx));
	if (o->format && o->output_prof && export__format_of_path(o->output_prof, &sfx) == 0 &&
	    sfx != fmt)
		log_warn("-o '%s' has the suffix of %s: --format %s writes %s into it",
			 o->output_prof, export__format_name(sfx), o->format, o->format);
	if (fmt == EXPORT_FOLDED && !diff) {
		/* the plain .prof: the raw label stands alone */
		list_labels(o, false, x, sizeof(x));
		if (o->show_raw && x[0])
			log_warn("--show_raw writes CPA's raw label, whose layout is fixed: %s "
				 "change nothing",
				 x);
		return;
	}
	if (o->show_raw)
		log_warn("--show_raw is the plain folded .prof's raw label: the %s%s export does "
			 "not use it",
			 export__format_name(fmt), diff ? " diff" : "");
	if (fmt == EXPORT_PPROF && o->show_thread_name)
		log_warn("--show_thread_name: pprof labels every sample with its thread name "
			 "(comm) already; go tool pprof -tagroot=comm draws it as the root frame");
}

bool show_export_wanted(const struct show_opts *o)
{
	enum export_format f = EXPORT_FOLDED;

	if (o->split_path || o->diff_base_read || o->diff_base_start || o->diff_base_end)
		return true;
	if (o->format)
		return strcmp(o->format, "folded") != 0;
	return o->output_prof && export__format_of_path(o->output_prof, &f) == 0 &&
	       f != EXPORT_FOLDED;
}

/* The exporter fed a block's rows at a time, the progress bar moved along. */
struct feed {
	struct exporter *e;
	store_rows_fn add;
	struct show_progress pg;
};

static int feed_rows(void *ctx, const struct store_rows *b)
{
	struct feed *f = ctx;
	int r = f->add(f->e, b);

	if (r == 0)
		show_progress__at(&f->pg, b->rows[b->n - 1].sec);
	return r;
}

static int feed(struct store_reader *r, int64_t t0, int64_t t1, const struct store_filter *filt,
		struct exporter *e, store_rows_fn add)
{
	struct feed f = {.e = e, .add = add};
	struct store_filter sf = *filt;
	int ret;

	sf.skip |= export__rows_skip(e);
	show_progress__init(&f.pg, t0, t1 - t0);
	ret = store_reader__query_rows(r, (uint64_t)t0 * NS, (uint64_t)t1 * NS, &sf, feed_rows, &f);
	show_progress__done(&f.pg);
	return ret;
}

/*
 * Whether r's records hold time of day tod (-1: any) on one of their days: that
 * day's local midnight into *day0 (else, and for -1, the first record's day).
 */
static bool holds_tod(struct store_reader *r, long tod, int64_t *day0)
{
	uint64_t first, last, recs;
	int64_t a, b;

	if (store_reader__range(r, &first, &last, &recs) < 0)
		return false;
	a = (int64_t)(first / NS);
	b = (int64_t)(last / NS);
	*day0 = local_midnight(a);
	if (tod < 0)
		return true;
	for (int64_t d = *day0; d <= b; d = local_midnight(d + 36 * 3600))
		if (d + tod >= a && d + tod <= b) {
			*day0 = d;
			return true;
		}
	return false;
}

/*
 * A base on --read (no --diff_base_read) starting at stod that the exported
 * store r does not hold: from a root, the day whose records span it, as
 * --starttime picks one (its runs into *own, its dir into dir; its run dirs
 * this user cannot open named, as --read's). *own NULL: r it is (a store dir,
 * or no day holds it).
 */
static int base_day_of_read(const struct show_opts *o, struct store_reader *r, long stod, char *dir,
			    size_t len, struct store_reader **own)
{
	char pick[PATH_MAX + 256];
	int64_t day0;
	int ret;

	*own = NULL;
	if (stod < 0 || store_dir__is_store(o->read) || holds_tod(r, stod, &day0) ||
	    show_pick_dir(o->read, stod, pick, sizeof(pick), NULL, 0) < 0)
		return 0;
	ret = show_open_day(o->read, NULL, pick, own);
	if (ret < 0)
		return ret;
	if (!holds_tod(*own, stod, &day0)) { /* the newest day, not one spanning stod */
		store_reader__free(*own);
		*own = NULL;
		return 0;
	}
	snprintf(dir, len, "%s", pick);
	return 0;
}

/*
 * The base range of a diff: its own store (--diff_base_read) or ours (r, in
 * sdir), on the day that holds its start; from a root, as --read is read: the
 * day --diff_base_start picks and the later ones the base reaches into.
 */
static int add_base(const struct show_opts *o, struct exporter *e, struct store_reader *r,
		    const char *sdir, const struct store_filter *filt, int64_t n)
{
	const char *bread = o->diff_base_read ? o->diff_base_read : o->read;
	struct export_stats st;
	struct store_reader *br = r, *own = NULL;
	char dir[PATH_MAX + 256], a[32], b[32];
	long stod = -1, etod = -1;
	uint64_t first, last, recs;
	int64_t day0, t0, t1;
	int ret;

	if (o->diff_base_start && (stod = show_parse_tod(o->diff_base_start)) < 0) {
		log_error("bad --diff_base_start '%s': want HH:MM:SS", o->diff_base_start);
		return -EINVAL;
	}
	if (o->diff_base_end && (etod = show_parse_tod(o->diff_base_end)) < 0) {
		log_error("bad --diff_base_end '%s': want HH:MM:SS", o->diff_base_end);
		return -EINVAL;
	}
	if (o->diff_base_read && access(o->diff_base_read, F_OK) < 0) {
		/* as show_pick_dir() says it of --read, with this option's name */
		ret = -errno;
		log_error_errno(ret,
				"failed to open input file: '%s': %m (--diff_base_read: a "
				"cpa_YYMMDD... dir or the root holding them)",
				o->diff_base_read);
		return ret;
	}
	if (o->diff_base_read) {
		ret = show_open_store(o->diff_base_read, stod, NULL, dir, sizeof(dir), NULL, 0,
				      &own);
	} else {
		snprintf(dir, sizeof(dir), "%s", sdir);
		ret = base_day_of_read(o, r, stod, dir, sizeof(dir), &own);
	}
	if (ret < 0)
		return ret;
	if (own)
		br = own;
	ret = store_reader__range(br, &first, &last, &recs);
	if (ret < 0) {
		log_error("%s", store_reader__error(br));
		goto out;
	}
	(void)holds_tod(br, stod, &day0);
	t0 = stod >= 0 ? day0 + stod : (int64_t)(first / NS);
	/* Without an end, the base is as long as the range it is compared with;
	 * from a root, as --read, it reaches into the next day's runs. */
	t1 = etod >= 0 ? show_etod_end(bread, day0, stod, etod) : t0 + n;
	if (t1 <= t0) {
		log_error("--diff_base_end %s is not after the base's start", o->diff_base_end);
		ret = -EINVAL;
		goto out;
	}
	ret = show_reach_next_day(bread, &own, dir, sizeof(dir), first, &last, t1);
	if (ret < 0)
		goto out;
	if (own) {
		br = own;
		export__new_source(e); /* another reader: other (seg, stack_id) ids */
	}
	show_fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
	show_fmt_tod((uint64_t)t1 * NS, b, sizeof(b));
	printf("Diff Base Record Time From [ %s - %s ]\n", a, b);
	fflush(stdout);
	ret = feed(br, t0, t1, filt, e, export__add_base_rows);
	if (ret < 0) {
		log_error("read the diff base '%s': %s", own ? dir : sdir,
			  ret == -ENOMEM ? "out of memory" : export__error(e));
		goto out;
	}
	if (own) /* r's are said at the end */
		show_warn_skipped(own, dir);
	export__stats(e, &st);
	if (!st.rows[1]) {
		log_warn("the diff base [ %s - %s ] of '%s' holds no records (--diff_base_start, "
			 "--diff_base_end, --diff_base_read): every stack shows as new",
			 a, b, own ? dir : sdir);
	} else if (t0 < (int64_t)(first / NS) ||
		   t1 > (int64_t)(store_reader__range_end(br, last) / NS)) {
		/* The range itself is refused there (Not Found Enough Records); a
		 * base is compared as it is, but not silently. */
		char ha[32], hb[32];

		show_fmt_tod(first / NS * NS, ha, sizeof(ha));
		show_fmt_tod(store_reader__range_end(br, last) / NS * NS, hb, sizeof(hb));
		log_warn("the diff base [ %s - %s ] reaches outside the records of '%s' [ %s - %s "
			 "]: its seconds there hold nothing, so the range's stacks seem to have "
			 "grown by what they would have held",
			 a, b, own ? dir : sdir, ha, hb);
	}
	ret = 0;
out:
	store_reader__free(own);
	return ret;
}

/* --kind as the exporters take it: the default, auto, is every kind (each
 * format keeps them apart, or adds them up as the time they stand for). */
static enum export_kinds kinds_of(const struct show_opts *o)
{
	return o->kind == SHOW_KIND_ON	  ? EXPORT_KINDS_ON
	       : o->kind == SHOW_KIND_OFF ? EXPORT_KINDS_OFF
					  : EXPORT_KINDS_ALL;
}

/* The split's rows through --kind. */
struct split_feed {
	struct store_split *sp;
	enum show_kind kind;
	uint64_t rows; /* added */
};

static int split_add(void *ctx, const struct store_sample *s)
{
	struct split_feed *f = ctx;
	bool off = s->kind == CPA_KIND_OFFCPU;

	if ((f->kind == SHOW_KIND_ON && off) || (f->kind == SHOW_KIND_OFF && !off))
		return 0;
	f->rows++;
	return store_split__add(f->sp, s);
}

/* --split_path: the range (and filters) as a new store. */
static int split(const struct show_opts *o, struct store_reader *r, const char *dir,
		 const struct store_filter *filt, int64_t t0, int64_t n)
{
	struct split_feed sf = {.kind = o->kind};
	struct store_split *sp = NULL;
	char out[PATH_MAX], a[32], b[32];
	uint32_t freq = 0;
	uint64_t samples = 0;
	bool made;
	int ret;

	if (o->diff_base_read || o->diff_base_start || o->diff_base_end) {
		log_error("--split_path writes a store: it takes no --diff_base_*");
		return -EINVAL;
	}
	(void)export__store_freq(dir, &freq);
	/* A failed or empty split leaves nothing it made: not DIR either. */
	made = access(o->split_path, F_OK) < 0 && errno == ENOENT;
	ret = store_split__new(o->split_path, freq, &sp);
	if (ret < 0) {
		log_error_errno(ret, "--split_path: new store in '%s': %m", o->split_path);
		goto out;
	}
	sf.sp = sp;
	ret = store_reader__query(r, (uint64_t)t0 * NS, (uint64_t)(t0 + n) * NS, filt, split_add,
				  &sf);
	if (ret < 0) {
		log_error_errno(ret, "split '%s' into '%s': %m", dir, o->split_path);
		goto out;
	}
	if (!sf.rows) {
		show_fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
		show_fmt_tod((uint64_t)(t0 + n) * NS, b, sizeof(b));
		log_error("no records in [ %s - %s ] of '%s'", a, b, dir);
		ret = -ENODATA;
		goto out; /* not closed: its free removes the store dirs it made */
	}
	ret = store_split__close(sp, &samples, out, sizeof(out));
	if (ret < 0) {
		log_error_errno(ret, "--split_path: write '%s': %m", o->split_path);
		goto out;
	}
	printf("Split %llu samples into %s\n", (unsigned long long)samples, out);
	fflush(stdout);
out:
	store_split__free(sp);
	if (ret < 0 && made)
		(void)rmdir(o->split_path);
	return ret;
}

/* The policy triggers of the range for the exporter to mark (docs/export.md),
 * those of the processes the filter selects (and system-wide ones). */
static int add_triggers(struct exporter *e, struct store_reader *r, const struct export_opts *eo,
			const struct store_filter *filt)
{
	struct store_trigger *t = NULL;
	size_t n = 0;
	int ret = store_reader__triggers(r, eo->t0_ns, eo->t1_ns, &t, &n);

	if (ret < 0)
		return log_error_errno(ret, "read the policy events: %m");
	for (size_t i = 0; i < n && ret >= 0; i++) {
		const struct cpa_policy_event *ev = &t[i].ev;

		if (ev->pid && filt->pid >= 0 && ev->pid != (uint32_t)filt->pid)
			continue;
		if (ev->pid && filt->comm && strncmp(ev->comm, filt->comm, CPA_COMM_LEN - 1))
			continue;
		ret = export__add_trigger(e, &t[i]);
		if (ret < 0)
			log_warn("%s: the rest are not marked", export__error(e));
	}
	free(t);
	return 0;
}

int show_export(const struct show_opts *o, struct store_reader *r, const char *dir,
		const struct store_filter *filt, int64_t t0, int64_t n)
{
	struct export_opts eo = {
		.no_pid = o->no_pid,
		.no_env = o->no_env,
		.show_thread_name = o->show_thread_name,
		.kinds = kinds_of(o),
		.t0_ns = (uint64_t)t0 * NS,
		.t1_ns = (uint64_t)(t0 + n) * NS,
	};
	enum export_format fmt = EXPORT_FOLDED;
	struct exporter *e = NULL;
	struct export_stats st;
	char outp[PATH_MAX], a[32], b[32], title[PATH_MAX + 64];
	int ret;

	if (o->split_path)
		return split(o, r, dir, filt, t0, n);
	if (o->format) {
		if (export__parse_format(o->format, &fmt) < 0) {
			log_error("bad --format '%s': want folded, pprof, svg or speedscope",
				  o->format);
			return -EINVAL;
		}
	} else if (o->output_prof) {
		(void)export__format_of_path(o->output_prof, &fmt); /* else folded */
	}
	if (fmt == EXPORT_SPEEDSCOPE &&
	    (o->diff_base_read || o->diff_base_start || o->diff_base_end)) {
		log_error("speedscope has no diff view: --diff_base_* takes --format folded, pprof "
			  "or svg; export the two ranges apart for speedscope");
		return -EINVAL;
	}
	if (export__store_freq(dir, &eo.freq) < 0)
		log_warn("no freq in '%s/conf': on-CPU time is counted in samples", dir);
	show_fmt_tod(eo.t0_ns, a, sizeof(a));
	show_fmt_tod(eo.t1_ns, b, sizeof(b));
	snprintf(title, sizeof(title), "cpa %s - %s", a, b);
	eo.title = title;
	ret = export__new(fmt, &eo, &e);
	if (ret < 0)
		return log_error_errno(ret, "exporter: %m");
	ret = add_triggers(e, r, &eo, filt);
	if (ret < 0)
		goto out;
	ret = feed(r, t0, t0 + n, filt, e, export__add_rows);
	if (ret < 0) {
		log_error("read '%s': %s", dir,
			  ret == -ENOMEM ? "out of memory" : export__error(e));
		goto out;
	}
	export__stats(e, &st);
	if (!st.rows[0]) {
		log_error("no records in [ %s - %s ] of '%s'", a, b, dir);
		ret = -ENODATA;
		goto out;
	}
	if (o->diff_base_read || o->diff_base_start || o->diff_base_end) {
		ret = add_base(o, e, r, dir, filt, n);
		if (ret < 0)
			goto out;
	}
	if (o->output_prof && *o->output_prof)
		snprintf(outp, sizeof(outp), "%s", o->output_prof);
	else
		snprintf(outp, sizeof(outp), "cpa_%s_%lld%s", a, (long long)n, export__suffix(fmt));
	ret = export__write(e, outp);
	if (ret < 0) {
		log_error("-o: %s", export__error(e));
		goto out;
	}
	export__stats(e, &st);
	show_fmt_tod((uint64_t)st.min_sec * NS, a, sizeof(a));
	show_fmt_tod((uint64_t)(st.max_sec + 1) * NS, b, sizeof(b));
	printf("Write  [ %s - %s ] Record to %s, Stack Type %llu\n", a, b, outp,
	       (unsigned long long)st.stacks);
	if (fmt == EXPORT_SVG && st.merged)
		printf("SVG: %llu frames narrower than a pixel merged\n",
		       (unsigned long long)st.merged);
	fflush(stdout);
	ret = 0;
out:
	export__free(e);
	return ret;
}
