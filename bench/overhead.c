// SPDX-License-Identifier: MIT
/*
 * bench_overhead: what does cpa cost? The issue-5 harness (docs/bench.md).
 *
 * For each (freq, stack_size) it runs the same workload alone (A) and under
 * `cpa monitor` (B), interleaved A B A B ... for --reps repetitions, and
 * reports medians:
 *
 *   - the workload's own CPU time (wait4 rusage), alone and profiled;
 *   - per cpa process (capture, unwindd, symd, storer, monitor) and in total,
 *     over a steady window that leaves out start-up (--warmup) and the exit:
 *     CPU cores, CPU us per sample, voluntary context switches per second,
 *     RSS and PSS (smaps_rollup; PSS splits the shared arena between them);
 *   - BPF program time per sample (bpf_stats run_time_ns / run_cnt, enabled
 *     with BPF_ENABLE_STATS for the bench's lifetime only);
 *   - samples captured vs expected (freq x busy CPUs x seconds);
 *   - drops and degradations by reason (stage counters, read from the arena);
 *   - store bytes per sample and per hour.
 *
 * --perf adds `perf record -g` and `perf record --call-graph dwarf` runs of
 * the same workload to each repetition; --sweep runs every freq x stack_size
 * briefly and finds where each stage starts to lose samples; --idle measures
 * the agent with nothing to sample. --json FILE writes everything for scripts.
 *
 * Window picture (B runs):
 *
 *   monitor up    workload start   +warmup                 exit-1 tick  exit   monitor drained
 *   |--stages RUNNING--|---------------|=====steady window=====|-----------|----|----------|
 *                                      t0                      t1
 */
#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "benchutil.h"
#include "overhead.h"
#include "shm/counters.h"

#define MAX_LIST 16
#define TICK_MS	 250

enum proc_idx {
	P_CAPTURE,
	P_UNWINDD,
	P_SYMD,
	P_STORER,
	P_MONITOR,
	P_NAGENT,
	P_TOTAL = P_NAGENT, /* in results: the sum of the agent's processes */
	P_WORKLOAD = P_NAGENT,
	P_NPROC,
};

static const char *const proc_name[P_NPROC] = {"capture", "unwindd", "symd",
					       "storer",  "monitor", "total"};

/* Scalar results of one repetition; medians are taken field by field. */
enum metric {
	M_BASE_CPU_S, /* workload CPU alone */
	M_BASE_WALL_S,
	M_BASE_NS_PER_WORK, /* when the workload prints "loops N" / "work N" */
	M_WL_CPU_S,	    /* workload CPU under cpa */
	M_WL_WALL_S,
	M_WL_NS_PER_WORK,
	M_CPU_DELTA_PCT,  /* (profiled - alone) / alone */
	M_WORK_DELTA_PCT, /* the same per unit of work */
	M_WINDOW_S,
	M_BUSY_CPUS,
	M_SAMPLES, /* captured in the window (capture's "samples") */
	M_EXPECTED,
	M_CAPTURE_PCT,
	M_SAMPLES_PER_S,
	M_BPF_US,     /* cpa_on_cpu run time per run */
	M_BPF_ALL_US, /* every cpa program, per sample */
	M_BPF_RUNS_PER_S,
	M_BPF_CORES, /* every cpa program's run time, in CPUs */
	M_STORE_BYTES,
	M_STORED_SAMPLES,
	M_BYTES_PER_SAMPLE,
	M_MB_PER_HOUR,
	M_JOURNAL_BYTES,	   /* storer's dictionary journal (not part of the store) */
	M_WINDOW_BYTES_PER_SAMPLE, /* store growth / samples stored, steady window */
	M_RING0_PCT,		   /* highest fill seen */
	M_RING1_PCT,
	M_RING2_PCT,
	M_LOSSES,   /* dropped samples, every reason, whole run */
	M_DEGRADED, /* degraded samples, whole run */
	M_RESTARTS,
	M_MACHINE_BUSY_CPUS,
	M_MONITOR_EXIT,
	M_PERF_FP_WL_CPU_S,
	M_PERF_FP_CPU_S,
	M_PERF_FP_SAMPLES,
	M_PERF_FP_BYTES,
	M_PERF_FP_DELTA_PCT,
	M_PERF_DW_WL_CPU_S,
	M_PERF_DW_CPU_S,
	M_PERF_DW_SAMPLES,
	M_PERF_DW_BYTES,
	M_PERF_DW_DELTA_PCT,
	M_STORE_BYTES_PER_S, /* store growth / window */
	M_MAX,
};

static const char *const metric_name[] = {
	"base_workload_cpu_s",
	"base_workload_wall_s",
	"base_workload_ns_per_work",
	"workload_cpu_s",
	"workload_wall_s",
	"workload_ns_per_work",
	"workload_cpu_delta_pct",
	"workload_work_delta_pct",
	"window_s",
	"busy_cpus",
	"samples",
	"expected_samples",
	"captured_pct",
	"samples_per_s",
	"bpf_us_per_sample",
	"bpf_all_progs_us_per_sample",
	"bpf_runs_per_s",
	"bpf_cores",
	"store_bytes",
	"stored_samples",
	"store_bytes_per_sample",
	"store_mb_per_hour",
	"journal_bytes",
	"window_store_bytes_per_sample",
	"ring0_max_fill_pct",
	"ring1_max_fill_pct",
	"ring2_max_fill_pct",
	"lost_samples",
	"degraded_samples",
	"stage_restarts",
	"machine_busy_cpus",
	"monitor_exit",
	"perf_fp_workload_cpu_s",
	"perf_fp_cpu_s",
	"perf_fp_samples",
	"perf_fp_bytes",
	"perf_fp_workload_cpu_delta_pct",
	"perf_dwarf_workload_cpu_s",
	"perf_dwarf_cpu_s",
	"perf_dwarf_samples",
	"perf_dwarf_bytes",
	"perf_dwarf_workload_cpu_delta_pct",
	"window_store_bytes_per_s",
};

enum pmetric {
	PM_CORES,
	PM_US_PER_SAMPLE,
	PM_USER_US_PER_SAMPLE,
	PM_WAKEUPS_PER_S,
	PM_RSS_MB,
	PM_PSS_MB,
	PM_HWM_MB,
	PM_MAX,
};

static const char *const pmetric_name[] = {
	"cores",  "cpu_us_per_sample", "user_us_per_sample", "voluntary_ctxsw_per_s", "rss_mb",
	"pss_mb", "peak_rss_mb",
};

_Static_assert(ARRAY_SIZE(metric_name) == M_MAX, "a name per metric");
_Static_assert(ARRAY_SIZE(pmetric_name) == PM_MAX, "a name per process metric");

struct result {
	double s[M_MAX];
	double p[P_NAGENT + 1][PM_MAX];
	double cnt[SHM_STAGE_MAX][SHM_CNT_MAX]; /* whole run, at the end */
};

struct config {
	unsigned int freq;
	unsigned int stack;
};

static struct opts {
	unsigned int freqs[MAX_LIST], n_freqs;
	unsigned int stacks[MAX_LIST], n_stacks;
	unsigned int reps;
	double seconds, warmup, sweep_seconds, idle_seconds;
	unsigned int threads;
	bool sweep, idle, idle_all, ab, perf, pid_filter;
	const char *json, *base_dir, *perf_stages, *monitor_args;
	const char *rec_modes;	 /* --rec_modes: CPA_BPF_REC_MODE values compared side by side */
	const char *sched_modes; /* --sched_modes: --sched_metrics values side by side */
	const char *sched_arg;	 /* the one of the run under way: --sched_metrics=X */
	char cpa[PATH_MAX + 32], workload[PATH_MAX + 32], workload_fixed[PATH_MAX + 32];
	unsigned long loops; /* fixed work: cpa-workload-nofp --loops N */
	char **cmd;	     /* user command after -- */
	bool pingpong;	     /* --pingpong: cpa-wl-offcpu --pingpong (context-switch heavy) */
	char pp_exe[PATH_MAX + 32], pp_secs[32];
	char *pp_argv[8];
	bool keep;
} o = {
	.reps = 3,
	.seconds = 20,
	.warmup = 4,
	.sweep_seconds = 10,
	.idle_seconds = 20,
	.threads = 1,
};

static bool sweeping; /* the sweep runs the fixed-time workload for --sweep_seconds */
static char run_dir[PATH_MAX];
static unsigned int run_seq;

static int pidfd_open(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* stopped: the child stops itself before exec, so a monitor can be set on its pid before it
 * runs a single instruction of the workload (SIGCONT starts it). */
static pid_t spawn_ex(char *const argv[], int out_fd, int err_fd, bool stopped)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (out_fd >= 0)
			dup2(out_fd, 1);
		if (err_fd >= 0)
			dup2(err_fd, 2);
		if (stopped)
			raise(SIGSTOP);
		execvp(argv[0], argv);
		fprintf(stderr, "exec '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	if (stopped && (waitpid(pid, &status, WUNTRACED) < 0 || !WIFSTOPPED(status)))
		return -ECHILD;
	return pid;
}

static pid_t spawn(char *const argv[], int out_fd, int err_fd)
{
	return spawn_ex(argv, out_fd, err_fd, false);
}

/* Wait for pid up to timeout_ms (or forever when < 0); 0 when it exited. */
static int wait_exit(pid_t pid, int pidfd, int timeout_ms, int *ret_status, struct rusage *ru)
{
	struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
	int r;

	r = poll(&pfd, 1, timeout_ms);
	if (r == 0)
		return -ETIMEDOUT;
	if (wait4(pid, ret_status, 0, ru) < 0)
		return -errno;
	return 0;
}

static double tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

/* ---- the workload ---------------------------------------------------------------------- */

struct workload {
	pid_t pid;
	int pidfd, out;
	char *buf;
	size_t len, cap;
	uint64_t start_ns;
};

static int workload_start(struct workload *w)
{
	char secs[32], thr[16];
	char *argv[8];
	int pfd[2];

	memset(w, 0, sizeof(*w));
	w->pidfd = w->out = -1;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	if (o.cmd) {
		w->pid = spawn_ex(o.cmd, pfd[1], -1, true);
	} else if (o.loops && !sweeping) {
		snprintf(secs, sizeof(secs), "%lu", o.loops);
		snprintf(thr, sizeof(thr), "%u", o.threads);
		argv[0] = o.workload_fixed;
		argv[1] = "--loops";
		argv[2] = secs;
		argv[3] = "--threads";
		argv[4] = thr;
		argv[5] = NULL;
		w->pid = spawn_ex(argv, pfd[1], -1, true);
	} else {
		snprintf(secs, sizeof(secs), "%g", o.seconds);
		snprintf(thr, sizeof(thr), "%u", o.threads);
		argv[0] = o.workload;
		argv[1] = "--seconds";
		argv[2] = secs;
		argv[3] = "--threads";
		argv[4] = thr;
		argv[5] = NULL;
		w->pid = spawn_ex(argv, pfd[1], -1, true);
	}
	close(pfd[1]);
	if (w->pid < 0) {
		close(pfd[0]);
		return w->pid;
	}
	w->out = pfd[0];
	fcntl(w->out, F_SETFL, O_NONBLOCK);
	w->pidfd = pidfd_open(w->pid);
	if (w->pidfd < 0)
		return -errno;
	return 0;
}

/* The workload was started stopped (workload_start): let it run. */
static void workload_go(struct workload *w)
{
	w->start_ns = clock_ns(CLOCK_MONOTONIC);
	kill(w->pid, SIGCONT);
}

static void workload_drain(struct workload *w)
{
	for (;;) {
		ssize_t n;

		if (w->cap - w->len < 4096) {
			size_t cap = w->cap ? w->cap * 2 : 16384;
			char *b;

			if (cap > (1u << 20)) { /* a chatty command: keep the tail */
				memmove(w->buf, w->buf + w->len / 2, w->len - w->len / 2);
				w->len -= w->len / 2;
				cap = w->cap;
			}
			b = realloc(w->buf, cap + 1);
			if (!b)
				return;
			w->buf = b;
			w->cap = cap;
		}
		n = read(w->out, w->buf + w->len, w->cap - w->len);
		if (n <= 0)
			break;
		w->len += (size_t)n;
		w->buf[w->len] = 0;
	}
}

/* Units of work the workload reports: "loops N", "work N" or "iterations N" lines, summed. */
static double workload_units(const struct workload *w)
{
	double units = 0;
	const char *p = w->buf;

	while (p && *p) {
		unsigned long long n;

		if (sscanf(p, "loops %llu", &n) == 1 || sscanf(p, "work %llu", &n) == 1 ||
		    sscanf(p, "iterations %llu", &n) == 1)
			units += (double)n;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return units;
}

static void workload_free(struct workload *w)
{
	if (w->out >= 0)
		close(w->out);
	if (w->pidfd >= 0)
		close(w->pidfd);
	free(w->buf);
	w->buf = NULL;
	w->out = w->pidfd = -1;
}

static void workload_kill(struct workload *w)
{
	if (w->pid > 0) {
		kill(w->pid, SIGKILL);
		waitpid(w->pid, NULL, 0);
		w->pid = 0;
	}
}

/* Wait for the workload while calling tick() every TICK_MS; fills cpu/wall/units. */
static int workload_wait(struct workload *w, void (*tick)(void *), void *arg, double *ret_cpu,
			 double *ret_wall, double *ret_units)
{
	struct rusage ru;
	int status;

	/* Defined on every return: NAN until measured (a -errno the compiler cannot
	 * prove negative must not leave the caller with garbage). */
	*ret_cpu = *ret_wall = *ret_units = NAN;
	for (;;) {
		struct pollfd pfd[2] = {{.fd = w->pidfd, .events = POLLIN},
					{.fd = w->out, .events = POLLIN}};

		if (bench_interrupted) {
			workload_kill(w);
			return -EINTR;
		}
		if (poll(pfd, 2, TICK_MS) < 0 && errno != EINTR)
			return -errno;
		workload_drain(w);
		if (pfd[0].revents & POLLIN)
			break;
		if (tick)
			tick(arg);
	}
	*ret_wall = (double)(clock_ns(CLOCK_MONOTONIC) - w->start_ns) / 1e9;
	if (wait4(w->pid, &status, 0, &ru) < 0)
		return -errno;
	w->pid = 0;
	workload_drain(w);
	*ret_cpu = tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
	*ret_units = workload_units(w);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		bench_say("workload failed (status 0x%x); its output:\n%s", status,
			  w->buf ? w->buf : "");
		return -ECHILD;
	}
	return 0;
}

/* ---- A: the workload alone ------------------------------------------------------------- */

static int run_base(struct result *r)
{
	struct workload w;
	double cpu, wall, units;
	int err;

	err = workload_start(&w);
	if (err < 0)
		return err;
	workload_go(&w);
	err = workload_wait(&w, NULL, NULL, &cpu, &wall, &units);
	workload_free(&w);
	if (err < 0)
		return err;
	r->s[M_BASE_CPU_S] = cpu;
	r->s[M_BASE_WALL_S] = wall;
	r->s[M_BASE_NS_PER_WORK] = units > 0 ? cpu * 1e9 / units : NAN;
	return 0;
}

/* ---- perf record runs of the same workload --------------------------------------------- */

/* Until perf has its events open (perf_event fds in /proc/PID/fd), at most 3 s. */
static void perf_wait_attached(pid_t perf)
{
	char dir[64], path[PATH_MAX], target[64];

	snprintf(dir, sizeof(dir), "/proc/%d/fd", perf);
	for (int i = 0; i < 300; i++) {
		struct dirent *de;
		bool found = false;
		DIR *d = opendir(dir);

		while (d && (de = readdir(d))) {
			ssize_t n;

			snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			n = readlink(path, target, sizeof(target) - 1);
			if (n > 0) {
				target[n] = 0;
				found |= !!strstr(target, "perf_event");
			}
		}
		if (d)
			closedir(d);
		if (found) {
			usleep(50 * 1000); /* the ring mmaps follow the opens */
			return;
		}
		usleep(10 * 1000);
	}
}

static int run_perf(const struct config *c, bool dwarf, struct result *r)
{
	char freq[16], pid[16], data[PATH_MAX + 32], log[PATH_MAX + 32], line[512];
	struct workload w;
	struct rusage ru;
	double cpu, wall, units, samples = NAN;
	int err, status, pidfd, logfd;
	struct stat st;
	pid_t perf;
	FILE *f;

	snprintf(data, sizeof(data), "%s/perf-%u.data", run_dir, ++run_seq);
	snprintf(log, sizeof(log), "%s/perf-%u.log", run_dir, run_seq);
	snprintf(freq, sizeof(freq), "%u", c->freq);
	logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (logfd < 0)
		return -errno;
	err = workload_start(&w);
	if (err < 0) {
		close(logfd);
		return err;
	}
	snprintf(pid, sizeof(pid), "%d", w.pid);
	{
		char *argv[] = {"perf",
				"record",
				"-e",
				"cpu-clock",
				"-F",
				freq,
				"-o",
				data,
				"-p",
				pid,
				dwarf ? "--call-graph" : "-g",
				dwarf ? "dwarf" : NULL,
				NULL};

		perf = spawn(argv, logfd, logfd);
	}
	close(logfd);
	if (perf < 0) {
		workload_kill(&w);
		workload_free(&w);
		return perf;
	}
	pidfd = pidfd_open(perf);
	perf_wait_attached(perf);
	workload_go(&w);
	err = workload_wait(&w, NULL, NULL, &cpu, &wall, &units);
	workload_free(&w);
	/* perf record -p leaves when its target is gone. */
	if (wait_exit(perf, pidfd, 60000, &status, &ru) < 0) {
		kill(perf, SIGINT);
		wait4(perf, &status, 0, &ru);
	}
	close(pidfd);
	if (err < 0)
		return err;
	f = fopen(log, "re");
	while (f && fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "perf.data");
		double n;

		p = p ? p : strstr(line, ".data (");
		if (p && (p = strchr(p, '(')) && sscanf(p, "(%lf samples", &n) == 1)
			samples = n;
	}
	if (f)
		fclose(f);
	r->s[dwarf ? M_PERF_DW_WL_CPU_S : M_PERF_FP_WL_CPU_S] = cpu;
	r->s[dwarf ? M_PERF_DW_CPU_S : M_PERF_FP_CPU_S] = tv_s(&ru.ru_utime) + tv_s(&ru.ru_stime);
	r->s[dwarf ? M_PERF_DW_SAMPLES : M_PERF_FP_SAMPLES] = samples;
	r->s[dwarf ? M_PERF_DW_BYTES : M_PERF_FP_BYTES] =
		stat(data, &st) == 0 ? (double)st.st_size : NAN;
	if (!o.keep)
		unlink(data);
	return 0;
}

/* ---- B: under cpa monitor --------------------------------------------------------------- */

struct snap {
	uint64_t t_ns;
	pid_t pid[P_NPROC];
	bool ok[P_NPROC];
	struct cost_proc p[P_NPROC];
	struct cost_bpf bpf;
	/* per program of m->bpf (the idle table's breakdown): id, bpf_stats totals */
	uint32_t prog_id[COST_MAX_PROGS];
	uint64_t prog_ns[COST_MAX_PROGS], prog_cnt[COST_MAX_PROGS];
	uint64_t cnt[SHM_STAGE_MAX][SHM_CNT_MAX];
	uint64_t restarts[SHM_STAGE_MAX];
	uint64_t machine_busy, machine_total;
	uint64_t store_bytes;
};

struct mon {
	const struct config *c;
	pid_t pid, wl_pid;
	bool whole; /* no --pid: every process is sampled */
	int pidfd;
	struct shm_arena *arena;
	struct cost_bpf_set bpf;
	uint64_t t0_after_ns; /* take t0 at the first tick past this */
	bool have_t0, have_t1;
	struct snap t0, prev, last; /* t1 = prev at the end: one tick before the exit */
	struct cost_proc mem[P_NAGENT], mem_prev[P_NAGENT];
	unsigned int ticks;
	double ring_max[SHM_MAX_RINGS];
	pid_t perf_stages;
	char log[PATH_MAX + 32];
	char store[PATH_MAX + 32];
};

static void snap_take(struct mon *m, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	s->t_ns = clock_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		struct shm_stage *st = shm_arena__stage(m->arena, (enum shm_stage_id)i);

		s->pid[i] = __atomic_load_n(&st->pid, __ATOMIC_RELAXED);
		s->restarts[i] = __atomic_load_n(&st->restarts, __ATOMIC_RELAXED);
		for (int k = 0; k < SHM_CNT_MAX; k++)
			s->cnt[i][k] = shm_stage__cnt(st, (unsigned int)k);
	}
	s->pid[P_MONITOR] = m->pid;
	s->pid[P_WORKLOAD] = m->wl_pid;
	for (int i = 0; i < P_NPROC; i++)
		s->ok[i] = s->pid[i] > 0 && cost_proc_read(s->pid[i], &s->p[i]) == 0;
	cost_bpf_read(&m->bpf, &s->bpf);
	for (int i = 0; i < m->bpf.n; i++) {
		s->prog_id[i] = m->bpf.ids[i];
		if (cost_bpf_prog(m->bpf.ids[i], NULL, 0, &s->prog_ns[i], &s->prog_cnt[i]) < 0)
			s->prog_id[i] = 0;
	}
	cost_machine_busy(&s->machine_busy, &s->machine_total);
	ovh_dir_bytes(m->store, &s->store_bytes, NULL);
}

static void ring_fill(struct mon *m)
{
	for (unsigned int r = 0; r < shm_arena__nr_rings(m->arena) && r < SHM_MAX_RINGS; r++) {
		uint64_t size;
		struct shm_ring_ctrl *rc = shm_arena__ring_mem(m->arena, r, &size);
		uint64_t used;
		double pct;

		if (!rc || size <= SHM_RING_CTRL_SIZE)
			continue;
		used = __atomic_load_n(&rc->prod_pos, __ATOMIC_RELAXED) -
		       __atomic_load_n(&rc->cons_pos, __ATOMIC_RELAXED);
		pct = 100.0 * (double)used / (double)(size - SHM_RING_CTRL_SIZE);
		if (pct > m->ring_max[r])
			m->ring_max[r] = pct;
	}
}

static void perf_stages_start(struct mon *m)
{
	char pids[128], data[PATH_MAX];
	int n = 0;

	for (int i = 0; i < P_NAGENT; i++)
		n += snprintf(pids + n, sizeof(pids) - (size_t)n, "%s%d", n ? "," : "",
			      m->t0.pid[i]);
	snprintf(data, sizeof(data), "%s/stages-%uhz-%u.data", o.perf_stages, m->c->freq,
		 m->c->stack);
	{
		char *argv[] = {"perf", "record", "-q", "-e", "cpu-clock", "-F", "19997",
				"-g",	"-o",	  data, "-p", pids,	   NULL};
		int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

		m->perf_stages = spawn(argv, devnull, -1);
		close(devnull);
	}
	bench_say("perf record of the stages (%s) -> %s", pids, data);
}

static void mon_tick(void *arg)
{
	struct mon *m = arg;
	uint64_t now = clock_ns(CLOCK_MONOTONIC);

	ring_fill(m);
	m->ticks++;
	if (!m->have_t0) {
		if (now < m->t0_after_ns)
			return;
		if (!m->bpf.n) {
			struct shm_stage *st = shm_arena__stage(m->arena, SHM_STAGE_CAPTURE);

			cost_bpf_find(__atomic_load_n(&st->pid, __ATOMIC_RELAXED), &m->bpf);
		}
		snap_take(m, &m->t0);
		m->have_t0 = true;
		m->last = m->t0;
		if (o.perf_stages && !m->perf_stages)
			perf_stages_start(m);
		return;
	}
	m->prev = m->last;
	m->have_t1 = m->ticks > 1;
	snap_take(m, &m->last);
	/* smaps_rollup walks page tables: every 2 s is enough for a level. */
	if (m->ticks % 8 == 0 || !m->mem[P_CAPTURE].rss_kb) {
		memcpy(m->mem_prev, m->mem, sizeof(m->mem));
		for (int i = 0; i < P_NAGENT; i++)
			if (m->last.ok[i])
				cost_proc_mem(m->last.pid[i], &m->mem[i]);
	}
}

static int mon_start(struct mon *m, const struct config *c, pid_t filter_pid)
{
	char freq[16], stack[16], store[PATH_MAX + 32], fpid[16];
	char *argv[64];
	char *extra = NULL;
	int n = 0, logfd, err;
	uint64_t deadline;

	memset(m, 0, sizeof(*m));
	m->c = c;
	m->pidfd = -1;
	m->whole = filter_pid <= 0;
	snprintf(store, sizeof(store), "%s/store-%u", run_dir, ++run_seq);
	snprintf(m->store, sizeof(m->store), "%s", store);
	snprintf(m->log, sizeof(m->log), "%s/monitor-%u.log", run_dir, run_seq);
	snprintf(freq, sizeof(freq), "%u", c->freq);
	snprintf(stack, sizeof(stack), "%u", c->stack);
	argv[n++] = o.cpa;
	argv[n++] = "monitor";
	argv[n++] = "--store_dir";
	argv[n++] = store;
	argv[n++] = "--freq";
	argv[n++] = freq;
	argv[n++] = "--stack_size";
	argv[n++] = stack;
	/* cpa's defaults otherwise (its stats line every second included), as users run it. */
	if (filter_pid > 0) {
		snprintf(fpid, sizeof(fpid), "%d", filter_pid);
		argv[n++] = "--pid";
		argv[n++] = fpid;
	}
	if (o.sched_arg)
		argv[n++] = (char *)o.sched_arg;
	if (o.monitor_args) {
		extra = strdup(o.monitor_args);
		for (char *save, *t = strtok_r(extra, " ", &save); t && n < 60;
		     t = strtok_r(NULL, " ", &save))
			argv[n++] = t;
	}
	argv[n] = NULL;
	logfd = open(m->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (logfd < 0) {
		free(extra);
		return -errno;
	}
	m->pid = spawn(argv, logfd, logfd);
	close(logfd);
	free(extra);
	if (m->pid < 0)
		return m->pid;
	m->pidfd = pidfd_open(m->pid);

	/* The arena appears once the monitor has created and sealed it. */
	deadline = clock_ns(CLOCK_MONOTONIC) + 30ull * 1000000000ull;
	for (;;) {
		struct pollfd pfd = {.fd = m->pidfd, .events = POLLIN};
		int running = 0;

		if (bench_interrupted)
			return -EINTR;
		if (poll(&pfd, 1, 50) > 0) {
			bench_say("cpa monitor exited during start-up; see %s", m->log);
			return -ECHILD;
		}
		if (!m->arena) {
			err = ovh_arena_open(m->pid, &m->arena);
			if (err < 0 && err != -ENOENT && err != -EPERM)
				m->arena = NULL;
		}
		if (m->arena)
			for (int i = 0; i < SHM_STAGE_MAX; i++)
				running += shm_stage__state(shm_arena__stage(
						   m->arena, (enum shm_stage_id)i)) ==
					   SHM_STATE_RUNNING;
		if (running == SHM_STAGE_MAX)
			break;
		if (clock_ns(CLOCK_MONOTONIC) > deadline) {
			bench_say("cpa monitor: stages not all running after 30 s; see %s", m->log);
			return -ETIMEDOUT;
		}
	}
	cost_bpf_find(shm_arena__stage(m->arena, SHM_STAGE_CAPTURE)->pid, &m->bpf);
	return 0;
}

/* SIGINT the monitor (graceful drain) and wait; its exit code or -errno. */
static int mon_stop(struct mon *m)
{
	struct rusage ru;
	int status;

	if (m->perf_stages > 0) {
		kill(m->perf_stages, SIGINT);
		waitpid(m->perf_stages, NULL, 0);
		m->perf_stages = 0;
	}
	if (m->pid <= 0)
		return 0;
	kill(m->pid, SIGINT);
	if (wait_exit(m->pid, m->pidfd, 150000, &status, &ru) < 0) {
		bench_say("cpa monitor did not stop within 150 s; killing it");
		kill(m->pid, SIGKILL);
		waitpid(m->pid, &status, 0);
	}
	m->pid = 0;
	close(m->pidfd);
	m->pidfd = -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void mon_free(struct mon *m)
{
	if (m->pid > 0)
		mon_stop(m);
	shm_arena__free(m->arena);
	m->arena = NULL;
}

static double ddiv(double a, double b)
{
	return b > 0 ? a / b : NAN;
}

/* Turn t0, t1 and the final counters into a result. */
static void mon_result(struct mon *m, struct result *r)
{
	const struct snap *a = &m->t0, *b = &m->prev;
	double win_ns = (double)(b->t_ns - a->t_ns), samples, tot_cpu = 0, tot_user = 0;
	double tot_vcsw = 0;
	const struct cost_proc *mem = m->mem_prev[P_CAPTURE].rss_kb ? m->mem_prev : m->mem;

	samples = (double)(b->cnt[SHM_STAGE_CAPTURE][CAP_CNT_SAMPLES] -
			   a->cnt[SHM_STAGE_CAPTURE][CAP_CNT_SAMPLES]);
	r->s[M_WINDOW_S] = win_ns / 1e9;
	r->s[M_SAMPLES] = samples;
	r->s[M_SAMPLES_PER_S] = ddiv(samples, win_ns / 1e9);
	for (int i = 0; i <= P_NAGENT; i++)
		for (int k = 0; k < PM_MAX; k++)
			r->p[i][k] = NAN;
	for (int i = 0; i < P_NAGENT; i++) {
		double cpu, ticks, user_frac;

		if (!a->ok[i] || !b->ok[i] || a->pid[i] != b->pid[i])
			continue; /* restarted inside the window: no delta */
		cpu = (double)(b->p[i].cpu_ns - a->p[i].cpu_ns);
		ticks = (double)(b->p[i].utime + b->p[i].stime - a->p[i].utime - a->p[i].stime);
		user_frac = ticks > 0 ? (double)(b->p[i].utime - a->p[i].utime) / ticks : NAN;
		r->p[i][PM_CORES] = cpu / win_ns;
		r->p[i][PM_US_PER_SAMPLE] = ddiv(cpu / 1e3, samples);
		r->p[i][PM_USER_US_PER_SAMPLE] = ddiv(cpu * user_frac / 1e3, samples);
		r->p[i][PM_WAKEUPS_PER_S] = (double)(b->p[i].vcsw - a->p[i].vcsw) / (win_ns / 1e9);
		r->p[i][PM_RSS_MB] = (double)mem[i].rss_kb / 1024;
		r->p[i][PM_PSS_MB] = (double)mem[i].pss_kb / 1024;
		r->p[i][PM_HWM_MB] = (double)mem[i].hwm_kb / 1024;
		tot_cpu += cpu;
		tot_user += isnan(user_frac) ? 0 : cpu * user_frac;
		tot_vcsw += r->p[i][PM_WAKEUPS_PER_S];
	}
	r->p[P_TOTAL][PM_CORES] = tot_cpu / win_ns;
	r->p[P_TOTAL][PM_US_PER_SAMPLE] = ddiv(tot_cpu / 1e3, samples);
	r->p[P_TOTAL][PM_USER_US_PER_SAMPLE] = ddiv(tot_user / 1e3, samples);
	r->p[P_TOTAL][PM_WAKEUPS_PER_S] = tot_vcsw;
	for (int k = PM_RSS_MB; k <= PM_HWM_MB; k++) {
		r->p[P_TOTAL][k] = 0;
		for (int i = 0; i < P_NAGENT; i++)
			r->p[P_TOTAL][k] += isnan(r->p[i][k]) ? 0 : r->p[i][k];
	}
	if (a->ok[P_WORKLOAD] && b->ok[P_WORKLOAD]) {
		/* stat's ticks, not schedstat: they keep the time of threads that already left. */
		double ticks = (double)(b->p[P_WORKLOAD].utime + b->p[P_WORKLOAD].stime -
					a->p[P_WORKLOAD].utime - a->p[P_WORKLOAD].stime);
		double busy = ticks * 1e9 / (double)sysconf(_SC_CLK_TCK) / win_ns;

		r->s[M_BUSY_CPUS] = busy;
		r->s[M_EXPECTED] = m->c->freq * busy * win_ns / 1e9;
		r->s[M_CAPTURE_PCT] = 100 * ddiv(samples, r->s[M_EXPECTED]);
	} else {
		r->s[M_BUSY_CPUS] = r->s[M_EXPECTED] = r->s[M_CAPTURE_PCT] = NAN;
	}
	r->s[M_MACHINE_BUSY_CPUS] = ddiv((double)(b->machine_busy - a->machine_busy),
					 (double)(b->machine_total - a->machine_total)) *
				    (double)sysconf(_SC_NPROCESSORS_ONLN);
	if (m->whole) {
		/* Every busy CPU is sampled, not only the workload's. */
		r->s[M_EXPECTED] = m->c->freq * r->s[M_MACHINE_BUSY_CPUS] * win_ns / 1e9;
		r->s[M_CAPTURE_PCT] = 100 * ddiv(samples, r->s[M_EXPECTED]);
	}
	r->s[M_BPF_US] = ddiv((double)(b->bpf.sample_ns - a->bpf.sample_ns) / 1e3,
			      (double)(b->bpf.sample_cnt - a->bpf.sample_cnt));
	r->s[M_BPF_ALL_US] = ddiv((double)(b->bpf.all_ns - a->bpf.all_ns) / 1e3, samples);
	r->s[M_BPF_RUNS_PER_S] = (double)(b->bpf.sample_cnt - a->bpf.sample_cnt) / (win_ns / 1e9);
	r->s[M_BPF_CORES] = (double)(b->bpf.all_ns - a->bpf.all_ns) / win_ns;
	if (!m->bpf.n)
		r->s[M_BPF_US] = r->s[M_BPF_ALL_US] = r->s[M_BPF_RUNS_PER_S] = r->s[M_BPF_CORES] =
			NAN;
	r->s[M_STORE_BYTES_PER_S] =
		b->store_bytes > a->store_bytes
			? (double)(b->store_bytes - a->store_bytes) / (win_ns / 1e9)
			: NAN;
	r->s[M_WINDOW_BYTES_PER_SAMPLE] =
		b->store_bytes > a->store_bytes /* no block written in the window: unknown */
			? ddiv((double)(b->store_bytes - a->store_bytes),
			       (double)(b->cnt[SHM_STAGE_STORER][STO_CNT_SAMPLES] -
					a->cnt[SHM_STAGE_STORER][STO_CNT_SAMPLES]))
			: NAN;
	r->s[M_RING0_PCT] = m->ring_max[0];
	r->s[M_RING1_PCT] = m->ring_max[1];
	r->s[M_RING2_PCT] = m->ring_max[2];
	r->s[M_RESTARTS] = 0;
	for (int i = 0; i < SHM_STAGE_MAX; i++)
		r->s[M_RESTARTS] += (double)(b->restarts[i] - a->restarts[i]);
}

/* Counters after the monitor drained, and what the store holds. */
static void mon_final(struct mon *m, struct result *r, const char *store)
{
	double losses = 0, degraded = 0;
	uint64_t bytes = 0, journal = 0;

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		struct shm_stage *st = shm_arena__stage(m->arena, (enum shm_stage_id)i);

		for (int k = 0; k < SHM_CNT_MAX; k++)
			r->cnt[i][k] = (double)shm_stage__cnt(st, (unsigned int)k);
		losses += r->cnt[i][SHM_CNT_DROP_RING_FULL] + r->cnt[i][SHM_CNT_DROP_RATE] +
			  r->cnt[i][SHM_CNT_DROP_CORRUPT];
		degraded += r->cnt[i][SHM_CNT_DEGRADED];
	}
	losses += r->cnt[SHM_STAGE_CAPTURE][CAP_CNT_BPF_RB_LOST];
	r->s[M_LOSSES] = losses;
	r->s[M_DEGRADED] = degraded;
	ovh_dir_bytes(store, &bytes, &journal);
	r->s[M_STORE_BYTES] = (double)bytes;
	r->s[M_JOURNAL_BYTES] = (double)journal;
	r->s[M_STORED_SAMPLES] = r->cnt[SHM_STAGE_STORER][STO_CNT_SAMPLES];
	r->s[M_BYTES_PER_SAMPLE] = ddiv((double)bytes, r->s[M_STORED_SAMPLES]);
	r->s[M_MB_PER_HOUR] = r->s[M_BYTES_PER_SAMPLE] * r->s[M_SAMPLES_PER_S] * 3600 / 1e6;
}

static int rm_rf(const char *path)
{
	char *argv[] = {"rm", "-rf", (char *)path, NULL};
	pid_t pid = spawn(argv, -1, -1);

	if (pid > 0)
		waitpid(pid, NULL, 0);
	return 0;
}

/* B: the workload under cpa monitor (whole machine; --pid: only the workload). */
static int run_cpa(const struct config *c, double warmup, struct result *r)
{
	char store[PATH_MAX + 32];
	struct workload w;
	struct mon m;
	/* set when workload_wait() succeeds; -O3 cannot see that and warns */
	double cpu = 0, wall = 0, units = 0;
	int err;

	err = workload_start(&w);
	if (err < 0)
		return err;
	err = mon_start(&m, c, o.pid_filter ? w.pid : 0);
	snprintf(store, sizeof(store), "%s/store-%u", run_dir, run_seq);
	if (err < 0) {
		workload_kill(&w);
		workload_free(&w);
		goto out;
	}
	workload_go(&w);
	m.wl_pid = w.pid;
	m.t0_after_ns = w.start_ns + (uint64_t)(warmup * 1e9);
	err = workload_wait(&w, mon_tick, &m, &cpu, &wall, &units);
	workload_free(&w);
	if (err < 0)
		goto out;
	if (!m.have_t1) {
		bench_say(
			"the workload ran %.1f s: too short for a steady window after a %.1f s warmup",
			wall, warmup);
		err = -EINVAL;
		goto out;
	}
	r->s[M_WL_CPU_S] = cpu;
	r->s[M_WL_WALL_S] = wall;
	r->s[M_WL_NS_PER_WORK] = units > 0 ? cpu * 1e9 / units : NAN;
	mon_result(&m, r);
	r->s[M_MONITOR_EXIT] = mon_stop(&m);
	mon_final(&m, r, store);
	if (r->s[M_MONITOR_EXIT] != 0)
		bench_say("cpa monitor exited with %g; see %s", r->s[M_MONITOR_EXIT], m.log);
out:
	mon_free(&m);
	if (!o.keep)
		rm_rf(store);
	return err;
}

/* Each cpa program's runs and time over the window (t0 to the last tick before the exit). */
static void print_bpf_progs(const struct mon *m)
{
	const struct snap *a = &m->t0, *b = &m->prev;
	double win_s = (double)(b->t_ns - a->t_ns) / 1e9;

	printf("\n=== idle: cpa's BPF programs over the %.1f s window ===\n", win_s);
	printf("  %-24s %10s %10s %10s\n", "program", "runs/s", "us/run", "% of core");
	for (int i = 0; i < COST_MAX_PROGS && win_s > 0; i++) {
		char name[64];
		uint64_t ns, cnt;

		if (!b->prog_id[i] ||
		    cost_bpf_prog(b->prog_id[i], name, sizeof(name), &ns, &cnt) < 0)
			continue;
		for (int j = 0; j < COST_MAX_PROGS; j++) {
			if (a->prog_id[j] != b->prog_id[i])
				continue;
			cnt = b->prog_cnt[i] - a->prog_cnt[j];
			ns = b->prog_ns[i] - a->prog_ns[j];
			printf("  %-24s %10.1f %10.2f %10.4f\n", name, (double)cnt / win_s,
			       cnt ? (double)ns / 1e3 / (double)cnt : 0.0,
			       (double)ns / 1e7 / win_s);
			break;
		}
	}
}

/* Idle: the agent with nothing to sample (--pid of a process that sleeps), or the whole
 * machine as it is with --idle_all. */
static int run_idle(struct result *r)
{
	struct config c = {.freq = o.n_freqs ? o.freqs[0] : 49,
			   .stack = o.n_stacks ? o.stacks[0] : 8192};
	char store[PATH_MAX + 32];
	pid_t sleeper = 0;
	struct mon m;
	uint64_t end;
	int err;

	if (!o.idle_all) {
		char *argv[] = {"sleep", "100000", NULL};

		sleeper = spawn(argv, -1, -1);
		if (sleeper < 0)
			return sleeper;
	}
	err = mon_start(&m, &c, sleeper);
	snprintf(store, sizeof(store), "%s/store-%u", run_dir, run_seq);
	if (err < 0)
		goto out;
	m.wl_pid = 0;
	m.t0_after_ns = clock_ns(CLOCK_MONOTONIC) + (uint64_t)(o.warmup * 1e9);
	end = m.t0_after_ns + (uint64_t)(o.idle_seconds * 1e9) + 2 * TICK_MS * 1000000ull;
	/* One tick per second: the bench itself should not be what keeps the CPUs awake. */
	while (clock_ns(CLOCK_MONOTONIC) < end && !bench_interrupted) {
		usleep(1000 * 1000);
		mon_tick(&m);
	}
	if (bench_interrupted) {
		err = -EINTR;
		goto out;
	}
	mon_result(&m, r);
	print_bpf_progs(&m);
	r->s[M_MONITOR_EXIT] = mon_stop(&m);
	mon_final(&m, r, store);
out:
	mon_free(&m);
	if (sleeper > 0) {
		kill(sleeper, SIGKILL);
		waitpid(sleeper, NULL, 0);
	}
	if (!o.keep)
		rm_rf(store);
	return err;
}

/* ---- medians and output ------------------------------------------------------------------ */

static void median(const struct result *runs, unsigned int n, struct result *ret)
{
	const size_t nf = sizeof(struct result) / sizeof(double);
	double v[64];

	for (size_t f = 0; f < nf; f++) {
		unsigned int k = 0;

		for (unsigned int i = 0; i < n && k < ARRAY_SIZE(v); i++) {
			double x = ((const double *)&runs[i])[f];

			if (!isnan(x))
				v[k++] = x;
		}
		if (!k) {
			((double *)ret)[f] = NAN;
			continue;
		}
		((double *)ret)[f] = bench_median(v, k);
	}
}

static void result_init(struct result *r)
{
	const size_t nf = sizeof(struct result) / sizeof(double);

	for (size_t f = 0; f < nf; f++)
		((double *)r)[f] = NAN;
}

static void fmt(char *buf, size_t size, const char *f, double v)
{
	if (isnan(v))
		snprintf(buf, size, "-");
	else
		snprintf(buf, size, f, v);
}

static const char *verdict(double v, double goal)
{
	return isnan(v) ? "n/a" : v <= goal ? "ok" : "MISSED";
}

/* Loss counters worth naming, per stage (whole run). */
static void print_losses(const struct result *r)
{
	static const struct {
		int stage;
		int idx;
	} loss[] = {
		{SHM_STAGE_CAPTURE, CAP_CNT_BPF_RB_LOST},
		{SHM_STAGE_CAPTURE, CAP_CNT_BPF_NO_USTACK},
		{SHM_STAGE_STORER, STO_CNT_WRITE_ERRORS},
		{SHM_STAGE_STORER, STO_CNT_LOST_SAMPLES},
		{SHM_STAGE_UNWINDD, UNW_CNT_MAPS_FAIL},
		{SHM_STAGE_SYMD, SYM_CNT_BIN_OPEN_FAIL},
	};
	static const int common[] = {SHM_CNT_DROP_RING_FULL, SHM_CNT_DEGRADED, SHM_CNT_DROP_RATE,
				     SHM_CNT_DROP_CORRUPT,   SHM_CNT_DROP_DUP, SHM_CNT_ERRORS};
	int n = 0;

	printf("  losses (whole run, incl. drain):");
	for (int s = 0; s < SHM_STAGE_MAX; s++)
		for (size_t k = 0; k < ARRAY_SIZE(common); k++)
			if (r->cnt[s][common[k]] > 0) {
				printf(" %s.%s=%.0f", shm_stage_name((enum shm_stage_id)s),
				       shm_counter_name((enum shm_stage_id)s, (unsigned)common[k]),
				       r->cnt[s][common[k]]);
				n++;
			}
	for (size_t k = 0; k < ARRAY_SIZE(loss); k++)
		if (r->cnt[loss[k].stage][loss[k].idx] > 0) {
			printf(" %s.%s=%.0f", shm_stage_name((enum shm_stage_id)loss[k].stage),
			       shm_counter_name((enum shm_stage_id)loss[k].stage,
						(unsigned)loss[k].idx),
			       r->cnt[loss[k].stage][loss[k].idx]);
			n++;
		}
	printf("%s\n", n ? "" : " none");
}

static void print_procs(const struct result *r)
{
	printf("  %-8s %8s %10s %10s %10s %8s %8s %9s\n", "process", "cores", "cpu_us/smp",
	       "user_us/smp", "wakeups/s", "RSS_MB", "PSS_MB", "peakRSS");
	for (int i = 0; i <= P_NAGENT; i++) {
		char c[6][24];

		fmt(c[0], sizeof(c[0]), "%.4f", r->p[i][PM_CORES]);
		fmt(c[1], sizeof(c[1]), "%.1f", r->p[i][PM_US_PER_SAMPLE]);
		fmt(c[2], sizeof(c[2]), "%.1f", r->p[i][PM_USER_US_PER_SAMPLE]);
		fmt(c[3], sizeof(c[3]), "%.1f", r->p[i][PM_WAKEUPS_PER_S]);
		fmt(c[4], sizeof(c[4]), "%.1f", r->p[i][PM_RSS_MB]);
		fmt(c[5], sizeof(c[5]), "%.1f", r->p[i][PM_PSS_MB]);
		printf("  %-8s %8s %10s %10s %10s %8s %8s %9.1f\n", proc_name[i], c[0], c[1], c[2],
		       c[3], c[4], c[5], r->p[i][PM_HWM_MB]);
	}
}

static void print_ab(const struct config *c, const struct result *r, unsigned int n)
{
	char b[4][32];

	printf("\n=== %u Hz, stack %u B: %u reps A/B interleaved, medians ===\n", c->freq, c->stack,
	       n);
	fmt(b[0], sizeof(b[0]), "%+.2f %%", r->s[M_CPU_DELTA_PCT]);
	printf("  workload CPU: alone %.2f s, under cpa %.2f s (%s)%s\n", r->s[M_BASE_CPU_S],
	       r->s[M_WL_CPU_S], b[0],
	       o.cmd || o.loops ? "" : "  [fixed-time workload: < 0 = CPU the workload lost]");
	if (!isnan(r->s[M_WORK_DELTA_PCT]))
		printf("  CPU per unit of work: alone %.1f ns, under cpa %.1f ns (slowdown %+.2f "
		       "%%)\n",
		       r->s[M_BASE_NS_PER_WORK], r->s[M_WL_NS_PER_WORK], r->s[M_WORK_DELTA_PCT]);
	if (!isnan(r->s[M_PERF_FP_WL_CPU_S]))
		printf("  perf record -g:              workload CPU %.2f s (%+.2f %%), perf CPU "
		       "%.3f s, %.0f samples, %.1f bytes/sample\n",
		       r->s[M_PERF_FP_WL_CPU_S], r->s[M_PERF_FP_DELTA_PCT], r->s[M_PERF_FP_CPU_S],
		       r->s[M_PERF_FP_SAMPLES], r->s[M_PERF_FP_BYTES] / r->s[M_PERF_FP_SAMPLES]);
	if (!isnan(r->s[M_PERF_DW_WL_CPU_S]))
		printf("  perf record --call-graph dwarf: workload CPU %.2f s (%+.2f %%), perf CPU "
		       "%.3f s, %.0f samples, %.1f bytes/sample\n",
		       r->s[M_PERF_DW_WL_CPU_S], r->s[M_PERF_DW_DELTA_PCT], r->s[M_PERF_DW_CPU_S],
		       r->s[M_PERF_DW_SAMPLES], r->s[M_PERF_DW_BYTES] / r->s[M_PERF_DW_SAMPLES]);
	printf("  steady window %.1f s: busy CPUs %.2f (workload), %.2f (machine); samples %.0f "
	       "captured / %.0f expected (%.1f %%), %.1f/s\n",
	       r->s[M_WINDOW_S], r->s[M_BUSY_CPUS], r->s[M_MACHINE_BUSY_CPUS], r->s[M_SAMPLES],
	       r->s[M_EXPECTED], r->s[M_CAPTURE_PCT], r->s[M_SAMPLES_PER_S]);
	print_procs(r);
	fmt(b[1], sizeof(b[1]), "%.2f", r->s[M_BPF_US]);
	fmt(b[2], sizeof(b[2]), "%.2f", r->s[M_BPF_ALL_US]);
	printf("  BPF: cpa_on_cpu %s us/run (%.0f runs/s), all cpa programs %s us/sample\n", b[1],
	       r->s[M_BPF_RUNS_PER_S], b[2]);
	printf("  store: %.2f bytes/sample over the run (%.0f samples, %.0f bytes), %.2f in the "
	       "steady window; %.3f MB/hour at this rate; storer journal %.0f bytes more\n",
	       r->s[M_BYTES_PER_SAMPLE], r->s[M_STORED_SAMPLES], r->s[M_STORE_BYTES],
	       r->s[M_WINDOW_BYTES_PER_SAMPLE], r->s[M_MB_PER_HOUR], r->s[M_JOURNAL_BYTES]);
	printf("  rings max fill: %.1f %% / %.1f %% / %.1f %%; stage restarts %.0f\n",
	       r->s[M_RING0_PCT], r->s[M_RING1_PCT], r->s[M_RING2_PCT], r->s[M_RESTARTS]);
	print_losses(r);
	printf("  goals (issue 5):\n");
	printf("    cpa processes CPU <= 10 us/sample ........ %8.1f  %s\n",
	       r->p[P_TOTAL][PM_US_PER_SAMPLE], verdict(r->p[P_TOTAL][PM_US_PER_SAMPLE], 10));
	printf("    BPF <= 4 us/sample (stack %5u) ......... %8.2f  %s\n", c->stack, r->s[M_BPF_US],
	       c->stack == 8192 ? verdict(r->s[M_BPF_US], 4) : "(goal is for 8192)");
	/* Issue 5 stated these two for --pid: the whole machine adds every
	 * process's maps and symbols, and every process's metrics rows. */
	printf("    PSS of all cpa processes <= 20 MB ........ %8.1f  %s\n",
	       r->p[P_TOTAL][PM_PSS_MB],
	       o.pid_filter ? verdict(r->p[P_TOTAL][PM_PSS_MB], 20) : "(goal is for --pid)");
	printf("    store <= 2.6 bytes/sample ................ %8.2f  %s\n",
	       r->s[M_BYTES_PER_SAMPLE],
	       o.pid_filter ? verdict(r->s[M_BYTES_PER_SAMPLE], 2.6) : "(goal is for --pid)");
	printf("    no lost samples .......................... %8.0f  %s\n", r->s[M_LOSSES],
	       r->s[M_LOSSES] == 0 ? "ok" : "MISSED");
	printf("    (CPA 1.0.0: ~140 us/sample, ~11 us BPF, 27 MB PSS, 5.4 bytes/sample)\n");
}

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_num(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fputs("null", f);
	else
		fprintf(f, "%.6g", v);
}

static void json_result(FILE *f, const struct result *r, bool full)
{
	bool first = true;

	fputc('{', f);
	for (int k = 0; k < M_MAX; k++) {
		if (!full && isnan(r->s[k]))
			continue;
		fprintf(f, "%s\"%s\": ", first ? "" : ", ", metric_name[k]);
		json_num(f, r->s[k]);
		first = false;
	}
	fprintf(f, ", \"processes\": {");
	for (int i = 0; i <= P_NAGENT; i++) {
		fprintf(f, "%s\"%s\": {", i ? ", " : "", proc_name[i]);
		for (int k = 0; k < PM_MAX; k++) {
			fprintf(f, "%s\"%s\": ", k ? ", " : "", pmetric_name[k]);
			json_num(f, r->p[i][k]);
		}
		fputc('}', f);
	}
	fprintf(f, "}, \"counters\": {");
	for (int s = 0; s < SHM_STAGE_MAX; s++) {
		bool f1 = true;

		fprintf(f, "%s\"%s\": {", s ? ", " : "", shm_stage_name((enum shm_stage_id)s));
		for (unsigned int k = 0; k < SHM_CNT_MAX; k++) {
			const char *name = shm_counter_name((enum shm_stage_id)s, k);

			if (!name || isnan(r->cnt[s][k]))
				continue;
			fprintf(f, "%s", f1 ? "" : ", ");
			json_str(f, name);
			fputs(": ", f);
			json_num(f, r->cnt[s][k]);
			f1 = false;
		}
		fputc('}', f);
	}
	fputs("}}", f);
}

/* ---- the modes ----------------------------------------------------------------------------- */

static FILE *json;
static bool json_first = true;

static void json_begin(const char *kind, const struct config *c)
{
	if (!json)
		return;
	fprintf(json, "%s\n  {\"kind\": \"%s\"", json_first ? "" : ",", kind);
	if (c)
		fprintf(json, ", \"freq\": %u, \"stack_size\": %u", c->freq, c->stack);
	json_first = false;
}

static int mode_ab(const struct config *c)
{
	struct result runs[64], med;
	unsigned int n = 0;
	int err = 0;

	bench_say("%u Hz, stack %u: %u reps of A (alone) / B (cpa monitor)%s", c->freq, c->stack,
		  o.reps, o.perf ? " / perf -g / perf dwarf" : "");
	for (unsigned int i = 0; i < o.reps && !bench_interrupted; i++) {
		struct result *r = &runs[n];

		result_init(r);
		/* Alternate the order so a drift in the machine's load hits A and B alike. */
		if (i % 2 == 0) {
			err = run_base(r);
			if (!err)
				err = run_cpa(c, o.warmup, r);
		} else {
			err = run_cpa(c, o.warmup, r);
			if (!err)
				err = run_base(r);
		}
		if (!err && o.perf)
			err = run_perf(c, false, r);
		if (!err && o.perf)
			err = run_perf(c, true, r);
		if (err < 0) {
			bench_say("rep %u failed: %s", i + 1, strerror(-err));
			return err;
		}
		r->s[M_CPU_DELTA_PCT] = 100 * (r->s[M_WL_CPU_S] / r->s[M_BASE_CPU_S] - 1);
		r->s[M_WORK_DELTA_PCT] =
			100 * (r->s[M_WL_NS_PER_WORK] / r->s[M_BASE_NS_PER_WORK] - 1);
		r->s[M_PERF_FP_DELTA_PCT] =
			100 * (r->s[M_PERF_FP_WL_CPU_S] / r->s[M_BASE_CPU_S] - 1);
		r->s[M_PERF_DW_DELTA_PCT] =
			100 * (r->s[M_PERF_DW_WL_CPU_S] / r->s[M_BASE_CPU_S] - 1);
		bench_say("  rep %u: workload %.2f s alone / %.2f s under cpa; cpa %.1f us/sample, "
			  "BPF %.2f us, %.0f samples",
			  i + 1, r->s[M_BASE_CPU_S], r->s[M_WL_CPU_S],
			  r->p[P_TOTAL][PM_US_PER_SAMPLE], r->s[M_BPF_US], r->s[M_SAMPLES]);
		n++;
	}
	if (!n)
		return -EINTR;
	median(runs, n, &med);
	print_ab(c, &med, n);
	fflush(stdout);
	json_begin("ab", c);
	if (json) {
		fprintf(json, ", \"reps\": %u, \"median\": ", n);
		json_result(json, &med, true);
		fprintf(json, ", \"runs\": [");
		for (unsigned int i = 0; i < n; i++) {
			fprintf(json, "%s", i ? ", " : "");
			json_result(json, &runs[i], false);
		}
		fprintf(json, "]}");
	}
	return err;
}

/*
 * --rec_modes fixed,dynptr,scratch: the same workload under cpa monitor once
 * per BPF record mode (CPA_BPF_REC_MODE, capture/cap_bpf.c) in each rep, the
 * order rotated per rep, so the modes share the machine's load of the moment.
 */
#define MAX_REC_MODES 4

/*
 * The reps of a side-by-side mode list (comma-separated in list): each rep
 * runs cpa once per mode, the order rotated per rep. sched: the modes are
 * --sched_metrics values, else CPA_BPF_REC_MODE values. Into runs[mode][rep];
 * *ret_nm modes named in names (pointing into buf), *ret_n reps done.
 */
static int modes_reps(const struct config *c, const char *list, bool sched,
		      struct result runs[MAX_REC_MODES][64], char buf[128],
		      char *names[MAX_REC_MODES], unsigned int *ret_nm, unsigned int *ret_n)
{
	char args[MAX_REC_MODES][48], *save = NULL;
	unsigned int nm = 0, n = 0;
	int err = 0;

	snprintf(buf, 128, "%s", list);
	for (char *t = strtok_r(buf, ",", &save); t && nm < MAX_REC_MODES;
	     t = strtok_r(NULL, ",", &save)) {
		snprintf(args[nm], sizeof(args[nm]), "--sched_metrics=%s", t);
		names[nm++] = t;
	}
	bench_say("%u Hz, stack %u: %u reps of cpa monitor per %s (%s)", c->freq, c->stack, o.reps,
		  sched ? "--sched_metrics" : "BPF record mode", list);
	for (unsigned int i = 0; i < o.reps && i < 64 && !bench_interrupted && !err; i++) {
		for (unsigned int k = 0; k < nm && !err; k++) {
			unsigned int m = (i + k) % nm;
			struct result *r = &runs[m][i];

			result_init(r);
			if (sched)
				o.sched_arg = args[m];
			else
				setenv("CPA_BPF_REC_MODE", names[m], 1);
			err = run_cpa(c, o.warmup, r);
			o.sched_arg = NULL;
			unsetenv("CPA_BPF_REC_MODE");
			if (err < 0) {
				bench_say("rep %u (%s) failed: %s", i + 1, names[m],
					  strerror(-err));
				break;
			}
			if (sched)
				bench_say("  rep %u %-10s BPF %.2f %%, cpa processes %.2f %% of a "
					  "CPU, store %.0f B/s",
					  i + 1, names[m], 100 * r->s[M_BPF_CORES],
					  100 * r->p[P_TOTAL][PM_CORES], r->s[M_STORE_BYTES_PER_S]);
			else
				bench_say("  rep %u %-8s BPF %.2f us/run, cpa %.1f us/sample, %.0f "
					  "samples, %.0f BPF bytes/sample",
					  i + 1, names[m], r->s[M_BPF_US],
					  r->p[P_TOTAL][PM_US_PER_SAMPLE], r->s[M_SAMPLES],
					  r->cnt[SHM_STAGE_CAPTURE][SHM_CNT_BYTES_IN] /
						  r->cnt[SHM_STAGE_CAPTURE][SHM_CNT_IN]);
		}
		if (!err)
			n++;
	}
	*ret_nm = nm;
	*ret_n = n;
	return err;
}

/*
 * --rec_modes (sched false) or --sched_modes (sched true), each mode's
 * medians in one table. --sched_modes cheap,full,0: what all of cpa costs
 * (BPF + processes, % of one CPU) and stores per second with each
 * --sched_metrics value (docs/bench.md "Scheduler metrics under a
 * context-switch storm").
 */
static int mode_modes(const struct config *c, bool sched)
{
	static struct result runs[MAX_REC_MODES][64];
	char list[128], *names[MAX_REC_MODES];
	unsigned int nm, n;
	int err = modes_reps(c, sched ? o.sched_modes : o.rec_modes, sched, runs, list, names, &nm,
			     &n);
	const char *where = o.pid_filter ? "--pid <workload>" : "whole machine";

	if (!n)
		return err < 0 ? err : -EINTR;
	if (sched) {
		printf("\n=== --sched_metrics, %u Hz, stack %u, %s, %u reps (medians) ===\n",
		       c->freq, c->stack, where, n);
		printf("  %-10s %9s %9s %9s %11s %10s %9s  %s\n", "mode", "BPF %CPU", "cpa procs",
		       "all cpa", "store B/s", "wl ns/unit", "samples/s", "all cpa % per rep");
	} else {
		printf("\n=== BPF record modes, %u Hz, stack %u, %s, %u reps (medians; reps in run "
		       "order) ===\n",
		       c->freq, c->stack, where, n);
		printf("  %-8s %9s %9s %12s %10s  %s\n", "mode", "BPF us", "cpa us", "BPF B/rec",
		       "bpf lost", "BPF us per rep");
	}
	for (unsigned int m = 0; m < nm; m++) {
		struct result med, *rr = runs[m];
		char reps[256];
		size_t k = 0;

		median(rr, n, &med);
		for (unsigned int i = 0; i < n && k < sizeof(reps) - 16; i++)
			k += (size_t)snprintf(
				reps + k, sizeof(reps) - k, "%s%.2f", i ? ", " : "",
				sched ? 100 * (rr[i].s[M_BPF_CORES] + rr[i].p[P_TOTAL][PM_CORES])
				      : rr[i].s[M_BPF_US]);
		if (sched)
			printf("  %-10s %9.2f %9.2f %9.2f %11.0f %10.1f %9.1f  %s\n", names[m],
			       100 * med.s[M_BPF_CORES], 100 * med.p[P_TOTAL][PM_CORES],
			       100 * (med.s[M_BPF_CORES] + med.p[P_TOTAL][PM_CORES]),
			       med.s[M_STORE_BYTES_PER_S], med.s[M_WL_NS_PER_WORK],
			       med.s[M_SAMPLES_PER_S], reps);
		else
			printf("  %-8s %9.2f %9.1f %12.0f %10.0f  %s\n", names[m], med.s[M_BPF_US],
			       med.p[P_TOTAL][PM_US_PER_SAMPLE],
			       med.cnt[SHM_STAGE_CAPTURE][SHM_CNT_BYTES_IN] /
				       med.cnt[SHM_STAGE_CAPTURE][SHM_CNT_IN],
			       med.cnt[SHM_STAGE_CAPTURE][CAP_CNT_BPF_RB_LOST], reps);
	}
	fflush(stdout);
	return err;
}

/* Which stage a loss counter of stage s blames: a full output ring means its consumer did
 * not keep up; the BPF ring buffer overflowing means capture did not. */
static double blame(const struct result *r, int stage)
{
	double own = r->cnt[stage][SHM_CNT_DROP_RATE] + r->cnt[stage][SHM_CNT_DROP_CORRUPT];

	if (stage == SHM_STAGE_CAPTURE)
		return own + r->cnt[SHM_STAGE_CAPTURE][CAP_CNT_BPF_RB_LOST];
	if (stage == SHM_STAGE_STORER)
		own += r->cnt[SHM_STAGE_STORER][STO_CNT_WRITE_ERRORS];
	return own + r->cnt[stage - 1][SHM_CNT_DROP_RING_FULL] +
	       r->cnt[stage - 1][SHM_CNT_DEGRADED];
}

static int mode_sweep(void)
{
	static const unsigned int def_freqs[] = {19, 49, 99, 999, 4999};
	static const unsigned int def_stacks[] = {4096, 8192, 16384};
	unsigned int nf = o.n_freqs ? o.n_freqs : ARRAY_SIZE(def_freqs);
	unsigned int ns = o.n_stacks ? o.n_stacks : ARRAY_SIZE(def_stacks);
	const unsigned int *fr = o.n_freqs ? o.freqs : def_freqs;
	const unsigned int *sk = o.n_stacks ? o.stacks : def_stacks;
	static struct result res[MAX_LIST][MAX_LIST];
	double saved = o.seconds;
	int err = 0;

	o.seconds = o.sweep_seconds;
	sweeping = true;
	for (unsigned int s = 0; s < ns; s++)
		for (unsigned int f = 0; f < nf && !bench_interrupted; f++) {
			struct config c = {.freq = fr[f], .stack = sk[s]};

			result_init(&res[s][f]);
			bench_say("sweep: %u Hz, stack %u, %.0f s", c.freq, c.stack, o.seconds);
			err = run_cpa(&c, MIN(o.warmup, o.seconds / 4), &res[s][f]);
			if (err < 0) {
				bench_say("sweep run failed: %s", strerror(-err));
				goto out;
			}
		}
	printf("\n=== sweep: %.0f s per point, blamed losses per stage (drops + degradations; a "
	       "full ring blames its consumer) ===\n",
	       o.seconds);
	printf("  %5s %6s %9s %8s %8s %8s %8s %8s | %7s %7s %7s %7s %7s | %6s %6s %6s %7s\n",
	       "stack", "Hz", "samples/s", "capt%", "capture", "unwindd", "symd", "storer", "cap_c",
	       "unw_c", "sym_c", "sto_c", "bpf_us", "ring0%", "ring1%", "ring2%", "us/smp");
	for (unsigned int s = 0; s < ns; s++)
		for (unsigned int f = 0; f < nf; f++) {
			const struct result *r = &res[s][f];

			printf("  %5u %6u %9.0f %8.1f %8.0f %8.0f %8.0f %8.0f | %7.3f %7.3f %7.3f "
			       "%7.3f %7.2f | %6.1f %6.1f %6.1f %7.1f\n",
			       sk[s], fr[f], r->s[M_SAMPLES_PER_S], r->s[M_CAPTURE_PCT],
			       blame(r, 0), blame(r, 1), blame(r, 2), blame(r, 3),
			       r->p[P_CAPTURE][PM_CORES], r->p[P_UNWINDD][PM_CORES],
			       r->p[P_SYMD][PM_CORES], r->p[P_STORER][PM_CORES], r->s[M_BPF_US],
			       r->s[M_RING0_PCT], r->s[M_RING1_PCT], r->s[M_RING2_PCT],
			       r->p[P_TOTAL][PM_US_PER_SAMPLE]);
		}
	printf("  highest rate sustained without a loss blamed on the stage (of the rates tried):\n");
	for (unsigned int s = 0; s < ns; s++) {
		unsigned int first_fail = UINT32_MAX, first_idx = 0;
		int first_stage = -1;

		printf("  stack %5u:", sk[s]);
		for (int st = 0; st < SHM_STAGE_MAX; st++) {
			unsigned int ok = 0, fail = UINT32_MAX, fail_idx = 0;

			for (unsigned int f = 0; f < nf; f++) {
				if (blame(&res[s][f], st) > 0) {
					fail = fr[f];
					fail_idx = f;
					break;
				}
				ok = fr[f];
			}
			if (ok)
				printf(" %s %s%u Hz", shm_stage_name((enum shm_stage_id)st),
				       fail == UINT32_MAX ? ">= " : "", ok);
			else
				printf(" %s < %u Hz", shm_stage_name((enum shm_stage_id)st), fail);
			if (fail < first_fail) {
				first_fail = fail;
				first_idx = fail_idx;
				first_stage = st;
			}
		}
		if (first_stage >= 0) {
			/* A stage far from a full core when its input overflowed is not out of
			 * CPU: the ring is too small for its producer's batches or it wakes late.
			 */
			double cores = res[s][first_idx].p[first_stage][PM_CORES];

			printf("; saturates first: %s (at %u Hz, using %.1f %% of a core: %s)\n",
			       shm_stage_name((enum shm_stage_id)first_stage), first_fail,
			       100 * cores,
			       cores > 0.8 ? "out of CPU"
					   : "not CPU-bound: ring size / wakeup latency");
		} else
			printf("; no stage lost samples\n");
	}
	if (json)
		for (unsigned int s = 0; s < ns; s++)
			for (unsigned int f = 0; f < nf; f++) {
				struct config c = {.freq = fr[f], .stack = sk[s]};

				json_begin("sweep", &c);
				fprintf(json, ", \"blamed\": {");
				for (int st = 0; st < SHM_STAGE_MAX; st++) {
					fprintf(json, "%s\"%s\": ", st ? ", " : "",
						shm_stage_name((enum shm_stage_id)st));
					json_num(json, blame(&res[s][f], st));
				}
				fprintf(json, "}, \"result\": ");
				json_result(json, &res[s][f], false);
				fputc('}', json);
			}
out:
	o.seconds = saved;
	sweeping = false;
	return err;
}

static int mode_idle(void)
{
	struct result r;
	int err;

	result_init(&r);
	bench_say("idle: %s, %.0f s",
		  o.idle_all ? "whole machine as it is"
			     : "nothing to sample (--pid of a sleeping process)",
		  o.idle_seconds);
	err = run_idle(&r);
	if (err < 0)
		return err;
	printf("\n=== idle: %s, %.1f s window ===\n",
	       o.idle_all ? "whole machine, unfiltered" : "cpa monitor --pid <a sleeping process>",
	       r.s[M_WINDOW_S]);
	printf("  machine busy CPUs meanwhile %.2f (others' load), samples %.0f\n",
	       r.s[M_MACHINE_BUSY_CPUS], r.s[M_SAMPLES]);
	print_procs(&r);
	printf("  agent CPU: %.4f %% of one core  (goal <= 0.05 %%: %s)\n",
	       100 * r.p[P_TOTAL][PM_CORES], verdict(100 * r.p[P_TOTAL][PM_CORES], 0.05));
	printf("  BPF: %.0f runs/s, %.2f us/run (runs on every sampled tick of a busy CPU, "
	       "filtered in BPF), every cpa program %.4f %% of one core\n",
	       r.s[M_BPF_RUNS_PER_S], r.s[M_BPF_US], 100 * r.s[M_BPF_CORES]);
	printf("  all of cpa (processes + BPF): %.4f %% of one core  (goal <= 0.02 %%: %s)\n",
	       100 * (r.p[P_TOTAL][PM_CORES] + r.s[M_BPF_CORES]),
	       verdict(100 * (r.p[P_TOTAL][PM_CORES] + r.s[M_BPF_CORES]), 0.02));
	json_begin("idle", NULL);
	if (json) {
		fprintf(json, ", \"filtered\": %s, \"agent_pct_of_core\": ",
			o.idle_all ? "false" : "true");
		json_num(json, 100 * r.p[P_TOTAL][PM_CORES]);
		fprintf(json, ", \"result\": ");
		json_result(json, &r, false);
		fputc('}', json);
	}
	return 0;
}

/* ---- options ------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_overhead [options] [-- COMMAND ARGS...]\n"
		"  Runs a workload alone and under `cpa monitor`, interleaved, and reports\n"
		"  medians (docs/bench.md). Default workload: cpa-workload-nofp --seconds S\n"
		"  --threads 1 (main + 1 worker = 2 busy FP-less threads).\n"
		"  --freq LIST          Hz, comma list (default 49,99; sweep 19,49,99,999,4999)\n"
		"  --stack_size LIST    bytes (default 8192; sweep 4096,8192,16384)\n"
		"  --reps N             A/B repetitions (default 3)\n"
		"  --seconds S          workload length (default 20)\n"
		"  --warmup S           start-up left out of the steady window (default 4)\n"
		"  --threads N          workload worker threads (default 1)\n"
		"  --perf               also run perf record -g and --call-graph dwarf\n"
		"  --sweep              every freq x stack_size for --sweep_seconds (default 10)\n"
		"  --idle               the agent with nothing to sample, --idle_seconds (20)\n"
		"  --idle_all           idle without the --pid filter (whole machine as it is)\n"
		"  --ab                 the A/B runs too when --sweep or --idle is given\n"
		"  --json FILE          everything, for scripts\n"
		"  --perf_stages DIR    perf record -g -F 19997 the cpa processes over each steady window\n"
		"  --pid                profile only the workload (cpa monitor --pid <workload>):\n"
		"                       neighbours stay out of the numbers (default: whole machine,\n"
		"                       as users run it; --whole_machine says so explicitly)\n"
		"  --monitor_args STR   extra `cpa monitor` options, blank separated\n"
		"  --rec_modes LIST     instead of A/B: cpa once per BPF record mode in each rep\n"
		"                       (fixed,dynptr,scratch: CPA_BPF_REC_MODE), side by side\n"
		"  --sched_modes LIST   instead of A/B: cpa once per --sched_metrics value in each\n"
		"                       rep (e.g. 1,sampled,full,0; sampled:N too): BPF, processes,\n"
		"                       store B/s side by side\n"
		"  --cpa PATH           cpa executable (default: next to this one)\n"
		"  --workload PATH      built-in workload (default: cpa-workload-nofp next to this)\n"
		"  --loops N            fixed work instead: cpa-workload-nofp --loops N (every thread;\n"
		"                       ~2500 loops/s each), slowdown as CPU time per loop\n"
		"  --pingpong           switch-heavy workload: cpa-wl-offcpu --pingpong --seconds S\n"
		"                       (a byte bounced between two threads over pipes; with\n"
		"                       --monitor_args \"--offcpu\" it measures off-CPU's cost)\n"
		"  --dir DIR            where stores and logs go (default /tmp/bench_overhead.XXXXXX)\n"
		"  --keep               keep stores, logs and perf data\n");
}

static int parse_u(const char *flag, const char *s, unsigned long lo, unsigned long hi,
		   unsigned int *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v < lo || v > hi) {
		bench_say("--%s: bad value '%s' (must be %lu..%lu)", flag, s, lo, hi);
		return -EINVAL;
	}
	*ret = (unsigned int)v;
	return 0;
}

static int parse_d(const char *flag, const char *s, double lo, double hi, double *ret)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !(v >= lo && v <= hi)) {
		bench_say("--%s: bad value '%s' (must be %g..%g)", flag, s, lo, hi);
		return -EINVAL;
	}
	*ret = v;
	return 0;
}

static int parse_list(const char *flag, const char *s, unsigned long lo, unsigned long hi,
		      unsigned int *out, unsigned int *ret_n)
{
	char buf[256], *save, *t;
	unsigned int n = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == MAX_LIST) {
			bench_say("--%s: at most %d values", flag, MAX_LIST);
			return -EINVAL;
		}
		if (parse_u(flag, t, lo, hi, &out[n]) < 0)
			return -EINVAL;
		n++;
	}
	if (!n) {
		bench_say("--%s: empty list", flag);
		return -EINVAL;
	}
	*ret_n = n;
	return 0;
}

static int parse_opts(int argc, char **argv)
{
	enum {
		O_FREQ = 256,
		O_STACK,
		O_REPS,
		O_SECONDS,
		O_WARMUP,
		O_THREADS,
		O_PERF,
		O_SWEEP,
		O_SWEEP_SECONDS,
		O_IDLE,
		O_IDLE_SECONDS,
		O_IDLE_ALL,
		O_AB,
		O_JSON,
		O_PERF_STAGES,
		O_MONITOR_ARGS,
		O_REC_MODES,
		O_SCHED_MODES,
		O_CPA,
		O_WORKLOAD,
		O_LOOPS,
		O_WHOLE_MACHINE,
		O_PID,
		O_DIR,
		O_KEEP,
		O_PINGPONG
	};
	static const struct option lo[] = {
		{"freq", required_argument, NULL, O_FREQ},
		{"stack_size", required_argument, NULL, O_STACK},
		{"reps", required_argument, NULL, O_REPS},
		{"seconds", required_argument, NULL, O_SECONDS},
		{"warmup", required_argument, NULL, O_WARMUP},
		{"threads", required_argument, NULL, O_THREADS},
		{"perf", no_argument, NULL, O_PERF},
		{"sweep", no_argument, NULL, O_SWEEP},
		{"sweep_seconds", required_argument, NULL, O_SWEEP_SECONDS},
		{"idle", no_argument, NULL, O_IDLE},
		{"idle_seconds", required_argument, NULL, O_IDLE_SECONDS},
		{"idle_all", no_argument, NULL, O_IDLE_ALL},
		{"ab", no_argument, NULL, O_AB},
		{"json", required_argument, NULL, O_JSON},
		{"perf_stages", required_argument, NULL, O_PERF_STAGES},
		{"monitor_args", required_argument, NULL, O_MONITOR_ARGS},
		{"rec_modes", required_argument, NULL, O_REC_MODES},
		{"sched_modes", required_argument, NULL, O_SCHED_MODES},
		{"cpa", required_argument, NULL, O_CPA},
		{"workload", required_argument, NULL, O_WORKLOAD},
		{"loops", required_argument, NULL, O_LOOPS},
		{"whole_machine", no_argument, NULL, O_WHOLE_MACHINE},
		{"pid", no_argument, NULL, O_PID},
		{"dir", required_argument, NULL, O_DIR},
		{"keep", no_argument, NULL, O_KEEP},
		{"pingpong", no_argument, NULL, O_PINGPONG},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	char self[PATH_MAX], *slash;
	ssize_t n;
	int c;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return -errno;
	self[n] = 0;
	slash = strrchr(self, '/');
	*slash = 0;
	snprintf(o.cpa, sizeof(o.cpa), "%s/cpa", self);
	snprintf(o.workload, sizeof(o.workload), "%s/cpa-workload-nofp", self);
	snprintf(o.workload_fixed, sizeof(o.workload_fixed), "%s/cpa-workload-nofp", self);

	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		int r = 0;

		switch (c) {
		case O_FREQ:
			r = parse_list("freq", optarg, 1, 10000, o.freqs, &o.n_freqs);
			break;
		case O_STACK:
			r = parse_list("stack_size", optarg, 4096, 65536, o.stacks, &o.n_stacks);
			for (unsigned int i = 0; !r && i < o.n_stacks; i++)
				if (o.stacks[i] % 4096) {
					bench_say("--stack_size: %u is not a multiple of 4096",
						  o.stacks[i]);
					r = -EINVAL;
				}
			break;
		case O_REPS:
			r = parse_u("reps", optarg, 1, 64, &o.reps);
			break;
		case O_SECONDS:
			r = parse_d("seconds", optarg, 2, 86400, &o.seconds);
			break;
		case O_WARMUP:
			r = parse_d("warmup", optarg, 0, 3600, &o.warmup);
			break;
		case O_THREADS:
			r = parse_u("threads", optarg, 0, 64, &o.threads);
			break;
		case O_PERF:
			o.perf = true;
			break;
		case O_SWEEP:
			o.sweep = true;
			break;
		case O_SWEEP_SECONDS:
			r = parse_d("sweep_seconds", optarg, 3, 3600, &o.sweep_seconds);
			break;
		case O_IDLE:
			o.idle = true;
			break;
		case O_IDLE_SECONDS:
			r = parse_d("idle_seconds", optarg, 2, 86400, &o.idle_seconds);
			break;
		case O_IDLE_ALL:
			o.idle = o.idle_all = true;
			break;
		case O_AB:
			o.ab = true;
			break;
		case O_JSON:
			o.json = optarg;
			break;
		case O_PERF_STAGES:
			o.perf_stages = optarg;
			break;
		case O_MONITOR_ARGS:
			o.monitor_args = optarg;
			break;
		case O_SCHED_MODES:
			o.sched_modes = optarg;
			break;
		case O_REC_MODES:
			o.rec_modes = optarg;
			break;
		case O_CPA:
			snprintf(o.cpa, sizeof(o.cpa), "%s", optarg);
			break;
		case O_WORKLOAD:
			snprintf(o.workload, sizeof(o.workload), "%s", optarg);
			break;
		case O_LOOPS: {
			unsigned int v;

			r = parse_u("loops", optarg, 1, 1000000000, &v);
			o.loops = v;
			break;
		}
		case O_WHOLE_MACHINE:
			o.pid_filter = false;
			break;
		case O_PID:
			o.pid_filter = true;
			break;
		case O_DIR:
			o.base_dir = optarg;
			break;
		case O_KEEP:
			o.keep = true;
			break;
		case O_PINGPONG:
			o.pingpong = true;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
		if (r < 0)
			return r;
	}
	if (optind < argc)
		o.cmd = &argv[optind];
	if (o.pingpong && !o.cmd) {
		/* Two threads bouncing a byte over pipes: every round trip is two
		 * context switches, the worst case for --offcpu. */
		snprintf(o.pp_exe, sizeof(o.pp_exe), "%s/cpa-wl-offcpu", self);
		snprintf(o.pp_secs, sizeof(o.pp_secs), "%g", o.seconds);
		o.pp_argv[0] = o.pp_exe;
		o.pp_argv[1] = "--pingpong";
		o.pp_argv[2] = "--no-wait";
		o.pp_argv[3] = "--seconds";
		o.pp_argv[4] = o.pp_secs;
		o.pp_argv[5] = NULL;
		o.cmd = o.pp_argv;
	}
	if (!o.sweep && !o.idle)
		o.ab = true;
	if (!o.n_freqs && o.ab && !o.sweep) {
		o.freqs[0] = 49, o.freqs[1] = 99;
		o.n_freqs = 2;
	}
	if (o.warmup + 1 >= o.seconds && !o.cmd && o.ab) {
		bench_say("--warmup %.1f leaves no steady window in --seconds %.1f", o.warmup,
			  o.seconds);
		return -EINVAL;
	}
	if (access(o.cpa, X_OK) < 0) {
		bench_say("cpa executable '%s': %s (build it, or give --cpa)", o.cpa,
			  strerror(errno));
		return -ENOENT;
	}
	if (!o.cmd && o.loops && o.ab && access(o.workload_fixed, X_OK) < 0) {
		bench_say("fixed-work workload '%s': %s (build cpa-workload-nofp)",
			  o.workload_fixed, strerror(errno));
		return -ENOENT;
	}
	if (!o.cmd && ((o.ab && !o.loops) || o.sweep) && access(o.workload, X_OK) < 0) {
		bench_say(
			"workload '%s': %s (build cpa-workload-nofp, or give --workload or -- CMD)",
			o.workload, strerror(errno));
		return -ENOENT;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int ab_freqs[MAX_LIST], ab_nf, ab_stacks[MAX_LIST], ab_ns;
	int stats_fd = -1, err = 0;

	if (parse_opts(argc, argv) < 0)
		return 2;
	if (geteuid() != 0)
		bench_say(
			"not root: cpa monitor needs BPF and the bench reads other processes' /proc");
	bench_catch_signals();

	/* bpf_stats on for as long as this fd lives: the kernel turns them off again when the
	 * last such fd closes, also when the bench is killed (unlike the sysctl). */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (stats_fd < 0)
		bench_say("BPF_ENABLE_STATS: %s; BPF time will read 0 unless "
			  "kernel.bpf_stats_enabled=1",
			  strerror(-stats_fd));
	if (o.base_dir) {
		snprintf(run_dir, sizeof(run_dir), "%s", o.base_dir);
		if (mkdir(run_dir, 0755) < 0 && errno != EEXIST) {
			bench_say("--dir '%s': %s", run_dir, strerror(errno));
			return 1;
		}
	} else {
		snprintf(run_dir, sizeof(run_dir), "/tmp/bench_overhead.XXXXXX");
		if (!mkdtemp(run_dir)) {
			bench_say("mkdtemp: %s", strerror(errno));
			return 1;
		}
	}
	if (o.perf_stages && mkdir(o.perf_stages, 0755) < 0 && errno != EEXIST) {
		bench_say("--perf_stages '%s': %s", o.perf_stages, strerror(errno));
		return 1;
	}
	if (o.json) {
		json = fopen(o.json, "we");
		if (!json) {
			bench_say("--json '%s': %s", o.json, strerror(errno));
			return 1;
		}
		fprintf(json, "{\"bench\": \"overhead\", \"workload\": ");
		json_str(json, o.cmd ? o.cmd[0] : o.loops ? o.workload_fixed : o.workload);
		fprintf(json,
			", \"seconds\": %g, \"loops\": %lu, \"warmup\": %g, \"cpus\": %ld, "
			"\"results\": [",
			o.seconds, o.loops, o.warmup, sysconf(_SC_NPROCESSORS_ONLN));
	}
	printf("bench_overhead: %s, %ld CPUs, workload %s%s, warmup %.0f s, %s, results in %s\n",
	       o.cpa, sysconf(_SC_NPROCESSORS_ONLN),
	       o.cmd	 ? o.cmd[0]
	       : o.loops ? o.workload_fixed
			 : o.workload,
	       o.cmd ? " (user command)" : "", o.warmup,
	       o.pid_filter ? "cpa monitor --pid <workload>" : "whole machine", run_dir);
	fflush(stdout);

	ab_nf = o.n_freqs, ab_ns = o.n_stacks;
	memcpy(ab_freqs, o.freqs, sizeof(ab_freqs));
	memcpy(ab_stacks, o.stacks, sizeof(ab_stacks));
	if (o.ab) {
		if (!ab_nf)
			ab_freqs[0] = 49, ab_freqs[1] = 99, ab_nf = 2;
		if (!ab_ns)
			ab_stacks[0] = 8192, ab_ns = 1;
		for (unsigned int s = 0; s < ab_ns && !err && !bench_interrupted; s++)
			for (unsigned int f = 0; f < ab_nf && !err && !bench_interrupted; f++) {
				struct config c = {.freq = ab_freqs[f], .stack = ab_stacks[s]};

				err = o.sched_modes || o.rec_modes
					      ? mode_modes(&c, o.sched_modes != NULL)
					      : mode_ab(&c);
			}
	}
	if (!err && o.sweep && !bench_interrupted) {
		err = mode_sweep();
	}
	if (!err && o.idle && !bench_interrupted)
		err = mode_idle();
	if (json) {
		fprintf(json, "\n]}\n");
		fclose(json);
	}
	if (stats_fd >= 0)
		close(stats_fd);
	if (!o.keep && !o.base_dir)
		rm_rf(run_dir);
	if (bench_interrupted)
		return 130;
	return err < 0 ? 1 : 0;
}
