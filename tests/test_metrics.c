// SPDX-License-Identifier: MIT
/*
 * Scheduler metrics end to end (docs/metrics.md): cpa monitor with the real
 * stages, workloads made here, then `cpa show --sched` as a user reads it.
 * Root + BTF, else 77.
 *
 * runq: a sleeping/waking process pinned to one CPU, first alone there
 * ("uncontended"), then with two CPU-bound processes pinned to the same CPU
 * ("contended"). The hogs run at a higher priority than the waker, so with
 * them it mostly waits on the run queue until one of them ends its slice,
 * alone it runs at once. With --sched_metrics=full (the per-switch programs)
 * the stored P99 of the contended waker must be well above the uncontended
 * one's, and the hogs' switches must be preemptions. With the default (the
 * task counters, read once a second) the same holds of the mean run-queue
 * delay and the switch split, and `cpa ctl cost` shows no per-switch program.
 * With --sched_metrics=sampled (1 in 16 events, weighted) the P99 is there
 * as with full, from the sampled histograms.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/policy.h"
#include "test_proc.h"
#include "test_util.h"

#define WAKE_U "cpam_wake_u"
#define WAKE_C "cpam_wake_c"
#define BURN   "cpam_burn"
/* The machine is shared: other work runs on the test CPU too. A waker above
 * the usual nice 0 and hogs above it keep that noise small beside the
 * contention measured. */
#define WAKE_NICE (-5)
#define HOG_NICE  (-15)

static char bin[PATH_MAX];

static void path_of(char *buf, size_t len, const char *exe)
{
	snprintf(buf, len, "%s/%s", bin, exe);
}

static int test_cpu(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 1 ? (int)n - 1 : 0;
}

static void pin(int cpu)
{
	cpu_set_t s;

	CPU_ZERO(&s);
	CPU_SET(cpu, &s);
	if (sched_setaffinity(0, sizeof(s), &s) < 0)
		_exit(3);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A child named comm on cpu: burn CPU until killed, or sleep 1 ms and run
 * ~50 us in a loop for secs seconds. */
static pid_t child(const char *comm, int cpu, bool burn, double secs)
{
	pid_t p = fork();

	ck_assert_int_ge(p, 0);
	if (p)
		return p;
	prctl(PR_SET_NAME, comm);
	pin(cpu);
	if (burn) {
		volatile unsigned long x = 0;

		if (setpriority(PRIO_PROCESS, 0, HOG_NICE) < 0)
			_exit(4);
		for (;;)
			x++;
	} else {
		double end = now_s() + secs;

		if (setpriority(PRIO_PROCESS, 0, WAKE_NICE) < 0)
			_exit(4);
		while (now_s() < end) {
			double t = now_s() + 50e-6;

			nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
			while (now_s() < t)
				;
		}
	}
	_exit(0);
}

static void tod(char *buf, size_t len, time_t t)
{
	struct tm tm;

	localtime_r(&t, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

struct row {
	bool found, hist; /* hist: the histogram columns hold numbers */
	double oncpu_ms, p50, p99, avg, sl_p50, preempt, sleep, iowait;
	unsigned long long waits, slices;
};

/* The summary line of the process whose label starts with "comm:"; with the
 * task counters (the default) the histogram columns and IOWAIT are "-". */
static struct row find_row(const char *out, const char *comm)
{
	struct row r = {0};
	char want[64];
	const char *p = out;

	snprintf(want, sizeof(want), "\n%s:", comm);
	p = strstr(p, want);
	if (!p)
		return r;
	p = strchr(p + 1, ' ');
	r.found = p && sscanf(p, "%lf %llu %lf %lf %lf %llu %lf %lf%% %lf%% %lf%%", &r.oncpu_ms,
			      &r.waits, &r.p50, &r.p99, &r.avg, &r.slices, &r.sl_p50, &r.preempt,
			      &r.sleep, &r.iowait) == 10;
	r.hist = r.found;
	if (!r.found && p)
		r.found = sscanf(p, "%lf %llu - - %lf %llu - %lf%% %lf%% -", &r.oncpu_ms, &r.waits,
				 &r.avg, &r.slices, &r.preempt, &r.sleep) == 6;
	return r;
}

/* The runq workload under `cpa monitor [mode]`; the `cpa show --sched`
 * output of its window, and in *cost that of `cpa ctl cost 2` taken while
 * the contended waker ran. */
static char *runq_run(const char *mode, char **cost)
{
	char cpa[PATH_MAX + 8], store[PATH_MAX], a[16], b[16];
	char log[PATH_MAX + 64];
	char *margv[] = {cpa,  "monitor",    "--store_dir", store,	  "-F",
			 "19", "--duration", "120",	    (char *)mode, NULL};
	char *sargv[] = {cpa, "show",	   "--read", store,	"--starttime",
			 a,   "--endtime", b,	     "--sched", NULL};
	char *cargv[] = {cpa, "ctl", "cost", "2", "--store_dir", store, NULL};
	char *out;
	pid_t mon, w, b1, b2;
	time_t t0, t1;
	int cpu = test_cpu(), rc;

	path_of(cpa, sizeof(cpa), "cpa");
	test_scratch_in(store, sizeof(store), "metrics");
	snprintf(log, sizeof(log), "%s/monitor.log", store);
	mon = spawn_monitor(margv, log, 60);
	sleep(1); /* the first metrics second has passed */
	t0 = time(NULL);
	w = child(WAKE_U, cpu, false, 3.0);
	ck_assert_int_eq(wait_exit(w, NULL), 0);
	b1 = child(BURN, cpu, true, 0);
	b2 = child(BURN, cpu, true, 0);
	w = child(WAKE_C, cpu, false, 3.0);
	*cost = run(cargv, &rc);
	ck_assert_msg(rc == 0, "cpa ctl cost: exit %d:\n%s", rc, *cost);
	ck_assert_int_eq(wait_exit(w, NULL), 0);
	kill(b1, SIGKILL);
	kill(b2, SIGKILL);
	wait_exit(b1, NULL);
	wait_exit(b2, NULL);
	t1 = time(NULL) + 1;
	/* The monitor records past the window's end, however long a loaded host
	 * took over the children (an 11 s --duration once ended 2 s before it:
	 * Not Found Enough Records); then it stops. --duration: a hang guard. */
	while (time(NULL) <= t1 + 1)
		usleep(100 * 1000);
	ck_assert_int_eq(kill(mon, SIGINT), 0);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	tod(a, sizeof(a), t0);
	tod(b, sizeof(b), t1);
	out = run(sargv, &rc);
	/* The table a user reads: in the log, the assertions below name its cells. */
	fprintf(stderr, "%s: %.1000s\n", mode, out);
	for (const char *q = strstr(out, "\ncpam_"); q; q = strstr(q + 1, "\ncpam_"))
		fprintf(stderr, "%.140s\n", q + 1);
	ck_assert_msg(rc == 0, "cpa show --sched: exit %d", rc);
	test_rm_rf(store);
	return out;
}

START_TEST(test_metrics_runq)
{
	struct row u, c, h;
	char *out, *cost;

	test_need_root_bpf(bin, sizeof(bin));
	out = runq_run("--sched_metrics=full", &cost);
	/* the exact way runs a program on every context switch of the host */
	ck_assert_msg(strstr(cost, "\ncpa_sched_switch "), "no cpa_sched_switch in:\n%s", cost);
	free(cost);
	u = find_row(out, WAKE_U);
	c = find_row(out, WAKE_C);
	h = find_row(out, BURN);
	ck_assert_msg(u.found && c.found && h.found, "a row is missing");
	/* ~2500 wakeups in each 3 s phase; a few hundred at the very least */
	ck_assert_msg(u.waits > 300 && c.waits > 300, "waits %llu/%llu", u.waits, c.waits);
	/* The median is no measure here: a wakeup on an idle CPU pays the idle
	 * exit, one on a busy CPU that preempts at once does not. The tail and
	 * the mean are where the waits behind the hogs show. */
	ck_assert_msg(c.p99 > 3 * u.p99,
		      "contended P99 %.1f us not well above the uncontended %.1f us", c.p99, u.p99);
	ck_assert_msg(c.avg > 3 * u.avg, "contended mean %.1f us vs uncontended %.1f us", c.avg,
		      u.avg);
	/* The hogs never sleep: they leave the CPU because the other one (or the
	 * waker) is picked, which is a preemption. */
	ck_assert_msg(h.preempt > 90.0, "hogs: %.1f%% of switches preempted", h.preempt);
	/* The waker sleeps of its own accord */
	ck_assert_msg(c.sleep > 50.0, "waker: %.1f%% voluntary", c.sleep);
	free(out);
}
END_TEST

/* The runq workload under `cpa monitor mode`, then what every way must show:
 * `cpa ctl cost` lists program has (a "\nNAME " line) and neither of
 * not_a, not_b; `cpa show --sched` has the Source line source and the rows of
 * the two wakers and the hogs (r[0..2]). Returns the show output. */
static char *runq_check(const char *mode, const char *has, const char *not_a, const char *not_b,
			const char *source, struct row r[3])
{
	char *out, *cost;

	out = runq_run(mode, &cost);
	fprintf(stderr, "ctl cost:\n%s\n", cost);
	ck_assert_msg(strstr(cost, has), "no '%s' in:\n%s", has, cost);
	ck_assert_msg(!strstr(cost, not_a) && !strstr(cost, not_b),
		      "another way's program ran:\n%s", cost);
	free(cost);
	ck_assert_msg(strstr(out, source), "no source line '%s'", source);
	r[0] = find_row(out, WAKE_U);
	r[1] = find_row(out, WAKE_C);
	r[2] = find_row(out, BURN);
	ck_assert_msg(r[0].found && r[1].found && r[2].found, "a row is missing");
	return out;
}

/* The default: no program per switch or wakeup, and still per process the
 * run-queue delay, the waits and the switches, from the task counters (the
 * pass that `cpa ctl cost` lists: has; not that of another way or pass). */
static void counters_check(const char *has, const char * not )
{
	struct row r[3], *u = &r[0], *c = &r[1], *h = &r[2];
	char *out;

	out = runq_check("--sched_metrics", has, "cpa_sched_switch", not,
			 "Source: the kernel's task counters", r);
	ck_assert_msg(u->waits > 300 && c->waits > 300, "waits %llu/%llu", u->waits, c->waits);
	ck_assert_msg(u->slices > 300 && c->slices > 300, "switches %llu/%llu", u->slices,
		      c->slices);
	ck_assert_msg(c->avg > 3 * u->avg, "contended mean %.1f us vs uncontended %.1f us", c->avg,
		      u->avg);
	/* each hog shares the test CPU with the other and the waker for ~3 s */
	ck_assert_msg(h->oncpu_ms > 300, "hogs: %.1f ms on CPU", h->oncpu_ms);
	ck_assert_msg(h->preempt > 90.0, "hogs: %.1f%% of switches preempted", h->preempt);
	ck_assert_msg(c->sleep > 50.0, "waker: %.1f%% voluntary", c->sleep);
	free(out);
}

START_TEST(test_metrics_counters)
{
	test_need_root_bpf(bin, sizeof(bin));
	counters_check("\nBPF program", "cpa_sched_wakeup");
}
END_TEST

/* The pass of kernels without the open-coded task iterator (before 6.7):
 * the task/ iterator read as a file, forced here by CPA_SCHED_PASS=iter;
 * the same figures. */
START_TEST(test_metrics_counters_iter)
{
	test_need_root_bpf(bin, sizeof(bin));
	setenv("CPA_SCHED_PASS", "iter", 1);
	counters_check("\ncpa_sched_iter ", "cpa_sched_walk");
	unsetenv("CPA_SCHED_PASS");
}
END_TEST

/* --sched_metrics=sampled: 1 in 16 wakeups and switches, each counted 16
 * times. The histograms land in the store and `cpa show --sched` prints the
 * P99 from them as from full's, with its own Source line; no exact per-switch
 * program and no task iterator runs. */
START_TEST(test_metrics_sampled)
{
	struct row r[3], *u = &r[0], *c = &r[1], *h = &r[2];
	char *out;

	test_need_root_bpf(bin, sizeof(bin));
	out = runq_check("--sched_metrics=sampled", "\ncpa_sched_sswitch ", "cpa_sched_switch",
			 "cpa_sched_iter", "Source: 1 in N wakeups and switches", r);
	ck_assert_msg(u->hist && c->hist && h->hist, "no histogram columns (P99 '-')");
	ck_assert_msg(u->p99 > 0 && c->p99 > 0, "P99 %.1f / %.1f us", u->p99, c->p99);
	/* ~2500 wakeups per phase, estimated from ~160 samples */
	ck_assert_msg(u->waits > 300 && c->waits > 300, "waits %llu/%llu", u->waits, c->waits);
	/* the waits behind the hogs show in the tail (the machine's other load
	 * reaches the uncontended waker too: no ratio asked) */
	ck_assert_msg(c->p99 > u->p99, "contended P99 %.1f us not above the uncontended %.1f us",
		      c->p99, u->p99);
	ck_assert_msg(h->preempt > 90.0, "hogs: %.1f%% of switches preempted", h->preempt);
	ck_assert_msg(c->sleep > 50.0, "waker: %.1f%% voluntary", c->sleep);
	free(out);
}
END_TEST

/* Which way capture took, as its log line says, for `cpa monitor [extra]`. */
static char *monitor_log(const char *extra, const char *policy_line)
{
	char cpa[PATH_MAX + 8], store[PATH_MAX], pol[PATH_MAX + 64];
	char log[PATH_MAX + 64];
	char *margv[] = {cpa, "monitor", "--store_dir", store, "--duration", "3", NULL, NULL, NULL};
	char *out;
	pid_t mon;
	FILE *f;

	path_of(cpa, sizeof(cpa), "cpa");
	test_scratch_in(store, sizeof(store), "metrics");
	if (policy_line) {
		snprintf(pol, sizeof(pol), "%s/p.policy", store);
		f = fopen(pol, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f, "%s\n", policy_line);
		fclose(f);
		margv[6] = "--policy";
		margv[7] = pol;
	} else if (extra) {
		margv[6] = (char *)extra;
	}
	snprintf(log, sizeof(log), "%s/monitor.log", store);
	mon = spawn_monitor(margv, log, 30);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	out = test_slurp(log, NULL);
	ck_assert_ptr_nonnull(out);
	test_rm_rf(store);
	return out;
}

/* The default reads the task counters; =full or a policy on the run-queue P99
 * (which needs the histograms) loads the per-switch programs; =sampled:N the
 * sampled ones; =0 none. */
START_TEST(test_metrics_modes)
{
	static const char cheap[] = "scheduler metrics: on-CPU time, run-queue delay",
			  full[] = "scheduler metrics (full)",
			  sampled[] = "scheduler metrics (sampled, 1 in 8)";
	char *l;

	test_need_root_bpf(bin, sizeof(bin));
	l = monitor_log(NULL, NULL);
	ck_assert_msg(strstr(l, cheap) && !strstr(l, full), "default:\n%s", l);
	free(l);
	l = monitor_log("--sched_metrics=full", NULL);
	ck_assert_msg(strstr(l, full) && !strstr(l, cheap), "full:\n%s", l);
	free(l);
	l = monitor_log(NULL, "policy=slowrq item=runq_latency_p99_us threshold=5000 count=2 "
			      "period=3 comm=cpam_none freq=99 duration=5");
	ck_assert_msg(strstr(l, full), "runq policy:\n%s", l);
	free(l);
	l = monitor_log("--sched_metrics=sampled:8", NULL);
	ck_assert_msg(strstr(l, sampled) && !strstr(l, cheap) && !strstr(l, full), "sampled:\n%s",
		      l);
	free(l);
	l = monitor_log("--sched_metrics=0", NULL);
	ck_assert_msg(!strstr(l, full) && !strstr(l, cheap), "off:\n%s", l);
	free(l);
}
END_TEST

/* ---------------------------------------------------------------- idle host */

#define ONCE "cpam_once"

static void burn_for(double secs);

/* Voluntary switches of pid's threads: its wakeups. */
static unsigned long long wakeups(pid_t pid)
{
	char path[64], cmd[256], *out;
	unsigned long long n = 0;
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	int rc;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	snprintf(cmd, sizeof(cmd),
		 "cat %s/*/status | awk '/^voluntary_ctxt_switches/ {n += $2} END {print n}'",
		 path);
	out = run(argv, &rc);
	ck_assert_int_eq(rc, 0);
	n = strtoull(out, NULL, 10);
	free(out);
	return n;
}

/* The monitor's child named comm. */
static pid_t child_of(pid_t mon, const char *comm)
{
	char cmd[128], *out;
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	pid_t p;
	int rc;

	snprintf(cmd, sizeof(cmd), "pgrep -P %d -x %s", mon, comm);
	out = run(argv, &rc);
	p = rc == 0 ? (pid_t)atoi(out) : 0;
	free(out);
	return p;
}

/* Busy ticks (user_HZ) of the host so far, /proc/stat's cpu line. */
static unsigned long long busy_ticks(void)
{
	unsigned long long v[8] = {0};
	FILE *f = fopen("/proc/stat", "r");

	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1],
				&v[2], &v[3], &v[4], &v[5], &v[6], &v[7]),
			 8);
	fclose(f);
	return v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
}

/*
 * An idle host (docs/metrics.md, "Idle host"): with nothing sampled (--pid of
 * a sleeping process) capture stretches its metrics interval, so it wakes
 * far less than once a second; a process that runs once meanwhile (its
 * samples dropped by --pid, so it does not end the stretch) is still in the
 * metrics with its whole time on CPU. The wakeup count is checked only when
 * the host itself was idle over the window (other work on it samples, which
 * keeps the per-second tick, as it should); the totals always.
 */
START_TEST(test_metrics_idle)
{
	char cpa[PATH_MAX + 8], store[PATH_MAX], log[PATH_MAX + 64];
	char a[16], b[16], spid[16];
	char *margv[] = {cpa,  "monitor", "--store_dir", store, "--pid", spid,
			 "-F", "49",	  "--duration",	 "24",	NULL};
	char *sargv[] = {cpa, "show",	   "--read", store,	"--starttime",
			 a,   "--endtime", b,	     "--sched", NULL};
	unsigned long long w0, w1, b0, b1;
	struct rusage ru;
	double once_ms, busy_pct, t0, t1;
	time_t s0, s1;
	pid_t sleeper, mon, cap, once;
	struct row r;
	char *out;
	int rc;

	test_need_root_bpf(bin, sizeof(bin));
	sleeper = fork(); /* what --pid samples: it never runs */
	ck_assert_int_ge(sleeper, 0);
	if (!sleeper) {
		pause();
		_exit(0);
	}
	snprintf(spid, sizeof(spid), "%d", sleeper);
	path_of(cpa, sizeof(cpa), "cpa");
	test_scratch_in(store, sizeof(store), "metrics");
	snprintf(log, sizeof(log), "%s/monitor.log", store);
	mon = spawn_monitor(margv, log, 60);
	s0 = time(NULL);
	sleep(5); /* started, and a stretch under way */
	cap = child_of(mon, "capture");
	ck_assert_int_gt(cap, 0);
	w0 = wakeups(cap);
	b0 = busy_ticks();
	t0 = now_s();
	sleep(6);
	once = fork();
	ck_assert_int_ge(once, 0);
	if (!once) {
		prctl(PR_SET_NAME, ONCE);
		burn_for(0.08);
		_exit(0);
	}
	ck_assert_int_eq(wait_exit(once, &ru), 0);
	once_ms = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
		  (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
	sleep(10);
	w1 = wakeups(cap);
	b1 = busy_ticks();
	t1 = now_s();
	s1 = time(NULL);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	kill(sleeper, SIGKILL);
	wait_exit(sleeper, NULL);

	/* The host's busy time over the window, the once process's aside. */
	busy_pct = ((double)(b1 - b0) * 1e3 / (double)sysconf(_SC_CLK_TCK) - once_ms) /
		   ((t1 - t0) * 10);
	fprintf(stderr, "idle: capture woke %llu times in %.1f s; host busy %.2f %% of a CPU\n",
		w1 - w0, t1 - t0, busy_pct);
	if (busy_pct < 0.5)
		ck_assert_msg(w1 - w0 <= (unsigned long long)((t1 - t0) / 2),
			      "capture woke %llu times in %.1f s on an idle host", w1 - w0,
			      t1 - t0);
	else
		fprintf(stderr, "idle: the host was busy, the wakeup count is not checked\n");

	tod(a, sizeof(a), s0);
	tod(b, sizeof(b), s1 - 2); /* before the last record */
	out = run(sargv, &rc);
	fprintf(stderr, "%.600s\n", out);
	ck_assert_msg(rc == 0, "cpa show --sched: exit %d", rc);
	r = find_row(out, ONCE);
	ck_assert_msg(r.found, "no %s row", ONCE);
	ck_assert_msg(r.oncpu_ms > once_ms * 0.9 - 1 && r.oncpu_ms < once_ms * 1.1 + 1,
		      "%s: %.1f ms on CPU in the metrics, %.1f ms by its rusage", ONCE, r.oncpu_ms,
		      once_ms);
	free(out);
	test_rm_rf(store);
}
END_TEST

/* ---------------------------------------------------------------- policies */

#define PBURN		 "cpam_pburn"
#define BURST_GROUP_NICE (-10)

static void burn_for(double secs)
{
	double end = now_s() + secs;
	volatile unsigned long x = 0;

	while (now_s() < end)
		x++;
}

static void *burn_thread(void *arg)
{
	burn_for(*(double *)arg);
	return NULL;
}

/* BURN_THREADS threads burning for secs: on a machine shared with other
 * work one thread may get less than half a CPU; three get more than one. */
#define BURN_THREADS 3
static void burst(double secs)
{
	pthread_t t[BURN_THREADS];

	for (int i = 0; i < BURN_THREADS; i++)
		if (pthread_create(&t[i], NULL, burn_thread, &secs))
			_exit(5);
	for (int i = 0; i < BURN_THREADS; i++)
		pthread_join(t[i], NULL);
}

/* The workload: idle 5 s, burn 10 s, idle 10 s, burn 5 s. */
static pid_t phases(void)
{
	pid_t p = fork();

	ck_assert_int_ge(p, 0);
	if (p)
		return p;
	prctl(PR_SET_NAME, PBURN);
	/* The machine is shared, and with autogroups a process gets its
	 * session's share, however many threads it runs: a session of its
	 * own, its group raised above the neighbours' (a burst is a burst). */
	if (setsid() < 0)
		_exit(4);
	{
		FILE *ag = fopen("/proc/self/autogroup", "w");

		if (ag) {
			fprintf(ag, "%d", BURST_GROUP_NICE);
			fclose(ag);
		}
	}
	sleep(5);
	burst(10);
	sleep(10);
	burst(5);
	_exit(0);
}

struct trig {
	int n, hh, mm, ss, eh, em, es;
	unsigned int pid;
	double value, threshold;
	char line[512];
};

static struct trig triggers(const char *out)
{
	struct trig t = {0};

	for (const char *p = strstr(out, "Trigger "); p; p = strstr(p + 1, "\nTrigger ")) {
		if (*p == '\n')
			p++;
		t.n++;
		snprintf(t.line, sizeof(t.line), "%.*s", (int)strcspn(p, "\n"), p);
		sscanf(p,
		       "Trigger %d:%d:%d.%*d policy burst pid %u (" PBURN
		       "): cpu_percent %lf > %lf, actions freq=499 offcpu=1, until %d:%d:%d",
		       &t.hh, &t.mm, &t.ss, &t.pid, &t.value, &t.threshold, &t.eh, &t.em, &t.es);
	}
	return t;
}

/* Samples (on-CPU, or off-CPU ns) of pid in [from, to) local seconds of day; -1: none. */
/* The cpa binary, the range's two times and the pid, as `cpa show` takes them. */
static void show_args(char cpa[PATH_MAX + 8], char a[32], char b[32], char p[16], unsigned int pid,
		      long from, long to)
{
	path_of(cpa, PATH_MAX + 8, "cpa");
	test_hms(a, 32, from);
	test_hms(b, 32, to);
	snprintf(p, 16, "%u", pid);
}

static double folded(const char *store, unsigned int pid, long from, long to, const char *kind)
{
	char cpa[PATH_MAX + 8], a[32], b[32], p[16], out[PATH_MAX];
	char *argv[] = {cpa,	     "show", "--read", (char *)store, "--starttime",  a,
			"--endtime", b,	     "--kind", (char *)kind,  "--target_pid", p,
			"-o",	     out,    NULL};
	double sum = 0;
	char line[8192];
	FILE *f;
	int rc;

	show_args(cpa, a, b, p, pid, from, to);
	snprintf(out, sizeof(out), "%s/w.prof", store);
	unlink(out);
	free(run(argv, &rc));
	f = fopen(out, "r");
	if (rc || !f) {
		if (f)
			fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');

		if (sp)
			sum += strtod(sp + 1, NULL);
	}
	fclose(f);
	return sum;
}

/* On-CPU seconds of pid in [from, to) from `cpa show --sched_csv`. */
static double oncpu_s(const char *store, unsigned int pid, long from, long to)
{
	char cpa[PATH_MAX + 8], a[32], b[32], p[16], csv[PATH_MAX], line[1024];
	char *argv[] = {
		cpa, "show",	     "--read", (char *)store, "--starttime", a,	  "--endtime",
		b,   "--target_pid", p,	       "--sched_csv", csv,	     NULL};
	double ms = 0;
	FILE *f;
	int rc;

	show_args(cpa, a, b, p, pid, from, to);
	snprintf(csv, sizeof(csv), "%s/w.csv", store);
	free(run(argv, &rc));
	ck_assert_int_eq(rc, 0);
	f = fopen(csv, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned int id;
		double v;

		if (sscanf(line, "%*[^,],process,%u,%*[^,],%lf", &id, &v) == 2 && id == pid)
			ms += v;
	}
	fclose(f);
	return ms / 1000.0;
}

START_TEST(test_metrics_policy)
{
	char cpa[PATH_MAX + 8], store[PATH_MAX], pol[PATH_MAX + 64], a[32], b[32],
		log[PATH_MAX + 64];
	char *margv[] = {cpa,	     "monitor", "--store_dir", store, "-F", "49",
			 "--policy", pol,	"--duration",  "37",  NULL};
	char *sargv[] = {cpa, "show",	   "--read", store,	   "--starttime",
			 a,   "--endtime", b,	     "--triggers", NULL};
	struct trig t;
	double in, out, off;
	long w0, trig_s, end_s;
	char *o;
	pid_t mon, w;
	time_t t0;
	FILE *f;
	int rc;

	test_need_root_bpf(bin, sizeof(bin));
	path_of(cpa, sizeof(cpa), "cpa");
	test_scratch_in(store, sizeof(store), "policy");
	snprintf(pol, sizeof(pol), "%s/burst.policy", store);
	f = fopen(pol, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# the issue's policy\n"
		   "policy=burst item=cpu_percent op=> threshold=50 count=3 period=5 comm=" PBURN
		   " freq=499 offcpu=1 duration=8 silence=30\n");
	fclose(f);
	snprintf(log, sizeof(log), "%s/monitor.log", store);
	mon = spawn_monitor(margv, log, 60);
	sleep(1); /* the first metrics second has passed */
	t0 = time(NULL);
	w = phases();
	ck_assert_int_eq(wait_exit(w, NULL), 0);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	w0 = test_sod(t0);
	test_hms(a, sizeof(a), w0 - 2);
	test_hms(b, sizeof(b), w0 + 32);
	o = run(sargv, &rc);
	fprintf(stderr, "%s", o);
	ck_assert_int_eq(rc, 0);
	t = triggers(o);
	free(o);
	/* One trigger: the first burst; the second is inside the 30 s silence. */
	ck_assert_int_eq(t.n, 1);
	ck_assert_msg(t.pid == (unsigned int)w, "trigger for pid %u, workload %d: %s", t.pid,
		      (int)w, t.line);
	ck_assert_msg(t.threshold == 50 && t.value > 50, "%s", t.line);
	trig_s = t.hh * 3600L + t.mm * 60 + t.ss;
	end_s = t.eh * 3600L + t.em * 60 + t.es;
	/* 3 of 5 seconds over 50 %: in the 3rd to 5th second of the burst */
	ck_assert_msg(trig_s >= w0 + 5 + 2 && trig_s <= w0 + 5 + 6, "trigger at +%ld s",
		      trig_s - w0);
	ck_assert_msg(end_s >= trig_s + 7 && end_s <= trig_s + 9, "%s", t.line);

	/* Inside the window, while it burns: ~499 samples per second of CPU it
	 * used (the metrics say how much); the second burst: ~49. */
	in = folded(store, (unsigned int)w, trig_s + 1, w0 + 14, "on") /
	     oncpu_s(store, (unsigned int)w, trig_s + 1, w0 + 14);
	out = folded(store, (unsigned int)w, w0 + 26, w0 + 29, "on") /
	      oncpu_s(store, (unsigned int)w, w0 + 26, w0 + 29);
	fprintf(stderr,
		"target on-CPU samples per CPU second: %.1f inside the window, %.1f "
		"outside\n",
		in, out);
	ck_assert_msg(in >= 499 * 0.7 && in <= 499 * 1.3, "%.1f samples/s inside", in);
	ck_assert_msg(out >= 49 * 0.7 && out <= 49 * 1.3, "%.1f samples/s outside", out);
	/* Off-CPU: only inside the window (the idle before it and after it: none). */
	ck_assert_msg(folded(store, (unsigned int)w, w0, trig_s, "off") < 0,
		      "off-CPU samples before the trigger");
	ck_assert_msg(folded(store, (unsigned int)w, end_s + 2, w0 + 30, "off") < 0,
		      "off-CPU samples after the window");
	off = folded(store, (unsigned int)w, trig_s, end_s + 1, "off");
	ck_assert_msg(off > 0, "no off-CPU samples inside the window");
	test_rm_rf(store);
}
END_TEST

/* ---------------------------------------------------------------- policy files */

static void parse_err(const char *text, const char *want)
{
	struct policy_set *set = calloc(1, sizeof(*set));
	char err[512] = "";

	ck_assert_ptr_nonnull(set);
	ck_assert_int_eq(policy_set__parse("p.policy", text,
					   &(struct policy_limits){.freq_max = 10000}, set, err,
					   sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, want), "error '%s', wanted '%s'", err, want);
	free(set);
}

START_TEST(test_policy_file_errors)
{
	static const char ok[] = "policy=burst item=cpu_percent threshold=50 period=5 count=3 "
				 "freq=499 offcpu=1 duration=8 silence=30";

	parse_err("# only a comment\n\n", "p.policy: no policy in the file");
	parse_err("\n\npolicy=a item=cpu_pct threshold=1 period=1 count=1 freq=9 duration=1\n",
		  "p.policy:3: unknown item 'cpu_pct'");
	parse_err("policy=a item=cpu_percent threshold=1 period=3 count=4 freq=9 duration=1",
		  "p.policy:1: policy 'a': count 4 is more than period 3");
	parse_err("policy=a item=cpu_percent threshold=1 period=3 count=2 freq=9",
		  "p.policy:1: policy 'a': needs duration=");
	parse_err("policy=a item=cpu_percent threshold=1 period=3 count=2 duration=4",
		  "p.policy:1: policy 'a': no action");
	parse_err("policy=a item=system_load threshold=1 period=3 count=2 comm=x freq=9 "
		  "duration=4",
		  "comm=/pid=/cgroup=/env= do not apply");
	parse_err("policy=a item=cpu_percent threshold=1 period=3 count=2 freq=20000 duration=4",
		  "p.policy:1: freq '20000': Hz, 1..10000");
	parse_err("policy=a item=cpu_percent threshold=1 period=3 count=2 stack_size=5000 "
		  "duration=4",
		  "stack_size '5000'");
	parse_err("policy=a item=cpu_percent threshold=-1", "threshold '-1'");
	parse_err("policy=a item=cpu_percent threshold", "'threshold' is not key=value");
	parse_err("policy=a color=red", "unknown key 'color'");
	{
		char two[1024];

		snprintf(two, sizeof(two), "%s\n%s\n", ok, ok);
		parse_err(two, "p.policy:2: policy 'burst' already defined on line 1");
	}
}
END_TEST

/* The window, the count, the silence: the policy on a made-up series. */
START_TEST(test_policy_eval)
{
	static const char text[] = "policy=burst item=cpu_percent threshold=50 period=5 count=3 "
				   "comm=w freq=499 offcpu=1 duration=8 silence=30";
	/* idle 5 s, burn 10 s, idle 10 s, burn 5 s */
	struct policy_set *set = calloc(1, sizeof(*set));
	struct policy_eval *ev = calloc(1, sizeof(*ev));
	struct policy_fire f[4], e[4];
	unsigned int fired = 0, ended = 0, ne;
	uint64_t fire_s = 0, end_s = 0;
	char err[256];

	ck_assert_ptr_nonnull(set);
	ck_assert_ptr_nonnull(ev);
	ck_assert_int_eq(policy_set__parse("p", text, &(struct policy_limits){.freq_max = 10000},
					   set, err, sizeof(err)),
			 0);
	policy_eval__init(ev, set);
	for (uint64_t s = 1000; s < 1030; s++) {
		uint64_t t = s - 1000;
		bool burn = (t >= 5 && t < 15) || (t >= 25 && t < 30);
		struct policy_proc p = {.pid = 42, .comm = "w"}, other = {.pid = 7, .comm = "x"};
		struct policy_proc procs[2];
		unsigned int n;

		for (int i = 0; i < POLICY_ITEM_MAX; i++)
			p.value[i] = other.value[i] = 0;
		p.value[POLICY_CPU_PERCENT] = burn ? 99.0 : 1.0;
		other.value[POLICY_CPU_PERCENT] = 100.0; /* busy, but not selected */
		procs[0] = p;
		procs[1] = other;
		n = policy_eval__second(ev, s, procs, 2, 0.5, f, 4, e, 4, &ne);
		if (n) {
			ck_assert_uint_eq(f[0].pid, 42);
			ck_assert(f[0].value > 50);
			fire_s = s;
		}
		if (ne)
			end_s = s;
		fired += n;
		ended += ne;
	}
	ck_assert_uint_eq(fired, 1);
	ck_assert_uint_eq(ended, 1);
	ck_assert_uint_eq(fire_s, 1000 + 7); /* the third burning second */
	ck_assert_uint_eq(end_s, fire_s + 8);
	free(set);
	free(ev);
}
END_TEST

/* cpa monitor refuses a bad file with its line and reason, before anything starts. */
START_TEST(test_policy_file_refused)
{
	char dir[PATH_MAX], pol[PATH_MAX + 64], st[PATH_MAX + 64];
	char want[PATH_MAX + 256], *err;
	FILE *f;
	int rc;

	test_scratch_in(dir, sizeof(dir), "polfile");
	snprintf(pol, sizeof(pol), "%s/bad.policy", dir);
	snprintf(st, sizeof(st), "%s/store", dir);
	f = fopen(pol, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# ok first\npolicy=a item=system_load threshold=4 period=5 count=3 freq=99 "
		   "duration=10\npolicy=b item=cpu_percent threshold=50 period=5 count=6 freq=499 "
		   "duration=8\n");
	fclose(f);
	{
		struct test_run r;
		const char *args[] = {"monitor", "--store_dir", st, "--policy", pol, NULL};

		test_run_bin(&r, "cpa", args);
		rc = r.code;
		err = strdup(r.err);
	}
	snprintf(want, sizeof(want), "--policy: %s:3: policy 'b': count 6 is more than period 5",
		 pol);
	ck_assert_msg(rc == 2, "exit %d", rc);
	ck_assert_msg(strstr(err, want), "stderr: %.300s", err);
	/* refused before anything started: no store */
	ck_assert_int_ne(access(st, F_OK), 0);
	free(err);
	unlink(pol);
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("runq");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_metrics_runq);
	tcase_add_test(tc, test_metrics_counters);
	tcase_add_test(tc, test_metrics_counters_iter);
	tcase_add_test(tc, test_metrics_modes);
	suite_add_tcase(s, tc);
	tc = tcase_create("idle");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_metrics_idle);
	suite_add_tcase(s, tc);
	tc = tcase_create("sampled");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_metrics_sampled);
	suite_add_tcase(s, tc);
	tc = tcase_create("policy_file");
	tcase_add_test(tc, test_policy_file_errors);
	tcase_add_test(tc, test_policy_eval);
	tcase_add_test(tc, test_policy_file_refused);
	suite_add_tcase(s, tc);
	tc = tcase_create("policy");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_metrics_policy);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
