/* SPDX-License-Identifier: MIT */
/*
 * An ELF image -> unwindd's CFI compiler (cfi_table__build() on a memfd), then
 * the evaluator: every row is stepped with unw_step() and walked with
 * unw_walk() over a synthetic stack whose words point back into the table's
 * own rows (so walks go on through loops and absurd CFA rules).
 */
#include <unistd.h>

#include "fuzz_util.h"
#include "unwindd/cfi.h"
#include "unwindd/walk.h"

#define STACK_WORDS 512
#define MAX_ROWS    256

static int find_same(void *ctx, uint64_t pc, struct unw_loc *ret)
{
	*ret = (struct unw_loc){.table = ctx, .file_off = pc, .module_id = 1};
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t stk[STACK_WORDS];
	struct cfi_table *t = NULL;
	struct cpa_uframe out[64];
	size_t rows, i;
	int fd = fuzz__memfd(data, size), r;

	r = cfi_table__build(fd, -1, &t);
	close(fd);
	if (r < 0)
		return 0;
	rows = cfi_table__rows(t);
	rows = rows ? rows - 1 : 0; /* the last row only ends its predecessor */
	for (i = 0; i < STACK_WORDS; i++) {
		uint64_t s = 0, e = 0;
		uint32_t rule;

		stk[i] = cfi_table__row(t, (i * 7) % (rows ? rows : 1), &s, &e, &rule) == 0
				 ? s + 1 + (e - s) / 2
				 : 0x7ff000000000ull + i * 8;
	}
	for (i = 0; i < rows && i < MAX_ROWS; i++) {
		struct unw_stack st = {(const uint8_t *)stk, 0x7ff000000000ull, sizeof(stk)};
		uint64_t s = 0, e = 0;
		uint32_t rule;
		struct unw_regs rg = {.sp = st.base + 64 + (i % 32) * 8, .bp = st.base + 256};
		unsigned int n = 0;
		bool sig;

		if (cfi_table__row(t, i, &s, &e, &rule) < 0)
			__builtin_trap(); /* every row below rows - 1 exists */
		if (e < s)
			__builtin_trap();
		rg.ip = s;
		unw_step(t, s, &rg, &st, &sig);
		rg = (struct unw_regs){.ip = s, .sp = st.base + 64, .bp = st.base + 256};
		unw_walk_flags(&rg, &st, find_same, t, UNW_F_FP_FALLBACK, out, 64, &n, NULL);
		if (n > 64)
			__builtin_trap();
	}
	cfi_table__free(t);
	return 0;
}
