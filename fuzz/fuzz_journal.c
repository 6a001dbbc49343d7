/* SPDX-License-Identifier: MIT */
/*
 * The storer's dictionary journal (.storer-dict-<epoch>, store_journal.c):
 * the input is the newest journal file; store_writer__journal_open() replays
 * it into a fresh writer, whose dictionary then serves a few samples that
 * are written out as a block (so the replayed definitions are encoded).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_util.h"
#include "storer/store.h"

#define BASE_NS 1795000000000000000ull /* 2026-11-18, a fixed day */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store_writer_opts o;
	struct store_writer *w = NULL;
	char root[512], name[64], path[600];

	snprintf(root, sizeof(root), "%s/root", fuzz__dir());
	fuzz__rm_rf(root);
	if (mkdir(root, 0700) < 0)
		__builtin_trap();
	snprintf(name, sizeof(name), "root/.storer-dict-%020llu", 1ull);
	fuzz__write(name, data, size, path, sizeof(path));
	o = fuzz__writer_opts(root);
	if (store_writer__new(&o, &w) < 0)
		__builtin_trap();
	store_writer__set_run_id(w, BASE_NS);
	if (store_writer__journal_open(w, root) >= 0) {
		for (uint32_t i = 0; i < 16; i++) {
			struct cpa_sample_out s = {.seq = i + 1,
						   .time_ns = BASE_NS + i * 100000000ull,
						   .weight = 1,
						   .pid = 1000 + i % 3,
						   .tid = 1000 + i % 5,
						   .kind = CPA_KIND_ONCPU,
						   .stack_id = 1 + i % 8,
						   .comm_id = 1 + i % 4,
						   .pcomm_id = 1 + i % 3,
						   .env_id = i % 2 ? 3 : 0};

			store_writer__add_sample(w, &s);
		}
		store_writer__close_block(w);
		store_writer__flush(w, false);
	}
	store_writer__free(w);
	return 0;
}
