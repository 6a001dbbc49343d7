/* SPDX-License-Identifier: MIT */
/*
 * What the storer does with records from ring 2 (shm/records.h, storer.c):
 * the input is a sequence of records, each a 2-byte type, a 2-byte length
 * and that many payload bytes (a record the ring cannot hold is cut short);
 * they go through a real arena's ring into storer__batch(), then the storer
 * ticks and finishes (blocks written to a scratch store).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "shm/arena.h"
#include "shm/ring.h"
#include "storer/store.h"
#include "storer/storer.h"

#define BASE_NS 1795000000000000000ull

struct feed {
	struct storer *s;
	uint64_t now;
};

static void take(void *ctx, bool tick)
{
	struct feed *f = ctx;

	storer__batch(f->s, 4096);
	if (tick)
		storer__tick(f->s, f->now += 100000000ull);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_writer_opts o;
	struct store_writer *w = NULL;
	struct shm_arena *a = NULL;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct storer *s = NULL;
	struct shm_layout l;
	struct shm_stage *st;
	char root[512];

	snprintf(root, sizeof(root), "%s/root", fuzz__dir());
	fuzz__rm_rf(root);
	if (mkdir(root, 0700) < 0)
		__builtin_trap();
	shm_layout__default(&l, 4096, 16);
	if (shm_arena__create(&l, &a) < 0)
		__builtin_trap();
	st = shm_arena__stage(a, SHM_STAGE_STORER);
	if (shm_arena__open_prod(a, SHM_RING_SYMD, &p) < 0 ||
	    shm_arena__open_cons(a, SHM_RING_SYMD, &c) < 0)
		__builtin_trap();
	o = fuzz__writer_opts(root);
	if (store_writer__new(&o, &w) < 0)
		__builtin_trap();
	store_writer__set_run_id(w, BASE_NS);
	if (storer__new(st, &c, w, &s) < 0)
		__builtin_trap();

	fuzz__feed(data, size, &p, take, &(struct feed){s, BASE_NS});
	while (shm_ring__pending_sc(&c) && storer__batch(s, 4096) > 0)
		;
	storer__tick(s, BASE_NS + 3600 * 1000000000ull);
	storer__finish(s, false);
	storer__free(s);
	store_writer__free(w);
	shm_arena__free(a);
	return 0;
}
