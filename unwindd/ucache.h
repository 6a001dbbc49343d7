/* SPDX-License-Identifier: MIT */
/*
 * unwindd's caches: per-process executable mappings (keyed by pid) and
 * per-binary identity (keyed by the (dev, ino) that /proc/PID/maps shows),
 * with the binary's unwind table shared by build-id + the opened file's inode
 * (a build-id alone is forgeable).
 *
 *   pid --hash--> uproc { umap[] sorted by start } --> ubin (dev, ino) --> ucfi (build-id, inode)
 *                                                      id, path, build-id    cfi_index *
 *                                                                  (chunk tables, lazy)
 *
 * A process's mappings are read lazily: on its first sample, and again when
 * a pc misses them (at most once per refresh_ns per pid, longer for a
 * process whose re-reads keep not helping), or after exec. Pages that still
 * missed after a read are remembered per process (negative cache), so the
 * same stale or garbage pc does not cause another read.
 * A binary is identified (build-id read through /proc/PID/map_files) the
 * first time one of its pcs is resolved, from the process that hit it, so
 * the module definition names a process that is alive right then.
 *
 * The kernel's mapping events (CPA_REC_MAP) feed a per-process history with
 * timestamps (maphist.h), seeded from /proc at start: a pc is looked up
 * there first, at the sample's time (uproc.sample_ns), so a process that is
 * gone by then still resolves; /proc/PID/maps is the fallback for pcs the
 * history does not hold (a pid seen before any of its events).
 *
 * Memory is capped (opts.max_bytes): ucache__sweep() evicts least recently
 * used unwind tables and unreferenced binaries first, then idle processes.
 * Lookups never allocate once a process's maps are cached.
 */
#ifndef CPA_UNWINDD_UCACHE_H
#define CPA_UNWINDD_UCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "maphist.h"
#include "shm/records.h"
#include "shm/stage.h"

struct cfi_table;
struct ucfi;

struct ubin {
	struct ubin *hnext;
	struct ubin *bnext; /* chain of the build-id table */
	uint64_t dev;
	uint64_t ino;
	char *path; /* as the first process that mapped it sees it */
	uint32_t path_len;
	uint32_t id;	   /* module id in this epoch; never reused */
	uint32_t mod_kind; /* enum cpa_module_kind */
	uint32_t refs;	   /* umaps pointing here */
	uint64_t last_use; /* ns, for LRU eviction */
	/* Identity, filled at the first resolved pc (ucache__find). */
	bool identified; /* build-id read (or the file has none) */
	bool def_sent;	 /* MODULE record emitted in this epoch (as it is now) */
	bool cfi_tried;	 /* table build attempted: no retry */
	bool gone;	 /* no way left to open it: deleted (or replaced) */
	bool in_bids;	 /* in the build-id table */
	/* Our own path to it led to this very file (dev + inode) at this
	 * time (0: never): see bin_own_view(). */
	uint64_t own_view_ns;
	/* Known by build-id only (dev 0): our path held another build at this
	 * time (bin_own_path(), looked at again a second later). */
	uint64_t own_miss_ns;
	uint64_t ident_retry_ns; /* open failed (process gone): next try not before */
	uint64_t cfi_retry_ns;
	uint8_t build_id_len;
	uint8_t build_id[CPA_BUILD_ID_MAX];
	uint32_t def_pid; /* a process that maps it, for /proc/PID/map_files */
	uint64_t def_start;
	uint64_t def_end;
	struct ucfi *cfi; /* shared unwind table, NULL until built */
};

/* Pages per process known to be in no executable mapping as of refresh_ns. */
#define UCACHE_NEG_SLOTS 16

struct uproc {
	struct uproc *hnext;
	uint32_t pid;
	uint32_t n_maps;
	uint32_t cap_maps;
	uint32_t last_hit;   /* index of the last map a pc fell in */
	struct umap *maps;   /* executable mappings, sorted by start */
	uint64_t refresh_ns; /* last maps read; 0 = never (or invalidated by exec) */
	uint64_t last_use;
	uint64_t dead_ns; /* exit seen at this time; 0 = alive */
	/* time_ns of the sample being resolved: the history's lookup time
	 * (0 = none: /proc only). Set by the caller before its finds. */
	uint64_t sample_ns;
	/* Negative cache: pc >> 12 of pages that missed a read. Every re-read
	 * keeps only those that still miss, so all of them hold as of refresh_ns. */
	uint64_t neg[UCACHE_NEG_SLOTS];
	uint32_t n_neg;
	uint32_t neg_next; /* slot replaced next when full */
	/* Re-reads in a row that did not resolve the pc that caused them: the
	 * throttle is refresh_ns << miss_level (capped). Reset by a useful
	 * re-read and by exec. */
	uint32_t miss_level;
	bool read_failed; /* the last read at refresh_ns failed: maps are older */
	/* The adaptive stack copy (unwindd.c ucopy_learn): bytes asked of
	 * capture (0 = its start size), the deepest need of complete walks in
	 * the current window and their count, the most bytes one of them had
	 * (the BPF side clamps copies at the stack top); the floor a lowering
	 * proved too low raised, and how often that happened (each time the
	 * window doubles); when the last hint went out. */
	uint32_t ucopy;
	uint32_t ucopy_need;
	uint32_t ucopy_walks;
	uint32_t ucopy_copied;
	uint32_t ucopy_floor;
	uint32_t ucopy_misses;
	uint64_t ucopy_sent_ns;
};

/* What a pc maps to. */
struct uloc {
	struct ubin *bin; /* NULL for anonymous memory */
	const struct umap *map;
	uint64_t file_off; /* pc - start + pgoff; the pc itself for anon */
	uint32_t module_id;
	uint32_t flags; /* CPA_UF_ANON, CPA_UF_VDSO */
};

struct ucache_opts {
	uint64_t max_bytes;	 /* cap on everything below; 0 = none (ucache__set_max_bytes) */
	uint64_t refresh_ns;	 /* at most one maps re-read per pid per this */
	uint64_t refresh_ip_ns;	 /* the same when an interrupted ip missed */
	uint64_t refresh_max_ns; /* cap of the backed-off throttle; 0 = 5 s */
	uint64_t neg_ttl_ns;	 /* trust a known-missing page this long after a read; 0 = 30 s */
	uint64_t dead_grace_ns;	 /* keep an exited pid's maps this long */
	uint64_t idle_ns;	 /* forget pids without samples this long */
	const char *proc_root;	 /* "/proc"; tests point it at fixtures */
	bool seed;		 /* seed the history from every process in proc_root */
	struct shm_stage *st;	 /* counters, may be NULL */
};

struct ucache;

int ucache__new(const struct ucache_opts *o, struct ucache **ret);
void ucache__free(struct ucache *c);

/* The pid's entry, created empty on first sight (maps read on first find).
 * NULL only when out of memory. */
struct uproc *ucache__proc(struct ucache *c, uint32_t pid, uint64_t now_ns);
/* Existing entry or NULL. */
struct uproc *ucache__proc_peek(struct ucache *c, uint32_t pid);

/*
 * Resolve pc: 0, or -ENOENT when no executable mapping holds it. A miss
 * re-reads the maps unless the pc's page already missed a read within
 * neg_ttl_ns, or the last read is younger than the pid's throttle:
 * refresh_ns, doubled by every re-read that did not resolve its pc, up to
 * refresh_max_ns. A pc that misses a read of this same instant (now_ns, one
 * batch) is remembered as missing without another read.
 */
int ucache__find(struct ucache *c, struct uproc *p, uint64_t pc, uint64_t now_ns, struct uloc *ret);
/* The same for an interrupted ip: it was mapped when the sample was taken,
 * so a miss means the cached maps are stale (dlopen, new JIT code), not a
 * bad pc, and the re-read is throttled by refresh_ip_ns (backed off and
 * negatively cached the same way: short-lived JIT code is gone for good). */
int ucache__find_ip(struct ucache *c, struct uproc *p, uint64_t pc, uint64_t now_ns,
		    struct uloc *ret);

/* Re-read /proc/PID/maps now (ucache__find does this when it must). */
int ucache__refresh(struct ucache *c, struct uproc *p, uint64_t now_ns);

/* Unwind table of the binary at loc (built on first use, shared with
 * binaries of the same build-id and file inode), or NULL when there is
 * none or unwindd was built without CFI. */
const struct cfi_table *ucache__cfi(struct ucache *c, struct uproc *p, const struct uloc *loc);
/* After ucache__cfi() of loc: what a Go binary's pclntab says of the code
 * there (enum unw_go; *ret_sp as ugo__at()), UNW_GO_NONE for other code. */
unsigned int ucache__go(const struct uloc *loc, int32_t *ret_sp);

/* exit: keep the maps dead_grace_ns for samples still queued, then free
 * (now_ns: the caller's clock; time_ns: the exit's, the samples' clock).
 * exec: forget the /proc maps; the next sample re-reads them (the history
 * follows the CPA_MAP_EXEC event instead, which is earlier); mnt_ns (0:
 * unknown) is the mount namespace it runs in, where its paths are looked up
 * once it is gone (common/procroot.h). */
void ucache__task_exit(struct ucache *c, uint32_t pid, uint64_t now_ns, uint64_t time_ns);
void ucache__task_exec(struct ucache *c, uint32_t pid, uint32_t mnt_ns);

/* One mapping event into the history: 0, -EINVAL (malformed), -ENOMEM. */
int ucache__map_event(struct ucache *c, const struct cpa_map_event *ev, const char *path);

/* Reap dead and idle processes, then evict down to the cap. */
void ucache__sweep(struct ucache *c, uint64_t now_ns);
/* A new cap (cpa ctl mem): evicts down to it now when over. */
void ucache__set_max_bytes(struct ucache *c, uint64_t max_bytes);

/* A new dictionary epoch: every cached binary gets a new id from 1 and its
 * definition is sent again on its next use. */
void ucache__epoch_reset(struct ucache *c);
/* The id the next new binary will get. */
uint32_t ucache__next_id(const struct ucache *c);

uint64_t ucache__bytes(const struct ucache *c);
/* The mapping history (tests, dumps). */
struct maphist *ucache__history(const struct ucache *c);
uint32_t ucache__nr_procs(const struct ucache *c);
uint32_t ucache__nr_bins(const struct ucache *c);

#endif /* CPA_UNWINDD_UCACHE_H */
