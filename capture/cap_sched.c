// SPDX-License-Identifier: MIT
#include "cap_sched.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/sched.h"
#include "cap_bpf.h"
#include "cap_sys.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "sched.skel.h"
#include "shm/config.h"
#include "shm/counters.h"
#include "shm/records.h"

_Static_assert(CPA_SCHED_HIST == CPA_METRICS_HIST, "histogram sizes");
_Static_assert((int)CPA_SCHED_REASON_MAX == (int)CPA_MR_MAX, "switch reasons");
_Static_assert(CPA_SCHED_COMM_LEN == CPA_COMM_LEN, "comm length");
/* An mmapped array's slots are the value size rounded up to 8 bytes. */
_Static_assert(sizeof(struct cpa_sched_val) % 8 == 0, "per-CPU slot stride");

enum { HW_CYCLES, HW_INSTR, HW_CMISS, HW_MAX };

/* The system files read every second: opened once, read again from 0. */
enum proc_file { PROC_PSI = 0, PROC_LOADAVG = CPA_PSI_MAX, PROC_STAT, PROC_FILE_MAX };

static const char *const proc_path[PROC_FILE_MAX] = {
	[PROC_PSI + CPA_PSI_CPU] = "/proc/pressure/cpu",
	[PROC_PSI + CPA_PSI_IO] = "/proc/pressure/io",
	[PROC_PSI + CPA_PSI_MEM] = "/proc/pressure/memory",
	[PROC_LOADAVG] = "/proc/loadavg",
	[PROC_STAT] = "/proc/stat",
};

struct cap_sched {
	struct sched_bpf *skel;
	bool exact;		/* the per-event programs; else the task iterator */
	bool walk;		/* ... as cpa_sched_walk (BPF_PROG_TEST_RUN), else cpa_sched_iter */
	unsigned int sample;	/* the sampled programs, 1 in sample events (not exact) */
	uint64_t iter_start_ns; /* CLOCK_MONOTONIC at the start of the last pass */
	unsigned int nr_cpus;	/* slots of the per-CPU array read */
	int nr_possible;
	struct cpa_sched_val *cpu_prev, *cpu_now;
	const struct cpa_sched_val *cpu_map; /* the way's per-CPU array, mmapped (NULL: none) */
	size_t cpu_map_len;
	uint32_t *keys;		    /* this second's processes: */
	struct cpa_sched_val *vals; /* their values */
	uint64_t *order;	    /* key << 32 | index: the processes in pid order */
	bool batch_ok;		    /* the kernel takes batch lookups */
	int proc_fd[PROC_FILE_MAX]; /* kept open, read again from 0; -1: none (no PSI) */
	struct policy_proc *pprocs; /* this second's processes for the policies */
	uint64_t last_real_ns;
	/* /proc/stat "cpu" line: busy, iowait, idle ticks as last read */
	uint64_t stat_prev[3];
	bool stat_ok;
	uint64_t psi_prev[CPA_PSI_MAX][2]; /* some, full totals (us) */
	bool psi_ok[CPA_PSI_MAX][2];
	int *hw_fd; /* [cpu * HW_MAX + event], -1 = none; NULL = not available */
	uint64_t hw_prev[HW_MAX];
	uint64_t dropped_prev;
	char *buf; /* PROC_BUF bytes: read_proc() */
};

static bool libbpf_quiet; /* a load that may fail and has a fallback */

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (level == LIBBPF_DEBUG || libbpf_quiet)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

/* An open+read+close per file and second was 25 syscalls a second: the fd
 * stays open (cap_sched__open()) and is read with one pread from 0, which
 * makes procfs produce the text anew. One, not a read to the end: the pread
 * that finds the end makes procfs produce the whole text once more. These
 * files fit in PROC_BUF; of /proc/stat only the cpu lines at its head are
 * used (what is past PROC_BUF, the interrupt counts, is not read). */
#define PROC_BUF (64u << 10)

static const char *read_proc(struct cap_sched *s, enum proc_file f)
{
	ssize_t n;

	if (s->proc_fd[f] < 0)
		return NULL;
	if (!s->buf) {
		s->buf = malloc(PROC_BUF);
		if (!s->buf)
			return NULL;
	}
	do
		n = pread(s->proc_fd[f], s->buf, PROC_BUF - 1, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return NULL;
	s->buf[n] = '\0';
	return s->buf;
}

/* Up to n decimal numbers from p on, blank-separated, as sscanf's "%llu"s
 * take them without its format parsing; how many. */
static int u64s_parse(const char *p, unsigned long long *v, int n)
{
	char *end;
	int i;

	for (i = 0; i < n; i++, p = end) {
		while (*p == ' ')
			p++;
		if (*p < '0' || *p > '9')
			break;
		v[i] = strtoull(p, &end, 10);
	}
	return i;
}

static bool stat_read(struct cap_sched *s, uint64_t ret[3], uint32_t *ret_cpus)
{
	unsigned long long v[10] = {0};
	const char *p = read_proc(s, PROC_STAT);
	uint32_t n = 0;

	if (!p || strncmp(p, "cpu ", 4) != 0 || u64s_parse(p + 4, v, 10) < 5)
		return false;
	/* guest and guest_nice are already inside user and nice */
	ret[0] = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	ret[1] = v[4];
	ret[2] = v[3];
	while ((p = strstr(p + 1, "\ncpu")) != NULL)
		if (p[4] >= '0' && p[4] <= '9')
			n++;
	*ret_cpus = n;
	return true;
}

/* "some avg10=.. total=N\nfull ... total=N": the two totals (us). */
static void psi_read(struct cap_sched *s, unsigned int i, uint64_t ret[2], bool ok[2])
{
	const char *p = read_proc(s, PROC_PSI + i);
	static const char *const line[2] = {"some ", "full "};

	for (unsigned int j = 0; j < 2; j++) {
		const char *l = p ? strstr(p, line[j]) : NULL;
		const char *t = l ? strstr(l, "total=") : NULL;

		ok[j] = t != NULL;
		ret[j] = t ? strtoull(t + 6, NULL, 10) : 0;
	}
}

static void hw_open(struct cap_sched *s)
{
	static const uint64_t cfg[HW_MAX] = {PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_HW_INSTRUCTIONS,
					     PERF_COUNT_HW_CACHE_MISSES};
	unsigned int cpus[CAP_MAX_CPUS];
	int n = cap_sys_online_cpus(cpus, CAP_MAX_CPUS), err = 0;

	if (n <= 0)
		return;
	s->hw_fd = malloc(sizeof(int) * (size_t)n * HW_MAX + sizeof(int));
	if (!s->hw_fd)
		return;
	for (int c = 0; c < n; c++)
		for (int k = 0; k < HW_MAX; k++) {
			struct perf_event_attr a = {
				.type = PERF_TYPE_HARDWARE,
				.size = sizeof(a),
				.config = cfg[k],
			};
			int fd = (int)syscall(__NR_perf_event_open, &a, -1, (int)cpus[c], -1,
					      PERF_FLAG_FD_CLOEXEC);

			if (fd < 0 && !err)
				err = -errno;
			s->hw_fd[c * HW_MAX + k] = fd;
		}
	s->hw_fd[n * HW_MAX] = -2; /* end */
	if (err) {
		log_info("hardware counters (IPC, cache misses): not available on this host "
			 "(perf_event_open: %s)",
			 strerror(-err));
		for (int i = 0; s->hw_fd[i] != -2; i++)
			if (s->hw_fd[i] >= 0)
				close(s->hw_fd[i]);
		free(s->hw_fd);
		s->hw_fd = NULL;
	}
}

static bool hw_read(struct cap_sched *s, uint64_t ret[HW_MAX])
{
	uint64_t now[HW_MAX] = {0};

	if (!s->hw_fd)
		return false;
	for (int i = 0; s->hw_fd[i] != -2; i++) {
		uint64_t v;

		if (read(s->hw_fd[i], &v, sizeof(v)) == sizeof(v))
			now[i % HW_MAX] += v;
	}
	for (int k = 0; k < HW_MAX; k++) {
		ret[k] = now[k] - s->hw_prev[k];
		s->hw_prev[k] = now[k];
	}
	return true;
}

static void system_fill(struct cap_sched *s, struct cpa_metrics *m)
{
	uint64_t st[3], psi[2], hw[HW_MAX];
	double l[3] = {0};
	const char *p = read_proc(s, PROC_LOADAVG);
	bool ok[2];

	m->flags |= CPA_MF_SYSTEM;
	/* "I.FF I.FF I.FF ...": three strtod()s, as sscanf's "%lf"s */
	for (int i = 0; p && i < 3; i++) {
		char *end;

		l[i] = strtod(p, &end);
		if (end == p)
			break;
		p = end;
		if (i == 2)
			for (int k = 0; k < 3; k++)
				m->load_milli[k] = (uint32_t)(l[k] * 1000.0 + 0.5);
	}
	if (stat_read(s, st, &m->nr_cpus)) {
		if (s->stat_ok) {
			m->cpu_busy_ticks = st[0] - s->stat_prev[0];
			m->cpu_iowait_ticks = st[1] - s->stat_prev[1];
			m->cpu_idle_ticks = st[2] - s->stat_prev[2];
		}
		memcpy(s->stat_prev, st, sizeof(st));
		s->stat_ok = true;
	}
	for (unsigned int i = 0; i < CPA_PSI_MAX; i++) {
		psi_read(s, i, psi, ok);
		m->psi_some_us[i] =
			ok[0] && s->psi_ok[i][0]
				? (uint32_t)MIN(psi[0] - s->psi_prev[i][0], UINT32_MAX - 1)
				: CPA_METRICS_PSI_NONE;
		m->psi_full_us[i] =
			ok[1] && s->psi_ok[i][1]
				? (uint32_t)MIN(psi[1] - s->psi_prev[i][1], UINT32_MAX - 1)
				: CPA_METRICS_PSI_NONE;
		memcpy(s->psi_prev[i], psi, sizeof(psi));
		memcpy(s->psi_ok[i], ok, sizeof(ok));
	}
	if (hw_read(s, hw)) {
		m->flags |= CPA_MF_HW;
		m->hw_cycles = hw[HW_CYCLES];
		m->hw_instructions = hw[HW_INSTR];
		m->hw_cache_misses = hw[HW_CMISS];
	} else {
		m->flags |= CPA_MF_HW_NA;
	}
}

/*
 * Counter mode: one pass of the task iterator (bpf/sched.bpf.c), which adds
 * what each task did since the previous pass to sched_iprocs / sched_icpus:
 * one run of cpa_sched_walk, else a read of cpa_sched_iter (it writes
 * nothing to read: read() returns 0 at the end).
 */
static int iter_pass(struct cap_sched *s)
{
	uint64_t start = clock_ns(CLOCK_MONOTONIC);
	char buf[64];
	ssize_t n;
	int fd;

	s->skel->bss->sched_since_ns = s->iter_start_ns;
	if (s->walk) {
		LIBBPF_OPTS(bpf_test_run_opts, o);

		if (bpf_prog_test_run_opts(bpf_program__fd(s->skel->progs.cpa_sched_walk), &o) < 0)
			return -errno;
		s->iter_start_ns = start;
		return 0;
	}
	fd = bpf_iter_create(bpf_link__fd(s->skel->links.cpa_sched_iter));
	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		;
	close(fd);
	if (n < 0)
		return -errno;
	s->iter_start_ns = start;
	return 0;
}

static void ent_fill(struct cpa_metrics_ent *o, uint32_t id, uint16_t kind,
		     const struct cpa_sched_val *v)
{
	memset(o, 0, sizeof(*o));
	o->id = id;
	o->kind = kind;
	memcpy(o->comm, v->comm, CPA_COMM_LEN);
	o->comm[CPA_COMM_LEN - 1] = '\0';
	o->oncpu_ns = v->oncpu_ns;
	o->runq_ns = v->runq_ns;
	o->runq_n = v->runq_n;
	o->slices = v->slices;
	memcpy(o->switches, v->switches, sizeof(o->switches));
	memcpy(o->runq_hist, v->runq_hist, sizeof(o->runq_hist));
	memcpy(o->slice_hist, v->slice_hist, sizeof(o->slice_hist));
}

/* The per-CPU slots are cumulative: this second is now - prev. */
static bool cpu_delta(struct cpa_sched_val *d, const struct cpa_sched_val *now,
		      const struct cpa_sched_val *prev)
{
	memset(d, 0, sizeof(*d));
	d->oncpu_ns = now->oncpu_ns - prev->oncpu_ns;
	d->runq_ns = now->runq_ns - prev->runq_ns;
	d->runq_n = now->runq_n - prev->runq_n;
	d->slices = now->slices - prev->slices;
	for (int i = 0; i < CPA_SCHED_REASON_MAX; i++)
		d->switches[i] = now->switches[i] - prev->switches[i];
	for (int i = 0; i < CPA_SCHED_HIST; i++) {
		d->runq_hist[i] = now->runq_hist[i] - prev->runq_hist[i];
		d->slice_hist[i] = now->slice_hist[i] - prev->slice_hist[i];
	}
	return d->slices || d->runq_n;
}

/* Process updates that found the map full since the last call (all CPUs). */
static uint32_t dropped(struct cap_sched *s)
{
	uint64_t now = __atomic_load_n(&s->skel->bss->sched_stats[CPA_SCHED_STAT_PROC_FULL],
				       __ATOMIC_RELAXED),
		 d = now - s->dropped_prev;

	s->dropped_prev = now;
	return (uint32_t)MIN(d, UINT32_MAX);
}

/* The per-CPU slots as they are now: read in place, no syscall (the array
 * is BPF_F_MMAPABLE); the BPF side adds to them meanwhile, which the next
 * read's difference carries. */
static int cpus_read(struct cap_sched *s, int cfd)
{
	if (!s->cpu_map)
		return cap_bpf__array_read(cfd, s->nr_cpus, s->cpu_now, sizeof(*s->cpu_now));
	for (unsigned int c = 0; c < s->nr_cpus; c++)
		s->cpu_now[c] = s->cpu_map[c];
	return 0;
}

/*
 * Take this second's process entries (lookup and delete is atomic per
 * bucket, so an update racing with it lands in the next second): one batch
 * syscall where the kernel has it (5.6+), else a key walk and one
 * lookup-and-delete per process. Into s->keys / s->vals; their count.
 */
static unsigned int procs_take(struct cap_sched *s, int pfd)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	uint32_t count = CPA_SCHED_PROCS, out = 0, *prev = NULL, k;
	unsigned int nk = 0, n = 0;

	if (s->batch_ok) {
		if (bpf_map_lookup_and_delete_batch(pfd, NULL, &out, s->keys, s->vals, &count,
						    &bo) == 0 ||
		    errno == ENOENT)
			return count;
		if (errno != EINVAL && errno != ENOTSUP && errno != EOPNOTSUPP)
			return 0;
		s->batch_ok = false;
	}
	while (nk < CPA_SCHED_PROCS && bpf_map_get_next_key(pfd, prev, &k) == 0) {
		s->keys[nk] = k;
		prev = &s->keys[nk++];
	}
	for (unsigned int i = 0; i < nk; i++)
		if (bpf_map_lookup_and_delete_elem(pfd, &s->keys[i], &s->vals[n]) == 0)
			s->keys[n++] = s->keys[i];
	return n;
}

struct emitter {
	struct cap_emit *e;
	struct cpa_metrics hdr;
	struct cpa_metrics_ent ents[CPA_METRICS_PER_REC];
	unsigned int n;
	bool sent; /* the first record (with the system part) went out */
	int err;
};

static void flush(struct emitter *x)
{
	struct cpa_metrics *m;
	uint32_t len = (uint32_t)(sizeof(*m) + x->n * sizeof(x->ents[0]));
	uint64_t seq;
	int r;

	if (x->err == -EOVERFLOW)
		return;
	r = cap_emit__reserve_seq(x->e, CPA_REC_METRICS, len, (void **)&m);
	if (r < 0) {
		if (r == -EOVERFLOW)
			x->err = r;
		x->n = 0;
		return;
	}
	seq = m->seq;
	memcpy(m, &x->hdr, sizeof(*m));
	m->seq = seq;
	m->n_ents = (uint16_t)x->n;
	if (x->sent) /* the system part once per second */
		m->flags &= (uint16_t) ~(CPA_MF_SYSTEM | CPA_MF_HW | CPA_MF_HW_NA);
	memcpy(m + 1, x->ents, x->n * sizeof(x->ents[0]));
	x->sent = true;
	x->n = 0;
}

static void add(struct emitter *x, uint32_t id, uint16_t kind, const struct cpa_sched_val *v)
{
	ent_fill(&x->ents[x->n++], id, kind, v);
	if (x->n == CPA_METRICS_PER_REC)
		flush(x);
}

/* A process of this second as the policies see it. */
static void policy_proc_fill(struct policy_proc *pp, uint32_t pid, const struct cpa_sched_val *v,
			     uint32_t interval_ms, bool hist)
{
	memset(pp, 0, sizeof(*pp));
	pp->pid = pid;
	memcpy(pp->comm, v->comm, sizeof(pp->comm));
	pp->comm[sizeof(pp->comm) - 1] = '\0';
	for (int i = 0; i < POLICY_ITEM_MAX; i++)
		pp->value[i] = NAN;
	pp->value[POLICY_CPU_PERCENT] =
		interval_ms ? (double)v->oncpu_ns / ((double)interval_ms * 1e4) : NAN;
	if (v->runq_n && hist) /* counters have no histogram */
		pp->value[POLICY_RUNQ_P99_US] =
			cpa_metrics_hist_quantile(v->runq_hist, 0.99) / 1000.0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int cap_sched__emit_ents(struct cap_emit *e, uint64_t time_ns, uint32_t interval_ms,
			 const struct cpa_metrics_ent *ents, unsigned int n)
{
	struct emitter *x = calloc(1, sizeof(*x));
	int r;

	if (!x)
		return 0;
	x->e = e;
	x->hdr.time_ns = time_ns;
	x->hdr.interval_ms = interval_ms;
	x->sent = true; /* no system part */
	for (unsigned int i = 0; i < n; i++) {
		x->ents[x->n++] = ents[i];
		if (x->n == CPA_METRICS_PER_REC)
			flush(x);
	}
	if (x->n)
		flush(x);
	r = x->err;
	free(x);
	return r;
}

/* The loaded way's per-CPU array. */
static struct bpf_map *cpus_map(const struct cap_sched *s)
{
	return s->exact	   ? s->skel->maps.sched_cpus
	       : s->sample ? s->skel->maps.sched_scpus
			   : s->skel->maps.sched_icpus;
}

int cap_sched__tick(struct cap_sched *s, struct cap_emit *e, uint64_t now_real_ns,
		    struct cap_policy *pol, const struct cpa_metrics_ent *extra,
		    unsigned int n_extra)
{
	struct bpf_map *pm = s->exact	 ? s->skel->maps.sched_procs
			     : s->sample ? s->skel->maps.sched_sprocs
					 : s->skel->maps.sched_iprocs;
	int pfd = bpf_map__fd(pm), cfd = bpf_map__fd(cpus_map(s));
	struct emitter *x = calloc(1, sizeof(*x));
	struct cpa_sched_val d;
	unsigned int nk, np = 0;
	int r;

	if (!x)
		return 0;
	x->e = e;
	x->hdr.time_ns = s->last_real_ns;
	x->hdr.interval_ms = (uint32_t)((now_real_ns - s->last_real_ns) / NSEC_PER_MSEC);
	s->last_real_ns = now_real_ns;
	system_fill(s, &x->hdr);
	if (s->sample) {
		x->hdr.flags |= CPA_MF_SAMPLED;
	} else if (!s->exact) {
		x->hdr.flags |= CPA_MF_COUNTERS;
		if (iter_pass(s) < 0)
			x->hdr.flags |= CPA_MF_SCHED_NA;
	}
	x->hdr.dropped = dropped(s);

	nk = procs_take(s, pfd);
	/* In pid order (the map's is its hash's): from one second to the next
	 * the records hold much the same processes, which the store's encoding
	 * finds again (store_metrics.c). */
	for (unsigned int i = 0; i < nk; i++)
		s->order[i] = (uint64_t)s->keys[i] << 32 | i;
	qsort(s->order, nk, sizeof(*s->order), u64_cmp);
	for (unsigned int k = 0; k < nk; k++) {
		unsigned int i = (uint32_t)s->order[k];

		add(x, s->keys[i], CPA_MK_PROC, &s->vals[i]);
		if (pol && s->pprocs)
			policy_proc_fill(&s->pprocs[np++], s->keys[i], &s->vals[i],
					 x->hdr.interval_ms, s->exact || s->sample);
	}
	if (cpus_read(s, cfd) == 0)
		for (unsigned int c = 0; c < s->nr_cpus; c++) {
			if (cpu_delta(&d, &s->cpu_now[c], &s->cpu_prev[c]))
				add(x, c, CPA_MK_CPU, &d);
			s->cpu_prev[c] = s->cpu_now[c];
		}
	for (unsigned int i = 0; i < n_extra; i++) {
		x->ents[x->n++] = extra[i];
		if (x->n == CPA_METRICS_PER_REC)
			flush(x);
	}
	if (x->n || !x->sent)
		flush(x);
	if (pol)
		cap_policy__second(pol, e, now_real_ns, s->pprocs, np,
				   x->hdr.load_milli[0] / 1000.0);
	r = x->err;
	free(x);
	return r;
}

int cap_sched__open(const char *btf_path, bool exact, unsigned int sample, struct cap_sched **ret)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo);
	struct cap_sched *s = calloc(1, sizeof(*s));
	bool cnt;
	int r;

	if (!s)
		return log_error_errno(-ENOMEM, "scheduler metrics: %m");
	for (unsigned int i = 0; i < PROC_FILE_MAX; i++)
		s->proc_fd[i] = open(proc_path[i], O_RDONLY | O_CLOEXEC);
	libbpf_set_print(libbpf_print);
	if (btf_path)
		oo.btf_custom_path = btf_path;
	/* One way only: the others' programs stay out of the kernel and their
	 * per-process hashes shrink to one entry. The exact way wins over the
	 * sampled one (a policy on the run-queue P99 asks for it). */
	s->exact = exact;
	s->sample = exact || sample < 2 ? 0 : MIN(sample, CPA_SCHED_SAMPLE_MAX);
	cnt = !exact && !s->sample;
	/* The counters' pass as cpa_sched_walk where the kernel has the
	 * open-coded task iterator (6.7+), else as cpa_sched_iter (as with
	 * CPA_SCHED_PASS=iter in the environment: the tests' way to run it). */
	s->walk = cnt && !(getenv("CPA_SCHED_PASS") && !strcmp(getenv("CPA_SCHED_PASS"), "iter"));
	for (;;) {
		s->skel = sched_bpf__open_opts(&oo);
		if (!s->skel) {
			r = -errno;
			cap_sched__free(s);
			return log_error_errno(r, "scheduler metrics: open BPF object: %m");
		}
		bpf_program__set_autoload(s->skel->progs.cpa_sched_wakeup, exact);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_wakeup_new, exact);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_switch, exact);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_swakeup, s->sample);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_swakeup_new, s->sample);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_sswitch, s->sample);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_walk, s->walk);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_iter, cnt && !s->walk);
		bpf_program__set_autoload(s->skel->progs.cpa_sched_free, cnt);
		if (!exact)
			bpf_map__set_max_entries(s->skel->maps.sched_procs, 1);
		if (!s->sample)
			bpf_map__set_max_entries(s->skel->maps.sched_sprocs, 1);
		if (!cnt)
			bpf_map__set_max_entries(s->skel->maps.sched_iprocs, 1);
		s->skel->rodata->sched_sample_n = s->sample ? s->sample : 1;
		libbpf_quiet = s->walk;
		r = sched_bpf__load(s->skel);
		libbpf_quiet = false;
		if (r >= 0)
			r = sched_bpf__attach(s->skel);
		if (r >= 0 || !s->walk)
			break;
		sched_bpf__destroy(s->skel);
		s->skel = NULL;
		s->walk = false;
	}
	if (r < 0) {
		cap_sched__free(s);
		return log_error_errno(r, "scheduler metrics: load/attach %s: %m",
				       exact	   ? "sched_switch programs"
				       : s->sample ? "sampled sched_switch programs"
						   : "task iterator");
	}
	r = libbpf_num_possible_cpus();
	s->nr_cpus = r > 0 ? (unsigned int)MIN(r, CPA_SCHED_CPUS) : 1;
	s->nr_possible = r;
	s->batch_ok = true;
	{
		struct bpf_map *cm = cpus_map(s);
		size_t pg = (size_t)sysconf(_SC_PAGESIZE),
		       len = (size_t)bpf_map__value_size(cm) * bpf_map__max_entries(cm);
		void *p;

		len = (len + pg - 1) / pg * pg;
		p = mmap(NULL, len, PROT_READ, MAP_SHARED, bpf_map__fd(cm), 0);
		if (p != MAP_FAILED) {
			s->cpu_map = p;
			s->cpu_map_len = len;
		}
	}
	s->cpu_prev = calloc(s->nr_cpus, sizeof(*s->cpu_prev));
	s->cpu_now = calloc(s->nr_cpus, sizeof(*s->cpu_now));
	s->keys = calloc(CPA_SCHED_PROCS, sizeof(*s->keys));
	s->vals = calloc(CPA_SCHED_PROCS, sizeof(*s->vals));
	s->pprocs = calloc(CPA_SCHED_PROCS, sizeof(*s->pprocs));
	s->order = calloc(CPA_SCHED_PROCS, sizeof(*s->order));
	if (!s->cpu_prev || !s->cpu_now || !s->keys || !s->vals || !s->pprocs || !s->order) {
		cap_sched__free(s);
		return log_error_errno(-ENOMEM, "scheduler metrics: %m");
	}
	hw_open(s);
	/* Prime the deltas: the first record covers the first whole second. */
	s->last_real_ns = clock_ns(CLOCK_REALTIME);
	if (cnt && (r = iter_pass(s)) < 0) {
		cap_sched__free(s);
		return log_error_errno(r, "scheduler metrics: run task iterator: %m");
	}
	{
		struct cpa_metrics m = {0};

		system_fill(s, &m);
	}
	if (exact)
		log_info("scheduler metrics (full): run-queue latency and slice histograms, switch "
			 "reasons per process and CPU, from every context switch");
	else if (s->sample)
		log_info("scheduler metrics (sampled, 1 in %u): run-queue latency and slice "
			 "histograms, switch reasons per process and CPU, from 1 in %u wakeups and "
			 "switches, each counted %u times",
			 s->sample, s->sample, s->sample);
	else
		log_info("scheduler metrics: on-CPU time, run-queue delay and switches per process "
			 "and CPU from the kernel's task counters, once a second");
	*ret = s;
	return 0;
}

void cap_sched__free(struct cap_sched *s)
{
	if (!s)
		return;
	if (s->cpu_map)
		munmap((void *)s->cpu_map, s->cpu_map_len);
	sched_bpf__destroy(s->skel);
	if (s->hw_fd) {
		for (int i = 0; s->hw_fd[i] != -2; i++)
			if (s->hw_fd[i] >= 0)
				close(s->hw_fd[i]);
		free(s->hw_fd);
	}
	for (unsigned int i = 0; i < PROC_FILE_MAX; i++)
		if (s->proc_fd[i] >= 0)
			close(s->proc_fd[i]);
	free(s->cpu_prev);
	free(s->cpu_now);
	free(s->keys);
	free(s->vals);
	free(s->pprocs);
	free(s->order);
	free(s->buf);
	free(s);
}
