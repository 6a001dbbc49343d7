/* SPDX-License-Identifier: MIT */
/*
 * Private to the store writer: the dictionary journal. Every definition the
 * writer takes from symd is appended to <dir>/.storer-dict-<epoch> through
 * the write queue, so a restarted storer replays the newest journal and
 * still knows the ids symd defined before (symd does not re-send them).
 *
 *   .storer-dict-<epoch, 20 digits>: [jr_hdr 32][jr_rec 12 + payload]...
 *   payload = the shm record (struct cpa_*_def) + its string or frame ids
 *
 * A torn tail (crash mid-append) ends the replay; the next record
 * overwrites it. A new epoch (DICT_RESET) starts a new file and removes the
 * old ones: their ids mean nothing to the new symd.
 */
#ifndef CPA_STORE_JOURNAL_PVT_H
#define CPA_STORE_JOURNAL_PVT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "store_fmt.h"
#include "store_wq_pvt.h"

struct store_journal {
	bool on, replaying, full;
	char dir[PATH_MAX];
	struct sfile *f;
	uint64_t off, epoch;
	struct sbuf pend;   /* records appended since the last flush */
	uint64_t max_bytes; /* the storer's share of its cap; 0 = JR_MAX_BYTES */
};

/*
 * Journal in dir and replay its newest file into w (through the
 * store_writer__def_*() calls, which append nothing while replaying).
 * Returns the number of definitions replayed or -errno.
 */
int store_journal__open(struct store_journal *j, const char *dir, struct store_writer *w);
/* Start a fresh file for epoch, removing older ones. */
int store_journal__start(struct store_journal *j, struct store_wq *q, uint64_t epoch);
/* Append a record of type (a + b as payload) to the pending buffer. */
void store_journal__append(struct store_journal *j, uint16_t type, const void *a, uint32_t alen,
			   const void *b, uint32_t blen);
/* A full disk: free the journal's space now (truncate, remove) and append
 * nothing more until the next epoch. Returns the bytes it held. */
uint64_t store_journal__give_up(struct store_journal *j);
/* Queue the pending records for writing. */
void store_journal__flush(struct store_journal *j, struct store_wq *q);
void store_journal__free(struct store_journal *j);

#endif /* CPA_STORE_JOURNAL_PVT_H */
