// SPDX-License-Identifier: MIT
/*
 * bench_sched_error: the scheduler metrics' two ways side by side on the same
 * host and the same seconds (docs/metrics.md "Error of the task counters").
 * One copy of bpf/sched.bpf.c with both ways on: the per-switch programs
 * (--sched_metrics=full, exact) and the task iterator (the default, run here
 * once a second as capture runs it). Each second both per-process maps are
 * taken; per process and second that ran, the counters' figures are compared
 * with the exact ones. Meanwhile a switch-heavy workload runs (cpa-wl-offcpu
 * --pingpong next to this binary, or the command after --), beside whatever
 * else the machine runs. Root + BTF.
 *
 *   bench_sched_error [--seconds S] [-- COMMAND ARGS...]
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
	double exact, cheap, absdiff;
	double missed; /* exact's figures of the processes the counters missed */
	double *rel;
	size_t n, cap;
	double wl_exact, wl_cheap; /* the workload's process, whole run */
};

int main(int argc, char **argv)
{
	static struct take ex, ch;
	static struct acc a[F_MAX];
	unsigned int secs = 10, only_exact = 0, only_cheap = 0, pairs = 0;
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
		} else if (!strcmp(argv[i], "--") && i + 1 < argc) {
			cmd = &argv[i + 1];
			break;
		} else {
			fprintf(stderr, "usage: %s [--seconds S] [-- COMMAND ARGS...]\n", argv[0]);
			return 2;
		}
	}
	l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (l <= 0)
		return 1;
	self[l] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(wl, sizeof(wl), "%s/cpa-wl-offcpu", self);
	snprintf(secstr, sizeof(secstr), "%u", secs + 2);

	skel = sched_bpf__open_and_load();
	if (!skel || sched_bpf__attach(skel) < 0) {
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
	for (unsigned int s = 0; s < secs; s++) {
		sleep(1);
		iter_pass(skel, &since);
		take(bpf_map__fd(skel->maps.sched_procs), &ex);
		take(bpf_map__fd(skel->maps.sched_iprocs), &ch);
		for (unsigned int i = 0; i < ex.n; i++) {
			unsigned int j;

			for (j = 0; j < ch.n && ch.keys[j] != ex.keys[i]; j++)
				;
			if (j == ch.n) {
				/* gone before the pass: exited within the second */
				only_exact++;
				for (int f = 0; f < F_MAX; f++)
					a[f].missed += field(&ex.vals[i], f);
				continue;
			}
			pairs++;
			for (int f = 0; f < F_MAX; f++) {
				double e = field(&ex.vals[i], f), c = field(&ch.vals[j], f);
				struct acc *x = &a[f];

				x->exact += e;
				x->cheap += c;
				x->absdiff += fabs(c - e);
				if ((pid_t)ex.keys[i] == child) {
					x->wl_exact += e;
					x->wl_cheap += c;
				}
				/* a real count: 20+ events, or 1+ ms */
				if (e < (f == F_ONCPU || f == F_RUNQ ? 1e6 : 20))
					continue;
				if (x->n == x->cap) {
					x->cap = x->cap ? 2 * x->cap : 1024;
					x->rel = realloc(x->rel, x->cap * sizeof(double));
					if (!x->rel)
						return 1;
				}
				x->rel[x->n++] = fabs(c - e) / e * 100;
			}
		}
		for (unsigned int j = 0; j < ch.n; j++) {
			unsigned int i;

			for (i = 0; i < ex.n && ex.keys[i] != ch.keys[j]; i++)
				;
			only_cheap += i == ex.n;
		}
	}
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	sched_bpf__destroy(skel);

	printf("=== scheduler metrics: task counters vs per-switch programs, %u s, %u "
	       "(process, second) pairs; only exact %u, only counters %u ===\n",
	       secs, pairs, only_exact, only_cheap);
	printf("  %-22s %14s %14s %8s %9s %9s %9s %14s %9s\n", "field", "sum exact", "sum counters",
	       "ratio", "|diff|%", "p50 err%", "p90 err%", "workload ratio", "missed %");
	for (int f = 0; f < F_MAX; f++) {
		struct acc *x = &a[f];
		double p50 = NAN, p90 = NAN;

		if (x->n) {
			qsort(x->rel, x->n, sizeof(double), bench_cmp_double);
			p50 = x->rel[x->n / 2];
			p90 = x->rel[x->n * 9 / 10];
		}
		printf("  %-22s %14.0f %14.0f %8.3f %9.1f %9.1f %9.1f %14.3f %9.2f\n", fname[f],
		       x->exact, x->cheap, x->exact ? x->cheap / x->exact : NAN,
		       x->exact ? 100 * x->absdiff / x->exact : NAN, p50, p90,
		       x->wl_exact ? x->wl_cheap / x->wl_exact : NAN,
		       100 * x->missed / (x->exact + x->missed));
		free(x->rel);
	}
	return 0;
}
