/* SPDX-License-Identifier: MIT */
/*
 * The cpa store: per-second history of aggregated stack samples on disk.
 * Format: docs/store-format.md (version STORE_VERSION_MAJOR.MINOR).
 *
 *   <root>/cpa_YYMMDD[_start_HHMMSS]/conf         CPA's key: value run description
 *                                    /index        24-byte entry per block (time -> offset)
 *                                    /seg_NNNNNN.cps   blocks: header + zstd dict delta + zstd rows
 *
 * Library code: no logging, no globals; every function returns 0 or -errno.
 * The writer takes symd-style records (shm/records.h) and does its own
 * interning; the reader gives back resolved samples through a callback.
 */
#ifndef CPA_STORE_H
#define CPA_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "shm/records.h"

#define STORE_VERSION_MAJOR 1
#define STORE_VERSION_MINOR 2 /* 1.1: the metrics section; 1.2: a block's highest seq */

/* Default block length: amortises the block header, index entry and zstd frame
 * over 5 seconds (docs/store-format.md has the measurements). */
#define STORE_BLOCK_SECONDS 5

/* ---------------------------------------------------------------- writer */

struct store_writer;

#define STORE_PROBES_MAX 8 /* CPA_PROBE_MAX */

struct store_writer_opts {
	const char *root; /* store_dir: cpa_YYMMDD... dirs are created below it */
	/* conf file contents (CPA's keys) */
	uint32_t cpu_num;
	uint32_t freq;
	uint32_t record_interval; /* seconds (conf; blocks are at least this long) */
	uint32_t block_seconds;	  /* per block, 1-s buckets inside (default 5) */
	uint32_t persistent_day;  /* retention by days, 0 = off */
	uint32_t stack_size;
	bool kernel_stack;
	const char *record_env_name;
	/* --probe specs by probe id, written to conf as "probe_<id>: <spec>";
	 * the strings must outlive the writer (the arena's config block). */
	const char *probes[STORE_PROBES_MAX];
	uint32_t nr_probes;
	uint64_t max_store_bytes; /* retention by size, 0 = off */
	uint32_t segment_seconds; /* new segment file after this much data time (default 3600) */
	int zstd_level;		  /* default 3 */
	uint32_t max_retry_bytes; /* failed-write buffers kept for retry (default 32 MiB) */
};

struct store_writer_stats {
	uint64_t samples;	  /* sample records taken (sum of rows' inputs) */
	uint64_t lost_samples;	  /* counts carried by loss records */
	uint64_t blocks;	  /* blocks closed and written */
	uint64_t bytes_raw;	  /* encoded bytes before zstd */
	uint64_t bytes_disk;	  /* bytes written (blocks + index entries + headers) */
	uint64_t write_errors;	  /* failed writes (each retried later) */
	uint64_t dropped_blocks;  /* given up after the retry budget ran out */
	uint64_t trimmed_files;	  /* removed by retention */
	uint64_t unknown_ids;	  /* samples/frames naming an id symd never defined */
	uint64_t uring_writes;	  /* IORING_OP_WRITE submitted */
	uint64_t uring_fsyncs;	  /* IORING_OP_FSYNC submitted */
	uint64_t refused_samples; /* samples (incl. lost) refused: no store dir/segment could be
				     made */
	uint64_t lost_samples_dropped;	 /* samples in the blocks given up (dropped_blocks) */
	uint64_t lost_samples_discarded; /* in open blocks given up: store deleted, dictionary lost
					  */
	uint64_t lost_recorded;		 /* of all three, stored as the writer's own loss rows */
	uint64_t lost_io;	   /* of all three, lost to EIO: [lost: storer io_errors] rows,
				    * the rest [lost: storer write_errors] */
	uint64_t lost_io_recorded; /* of lost_recorded, in [lost: storer io_errors] rows */
	uint64_t fsync_errors;	   /* failed fsyncs: the segment rolls (docs/store-format.md) */
	uint64_t store_gone;	   /* times the store dir or segment was deleted under the writer */
	uint64_t journal_given_up; /* dictionary journal bytes freed on a full disk */
	int last_error;		   /* last failed write's -errno, 0 if none */
};

/* Also takes the root's lock (store_root__lock()): -EBUSY when another
 * writer (a second cpa monitor) holds it. */
int store_writer__new(const struct store_writer_opts *o, struct store_writer **ret);
/* Closes the open block, waits for every write, fsyncs. Accepts NULL. */
void store_writer__free(struct store_writer *w);

/* run_id is the monitor's start time (realtime ns). The run's store dir is
 * created now, with its conf: cpa_YYMMDD, or cpa_YYMMDD_start_HHMMSS (the
 * start time) when that is taken. A restarted storer of the same run (same
 * run_id) continues the store dir it was writing. Call before the first sample. */
void store_writer__set_run_id(struct store_writer *w, uint64_t run_id);
/*
 * The highest record seq (shm/records.h) that the complete blocks at the tail
 * of this run's store dirs hold: what an earlier life of the storer of the
 * same run (the same arena, the same seq space) stored, released (up to mark,
 * the input ring's) or not. 0 when none does (a new run, a store of format
 * 1.1 or older). Call after store_writer__set_run_id(); store_root__stored_seq().
 */
uint64_t store_writer__stored_seq(const struct store_writer *w, uint64_t mark);

/*
 * Dictionary journal in dir (the store root): every definition taken is also
 * appended (io_uring) to dir/.storer-dict-<epoch>, and a new epoch
 * (DICT_RESET) starts a new file. Called at start, it replays the newest
 * journal, so a restarted storer still knows the ids symd defined before
 * and does not re-send. Returns the number of definitions replayed.
 */
int store_writer__journal_open(struct store_writer *w, const char *dir);

/* Definitions in symd's id space (shm/records.h). DICT_RESET forgets them. */
void store_writer__dict_reset(struct store_writer *w, uint64_t epoch);
int store_writer__def_str(struct store_writer *w, const struct cpa_str_def *d, const char *s);
int store_writer__def_module(struct store_writer *w, const struct cpa_module_def *m,
			     const char *path);
int store_writer__def_frame(struct store_writer *w, const struct cpa_frame_def *f);
int store_writer__def_stack(struct store_writer *w, const struct cpa_stack_def *s,
			    const uint32_t *frame_ids);
/* Aggregate into the open block (closing it first when the sample falls outside). */
int store_writer__add_sample(struct store_writer *w, const struct cpa_sample_out *s);
/* Kept as a stack of one marker frame "[lost: <stage> <reason>]". */
int store_writer__add_loss(struct store_writer *w, const struct cpa_loss *l);
/* A CPA_REC_METRICS record (m->n_ents entries in ents) into the open block's
 * metrics section (docs/metrics.md). */
int store_writer__add_metrics(struct store_writer *w, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents);
/* A policy event (CPA_REC_EVENT) into the same section. */
int store_writer__add_event(struct store_writer *w, const struct cpa_policy_event *ev);

/*
 * Housekeeping at realtime now_ns: reap completions, retry failed writes,
 * close the open block once its last second is over (plus one second of
 * grace for pipeline latency), run retention. Returns 1 when a block was
 * closed (the caller may release its input), 0 otherwise, or -errno.
 */
int store_writer__tick(struct store_writer *w, uint64_t now_ns);
/* The storer's cap (mem_limit_mb, bytes): a segment whose dictionary passes 1/8 of it, at
 * most STORE_SEG_DICT_MAX, is closed (the next block opens a new one, with a dictionary of
 * its own; the budget doubles, up to 1/8 and STORE_SEG_DICT_CEIL, if that came within 30 s
 * of data); the dictionary journal takes at most 1/4. */
#define STORE_SEG_DICT_MAX  (2ull << 20)
#define STORE_SEG_DICT_CEIL (8ull << 20)
void store_writer__set_mem_cap(struct store_writer *w, uint64_t bytes);
/* false when a sample at time_ns would first close the open block. */
bool store_writer__fits(const struct store_writer *w, uint64_t time_ns);
/* Close the open block now (if any); 1 if one was closed. Its writes (and the
 * journal's) are queued: store_writer__kick() submits them. */
int store_writer__close_block(struct store_writer *w);
/* Submit the writes queued since the last kick, in one submission (store_wq.c).
 * Returns their barrier: the input they hold is released once
 * store_writer__landed() says so. store_writer__tick() kicks at its end,
 * store_writer__flush() and store_writer__free() wait for everything. */
uint64_t store_writer__kick(struct store_writer *w);
/* Every write queued before barrier b completed (into the page cache, or
 * failed: a retry's samples are counted if it is given up): a SIGKILL now
 * cannot undo it, a write still queued in the kernel is cancelled by one.
 * Waits up to wait_ms for it (0: looks at what the last reap saw). */
bool store_writer__landed(struct store_writer *w, uint64_t b, int wait_ms);
/* Close the open block, wait for all writes, fsync (sync) the files. */
int store_writer__flush(struct store_writer *w, bool sync);
/* Bytes of aggregated state in the open block (to bound memory). */
size_t store_writer__open_bytes(const struct store_writer *w);
/* Realtime ns at which the open block is due to close, 0 when none is open. */
uint64_t store_writer__deadline(const struct store_writer *w);
/* Realtime ns of the next work store_writer__tick() has without new input: the
 * open block's deadline or the next retention run; 0 when nothing is due.
 * *ret_busy: writes waiting for a retry (or in flight with no block open), a
 * full disk or a dir to open again (the tick looks at them within seconds). */
uint64_t store_writer__due(const struct store_writer *w, bool *ret_busy);
void store_writer__stats(const struct store_writer *w, struct store_writer_stats *ret);
/* What retention removed since the last call (store_retention__run()'s names,
 * "" if nothing), for the caller's log; clears it. */
void store_writer__take_removed(struct store_writer *w, char *buf, size_t len);
/* true when nothing waits for a retry or is being retried, and the store dir
 * and segment could be made: the store takes writes. */
bool store_writer__healthy(const struct store_writer *w);
/* Path of the store dir being written ("" before the first block). */
const char *store_writer__dir(const struct store_writer *w);

/* Retention over a store root: remove cpa_* dirs of days before today -
 * keep_days (today and the keep_days days before it stay; 0 = off), then
 * oldest segments until the total is <= max_bytes (0 = off). Never touches
 * keep_dir's segment keep_seg or later. names (may be NULL) gets what went,
 * relative to root and ", "-separated ("cpa_261101, cpa_261120/seg_000003.cps",
 * "..." once names_len is full), for the caller to log. Returns the number of
 * files removed, or -errno. */
int store_retention__run(const char *root, uint32_t keep_days, uint64_t max_bytes,
			 const char *keep_dir, uint32_t keep_seg, uint64_t now_ns, char *names,
			 size_t names_len);

/* The store root's lock: an exclusive, non-blocking flock(2) on the root
 * directory itself (made if missing); the holder's pid goes to root/.cpa-lock
 * as a note. Returns the fd holding it, -EBUSY when another process holds it
 * (ret_pid gets the pid of the note, 0 if unknown), or -errno. Closing the fd
 * (or the holder's death) releases it. */
int store_root__lock(const char *root, int *ret_pid);

/* Remove a whole store root: every store dir in it (files only, as the
 * writer makes them), the files beside them (dictionary journals, pid file),
 * then root itself. For a private root such as a one-shot run's. Returns the
 * files removed, or -errno (e.g. -ENOTEMPTY when something else lives there). */
int store_root__remove(const char *root);

/* Remove the oldest segment (or the oldest store dir once it holds no
 * segment) under root, never keep_dir's keep_seg or later: what a full disk
 * gives up first. names as for store_retention__run(). Returns files removed
 * or -errno. */
int store_retention__trim_oldest(const char *root, const char *keep_dir, uint32_t keep_seg,
				 char *names, size_t names_len);

/* ---------------------------------------------------------------- reader */

struct store_reader;

struct store_frame {
	const char *name;   /* printed frame ("func", "0x1f3 [libc.so.6]", "[lost: ...]") */
	const char *module; /* module path, "" for kernel/markers */
	uint64_t offset;    /* file offset (user) or address (kernel) */
	uint32_t flags;	    /* enum cpa_frame_flag */
	uint8_t build_id_len;
	uint8_t build_id[CPA_BUILD_ID_MAX];
};

static inline bool store_frame__kernel(const struct store_frame *f)
{
	return f->flags & CPA_FF_KERNEL;
}

/* Stand-ins for one frame whose definition is gone (flag MARKER, or a lost
 * name). Unlike the stack's own markers (unwind stops, losses), they hold the
 * place of a real frame: readers print them where they are. */
#define STORE_FRAME_UNKNOWN "[unknown frame]"
#define STORE_DICT_LOST	    "[dictionary lost]"

static inline bool store_frame__placeholder(const struct store_frame *f)
{
	return !strcmp(f->name, STORE_FRAME_UNKNOWN) || !strcmp(f->name, STORE_DICT_LOST);
}

/* One aggregated row: (second, key) -> count, weight. Valid during the callback. */
struct store_sample {
	int64_t sec; /* unix second of the bucket */
	uint64_t cgroup_id;
	uint64_t count;	 /* samples */
	uint64_t weight; /* 1/sample on-CPU, ns off-CPU */
	uint32_t pid, tid, cpu, probe_id;
	uint16_t kind;	   /* enum cpa_sample_kind */
	bool lost;	   /* a loss marker row */
	const char *comm;  /* thread name */
	const char *pcomm; /* process name */
	const char *env;   /* "" when none */
	uint32_t seg;	   /* segment number and stack id: (seg, stack_id) names a stack */
	uint32_t stack_id;
	uint32_t n_frames; /* leaf first: n_kframes kernel frames, then user frames */
	uint32_t n_kframes;
	const struct store_frame *const *frames;
};

/* A row's process name: the process's name at the sample, else the thread's.
 * The one naming rule of every reader (cpa show, the exports, cpa-view). */
static inline const char *store_sample__proc_name(const struct store_sample *s)
{
	return s->pcomm[0] ? s->pcomm : s->comm[0] ? s->comm : "[unknown]";
}

struct store_filter {
	int64_t pid;		 /* -1 = all */
	const char *comm;	 /* matches the thread or the process name; NULL = all */
	const char *env;	 /* NULL = all */
	int64_t cgroup_id;	 /* -1 = all */
	const uint64_t *cpu_set; /* cpu bitmap as cpulist__parse() makes it; NULL = all */
	uint32_t cpu_set_bits;
	int64_t probe_id; /* -1 = all; else only kind PROBE rows of this probe */
	/* store_reader__query_rows(): columns the caller does not read (STORE_COL_*),
	 * passed over undecoded and 0 in its rows (unless the filter needs them) */
	uint32_t skip;
};

enum {
	STORE_COL_TID = 1u << 0,
	STORE_COL_CPU = 1u << 1,
	STORE_COL_CGROUP = 1u << 2,
	STORE_COL_ENV = 1u << 3,
	STORE_COL_WEIGHT = 1u << 4,
	STORE_COL_ALL = (1u << 5) - 1,
};

static inline void store_filter__init(struct store_filter *f)
{
	*f = (struct store_filter){.pid = -1, .cgroup_id = -1, .probe_id = -1};
}

struct store_read_stats {
	uint64_t blocks_indexed;   /* blocks the index (and tail scan) know of */
	uint64_t blocks_read;	   /* data sections read and decoded */
	uint64_t dict_reads;	   /* dictionary sections read (no data) */
	uint64_t blocks_corrupt;   /* bad checksum/length: reported, skipped */
	uint64_t blocks_torn;	   /* past the end of the file (crash mid-write) */
	uint64_t blocks_recovered; /* found by scanning past the index */
	uint64_t bytes_read;
	uint64_t rows;		/* rows passed to the callback */
	uint64_t bytes_skipped; /* torn or unreadable bytes passed over in the segments */
	uint32_t segs_skipped;	/* segment files not read: not regular, a copy, unreadable */
};

/* Called with a one-line description of every problem found (corrupt block, ...). */
typedef void (*store_notice_fn)(void *ctx, const char *msg);
typedef int (*store_sample_fn)(void *ctx, const struct store_sample *s);

/* dir: a store dir (cpa_YYMMDD...). -EPROTONOSUPPORT for a newer major
 * version, -ENOENT when it holds no store; store_reader__error() says more. */
int store_reader__open(const char *dir, store_notice_fn notice, void *ctx,
		       struct store_reader **ret);
void store_reader__free(struct store_reader *r);
/* Message of the last failure (also for a failed open: pass ret_err). */
const char *store_reader__error(const struct store_reader *r);
int store_reader__open_err(const char *dir, store_notice_fn notice, void *ctx,
			   struct store_reader **ret, char *err, size_t errlen);

/*
 * Several store dirs read as one (the runs of one day under a root, oldest
 * first): range and query span them all, query in dir order, and the
 * segment numbers of the samples are offset per dir so (seg, stack_id) stays
 * unique. Every dir must open (-errno and err as store_reader__open_err()).
 */
int store_reader__open_set(const char *const *dirs, uint32_t n, store_notice_fn notice, void *ctx,
			   struct store_reader **ret, char *err, size_t errlen);

/*
 * A reader of the blocks r knows of, for another thread: its own file
 * handles, decompression context, buffers and dictionary, so r and the fork
 * can each query (query, query_rows) at the same time, each from one thread.
 * Blocks r found bad are skipped. Its notices go to notice(ctx) (NULL: none).
 * 0 or -ENOMEM.
 */
int store_reader__fork(const struct store_reader *r, store_notice_fn notice, void *ctx,
		       struct store_reader **ret);
/* While neither queries: the fork's counts go to r's (and restart from 0), the
 * blocks either found bad are skipped by both and counted once in r. The fork
 * stays usable (its dictionary loaded). */
void store_reader__sync(struct store_reader *r, struct store_reader *fork);
/* store_reader__sync(), then the fork is freed. */
void store_reader__join(struct store_reader *r, struct store_reader *fork);

/* First and last time (realtime ns) of the blocks (samples, metrics) and the
 * number of 1-second records as the index tells it (cheap; an estimate when
 * blocks hold metrics-only seconds or the index was rebuilt). */
int store_reader__range(struct store_reader *r, uint64_t *ret_first_ns, uint64_t *ret_last_ns,
			uint64_t *ret_records);
/* Exactly the seconds holding sample rows (on-, off-CPU, probe, loss; not
 * metrics or triggers), read from every block's rows: the first and last of
 * them and their number (0 when none). `cpa show`'s Records Num. */
int store_reader__records(struct store_reader *r, int64_t *ret_first_s, int64_t *ret_last_s,
			  uint64_t *ret_records);
/* Every row with sec in [t0_ns, t1_ns) (whole seconds) passing f, in block
 * order. fn returning non-zero stops the walk and is returned. */
int store_reader__query(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			const struct store_filter *f, store_sample_fn fn, void *ctx);
void store_reader__stats(const struct store_reader *r, struct store_read_stats *ret);

/*
 * The fast walk of the same rows: one block's rows at a time, as stored,
 * their strings and stack as ids of the segment's dictionary. A reader that
 * aggregates keys its table by (seg, stack_id, the string ids, ...) and
 * resolves a key once (store_rows__sample()) instead of every row: the
 * exports and `cpa show` do (docs/export.md, "Reading").
 */
struct store_row {
	int64_t sec;
	uint64_t cgroup_id, count, weight;
	uint32_t pid, tid, cpu, probe_id;
	uint32_t kind;		   /* enum cpa_sample_kind */
	uint32_t comm, pcomm, env; /* string ids of the segment (0 = "") */
	uint32_t stack_id;
};

/* One block's rows in [t0_ns, t1_ns) passing the filter; valid during the callback. */
struct store_rows {
	struct store_reader *r; /* the reader (of a set: the dir's) whose dictionary they name */
	uint32_t seg;		/* as store_sample.seg: (seg, stack_id) and (seg, string id) */
	const struct store_row *rows;
	size_t n;
};
typedef int (*store_rows_fn)(void *ctx, const struct store_rows *b);
/* store_reader__query()'s walk, a batch per block (n > 0). */
int store_reader__query_rows(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			     const struct store_filter *f, store_rows_fn fn, void *ctx);
/* Row i of b as the sample store_reader__query() gives: its frames are valid
 * until the next call for the same reader or the callback's return. */
void store_rows__sample(const struct store_rows *b, size_t i, struct store_sample *ret);

/* ---------------------------------------------------------------- metrics
 * Per-second scheduler and system metrics (docs/metrics.md), kept in the
 * blocks' metrics section (format 1.1). */

/* One CPA_REC_METRICS record as stored: m->n_ents entries in ents. */
typedef int (*store_metrics_fn)(void *ctx, const struct cpa_metrics *m,
				const struct cpa_metrics_ent *ents);
/* Every metrics record with time_ns in [t0_ns, t1_ns), in block order. fn
 * returning non-zero stops the walk and is returned. */
int store_reader__metrics(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			  store_metrics_fn fn, void *ctx);
/* The end (realtime ns, a whole second) of the time the records cover, last_ns
 * being store_reader__range()'s last: a metrics record of an idle host's
 * stretched interval covers the seconds of its interval_ms from its start
 * (docs/metrics.md, "Idle host"), any other record its second. The last
 * record's start + its length, or last_ns's second + 1 when reading fails. */
uint64_t store_reader__range_end(struct store_reader *r, uint64_t last_ns);
/* Policy events (start and end records) with time_ns in [t0_ns, t1_ns). */
typedef int (*store_event_fn)(void *ctx, const struct cpa_policy_event *ev);
int store_reader__events(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns, store_event_fn fn,
			 void *ctx);

/* A policy trigger: its START event paired with the END of the same policy
 * and target (docs/metrics.md "Events in the history"). */
struct store_trigger {
	struct cpa_policy_event
		ev; /* the START record (the END when the start is before the range) */
	uint64_t start_ns, end_ns;
	bool end_recorded; /* end_ns from an END record, else the planned end */
	bool start_before; /* started before the range: start_ns is the range's start */
};
/* The whole seconds [*s0, *s1) a trigger covers (its start and end rounded out):
 * the store keeps rows per second, so these are the rows of its window. */
static inline void store_trigger__secs(const struct store_trigger *t, int64_t *s0, int64_t *s1)
{
	*s0 = (int64_t)(t->start_ns / 1000000000ull);
	*s1 = (int64_t)((t->end_ns + 999999999ull) / 1000000000ull);
	if (*s1 <= *s0)
		*s1 = *s0 + 1;
}
/* Triggers whose start or recorded end falls in [t0_ns, t1_ns), by start
 * time; *ret (free()) is NULL when there are none. 0 or -errno. */
int store_reader__triggers(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			   struct store_trigger **ret, size_t *ret_n);
/* "policy burst pid 8123 (myserver): cpu_percent 183.20 > 50.00, actions freq=499 offcpu=1",
 * as `cpa show --triggers` prints it. */
void store_trigger__describe(const struct store_trigger *t, char *buf, size_t len);

/* ---------------------------------------------------------------- store roots */

/* true if path looks like a store dir (has an index or segment files). */
bool store_dir__is_store(const char *path);
/* The value of "key: value" in dir's conf file, without the newline.
 * -ENOENT when the file or the key is missing, -ENAMETOOLONG if len is short. */
int store_dir__conf_get(const char *dir, const char *key, char *buf, size_t len);
/* Names of the store dirs (cpa_*) under root, sorted: oldest day first, and
 * within a day in start order. Free with store_root__list_free(). 0 or -errno. */
int store_root__list(const char *root, char ***ret_names, uint32_t *ret_n);
void store_root__list_free(char **names, uint32_t n);
/*
 * The store dir under root for local time of day tod_s (-1: the newest): the
 * newest cpa_* dir whose records span that time of day, else the newest one
 * holding records (a run that captured nothing leaves an empty dir), else the
 * newest. Its path into buf; -ENOENT when root holds none; -errno when root
 * cannot be listed, or none of its cpa_* dirs can (that dir's path into buf:
 * EACCES of a store of another user). Used by `cpa show` and cpa-view.
 */
int store_root__pick(const char *root, long tod_s, char *buf, size_t len);
/*
 * The store dirs of picked's day (picked: a path or name cpa_YYMMDD...) under
 * root that hold records, oldest first: every monitor run of that day, for
 * store_reader__open_set() (a window may span a restart). Their paths into
 * *ret_dirs (free each, then it). 0 or -errno. Used by `cpa show` and cpa-view.
 */
int store_root__day_dirs(const char *root, const char *picked, char ***ret_dirs, uint32_t *ret_n);
/*
 * The run dirs (cpa_YYMMDD or cpa_YYMMDD_...) under root of picked's day or
 * later (picked: a path or name cpa_YYMMDD...) that this user cannot open
 * (EACCES: another user's run, chmod 000): fn(ctx, path, errno) for each, in
 * name order (oldest first). The store library lists only the dirs it can read;
 * `cpa show` and cpa-view name these. 0 or -errno when root cannot be listed.
 */
typedef void (*store_shut_fn)(void *ctx, const char *path, int err);
int store_root__for_each_shut(const char *root, const char *picked, store_shut_fn fn, void *ctx);
/*
 * The highest record seq the store dirs of run run_id (conf run_id) under root
 * hold in their complete blocks (STORE_BF_SEQ, format 1.2; store_tail.c), for
 * a consumer whose ring mark is mark: per dir, the blocks of its newest
 * segment from the newest indexed one at or below mark (else from the
 * segment's header) on, each checked whole (header, section CRCs, zstd); a
 * torn or corrupt block and what follows it do not count, an earlier segment
 * is looked at when the newest holds no complete block. *ret_seq 0 when none.
 * 0 or -errno.
 */
int store_root__stored_seq(const char *root, uint64_t run_id, uint64_t mark, uint64_t *ret_seq);

/* ---- timeline (store_timeline.c): counts from the index and block headers only */

struct store_tl_block {
	int64_t t_min_s;    /* first second of the block */
	uint32_t span_s;    /* t_max_s - t_min_s */
	uint32_t n_sec;	    /* seconds with data */
	uint32_t n_samples; /* samples incl. lost (saturating) */
};

/* Every indexed block with a valid header, sorted by (segment, offset), read
 * without decompressing anything (*ret: free()). ret_bad: headers that failed
 * their check. -ENOENT without an index, -EBADMSG for a bad one,
 * -EPROTONOSUPPORT for a newer major version. */
int store_timeline__read(const char *dir, struct store_tl_block **ret, size_t *ret_n,
			 uint64_t *ret_bad);

#endif /* CPA_STORE_H */
