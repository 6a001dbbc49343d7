// SPDX-License-Identifier: MIT
/*
 * Storer stage logic: records from symd into the store writer.
 *
 * Exactly once: input space is released (with the highest seq as the ring's
 * consumer mark) only once the block holding those samples was closed and
 * its write completed (into the page cache: io_uring punts ext4's buffered
 * writes to an io-wq worker, and a SIGKILL cancels a write still queued
 * there), or at exit after the final flush. The release waits up to
 * STORER_LAND_MS for the completion, so the mark follows the write closely;
 * past that it stays pending and the next wakeups (STORER_LAND_MS apart at
 * most) reap and release it. A kill in between leaves the mark below a block
 * that is in the store: a restarted storer skips seq <= the higher of the
 * mark and the highest seq the complete blocks at the store's tail hold
 * (store_writer__stored_seq()), so it does not store that block twice; a
 * restarted symd's replayed batch is skipped too (shm/dedup.h). When a record
 * opens the next block, the input is released only up to that record
 * (shm_ring__release_upto_mark_sc()), so a crash loses nothing that is not
 * in a written block.
 * Records the store refused (no dir or segment could be made: a full disk)
 * are counted by the writer and stored as a [lost: storer write_errors] row
 * ([lost: storer io_errors] for EIO) once it can write again; they are
 * released meanwhile, so symd keeps going.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/heaptrim.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "shm/counters.h"
#include "shm/dedup.h"
#include "shm/fault.h"
#include "shm/records.h"
#include "storer.h"

#define STORER_LAND_MS 100 /* wait for a block's write before its release */
#define STORER_RELS    8   /* releases waiting for their writes */

struct storer {
	struct shm_stage *st;
	struct shm_ring_cons *in;
	struct store_writer *w;
	bool own_w; /* storer__open()'s: freed with us */
	/* Copies from an earlier life of ours or of symd (shm/dedup.h); dd.high
	 * is the highest seq taken into the store (open block included). */
	struct shm_dedup dd;
	/* dd starts at the higher of the ring's mark and the highest seq the
	 * store's tail holds (store_writer__stored_seq()). */
	uint64_t mark, stored;
	uint64_t unreleased; /* input bytes peeked since the last release */
	uint64_t rec_pos;    /* ring position of the record at hand */
	uint32_t rec_bytes;  /* its size in the ring */
	bool block_closed;   /* a block closed since the last release */
	/* close_before() closed a block in this batch: release up to rel_pos,
	 * with mark rel_mark, at its end (after the writes are submitted). */
	bool rel_pending;
	uint64_t rel_pos, rel_mark;
	/* Releases waiting for the writes kicked before them (barrier, from
	 * store_writer__kick()), oldest first. */
	struct storer_rel {
		uint64_t barrier, pos, mark;
	} rel[STORER_RELS];
	unsigned int nrel;
	/* CPA_FAULT_KILL_AFTER_COMMIT=storer:N:G (shm/fault.h): this life dies
	 * at its N-th release that raises the mark, after the writes landed and
	 * before the release; the releases left. */
	unsigned int fault_left;
	int fail_err; /* the store failure reported and not yet recovered, 0 = none */
	struct store_writer_stats synced; /* writer stats already added to the counters */
	int last_logged_err;
	uint64_t last_log_ns;
	uint64_t cap_mb;       /* mem_limit_mb applied */
	struct heap_trim trim; /* common/heaptrim.h */
	/* Records taken, and how many and when (the loop's clock) at the last
	 * wait: their rate tells a stretched batch (storer__wait_for()). */
	uint64_t taken, wait_taken, wait_ns;
};

int storer__new(struct shm_stage *st, struct shm_ring_cons *in, struct store_writer *w,
		struct storer **ret)
{
	struct storer *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	r = shm_fault__kill_after_commit(
		SHM_STAGE_STORER, st ? __atomic_load_n(&st->generation, __ATOMIC_RELAXED) : 0);
	if (r < 0) {
		free(s);
		return r;
	}
	s->fault_left = (unsigned int)r;
	s->st = st;
	s->in = in;
	s->w = w;
	/* A life killed between a block's landed write and its release left
	 * the mark below what the store holds: skip up to the store's seq. */
	s->mark = shm_ring__mark_sc(in);
	s->stored = store_writer__stored_seq(w, s->mark);
	shm_dedup__init(&s->dd, MAX(s->mark, s->stored));
	*ret = s;
	return 0;
}

void storer__free(void *obj)
{
	struct storer *s = obj;

	if (s && s->own_w)
		store_writer__free(s->w);
	free(s);
}

static void writer_opts(const struct cpa_config *cfg, struct store_writer_opts *ret)
{
	struct store_writer_opts o = {0};

	o.root = cfg->store_dir[0] ? cfg->store_dir : "/var/log/cpa";
	o.cpu_num = cfg->nr_cpus;
	o.freq = cfg->freq;
	o.record_interval = cfg->record_interval_s ? cfg->record_interval_s : 1;
	o.persistent_day = cfg->persistent_day;
	o.stack_size = cfg->stack_size;
	o.kernel_stack = cfg->flags & CPA_CFG_KERNEL_STACK_ONLY;
	o.record_env_name = cfg->record_env_name;
	for (uint32_t i = 0; i < cfg->nr_probes && i < STORE_PROBES_MAX; i++)
		o.probes[o.nr_probes++] = cfg->probes[i];
	o.max_store_bytes = (uint64_t)cfg->max_store_size_mb << 20;
	*ret = o;
}

int storer__append_losses(const struct cpa_config *cfg, const struct cpa_loss *l, unsigned int n)
{
	struct store_writer_opts o;
	struct store_writer *w = NULL;
	int r;

	writer_opts(cfg, &o);
	r = store_writer__new(&o, &w);
	if (r < 0)
		return r;
	store_writer__set_run_id(w, cfg->start_realtime_ns);
	for (unsigned int i = 0; i < n && r >= 0; i++)
		r = store_writer__add_loss(w, &l[i]);
	if (r >= 0)
		r = store_writer__close_block(w);
	/* Waits for the write and fsyncs. */
	store_writer__free(w);
	return r < 0 ? r : 0;
}

int storer__open(const struct shm_stage_ctx *ctx, void **ret)
{
	const struct cpa_config *cfg = ctx->cfg;
	struct store_writer_opts o;
	struct store_writer *w = NULL;
	struct storer *s;
	int r;

	writer_opts(cfg, &o);
	r = store_writer__new(&o, &w);
	if (r == -EBUSY) {
		int pid = 0;
		int fd = store_root__lock(o.root, &pid);

		if (fd >= 0)
			close(fd);
		return log_error_errno(
			r,
			"store '%s' is in use by another cpa monitor (storer pid %d): "
			"one monitor per store dir, use another --store_dir",
			o.root, pid);
	}
	if (r < 0)
		return log_error_errno(r, "store writer for '%s' (io_uring + zstd): %m", o.root);
	store_writer__set_run_id(w, cfg->start_realtime_ns);
	r = store_writer__journal_open(w, o.root);
	if (r < 0)
		log_warn_errno(
			r, "dictionary journal in '%s': %m (a restart will show [unknown stack])",
			o.root);
	else if (r > 0)
		log_info("replayed %d symd definitions from the dictionary journal", r);
	r = storer__new(ctx->st, ctx->in, w, &s);
	if (r == -EINVAL) {
		store_writer__free(w);
		return log_error_errno(r, "%s: malformed", SHM_FAULT_KILL_ENV);
	}
	if (r < 0) {
		store_writer__free(w);
		return log_error_errno(r, "set up: %m");
	}
	if (s->fault_left)
		log_warn("test knob %s: this life dies before its release %u", SHM_FAULT_KILL_ENV,
			 s->fault_left);
	s->own_w = true;
	if (s->stored > s->mark)
		log_info("writing to '%s', resuming after seq %llu: the store holds it, the ring's "
			 "mark is %llu (killed before a release: what was stored is skipped)",
			 o.root, (unsigned long long)s->stored, (unsigned long long)s->mark);
	else
		log_info("writing to '%s', resuming after seq %llu", o.root,
			 (unsigned long long)storer__resume_seq(s));
	*ret = s;
	return 0;
}

uint64_t storer__resume_seq(const struct storer *s)
{
	return s->dd.resume;
}

uint64_t storer__unreleased(const struct storer *s)
{
	return s->unreleased;
}

/*
 * Log a store failure once per condition: again only when the error changes
 * (or after an hour), and once when the store is writable again
 * (storer_check_recovered()). The counters have the rest.
 */
static void storer_log_err(struct storer *s, int err, const char *what)
{
	uint64_t now = clock_ns(CLOCK_REALTIME);

	if (err == s->last_logged_err && now - s->last_log_ns < 3600 * NSEC_PER_SEC)
		return;
	s->last_logged_err = err;
	s->last_log_ns = now;
	s->fail_err = err;
	errno = -err;
	if (!*store_writer__dir(s->w))
		log_error("%s: no store dir could be made: %m (counting what is lost, still "
			  "consuming, retrying every second)",
			  what);
	else
		log_error("%s in '%s': %m (counting what is lost, still consuming, retrying "
			  "every second)",
			  what, store_writer__dir(s->w));
}

static void storer_check_recovered(struct storer *s, const struct store_writer_stats *ws)
{
	uint64_t lost = ws->refused_samples + ws->lost_samples_dropped + ws->lost_samples_discarded;

	if (!s->fail_err || !store_writer__healthy(s->w))
		return;
	if (!lost)
		log_info("store '%s' is writable again: nothing lost (the failed writes went "
			 "through on a retry)",
			 store_writer__dir(s->w));
	else
		log_info("store '%s' is writable again: %llu block(s) given up and %llu sample(s) "
			 "refused meanwhile, %llu sample(s) in all, stored as loss rows: %llu "
			 "[lost: storer io_errors], %llu [lost: storer write_errors]",
			 store_writer__dir(s->w), (unsigned long long)ws->dropped_blocks,
			 (unsigned long long)ws->refused_samples, (unsigned long long)lost,
			 (unsigned long long)ws->lost_io, (unsigned long long)(lost - ws->lost_io));
	s->fail_err = 0;
	s->last_logged_err = 0;
}

static void cnt(struct storer *s, unsigned int idx, uint64_t n)
{
	if (s->st)
		shm_stage__cnt_add(s->st, idx, n);
}

static void release(struct storer *s);

/*
 * The record at hand belongs to the next block: close the current one and
 * release the input before the record at hand, with the seqs the closed
 * block holds. The record at hand stays in the ring: a crash right now
 * loses nothing (a restart reads it again, its seq is above the mark).
 */
static void close_before(struct storer *s, uint64_t time_ns)
{
	if (store_writer__fits(s->w, time_ns))
		return;
	if (store_writer__close_block(s->w) > 0) {
		/* Released at the end of the batch, after one submission of
		 * what the batch closed (storer__batch()). */
		s->rel_pos = s->rec_pos;
		s->rel_mark = s->dd.high;
		s->rel_pending = true;
		s->unreleased = s->rec_bytes;
		s->block_closed = false;
	}
}

/*
 * A sequenced record: skip it if it is a copy of one already stored (by us
 * or an earlier life), else close the block before it if it belongs to the
 * next one (releasing the input with the seqs that block holds), and only
 * then count its seq, so the released mark never covers the record at hand.
 */
static bool admit(struct storer *s, uint64_t seq, uint64_t time_ns, bool loss)
{
	if (shm_dedup__copy(&s->dd, seq, loss)) {
		cnt(s, SHM_CNT_DROP_DUP, 1);
		return false;
	}
	close_before(s, time_ns);
	shm_dedup__pass(&s->dd, seq);
	return true;
}

static int take(struct storer *s, const struct shm_msg *m)
{
	int r = 0;

	switch (m->type) {
	case CPA_REC_DICT_RESET: {
		const struct cpa_dict_reset *d = m->data;

		if (m->len < sizeof(*d))
			return -EBADMSG;
		if (d->flags & CPA_RESET_START)
			shm_dedup__producer_start(&s->dd, d->resume_seq);
		store_writer__dict_reset(s->w, d->epoch);
		return 0;
	}
	case CPA_REC_STR: {
		const struct cpa_str_def *d = m->data;

		if (!cpa_rec_str_ok(d, m->len))
			return -EBADMSG;
		return store_writer__def_str(s->w, d, (const char *)(d + 1));
	}
	case CPA_REC_MODULE: {
		const struct cpa_module_def *d = m->data;

		if (!cpa_rec_module_ok(d, m->len))
			return -EBADMSG;
		return store_writer__def_module(s->w, d, (const char *)(d + 1));
	}
	case CPA_REC_FRAME: {
		const struct cpa_frame_def *d = m->data;

		if (m->len < sizeof(*d))
			return -EBADMSG;
		return store_writer__def_frame(s->w, d);
	}
	case CPA_REC_STACK: {
		const struct cpa_stack_def *d = m->data;

		if (!cpa_rec_stack_ok(d, m->len))
			return -EBADMSG;
		return store_writer__def_stack(s->w, d, (const uint32_t *)(d + 1));
	}
	case CPA_REC_SAMPLE_OUT: {
		const struct cpa_sample_out *d = m->data;

		if (m->len < sizeof(*d) || d->kind >= CPA_KIND_MAX)
			return -EBADMSG;
		if (!admit(s, d->seq, d->time_ns, false))
			return 0;
		r = store_writer__add_sample(s->w, d);
		if (!r) {
			cnt(s, STO_CNT_SAMPLES, 1);
			cnt(s, SHM_CNT_OUT, 1);
		}
		return r;
	}
	case CPA_REC_LOSS: {
		const struct cpa_loss *d = m->data;

		if (m->len < sizeof(*d) || d->stage >= SHM_STAGE_MAX)
			return -EBADMSG;
		if (!admit(s, d->seq, d->time_ns, true))
			return 0;
		r = store_writer__add_loss(s->w, d);
		if (!r)
			cnt(s, STO_CNT_LOST_SAMPLES, d->count);
		return r;
	}
	case CPA_REC_METRICS: { /* docs/metrics.md: the blocks' metrics section */
		const struct cpa_metrics *d = m->data;

		if (!cpa_rec_metrics_ok(d, m->len))
			return -EBADMSG;
		if (!admit(s, d->seq, d->time_ns, false))
			return 0;
		return store_writer__add_metrics(s->w, d, (const struct cpa_metrics_ent *)(d + 1));
	}
	case CPA_REC_EVENT: { /* docs/metrics.md "Trigger policies" */
		const struct cpa_policy_event *d = m->data;

		if (m->len < sizeof(*d))
			return -EBADMSG;
		if (!admit(s, d->seq, d->time_ns, false))
			return 0;
		return store_writer__add_event(s->w, d);
	}
	default:
		return -EBADMSG;
	}
}

/*
 * No block open: everything peeked is in a submitted block, a definition
 * (journal flushed by close_block), a duplicate, or a sample the store
 * refused or gave up and the writer counted as lost. Holding it would only
 * fill the ring while the disk is full.
 */
static void release_if_idle(struct storer *s)
{
	if (!s->block_closed && s->unreleased && !store_writer__deadline(s->w)) {
		store_writer__close_block(s->w);
		s->block_closed = true;
	}
}

/* Release the input up to the newest waiting release whose writes landed. */
static void rel_apply(struct storer *s)
{
	unsigned int i = 0;

	while (i < s->nrel && store_writer__landed(s->w, s->rel[i].barrier, 0))
		i++;
	if (!i)
		return;
	/* Blocks holding seqs are in the store, their input not yet released:
	 * a kill here must not store them twice (the test knob's point). */
	if (s->fault_left && s->rel[i - 1].mark > shm_ring__mark_sc(s->in))
		shm_fault__commit_point(&s->fault_left);
	shm_ring__release_upto_mark_sc(s->in, s->rel[i - 1].pos, s->rel[i - 1].mark);
	s->nrel -= i;
	memmove(s->rel, s->rel + i, s->nrel * sizeof(s->rel[0]));
}

/* Submit what was queued; release the input before pos, with mark, once
 * those writes completed: at once, or at a later wakeup. */
static void rel_queue(struct storer *s, uint64_t pos, uint64_t mark)
{
	uint64_t b = store_writer__kick(s->w);

	if (s->nrel == STORER_RELS)
		s->nrel--; /* the new one covers the newest */
	s->rel[s->nrel++] = (struct storer_rel){.barrier = b, .pos = pos, .mark = mark};
	(void)store_writer__landed(s->w, b, STORER_LAND_MS);
	rel_apply(s);
}

static void release(struct storer *s)
{
	s->rel_pending = false;
	s->unreleased = 0;
	s->block_closed = false;
	rel_queue(s, shm_ring__tail_sc(s->in), s->dd.high);
}

int storer__batch(void *obj, unsigned int max)
{
	struct storer *s = obj;
	unsigned int n;

	if (max > STORER_BATCH)
		max = STORER_BATCH;
	/* One record at a time (peek_batch would move our tail past the whole
	 * batch): a block that closes mid-batch releases exactly up to the
	 * record that opens the next one (close_before()). */
	for (n = 0; n < max; n++) {
		struct shm_msg m;
		uint64_t pos = shm_ring__tail_sc(s->in);
		int r = shm_ring__peek_sc(s->in, &m);

		if (r == -EAGAIN)
			break;
		if (r < 0)
			return r;
		s->rec_pos = pos;
		s->rec_bytes = (uint32_t)(shm_ring__tail_sc(s->in) - pos);
		s->unreleased += s->rec_bytes;
		cnt(s, SHM_CNT_BYTES_IN, m.len);
		r = take(s, &m);
		if (r == -EBADMSG) {
			cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		} else if (r < 0) {
			cnt(s, SHM_CNT_ERRORS, 1);
			storer_log_err(s, r, "storing a record");
		}
	}
	if (!n)
		return 0;
	cnt(s, SHM_CNT_BATCHES, 1);
	cnt(s, SHM_CNT_IN, n);
	s->taken += n;
	/* Do not sit on more than a quarter of the ring: close the block early. */
	if (s->unreleased > s->in->size / 4) {
		if (store_writer__close_block(s->w) > 0)
			s->block_closed = true;
	}
	release_if_idle(s);
	if (s->block_closed) {
		release(s);
	} else if (s->rel_pending) {
		/* The blocks closed before the record that opened the open one. */
		s->rel_pending = false;
		rel_queue(s, s->rel_pos, s->rel_mark);
	}
	return (int)n;
}

static void sync_counters(struct storer *s)
{
	struct store_writer_stats ws;

	store_writer__stats(s->w, &ws);
	/* What a new epoch or segment freed is gone once a block closed: look
	 * at the heap then, not at every wakeup (mallinfo2() walks the free
	 * lists). */
	if (ws.blocks != s->synced.blocks)
		heap_trim__maybe(&s->trim, STORER_TRIM_FREED);
	cnt(s, STO_CNT_BLOCKS, ws.blocks - s->synced.blocks);
	cnt(s, STO_CNT_BYTES_RAW, ws.bytes_raw - s->synced.bytes_raw);
	cnt(s, STO_CNT_BYTES_DISK, ws.bytes_disk - s->synced.bytes_disk);
	cnt(s, SHM_CNT_BYTES_OUT, ws.bytes_disk - s->synced.bytes_disk);
	cnt(s, STO_CNT_WRITE_ERRORS, ws.write_errors - s->synced.write_errors);
	cnt(s, STO_CNT_TRIMMED_FILES, ws.trimmed_files - s->synced.trimmed_files);
	cnt(s, STO_CNT_LOST_SAMPLES, ws.lost_recorded - s->synced.lost_recorded);
	cnt(s, SHM_CNT_ERRORS, ws.unknown_ids - s->synced.unknown_ids);
	/* Failed fsyncs are not retried: they have a line of their own. */
	if (ws.write_errors - s->synced.write_errors > ws.fsync_errors - s->synced.fsync_errors)
		storer_log_err(s, ws.last_error ? ws.last_error : -EIO,
			       "write failed, keeping the block for a retry");
	if (ws.trimmed_files != s->synced.trimmed_files) {
		char names[512];

		store_writer__take_removed(s->w, names, sizeof(names));
		log_info("retention removed %llu file(s): %s",
			 (unsigned long long)(ws.trimmed_files - s->synced.trimmed_files), names);
	}
	if (ws.dropped_blocks != s->synced.dropped_blocks && !s->synced.dropped_blocks)
		log_error("gave up a block after repeated write failures (counted, stored as "
			  "[lost: storer write_errors] or [lost: storer io_errors] once the store "
			  "takes writes again)");
	if (ws.fsync_errors != s->synced.fsync_errors)
		log_error("fsync failed in '%s': what it covered may not be on the device (the "
			  "blocks still read back are kept); new blocks go to a new segment",
			  store_writer__dir(s->w));
	if (ws.journal_given_up != s->synced.journal_given_up)
		log_error("disk full: gave up the dictionary journal (%llu bytes) for the samples; "
			  "a storer restart before symd's next epoch shows [unknown stack]",
			  (unsigned long long)(ws.journal_given_up - s->synced.journal_given_up));
	if (ws.store_gone != s->synced.store_gone)
		log_error(
			"the store dir or segment was deleted under us: started a new one in '%s' "
			"(what was written since the last check, up to a second, is gone)",
			store_writer__dir(s->w));
	storer_check_recovered(s, &ws);
	s->synced = ws;
}

/*
 * The cap is live: cpa ctl mem writes it into our block. Our memory is the dictionaries:
 * symd's definitions of its epoch (bounded by symd's epoch budget: each DICT_RESET starts
 * them over) and the segment's (a new segment past its share, store_writer__set_mem_cap()).
 * What a new epoch or segment frees goes back to the kernel once it is much.
 */
static void storer_apply_cap(struct storer *s)
{
	uint64_t mb = s->st ? __atomic_load_n(&s->st->mem_limit_mb, __ATOMIC_RELAXED) : 0;

	if (mb && mb != s->cap_mb) {
		if (s->cap_mb)
			log_info("cache cap: %llu MiB (was %llu MiB)", (unsigned long long)mb,
				 (unsigned long long)s->cap_mb);
		s->cap_mb = mb;
		store_writer__set_mem_cap(s->w, mb << 20);
	}
}

int storer__tick(void *obj, uint64_t now)
{
	struct storer *s = obj;
	int r = store_writer__tick(s->w, now);

	storer_apply_cap(s);
	if (r > 0)
		s->block_closed = true;
	else if (r < 0)
		storer_log_err(s, r, "closing a block");
	release_if_idle(s);
	if (s->block_closed)
		release(s);
	else
		rel_apply(s); /* what the tick's reap saw complete */
	sync_counters(s);
	return 0;
}

int storer__finish(struct storer *s, bool sync)
{
	uint64_t fsync_errors = s->synced.fsync_errors;
	int r = store_writer__flush(s->w, sync);

	release(s);
	sync_counters(s);
	/* A failed fsync was logged by sync_counters(). */
	if (r < 0 && s->synced.fsync_errors == fsync_errors)
		storer_log_err(s, r, "final flush");
	return r;
}

/*
 * A producer wakes a sleeping consumer when committed - released >= the
 * wake threshold, and we release only once a block's write completed: the open block's
 * records count against it. Past 64 KiB of them (a 5 s block at a few
 * hundred samples/s) every commit of symd would wake us, so the threshold
 * is STORER_WAKE_BYTES (128 KiB, an eighth of ring 2: with the quarter an
 * open block may hold, symd still has room) of new records on top of what
 * we hold. (wait_sc's own check counts from what we peeked, which only
 * makes it stricter.)
 */
uint64_t storer__wake_bytes(const struct storer *s)
{
	/* No block open: the first record opens one (and sets its deadline). */
	if (!store_writer__deadline(s->w))
		return 1;
	return s->unreleased + STORER_WAKE_BYTES;
}

/*
 * Nothing here is due before the open block's deadline (the records wait in
 * the ring, which wakes us early past STORER_WAKE_BYTES) or the next
 * retention run, so the deadline is that; STORER_IDLE_MS at most while a
 * write waits for a retry (or the store cannot be opened), STORER_LAND_MS
 * while a release waits for its writes, STORER_REAP_MS while writes are only
 * in flight: their completions (and the index entry a block's completion
 * submits) are reaped at the next wakeup, which a stretched batch brings
 * within SHM_BATCH_IDLE_MS; readers find a block
 * without its index entry meanwhile (docs/store-format.md). With no block
 * open and nothing in flight the wait has none (-1): the first record wakes
 * us (wake bytes 1). A wakeup costs as much as storing ~25 samples.
 */
#define STORER_REAP_MS SHM_BATCH_IDLE_MS

int storer__sleep_ms(const struct storer *s, uint64_t now)
{
	bool busy;
	uint64_t dl = store_writer__due(s->w, &busy);
	int cap = store_writer__healthy(s->w) ? STORER_REAP_MS : STORER_IDLE_MS;
	uint64_t ms;

	/* A release waits for its writes: back soon to reap them. */
	if (s->nrel) {
		cap = STORER_LAND_MS;
		busy = true;
	}
	if (!dl)
		return busy ? cap : -1;
	if (dl <= now)
		return 0;
	ms = (dl - now + 999999) / 1000000;
	if (busy && ms > (uint64_t)cap)
		return cap;
	return ms > INT32_MAX ? INT32_MAX : (int)ms;
}

/*
 * An idle host's pipeline delivers a stretched batch (fewer than
 * SHM_BATCH_SMALL_RECS records per SHM_BATCH_MS, shm/stage_loop.h) every
 * SHM_BATCH_IDLE_MS or so, all its records at once: the open block then
 * waits for the next delivery, which closes it, rather than for its
 * deadline a second or two later, which would be a wakeup of its own every
 * delivery. At most STORER_STRETCH_MS: past the next delivery even when
 * capture's ticks are stretched too (docs/metrics.md, "Idle host"); a reader
 * sees such a block up to that much later.
 */
#define STORER_STRETCH_MS (2 * SHM_BATCH_IDLE_MS)

void storer__wait_for(void *obj, uint64_t now_ns, uint64_t *ret_wake_bytes, int *ret_ms)
{
	struct storer *s = obj;
	uint64_t ms = s->wait_ns && now_ns > s->wait_ns ? (now_ns - s->wait_ns) / NSEC_PER_MSEC : 0;
	uint64_t n = s->taken - s->wait_taken;
	/* a delivery (records came), and a small one */
	bool busy, small = n && n * SHM_BATCH_MS < SHM_BATCH_SMALL_RECS * (ms + 1);

	*ret_wake_bytes = storer__wake_bytes(s);
	*ret_ms = storer__sleep_ms(s, now_ns);
	(void)store_writer__due(s->w, &busy);
	if (small && s->wait_ns && *ret_ms >= 0 && *ret_ms < STORER_STRETCH_MS && !busy &&
	    !s->nrel && store_writer__deadline(s->w))
		*ret_ms = STORER_STRETCH_MS;
	s->wait_taken = s->taken;
	s->wait_ns = now_ns;
}

int storer__close(void *obj, enum shm_stage_end how)
{
	/* Drain: the last block is fsynced. SIGTERM (restart): written, not
	 * synced. A corrupt input: what we have is synced. Failures are logged
	 * and counted. */
	(void)storer__finish(obj, how != SHM_END_TERM);
	return 0;
}
