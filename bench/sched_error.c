// SPDX-License-Identifier: MIT
/*
 * bench_sched_error: the scheduler metrics' three ways side by side on the
 * same host and the same seconds (docs/metrics.md "Error of the task counters",
 * "Error of the sampled way"). One copy of bpf/sched.bpf.c with all on: the
 * per-switch programs (--sched_metrics=full, exact), the task iterator (the
 * default, run here once a second as capture runs it) and the sampled programs
 * (--sched_metrics=sampled:N). Each second the three per-process maps are
 * taken; per process and second that ran, the counters' and the sampled
 * figures are compared with the exact ones, and the sampled histograms'
 * quantiles with the exact histograms'. Meanwhile a switch-heavy workload runs
 * (cpa-wl-offcpu --pingpong next to this binary, or the command after --),
 * beside whatever else the machine runs. Root + BTF.
 *
 *   bench_sched_error [--seconds S] [--sample N] [-- COMMAND ARGS...]
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "benchutil.h"
#include "bpf/sched.h"
#include "sched.skel.h"
#include "shm/records.h"

#define MAXP 4096

struct take {
	uint32_t keys[MAXP];
	struct cpa_sched_val vals[MAXP];
	unsigned int n;
};

static void take(int fd, struct take *t)
{
	uint32_t k, *prev = NULL;
	unsigned int nk = 0;

	t->n = 0;
	while (nk < MAXP && bpf_map_get_next_key(fd, prev, &k) == 0) {
		t->keys[nk] = k;
		prev = &t->keys[nk++];
	}
	for (unsigned int i = 0; i < nk; i++)
		if (bpf_map_lookup_and_delete_elem(fd, &t->keys[i], &t->vals[t->n]) == 0)
			t->keys[t->n++] = t->keys[i];
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int iter_pass(struct sched_bpf *skel, uint64_t *since)
{
	uint64_t start = mono_ns();
	char buf[64];
	int fd;

	skel->bss->sched_since_ns = *since;
	fd = bpf_iter_create(bpf_link__fd(skel->links.cpa_sched_iter));
	if (fd < 0)
		return -errno;
	while (read(fd, buf, sizeof(buf)) > 0)
		;
	close(fd);
	*since = start;
	return 0;
}

enum { F_ONCPU, F_RUNQ, F_WAITS, F_PREEMPT, F_VOL, F_MAX };
static const char *const fname[F_MAX] = {"on-CPU time", "run-queue delay", "waits (times on CPU)",
					 "involuntary switches", "voluntary switches"};

static double field(const struct cpa_sched_val *v, int f)
{
	switch (f) {
	case F_ONCPU:
		return (double)v->oncpu_ns;
	case F_RUNQ:
		return (double)v->runq_ns;
	case F_WAITS:
		return (double)v->runq_n;
	case F_PREEMPT:
		return (double)v->switches[CPA_SCHED_PREEMPT];
	default:
		return (double)(v->switches[CPA_SCHED_SLEEP] + v->switches[CPA_SCHED_IOWAIT]);
	}
}

/* per field: sums over every (process, second) both saw, |diff| sums, the
 * relative errors of the (process, second) pairs with a real count */
struct acc {
	double exact, other, absdiff;
	double missed; /* exact's figures of the processes the other way missed */
	double extra;  /* the other way's figures of processes exact did not see */
	double *rel;
	size_t n, cap;
	double wl_exact, wl_other; /* the workload's process, whole run */
};

struct way {
	const char *name;
	struct acc a[F_MAX];
	unsigned int pairs, only_exact, only_other;
};

static int rel_add(double **v, size_t *n, size_t *cap, double x)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 1024;
		*v = realloc(*v, *cap * sizeof(double));
		if (!*v)
			return -1;
	}
	(*v)[(*n)++] = x;
	return 0;
}

static int find(const struct take *t, uint32_t key)
{
	for (unsigned int j = 0; j < t->n; j++)
		if (t->keys[j] == key)
			return (int)j;
	return -1;
}

/* One second: every process of ex against the same process of ot. */
static int compare(struct way *w, const struct take *ex, const struct take *ot, pid_t child)
{
	for (unsigned int i = 0; i < ex->n; i++) {
		int j = find(ot, ex->keys[i]);

		if (j < 0) {
			/* counters: gone before the pass; sampled: no event sampled */
			w->only_exact++;
			for (int f = 0; f < F_MAX; f++)
				w->a[f].missed += field(&ex->vals[i], f);
			continue;
		}
		w->pairs++;
		for (int f = 0; f < F_MAX; f++) {
			double e = field(&ex->vals[i], f), c = field(&ot->vals[j], f);
			struct acc *x = &w->a[f];

			x->exact += e;
			x->other += c;
			x->absdiff += fabs(c - e);
			if ((pid_t)ex->keys[i] == child) {
				x->wl_exact += e;
				x->wl_other += c;
			}
			/* a real count: 20+ events, or 1+ ms */
			if (e < (f == F_ONCPU || f == F_RUNQ ? 1e6 : 20))
				continue;
			if (rel_add(&x->rel, &x->n, &x->cap, fabs(c - e) / e * 100) < 0)
				return -1;
		}
	}
	for (unsigned int j = 0; j < ot->n; j++)
		if (find(ex, ot->keys[j]) < 0) {
			w->only_other++;
			for (int f = 0; f < F_MAX; f++)
				w->a[f].extra += field(&ot->vals[j], f);
		}
	return 0;
}

static void way_print(struct way *w, unsigned int secs)
{
	printf("\n=== scheduler metrics: %s vs per-switch programs, %u s, %u (process, second) "
	       "pairs; only exact %u, only %s %u ===\n",
	       w->name, secs, w->pairs, w->only_exact, w->name, w->only_other);
	printf("  %-22s %14s %14s %8s %9s %9s %9s %14s %9s %9s\n", "field", "sum exact",
	       "sum other", "ratio", "|diff|%", "p50 err%", "p90 err%", "workload ratio",
	       "missed %", "all ratio");
	for (int f = 0; f < F_MAX; f++) {
		struct acc *x = &w->a[f];
		double p50 = NAN, p90 = NAN;

		if (x->n) {
			qsort(x->rel, x->n, sizeof(double), bench_cmp_double);
			p50 = x->rel[x->n / 2];
			p90 = x->rel[x->n * 9 / 10];
		}
		printf("  %-22s %14.0f %14.0f %8.3f %9.1f %9.1f %9.1f %14.3f %9.2f %9.3f\n",
		       fname[f], x->exact, x->other, x->exact ? x->other / x->exact : NAN,
		       x->exact ? 100 * x->absdiff / x->exact : NAN, p50, p90,
		       x->wl_exact ? x->wl_other / x->wl_exact : NAN,
		       100 * x->missed / (x->exact + x->missed),
		       x->exact + x->missed ? (x->other + x->extra) / (x->exact + x->missed) : NAN);
		free(x->rel);
	}
}

/*
 * The histograms' quantiles, exact against sampled: summed over every process
 * and second (all), the workload's process over the run, and per (process,
 * second) with 200+ exact events the relative error of each quantile.
 */
enum { H_RQ50, H_RQ99, H_SL50, H_SL99, H_MAX };
static const char *const hname[H_MAX] = {"run-queue P50", "run-queue P99", "slice P50",
					 "slice P99"};

struct hacc {
	uint32_t all[2][2][CPA_SCHED_HIST]; /* [exact, sampled][runq, slice] */
	uint32_t wl[2][2][CPA_SCHED_HIST];
	double *rel[H_MAX];
	size_t n[H_MAX], cap[H_MAX];
	unsigned int missing[H_MAX]; /* pairs where sampled had no sample at all */
};

static double hq(const uint32_t *h, int k)
{
	return cpa_metrics_hist_quantile(h, k == H_RQ50 || k == H_SL50 ? 0.5 : 0.99);
}

static const uint32_t *hist_of(const struct cpa_sched_val *v, int k)
{
	return k == H_RQ50 || k == H_RQ99 ? v->runq_hist : v->slice_hist;
}

static void hist_sum(uint32_t d[2][CPA_SCHED_HIST], const struct cpa_sched_val *v)
{
	for (int b = 0; b < CPA_SCHED_HIST; b++) {
		d[0][b] += v->runq_hist[b];
		d[1][b] += v->slice_hist[b];
	}
}

static int hcompare(struct hacc *h, const struct take *ex, const struct take *sa, pid_t child)
{
	for (unsigned int i = 0; i < ex->n; i++) {
		const struct cpa_sched_val *e = &ex->vals[i], *s;
		int j = find(sa, ex->keys[i]);

		hist_sum(h->all[0], e);
		if ((pid_t)ex->keys[i] == child)
			hist_sum(h->wl[0], e);
		if (j < 0)
			continue;
		s = &sa->vals[j];
		hist_sum(h->all[1], s);
		if ((pid_t)ex->keys[i] == child)
			hist_sum(h->wl[1], s);
		for (int k = 0; k < H_MAX; k++) {
			uint64_t n = k < H_SL50 ? e->runq_n : e->slices;
			double qe = hq(hist_of(e, k), k), qs = hq(hist_of(s, k), k);

			if (n < 200 || !qe)
				continue;
			if (!qs) {
				h->missing[k]++;
				continue;
			}
			if (rel_add(&h->rel[k], &h->n[k], &h->cap[k], fabs(qs - qe) / qe * 100) < 0)
				return -1;
		}
	}
	/* processes only the sampled way saw add to its sums */
	for (unsigned int j = 0; j < sa->n; j++)
		if (find(ex, sa->keys[j]) < 0) {
			hist_sum(h->all[1], &sa->vals[j]);
			if ((pid_t)sa->keys[j] == child)
				hist_sum(h->wl[1], &sa->vals[j]);
		}
	return 0;
}

static void hprint(struct hacc *h, unsigned int n_sample)
{
	printf("\n=== histograms: sampled (1 in %u, weighted) vs per-switch programs; per (process, "
	       "second) with 200+ exact events ===\n",
	       n_sample);
	printf("  %-14s %11s %11s %7s %11s %11s %7s %7s %9s %9s %8s\n", "quantile", "all exact",
	       "all sampled", "ratio", "wl exact", "wl sampled", "ratio", "pairs", "p50 err%",
	       "p90 err%", "no samp");
	for (int k = 0; k < H_MAX; k++) {
		int r = k < H_SL50 ? 0 : 1;
		double ae = hq(h->all[0][r], k) / 1e3, as = hq(h->all[1][r], k) / 1e3;
		double we = hq(h->wl[0][r], k) / 1e3, ws = hq(h->wl[1][r], k) / 1e3;
		double p50 = NAN, p90 = NAN;

		if (h->n[k]) {
			qsort(h->rel[k], h->n[k], sizeof(double), bench_cmp_double);
			p50 = h->rel[k][h->n[k] / 2];
			p90 = h->rel[k][h->n[k] * 9 / 10];
		}
		printf("  %-14s %11.1f %11.1f %7.3f %11.1f %11.1f %7.3f %7zu %9.1f %9.1f %8u\n",
		       hname[k], ae, as, ae ? as / ae : NAN, we, ws, we ? ws / we : NAN, h->n[k],
		       p50, p90, h->missing[k]);
		free(h->rel[k]);
	}
	printf("  (quantiles in us, log2 buckets interpolated as cpa show --sched does)\n");
}

int main(int argc, char **argv)
{
	static struct take ex, ch, sa;
	static struct way cw = {.name = "counters"}, sw = {.name = "sampled"};
	static struct hacc h;
	unsigned int secs = 10, n_sample = 16;
	char self[PATH_MAX], wl[PATH_MAX + 32], secstr[16];
	char *def[] = {wl, "--pingpong", "--no-wait", "--seconds", secstr, NULL};
	char **cmd = def;
	struct sched_bpf *skel;
	uint64_t since = 0;
	pid_t child;
	ssize_t l;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seconds") && i + 1 < argc) {
			secs = (unsigned int)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--sample") && i + 1 < argc) {
			n_sample = (unsigned int)atoi(argv[++i]);
		} else if (!strcmp(argv[i], "--") && i + 1 < argc) {
			cmd = &argv[i + 1];
			break;
		} else {
			fprintf(stderr,
				"usage: %s [--seconds S] [--sample N] [-- COMMAND ARGS...]\n",
				argv[0]);
			return 2;
		}
	}
	if (n_sample < 2)
		n_sample = 2;
	l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (l <= 0)
		return 1;
	self[l] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(wl, sizeof(wl), "%s/cpa-wl-offcpu", self);
	snprintf(secstr, sizeof(secstr), "%u", secs + 2);

	skel = sched_bpf__open();
	if (skel) {
		skel->rodata->sched_sample_n = n_sample;
		/* the counters' pass here is cpa_sched_iter (iter_pass()) */
		bpf_program__set_autoload(skel->progs.cpa_sched_walk, false);
	}
	if (!skel || sched_bpf__load(skel) < 0 || sched_bpf__attach(skel) < 0) {
		fprintf(stderr, "load/attach bpf/sched.bpf.c: %s (root and BTF needed)\n",
			strerror(errno));
		return 77;
	}
	child = fork();
	if (child == 0) {
		int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		dup2(fd, 1);
		execv(cmd[0], cmd);
		_exit(127);
	}
	sleep(1);
	iter_pass(skel, &since); /* the baseline */
	take(bpf_map__fd(skel->maps.sched_procs), &ex);
	take(bpf_map__fd(skel->maps.sched_sprocs), &sa);
	for (unsigned int s = 0; s < secs; s++) {
		sleep(1);
		iter_pass(skel, &since);
		take(bpf_map__fd(skel->maps.sched_procs), &ex);
		take(bpf_map__fd(skel->maps.sched_sprocs), &sa);
		take(bpf_map__fd(skel->maps.sched_iprocs), &ch);
		if (compare(&cw, &ex, &ch, child) < 0 || compare(&sw, &ex, &sa, child) < 0 ||
		    hcompare(&h, &ex, &sa, child) < 0)
			return 1;
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	sched_bpf__destroy(skel);

	way_print(&cw, secs);
	way_print(&sw, secs);
	hprint(&h, n_sample);
	return 0;
}
