/* SPDX-License-Identifier: MIT */
/*
 * `cpa show`: export a time range of a store as a folded .prof (CPA's
 * layout), or print the store's range. The front command fills show_opts
 * from its command line and calls show_run().
 */
#ifndef CPA_SHOW_H
#define CPA_SHOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --kind: which samples an export folds. */
enum show_kind {
	SHOW_KIND_AUTO, /* default: off-CPU if the window has any, else the rest */
	SHOW_KIND_ON,	/* on-CPU (and probe) samples */
	SHOW_KIND_OFF,	/* off-CPU samples, counts in ns */
	SHOW_KIND_ALL,	/* both in one file (counts of two units: mind the labels) */
};

struct show_opts {
	const char *read;      /* --read,-r DIR: a store dir (cpa_YYMMDD...) or the store root */
	const char *starttime; /* --starttime,-B HH:MM:SS or NULL (first record) */
	const char *endtime;   /* --endtime,-E HH:MM:SS or NULL */
	long output_num;       /* --output_num,-n, default 1, > 0 */
	const char
		*output_prof; /* --output_prof,-o or NULL (default cpa_<HH:MM:SS.mmm>_<n>.prof) */
	bool show_range, show_thread_name, no_pid, no_env, show_raw, use_cache;
	const char *split_path; /* a new store of the range (show_export.c) */
	long target_pid;	/* -1 = all */
	const char *target_comm, *target_env, *target_cpu; /* NULL = all; cpu as list "1-3,5" */
	long long target_cgroup_id;			   /* -1 = all */
	enum show_kind kind;				   /* --kind */
	long probe_id; /* -1 = all; else only that --probe's samples (and losses) */
	bool verbose;
	bool use_cui; /* --use_cui: cpa-view runs instead (for show_warn_unused() alone) */
	/* Exports (show_export.c, docs/export.md). */
	const char *format; /* --format folded|pprof|svg|speedscope; NULL: from -o's suffix */
	const char *diff_base_read;  /* --diff_base_read DIR: the base's store (default --read) */
	const char *diff_base_start; /* --diff_base_start HH:MM:SS: the base range of a diff */
	const char *diff_base_end;   /* --diff_base_end HH:MM:SS */
	/* Scheduler metrics instead of a profile (show_sched.c, docs/metrics.md). */
	bool sched;			    /* --sched: the summary on stdout */
	const char *sched_csv, *sched_json; /* --sched_csv/--sched_json FILE: the series */
	bool triggers;			    /* --triggers: the policy triggers of the range */
	/* Whether the option of long name name was given, a default value included
	 * (cpa's parser: cpa_opts__given()); NULL: a value other than the default
	 * counts as given. For show_warn_unused(). */
	bool (*given)(const void *ctx, const char *name);
	const void *given_ctx;
};

/* 0 ok, or negative errno (already logged). */
int show_run(const struct show_opts *o);

/* show.c's helpers that show_export.c shares. Their warnings are said once a
 * show_run(). */
struct store_reader;
struct store_filter;
void show_fmt_tod(uint64_t ns, char *buf, size_t len);
long show_parse_tod(const char *s);
void show_on_notice(void *ctx, const char *msg);
/* One warning when r passed over parts of the store dir dir (counts; -v says where). */
void show_warn_skipped(const struct store_reader *r, const char *dir);
/* The store dir --read names, or the one picked under a root for time of day tod
 * (-1: the newest); -errno (logged) when there is none. The root's run dirs this
 * user cannot read, from the picked one's day on, are warned of; the one a refused
 * range may lie in ("'path', which this user cannot read (reason)") into shut when
 * not NULL, else "". */
int show_pick_dir(const char *read, long tod, char *buf, size_t len, char *shut, size_t shutlen);
/* The days a window from a root reaches past the picked one's: the runs of the
 * local days from midnight from through the one holding to (unix s), read after
 * the picked day's; those of the days through open's are open already. */
struct show_days {
	int64_t from, to, open;
};
/* The store of read (a store dir, or under a root the picked dir's day with all
 * its runs); more (NULL: none): those days' runs added to the picked day's in
 * dir. 0, *ret NULL: no runs there that were not open. */
int show_open_store(const char *read, long stod, const struct show_days *more, char *dir,
		    size_t len, char *shut, size_t shutlen, struct store_reader **ret);
/* The same of dir, picked under the root read already (nothing about the root said again). */
int show_open_day(const char *read, const struct show_days *more, const char *dir,
		  struct store_reader **ret);
/* A window ending at end (unix s) past *last, from a root: *rp reopened with the
 * runs of the days after the picked one through end's (*last theirs); otherwise,
 * or when those days not open yet hold none, nothing changes. */
int show_reach_next_day(const char *read, struct store_reader **rp, char *dir, size_t dirlen,
			uint64_t first, uint64_t *last, int64_t end);
/* The end (unix s) of a window by time of day etod (-1: none, 0 returned) in the
 * day starting day0: from a root, an etod before stod is on the next day. */
int64_t show_etod_end(const char *read, int64_t day0, long stod, long etod);

/* The progress bar of a long read (show_progress.c): on stderr when it is a
 * terminal and the read runs longer than a second, nothing otherwise. */
struct show_progress {
	bool on, shown;
	int last; /* percent last drawn */
	int64_t t0, n;
	uint64_t start_ns, after_ns;
};
void show_progress__init(struct show_progress *p, int64_t t0, int64_t n);
/* The read has reached second sec of the window [t0, t0 + n). */
void show_progress__at(struct show_progress *p, int64_t sec);
/* Wipes the bar if one was drawn. */
void show_progress__done(struct show_progress *p);

/* --sched, --sched_csv, --sched_json (show_sched.c, docs/metrics.md). */
bool show_sched_wanted(const struct show_opts *o);
/* The metrics of [t0, t0 + n) seconds of r: summary and/or series; 0 or -errno (logged). */
int show_sched(const struct show_opts *o, struct store_reader *r, int64_t t0, int64_t n);

/* One warning line for the options given that what the others ask for does
 * not use (a label switch of a split, -o of --sched, ...): none is ignored
 * silently. */
void show_warn_unused(const struct show_opts *o);
/* true when the options ask for something other than the plain folded .prof. */
bool show_export_wanted(const struct show_opts *o);
/* Export [t0, t0 + n) seconds of r (store dir dir) as o asks; 0 or -errno (logged). */
int show_export(const struct show_opts *o, struct store_reader *r, const char *dir,
		const struct store_filter *filt, int64_t t0, int64_t n);
/*
 * `cpa monitor --oneshot`'s export: every record of every store dir under
 * root (the run's private store), no filter, CPA's raw label (as --show_raw), folded and
 * written to output_prof exactly as an export writes a .prof, then CPA's
 * Write line. A store without records gives an empty file (and a warning).
 * 0 or negative errno (already logged).
 */
int show_export_root(const char *root, const char *output_prof);

#endif /* CPA_SHOW_H */
