// SPDX-License-Identifier: MIT
/*
 * Go programs under the real monitor (whole machine, cpa's defaults): a
 * program built here by Debian's go, normal and stripped (-ldflags='-s -w'),
 * spends its time in main.burn, called two levels deep in a goroutine, and
 * allocates now and then (mallocgc, GC work on systemstack). Per program:
 *
 *   - >= 95 % of its samples name main.burn (the stripped one from its
 *     .gopclntab alone);
 *   - at most 1 % of its stacks carry a stop marker (<# ... #>);
 *   - >= 90 % end at a Go stack bottom: runtime.goexit (goroutines),
 *     runtime.mstart or runtime.rt0_go (threads' g0 stacks).
 *
 * The top-10 leaf shares are printed (docs/bench.md). Root + BTF + go, else 77.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "fixtures/go/burn_src.h"
#include "test_proc.h"
#include "test_util.h"

static char bin_dir[4096];
static char dir[] = "/tmp/cpa-go-XXXXXX";

struct go_stats {
	long samples, hot, marked, bottom;
	char leaf[64][128];
	long leaf_n[64];
	int n_leaf;
};

static bool is_bottom(const char *f)
{
	static const char *const b[] = {"runtime.goexit", "runtime.mstart", "runtime.rt0_go"};

	for (size_t i = 0; i < ARRAY_SIZE(b); i++) {
		size_t n = strlen(b[i]);

		/* ".abi0": the ELF symbol of an assembly function */
		if (!strncmp(f, b[i], n) && (!f[n] || !strcmp(f + n, ".abi0")))
			return true;
	}
	return false;
}

/* One line of the program's stacks: semi = ";root;...;leaf", c samples. */
static void go_line(void *ctx, char *semi, long c)
{
	struct go_stats *st = ctx;
	char *leaf;
	int i;

	st->samples += c;
	if (strstr(semi, ";main.burn;") || strstr(semi, ";main.burn") == semi + strlen(semi) - 10)
		st->hot += c;
	if (!strncmp(semi + 1, "<# ", 3)) {
		if (st->marked < 5 * c)
			fprintf(stderr, "  marked: %.300s\n", semi + 1);
		st->marked += c;
	} else {
		char *root = strndup(semi + 1, strcspn(semi + 1, ";"));

		if (is_bottom(root))
			st->bottom += c;
		else if (st->samples - st->bottom - st->marked <= 5 * c)
			fprintf(stderr, "  not at a bottom: %.300s\n", semi + 1);
		free(root);
	}
	/* the leaf: the last user frame (kernel frames end in _[k]) */
	leaf = NULL;
	for (char *tok = strtok(semi + 1, ";"); tok; tok = strtok(NULL, ";"))
		if (!strstr(tok, "_[k]"))
			leaf = tok;
	for (i = 0; leaf && i < st->n_leaf && strcmp(st->leaf[i], leaf); i++)
		;
	if (leaf && i == st->n_leaf && i < 64)
		snprintf(st->leaf[st->n_leaf++], sizeof(st->leaf[0]), "%s", leaf);
	if (leaf && i < 64)
		st->leaf_n[i] += c;
}

static void go_stats_of(const char *prof, pid_t pid, struct go_stats *st)
{
	memset(st, 0, sizeof(*st));
	fold_lines_of(prof, pid, go_line, st);
}

static pid_t run_go(const char *exe, int secs)
{
	char path[4200], s[16];
	char *argv[] = {path, s, NULL};
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", dir, exe);
	snprintf(s, sizeof(s), "%d", secs);
	pid = spawn_fds(argv, -1, -1, -1);
	ck_assert_int_eq(wait_exit(pid, NULL), 0);
	return pid;
}

static void print_top(const char *name, const struct go_stats *st)
{
	bool used[64] = {false};

	fprintf(stderr, "  %s top-10 leaf shares:\n", name);
	for (int k = 0; k < 10; k++) {
		int best = -1;

		for (int i = 0; i < st->n_leaf; i++)
			if (!used[i] && (best < 0 || st->leaf_n[i] > st->leaf_n[best]))
				best = i;
		if (best < 0)
			break;
		used[best] = true;
		fprintf(stderr, "    %6.2f %%  %s\n",
			100.0 * (double)st->leaf_n[best] / (double)st->samples, st->leaf[best]);
	}
}

START_TEST(test_go_programs)
{
	char cpa[4200], store[4200], log[4200], prof[4200], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, "-F", "99", NULL};
	const char *names[] = {"burn", "burn_s"};
	pid_t mon, pids[2];

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	mon = spawn_monitor(margv, log, 60);
	sleep(1);
	pids[0] = run_go("burn", 6);
	pids[1] = run_go("burn_s", 6);
	sleep(1);
	kill(mon, SIGINT);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	text = monitor_fold_all(cpa, store, prof);
	for (int i = 0; i < 2; i++) {
		struct go_stats st;

		go_stats_of(text, pids[i], &st);
		fprintf(stderr,
			"e2e go %s: %ld samples, main.burn %.2f %%, stop markers %.2f %%, at a Go "
			"stack bottom %.2f %%\n",
			names[i], st.samples, 100.0 * (double)st.hot / (double)MAX(st.samples, 1),
			100.0 * (double)st.marked / (double)MAX(st.samples, 1),
			100.0 * (double)st.bottom / (double)MAX(st.samples, 1));
		print_top(names[i], &st);
		ck_assert_msg(st.samples >= 200, "%s: %ld samples", names[i], st.samples);
		ck_assert_msg(st.hot >= 0.95 * (double)st.samples, "%s: main.burn in %ld of %ld",
			      names[i], st.hot, st.samples);
		ck_assert_msg(st.marked <= 0.01 * (double)st.samples, "%s: %ld of %ld marked",
			      names[i], st.marked, st.samples);
		ck_assert_msg(st.bottom >= 0.90 * (double)st.samples,
			      "%s: %ld of %ld at a Go stack bottom", names[i], st.bottom,
			      st.samples);
	}
	free(text);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("go");
	TCase *tc = tcase_create("go");
	char src[4200];
	FILE *f;
	int r;

	if (test_e2e_ready(bin_dir, sizeof(bin_dir)))
		return 77;
	if (system("command -v go > /dev/null 2>&1") != 0) {
		fprintf(stderr, "skip: no go\n");
		return 77;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(src, sizeof(src), "%s/main.go", dir);
	f = fopen(src, "w");
	if (!f || fputs(go_burn_src, f) < 0 || fclose(f)) {
		perror(src);
		return 1;
	}
	/* offline: a std-only main package, a private build cache */
	{
		char cmd[16384];

		snprintf(
			cmd, sizeof(cmd),
			"cd '%s' && export GOCACHE='%s/cache' GOPATH='%s/gopath' GOFLAGS=-mod=mod "
			"GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 && go build -o burn main.go && "
			"go build -ldflags='-s -w' -o burn_s main.go",
			dir, dir, dir);
		r = system(cmd);
	}
	if (r != 0) {
		fprintf(stderr, "go build failed (%d)\n", r);
		return 1;
	}
	return run_test_rmdir(s, tc, test_go_programs, 240, dir);
}
