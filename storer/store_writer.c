// SPDX-License-Identifier: MIT
/*
 * Store writer: takes symd's definitions and samples, aggregates samples per
 * second into an open block, and closes it into the current segment of the
 * current store dir. The jobs around it live apart:
 *
 *   symd ids --(def_*)--> symd tables --(first use in a segment)--> segment dict
 *        \--> dictionary journal (store_journal.c) for a restarted storer
 *   sample --> open block rows (store_block.c) --close--> encoded block
 *   encoded block --> write queue (store_wq.c: io_uring, retry, index entry)
 *   store dir and segment names (store_dir.c), retention (store_retention.c)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "shm/config.h"
#include "shm/stage.h"
#include "store.h"
#include "store_block_pvt.h"
#include "store_dict_pvt.h"
#include "store_dir_pvt.h"
#include "store_fmt.h"
#include "store_journal_pvt.h"
#include "store_metrics_pvt.h"
#include "store_tab.h"
#include "store_wq_pvt.h"

_Static_assert(STORE_PROBES_MAX == CPA_PROBE_MAX, "probe count agrees");

#define LATE_MAX_S	  60	     /* older than this: a block of its own */
#define SEG_MAX_BYTES	  (1u << 30) /* offsets are u32: rotate well before 4 GiB */
#define RETENTION_EVERY_S 60

struct store_writer {
	struct store_writer_opts o;
	char root[PATH_MAX];
	char env_names[CPA_ENV_LIST_MAX];
	uint64_t run_id;

	struct store_wq wq;

	struct sdir *dir; /* current store dir */
	int64_t dir_day;
	struct sfile *seg; /* current segment */
	uint32_t seg_no;
	uint64_t seg_off;
	int64_t seg_start_s;

	struct store_dict dict;
	struct block blk;

	struct store_enc enc;

	uint64_t last_retention_s;
	struct store_journal jr;
	uint64_t last_emergency_s;
	int open_err; /* last failure to open a dir/segment, retried at open_retry_ns */
	uint64_t open_retry_ns;
	bool force_new_seg; /* full disk with nothing older to trim: rotate, so the
			     * next emergency trim can give up this segment */
	uint64_t last_gone_check_s;
	int lock_fd; /* store_root__lock() on root */
	struct store_writer_stats st;
	char removed[512]; /* what retention removed since store_writer__take_removed() */
};

/* ------------------------------------------------------------ store dirs */

static int write_conf(struct store_writer *w, const char *dir)
{
	char path[PATH_MAX + 192], buf[2048 + STORE_PROBES_MAX * (CPA_PROBE_SPEC_MAX + 16)];
	_cleanup_close_ int fd = -1;
	int n;

	snprintf(path, sizeof(path), "%s/conf", dir);
	n = snprintf(buf, sizeof(buf),
		     "version: cpa-store %d.%d\n"
		     "cpu_num: %u\n"
		     "freq: %u\n"
		     "record_interval: %u\n"
		     "persistent_day: %u\n"
		     "record_env_name: %s\n"
		     "kernel_stack: %d\n"
		     "stack_size: %u\n"
		     "run_id: %llu\n",
		     STORE_VERSION_MAJOR, STORE_VERSION_MINOR, w->o.cpu_num, w->o.freq,
		     w->o.record_interval, w->o.persistent_day, w->env_names,
		     w->o.kernel_stack ? 1 : 0, w->o.stack_size, (unsigned long long)w->run_id);
	for (uint32_t i = 0; i < w->o.nr_probes && n >= 0 && (size_t)n < sizeof(buf); i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "probe_%u: %s\n", i,
			      w->o.probes[i]);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -ENAMETOOLONG;
	/* Once per store dir (a day), not on the sample path: a plain write is fine. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n)
		return errno ? -errno : -EIO;
	return 0;
}

static int seg_max(void *ctx, const char *name, uint32_t no)
{
	uint32_t *max = ctx;

	(void)name;
	if (no > *max)
		*max = no;
	return 0;
}

static uint32_t dir_max_seg(const char *dir)
{
	uint32_t max = 0;

	store_dir__for_each_seg(dir, seg_max, &max);
	return max;
}

static int open_index(struct store_writer *w, struct sdir *d, bool existing)
{
	char path[PATH_MAX + 192];
	struct stat sb;
	int r;

	snprintf(path, sizeof(path), "%s/index", d->path);
	r = sfile__open(path, O_WRONLY | O_CREAT, &d->idx);
	if (r < 0)
		return r;
	if (existing && fstat(d->idx->fd, &sb) == 0 &&
	    (uint64_t)sb.st_size >= sizeof(struct store_idx_hdr)) {
		uint64_t n = ((uint64_t)sb.st_size - sizeof(struct store_idx_hdr) +
			      sizeof(struct store_idx_entry) - 1) /
			     sizeof(struct store_idx_entry);

		/* Append after a possibly torn last entry, on the entry grid. */
		d->idx_off = sizeof(struct store_idx_hdr) + n * sizeof(struct store_idx_entry);
		return 0;
	}
	{
		struct store_idx_hdr h = {
			.magic = STORE_IDX_MAGIC,
			.major = STORE_VERSION_MAJOR,
			.minor = STORE_VERSION_MINOR,
			.entry_size = sizeof(struct store_idx_entry),
			.created_ns = clock_ns(CLOCK_REALTIME),
		};

		h.crc = store_crc(&h, offsetof(struct store_idx_hdr, crc));
		d->idx_off = sizeof(h);
		return store_wq__write(&w->wq, d->idx, 0, &h, sizeof(h));
	}
}

static void close_dir(struct store_writer *w)
{
	if (w->seg) {
		sfile__put(w->seg);
		w->seg = NULL;
	}
	if (w->dir) {
		sdir__put(w->dir);
		w->dir = NULL;
	}
}

static void remove_new_dir(const char *dir)
{
	static const char *const files[] = {"index", "conf"};
	char p[PATH_MAX + 192];

	for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
		unlink(p);
	}
	rmdir(dir);
}

/*
 * The store dir for local day of t: cpa_YYMMDD if free, the one this run
 * already writes (a storer restart continues it), else cpa_YYMMDD_start_HHMMSS.
 */
static int open_dir(struct store_writer *w, int64_t t)
{
	char name[64], path[PATH_MAX + 128];
	bool existing = false;
	struct sdir *d;
	int r, attempt;

	if (mkdir(w->root, 0755) < 0 && errno != EEXIST)
		return -errno;

	close_dir(w);
	store_dir__day_name(t, name, sizeof(name));
	for (attempt = 0;; attempt++) {
		if (attempt == 0) {
			snprintf(path, sizeof(path), "%s/%s", w->root, name);
		} else {
			/* Named by the run's start when it began this day, else by t. */
			int64_t st = (int64_t)(w->run_id / NSEC_PER_SEC);
			time_t stamp;
			struct tm tm;
			char hms[16];

			if (store_dir__local_day(st) != store_dir__local_day(t))
				st = t;
			stamp = (time_t)st + attempt - 1;
			localtime_r(&stamp, &tm);
			strftime(hms, sizeof(hms), "%H%M%S", &tm);
			snprintf(path, sizeof(path), "%s/%s_start_%s", w->root, name, hms);
		}
		if (mkdir(path, 0755) == 0)
			break;
		if (errno != EEXIST)
			return -errno;
		if (w->run_id && store_dir__run_id(path) == w->run_id) {
			existing = true;
			break;
		}
		if (attempt > 100)
			return -EEXIST;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->refs = 1;
	snprintf(d->path, sizeof(d->path), "%s", path);
	w->dir = d;
	/* conf first (a plain write): on a full disk it fails before the
	 * index header is queued for a dir that is removed again. */
	r = existing ? 0 : write_conf(w, path);
	if (r >= 0)
		r = open_index(w, d, existing);
	if (r < 0) {
		/* A dir we made and could not fill (a full disk): remove it, so
		 * the retry a second later takes the same name instead of piling
		 * up empty cpa_*_start_* dirs. */
		if (!existing)
			remove_new_dir(path);
		return r;
	}
	w->seg_no = existing ? dir_max_seg(path) : 0;
	w->dir_day = store_dir__local_day(t);
	return 0;
}

static int open_segment(struct store_writer *w, int64_t t)
{
	char path[PATH_MAX + 192];
	struct store_seg_hdr h;
	int r;

	if (w->seg) {
		sfile__put(w->seg);
		w->seg = NULL;
	}
	store_dir__seg_path(path, sizeof(path), w->dir->path, w->seg_no + 1);
	r = sfile__open(path, O_WRONLY | O_CREAT | O_TRUNC, &w->seg);
	if (r < 0)
		return r;
	w->seg_no++;
	w->force_new_seg = false;
	memset(&h, 0, sizeof(h));
	h.magic = STORE_SEG_MAGIC;
	h.major = STORE_VERSION_MAJOR;
	h.minor = STORE_VERSION_MINOR;
	h.hdr_size = sizeof(h);
	h.seg_no = w->seg_no;
	h.created_ns = clock_ns(CLOCK_REALTIME);
	h.crc = store_crc(&h, offsetof(struct store_seg_hdr, crc));
	w->seg_off = sizeof(h);
	w->seg_start_s = t;
	/* A new segment is a full dictionary restart: ids are per segment. */
	store_dict__new_segment(&w->dict, t);
	return store_wq__write(&w->wq, w->seg, 0, &h, sizeof(h));
}

int store_writer__journal_open(struct store_writer *w, const char *dir)
{
	return store_journal__open(&w->jr, dir, w);
}

/* ------------------------------------------------------------ definitions */

void store_writer__dict_reset(struct store_writer *w, uint64_t epoch)
{
	/* Failing that, a restart loses the dictionary: counted by symd ids. */
	if (w->jr.on)
		store_journal__start(&w->jr, &w->wq, epoch);
	store_dict__reset(&w->dict);
}

int store_writer__def_str(struct store_writer *w, const struct cpa_str_def *d, const char *s)
{
	return store_dict__def_str(&w->dict, &w->jr, d, s);
}

int store_writer__def_module(struct store_writer *w, const struct cpa_module_def *m,
			     const char *path)
{
	return store_dict__def_module(&w->dict, &w->jr, m, path);
}

int store_writer__def_frame(struct store_writer *w, const struct cpa_frame_def *f)
{
	return store_dict__def_frame(&w->dict, &w->jr, f);
}

int store_writer__def_stack(struct store_writer *w, const struct cpa_stack_def *s,
			    const uint32_t *frame_ids)
{
	return store_dict__def_stack(&w->dict, &w->jr, s, frame_ids);
}

/* Give up the open block: its samples are counted as lost (to an I/O error
 * when io), and its own loss rows are to be recorded again. */
static void discard_block(struct store_writer *w, bool io)
{
	uint64_t n = w->blk.samples - w->blk.lost_rec;

	if (!w->blk.open)
		return;
	w->st.lost_samples_discarded += n;
	if (io)
		w->st.lost_io += n;
	w->st.lost_recorded -= w->blk.lost_rec;
	w->st.lost_io_recorded -= w->blk.lost_rec_io;
	block__reset(&w->blk);
}

/* ------------------------------------------------------------ block close */

int store_writer__close_block(struct store_writer *w)
{
	struct block *k = &w->blk;
	struct store_encoded enc;
	struct wop *op;
	int64_t min_s, max_s;
	int r;

	/* Definitions reach the journal before the input holding them is released:
	 * queued with the block, submitted with it (store_writer__kick()). */
	store_journal__flush(&w->jr, &w->wq);
	if (!k->open)
		return 0;
	min_s = (int64_t)(k->t_min_ns / NSEC_PER_SEC);
	max_s = (int64_t)(k->t_max_ns / NSEC_PER_SEC);
	r = store_enc__block(&w->enc, k, &w->dict.seg, &enc);
	if (r < 0)
		goto out_reset;
	op = calloc(1, sizeof(*op));
	if (!op) {
		free(enc.buf);
		r = -ENOMEM;
		goto out_reset;
	}
	op->kind = WOP_BLOCK;
	op->n_samples = k->samples - k->lost_rec;
	op->n_lost_rec = k->lost_rec;
	op->n_lost_io = k->lost_rec_io;
	op->buf = enc.buf;
	op->len = enc.len;
	op->off = w->seg_off;
	op->f = w->seg;
	w->seg->refs++;
	op->dir = w->dir;
	w->dir->refs++;
	op->ent = (struct store_idx_entry){
		.seg_no = w->seg_no,
		.off = (uint32_t)w->seg_off,
		.len = op->len,
		.t_min_s = (uint32_t)min_s,
		.span_s = (uint16_t)MIN(max_s - min_s, (int64_t)UINT16_MAX),
		.n_sec = (uint8_t)MIN(enc.nsec, 255u),
		.flags = enc.flags,
	};
	op->ent.crc = store_crc(&op->ent, offsetof(struct store_idx_entry, crc));
	w->seg_off += op->len;

	/* The dictionary delta is in this block now, whatever happens to the write. */
	seg_dict__mark_emitted(&w->dict.seg);

	w->st.blocks++;
	w->st.bytes_raw += enc.raw_len;
	w->st.bytes_disk += op->len;
	store_wq__submit(&w->wq, op);
	block__reset(k);
	return 1;

out_reset:
	/* Cannot encode (out of memory): the rows are lost (counted, a loss row
	 * later), the dict is re-sent. */
	discard_block(w, false);
	return r;
}

/* ------------------------------------------------------------ aggregation */

/* The open block takes a sample of second sec: its interval, or a bit late. */
static bool block_takes(const struct store_writer *w, int64_t sec)
{
	const struct block *k = &w->blk;

	if (sec >= k->base_s + (int64_t)w->o.block_seconds)
		return false;
	return sec >= k->base_s ||
	       (k->base_s - sec <= LATE_MAX_S &&
		(int64_t)(k->t_max_ns / NSEC_PER_SEC) - sec < (int64_t)STORE_MAX_BLOCK_SPAN);
}

bool store_writer__fits(const struct store_writer *w, uint64_t time_ns)
{
	return !w->blk.open || block_takes(w, (int64_t)(time_ns / NSEC_PER_SEC));
}

/*
 * A block with a dictionary section was given up (the retry budget ran out):
 * the rest of its segment would name ids no reader can resolve, the open
 * block's rows included. Those rows are counted as lost, and the next block
 * starts a new segment with a full dictionary.
 */
static void check_dict_lost(struct store_writer *w)
{
	if (!w->wq.dict_lost)
		return;
	w->wq.dict_lost = false;
	discard_block(w, w->wq.dict_lost_io);
	w->force_new_seg = true;
}

/*
 * An fsync failed: the kernel may have dropped the dirty pages it covered
 * (the next fsync would succeed and prove nothing), so the segment's tail
 * since the last good sync is suspect. What reads back now is kept (the
 * reader checks every block's CRC); new blocks go to a new segment, so a
 * later sync covers only data written after the error. -EIO if one failed.
 */
static int check_fsync(struct store_writer *w)
{
	if (!w->wq.fsync_failed)
		return 0;
	w->wq.fsync_failed = false;
	if (w->seg)
		w->force_new_seg = true;
	return -EIO;
}

static uint64_t lost_unrecorded(const struct store_writer *w)
{
	return w->st.refused_samples + w->st.lost_samples_dropped + w->st.lost_samples_discarded -
	       w->st.lost_recorded;
}

/* One loss row of n samples named marker in the open block: false if it
 * could not be added (tried again with the next block). */
static bool add_lost_row(struct store_writer *w, uint64_t time_ns, const char *marker, uint64_t n)
{
	struct row_key key;
	int r;

	r = store_dict__marker_stack(&w->dict, marker);
	if (r < 0)
		return false;
	memset(&key, 0, sizeof(key));
	key.sec = (int64_t)(time_ns / NSEC_PER_SEC);
	key.stack = (uint32_t)r;
	key.kind = CPA_KIND_ONCPU;
	if (block__add(&w->blk, &key, n, n) < 0)
		return false;
	w->blk.samples += n;
	w->blk.lost_rec += n;
	w->st.lost_samples += n;
	w->st.lost_recorded += n;
	return true;
}

/*
 * Samples the store could not keep (refused while no dir or segment could be
 * made, in blocks given up after the retry budget, in the open block when the
 * store was deleted) become loss rows in the block just opened, at its time:
 * the store itself says what it lost once it can say anything. Those lost to
 * EIO are [lost: storer io_errors], the rest (a full disk, ...)
 * [lost: storer write_errors].
 */
static int record_lost(struct store_writer *w, uint64_t time_ns)
{
	uint64_t io = w->st.lost_io - w->st.lost_io_recorded;
	uint64_t other = lost_unrecorded(w) - io;

	if (other)
		add_lost_row(w, time_ns, "[lost: storer write_errors]", other);
	if (io && add_lost_row(w, time_ns, "[lost: storer io_errors]", io)) {
		w->blk.lost_rec_io += io;
		w->st.lost_io_recorded += io;
	}
	return 0;
}

/* Make sure a block that can take a sample at time_ns is open. */
static int block_for(struct store_writer *w, uint64_t time_ns)
{
	int64_t sec = (int64_t)(time_ns / NSEC_PER_SEC), iv = w->o.block_seconds;
	struct block *k = &w->blk;
	int r;

	check_dict_lost(w);
	if (k->open) {
		if (block_takes(w, sec))
			return 0;
		r = store_writer__close_block(w);
		if (r < 0)
			return r;
	}
	/* A store dir or segment that could not be created (full disk, EACCES) is
	 * retried once a second, not once per sample; samples meanwhile are refused. */
	if (w->open_err && clock_ns(CLOCK_REALTIME) < w->open_retry_ns)
		return w->open_err;
	w->open_err = 0;
	/* Day rotation forward only: a late sample from before midnight goes to today's store. */
	if (!w->dir || store_dir__local_day(sec) > w->dir_day) {
		r = open_dir(w, sec);
		if (r < 0) {
			close_dir(w);
			goto out_backoff;
		}
		r = open_segment(w, sec);
		if (r < 0)
			goto out_backoff;
	} else if (!w->seg || sec - w->seg_start_s >= (int64_t)w->o.segment_seconds ||
		   sec < w->seg_start_s - (int64_t)w->o.segment_seconds ||
		   w->seg_off > SEG_MAX_BYTES || w->force_new_seg ||
		   store_dict__seg_full(&w->dict) ||
		   (w->o.max_store_bytes && w->seg_off > w->o.max_store_bytes / 4)) {
		r = open_segment(w, sec);
		if (r < 0)
			goto out_backoff;
	}
	k->open = true;
	k->base_s = sec - sec % iv;
	k->t_min_ns = time_ns;
	k->t_max_ns = time_ns;
	return record_lost(w, time_ns);

out_backoff:
	w->open_err = r;
	w->open_retry_ns = clock_ns(CLOCK_REALTIME) + NSEC_PER_SEC;
	return r;
}

static int add_sample(struct store_writer *w, const struct cpa_sample_out *s)
{
	struct row_key key;
	int r;

	r = block_for(w, s->time_ns);
	if (r < 0)
		return r;
	memset(&key, 0, sizeof(key));
	key.sec = (int64_t)(s->time_ns / NSEC_PER_SEC);
	key.cgroup = s->cgroup_id;
	key.pid = s->pid;
	key.tid = s->tid;
	key.cpu = s->cpu;
	key.kind = s->kind;
	key.probe = s->probe_id;
	r = store_dict__sym_stack(&w->dict, s->stack_id);
	if (r < 0)
		return r;
	key.stack = (uint32_t)r;
	r = store_dict__sym_str(&w->dict, s->comm_id);
	if (r < 0)
		return r;
	key.comm = (uint32_t)r;
	r = store_dict__sym_str(&w->dict, s->pcomm_id);
	if (r < 0)
		return r;
	key.pcomm = (uint32_t)r;
	r = store_dict__sym_str(&w->dict, s->env_id);
	if (r < 0)
		return r;
	key.env = (uint32_t)r;
	block__time(&w->blk, s->time_ns);
	r = block__add(&w->blk, &key, 1, s->weight);
	if (r < 0)
		return r;
	block__seq(&w->blk, s->seq);
	w->blk.samples++;
	w->st.samples++;
	return 0;
}

int store_writer__add_sample(struct store_writer *w, const struct cpa_sample_out *s)
{
	int r = add_sample(w, s);

	/* Not stored (no store, no memory): counted, a loss row later. */
	if (r < 0) {
		w->st.refused_samples++;
		if (wq_err_is_io(r))
			w->st.lost_io++;
	}
	return r;
}

static int add_loss(struct store_writer *w, const struct cpa_loss *l)
{
	const char *cn = shm_counter_name((enum shm_stage_id)l->stage, l->reason);
	struct row_key key;
	char name[96];
	int r;

	r = block_for(w, l->time_ns);
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), "[lost: %s %s]", shm_stage_name((enum shm_stage_id)l->stage),
		 cn ? cn : "unknown");
	r = store_dict__marker_stack(&w->dict, name);
	if (r < 0)
		return r;
	memset(&key, 0, sizeof(key));
	key.sec = (int64_t)(l->time_ns / NSEC_PER_SEC);
	key.stack = (uint32_t)r;
	key.kind = l->kind;
	key.probe = l->probe_id;
	block__time(&w->blk, l->time_ns);
	r = block__add(&w->blk, &key, l->count, l->weight ? l->weight : l->count);
	if (r < 0)
		return r;
	block__seq(&w->blk, l->seq);
	w->blk.samples += l->count;
	w->st.lost_samples += l->count;
	return 0;
}

int store_writer__add_loss(struct store_writer *w, const struct cpa_loss *l)
{
	int r = add_loss(w, l);

	if (r < 0) {
		w->st.refused_samples += l->count;
		if (wq_err_is_io(r))
			w->st.lost_io += l->count;
	}
	return r;
}

/* Per-second metrics: encoded at once into the block's metrics section. */
int store_writer__add_metrics(struct store_writer *w, const struct cpa_metrics *m,
			      const struct cpa_metrics_ent *ents)
{
	int r = block_for(w, m->time_ns);

	if (r < 0)
		return r;
	store_metrics__encode(&w->blk.metrics, m, ents);
	if (w->blk.metrics.oom)
		return -ENOMEM;
	block__time(&w->blk, m->time_ns);
	block__seq(&w->blk, m->seq);
	w->blk.n_metrics++;
	return 0;
}

int store_writer__add_event(struct store_writer *w, const struct cpa_policy_event *ev)
{
	int r = block_for(w, ev->time_ns);

	if (r < 0)
		return r;
	store_metrics__encode_event(&w->blk.events, ev);
	if (w->blk.events.oom)
		return -ENOMEM;
	block__time(&w->blk, ev->time_ns);
	block__seq(&w->blk, ev->seq);
	w->blk.n_events++;
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

uint64_t store_writer__deadline(const struct store_writer *w)
{
	if (!w->blk.open)
		return 0;
	/* The interval is over, plus one second for samples still in the pipeline. */
	return (uint64_t)(w->blk.base_s + (int64_t)w->o.block_seconds + 1) * NSEC_PER_SEC;
}

uint64_t store_writer__due(const struct store_writer *w, bool *ret_busy)
{
	uint64_t due = store_writer__deadline(w);

	/* Writes in flight are reaped by the next tick: the open block's, or
	 * one of their own when none is open. */
	*ret_busy = (!due && w->wq.inflight) || w->wq.retry_head || w->wq.disk_full || w->open_err;
	if ((w->o.persistent_day || w->o.max_store_bytes) && w->dir) {
		uint64_t ret = (w->last_retention_s + RETENTION_EVERY_S) * NSEC_PER_SEC;

		due = due ? MIN(due, ret) : ret;
	}
	return due;
}

size_t store_writer__open_bytes(const struct store_writer *w)
{
	return (size_t)w->blk.rows.n * sizeof(struct row) + intern__bytes(&w->dict.seg.str) +
	       intern__bytes(&w->dict.seg.stack) + intern__bytes(&w->dict.seg.frame);
}

static void note_removed(struct store_writer *w, int files, const char *names)
{
	size_t n = strlen(w->removed);

	w->st.trimmed_files += (uint64_t)files;
	if (n + strlen(names) + 3 < sizeof(w->removed))
		snprintf(w->removed + n, sizeof(w->removed) - n, "%s%s", n ? ", " : "", names);
	else if (n + 5 < sizeof(w->removed) && !strstr(w->removed, "..."))
		snprintf(w->removed + n, sizeof(w->removed) - n, "%s...", n ? ", " : "");
}

void store_writer__take_removed(struct store_writer *w, char *buf, size_t len)
{
	snprintf(buf, len, "%s", w->removed);
	w->removed[0] = 0;
}

static bool file_gone(int fd)
{
	struct stat sb;

	return fstat(fd, &sb) == 0 && sb.st_nlink == 0;
}

/*
 * The store dir or the segment deleted under us (rm -rf of the store): the
 * writes would go on into unlinked files until the next rotation. Checked
 * once a second: the open block is given up (its samples counted as lost),
 * and the next block makes a new dir and segment. What completed into the
 * unlinked files since the last check is gone uncounted (up to a second).
 */
static void check_gone(struct store_writer *w)
{
	struct stat sb;

	if (!w->dir)
		return;
	if (stat(w->dir->path, &sb) == 0 && !(w->seg && file_gone(w->seg->fd)) &&
	    !file_gone(w->dir->idx->fd))
		return;
	w->st.store_gone++;
	discard_block(w, false);
	close_dir(w);
}

void store_writer__set_mem_cap(struct store_writer *w, uint64_t bytes)
{
	w->dict.seg_budget = MIN(bytes / 8, STORE_SEG_DICT_MAX);
	w->dict.seg_max = MIN(bytes / 8, STORE_SEG_DICT_CEIL);
	w->jr.max_bytes = bytes / 4;
}

int store_writer__tick(struct store_writer *w, uint64_t now_ns)
{
	char names[sizeof(w->removed)];
	int closed = 0, r;

	store_journal__flush(&w->jr, &w->wq);
	store_wq__reap(&w->wq, false);
	store_wq__retry_due(&w->wq, now_ns, false);
	check_dict_lost(w);
	check_fsync(w);
	if (now_ns / NSEC_PER_SEC != w->last_gone_check_s) {
		w->last_gone_check_s = now_ns / NSEC_PER_SEC;
		check_gone(w);
	}
	if (w->blk.open && now_ns >= store_writer__deadline(w)) {
		r = store_writer__close_block(w);
		if (r < 0)
			return r;
		closed = r;
	}
	/* Full disk: give up the oldest segment (never the one being written),
	 * at most every 10 s, so the retries find room and sampling goes on. */
	if (w->wq.disk_full && w->dir && now_ns / NSEC_PER_SEC >= w->last_emergency_s + 10) {
		w->last_emergency_s = now_ns / NSEC_PER_SEC;
		w->wq.disk_full = false;
		/* The journal only serves a restart: once it is larger than the
		 * segment it describes, the data gets its space first. */
		if (w->jr.f && w->jr.off > w->seg_off)
			w->st.journal_given_up += store_journal__give_up(&w->jr);
		r = store_retention__trim_oldest(w->root, w->dir->path, w->seg_no, names,
						 sizeof(names));
		if (r > 0)
			note_removed(w, r, names);
		else if (w->seg && w->seg_off > sizeof(struct store_seg_hdr))
			w->force_new_seg = true;
	}
	if ((w->o.persistent_day || w->o.max_store_bytes) && w->dir &&
	    now_ns / NSEC_PER_SEC >= w->last_retention_s + RETENTION_EVERY_S) {
		w->last_retention_s = now_ns / NSEC_PER_SEC;
		r = store_retention__run(w->root, w->o.persistent_day, w->o.max_store_bytes,
					 w->dir->path, w->seg_no, now_ns, names, sizeof(names));
		if (r > 0)
			note_removed(w, r, names);
	}
	/* What this wakeup queued (journal records, index entries of completed
	 * blocks, retries) goes to the kernel in one submission. */
	store_wq__kick(&w->wq);
	return closed;
}

uint64_t store_writer__kick(struct store_writer *w)
{
	store_wq__kick(&w->wq);
	return store_wq__barrier(&w->wq);
}

bool store_writer__landed(struct store_writer *w, uint64_t b, int wait_ms)
{
	if (wait_ms > 0)
		store_wq__wait_passed(&w->wq, b, wait_ms);
	return store_wq__passed(&w->wq, b);
}

int store_writer__flush(struct store_writer *w, bool sync)
{
	int r = 0;

	if (store_writer__close_block(w) < 0)
		r = -ENOMEM;
	store_wq__drain(&w->wq);
	if (sync && (w->seg || w->dir)) {
		struct sfile *fs[2] = {w->seg, w->dir ? w->dir->idx : NULL};
		unsigned int i;

		for (i = 0; i < 2; i++)
			if (fs[i] && store_wq__fsync(&w->wq, fs[i]) < 0)
				return -ENOMEM;
		store_wq__wait(&w->wq);
	}
	if (w->wq.retry_head)
		r = w->st.last_error ? w->st.last_error : -EIO;
	else if (check_fsync(w) < 0 && !r)
		r = -EIO;
	return r;
}

bool store_writer__healthy(const struct store_writer *w)
{
	/* A retry in flight may fail again: healthy once it went through. */
	return !w->open_err && !w->wq.retry_head && !w->wq.retrying && !lost_unrecorded(w);
}

void store_writer__stats(const struct store_writer *w, struct store_writer_stats *ret)
{
	*ret = w->st;
}

const char *store_writer__dir(const struct store_writer *w)
{
	return w->dir ? w->dir->path : "";
}

int store_writer__new(const struct store_writer_opts *o, struct store_writer **ret)
{
	struct store_writer *w;
	int r;

	if (!o->root || !*o->root || strlen(o->root) >= PATH_MAX - 64)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->lock_fd = store_root__lock(o->root, NULL);
	if (w->lock_fd < 0) {
		r = w->lock_fd;
		free(w);
		return r;
	}
	w->o = *o;
	w->dict.unknown_ids = &w->st.unknown_ids;
	snprintf(w->root, sizeof(w->root), "%s", o->root);
	w->o.root = w->root;
	snprintf(w->env_names, sizeof(w->env_names), "%s",
		 o->record_env_name ? o->record_env_name : "");
	if (!w->o.record_interval)
		w->o.record_interval = 1;
	if (w->o.record_interval > 60)
		w->o.record_interval = 60;
	if (!w->o.block_seconds)
		w->o.block_seconds = STORE_BLOCK_SECONDS;
	/* A block never spans less than one interval nor more than a minute. */
	w->o.block_seconds = MAX(w->o.block_seconds, w->o.record_interval);
	w->o.block_seconds = MIN(w->o.block_seconds, 60u);
	if (!w->o.segment_seconds)
		w->o.segment_seconds = 3600;
	if (!w->o.zstd_level)
		w->o.zstd_level = 3;
	if (!w->o.max_retry_bytes)
		w->o.max_retry_bytes = 32u << 20;
	w->run_id = clock_ns(CLOCK_REALTIME);
	r = store_wq__init(&w->wq, w->o.max_retry_bytes, &w->st);
	if (r < 0) {
		close(w->lock_fd);
		free(w);
		return r;
	}
	r = store_enc__init(&w->enc, w->o.zstd_level);
	if (r < 0) {
		store_writer__free(w);
		return r;
	}
	*ret = w;
	return 0;
}

void store_writer__set_run_id(struct store_writer *w, uint64_t run_id)
{
	if (!run_id)
		return;
	w->run_id = run_id;
	/* The run's store dir (and conf) exist from its start, even if it never
	 * captures; a failure here is retried by the first block. */
	if (!w->dir && open_dir(w, (int64_t)(run_id / NSEC_PER_SEC)) < 0)
		close_dir(w);
}

uint64_t store_writer__stored_seq(const struct store_writer *w, uint64_t mark)
{
	uint64_t seq = 0;

	return store_root__stored_seq(w->root, w->run_id, mark, &seq) < 0 ? 0 : seq;
}

void store_writer__free(struct store_writer *w)
{
	if (!w)
		return;
	if (w->wq.ring_ok) {
		store_writer__flush(w, true);
		/* Whatever still waits for a retry is given up now. */
		store_wq__exit(&w->wq);
	}
	close_dir(w);
	store_journal__free(&w->jr);
	store_enc__free(&w->enc);
	store_dict__free(&w->dict);
	block__free(&w->blk);
	if (w->lock_fd >= 0)
		close(w->lock_fd);
	free(w);
}
