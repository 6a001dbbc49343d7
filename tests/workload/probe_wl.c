// SPDX-License-Identifier: MIT
/*
 * The probe workload (tests/test_probe.c): prints "pid N", waits for a line
 * on stdin (the probes are attached by then), then calls wl_probe_target()
 * N times, getppid() M times and passes the USDT probe cpa_wl:tick K times,
 * prints "done", and exits at the end of stdin: the test stops the monitor
 * first, so unwindd reads the maps of a live process (as for a service).
 * Usage: cpa-probe-wl N M K
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if __has_include(<sys/sdt.h>)
#include <sys/sdt.h>
#define WL_HAVE_USDT 1
#else
#define WL_HAVE_USDT 0
#endif

static volatile long sink;

long wl_probe_target(long i); /* the uprobe target: a global symbol */

/*
 * wl_halt: never called; it starts with hlt, an instruction the kernel's
 * x86 uprobes refuse (ENOTSUPP, like int3, int N and cli): cpa's spec check
 * refuses a uprobe there (test_probe_bad_specs).
 */
__asm__(".text\n"
	".globl wl_halt\n"
	".type wl_halt, @function\n"
	"wl_halt:\n"
	"\thlt\n"
	"\tret\n"
	".size wl_halt, .-wl_halt\n");

/*
 * wl_evex: never called; it starts with vpxord (EVEX 62 .. ef), which the
 * kernel's x86 uprobes refuse too (ENOTSUPP) and cpa's decoder does not know:
 * a uprobe there passes the spec check and is refused at attach while this
 * process maps the file (test_probe_refused).
 */
__asm__(".text\n"
	".globl wl_evex\n"
	".type wl_evex, @function\n"
	"wl_evex:\n"
	"\t.byte 0x62, 0xf1, 0x7d, 0x48, 0xef, 0xc0\n"
	"\tret\n"
	".size wl_evex, .-wl_evex\n");

__attribute__((noinline)) long wl_probe_target(long i)
{
	sink += i;
	__asm__ volatile("" ::: "memory");
	return sink;
}

__attribute__((noinline)) static void wl_run_targets(long n)
{
	for (long i = 0; i < n; i++)
		wl_probe_target(i);
}

__attribute__((noinline)) static void wl_run_getppid(long m)
{
	for (long i = 0; i < m; i++)
		sink += getppid();
}

__attribute__((noinline)) static void wl_run_usdt(long k)
{
	for (long i = 0; i < k; i++) {
#if WL_HAVE_USDT
		DTRACE_PROBE1(cpa_wl, tick, i);
#endif
		sink += i;
	}
}

int main(int argc, char **argv)
{
	char line[16];

	if (argc != 4) {
		fprintf(stderr, "usage: %s N M K\n", argv[0]);
		return 2;
	}
	printf("pid %d usdt %d\n", (int)getpid(), WL_HAVE_USDT);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		return 1;
	wl_run_targets(atol(argv[1]));
	wl_run_getppid(atol(argv[2]));
	wl_run_usdt(atol(argv[3]));
	printf("done\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		;
	return 0;
}
