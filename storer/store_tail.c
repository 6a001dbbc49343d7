// SPDX-License-Identifier: MIT
/*
 * What an earlier life of the storer stored (store_root__stored_seq(), store.h):
 * the highest record seq of the complete blocks at the tail of a run's store
 * dirs (STORE_BF_SEQ, format 1.2). A storer killed after a block's write
 * completed and before it released that block's input restarts from the
 * ring's older mark; it starts its dedup at this seq instead, so it does not
 * store the block again (storer/storer.c; docs/store-format.md, "The storer
 * stage and exactly-once").
 *
 * Bounded: per dir, the index's last TAIL_ENTRIES entries name the newest
 * indexed block of the newest segment whose input was released (seq <= the
 * ring's mark), and the blocks from there to the end of the file are read
 * (those stored since the last release: a few). Only when the index names no
 * such block of that segment among them is the segment walked from its
 * header. A block counts only whole (header, both section CRCs, and the data
 * section's zstd frame when it carries a seq); the walk stops at the first
 * one that is not (a torn tail, a hole), so nothing past a gap counts
 * either: a lower seq only stores a block again, a higher one would lose one.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "common/macro.h"
#include "store.h"
#include "store_block_pvt.h"
#include "store_dir_pvt.h"
#include "store_fmt.h"
#include "store_reader_pvt.h"

#define TAIL_ENTRIES 64u /* index entries read from its end */
#define TAIL_SEGS    4u	 /* segments looked at, newest first, for a complete block */

struct tail {
	int fd;
	uint64_t size;
	ZSTD_DCtx *dctx;
	struct sbuf z, raw;
};

/* The block at off: its length when it is whole (its seq into *ret_seq,
 * UINT64_MAX when it has none), 0 when it is not, or -ENOMEM. */
static int64_t tail_block(struct tail *t, uint64_t off, uint64_t *ret_seq)
{
	struct store_block_hdr h;
	const uint8_t *data;
	uint32_t len;
	size_t got;

	*ret_seq = UINT64_MAX;
	if (off + sizeof(h) > t->size || store_read__pread_exact(t->fd, &h, sizeof(h), off) < 0 ||
	    !store_read__hdr_ok(&h) || h.major > STORE_VERSION_MAJOR)
		return 0;
	len = store_read__block_len(&h);
	if (off + len > t->size)
		return 0;
	t->z.len = 0;
	if (sbuf__reserve(&t->z, len) < 0)
		return -ENOMEM;
	if (store_read__pread_exact(t->fd, t->z.p, len, off) < 0)
		return 0;
	data = t->z.p + sizeof(h) + h.dict_zlen;
	if (store_crc(t->z.p + sizeof(h), h.dict_zlen) != h.dict_crc ||
	    store_crc(data, h.data_zlen) != h.data_crc)
		return 0;
	if (!(h.flags & STORE_BF_SEQ))
		return len;
	t->raw.len = 0;
	if (sbuf__reserve(&t->raw, h.data_rawlen) < 0)
		return -ENOMEM;
	got = ZSTD_decompressDCtx(t->dctx, t->raw.p, h.data_rawlen, data, h.data_zlen);
	if (ZSTD_isError(got) || got != h.data_rawlen ||
	    !store_block__seq_trailer(t->raw.p, got, ret_seq))
		return 0;
	return len;
}

/* The blocks from off on, while each is whole: how many, their highest seq. */
static int tail_walk(struct tail *t, uint64_t off, uint32_t *ret_n, uint64_t *ret_seq)
{
	*ret_n = 0;
	*ret_seq = 0;
	while (off < t->size) {
		uint64_t seq;
		int64_t len = tail_block(t, off, &seq);

		if (len <= 0)
			return (int)len;
		(*ret_n)++;
		if (seq != UINT64_MAX)
			*ret_seq = MAX(*ret_seq, seq);
		off += (uint64_t)len;
	}
	return 0;
}

static int off_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * Segment no of dir: 1 with *ret_seq when it holds a whole block, 0 when it
 * holds none, -ENOMEM. The walk starts where every block before is known to be
 * in the file: at the header, or at the newest block the index entries name
 * that is whole and holds seqs up to mark only (its input was released, which
 * waits for every write before it). An indexed block above the mark is no
 * such start: writes may complete out of order (one done at once, the one
 * before it left to io-wq, which the kill cancels), and a block's index entry
 * follows its own completion only.
 */
static int tail_seg(struct tail *t, const char *dir, uint32_t no,
		    const struct store_idx_entry *ents, uint32_t n, uint64_t mark,
		    uint64_t *ret_seq)
{
	char path[PATH_MAX + 192];
	uint64_t starts[TAIL_ENTRIES];
	struct store_seg_hdr sh;
	struct stat sb;
	uint32_t ns = 0, cnt = 0, i;
	int r = 0;

	store_dir__seg_path(path, sizeof(path), dir, no);
	t->fd = store_open_regular(path);
	if (t->fd < 0)
		return 0; /* removed by retention, or not a file we read */
	/* A segment whose header names another number is a copy: readers skip it. */
	if (fstat(t->fd, &sb) < 0 || store_read__pread_exact(t->fd, &sh, sizeof(sh), 0) < 0 ||
	    sh.magic != STORE_SEG_MAGIC ||
	    sh.crc != store_crc(&sh, offsetof(struct store_seg_hdr, crc)) || sh.seg_no != no)
		goto out;
	t->size = (uint64_t)sb.st_size;
	for (i = 0; i < n && ns < TAIL_ENTRIES; i++)
		if (ents[i].seg_no == no && ents[i].off >= sizeof(sh) &&
		    ents[i].crc == store_crc(&ents[i], offsetof(struct store_idx_entry, crc)))
			starts[ns++] = ents[i].off;
	qsort(starts, ns, sizeof(starts[0]), off_desc);
	for (i = 0; i < ns; i++) {
		uint64_t seq;
		int64_t len = tail_block(t, starts[i], &seq);

		if (len < 0) {
			r = (int)len;
			goto out;
		}
		if (len && seq <= mark)
			break;
	}
	r = tail_walk(t, i < ns ? starts[i] : sizeof(sh), &cnt, ret_seq);
	if (r >= 0)
		r = cnt ? 1 : 0;
out:
	close(t->fd);
	t->fd = -1;
	return r;
}

/* The TAIL_SEGS highest segment numbers of a dir, highest first. */
struct seg_top {
	uint32_t no[TAIL_SEGS];
	uint32_t n;
};

static int seg_top_add(void *ctx, const char *name, uint32_t no)
{
	struct seg_top *s = ctx;
	uint32_t i;

	(void)name;
	for (i = 0; i < s->n && s->no[i] > no; i++)
		;
	if (i == TAIL_SEGS)
		return 0;
	if (s->n < TAIL_SEGS)
		s->n++;
	memmove(s->no + i + 1, s->no + i, (s->n - 1 - i) * sizeof(s->no[0]));
	s->no[i] = no;
	return 0;
}

/* The last TAIL_ENTRIES entries of dir's index into ents (none without a
 * valid index header): how many. */
static uint32_t tail_index(const char *dir, struct store_idx_entry *ents)
{
	char path[PATH_MAX + 16];
	struct store_idx_hdr h;
	struct stat sb;
	uint64_t n;
	uint32_t k;
	int fd;

	snprintf(path, sizeof(path), "%s/index", dir);
	fd = store_open_regular(path);
	if (fd < 0)
		return 0;
	if (fstat(fd, &sb) < 0 || store_read__pread_exact(fd, &h, sizeof(h), 0) < 0 ||
	    h.magic != STORE_IDX_MAGIC ||
	    h.crc != store_crc(&h, offsetof(struct store_idx_hdr, crc)) ||
	    h.entry_size != sizeof(*ents) || (uint64_t)sb.st_size < sizeof(h)) {
		close(fd);
		return 0;
	}
	n = ((uint64_t)sb.st_size - sizeof(h)) / sizeof(*ents);
	k = (uint32_t)MIN(n, (uint64_t)TAIL_ENTRIES);
	if (store_read__pread_exact(fd, ents, k * sizeof(*ents),
				    sizeof(h) + (n - k) * sizeof(*ents)) < 0)
		k = 0;
	close(fd);
	return k;
}

/* The highest seq of the newest segment of dir holding a whole block. */
static int tail_dir(struct tail *t, const char *dir, uint64_t mark, uint64_t *ret_seq)
{
	struct store_idx_entry ents[TAIL_ENTRIES];
	struct seg_top top = {0};
	uint32_t n = tail_index(dir, ents), i;
	int r = 0;

	*ret_seq = 0;
	if (store_dir__for_each_seg(dir, seg_top_add, &top) < 0)
		return 0;
	for (i = 0; i < top.n && !r; i++)
		r = tail_seg(t, dir, top.no[i], ents, n, mark, ret_seq);
	return r < 0 ? r : 0;
}

int store_root__stored_seq(const char *root, uint64_t run_id, uint64_t mark, uint64_t *ret_seq)
{
	struct tail t = {.fd = -1};
	char path[PATH_MAX];
	char **names = NULL;
	uint32_t n = 0, i;
	int r;

	*ret_seq = 0;
	if (!run_id)
		return 0;
	r = store_root__list(root, &names, &n);
	if (r < 0)
		return r == -ENOENT ? 0 : r;
	t.dctx = ZSTD_createDCtx();
	if (!t.dctx)
		r = -ENOMEM;
	for (i = 0; i < n && r >= 0; i++) {
		uint64_t seq;

		snprintf(path, sizeof(path), "%s/%s", root, names[i]);
		if (store_dir__run_id(path) != run_id)
			continue;
		r = tail_dir(&t, path, mark, &seq);
		*ret_seq = MAX(*ret_seq, seq);
	}
	ZSTD_freeDCtx(t.dctx);
	sbuf__free(&t.z);
	sbuf__free(&t.raw);
	store_root__list_free(names, n);
	return r < 0 ? r : 0;
}
