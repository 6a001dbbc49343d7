/* SPDX-License-Identifier: MIT */
/*
 * The viewer's model of a store: the per-second timeline (from block headers,
 * refined with exact on/off-CPU/lost counts wherever rows were decoded), and
 * the aggregation of a time range with filters and grouping into a call tree.
 * Reads the store only through storer/store.h. No curses here.
 */
#ifndef CPA_VMODEL_H
#define CPA_VMODEL_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cpulist.h"
#include "storer/store.h"
#include "tree.h"
#include "vmap.h"

#define VCPU_BITS 4096

/* VG_NAME: no group root: the frames of every process merged by name. */
enum vgroup { VG_PROCESS, VG_THREAD, VG_CGROUP, VG_ENV, VG_CPU, VG_NAME, VG_MAX };

enum {
	VK_ON = 1u << 0,
	VK_OFF = 1u << 1,
	VK_PROBE = 1u << 2,
	VK_LOST = 1u << 3,
	VK_ALL = 0xf,
};

struct vfilter {
	int64_t pid;	/* -1 = all */
	int64_t cgroup; /* -1 = all */
	int64_t probe;	/* -1 = all; else only probe samples of this --probe id */
	char comm[64];	/* "" = all; thread or process name */
	char env[64];	/* "" = all */
	char cpu_list[64];
	bool has_cpus;
	uint64_t cpus[CPULIST_WORDS(VCPU_BITS)];
	unsigned int kinds; /* VK_* */
	enum vgroup group;
	bool kernel; /* kernel frames shown */
};

void vfilter__init(struct vfilter *f);
/* "pid=1 comm=x cgroup=N cpu=0-3 env=E kind=on,off,probe,lost probe=N"; "" clears.
 * Group and kernel are kept. 0 or -EINVAL with err set. */
int vfilter__parse(struct vfilter *f, const char *s, char *err, size_t errlen);
/* "pid=1 kind=on" or "" when nothing is filtered. */
void vfilter__describe(const struct vfilter *f, char *buf, size_t len);
bool vfilter__selects_all(const struct vfilter *f);
const char *vgroup__name(enum vgroup g);

/* Exact counts of one second (from decoded rows). */
struct vsec {
	uint32_t on, off, probe, lost;
	uint32_t degraded; /* of the above: samples kept without their user stack (pressure) */
};

/* A distinct stack (same frames in every segment: one entry). */
struct vstack {
	uint32_t off; /* into frames: root first, user frames then kernel */
	uint16_t n, nk;
	bool degraded; /* a "[degraded: ...]" marker: the pipeline was under pressure */
	bool lost;     /* a "[lost: ...]" marker: the row counts lost samples */
};

/*
 * A stack id of a segment: its distinct stack, and the (stack, group) pair
 * its rows were counted in last with the group's key as stored in the rows
 * (string ids of the segment, pid, tid, cgroup or cpu: group_key()). Rows of
 * one stack mostly share a group, so a row costs a compare of its key here,
 * no hash lookup.
 */
struct vslot {
	uint32_t stack; /* vstack index + 1, 0 = not seen */
	uint32_t pair;
	uint32_t ka, kb, kc; /* the group key of pair */
	uint8_t kg;	     /* its grouping: enum vgroup + 1, 0 = none yet */
	bool degraded, lost; /* of the stack */
};

/* Segment's stack ids -> slots (ids are dense per segment). */
struct vseg_map {
	uint32_t seg;
	struct vslot *slot; /* by stack id */
	uint32_t cap;
};

/* A (stack, group) pair: what a range sums samples by (m->pairs, by id). */
struct vpair {
	uint32_t stack, group;
};

/* One sum of a cached chunk. */
struct vcsum {
	uint32_t pair, value;
};

struct vrange_stats {
	uint64_t samples, on, off, probe, lost, rows;
};

/* Sums by pair id: val[] dense (0 where untouched), ids[] the pairs touched. */
struct vaggtab {
	uint64_t *val;
	uint32_t cap_val;
	uint32_t *ids;
	uint32_t n, cap_ids;
};

/*
 * The aggregation cache: the (stack, group) sums of whole, closed chunks of
 * VCHUNK_S seconds (aligned), for one filter and grouping. A chunk ending
 * VCHUNK_CLOSED_S before the store's last second no longer changes: a range
 * covering it takes its sums instead of reading its rows again.
 */
#define VCHUNK_S	600
#define VCHUNK_CLOSED_S 300
#define VCHUNK_MAX_AGGS (4u << 20) /* cached sums at most (8 B each) */

struct vchunk {
	int64_t c0;
	struct vcsum *aggs;
	uint32_t n;
	struct vrange_stats st;
	struct vsec *exact; /* VCHUNK_S seconds; NULL when filtered */
};

/* Progress of an aggregation and its cancellation (the loader thread's, view.c):
 * written by the aggregating thread, read and cancelled by another. */
struct vprogress {
	_Atomic int64_t done_s, total_s; /* seconds of the range(s) done, in all */
	_Atomic uint64_t rows;		 /* rows read */
	atomic_bool cancel;		 /* set: the aggregation stops with -ECANCELED */
};

/* One second of the metrics series (series.c), for the selection it was loaded for. */
struct vmsec {
	uint64_t busy, total; /* system: /proc/stat busy and all ticks; process: on-CPU ns and
				 the interval's ns (% of one CPU) */
	uint64_t switches;    /* context switches (every reason) */
	uint32_t runq_hist[CPA_METRICS_HIST]; /* log2 ns */
	bool have;			      /* a metrics record covers this second */
};

/* The per-second metrics and policy triggers of the timeline view [t0, t1). */
struct vseries {
	int64_t t0, t1;
	int64_t pid;   /* the selection loaded: pid / comm of the filter, or system-wide */
	char comm[64]; /* "" = any */
	bool loaded;
	bool too_long;	/* the view is longer than VSERIES_MAX_SPAN: nothing read */
	bool proc;	/* per process (a pid or comm filter), else system-wide */
	bool any;	/* at least one metrics record in the view */
	bool hw, hw_na; /* hardware counters seen / "not available on this host" */
	uint64_t cycles, instructions;
	struct vmsec *sec;	    /* t1 - t0 seconds */
	struct store_trigger *trig; /* by start time */
	size_t n_trig;
};

/* Metrics and triggers are read (decompressing blocks) for a view up to this long. */
#define VSERIES_MAX_SPAN (6 * 3600)

/* group_of() cache of process / thread labels, by pid or tid */
struct vgroup_memo {
	uint32_t who, id;
	int kind; /* enum vgroup, -1 = empty */
	char name[16];
};

/* group_of() cache by the row's stored ids (segment, group_key()), so a seen
 * group costs no dictionary lookup */
struct vgroup_raw {
	uint32_t seg, a, b, c;
	uint32_t id;
	int kind; /* enum vgroup, -1 = empty */
};

/*
 * One thread's state of an aggregation (vmodel__aggregate() reads a range's
 * store blocks with up to VWORKERS threads, each with its own reader): its
 * slots of the segments it read (kept: a slot is a cache of the shared
 * stacks and pairs), the frame cache of its segment, its group caches, its
 * sums and counts.
 */
#define VWORKERS 2
/* Less to read is read by one: a second reader loads the dictionary of the
 * segment where the two meet, and resolves its stacks, again (a 1-hour range
 * cost 30 % more CPU by two, for no gain in time). */
#define VPAR_MIN_S (2 * 3600)

struct vwork {
	/* (seg, stack_id) -> interned stack and pair */
	struct vseg_map *segs;
	uint32_t n_segs, last_seg;
	/* frame pointer -> index into fcache, valid while rows of fcache_seg come
	 * (the reader's dictionary, and so its frame addresses, is per segment) */
	struct u64map fcache_map;
	struct vpath_ent *fcache;
	uint32_t n_fcache, cap_fcache, fcache_seg;
	struct vgroup_memo gmemo[512];
	struct vgroup_raw graw[1024];
	struct u64map pair_map; /* its copy of the pairs it used: stack << 32 | group -> id */
	/* its reader (worker 0: the model's; worker 1: a store_reader__fork() of
	 * it, kept until the store is re-read) and, during an aggregation, the
	 * sums of its runs and of the chunk being read, its counts and progress;
	 * the problems its reader reported (notices) */
	struct store_reader *r;
	struct vaggtab agg, cagg;
	struct vrange_stats st;
	int64_t reported; /* seconds of the current query in vprogress.done_s */
	uint64_t notices;
	char last_notice[256];
};

struct vmodel {
	char dir[PATH_MAX];
	char root[PATH_MAX]; /* the store root given, "" when a store dir was */
	/* every run of dir's day when the store was given as a root (dirs[0..n_dirs)),
	 * read as one (store_reader__open_set()); else just dir */
	char **dirs;
	uint32_t n_dirs;
	struct store_reader *r;
	/* given a root: its run dirs of dir's day or later this user cannot open
	 * (another user's runs), their samples not shown: "'path': reason; ..." */
	char unread[1024];
	uint32_t n_unread;
	struct strtab names;
	struct u64map stack_dedup; /* hash of the frames -> stack */
	struct vstack *stacks;
	uint32_t n_stacks, cap_stacks;
	struct vpath_ent *frames;
	uint32_t n_frames, cap_frames;
	struct u64map groups[VG_MAX]; /* value -> label id */
	/* the aggregating threads' own state; workers: how many a range is read
	 * with (vmodel__open(): the CPUs online, at most VWORKERS) */
	struct vwork work[VWORKERS];
	uint32_t workers;
	uint64_t par_loads; /* aggregations read by more than one worker */
	pthread_mutex_t mu; /* the shared state above, while workers run */
	/* timeline: seconds [first_s, last_s] */
	int64_t first_s, last_s;
	uint64_t *hdr;	    /* samples per second from block headers (spread over a block) */
	struct vsec *exact; /* valid where known[] */
	uint8_t *known;
	uint64_t hdr_bad; /* block headers failing their check */
	/* (stack, group) pairs, by id; stack << 32 | group -> id */
	struct vpair *pairs;
	uint32_t n_pairs, cap_pairs;
	struct u64map pair_map;
	struct vaggtab agg; /* the range's sums */
	/* chunk cache (VCHUNK_S) and the filter its sums are for */
	struct vchunk *chunks;
	uint32_t n_chunks, cap_chunks;
	uint64_t chunk_aggs;
	struct vfilter chunk_f;
	bool chunk_f_set;
	/* exact per-second counts of the last aggregation, [ld_t0, ld_t1), until
	 * vmodel__commit() puts them on the timeline */
	struct vsec *ld_exact;
	int64_t ld_t0, ld_t1;
	bool ld_timeline;
	uint64_t corrupt; /* vmodel__corrupt() as of the last commit */
	struct vseries ser;
};

/* path: a store dir (cpa_YYMMDD...) or a root holding them (the newest is
 * taken). 0, or -errno with a user-facing message in err. */
int vmodel__open(struct vmodel *m, const char *path, char *err, size_t errlen);
/* Re-read the store (live mode): the timeline grows. */
int vmodel__reload(struct vmodel *m, char *err, size_t errlen);
void vmodel__free(struct vmodel *m);
uint64_t vmodel__corrupt(const struct vmodel *m);
/* The run dirs not read because this user cannot open them (m->unread), as one
 * line for the screen and stderr; "" when none. */
void vmodel__unread_line(const struct vmodel *m, char *buf, size_t len);

/* Samples of second s on the timeline: exact when known, else the header estimate. */
uint64_t vmodel__sec_total(const struct vmodel *m, int64_t s);

/* Load the metrics series and triggers of [t0, t1) for f's process selection
 * (pid / comm; system-wide without), unless already loaded (series.c). */
int vmodel__series(struct vmodel *m, int64_t t0, int64_t t1, const struct vfilter *f);
/* Forget them (the store was re-read). */
void vmodel__series_reset(struct vmodel *m);
/* Of seconds [s0, s1) of the loaded series: busy % (system: of all CPUs;
 * process: of one CPU), run-queue latency P99 in us, switches per second.
 * false when no second of them has a record. */
bool vmodel__series_cell(const struct vmodel *m, int64_t s0, int64_t s1, double *busy_pct,
			 double *rq_p99_us, double *cs_per_s);

/* Aggregate [t0, t1) (unix seconds) passing f into out (reset first, sorted after).
 * pg (may be NULL) gets the progress and may cancel (-ECANCELED). Reads the store
 * and the chunk cache; the exact per-second counts wait for vmodel__commit(). */
int vmodel__aggregate(struct vmodel *m, int64_t t0, int64_t t1, const struct vfilter *f,
		      struct vtree *out, struct vrange_stats *st, struct vprogress *pg);
/* After a vmodel__aggregate() that returned 0: its exact per-second counts on the
 * timeline, and the corrupt-block count refreshed. */
void vmodel__commit(struct vmodel *m);
/* Write [t0, t1) passing f as folded lines in `cpa show`'s .prof layout.
 * Returns the number of distinct lines, or -errno. */
int vmodel__export(struct vmodel *m, int64_t t0, int64_t t1, const struct vfilter *f,
		   const char *path);

#endif /* CPA_VMODEL_H */
