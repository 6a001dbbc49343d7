/* SPDX-License-Identifier: MIT */
/*
 * `cpa show`: export a time range of a store as a folded .prof (CPA's
 * layout), or print the store's range. The front command fills show_opts
 * from its command line and calls show_run().
 */
#ifndef CPA_SHOW_H
#define CPA_SHOW_H

#include <stdbool.h>

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
	const char *split_path;				   /* not supported yet: refuse clearly */
	long target_pid;				   /* -1 = all */
	const char *target_comm, *target_env, *target_cpu; /* NULL = all; cpu as list "1-3,5" */
	long long target_cgroup_id;			   /* -1 = all */
	enum show_kind kind;				   /* --kind */
	bool verbose;
};

/* 0 ok, or negative errno (already logged). */
int show_run(const struct show_opts *o);

#endif /* CPA_SHOW_H */
