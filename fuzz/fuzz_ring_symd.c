/* SPDX-License-Identifier: MIT */
/*
 * What symd does with records from ring 1 (shm/records.h, symd.c): module
 * definitions, frames (kernel pcs + user frames), task events, losses. The
 * input is a sequence of records as in fuzz_ring_storer.c (2-byte type,
 * 2-byte length, payload); they go through a real arena's ring into
 * symd__batch(), whose output (ring 2) is drained. symd's /proc is an empty
 * scratch dir and its kallsyms a small fixed file, so no real process is
 * read; module paths name files as the input says (real ELF files of the
 * machine when a seed names them).
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "fuzz_util.h"
#include "shm/arena.h"
#include "shm/config.h"
#include "shm/ring.h"
#include "symd/symd.h"

#define BASE_NS 1795000000000000000ull

static const char kallsyms[] = "ffffffff81000000 T _stext\n"
			       "ffffffff81000100 T do_one_thing\n"
			       "ffffffff81000200 t helper_two\n"
			       "ffffffff81000300 D some_data\n"
			       "ffffffff81000400 T __pfx_after\n"
			       "ffffffff81000410 T after\n"
			       "ffffffffc0001000 t mod_func\t[mymod]\n"
			       "ffffffffc0002000 t other_func\t[othermod]\n";

static void quiet(enum log_level lvl, const char *line)
{
	(void)lvl;
	(void)line;
}

static void drain(struct shm_ring_cons *c)
{
	struct shm_msg m;

	while (shm_ring__peek_sc(c, &m) == 0)
		;
	shm_ring__release_sc(c);
}

struct feed {
	struct symd *s;
	struct shm_ring_cons *down;
	uint64_t now;
};

static void take(void *ctx, bool tick)
{
	struct feed *f = ctx;

	symd__batch(f->s, 4096);
	drain(f->down);
	if (tick)
		symd__tick(f->s, f->now += 100000000ull);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static char ks[512], proc[512];
	struct shm_ring_prod p;
	struct shm_ring_cons in, down;
	struct shm_arena *a = NULL;
	struct cpa_config *cfg;
	struct symd *s = NULL;
	struct shm_layout l;

	log_set_sink(quiet);
	if (!ks[0]) {
		fuzz__write("kallsyms", kallsyms, sizeof(kallsyms) - 1, ks, sizeof(ks));
		snprintf(proc, sizeof(proc), "%s/proc", fuzz__dir());
		mkdir(proc, 0700);
	}
	shm_layout__default(&l, 4096, 16);
	if (shm_arena__create(&l, &a) < 0)
		__builtin_trap();
	cfg = shm_arena__config(a);
	cfg->magic = CPA_CONFIG_MAGIC;
	cfg->version = CPA_CONFIG_VERSION;
	cfg->max_cache_size_mb = 64;
	if (shm_arena__open_prod(a, SHM_RING_UNWIND, &p) < 0 ||
	    shm_arena__open_cons(a, SHM_RING_UNWIND, &in) < 0 ||
	    shm_arena__open_cons(a, SHM_RING_SYMD, &down) < 0)
		__builtin_trap();
	{
		struct shm_ring_prod op;
		struct symd_opts o = {.cfg = cfg,
				      .stage = shm_arena__stage(a, SHM_STAGE_SYMD),
				      .in = &in,
				      .out = &op,
				      .generation = 1,
				      .paths = {.kallsyms = ks,
						.modules = ks,
						.proc = proc,
						.debug_root = "/nonexistent"}};

		if (shm_arena__open_prod(a, SHM_RING_SYMD, &op) < 0 || symd__new(&o, &s) < 0)
			__builtin_trap();

		fuzz__feed(data, size, &p, take, &(struct feed){s, &down, BASE_NS});
		for (int i = 0; i < 64 && shm_ring__pending_sc(&in); i++) {
			symd__batch(s, 4096);
			drain(&down);
		}
		symd__tick(s, BASE_NS);
		symd__finish(s);
		drain(&down);
		symd__free(s);
	}
	shm_arena__free(a);
	return 0;
}
