/* SPDX-License-Identifier: MIT */
/*
 * The store reader (storer/store_read*.c, store_timeline.c) over a store
 * dir built from the input. Two targets share this file:
 *   fuzz_store_seg    (FUZZ_STORE_INDEX 0): the input is seg_000001.cps, no
 *                     index (the reader scans the segment's blocks);
 *   fuzz_store_index  (FUZZ_STORE_INDEX 1): a 4-byte little-endian length n,
 *                     then n bytes of index, then the segment.
 * Every row of the whole time range is read, decoded and passed to a callback
 * that touches its frames; then the metrics records and policy events of the
 * range (store_metrics.c).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "storer/store.h"

#ifndef FUZZ_STORE_INDEX
#define FUZZ_STORE_INDEX 0
#endif

static void on_notice(void *ctx, const char *msg)
{
	(*(unsigned int *)ctx) += msg[0] != 0;
}

static int on_sample(void *ctx, const struct store_sample *s)
{
	uint64_t *sum = ctx;

	*sum += s->count;
	for (uint32_t i = 0; i < s->n_frames; i++) {
		const struct store_frame *f = s->frames[i];

		*sum += (f->name ? strlen(f->name) : 0) + (f->module ? strlen(f->module) : 0);
	}
	*sum += (s->comm ? strlen(s->comm) : 0) + (s->pcomm ? strlen(s->pcomm) : 0) +
		(s->env ? strlen(s->env) : 0);
	return 0;
}

static int on_metrics(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *e)
{
	uint64_t *sum = ctx;

	for (uint32_t i = 0; i < m->n_ents; i++)
		*sum += e[i].oncpu_ns + e[i].runq_n + strnlen(e[i].comm, sizeof(e[i].comm));
	return 0;
}

static int on_event(void *ctx, const struct cpa_policy_event *ev)
{
	*(uint64_t *)ctx += ev->pid + strnlen(ev->policy, sizeof(ev->policy));
	return 0;
}

static void put(const char *dir, const char *name, const uint8_t *p, size_t n)
{
	char path[600];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || (n && write(fd, p, n) != (ssize_t)n))
		__builtin_trap();
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_reader *r = NULL;
	struct store_tl_block *tl = NULL;
	struct store_read_stats st;
	struct store_filter f;
	uint64_t first = 0, last = 0, recs, sum = 0, bad = 0;
	unsigned int notices = 0;
	size_t ntl = 0;
	char dir[512], err[256];

	snprintf(dir, sizeof(dir), "%s/cpa_261120", fuzz__dir());
	fuzz__rm_rf(dir);
	if (mkdir(dir, 0700) < 0)
		__builtin_trap();
	if (FUZZ_STORE_INDEX) {
		uint32_t n;

		if (size < 4)
			return 0;
		memcpy(&n, data, 4);
		data += 4;
		size -= 4;
		if (n > size)
			n = (uint32_t)size;
		put(dir, "index", data, n);
		data += n;
		size -= n;
	}
	put(dir, "seg_000001.cps", data, size);

	if (store_reader__open_err(dir, on_notice, &notices, &r, err, sizeof(err)) == 0) {
		if (store_reader__range(r, &first, &last, &recs) < 0)
			first = last = 0;
		store_filter__init(&f);
		store_reader__query(r, 0, UINT64_MAX, &f, on_sample, &sum);
		/* the metrics sections and their events (store_metrics.c) */
		store_reader__metrics(r, first, last + 1, on_metrics, &sum);
		store_reader__events(r, first, last + 1, on_event, &sum);
		store_reader__stats(r, &st);
		store_reader__free(r);
	}
	if (store_timeline__read(dir, &tl, &ntl, &bad) == 0)
		free(tl);
	return sum == 1 ? 0 : 0;
}
