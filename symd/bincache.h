/* SPDX-License-Identifier: MIT */
/*
 * symd: binaries by build-id + dev+ino (or dev+ino), least recently used
 * evicted first under a byte budget, failures cached (bincache.c).
 */
#ifndef CPA_SYMD_BINCACHE_H
#define CPA_SYMD_BINCACHE_H

#include <stdint.h>

#include "elfsym.h"

struct bincache;
struct bincache_stats {
	uint64_t bytes;
	uint64_t evictions;
	uint64_t rejected;
	uint64_t open_fail;
	uint64_t loads;		/* load attempts (each may take up to SYMD_BIN_TIME_NS) */
	uint64_t loaded;	/* ... of them that gave a binary */
	uint64_t bid_conflicts; /* files loaded whose build-id another one with other symbols has */
	uint64_t idle_drops;	/* entries not used for the idle time, dropped */
	/* loads that gave a binary for a key that failed before (or maybe did: the
	 * record of failures overflowed): only those change an answer given */
	uint64_t refreshed;
};
int bincache__new(uint64_t budget, const struct symd_paths *paths, struct bincache **ret);
void bincache__free(struct bincache *c);
/* Binary of a module (loaded on first use; failures cached for a while).
 * NULL when it cannot be had. The pointer is valid until the next get.
 * now_ns 0: read the clock only if needed (not on a hit). */
struct symbin *bincache__get(struct bincache *c, const struct symd_file_ref *ref, uint64_t dev,
			     uint64_t ino, uint64_t now_ns);
void bincache__stats(const struct bincache *c, struct bincache_stats *ret);
/* The cache's clock (the tick's, CLOCK_MONOTONIC): entries no get asked for since
 * idle_ns before now_ns go, binaries of processes long gone above all (a later get loads
 * them again). Hits are stamped with the clock of the last call, so no get reads it. */
void bincache__idle(struct bincache *c, uint64_t now_ns, uint64_t idle_ns);
/* A new byte budget (the perf maps' share moved), evicting down to it now. */
void bincache__set_budget(struct bincache *c, uint64_t budget);
/* Drop the binary with this build-id (a debug file arrived): the next get
 * loads it again. */
void bincache__forget(struct bincache *c, const uint8_t *build_id, uint8_t len);

#endif /* CPA_SYMD_BINCACHE_H */
