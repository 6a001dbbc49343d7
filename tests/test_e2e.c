// SPDX-License-Identifier: MIT
/*
 * End-to-end tests on the real kernel: `cpa monitor` runs the four real
 * stages with BPF while a workload of ours with known call chains runs; then
 * `cpa show` exports and we check what a user would check in the .prof.
 *
 * Needs root and BTF (exit 77 otherwise). No mocks: real BPF, real
 * io_uring, real zstd, real libdw.
 */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

static char bin_dir[1024];

/* ---- process helpers ---- */

/* Start argv with stdout to a pipe (*ret_out) and stderr inherited. */
static pid_t spawn(char *const argv[], int *ret_out)
{
	int pfd[2] = {-1, -1};
	pid_t pid;

	if (ret_out)
		ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (ret_out)
			dup2(pfd[1], 1);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %m\n", argv[0]);
		_exit(127);
	}
	if (ret_out) {
		close(pfd[1]);
		*ret_out = pfd[0];
	}
	return pid;
}

static int wait_exit(pid_t pid, struct rusage *ru)
{
	int status;

	ck_assert_int_eq(wait4(pid, &status, 0, ru), pid);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/* Read everything from fd into a malloc'd NUL-terminated string. */
static char *slurp_fd(int fd)
{
	size_t cap = 4096, len = 0;
	char *buf = malloc(cap);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	while ((n = read(fd, buf + len, cap - len - 1)) > 0) {
		len += (size_t)n;
		if (cap - len < 2) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
	}
	buf[len] = 0;
	close(fd);
	return buf;
}

/* Run argv to completion; returns its stdout, *ret_rc its exit code. */
static char *run(char *const argv[], int *ret_rc)
{
	int out;
	pid_t pid = spawn(argv, &out);
	char *s = slurp_fd(out);

	*ret_rc = wait_exit(pid, NULL);
	return s;
}

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
	char *d = strdup("/tmp/cpa-e2e-XXXXXX");

	ck_assert_ptr_nonnull(mkdtemp(d));
	return d;
}

static pid_t monitor_start_backend(const char *store, int duration, int freq, int target_pid,
				   const char *backend)
{
	char cpa[1100], dur[16], f[16], p[16];
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
	return spawn(argv, NULL);
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

/* Export the whole range as folded stacks without the env label. */
static char *show_all(const char *store, const struct range *r)
{
	char cpa[1100], start[32], num[32], prof[1100];
	char *argv[] = {cpa, "show", "--read", (char *)store, "-B", start, "--output_num",
			num, "-o",   prof,     "--no_env",    NULL};
	char *out, *text;
	int rc, fd;

	path_of(cpa, sizeof(cpa), "cpa");
	snprintf(start, sizeof(start), "%02d:%02d:%02d", r->h0, r->m0, r->s0);
	snprintf(num, sizeof(num), "%ld", r->n + 2);
	snprintf(prof, sizeof(prof), "%s/out.prof", store);
	out = run(argv, &rc);
	ck_assert_msg(rc == 0, "cpa show exited %d: %s", rc, out);
	ck_assert_msg(strstr(out, "Write  [ ") != NULL, "no Write line: %s", out);
	free(out);
	fd = open(prof, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	text = slurp_fd(fd);
	return text;
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
		if (!strstr(l, label) || strstr(l, label) > semi) {
			st->other_samples += count;
			free(l);
			continue;
		}
		st->pid_samples += count;
		if (strstr(l, ";wl_path_a;"))
			st->in_a += count;
		if (strstr(l, ";wl_path_b;"))
			st->in_b += count;
		if ((root_is(semi + 1, proc_roots) && strstr(l, ";main;wl_main_loop;")) ||
		    (root_is(semi + 1, thread_roots) && strstr(l, ";wl_thread_main;")))
			st->rooted += count;
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
		      "only %ld of %ld samples have an intact chain", st->rooted, st->pid_samples);
}

static void need_root_bpf(void)
{
	const char *b = getenv("CPA_BUILD_DIR");

	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		fprintf(stderr, "skip: needs root and BTF\n");
		exit(TEST_SKIP);
	}
	ck_assert_msg(b != NULL, "CPA_BUILD_DIR not set");
	snprintf(bin_dir, sizeof(bin_dir), "%s/bin", b);
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
	mon = monitor_start(store, 9, freq, 0);
	sleep(2); /* stages up and sampling */
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
	mon = monitor_start_backend(store, 7, 49, 0, "perf");
	sleep(2);
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
	workload_start(&w, "cpa-workload", 6.0, 4);
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
	workload_start(&w, "cpa-workload", 8.0, 2);
	mon = monitor_start(store, 0, 99, 0);
	sleep(5);
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
	double share_seen, share_real;
	pid_t mon;

	need_root_bpf();
	/*
	 * 499 Hz: the share of a path is a proportion estimated from n samples,
	 * with a standard error of about 0.5/sqrt(n). At 99 Hz a busy 2-CPU run
	 * gives a few hundred samples (+-2.7 points), which would make a 3-point
	 * bound a coin toss; a few thousand bring it under 1 point.
	 */
	mon = monitor_start(store, 11, 499, 0);
	sleep(2);
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
	ck_assert_int_gt(st.pid_samples, 1500);
	ck_assert_msg((double)st.rooted >= 0.995 * (double)st.pid_samples,
		      "complete stacks %ld of %ld (< 99.5%%)", st.rooted, st.pid_samples);
	ck_assert_msg(share_seen - share_real < 0.03 && share_real - share_seen < 0.03,
		      "path share seen %.3f vs measured %.3f", share_seen, share_real);
	free(prof);
	free(store);
}
END_TEST

/*
 * The adaptive stack copy (issue 10): three 6 KB frames need ~20 KiB of
 * stack, more than the default 8 KiB start. The first samples stop short
 * (stack read); once unwindd's hint reached capture every sample is complete
 * to _start, and the copy settles at what the walks need.
 */
START_TEST(test_e2e_adaptive_stack_copy)
{
	char *store = store_new(), *prof, fix[] = CFI_FIXTURE_DIR "/cfi_fixture";
	char *argv[] = {fix, "bigloop", "6", NULL};
	char label[64];
	long total = 0, complete = 0, cut = 0;
	const char *line;
	pid_t mon, pid;
	int out;
	struct range r;

	need_root_bpf();
	mon = monitor_start(store, 10, 99, 0);
	sleep(2);
	pid = spawn(argv, &out);
	ck_assert_int_eq(wait_exit(pid, NULL), 0);
	close(out);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);

	show_range(store, &r);
	prof = show_all(store, &r);
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
		total += n;
		if (!strncmp(l + strlen(label), "_start;", 7) &&
		    strstr(l, ";main;big_a;big_b;big_c;"))
			complete += n;
		if (strstr(l, "[unwind stopped: stack read]"))
			cut += n;
		free(l);
	}
	fprintf(stderr, "e2e adaptive copy: %ld samples, %ld complete, %ld stack read\n", total,
		complete, cut);
	ck_assert_int_gt(total, 100);
	/* With a fixed 8 KiB copy none would be complete; the round trip
	 * unwindd -> capture takes about a second of samples. */
	ck_assert_msg(complete >= 0.6 * (double)total, "complete %ld of %ld", complete, total);
	free(prof);
	free(store);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("e2e");
	TCase *tc = tcase_create("e2e");

	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_e2e_chain_and_count);
	tcase_add_test(tc, test_e2e_pid_filter);
	tcase_add_test(tc, test_e2e_perf_backend);
	tcase_add_test(tc, test_e2e_stop_sigint);
	tcase_add_test(tc, test_e2e_stop_sigterm);
	tcase_add_test(tc, test_e2e_nofp_complete_and_shares);
	tcase_add_test(tc, test_e2e_adaptive_stack_copy);
	suite_add_tcase(s, tc);
	/* Root/BPF check before Check forks the cases, so a skip is a skip. */
	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		fprintf(stderr, "skip: needs root and BTF\n");
		return TEST_SKIP;
	}
	return test_run_suite(s);
}
