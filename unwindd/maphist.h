/* SPDX-License-Identifier: MIT */
/*
 * Per-process mapping history with timestamps: "what was mapped at address
 * A in pid P at time T", fed by the kernel's mapping events (CPA_REC_MAP,
 * docs/unwindd.md) and seeded from /proc at start. A sample is resolved
 * against the mappings in force at its own time, so it still resolves when
 * its process exited (or exec'd, or mapped something else there) before
 * unwindd got to it.
 *
 *   pid --hash--> mh_proc { mh_map[]: umap + [t_from, t_to) }
 *
 * Rules (the same as perf's): a new mapping ends every mapping of the pid
 * it overlaps at its time (the parts outside it stay, as new entries); exec
 * ends them all; fork starts the child with the parent's mappings in force
 * then; exit keeps everything until maphist__sweep() is past the exit by the
 * grace. Events may arrive a little out of order: a mapping is also cut at
 * the start of a later one already known over the same range, and at a
 * later exec already known. Times are the samples' clock (CLOCK_REALTIME ns).
 *
 * The binary pointers (umap.bin) are the caller's: maphist takes and drops
 * references through the ref callback, never looks inside.
 */
#ifndef CPA_UNWINDD_MAPHIST_H
#define CPA_UNWINDD_MAPHIST_H

#include <stdbool.h>
#include <stdint.h>

struct ubin;

enum umap_kind {
	UMAP_FILE,
	UMAP_ANON,
	UMAP_VDSO,
	UMAP_VSYSCALL,
};

/* One executable mapping. */
struct umap {
	uint64_t start;
	uint64_t end;
	uint64_t pgoff;
	struct ubin *bin; /* UMAP_FILE only */
	uint32_t kind;	  /* enum umap_kind */
	uint32_t _pad;
};

#define MH_FOREVER UINT64_MAX

/* delta +1: a new entry points at bin; -1: an entry that did is gone. */
typedef void (*maphist_ref_fn)(void *ctx, struct ubin *bin, int delta);

struct maphist;

int maphist__new(maphist_ref_fn ref, void *ctx, struct maphist **ret);
void maphist__free(struct maphist *h);

/* m is in force in pid from t on (until something replaces it). -ENOMEM. */
int maphist__mmap(struct maphist *h, uint32_t pid, uint64_t t, const struct umap *m);
/* pid exec'd at t: its mappings before t end there. */
int maphist__exec(struct maphist *h, uint32_t pid, uint64_t t);
/* pid was forked from ppid at t (a reused pid: the old process's mappings
 * end at t). */
int maphist__fork(struct maphist *h, uint32_t pid, uint32_t ppid, uint64_t t);
/* The whole process pid is gone at t. */
void maphist__exit(struct maphist *h, uint32_t pid, uint64_t t);

/*
 * The mapping holding addr in pid at time t, or NULL. A pc no mapping holds
 * at t, within 20 ms after an exec, is looked up in the image the exec
 * replaced (a sample taken inside execve past the point of no return keeps
 * the old image's registers); *ret_pre_exec (may be NULL) says so.
 */
const struct umap *maphist__find(struct maphist *h, uint32_t pid, uint64_t addr, uint64_t t,
				 bool *ret_pre_exec);
/* pid has a history (else the caller reads /proc). */
bool maphist__has(const struct maphist *h, uint32_t pid);

/* Forget mappings that ended, and processes that exited, more than grace_ns
 * before now (the samples' clock: the newest sample time seen). */
void maphist__sweep(struct maphist *h, uint64_t now, uint64_t grace_ns);

uint64_t maphist__bytes(const struct maphist *h);
uint32_t maphist__nr_procs(const struct maphist *h);
/* Entries of pid (in force or not), for tests and dumps. */
uint32_t maphist__nr_maps(const struct maphist *h, uint32_t pid);

#endif /* CPA_UNWINDD_MAPHIST_H */
