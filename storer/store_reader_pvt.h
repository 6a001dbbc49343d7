/* SPDX-License-Identifier: MIT */
/*
 * Private to the store reader: the reader object and what its files share.
 *
 *   store_reader.c        the API: open (one dir or a set), free, stats,
 *                         range; picking a dir under a root
 *   store_read_index.c    which blocks a dir holds: segment headers, the
 *                         index, the scan of what the index does not list
 *   store_read_block.c    block I/O (checked, decompressed sections), the
 *                         dictionary load, the walk over a range's blocks
 *   store_read_dict.c     the segment dictionary being read
 *   store_read_rows.c     row decode and filter: store_reader__query()
 *   store_read_metrics.c  metrics sections, events and policy triggers
 *
 * Trusts nothing on disk: every length is checked against the file size and
 * the section caps before anything is allocated, every section against its
 * crc32c, every id against the dictionary it names.
 */
#ifndef CPA_STORE_READER_PVT_H
#define CPA_STORE_READER_PVT_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>
#include <zstd.h>

#include "common/macro.h"
#include "store.h"
#include "store_fmt.h"

struct rblock {
	uint32_t off, len;
	uint32_t t_min_s;
	uint16_t span_s;
	uint8_t n_sec, flags;
	bool indexed;	/* n_sec is the writer's (the index entry's), not a guess */
	bool dict_done; /* its dictionary section was applied (or found bad) */
	uint8_t bad;	/* 0, or why it is skipped: RB_CORRUPT, RB_TORN (| RB_KNOWN) */
};

/* RB_KNOWN: a fork's copy of a block its reader had found bad (store_reader__join()) */
enum { RB_CORRUPT = 1, RB_TORN = 2, RB_KNOWN = 0x80 };

struct rmod {
	const char *path;
	uint8_t bid_len;
	uint8_t bid[CPA_BUILD_ID_MAX];
};

struct rstack {
	uint32_t off; /* into stack_frames */
	uint16_t n, nk;
};

struct rdict {
	char **strs;
	uint32_t n_str, cap_str;
	struct rmod *mods;
	uint32_t n_mod, cap_mod;
	struct store_frame *frames;
	uint32_t n_frame, cap_frame;
	struct rstack *stacks;
	uint32_t n_stack, cap_stack;
	uint32_t *stack_frames;
	uint32_t n_sf, cap_sf;
};

struct rseg {
	uint32_t seg_no;
	bool skipped; /* not read: not a regular file, a copy of another, unreadable */
	char path[PATH_MAX + 256];
	int fd;
	uint64_t size;
	struct rblock *blocks;
	uint32_t n, cap;
};

struct store_reader {
	char dir[PATH_MAX];
	store_notice_fn notice;
	void *ctx;
	char err[512];
	struct rseg *segs;
	uint32_t n_seg, cap_seg;
	int dict_seg; /* index of the segment whose dictionary is loaded, -1 none */
	struct rdict dict;
	ZSTD_DCtx *dctx;
	uint8_t *zbuf, *rawbuf;
	size_t zcap, rawcap;
	const struct store_frame **fptrs;
	/* a block's decoded rows (store_read_rows.c), kept for the next block;
	 * row_cols: the skippable columns (STORE_COL_*) ever written in it */
	struct store_row *rowbuf;
	uint32_t rowcap, row_cols;
	struct store_read_stats st;
	bool metrics_newer; /* a metrics section of a newer version met (said once) */
	/* A set of store dirs read as one (store_reader__open_set()): the
	 * readers of the dirs, oldest first, and the number added to each
	 * one's segment numbers so (seg, stack_id) stays unique. */
	struct store_reader **subs;
	uint32_t *seg_base;
	uint32_t n_subs;
};

/* ---- store_reader.c */
/* A message to the reader's notice callback (a bad block, a skipped file). */
_printf_(2, 3) void store_read__notice(struct store_reader *r, const char *fmt, ...);
/* Set the reader's error message; returns err. */
_printf_(3, 4) int store_read__fail(struct store_reader *r, int err, const char *fmt, ...);

static inline int grow(void **p, uint32_t *cap, uint32_t need, size_t esz)
{
	uint32_t nc;
	void *np;

	if (need <= *cap)
		return 0;
	if (need > (1u << 28))
		return -ENOMEM;
	nc = *cap ? *cap : 64;
	while (nc < need)
		nc *= 2;
	np = realloc(*p, (size_t)nc * esz);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = nc;
	return 0;
}

/* ---- store_read_index.c */
/* The segments of r->dir (seg_*.cps), by number. 0 or -errno (r->err set). */
int store_read__segs(struct store_reader *r);
/* Each segment's blocks: its header checked, the index read, the gaps and
 * the tail scanned. 0, -ENOMEM or -EPROTONOSUPPORT (a newer format). */
int store_read__blocks(struct store_reader *r);
/* v sorted by offset, the order qsort() gives (the index's entries usually are). */
void store_read__sort_blocks(struct rblock *v, uint32_t n);

/* ---- store_read_block.c */
/* All of len bytes at off: 0, -ENODATA when the file ends first, or -errno. */
int store_read__pread_exact(int fd, void *buf, size_t len, uint64_t off);
/* A block header with a good crc, a known type and lengths within the caps. */
bool store_read__hdr_ok(const struct store_block_hdr *h);
/* Header + sections. */
uint32_t store_read__block_len(const struct store_block_hdr *h);
void rseg__close(struct rseg *s);
/*
 * Read a block's header and its dictionary section (data too when data),
 * verify, and decompress the wanted section into r->rawbuf. Returns the raw
 * length, or -EBADMSG (corrupt, reported), -ENODATA (torn), -errno.
 */
int store_read__section(struct store_reader *r, struct rseg *s, struct rblock *b, bool data,
			struct store_block_hdr *ret_h);

/*
 * The blocks of seconds [t0s, t1s) carrying the flags need, segment by
 * segment in block order: each segment is opened as the walk enters it and
 * closed as it leaves; with dict, the segment's dictionary is loaded up to
 * its last block in the range first. Bad blocks are passed over.
 */
struct blk_iter {
	int64_t t0s, t1s;
	uint8_t need; /* STORE_BF_* the block must have */
	bool dict;
	bool skip_full; /* pass over indexed blocks with rows in every second of their span */
	uint32_t si, i;
	int64_t last; /* last block of segment si in the range; -1: not entered */
};

void blk_iter__init(struct blk_iter *it, uint64_t t0_ns, uint64_t t1_ns, uint8_t need, bool dict);
/* The index entry says every second of the block's span holds rows. */
bool rblock__full(const struct rblock *b);
/* 1 with the next block in *ret_s, *ret_b; 0 at the end; -ENOMEM. */
int blk_iter__next(struct store_reader *r, struct blk_iter *it, struct rseg **ret_s,
		   struct rblock **ret_b);

/* ---- store_read_dict.c */
void rdict__clear(struct rdict *d);
void rdict__free(struct rdict *d);
/* String id (0: ""); an id past what was loaded is STORE_DICT_LOST. */
const char *rdict__str(const struct rdict *d, uint64_t id);
/* Apply one block's dictionary section. 0, -EBADMSG or -ENOMEM. */
int rdict__apply(struct rdict *d, const uint8_t *p, size_t len);

/* ---- store_read_rows.c */
/* Seconds as runs [a, b]: a block's span or its rows' seconds come in order,
 * and so do a segment's blocks, so a run added mostly extends the last one. */
struct sec_run {
	int64_t a, b;
};
struct sec_runs {
	struct sec_run *v;
	uint32_t n, cap;
	bool unsorted; /* a run starts before the one added before it */
};
int sec_runs__add(struct sec_runs *ss, int64_t a, int64_t b);
/* The distinct seconds of the runs (sorted first when they came out of
 * order), and the first and last of them (0 when none). */
uint64_t sec_runs__count(struct sec_runs *ss, int64_t *ret_first, int64_t *ret_last);

#endif /* CPA_STORE_READER_PVT_H */
