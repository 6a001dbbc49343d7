// SPDX-License-Identifier: MIT
/*
 * A Python code object freed and its memory given to another, under the real
 * monitor (whole machine, cpa's defaults): tests/workload/py_reuse.py runs
 * warm() under run_warm(), frees warm()'s code object, and runs hot() under
 * run_hot() with its code object at warm()'s old address (the workload says
 * so). symd named warm() from that address first; hot()'s samples must be
 * named hot(), not refused as "code object freed" for the rest of the
 * process's life (docs/unwinding.md "Python", symd's check word). Run by
 * Debian's /usr/bin/python3.11 and, when there, pyenv's 3.11.7
 * (libpython3.11.so), side by side. Per interpreter:
 *
 *   - the workload's hot() code object took warm()'s address;
 *   - >= 95 % of the samples under run_hot() name hot() under it.
 *
 * Root + BTF + /usr/bin/python3.11, else 77.
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"
#include "test_proc.h"
#include "test_util.h"

#define PY_DEBIAN "/usr/bin/python3.11"
#define PY_PYENV  "/root/.pyenv/versions/3.11.7/bin/python3.11"
#define WARM_SECS "5"
#define HOT_SECS  "10"

static char bin_dir[4096], cpa[4200];
static char dir[] = "/tmp/cpa-python-reuse-XXXXXX";

struct reuse_stats {
	long samples, warm, in_hot, hot, freed;
};

/* One folded line of the interpreter: ";root;...;leaf". */
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

/* The workload, its stdout to out_path. */
static pid_t start_py(const char *py, const char *out_path)
{
	char script[4200];
	char *argv[] = {(char *)py, script, WARM_SECS, HOT_SECS, NULL};
	int fd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	pid_t pid;

	ck_assert_int_ge(fd, 0);
	snprintf(script, sizeof(script), "%s", PY_REUSE_SCRIPT);
	pid = spawn_fds(argv, -1, fd, -1);
	close(fd);
	return pid;
}

START_TEST(test_python_reuse_hot)
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
		snprintf(outs[i], sizeof(outs[i]), "%s/py%d.out", dir, i);
		pids[i] = start_py(pys[i], outs[i]);
	}
	text = monitor_stop_fold(mon, pids, n, 1, cpa, store, prof);
	for (int i = 0; i < n; i++) {
		double all;

		memset(&st[i], 0, sizeof(st[i]));
		fold_lines_of(text, pids[i], reuse_line, &st[i]);
		all = (double)MAX(st[i].in_hot, 1);
		fprintf(stderr,
			"e2e python reuse %s: %ld samples, warm() %ld, under run_hot() %ld: hot() "
			"%.2f %%; code object freed marker %ld\n",
			pys[i], st[i].samples, st[i].warm, st[i].in_hot,
			100.0 * (double)st[i].hot / all, st[i].freed);
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

int main(void)
{
	Suite *s = suite_create("python_reuse");
	TCase *tc = tcase_create("python_reuse");

	if (access(PY_DEBIAN, X_OK) != 0) {
		fprintf(stderr, "skip: needs %s\n", PY_DEBIAN);
		return 77;
	}
	if (test_e2e_ready(bin_dir, sizeof(bin_dir)))
		return 77;
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	return run_test_rmdir(s, tc, test_python_reuse_hot, 120, dir);
}
