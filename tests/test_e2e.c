// SPDX-License-Identifier: MIT
/*
 * End-to-end tests on the real kernel: `cpa monitor` runs the four real
 * stages with BPF while a workload of ours with known call chains runs; then
 * `cpa show` exports and we check what a user would check in the .prof.
 *
 * Needs root and BTF (exit 77 otherwise). No mocks: real BPF, real
 * io_uring, real zstd, real libdw.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/macro.h"
#include "test_proc.h"
#include "test_util.h"

static char bin_dir[1024];

static void path_of(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", bin_dir, name);
}

/* ---- the workload ---- */

struct workload {
	pid_t pid;
	int out;
	uint64_t path_a_ns, path_b_ns;
	double cpu_s; /* user + system of the whole process */
};

static void workload_start(struct workload *w, const char *exe, double seconds, int depth)
{
	char path[1100], secs[32], dep[16], line[64];
	char *argv[] = {path, "--seconds", secs, "--threads", "1", "--depth", dep, NULL};
	ssize_t n;
	size_t len = 0;

	path_of(path, sizeof(path), exe);
	snprintf(secs, sizeof(secs), "%.1f", seconds);
	snprintf(dep, sizeof(dep), "%d", depth);
	memset(w, 0, sizeof(*w));
	w->pid = spawn(argv, &w->out);
	/* "pid N\n" arrives first: the workload is running from here on. */
	while (len < sizeof(line) - 1 && (n = read(w->out, line + len, 1)) == 1 &&
	       line[len] != '\n')
		len++;
	line[len] = 0;
	ck_assert_msg(strncmp(line, "pid ", 4) == 0, "workload said '%s'", line);
}

static void workload_finish(struct workload *w)
{
	struct rusage ru;
	char *out = slurp_fd(w->out), *p;

	ck_assert_int_eq(wait_exit(w->pid, &ru), 0);
	w->cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		   (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
	p = strstr(out, "path wl_path_a ");
	ck_assert_ptr_nonnull(p);
	w->path_a_ns = strtoull(p + 15, NULL, 10);
	p = strstr(out, "path wl_path_b ");
	ck_assert_ptr_nonnull(p);
	w->path_b_ns = strtoull(p + 15, NULL, 10);
	free(out);
}

/* ---- cpa monitor / show ---- */

static char *store_new(void)
{
	char d[PATH_MAX];

	scratch_store("e2e", d, sizeof(d));
	return strdup(d);
}

/* `cpa monitor` on store (its output in <store>.log), once all its stages run:
 * --duration counts from there. */
static pid_t monitor_start_backend(const char *store, int duration, int freq, int target_pid,
				   const char *backend)
{
	char cpa[1100], dur[16], f[16], p[16], log[1100];
	char *argv[16] = {cpa, "monitor", "--store_dir", (char *)store, "-F", f};
	int n = 6;

	path_of(cpa, sizeof(cpa), "cpa");
	snprintf(f, sizeof(f), "%d", freq);
	if (duration > 0) {
		snprintf(dur, sizeof(dur), "%d", duration);
		argv[n++] = "--duration";
		argv[n++] = dur;
	}
	if (target_pid > 0) {
		snprintf(p, sizeof(p), "%d", target_pid);
		argv[n++] = "--pid";
		argv[n++] = p;
	}
	if (backend) {
		argv[n++] = "--backend";
		argv[n++] = (char *)backend;
	}
	argv[n] = NULL;
	snprintf(log, sizeof(log), "%s.log", store);
	return spawn_monitor(argv, log, 60);
}

static pid_t monitor_start(const char *store, int duration, int freq, int target_pid)
{
	return monitor_start_backend(store, duration, freq, target_pid, NULL);
}

struct range {
	int h0, m0, s0, ms0, h1, m1, s1, ms1;
	long n;
};

/* `cpa show --show_range`: the byte-exact line scripts parse. */
static void show_range(const char *store, struct range *r)
{
	char cpa[1100];
	char *argv[] = {cpa, "show", "--read", (char *)store, "--show_range", NULL};
	regex_t re;
	regmatch_t m[1];
	char *out;
	int rc;

	path_of(cpa, sizeof(cpa), "cpa");
	out = run(argv, &rc);
	ck_assert_msg(rc == 0, "cpa show --show_range exited %d: %s", rc, out);
	ck_assert_int_eq(
		regcomp(&re,
			"^Record Time From \\[ [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} \\] to "
			"\\[ [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3} \\] Records Num: [0-9]+$",
			REG_EXTENDED | REG_NEWLINE),
		0);
	ck_assert_msg(regexec(&re, out, 1, m, 0) == 0, "show_range line does not parse: '%s'", out);
	ck_assert_int_eq(
		sscanf(out + m[0].rm_so,
		       "Record Time From [ %d:%d:%d.%d ] to [ %d:%d:%d.%d ] Records Num: %ld",
		       &r->h0, &r->m0, &r->s0, &r->ms0, &r->h1, &r->m1, &r->s1, &r->ms1, &r->n),
		9);
	regfree(&re);
	free(out);
}

/* Export the whole range as folded stacks with the label option label
 * ("--no_env", "--show_raw"); kind is --kind's value, NULL for the default. */
static char *show_kind_label(const char *store, const struct range *r, const char *kind,
			     const char *label)
{
	char cpa[1100], start[32], num[32], prof[1100];
	char *argv[] = {cpa, "show", "--read", (char *)store, "-B", start, "--output_num",
			num, "-o",   prof,     (char *)label, NULL, NULL,  NULL};
	char *out, *text;
	long span;
	int rc, fd;

	path_of(cpa, sizeof(cpa), "cpa");
	snprintf(start, sizeof(start), "%02d:%02d:%02d", r->h0, r->m0, r->s0);
	/* Every second from the first record to the last: asking past the last
	 * record is an error ("Not Found Enough Records"), as in CPA. */
	span = (r->h1 * 3600L + r->m1 * 60 + r->s1) - (r->h0 * 3600L + r->m0 * 60 + r->s0) + 1;
	snprintf(num, sizeof(num), "%ld", span > 0 ? span : span + 86400);
	snprintf(prof, sizeof(prof), "%s/out.prof", store);
	if (kind) {
		argv[11] = "--kind";
		argv[12] = (char *)kind;
	}
	out = run(argv, &rc);
	ck_assert_msg(rc == 0, "cpa show exited %d: %s", rc, out);
	ck_assert_msg(strstr(out, "Write  [ ") != NULL, "no Write line: %s", out);
	free(out);
	fd = open(prof, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	text = slurp_fd(fd);
	return text;
}

/* As show_kind_label(), without the env label. */
static char *show_kind(const char *store, const struct range *r, const char *kind)
{
	return show_kind_label(store, r, kind, "--no_env");
}

static char *show_all(const char *store, const struct range *r)
{
	return show_kind(store, r, NULL);
}

/* ---- parsing folded lines: "comm:pid;root;...;leaf; COUNT" ---- */

struct stack_stats {
	long pid_samples;   /* samples labelled with the workload's pid */
	long other_samples; /* everyone else */
	long chain_a;	    /* the whole main-thread chain, process start to the DSO leaf */
	long chain_b;	    /* the whole worker chain, thread start to the DSO leaf */
	long rooted;	    /* complete: from _start (main) or clone3 (worker) through the
			     * workload's own entry, whatever the leaf (e.g. clock_gettime) */
	long in_a, in_b;    /* samples inside wl_path_a / wl_path_b at all */
	long in_code;	    /* samples with a workload function (wl_*) on the stack */
	long rooted_in_code;
	char broken[2048]; /* the first stacks that are not rooted, for the failure message */
};

static bool root_is(const char *frames, const char *const *roots)
{
	size_t i;

	for (i = 0; roots[i]; i++) {
		size_t n = strlen(roots[i]);

		if (!strncmp(frames, roots[i], n) && frames[n] == ';')
			return true;
	}
	return false;
}

static void stats_of(const char *prof, pid_t pid, struct stack_stats *st)
{
	static const char *const proc_roots[] = {"_start", NULL};
	static const char *const thread_roots[] = {"clone3", "clone", "start_thread", NULL};
	char label[64];
	const char *line = prof;

	memset(st, 0, sizeof(*st));
	snprintf(label, sizeof(label), ":%d;", pid);
	while (line && *line) {
		const char *eol = strchr(line, '\n'), *semi, *sp;
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char *l = strndup(line, len);
		long count;

		line = eol ? eol + 1 : NULL;
		sp = strrchr(l, ' ');
		ck_assert_msg(sp && sp > l && sp[-1] == ';', "bad folded line '%s'", l);
		count = strtol(sp + 1, NULL, 10);
		ck_assert_int_gt(count, 0);
		semi = strchr(l, ';');
		if (!strstr(l, label) || strstr(l, label) > semi || stack_before_exec(semi)) {
			st->other_samples += count;
			free(l);
			continue;
		}
		st->pid_samples += count;
		if (strstr(l, ";wl_path_a;"))
			st->in_a += count;
		if (strstr(l, ";wl_path_b;"))
			st->in_b += count;
		if (strstr(l, ";wl_"))
			st->in_code += count;
		if ((root_is(semi + 1, proc_roots) && strstr(l, ";main;wl_main_loop;")) ||
		    (root_is(semi + 1, thread_roots) && strstr(l, ";wl_thread_main;"))) {
			st->rooted += count;
			st->rooted_in_code += count;
		} else if (strlen(st->broken) + len + 2 < sizeof(st->broken))
			snprintf(st->broken + strlen(st->broken),
				 sizeof(st->broken) - strlen(st->broken), "%s\n", l);
		if (root_is(semi + 1, proc_roots) &&
		    strstr(l, ";main;wl_main_loop;wl_path_a;wl_lib_work;wl_lib_spin;"))
			st->chain_a += count;
		if (root_is(semi + 1, thread_roots) &&
		    strstr(l, ";wl_thread_main;wl_path_b;wl_deep;") &&
		    strstr(l, ";wl_deep;wl_lib_work;wl_lib_spin;"))
			st->chain_b += count;
		free(l);
	}
}

/* Both threads' full chains appear, and nearly every sample is rooted. */
static void assert_intact(const struct stack_stats *st)
{
	ck_assert_msg(st->chain_a > 0 && st->chain_b > 0, "chains missing: a %ld b %ld",
		      st->chain_a, st->chain_b);
	ck_assert_msg(st->rooted >= 0.98 * st->pid_samples,
		      "only %ld of %ld samples have an intact chain; the first others:\n%s",
		      st->rooted, st->pid_samples, st->broken);
}

static void need_root_bpf(void)
{
	test_need_root_bpf(bin_dir, sizeof(bin_dir));
}

/* ---- tests ---- */

/*
 * Frame-pointer workload: the known chains appear intact from the process
 * or thread start down to the leaf in the shared library, and the number of
 * samples matches freq x the CPU time the workload really got.
 */
START_TEST(test_e2e_chain_and_count)
{
	const int freq = 49;
	char *store = store_new(), *prof;
	struct stack_stats st;
	struct workload w;
	struct range r;
	pid_t mon;
	double expect;

	need_root_bpf();
	mon = monitor_start(store, 7, freq, 0);
	workload_start(&w, "cpa-workload", 5.0, 6);
	workload_finish(&w);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	show_range(store, &r);
	ck_assert_int_ge(r.n, 5);
	prof = show_all(store, &r);
	stats_of(prof, w.pid, &st);

	expect = freq * w.cpu_s;
	fprintf(stderr,
		"e2e: workload cpu %.2fs, expected %.0f samples, got %ld (rooted %ld, chain a %ld, "
		"b %ld), others %ld\n",
		w.cpu_s, expect, st.pid_samples, st.rooted, st.chain_a, st.chain_b,
		st.other_samples);
	ck_assert_msg(st.pid_samples >= 0.7 * expect && st.pid_samples <= 1.3 * expect,
		      "workload samples %ld not within 30%% of %.0f", st.pid_samples, expect);
	/* Both threads' chains, intact from their roots to the DSO leaf. */
	assert_intact(&st);
	free(prof);
	free(store);
}
END_TEST

/* --backend perf: perf_event alone (no BPF) gives the same intact chains. */
START_TEST(test_e2e_perf_backend)
{
	char *store = store_new(), *prof;
	struct stack_stats st;
	struct workload w;
	struct range r;
	pid_t mon;

	need_root_bpf();
	mon = monitor_start_backend(store, 5, 49, 0, "perf");
	workload_start(&w, "cpa-workload", 3.0, 6);
	workload_finish(&w);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	show_range(store, &r);
	prof = show_all(store, &r);
	stats_of(prof, w.pid, &st);
	fprintf(stderr, "e2e perf backend: %ld samples (rooted %ld, chain a %ld, b %ld)\n",
		st.pid_samples, st.rooted, st.chain_a, st.chain_b);
	ck_assert_int_gt(st.pid_samples, 0.7 * 49 * w.cpu_s);
	assert_intact(&st);
	free(prof);
	free(store);
}
END_TEST

/* --pid filters in the kernel: nobody else appears in the store. */
START_TEST(test_e2e_pid_filter)
{
	char *store = store_new(), *prof;
	struct stack_stats st;
	struct workload w;
	struct range r;
	pid_t mon;

	need_root_bpf();
	/* It outlives the monitor's start-up (seconds on a loaded host) and
	 * its 4 s from there. */
	workload_start(&w, "cpa-workload", 20.0, 4);
	mon = monitor_start(store, 4, 99, w.pid);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	workload_finish(&w);

	show_range(store, &r);
	prof = show_all(store, &r);
	stats_of(prof, w.pid, &st);
	fprintf(stderr, "e2e --pid: %ld samples of the target, %ld of others\n", st.pid_samples,
		st.other_samples);
	/* Some samples of the target (how many depends on the CPU the neighbours
	 * leave it: the count check is test_e2e_chain_and_count's), none of others. */
	ck_assert_int_gt(st.pid_samples, 20);
	ck_assert_msg(st.other_samples == 0, "%ld samples of other processes with --pid",
		      st.other_samples);
	free(prof);
	free(store);
}
END_TEST

static int secs_of_day(int h, int m, int s)
{
	return h * 3600 + m * 60 + s;
}

/* SIGINT and SIGTERM both stop cleanly and leave the last seconds readable. */
static void stop_with(int sig)
{
	char *store = store_new();
	struct workload w;
	struct range r;
	struct tm tm;
	time_t t;
	pid_t mon;
	int at;

	need_root_bpf();
	workload_start(&w, "cpa-workload", 10.0, 2);
	mon = monitor_start(store, 0, 99, 0);
	/* Four seconds of sampling, counted from the first segment (a loaded
	 * host may take seconds to start the stages). */
	for (int i = 0;; i++) {
		char cmd[1200];
		char *argv[] = {"/bin/sh", "-c", cmd, NULL};
		char *out;
		int rc;

		snprintf(cmd, sizeof(cmd), "ls %s/cpa_*/seg_*.cps", store);
		out = run(argv, &rc);
		free(out);
		if (rc == 0)
			break;
		ck_assert_msg(i < 300, "no segment after 30 s");
		usleep(100 * 1000);
	}
	sleep(4);
	t = time(NULL);
	localtime_r(&t, &tm);
	at = secs_of_day(tm.tm_hour, tm.tm_min, tm.tm_sec);
	kill(mon, sig);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	workload_finish(&w);

	show_range(store, &r);
	ck_assert_int_ge(r.n, 3);
	/* The last record is from the last second or two before the signal. */
	ck_assert_msg(secs_of_day(r.h1, r.m1, r.s1) >= at - 2,
		      "last record %02d:%02d:%02d, signal at %d s of the day", r.h1, r.m1, r.s1,
		      at);
	free(store);
}

START_TEST(test_e2e_stop_sigint)
{
	stop_with(SIGINT);
}
END_TEST

START_TEST(test_e2e_stop_sigterm)
{
	stop_with(SIGTERM);
}
END_TEST

/*
 * Workload without frame pointers (-O2 -fomit-frame-pointer), 20-deep
 * recursion through a shared library: unwindd's CFI walk must give complete
 * stacks for at least 99.5% of its samples, and the share of each path must
 * match the CPU time the workload measured itself (CLOCK_THREAD_CPUTIME_ID)
 * within 3 percentage points.
 */
START_TEST(test_e2e_nofp_complete_and_shares)
{
	char *store = store_new(), *prof;
	struct stack_stats st;
	struct workload w;
	struct range r;
	double share_seen, share_real, tol;
	pid_t mon;

	need_root_bpf();
	/*
	 * 499 Hz: the share of a path is a proportion estimated from n samples,
	 * with a standard error of about 0.5/sqrt(n). At 99 Hz a busy 2-CPU run
	 * gives a few hundred samples (+-2.7 points), which would make a 3-point
	 * bound a coin toss; a few thousand bring it under 1 point.
	 */
	mon = monitor_start(store, 9, 499, 0);
	workload_start(&w, "cpa-workload-nofp", 7.0, 20);
	workload_finish(&w);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	show_range(store, &r);
	prof = show_all(store, &r);
	stats_of(prof, w.pid, &st);
	share_seen = (double)st.in_a / (double)(st.in_a + st.in_b);
	share_real = (double)w.path_a_ns / (double)(w.path_a_ns + w.path_b_ns);
	fprintf(stderr,
		"e2e nofp: cpu %.2fs, %ld samples, complete %ld (%.2f%%), path a share seen %.3f "
		"real %.3f\n",
		w.cpu_s, st.pid_samples, st.rooted,
		100.0 * (double)st.rooted / (double)st.pid_samples, share_seen, share_real);
	/* Samples in proportion to the CPU the workload got (a loaded
	 * machine gives it less), not an absolute count. */
	ck_assert_msg((double)st.pid_samples >= 0.7 * 499.0 * w.cpu_s,
		      "%ld samples for %.2f s of CPU at 499 Hz", st.pid_samples, w.cpu_s);
	/* 99.5 % of the samples in the workload's own code; the few in the
	 * loader, thread creation and exit have no wl_ frame to reach. */
	ck_assert_msg((double)st.rooted_in_code >= 0.995 * (double)st.in_code,
		      "complete stacks %ld of %ld in the workload's code (< 99.5%%); the first "
		      "others:\n%s",
		      st.rooted_in_code, st.in_code, st.broken);
	ck_assert_msg((double)st.rooted >= 0.98 * (double)st.pid_samples,
		      "complete stacks %ld of %ld (< 98%%); the first others:\n%s", st.rooted,
		      st.pid_samples, st.broken);
	/* 3 points, or three standard errors when fewer samples came. */
	tol = 1.5 / sqrt((double)st.pid_samples);
	if (tol < 0.03)
		tol = 0.03;
	ck_assert_msg(share_seen - share_real < tol && share_real - share_seen < tol,
		      "path share seen %.3f vs measured %.3f (tolerance %.3f)", share_seen,
		      share_real, tol);
	free(prof);
	free(store);
}
END_TEST

/*
 * Samples of the CFI fixture's process pid in prof (folded, no env label),
 * those complete (from _start through chain, e.g. ";main;big_a;big_b;big_c;")
 * and those cut short at the end of the copied stack.
 */
static void fixture_stacks(const char *prof, pid_t pid, const char *chain, long *total,
			   long *complete, long *cut)
{
	char label[64];
	const char *line;

	*total = *complete = *cut = 0;
	snprintf(label, sizeof(label), "cfi_fixture:%d;", pid);
	for (line = prof; line && *line;) {
		const char *eol = strchr(line, '\n');
		char *l = strndup(line, eol ? (size_t)(eol - line) : strlen(line));
		long n = strtol(strrchr(l, ' ') + 1, NULL, 10);

		line = eol ? eol + 1 : NULL;
		if (strncmp(l, label, strlen(label))) {
			free(l);
			continue;
		}
		*total += n;
		if (!strncmp(l + strlen(label), "_start;", 7) && strstr(l, chain))
			*complete += n;
		if (strstr(l, "<# STACK READ #>"))
			*cut += n;
		free(l);
	}
}

static char *slurp_path(const char *path);

/*
 * `cpa monitor` (whole machine, 99 Hz, 8 s; --stack_size stack_size unless
 * NULL) while the CFI fixture runs mode (bigloop, bigdeep) with args a1 and
 * a2. Returns the monitor's log; the fixture's samples, those complete from
 * _start through chain and those cut short in *total, *complete and *cut.
 */
static char *fixture_profile(const char *mode, const char *a1, const char *a2,
			     const char *stack_size, const char *chain, long *total, long *complete,
			     long *cut)
{
	char *store = store_new(), *prof, *text, cpa[1100], log[1100];
	char fix[] = CFI_FIXTURE_DIR "/cfi_fixture";
	char *argv[] = {cpa, "monitor",	     "--store_dir",	 store, "-F", "99", "--duration",
			"8", "--stack_size", (char *)stack_size, NULL};
	char *fargv[] = {fix, (char *)mode, (char *)a1, (char *)a2, NULL};
	pid_t mon, pid;
	int out;
	struct range r;

	path_of(cpa, sizeof(cpa), "cpa");
	if (!stack_size)
		argv[8] = NULL;
	snprintf(log, sizeof(log), "%s.log", store);
	mon = spawn_monitor(argv, log, 60);
	pid = spawn(fargv, &out);
	ck_assert_int_eq(wait_exit(pid, NULL), 0);
	close(out);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	show_range(store, &r);
	prof = show_all(store, &r);
	fixture_stacks(prof, pid, chain, total, complete, cut);
	text = slurp_path(log);
	free(prof);
	free(store);
	return text;
}

/*
 * The adaptive stack copy (issue 10): three 6 KB frames need ~20 KiB of
 * stack, more than the default 8 KiB. A process not learned yet copies up
 * to the cap (32 KiB), so its samples are complete to _start from the
 * first; unwindd then lowers the copy to what the walks need.
 */
START_TEST(test_e2e_adaptive_stack_copy)
{
	long total, complete, cut;

	need_root_bpf();
	free(fixture_profile("bigloop", "6", NULL, NULL, ";main;big_a;big_b;big_c;", &total,
			     &complete, &cut));
	fprintf(stderr, "e2e adaptive copy: %ld samples, %ld complete, %ld stack read\n", total,
		complete, cut);
	/* ~6 s of CPU at 99 Hz; fewer on a loaded host, enough for the share. */
	ck_assert_int_gt(total, 40);
	/* With a fixed 8 KiB copy none would be complete; a process not yet
	 * learned gets the cap, so nearly all are, from the first sample. */
	ck_assert_msg(complete >= 0.9 * (double)total, "complete %ld of %ld", complete, total);
}
END_TEST

/*
 * The CFI fixture spinning 4 s at the bottom of 6 KB frames (bigdeep: main,
 * five big_rec, big_c: ~37 KB of stack) under `cpa monitor --stack_size
 * size`: the monitor's log, the fixture's samples and complete ones.
 */
static char *bigdeep_run(const char *size, long *total, long *complete)
{
	long cut;
	char *text = fixture_profile("bigdeep", "4", "5", size,
				     ";main;big_rec;big_rec;big_rec;big_rec;big_rec;big_c;", total,
				     complete, &cut);

	fprintf(stderr, "e2e --stack_size %s: %ld samples, %ld complete, %ld stack read\n", size,
		*total, *complete, cut);
	return text;
}

/*
 * Every documented --stack_size runs the BPF backend: above 8192 (copy caps
 * of 48 and 64 KiB) its unrolled copy was too complex for the verifier and
 * capture fell back to the perf backend, after thousands of lines of
 * verifier log. A process with ~37 KB of stack, more than the default cap
 * (32 KiB), is complete from _start with any of them.
 */
START_TEST(test_e2e_stack_size_large)
{
	static const char *const sizes[] = {"12288", "16384", "65536"};
	long total, complete;

	need_root_bpf();
	for (size_t i = 0; i < ARRAY_SIZE(sizes); i++) {
		char *text = bigdeep_run(sizes[i], &total, &complete);

		ck_assert_msg(strstr(text, "(cpu-clock), user stack copy") &&
				      !strstr(text, "perf backend") && !strstr(text, "libbpf"),
			      "--stack_size %s: not the BPF backend; the log:\n%.3000s", sizes[i],
			      text);
		ck_assert_int_gt(total, 40);
		ck_assert_msg(complete >= 0.9 * (double)total,
			      "--stack_size %s: complete %ld of %ld", sizes[i], complete, total);
		free(text);
	}
}
END_TEST

/*
 * Where the verifier cannot take the copy (a kernel without bpf_loop(),
 * 5.17: forced here with CPA_BPF_USTACK_COPY=unrolled), capture says so in
 * one line naming --stack_size and samples through the perf backend: no
 * verifier log (that is for --verbose).
 */
START_TEST(test_e2e_stack_size_fallback)
{
	long total, complete;
	const char *p, *q;
	char *text;
	int lines = 0;

	need_root_bpf();
	setenv("CPA_BPF_USTACK_COPY", "unrolled", 1);
	text = bigdeep_run("65536", &total, &complete);
	unsetenv("CPA_BPF_USTACK_COPY");
	if (strstr(text, "(cpu-clock), user stack copy")) {
		fprintf(stderr, "skip: this kernel's verifier takes the unrolled 64 KiB copy\n");
		free(text);
		return;
	}
	for (p = text; (q = strstr(p, "--stack_size 65536")); p = q + 1)
		lines++;
	ck_assert_msg(lines == 1 && strstr(text, "--stack_size 65536: a user stack copy of up to "
						 "65536 bytes is too complex for this kernel's "
						 "BPF verifier without bpf_loop() (Linux 5.17+); "
						 "using the perf backend"),
		      "not one line naming --stack_size 65536 and the perf backend:\n%.3000s",
		      text);
	ck_assert_msg(!strstr(text, "libbpf"), "libbpf's log without --verbose:\n%.3000s", text);
	ck_assert_msg(strstr(text, "(cpu-clock, perf backend)"), "no perf backend:\n%.3000s", text);
	/* The perf backend copies 65528 bytes: the fixture is complete there too. */
	ck_assert_int_gt(total, 40);
	ck_assert_msg(complete >= 0.9 * (double)total, "complete %ld of %ld", complete, total);
	free(text);
}
END_TEST

/* ---- off-CPU ---- */

enum { OFF_SLEEP, OFF_PIPE, OFF_MUTEX, OFF_FSYNC, OFF_TWIN_A, OFF_TWIN_B, OFF_PATHS };
static const char *const off_names[OFF_PATHS] = {"sleep", "pipe",   "mutex",
						 "fsync", "twin_a", "twin_b"};

struct offcpu_seen {
	double ns[OFF_PATHS];	  /* weight on stacks through wl_block_<name> */
	bool state[OFF_PATHS][3]; /* R, S, D markers seen on them */
	bool pinned_r;		  /* R marker on wl_pinned_spin (preempted by the hog) */
	long lines, unmarked;	  /* folded lines; lines without an off-CPU marker */
};

static int state_idx(char c)
{
	return c == 'R' ? 0 : c == 'S' ? 1 : c == 'D' ? 2 : -1;
}

/* Folded off-CPU lines: "comm:pid;<# OFFCPU SAMPLE: (S) #>;root;...;leaf; NS". */
static void offcpu_of(const char *prof, struct offcpu_seen *o)
{
	const char *line = prof;
	char frame[64];

	memset(o, 0, sizeof(*o));
	while (line && *line) {
		const char *eol = strchr(line, '\n');
		char *l = strndup(line, eol ? (size_t)(eol - line) : strlen(line));
		const char *m = strstr(l, ";<# OFFCPU SAMPLE: (");
		double ns = strtod(strrchr(l, ' ') + 1, NULL);
		int st = m ? state_idx(m[20]) : -1;

		line = eol ? eol + 1 : NULL;
		o->lines++;
		if (strstr(l, "<# LOST: ")) {
			/* a loss row (counted and shown, e.g. a ring full on a
			 * slow sanitizer build): not a sample, no state to carry */
			o->lines--;
			free(l);
			continue;
		}
		if (!m || st < 0 || strncmp(m + 21, ") #>;", 5)) {
			o->unmarked++;
			free(l);
			continue;
		}
		for (int i = 0; i < OFF_PATHS; i++) {
			snprintf(frame, sizeof(frame), ";wl_block_%s;", off_names[i]);
			if (strstr(l, frame)) {
				o->ns[i] += ns;
				o->state[i][st] = true;
			}
		}
		if (st == 0 && strstr(l, ";wl_pinned_spin;"))
			o->pinned_r = true;
		free(l);
	}
}

/*
 * Off-CPU with known blocking (tests/workload/offcpu.c): nanosleep ~30 % and
 * a pipe read ~20 % of their threads' time, two threads contending a mutex,
 * fdatasync, a thread preempted by a hog on its CPU, and a thread sleeping
 * in turn through two callers that reach nanosleep with the same sp. The
 * workload times each blocking call with CLOCK_MONOTONIC. Checked: each
 * path's share of the off-CPU time of the three (sleep, pipe, mutex) within
 * 3 points of the truth, their ns summing to the truth within 5 %, the two
 * callers told apart (each one's share within 3 points), the states (S for
 * the three, D for fdatasync on a disk filesystem, R for the preempted
 * thread), blocks at one place aggregated (`cpa ctl status`: fewer stack
 * builds than half the blocks), and --kind: the default export of an
 * --offcpu run is its off-CPU samples, --kind on its on-CPU ones.
 */
START_TEST(test_e2e_offcpu)
{
	char *store = store_new(), *prof, *out, *p;
	char wl[1100], secs[] = "4", cpa[1100], pid_s[16], log[1100];
	char *wargv[] = {wl, "--seconds", secs, "--dir", store, NULL};
	char *margv[] = {cpa,  "monitor", "--store_dir", store, "--offcpu",
			 "-p", pid_s,	  "--duration",	 "8",	NULL};
	char *ctlargv[] = {cpa, "ctl", "status", "--store_dir", store, NULL};
	double truth[OFF_PATHS] = {0}, t3 = 0, s3 = 0, calls = 0, builds;
	struct offcpu_seen o;
	struct range r;
	struct statfs fs;
	int in, outfd;
	pid_t w, mon;

	need_root_bpf();
	path_of(wl, sizeof(wl), "cpa-wl-offcpu");
	path_of(cpa, sizeof(cpa), "cpa");
	w = spawn_io(wargv, &in, &outfd);
	/* "pid N" first; it then waits for a line on stdin. */
	{
		char line[64];
		size_t len = 0;

		while (len < sizeof(line) - 1 && read(outfd, line + len, 1) == 1 &&
		       line[len] != '\n')
			len++;
		line[len] = 0;
		ck_assert_msg(sscanf(line, "pid %15s", pid_s) == 1, "workload said '%s'", line);
	}
	snprintf(log, sizeof(log), "%s.log", store);
	mon = spawn_monitor(margv, log, 60); /* stages up, sched_switch attached */
	ck_assert_int_eq(write(in, "go\n", 3), 3);
	close(in);
	out = slurp_fd(outfd);
	ck_assert_int_eq(wait_exit(w, NULL), 0);
	for (int i = 0; i < OFF_PATHS; i++) {
		char key[32];

		snprintf(key, sizeof(key), "block %s ", off_names[i]);
		p = strstr(out, key);
		ck_assert_msg(p, "no '%s' in workload output: %s", key, out);
		truth[i] = strtod(p + strlen(key), NULL);
		snprintf(key, sizeof(key), "calls %s ", off_names[i]);
		p = strstr(out, key);
		ck_assert_msg(p, "no '%s' in workload output: %s", key, out);
		calls += strtod(p + strlen(key), NULL);
	}
	free(out);
	/* The monitor runs on for a few seconds: what has it cost so far? */
	{
		int rc;

		out = run(ctlargv, &rc);
		ck_assert_msg(rc == 0, "cpa ctl status exited %d: %s", rc, out);
		p = strstr(out, "offcpu_builds=");
		ck_assert_msg(p, "no offcpu_builds in cpa ctl status: %s", out);
		builds = strtod(p + strlen("offcpu_builds="), NULL);
		free(out);
	}
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	show_range(store, &r);
	prof = show_all(store, &r); /* default: off-CPU, as the run recorded it */
	offcpu_of(prof, &o);
	free(prof);
	for (int i = 0; i < OFF_FSYNC; i++) {
		t3 += truth[i];
		s3 += o.ns[i];
	}
	for (int i = 0; i < OFF_PATHS; i++)
		fprintf(stderr, "e2e offcpu: %-5s truth %.3fs seen %.3fs (R%d S%d D%d)\n",
			off_names[i], truth[i] / 1e9, o.ns[i] / 1e9, o.state[i][0], o.state[i][1],
			o.state[i][2]);
	fprintf(stderr, "e2e offcpu: three paths truth %.3fs seen %.3fs, %ld lines\n", t3 / 1e9,
		s3 / 1e9, o.lines);
	fprintf(stderr, "e2e offcpu: %.0f stack builds for %.0f timed blocks\n", builds, calls);
	ck_assert_msg(o.lines > 0 && o.unmarked == 0, "%ld of %ld lines without a state marker",
		      o.unmarked, o.lines);
	ck_assert_msg(s3 >= 0.95 * t3 && s3 <= 1.05 * t3, "off-CPU ns %.0f vs blocked %.0f", s3,
		      t3);
	for (int i = 0; i < OFF_FSYNC; i++) {
		double seen = o.ns[i] / s3, real = truth[i] / t3;

		ck_assert_msg(seen - real < 0.03 && real - seen < 0.03,
			      "%s share seen %.3f vs measured %.3f", off_names[i], seen, real);
		ck_assert_msg(o.state[i][1], "%s: no S marker", off_names[i]);
	}
	ck_assert_msg(o.pinned_r, "no R marker on the preempted thread");
	/* Two callers at one ip/sp/bp: told apart by their return addresses. */
	{
		double seen = o.ns[OFF_TWIN_A] / (o.ns[OFF_TWIN_A] + o.ns[OFF_TWIN_B] + 1),
		       real = truth[OFF_TWIN_A] / (truth[OFF_TWIN_A] + truth[OFF_TWIN_B]);

		ck_assert_msg(seen - real < 0.03 && real - seen < 0.03,
			      "twin_a share seen %.3f vs measured %.3f (twin_b seen %.0f ns)", seen,
			      real, o.ns[OFF_TWIN_B]);
	}
	/* Blocks at a place seen before add their ns to its entry; only a new
	 * place builds a stack. Every block building one (e.g. a word that
	 * changes at each block taken for part of the place) costs a stack
	 * copy per context switch. */
	ck_assert_msg(builds < calls / 2, "%.0f off-CPU stack builds for %.0f blocks", builds,
		      calls);
	/* Blocked time inside fdatasync cannot exceed the time spent in it. */
	ck_assert_msg(o.ns[OFF_FSYNC] <= 1.05 * truth[OFF_FSYNC],
		      "fdatasync off-CPU %.0f ns > %.0f", o.ns[OFF_FSYNC], truth[OFF_FSYNC]);
	/* fdatasync only waits for I/O on a disk filesystem (not tmpfs). */
	ck_assert_int_eq(statfs(store, &fs), 0);
	if (fs.f_type != TMPFS_MAGIC)
		ck_assert_msg(o.state[OFF_FSYNC][2], "fdatasync: no D marker");

	prof = show_kind(store, &r, "on");
	ck_assert_msg(strstr(prof, "OFFCPU SAMPLE") == NULL, "--kind on exported off-CPU lines");
	ck_assert_msg(strstr(prof, ";wl_pinned_spin;") != NULL, "--kind on: no on-CPU samples");
	free(prof);
	/* The raw label of an off-CPU sample, as CPA's: "-<tgid>-<cpu>-<tid>|", and the
	 * workload's threads are told apart (it blocks in threads of its own). */
	prof = show_kind_label(store, &r, "off", "--show_raw");
	{
		long tgid = atol(pid_s), tid, other = 0, lines = 0;
		char *save = NULL;

		for (p = strtok_r(prof, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
			unsigned long long slot;
			unsigned int cpu;

			ck_assert_msg(strlen(p) > 31 && p[30] == '-', "no raw label: '%s'", p);
			ck_assert_int_eq(sscanf(p + 30, "-%llu-%u-%ld|", &slot, &cpu, &tid), 3);
			if ((long)slot != tgid)
				continue;
			lines++;
			ck_assert_int_ge(tid, tgid);
			other += tid != tgid;
		}
		ck_assert_msg(lines > 0, "no off-CPU line with the tgid %ld in the cgroup slot",
			      tgid);
		ck_assert_msg(other > 0, "no off-CPU line of a thread other than %ld", tgid);
	}
	free(prof);
	free(store);
}
END_TEST

/* ---- real Debian programs nobody here wrote ---- */

/* Run argv (stdin from in or /dev/null, stdout to /dev/null) to its end; its pid. */
static pid_t run_prog(char *const argv[], const char *in)
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fi = open(in ? in : "/dev/null", O_RDONLY), fo = open("/dev/null", O_WRONLY);

		dup2(fi, 0);
		dup2(fo, 1);
		execv(argv[0], argv);
		_exit(127);
	}
	ck_assert_int_eq(wait_exit(pid, NULL), 0);
	return pid;
}

/* A text file of n MiB that compresses like text (words of a small vocabulary). */
static void gen_text(const char *path, unsigned int mib)
{
	static const char *const words[] = {
		"profile", "stack",   "frame", "sample", "kernel", "unwind", "symbol", "ring",
		"store",   "monitor", "the",   "of",	 "a",	   "to",     "cpu",    "perf"};
	FILE *f = fopen(path, "w");
	uint64_t x = 88172645463325252ull, n = 0;

	ck_assert_ptr_nonnull(f);
	while (n < (uint64_t)mib << 20) {
		int k;

		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		k = fprintf(f, "%s%s%llu", words[x % 16], (x >> 8) % 11 ? " " : "\n",
			    (unsigned long long)(x >> 40) % 1000);
		n += (uint64_t)k;
	}
	fclose(f);
}

/* Function starts (file offsets) of every FDE readelf sees in path, and
 * the entry point as a file offset. */
struct fde_set {
	unsigned long *v;
	size_t n;
	unsigned long entry;
};

static unsigned long va_off(const char *path, unsigned long va)
{
	char cmd[1200], line[512];
	unsigned long off = va, o, v, fs;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, " LOAD 0x%lx 0x%lx 0x%*x 0x%lx", &o, &v, &fs) == 3 && va >= v &&
		    va - v < fs)
			off = va - v + o;
	pclose(p);
	return off;
}

static void fde_set_of(const char *path, struct fde_set *fs)
{
	char cmd[1200], line[1024];
	unsigned long lo, hi, base_o = 0, base_v = 0, o, v, sz;
	size_t cap = 0;
	FILE *p;

	memset(fs, 0, sizeof(*fs));
	/* text: the executable LOAD (one per binary here) */
	snprintf(cmd, sizeof(cmd), "readelf -lW '%s'", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, " LOAD 0x%lx 0x%lx 0x%*x 0x%*x 0x%lx", &o, &v, &sz) == 3 &&
		    strstr(line, " R E ")) {
			base_o = o;
			base_v = v;
		}
	pclose(p);
	snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames '%s'", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (fgets(line, sizeof(line), p)) {
		const char *pc = strstr(line, " FDE ");

		if (!pc || !(pc = strstr(pc, "pc=")) || sscanf(pc, "pc=%lx..%lx", &lo, &hi) != 2)
			continue;
		ck_assert_int_eq(array_grow((void **)&fs->v, &cap, fs->n + 1, sizeof(*fs->v)), 0);
		fs->v[fs->n++] = lo - base_v + base_o;
	}
	pclose(p);
	snprintf(cmd, sizeof(cmd), "readelf -hW '%s'", path);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (fgets(line, sizeof(line), p))
		if (sscanf(line, " Entry point address: 0x%lx", &lo) == 1)
			fs->entry = va_off(path, lo);
	pclose(p);
}

static bool fde_set_has(const struct fde_set *fs, unsigned long off)
{
	size_t i;

	for (i = 0; i < fs->n; i++)
		if (fs->v[i] == off)
			return true;
	return false;
}

struct real_stats {
	long samples, complete, stopped;
	long mod_named; /* distinct "<module>+0x..." frames */
	long mod_bad;	/* of them, not at an FDE start */
	long mod_exact; /* distinct "0x... [<module>]" frames (exact pcs) */
};

/* Per pid: complete = rooted at the process or a thread start (the entry
 * point of a stripped program is named "<prog>+0x<entry>"; the dynamic
 * loader's _start, where a sample in its start-up ends, has no FDE nor
 * symbol on Debian 12: "0x<pc> [ld-linux-x86-64.so.2]" within its first
 * bytes). Frames of the stripped module must be named by FDE starts. */
static void real_stats_of(const char *prof, pid_t pid, const char *prog, const char *modpath,
			  struct real_stats *st)
{
	static const char *const roots[] = {"_start", "__libc_start_main", "clone3",
					    "clone",  "start_thread",	   NULL};
	char label[64], entry[256], named[256][64], exact[256][64], real[PATH_MAX];
	const char *mod = NULL;
	const char *line = prof, *comm;
	struct fde_set fs = {0}, pfs = {0}, lfs = {0};
	size_t nnamed = 0, nexact = 0, i;
	unsigned long ldpc;

	memset(st, 0, sizeof(*st));
	if (modpath) {
		/* frames carry the name of the file mapped: symlinks resolved */
		ck_assert_ptr_nonnull(realpath(modpath, real));
		mod = strrchr(real, '/') + 1;
		fde_set_of(modpath, &fs);
	}
	fde_set_of(prog, &pfs);
	if (access("/lib64/ld-linux-x86-64.so.2", R_OK) == 0)
		fde_set_of("/lib64/ld-linux-x86-64.so.2", &lfs);
	snprintf(entry, sizeof(entry), "%s+0x%lx", strrchr(prog, '/') + 1, pfs.entry);
	snprintf(label, sizeof(label), ":%d;", pid);
	comm = strrchr(prog, '/') + 1;
	while (line && *line) {
		const char *eol = strchr(line, '\n'), *semi;
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char *l = strndup(line, len), *sp, *tok, *save = NULL, *root;
		long count;

		line = eol ? eol + 1 : NULL;
		sp = strrchr(l, ' ');
		semi = strchr(l, ';');
		if (!sp || !semi || !strstr(l, label) || strstr(l, label) > semi) {
			free(l);
			continue;
		}
		count = strtol(sp + 1, NULL, 10);
		*sp = 0;
		/* The program's own comm only: before and during its execve the
		 * pid is the forking test process (its registers, its comm). */
		if (strncmp(l, comm, strlen(comm)) || l[strlen(comm)] != ':') {
			free(l);
			continue;
		}
		st->samples += count;
		root = strndup(semi + 1, strcspn(semi + 1, ";"));
		if (strstr(semi, ";<# ")) {  /* a marker: unwind stop, degraded */
			if (st->stopped < 5) /* what a failure looks like */
				fprintf(stderr, "  stopped: %.300s\n",
					l + strlen(l) - MIN(strlen(l), 300));
			st->stopped += count;
		} else {
			bool ok = !strcmp(root, entry);

			/* the loader's entry: _start calls _dl_start at once */
			if (lfs.entry && sscanf(root, "0x%lx [ld-linux-x86-64.so.2]", &ldpc) == 1 &&
			    ldpc > lfs.entry && ldpc - lfs.entry < 16)
				ok = true;

			for (i = 0; roots[i]; i++)
				ok = ok || !strcmp(root, roots[i]);
			if (ok)
				st->complete += count;
			else if (st->samples - st->complete - st->stopped < 5 + count)
				fprintf(stderr, "  not rooted: %.300s\n", l);
		}
		free(root);
		for (tok = strtok_r((char *)semi + 1, ";", &save); mod && tok;
		     tok = strtok_r(NULL, ";", &save)) {
			size_t ml = strlen(mod);
			char(*set)[64] = NULL;
			size_t *n = NULL, j;

			if (!strncmp(tok, mod, ml) && !strncmp(tok + ml, "+0x", 3)) {
				set = named;
				n = &nnamed;
				if (!fde_set_has(&fs, strtoul(tok + ml + 3, NULL, 16))) {
					fprintf(stderr, "not an FDE start: %s\n", tok);
					st->mod_bad++;
				}
			} else if (!strncmp(tok, "0x", 2) && strstr(tok, mod)) {
				set = exact;
				n = &nexact;
				fprintf(stderr, "  exact pc: %s\n", tok);
			}
			if (!set)
				continue;
			for (j = 0; j < *n && strcmp(set[j], tok); j++)
				;
			if (j == *n && *n < 256)
				snprintf(set[(*n)++], 64, "%s", tok);
		}
		free(l);
	}
	st->mod_named = (long)nnamed;
	st->mod_exact = (long)nexact;
	free(fs.v);
	free(pfs.v);
	free(lfs.v);
}

struct real_prog {
	const char *name;
	char *argv[12];
	const char *in;	     /* stdin file, or NULL */
	const char *modpath; /* a stripped module it spends its time in */
};

/* Run progs one after the other under one `cpa monitor` (whole machine,
 * 99 Hz, extra options), export, check each by its pid. */
static void run_real(const char *tag, struct real_prog *progs, size_t n, const char *stack_size,
		     double min_complete)
{
	char *store = store_new(), *prof, cpa[1100], log[1100];
	char *argv[16] = {cpa, "monitor", "--store_dir", store, "-F", "99"};
	int a = 6;
	pid_t mon, pids[8];
	struct range r;
	size_t i;

	path_of(cpa, sizeof(cpa), "cpa");
	if (stack_size) {
		argv[a++] = "--stack_size";
		argv[a++] = (char *)stack_size;
	}
	argv[a] = NULL;
	snprintf(log, sizeof(log), "%s.log", store);
	mon = spawn_monitor(argv, log, 60);
	for (i = 0; i < n; i++)
		pids[i] = run_prog(progs[i].argv, progs[i].in);
	sleep(1);
	kill(mon, SIGINT);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	show_range(store, &r);
	prof = show_all(store, &r);
	for (i = 0; i < n; i++) {
		struct real_stats st;

		real_stats_of(prof, pids[i], progs[i].argv[0], progs[i].modpath, &st);
		fprintf(stderr,
			"e2e real %s%s: %ld samples, complete %.2f%%, stopped %.2f%%; %s: %ld "
			"functions named by FDE (%ld not at an FDE start), %ld exact-pc frames\n",
			progs[i].name, tag, st.samples,
			100.0 * (double)st.complete / (double)(st.samples ? st.samples : 1),
			100.0 * (double)st.stopped / (double)(st.samples ? st.samples : 1),
			progs[i].modpath ? progs[i].modpath : "-", st.mod_named, st.mod_bad,
			st.mod_exact);
		ck_assert_msg(st.samples >= 50, "%s: only %ld samples", progs[i].name, st.samples);
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
		/* Sanitized stages run 2-3x slower: unwindd's first copy-size
		 * hint reaches capture later and more early samples are cut
		 * short. The bar is the plain build's; this build hunts memory
		 * errors on the same programs. */
		if (i == 0)
			min_complete -= 0.10;
#endif
		ck_assert_msg((double)st.complete >= min_complete * (double)st.samples,
			      "%s: complete %ld of %ld (< %.0f%%)", progs[i].name, st.complete,
			      st.samples, 100 * min_complete);
		ck_assert_msg(st.mod_bad == 0, "%s: %ld frames not at an FDE start", progs[i].name,
			      st.mod_bad);
		if (progs[i].modpath)
			ck_assert_msg(st.mod_named > 0 && st.mod_exact == 0,
				      "%s: %ld FDE-named, %ld exact-pc frames in %s", progs[i].name,
				      st.mod_named, st.mod_exact, progs[i].modpath);
	}
	free(prof);
	free(store);
}

/*
 * Debian's own gzip and xz (stripped, FP-less, -O2): complete stacks
 * (>= 99 %, where perf --call-graph dwarf gets 100 %), and the functions
 * of stripped code named one frame per function (by FDE start).
 */
START_TEST(test_e2e_real_programs)
{
	char *dir = test_scratch("e2e-real"), big[PATH_MAX], mid[PATH_MAX];
	struct real_prog progs[] = {
		{"gzip -9", {"/usr/bin/gzip", "-9", "-c", NULL}, big, "/usr/bin/gzip"},
		{"xz -9",
		 {"/usr/bin/xz", "-9", "-T1", "-c", NULL},
		 mid,
		 "/usr/lib/x86_64-linux-gnu/liblzma.so.5"},
	};

	need_root_bpf();
	snprintf(big, sizeof(big), "%s/big.txt", dir);
	snprintf(mid, sizeof(mid), "%s/mid.txt", dir);
	gen_text(big, 48);
	gen_text(mid, 5);
	run_real("", progs, ARRAY_SIZE(progs), NULL, 0.99);
	unlink(big);
	unlink(mid);
	free(dir);
}
END_TEST

/*
 * bzip2 -9 and sqlite3: their 5-6 KB frames need more than the default 8 KiB
 * stack copy; openssl's RSA (BN_mod_exp_mont_consttime and friends) more
 * than 32 KiB. A process the adaptive copy has not learned yet gets the cap
 * (32 KiB, clamped at its real stack top), so all four run with the
 * defaults and are complete from their first samples; unwindd then lowers
 * each to what its walks need. Bars: bzip2 and openssl 99 %, sqlite3 97 %
 * and perl 95 % (perf --call-graph dwarf got 86-90 % on perl in
 * bench_fidelity).
 */
START_TEST(test_e2e_real_big_frames)
{
	char *dir = test_scratch("e2e-real"), big[PATH_MAX];
	struct real_prog progs[] = {
		{"bzip2 -9",
		 {"/usr/bin/bzip2", "-9", "-c", NULL},
		 big,
		 "/usr/lib/x86_64-linux-gnu/libbz2.so.1.0"},
		{"sqlite3",
		 {"/usr/bin/sqlite3", ":memory:",
		  "CREATE TABLE t(a, b); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
		  "FROM c WHERE x < 1500000) INSERT INTO t SELECT x, hex(randomblob(8)) FROM c; "
		  "CREATE INDEX ti ON t(b); SELECT count(*), sum(a % 7) FROM t WHERE b > '8'; "
		  "SELECT b FROM t ORDER BY b DESC LIMIT 3;",
		  NULL},
		 NULL,
		 "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0"},
		{"perl",
		 {"/usr/bin/perl", "-e",
		  "my ($n, %h) = (0); while ($n++ < 500000) { $h{$_ % 1000} .= 'x' for 1..100; "
		  "%h = () if length($h{7}) > 400 }",
		  NULL},
		 NULL,
		 "/usr/bin/perl"},
		{"openssl rsa2048",
		 {"/usr/bin/openssl", "speed", "-seconds", "5", "rsa2048", NULL},
		 NULL,
		 NULL},
	};

	need_root_bpf();
	if (access("/usr/bin/sqlite3", X_OK) != 0 || access("/usr/bin/bzip2", X_OK) != 0) {
		fprintf(stderr, "skip: sqlite3 or bzip2 not installed\n");
		return;
	}
	snprintf(big, sizeof(big), "%s/bz.txt", dir);
	gen_text(big, 48);
	run_real("", progs, 1, NULL, 0.99);
	run_real("", progs + 1, 1, NULL, 0.97);
	run_real("", progs + 2, 1, NULL, 0.95);
	if (access("/usr/bin/openssl", X_OK) == 0)
		run_real("", progs + 3, 1, NULL, 0.99);
	else
		fprintf(stderr, "skip openssl: not installed\n");
	unlink(big);
	free(dir);
}
END_TEST

/* ---- one-shot ---- */

static char *slurp_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "cannot open '%s': %s", path, strerror(errno));
	return slurp_fd(fd);
}

/* `cpa monitor --oneshot -o <dir>/out.prof` plus extra arguments, its stderr
 * in <dir>.log; returns once all its stages run. */
static pid_t oneshot_start(const char *dir, char *prof, size_t len, const char *duration,
			   int *ret_out)
{
	char cpa[1100], log[1100];
	char *argv[] = {cpa,  "monitor",    "--oneshot",      "-o", prof, "-F",
			"99", "--duration", (char *)duration, NULL};
	pid_t pid;

	path_of(cpa, sizeof(cpa), "cpa");
	snprintf(prof, len, "%s/out.prof", dir);
	snprintf(log, sizeof(log), "%s.log", dir);
	pid = spawn_env(argv, ret_out, log, NULL);
	wait_monitor_up(log, 60);
	return pid;
}

/*
 * The one-shot profile, as a user checks it: CPA's one-shot layout on every
 * line, the raw label first ("thread(15)process(15)-cgid-cpu-pid|SYSTEM;root;
 * ...;leaf; COUNT", as `cpa show --show_raw`), the workload's two hot chains
 * intact, and nothing of the run's work store left beside it.
 */
static void oneshot_check(const char *dir, const char *prof, const char *out, pid_t pid)
{
	char *text = slurp_path(prof), *noenv = calloc(1, strlen(text) + 1), *l, *save = NULL;
	struct stack_stats st;
	char write_line[1200];
	DIR *d;
	struct dirent *de;
	size_t n = 0;

	ck_assert_ptr_nonnull(noenv);
	snprintf(write_line, sizeof(write_line), "] Record to %s, Stack Type ", prof);
	ck_assert_msg(strncmp(out, "Write  [ ", 9) == 0 && strstr(out, write_line),
		      "no Write line: '%s'", out);
	for (l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *semi = strchr(l, ';'), *bar = strchr(l, '|'), *dash, pcomm[16];
		int k = 15;

		/* Scripts slice columns 0-15 and 15-30; "-cgid-cpu-pid|env" follows. */
		ck_assert_msg(semi && bar && bar < semi && strlen(l) > 31 && l[30] == '-' &&
				      !strncmp(bar, "|SYSTEM;", 8),
			      "no raw label first: '%s'", l);
		*bar = 0;
		dash = strrchr(l, '-');
		memcpy(pcomm, l + 15, 15);
		while (k > 0 && pcomm[k - 1] == ' ')
			k--;
		pcomm[k] = 0;
		/* As the default labels, for stats_of(): "comm:pid;frames". */
		n += (size_t)sprintf(noenv + n, "%s:%s%s\n", pcomm, dash + 1, semi);
	}
	stats_of(noenv, pid, &st);
	fprintf(stderr, "e2e oneshot: %ld samples of the workload (rooted %ld, a %ld, b %ld)\n",
		st.pid_samples, st.rooted, st.chain_a, st.chain_b);
	assert_intact(&st);
	d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		ck_assert_msg(strncmp(de->d_name, ".cpa-oneshot", 12) != 0,
			      "work store '%s' left behind", de->d_name);
	closedir(d);
	free(noenv);
	free(text);
}

/*
 * A one-shot run with the workload: stopped by --duration, or by SIGINT
 * sigint_after seconds after its stages run when that is not 0; the profile
 * must appear.
 */
static void oneshot_run(double wl_seconds, const char *duration, unsigned int sigint_after)
{
	char *dir = store_new(), prof[1100], *out;
	struct workload w;
	pid_t mon;
	int fd;

	need_root_bpf();
	mon = oneshot_start(dir, prof, sizeof(prof), duration, &fd);
	workload_start(&w, "cpa-workload", wl_seconds, 6);
	if (sigint_after) {
		sleep(sigint_after);
		kill(mon, SIGINT);
	}
	out = slurp_fd(fd);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	workload_finish(&w);
	oneshot_check(dir, prof, out, w.pid);
	free(out);
	free(dir);
}

/* --oneshot --duration: the profile appears when the duration is over. */
START_TEST(test_oneshot_duration)
{
	oneshot_run(7.0, "4", 0);
}
END_TEST

/* --oneshot stopped by SIGINT long before its duration: the profile still appears. */
START_TEST(test_oneshot_sigint)
{
	oneshot_run(9.0, "3600", 5);
}
END_TEST

/* ---- --bench ---- */

/*
 * Run `cpa monitor` (argv, env added) to its end with its stderr in
 * <store>/monitor.log while the workload runs; it must exit 0. Returns the log.
 */
static char *monitor_logged(const char *store, char *const argv[], char *const env[],
			    const char *wl, double wl_seconds, int wl_depth)
{
	char err[1100];
	struct workload w;
	pid_t mon;

	snprintf(err, sizeof(err), "%s/monitor.log", store);
	workload_start(&w, wl, wl_seconds, wl_depth);
	mon = spawn_env(argv, NULL, err, env);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	workload_finish(&w);
	return slurp_path(err);
}

/* CPA's two lines per interval are in the monitor's stderr, with numbers. */
START_TEST(test_bench_cpa_lines)
{
	char *store = store_new(), cpa[1100], *log;
	char *argv[] = {cpa,  "monitor", "--store_dir", store, "--bench",
			"-F", "99",	 "--duration",	"8",   NULL};
	regex_t unw, hist;
	regmatch_t m[2];
	const char *p;
	long lines = 0, with_samples = 0;

	need_root_bpf();
	path_of(cpa, sizeof(cpa), "cpa");
	log = monitor_logged(store, argv, NULL, "cpa-workload-nofp", 10.0, 10);
	ck_assert_int_eq(regcomp(&unw,
				 "Bench DWARF Unwind: count=([0-9]+) rate=[0-9]+\\.[0-9]{2}/s "
				 "avg=[0-9]+\\.[0-9]{2} us min=[0-9]+\\.[0-9]{2} us "
				 "max=[0-9]+\\.[0-9]{2} us$",
				 REG_EXTENDED | REG_NEWLINE),
			 0);
	ck_assert_int_eq(regcomp(&hist,
				 "Bench DWARF Histogram:( (<1|[0-9]+-[0-9]+|>=4096)us=[0-9]+)+$",
				 REG_EXTENDED | REG_NEWLINE),
			 0);
	for (p = log; regexec(&unw, p, 2, m, 0) == 0; p += m[0].rm_eo) {
		lines++;
		with_samples += strtol(p + m[1].rm_so, NULL, 10) > 0;
	}
	/* One per interval (the first ones may come before the first sample). */
	ck_assert_msg(lines >= 3 && with_samples >= 1,
		      "%ld Bench DWARF Unwind lines, %ld with samples:\n%s", lines, with_samples,
		      log);
	ck_assert_msg(regexec(&hist, log, 0, NULL, 0) == 0, "no Bench DWARF Histogram line:\n%s",
		      log);
	regfree(&unw);
	regfree(&hist);
	free(log);
	free(store);
}
END_TEST

/* kernel.bpf_stats_enabled as it reads now ('?' when unreadable). */
static char bpf_stats_sysctl(void)
{
	char c = '?';
	int fd = open("/proc/sys/kernel/bpf_stats_enabled", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = '?';
		close(fd);
	}
	return c;
}

/*
 * `cpa ctl cost` on the real pipeline, whole machine, while cpa-workload
 * keeps a CPU busy: the window counts samples, every process of the agent
 * has a measured row, and capture's cpu-clock program ran in the window with
 * a run time, measured with bpf_stats on for the window only (the sysctl is
 * as it was, before and after).
 */
START_TEST(test_e2e_ctl_cost)
{
	static const char *const procs[] = {"capture", "unwindd", "symd", "storer", "monitor"};
	char *store = store_new(), cpa[1100], *out, *p;
	char *argv[] = {cpa, "ctl", "cost", "2", "--store_dir", store, NULL};
	char stats = bpf_stats_sysctl();
	unsigned long samples = 0, runs = 0;
	double ns = 0;
	struct workload w;
	pid_t mon;
	int rc;

	need_root_bpf();
	path_of(cpa, sizeof(cpa), "cpa");
	mon = monitor_start(store, 6, 99, 0);
	workload_start(&w, "cpa-workload", 5.0, 6);
	out = run(argv, &rc);
	ck_assert_msg(rc == 0, "cpa ctl cost exited %d:\n%s", rc, out);
	p = strstr(out, "cpa cost over ");
	ck_assert_msg(p && sscanf(p, "cpa cost over %*f s: %lu samples", &samples) == 1 &&
			      samples > 0,
		      "no samples in the window:\n%s", out);
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		char row[32];
		const char *l, *end;

		snprintf(row, sizeof(row), "\n%-9s ", procs[i]);
		l = strstr(out, row);
		ck_assert_msg(l, "no %s row:\n%s", procs[i], out);
		end = strchr(l + 1, '\n');
		ck_assert_ptr_nonnull(end);
		ck_assert_msg(!memmem(l, (size_t)(end - l), "not ", 4), "%s not measured:\n%s",
			      procs[i], out);
	}
	p = strstr(out, "\ncpa_on_cpu ");
	ck_assert_msg(p && sscanf(p + 1, "cpa_on_cpu %lu %*f %lf", &runs, &ns) == 2 && runs > 0 &&
			      ns > 0,
		      "no run time of cpa_on_cpu:\n%s", out);
	fprintf(stderr, "e2e: ctl cost: %lu samples, cpa_on_cpu %lu runs at %.0f ns\n", samples,
		runs, ns);
	ck_assert_int_eq(bpf_stats_sysctl(), stats);
	free(out);
	workload_finish(&w);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	free(store);
}
END_TEST

/*
 * `cpa ctl rate` and `cpa ctl mem` on the real pipeline: each answers while
 * the monitor runs (their lock is not the storer's lock on the store root,
 * which a ctl run used to wait for until the monitor stopped), and the value
 * is in place (`cpa ctl status`).
 */
static char *ctl_while_running(const char *cpa, const char *store, pid_t mon, const char *verb,
			       const char *stage, const char *value)
{
	char *argv[] = {(char *)cpa,  "ctl",	     "--store_dir", (char *)store,
			(char *)verb, (char *)stage, (char *)value, NULL};
	int out_fd, status = 0;
	pid_t ctl = spawn(argv, &out_fd);
	char *out;

	/* A bound on a hang, not a timing: the run takes milliseconds. */
	for (int i = 0; waitpid(ctl, &status, WNOHANG) == 0; i++) {
		if (i == 600) {
			kill(ctl, SIGKILL);
			waitpid(ctl, NULL, 0);
			kill(mon, SIGINT);
			ck_abort_msg("cpa ctl %s %s %s still waits after 60 s, monitor running",
				     verb, stage, value);
		}
		ck_assert_int_eq(waitpid(mon, NULL, WNOHANG), 0);
		usleep(100 * 1000);
	}
	out = slurp_fd(out_fd);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "cpa ctl %s %s %s: status %d:\n%s", verb, stage, value, status, out);
	return out;
}

START_TEST(test_e2e_ctl_writers)
{
	char *store = store_new(), cpa[1100], *out;
	char *status_argv[] = {cpa, "ctl", "--store_dir", store, "status", NULL};
	pid_t mon;
	int rc;

	need_root_bpf();
	path_of(cpa, sizeof(cpa), "cpa");
	mon = monitor_start(store, 0, 49, 0);
	out = ctl_while_running(cpa, store, mon, "rate", "capture", "5000");
	ck_assert_msg(strstr(out, "capture rate limit: 5000 records/s"), "%s", out);
	free(out);
	out = ctl_while_running(cpa, store, mon, "mem", "symd", "512");
	ck_assert_msg(strstr(out, "symd mem limit: 512 MiB"), "%s", out);
	free(out);
	out = run(status_argv, &rc);
	ck_assert_msg(rc == 0, "cpa ctl status exited %d:\n%s", rc, out);
	ck_assert_msg(strstr(out, "rate 5000/s") && strstr(out, "mem limit 512 MiB"), "%s", out);
	free(out);
	kill(mon, SIGINT);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	free(store);
}
END_TEST

/* ---- under a clock interposer ---- */

#define FAKETIME_LIB "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

static bool store_has_records(const char *dir)
{
	char cpa[1100];
	char *argv[] = {cpa, "show", "--read", (char *)dir, "--show_range", NULL};
	char *out;
	int rc;

	path_of(cpa, sizeof(cpa), "cpa");
	out = run(argv, &rc);
	fprintf(stderr, "e2e faketime: %s: %s", dir, out);
	free(out);
	return rc == 0;
}

/*
 * CPA's date-rotation test: `cpa monitor` under LD_PRELOAD=libfaketime with
 * the clock set to ten seconds before midnight runs past midnight of the
 * fake clock. Every stage keeps running (no hang, no restart), and the store
 * has a day directory with records for each fake day.
 */
START_TEST(test_faketime_midnight)
{
	char *store = store_new(), cpa[1100], *log, day1[1200], day2[1200];
	char *argv[] = {cpa, "monitor", "--store_dir", store, "-F", "99", "--duration", "20", NULL};
	char *env[] = {"LD_PRELOAD=" FAKETIME_LIB, "FAKETIME=@2026-01-01 23:59:50", NULL};

	need_root_bpf();
	path_of(cpa, sizeof(cpa), "cpa");
	log = monitor_logged(store, argv, env, "cpa-workload", 22.0, 4);
	ck_assert_msg(strstr(log, "all stages running") != NULL, "stages never all ran:\n%s", log);
	ck_assert_msg(strstr(log, "hung") == NULL && strstr(log, "restart") == NULL,
		      "a stage hung or restarted:\n%s", log);
	ck_assert_msg(strstr(log, "all stages stopped and drained") != NULL, "%s", log);
	snprintf(day1, sizeof(day1), "%s/cpa_260101", store);
	snprintf(day2, sizeof(day2), "%s/cpa_260102", store);
	ck_assert_msg(store_has_records(day1), "no records on the first fake day:\n%s", log);
	ck_assert_msg(store_has_records(day2), "no records on the second fake day:\n%s", log);
	free(log);
	free(store);
}
END_TEST

/*
 * One case group per argument ("e2e", "oneshot", "bench", "faketime"; none:
 * all), so ctest runs them as tests of their own (tests/e2e.cmake).
 */
/* ---- short-lived processes: the mapping history (docs/unwindd.md) ---- */

struct churn_stats {
	long user;     /* samples with user frames */
	long known;    /* ... whose leaf is in a known module */
	long entry;    /* ... unwound from _start through main */
	long loader;   /* ... in the dynamic loader before main */
	long teardown; /* ... in exit or execve after the address space went: a leaf only */
	long named;    /* ... through the dlopen'ed library (wl_dl_work) */
	long outside;  /* ... in main's own steps around the library (dlopen, dlclose, the clock) */
	long kernel;   /* samples with kernel frames only */
	long shown;    /* lines printed as not unwound to the entry */
};

static bool frame_is_user(const char *f, size_t n)
{
	return n && !(n > 4 && !memcmp(f + n - 4, "_[k]", 4)) && !(n > 2 && !memcmp(f, "<#", 2));
}

/* Samples of comm (process name) whose pid is not skip_pid; dl: the process
 * ran the dlopen'ed library (count and show what is not through it). */
static void churn_stats_of(const char *prof, const char *comm, pid_t skip_pid, bool dl,
			   struct churn_stats *st)
{
	static const char *const roots[] = {"_start", NULL};
	const char *line = prof;
	char skip[64];
	size_t cl = strlen(comm);

	memset(st, 0, sizeof(*st));
	snprintf(skip, sizeof(skip), "%s:%d;", comm, skip_pid);
	while (line && *line) {
		const char *eol = strchr(line, '\n');
		size_t len = eol ? (size_t)(eol - line) : strlen(line);
		char *l = strndup(line, len), *sp, *semi, *f, *leaf = NULL;
		size_t leaf_n = 0;
		unsigned int n_user = 0;
		bool phase = true; /* not in the loader or teardown */
		long count;

		line = eol ? eol + 1 : NULL;
		sp = strrchr(l, ' ');
		semi = strchr(l, ';');
		ck_assert_msg(sp && semi && sp[-1] == ';', "bad folded line '%s'", l);
		count = strtol(sp + 1, NULL, 10);
		if (strncmp(l, comm, cl) || l[cl] != ':' || !strncmp(l, skip, strlen(skip))) {
			free(l);
			continue;
		}
		/* The innermost user frame: the last one that is neither a kernel
		 * frame nor a marker. */
		for (f = semi + 1; f < sp; f = strchr(f, ';') + 1) {
			size_t n = (size_t)(strchr(f, ';') - f);

			if (frame_is_user(f, n)) {
				leaf = f;
				leaf_n = n;
				n_user++;
			}
		}
		if (!leaf) {
			st->kernel += count;
			free(l);
			continue;
		}
		st->user += count;
		if (!memmem(leaf, leaf_n, "[unknown]", 9) && !strstr(l, "<# NO MAP #>"))
			st->known += count;
		if ((root_is(semi + 1, roots) && strstr(l, ";main;")) ||
		    !strcmp(semi, ";_start; ")) {
			st->entry += count;
		} else if (strstr(l, ";_dl_start;") || strstr(l, "[ld-linux")) {
			st->loader += count;
			phase = false;
		} else if (n_user == 1 &&
			   (strstr(l, ";do_exit_[k];") || strstr(l, ";__x64_sys_execve_[k];"))) {
			/* In exit after exit_mmap, in execve after the old mm
			 * went: the registers are there, the user stack is not. */
			st->teardown += count;
			phase = false;
		} else if (st->shown++ < 10) {
			fprintf(stderr, "churn: not to the entry: %s\n", l);
		}
		if (strstr(l, ";wl_dl_work;"))
			st->named += count;
		else if (phase &&
			 (strstr(l, "dlopen") || strstr(l, "dlclose") || strstr(l, "dlsym") ||
			  strstr(l, "clock_gettime") || strstr(l, ";exit;")))
			st->outside += count;
		else if (dl && phase && st->shown++ < 20)
			fprintf(stderr, "churn: not through the library: %s\n", l);
		free(l);
	}
}

static pid_t churn_start(char *const argv[], int *ret_out)
{
	char line[64];
	size_t len = 0;
	ssize_t n;
	pid_t pid = spawn(argv, ret_out);

	while (len < sizeof(line) - 1 && (n = read(*ret_out, line + len, 1)) == 1 &&
	       line[len] != '\n')
		len++;
	line[len] = 0;
	ck_assert_msg(strncmp(line, "pid ", 4) == 0, "cpa-wl-churn said '%s'", line);
	return pid;
}

static char *churn_profile(const char *store, pid_t mon)
{
	struct range r;

	sleep(1); /* the last samples through the pipeline */
	kill(mon, SIGINT);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	show_range(store, &r);
	return show_all(store, &r);
}

/*
 * 200 children of 20-100 ms each (half of them exec'd, all FP-less, in a
 * shared library), whole machine: nearly every sample of theirs has a known
 * leaf module and unwinds to their entry, though most of them are gone
 * before unwindd gets to their samples; and their sample count matches the
 * CPU time they used.
 */
START_TEST(test_e2e_churn_children)
{
	const int freq = 99;
	char *store = store_new(), *prof, *out, exe[1100], *p;
	char *argv[] = {exe, "--children", "200", NULL};
	struct churn_stats st;
	unsigned long long cpu_ns = 0;
	pid_t mon, wl;
	double expect;
	int fd;

	need_root_bpf();
	path_of(exe, sizeof(exe), "cpa-wl-churn");
	mon = monitor_start(store, 0, freq, 0);
	wl = churn_start(argv, &fd);
	out = slurp_fd(fd);
	ck_assert_int_eq(wait_exit(wl, NULL), 0);
	p = strstr(out, "children 200 ");
	ck_assert_ptr_nonnull(p);
	cpu_ns = strtoull(p + 13, NULL, 10);
	prof = churn_profile(store, mon);
	churn_stats_of(prof, "cpa-wl-churn", wl, false, &st);

	expect = freq * (double)cpu_ns / 1e9;
	fprintf(stderr,
		"churn: children cpu %.2fs, expected %.0f samples, got %ld user + %ld kernel-only; "
		"known leaf %ld, from _start through main %ld, in the loader %ld, in exit/exec "
		"teardown %ld\n",
		(double)cpu_ns / 1e9, expect, st.user, st.kernel, st.known, st.entry, st.loader,
		st.teardown);
	ck_assert_msg(st.user + st.kernel >= 0.7 * expect && st.user + st.kernel <= 1.3 * expect,
		      "children's samples %ld not within 30%% of %.0f", st.user + st.kernel,
		      expect);
	ck_assert_msg(st.known >= 0.99 * st.user, "only %ld of %ld samples have a known leaf",
		      st.known, st.user);
	ck_assert_msg(st.entry + st.loader >= 0.99 * (st.user - st.teardown),
		      "only %ld (+ %ld in the loader) of %ld samples unwind to the entry", st.entry,
		      st.loader, st.user - st.teardown);
	free(out);
	free(prof);
	free(store);
}
END_TEST

/*
 * A process that dlopen()s a library, works in it, dlclose()s it and exits,
 * five times: the samples name the library's functions, though the library
 * was unmapped (and the process gone) by the time they were resolved.
 */
START_TEST(test_e2e_dlopen_dlclose)
{
	char *store = store_new(), *prof, exe[1100], lib[1100];
	char *argv[] = {exe, "--dlopen", lib, "--ms", "150", NULL};
	struct churn_stats st;
	long work;
	pid_t mon;

	need_root_bpf();
	path_of(exe, sizeof(exe), "cpa-wl-churn");
	path_of(lib, sizeof(lib), "../lib/libcpawl-dl.so");
	mon = monitor_start(store, 0, 99, 0);
	for (int i = 0; i < 5; i++) {
		int fd;
		pid_t wl = churn_start(argv, &fd);

		free(slurp_fd(fd));
		ck_assert_int_eq(wait_exit(wl, NULL), 0);
	}
	prof = churn_profile(store, mon);
	churn_stats_of(prof, "cpa-wl-churn", 0, true, &st);
	/* The bar is for the samples of the library phase: the user samples
	 * less those in the loader, in exit/exec teardown and in main's own
	 * steps around the library (dlopen, dlsym, dlclose, the CPU clock it
	 * reads between calls). An unresolved library frame is none of these:
	 * it stays in the count and fails the bar. */
	work = st.user - st.loader - st.teardown - st.outside;
	fprintf(stderr,
		"dlopen: %ld user samples (loader %ld, teardown %ld, dlopen/dlclose/clock %ld), "
		"%ld of %ld in the library phase through wl_dl_work\n",
		st.user, st.loader, st.teardown, st.outside, st.named, work);
	ck_assert_int_gt(work, 0);
	ck_assert_msg(st.named >= 0.95 * work, "only %ld of %ld samples name the library", st.named,
		      work);
	free(prof);
	free(store);
}
END_TEST

int main(int argc, char **argv)
{
	const char *only = argc > 1 ? argv[1] : NULL;
	/* An ASan-built cpa refuses to start with another library preloaded
	 * ahead of its runtime ("ASan runtime does not come first"): the
	 * faketime group runs in the plain builds only. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
	bool have_ft = false;
#else
	bool have_ft = access(FAKETIME_LIB, R_OK) == 0;
#endif
	/* The case groups: ctest runs each as its own test (tests/e2e.cmake). */
	const struct e2e_group {
		const char *name;
		int timeout_s;
		const TTest *tests[8];
	} e2e_groups[] = {
		/* Sample counts against the rate: the machine to themselves. */
		{"e2e",
		 120,
		 {test_e2e_chain_and_count, test_e2e_perf_backend,
		  test_e2e_nofp_complete_and_shares}},
		{"pid", 120, {test_e2e_pid_filter}},
		{"stop", 120, {test_e2e_stop_sigint, test_e2e_stop_sigterm}},
		{"stack", 120, {test_e2e_adaptive_stack_copy}},
		{"stacksize", 240, {test_e2e_stack_size_large, test_e2e_stack_size_fallback}},
		{"oneshot", 120, {test_oneshot_duration, test_oneshot_sigint}},
		{"bench", 120, {test_bench_cpa_lines, test_e2e_ctl_cost}},
		{"ctl", 180, {test_e2e_ctl_writers}},
		{"offcpu", 120, {test_e2e_offcpu}},
		/* Debian's programs nobody here wrote. */
		{"real", 300, {test_e2e_real_programs}},
		{"bigframes", 300, {test_e2e_real_big_frames}},
		{"faketime", 180, {test_faketime_midnight}},
		/* Short-lived processes: the mapping history. */
		{"churn", 180, {test_e2e_churn_children}},
		{"dlopen", 180, {test_e2e_dlopen_dlclose}},
	};
	Suite *s;

	/* Root/BPF check before Check forks the cases, so a skip is a skip
	 * (and before anything is allocated: a skip leaks nothing). */
	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		fprintf(stderr, "skip: needs root and BTF\n");
		return TEST_SKIP;
	}
	if (only && !strcmp(only, "faketime") && !have_ft) {
		fprintf(stderr,
			"skip: needs %s (Debian package libfaketime) and a build without "
			"sanitizers\n",
			FAKETIME_LIB);
		return TEST_SKIP;
	}
	/* Only the groups asked for are created: a TCase never added to the
	 * suite would be leaked (LeakSanitizer fails the run). */
	s = suite_create("e2e");
	for (size_t g = 0; g < sizeof(e2e_groups) / sizeof(e2e_groups[0]); g++) {
		const struct e2e_group *eg = &e2e_groups[g];
		bool ft = !strcmp(eg->name, "faketime");
		TCase *tc;

		if (only ? strcmp(only, eg->name) != 0 : (ft && !have_ft))
			continue;
		tc = tcase_create(eg->name);
		tcase_set_timeout(tc, eg->timeout_s);
		for (size_t i = 0; i < sizeof(eg->tests) / sizeof(eg->tests[0]) && eg->tests[i];
		     i++)
			tcase_add_test(tc, eg->tests[i]);
		suite_add_tcase(s, tc);
	}
	return test_run_suite(s);
}
