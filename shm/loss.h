/* SPDX-License-Identifier: MIT */
/*
 * Pending LOSS records of a stage: samples it dropped itself, and upstream
 * LOSS records it could not forward at once, aggregated by (stage, reason,
 * kind) until the output ring takes them. Used by every stage that passes
 * sequenced records on (unwindd, symd); capture numbers its own LOSS records
 * and keeps per-reason slots (capture/cap_emit.h).
 *
 * The one behaviour (docs/pipeline.md, "Loss records"):
 * - a record's weight is its weight, or its count when it has none (the
 *   contract in records.h: "else = count");
 * - the aggregate keeps the highest seq and time folded in;
 * - a full table folds the loss into an entry of the same (stage, reason),
 *   else into the last entry: the count and weight always survive, only the
 *   kind (or reason) blurs;
 * - flushing sends the entries oldest seq first (stable: ties keep arrival
 *   order), so seqs leave the stage in order.
 *
 * Library code: no logging.
 */
#ifndef CPA_SHM_LOSS_H
#define CPA_SHM_LOSS_H

#include <stdint.h>

#include "records.h"
#include "stage.h"

#define SHM_LOSS_SLOTS 32 /* distinct (stage, reason, kind) pending */

struct shm_loss_table {
	struct cpa_loss ent[SHM_LOSS_SLOTS];
	unsigned int n;
};

/* Fold a loss of count samples into the table. 0, or -ENOSPC when the table
 * was full and it joined another entry (nothing is lost but the detail). */
int shm_loss__add(struct shm_loss_table *t, uint32_t stage, uint32_t reason, uint32_t kind,
		  uint64_t count, uint64_t weight, uint64_t seq, uint64_t time_ns);

/* Send one record: 0, or -errno (e.g. -ENOBUFS: no room) to stop the flush. */
typedef int (*shm_loss_emit_fn)(void *ctx, const struct cpa_loss *l);

/* Emit the pending entries oldest seq first until emit fails. 0 when none is
 * left, else emit's error (the rest stays pending). */
int shm_loss__flush(struct shm_loss_table *t, shm_loss_emit_fn emit, void *ctx);

/* Samples in the pending entries (their counts summed). */
uint64_t shm_loss__count(const struct shm_loss_table *t);

struct shm_stage;

/* What a SIGKILL would take: the pending count as gauge gauge_idx of the
 * stage's block, published each time the input it stands for is released. */
void shm_loss__publish(const struct shm_loss_table *t, struct shm_stage *st,
		       unsigned int gauge_idx);

/* At start: the count a killed predecessor published, folded into t as one
 * loss (stage, reason lost_idx, on-CPU, weight = count, seq, time_ns) and
 * added to counter lost_idx. Returns it (0: nothing was pending). The gauge
 * keeps it until the next publish, so a kill before that carries it again. */
uint64_t shm_loss__carry(struct shm_loss_table *t, struct shm_stage *st, unsigned int gauge_idx,
			 uint32_t stage, unsigned int lost_idx, uint64_t seq, uint64_t time_ns);

struct shm_arena;

/* The highest seq consumer id passed on, as the arena shows it: its input
 * ring's mark, its output ring's mark and the seqs still in that ring. */
uint64_t shm_loss__passed(struct shm_arena *a, enum shm_stage_id id);

/*
 * What consumer id held when it was killed at stop (docs/pipeline.md,
 * "Stopping"), read from the arena after its death: every record
 * of its input ring not released whose seq is above the highest it passed
 * on (the higher of shm_loss__passed() and stored): samples as one loss (id,
 * its lost_at_stop reason) per kind, LOSS records as themselves; and its
 * pending aggregates (its loss_pending gauge, seq = that highest + 1).
 * stored: the highest seq it passed on beyond the arena, 0 when none; for
 * the sink, what its store's tail holds (store_root__stored_seq() from
 * shm_loss__passed(), the cut-off a restarted storer resumes after): a
 * storer killed after a block's write completed and before its release
 * left the mark below that block. Folded into t; the samples are added to
 * counter lost_at_stop. Returns the count folded in.
 */
uint64_t shm_loss__held(struct shm_arena *a, enum shm_stage_id id, uint64_t stored,
			struct shm_loss_table *t);

static inline unsigned int shm_loss__pending(const struct shm_loss_table *t)
{
	return t->n;
}

#endif /* CPA_SHM_LOSS_H */
