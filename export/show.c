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
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cpulist.h"
#include "common/intern.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "export/export.h"
#include "export_int.h"
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
	struct rowmap keys; /* a row's key (row_key()) -> its line's id in its acc's fold */
	uint32_t src;	    /* the store dir being read (show_export_root() reads several) */
	struct show_progress *progress;
	/* [0]: what --kind selects; with the default (auto) [0] holds the
	 * on-CPU rows and [1] the off-CPU ones, and the export is [1] when the
	 * window has any (a --offcpu run shows off-CPU, as CPA did). */
	struct show_acc acc[2];
	char *buf; /* line being built */
	size_t len;
	bool oom;
	bool oneshot; /* show_export_root(): no --kind to point to */
};

static int fold_add(struct fold *f, const char *line, size_t len, uint64_t value, uint32_t *ret_id)
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
	*ret_id = id;
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
	memcpy(c->buf + c->len, s, n);
	/* names rarely hold them: find them at memchr speed */
	for (i = strcspn(s, ";\n\r"); i < n; i += 1 + strcspn(s + i + 1, ";\n\r"))
		c->buf[c->len + i] = s[i] == ';' ? ':' : ' ';
	c->len += n;
	if (k)
		memcpy(c->buf + c->len, suffix, k);
	c->len += k;
	c->buf[c->len++] = ';';
}

/*
 * A marker frame as CPA prints it: "<# REASON #>". The store keeps our
 * spelling ("[unwind stopped: no cfi]", "[lost: capture drop_ring_full]"):
 * the brackets go, an unwind stop keeps only its reason, the rest is upper
 * case with '_' as ' ' ("<# NO CFI #>", "<# LOST: CAPTURE DROP RING FULL #>").
 * A name already in CPA's form is kept. docs/cli.md lists them all.
 */
static void marker_name(const char *name, char *buf, size_t len)
{
	static const char STOP[] = "unwind stopped: ";
	size_t n = strlen(name), o = 0;

	if (!strncmp(name, "<#", 2) || len < 8) {
		snprintf(buf, len, "%s", name);
		return;
	}
	if (n >= 2 && name[0] == '[' && name[n - 1] == ']') {
		name++;
		n -= 2;
	}
	if (n > sizeof(STOP) - 1 && !strncmp(name, STOP, sizeof(STOP) - 1)) {
		name += sizeof(STOP) - 1;
		n -= sizeof(STOP) - 1;
	}
	memcpy(buf, "<# ", 3);
	o = 3;
	for (size_t i = 0; i < n && o + 4 < len; i++) {
		char ch = name[i];

		buf[o++] = ch == '_' ? ' ' : (ch >= 'a' && ch <= 'z') ? (char)(ch - 'a' + 'A') : ch;
	}
	memcpy(buf + o, " #>", 4);
}

/* A marker of the stack (printed first, CPA's way), not a frame's stand-in. */
static bool is_marker(const struct store_frame *f)
{
	return (f->flags & CPA_FF_MARKER) && !store_frame__placeholder(f);
}

/*
 * CPA's raw label: thread and process name in 15 columns each, then
 * -<cgroup_id>-<cpu>-<pid>|<env>. An off-CPU sample is labelled as CPA's
 * off-CPU capture labels it: the thread id in the pid slot, the process id
 * (tgid) in the cgroup slot (docs/cli.md).
 */
static void raw_label(const struct store_sample *s, const char *pc, char *buf, size_t len)
{
	bool off = s->kind == CPA_KIND_OFFCPU && !s->lost;

	snprintf(buf, len, "%-15.15s%-15.15s-%llu-%u-%u|%s", s->comm[0] ? s->comm : pc, pc,
		 off ? (unsigned long long)s->pid : (unsigned long long)s->cgroup_id, s->cpu,
		 off && s->tid ? s->tid : s->pid, s->env[0] ? s->env : "SYSTEM");
}

/* The folded line of s into c->buf (c->len bytes). */
static void build_line(struct show_ctx *c, const struct store_sample *s)
{
	const struct show_opts *o = c->o;
	const char *pc = s->lost ? "[lost]" : store_sample__proc_name(s);
	char tmp[256];
	uint32_t i;

	c->len = 0;
	if (o->show_raw) {
		/* The raw label stands alone: it holds the env and names already. */
		raw_label(s, pc, tmp, sizeof(tmp));
		put(c, tmp, NULL);
	} else {
		if (!o->no_env)
			put(c, s->env[0] ? s->env : "SYSTEM", NULL);
		if (o->no_pid || s->lost) {
			put(c, pc, NULL);
		} else {
			snprintf(tmp, sizeof(tmp), "%s:%u", pc, s->pid);
			put(c, tmp, NULL);
		}
		if (o->show_thread_name && !s->lost)
			put(c, s->comm[0] ? s->comm : pc, NULL);
	}
	/* Markers first, in the root layer, wherever the stack keeps them. */
	for (i = s->n_frames; i-- > 0;) {
		if (!is_marker(s->frames[i]))
			continue;
		marker_name(s->frames[i]->name, tmp, sizeof(tmp));
		put(c, tmp, NULL);
	}
	/* Stored leaf first, kernel frames first: print user root..leaf, then kernel root..leaf. */
	for (i = s->n_frames; i-- > s->n_kframes;)
		if (!is_marker(s->frames[i]))
			put(c, s->frames[i]->name, NULL);
	for (i = s->n_kframes; i-- > 0;) {
		const struct store_frame *f = s->frames[i];

		if (!is_marker(f))
			put(c, f->name, (f->flags & CPA_FF_MARKER) ? NULL : "_[k]");
	}
}

/* What of row d, besides its stack, its folded line is made of (build_line()
 * reads no more); the fields the options leave out of the line stay 0. */
static void row_key(const struct show_opts *o, const struct store_row *d, bool off,
		    struct rowmap_key *k)
{
	memset(k, 0, sizeof(*k));
	k->w[0] = d->comm;
	k->w[1] = d->pcomm;
	k->w[2] = d->env;
	k->w[3] = off;
	if (o->show_raw) {
		k->w[4] = d->pid;
		k->w[5] = d->tid;
		k->w[6] = d->cpu;
		k->w[7] = (uint32_t)d->cgroup_id;
		k->w[8] = (uint32_t)(d->cgroup_id >> 32);
	} else if (!o->no_pid) {
		k->w[4] = d->pid;
	}
}

/*
 * One block's rows folded: a row whose key (row_key()) was seen before adds
 * to that key's line; a new key is resolved and its line built once. The
 * same lines and sums as building every row's line.
 */
static int fold_rows(void *ctx, const struct store_rows *b)
{
	struct show_ctx *c = ctx;
	const struct show_opts *o = c->o;
	struct rowmap_key k;
	int r;

	for (size_t i = 0; i < b->n; i++) {
		const struct store_row *d = &b->rows[i];
		bool off = d->kind == CPA_KIND_OFFCPU;
		struct show_acc *acc = &c->acc[o->kind == SHOW_KIND_AUTO && off ? 1 : 0];
		uint64_t v = off ? d->weight : d->count;
		uint32_t line;

		if (i + ROWMAP_AHEAD < b->n)
			rowmap__prefetch(&c->keys, b->rows[i + ROWMAP_AHEAD].stack_id);
		if ((o->kind == SHOW_KIND_ON && off) || (o->kind == SHOW_KIND_OFF && !off))
			continue;
		row_key(o, d, off, &k);
		if (rowmap__find(&c->keys, c->src, b->seg, d->stack_id, &k, &line)) {
			acc->f.values[line - 1] += v;
		} else {
			struct store_sample s;

			store_rows__sample(b, i, &s);
			build_line(c, &s);
			r = fold_add(&acc->f, c->buf, c->len, v, &line);
			if (r < 0)
				return r;
			r = rowmap__put(&c->keys, c->src, b->seg, d->stack_id, &k, line);
			if (r < 0)
				return r;
		}
		if (!acc->rows || d->sec < acc->min_sec)
			acc->min_sec = d->sec;
		if (!acc->rows || d->sec > acc->max_sec)
			acc->max_sec = d->sec;
		acc->rows++;
	}
	if (c->progress)
		show_progress__at(c->progress, b->rows[b->n - 1].sec);
	return 0;
}

static void show_ctx_free(struct show_ctx *c)
{
	fold_free(&c->acc[0].f);
	fold_free(&c->acc[1].f);
	rowmap__free(&c->keys);
	free(c->buf);
}

static void fmt_tod(uint64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / NS);
	struct tm tm;

	localtime_r(&t, &tm);
	snprintf(buf, len, "%02d:%02d:%02d.%03u", tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (unsigned int)(ns % NS / 1000000));
}

/*
 * "HH:MM:SS" or "HH:MM:SS.mmm" (1 to 3 digits of fraction) -> seconds of the
 * day, or -EINVAL. Rows are kept per second (docs/store-format.md), so a time
 * with milliseconds selects the whole second it falls into: an end time
 * (round_up) past the start of its second takes that second in too.
 */
static long parse_tod_r(const char *s, bool round_up)
{
	unsigned int h, m, sec;
	size_t frac = 0;
	int n = 0;

	if (sscanf(s, "%2u:%2u:%2u%n", &h, &m, &sec, &n) != 3 || n != 8 || h > 23 || m > 59 ||
	    sec > 59)
		return -EINVAL;
	if (s[8]) {
		frac = strspn(s + 9, "0123456789");
		if (s[8] != '.' || frac < 1 || frac > 3 || s[9 + frac])
			return -EINVAL;
	}
	return (long)h * 3600 + m * 60 + sec +
	       (round_up && frac && strspn(s + 9, "0") < frac ? 1 : 0);
}

static long parse_tod(const char *s)
{
	return parse_tod_r(s, false);
}

/*
 * The warnings of one show_run() said once each: a day's runs are read again
 * when a window reaches into later days, a diff base may read the range's own
 * runs again (--diff_base_read of the same root), or another day of --read's
 * root; what they say again goes to the debug level. Up to SAID_MAX_BYTES of
 * lines remembered (a store damaged all over says each block once anyway).
 */
#define SAID_MAX_BYTES (4u << 20)
static struct intern said_lines;

static void warn_once(const char *msg)
{
	uint32_t id;

	if (intern__bytes(&said_lines) < SAID_MAX_BYTES &&
	    intern__get(&said_lines, msg, (uint32_t)strlen(msg), &id) == 0)
		log_debug("%s", msg);
	else
		log_warn("%s", msg);
}

static void on_notice(void *ctx, const char *msg)
{
	(void)ctx;
	/* The block being written right now looks torn to a reader: not news. */
	if (strstr(msg, "torn"))
		log_debug("%s", msg);
	else
		warn_once(msg);
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
	struct export_file x;
	int r;

	if (!ids)
		return log_error_errno(-ENOMEM, "sort folded lines: %m");
	for (i = 0; i < n; i++)
		ids[i] = i + 1;
	qsort_r(ids, n, sizeof(*ids), id_cmp, (void *)&fd->lines);
	/* -o names the file (its default one too): messages name the option */
	r = export_file__open(&x, path);
	if (r < 0 && x.err[0])
		return log_error_errno(r, "-o: %s", x.err);
	if (r < 0)
		return log_error_errno(r, "-o: open '%s': %m", path);
	for (i = 0; i < n; i++) {
		uint32_t len;
		const char *line = intern__key(&fd->lines, ids[i], &len);

		fprintf(x.f, "%.*s %llu\n", (int)len, line,
			(unsigned long long)fd->values[ids[i] - 1]);
	}
	r = export_file__close(&x, true);
	if (r < 0)
		return log_error_errno(r, "-o: write '%s': %m", path);
	return 0;
}

/* What the options ask for, checked: the filter, and the times of day (-1 = none). */
static int parse_request(const struct show_opts *o, struct store_filter *filt, uint64_t **ret_cpus,
			 long *ret_stod, long *ret_etod)
{
	if (!o->read || !*o->read) {
		log_error("arg \"read\" required but not present: --read DIR, a store dir "
			  "(cpa_YYMMDD...) or the store root");
		return -EINVAL;
	}
	if (o->output_num <= 0) {
		log_error("--output_num must be a positive integer (> 0), got %ld", o->output_num);
		return -EINVAL;
	}
	if (o->starttime && (*ret_stod = parse_tod(o->starttime)) < 0) {
		log_error("--starttime: invalid time format '%s' (expected HH:MM:SS[.mmm])",
			  o->starttime);
		return -EINVAL;
	}
	if (o->endtime && (*ret_etod = parse_tod_r(o->endtime, true)) < 0) {
		log_error("--endtime: invalid time format '%s' (expected HH:MM:SS[.mmm])",
			  o->endtime);
		return -EINVAL;
	}
	store_filter__init(filt);
	filt->pid = o->target_pid;
	filt->comm = o->target_comm;
	filt->env = o->target_env;
	filt->cgroup_id = o->target_cgroup_id;
	filt->probe_id = o->probe_id;
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

struct shut_pick {
	const char *day; /* the picked dir's name */
	char *shut;	 /* the one a refused range may lie in, into shut (len > 0) */
	size_t len;
	int best_same;
};

/*
 * A run dir of root this user cannot open, of the picked dir's day or later
 * (store_root__for_each_shut()): its samples are missing from the output, said
 * in one line naming it and why. The one a refused range may lie in, "'path',
 * which ...", into shut: the newest of the picked day's, else the newest.
 */
static void warn_shut(void *ctx, const char *p, int e)
{
	struct shut_pick *c = ctx;
	const char *name = strrchr(p, '/') ? strrchr(p, '/') + 1 : p;
	int same = !strncmp(name, c->day, 10); /* "cpa_YYMMDD" */

	char line[PATH_MAX + 128];

	snprintf(line, sizeof(line),
		 "'%s': %s: its samples are not in this output (this user cannot read that run)", p,
		 strerror(e));
	warn_once(line);
	/* name order: a later one of the same kind is newer */
	if (c->len && same >= c->best_same) {
		c->best_same = same;
		snprintf(c->shut, c->len, "'%s', which this user cannot read (%s)", p, strerror(e));
	}
}

/* --read names a store dir, or a root to pick one from by --starttime (tod, -1 =
 * the newest): the dir into buf, or -errno (logged). Under a root, the run dirs
 * it cannot read from the picked one's day on are said (warnings), warn_shut()'s
 * pick of them into shut ("" if none; shut may be NULL). */
int show_pick_dir(const char *read, long tod, char *buf, size_t len, char *shut, size_t shutlen)
{
	int r;

	if (shut && shutlen)
		shut[0] = 0;
	if (store_dir__is_store(read)) {
		snprintf(buf, len, "%s", read);
		return 0;
	}
	/* CPA's words first ("failed to open input file"), scripts grep them; as cpa-view. */
	if (access(read, F_OK) < 0) {
		r = -errno;
		log_error_errno(r,
				"failed to open input file: '%s': %m (--read: a cpa_YYMMDD... dir "
				"or the root holding them)",
				read);
		return r;
	}
	if (len)
		buf[0] = 0;
	r = store_root__pick(read, tod, buf, len);
	if (r == -ENOENT)
		log_error("failed to open input file: no cpa store in '%s' (want a cpa_YYMMDD... "
			  "dir or the root holding them)",
			  read);
	else if (r < 0) /* the dir that cannot be read: --read, or a store dir in it */
		log_error_errno(r, "failed to open input file: '%s': %m", buf[0] ? buf : read);
	if (r < 0)
		return r;
	{
		struct shut_pick c = {strrchr(buf, '/') ? strrchr(buf, '/') + 1 : buf, shut,
				      shut ? shutlen : 0, -1};

		store_root__for_each_shut(read, buf, warn_shut, &c);
	}
	return 0;
}

/* The runs of the local day holding unix second day (cpa_YYMMDD...) under root, appended. */
static int add_day_dirs(const char *root, int64_t day, char ***dirs, uint32_t *n)
{
	char name[32], **d = NULL, **all;
	uint32_t k = 0;
	time_t t = (time_t)day;
	struct tm tm;
	int r;

	localtime_r(&t, &tm);
	snprintf(name, sizeof(name), "cpa_%02d%02d%02d", tm.tm_year % 100, tm.tm_mon + 1,
		 tm.tm_mday);
	r = store_root__day_dirs(root, name, &d, &k);
	if (r < 0)
		return r;
	all = realloc(*dirs, (*n + k + 1) * sizeof(*all));
	if (!all) {
		for (uint32_t i = 0; i < k; i++)
			free(d[i]);
		free(d);
		return -ENOMEM;
	}
	memcpy(all + *n, d, k * sizeof(*d));
	free(d);
	*dirs = all;
	*n += k;
	return 0;
}

/* Local midnight of the day after the one starting at local midnight day0 (DST: not + 86400). */
static int64_t next_midnight(int64_t day0)
{
	return local_midnight(day0 + 36 * 3600);
}

/*
 * The store of --read: a store dir, or from a root the picked dir's day with all
 * its runs; more (NULL: none): the runs of the days it names too, read as one
 * after them (a window across midnights; dir is the picked one then, and its
 * unreadable runs were named); none on the days not open yet: *ret NULL.
 */
int show_open_store(const char *read, long stod, const struct show_days *more, char *dir,
		    size_t len, char *shut, size_t shutlen, struct store_reader **ret)
{
	if (!more) {
		int r = show_pick_dir(read, stod, dir, len, shut, shutlen);

		if (r < 0)
			return r;
	}
	return show_open_day(read, more, dir, ret);
}

/* show_open_store() of a dir picked already: nothing about the root said again. */
int show_open_day(const char *read, const struct show_days *more, const char *dir,
		  struct store_reader **ret)
{
	char err[512], **dirs = NULL;
	uint32_t n = 0, n_open = 0;
	int r;

	/* A root: every run of the picked dir's day, read as one; then the later days'. */
	if (!store_dir__is_store(read) && store_root__day_dirs(read, dir, &dirs, &n) == 0) {
		n_open = n;
		for (int64_t d = more ? more->from : 0; more && d <= more->to;
		     d = next_midnight(d)) {
			if (add_day_dirs(read, d, &dirs, &n) < 0)
				break;
			if (d <= more->open)
				n_open = n;
		}
	}
	if (more && n == n_open) { /* no runs on the days not open yet: what is open stays */
		*ret = NULL;
		r = 0;
		goto out;
	}
	if (n > 1 || more) {
		for (uint32_t i = 0; i < n; i++)
			log_debug("reading '%s'", dirs[i]);
		/* what the dirs open before said is not said again (warn_once()) */
		r = store_reader__open_set((const char *const *)dirs, n, on_notice, NULL, ret, err,
					   sizeof(err));
	} else {
		r = store_reader__open_err(dir, on_notice, NULL, ret, err, sizeof(err));
	}
	if (r < 0)
		log_error("%s", err);
out:
	for (uint32_t i = 0; i < n; i++)
		free(dirs[i]);
	free(dirs);
	return r;
}

/* What the reader passed over, at default verbosity: the output lacks it. */
void show_warn_skipped(const struct store_reader *r, const char *dir)
{
	struct store_read_stats st;
	char line[PATH_MAX + 512];

	store_reader__stats(r, &st);
	if (!st.blocks_torn && !st.blocks_corrupt && !st.bytes_skipped && !st.segs_skipped)
		return;
	snprintf(line, sizeof(line),
		 "'%s': skipped %llu torn and %llu corrupt block(s), %llu unreadable byte(s) and "
		 "%u segment file(s): their samples are not in this output (a crash mid-write, a "
		 "block being written right now, or damage; -v says where)",
		 dir, (unsigned long long)st.blocks_torn, (unsigned long long)st.blocks_corrupt,
		 (unsigned long long)st.bytes_skipped, st.segs_skipped);
	warn_once(line);
}

/*
 * Times of day are within the store's own day, that of its first record; from
 * a root (days of runs), an --endtime earlier than --starttime is on the next
 * day; a store dir is one day. The end asked, in unix seconds (0 = -n's).
 */
int64_t show_etod_end(const char *read, int64_t day0, long stod, long etod)
{
	if (etod < 0)
		return 0;
	if (stod >= 0 && etod < stod && !store_dir__is_store(read))
		return next_midnight(day0) + etod;
	return day0 + etod;
}

/* The end of the window (unix seconds) select_window() would take. */
static int64_t window_end(const struct show_opts *o, uint64_t first, long stod, long etod)
{
	int64_t first_s = (int64_t)(first / NS), day0 = local_midnight(first_s);
	int64_t t0 = stod >= 0 ? day0 + stod : first_s;

	if (etod >= 0)
		return show_etod_end(o->read, day0, stod, etod);
	return MAX(t0, first_s) + MIN(o->output_num, 366L * 86400);
}

/* "Not Found Enough Records" for the window [t0, end) of a store holding
 * [first_s, end_s) (unix seconds); why: more words after the ranges. */
static void not_enough(int64_t t0, int64_t end, int64_t first_s, int64_t end_s, const char *shut,
		       const char *why)
{
	char a[32], b[32], ha[32], hb[32];

	fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
	fmt_tod((uint64_t)end * NS, b, sizeof(b));
	fmt_tod((uint64_t)first_s * NS, ha, sizeof(ha));
	fmt_tod((uint64_t)end_s * NS, hb, sizeof(hb));
	/* a run dir this user cannot read may hold them: named */
	log_error(
		"Not Found Enough Records: asked for [ %s - %s ], the store holds [ %s - %s ]%s%s%s",
		a, b, ha, hb, why, *shut ? "; they may be in " : "", shut);
}

/*
 * The export window [*ret_t0, *ret_t0 + *ret_n) in unix seconds, within the
 * time the records cover, [first, end) (end: store_reader__range_end(), past
 * the last record's interval). A start before the first record starts at it
 * (CPA reads the records from there); a window reaching past end, or
 * starting after it, is "Not Found Enough Records" (-ENODATA).
 */
static int select_window(const struct show_opts *o, uint64_t first, uint64_t end_ns, long stod,
			 long etod, const char *shut, int64_t *ret_t0, int64_t *ret_n)
{
	/* Times of day are within the store's own day: that of its first record. */
	int64_t first_s = (int64_t)(first / NS), end_s = (int64_t)(end_ns / NS);
	int64_t day0 = local_midnight(first_s);
	int64_t t0 = stod >= 0 ? day0 + stod : first_s, end = 0;
	char a[32], b[32];

	if (etod >= 0) {
		end = show_etod_end(o->read, day0, stod, etod);
		if (end <= t0) {
			log_error("--endtime %s is not after the start%s", o->endtime,
				  etod < stod
					  ? " (a store dir holds one day: --read its root for a "
					    "window across midnight)"
					  : "");
			return -EINVAL;
		}
	} else if (o->output_num > 366L * 86400) {
		log_error("--output_num %ld is more than a year of records", o->output_num);
		return -EINVAL;
	}
	if (etod >= 0 && end <= first_s) {
		/* Nothing of it is in the store: moving the start to the first
		 * record would make a window that ends before it starts. */
		not_enough(t0, end, first_s, end_s, shut,
			   ": the window ends before the first record");
		return -ENODATA;
	}
	if (t0 < first_s) {
		/* CPA moved it too ("Export First Record"); say so: the range is not the one asked.
		 */
		fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
		fmt_tod((uint64_t)first_s * NS, b, sizeof(b));
		log_warn("Not Found Record in Start in %s, Export First Record: --starttime %s is "
			 "before the store's first record, the export starts at %s",
			 a, o->starttime ? o->starttime : a, b);
		t0 = first_s;
	}
	if (etod < 0)
		end = t0 + o->output_num;
	if (end > end_s || end <= t0) {
		char why[128] = "";

		/* -E before -B from a root: a window of a day, maybe not the one meant */
		if (etod >= 0 && etod < stod)
			snprintf(why, sizeof(why),
				 ": the --endtime %s before the --starttime is the next day's, a "
				 "window of %lld s",
				 o->endtime, (long long)(end - t0));
		not_enough(t0, end, first_s, end_s, shut, why);
		return -ENODATA;
	}
	*ret_t0 = t0;
	*ret_n = end - t0;
	return 0;
}

/* Every row of the window through the filter, folded into c. */
static int read_window(struct store_reader *r, const char *dir, int64_t t0, int64_t n,
		       const struct store_filter *filt, struct show_ctx *c)
{
	struct store_filter f = *filt;
	struct show_progress pg;
	int ret;

	/* Only the raw label reads a row's thread, CPU and cgroup (row_key(), build_line()). */
	if (!c->o->show_raw)
		f.skip |= STORE_COL_TID | STORE_COL_CPU | STORE_COL_CGROUP;
	c->buf = malloc(LINE_MAX_BYTES);
	if (!c->buf)
		return log_error_errno(-ENOMEM, "line buffer: %m");
	show_progress__init(&pg, t0, n);
	c->progress = &pg;
	ret = store_reader__query_rows(r, (uint64_t)t0 * NS, (uint64_t)(t0 + n) * NS, &f, fold_rows,
				       c);
	show_progress__done(&pg);
	c->progress = NULL;
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

/*
 * What --kind exports: with the default, off-CPU when the window has any.
 * When it has both kinds, one is left out of the file: say which was
 * written and how to get the other.
 */
static const struct show_acc *export_acc(const struct show_ctx *c)
{
	bool both = c->o->kind == SHOW_KIND_AUTO && c->acc[0].rows && c->acc[1].rows;

	if (both && c->oneshot)
		log_warn(
			"the run holds on- and off-CPU samples: wrote the off-CPU ones only "
			"(counts in ns), as CPA's --offcpu one-shot; a run without --offcpu writes "
			"the on-CPU ones");
	else if (both)
		log_warn("the range holds on- and off-CPU samples: wrote the off-CPU ones only "
			 "(counts in ns); --kind on writes the on-CPU ones (counts in samples), "
			 "--kind all both in one file");
	return &c->acc[c->o->kind == SHOW_KIND_AUTO && c->acc[1].rows ? 1 : 0];
}

/* CPA's last line: the seconds actually written and the distinct stacks. */

static void print_write_line(const struct show_acc *acc, const char *path)
{
	char a[32], b[32];

	fmt_tod((uint64_t)acc->min_sec * NS, a, sizeof(a));
	fmt_tod((uint64_t)(acc->max_sec + 1) * NS, b, sizeof(b));
	printf("Write  [ %s - %s ] Record to %s, Stack Type %u\n", a, b, path,
	       intern__count(&acc->f.lines));
	fflush(stdout);
}

/*
 * A window from a root reaching past the last record (*last) of the days open:
 * the runs of the later days through the one holding its end read too, as one
 * with the picked day's (*rp reopened, *last theirs), so the window spans
 * midnights. Without records on a day not open yet nothing changes.
 */
int show_reach_next_day(const char *read, struct store_reader **rp, char *dir, size_t dirlen,
			uint64_t first, uint64_t *last, int64_t end)
{
	struct store_reader *r = NULL;
	uint64_t a, b, recs;
	int64_t last_s = (int64_t)(*last / NS);
	/* the days after the picked one through end's; those through last's are open */
	struct show_days more = {next_midnight(local_midnight((int64_t)(first / NS))), end - 1,
				 last_s};
	int ret;

	if (store_dir__is_store(read) || end <= last_s + 1 ||
	    local_midnight(end - 1) <= local_midnight(last_s))
		return 0;
	ret = show_open_store(read, -1, &more, dir, dirlen, NULL, 0, &r);
	if (ret < 0 || !r)
		return ret;
	if (store_reader__range(r, &a, &b, &recs) < 0) {
		log_error("%s", store_reader__error(r));
		store_reader__free(r);
		return -EIO;
	}
	store_reader__free(*rp);
	*rp = r;
	*last = MAX(*last, b);
	return 0;
}

/* The export: window, read and fold, write the .prof, and CPA's lines around it. */
static int run_export(const struct show_opts *o, struct store_reader **rp, char *dir, size_t dirlen,
		      uint64_t first, uint64_t last, long stod, long etod, const char *shut,
		      const struct store_filter *filt)
{
	struct show_ctx c = {.o = o};
	struct store_reader *r;
	const struct show_acc *acc;
	char a[32], b[32], ha[32], hb[32], outp[PATH_MAX];
	int64_t t0, n;
	int ret;

	ret = show_reach_next_day(o->read, rp, dir, dirlen, first, &last,
				  window_end(o, first, stod, etod));
	if (ret < 0)
		return ret;
	r = *rp;
	ret = select_window(o, first, store_reader__range_end(r, last), stod, etod, shut, &t0, &n);
	if (ret < 0)
		return ret;
	fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
	fmt_tod((uint64_t)(t0 + n) * NS, b, sizeof(b));
	printf("Export Record Time From [ %s - %s ]\n", a, b);
	fflush(stdout);
	if (show_sched_wanted(o)) { /* scheduler metrics: show_sched.c */
		ret = show_sched(o, r, t0, n);
		goto out;
	}
	if (show_export_wanted(o)) { /* pprof, svg, speedscope, diffs, split: show_export.c */
		ret = show_export(o, r, dir, filt, t0, n);
		goto out;
	}

	ret = read_window(r, dir, t0, n, filt, &c);
	if (ret < 0)
		goto out;
	acc = export_acc(&c);
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
	print_write_line(acc, outp);
	if (o->verbose)
		log_read_stats(r);
out:
	show_ctx_free(&c);
	return ret;
}

/* --probe_id N: the spec it was, from the store's conf ("Probe N: SPEC"). */
static int show_probe(const char *dir, long id)
{
	char key[32], spec[512];
	int r;

	snprintf(key, sizeof(key), "probe_%ld", id);
	r = store_dir__conf_get(dir, key, spec, sizeof(spec));
	if (r < 0)
		return log_error_errno(r == -ENAMETOOLONG ? r : -ENOENT,
				       "--probe_id %ld: the store '%s' has no probe %ld (its conf "
				       "lists the --probe specs of the run as probe_N lines)",
				       id, dir, id);
	printf("Probe %ld: %s\n", id, spec);
	fflush(stdout);
	return 0;
}

int show_run(const struct show_opts *o)
{
	_cleanup_free_ uint64_t *cpus = NULL;
	struct store_reader *r = NULL;
	struct store_filter filt;
	char dir[PATH_MAX + 256], shut[PATH_MAX + 512], a[32], b[32];
	uint64_t first, last, recs;
	int64_t rfirst, rlast;
	long stod = -1, etod = -1;
	int ret;

	log_set_subsystem("show");
	if (o->verbose)
		log_set_level(LOG_LVL_DEBUG);
	intern__free(&said_lines); /* a run that failed early left its lines */
	ret = parse_request(o, &filt, &cpus, &stod, &etod);
	if (ret < 0)
		return ret;
	ret = show_open_store(o->read, stod, NULL, dir, sizeof(dir), shut, sizeof(shut), &r);
	if (ret < 0)
		return ret;
	ret = store_reader__range(r, &first, &last, &recs);
	if (ret < 0) {
		log_error("%s", store_reader__error(r));
	} else if ((ret = store_reader__records(r, &rfirst, &rlast, &recs)) < 0) {
		log_error_errno(ret, "read '%s': %m", dir);
	} else {
		/*
		 * Records Num is exactly the seconds holding samples, and the range
		 * runs from the first of them to the last (seconds of scheduler
		 * metrics alone are no records): -n <Records Num> exports them all.
		 * The window may still reach the metrics seconds after them.
		 */
		uint64_t pfirst = first, plast = last;

		if (recs && (uint64_t)rfirst != first / NS)
			pfirst = (uint64_t)rfirst * NS;
		if (recs && (uint64_t)rlast != last / NS)
			plast = (uint64_t)rlast * NS;
		/* On every run, as CPA: scripts read the range from an export too. */
		fmt_tod(pfirst, a, sizeof(a));
		fmt_tod(plast, b, sizeof(b));
		printf("Record Time From [ %s ] to [ %s ] Records Num: %llu\n", a, b,
		       (unsigned long long)recs);
		fflush(stdout);
		show_warn_unused(o);
		/* after the range, as every run prints it first (scripts read it) */
		if (!o->show_range && o->probe_id >= 0)
			ret = show_probe(dir, o->probe_id); /* logged */
		/* --sched reads the metrics: its window may start before the first record. */
		if (!o->show_range && ret >= 0)
			ret = run_export(o, &r, dir, sizeof(dir),
					 show_sched_wanted(o) ? first : pfirst, last, stod, etod,
					 shut, &filt);
	}
	show_warn_skipped(r, dir);
	store_reader__free(r);
	intern__free(&said_lines); /* the next run says everything again */
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

void show_on_notice(void *ctx, const char *msg)
{
	on_notice(ctx, msg);
}

/* Fold every record of the store dir at dir into c; an empty one adds nothing. */
static int fold_store(const char *dir, const struct store_filter *filt, struct show_ctx *c)
{
	struct store_reader *r;
	uint64_t first, last, recs;
	char err[512];
	int ret = store_reader__open_err(dir, on_notice, NULL, &r, err, sizeof(err));

	if (ret == -ENOENT)
		return 0; /* made at start, nothing written to it */
	if (ret < 0) {
		log_error("%s", err);
		return ret;
	}
	if (store_reader__range(r, &first, &last, &recs) == 0 && recs) {
		ret = store_reader__query_rows(r, first / NS * NS, (last / NS + 1) * NS, filt,
					       fold_rows, c);
		if (ret < 0)
			log_error_errno(ret, "read '%s': %m", dir);
	}
	store_reader__free(r);
	c->src++;
	return ret;
}

int show_export_root(const char *root, const char *output_prof)
{
	/* CPA's one-shot file: the raw label first (cpa_stackmap_oneshot.c). */
	const struct show_opts o = {.read = root,
				    .output_prof = output_prof,
				    .output_num = 1,
				    .show_raw = true,
				    .target_pid = -1,
				    .target_cgroup_id = -1};
	struct show_ctx c = {.o = &o, .oneshot = true};
	const struct show_acc *acc;
	struct store_filter filt;
	char **names = NULL;
	uint32_t n = 0, i;
	int ret;

	store_filter__init(&filt);
	intern__free(&said_lines); /* as show_run() */
	ret = store_root__list(root, &names, &n);
	if (ret < 0)
		return log_error_errno(ret, "read store root '%s': %m", root);
	c.buf = malloc(LINE_MAX_BYTES);
	if (!c.buf)
		ret = log_error_errno(-ENOMEM, "line buffer: %m");
	for (i = 0; i < n && ret >= 0; i++) {
		char dir[PATH_MAX + 256];

		snprintf(dir, sizeof(dir), "%s/%s", root, names[i]);
		ret = fold_store(dir, &filt, &c);
	}
	store_root__list_free(names, n);
	acc = export_acc(&c);
	if (ret >= 0)
		ret = write_prof(acc, output_prof);
	if (ret >= 0 && !acc->rows) {
		log_warn("no samples recorded: '%s' is empty", output_prof);
	} else if (ret >= 0) {
		print_write_line(acc, output_prof);
	}
	show_ctx_free(&c);
	intern__free(&said_lines);
	return ret;
}
