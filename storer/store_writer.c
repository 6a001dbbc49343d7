// SPDX-License-Identifier: MIT
/*
 * Store writer: aggregates samples per second into an open block, encodes and
 * zstd-compresses it when it closes, and appends it with io_uring. The index
 * entry of a block is written only after the block's own write completed, so
 * an index entry never points at bytes that were not handed to the kernel.
 *
 *   symd ids --(def_*)--> symd tables --(first use in a segment)--> segment dict
 *   sample --> row key (sec, stack, pid, tid, cpu, cgroup, kind, comm, pcomm, env, probe)
 *          --> open block rows (count, weight summed)
 *   close: [hdr 56][zstd(dict delta)][zstd(rows)] --IORING_OP_WRITE--> seg_NNNNNN.cps
 *          completion --> [idx entry 24] --IORING_OP_WRITE--> index
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/macro.h"
#include "shm/config.h"
#include "shm/stage.h"
#include "store.h"
#include "store_fmt.h"
#include "store_tab.h"

#define NS		  1000000000ULL
#define URING_DEPTH	  64u
#define LATE_MAX_S	  60	     /* older than this: a block of its own */
#define SEG_MAX_BYTES	  (1u << 30) /* offsets are u32: rotate well before 4 GiB */
#define RETENTION_EVERY_S 60

/* ------------------------------------------------------------ files and ops */

struct sfile {
	int fd;
	uint32_t refs; /* ops in flight or waiting for retry, + 1 while current */
};

struct sdir {
	char path[PATH_MAX + 128];
	struct sfile *idx;
	uint64_t idx_off; /* next index entry goes here */
	uint32_t refs;
};

enum wop_kind {
	WOP_BLOCK, /* a block: on success, its index entry follows */
	WOP_RAW,   /* a file header or an index entry */
	WOP_FSYNC,
};

struct wop {
	struct wop *next; /* retry list */
	enum wop_kind kind;
	struct sfile *f;
	struct sdir *dir; /* WOP_BLOCK: where its index entry goes */
	uint8_t *buf;
	uint32_t len, done;
	uint64_t off;
	uint64_t retry_at_ns;
	struct store_idx_entry ent;
	uint8_t inline_buf[sizeof(struct store_idx_entry)];
};

/* ------------------------------------------------------------ symd-side tables */

struct sym_str {
	uint64_t off;
	uint32_t len;
	uint32_t seg_sid, seg_gen;
};

struct sym_mod {
	uint64_t path_off;
	uint32_t path_len, kind;
	uint8_t bid_len, bid[CPA_BUILD_ID_MAX];
	uint32_t seg_sid, seg_gen;
};

struct sym_frame {
	struct cpa_frame_def def;
	uint32_t seg_sid, seg_gen;
};

struct sym_stack {
	uint64_t frames_off; /* into sym.u32s */
	uint16_t n, nk;
	uint32_t seg_sid, seg_gen;
};

#define VEC(T)                   \
	struct {                 \
		T *v;            \
		uint32_t n, cap; \
	}

static int vec_grow(void **v, uint32_t *cap, uint32_t n, size_t esz)
{
	uint32_t nc;
	void *p;

	if (n < *cap)
		return 0;
	if (*cap >= (1u << 30))
		return -ENOMEM;
	nc = *cap ? *cap * 2 : 64;
	p = realloc(*v, (size_t)nc * esz);
	if (!p)
		return -ENOMEM;
	*v = p;
	*cap = nc;
	return 0;
}

#define VEC_PUSH(vec, val)                                                                   \
	({                                                                                   \
		int _r = vec_grow((void **)&(vec).v, &(vec).cap, (vec).n, sizeof(*(vec).v)); \
		if (!_r)                                                                     \
			(vec).v[(vec).n++] = (val);                                          \
		_r < 0 ? _r : (int)(vec).n; /* 1-based index */                              \
	})

struct sym_tables {
	struct u32map str_map, mod_map, frame_map, stack_map; /* symd id -> index + 1 */
	VEC(struct sym_str) strs;
	VEC(struct sym_mod) mods;
	VEC(struct sym_frame) frames;
	VEC(struct sym_stack) stacks;
	struct sbuf bytes;  /* string and path bytes */
	VEC(uint32_t) u32s; /* stack frame ids */
};

/* ------------------------------------------------------------ segment dictionary */

struct seg_mod_key {
	uint32_t kind;
	uint32_t path_sid;
	uint8_t bid_len;
	uint8_t bid[CPA_BUILD_ID_MAX];
	uint8_t _pad[3];
};

struct seg_frame_key {
	uint32_t name_sid;
	uint32_t mod_sid;
	uint32_t flags;
	uint32_t _pad;
	uint64_t offset;
};

struct seg_dict {
	struct itab str, mod, frame, stack;
	uint32_t emitted_str, emitted_mod, emitted_frame, emitted_stack;
};

/* ------------------------------------------------------------ open block */

struct row_key {
	int64_t sec;
	uint64_t cgroup;
	uint32_t stack, pid, tid, cpu, comm, pcomm, env, probe;
	uint32_t kind, _pad;
};

struct row {
	struct row_key k;
	uint64_t count, weight;
	uint32_t hash;
};

struct block {
	bool open;
	int64_t base_s; /* aligned start of the interval it collects */
	uint64_t t_min_ns, t_max_ns;
	uint64_t samples;
	VEC(struct row) rows;
	uint32_t *slots;
	uint32_t nslots;
};

struct store_writer {
	struct store_writer_opts o;
	char root[PATH_MAX];
	char env_names[CPA_ENV_LIST_MAX];
	uint64_t run_id;

	struct io_uring ring;
	bool ring_ok;
	uint32_t inflight;
	struct wop *retry_head, *retry_tail;
	uint64_t retry_bytes;

	struct sdir *dir; /* current store dir */
	int64_t dir_day;
	struct sfile *seg; /* current segment */
	uint32_t seg_no;
	uint64_t seg_off;
	int64_t seg_start_s;
	uint32_t seg_gen;

	struct sym_tables sym;
	struct seg_dict dict;
	struct block blk;

	ZSTD_CCtx *cctx;
	struct sbuf raw_dict, raw_data, scratch;
	uint32_t *order;
	uint32_t order_cap;

	uint64_t last_retention_s;
	struct {
		bool on, replaying, full;
		char dir[PATH_MAX];
		struct sfile *f;
		uint64_t off, epoch;
		struct sbuf pend;
	} jr;		/* dictionary journal, see store_writer__journal_open() */
	bool disk_full; /* a write met ENOSPC: trim the oldest data */
	uint64_t last_emergency_s;
	int open_err; /* last failure to open a dir/segment, retried at open_retry_ns */
	uint64_t open_retry_ns;
	struct store_writer_stats st;
};

static uint64_t realtime_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static void sfile_put(struct sfile *f)
{
	if (f && --f->refs == 0) {
		close(f->fd);
		free(f);
	}
}

static struct sfile *sfile_new(int fd)
{
	struct sfile *f = calloc(1, sizeof(*f));

	if (!f)
		return NULL;
	f->fd = fd;
	f->refs = 1;
	return f;
}

static void sdir_put(struct sdir *d)
{
	if (d && --d->refs == 0) {
		sfile_put(d->idx);
		free(d);
	}
}

static void wop_free(struct wop *op)
{
	if (!op)
		return;
	if (op->buf != op->inline_buf)
		free(op->buf);
	sfile_put(op->f);
	sdir_put(op->dir);
	free(op);
}

/* ------------------------------------------------------------ io_uring */

static int uring_submit_op(struct store_writer *w, struct wop *op);

static void retry_push(struct store_writer *w, struct wop *op, uint64_t now)
{
	op->next = NULL;
	op->retry_at_ns = now + NS;
	if (w->retry_tail)
		w->retry_tail->next = op;
	else
		w->retry_head = op;
	w->retry_tail = op;
	w->retry_bytes += op->len;
	/* Over budget: give up the oldest; its bytes leave a hole the reader skips. */
	while (w->retry_bytes > w->o.max_retry_bytes && w->retry_head != op) {
		struct wop *old = w->retry_head;

		w->retry_head = old->next;
		w->retry_bytes -= old->len;
		if (old->kind == WOP_BLOCK)
			w->st.dropped_blocks++;
		wop_free(old);
	}
}

static void op_complete(struct store_writer *w, struct wop *op, int res)
{
	if (res < 0 || (res == 0 && op->kind != WOP_FSYNC)) {
		w->st.write_errors++;
		w->st.last_error = res < 0 ? res : -EIO;
		if (res == -ENOSPC || res == -EDQUOT)
			w->disk_full = true;
		if (op->kind == WOP_FSYNC) {
			wop_free(op);
			return;
		}
		retry_push(w, op, realtime_ns());
		return;
	}
	if (op->kind != WOP_FSYNC) {
		op->done += (uint32_t)res;
		if (op->done < op->len) {
			/* Short write: the rest goes at the matching offset. */
			if (uring_submit_op(w, op) < 0)
				retry_push(w, op, realtime_ns());
			return;
		}
	}
	if (op->kind == WOP_BLOCK && op->dir) {
		struct sdir *d = op->dir;
		struct wop *ie = calloc(1, sizeof(*ie));

		if (ie) {
			ie->kind = WOP_RAW;
			ie->f = d->idx;
			d->idx->refs++;
			memcpy(ie->inline_buf, &op->ent, sizeof(op->ent));
			ie->buf = ie->inline_buf;
			ie->len = sizeof(op->ent);
			ie->off = d->idx_off;
			d->idx_off += sizeof(op->ent);
			w->st.bytes_disk += ie->len;
			if (uring_submit_op(w, ie) < 0)
				retry_push(w, ie, realtime_ns());
		}
		/* No memory for the entry: the reader's tail scan still finds the block. */
	}
	wop_free(op);
}

static void uring_reap(struct store_writer *w, bool wait_one)
{
	struct io_uring_cqe *cqe;

	for (;;) {
		int r = wait_one ? io_uring_wait_cqe(&w->ring, &cqe)
				 : io_uring_peek_cqe(&w->ring, &cqe);
		struct wop *op;
		int res;

		if (r < 0) {
			if (r == -EINTR && wait_one)
				continue;
			return;
		}
		op = io_uring_cqe_get_data(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&w->ring, cqe);
		w->inflight--;
		op_complete(w, op, res);
		wait_one = false;
	}
}

static int uring_submit_op(struct store_writer *w, struct wop *op)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
	int r;

	if (!sqe) {
		io_uring_submit(&w->ring);
		uring_reap(w, w->inflight >= URING_DEPTH);
		sqe = io_uring_get_sqe(&w->ring);
		if (!sqe)
			return -EBUSY;
	}
	if (op->kind == WOP_FSYNC) {
		io_uring_prep_fsync(sqe, op->f->fd, 0);
		w->st.uring_fsyncs++;
	} else {
		io_uring_prep_write(sqe, op->f->fd, op->buf + op->done, op->len - op->done,
				    op->off + op->done);
		w->st.uring_writes++;
	}
	io_uring_sqe_set_data(sqe, op);
	w->inflight++;
	r = io_uring_submit(&w->ring);
	if (r < 0) {
		/* The sqe stays queued and goes with the next submit. */
		return 0;
	}
	return 0;
}

static int write_raw(struct store_writer *w, struct sfile *f, uint64_t off, const void *buf,
		     uint32_t len)
{
	struct wop *op = calloc(1, sizeof(*op));

	if (!op)
		return -ENOMEM;
	op->kind = WOP_RAW;
	op->f = f;
	f->refs++;
	op->buf = malloc(len);
	if (!op->buf) {
		wop_free(op);
		return -ENOMEM;
	}
	memcpy(op->buf, buf, len);
	op->len = len;
	op->off = off;
	w->st.bytes_disk += len;
	if (uring_submit_op(w, op) < 0)
		retry_push(w, op, realtime_ns());
	return 0;
}

static void retry_due(struct store_writer *w, uint64_t now, bool all)
{
	while (w->retry_head && (all || w->retry_head->retry_at_ns <= now)) {
		struct wop *op = w->retry_head;

		w->retry_head = op->next;
		if (!w->retry_head)
			w->retry_tail = NULL;
		w->retry_bytes -= op->len;
		if (uring_submit_op(w, op) < 0) {
			retry_push(w, op, now);
			return;
		}
	}
}

/* ------------------------------------------------------------ store dirs */

static int write_conf(struct store_writer *w, const char *dir)
{
	char path[PATH_MAX + 192], buf[2048];
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
	/* Once per store dir (a day), not on the sample path: a plain write is fine. */
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (write(fd, buf, (size_t)n) != n)
		return errno ? -errno : -EIO;
	return 0;
}

/* run_id of an existing store dir's conf, 0 if none. */
static uint64_t dir_run_id(const char *dir)
{
	char path[PATH_MAX + 192], line[256];
	uint64_t id = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/conf", dir);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "run_id: ", 8))
			id = strtoull(line + 8, NULL, 10);
	fclose(f);
	return id;
}

static uint32_t dir_max_seg(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint32_t max = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		unsigned int n;

		if (sscanf(de->d_name, "seg_%u.cps", &n) == 1 && n > max)
			max = n;
	}
	closedir(d);
	return max;
}

static int open_index(struct store_writer *w, struct sdir *d, bool existing)
{
	char path[PATH_MAX + 192];
	struct stat sb;
	int fd;

	snprintf(path, sizeof(path), "%s/index", d->path);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	d->idx = sfile_new(fd);
	if (!d->idx) {
		close(fd);
		return -ENOMEM;
	}
	if (existing && fstat(fd, &sb) == 0 &&
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
			.created_ns = realtime_ns(),
		};

		h.crc = store_crc(&h, offsetof(struct store_idx_hdr, crc));
		d->idx_off = sizeof(h);
		return write_raw(w, d->idx, 0, &h, sizeof(h));
	}
}

static void close_dir(struct store_writer *w)
{
	if (w->seg) {
		sfile_put(w->seg);
		w->seg = NULL;
	}
	if (w->dir) {
		sdir_put(w->dir);
		w->dir = NULL;
	}
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

	close_dir(w);
	if (mkdir(w->root, 0755) < 0 && errno != EEXIST)
		return -errno;
	store_fmt__day_name(t, name, sizeof(name));
	for (attempt = 0;; attempt++) {
		if (attempt == 0) {
			snprintf(path, sizeof(path), "%s/%s", w->root, name);
		} else {
			time_t now = time(NULL) + attempt - 1;
			struct tm tm;
			char hms[16];

			localtime_r(&now, &tm);
			strftime(hms, sizeof(hms), "%H%M%S", &tm);
			snprintf(path, sizeof(path), "%s/%s_start_%s", w->root, name, hms);
		}
		if (mkdir(path, 0755) == 0)
			break;
		if (errno != EEXIST)
			return -errno;
		if (w->run_id && dir_run_id(path) == w->run_id) {
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
	r = open_index(w, d, existing);
	if (r < 0)
		return r;
	if (!existing) {
		r = write_conf(w, path);
		if (r < 0)
			return r;
	}
	w->seg_no = existing ? dir_max_seg(path) : 0;
	w->dir_day = store_fmt__local_day(t);
	return 0;
}

static void seg_dict_clear(struct seg_dict *d)
{
	itab__clear(&d->str);
	itab__clear(&d->mod);
	itab__clear(&d->frame);
	itab__clear(&d->stack);
	d->emitted_str = d->emitted_mod = d->emitted_frame = d->emitted_stack = 0;
}

static int open_segment(struct store_writer *w, int64_t t)
{
	char path[PATH_MAX + 192];
	struct store_seg_hdr h;
	int fd;

	if (w->seg) {
		sfile_put(w->seg);
		w->seg = NULL;
	}
	w->seg_no++;
	snprintf(path, sizeof(path), "%s/seg_%06u.cps", w->dir->path, w->seg_no);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	w->seg = sfile_new(fd);
	if (!w->seg) {
		close(fd);
		return -ENOMEM;
	}
	memset(&h, 0, sizeof(h));
	h.magic = STORE_SEG_MAGIC;
	h.major = STORE_VERSION_MAJOR;
	h.minor = STORE_VERSION_MINOR;
	h.hdr_size = sizeof(h);
	h.seg_no = w->seg_no;
	h.created_ns = realtime_ns();
	h.crc = store_crc(&h, offsetof(struct store_seg_hdr, crc));
	w->seg_off = sizeof(h);
	w->seg_start_s = t;
	/* A new segment is a full dictionary restart: ids are per segment. */
	seg_dict_clear(&w->dict);
	w->seg_gen++;
	return write_raw(w, w->seg, 0, &h, sizeof(h));
}

/* ------------------------------------------------------------ interning */

static int seg_str(struct store_writer *w, const void *s, uint32_t len)
{
	int isnew;

	return itab__intern(&w->dict.str, s, len, &isnew);
}

static int seg_marker_stack(struct store_writer *w, const char *name)
{
	struct seg_frame_key fk = {0};
	struct {
		uint16_t n, nk;
		uint32_t f;
	} sk;
	int r, isnew;

	r = seg_str(w, name, (uint32_t)strlen(name));
	if (r < 0)
		return r;
	fk.name_sid = (uint32_t)r;
	fk.flags = CPA_FF_MARKER;
	r = itab__intern(&w->dict.frame, &fk, sizeof(fk), &isnew);
	if (r < 0)
		return r;
	sk.n = 1;
	sk.nk = 0;
	sk.f = (uint32_t)r;
	return itab__intern(&w->dict.stack, &sk, sizeof(sk), &isnew);
}

static struct sym_str *sym_str_get(struct store_writer *w, uint32_t id)
{
	uint32_t i = u32map__get(&w->sym.str_map, id);

	return i ? &w->sym.strs.v[i - 1] : NULL;
}

/* Segment string id of symd string id (0 stays 0 = none). */
static int seg_sym_str(struct store_writer *w, uint32_t id)
{
	struct sym_str *s;
	int r;

	if (!id)
		return 0;
	s = sym_str_get(w, id);
	if (!s) {
		w->st.unknown_ids++;
		return 0;
	}
	if (s->seg_gen == w->seg_gen && s->seg_sid)
		return (int)s->seg_sid;
	r = seg_str(w, w->sym.bytes.p + s->off, s->len);
	if (r > 0) {
		s->seg_sid = (uint32_t)r;
		s->seg_gen = w->seg_gen;
	}
	return r;
}

static int seg_sym_mod(struct store_writer *w, uint32_t id)
{
	uint32_t i = id ? u32map__get(&w->sym.mod_map, id) : 0;
	struct seg_mod_key k;
	struct sym_mod *m;
	int r, isnew;

	if (!i)
		return 0;
	m = &w->sym.mods.v[i - 1];
	if (m->seg_gen == w->seg_gen && m->seg_sid)
		return (int)m->seg_sid;
	memset(&k, 0, sizeof(k));
	r = seg_str(w, w->sym.bytes.p + m->path_off, m->path_len);
	if (r < 0)
		return r;
	k.kind = m->kind;
	k.path_sid = (uint32_t)r;
	k.bid_len = m->bid_len;
	memcpy(k.bid, m->bid, m->bid_len);
	r = itab__intern(&w->dict.mod, &k, sizeof(k), &isnew);
	if (r > 0) {
		m->seg_sid = (uint32_t)r;
		m->seg_gen = w->seg_gen;
	}
	return r;
}

static int seg_sym_frame(struct store_writer *w, uint32_t id)
{
	uint32_t i = u32map__get(&w->sym.frame_map, id);
	struct seg_frame_key k = {0};
	struct sym_frame *f;
	int r, isnew;

	if (!i) {
		w->st.unknown_ids++;
		r = seg_str(w, "[unknown frame]", 15);
		if (r < 0)
			return r;
		k.name_sid = (uint32_t)r;
		k.flags = CPA_FF_MARKER;
		return itab__intern(&w->dict.frame, &k, sizeof(k), &isnew);
	}
	f = &w->sym.frames.v[i - 1];
	if (f->seg_gen == w->seg_gen && f->seg_sid)
		return (int)f->seg_sid;
	r = seg_sym_str(w, f->def.name_id);
	if (r < 0)
		return r;
	k.name_sid = (uint32_t)r;
	r = seg_sym_mod(w, f->def.module_id);
	if (r < 0)
		return r;
	k.mod_sid = (uint32_t)r;
	k.flags = f->def.flags;
	k.offset = f->def.offset;
	r = itab__intern(&w->dict.frame, &k, sizeof(k), &isnew);
	if (r > 0) {
		f->seg_sid = (uint32_t)r;
		f->seg_gen = w->seg_gen;
	}
	return r;
}

static int seg_sym_stack(struct store_writer *w, uint32_t id)
{
	uint32_t i = id ? u32map__get(&w->sym.stack_map, id) : 0;
	uint32_t key[1 + CPA_MAX_KSTACK + CPA_MAX_UFRAMES + 2];
	struct sym_stack *s;
	uint32_t j;
	int r, isnew;

	if (!i) {
		w->st.unknown_ids++;
		return seg_marker_stack(w, "[unknown stack]");
	}
	s = &w->sym.stacks.v[i - 1];
	if (s->seg_gen == w->seg_gen && s->seg_sid)
		return (int)s->seg_sid;
	key[0] = (uint32_t)s->n | (uint32_t)s->nk << 16;
	for (j = 0; j < s->n; j++) {
		r = seg_sym_frame(w, w->sym.u32s.v[s->frames_off + j]);
		if (r < 0)
			return r;
		key[1 + j] = (uint32_t)r;
	}
	r = itab__intern(&w->dict.stack, key, 4 * (1 + s->n), &isnew);
	if (r > 0) {
		s->seg_sid = (uint32_t)r;
		s->seg_gen = w->seg_gen;
	}
	return r;
}

/* ------------------------------------------------------------ dictionary journal */

#define JR_MAGIC     0x314e524a44415043ULL /* "CPADJRN1" */
#define JR_PREFIX    ".storer-dict-"
#define JR_MAX_BYTES (256ULL << 20)
#define JR_MAX_REC   (1u << 20)

struct jr_hdr {
	uint64_t magic;
	uint16_t major, minor;
	uint32_t hdr_size;
	uint64_t epoch;
	uint32_t _reserved;
	uint32_t crc; /* of the 28 bytes above */
};
_Static_assert(sizeof(struct jr_hdr) == 32, "journal header");

struct jr_rec {
	uint32_t len;  /* payload bytes */
	uint16_t type; /* CPA_REC_* */
	uint16_t _reserved;
	uint32_t crc; /* of the payload */
};
_Static_assert(sizeof(struct jr_rec) == 12, "journal record header");

static void jr_path(const struct store_writer *w, uint64_t epoch, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" JR_PREFIX "%020llu", w->jr.dir, (unsigned long long)epoch);
}

static void jr_append(struct store_writer *w, uint16_t type, const void *a, uint32_t alen,
		      const void *b, uint32_t blen)
{
	struct jr_rec h = {.len = alen + blen, .type = type};

	if (!w->jr.on || w->jr.replaying || w->jr.full)
		return;
	if (w->jr.off + w->jr.pend.len + sizeof(h) + h.len > JR_MAX_BYTES) {
		/* Past the cap a restart loses this epoch's dictionary; symd's cap keeps
		 * us far from it in practice. */
		w->jr.full = true;
		return;
	}
	h.crc = store_crc32c(store_crc(a, alen), b, blen);
	sbuf__put(&w->jr.pend, &h, sizeof(h));
	sbuf__put(&w->jr.pend, a, alen);
	if (blen)
		sbuf__put(&w->jr.pend, b, blen);
}

/* Open a fresh journal for epoch (no blocking write: the header goes through io_uring). */
static int jr_start(struct store_writer *w, uint64_t epoch)
{
	char path[PATH_MAX + 64];
	struct jr_hdr h = {.magic = JR_MAGIC,
			   .major = STORE_VERSION_MAJOR,
			   .minor = STORE_VERSION_MINOR,
			   .hdr_size = sizeof(h),
			   .epoch = epoch};
	DIR *d;
	struct dirent *de;
	int fd;

	if (w->jr.f) {
		sfile_put(w->jr.f);
		w->jr.f = NULL;
	}
	w->jr.pend.len = 0;
	w->jr.pend.oom = false;
	w->jr.full = false;
	if (mkdir(w->jr.dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	jr_path(w, epoch, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	w->jr.f = sfile_new(fd);
	if (!w->jr.f) {
		close(fd);
		return -ENOMEM;
	}
	w->jr.epoch = epoch;
	h.crc = store_crc(&h, offsetof(struct jr_hdr, crc));
	w->jr.off = sizeof(h);
	/* Older epochs are dead: their ids mean nothing to the new symd. */
	d = opendir(w->jr.dir);
	if (d) {
		while ((de = readdir(d))) {
			char old[PATH_MAX + 320];

			if (strncmp(de->d_name, JR_PREFIX, strlen(JR_PREFIX)))
				continue;
			snprintf(old, sizeof(old), "%s/%s", w->jr.dir, de->d_name);
			if (strcmp(old, path))
				unlink(old);
		}
		closedir(d);
	}
	return write_raw(w, w->jr.f, 0, &h, sizeof(h));
}

static void jr_flush(struct store_writer *w)
{
	if (!w->jr.f || !w->jr.pend.len || w->jr.pend.oom)
		return;
	if (write_raw(w, w->jr.f, w->jr.off, w->jr.pend.p, (uint32_t)w->jr.pend.len) == 0)
		w->jr.off += w->jr.pend.len;
	w->jr.pend.len = 0;
}

static int jr_apply(struct store_writer *w, uint16_t type, const uint8_t *p, uint32_t len)
{
	switch (type) {
	case CPA_REC_STR: {
		struct cpa_str_def d;

		if (len < sizeof(d))
			return -EBADMSG;
		memcpy(&d, p, sizeof(d));
		if (!cpa_rec_str_ok(&d, len))
			return -EBADMSG;
		return store_writer__def_str(w, &d, (const char *)p + sizeof(d));
	}
	case CPA_REC_MODULE: {
		struct cpa_module_def d;

		if (len < sizeof(d))
			return -EBADMSG;
		memcpy(&d, p, sizeof(d));
		if (!cpa_rec_module_ok(&d, len))
			return -EBADMSG;
		return store_writer__def_module(w, &d, (const char *)p + sizeof(d));
	}
	case CPA_REC_FRAME: {
		struct cpa_frame_def d;

		if (len < sizeof(d))
			return -EBADMSG;
		memcpy(&d, p, sizeof(d));
		return store_writer__def_frame(w, &d);
	}
	case CPA_REC_STACK: {
		struct cpa_stack_def d;
		uint32_t ids[CPA_MAX_KSTACK + CPA_MAX_UFRAMES + 2];

		if (len < sizeof(d))
			return -EBADMSG;
		memcpy(&d, p, sizeof(d));
		if (!cpa_rec_stack_ok(&d, len) || d.n_frames > ARRAY_SIZE(ids))
			return -EBADMSG;
		memcpy(ids, p + sizeof(d), 4u * d.n_frames);
		return store_writer__def_stack(w, &d, ids);
	}
	default:
		return -EBADMSG;
	}
}

int store_writer__journal_open(struct store_writer *w, const char *dir)
{
	char path[PATH_MAX + 64];
	uint64_t best = 0, off;
	bool found = false;
	_cleanup_free_ uint8_t *buf = NULL;
	struct jr_hdr h;
	struct stat sb;
	struct dirent *de;
	int fd, n = 0;
	DIR *d;

	if (strlen(dir) >= sizeof(w->jr.dir))
		return -ENAMETOOLONG;
	snprintf(w->jr.dir, sizeof(w->jr.dir), "%s", dir);
	w->jr.on = true;
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		unsigned long long e;

		if (sscanf(de->d_name, JR_PREFIX "%llu", &e) == 1 && (!found || e > best)) {
			best = e;
			found = true;
		}
	}
	closedir(d);
	if (!found)
		return 0;
	jr_path(w, best, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < sizeof(h) ||
	    (uint64_t)sb.st_size > JR_MAX_BYTES + JR_MAX_REC)
		goto out_fresh;
	buf = malloc((size_t)sb.st_size);
	if (!buf || pread(fd, buf, (size_t)sb.st_size, 0) != sb.st_size)
		goto out_fresh;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != JR_MAGIC || h.major > STORE_VERSION_MAJOR ||
	    h.crc != store_crc(&h, offsetof(struct jr_hdr, crc)))
		goto out_fresh;
	w->jr.replaying = true;
	for (off = sizeof(h); off + sizeof(struct jr_rec) <= (uint64_t)sb.st_size;) {
		struct jr_rec rh;

		memcpy(&rh, buf + off, sizeof(rh));
		if (rh.len > JR_MAX_REC || off + sizeof(rh) + rh.len > (uint64_t)sb.st_size ||
		    store_crc(buf + off + sizeof(rh), rh.len) != rh.crc)
			break; /* torn tail: the rest was never acknowledged */
		if (jr_apply(w, rh.type, buf + off + sizeof(rh), rh.len) == 0)
			n++;
		off += sizeof(rh) + rh.len;
	}
	w->jr.replaying = false;
	w->jr.f = sfile_new(fd);
	if (!w->jr.f) {
		close(fd);
		return -ENOMEM;
	}
	w->jr.epoch = h.epoch;
	w->jr.off = off; /* new records overwrite a torn tail */
	return n;

out_fresh:
	close(fd);
	return 0;
}

/* ------------------------------------------------------------ definitions */

void store_writer__dict_reset(struct store_writer *w, uint64_t epoch)
{
	struct sym_tables *t = &w->sym;

	if (w->jr.on)
		jr_start(w, epoch); /* failing that, a restart loses the dictionary: counted by symd
				       ids */
	u32map__free(&t->str_map);
	u32map__free(&t->mod_map);
	u32map__free(&t->frame_map);
	u32map__free(&t->stack_map);
	t->strs.n = t->mods.n = t->frames.n = t->stacks.n = t->u32s.n = 0;
	t->bytes.len = 0;
	t->bytes.oom = false;
}

int store_writer__def_str(struct store_writer *w, const struct cpa_str_def *d, const char *s)
{
	struct sym_str e = {.off = w->sym.bytes.len, .len = d->len};
	int r;

	if (!d->id)
		return -EINVAL;
	sbuf__put(&w->sym.bytes, s, d->len);
	if (w->sym.bytes.oom)
		return -ENOMEM;
	r = VEC_PUSH(w->sym.strs, e);
	if (r < 0)
		return r;
	jr_append(w, CPA_REC_STR, d, sizeof(*d), s, d->len);
	return u32map__set(&w->sym.str_map, d->id, (uint32_t)r);
}

int store_writer__def_module(struct store_writer *w, const struct cpa_module_def *m,
			     const char *path)
{
	struct sym_mod e = {.path_off = w->sym.bytes.len, .path_len = m->path_len, .kind = m->kind};
	int r;

	if (!m->id || m->build_id_len > CPA_BUILD_ID_MAX)
		return -EINVAL;
	e.bid_len = m->build_id_len;
	memcpy(e.bid, m->build_id, m->build_id_len);
	sbuf__put(&w->sym.bytes, path, m->path_len);
	if (w->sym.bytes.oom)
		return -ENOMEM;
	r = VEC_PUSH(w->sym.mods, e);
	if (r < 0)
		return r;
	jr_append(w, CPA_REC_MODULE, m, sizeof(*m), path, m->path_len);
	return u32map__set(&w->sym.mod_map, m->id, (uint32_t)r);
}

int store_writer__def_frame(struct store_writer *w, const struct cpa_frame_def *f)
{
	struct sym_frame e = {.def = *f};
	int r;

	if (!f->id)
		return -EINVAL;
	r = VEC_PUSH(w->sym.frames, e);
	if (r < 0)
		return r;
	jr_append(w, CPA_REC_FRAME, f, sizeof(*f), NULL, 0);
	return u32map__set(&w->sym.frame_map, f->id, (uint32_t)r);
}

int store_writer__def_stack(struct store_writer *w, const struct cpa_stack_def *s,
			    const uint32_t *frame_ids)
{
	struct sym_stack e = {.frames_off = w->sym.u32s.n, .n = s->n_frames, .nk = s->n_kframes};
	uint32_t i;
	int r;

	if (!s->id || s->n_kframes > s->n_frames ||
	    s->n_frames > CPA_MAX_KSTACK + CPA_MAX_UFRAMES + 1)
		return -EINVAL;
	for (i = 0; i < s->n_frames; i++) {
		r = VEC_PUSH(w->sym.u32s, frame_ids[i]);
		if (r < 0)
			return r;
	}
	r = VEC_PUSH(w->sym.stacks, e);
	if (r < 0)
		return r;
	jr_append(w, CPA_REC_STACK, s, sizeof(*s), frame_ids, 4u * s->n_frames);
	return u32map__set(&w->sym.stack_map, s->id, (uint32_t)r);
}

/* ------------------------------------------------------------ block encode */

static int row_cmp(const void *a, const void *b, void *arg)
{
	const struct row *rows = arg;
	const struct row_key *x = &rows[*(const uint32_t *)a].k;
	const struct row_key *y = &rows[*(const uint32_t *)b].k;

	if (x->sec != y->sec)
		return x->sec < y->sec ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	return 0;
}

static void encode_dict(struct store_writer *w, struct sbuf *b)
{
	struct seg_dict *d = &w->dict;
	uint32_t id, len;
	const uint8_t *k;

	b->len = 0;
	if (d->emitted_str == d->str.n && d->emitted_mod == d->mod.n &&
	    d->emitted_frame == d->frame.n && d->emitted_stack == d->stack.n)
		return;
	sbuf__varint(b, d->emitted_str + 1);
	sbuf__varint(b, d->str.n - d->emitted_str);
	for (id = d->emitted_str + 1; id <= d->str.n; id++) {
		k = itab__key(&d->str, id, &len);
		sbuf__varint(b, len);
		sbuf__put(b, k, len);
	}
	sbuf__varint(b, d->emitted_mod + 1);
	sbuf__varint(b, d->mod.n - d->emitted_mod);
	for (id = d->emitted_mod + 1; id <= d->mod.n; id++) {
		const struct seg_mod_key *m = itab__key(&d->mod, id, &len);

		sbuf__varint(b, m->kind);
		sbuf__varint(b, m->path_sid);
		sbuf__varint(b, m->bid_len);
		sbuf__put(b, m->bid, m->bid_len);
	}
	sbuf__varint(b, d->emitted_frame + 1);
	sbuf__varint(b, d->frame.n - d->emitted_frame);
	for (id = d->emitted_frame + 1; id <= d->frame.n; id++) {
		const struct seg_frame_key *f = itab__key(&d->frame, id, &len);

		sbuf__varint(b, f->name_sid);
		sbuf__varint(b, f->mod_sid);
		sbuf__varint(b, f->flags);
		sbuf__varint(b, f->offset);
	}
	sbuf__varint(b, d->emitted_stack + 1);
	sbuf__varint(b, d->stack.n - d->emitted_stack);
	for (id = d->emitted_stack + 1; id <= d->stack.n; id++) {
		const uint32_t *s = itab__key(&d->stack, id, &len);
		uint32_t n = s[0] & 0xffff, nk = s[0] >> 16, j, prev = 0;

		sbuf__varint(b, n);
		sbuf__varint(b, nk);
		/* Frames of one stack tend to be close in id: delta them. */
		for (j = 0; j < n; j++) {
			sbuf__varint(b, zigzag((int64_t)s[1 + j] - (int64_t)prev));
			prev = s[1 + j];
		}
	}
}

/*
 * Rows, column by column (each column of similar small numbers is what zstd
 * compresses best), sorted by (sec, pid, tid, stack) so deltas are small.
 */
static int encode_rows(struct store_writer *w, struct sbuf *b, int64_t base_s, uint32_t *ret_nsec)
{
	struct block *k = &w->blk;
	uint32_t n = k->rows.n, i, nsec = 0;
	const struct row *rows = k->rows.v;
	uint32_t *o;
	int64_t prev_sec = INT64_MIN;

	b->len = 0;
	if (n > w->order_cap) {
		o = realloc(w->order, (size_t)n * sizeof(*o));
		if (!o)
			return -ENOMEM;
		w->order = o;
		w->order_cap = n;
	}
	o = w->order;
	for (i = 0; i < n; i++)
		o[i] = i;
	if (n)
		qsort_r(o, n, sizeof(*o), row_cmp, (void *)rows);
	for (i = 0; i < n; i++) {
		if (rows[o[i]].k.sec != prev_sec)
			nsec++;
		prev_sec = rows[o[i]].k.sec;
	}
	*ret_nsec = nsec;

	sbuf__varint(b, n);
#define COLUMN(expr)                                       \
	do {                                               \
		const struct row *p = NULL;                \
		for (i = 0; i < n; i++) {                  \
			const struct row *r = &rows[o[i]]; \
			sbuf__varint(b, (expr));           \
			p = r;                             \
		}                                          \
		(void)p;                                   \
	} while (0)
	COLUMN((uint64_t)(r->k.sec - (p ? p->k.sec : base_s)));
	COLUMN(zigzag((int64_t)r->k.pid - (p ? (int64_t)p->k.pid : 0)));
	COLUMN(zigzag((int64_t)r->k.tid - (int64_t)r->k.pid));
	COLUMN(r->k.cpu);
	COLUMN(zigzag((int64_t)(r->k.cgroup - (p ? p->k.cgroup : 0))));
	COLUMN(r->k.kind);
	COLUMN(zigzag((int64_t)r->k.comm - (p ? (int64_t)p->k.comm : 0)));
	COLUMN(zigzag((int64_t)r->k.pcomm - (p ? (int64_t)p->k.pcomm : 0)));
	COLUMN(zigzag((int64_t)r->k.env - (p ? (int64_t)p->k.env : 0)));
	COLUMN(r->k.probe);
	COLUMN(zigzag((int64_t)r->k.stack - (p ? (int64_t)p->k.stack : 0)));
	COLUMN(r->count);
	/* On-CPU weight equals count: store the difference, mostly zeros. */
	COLUMN(zigzag((int64_t)(r->weight - r->count)));
#undef COLUMN
	return b->oom ? -ENOMEM : 0;
}

static int compress_into(struct store_writer *w, uint8_t *dst, size_t cap, const struct sbuf *src,
			 uint32_t *ret_len)
{
	size_t z;

	if (!src->len) {
		*ret_len = 0;
		return 0;
	}
	z = ZSTD_compress2(w->cctx, dst, cap, src->p, src->len);
	if (ZSTD_isError(z))
		return -EIO;
	*ret_len = (uint32_t)z;
	return 0;
}

static void block_reset(struct block *k)
{
	k->open = false;
	k->rows.n = 0;
	k->samples = 0;
	if (k->slots)
		memset(k->slots, 0, (size_t)k->nslots * sizeof(*k->slots));
}

int store_writer__close_block(struct store_writer *w)
{
	struct block *k = &w->blk;
	struct store_block_hdr h;
	uint32_t dz = 0, az = 0, nsec = 0;
	size_t cap;
	struct wop *op;
	int64_t min_s, max_s;
	int r;

	/* Definitions reach the journal before the input holding them is released. */
	jr_flush(w);
	if (!k->open)
		return 0;
	min_s = (int64_t)(k->t_min_ns / NS);
	max_s = (int64_t)(k->t_max_ns / NS);
	encode_dict(w, &w->raw_dict);
	r = encode_rows(w, &w->raw_data, min_s, &nsec);
	if (r < 0 || w->raw_dict.oom)
		goto out_reset;
	cap = sizeof(h) + ZSTD_compressBound(w->raw_dict.len) + ZSTD_compressBound(w->raw_data.len);
	op = calloc(1, sizeof(*op));
	if (!op) {
		r = -ENOMEM;
		goto out_reset;
	}
	op->buf = malloc(cap);
	if (!op->buf) {
		free(op);
		r = -ENOMEM;
		goto out_reset;
	}
	r = compress_into(w, op->buf + sizeof(h), cap - sizeof(h), &w->raw_dict, &dz);
	if (!r)
		r = compress_into(w, op->buf + sizeof(h) + dz, cap - sizeof(h) - dz, &w->raw_data,
				  &az);
	if (r < 0) {
		free(op->buf);
		free(op);
		goto out_reset;
	}
	memset(&h, 0, sizeof(h));
	h.magic = STORE_BLOCK_MAGIC;
	h.major = STORE_VERSION_MAJOR;
	h.minor = STORE_VERSION_MINOR;
	h.type = STORE_BLOCK_DATA;
	h.flags = dz ? STORE_BF_DICT : 0;
	h.t_min_ns = k->t_min_ns;
	h.t_max_ns = k->t_max_ns;
	h.dict_zlen = dz;
	h.dict_rawlen = (uint32_t)w->raw_dict.len;
	h.dict_crc = store_crc(op->buf + sizeof(h), dz);
	h.data_zlen = az;
	h.data_rawlen = (uint32_t)w->raw_data.len;
	h.data_crc = store_crc(op->buf + sizeof(h) + dz, az);
	h.n_samples = k->samples > UINT32_MAX ? UINT32_MAX : (uint32_t)k->samples;
	h.crc = store_crc(&h, offsetof(struct store_block_hdr, crc));
	memcpy(op->buf, &h, sizeof(h));

	op->kind = WOP_BLOCK;
	op->len = (uint32_t)(sizeof(h) + dz + az);
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
		.n_sec = (uint8_t)MIN(nsec, 255u),
		.flags = h.flags,
	};
	op->ent.crc = store_crc(&op->ent, offsetof(struct store_idx_entry, crc));
	w->seg_off += op->len;

	/* The dictionary delta is in this block now, whatever happens to the write. */
	w->dict.emitted_str = w->dict.str.n;
	w->dict.emitted_mod = w->dict.mod.n;
	w->dict.emitted_frame = w->dict.frame.n;
	w->dict.emitted_stack = w->dict.stack.n;

	w->st.blocks++;
	w->st.bytes_raw += w->raw_dict.len + w->raw_data.len + sizeof(h);
	w->st.bytes_disk += op->len;
	if (uring_submit_op(w, op) < 0)
		retry_push(w, op, realtime_ns());
	block_reset(k);
	return 1;

out_reset:
	/* Cannot encode (out of memory): the rows are lost, the dict is re-sent. */
	block_reset(k);
	return r;
}

/* ------------------------------------------------------------ aggregation */

static int rows_grow_slots(struct block *k)
{
	uint32_t ns = k->nslots ? k->nslots * 2 : 1024, i;
	uint32_t *s = calloc(ns, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (i = 0; i < k->rows.n; i++) {
		uint32_t h = k->rows.v[i].hash & (ns - 1);

		while (s[h])
			h = (h + 1) & (ns - 1);
		s[h] = i + 1;
	}
	free(k->slots);
	k->slots = s;
	k->nslots = ns;
	return 0;
}

static int block_add(struct block *k, const struct row_key *key, uint64_t count, uint64_t weight)
{
	uint32_t h = store_hash(key, sizeof(*key)), i;
	struct row nr;
	int r;

	if ((uint64_t)(k->rows.n + 1) * 2 > k->nslots && rows_grow_slots(k) < 0)
		return -ENOMEM;
	i = h & (k->nslots - 1);
	while (k->slots[i]) {
		struct row *row = &k->rows.v[k->slots[i] - 1];

		if (row->hash == h && !memcmp(&row->k, key, sizeof(*key))) {
			row->count += count;
			row->weight += weight;
			return 0;
		}
		i = (i + 1) & (k->nslots - 1);
	}
	nr = (struct row){.k = *key, .count = count, .weight = weight, .hash = h};
	r = VEC_PUSH(k->rows, nr);
	if (r < 0)
		return r;
	k->slots[i] = (uint32_t)r;
	return 0;
}

/* The open block takes a sample of second sec: its interval, or a bit late. */
static bool block_takes(const struct store_writer *w, int64_t sec)
{
	const struct block *k = &w->blk;

	if (sec >= k->base_s + (int64_t)w->o.block_seconds)
		return false;
	return sec >= k->base_s ||
	       (k->base_s - sec <= LATE_MAX_S &&
		(int64_t)(k->t_max_ns / NS) - sec < (int64_t)STORE_MAX_BLOCK_SPAN);
}

bool store_writer__fits(const struct store_writer *w, uint64_t time_ns)
{
	return !w->blk.open || block_takes(w, (int64_t)(time_ns / NS));
}

/* Make sure a block that can take a sample at time_ns is open. */
static int block_for(struct store_writer *w, uint64_t time_ns)
{
	int64_t sec = (int64_t)(time_ns / NS), iv = w->o.block_seconds;
	struct block *k = &w->blk;
	int r;

	if (k->open) {
		if (block_takes(w, sec))
			return 0;
		r = store_writer__close_block(w);
		if (r < 0)
			return r;
	}
	/* A store dir or segment that could not be created (full disk, EACCES) is
	 * retried once a second, not once per sample; samples meanwhile are refused. */
	if (w->open_err && realtime_ns() < w->open_retry_ns)
		return w->open_err;
	w->open_err = 0;
	/* Day rotation forward only: a late sample from before midnight goes to today's store. */
	if (!w->dir || store_fmt__local_day(sec) > w->dir_day) {
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
		   w->seg_off > SEG_MAX_BYTES) {
		r = open_segment(w, sec);
		if (r < 0)
			goto out_backoff;
	}
	k->open = true;
	k->base_s = sec - sec % iv;
	k->t_min_ns = time_ns;
	k->t_max_ns = time_ns;
	return 0;

out_backoff:
	w->open_err = r;
	w->open_retry_ns = realtime_ns() + NS;
	return r;
}

static void block_time(struct block *k, uint64_t t)
{
	if (t < k->t_min_ns)
		k->t_min_ns = t;
	if (t > k->t_max_ns)
		k->t_max_ns = t;
}

int store_writer__add_sample(struct store_writer *w, const struct cpa_sample_out *s)
{
	struct row_key key;
	int r;

	r = block_for(w, s->time_ns);
	if (r < 0)
		return r;
	memset(&key, 0, sizeof(key));
	key.sec = (int64_t)(s->time_ns / NS);
	key.cgroup = s->cgroup_id;
	key.pid = s->pid;
	key.tid = s->tid;
	key.cpu = s->cpu;
	key.kind = s->kind;
	key.probe = s->probe_id;
	r = seg_sym_stack(w, s->stack_id);
	if (r < 0)
		return r;
	key.stack = (uint32_t)r;
	r = seg_sym_str(w, s->comm_id);
	if (r < 0)
		return r;
	key.comm = (uint32_t)r;
	r = seg_sym_str(w, s->pcomm_id);
	if (r < 0)
		return r;
	key.pcomm = (uint32_t)r;
	r = seg_sym_str(w, s->env_id);
	if (r < 0)
		return r;
	key.env = (uint32_t)r;
	block_time(&w->blk, s->time_ns);
	r = block_add(&w->blk, &key, 1, s->weight);
	if (r < 0)
		return r;
	w->blk.samples++;
	w->st.samples++;
	return 0;
}

int store_writer__add_loss(struct store_writer *w, const struct cpa_loss *l)
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
	r = seg_marker_stack(w, name);
	if (r < 0)
		return r;
	memset(&key, 0, sizeof(key));
	key.sec = (int64_t)(l->time_ns / NS);
	key.stack = (uint32_t)r;
	key.kind = l->kind;
	block_time(&w->blk, l->time_ns);
	r = block_add(&w->blk, &key, l->count, l->weight ? l->weight : l->count);
	if (r < 0)
		return r;
	w->blk.samples += l->count;
	w->st.lost_samples += l->count;
	return 0;
}

/* ------------------------------------------------------------ lifecycle */

uint64_t store_writer__deadline(const struct store_writer *w)
{
	if (!w->blk.open)
		return 0;
	/* The interval is over, plus one second for samples still in the pipeline. */
	return (uint64_t)(w->blk.base_s + (int64_t)w->o.block_seconds + 1) * NS;
}

size_t store_writer__open_bytes(const struct store_writer *w)
{
	return (size_t)w->blk.rows.n * sizeof(struct row) + itab__mem(&w->dict.str) +
	       itab__mem(&w->dict.stack) + itab__mem(&w->dict.frame);
}

int store_writer__tick(struct store_writer *w, uint64_t now_ns)
{
	int closed = 0, r;

	jr_flush(w);
	uring_reap(w, false);
	retry_due(w, now_ns, false);
	if (w->blk.open && now_ns >= store_writer__deadline(w)) {
		r = store_writer__close_block(w);
		if (r < 0)
			return r;
		closed = r;
	}
	/* Full disk: give up the oldest segment (never the one being written),
	 * at most every 10 s, so the retries find room and sampling goes on. */
	if (w->disk_full && w->dir && now_ns / NS >= w->last_emergency_s + 10) {
		w->last_emergency_s = now_ns / NS;
		w->disk_full = false;
		r = store_retention__trim_oldest(w->root, w->dir->path, w->seg_no);
		if (r > 0)
			w->st.trimmed_files += (uint64_t)r;
	}
	if ((w->o.persistent_day || w->o.max_store_bytes) && w->dir &&
	    now_ns / NS >= w->last_retention_s + RETENTION_EVERY_S) {
		w->last_retention_s = now_ns / NS;
		r = store_retention__run(w->root, w->o.persistent_day, w->o.max_store_bytes,
					 w->dir->path, w->seg_no, now_ns);
		if (r > 0)
			w->st.trimmed_files += (uint64_t)r;
	}
	if (closed)
		io_uring_submit(&w->ring);
	return closed;
}

int store_writer__flush(struct store_writer *w, bool sync)
{
	int r = 0, rounds;

	if (store_writer__close_block(w) < 0)
		r = -ENOMEM;
	/* Bounded: a disk that keeps failing does not hold us here forever. */
	for (rounds = 0; rounds < 3 && (w->inflight || w->retry_head); rounds++) {
		retry_due(w, 0, true);
		io_uring_submit(&w->ring);
		while (w->inflight)
			uring_reap(w, true);
	}
	if (sync && (w->seg || w->dir)) {
		struct sfile *fs[2] = {w->seg, w->dir ? w->dir->idx : NULL};
		unsigned int i;

		for (i = 0; i < 2; i++) {
			struct wop *op;

			if (!fs[i])
				continue;
			op = calloc(1, sizeof(*op));
			if (!op)
				return -ENOMEM;
			op->kind = WOP_FSYNC;
			op->f = fs[i];
			fs[i]->refs++;
			uring_submit_op(w, op);
		}
		io_uring_submit(&w->ring);
		while (w->inflight)
			uring_reap(w, true);
	}
	if (w->retry_head)
		r = w->st.last_error ? w->st.last_error : -EIO;
	return r;
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
	w->o = *o;
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
	w->run_id = realtime_ns();
	r = io_uring_queue_init(URING_DEPTH, &w->ring, 0);
	if (r < 0) {
		free(w);
		return r;
	}
	w->ring_ok = true;
	w->cctx = ZSTD_createCCtx();
	if (!w->cctx) {
		store_writer__free(w);
		return -ENOMEM;
	}
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_compressionLevel, w->o.zstd_level);
	/* The header has the lengths and a crc32c: keep the zstd frame minimal. */
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_contentSizeFlag, 0);
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_checksumFlag, 0);
	ZSTD_CCtx_setParameter(w->cctx, ZSTD_c_dictIDFlag, 0);
	*ret = w;
	return 0;
}

void store_writer__set_run_id(struct store_writer *w, uint64_t run_id)
{
	if (run_id)
		w->run_id = run_id;
}

void store_writer__free(struct store_writer *w)
{
	if (!w)
		return;
	if (w->ring_ok) {
		store_writer__flush(w, true);
		/* Whatever still waits for a retry is given up now. */
		while (w->retry_head) {
			struct wop *op = w->retry_head;

			w->retry_head = op->next;
			wop_free(op);
		}
		io_uring_queue_exit(&w->ring);
	}
	close_dir(w);
	sfile_put(w->jr.f);
	sbuf__free(&w->jr.pend);
	ZSTD_freeCCtx(w->cctx);
	u32map__free(&w->sym.str_map);
	u32map__free(&w->sym.mod_map);
	u32map__free(&w->sym.frame_map);
	u32map__free(&w->sym.stack_map);
	free(w->sym.strs.v);
	free(w->sym.mods.v);
	free(w->sym.frames.v);
	free(w->sym.stacks.v);
	free(w->sym.u32s.v);
	sbuf__free(&w->sym.bytes);
	itab__free(&w->dict.str);
	itab__free(&w->dict.mod);
	itab__free(&w->dict.frame);
	itab__free(&w->dict.stack);
	free(w->blk.rows.v);
	free(w->blk.slots);
	sbuf__free(&w->raw_dict);
	sbuf__free(&w->raw_data);
	sbuf__free(&w->scratch);
	free(w->order);
	free(w);
}
