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
 * The top-10 leaf shares are printed (docs/bench.md).
 *
 * With the argument "offcpu" (test_go_offcpu): a program that blocks
 * (tests/fixtures/go/block_src.h), normal and stripped, under `cpa monitor
 * --offcpu`. Per program:
 *
 *   - at most 1 % of its off-CPU time is on stacks with a stop marker, and
 *     >= 95 % on stacks that end at a Go stack bottom (runtime.goexit,
 *     mstart, rt0_go, or where Go's traceback ends: runtime.mcall, which
 *     parked the goroutine, runtime.sigtramp);
 *   - the places it blocks are named: main.reader's read(2), a thread parked
 *     through runtime.park_m;
 *   - its on-CPU samples on the signal stack (runtime.sigtramp and the
 *     handler, runtime.sigreturn) carry no stop marker either.
 *
 * Root + BTF + go, else 77.
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
#include "fixtures/go/block_src.h"
#include "fixtures/go/burn_src.h"
#include "test_proc.h"
#include "test_util.h"

static char bin_dir[4096];
static char dir[PATH_MAX]; /* main()'s test_scratch(): kept if the test fails */

struct go_stats {
	long samples, hot, marked, bottom;
	char leaf[64][128];
	long leaf_n[64];
	int n_leaf;
};

static bool is_bottom_of(const char *f, const char *const *b, size_t nb)
{
	for (size_t i = 0; i < nb; i++) {
		size_t n = strlen(b[i]);

		/* ".abi0": the ELF symbol of an assembly function */
		if (!strncmp(f, b[i], n) && (!f[n] || !strcmp(f + n, ".abi0")))
			return true;
	}
	return false;
}

static bool is_bottom(const char *f)
{
	static const char *const b[] = {"runtime.goexit", "runtime.mstart", "runtime.rt0_go"};

	return is_bottom_of(f, b, ARRAY_SIZE(b));
}

/* One line of the program's stacks: semi = ";root;...;leaf", c samples. */
static void go_line(void *ctx, char *semi, long c)
{
	struct go_stats *st = ctx;
	char *leaf;
	int i;

	if (stack_before_exec(semi))
		return; /* the test's fork, not yet the program */
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

/* Runs exe for secs seconds of wall time; its pid, and the CPU seconds it got in *cpu_s. */
static pid_t run_go(const char *exe, int secs, double *cpu_s)
{
	char path[4200], s[16];
	char *argv[] = {path, s, NULL};
	struct rusage ru;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/%s", dir, exe);
	snprintf(s, sizeof(s), "%d", secs);
	pid = spawn_fds(argv, -1, -1, -1);
	ck_assert_int_eq(wait_exit(pid, &ru), 0);
	*cpu_s = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
		 (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
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

/* The run's paths (cpa, its store, the folded output), filled. */
struct go_run {
	char cpa[4200], store[4200], prof[4200];
	pid_t pids[2];
	double cpu_s[2]; /* the CPU each program got: on a loaded host less than its wall time */
};

/*
 * `cpa monitor --store_dir STORE -F hz [--offcpu]` over the program exe
 * then exe_s, secs seconds each, whole machine; the monitor stopped.
 */
static void monitor_go(struct go_run *r, const char *hz, bool offcpu, const char *exe, int secs)
{
	char log[4200], exe_s[64];
	char *margv[] = {r->cpa,
			 "monitor",
			 "--store_dir",
			 r->store,
			 "-F",
			 (char *)hz,
			 offcpu ? "--offcpu" : NULL,
			 NULL};
	pid_t mon;

	snprintf(r->cpa, sizeof(r->cpa), "%s/cpa", bin_dir);
	snprintf(r->store, sizeof(r->store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(r->prof, sizeof(r->prof), "%s/out.prof", dir);
	snprintf(exe_s, sizeof(exe_s), "%s_s", exe);
	mon = spawn_monitor(margv, log, 60);
	sleep(1);
	r->pids[0] = run_go(exe, secs, &r->cpu_s[0]);
	r->pids[1] = run_go(exe_s, secs, &r->cpu_s[1]);
	sleep(1);
	kill(mon, SIGINT);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
}

START_TEST(test_go_programs)
{
	struct go_run r;
	const char *names[] = {"burn", "burn_s"};
	char *text;

	monitor_go(&r, "99", false, "burn", 6);
	text = monitor_fold_all(r.cpa, r.store, r.prof);
	for (int i = 0; i < 2; i++) {
		struct go_stats st;

		go_stats_of(text, r.pids[i], &st);
		fprintf(stderr,
			"e2e go %s: %ld samples, main.burn %.2f %%, stop markers %.2f %%, at a Go "
			"stack bottom %.2f %%\n",
			names[i], st.samples, 100.0 * (double)st.hot / (double)MAX(st.samples, 1),
			100.0 * (double)st.marked / (double)MAX(st.samples, 1),
			100.0 * (double)st.bottom / (double)MAX(st.samples, 1));
		print_top(names[i], &st);
		/* What it ran at 99 Hz is recorded (the cpu-clock timer only fires while
		 * it runs: a loaded host gives it less than its 6 s), and enough of it
		 * for the shares below to mean something. */
		ck_assert_msg(st.samples >= 0.7 * r.cpu_s[i] * 99 && st.samples >= 60,
			      "%s: %ld samples for %.2f s of CPU", names[i], st.samples,
			      r.cpu_s[i]);
		/* The rest is the runtime's own threads (GC, sysmon: named Go
		 * functions too), a larger share on a loaded host: 94.7 % once. */
		ck_assert_msg(st.hot >= 0.90 * (double)st.samples, "%s: main.burn in %ld of %ld",
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

/* Off-CPU and signal-stack figures of one program. */
struct go_off {
	double ns, marked_ns, bottom_ns, reader_ns, park_ns;
	long lines, marked_lines, not_bottom_lines;
	long on, on_sig, on_sig_marked, on_marked;
};

/* Where Go's traceback ends: the TOPFRAME functions, and mcall (SPWRITE). */
static bool is_off_bottom(const char *f)
{
	static const char *const b[] = {"runtime.goexit", "runtime.mstart",   "runtime.rt0_go",
					"runtime.mcall",  "runtime.sigtramp", "runtime.sigreturn"};

	return is_bottom_of(f, b, ARRAY_SIZE(b));
}

/* A stop marker: any "<# " frame but the off-CPU state and the degraded
 * capture ones (they say how the stack was taken, not where it stopped). */
static bool has_stop_marker(const char *stack)
{
	for (const char *p = strstr(stack, "<# "); p; p = strstr(p + 3, "<# "))
		if (strncmp(p, "<# OFFCPU SAMPLE", 16) && strncmp(p, "<# DEGRADED", 11))
			return true;
	return false;
}

/* The root user frame of ";root;...;leaf": the first that is no marker and no
 * kernel frame. */
static char *root_of(const char *stack)
{
	for (const char *p = stack + (*stack == ';'); *p;) {
		size_t n = strcspn(p, ";");

		if (strncmp(p, "<# ", 3) && !(n > 4 && !strncmp(p + n - 4, "_[k]", 4)))
			return strndup(p, n);
		p += n + (p[n] == ';');
	}
	return strdup("");
}

static void off_line(void *ctx, char *stack, long c)
{
	struct go_off *o = ctx;
	char *root;

	if (strstr(stack, "<# LOST: "))
		return;
	o->ns += (double)c;
	o->lines++;
	if (strstr(stack, ";main.reader;"))
		o->reader_ns += (double)c;
	if (strstr(stack, ";runtime.park_m;"))
		o->park_ns += (double)c;
	if (has_stop_marker(stack)) {
		if (o->marked_lines++ < 5)
			fprintf(stderr, "  off-CPU marked (%ld ns): %.300s\n", c, stack);
		o->marked_ns += (double)c;
		return;
	}
	root = root_of(stack);
	if (is_off_bottom(root))
		o->bottom_ns += (double)c;
	else if (o->not_bottom_lines++ < 5)
		fprintf(stderr, "  off-CPU not at a bottom: %.300s\n", stack);
	free(root);
}

static void on_line(void *ctx, char *stack, long c)
{
	struct go_off *o = ctx;
	bool marked = has_stop_marker(stack);

	o->on += c;
	if (marked && o->on_marked < 5 * c)
		fprintf(stderr, "  on-CPU marked: %.300s\n", stack);
	o->on_marked += marked ? c : 0;
	if (!strstr(stack, "runtime.sigtramp") && !strstr(stack, "runtime.sigreturn"))
		return;
	o->on_sig += c;
	if (marked) {
		if (o->on_sig_marked < 5 * c)
			fprintf(stderr, "  signal stack marked: %.300s\n", stack);
		o->on_sig_marked += c;
	}
}

START_TEST(test_go_offcpu)
{
	struct go_run r;
	const char *names[] = {"block", "block_s"};
	char *off, *on;

	monitor_go(&r, "499", true, "block", 5);
	off = monitor_fold_kind(r.cpa, r.store, r.prof, "off");
	on = monitor_fold_kind(r.cpa, r.store, r.prof, "on");
	for (int i = 0; i < 2; i++) {
		struct go_off o = {0};

		fold_lines_of(off, r.pids[i], off_line, &o);
		fold_lines_of(on, r.pids[i], on_line, &o);
		fprintf(stderr,
			"e2e go offcpu %s: %.3f s off-CPU in %ld stacks, stop markers %.2f %% of "
			"the time (%ld stacks), at a Go stack bottom %.2f %%, main.reader %.2f %%, "
			"runtime.park_m %.2f %%\n",
			names[i], o.ns / 1e9, o.lines, 100.0 * o.marked_ns / MAX(o.ns, 1.0),
			o.marked_lines, 100.0 * o.bottom_ns / MAX(o.ns, 1.0),
			100.0 * o.reader_ns / MAX(o.ns, 1.0), 100.0 * o.park_ns / MAX(o.ns, 1.0));
		fprintf(stderr,
			"e2e go on-CPU %s: %ld samples, %ld marked, %ld on the signal stack, "
			"%ld of them marked\n",
			names[i], o.on, o.on_marked, o.on_sig, o.on_sig_marked);
		ck_assert_msg(o.lines >= 10, "%s: %ld off-CPU stacks", names[i], o.lines);
		ck_assert_msg(o.marked_ns <= 0.01 * o.ns, "%s: %.0f of %.0f ns marked", names[i],
			      o.marked_ns, o.ns);
		ck_assert_msg(o.bottom_ns >= 0.95 * o.ns, "%s: %.0f of %.0f ns at a bottom",
			      names[i], o.bottom_ns, o.ns);
		ck_assert_msg(o.reader_ns > 0 && o.park_ns > 0,
			      "%s: main.reader %.0f ns, runtime.park_m %.0f ns", names[i],
			      o.reader_ns, o.park_ns);
		ck_assert_msg(o.on_sig_marked <= 0.01 * (double)MAX(o.on_sig, 1) + 1,
			      "%s: %ld of %ld signal-stack samples marked", names[i],
			      o.on_sig_marked, o.on_sig);
	}
	free(off);
	free(on);
}
END_TEST

int main(int argc, char **argv)
{
	bool offcpu = argc > 1 && !strcmp(argv[1], "offcpu");
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
	test_scratch_in(dir, sizeof(dir), "go");
	snprintf(src, sizeof(src), "%s/main.go", dir);
	f = fopen(src, "w");
	if (!f || fputs(offcpu ? go_block_src : go_burn_src, f) < 0 || fclose(f)) {
		perror(src);
		return 1;
	}
	/* offline: a std-only main package, a private build cache */
	{
		char cmd[16384];

		snprintf(cmd, sizeof(cmd),
			 "cd '%s' && export GOCACHE='%s/cache' GOPATH='%s/gopath' GOFLAGS=-mod=mod "
			 "GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=0 && go build -o %s main.go && "
			 "go build -ldflags='-s -w' -o %s_s main.go",
			 dir, dir, dir, offcpu ? "block" : "burn", offcpu ? "block" : "burn");
		r = system(cmd);
	}
	if (r != 0) {
		fprintf(stderr, "go build failed (%d)\n", r);
		return 1;
	}
	return run_one_test(s, tc, offcpu ? test_go_offcpu : test_go_programs, 240);
}
