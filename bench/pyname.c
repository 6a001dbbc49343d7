// SPDX-License-Identifier: MIT
/*
 * bench_pyname: what capture pays per sample for naming Python code objects
 * (capture/cap_pyname.c, docs/unwinding.md "Python"): cap_pyname__sample() +
 * cap_emit__record() into a real ring 0, side by side in one run, per sample:
 *
 *   native     a sample without Python frames (the test of py_n only)
 *   py sent    a Python sample of DEPTH frames whose code objects were sent
 *   py first   the same with the process's set dropped before each sample:
 *              DEPTH code objects read (process_vm_readv) and emitted, each
 *              sample in a poll of its own (cap_pyname__poll())
 *   py over    the same past the poll's read budget (CAP_PYNAME_BUDGET_NS):
 *              nothing read, the sample forwarded for symd to name
 *
 * The frames are a live python3's (a child running DEPTH nested functions,
 * printing their code objects' addresses). Usage: bench_pyname [reps]
 * Medians of reps (default 5) rounds; ns per sample.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capture/cap_emit.h"
#include "capture/cap_pyname.h"
#include "common/timeutil.h"
#include "pychild.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "shm/records.h"

#define DEPTH 10

static const char script[] =
	"import sys\n"
	"def mk(i):\n"
	"    exec(f'def f{i}(): pass', globals())\n"
	"    return globals()[f'f{i}']\n"
	"fs = [mk(i) for i in range(10)]\n"
	"print(sys.version_info[1], *[id(f.__code__) for f in fs], flush=True)\n"
	"sys.stdin.read()\n";

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void drain(struct shm_ring_cons *c)
{
	struct shm_msg m;

	while (shm_ring__peek_sc(c, &m) == 0)
		;
	shm_ring__release_sc(c);
}

/* ns per sample of n samples of bs; drop: the process's set before each, 1:
 * and a poll's budget begins, 2: not (past it after the first few). */
static uint64_t run(struct cap_pyname *pn, struct cap_emit *e, struct shm_ring_cons *c,
		    struct cpa_bpf_sample *bs, size_t size, unsigned int n, int drop)
{
	uint64_t t0, t = 0;

	for (unsigned int i = 0; i < n; i++) {
		if (drop)
			cap_pyname__drop_pid(pn, bs->pid);
		if (drop == 1)
			cap_pyname__poll(pn);
		t0 = clock_ns(CLOCK_MONOTONIC);
		if (bs->py_n)
			cap_pyname__sample(pn, e, bs, size);
		cap_emit__record(e, bs, size);
		t += clock_ns(CLOCK_MONOTONIC) - t0;
		if (i % 64 == 63) {
			cap_emit__commit(e);
			drain(c);
		}
	}
	cap_emit__commit(e);
	drain(c);
	return t / n;
}

int main(int argc, char **argv)
{
	unsigned int reps = argc > 1 ? (unsigned int)atoi(argv[1]) : 5, minor;
	int in;
	uint64_t codes[DEPTH], res[4][64];
	struct shm_layout l = {.n_rings = 1};
	struct shm_ring_prod prod;
	struct shm_ring_cons cons;
	struct shm_arena *a;
	struct cap_emit e;
	struct cap_pyname *pn;
	struct cpa_bpf_sample *bs;
	struct cpa_bpf_pyframe *pf;
	size_t size = sizeof(*bs) + sizeof(*pf) * DEPTH;
	char line[1024];
	pid_t pid;

	if (reps < 1 || reps > 64)
		return 2;
	pid = py_child(script, line, sizeof(line), &in);
	if (!pid) {
		fprintf(stderr, "bench_pyname: no python3\n");
		return 77;
	}
	{
		char *p = line;

		minor = (unsigned int)strtoul(p, &p, 10);
		for (int i = 0; i < DEPTH; i++)
			codes[i] = strtoull(p, &p, 10);
	}
	l.rings[0].data_size = 4u << 20;
	l.rings[0].producer = SHM_STAGE_CAPTURE;
	l.rings[0].consumer = SHM_STAGE_UNWINDD;
	if (shm_arena__create(&l, &a) < 0 || shm_arena__open_prod(a, 0, &prod) < 0 ||
	    shm_arena__open_cons(a, 0, &cons) < 0 ||
	    cap_emit__init(&e, &prod, shm_arena__stage(a, SHM_STAGE_CAPTURE), 1, 8192) < 0 ||
	    cap_pyname__new(&pn, shm_arena__stage(a, SHM_STAGE_CAPTURE)) < 0)
		return 1;
	bs = calloc(1, size);
	bs->type = CPA_BPF_REC_SAMPLE;
	bs->kind = CPA_BPF_KIND_ONCPU;
	bs->pid = bs->tid = (uint32_t)pid;
	bs->py_ver = (uint16_t)(0x0300 | minor);
	bs->py_status = CPA_BPF_PY_OK;
	pf = (struct cpa_bpf_pyframe *)(bs->stack);
	for (int i = 0; i < DEPTH; i++)
		pf[i].code = codes[i];
	for (unsigned int r = 0; r < reps; r++) {
		uint32_t npy = bs->py_n;

		bs->py_n = 0;
		res[0][r] = run(pn, &e, &cons, bs, size, 20000, 0);
		bs->py_n = DEPTH;
		res[1][r] = run(pn, &e, &cons, bs, size, 20000, 0);
		res[2][r] = run(pn, &e, &cons, bs, size, 500, 1);
		cap_pyname__poll(pn);
		res[3][r] = run(pn, &e, &cons, bs, size, 20000, 2);
		bs->py_n = npy;
	}
	for (int i = 0; i < 4; i++)
		qsort(res[i], reps, sizeof(res[i][0]), cmp_u64);
	{
		struct shm_stage *st = shm_arena__stage(a, SHM_STAGE_CAPTURE);

		printf("bench_pyname: python3.%u, %d frames, median of %u rounds (records sent %llu, "
		       "reads failed %llu, samples past the budget %llu)\n",
		       minor, DEPTH, reps,
		       (unsigned long long)shm_stage__cnt(st, CAP_CNT_PYCODE_SENT),
		       (unsigned long long)shm_stage__cnt(st, CAP_CNT_PYCODE_FAILED),
		       (unsigned long long)shm_stage__cnt(st, CAP_CNT_PYCODE_DEFERRED));
	}
	printf("%-10s %12s %10s\n", "sample", "ns/sample", "vs native");
	printf("%-10s %12llu %10s\n", "native", (unsigned long long)res[0][reps / 2], "1.00");
	printf("%-10s %12llu %10.2f\n", "py sent", (unsigned long long)res[1][reps / 2],
	       (double)res[1][reps / 2] / (double)(res[0][reps / 2] ? res[0][reps / 2] : 1));
	printf("%-10s %12llu %10.2f\n", "py first", (unsigned long long)res[2][reps / 2],
	       (double)res[2][reps / 2] / (double)(res[0][reps / 2] ? res[0][reps / 2] : 1));
	printf("%-10s %12llu %10.2f\n", "py over", (unsigned long long)res[3][reps / 2],
	       (double)res[3][reps / 2] / (double)(res[0][reps / 2] ? res[0][reps / 2] : 1));
	close(in);
	waitpid(pid, NULL, 0);
	cap_pyname__free(pn);
	shm_arena__free(a);
	free(bs);
	return 0;
}
