// SPDX-License-Identifier: MIT
/*
 * bench_churn: cpa on a machine where processes come and go (issue 9,
 * docs/bench.md), next to `perf record -a --call-graph dwarf` in the same
 * run, on the same workload, at the same time:
 *
 *   - a parallel build of this repository (`cmake --build -j2` of a fresh
 *     configure in a scratch directory: compilers, assemblers, linkers,
 *     cmake itself), stopped when the window ends;
 *   - a fork/exec storm of short-lived Debian programs (gzip, xz, bzip2,
 *     sed, awk, sort, sha256sum, perl) on generated text, each living
 *     ~20-300 ms, one after the other.
 *
 * cpa monitor runs on the whole machine (no --pid). Over the window it reads
 * each cpa process's CPU (schedstat; user/system split from /proc/PID/stat),
 * PSS / RSS (smaps_rollup, every second: the maximum is printed) and peak RSS
 * (VmHWM), BPF run time (bpf_stats) and capture's sample counter; after it,
 * `cpa show` of the whole store and `perf script` of the whole perf.data are
 * folded alike (bench/fold.c) for the fidelity half: leaf module known,
 * rooted stacks, cpa's stop reasons.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "benchutil.h"
#include "fold.h"
#include "overhead.h"
#include "shm/counters.h"
#include "shm/stage.h"

#define NSTAGE	 SHM_STAGE_MAX
#define NPROC	 (NSTAGE + 1) /* the four stages and the monitor */
#define P_MON	 NSTAGE
#define TOP_COMM 8

static const char *const pname[NPROC] = {"capture", "unwindd", "symd", "storer", "monitor"};

static struct {
	double seconds, warmup;
	unsigned int freq, stack, jobs;
	bool build, storm, perf, keep, mem, freq_set, seconds_set, short_storm;
	double max_growth, mem_slack; /* --mem: checks, < 0 = none */
	double journal_excess;	      /* --mem: journal <= segments + this (MB), < 0 = none */
	unsigned int mem_cap;	      /* --mem_cap MB: --max_cache_size_mb, checked */
	const char *dir, *monitor_args, *perf_stages;
	char src[PATH_MAX], cpa[PATH_MAX + 8];
} o = {
	.seconds = 60,
	.freq = 99,
	.jobs = 2,
	.build = true,
	.storm = true,
	.perf = true,
	.max_growth = -1,
	.mem_slack = 48,
	.journal_excess = -1,
};

/* argv in its own process group (so the whole build can be stopped), stdout and stderr to
 * log (or /dev/null). */
static pid_t start_group(char *const argv[], const char *log)
{
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
			      0644);

		setpgid(0, 0);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execvp(argv[0], argv);
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

static void stop_group(pid_t pid, int sig)
{
	if (pid <= 0)
		return;
	kill(-pid, sig);
	for (int i = 0; i < 100; i++) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		usleep(100 * 1000);
	}
	kill(-pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* ---- the storm ----------------------------------------------------------------------------- */

struct storm_prog {
	const char *argv[7];
	const char *input; /* a slice of the generated text, sized for ~20-300 ms */
};

static const struct storm_prog storm[] = {
	{{"gzip", "-6", "-c", NULL}, "in-1m"},
	{{"xz", "-1", "-T1", "-c", NULL}, "in-256k"},
	{{"bzip2", "-c", NULL}, "in-1m"},
	{{"sed", "s/[0-9]/#/g", NULL}, "in-1m"},
	{{"awk", "{ s += length($0) } END { print s }", NULL}, "in-4m"},
	{{"sort", NULL}, "in-1m"},
	{{"sha256sum", NULL}, "in-4m"},
	{{"perl", "-ne", "$s += tr/0-9//; END { print $s }", NULL}, "in-4m"},
};

/* --short: the programs a build or a shell script runs again and again, each living a few
 * ms (gcc's driver, cc1 and as on a small C file; sh; coreutils): per sample, a new
 * process's cost dominates. */
static const struct storm_prog storm_short[] = {
	{{"gcc", "-O1", "-c", "-x", "c", "-", NULL}, "tiny.c"},
	{{"sh", "-c", "wc -l | cut -c1-3", NULL}, "in-256k"},
	{{"sort", "-u", NULL}, "in-16k"},
	{{"cat", NULL}, "in-256k"},
	{{"sh", "-c", "head -n 50 | tr a-z A-Z | md5sum", NULL}, "in-256k"},
	{{"expr", "7919", "*", "10007", NULL}, "in-16k"},
	{{"ls", "-l", "/usr/bin", NULL}, "in-16k"},
	{{"sha1sum", NULL}, "in-256k"},
};

/* The storm process: one program after the other until deadline_ns; it writes each
 * program's lifetime (ms, one per line) to the pipe fd out. */
_Noreturn static void storm_main(const char *dir, uint64_t deadline_ns, int out)
{
	char in[PATH_MAX + 16];
	unsigned int i = 0;
	FILE *f = fdopen(out, "w");

	signal(SIGTERM, SIG_DFL);
	if (chdir(dir) < 0) /* gcc -c writes its object there */
		_exit(1);
	while (clock_ns(CLOCK_MONOTONIC) < deadline_ns) {
		const struct storm_prog *p = o.short_storm
						     ? &storm_short[i++ % ARRAY_SIZE(storm_short)]
						     : &storm[i++ % ARRAY_SIZE(storm)];
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
		pid_t pid;

		snprintf(in, sizeof(in), "%s/%s", dir, p->input);
		pid = fork();
		if (pid < 0)
			_exit(1);
		if (pid == 0) {
			int fd = open(in, O_RDONLY | O_CLOEXEC), null = open("/dev/null", O_WRONLY);

			if (fd < 0 || null < 0)
				_exit(127);
			dup2(fd, 0);
			dup2(null, 1);
			dup2(null, 2);
			execvp(p->argv[0], (char *const *)p->argv);
			_exit(127);
		}
		waitpid(pid, NULL, 0);
		if (f)
			fprintf(f, "%.1f\n", (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e6);
	}
	if (f)
		fclose(f);
	_exit(0);
}

/* ---- the agent ------------------------------------------------------------------------------ */

struct agent {
	pid_t mon, pid[NPROC];
	struct shm_arena *arena;
	struct cost_bpf_set bpf;
	char store[PATH_MAX + 16], log[PATH_MAX + 16];
};

struct snap {
	uint64_t t_ns, samples, busy, total;
	struct cost_proc p[NPROC];
	bool ok[NPROC];
	struct cost_bpf bpf;
};

static int agent_start(struct agent *a, const char *dir)
{
	char freq[16], stack[16], cap[16], *argv[48], *extra = NULL;
	uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + 60 * NSEC_PER_SEC;
	int n = 0;

	snprintf(a->store, sizeof(a->store), "%s/store", dir);
	snprintf(a->log, sizeof(a->log), "%s/monitor.log", dir);
	snprintf(freq, sizeof(freq), "%u", o.freq);
	snprintf(stack, sizeof(stack), "%u", o.stack);
	argv[n++] = o.cpa;
	argv[n++] = "monitor";
	argv[n++] = "--store_dir";
	argv[n++] = a->store;
	argv[n++] = "-F";
	argv[n++] = freq;
	argv[n++] = "--log_print_cycles";
	argv[n++] = "0";
	if (o.stack) {
		argv[n++] = "--stack_size";
		argv[n++] = stack;
	}
	if (o.mem_cap) {
		snprintf(cap, sizeof(cap), "%u", o.mem_cap);
		argv[n++] = "--max_cache_size_mb";
		argv[n++] = cap;
	}
	if (o.monitor_args) {
		extra = strdup(o.monitor_args);
		for (char *save, *t = strtok_r(extra, " ", &save); t && n < 44;
		     t = strtok_r(NULL, " ", &save))
			argv[n++] = t;
	}
	argv[n] = NULL;
	a->mon = start_group(argv, a->log);
	free(extra);
	if (a->mon < 0)
		return a->mon;
	/* Every stage RUNNING, read through the monitor's arena. */
	while (!bench_interrupted && clock_ns(CLOCK_MONOTONIC) < deadline) {
		int running = 0;

		usleep(100 * 1000);
		if (waitpid(a->mon, NULL, WNOHANG) == a->mon) {
			a->mon = 0;
			bench_say("cpa monitor exited during start-up; see %s", a->log);
			return -ECHILD;
		}
		if (!a->arena && ovh_arena_open(a->mon, &a->arena) < 0)
			continue;
		for (int i = 0; i < NSTAGE; i++) {
			struct shm_stage *st = shm_arena__stage(a->arena, (enum shm_stage_id)i);

			running += shm_stage__state(st) == SHM_STATE_RUNNING;
			a->pid[i] = __atomic_load_n(&st->pid, __ATOMIC_RELAXED);
		}
		if (running == NSTAGE) {
			a->pid[P_MON] = a->mon;
			cost_bpf_find(a->pid[SHM_STAGE_CAPTURE], &a->bpf);
			return 0;
		}
	}
	bench_say("cpa monitor: stages not all running; see %s", a->log);
	return -ETIMEDOUT;
}

static void agent_snap(struct agent *a, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	s->t_ns = clock_ns(CLOCK_MONOTONIC);
	for (int i = 0; i < NPROC; i++)
		s->ok[i] = cost_proc_read(a->pid[i], &s->p[i]) == 0;
	s->samples = shm_stage__cnt(shm_arena__stage(a->arena, SHM_STAGE_CAPTURE), CAP_CNT_SAMPLES);
	cost_bpf_read(&a->bpf, &s->bpf);
	cost_machine_busy(&s->busy, &s->total);
}

/* What the window captured, processed: ring by ring, in pipeline order, until its consumer
 * has passed where its producer was once the previous ring was done (the whole machine
 * keeps sampling meanwhile, so "empty" may never come); at most 20 s in all. Returns how
 * long it took. */
static double agent_settle(struct agent *a)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC), end = t0 + 20 * NSEC_PER_SEC;

	for (unsigned int r = 0; r < shm_arena__nr_rings(a->arena); r++) {
		struct shm_ring_ctrl *c = shm_arena__ring_mem(a->arena, r, NULL);
		uint64_t mark = c ? __atomic_load_n(&c->prod_pos, __ATOMIC_RELAXED) : 0;

		while (c && !bench_interrupted && clock_ns(CLOCK_MONOTONIC) < end &&
		       __atomic_load_n(&c->cons_pos, __ATOMIC_RELAXED) < mark)
			usleep(20 * 1000);
	}
	return (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9;
}

static void agent_stop(struct agent *a)
{
	if (a->mon > 0) {
		kill(a->mon, SIGINT);
		for (int i = 0; i < 600 && waitpid(a->mon, NULL, WNOHANG) != a->mon; i++)
			usleep(100 * 1000);
		kill(a->mon, SIGKILL);
		waitpid(a->mon, NULL, WNOHANG);
		a->mon = 0;
	}
	shm_arena__free(a->arena);
	a->arena = NULL;
}

/* ---- report --------------------------------------------------------------------------------- */

static double pct(double a, double b)
{
	return b > 0 ? 100 * a / b : NAN;
}

static void print_fidelity(const struct fold_side *c, const struct fold_side *p)
{
	bool used[FOLD_MAX_NAMES] = {false};

	printf("\n  fidelity (the whole store / the whole perf.data) %12s %12s\n", "cpa",
	       o.perf ? "perf dwarf" : "");
	printf("  %-46s %12.0f %12.0f\n", "samples", c->samples, p->samples);
	printf("  %-46s %12.0f %12.0f\n", "samples with a user part", c->user, p->user);
	printf("  %-46s %11.2f%% %11.2f%%\n", "leaf module known (of those)",
	       pct(c->user_known_leaf, c->user), pct(p->user_known_leaf, p->user));
	printf("  %-46s %11.2f%% %11.2f%%\n", "leaf module unknown",
	       pct(c->user - c->user_known_leaf, c->user),
	       pct(p->user - p->user_known_leaf, p->user));
	printf("  %-46s %11.2f%% %11.2f%%\n", "rooted, user samples with unwind info (*)",
	       pct(c->user_cfi_rooted, c->user_cfi), pct(p->user_cfi_rooted, p->user_cfi));
	printf("  %-46s %11.2f%% %11.2f%%\n", "rooted, all samples", pct(c->complete, c->samples),
	       pct(p->complete, p->samples));
	printf("  (*) cpa: user samples not stopped at NO CFI or JIT; perf: every user sample\n");
	printf("  cpa's markers (share of all samples):\n");
	for (int i; (i = tally_top(&c->stops, used)) >= 0;)
		printf("    %-44s %11.2f%%\n", c->stops.names[i],
		       pct(c->stops.counts[i], c->samples));
	printf("  user samples with an unknown leaf module, by comm (top %d):\n", TOP_COMM);
	memset(used, 0, sizeof(used));
	for (int k = 0, i; k < TOP_COMM && (i = tally_top(&c->unknown_comm, used)) >= 0; k++)
		printf("    cpa  %-20s %8.0f of %.0f user samples\n", c->unknown_comm.names[i],
		       c->unknown_comm.counts[i], c->user);
	memset(used, 0, sizeof(used));
	for (int k = 0, i; k < TOP_COMM && (i = tally_top(&p->unknown_comm, used)) >= 0; k++)
		printf("    perf %-20s %8.0f of %.0f user samples\n", p->unknown_comm.names[i],
		       p->unknown_comm.counts[i], p->user);
}

static const char *verdict(double v, double goal)
{
	return isnan(v) ? "n/a" : v <= goal ? "ok" : "MISSED";
}

static void report(const struct agent *a, const struct snap *s0, const struct snap *s1,
		   const double *max_pss, const double *life, unsigned int n_life,
		   double perf_cpu_s, const struct fold_side *c, const struct fold_side *p)
{
	double win = (double)(s1->t_ns - s0->t_ns) / 1e9;
	double smp = (double)(s1->samples - s0->samples), tot = 0, tot_pss = 0;
	double bpf_runs = (double)(s1->bpf.sample_cnt - s0->bpf.sample_cnt);
	double unw_pss = NAN;

	printf("\n=== bench_churn: %.0f s window (+ catch-up), %u Hz, whole machine:%s%s ===\n",
	       win, o.freq, o.build ? " parallel build" : "", o.storm ? " + fork/exec storm" : "");
	if (o.warmup > 0)
		printf("  after a %.0f s warm-up on the same workload (binaries known to the agent;\n"
		       "  cpa's fidelity counts the store's warm-up samples too, perf's its own)\n",
		       o.warmup);
	if (o.build)
		printf("  build: -j%u of %s (stopped at the window's end)\n", o.jobs, o.src);
	if (n_life)
		printf("  storm: %u programs, lifetime min %.0f / median %.0f / max %.0f ms\n",
		       n_life, life[0], life[n_life / 2], life[n_life - 1]);
	printf("  machine busy CPUs %.2f; samples captured in the window %.0f (%.1f/s)\n",
	       (double)(s1->busy - s0->busy) / (double)(s1->total - s0->total) *
		       (double)sysconf(_SC_NPROCESSORS_ONLN),
	       smp, smp / win);
	printf("  %-8s %10s %10s %10s %8s %8s %9s %9s\n", "process", "cpu_us/smp", "user_us",
	       "sys_us", "cores", "PSS_MB", "maxPSS_MB", "peakRSS");
	for (int i = 0; i < NPROC; i++) {
		const struct cost_proc *x = &s0->p[i], *y = &s1->p[i];
		double cpu, ticks, uf;

		if (!s0->ok[i] || !s1->ok[i]) {
			printf("  %-8s (restarted or gone during the window)\n", pname[i]);
			continue;
		}
		cpu = (double)(y->cpu_ns - x->cpu_ns) / 1e3;
		ticks = (double)(y->utime + y->stime - x->utime - x->stime);
		uf = ticks > 0 ? (double)(y->utime - x->utime) / ticks : NAN;
		tot += cpu;
		tot_pss += max_pss[i];
		if (i == SHM_STAGE_UNWINDD)
			unw_pss = max_pss[i];
		printf("  %-8s %10.1f %10.1f %10.1f %8.4f %8.1f %9.1f %9.1f\n", pname[i], cpu / smp,
		       cpu * uf / smp, cpu * (1 - uf) / smp, cpu / 1e6 / win,
		       (double)y->pss_kb / 1024, max_pss[i], (double)y->hwm_kb / 1024);
	}
	printf("  %-8s %10.1f %10s %10s %8.4f %8s %9.1f\n", "total", tot / smp, "", "",
	       tot / 1e6 / win, "", tot_pss);
	printf("  BPF: cpa_on_cpu %.2f us/run (%.0f ns, %.0f runs), all cpa programs %.2f us/sample\n",
	       bpf_runs > 0 ? (double)(s1->bpf.sample_ns - s0->bpf.sample_ns) / 1e3 / bpf_runs
			    : NAN,
	       bpf_runs > 0 ? (double)(s1->bpf.sample_ns - s0->bpf.sample_ns) / bpf_runs : NAN,
	       bpf_runs, (double)(s1->bpf.all_ns - s0->bpf.all_ns) / 1e3 / smp);
	if (o.perf)
		printf("  perf record -a --call-graph dwarf: %.3f s of CPU recording (%.1f us per "
		       "sample of its own), perf script afterwards not counted\n",
		       perf_cpu_s, p->samples > 0 ? perf_cpu_s * 1e6 / p->samples : NAN);
	print_fidelity(c, p);
	printf("  goals (issue 9):\n");
	printf("    cpa CPU per sample under churn <= 30 us ..... %8.1f  %s\n", tot / smp,
	       verdict(tot / smp, 30));
	printf("    unwindd PSS under churn <= 20 MB (max) ...... %8.1f  %s\n", unw_pss,
	       verdict(unw_pss, 20));
	printf("    unknown leaf module <= 1 %% (perf: %.2f %%) .. %8.2f  %s\n",
	       pct(p->user - p->user_known_leaf, p->user),
	       pct(c->user - c->user_known_leaf, c->user),
	       verdict(pct(c->user - c->user_known_leaf, c->user), 1));
	(void)a;
}

/* ---- the run -------------------------------------------------------------------------------- */

static int run(const char *dir)
{
	/* Static, not on the stack: the bench is sampled with the rest of the
	 * machine, and 40 KB of path buffers in main's frame (run() is inlined)
	 * put its own samples past the default 32 KiB copy cap: `STACK READ`,
	 * 2.4 % of a churn run's samples, all of them the bench's. */
	static struct fold_side c, p;
	static char bdir[PATH_MAX + 16], blog[PATH_MAX + 16], pdata[PATH_MAX + 16],
		ptxt[PATH_MAX + 16], prof[PATH_MAX + 16], plog[PATH_MAX + 16];
	static double life[65536];
	static struct agent a;
	char freq[16], jobs[16];
	double max_pss[NPROC] = {0}, perf_cpu_s = NAN, settle_s;
	struct snap s0, s1;
	pid_t build = 0, storm_pid = 0, perf = 0, pstages = 0;
	unsigned int n_life = 0;
	int life_pipe[2] = {-1, -1}, err;
	uint64_t end;
	FILE *lf;

	snprintf(bdir, sizeof(bdir), "%s/build", dir);
	snprintf(blog, sizeof(blog), "%s/build.log", dir);
	snprintf(pdata, sizeof(pdata), "%s/perf.data", dir);
	snprintf(ptxt, sizeof(ptxt), "%s/perf.txt", dir);
	snprintf(prof, sizeof(prof), "%s/cpa.prof", dir);
	snprintf(plog, sizeof(plog), "%s/perf.log", dir);
	snprintf(freq, sizeof(freq), "%u", o.freq);
	snprintf(jobs, sizeof(jobs), "-j%u", o.jobs);

	/* Inputs and the build tree's configure come before the window. */
	bench_sh(
		"cd '%s' && test -s in.txt || { seq -f 'sample %%g of the unwind frame in a ring' 1 "
		"200000 | awk '{ print $0, NR * 7919 %% 10007 }' > in.txt && head -c 1048576 in.txt "
		"> in-1m && head -c 4194304 in.txt > in-4m && head -c 262144 in.txt > in-256k && head -c "
		"16384 in.txt > in-16k && printf 'int f(int x) { return x * 3; }\\n' > tiny.c; }",
		dir);
	if (o.build) {
		bench_say("configuring %s in %s", o.src, bdir);
		if (bench_sh("cmake -S '%s' -B '%s' -DCMAKE_BUILD_TYPE=RelWithDebInfo "
			     "-DCPA_BUILD_TESTS=OFF > '%s' 2>&1",
			     o.src, bdir, blog) != 0) {
			bench_say("cmake configure failed; see %s", blog);
			return -EIO;
		}
		bench_sh("cmake --build '%s' --target clean > /dev/null 2>&1", bdir);
	}

	err = agent_start(&a, dir);
	if (err < 0)
		goto out;
	if (o.perf) {
		/* -B: no build-id pass over the data at the end (perf 6.1 aborted in
		 * it after long churn runs, leaving the header unwritten); perf script
		 * finds the binaries by path, as it does for DSOs anyway. */
		char *argv[] = {"perf",
				"record",
				"-q",
				"-a",
				"-B",
				"-N",
				"-e",
				"cpu-clock",
				"-F",
				freq,
				"--call-graph=dwarf",
				"-o",
				pdata,
				NULL};

		perf = start_group(argv, plog);
		sleep(2); /* its events open */
	}
	if (o.warmup > 0) {
		/* The same workload, unmeasured: the agent meets its binaries (compilers,
		 * the storm's programs) before the window, as an agent running for days
		 * has; the build tree is cleaned again so the window rebuilds it all. */
		uint64_t wend = clock_ns(CLOCK_MONOTONIC) + (uint64_t)(o.warmup * 1e9);
		int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);

		bench_say("warm-up: %.0f s of the same workload, not measured", o.warmup);
		if (o.build) {
			char *argv[] = {"cmake", "--build", bdir, jobs, NULL};

			build = start_group(argv, blog);
		}
		if (o.storm && devnull >= 0) {
			storm_pid = fork();
			if (storm_pid == 0)
				storm_main(dir, wend, devnull);
		}
		while (!bench_interrupted && clock_ns(CLOCK_MONOTONIC) < wend)
			sleep(1);
		stop_group(build, SIGTERM);
		build = 0;
		if (storm_pid > 0)
			waitpid(storm_pid, NULL, 0);
		storm_pid = 0;
		if (devnull >= 0)
			close(devnull);
		if (o.build)
			bench_sh("cmake --build '%s' --target clean > /dev/null 2>&1", bdir);
		agent_settle(&a);
	}
	if (o.perf_stages) {
		char pids[128];
		int k = 0;

		for (int i = 0; i < NPROC; i++)
			k += snprintf(pids + k, sizeof(pids) - (size_t)k, "%s%d", i ? "," : "",
				      a.pid[i]);
		{
			char *argv[] = {"perf", "record", "-q", "-e", "cpu-clock",
					"-F",	"4999",	  "-g", "-o", (char *)o.perf_stages,
					"-p",	pids,	  NULL};

			pstages = start_group(argv, NULL);
		}
	}
	agent_snap(&a, &s0);
	end = s0.t_ns + (uint64_t)(o.seconds * 1e9);
	bench_say("window: %.0f s, cpa monitor -F %u whole machine%s", o.seconds, o.freq,
		  o.perf ? " + perf record -a --call-graph dwarf" : "");
	if (o.build) {
		char *argv[] = {"cmake", "--build", bdir, jobs, NULL};

		build = start_group(argv, blog);
	}
	if (o.storm && pipe2(life_pipe, O_CLOEXEC) == 0) {
		storm_pid = fork();
		if (storm_pid == 0) {
			close(life_pipe[0]);
			storm_main(dir, end, life_pipe[1]);
		}
		close(life_pipe[1]);
	}
	while (!bench_interrupted && clock_ns(CLOCK_MONOTONIC) < end) {
		sleep(1);
		for (int i = 0; i < NPROC; i++) {
			struct cost_proc m = {0};

			if (cost_proc_mem(a.pid[i], &m) == 0) {
				max_pss[i] = fmax(max_pss[i], (double)m.pss_kb / 1024);
			}
		}
	}
	stop_group(build, SIGTERM);
	if (storm_pid > 0 && bench_interrupted)
		kill(storm_pid, SIGTERM);
	if (storm_pid > 0) {
		lf = fdopen(life_pipe[0], "r");
		while (lf && n_life < ARRAY_SIZE(life) && fscanf(lf, "%lf", &life[n_life]) == 1)
			n_life++;
		if (lf)
			fclose(lf);
		waitpid(storm_pid, NULL, 0);
		qsort(life, n_life, sizeof(life[0]), bench_cmp_double);
	}
	/* What the window captured is processed before the second reading. */
	settle_s = agent_settle(&a);
	agent_snap(&a, &s1);
	stop_group(pstages, SIGINT);
	pstages = 0;
	for (int i = 0; i < NPROC; i++)
		if (s1.ok[i])
			cost_proc_mem(a.pid[i], &s1.p[i]);
	if (perf > 0) {
		struct rusage ru;

		int status = 0;

		kill(perf, SIGINT);
		/* perf record re-raises the SIGINT it stopped on: status 2 is its normal end */
		if (wait4(perf, &status, 0, &ru) == perf && status && status != SIGINT)
			bench_say("perf record ended with status 0x%x; see %s", status, plog);
		if (status == 0 || status == SIGINT)
			perf_cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
				     (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
		perf = 0;
	}
	agent_stop(&a);
	if (bench_interrupted) {
		err = -EINTR;
		goto out;
	}
	bench_say("folding the store and perf.data (perf script can take a minute)");
	err = ovh_cpa_export(o.cpa, a.store, prof);
	if (err < 0)
		bench_say("cpa show of %s: %s", a.store, strerror(-err));
	fold_cpa_file(prof, &c);
	if (o.perf) {
		bench_sh("perf script -i '%s' -F comm,pid,tid,ip,sym,dso > '%s' 2>/dev/null", pdata,
			 ptxt);
		fold_perf_file(ptxt, &p);
	}
	bench_say("the pipeline caught up %.1f s after the window", settle_s);
	report(&a, &s0, &s1, max_pss, life, n_life, perf_cpu_s, &c, &p);
	fflush(stdout);
	err = 0;
out:
	stop_group(build, SIGKILL);
	stop_group(pstages, SIGINT);
	if (perf > 0)
		stop_group(perf, SIGINT);
	agent_stop(&a);
	fold_side_free(&c);
	fold_side_free(&p);
	return err;
}

/* ---- --mem: RSS under a storm ---------------------------------------------------------------- */

#define MEM_MAX_SAMPLES 4096

/* Bytes of the files in dir (and, depth 1, its subdirectories) whose name starts with prefix
 * (or, with suffix set, ends with it); *largest: the biggest one. */
static uint64_t mem_files(const char *dir, const char *prefix, const char *suffix,
			  uint64_t *largest)
{
	char cmd[PATH_MAX + 256], line[64];
	uint64_t sum = 0;
	FILE *f;

	*largest = 0;
	snprintf(cmd, sizeof(cmd),
		 "find '%s' -maxdepth 2 -type f -name '%s*%s' -printf '%%s\\n' 2>/dev/null", dir,
		 prefix, suffix);
	f = popen(cmd, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		uint64_t v = strtoull(line, NULL, 10);

		sum += v;
		if (v > *largest)
			*largest = v;
	}
	pclose(f);
	return sum;
}

/*
 * The real monitor (whole machine, -F o.freq) under the fork/exec storm for o.seconds;
 * each stage's RSS (smaps_rollup) every second (the series in DIR/mem.tsv). Prints start /
 * mid / end per stage, the growth of each half and each half's peak; with --max_growth
 * (end vs mid) and --mem_cap, checks them (exit 1).
 */
static int run_mem(const char *dir)
{
	static const int st[] = {SHM_STAGE_UNWINDD, SHM_STAGE_SYMD, SHM_STAGE_STORER};
	static double rss[ARRAY_SIZE(st)][MEM_MAX_SAMPLES], cache[ARRAY_SIZE(st)][MEM_MAX_SAMPLES];
	/* the caches' gauges (the storer has none) */
	static const int gauge[] = {UNW_CNT_CACHE_BYTES, SYM_CNT_CACHE_BYTES, -1};
	static struct agent a;
	unsigned int n = 0, programs = 0;
	uint64_t start, end, jr_max, seg_max, jr, seg;
	int piped, fails = 0, err;
	pid_t storm_pid = 0;
	char line[64], tsv[PATH_MAX + 16];
	FILE *lf = NULL, *tf;
	int life_pipe[2] = {-1, -1};

	bench_sh(
		"cd '%s' && test -s in.txt || { seq -f 'sample %%g of the unwind frame in a ring' 1 "
		"200000 | awk '{ print $0, NR * 7919 %% 10007 }' > in.txt && head -c 1048576 in.txt "
		"> in-1m && head -c 4194304 in.txt > in-4m && head -c 262144 in.txt > in-256k && head -c "
		"16384 in.txt > in-16k && printf 'int f(int x) { return x * 3; }\\n' > tiny.c; }",
		dir);
	err = agent_start(&a, dir);
	if (err < 0)
		goto out;
	piped = pipe2(life_pipe, O_CLOEXEC);
	start = clock_ns(CLOCK_MONOTONIC) + (uint64_t)(o.warmup * 1e9);
	end = start + (uint64_t)(o.seconds * 1e9);
	bench_say("memory: %.0f s of fork/exec storm (after %.0f s of it unmeasured), cpa monitor "
		  "-F %u whole machine, cache cap %u MiB",
		  o.seconds, o.warmup, o.freq, o.mem_cap ? o.mem_cap : 1024);
	if (piped == 0) {
		storm_pid = fork();
		if (storm_pid == 0) {
			close(life_pipe[0]);
			storm_main(dir, end, life_pipe[1]);
		}
		close(life_pipe[1]);
	}
	while (!bench_interrupted && clock_ns(CLOCK_MONOTONIC) < start)
		usleep(100 * 1000);
	for (;;) {
		bool gone = false;

		for (unsigned int i = 0; i < ARRAY_SIZE(st); i++) {
			struct cost_proc m = {0};

			if (cost_proc_mem(a.pid[st[i]], &m) < 0)
				gone = true;
			rss[i][n] = (double)m.rss_kb / 1024;
			cache[i][n] = gauge[i] < 0
					      ? NAN
					      : (double)shm_stage__cnt(
							shm_arena__stage(a.arena,
									 (enum shm_stage_id)st[i]),
							(unsigned int)gauge[i]) /
							1048576;
		}
		if (gone) {
			bench_say("a stage restarted or went away; see %s", a.log);
			err = -ECHILD;
			goto out;
		}
		if (++n >= MEM_MAX_SAMPLES || bench_interrupted || clock_ns(CLOCK_MONOTONIC) >= end)
			break;
		sleep(1);
	}
	if (storm_pid > 0 && bench_interrupted)
		kill(storm_pid, SIGTERM);
	if (storm_pid > 0) {
		lf = fdopen(life_pipe[0], "r");
		while (lf && fgets(line, sizeof(line), lf))
			programs++;
		if (lf)
			fclose(lf);
		waitpid(storm_pid, NULL, 0);
		storm_pid = 0;
	}
	snprintf(tsv, sizeof(tsv), "%s/mem.tsv", dir);
	tf = fopen(tsv, "w");
	for (unsigned int k = 0; tf && k < n; k++)
		fprintf(tf, "%u\t%.1f\t%.1f\t%.1f\n", k, rss[0][k], rss[1][k], rss[2][k]);
	if (tf)
		fclose(tf);
	agent_settle(&a);
	jr = mem_files(a.store, ".storer-dict-", "", &jr_max);
	seg = mem_files(a.store, "", ".cps", &seg_max);
	agent_stop(&a);
	if (bench_interrupted) {
		err = -EINTR;
		goto out;
	}
	printf("\n=== bench_churn --mem: %.0f s of fork/exec storm (%u programs), %u Hz, whole "
	       "machine, cache cap %u MiB%s ===\n",
	       o.seconds, programs, o.freq, o.mem_cap ? o.mem_cap : 1024,
	       o.mem_cap ? " (--max_cache_size_mb)" : " (default)");
	if (o.warmup > 0)
		printf("  after %.0f s of the same storm, not measured\n", o.warmup);
	printf("  RSS MB, sampled every second (start = 0 s, mid = %u s, end = %u s); peak: the\n"
	       "  highest sample of each half; growth: end vs mid, peak: 2nd half's vs 1st's\n",
	       n / 2, n - 1);
	printf("  %-8s %7s %7s %7s %7s %7s %9s %9s %9s   %s\n", "stage", "start", "mid", "end",
	       "peak 1", "peak 2", "1st half", "2nd half", "peak", "cache_bytes MB: mid, end");
	for (unsigned int i = 0; i < ARRAY_SIZE(st); i++) {
		double s0 = rss[i][0], sm = rss[i][n / 2], se = rss[i][n - 1], p1 = 0, p2 = 0;
		double g2 = pct(se - sm, sm), gp;

		for (unsigned int k = 0; k < n; k++) {
			if (k <= n / 2)
				p1 = fmax(p1, rss[i][k]);
			if (k >= n / 2)
				p2 = fmax(p2, rss[i][k]);
		}
		gp = pct(p2 - p1, p1);
		printf("  %-8s %7.1f %7.1f %7.1f %7.1f %7.1f %+8.1f%% %+8.1f%% %+8.1f%%   %.1f, %.1f\n",
		       pname[st[i]], s0, sm, se, p1, p2, pct(sm - s0, s0), g2, gp, cache[i][n / 2],
		       cache[i][n - 1]);
		if (o.max_growth >= 0 && !(g2 <= o.max_growth)) {
			printf("  FAIL: %s grew %.1f %% in the second half (at most %.1f %%)\n",
			       pname[st[i]], g2, o.max_growth);
			fails++;
		}
		if (o.mem_cap && fmax(p1, p2) > o.mem_cap + o.mem_slack) {
			printf("  FAIL: %s RSS %.1f MB above the cap %u MB + %.0f MB\n",
			       pname[st[i]], fmax(p1, p2), o.mem_cap, o.mem_slack);
			fails++;
		}
	}
	printf("  dictionary journal %.2f MB; segments %.2f MB (largest %.2f MB)\n",
	       (double)jr / 1e6, (double)seg / 1e6, (double)seg_max / 1e6);
	if (o.journal_excess >= 0 && (double)jr > (double)seg + o.journal_excess * 1e6) {
		printf("  FAIL: the journal is more than the segments + %.1f MB\n",
		       o.journal_excess);
		fails++;
	}
	fflush(stdout);
	err = fails ? -EDOM : 0;
out:
	if (storm_pid > 0) {
		kill(storm_pid, SIGTERM);
		waitpid(storm_pid, NULL, 0);
	}
	agent_stop(&a);
	return err;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: bench_churn [options]\n"
		"  cpa monitor (whole machine) and perf record -a --call-graph dwarf at once on a\n"
		"  churn workload: a parallel build of this repository and a fork/exec storm of\n"
		"  short-lived Debian programs (docs/bench.md). Root.\n"
		"  --seconds S        the window (default 60)\n"
		"  --warmup S         run the workload S seconds before the window, unmeasured:\n"
		"                     the cost of an agent that knows the binaries already\n"
		"  --freq HZ          both profilers' rate (default 99)\n"
		"  --stack_size B     cpa monitor --stack_size (default: cpa's)\n"
		"  --jobs N           cmake --build -jN (default 2)\n"
		"  --no_build         storm only\n"
		"  --no_storm         build only\n"
		"  --short            the storm runs programs of a few ms instead (gcc -c of a\n"
		"                     small file, sh, coreutils): the cost of new processes\n"
		"  --no_perf          cpa only\n"
		"  --src DIR          the repository to build (default: this bench's source tree)\n"
		"  --monitor_args STR extra `cpa monitor` options, blank separated\n"
		"  --cpa PATH         cpa executable (default: next to this one)\n"
		"  --dir DIR          scratch directory (default /tmp/bench_churn.XXXXXX)\n"
		"  --keep             keep the scratch directory (store, perf.data, logs)\n"
		"  --perf_stages FILE perf record -g -F 4999 of the five cpa processes over the\n"
		"                     window into FILE (it inflates their CPU: for proportions)\n"
		"  --mem              memory under churn instead: the storm alone, -F 499, 160 s\n"
		"                     (unless given; --warmup S: S s of it before, unmeasured);\n"
		"                     unwindd's, symd's and the storer's RSS every second,\n"
		"                     start / mid / end, the growth of each half, each half's peak\n"
		"  --max_growth PCT   --mem: exit 1 if a stage grew more than PCT %% in the 2nd half\n"
		"                     (end vs mid)\n"
		"  --mem_cap MB       --mem: cpa monitor --max_cache_size_mb MB; exit 1 if a stage's\n"
		"                     RSS went above MB + --mem_slack MB (default 48)\n"
		"  --max_journal_excess MB  --mem: exit 1 if the dictionary journal is larger\n"
		"                     than the segments + MB (it serves them: in proportion)\n");
}

int main(int argc, char **argv)
{
	enum {
		O_NO_BUILD = 256,
		O_WARMUP,
		O_NO_STORM,
		O_NO_PERF,
		O_SRC,
		O_MARGS,
		O_CPA,
		O_DIR,
		O_KEEP,
		O_PERF_STAGES,
		O_MEM,
		O_MAX_GROWTH,
		O_MEM_CAP,
		O_MEM_SLACK,
		O_JOURNAL,
		O_SHORT
	};
	static const struct option lo[] = {
		{"seconds", required_argument, NULL, 's'},
		{"warmup", required_argument, NULL, O_WARMUP},
		{"freq", required_argument, NULL, 'F'},
		{"stack_size", required_argument, NULL, 'k'},
		{"jobs", required_argument, NULL, 'j'},
		{"no_build", no_argument, NULL, O_NO_BUILD},
		{"no_storm", no_argument, NULL, O_NO_STORM},
		{"no_perf", no_argument, NULL, O_NO_PERF},
		{"src", required_argument, NULL, O_SRC},
		{"monitor_args", required_argument, NULL, O_MARGS},
		{"cpa", required_argument, NULL, O_CPA},
		{"dir", required_argument, NULL, O_DIR},
		{"keep", no_argument, NULL, O_KEEP},
		{"perf_stages", required_argument, NULL, O_PERF_STAGES},
		{"mem", no_argument, NULL, O_MEM},
		{"max_growth", required_argument, NULL, O_MAX_GROWTH},
		{"mem_cap", required_argument, NULL, O_MEM_CAP},
		{"mem_slack", required_argument, NULL, O_MEM_SLACK},
		{"max_journal_excess", required_argument, NULL, O_JOURNAL},
		{"short", no_argument, NULL, O_SHORT},
		{"help", no_argument, NULL, 'h'},
		{0},
	};
	static char self[PATH_MAX], dir[PATH_MAX];
	int c, stats_fd, err;
	ssize_t n;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return 1;
	self[n] = 0;
	*strrchr(self, '/') = 0;
	snprintf(o.cpa, sizeof(o.cpa), "%s/cpa", self);
	snprintf(o.src, sizeof(o.src), "%s", CPA_SOURCE_DIR);
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 's':
			o.seconds = strtod(optarg, NULL);
			o.seconds_set = true;
			break;
		case O_WARMUP:
			o.warmup = strtod(optarg, NULL);
			break;
		case 'F':
			o.freq = (unsigned int)strtoul(optarg, NULL, 10);
			o.freq_set = true;
			break;
		case 'k':
			o.stack = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case 'j':
			o.jobs = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case O_NO_BUILD:
			o.build = false;
			break;
		case O_NO_STORM:
			o.storm = false;
			break;
		case O_NO_PERF:
			o.perf = false;
			break;
		case O_SRC:
			snprintf(o.src, sizeof(o.src), "%s", optarg);
			break;
		case O_MARGS:
			o.monitor_args = optarg;
			break;
		case O_CPA:
			snprintf(o.cpa, sizeof(o.cpa), "%s", optarg);
			break;
		case O_DIR:
			o.dir = optarg;
			break;
		case O_KEEP:
			o.keep = true;
			break;
		case O_PERF_STAGES:
			o.perf_stages = optarg;
			break;
		case O_MEM:
			o.mem = true;
			break;
		case O_MAX_GROWTH:
			o.max_growth = strtod(optarg, NULL);
			break;
		case O_MEM_CAP:
			o.mem_cap = (unsigned int)strtoul(optarg, NULL, 10);
			break;
		case O_MEM_SLACK:
			o.mem_slack = strtod(optarg, NULL);
			break;
		case O_JOURNAL:
			o.journal_excess = strtod(optarg, NULL);
			break;
		case O_SHORT:
			o.short_storm = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (o.mem) {
		o.seconds = o.seconds_set ? o.seconds : 160;
		o.freq = o.freq_set ? o.freq : 499;
		o.build = o.perf = false;
	}
	if (o.seconds < 5 || !o.freq || o.freq > 10000 || !o.jobs) {
		bench_say("--seconds >= 5, --freq 1..10000, --jobs >= 1");
		return 2;
	}
	if (geteuid() != 0) {
		bench_say("needs root (BPF, perf -a)");
		return 77;
	}
	if (access(o.cpa, X_OK) < 0) {
		bench_say("cpa executable '%s': %s (build it, or give --cpa)", o.cpa,
			  strerror(errno));
		return 2;
	}
	bench_catch_signals();
	if (o.dir) {
		snprintf(dir, sizeof(dir), "%s", o.dir);
		mkdir(dir, 0755);
	} else {
		snprintf(dir, sizeof(dir), "/tmp/bench_churn.XXXXXX");
		if (!mkdtemp(dir)) {
			bench_say("mkdtemp: %s", strerror(errno));
			return 1;
		}
	}
	/* bpf_stats on while this fd lives */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	printf("bench_churn: %s, %ld CPUs, %.0f s, %u Hz, scratch %s\n", o.cpa,
	       sysconf(_SC_NPROCESSORS_ONLN), o.seconds, o.freq, dir);
	fflush(stdout);
	err = o.mem ? run_mem(dir) : run(dir);
	if (stats_fd >= 0)
		close(stats_fd);
	if (!o.keep && !o.dir)
		bench_sh("rm -rf '%s'", dir);
	return err < 0 ? 1 : 0;
}
