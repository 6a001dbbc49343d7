// SPDX-License-Identifier: MIT
/*
 * bench_unwind: speed of the CFI unwinder (docs/unwinding.md).
 *
 * 1. Row evaluation (method of libgunwinder's cfi_bench): take N distinct
 *    rows of a real large table (libc by default), synthesize per row a
 *    register state and a stack on which evaluating the row yields a CFA,
 *    return address and rbp; warm up, then cycle through the N states.
 *    Each step = pc->rule lookup (cache, else page index + binary search)
 *    + rule evaluation + bounded stack reads.
 * 2. End to end: unw_walk over real samples (ptrace captures of the
 *    -O2 -fomit-frame-pointer fixture at random points of a ~24-frame
 *    workload), with a find callback doing a binary search over the maps.
 *
 * Pinned to one CPU; throughput per second of thread CPU time, best of
 * TRIALS runs. Output: "name value unit" lines, then a table.
 *
 *   build/bin/bench_unwind [--cpu N] [--seconds S] [--table PATH] [--samples N]
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

#include "common/macro.h"
#include "tests/fixtures/cfi/cfi_capture.h"
#include "unwindd/cfi.h"
#include "unwindd/walk.h"

#define STACK_BYTES (256 * 1024)
#define BLOCK	    64 /* frames per timed block for the latency percentiles */
#define TRIALS	    5  /* throughput: best of */

static uint8_t stack_bytes[STACK_BYTES] __attribute__((aligned(64)));
static volatile uint64_t sink;

struct row_state {
	uint64_t off;
	struct unw_regs regs;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/*
 * Throughput is per second of CPU time of this thread: on a shared machine
 * wall time would also count the slices other processes take from our CPU.
 */
static double cpu_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* TSC ticks per ns, measured against CLOCK_MONOTONIC. */
static double tsc_per_ns(void)
{
	double t0 = now_s();
	uint64_t c0 = __rdtsc();

	while (now_s() - t0 < 0.05)
		;
	return (double)(__rdtsc() - c0) / ((now_s() - t0) * 1e9);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * Ticks one rdtsc pair costs (median): in a VM rdtsc can take ~50 ns, which
 * would otherwise be charged to the frames of each block.
 */
static uint64_t tsc_overhead(void)
{
	uint64_t d[1001];

	for (size_t i = 0; i < ARRAY_SIZE(d); i++) {
		uint64_t a = __rdtsc();

		d[i] = __rdtsc() - a;
	}
	qsort(d, ARRAY_SIZE(d), sizeof(d[0]), cmp_u64);
	return d[ARRAY_SIZE(d) / 2];
}

static uint64_t tsc_over;

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/*
 * N states over distinct rows that step successfully on the synthetic stack.
 * The stack holds a recognisable non-zero word everywhere, so whatever offset
 * a row reads its RA/rbp from, evaluation completes.
 */
static int make_states(const struct cfi_table *t, const struct unw_stack *st, unsigned int n,
		       struct row_state *out)
{
	size_t rows = cfi_table__rows(t);
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	unsigned int got = 0;
	_cleanup_free_ uint8_t *used = calloc(rows, 1);

	if (!used)
		return -ENOMEM;
	for (size_t tries = 0; got < n && tries < rows * 8; tries++) {
		size_t i = xorshift(&seed) % (rows - 1);
		uint64_t s, e;
		struct row_state rs;
		struct unw_regs r;
		bool sig;

		if (used[i] || cfi_table__row(t, i, &s, &e, NULL) < 0)
			continue;
		used[i] = 1;
		rs.off = s + (xorshift(&seed) % (e - s));
		rs.regs = (struct unw_regs){
			.ip = 0x7f0000000000ull + rs.off,
			.sp = st->base + 4096,
			.bp = st->base + 8192,
			.bx = 1,
			.r12 = 2,
			.r13 = 3,
			.r14 = 4,
			.r15 = 5,
		};
		r = rs.regs;
		if (unw_step(t, rs.off, &r, st, &sig) != 0)
			continue; /* gap rows, RA-undefined rows, rows needing rax/rdi */
		out[got++] = rs;
	}
	return got == n ? 0 : -ENODATA;
}

struct row_result {
	double frames_per_s, p50, p99;
};

static int bench_rows(const struct cfi_table *t, unsigned int ws, double seconds, double tpn,
		      struct row_result *res)
{
	struct unw_stack st = {stack_bytes, 0x7ffc00000000ull, STACK_BYTES};
	_cleanup_free_ struct row_state *rs = calloc(ws, sizeof(*rs));
	_cleanup_free_ uint32_t *lat = NULL;
	size_t n_lat = 0, cap_lat;
	uint64_t frames = 0, acc = 0;
	double t0, el;
	int r;

	if (!rs)
		return -ENOMEM;
	r = make_states(t, &st, ws, rs);
	if (r < 0)
		return r;
	/* warm up: two passes fill the pc cache and the data caches */
	for (int pass = 0; pass < 2; pass++)
		for (unsigned int i = 0; i < ws; i++) {
			struct unw_regs g = rs[i].regs;
			bool sig;

			unw_step(t, rs[i].off, &g, &st, &sig);
			acc += g.ip ^ g.sp ^ g.bp;
		}

	/*
	 * Throughput: whole passes, no timing inside; the best of TRIALS runs,
	 * because a shared 2-core machine steals whole time slices from some.
	 */
	res->frames_per_s = 0;
	for (int trial = 0; trial < TRIALS; trial++) {
		frames = 0;
		t0 = cpu_s();
		do {
			for (int rep = 0; rep < 16; rep++)
				for (unsigned int i = 0; i < ws; i++) {
					struct unw_regs g = rs[i].regs;
					bool sig;

					unw_step(t, rs[i].off, &g, &st, &sig);
					acc += g.ip ^ g.sp ^ g.bp;
				}
			frames += 16ull * ws;
			el = cpu_s() - t0;
		} while (el < seconds / TRIALS);
		res->frames_per_s = MAX(res->frames_per_s, (double)frames / el);
	}

	/* latency: rdtsc around blocks of BLOCK frames, per-frame ns percentiles */
	cap_lat = (size_t)(res->frames_per_s * seconds / 2 / BLOCK) + 1024;
	lat = malloc(cap_lat * sizeof(*lat));
	if (!lat)
		return -ENOMEM;
	t0 = now_s();
	for (unsigned int i = 0; n_lat < cap_lat && now_s() - t0 < seconds / 2;) {
		for (int k = 0; k < 4096 && n_lat < cap_lat; k++) {
			uint64_t c0 = __rdtsc();

			for (int b = 0; b < BLOCK; b++) {
				struct unw_regs g = rs[i].regs;
				bool sig;

				unw_step(t, rs[i].off, &g, &st, &sig);
				acc += g.ip ^ g.sp ^ g.bp;
				if (++i == ws)
					i = 0;
			}
			uint64_t d = __rdtsc() - c0;

			d = d > tsc_over ? d - tsc_over : 0;
			lat[n_lat++] = (uint32_t)((double)d / tpn * 1000 / BLOCK);
		}
	}
	qsort(lat, n_lat, sizeof(*lat), cmp_u32);
	res->p50 = lat[n_lat / 2] / 1000.0;
	res->p99 = lat[n_lat * 99 / 100] / 1000.0;
	sink = acc;
	return 0;
}

struct e2e_result {
	double samples_per_s, ns_per_frame, frames_per_sample;
	unsigned int n_samples, n_end;
};

static int bench_e2e(const char *fixture, unsigned int n_samples, double seconds,
		     struct e2e_result *res)
{
	char *argv[] = {(char *)"cfi_fixture", (char *)"work", (char *)"12", NULL};
	_cleanup_free_ struct cap_sample *s = calloc(n_samples, sizeof(*s));
	struct cpa_uframe f[CPA_MAX_UFRAMES];
	struct cap_proc *proc = calloc(1, sizeof(*proc));
	uint64_t walks = 0, frames = 0;
	double t0, el;
	pid_t pid;
	int r;

	if (!s || !proc)
		return -ENOMEM;
	r = cap_spawn(fixture, argv, &pid);
	if (r < 0)
		goto out;
	cap_resume(pid);
	usleep(20000);
	if ((r = cap_interrupt(pid)) < 0 || (r = cap_proc__load(proc, pid)) < 0)
		goto out_kill;
	for (unsigned int i = 0; i < n_samples; i++) {
		cap_resume(pid);
		usleep(100 + (unsigned int)rand() % 400);
		if ((r = cap_interrupt(pid)) < 0 ||
		    (r = cap_sample__take(proc, pid, CPA_MAX_STACK_COPY, &s[i])) < 0)
			goto out_kill;
	}
	cap_kill(pid);

	res->n_samples = n_samples;
	res->n_end = 0;
	for (unsigned int i = 0; i < n_samples; i++) {
		struct unw_stack st = {s[i].bytes, s[i].base, s[i].len};
		unsigned int n;

		if (unw_walk(&s[i].regs, &st, cap_find, proc, f, CPA_MAX_UFRAMES, &n) ==
		    CPA_STOP_END)
			res->n_end++;
	}
	res->samples_per_s = 0;
	for (int trial = 0; trial < TRIALS; trial++) {
		walks = frames = 0;
		t0 = cpu_s();
		do {
			for (unsigned int i = 0; i < n_samples; i++) {
				struct unw_stack st = {s[i].bytes, s[i].base, s[i].len};
				unsigned int n;

				unw_walk(&s[i].regs, &st, cap_find, proc, f, CPA_MAX_UFRAMES, &n);
				frames += n;
			}
			walks += n_samples;
			el = cpu_s() - t0;
		} while (el < seconds / TRIALS);
		if ((double)walks / el > res->samples_per_s) {
			res->samples_per_s = (double)walks / el;
			res->ns_per_frame = el * 1e9 / (double)frames;
		}
	}
	res->frames_per_sample = (double)frames / (double)walks;
	r = 0;
	goto out;
out_kill:
	cap_kill(pid);
out:
	for (unsigned int i = 0; i < n_samples; i++)
		cap_sample__done(&s[i]);
	cap_proc__done(proc);
	free(proc);
	return r;
}

int main(int argc, char **argv)
{
	const char *table_path = "/lib/x86_64-linux-gnu/libc.so.6";
	static const unsigned int ws[] = {100, 1000, 10000};
	struct row_result rr[ARRAY_SIZE(ws)];
	struct e2e_result er = {0};
	unsigned int n_samples = 300;
	double seconds = 2.0, tpn;
	struct cfi_table *t = NULL;
	int cpu = 1, r, fd;
	cpu_set_t set;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--cpu"))
			cpu = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--seconds"))
			seconds = atof(argv[i + 1]);
		else if (!strcmp(argv[i], "--table"))
			table_path = argv[i + 1];
		else if (!strcmp(argv[i], "--samples"))
			n_samples = (unsigned int)atoi(argv[i + 1]);
	}
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) < 0)
		fprintf(stderr, "bench_unwind: pin to cpu %d: %m (unpinned)\n", cpu);
	memset(stack_bytes, 0x5a, sizeof(stack_bytes));
	srand(7);
	tpn = tsc_per_ns();
	tsc_over = tsc_overhead();

	fd = open(table_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (r = cfi_table__build(fd, -1, &t)) < 0) {
		fprintf(stderr, "bench_unwind: table of '%s' failed\n", table_path);
		return 1;
	}
	close(fd);
	{
		double t0 = now_s();
		struct cfi_table *t2 = NULL;

		fd = open(table_path, O_RDONLY | O_CLOEXEC);
		cfi_table__build(fd, -1, &t2);
		printf("cfi_build_ms %.2f ms\n", (now_s() - t0) * 1e3);
		cfi_table__free(t2);
		close(fd);
	}
	printf("cfi_rows %zu rows\n", cfi_table__rows(t));
	printf("cfi_bytes_per_row %.2f B\n",
	       (double)cfi_table__bytes(t) / (double)cfi_table__rows(t));

	for (size_t i = 0; i < ARRAY_SIZE(ws); i++) {
		r = bench_rows(t, ws[i], seconds, tpn, &rr[i]);
		if (r < 0) {
			fprintf(stderr, "bench_unwind: rows ws%u: %s\n", ws[i], strerror(-r));
			return 1;
		}
		printf("cfi_frames_per_s_ws%u %.0f frames/s\n", ws[i], rr[i].frames_per_s);
		printf("cfi_ns_p50_ws%u %.1f ns\n", ws[i], rr[i].p50);
		printf("cfi_ns_p99_ws%u %.1f ns\n", ws[i], rr[i].p99);
	}

	r = bench_e2e(CFI_FIXTURE_DIR "/cfi_fixture", n_samples, seconds, &er);
	if (r < 0) {
		fprintf(stderr, "bench_unwind: end-to-end samples: %s\n", strerror(-r));
	} else {
		printf("samples_per_s %.0f samples/s\n", er.samples_per_s);
		printf("ns_per_frame %.1f ns\n", er.ns_per_frame);
		printf("frames_per_sample %.1f frames\n", er.frames_per_sample);
		printf("samples_complete %u/%u samples\n", er.n_end, er.n_samples);
	}

	printf("\n%-26s %14s %10s %10s\n", "cfi rows (table)", "frames/s", "p50 ns", "p99 ns");
	for (size_t i = 0; i < ARRAY_SIZE(ws); i++)
		printf("ws%-24u %14.0f %10.1f %10.1f\n", ws[i], rr[i].frames_per_s, rr[i].p50,
		       rr[i].p99);
	if (r == 0)
		printf("%-26s %14.0f samples/s  %.1f ns/frame  %.1f frames/sample\n",
		       "end-to-end unw_walk", er.samples_per_s, er.ns_per_frame,
		       er.frames_per_sample);
	cfi_table__free(t);
	return 0;
}
