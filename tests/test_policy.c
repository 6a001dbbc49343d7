// SPDX-License-Identifier: MIT
/*
 * Trigger policies beyond cpu_percent (docs/metrics.md "Trigger policies"):
 * the items offcpu_percent and probe_rate, the selectors cgroup= and env=,
 * the action attach= (probes attached for the duration), end to end with
 * cpa monitor and the real stages; and the policy file's errors for those
 * keys. The monitor case needs root + BTF (else 77 for it).
 *
 * The workload children are this binary run again (`test_policy --child
 * MODE`): each has its own environment (/proc/PID/environ, what env= reads),
 * and the uprobes name functions of this file.
 */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "common/policy.h"
#include "test_proc.h"
#include "test_util.h"

static char bin[PATH_MAX];

/* ---------------------------------------------------------------- the children */

/* The probed functions: probe 0 counts the first (probe_rate), the second
 * is attached by the 'att' policy's trigger only (attach=1). */
void pol_rate_target(void);
void pol_att_target(void);

__attribute__((noinline, used)) void pol_rate_target(void)
{
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline, used)) void pol_att_target(void)
{
	__asm__ volatile("" ::: "memory");
}

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void spin(double secs)
{
	double end = mono() + secs;

	while (mono() < end)
		;
}

/* Sleep until start + k * period (no drift: calls at exactly 1/period a second). */
static void tick(double start, long k, double period)
{
	double t = start + (double)k * period;
	struct timespec ts = {.tv_sec = (time_t)t, .tv_nsec = (long)((t - (long)t) * 1e9)};

	clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
}

/* A session and so an autogroup of its own (the scheduler shares the CPU
 * between groups first): no child starves another; nice_ raises the
 * busy ones above the machine's other work. */
static void own_group(int nice_)
{
	FILE *ag;

	if (setsid() < 0)
		_exit(4);
	ag = fopen("/proc/self/autogroup", "w");
	if (ag) {
		fprintf(ag, "%d", nice_);
		fclose(ag);
	}
}

#define ATT_CALL_HZ 50
#define RATE_HZ	    80

static int child_main(const char *mode)
{
	char comm[16];
	double t0 = mono();

	snprintf(comm, sizeof(comm), "cpap_%s", mode);
	prctl(PR_SET_NAME, comm);
	own_group(!strcmp(mode, "busy") || !strcmp(mode, "att") ? -5 : 0);
	if (!strcmp(mode, "sleepy")) { /* ~1 % of a CPU: off CPU ~99 % of its time */
		for (;;) {
			nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
			spin(200e-6);
		}
	} else if (!strcmp(mode, "busy")) {
		for (;;)
			spin(1);
	} else if (!strcmp(mode, "rate")) {
		for (long k = 1;; k++) {
			pol_rate_target();
			tick(t0, k, 1.0 / RATE_HZ);
		}
	} else if (!strcmp(mode, "twin") || !strcmp(mode, "cg")) { /* up to 20 % of a CPU */
		for (;;) {
			spin(2e-3);
			nanosleep(&(struct timespec){.tv_nsec = 8 * 1000 * 1000}, NULL);
		}
	} else if (!strcmp(mode, "att")) {
		/* 4 s idle, 4 s burning, then idle; pol_att_target() 50 times a
		 * second all along. */
		for (long k = 1;; k++) {
			double now = mono() - t0;

			pol_att_target();
			if (now >= 4 && now < 8)
				spin(t0 + (double)k / ATT_CALL_HZ - mono());
			else
				tick(t0, k, 1.0 / ATT_CALL_HZ);
		}
	}
	return 2;
}

/* ---------------------------------------------------------------- helpers */

struct trig {
	char policy[32], item[48], acts[128], line[512];
	unsigned int pid;
	double value, threshold;
	long start_s, end_s;
};

/* The Trigger lines of `cpa show --triggers`. */
static unsigned int triggers(const char *out, struct trig *t, unsigned int max)
{
	unsigned int n = 0;

	for (const char *p = strstr(out, "Trigger "); p && n < max;
	     p = strstr(p + 1, "\nTrigger ")) {
		struct trig *x = &t[n];
		int h, m, s, eh, em, es;

		if (*p == '\n')
			p++;
		memset(x, 0, sizeof(*x));
		snprintf(x->line, sizeof(x->line), "%.*s", (int)strcspn(p, "\n"), p);
		ck_assert_msg(sscanf(p,
				     "Trigger %d:%d:%d.%*d policy %31s pid %u (%*[^)]): %47s %lf "
				     "%*s %lf, actions%127[^,], until %d:%d:%d",
				     &h, &m, &s, x->policy, &x->pid, x->item, &x->value,
				     &x->threshold, x->acts, &eh, &em, &es) == 12,
			      "unexpected trigger line: %s", x->line);
		x->start_s = h * 3600L + m * 60 + s;
		x->end_s = eh * 3600L + em * 60 + es;
		n++;
	}
	return n;
}

static unsigned int count_of(const struct trig *t, unsigned int n, const char *policy,
			     const struct trig **ret)
{
	unsigned int c = 0;

	for (unsigned int i = 0; i < n; i++)
		if (!strcmp(t[i].policy, policy)) {
			c++;
			*ret = &t[i];
		}
	return c;
}

/* Samples of probe id of pid in [from, to) local seconds of day (0: none). */
static long probe_samples(const char *store, int id, unsigned int pid, long from, long to)
{
	char cpa[PATH_MAX + 8], a[32], b[32], p[16], sid[8], out[PATH_MAX], line[8192];
	char *argv[] = {cpa,	     "show", "--read",	   (char *)store, "--starttime",  a,
			"--endtime", b,	     "--probe_id", sid,		  "--target_pid", p,
			"-o",	     out,    NULL};
	long sum = 0;
	char *o;
	FILE *f;
	int rc;

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin);
	test_hms(a, sizeof(a), from);
	test_hms(b, sizeof(b), to);
	snprintf(p, sizeof(p), "%u", pid);
	snprintf(sid, sizeof(sid), "%d", id);
	snprintf(out, sizeof(out), "%s/probe.prof", store);
	unlink(out);
	o = run(argv, &rc);
	f = rc == 0 ? fopen(out, "r") : NULL;
	if (!f) {
		fprintf(stderr, "[%s, %s): no probe %d samples of %u (exit %d: %.200s)\n", a, b, id,
			pid, rc, o);
		free(o);
		return 0;
	}
	free(o);
	while (fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');

		if (sp)
			sum += strtol(sp + 1, NULL, 10);
	}
	fclose(f);
	return sum;
}

/* The cgroup v2 hierarchy's mount, if writable here: "" otherwise. */
static void cg_root(char *buf, size_t len)
{
	static const char *const dirs[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	struct statfs f;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++)
		if (statfs(dirs[i], &f) == 0 && f.f_type == 0x63677270 /* CGROUP2 */ &&
		    access(dirs[i], W_OK) == 0) {
			snprintf(buf, len, "%s", dirs[i]);
			return;
		}
}

static pid_t start_child(const char *exe, const char *mode, const char *env)
{
	char *argv[] = {(char *)exe, "--child", (char *)mode, NULL};
	char *envv[] = {(char *)env, NULL};

	return spawn_env(argv, NULL, NULL, env ? envv : (char *const[]){NULL});
}

/* ---------------------------------------------------------------- end to end */

START_TEST(test_policy_e2e)
{
	char cpa[PATH_MAX + 8], exe[PATH_MAX], store[PATH_MAX];
	char pol[PATH_MAX + 16], p0[PATH_MAX + 32], p1[PATH_MAX + 32], root[64], cgdir[PATH_MAX];
	char cgname[64], a[32], b[32], *o, log[PATH_MAX + 64];
	char *margv[] = {
		cpa,	   "monitor", "--store_dir",  store, "-F",	 "49", "--probe",    p0,
		"--probe", p1,	      "--probe_rate", "0",   "--policy", pol,  "--duration", "21",
		NULL};
	char *sargv[] = {cpa, "show",	   "--read", store,	   "--starttime",
			 a,   "--endtime", b,	     "--triggers", NULL};
	struct trig t[32];
	const struct trig *x = NULL;
	pid_t mon, sleepy, busy, rate, twin_a, twin_b, cg_in = 0, cg_out = 0, att;
	unsigned int n;
	long w0, before, inside, after;
	bool have_cg;
	ssize_t len;
	time_t t0;
	FILE *f;
	int rc;

	test_need_root_bpf(bin, sizeof(bin));
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin);
	len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	ck_assert_int_gt(len, 0);
	exe[len] = '\0';
	test_scratch_in(store, sizeof(store), "pol");
	snprintf(p0, sizeof(p0), "uprobe:%s:pol_rate_target", exe);
	snprintf(p1, sizeof(p1), "uprobe:%s:pol_att_target", exe);

	cg_root(root, sizeof(root));
	snprintf(cgname, sizeof(cgname), "/cpa-test-policy-%d", (int)getpid());
	snprintf(cgdir, sizeof(cgdir), "%s%s", root, cgname);
	have_cg = root[0] && mkdir(cgdir, 0755) == 0;
	if (!have_cg)
		fprintf(stderr, "SKIP cgroup= case: no writable cgroup v2 hierarchy (%s): %s\n",
			root[0] ? cgdir : "none mounted", strerror(errno));

	snprintf(pol, sizeof(pol), "%s/t.policy", store);
	f = fopen(pol, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f,
		"# off CPU: the sleeper (~99 %%), not the busy one (both CPAP_GROUP=off); the\n"
		"# busy one shares 2 CPUs with 6 other children: 95, not 80 (82 seen under load)\n"
		"policy=off item=offcpu_percent threshold=95 count=3 period=5 env=CPAP_GROUP=off "
		"stack_size=16384 duration=2 silence=60\n"
		"# probe 0 by its spec; 80 calls a second\n"
		"policy=rate item=probe_rate probe=%s threshold=40 count=2 period=3 comm=cpap_rate "
		"stack_size=16384 duration=2 silence=60\n"
		"# two identical children, one with CPAP_PICK=yes\n"
		"policy=twin item=cpu_percent threshold=1 count=2 period=3 comm=cpap_twin "
		"env=CPAP_PICK=yes stack_size=16384 duration=2 silence=60\n"
		"# probe 1 attached while the burst of cpap_att lasts, for it only\n"
		"policy=att item=cpu_percent threshold=30 count=2 period=3 comm=cpap_att attach=1 "
		"duration=4 silence=60\n",
		p0);
	if (have_cg) {
		struct stat st;

		/* by path, and by id: the inode of its directory (what BPF sees) */
		ck_assert_int_eq(stat(cgdir, &st), 0);
		fprintf(f,
			"policy=cg item=cpu_percent threshold=1 count=2 period=3 comm=cpap_cg "
			"cgroup=%s stack_size=16384 duration=2 silence=60\n"
			"policy=cgid item=cpu_percent threshold=1 count=2 period=3 comm=cpap_cg "
			"cgroup=%llu stack_size=16384 duration=2 silence=60\n",
			cgname, (unsigned long long)st.st_ino);
	}
	fclose(f);

	snprintf(log, sizeof(log), "%s/monitor.log", store);
	mon = spawn_monitor(margv, log, 60);
	sleep(1); /* the first metrics second has passed */
	t0 = time(NULL);
	sleepy = start_child(exe, "sleepy", "CPAP_GROUP=off");
	busy = start_child(exe, "busy", "CPAP_GROUP=off");
	rate = start_child(exe, "rate", NULL);
	twin_a = start_child(exe, "twin", NULL);
	twin_b = start_child(exe, "twin", "CPAP_PICK=yes");
	att = start_child(exe, "att", NULL);
	if (have_cg) {
		char procs[PATH_MAX + 16];

		cg_in = start_child(exe, "cg", NULL);
		cg_out = start_child(exe, "cg", NULL);
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", cgdir);
		f = fopen(procs, "w");
		ck_assert_ptr_nonnull(f);
		fprintf(f, "%d\n", (int)cg_in);
		ck_assert_int_eq(fclose(f), 0);
	}
	sleep(14);
	{
		pid_t all[] = {sleepy, busy, rate, twin_a, twin_b, att, cg_in, cg_out};

		for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
			if (all[i] > 0) {
				kill(all[i], SIGKILL);
				wait_exit(all[i], NULL);
			}
	}
	if (have_cg)
		rmdir(cgdir);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	w0 = test_sod(t0);
	test_hms(a, sizeof(a), w0 - 2);
	test_hms(b, sizeof(b), w0 + 18);
	o = run(sargv, &rc);
	fprintf(stderr, "%s", o);
	ck_assert_int_eq(rc, 0);
	n = triggers(o, t, 32);
	free(o);

	/* offcpu_percent: the sleeper once, never the busy process beside it */
	ck_assert_uint_eq(count_of(t, n, "off", &x), 1);
	ck_assert_msg(x->pid == (unsigned int)sleepy, "off fired for %u (sleepy %d, busy %d)",
		      x->pid, (int)sleepy, (int)busy);
	ck_assert_msg(!strcmp(x->item, "offcpu_percent") && x->value > 80 && x->value <= 100, "%s",
		      x->line);

	/* probe_rate: once, ~80 hits a second */
	ck_assert_uint_eq(count_of(t, n, "rate", &x), 1);
	ck_assert_msg(x->pid == (unsigned int)rate, "%s", x->line);
	ck_assert_msg(!strcmp(x->item, "probe_rate(probe=0)"), "%s", x->line);
	ck_assert_msg(x->threshold == 40 && x->value >= RATE_HZ * 0.7 && x->value <= RATE_HZ * 1.3,
		      "%s", x->line);

	/* env=: the twin with CPAP_PICK=yes only */
	ck_assert_uint_eq(count_of(t, n, "twin", &x), 1);
	ck_assert_msg(x->pid == (unsigned int)twin_b, "twin fired for %u (picked %d, other %d)",
		      x->pid, (int)twin_b, (int)twin_a);

	/* cgroup=: the child moved into the fresh cgroup only */
	if (have_cg) {
		ck_assert_uint_eq(count_of(t, n, "cg", &x), 1);
		ck_assert_msg(x->pid == (unsigned int)cg_in, "cg fired for %u (in %d, out %d)",
			      x->pid, (int)cg_in, (int)cg_out);
		ck_assert_uint_eq(count_of(t, n, "cgid", &x), 1);
		ck_assert_msg(x->pid == (unsigned int)cg_in, "cgid fired for %u (in %d, out %d)",
			      x->pid, (int)cg_in, (int)cg_out);
	}

	/* attach=: probe 1's samples only inside the action window (to the second) */
	ck_assert_uint_eq(count_of(t, n, "att", &x), 1);
	ck_assert_msg(x->pid == (unsigned int)att, "%s", x->line);
	ck_assert_msg(strstr(x->acts, "attach=1"), "%s", x->line);
	ck_assert_msg(x->end_s >= x->start_s + 3 && x->end_s <= x->start_s + 5, "%s", x->line);
	before = probe_samples(store, 1, (unsigned int)att, w0, x->start_s);
	inside = probe_samples(store, 1, (unsigned int)att, x->start_s, x->end_s + 1);
	after = probe_samples(store, 1, (unsigned int)att, x->end_s + 1, w0 + 16);
	fprintf(stderr, "probe 1 samples of cpap_att: %ld before, %ld inside, %ld after\n", before,
		inside, after);
	ck_assert_int_eq(before, 0);
	ck_assert_int_eq(after, 0);
	/* 50 calls a second over the 4 s window (and up to the second's end) */
	ck_assert_msg(inside >= ATT_CALL_HZ * 4 * 0.5 && inside <= ATT_CALL_HZ * 6,
		      "%ld samples inside", inside);
	test_rm_rf(store);
}
END_TEST

/* ---------------------------------------------------------------- policy files */

static const char *const probes[] = {"uprobe:/bin/true:main", "kprobe:do_nanosleep"};
static const struct policy_limits lim = {
	.freq_max = 10000, .probes = probes, .nr_probes = 2, .probes_known = true};

static void parse_err(const char *text, const char *want)
{
	struct policy_set *set = calloc(1, sizeof(*set));
	char err[512] = "";

	ck_assert_ptr_nonnull(set);
	ck_assert_int_eq(policy_set__parse("p.policy", text, &lim, set, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, want), "error '%s', wanted '%s'", err, want);
	free(set);
}

#define W " threshold=1 period=3 count=2 duration=4"

START_TEST(test_policy_new_keys_errors)
{
	parse_err("policy=a item=probe_rate stack_size=8192" W,
		  "p.policy:1: policy 'a': probe_rate needs probe=");
	parse_err("\npolicy=a item=probe_rate probe=2 freq=99" W,
		  "p.policy:2: probe=2: no such probe (2 --probe given)");
	parse_err("policy=a item=probe_rate probe=uprobe:/bin/false:main freq=99" W,
		  "p.policy:1: probe=uprobe:/bin/false:main: not a probe of this run");
	parse_err("policy=a item=cpu_percent probe=0 freq=99" W,
		  "p.policy:1: policy 'a': probe= is for item=probe_rate");
	parse_err("policy=a item=cpu_percent cgroup=system.slice freq=99" W,
		  "p.policy:1: cgroup 'system.slice': a cgroup v2 path (/a/b) or a cgroup id");
	parse_err("policy=a item=cpu_percent cgroup=/a/../b freq=99" W, "cgroup '/a/../b'");
	parse_err("policy=a item=cpu_percent cgroup=0 freq=99" W, "cgroup '0'");
	parse_err("policy=a item=cpu_percent env=DEPLOY freq=99" W,
		  "p.policy:1: env 'DEPLOY': NAME=VALUE");
	parse_err("policy=a item=cpu_percent env==x freq=99" W, "env '=x'");
	parse_err("policy=a item=cpu_percent attach=" W, "p.policy:1: attach=: probes to attach");
	parse_err("policy=a item=cpu_percent attach=0,5" W, "attach=5: no such probe");
	parse_err("policy=a item=offcpu_percent attach=kprobe:vfs_read" W,
		  "attach=kprobe:vfs_read: not a probe of this run");
	parse_err("policy=a item=system_load env=A=b freq=99" W,
		  "system_load is system-wide, comm=/pid=/cgroup=/env= do not apply");
	parse_err("policy=a item=system_load attach=1" W,
		  "a system-wide item can only raise freq= (offcpu=, stack_size= and attach=");
	/* 1e308 is >= 0: the message names the range, not half of it */
	parse_err("policy=a item=cpu_percent threshold=1e308 period=3 count=2 freq=99",
		  "p.policy:1: threshold '1e308': a number from 0 to 1e12");
	parse_err("policy=a item=cpu_percent env=A=b env=A=c freq=99" W,
		  "p.policy:1: env= given twice");
	/* one probe counted by one policy and attached by another's trigger */
	parse_err("policy=a item=probe_rate probe=kprobe:do_nanosleep freq=99" W
		  "\n# between\npolicy=b item=cpu_percent attach=1" W,
		  "p.policy:3: probe 1 is counted by policy 'a' (line 1, probe=) and attached "
		  "only during triggers by policy 'b' (line 3, attach=)");
}
END_TEST

START_TEST(test_policy_new_keys_ok)
{
	static const char text[] =
		"policy=r item=probe_rate probe=uprobe:/bin/true:main op=>= threshold=100 "
		"period=5 count=2 cgroup=/srv/app env=DEPLOY=blue attach=kprobe:do_nanosleep "
		"duration=9\n"
		"policy=o item=offcpu_percent threshold=90 period=5 count=5 cgroup=4242 attach=1,1 "
		"freq=499 duration=9\n";
	struct policy_set *set = calloc(1, sizeof(*set));
	char err[512] = "", buf[128];

	ck_assert_ptr_nonnull(set);
	ck_assert_msg(policy_set__parse("p", text, &lim, set, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_eq(set->n, 2);
	ck_assert_int_eq(set->p[0].probe, 0);
	ck_assert_uint_eq(set->p[0].attach, 1u << 1);
	ck_assert_str_eq(set->p[0].cgroup, "/srv/app");
	ck_assert_str_eq(set->p[0].env, "DEPLOY=blue");
	ck_assert_uint_eq(set->p[1].cgroup_id, 4242);
	ck_assert_uint_eq(set->p[1].item, POLICY_OFFCPU_PERCENT);

	/* what a stored trigger says of them */
	policy_item_format(buf, sizeof(buf), POLICY_EV_ITEM(&set->p[0]));
	ck_assert_str_eq(buf, "probe_rate(probe=0)");
	policy_actions_format(buf, sizeof(buf), POLICY_EV_ACTIONS(&set->p[1]), set->p[1].freq,
			      set->p[1].stack_size);
	ck_assert_str_eq(buf, " freq=499 attach=1");

	/* cgroup=: a path is that cgroup and below, an id that cgroup only */
	ck_assert(policy_cgroup_match(&set->p[0], "/srv/app", 0));
	ck_assert(policy_cgroup_match(&set->p[0], "/srv/app/worker-1", 0));
	ck_assert(!policy_cgroup_match(&set->p[0], "/srv/application", 0));
	ck_assert(!policy_cgroup_match(&set->p[0], "/srv", 0));
	ck_assert(!policy_cgroup_match(&set->p[0], NULL, 0));
	ck_assert(policy_cgroup_match(&set->p[1], "/whatever", 4242));
	ck_assert(!policy_cgroup_match(&set->p[1], "/whatever", 4243));

	/* env=: the exact value of that name in the environ image */
	{
		static const char env1[] = "PATH=/bin\0DEPLOY=blue\0";
		static const char env2[] = "DEPLOY=blue-2\0PATH=/bin\0";
		static const char env3[] = "XDEPLOY=blue\0";

		ck_assert(policy_env_match(&set->p[0], env1, sizeof(env1) - 1));
		ck_assert(!policy_env_match(&set->p[0], env2, sizeof(env2) - 1));
		ck_assert(!policy_env_match(&set->p[0], env3, sizeof(env3) - 1));
		ck_assert(!policy_env_match(&set->p[0], NULL, 0));
	}
	free(set);
}
END_TEST

/* The evaluator: probe_rate reads the probe's column, cgroup=/env= what
 * capture found (selected), offcpu_percent its own item. */
START_TEST(test_policy_new_items_eval)
{
	static const char text[] =
		"policy=r item=probe_rate probe=1 threshold=40 period=3 count=2 env=A=b freq=99 "
		"duration=5 silence=60\n"
		"policy=o item=offcpu_percent threshold=80 period=3 count=3 stack_size=8192 "
		"duration=5 silence=60\n";
	struct policy_set *set = calloc(1, sizeof(*set));
	struct policy_eval *ev = calloc(1, sizeof(*ev));
	struct policy_fire f[8], e[8];
	unsigned int fired_r = 0, fired_o = 0, ne;
	char err[256];

	ck_assert_ptr_nonnull(set);
	ck_assert_ptr_nonnull(ev);
	ck_assert_msg(policy_set__parse("p", text, &lim, set, err, sizeof(err)) == 0, "%s", err);
	policy_eval__init(ev, set);
	for (uint64_t s = 100; s < 110; s++) {
		struct policy_proc pr[3];
		unsigned int nf;

		memset(pr, 0, sizeof(pr));
		for (int i = 0; i < 3; i++) {
			pr[i].pid = 10 + (uint32_t)i;
			for (int k = 0; k < POLICY_ITEM_MAX; k++)
				pr[i].value[k] = NAN;
			for (int k = 0; k < POLICY_PROBES; k++)
				pr[i].probe_hz[k] = 0;
		}
		/* 10: selected, 80 hits/s of probe 1; 11: not selected, same rate;
		 * 12: selected, 80 hits/s of probe 0 (not the one named) */
		pr[0].probe_hz[1] = 80;
		pr[0].selected = 1u << 0;
		pr[1].probe_hz[1] = 80;
		pr[2].probe_hz[0] = 80;
		pr[2].selected = 1u << 0;
		pr[0].value[POLICY_OFFCPU_PERCENT] = 99;
		pr[1].value[POLICY_OFFCPU_PERCENT] = 10;
		nf = policy_eval__second(ev, s, pr, 3, 0, f, 8, e, 8, &ne);
		for (unsigned int i = 0; i < nf; i++) {
			ck_assert_uint_eq(f[i].pid, 10);
			if (f[i].policy == 0) {
				ck_assert(f[i].value == 80);
				fired_r++;
			} else {
				ck_assert(f[i].value == 99);
				fired_o++;
			}
		}
	}
	ck_assert_uint_eq(fired_r, 1);
	ck_assert_uint_eq(fired_o, 1);
	free(set);
	free(ev);
}
END_TEST

/* cpa monitor refuses a policy naming a probe the run does not have, with the line. */
START_TEST(test_policy_probe_refused)
{
	char dir[PATH_MAX], pol[PATH_MAX + 64], st[PATH_MAX + 64];
	char want[PATH_MAX + 256];
	struct test_run *r = calloc(1, sizeof(*r));
	const char *args[] = {"monitor", "--store_dir",		st,  "--policy", pol,
			      "--probe", "kprobe:do_nanosleep", NULL};
	FILE *f;

	ck_assert_ptr_nonnull(r);
	test_scratch_in(dir, sizeof(dir), "polprobe");
	snprintf(pol, sizeof(pol), "%s/p.policy", dir);
	snprintf(st, sizeof(st), "%s/store", dir);
	f = fopen(pol, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "# the --probe comes after --policy on the command line\n"
		   "policy=ok item=probe_rate probe=kprobe:do_nanosleep threshold=5 period=3 "
		   "count=2 freq=99 duration=5\n"
		   "policy=bad item=cpu_percent threshold=5 period=3 count=2 "
		   "attach=uprobe:/bin/true:main duration=5\n");
	fclose(f);
	test_run_bin(r, "cpa", args);
	snprintf(want, sizeof(want),
		 "--policy: %s:3: attach=uprobe:/bin/true:main: not a probe of this run", pol);
	ck_assert_msg(r->code == 2, "exit %d: %.300s", r->code, r->err);
	ck_assert_msg(strstr(r->err, want), "stderr: %.300s", r->err);
	ck_assert_int_ne(access(st, F_OK), 0); /* refused before anything started */
	free(r);
	unlink(pol);
	rmdir(dir);
}
END_TEST

int main(int argc, char **argv)
{
	bool can_e2e = geteuid() == 0 && access("/sys/kernel/btf/vmlinux", R_OK) == 0;
	Suite *s;
	TCase *tc;

	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child_main(argv[2]);
	s = suite_create("policy");
	tc = tcase_create("file");
	tcase_add_test(tc, test_policy_new_keys_errors);
	tcase_add_test(tc, test_policy_new_keys_ok);
	tcase_add_test(tc, test_policy_new_items_eval);
	tcase_add_test(tc, test_policy_probe_refused);
	suite_add_tcase(s, tc);
	if (!can_e2e) {
		/* the file cases ran; the monitor case is skipped (77) */
		if (test_run_suite(s) != EXIT_SUCCESS)
			return EXIT_FAILURE;
		fprintf(stderr, "skip: the end-to-end case needs root and BTF\n");
		return TEST_SKIP;
	}
	tc = tcase_create("e2e");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_policy_e2e);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
