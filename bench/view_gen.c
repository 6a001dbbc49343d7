// SPDX-License-Identifier: MIT
/*
 * bench_view_gen: a realistic whole-machine store for bench_view, written
 * through the real store writer (bench/vgen.h).
 *
 *   bench_view_gen --out DIR [--hours 24] [--cpus 8] [--hz 49] [--procs 200]
 *                  [--stacks 12000] [--seed 1]
 *
 * Processes with 1..8 threads each own a share of the distinct stacks (8..40
 * frames: libc start, main, a service's layers from a pool of ~3000
 * functions with C++-sized names, libc or kernel leaves); stack popularity
 * is Zipf-like; the load follows a day curve (30%..90% of the CPUs busy);
 * one sample in five is off-CPU (schedule in the kernel, weight in ns);
 * a loss record every 10 minutes.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/timeutil.h"
#include "bench/vgen.h"

struct gen_opts {
	const char *out;
	double hours;
	uint32_t cpus, hz, procs, stacks, seed;
};

static uint64_t rng(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 17;
}

static void stack_text(const struct gen_opts *o, uint32_t s, char *buf, size_t len)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL * (s + 1);
	uint32_t p = s % o->procs, depth = 8 + (uint32_t)(h >> 7) % 33, i;
	size_t n = 0;
	bool off = s % 5 == 0, sys = s % 3 == 0;

	n += (size_t)snprintf(buf + n, len - n, "_start;libc_start_main;main;svc%u::Server::run()",
			      p);
	for (i = 4; i < depth && n + 200 < len; i++) {
		uint64_t x = (h ^ (i * 0xff51afd7ed558ccdULL)) >> (i % 13);
		/* shared pool of functions: callers near the root are shared more */
		uint32_t fn = (uint32_t)(x % (i < 8 ? 60 : 3000));

		n += (size_t)snprintf(
			buf + n, len - n,
			";svc%u::Component%u::handle_event_%u(std::shared_ptr<Event> const&, Context&)",
			fn % 40, fn % 97, fn);
	}
	if (off)
		snprintf(
			buf + n, len - n,
			";libc_read;entry_SYSCALL_64_[k];__x64_sys_read_[k];vfs_read_[k];schedule_[k];__schedule_[k]");
	else if (sys)
		snprintf(buf + n, len - n,
			 ";libc_write;entry_SYSCALL_64_[k];__x64_sys_write_[k];ksys_write_[k]");
	else
		snprintf(buf + n, len - n, ";libc_memcpy");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{"out", required_argument, NULL, 'o'},	 {"hours", required_argument, NULL, 'H'},
		{"cpus", required_argument, NULL, 'c'},	 {"hz", required_argument, NULL, 'z'},
		{"procs", required_argument, NULL, 'p'}, {"stacks", required_argument, NULL, 's'},
		{"seed", required_argument, NULL, 'r'},	 {NULL, 0, NULL, 0},
	};
	struct gen_opts o = {
		.hours = 24, .cpus = 8, .hz = 49, .procs = 200, .stacks = 12000, .seed = 1};
	struct vgen *g = calloc(1, sizeof(*g));
	uint32_t *stack_ids, *comm, i;
	double *cdf, sum = 0;
	uint64_t seed, base, nsec, sec, total = 0;
	char *buf = malloc(16384);
	int c;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'o':
			o.out = optarg;
			break;
		case 'H':
			o.hours = atof(optarg);
			break;
		case 'c':
			o.cpus = (uint32_t)atoi(optarg);
			break;
		case 'z':
			o.hz = (uint32_t)atoi(optarg);
			break;
		case 'p':
			o.procs = (uint32_t)atoi(optarg);
			break;
		case 's':
			o.stacks = (uint32_t)atoi(optarg);
			break;
		case 'r':
			o.seed = (uint32_t)atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: bench_view_gen --out DIR [--hours H] [--cpus N] "
					"[--hz N] [--procs N] [--stacks N] [--seed N]\n");
			return 2;
		}
	}
	if (!o.out || o.hours <= 0 || !o.cpus || !o.hz || !o.procs || o.stacks < o.procs) {
		fprintf(stderr, "bench_view_gen: --out DIR required; sizes must be > 0\n");
		return 2;
	}
	stack_ids = calloc(o.stacks, sizeof(*stack_ids));
	comm = calloc(o.procs, sizeof(*comm));
	cdf = calloc(o.stacks, sizeof(*cdf));
	if (!g || !buf || !stack_ids || !comm || !cdf || vgen_open(g, o.out, o.cpus) < 0) {
		fprintf(stderr, "bench_view_gen: cannot open a store writer under %s\n", o.out);
		return 1;
	}
	for (i = 0; i < o.procs; i++) {
		snprintf(buf, 64, "svc%u", i);
		comm[i] = vgen_str(g, buf);
	}
	for (i = 0; i < o.stacks; i++) {
		stack_text(&o, i, buf, 16384);
		stack_ids[i] = vgen_stack(g, buf);
		sum += 1.0 / pow(i + 1.0, 1.05);
		cdf[i] = sum;
	}
	/* whole days: start at local midnight of 2026-11-20 */
	{
		struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 20, .tm_isdst = -1};

		base = (uint64_t)mktime(&tm) * NSEC_PER_SEC;
	}
	seed = o.seed;
	nsec = (uint64_t)(o.hours * 3600);
	for (sec = 0; sec < nsec; sec++) {
		double day = (double)(sec % 86400) / 86400.0;
		double busy = 0.6 - 0.3 * cos(2 * M_PI * day);
		uint32_t n = (uint32_t)(busy * o.cpus * o.hz), k;

		for (k = 0; k < n; k++) {
			double u = (double)(rng(&seed) % 1000000) / 1000000.0 * sum;
			uint32_t lo_i = 0, hi_i = o.stacks - 1, s, p;

			while (lo_i < hi_i) {
				uint32_t mid = (lo_i + hi_i) / 2;

				if (cdf[mid] < u)
					lo_i = mid + 1;
				else
					hi_i = mid;
			}
			s = lo_i;
			p = s % o.procs;
			vgen_sample(
				g,
				base + sec * NSEC_PER_SEC + (uint64_t)k * (NSEC_PER_SEC / (n + 1)),
				stack_ids[s], 1000 + p,
				1000 + p + (uint32_t)(rng(&seed) % (1 + p % 8)),
				(uint32_t)(rng(&seed) % o.cpus),
				s % 5 == 0 ? CPA_KIND_OFFCPU : CPA_KIND_ONCPU,
				s % 5 == 0 ? 1000 + rng(&seed) % 10000000 : 1, comm[p], comm[p]);
			total++;
		}
		if (sec % 600 == 300)
			vgen_loss(g, base + sec * NSEC_PER_SEC + NSEC_PER_SEC / 2, 25);
		if (sec % 3600 == 3599)
			fprintf(stderr, "\r%.0f%%", 100.0 * (double)sec / (double)nsec);
	}
	vgen_close(g);
	printf("\nsamples %llu, seconds %llu, distinct stacks %u, processes %u\n",
	       (unsigned long long)total, (unsigned long long)nsec, o.stacks, o.procs);
	free(cdf);
	free(comm);
	free(stack_ids);
	free(buf);
	free(g);
	return 0;
}
