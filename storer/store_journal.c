// SPDX-License-Identifier: MIT
/* The store writer's dictionary journal (store_journal_pvt.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "shm/records.h"
#include "store.h"
#include "store_journal_pvt.h"

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

static void jr_path(const struct store_journal *j, uint64_t epoch, char *buf, size_t len)
{
	snprintf(buf, len, "%s/" JR_PREFIX "%020llu", j->dir, (unsigned long long)epoch);
}

void store_journal__append(struct store_journal *j, uint16_t type, const void *a, uint32_t alen,
			   const void *b, uint32_t blen)
{
	struct jr_rec h = {.len = alen + blen, .type = type};

	if (!j->on || j->replaying || j->full)
		return;
	if (j->off + j->pend.len + sizeof(h) + h.len >
	    (j->max_bytes ? MIN(j->max_bytes, JR_MAX_BYTES) : JR_MAX_BYTES)) {
		/* Past the cap a restart loses this epoch's dictionary; symd's epoch
		 * budget (a few MiB) keeps us far from it in practice. */
		j->full = true;
		return;
	}
	h.crc = store_crc32c(store_crc(a, alen), b, blen);
	sbuf__put(&j->pend, &h, sizeof(h));
	sbuf__put(&j->pend, a, alen);
	if (blen)
		sbuf__put(&j->pend, b, blen);
}

/* Open a fresh journal for epoch (no blocking write: the header goes through io_uring). */
int store_journal__start(struct store_journal *j, struct store_wq *q, uint64_t epoch)
{
	char path[PATH_MAX + 64];
	struct jr_hdr h = {.magic = JR_MAGIC,
			   .major = STORE_VERSION_MAJOR,
			   .minor = STORE_VERSION_MINOR,
			   .hdr_size = sizeof(h),
			   .epoch = epoch};
	DIR *d;
	struct dirent *de;
	int r;

	if (j->f) {
		sfile__put(j->f);
		j->f = NULL;
	}
	j->pend.len = 0;
	j->pend.oom = false;
	j->full = false;
	if (mkdir(j->dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	jr_path(j, epoch, path, sizeof(path));
	r = sfile__open(path, O_WRONLY | O_CREAT | O_TRUNC, &j->f);
	if (r < 0)
		return r;
	j->epoch = epoch;
	h.crc = store_crc(&h, offsetof(struct jr_hdr, crc));
	j->off = sizeof(h);
	/* Older epochs are dead: their ids mean nothing to the new symd. */
	d = opendir(j->dir);
	if (d) {
		while ((de = readdir(d))) {
			char old[PATH_MAX + 320];

			if (strncmp(de->d_name, JR_PREFIX, strlen(JR_PREFIX)))
				continue;
			snprintf(old, sizeof(old), "%s/%s", j->dir, de->d_name);
			if (strcmp(old, path))
				unlink(old);
		}
		closedir(d);
	}
	return store_wq__write(q, j->f, 0, &h, sizeof(h));
}

uint64_t store_journal__give_up(struct store_journal *j)
{
	char path[PATH_MAX + 64];
	uint64_t n = j->off;

	if (!j->f)
		return 0;
	/* Truncate first: writes still queued hold the file open. */
	if (ftruncate(j->f->fd, 0) < 0) {
		/* nothing: the unlink below still frees it once they are done */
	}
	jr_path(j, j->epoch, path, sizeof(path));
	unlink(path);
	sfile__put(j->f);
	j->f = NULL;
	j->full = true;
	j->pend.len = 0;
	return n;
}

void store_journal__flush(struct store_journal *j, struct store_wq *q)
{
	if (!j->f || !j->pend.len || j->pend.oom)
		return;
	if (store_wq__write(q, j->f, j->off, j->pend.p, (uint32_t)j->pend.len) == 0)
		j->off += j->pend.len;
	j->pend.len = 0;
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
		uint32_t ids[CPA_MAX_STACK_FRAMES];

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

int store_journal__open(struct store_journal *j, const char *dir, struct store_writer *w)
{
	char path[PATH_MAX + 64];
	uint64_t best = 0, off;
	bool found = false;
	_cleanup_free_ char *buf = NULL;
	size_t cap = 0, size;
	struct jr_hdr h;
	struct dirent *de;
	int fd, n = 0;
	DIR *d;

	if (strlen(dir) >= sizeof(j->dir))
		return -ENAMETOOLONG;
	snprintf(j->dir, sizeof(j->dir), "%s", dir);
	j->on = true;
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
	jr_path(j, best, path, sizeof(path));
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (read_full_fd(fd, 0, JR_MAX_BYTES + JR_MAX_REC, &buf, &cap, &size) < 0 ||
	    size < sizeof(h))
		goto out_fresh;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != JR_MAGIC || h.major > STORE_VERSION_MAJOR ||
	    h.crc != store_crc(&h, offsetof(struct jr_hdr, crc)))
		goto out_fresh;
	j->replaying = true;
	for (off = sizeof(h); off + sizeof(struct jr_rec) <= size;) {
		struct jr_rec rh;

		memcpy(&rh, buf + off, sizeof(rh));
		if (rh.len > JR_MAX_REC || off + sizeof(rh) + rh.len > size ||
		    store_crc(buf + off + sizeof(rh), rh.len) != rh.crc)
			break; /* torn tail: the rest was never acknowledged */
		if (jr_apply(w, rh.type, (const uint8_t *)buf + off + sizeof(rh), rh.len) == 0)
			n++;
		off += sizeof(rh) + rh.len;
	}
	j->replaying = false;
	j->f = sfile__new(fd);
	if (!j->f)
		return -ENOMEM;
	j->epoch = h.epoch;
	j->off = off; /* new records overwrite a torn tail */
	return n;

out_fresh:
	close(fd);
	return 0;
}

void store_journal__free(struct store_journal *j)
{
	sfile__put(j->f);
	j->f = NULL;
	sbuf__free(&j->pend);
}
