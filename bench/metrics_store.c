// SPDX-License-Identifier: MIT
/*
 * bench_metrics_store DIR...: what a store's scheduler metrics cost on disk,
 * per encoding, side by side (docs/bench.md "Scheduler metrics under a
 * context-switch storm"). The metrics records of each store dir (cpa_...) are
 * read back, grouped in blocks of 5 s as the storer groups them, encoded in
 * the first encoding (v1) and in the compact one (v2, what the storer writes)
 * and zstd-compressed at the storer's level 3, alone (in a block they share a
 * zstd frame with the rows: a little less). Prints bytes per second of each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "store_metrics_pvt.h"

#define BLOCK_NS (5ull * 1000000000ull)

struct acc {
	struct sbuf v1, v2;
	unsigned int n;
	uint64_t block_t0, t_min, t_max, ents, procs;
	double z1, z2, raw1, raw2;
};

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
	a->z1 += zsize(&a->v1);
	a->z2 += zsize(&a->v2);
	a->raw1 += (double)a->v1.len;
	a->raw2 += (double)a->v2.len;
	a->v1.len = a->v2.len = 0;
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
	store_metrics__encode_v1(&a->v1, m, ents);
	store_metrics__encode(&a->v2, m, ents);
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
	printf("%-40s %6s %9s %9s %10s %10s %10s %10s\n", "store", "secs", "procs/s", "CPUs/s",
	       "v1 B/s", "v2 B/s", "v1 raw B/s", "v2 raw B/s");
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
		printf("%-40s %6.0f %9.1f %9.1f %10.0f %10.0f %10.0f %10.0f\n", argv[i], secs,
		       (double)a.procs / secs, (double)(a.ents - a.procs) / secs, a.z1 / secs,
		       a.z2 / secs, a.raw1 / secs, a.raw2 / secs);
		sbuf__free(&a.v1);
		sbuf__free(&a.v2);
	}
	return 0;
}
