// SPDX-License-Identifier: MIT
/*
 * bench_metrics_store DIR...: what a store's scheduler metrics cost on disk,
 * per encoding, side by side (docs/bench.md "Scheduler metrics under a
 * context-switch storm"). The metrics records of each store dir (cpa_...) are
 * read back, grouped in blocks of 5 s as the storer groups them, encoded in
 * the first encoding (v1, released stores), the per-record compact one of
 * development builds (v2) and the columnar one the storer writes (v3), and
 * zstd-compressed at the storer's level 3, alone (in a block they share a
 * zstd frame with the rows: a little less). Prints bytes per second of each
 * and bytes per process-second (an entry of a process in a second).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "store_metrics_pvt.h"

#define BLOCK_NS (5ull * 1000000000ull)

struct acc {
	struct sbuf v[3];
	unsigned int n;
	uint64_t block_t0, t_min, t_max, ents, procs;
	double z[3], raw[3];
};

static void (*const enc[3])(struct sbuf *, const struct cpa_metrics *,
			    const struct cpa_metrics_ent *) = {
	store_metrics__encode_v1, store_metrics__encode_v2, store_metrics__encode};

static double zsize(const struct sbuf *b)
{
	size_t cap = ZSTD_compressBound(b->len), z;
	void *dst = malloc(cap);

	if (!dst)
		return 0;
	z = ZSTD_compress(dst, cap, b->p, b->len, 3);
	free(dst);
	return ZSTD_isError(z) ? 0 : (double)z + 1; /* + the varint count, about */
}

static void block_end(struct acc *a)
{
	if (!a->n)
		return;
	for (unsigned int i = 0; i < 3; i++) {
		a->z[i] += zsize(&a->v[i]);
		a->raw[i] += (double)a->v[i].len;
		a->v[i].len = 0;
	}
	a->n = 0;
}

static int on_rec(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct acc *a = ctx;

	if (a->n && m->time_ns - a->block_t0 >= BLOCK_NS)
		block_end(a);
	if (!a->n)
		a->block_t0 = m->time_ns;
	if (!a->t_min || m->time_ns < a->t_min)
		a->t_min = m->time_ns;
	if (m->time_ns > a->t_max)
		a->t_max = m->time_ns;
	for (unsigned int i = 0; i < 3; i++)
		enc[i](&a->v[i], m, ents);
	a->n++;
	a->ents += m->n_ents;
	for (unsigned int i = 0; i < m->n_ents; i++)
		a->procs += ents[i].kind == CPA_MK_PROC;
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s STORE_DIR...\n", argv[0]);
		return 2;
	}
	printf("%-28s %5s %7s %6s %7s %7s %7s %6s %6s %6s %8s %8s %8s\n", "store", "secs",
	       "procs/s", "CPUs/s", "v1 B/s", "v2 B/s", "v3 B/s", "v1 B/p", "v2 B/p", "v3 B/p",
	       "v1 raw/s", "v2 raw/s", "v3 raw/s");
	for (int i = 1; i < argc; i++) {
		struct store_reader *r;
		struct acc a = {0};
		double secs;
		int e = store_reader__open(argv[i], NULL, NULL, &r);

		if (e < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(-e));
			return 1;
		}
		e = store_reader__metrics(r, 1000000000ull * 1000000000ull,
					  4000000000ull * 1000000000ull, on_rec, &a);
		block_end(&a);
		store_reader__free(r);
		if (e < 0 || a.t_max <= a.t_min) {
			fprintf(stderr, "%s: no metrics (%s)\n", argv[i], strerror(-e));
			return 1;
		}
		secs = (double)(a.t_max - a.t_min) / 1e9 + 1;
		printf("%-28s %5.0f %7.1f %6.1f %7.0f %7.0f %7.0f %6.2f %6.2f %6.2f %8.0f %8.0f %8.0f\n",
		       argv[i], secs, (double)a.procs / secs, (double)(a.ents - a.procs) / secs,
		       a.z[0] / secs, a.z[1] / secs, a.z[2] / secs, a.z[0] / (double)a.procs,
		       a.z[1] / (double)a.procs, a.z[2] / (double)a.procs, a.raw[0] / secs,
		       a.raw[1] / secs, a.raw[2] / secs);
		for (unsigned int k = 0; k < 3; k++)
			sbuf__free(&a.v[k]);
	}
	return 0;
}
