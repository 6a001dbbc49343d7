// SPDX-License-Identifier: MIT
/*
 * bench_export: how long `cpa show` takes, and how much memory, to export
 * 1 minute, 1 hour and 24 hours of a busy whole-machine store, per format
 * (docs/bench.md, "bench_export").
 *
 * 1. Generates the store (unless DIR already holds one): a day from local
 *    midnight of 2026-11-20, written through the real store writer
 *    (storer/store.h) as symd would feed it: --procs processes with a few
 *    threads each, --stacks distinct stacks (8..40 frames over 60 binaries and
 *    the kernel, shared roots, a skewed popularity), --rate samples a second
 *    spread over --cpus CPUs, one in ten off-CPU.
 * 2. Runs the real `build/bin/cpa show` for every window and format and
 *    reports its wall and CPU time and peak RSS (wait4's ru_maxrss).
 *    With --base CPA (another build's cpa, e.g. of an older commit) it runs
 *    that one too, on the same store and window, right before ours: CPU
 *    seconds side by side, their ratio, and whether the two files are the
 *    same bytes (pprof: its protobuf, gunzipped).
 *
 * Usage: bench_export [--dir DIR] [--hours H] [--rate N] [--stacks N] [--procs N]
 *                     [--cpus N] [--windows 60,3600,86400] [--formats folded,pprof,svg,speedscope]
 *                     [--base PATH_TO_CPA]
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "storer/store.h"

#define NS	   1000000000ull
#define NMODS	   60
#define NUFRAMES   8000
#define NKFRAMES   600
#define STR_FRAME0 1000
#define STR_PROC0  100000
#define MAX_DEPTH  40

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double unif(void)
{
	return (double)(next() >> 11) / (double)(1ull << 53);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void def_str(struct store_writer *w, uint32_t id, const char *s)
{
	struct cpa_str_def d = {.id = id, .len = (uint32_t)strlen(s)};

	store_writer__def_str(w, &d, s);
}

static int64_t day_start(void)
{
	struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 20, .tm_isdst = -1};

	return (int64_t)mktime(&tm);
}

static int generate(const char *dir, double hours, uint32_t rate, uint32_t nstacks, uint32_t nprocs,
		    uint32_t ncpus)
{
	struct store_writer_opts o = {
		.root = dir, .freq = 99, .record_interval = 1, .cpu_num = ncpus};
	struct store_writer_stats st;
	struct store_writer *w;
	uint32_t i, j, ids[MAX_DEPTH];
	char buf[256];
	uint64_t seq = 0, secs = (uint64_t)(hours * 3600), sec;
	int64_t t0 = day_start();
	double t = now_s();
	int r;

	r = store_writer__new(&o, &w);
	if (r < 0)
		return r;
	for (i = 1; i <= NMODS; i++) {
		struct {
			struct cpa_module_def m;
			char p[64];
		} m;

		memset(&m, 0, sizeof(m));
		snprintf(m.p, sizeof(m.p), "/usr/lib/x86_64-linux-gnu/libbench%u.so.1", i);
		m.m.id = i;
		m.m.kind = CPA_MOD_FILE;
		m.m.path_len = (uint32_t)strlen(m.p);
		m.m.build_id_len = 20;
		for (j = 0; j < 20; j++)
			m.m.build_id[j] = (uint8_t)(i * 31 + j);
		store_writer__def_module(w, &m.m, m.p);
	}
	for (i = 1; i <= NUFRAMES + NKFRAMES; i++) {
		struct cpa_frame_def f = {.id = i, .name_id = STR_FRAME0 + i};

		if (i <= NKFRAMES)
			snprintf(buf, sizeof(buf), "kfunc_%u", i);
		else
			snprintf(buf, sizeof(buf),
				 "app::module%u::Service%u::handle_%u(Request const&)", i % 97,
				 i % 13, i);
		def_str(w, STR_FRAME0 + i, buf);
		f.module_id = i <= NKFRAMES ? 0 : 1 + i % NMODS;
		f.flags = i <= NKFRAMES ? CPA_FF_KERNEL : 0;
		f.offset = i <= NKFRAMES ? 0xffffffff81000000ull + i * 64 : 0x1000 + i * 40;
		store_writer__def_frame(w, &f);
	}
	for (i = 1; i <= nprocs; i++) {
		snprintf(buf, sizeof(buf), "proc%u", i);
		def_str(w, STR_PROC0 + i, buf);
	}
	for (i = 1; i <= nstacks; i++) {
		uint32_t n = 8 + (uint32_t)(next() % (MAX_DEPTH - 8)), nk = (uint32_t)(next() % 6),
			 proc = i % nprocs;
		struct cpa_stack_def d = {
			.id = i, .n_frames = (uint16_t)n, .n_kframes = (uint16_t)nk};

		/* leaf first: kernel frames, then user frames whose roots are the
		 * process's own (main, its loop), like real programs */
		for (j = 0; j < n; j++) {
			uint32_t from_root = n - 1 - j;

			if (j < nk)
				ids[j] = 1 + (uint32_t)(next() % NKFRAMES);
			else if (from_root < 2)
				ids[j] = NKFRAMES + 1 + (proc * 2 + from_root) % NUFRAMES;
			else
				ids[j] = NKFRAMES + 1 + (uint32_t)(unif() * unif() * NUFRAMES);
		}
		store_writer__def_stack(w, &d, ids);
	}
	for (sec = 0; sec < secs; sec++) {
		for (i = 0; i < rate; i++) {
			/* skewed popularity: a few stacks hot, a long tail */
			uint32_t s = 1 + (uint32_t)(unif() * unif() * unif() * nstacks),
				 pid = s % nprocs;
			struct cpa_sample_out smp = {
				.seq = ++seq,
				.time_ns = (uint64_t)(t0 + (int64_t)sec) * NS +
					   (uint64_t)i * (NS / rate),
				.cgroup_id = 0x100000000ull + pid % 20,
				.weight = 1,
				.pid = 1000 + pid,
				.tid = 1000 + pid + (uint32_t)(next() % 4),
				.cpu = (uint32_t)(next() % ncpus),
				.kind = CPA_KIND_ONCPU,
				.stack_id = s,
				.comm_id = STR_PROC0 + 1 + pid,
				.pcomm_id = STR_PROC0 + 1 + pid,
			};

			if (next() % 10 == 0) {
				smp.kind = CPA_KIND_OFFCPU;
				smp.weight = 1000 + next() % 10000000;
			}
			r = store_writer__add_sample(w, &smp);
			if (r < 0)
				goto out;
		}
		if (sec % 600 == 599)
			store_writer__tick(w, (uint64_t)(t0 + (int64_t)sec + 30) * NS);
	}
	r = store_writer__flush(w, true);
	store_writer__stats(w, &st);
	printf("generated: %llu s of data, %llu samples, %u stacks, %u processes, %.1f s, %llu "
	       "bytes on disk (%.2f bytes/sample)\n",
	       (unsigned long long)secs, (unsigned long long)st.samples, nstacks, nprocs,
	       now_s() - t, (unsigned long long)st.bytes_disk,
	       (double)st.bytes_disk / (double)(st.samples ? st.samples : 1));
out:
	store_writer__free(w);
	return r;
}

static int run_show(const char *cpa, const char *dir, long secs, const char *fmt, const char *out,
		    double *ret_s, double *ret_cpu, long *ret_kb)
{
	char n[32];
	struct rusage ru;
	double t = now_s();
	int status;
	pid_t pid;

	snprintf(n, sizeof(n), "%ld", secs);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		freopen("/dev/null", "w", stdout);
		execl(cpa, cpa, "show", "--read", dir, "-B", "00:00:00", "-n", n, "--format", fmt,
		      "-o", out, (char *)NULL);
		_exit(127);
	}
	if (wait4(pid, &status, 0, &ru) != pid)
		return -errno;
	*ret_s = now_s() - t;
	*ret_cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		   (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	*ret_kb = ru.ru_maxrss;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* The two files hold the same bytes; gzip'd ones (pprof) once gunzipped: the
 * content, whatever level compressed it. */
static bool same_file(const char *a, const char *b)
{
	char ba[65536], bb[65536];
	bool same = false;
	gzFile fa = gzopen(a, "rb"), fb = gzopen(b, "rb");

	if (!fa || !fb)
		goto out;
	for (;;) {
		int na = gzread(fa, ba, sizeof(ba)), nb = gzread(fb, bb, sizeof(bb));

		if (na < 0 || na != nb || memcmp(ba, bb, (size_t)na))
			break;
		if (!na) {
			same = true;
			break;
		}
	}
out:
	if (fa)
		gzclose(fa);
	if (fb)
		gzclose(fb);
	return same;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"dir", required_argument, NULL, 'd'},
		{"hours", required_argument, NULL, 'h'},
		{"rate", required_argument, NULL, 'r'},
		{"stacks", required_argument, NULL, 's'},
		{"procs", required_argument, NULL, 'p'},
		{"cpus", required_argument, NULL, 'c'},
		{"windows", required_argument, NULL, 'w'},
		{"formats", required_argument, NULL, 'f'},
		{"base", required_argument, NULL, 'b'},
		{NULL, 0, NULL, 0},
	};
	const char *dir = "/tmp/cpa-bench-export", *windows = "60,3600,86400",
		   *formats = "folded,pprof,svg,speedscope", *base = NULL;
	double hours = 24;
	uint32_t rate = 800, nstacks = 20000, nprocs = 400, ncpus = 8;
	char cpa[4200], out[4200], bout[4200], exe[4096], wl[256], fl[256], *w, *f, *sw, *sf;
	ssize_t n;
	int c, r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			dir = optarg;
			break;
		case 'h':
			hours = atof(optarg);
			break;
		case 'r':
			rate = (uint32_t)atoi(optarg);
			break;
		case 's':
			nstacks = (uint32_t)atoi(optarg);
			break;
		case 'p':
			nprocs = (uint32_t)atoi(optarg);
			break;
		case 'c':
			ncpus = (uint32_t)atoi(optarg);
			break;
		case 'w':
			windows = optarg;
			break;
		case 'f':
			formats = optarg;
			break;
		case 'b':
			base = optarg;
			break;
		default:
			fprintf(stderr, "usage: bench_export [--dir DIR] [--hours H] [--rate N] "
					"[--stacks N] [--procs N] [--cpus N] [--windows LIST] "
					"[--formats LIST] [--base CPA]\n");
			return 2;
		}
	}
	if (hours <= 0 || hours > 24 || !rate || !nstacks || !nprocs || !ncpus) {
		fprintf(stderr, "bench_export: bad values (hours in (0, 24], counts > 0)\n");
		return 2;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 1;
	exe[n] = 0; /* bench_export sits next to cpa in build/bin */
	*strrchr(exe, '/') = 0;
	snprintf(cpa, sizeof(cpa), "%s/cpa", exe);
	setenv("TZ", "UTC", 0);
	tzset();
	if (access(dir, F_OK) != 0) {
		mkdir(dir, 0755);
		r = generate(dir, hours, rate, nstacks, nprocs, ncpus);
		if (r < 0) {
			fprintf(stderr, "generate: %s\n", strerror(-r));
			return 1;
		}
	} else {
		printf("reusing the store in %s (remove it to generate a new one)\n", dir);
	}
	if (base)
		printf("\n%-10s %-11s %10s %10s %8s %10s %10s %8s %12s %12s\n", "window", "format",
		       "base_cpu_s", "cpu_s", "ratio", "base_rss", "rss_MB", "same", "wall_s",
		       "file_MB");
	else
		printf("\n%-10s %-11s %10s %10s %12s %12s\n", "window", "format", "wall_s", "cpu_s",
		       "peak_rss_MB", "file_MB");
	snprintf(wl, sizeof(wl), "%s", windows);
	for (w = strtok_r(wl, ",", &sw); w; w = strtok_r(NULL, ",", &sw)) {
		snprintf(fl, sizeof(fl), "%s", formats);
		for (f = strtok_r(fl, ",", &sf); f; f = strtok_r(NULL, ",", &sf)) {
			struct stat stt;
			double s = 0, cpu = 0, bs = 0, bcpu = 0;
			long kb = 0, bkb = 0;

			snprintf(out, sizeof(out), "%s.out.%s", dir, f);
			snprintf(bout, sizeof(bout), "%s.base.%s", dir, f);
			if (base && run_show(base, dir, atol(w), f, bout, &bs, &bcpu, &bkb) < 0) {
				printf("%-10s %-11s base failed\n", w, f);
				continue;
			}
			r = run_show(cpa, dir, atol(w), f, out, &s, &cpu, &kb);
			if (r < 0) {
				printf("%-10s %-11s failed\n", w, f);
				continue;
			}
			stat(out, &stt);
			if (base)
				printf("%-10s %-11s %10.2f %10.2f %8.1f %10.1f %10.1f %8s %12.2f "
				       "%12.2f\n",
				       w, f, bcpu, cpu, cpu > 0 ? bcpu / cpu : 0, bkb / 1024.0,
				       kb / 1024.0, same_file(out, bout) ? "yes" : "NO", s,
				       (double)stt.st_size / 1048576.0);
			else
				printf("%-10s %-11s %10.2f %10.2f %12.1f %12.2f\n", w, f, s, cpu,
				       kb / 1024.0, (double)stt.st_size / 1048576.0);
			unlink(out);
			unlink(bout);
		}
	}
	return 0;
}
