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
 * alone it runs at once. The stored P99 of the contended waker must be well
 * above the uncontended one's, and the hogs' switches must be preemptions.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
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
	bool found;
	double oncpu_ms, p50, p99, avg, sl_p50, preempt, sleep, iowait;
	unsigned long long waits, slices;
};

/* The summary line of the process whose label starts with "comm:". */
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
	return r;
}

START_TEST(test_metrics_runq)
{
	char cpa[PATH_MAX + 8], store[] = "/tmp/cpa-test-metrics-XXXXXX", a[16], b[16];
	char *margv[] = {cpa,  "monitor",    "--store_dir", store, "-F",
			 "19", "--duration", "14",	    NULL};
	char *sargv[] = {cpa, "show",	   "--read", store,	"--starttime",
			 a,   "--endtime", b,	     "--sched", NULL};
	struct row u, c, h;
	char *out;
	pid_t mon, w, b1, b2;
	time_t t0, t1;
	int cpu = test_cpu(), rc;

	test_need_root_bpf(bin, sizeof(bin));
	path_of(cpa, sizeof(cpa), "cpa");
	ck_assert_ptr_nonnull(mkdtemp(store));
	mon = spawn_fds(margv, -1, -1, -1);
	sleep(3); /* the stages are up and the first metrics second has passed */
	t0 = time(NULL);
	w = child(WAKE_U, cpu, false, 3.0);
	ck_assert_int_eq(wait_exit(w, NULL), 0);
	b1 = child(BURN, cpu, true, 0);
	b2 = child(BURN, cpu, true, 0);
	w = child(WAKE_C, cpu, false, 3.0);
	ck_assert_int_eq(wait_exit(w, NULL), 0);
	kill(b1, SIGKILL);
	kill(b2, SIGKILL);
	wait_exit(b1, NULL);
	wait_exit(b2, NULL);
	t1 = time(NULL) + 1;
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	tod(a, sizeof(a), t0);
	tod(b, sizeof(b), t1);
	out = run(sargv, &rc);
	/* The table a user reads: in the log, the assertions below name its cells. */
	fprintf(stderr, "%.1000s\n", out);
	for (const char *q = strstr(out, "\ncpam_"); q; q = strstr(q + 1, "\ncpam_"))
		fprintf(stderr, "%.140s\n", q + 1);
	ck_assert_msg(rc == 0, "cpa show --sched: exit %d", rc);
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
	{
		char cmd[PATH_MAX + 16];

		snprintf(cmd, sizeof(cmd), "rm -rf %s", store);
		rc = system(cmd);
		(void)rc;
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("metrics");
	TCase *tc = tcase_create("runq");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_metrics_runq);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
