// SPDX-License-Identifier: MIT
/*
 * Timeline counts without decompressing a row: the index gives each block's
 * place and time, the block's 56-byte header its n_samples. A 24-hour store
 * is ~17k entries (400 KiB of index) and as many 56-byte preads.
 * Declared in store.h (reader section, "timeline").
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "store.h"
#include "store_fmt.h"

#define TL_MAX_INDEX_BYTES (64u << 20)

static int entry_cmp(const void *a, const void *b)
{
	const struct store_idx_entry *x = a, *y = b;

	if (x->seg_no != y->seg_no)
		return x->seg_no < y->seg_no ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

static ssize_t tl_pread(int fd, void *buf, size_t len, uint64_t off)
{
	ssize_t n;

	do
		n = pread(fd, buf, len, (off_t)off);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

int store_timeline__read(const char *dir, struct store_tl_block **ret, size_t *ret_n,
			 uint64_t *ret_bad)
{
	_cleanup_free_ struct store_idx_entry *ents = NULL;
	_cleanup_free_ struct store_tl_block *out = NULL;
	_cleanup_close_ int fd = -1, sfd = -1;
	char path[PATH_MAX + 32];
	struct store_idx_hdr h;
	struct stat sb;
	size_t n = 0, i, k = 0;
	uint32_t open_seg = 0;
	uint64_t bad = 0;
	ssize_t got;

	*ret = NULL;
	*ret_n = 0;
	snprintf(path, sizeof(path), "%s/index", dir);
	fd = store_open_regular(path);
	if (fd < 0)
		return fd;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if ((uint64_t)sb.st_size < sizeof(h) || (uint64_t)sb.st_size > TL_MAX_INDEX_BYTES)
		return -EBADMSG;
	if (tl_pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) || h.magic != STORE_IDX_MAGIC ||
	    h.crc != store_crc(&h, offsetof(struct store_idx_hdr, crc)) ||
	    h.entry_size != sizeof(struct store_idx_entry))
		return -EBADMSG;
	if (h.major > STORE_VERSION_MAJOR)
		return -EPROTONOSUPPORT;
	n = ((size_t)sb.st_size - sizeof(h)) / sizeof(*ents);
	ents = malloc((n ? n : 1) * sizeof(*ents));
	out = malloc((n ? n : 1) * sizeof(*out));
	if (!ents || !out)
		return -ENOMEM;
	got = tl_pread(fd, ents, n * sizeof(*ents), sizeof(h));
	if (got < 0)
		return (int)got;
	n = (size_t)got / sizeof(*ents);
	/* Group the header reads by segment, in file order. */
	qsort(ents, n, sizeof(*ents), entry_cmp);
	for (i = 0; i < n; i++) {
		const struct store_idx_entry *e = &ents[i];
		struct store_block_hdr bh;

		if (e->crc != store_crc(e, offsetof(struct store_idx_entry, crc)))
			continue; /* torn or never written */
		if (sfd < 0 || e->seg_no != open_seg) {
			if (sfd >= 0)
				close(sfd);
			snprintf(path, sizeof(path), "%s/seg_%06u.cps", dir, e->seg_no);
			sfd = store_open_regular(path);
			open_seg = e->seg_no;
		}
		if (sfd < 0)
			continue; /* trimmed by retention */
		if (tl_pread(sfd, &bh, sizeof(bh), e->off) != (ssize_t)sizeof(bh) ||
		    bh.magic != STORE_BLOCK_MAGIC ||
		    bh.crc != store_crc(&bh, offsetof(struct store_block_hdr, crc))) {
			bad++;
			continue;
		}
		out[k++] =
			(struct store_tl_block){.t_min_s = (int64_t)(bh.t_min_ns / 1000000000ULL),
						.span_s = e->span_s,
						.n_sec = e->n_sec,
						.n_samples = bh.n_samples};
	}
	*ret = TAKE_PTR(out);
	*ret_n = k;
	if (ret_bad)
		*ret_bad = bad;
	return 0;
}
