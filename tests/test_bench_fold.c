// SPDX-License-Identifier: MIT
/*
 * bench/fold.c: the benches' reading of `cpa show` folded lines and `perf
 * script` text (bench_churn, bench_fidelity). Fixed inputs as the two tools
 * print them; no profiler runs here.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "bench/fold.h"
#include "test_util.h"

static struct fold_side side;

static void cpa(const char *text)
{
	char line[1024];

	snprintf(line, sizeof(line), "%s", text);
	fold_cpa_line(line, &side);
}

START_TEST(test_cpa_lines)
{
	memset(&side, 0, sizeof(side));
	/* rooted, symbolized user leaf under a kernel part */
	cpa("gzip:10;_start;__libc_start_main;main;deflate;entry_SYSCALL_64_[k];vfs_read_[k]; 3\n");
	/* a process gone before its maps were read: marker, no user frame */
	cpa("as:11;<# NO MAP #>;asm_exc_page_fault_[k];exc_page_fault_[k]; 2\n");
	/* unknown module leaf */
	cpa("cmake:12;<# NO MAP #>;0x7fd2543a9ad7 [unknown]; 1\n");
	/* no CFI: the module is known (FDE-less binary named by offset) */
	cpa("xz:13;[unwind stopped: no cfi];0x4290 [xz]; 4\n");
	/* a kernel thread: no user part */
	cpa("kworker/0:1:14;ret_from_fork_[k];worker_thread_[k]; 5\n");
	/* inside execve past its point of no return, and in an exit's mm
	 * teardown: nothing left to unwind, complete */
	cpa("sh:15;<# EXEC: IMAGE REPLACED #>;execve;entry_SYSCALL_64_[k];load_elf_binary_[k]; 2\n");
	cpa("xz:16;<# EXIT: ADDRESS SPACE GONE #>;_exit;do_exit_[k];exit_mmap_[k]; 1\n");

	ck_assert_double_eq(side.samples, 18);
	ck_assert_double_eq(side.complete, 6);
	ck_assert_double_eq(side.user, 13);
	ck_assert_double_eq(side.user_known_leaf, 10);
	ck_assert_double_eq(side.user_cfi, 9); /* the no-cfi sample is left out */
	ck_assert_double_eq(side.user_cfi_rooted, 6);
	ck_assert_double_eq(tally_get(&side.stops, "<# NO MAP #>"), 3);
	ck_assert_double_eq(tally_get(&side.stops, "[unwind stopped: no cfi]"), 4);
	ck_assert_double_eq(tally_get(&side.unknown_comm, "as"), 2);
	ck_assert_double_eq(tally_get(&side.unknown_comm, "cmake"), 1);
	ck_assert_double_eq(tally_get(&side.self, "vfs_read"), 3);
	ck_assert_double_eq(tally_get(&side.self, "[unknown]"), 5);
	fold_side_free(&side);
}
END_TEST

START_TEST(test_perf_script)
{
	static const char text[] =
		"gzip 100/100\n"
		"\t          16e0ba __memset_avx512_unaligned_erms (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
		"\t            4290 deflate (/usr/bin/gzip)\n"
		"\t           27249 __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
		"\n"
		"Web Content 101/102\n"
		"\tffffffff81000010 vfs_read ([kernel.kallsyms])\n"
		"\t    7f0011223344 [unknown] ([unknown])\n"
		"\n"
		"kworker/1:0 7/7\n"
		"\tffffffff81000020 worker_thread ([kernel.kallsyms])\n"
		"\n";
	FILE *f = fmemopen((void *)text, sizeof(text) - 1, "r");

	memset(&side, 0, sizeof(side));
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fold_perf_stream(f, &side), 0);
	fclose(f);
	ck_assert_double_eq(side.samples, 3);
	ck_assert_double_eq(side.user, 2);
	ck_assert_double_eq(side.user_known_leaf, 1);
	ck_assert_double_eq(side.complete, 1);
	ck_assert_double_eq(tally_get(&side.unknown_comm, "Web Content"), 1);
	ck_assert_double_eq(tally_get(&side.self, "__memset_avx512_unaligned_erms"), 1);
	ck_assert_double_eq(tally_get(&side.self, "vfs_read"), 1);
	fold_side_free(&side);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bench_fold");
	TEST_TCASE(s, "fold", test_cpa_lines, test_perf_script);
	return test_run_suite(s);
}
