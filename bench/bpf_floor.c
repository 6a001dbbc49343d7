// SPDX-License-Identifier: MIT
/*
 * bench_bpf_floor: the floor under cpa_on_cpu's time per run (issue 9's "BPF per
 * sample" goal). Each rung is a cpu-clock BPF program (bench/bpf_floor.bpf.c)
 * that does one more thing than the rung before it: nothing; the ids (the pid
 * alone, then with the boot time or the comm, then all three); a record
 * through the BPF ring buffer or through a per-CPU ring of our own; 1 or 4 KiB
 * of user stack copied into it; the 4 KiB copied twice. Each runs alone,
 * whole machine, at --freq while a workload keeps the CPUs busy (by default
 * cpa-workload-nofp, one busy FP-less thread per CPU), for --seconds, in
 * --reps interleaved rounds; the time per run is bpf_stats' run_time_ns /
 * run_cnt, as bench/bpf_run_cost.sh reads it for cpa_on_cpu. The medians'
 * differences are the price of each part. docs/bench.md "The floor of a BPF
 * sample". Root (BPF).
 *
 *   bench_bpf_floor [--freq HZ] [--seconds S] [--reps N] [-- WORKLOAD ARGV...]
 */
#include <errno.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bench/benchutil.h"
#include "bench/bpf_floor.h"
#include "common/timeutil.h"
#include "bpf_floor.skel.h"

enum rung_prog { R_EMPTY, R_IDS, R_RINGBUF, R_RINGBUF_CODE, R_PCPU, R_PCPU_TWICE };

#define IDS_ALL (FLOOR_IDS_TIME | FLOOR_IDS_COMM)

/* The rungs, in the order they run; the price lines subtract their medians. */
enum rung_id {
	G_EMPTY,
	G_PID,
	G_TIME,
	G_COMM,
	G_IDS,
	G_RB,
	G_PCPU,
	G_RB_1K,
	G_RB_1K_CODE,
	G_PCPU_1K,
	G_RB_4K,
	G_PCPU_4K,
	G_TWICE,
	NR_RUNGS
};

static const struct rung {
	const char *name;
	enum rung_prog prog;
	uint32_t copy;
	uint32_t ids; /* FLOOR_IDS_*: the parts beyond the pid */
} rungs[NR_RUNGS] = {
	[G_EMPTY] = {"empty program", R_EMPTY, 0, 0},
	[G_PID] = {"ids: pid", R_IDS, 0, 0},
	[G_TIME] = {"ids: pid, time", R_IDS, 0, FLOOR_IDS_TIME},
	[G_COMM] = {"ids: pid, comm", R_IDS, 0, FLOOR_IDS_COMM},
	[G_IDS] = {"ids (pid, time, comm)", R_IDS, 0, IDS_ALL},
	[G_RB] = {"+ BPF ring buffer", R_RINGBUF, 0, IDS_ALL},
	[G_PCPU] = {"+ per-CPU ring", R_PCPU, 0, IDS_ALL},
	[G_RB_1K] = {"+ ring buffer, 1 KiB copy", R_RINGBUF, 1024, IDS_ALL},
	[G_RB_1K_CODE] = {"+ ring buffer, 1 KiB, 3 KB code", R_RINGBUF_CODE, 1024, IDS_ALL},
	[G_PCPU_1K] = {"+ per-CPU ring, 1 KiB copy", R_PCPU, 1024, IDS_ALL},
	[G_RB_4K] = {"+ ring buffer, 4 KiB copy", R_RINGBUF, 4096, IDS_ALL},
	[G_PCPU_4K] = {"+ per-CPU ring, 4 KiB copy", R_PCPU, 4096, IDS_ALL},
	[G_TWICE] = {"+ per-CPU ring, 4 KiB twice", R_PCPU_TWICE, 4096, IDS_ALL},
};
_Static_assert(ARRAY_SIZE(rungs) == NR_RUNGS, "a name for every rung");

/* The price lines: a rung's median less that of the rung it adds to (NR_RUNGS: none). */
static const struct part {
	const char *what;
	enum rung_id rung, less;
} parts[] = {
	{"a run at all (empty program)", G_EMPTY, NR_RUNGS},
	{"ids: the pid", G_PID, G_EMPTY},
	{"ids: + boot time", G_TIME, G_PID},
	{"ids: + comm", G_COMM, G_PID},
	{"ids: pid, boot time, comm", G_IDS, G_EMPTY},
	{"a record through the BPF ring buffer", G_RB, G_IDS},
	{"a record through a per-CPU ring", G_PCPU, G_IDS},
	{"1 KiB user stack copy (ring buffer)", G_RB_1K, G_RB},
	{"1 KiB user stack copy (per-CPU ring)", G_PCPU_1K, G_PCPU},
	{"3 KB more code run (cold), 440 adds", G_RB_1K_CODE, G_RB_1K},
	{"4 KiB user stack copy (ring buffer)", G_RB_4K, G_RB},
	{"4 KiB user stack copy (per-CPU ring)", G_PCPU_4K, G_PCPU},
	{"the same 4 KiB again, warm", G_TWICE, G_PCPU_4K},
};
#define MAX_REPS 32

static struct {
	unsigned int freq, seconds, reps;
	char **cmd; /* the workload's argv; NULL = cpa-workload-nofp */
} o = {.freq = 49, .seconds = 8, .reps = 3};

struct result {
	double ns_per_run;
	uint64_t runs;
	uint64_t records; /* delivered (ring buffer) or published (per-CPU ring) */
	bool last_ok;	  /* the last record read back names a real task */
};

static double now_s(void)
{
	return (double)clock_ns(CLOCK_MONOTONIC) / 1e9;
}

static int count_rec(void *ctx, void *data, size_t size)
{
	struct result *res = ctx;
	const struct floor_rec *r = data;

	res->records++;
	res->last_ok = size >= sizeof(*r) && r->tid && r->comm[0];
	return 0;
}

static struct bpf_program *rung_prog(struct bpf_floor_bpf *skel, enum rung_prog p)
{
	switch (p) {
	case R_EMPTY:
		return skel->progs.floor_empty;
	case R_IDS:
		return skel->progs.floor_idsonly;
	case R_RINGBUF:
		return skel->progs.floor_ringbuf;
	case R_RINGBUF_CODE:
		return skel->progs.floor_ringbuf_code;
	case R_PCPU:
		return skel->progs.floor_pcpu;
	case R_PCPU_TWICE:
		return skel->progs.floor_pcpu_twice;
	}
	return NULL;
}

static int prog_time(struct bpf_program *p, uint64_t *ns, uint64_t *cnt)
{
	struct bpf_prog_info info = {0};
	uint32_t len = sizeof(info);

	if (bpf_obj_get_info_by_fd(bpf_program__fd(p), &info, &len) < 0)
		return -errno;
	*ns = info.run_time_ns;
	*cnt = info.run_cnt;
	return 0;
}

/* The per-CPU rings' records published since the last call; checks the newest. */
static uint64_t pcpu_read(const uint8_t *map, size_t elem, int ncpu, uint32_t stride,
			  uint64_t *seen, bool *last_ok)
{
	uint64_t n = 0;

	for (int c = 0; c < ncpu; c++) {
		const struct floor_pcpu *m = (const void *)(map + (size_t)c * elem);
		uint64_t prod = __atomic_load_n(&m->prod, __ATOMIC_ACQUIRE);

		if (prod == seen[c])
			continue;
		n += (prod - seen[c]) / stride;
		seen[c] = prod;
		const struct floor_rec *r =
			(const void *)(m->data + ((prod - stride) & (FLOOR_PCPU_BYTES - 1)));
		*last_ok = r->tid && r->comm[0];
	}
	return n;
}

static int run_rung(const struct rung *g, struct result *res)
{
	struct bpf_floor_bpf *skel = bpf_floor_bpf__open();
	int ncpu = libbpf_num_possible_cpus(), r = 0, nl = 0;
	struct bpf_link **links = NULL;
	struct ring_buffer *rb = NULL;
	uint8_t *map = MAP_FAILED;
	size_t elem = (sizeof(struct floor_pcpu) + 7) & ~(size_t)7, map_len = 0;
	uint64_t *seen = NULL, ns0 = 0, cnt0 = 0, ns1 = 0, cnt1 = 0;
	uint32_t stride = 64;
	struct bpf_program *prog, *p;

	memset(res, 0, sizeof(*res));
	if (!skel || ncpu <= 0)
		return -errno ?: -EINVAL;
	while (stride < sizeof(struct floor_rec) + g->copy)
		stride <<= 1;
	skel->rodata->copy_bytes = g->copy;
	skel->rodata->stride = stride;
	skel->rodata->ids = g->ids;
	prog = rung_prog(skel, g->prog);
	bpf_object__for_each_program(p, skel->obj) bpf_program__set_autoload(p, p == prog);
	bpf_map__set_max_entries(skel->maps.pcpu, (uint32_t)ncpu);
	r = bpf_floor_bpf__load(skel);
	if (r < 0) {
		bench_say("load %s: %s", bpf_program__name(prog), strerror(-r));
		goto out;
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.rb), count_rec, res, NULL);
	map_len = ((size_t)ncpu * elem + 4095) & ~(size_t)4095;
	map = mmap(NULL, map_len, PROT_READ, MAP_SHARED, bpf_map__fd(skel->maps.pcpu), 0);
	seen = calloc((size_t)ncpu, sizeof(*seen));
	links = calloc((size_t)ncpu, sizeof(*links));
	if (!rb || map == MAP_FAILED || !seen || !links) {
		r = -errno ?: -ENOMEM;
		bench_say("ring buffer / per-CPU ring: %s", strerror(-r));
		goto out;
	}
	for (int c = 0; c < ncpu; c++) {
		struct perf_event_attr a = {
			.type = PERF_TYPE_SOFTWARE,
			.config = PERF_COUNT_SW_CPU_CLOCK,
			.size = sizeof(a),
			.freq = 1,
			.sample_freq = o.freq,
		};
		int fd = (int)syscall(__NR_perf_event_open, &a, -1, c, -1, PERF_FLAG_FD_CLOEXEC);

		if (fd < 0) {
			if (errno == ENODEV) /* possible, not online */
				continue;
			r = -errno;
			bench_say("perf_event_open cpu-clock, CPU %d: %s", c, strerror(errno));
			goto out;
		}
		links[nl] = bpf_program__attach_perf_event(prog, fd);
		if (!links[nl]) {
			r = -errno;
			close(fd);
			bench_say("attach %s: %s", bpf_program__name(prog), strerror(-r));
			goto out;
		}
		nl++;
	}

	/* A second to settle, then the window; the rings drained every 50 ms
	 * either way, as capture drains on its deadline. */
	for (int phase = 0; phase < 2; phase++) {
		double t0 = now_s(), len = phase ? o.seconds : 1;

		if (phase) {
			r = prog_time(prog, &ns0, &cnt0);
			if (r < 0)
				goto out;
			res->records = 0;
		}
		while (now_s() - t0 < len && !bench_interrupted) {
			usleep(50000);
			ring_buffer__consume(rb);
			res->records += pcpu_read(map, elem, ncpu, stride, seen, &res->last_ok);
		}
	}
	r = prog_time(prog, &ns1, &cnt1);
	if (r < 0)
		goto out;
	res->runs = cnt1 - cnt0;
	res->ns_per_run = res->runs ? (double)(ns1 - ns0) / (double)res->runs : 0;
	if (bench_interrupted)
		r = -EINTR;
out:
	for (int i = 0; i < nl; i++)
		bpf_link__destroy(links[i]);
	free(links);
	free(seen);
	if (map != MAP_FAILED)
		munmap(map, map_len);
	ring_buffer__free(rb);
	bpf_floor_bpf__destroy(skel);
	return r;
}

static pid_t start_workload(void)
{
	char self[4096], wl[4200], secs[32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	pid_t pid;

	if (n <= 0)
		return -1;
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(wl, sizeof(wl), "%s/cpa-workload-nofp", self);
	/* one busy thread per CPU: the main thread and --threads more */
	snprintf(secs, sizeof(secs), "%u", (unsigned int)NR_RUNGS * (o.seconds + 2) * o.reps + 60);
	pid = fork();
	if (pid == 0) {
		char threads[24];
		long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

		snprintf(threads, sizeof(threads), "%ld", ncpu > 1 ? ncpu - 1 : 0);
		if (!freopen("/dev/null", "w", stdout))
			_exit(127);
		if (o.cmd)
			execvp(o.cmd[0], o.cmd);
		else
			execl(wl, wl, "--seconds", secs, "--threads", threads, (char *)NULL);
		fprintf(stderr, "bench_bpf_floor: exec %s: %s\n", o.cmd ? o.cmd[0] : wl,
			strerror(errno));
		_exit(127);
	}
	return pid;
}

static double median(const struct result res[MAX_REPS], unsigned int n)
{
	double v[MAX_REPS];

	for (unsigned int i = 0; i < n; i++)
		v[i] = res[i].ns_per_run;
	return bench_median(v, n);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: bench_bpf_floor [--freq HZ] [--seconds S] [--reps N] [-- WORKLOAD "
		   "ARGV...]\n"
		   "The time per run of cpu-clock BPF programs that each add one part of a "
		   "sample\n(docs/bench.md \"The floor of a BPF sample\"). Root.\n"
		   "  --freq HZ     sampling rate per CPU (default 49)\n"
		   "  --seconds S   measured window per rung and round (default 8)\n"
		   "  --reps N      interleaved rounds, at most 32 (default 3)\n"
		   "  -- ARGV       the workload to sample (default: cpa-workload-nofp, one busy "
		   "thread per CPU)\n");
}

static int parse_opts(int argc, char **argv)
{
	static const struct option opts[] = {
		{"freq", required_argument, NULL, 'F'},
		{"seconds", required_argument, NULL, 's'},
		{"reps", required_argument, NULL, 'r'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int c;
	char *end;
	unsigned long v;

	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == '?') {
			usage(stderr);
			return -EINVAL;
		}
		errno = 0;
		v = strtoul(optarg, &end, 10);
		if (errno || *end || !v || v > 100000 || (c == 'r' && v > MAX_REPS) ||
		    (c == 's' && v > 3600)) {
			bench_say("--%s '%s': want a whole number in range",
				  c == 'F'   ? "freq"
				  : c == 's' ? "seconds"
					     : "reps",
				  optarg);
			return -EINVAL;
		}
		if (c == 'F')
			o.freq = (unsigned int)v;
		else if (c == 's')
			o.seconds = (unsigned int)v;
		else
			o.reps = (unsigned int)v;
	}
	if (optind < argc)
		o.cmd = argv + optind;
	return 0;
}

int main(int argc, char **argv)
{
	static struct result res[NR_RUNGS][MAX_REPS];
	int stats_fd, r = 0, status;
	pid_t wl;

	if (parse_opts(argc, argv) < 0)
		return 2;
	if (geteuid() != 0) {
		bench_say("needs root (BPF programs on cpu-clock)");
		return 77;
	}
	bench_catch_signals();
	libbpf_set_print(NULL);
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0) {
		bench_say("BPF_ENABLE_STATS: %s", strerror(-stats_fd));
		return 1;
	}
	wl = start_workload();
	if (wl < 0) {
		bench_say("workload: %s", strerror(errno));
		return 1;
	}
	usleep(300000);
	printf("bench_bpf_floor: %u Hz per CPU, whole machine, %u s per rung and round, %u rounds\n",
	       o.freq, o.seconds, o.reps);
	for (unsigned int rep = 0; rep < o.reps && r >= 0; rep++)
		for (unsigned int g = 0; g < NR_RUNGS && r >= 0; g++) {
			r = run_rung(&rungs[g], &res[g][rep]);
			if (waitpid(wl, &status, WNOHANG) == wl) {
				bench_say("the workload ended early (status %d)", status);
				wl = -1;
				r = -ECHILD;
			}
		}
	if (wl > 0) {
		kill(wl, SIGTERM);
		waitpid(wl, NULL, 0);
	}
	close(stats_fd);
	if (r < 0) {
		bench_say("stopped: %s", strerror(-r));
		return 1;
	}

	printf("\n%-30s %5s", "rung", "copy");
	for (unsigned int rep = 0; rep < o.reps; rep++)
		printf("  round%-2u", rep + 1);
	printf(" %8s %8s %8s\n", "median", "runs", "records");
	for (unsigned int g = 0; g < NR_RUNGS; g++) {
		const struct result *last = &res[g][o.reps - 1];

		printf("%-30s %5u", rungs[g].name, rungs[g].copy);
		for (unsigned int rep = 0; rep < o.reps; rep++)
			printf(" %8.0f", res[g][rep].ns_per_run);
		printf(" %8.0f %8llu %8llu\n", median(res[g], o.reps),
		       (unsigned long long)last->runs, (unsigned long long)last->records);
		/* A rung that never ran, or a record rung whose records never
		 * arrived, measured nothing. */
		for (unsigned int rep = 0; rep < o.reps; rep++) {
			const struct result *x = &res[g][rep];

			if (!x->runs ||
			    (rungs[g].prog >= R_RINGBUF && (!x->records || !x->last_ok))) {
				bench_say(
					"%s, round %u: %llu runs, %llu records%s: nothing measured",
					rungs[g].name, rep + 1, (unsigned long long)x->runs,
					(unsigned long long)x->records,
					x->records && !x->last_ok ? " (last one empty)" : "");
				r = -EIO;
			}
		}
	}

	printf("\nprice of each part (differences of medians, ns per run)\n");
	for (unsigned int i = 0; i < ARRAY_SIZE(parts); i++) {
		double ns = median(res[parts[i].rung], o.reps);

		if (parts[i].less != NR_RUNGS)
			ns -= median(res[parts[i].less], o.reps);
		printf("  %-40s%8.0f\n", parts[i].what, ns);
	}
	return r < 0 ? 1 : 0;
}
