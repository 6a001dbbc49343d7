// SPDX-License-Identifier: MIT
/*
 * Python under the real monitor (whole machine, cpa's defaults, no flag to
 * python): tests/workload/py_hot.py spends its time in hot(), called as
 * <module> -> main() -> a() -> b() -> hot(). Run by Debian's /usr/bin/python3.11
 * (its interpreter in the executable) and, when there, pyenv's 3.11.7 (in
 * libpython3.11.so), side by side for 30 s, and a child Debian's forks at
 * start (os.fork(): capture enters a forked child from its parent's entry,
 * docs/capture.md "Python"). Per interpreter:
 *
 *   - >= 95 % of its samples name hot() under b() under a(), with the
 *     native frames below (Py_RunMain);
 *   - the Python stack's fidelity is printed: samples whose Python frames
 *     reach <module> with no Python root marker (docs/unwinding.md).
 *
 * Built again as test_python_reuse (PY_REUSE 1): tests/workload/py_reuse.py
 * runs warm() under run_warm(), frees warm()'s code object and runs hot()
 * under run_hot() with its code object at warm()'s old address (the workload
 * says so). symd named warm() from that address first; hot()'s samples must
 * be named hot(), not refused as "code object freed" for the rest of the
 * process's life (docs/unwinding.md "Python", symd's check word). Debian's
 * and pyenv's, side by side. Per interpreter:
 *
 *   - the workload's hot() code object took warm()'s address;
 *   - >= 95 % of the samples under run_hot() name hot() under it.
 *
 * Built again as test_python_gone (PY_GONE 1): short-lived Pythons on a slow
 * pipeline. symd is stopped (SIGSTOP) while Debian's and pyenv's run
 * tests/workload/py_hot.py for 3 s and exit; it gets their samples only after
 * they are gone (and their interpreters freed their code objects at exit),
 * as on a loaded host. capture named the code objects while the processes
 * ran (CPA_REC_PYCODE, docs/unwinding.md "Python"). Per interpreter:
 *
 *   - >= 90 % of its samples name hot() under b() under a().
 *
 * Built again as test_python_many (PY_MANY 1): tests/workload/py_many.py runs
 * chains of 60 distinct functions, a new chain every ~10 ms (30,000 code
 * objects), for 15 s: more code objects per poll than capture's base read
 * budget (docs/unwinding.md "Python"), which grows while the BPF ring buffer
 * is nearly empty (docs/capture.md). Debian's:
 *
 *   - capture's counters (`cpa ctl status`) moved: records sent, and code
 *     objects read past the base budget (pycode_sent, pycode_past_budget);
 *   - >= 90 % of its samples in the chains name spin() under a cK_59();
 *   - under 2 % say "process gone before naming": capture read their code
 *     objects while the process lived (with the budget at 1 ms a poll, those
 *     of its last ~2 s were left to symd, which read them after the exit:
 *     1-6 % on this VM, by its load);
 *   - none carries "code object freed": every chain lives until the exit.
 *
 * Built again as test_python_alias (PY_ALIAS 1): a Python whose comm does not
 * say python (a link named pyworker to Debian's python3.11, as a venv's entry
 * point or a renamed service runs it) lives 1 s, twice, 2.5 s apart (past
 * the fast polls the first one's names bring), while symd is stopped:
 * capture enters it at its exec and names its code objects while it lives,
 * woken by its first sample (docs/capture.md "Python"), whatever its comm.
 * Over the two:
 *
 *   - >= 90 % of their samples name hot() under b() under a().
 *
 * Built again as test_python_launcher (PY_LAUNCHER 1): pyenv's python3.11, a
 * launcher (its interpreter in libpython3.11.so, mapped after its exec),
 * lives 0.8 s, twice, 2.5 s apart, while symd is stopped: capture enters it
 * at its first sample (a pending entry, no timed polls) and names its code
 * objects while it lives. Then capture's wakeups (`cpa ctl status`) while
 * LAUNCH_RUNS `python3.11 --version` of pyenv's run (3 ms of CPU each on a
 * quiet host, mostly never sampled; 20 ms on a loaded one, mostly sampled:
 * ld.so relocating libpython), against the same number of /bin/true runs,
 * by turns, LAUNCH_ROUNDS times:
 *
 *   - >= 90 % of the two Pythons' samples past start-up and before exit
 *     name hot() under b() under a();
 *   - the launchers cost capture fewer than half a wakeup each over
 *     /bin/true, plus one for each launcher sampled:
 *     a launcher never sampled wakes nothing (its exec woke capture, which
 *     then polled 20 ms later, and 40, 80 ... while it found nothing, until
 *     it read the library's mapping: ~1.9 wakeups each, sampled or not).
 *     A sampled launcher wakes capture once (twice if its first sample came
 *     before libpython was mapped): the count follows the launchers sampled
 *     (printed), 0.1-0.3 each on a quiet host, 0.65-0.83 each with 77-89 of
 *     100 sampled at load 3-4 (docs/bench.md, "Launcher wakeups"), so a
 *     bound of one a launcher was too near on a slow host.
 *
 * Root + BTF + /usr/bin/python3.11, else 77 (test_python_launcher: pyenv's
 * 3.11.7 too).
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "test_proc.h"
#include "test_util.h"

#define PY_DEBIAN     "/usr/bin/python3.11"
#define PY_PYENV      "/root/.pyenv/versions/3.11.7/bin/python3.11"
#define PY_SECS	      "30"
#define WARM_SECS     "5"
#define HOT_SECS      "10"
#define ALIAS_RUNS    2
#define LAUNCH_RUNS   50
#define LAUNCH_ROUNDS 4

static char bin_dir[4096], cpa[4200];
static char dir[PATH_MAX]; /* main()'s test_scratch(): kept if the test fails */

struct py_stats {
	long samples, hot, native_below, complete, marked, freed, gone;
	long outside; /* not hot, in the interpreter's start-up or exit */
};

/* One folded line of the interpreter (fold_lines_of()): ";root;...;leaf". */
static void py_line(void *ctx, char *stack, long c)
{
	struct py_stats *st = ctx;
	char *a = strstr(stack, ";a ("), *b = a ? strstr(a, ";b (") : NULL;
	char *h = b ? strstr(b, ";hot (") : NULL, *rm = strstr(stack, ";Py_RunMain;");

	st->samples += c;
	if (h) {
		st->hot += c;
		if (rm && rm < a)
			st->native_below += c;
	} else if (st->samples - st->hot <= 4 * c) {
		fprintf(stderr, "  not hot: %.400s\n", stack);
	}
	if (!h && (strstr(stack, ";pymain_init;") || strstr(stack, ";Py_FinalizeEx;") ||
		   strstr(stack, "<# EXIT:")))
		st->outside += c;
	if (strstr(stack, "<# PYTHON:"))
		st->marked += c;
	else if (strstr(stack, ";<module> (") && !strstr(stack, ";_PyEval_EvalFrameDefault;"))
		st->complete += c;
}

/* *st of pid's folded lines in text, printed ("e2e python<tag> <py>: ..."). */
static void py_stats_of(const char *text, pid_t pid, const char *tag, const char *py,
			struct py_stats *st)
{
	double all;

	memset(st, 0, sizeof(*st));
	fold_lines_of(text, pid, py_line, st);
	all = (double)MAX(st->samples, 1);
	fprintf(stderr,
		"e2e python%s %s: %ld samples, hot() under b() under a() %.2f %% (native frames "
		"below %.2f %%), Python stack complete %.2f %%, Python root marker %.2f %%\n",
		tag, py, st->samples, 100.0 * (double)st->hot / all,
		100.0 * (double)st->native_below / all, 100.0 * (double)st->complete / all,
		100.0 * (double)st->marked / all);
}

/* py script a1 [a2], its stdout to out (-1: inherited). */
static pid_t start_py(const char *py, const char *script, const char *a1, const char *a2, int out)
{
	char *argv[] = {(char *)py, (char *)script, (char *)a1, (char *)a2, NULL};

	return spawn_fds(argv, -1, out, -1);
}

/* The forked child's pid that start_py()'s parent wrote to pidfile. */
static pid_t child_pid(const char *pidfile)
{
	for (int i = 0; i < 200; i++) {
		char *t = access(pidfile, F_OK) == 0 ? test_slurp(pidfile, NULL) : NULL;

		if (t) {
			pid_t pid = (pid_t)atoi(t);

			free(t);
			ck_assert_int_gt(pid, 0);
			return pid;
		}
		usleep(50 * 1000);
	}
	ck_abort_msg("no child pid in %s", pidfile);
	return 0;
}

START_TEST(test_python_hot)
{
	char store[4200], log[4200], prof[4200], pidfile[4200], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, NULL};
	const char *pys[] = {PY_DEBIAN, PY_DEBIAN " (forked child)", PY_PYENV};
	int n = access(PY_PYENV, X_OK) == 0 ? 3 : 2;
	pid_t mon, pids[3], fold_pids[3];
	struct py_stats st[3];

	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	snprintf(pidfile, sizeof(pidfile), "%s/child.pid", dir);
	mon = spawn_monitor(margv, log, 60);
	sleep(1);
	/* side by side: one run's time for all */
	/* pidfile: fork first, the child's pid into pidfile */
	pids[0] = fold_pids[0] = start_py(PY_DEBIAN, PY_HOT_SCRIPT, PY_SECS, NULL, -1);
	pids[1] = start_py(PY_DEBIAN, PY_HOT_SCRIPT, PY_SECS, pidfile, -1);
	if (n > 2)
		pids[2] = fold_pids[2] = start_py(PY_PYENV, PY_HOT_SCRIPT, PY_SECS, NULL, -1);
	fold_pids[1] = child_pid(pidfile);
	text = monitor_stop_fold(mon, pids, n, 1, cpa, store, prof);
	/* every line printed before any check */
	for (int i = 0; i < n; i++)
		py_stats_of(text, fold_pids[i], "", pys[i], &st[i]);
	for (int i = 0; i < n; i++) {
		/* 49 Hz for 30 s: 1470 at a whole CPU, fewer on a busy machine */
		ck_assert_msg(st[i].samples >= 100, "%s: %ld samples", pys[i], st[i].samples);
		ck_assert_msg(st[i].hot >= 0.95 * (double)st[i].samples, "%s: hot() in %ld of %ld",
			      pys[i], st[i].hot, st[i].samples);
		ck_assert_msg(st[i].native_below >= 0.95 * (double)st[i].samples,
			      "%s: Py_RunMain below a() in %ld of %ld", pys[i], st[i].native_below,
			      st[i].samples);
	}
	free(text);
}
END_TEST

struct reuse_stats {
	long samples, warm, in_hot, hot, freed;
};

/* One folded line of a py_reuse.py interpreter: ";root;...;leaf". */
static void reuse_line(void *ctx, char *stack, long c)
{
	struct reuse_stats *st = ctx;
	char *rh = strstr(stack, ";run_hot (");

	st->samples += c;
	if (strstr(stack, ";run_warm (") && strstr(stack, ";warm ("))
		st->warm += c;
	if (strstr(stack, "<# PYTHON: CODE OBJECT FREED #>"))
		st->freed += c;
	if (!rh)
		return;
	st->in_hot += c;
	if (strstr(rh, ";hot ("))
		st->hot += c;
	else if (st->in_hot - st->hot <= 4 * c)
		fprintf(stderr, "  not hot: %.400s\n", stack);
}

START_TEST(test_python_reuse)
{
	char store[4200], log[4200], prof[4200], outs[2][4200], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, NULL};
	const char *pys[] = {PY_DEBIAN, PY_PYENV};
	int n = access(PY_PYENV, X_OK) == 0 ? 2 : 1;
	struct reuse_stats st[2];
	pid_t mon, pids[2];

	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	mon = spawn_monitor(margv, log, 60);
	sleep(1);
	for (int i = 0; i < n; i++) {
		int fd;

		snprintf(outs[i], sizeof(outs[i]), "%s/py%d.out", dir, i);
		fd = open(outs[i], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		ck_assert_int_ge(fd, 0);
		pids[i] = start_py(pys[i], PY_REUSE_SCRIPT, WARM_SECS, HOT_SECS, fd);
		close(fd);
	}
	text = monitor_stop_fold(mon, pids, n, 1, cpa, store, prof);
	for (int i = 0; i < n; i++) {
		memset(&st[i], 0, sizeof(st[i]));
		fold_lines_of(text, pids[i], reuse_line, &st[i]);
		fprintf(stderr,
			"e2e python reuse %s: %ld samples, warm() %ld, under run_hot() %ld: hot() "
			"%.2f %%; code object freed marker %ld\n",
			pys[i], st[i].samples, st[i].warm, st[i].in_hot,
			100.0 * (double)st[i].hot / (double)MAX(st[i].in_hot, 1), st[i].freed);
	}
	for (int i = 0; i < n; i++) {
		char *out = test_slurp(outs[i], NULL);

		ck_assert_ptr_nonnull(out);
		ck_assert_msg(strstr(out, "reuse 1"),
			      "%s: hot()'s code object not at warm()'s address: %s", pys[i], out);
		free(out);
		/* 49 Hz for 10 s: 490 at a whole CPU, fewer on a busy machine */
		ck_assert_msg(st[i].in_hot >= 50, "%s: %ld samples under run_hot()", pys[i],
			      st[i].in_hot);
		ck_assert_msg(st[i].hot >= 0.95 * (double)st[i].in_hot,
			      "%s: hot() in %ld of %ld samples under run_hot()", pys[i], st[i].hot,
			      st[i].in_hot);
	}
	free(text);
}
END_TEST

/* The monitor of margv started, its symd found and stopped (SIGSTOP, up to
 * the 10 s hang timeout): a slow pipeline. Its symd's pid in *ret_symd. */
static pid_t monitor_symd_stopped(char **margv, const char *log, pid_t *ret_symd)
{
	pid_t mon = spawn_monitor(margv, log, 60), symd = 0;

	sleep(1);
	for (int i = 0; i < 50 && !(symd = monitor_stage_pid(mon, "symd")); i++)
		usleep(100 * 1000);
	ck_assert_int_gt(symd, 0);
	ck_assert_int_eq(kill(symd, SIGSTOP), 0);
	*ret_symd = symd;
	return mon;
}

START_TEST(test_python_gone)
{
	char store[4200], log[4200], prof[4200], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, NULL};
	const char *pys[] = {PY_DEBIAN, PY_PYENV};
	int n = access(PY_PYENV, X_OK) == 0 ? 2 : 1;
	pid_t mon, pids[2], symd;
	struct py_stats st[2];

	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	/* symd stopped for ~4-5 s: the Pythons run 3 s and are gone before
	 * it reads their first sample. */
	mon = monitor_symd_stopped(margv, log, &symd);
	for (int i = 0; i < n; i++)
		pids[i] = start_py(pys[i], PY_HOT_SCRIPT, "3", NULL, -1);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(wait_exit(pids[i], NULL), 0);
	sleep(1);
	ck_assert_int_eq(kill(symd, SIGCONT), 0);
	text = monitor_stop_fold(mon, pids, 0, 2, cpa, store, prof);
	for (int i = 0; i < n; i++)
		py_stats_of(text, pids[i], " gone", pys[i], &st[i]);
	for (int i = 0; i < n; i++) {
		/* 49 Hz for 3 s: 147 at a whole CPU, fewer on a busy machine */
		ck_assert_msg(st[i].samples >= 20, "%s: %ld samples", pys[i], st[i].samples);
		/* of its samples past start-up and before exit: on a loaded host
		 * those phases take a larger share of a short run */
		ck_assert_msg(st[i].hot >= 0.90 * (double)(st[i].samples - st[i].outside),
			      "%s: hot() in %ld of %ld (%ld in start-up or exit)", pys[i],
			      st[i].hot, st[i].samples, st[i].outside);
	}
	free(text);
}
END_TEST

START_TEST(test_python_alias)
{
	char store[4200], log[4200], prof[4200], link[4200], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, NULL};
	struct py_stats st, all = {0};
	pid_t mon, pids[ALIAS_RUNS], symd;

	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	snprintf(link, sizeof(link), "%s/pyworker", dir);
	ck_assert_int_eq(symlink(PY_DEBIAN, link), 0);
	/* symd stopped for ~6 s: every process is gone before it reads the
	 * first sample. */
	mon = monitor_symd_stopped(margv, log, &symd);
	for (int i = 0; i < ALIAS_RUNS; i++) {
		if (i)
			usleep(2500 * 1000);
		pids[i] = start_py(link, PY_HOT_SCRIPT, "1", NULL, -1);
		ck_assert_int_eq(wait_exit(pids[i], NULL), 0);
	}
	sleep(1);
	ck_assert_int_eq(kill(symd, SIGCONT), 0);
	text = monitor_stop_fold(mon, pids, 0, 2, cpa, store, prof);
	for (int i = 0; i < ALIAS_RUNS; i++) {
		py_stats_of(text, pids[i], " alias", "pyworker -> " PY_DEBIAN, &st);
		all.samples += st.samples;
		all.hot += st.hot;
		all.outside += st.outside;
	}
	/* 49 Hz for 2 x 1 s: 98 at a whole CPU, fewer on a busy machine */
	ck_assert_msg(all.samples >= 10, "%ld samples", all.samples);
	ck_assert_msg(all.hot >= 0.90 * (double)(all.samples - all.outside),
		      "hot() in %ld of %ld (%ld in start-up or exit)", all.hot, all.samples,
		      all.outside);
	free(text);
}
END_TEST

/* One folded line of py_many.py in its chains (its startup's compile not
 * counted): spin() right under a cK_59() (marked: a Python root marker). */
static void many_line(void *ctx, char *stack, long c)
{
	struct py_stats *st = ctx;
	char *sp = strstr(stack, ";spin ("), *last;
	int k = -1, d = -1;
	bool named = false;

	if (!sp && !strstr(stack, " (py_many_chains:"))
		return;
	st->samples += c;
	if (strstr(stack, "<# PYTHON:"))
		st->marked += c;
	if (strstr(stack, "<# PYTHON: CODE OBJECT FREED #>"))
		st->freed += c;
	if (strstr(stack, "<# PYTHON: PROCESS GONE BEFORE NAMING #>"))
		st->gone += c;
	if (sp) {
		*sp = 0;
		last = strrchr(stack, ';');
		named = last && sscanf(last, ";c%d_%d (", &k, &d) == 2 && d == 59;
		*sp = ';';
	}
	if (named)
		st->hot += c;
	else if (st->samples - st->hot <= 4 * c)
		fprintf(stderr, "  not named: %.600s\n", stack);
}

/* capture's counter name in `cpa ctl status` (store), -1 if not there. */
static long long capture_counter(const char *store, const char *name)
{
	char *argv[] = {cpa, "ctl", "--store_dir", (char *)store, "status", NULL};
	int rc;
	char *out = run(argv, &rc), *cap, *p;
	long long v = -1;

	ck_assert_ptr_nonnull(out);
	ck_assert_int_eq(rc, 0);
	cap = strstr(out, "capture:");
	p = cap ? strstr(cap, name) : NULL;
	if (p && sscanf(p + strlen(name), "%*[ :=]%lld", &v) != 1)
		v = -1;
	if (v < 0)
		fprintf(stderr, "ctl status has no capture %s:\n%s\n", name, out);
	free(out);
	return v;
}

START_TEST(test_python_many)
{
	char store[4200], log[4200], prof[4200], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, NULL};
	long long sent, deferred, past;
	struct py_stats st;
	pid_t mon, pid;

	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	mon = spawn_monitor(margv, log, 60);
	sleep(1);
	pid = start_py(PY_DEBIAN, PY_MANY_SCRIPT, "15", NULL, -1);
	ck_assert_int_eq(wait_exit(pid, NULL), 0);
	sent = capture_counter(store, "pycode_sent");
	deferred = capture_counter(store, "pycode_deferred");
	past = capture_counter(store, "pycode_past_budget");
	text = monitor_stop_fold(mon, &pid, 0, 2, cpa, store, prof);
	memset(&st, 0, sizeof(st));
	fold_lines_of(text, pid, many_line, &st);
	fprintf(stderr,
		"e2e python many: %ld samples, spin() under cK_59() %.2f %%, Python root marker "
		"%.2f %% (code object freed %.2f %%, process gone %.2f %%); capture: pycode_sent "
		"%lld, pycode_deferred %lld, pycode_past_budget %lld\n",
		st.samples, 100.0 * (double)st.hot / (double)MAX(st.samples, 1),
		100.0 * (double)st.marked / (double)MAX(st.samples, 1),
		100.0 * (double)st.freed / (double)MAX(st.samples, 1),
		100.0 * (double)st.gone / (double)MAX(st.samples, 1), sent, deferred, past);
	ck_assert_int_gt(sent, 0);
	/* 49 Hz for 15 s: 735 at a whole CPU, fewer on a busy machine (its
	 * compile at start not counted) */
	ck_assert_msg(st.samples >= 100, "%ld samples", st.samples);
	ck_assert_msg(st.hot >= 0.90 * (double)st.samples, "named in %ld of %ld", st.hot,
		      st.samples);
	/* no chain's code object is freed while it runs: what symd could not
	 * read (its samples after the exit) is the process gone, not freed */
	ck_assert_msg(st.freed == 0, "code object freed in %ld of %ld", st.freed, st.samples);
	/* read by capture while it lived, its last seconds too: 0-0.31 % in 8
	 * runs at load 6-12, where 4d4ca39 had 0-4.4 % (median 1.2 %); the
	 * bound leaves a loaded CI host room (the rings' fill decides how far
	 * a poll reads past its budget) */
	ck_assert_msg(st.gone < 0.02 * (double)st.samples,
		      "process gone before naming in %ld of %ld", st.gone, st.samples);
	/* the workload passes the base budget: read past it (room in the
	 * rings) or deferred (none); test_pyname_room checks which */
	ck_assert_msg(past + deferred > 0, "pycode_past_budget %lld, pycode_deferred %lld", past,
		      deferred);
	free(text);
}
END_TEST

/* argv run n times, 20 ms apart, then 2 s for capture's last polls:
 * capture's wakeups over it. The runs' pids into pids[0..n) if not NULL. */
static long long wakeups_over(const char *store, char *const argv[], int n, pid_t *pids)
{
	long long w0 = capture_counter(store, "wakeups"), w1;

	for (int i = 0; i < n; i++) {
		pid_t pid = spawn_fds(argv, -1, -1, -1);

		if (pids)
			pids[i] = pid;
		ck_assert_int_eq(wait_exit(pid, NULL), 0);
		usleep(20 * 1000);
	}
	sleep(2);
	w1 = capture_counter(store, "wakeups");
	ck_assert_int_ge(w0, 0);
	ck_assert_int_ge(w1, w0);
	return w1 - w0;
}

static void count_line(void *ctx, char *stack, long c)
{
	(void)stack;
	*(long *)ctx += c;
}

/* How many of pids[0..n) have a sample in the folded profile. */
static int pids_sampled(const char *prof, const pid_t *pids, int n)
{
	int k = 0;

	for (int i = 0; i < n; i++) {
		long c = 0;

		fold_lines_of(prof, pids[i], count_line, &c);
		k += c > 0;
	}
	return k;
}

START_TEST(test_python_launcher)
{
	char store[4200], log[4200], prof[4200], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, NULL};
	char *ver[] = {PY_PYENV, "--version", NULL}, *tru[] = {"/bin/true", NULL};
	long long w_py = 0, w_true = 0;
	int sampled;
	struct py_stats st, all = {0};
	pid_t mon, pids[ALIAS_RUNS], symd, runs[LAUNCH_ROUNDS * LAUNCH_RUNS];

	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	/* symd stopped for ~6 s: every process is gone before it reads the
	 * first sample. */
	mon = monitor_symd_stopped(margv, log, &symd);
	for (int i = 0; i < ALIAS_RUNS; i++) {
		if (i)
			usleep(2500 * 1000);
		pids[i] = start_py(PY_PYENV, PY_HOT_SCRIPT, "0.8", NULL, -1);
		ck_assert_int_eq(wait_exit(pids[i], NULL), 0);
	}
	sleep(1);
	ck_assert_int_eq(kill(symd, SIGCONT), 0);
	/* by turns: the host's own wakeups fall on both */
	for (int r = 0; r < LAUNCH_ROUNDS; r++) {
		pid_t *py_runs = &runs[r * LAUNCH_RUNS];
		long long a =
			wakeups_over(store, r % 2 ? tru : ver, LAUNCH_RUNS, r % 2 ? NULL : py_runs);
		long long b =
			wakeups_over(store, r % 2 ? ver : tru, LAUNCH_RUNS, r % 2 ? py_runs : NULL);

		w_py += r % 2 ? b : a;
		w_true += r % 2 ? a : b;
	}
	text = monitor_stop_fold(mon, pids, 0, 2, cpa, store, prof);
	for (int i = 0; i < ALIAS_RUNS; i++) {
		py_stats_of(text, pids[i], " launcher", PY_PYENV, &st);
		all.samples += st.samples;
		all.hot += st.hot;
		all.outside += st.outside;
	}
	/* What the extra wakeups are: one per launcher sampled (two when its
	 * first sample came before libpython was mapped); how many were sampled
	 * follows their CPU time, which the host's load stretches. */
	sampled = pids_sampled(text, runs, LAUNCH_ROUNDS * LAUNCH_RUNS);
	fprintf(stderr,
		"e2e python launcher: capture's wakeups over %d x %d runs: python3.11 --version "
		"(pyenv's) %lld, /bin/true %lld; launchers sampled: %d\n",
		LAUNCH_ROUNDS, LAUNCH_RUNS, w_py, w_true, sampled);
	/* 49 Hz for 2 x 0.8 s: 78 at a whole CPU, fewer on a busy machine */
	ck_assert_msg(all.samples >= 10, "%ld samples", all.samples);
	/* past start-up, before exit (a loaded host: 7 of 42 there once) */
	ck_assert_msg(all.hot >= 0.90 * (double)(all.samples - all.outside),
		      "hot() in %ld of %ld (%ld in start-up or exit)", all.hot, all.samples,
		      all.outside);
	/* Half a wakeup per launcher, and one more per launcher sampled: a host
	 * slow enough that every launcher is sampled early pays ~1 each by
	 * design; the defect paid ~1.9 each, sampled or not. */
	ck_assert_msg(w_py - w_true < (long long)LAUNCH_ROUNDS * LAUNCH_RUNS / 2 + sampled,
		      "launchers: %lld wakeups, /bin/true: %lld, %d of %d sampled", w_py, w_true,
		      sampled, LAUNCH_ROUNDS * LAUNCH_RUNS);
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("python");
	TCase *tc = tcase_create("python");

	/* test_need_root_bpf() asserts: not before a test runs */
	if (access(PY_DEBIAN, X_OK) != 0) {
		fprintf(stderr, "skip: needs %s\n", PY_DEBIAN);
		return 77;
	}
	if (PY_LAUNCHER && access(PY_PYENV, X_OK) != 0) {
		fprintf(stderr, "skip: needs %s\n", PY_PYENV);
		return 77;
	}
	if (test_e2e_ready(bin_dir, sizeof(bin_dir)))
		return 77;
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	test_scratch_in(dir, sizeof(dir), "python");
	return run_one_test(s, tc,
			    PY_LAUNCHER ? test_python_launcher
			    : PY_ALIAS	? test_python_alias
			    : PY_MANY	? test_python_many
			    : PY_GONE	? test_python_gone
			    : PY_REUSE	? test_python_reuse
					: test_python_hot,
			    PY_REUSE || PY_GONE || PY_MANY || PY_ALIAS || PY_LAUNCHER ? 120 : 240);
}
