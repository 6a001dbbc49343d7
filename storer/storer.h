/* SPDX-License-Identifier: MIT */
/*
 * The storer stage: consumer of SHM_RING_SYMD, producer of the on-disk store.
 * The batch and tick functions are separate from main() so tests can drive
 * them in-process over a real arena ring.
 */
#ifndef CPA_STORER_H
#define CPA_STORER_H

#include <stdbool.h>
#include <stdint.h>

#include "shm/ring.h"
#include "shm/stage.h"
#include "shm/stage_loop.h"
#include "store.h"

#define STORER_BATCH	  256
#define STORER_WAKE_BYTES (128u << 10)
#define STORER_IDLE_MS	  2500	       /* longest sleep while writes are in flight */
#define STORER_TRIM_FREED (4ull << 20) /* free heap bytes: heap_trim__maybe() */

/* The stage object; opaque. It reads in and writes through w, which stay
 * the caller's (free the storer first). */
struct storer;

/* Its dedup starts after the higher of in's mark and the highest seq the tail
 * of w's run's store holds (store_writer__stored_seq(): set w's run id
 * first). -EINVAL: CPA_FAULT_KILL_AFTER_COMMIT is malformed (shm/fault.h). */
int storer__new(struct shm_stage *st, struct shm_ring_cons *in, struct store_writer *w,
		struct storer **ret);
/* The daemon's new hook (common/daemon.h): the store writer from the config
 * block (its root, the run's facts, retention), its dictionary journal, and
 * the storer over ctx->in, owning the writer. Logs what failed. */
int storer__open(const struct shm_stage_ctx *ctx, void **ret);
/* The monitor, once a storer killed at stop is gone: append n loss rows to
 * the store of cfg with a writer of its own (docs/pipeline.md,
 * "Stopping"). 0 or -errno (-EBUSY: the store is locked). */
int storer__append_losses(const struct cpa_config *cfg, const struct cpa_loss *l, unsigned int n);
void storer__free(void *s);

/* Take up to max records from the input. Returns how many (0 = empty) or
 * -EBADMSG when the ring itself is corrupt. */
int storer__batch(void *s, unsigned int max);
/* Close due blocks, reap writes, release input that is in the store, sync
 * counters. now_ns is CLOCK_REALTIME. Returns 0: a failure is logged and
 * counted, and the next tick tries again. */
int storer__tick(void *s, uint64_t now_ns);
/* Close the open block, wait for the writes (fsync if sync) and release. */
int storer__finish(struct storer *s, bool sync);
/* Where the dedup started: seq <= this was stored by an earlier life. */
uint64_t storer__resume_seq(const struct storer *s);
/* Input bytes peeked since the last release (held by the open block). */
uint64_t storer__unreleased(const struct storer *s);
/* wake_bytes for shm_ring__wait_sc(): STORER_WAKE_BYTES of new input while a
 * block is open, else 1 (any record). */
uint64_t storer__wake_bytes(const struct storer *s);
/* How long the consumer may sleep (ms) before the writer has work due: the open
 * block's deadline, retention, at most STORER_IDLE_MS while writes are in
 * flight; -1: nothing is due before input comes. */
int storer__sleep_ms(const struct storer *s, uint64_t now_ns);
/* The loop's wait_for hook: the two above. */
void storer__wait_for(void *s, uint64_t now_ns, uint64_t *ret_wake_bytes, int *ret_ms);
/* The daemon's finish hook: storer__finish(), with an fsync unless a SIGTERM
 * from a live monitor (a restart) ended the loop. */
int storer__close(void *s, enum shm_stage_end how);

#endif /* CPA_STORER_H */
