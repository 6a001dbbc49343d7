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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_writer_opts o = {.block_seconds = 5,
				      .cpu_num = 2,
				      .freq = 49,
				      .record_interval = 1,
				      .stack_size = 8192};
	struct store_writer *w = NULL;
	struct shm_arena *a = NULL;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct storer *s = NULL;
	struct shm_layout l;
	struct shm_stage *st;
	char root[512];
	size_t pos = 0;

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
	o.root = root;
	if (store_writer__new(&o, &w) < 0)
		__builtin_trap();
	store_writer__set_run_id(w, BASE_NS);
	if (storer__new(st, &c, w, &s) < 0)
		__builtin_trap();

	while (pos + 4 <= size) {
		uint16_t type, len;
		void *d;

		memcpy(&type, data + pos, 2);
		memcpy(&len, data + pos + 2, 2);
		pos += 4;
		if (len > size - pos)
			len = (uint16_t)(size - pos);
		if (shm_ring__reserve_sp(&p, len, type, &d) < 0) {
			/* full: let the storer take what is there */
			shm_ring__commit_sp(&p);
			storer__batch(s, 4096);
			if (shm_ring__reserve_sp(&p, len, type, &d) < 0)
				break;
		}
		memcpy(d, data + pos, len);
		pos += len;
		if (type == CPA_REC_LOSS || (pos & 0x3ff) < 4) {
			shm_ring__commit_sp(&p);
			storer__batch(s, 4096);
			storer__tick(s, BASE_NS + pos * 1000000ull);
		}
	}
	shm_ring__commit_sp(&p);
	while (shm_ring__pending_sc(&c) && storer__batch(s, 4096) > 0)
		;
	storer__tick(s, BASE_NS + 3600 * 1000000000ull);
	storer__finish(s, false);
	storer__free(s);
	store_writer__free(w);
	shm_arena__free(a);
	return 0;
}
