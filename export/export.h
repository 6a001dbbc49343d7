/* SPDX-License-Identifier: MIT */
/*
 * Exports of a store range for other tools: pprof, SVG flamegraph,
 * speedscope JSON, and the two-count folded diff (docs/export.md).
 *
 * One interface for every format: an exporter is fed the store reader's rows
 * (export__add() has store_sample_fn's shape, so it is passed straight to
 * store_reader__query()), optionally a second set as the base of a diff
 * (export__add_base()), and writes one file. Library code: no logging; 0 or
 * -errno, with export__error() saying more.
 */
#ifndef CPA_EXPORT_H
#define CPA_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storer/store.h"

enum export_format {
	EXPORT_FOLDED, /* CPA's .prof; with a base: "stack base new" lines (difffolded.pl) */
	EXPORT_PPROF,  /* gzip'd perftools.profiles.Profile */
	EXPORT_SVG,    /* self-contained interactive flamegraph */
	EXPORT_SPEEDSCOPE,
	EXPORT_FORMAT_MAX,
};

/* Which rows an exporter takes, by kind (`cpa show --kind`). */
enum export_kinds {
	EXPORT_KINDS_ALL, /* every row: pprof's samples carry their kind, the others add them up */
	EXPORT_KINDS_ON,  /* all but off-CPU rows (on-CPU, probe hits, losses) */
	EXPORT_KINDS_OFF, /* off-CPU rows only */
};

struct export_opts {
	/* Label frames at the root, as in the folded export (svg, speedscope, folded diff);
	 * pprof: no pid and tid labels, no env label; show_thread_name changes nothing
	 * there (every sample has the label comm). */
	bool no_pid, no_env, show_thread_name;
	enum export_kinds kinds;
	uint32_t freq;	       /* sampling frequency of the store (on-CPU period = 1e9/freq) */
	uint64_t t0_ns, t1_ns; /* the range exported (pprof time_nanos/duration_nanos) */
	const char *title;     /* SVG title, NULL: "cpa" */
	uint32_t width;	       /* SVG width in px, 0: 1200 */
};

struct exporter;

/* "folded", "pprof", "svg", "speedscope"; -EINVAL otherwise. */
int export__parse_format(const char *s, enum export_format *ret);
/* Format implied by a file name's suffix (.prof, .pb.gz, .svg, .speedscope.json), or -ENOENT. */
int export__format_of_path(const char *path, enum export_format *ret);
/* Default file suffix of a format (".prof", ".pb.gz", ...). */
const char *export__suffix(enum export_format f);
/* Its name as --format takes it ("pprof"). */
const char *export__format_name(enum export_format f);

int export__new(enum export_format f, const struct export_opts *o, struct exporter **ret);
void export__free(struct exporter *e);

/*
 * A new source of rows begins (another store dir): ids of the previous one
 * ((seg, stack_id)) are forgotten. Implied by export__new().
 */
void export__new_source(struct exporter *e);
/* ctx is the exporter: store_sample_fn-compatible. */
int export__add(void *ctx, const struct store_sample *s);
/* Rows of the base range of a diff. */
int export__add_base(void *ctx, const struct store_sample *s);
/* The same as a block's rows (store_rows_fn-compatible, for
 * store_reader__query_rows()): each distinct (segment, stack, names, pid) is
 * resolved once, the same file as row by row. */
int export__add_rows(void *ctx, const struct store_rows *b);
int export__add_base_rows(void *ctx, const struct store_rows *b);
/* The row columns (STORE_COL_*) export__add_rows() does not read now (its triggers
 * added): store_filter.skip for the rows' query. */
uint32_t export__rows_skip(const struct exporter *e);

/*
 * A policy trigger of the range (store_reader__triggers()), added before the
 * rows: pprof gets a comment per trigger and the label trigger=<policy> on
 * the samples inside its window (its process's, or every sample for a
 * system-wide trigger); speedscope a profile of each window; SVG lists them
 * in its subtitle; folded files get nothing (docs/export.md). At most
 * EXPORT_TRIGGERS_MAX are kept (-E2BIG past that).
 */
#define EXPORT_TRIGGERS_MAX 64
int export__add_trigger(struct exporter *e, const struct store_trigger *t);

/* Write the file (after every row was added): to a temporary file next to
 * it, fsync'd and renamed over path; on failure path is left as it was. */
int export__write(struct exporter *e, const char *path);

/* What export__write() writes through, for the other writers of a file
 * (the folded .prof of cpa show): open a temporary file in path's
 * directory; close with ok: fflush, fsync, rename onto path; without ok,
 * or when any of that fails: unlink it. 0 or -errno. */
struct export_file {
	FILE *f;
	const char *path;
	int dfd;	/* the target's directory, walked by common/safepath.h; -1 */
	char leaf[256]; /* the target's name in dfd */
	char tmp[256];	/* the temporary file beside it, renamed over leaf at close */
	char err[512];	/* why open failed, when the path rule refused it */
};
int export_file__open(struct export_file *x, const char *path);
int export_file__close(struct export_file *x, bool ok);

struct export_stats {
	uint64_t rows[2];	  /* rows taken: [0] = new, [1] = base */
	int64_t min_sec, max_sec; /* of the new rows */
	uint64_t stacks;	  /* distinct stacks written (the "Stack Type" count) */
	uint64_t merged;	  /* SVG: frames narrower than a pixel merged into "[...]" */
	uint64_t merged_value;	  /* ... and the value they carried */
};
void export__stats(const struct exporter *e, struct export_stats *ret);
const char *export__error(const struct exporter *e);

/* freq from a store dir's conf ("freq: N"), or -errno. */
int export__store_freq(const char *store_dir, uint32_t *ret);

/*
 * --split_path: the rows of a range written through the store writer as a
 * new store under root (cpa_YYMMDD... dirs), readable by every cpa command.
 * Rows are re-interned into the new store's own id space; a row of count N
 * becomes N samples whose weights add up to the row's.
 */
struct store_split;

int store_split__new(const char *root, uint32_t freq, struct store_split **ret);
/* store_sample_fn-compatible; ctx is the split. */
int store_split__add(void *ctx, const struct store_sample *s);
/* A new source of rows (another store dir): forget its (seg, stack_id) ids. */
void store_split__new_source(struct store_split *sp);
/* Flush, fsync and close the new store; samples written in *ret_samples.
 * A failed write (a full disk) fails it and removes the store dirs the split
 * made; the root's .cpa-lock is removed either way. */
int store_split__close(struct store_split *sp, uint64_t *ret_samples, char *dir, size_t len);
/* Without a successful close: the split's store dirs are removed. */
void store_split__free(struct store_split *sp);

#endif /* CPA_EXPORT_H */
