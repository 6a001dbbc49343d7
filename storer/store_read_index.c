// SPDX-License-Identifier: MIT
/*
 * Store reader, the blocks of a store dir (store_reader_pvt.h): its segments
 * (store_dir.c's scan), each one's header, the index, and a scan for the
 * blocks the index does not list, between and after the indexed ones (a
 * crash between a block and its index entry, a lost index).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/timeutil.h"
#include "store_dir_pvt.h"
#include "store_reader_pvt.h"

#define MAX_INDEX_BYTES (64u << 20)

static int block_cmp(const void *a, const void *b)
{
	const struct rblock *x = a, *y = b;

	return x->off < y->off ? -1 : x->off > y->off;
}

/* Past this many increasing runs the blocks go to qsort(). */
#define SORT_MAX_RUNS 8

/*
 * v in block_cmp() order, as qsort() leaves it. The writer appends blocks in
 * file order, so a segment's blocks are one increasing run, or a few (index
 * entries rewritten after a restart, the blocks a scan found appended after
 * the indexed ones): checked in one pass, a few runs merged in another. Equal
 * offsets (a duplicated entry), many runs or no memory: qsort() as before, so
 * the order is qsort's in every case (with distinct offsets there is only one).
 */
void store_read__sort_blocks(struct rblock *v, uint32_t n)
{
	uint32_t run[SORT_MAX_RUNS + 1], head[SORT_MAX_RUNS], nrun = 1, i, j;
	struct rblock *tmp;

	run[0] = 0;
	for (i = 1; i < n; i++) {
		if (v[i].off > v[i - 1].off)
			continue;
		if (v[i].off == v[i - 1].off || nrun == SORT_MAX_RUNS)
			goto fallback;
		run[nrun++] = i;
	}
	if (nrun == 1)
		return;
	run[nrun] = n;
	tmp = malloc((size_t)n * sizeof(*v));
	if (!tmp)
		goto fallback;
	memcpy(head, run, nrun * sizeof(*head));
	for (i = 0; i < n; i++) {
		uint32_t best = UINT32_MAX;

		for (j = 0; j < nrun; j++) {
			if (head[j] == run[j + 1])
				continue;
			if (best == UINT32_MAX || v[head[j]].off < v[head[best]].off)
				best = j;
			else if (v[head[j]].off == v[head[best]].off) {
				free(tmp);
				goto fallback;
			}
		}
		tmp[i] = v[head[best]++];
	}
	memcpy(v, tmp, (size_t)n * sizeof(*v));
	free(tmp);
	return;
fallback:
	qsort(v, n, sizeof(*v), block_cmp);
}

static int seg_add_block(struct rseg *s, const struct rblock *b)
{
	if (grow((void **)&s->blocks, &s->cap, s->n + 1, sizeof(*b)) < 0)
		return -ENOMEM;
	s->blocks[s->n++] = *b;
	return 0;
}

static struct rseg *seg_find(struct store_reader *r, uint32_t seg_no)
{
	uint32_t lo = 0, hi = r->n_seg;

	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (r->segs[mid].seg_no == seg_no)
			return &r->segs[mid];
		if (r->segs[mid].seg_no < seg_no)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int seg_cmp(const void *a, const void *b)
{
	const struct rseg *x = a, *y = b;

	return x->seg_no < y->seg_no ? -1 : x->seg_no > y->seg_no;
}

/*
 * A read window over a segment for the scan: header checks and magic
 * searches are served from one buffer, so resynchronising over garbage
 * (even a segment made of nothing but block magics) costs one read per
 * window, not one per candidate; holes of a sparse file are skipped with
 * SEEK_DATA rather than read as zeros.
 */
#define SCAN_WIN (256u << 10)

struct scan_win {
	int fd;
	uint64_t start; /* file offset of buf[0] */
	size_t n;	/* valid bytes */
	uint8_t *buf;
};

/* The bytes [pos, pos + len) (len <= SCAN_WIN), or NULL past what the file has. */
static const uint8_t *win_get(struct scan_win *w, uint64_t pos, size_t len, uint64_t end)
{
	ssize_t n;

	if (pos >= w->start && pos + len <= w->start + w->n)
		return w->buf + (pos - w->start);
	if (pos + len > end)
		return NULL;
	n = read_upto(w->fd, w->buf, (size_t)MIN((uint64_t)SCAN_WIN, end - pos), (off_t)pos);
	w->start = pos;
	w->n = n < 0 ? 0 : (size_t)n;
	return len <= w->n ? w->buf : NULL;
}

/* Next offset in [pos, end) where a block magic starts, or end. */
static uint64_t find_magic(struct scan_win *w, uint64_t pos, uint64_t end)
{
	const uint32_t m = STORE_BLOCK_MAGIC;

	while (pos + 4 <= end) {
		const uint8_t *p, *hit;
		uint64_t lim;
		off_t data;

		if (!(pos >= w->start && pos + 4 <= w->start + w->n)) {
			/* Refill; jump over a hole first. */
			data = lseek(w->fd, (off_t)pos, SEEK_DATA);
			if (data < 0 && errno == ENXIO)
				return end;
			if (data > (off_t)pos)
				pos = (uint64_t)data;
			if (pos + 4 > end || !win_get(w, pos, 4, end))
				return end;
		}
		lim = MIN(w->start + w->n, end); /* >= pos + 4 */
		p = w->buf + (pos - w->start);
		hit = memmem(p, (size_t)(lim - pos), &m, 4);
		if (hit)
			return pos + (uint64_t)(hit - p);
		pos = lim - 3;
	}
	return end;
}

static void note_skipped(struct store_reader *r, struct rseg *s, uint64_t from, uint64_t to,
			 bool torn)
{
	r->st.bytes_skipped += to - from;
	if (torn) {
		r->st.blocks_torn++;
		store_read__notice(
			r,
			"%s: %llu bytes at %llu cut short at the end (torn tail, crash mid-write), skipped",
			s->path, (unsigned long long)(to - from), (unsigned long long)from);
	} else {
		store_read__notice(r, "%s: %llu unreadable bytes at %llu, skipped", s->path,
				   (unsigned long long)(to - from), (unsigned long long)from);
	}
}

/* Blocks in [pos, end) the index did not list (a crash between a block and
 * its index entry, or a lost index). Headers are trusted only with a valid
 * crc; a run of garbage is reported once. */
static int scan_region(struct store_reader *r, struct rseg *s, uint64_t pos, uint64_t end,
		       bool at_tail)
{
	struct scan_win w = {.fd = s->fd};
	uint64_t bad_from = UINT64_MAX;
	bool cut = false; /* the bad run starts like a block cut short: torn at the tail */

	w.buf = malloc(SCAN_WIN);
	if (!w.buf)
		return -ENOMEM;
	while (pos < end) {
		struct store_block_hdr h;
		const uint8_t *p;
		struct rblock b;

		if (end - pos < sizeof(h)) {
			if (bad_from == UINT64_MAX) {
				bad_from = pos;
				cut = true;
			}
			break;
		}
		p = win_get(&w, pos, sizeof(h), end);
		if (!p)
			break;
		memcpy(&h, p, sizeof(h));
		if (!store_read__hdr_ok(&h)) {
			if (bad_from == UINT64_MAX) {
				bad_from = pos;
				cut = h.magic == STORE_BLOCK_MAGIC;
			}
			pos = find_magic(&w, pos + 1, end);
			/* A cut block is the last thing in its file: more magics
			 * after it are garbage, not a tear. */
			cut = cut && pos == end;
			continue;
		}
		if (pos + store_read__block_len(&h) > end) {
			/* Runs past the end: torn when this is the tail, else
			 * garbage that happens to look like a header. */
			if (bad_from == UINT64_MAX) {
				bad_from = pos;
				cut = true;
			}
			if (at_tail) {
				pos = end;
				break;
			}
			pos = find_magic(&w, pos + 1, end);
			continue;
		}
		if (bad_from != UINT64_MAX) {
			note_skipped(r, s, bad_from, pos, false);
			bad_from = UINT64_MAX;
		}
		b = (struct rblock){
			.off = (uint32_t)pos,
			.len = store_read__block_len(&h),
			.t_min_s = (uint32_t)(h.t_min_ns / NSEC_PER_SEC),
			.span_s = (uint16_t)(h.t_max_ns / NSEC_PER_SEC - h.t_min_ns / NSEC_PER_SEC),
			.n_sec = (uint8_t)MIN(
				h.t_max_ns / NSEC_PER_SEC - h.t_min_ns / NSEC_PER_SEC + 1, 255u),
			.flags = h.flags,
		};
		if (seg_add_block(s, &b) < 0) {
			free(w.buf);
			return -ENOMEM;
		}
		r->st.blocks_recovered++;
		pos += b.len;
	}
	if (bad_from != UINT64_MAX && bad_from < end)
		note_skipped(r, s, bad_from, end, at_tail && cut);
	free(w.buf);
	return 0;
}

static int seg_add(void *ctx, const char *name, uint32_t no)
{
	struct store_reader *r = ctx;
	struct rseg *s;

	(void)name; /* the canonical name of segment no (store_dir__seg_name()) */
	if (grow((void **)&r->segs, &r->cap_seg, r->n_seg + 1, sizeof(*r->segs)) < 0)
		return -ENOMEM;
	s = &r->segs[r->n_seg++];
	memset(s, 0, sizeof(*s));
	s->seg_no = no;
	s->fd = -1;
	store_dir__seg_path(s->path, sizeof(s->path), r->dir, no);
	return 0;
}

int store_read__segs(struct store_reader *r)
{
	int ret = store_dir__for_each_seg(r->dir, seg_add, r);

	if (ret == -ENOMEM)
		return ret;
	if (ret < 0)
		return store_read__fail(r, ret, "cannot open store '%s': %s", r->dir,
					strerror(-ret));
	if (r->n_seg)
		qsort(r->segs, r->n_seg, sizeof(*r->segs), seg_cmp);
	return 0;
}

static int fail_newer(struct store_reader *r, unsigned int major, unsigned int minor)
{
	return store_read__fail(
		r, -EPROTONOSUPPORT,
		"store '%s' has format version %u.%u, newer than the %d.%d this cpa reads: use a newer cpa",
		r->dir, major, minor, STORE_VERSION_MAJOR, STORE_VERSION_MINOR);
}

static void seg_skip(struct store_reader *r, struct rseg *s, const char *why)
{
	store_read__notice(r, "%s: %s, skipped", s->path, why);
	s->skipped = true;
	rseg__close(s);
	s->size = 0;
	r->st.segs_skipped++;
}

static int check_seg_hdr(struct store_reader *r, struct rseg *s)
{
	struct store_seg_hdr h;
	struct stat sb;
	ssize_t n;

	s->fd = store_open_regular(s->path);
	if (s->fd < 0) {
		store_read__notice(r, "%s: %s, skipped", s->path,
				   s->fd == -EINVAL ? "not a regular file" : strerror(-s->fd));
		s->fd = -1;
		s->skipped = true;
		r->st.segs_skipped++;
		return 0;
	}
	if (fstat(s->fd, &sb) < 0) {
		seg_skip(r, s, strerror(errno));
		return 0;
	}
	s->size = (uint64_t)sb.st_size;
	/* Offsets are u32 and the writer rotates at 1 GiB: the rest of a
	 * larger file is not ours. */
	if (s->size > UINT32_MAX) {
		store_read__notice(
			r, "%s: %llu bytes, larger than a segment can be: reading the first 4 GiB",
			s->path, (unsigned long long)s->size);
		r->st.bytes_skipped += s->size - UINT32_MAX;
		s->size = UINT32_MAX;
	}
	n = read_upto(s->fd, &h, sizeof(h), 0);
	if (n != (ssize_t)sizeof(h) || h.magic != STORE_SEG_MAGIC ||
	    h.crc != store_crc(&h, offsetof(struct store_seg_hdr, crc))) {
		/* The checksum first: a flipped version byte is corruption, not
		 * a newer format. Still scan it: blocks are self-describing. */
		store_read__notice(r, "%s: bad segment header (corrupt), scanning its blocks",
				   s->path);
		if (s->size < sizeof(h))
			s->size = 0;
		return 0;
	}
	if (h.major > STORE_VERSION_MAJOR)
		return fail_newer(r, h.major, h.minor);
	if (h.seg_no != s->seg_no) {
		char why[96];

		/* A copy of another segment under a name of its own would count
		 * its samples twice. */
		snprintf(why, sizeof(why), "its header says segment %u (a copy?)", h.seg_no);
		seg_skip(r, s, why);
	}
	return 0;
}

static int read_index(struct store_reader *r)
{
	char path[PATH_MAX + 8];
	_cleanup_close_ int fd = -1;
	_cleanup_free_ uint8_t *buf = NULL;
	struct store_idx_hdr h;
	struct stat sb;
	uint64_t off;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/index", r->dir);
	fd = store_open_regular(path);
	if (fd == -EINVAL)
		store_read__notice(
			r, "%s: not a regular file, rebuilding the index from the segments", path);
	if (fd < 0)
		return 0; /* no index: the scan finds everything */
	if (fstat(fd, &sb) < 0 || (uint64_t)sb.st_size < sizeof(h))
		return 0;
	n = read_upto(fd, &h, sizeof(h), 0);
	/* The checksum first: a flipped byte in the version is a corrupt
	 * header, not a newer format. */
	if (n != (ssize_t)sizeof(h) || h.magic != STORE_IDX_MAGIC ||
	    h.crc != store_crc(&h, offsetof(struct store_idx_hdr, crc))) {
		store_read__notice(
			r, "%s: bad index header (corrupt), rebuilding the index from the segments",
			path);
		return 0;
	}
	if (h.major > STORE_VERSION_MAJOR)
		return fail_newer(r, h.major, h.minor);
	if (h.entry_size != sizeof(struct store_idx_entry)) {
		store_read__notice(
			r, "%s: bad index header, rebuilding the index from the segments", path);
		return 0;
	}
	if ((uint64_t)sb.st_size > MAX_INDEX_BYTES) {
		store_read__notice(r, "%s: index too large, scanning segments instead", path);
		return 0;
	}
	buf = malloc((size_t)sb.st_size);
	if (!buf)
		return -ENOMEM;
	n = read_upto(fd, buf, (size_t)sb.st_size, 0);
	if (n < 0)
		return (int)n;
	for (off = sizeof(h); off + sizeof(struct store_idx_entry) <= (uint64_t)n;
	     off += sizeof(struct store_idx_entry)) {
		struct store_idx_entry e;
		struct rblock b;
		struct rseg *s;

		memcpy(&e, buf + off, sizeof(e));
		if (e.crc != store_crc(&e, offsetof(struct store_idx_entry, crc)))
			continue; /* torn or never written (a hole left by a failed write) */
		s = seg_find(r, e.seg_no);
		if (!s || s->skipped || e.len < sizeof(struct store_block_hdr))
			continue; /* segment trimmed by retention, or not read */
		b = (struct rblock){.off = e.off,
				    .len = e.len,
				    .t_min_s = e.t_min_s,
				    .span_s = e.span_s,
				    .n_sec = e.n_sec,
				    .flags = e.flags,
				    .indexed = true};
		if (seg_add_block(s, &b) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* Sort, drop duplicates and overlaps, then scan the gaps and the tail. */
static int seg_finish(struct store_reader *r, struct rseg *s)
{
	uint32_t i, k = 0, n, past = 0, past_off = 0;
	uint64_t pos = sizeof(struct store_seg_hdr), past_bytes = 0;
	int ret;

	if (s->fd < 0)
		return 0;
	store_read__sort_blocks(s->blocks, s->n);
	for (i = 0; i < s->n; i++) {
		const struct rblock *b = &s->blocks[i];

		if (k && b->off < (uint64_t)s->blocks[k - 1].off + s->blocks[k - 1].len)
			continue;
		if ((uint64_t)b->off + b->len > s->size) {
			/* Indexed, but the file ends first (a torn write, a
			 * truncated copy): not readable, so not in the range.
			 * The scan below reports the bytes that are there; the
			 * blocks wholly past the end are counted (once each, a
			 * duplicate index entry not again) and said once below. */
			if (b->off >= s->size && !(past && b->off == past_off)) {
				past++;
				past_off = b->off;
				past_bytes += b->len;
			}
			continue;
		}
		s->blocks[k++] = *b;
	}
	if (past) {
		r->st.blocks_torn += past;
		store_read__notice(
			r,
			"%s: %u indexed block(s), %llu bytes, lie past the end of the file "
			"(%llu bytes: truncated), skipped",
			s->path, past, (unsigned long long)past_bytes, (unsigned long long)s->size);
	}
	s->n = k;
	n = s->n;
	for (i = 0; i < n; i++) {
		const struct rblock *b = &s->blocks[i];

		if (b->off > pos) {
			ret = scan_region(r, s, pos, MIN((uint64_t)b->off, s->size), false);
			if (ret < 0)
				return ret;
		}
		pos = MAX(pos, (uint64_t)b->off + b->len);
	}
	if (pos < s->size) {
		ret = scan_region(r, s, pos, s->size, true);
		if (ret < 0)
			return ret;
	}
	if (s->n != n)
		store_read__sort_blocks(s->blocks, s->n);
	r->st.blocks_indexed += s->n;
	rseg__close(s);
	return 0;
}

int store_read__blocks(struct store_reader *r)
{
	uint32_t i;
	int e;

	for (i = 0; i < r->n_seg; i++) {
		e = check_seg_hdr(r, &r->segs[i]);
		if (e < 0)
			return e;
	}
	e = read_index(r);
	if (e < 0)
		return e;
	for (i = 0; i < r->n_seg; i++) {
		e = seg_finish(r, &r->segs[i]);
		if (e < 0)
			return e;
	}
	return 0;
}
