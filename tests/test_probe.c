// SPDX-License-Identifier: MIT
/*
 * Probe-triggered stacks end to end: `cpa monitor --probe ...` with the four
 * real stages on the real kernel while build/bin/cpa-probe-wl calls its own
 * wl_probe_target() N times, getppid() M times and passes its USDT probe K
 * times; then `cpa show --probe_id I` must count exactly that, every stack
 * unwound from the hit up to main (and _start). Bad specs must stop
 * `cpa monitor` before it starts anything, with an error naming the cause.
 *
 * Needs root and BTF (exit 77 otherwise).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/stage.h"
#include "test_proc.h"
#include "test_util.h"

static char bin_dir[1024];

static void need_root_bpf(void)
{
	test_need_root_bpf(bin_dir, sizeof(bin_dir));
}

static const char *libc_path(void)
{
	static char path[512];
	char line[1024];
	FILE *f = fopen("/proc/self/maps", "re");

	ck_assert_ptr_nonnull(f);
	path[0] = 0;
	while (!path[0] && fgets(line, sizeof(line), f)) {
		char *p = strchr(line, '/');

		if (p && strstr(p, "/libc.so.6")) {
			p[strcspn(p, "\n")] = 0;
			snprintf(path, sizeof(path), "%s", p);
		}
	}
	fclose(f);
	ck_assert_msg(path[0], "libc.so.6 not mapped");
	return path;
}

/* ---- the workload ---- */

struct wl {
	pid_t pid;
	int go;	 /* write a line: start calling */
	int out; /* "pid N usdt U", later "done" */
	bool usdt;
	char exe[1100];
};

static void wl_start(struct wl *w, long n, long m, long k)
{
	char sn[32], sm[32], sk[32], line[64];
	char *argv[] = {w->exe, sn, sm, sk, NULL};
	int in[2], out[2], usdt = 0, pid = 0;
	size_t len = 0;

	snprintf(w->exe, sizeof(w->exe), "%s/cpa-probe-wl", bin_dir);
	snprintf(sn, sizeof(sn), "%ld", n);
	snprintf(sm, sizeof(sm), "%ld", m);
	snprintf(sk, sizeof(sk), "%ld", k);
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	w->pid = spawn_fds(argv, in[0], out[1], -1);
	close(in[0]);
	close(out[1]);
	w->go = in[1];
	w->out = out[0];
	while (len < sizeof(line) - 1 && read(w->out, line + len, 1) == 1 && line[len] != '\n')
		len++;
	line[len] = 0;
	ck_assert_msg(sscanf(line, "pid %d usdt %d", &pid, &usdt) == 2, "workload said '%s'", line);
	w->usdt = usdt;
}

/* Let it run its calls; returns once they are done (it still lives). */
static void wl_run(struct wl *w)
{
	char line[16];
	size_t len = 0;

	ck_assert_int_eq(write(w->go, "go\n", 3), 3);
	while (len < sizeof(line) - 1 && read(w->out, line + len, 1) == 1 && line[len] != '\n')
		len++;
	line[len] = 0;
	ck_assert_msg(!strcmp(line, "done"), "workload said '%s'", line);
}

/* End of its stdin: it exits. */
static void wl_end(struct wl *w)
{
	close(w->go);
	close(w->out);
	ck_assert_int_eq(wait_exit(w->pid, NULL), 0);
}

/* ---- cpa monitor / show ---- */

struct mon {
	pid_t pid;
	char store[PATH_MAX];
	char log[PATH_MAX + 8];
};

/* cpa monitor --pid wl --probe ... ; returns once every stage runs. */
static void mon_start(struct mon *m, pid_t wl, const char *const *probes, const char *rate)
{
	char cpa[1100], pid[16];
	char *argv[40] = {
		cpa,	 "monitor", "--store_dir",  m->store, "-F",	      "1",
		"--pid", pid,	    "--stack_size", "4096",   "--probe_rate", (char *)rate};
	int n = 12;

	scratch_store("probe", m->store, sizeof(m->store));
	snprintf(m->log, sizeof(m->log), "%s.log", m->store);
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	snprintf(pid, sizeof(pid), "%d", (int)wl);
	for (int i = 0; probes[i]; i++) {
		argv[n++] = "--probe";
		argv[n++] = (char *)probes[i];
	}
	argv[n] = NULL;
	/* Probes are attached before capture reports RUNNING. */
	m->pid = spawn_monitor(argv, m->log, 30);
}

/* SIGINT: capture drains the BPF buffer, every stage drains into the store. */
static void mon_stop(struct mon *m)
{
	kill(m->pid, SIGINT);
	ck_assert_int_eq(wait_exit(m->pid, NULL), 0);
}

/* The store's whole range as -B b -E e arguments (HH:MM:SS). */
static void store_range(const struct mon *m, char b[16], char e[16])
{
	char cpa[1100];
	char *argr[] = {cpa, "show", "--read", (char *)m->store, "--show_range", NULL};
	int h0, m0, s0, h1, m1, s1, rc;
	char *out, *p;
	long t1;

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	out = run(argr, &rc);
	ck_assert_msg(rc == 0, "cpa show --show_range: %s", out);
	p = strstr(out, "Record Time From [ ");
	ck_assert_ptr_nonnull(p);
	ck_assert_int_eq(sscanf(p, "Record Time From [ %d:%d:%d.%*d ] to [ %d:%d:%d.%*d ]", &h0,
				&m0, &s0, &h1, &m1, &s1),
			 6);
	free(out);
	t1 = (h1 * 3600L + m1 * 60 + s1 + 1) % 86400;
	snprintf(b, 16, "%02d:%02d:%02d", h0, m0, s0);
	snprintf(e, 16, "%02ld:%02ld:%02ld", t1 / 3600, t1 / 60 % 60, t1 % 60);
}

/* `cpa show --probe_id id` over the whole store; the .prof text, *ret_head stdout. */
static char *show_probe(const struct mon *m, int id, char **ret_head)
{
	char cpa[1100], sid[16], b[16], e[16], prof[PATH_MAX + 64];
	char *argv[] = {cpa, "show", "--read", (char *)m->store, "-B",	       b,   "-E",
			e,   "-o",   prof,     "--no_env",	 "--probe_id", sid, NULL};
	int rc, fd;

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	store_range(m, b, e);
	snprintf(sid, sizeof(sid), "%d", id);
	snprintf(prof, sizeof(prof), "%s/probe%d.prof", m->store, id);
	*ret_head = run(argv, &rc);
	ck_assert_msg(rc == 0, "cpa show --probe_id %d exited %d: %s", id, rc, *ret_head);
	fd = open(prof, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return slurp_fd(fd);
}

struct tally {
	long hits;  /* samples of the workload */
	long whole; /* ... whose stack contains want */
	long lost;  /* loss rows ([lost] label) */
	long other; /* any other process */
};

/* Sum the folded lines "comm:pid;frames; COUNT" of show_probe(). */
static void tally(const char *prof, pid_t pid, const char *want, struct tally *t)
{
	char label[64];
	const char *line = prof;

	memset(t, 0, sizeof(*t));
	snprintf(label, sizeof(label), ":%d;", (int)pid);
	while (*line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char *l = strndup(line, len), *sp = strrchr(l, ' ');
		long c = sp ? strtol(sp + 1, NULL, 10) : 0;

		if (strstr(l, "[lost"))
			t->lost += c;
		else if (strstr(l, label)) {
			t->hits += c;
			if (strstr(l, want))
				t->whole += c;
		} else if (len) {
			t->other += c;
		}
		free(l);
		line = nl ? nl + 1 : line + len;
	}
}

static void mon_cleanup(struct mon *m)
{
	test_rm_rf(m->store);
	unlink(m->log);
}

/* ---- tests ---- */

#define N_CALLS	 300
#define M_CALLS	 200
#define K_CALLS	 100
#define RATE_ALL "1000" /* above every count: nothing skipped */

START_TEST(test_probe_counts)
{
	char up[1200], uret[1200], libc[700], usdt[1200];
	const char *probes[6] = {up, "tracepoint:syscalls:sys_enter_getppid", uret, libc};
	static const struct {
		long n;
		const char *stack; /* up to main, root first */
	} want[] = {
		{N_CALLS, "_start;__libc_start_main;__libc_start_call_main;main;wl_run_targets;"
			  "wl_probe_target; "},
		{M_CALLS, ";main;wl_run_getppid;getppid;entry_SYSCALL_64"},
		{N_CALLS, ";main;wl_run_targets; "}, /* the return lands in the caller */
		{M_CALLS, ";main;wl_run_getppid;getppid; "},
		{K_CALLS, ";main;wl_run_usdt; "},
	};
	struct mon m;
	struct wl w;
	int nprobes = 4;

	need_root_bpf();
	wl_start(&w, N_CALLS, M_CALLS, K_CALLS);
	snprintf(up, sizeof(up), "uprobe:%s:wl_probe_target", w.exe);
	snprintf(uret, sizeof(uret), "uretprobe:%s:wl_probe_target", w.exe);
	snprintf(libc, sizeof(libc), "uprobe:%s:getppid", libc_path());
	if (w.usdt) {
		snprintf(usdt, sizeof(usdt), "usdt:%s:cpa_wl:tick", w.exe);
		probes[nprobes++] = usdt;
	} else {
		fprintf(stderr, "no <sys/sdt.h> at build time: USDT probe not tested\n");
	}
	probes[nprobes] = NULL;
	mon_start(&m, w.pid, probes, RATE_ALL);
	wl_run(&w);
	mon_stop(&m);
	wl_end(&w);

	for (int i = 0; i < nprobes; i++) {
		char *head, *prof = show_probe(&m, i, &head), line[1300];
		struct tally t;

		snprintf(line, sizeof(line), "Probe %d: %s\n", i, probes[i]);
		ck_assert_msg(strstr(head, line), "cpa show did not name probe %d: %s", i, head);
		tally(prof, w.pid, want[i].stack, &t);
		ck_assert_msg(t.hits == want[i].n && t.whole == want[i].n && !t.lost && !t.other,
			      "%s: %ld hits (want %ld), %ld with '%s', %ld lost, %ld others:\n%s",
			      probes[i], t.hits, want[i].n, t.whole, want[i].stack, t.lost, t.other,
			      prof);
		free(prof);
		free(head);
	}
	mon_cleanup(&m);
}
END_TEST

/* A hot uprobe over --probe_rate: what was not recorded is a counted loss. */
START_TEST(test_probe_rate_limit)
{
	enum { CALLS = 3000, RATE = 200 };
	char up[1200], *head, *prof;
	const char *probes[] = {up, NULL};
	struct timespec t0, t1;
	struct tally t;
	struct mon m;
	struct wl w;
	double secs;

	need_root_bpf();
	wl_start(&w, CALLS, 0, 0);
	snprintf(up, sizeof(up), "uprobe:%s:wl_probe_target", w.exe);
	mon_start(&m, w.pid, probes, "200");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	wl_run(&w);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	mon_stop(&m);
	wl_end(&w);
	secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;

	prof = show_probe(&m, 0, &head);
	tally(prof, w.pid, ";wl_probe_target; ", &t);
	/* Every call is either a sample or a loss; the samples stay within the
	 * limit for each second the calls spanned (at most secs + 1 windows). */
	ck_assert_msg(t.hits + t.lost == CALLS, "%ld samples + %ld lost != %d calls:\n%s", t.hits,
		      t.lost, CALLS, prof);
	ck_assert_msg(t.hits > 0 && t.hits == t.whole, "%ld samples, %ld whole", t.hits, t.whole);
	ck_assert_msg(t.hits <= RATE * ((long)secs + 2), "%ld samples in %.2f s at %d/s", t.hits,
		      secs, RATE);
	ck_assert_msg(strstr(prof, "<# LOST: CAPTURE PROBE SKIPPED #>"), "no loss row:\n%s", prof);
	free(prof);
	free(head);
	mon_cleanup(&m);
}
END_TEST

/* The text of the file at path (the monitor's log). */
static char *slurp_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_msg(fd >= 0, "open '%s': %m", path);
	return slurp_fd(fd);
}

/* The line of text that starts with start (after a newline), copied. */
static char *line_of(const char *text, const char *start)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\n%s", start);
	p = strstr(text, pat);
	return p ? strndup(p + 1, strcspn(p + 1, "\n")) : strdup("");
}

/* The workload of the left-out cases, and in up the spec of their probe 1. */
static void refused_start(struct wl *w, char *up, size_t len)
{
	need_root_bpf();
	wl_start(w, N_CALLS, 0, 0);
	snprintf(up, len, "uprobe:%s:wl_probe_target", w->exe);
}

/* Probe 1 (on wl_probe_target) counted every call; probe 0, left out, has no
 * sample and the row that says why. */
static void refused_store_check(const struct mon *m, pid_t pid)
{
	char *head, *prof = show_probe(m, 1, &head);
	struct tally t;

	tally(prof, pid, ";wl_probe_target; ", &t);
	ck_assert_msg(t.hits == N_CALLS && t.whole == N_CALLS && !t.lost,
		      "probe 1: %ld hits (want %d), %ld whole, %ld lost:\n%s", t.hits, N_CALLS,
		      t.whole, t.lost, prof);
	free(prof);
	free(head);
	prof = show_probe(m, 0, &head);
	tally(prof, pid, "", &t);
	ck_assert_msg(!t.hits && strstr(prof, "<# LOST: CAPTURE PROBE REFUSED #>"),
		      "probe 0: %ld samples, or no probe_refused row:\n%s", t.hits, prof);
	free(prof);
	free(head);
}

/* `cpa ctl cost` of m: probe 0 (spec0) in state state0 ("detached (...), "),
 * probe 1 (spec1) attached. */
static void ctl_cost_left_out(const struct mon *m, const char *state0, const char *spec0,
			      const char *spec1)
{
	char cpa[1100], *out, *row;
	char *ctl_argv[] = {cpa, "ctl", "--store_dir", (char *)m->store, "cost", "1", NULL};
	int rc;

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	out = run(ctl_argv, &rc);
	ck_assert_msg(rc == 0, "cpa ctl cost exited %d: %s", rc, out);
	row = line_of(out, "0 ");
	ck_assert_msg(strstr(row, state0) && strstr(row, spec0),
		      "probe 0 not shown '%s' in cpa ctl cost:\n%s", state0, out);
	free(row);
	row = line_of(out, "1 ");
	ck_assert_msg(strstr(row, " attached, ") && strstr(row, spec1),
		      "probe 1 not shown attached in cpa ctl cost:\n%s", out);
	free(row);
	free(out);
}

/* The warning or error lines of log that hold what. */
static int bad_lines(const char *log, const char *what)
{
	int lines = 0;

	for (const char *p = log; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] ? 1 : 0)) {
		char *l = strndup(p, strcspn(p, "\n"));

		if (strstr(l, what) && (strstr(l, "WARNING") || strstr(l, "ERROR")))
			lines++;
		free(l);
	}
	return lines;
}

/*
 * A probe the kernel refuses at attach (a uprobe on wl_evex, whose first
 * instruction is an EVEX one: the spec check takes it, the kernel's x86
 * uprobes do not while the workload maps the file) is left out with one line naming
 * it, its file, offset and the kernel's reason; capture is not restarted,
 * the other probe counts every call, `cpa ctl cost` shows it detached and
 * the store says why it has no samples.
 */
START_TEST(test_probe_refused)
{
	char evex[1200], up[1200], want[2600], *log;
	const char *probes[] = {evex, up, NULL};
	struct mon m;
	struct wl w;
	int lines;

	refused_start(&w, up, sizeof(up));
	snprintf(evex, sizeof(evex), "uprobe:%s:wl_evex", w.exe);
	mon_start(&m, w.pid, probes, RATE_ALL);
	ctl_cost_left_out(&m, "detached (refused at attach), ", evex, up);
	wl_run(&w);
	mon_stop(&m);
	wl_end(&w);

	/* One warning or error line names the probe: its file, offset, reason. */
	log = slurp_path(m.log);
	lines = bad_lines(log, "wl_evex");
	snprintf(want, sizeof(want),
		 "probe 0 '%s' left out: the kernel refused its uprobe on %s at file offset 0x",
		 evex, w.exe);
	ck_assert_msg(lines == 1 && strstr(log, want),
		      "want one warning '%s...' (with the kernel's reason), %d lines:\n%s", want,
		      lines, log);
	ck_assert_msg(!strstr(log, "capture restarted") && !strstr(log, "libbpf"),
		      "capture restarted, or libbpf's lines shown:\n%s", log);

	refused_store_check(&m, w.pid);
	free(log);
	mon_cleanup(&m);
}
END_TEST

/* The monitor's log once it holds what, after from (a minute at most). */
static char *log_wait(const struct mon *m, const char *from, const char *what)
{
	char *log = NULL;

	for (int i = 0; i < 600; i++) {
		const char *f;

		free(log);
		log = slurp_path(m->log);
		f = from ? strstr(log, from) : log;
		if (f && strstr(f, what))
			return log;
		usleep(100 * 1000);
	}
	/* its end: what the monitor said last */
	ck_abort_msg("no '%s' after '%s' in the monitor's log:\n%s", what, from ? from : "",
		     log + (strlen(log) > 4000 ? strlen(log) - 4000 : 0));
	return log;
}

/* refused_start(), and a copy of the workload (its path in copy) whose
 * wl_probe_target probe 0 is (gone): the file-gone cases. */
static void gone_start(struct wl *w, char *up, size_t len, char *copy, size_t clen, char *gone,
		       size_t glen)
{
	int fd;

	refused_start(w, up, len);
	fd = test_mkstemp(copy, clen, "probe-wl-copy");
	ck_assert_int_ge(fd, 0);
	close(fd);
	run_sh("cp '%s' '%s'", w->exe, copy);
	snprintf(gone, glen, "uprobe:%s:wl_probe_target", copy);
}

/*
 * A probe's file gone when capture restarts (a package upgrade removed it,
 * then capture died): the restarted capture's own check finds it gone; it is
 * left out (one line naming the file) and that capture runs, with the other
 * probe counting.
 */
START_TEST(test_probe_file_gone)
{
	char copy[PATH_MAX], gone[PATH_MAX + 32], up[1200], *log;
	const char *probes[] = {gone, up, NULL}, *p;
	int cap = 0;
	struct wl w;
	struct mon m;

	gone_start(&w, up, sizeof(up), copy, sizeof(copy), gone, sizeof(gone));
	mon_start(&m, w.pid, probes, RATE_ALL);
	log = slurp_path(m.log);
	p = strstr(log, "all stages running (");
	ck_assert_msg(p && (p = strstr(p, "capture ")) && sscanf(p, "capture %d", &cap) == 1,
		      "no capture pid in:\n%s", log);
	free(log);
	ck_assert_int_eq(unlink(copy), 0);
	ck_assert_int_eq(kill(cap, SIGKILL), 0);
	/* the restarted capture leaves probe 0 out and samples */
	free(log_wait(&m, "capture restarted", "' left out: its file "));
	free(log_wait(&m, "' left out: its file ", "capture: sampling "));
	wl_run(&w);
	mon_stop(&m);
	wl_end(&w);

	log = slurp_path(m.log);
	ck_assert_msg(strstr(log, copy) && strstr(log, "No such file or directory") &&
			      strstr(log, "(restart 1)") && !strstr(log, "(restart 2)"),
		      "want one restart (the kill) and the cause:\n%s", log);
	refused_store_check(&m, w.pid);
	free(log);
	mon_cleanup(&m);
}
END_TEST

/*
 * A probe's file gone when capture first starts (removed after the monitor's
 * check: an upgrade in the middle of the start; here a capture wrapper in
 * CPA_STAGE_DIR removes it, then runs capture): capture leaves it out with one
 * line naming the file and that it is gone, and `cpa ctl cost` says the file
 * is gone, not that the kernel refused the probe; the other probe counts.
 */
START_TEST(test_probe_file_gone_first)
{
	char copy[PATH_MAX], gone[PATH_MAX + 32], up[1200], stages[PATH_MAX];
	char path[PATH_MAX + 32], want[PATH_MAX + 128], *log;
	const char *probes[] = {gone, up, NULL};
	static const char *const stage[] = {"unwindd", "symd", "storer"};
	int lines;
	struct wl w;
	struct mon m;

	gone_start(&w, up, sizeof(up), copy, sizeof(copy), gone, sizeof(gone));
	test_scratch_in(stages, sizeof(stages), "probe-stages");
	for (unsigned int i = 0; i < sizeof(stage) / sizeof(stage[0]); i++) {
		char to[1100];

		snprintf(path, sizeof(path), "%s/%s", stages, stage[i]);
		snprintf(to, sizeof(to), "%s/%s", bin_dir, stage[i]);
		ck_assert_int_eq(symlink(to, path), 0);
	}
	snprintf(path, sizeof(path), "%s/capture", stages);
	run_sh("printf '#!/bin/sh\\nrm -f \"%s\"\\nexec \"%s/capture\" \"$@\"\\n' > '%s' && "
	       "chmod 755 '%s'",
	       copy, bin_dir, path, path);
	setenv("CPA_STAGE_DIR", stages, 1);
	mon_start(&m, w.pid, probes, RATE_ALL);
	unsetenv("CPA_STAGE_DIR");
	ck_assert_int_ne(access(copy, F_OK), 0);
	ctl_cost_left_out(&m, "detached (file gone), ", gone, up);
	wl_run(&w);
	mon_stop(&m);
	wl_end(&w);

	/* One warning or error line names the probe and its file gone. */
	log = slurp_path(m.log);
	lines = bad_lines(log, copy);
	snprintf(want, sizeof(want), "left out: its file %s is gone (No such file or directory)",
		 copy);
	ck_assert_msg(lines == 1 && strstr(log, want) && !strstr(log, "the kernel refused"),
		      "want one line '...%s' (%d lines):\n%s", want, lines, log);
	refused_store_check(&m, w.pid);
	free(log);
	mon_cleanup(&m);
}
END_TEST

/* ---- the probe budget ---- */

/* cpa-wl-malloc's calls so far and its CPU ns (schedstat). */
static void wl_malloc_read(const char *count, pid_t pid, uint64_t *ret_calls, uint64_t *ret_ns)
{
	char path[64], *text;
	int fd = open(count, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, ret_calls, sizeof(*ret_calls), 0), (ssize_t)sizeof(*ret_calls));
	close(fd);
	snprintf(path, sizeof(path), "/proc/%d/schedstat", (int)pid);
	text = slurp_path(path);
	*ret_ns = strtoull(text, NULL, 10);
	free(text);
}

/* Its malloc() calls per second of its own CPU time over ~ms. */
static double wl_malloc_rate(const char *count, pid_t pid, int ms)
{
	uint64_t c0, c1, n0, n1;

	wl_malloc_read(count, pid, &c0, &n0);
	usleep((useconds_t)ms * 1000);
	wl_malloc_read(count, pid, &c1, &n1);
	ck_assert_msg(n1 > n0, "the malloc loop did not run");
	return (double)(c1 - c0) * 1e9 / (double)(n1 - n0);
}

/*
 * A uprobe on libc's malloc under a malloc loop, --probe_budget 0.5: each
 * call traps, far over half a CPU percent. The probe must be thinned, then
 * detached with one line naming it, its rate and its cost; `cpa ctl cost`
 * must show its trap time; the loop must run much faster after the detach
 * than with the probe (calls per CPU second, a ratio); the store must say
 * why its data stops ([lost: capture probe_detached]).
 */
START_TEST(test_probe_budget)
{
	char wl[1100], count[PATH_MAX], up[700], spec[720], cpa[1100];
	char pid[16], line[64], *log = NULL, *out, *head, *prof, *p;
	char *wl_argv[] = {wl, count, NULL};
	char *mon_argv[] = {cpa,       "monitor", "--store_dir",    NULL,  "-F", "1", "--pid", pid,
			    "--probe", spec,	  "--probe_budget", "0.5", NULL};
	double with, after, trap_ns = 0;
	unsigned int id;
	struct mon m;
	size_t len = 0;
	int out_fd, fd, rc;
	pid_t wpid = 0;

	need_root_bpf();
	fd = test_mkstemp(count, sizeof(count), "probe-count");
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(wl, sizeof(wl), "%s/cpa-wl-malloc", bin_dir);
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	wpid = spawn(wl_argv, &out_fd);
	while (len < sizeof(line) - 1 && read(out_fd, line + len, 1) == 1 && line[len] != '\n')
		len++;
	line[len] = 0;
	ck_assert_msg(!strncmp(line, "pid ", 4), "cpa-wl-malloc said '%s'", line);
	snprintf(pid, sizeof(pid), "%d", (int)wpid);
	snprintf(up, sizeof(up), "%s", libc_path());
	snprintf(spec, sizeof(spec), "uprobe:%s:malloc", up);

	scratch_store("probe", m.store, sizeof(m.store));
	snprintf(m.log, sizeof(m.log), "%s.log", m.store);
	mon_argv[3] = m.store;
	/* Probes are attached before capture reports RUNNING. */
	m.pid = spawn_monitor(mon_argv, m.log, 60);
	with = wl_malloc_rate(count, wpid, 300);

	/* cpa ctl cost: a row for probe 0 with the trap time capture measured. */
	{
		char *ctl_argv[] = {cpa, "ctl", "--store_dir", m.store, "cost", "1", NULL};

		out = run(ctl_argv, &rc);
		ck_assert_msg(rc == 0, "cpa ctl cost exited %d: %s", rc, out);
		p = strstr(out, "\n0 ");
		ck_assert_msg(p && strstr(out, "trap ns") && strstr(p, spec),
			      "no probe row in cpa ctl cost:\n%s", out);
		ck_assert_msg(sscanf(p + 1, "%u %*f %*f %lf", &id, &trap_ns) == 2 && trap_ns > 0,
			      "no trap time in the probe row:\n%s", out);
		free(out);
	}

	/* The detach line, within a minute (two budget windows of a second). */
	for (int i = 0; i < 600; i++) {
		free(log);
		log = slurp_path(m.log);
		if (strstr(log, "' detached: "))
			break;
		usleep(100 * 1000);
	}
	p = strstr(log, "' detached: ");
	ck_assert_msg(p, "no detach line in the monitor's log:\n%s", log);
	ck_assert_msg(strstr(log, spec) && strstr(p, " hits/s cost ") && strstr(p, "% of a CPU") &&
			      strstr(p, " us x ") && strstr(p, "--probe_budget 0.50 %"),
		      "the detach line lacks the probe, its rate or its cost:\n%s", log);
	ck_assert_msg(strstr(log, "thinned to "), "not thinned before the detach:\n%s", log);
	after = wl_malloc_rate(count, wpid, 300);
	mon_stop(&m);
	kill(wpid, SIGKILL);
	wait_exit(wpid, NULL);
	close(out_fd);
	unlink(count);

	/* The trap made each call cost microseconds, not nanoseconds. */
	ck_assert_msg(after > 5 * with,
		      "malloc calls per CPU second: %.0f with the probe, %.0f after the detach "
		      "(want > 5x)",
		      with, after);
	prof = show_probe(&m, 0, &head);
	ck_assert_msg(strstr(prof, "<# LOST: CAPTURE PROBE DETACHED #>"),
		      "no probe_detached row in the store:\n%s", prof);
	/* cpa show --sched: the probe's hits and trap cost, from the store. */
	{
		char b[16], e[16];
		char *sched_argv[] = {cpa, "show", "--read", m.store,	"-B",
				      b,   "-E",   e,	     "--sched", NULL};
		double hits = 0, trap_pct = 0;

		store_range(&m, b, e);

		out = run(sched_argv, &rc);
		ck_assert_msg(rc == 0, "cpa show --sched exited %d: %s", rc, out);
		p = strstr(out, "\nPROBE ");
		p = p ? strstr(p, "\n0 ") : NULL;
		ck_assert_msg(p && sscanf(p + 1, "%*u %*s %lf %lf%%", &hits, &trap_pct) == 2 &&
				      hits > 0 && trap_pct > 0,
			      "no probe row with hits and trap cost in cpa show --sched:\n%s", out);
		free(out);
	}
	free(prof);
	free(head);
	free(log);
	mon_cleanup(&m);
}
END_TEST

/* Bad specs stop cpa monitor before anything starts, naming the cause; a uprobe
 * on an instruction the kernel's uprobes refuse (wl_halt starts with hlt) too,
 * with the exit code of the machine's refusals (SHM_EXIT_PERMANENT). */
START_TEST(test_probe_bad_specs)
{
	static const struct {
		const char *spec, *says;
	} bad[] = {
		{"kprobe:do_sys_openat2", "CONFIG_KPROBES"},
		{"kretprobe:do_sys_openat2", "CONFIG_KPROBES"},
		{"uprobe:/nonexistent/cpa-bin:main", "/nonexistent/cpa-bin: No such file"},
		{"uprobe:/proc/self/cmdline:main", "is not an ELF file"},
		{"tracepoint:syscalls:sys_enter_cpa_nonexistent", "no tracepoint syscalls:"},
		{"usdt:/bin/true:cpa_wl:nonexistent", "has no USDT note cpa_wl:nonexistent"},
		{"fprobe:vfs_read", "invalid value 'fprobe:vfs_read'"},
		{"fentry:cpa_no_such_kernel_function",
		 "no function 'cpa_no_such_kernel_function' in "
		 "the kernel's BTF"},
		{"fexit:vfs_read", "refuses function tracing"},
		{"uprobe:relative/path:main", "invalid value"},
	};
	char cpa[1100], uprobe_sym[1200], uprobe_hlt[1200], hlt_says[1200], store[PATH_MAX];
	struct dirent *de;
	DIR *d;
	bool kprobes = access("/sys/bus/event_source/devices/kprobe/type", F_OK) == 0;
	bool ftrace_refused = false;
	FILE *ff;

	need_root_bpf();
	test_scratch_in(store, sizeof(store), "probe");
	/* Our test kernel refuses function tracing (fentry loads fail): then
	 * fentry/fexit must be refused at start too. tracefs is mounted by now
	 * if cpa ran before; mount errors only mean we skip that item. */
	ff = fopen("/sys/kernel/tracing/available_filter_functions", "re");
	if (ff)
		fclose(ff);
	else
		ftrace_refused = errno == EPERM || errno == EACCES;
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	snprintf(uprobe_sym, sizeof(uprobe_sym), "uprobe:%s/cpa-probe-wl:wl_no_such_fn", bin_dir);
	snprintf(uprobe_hlt, sizeof(uprobe_hlt), "uprobe:%s/cpa-probe-wl:wl_halt", bin_dir);
	snprintf(hlt_says, sizeof(hlt_says), "`hlt` at %s/cpa-probe-wl+0x", bin_dir);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]) + 2; i++) {
		const unsigned int nb = sizeof(bad) / sizeof(bad[0]);
		const char *spec = i < nb ? bad[i].spec : i == nb ? uprobe_sym : uprobe_hlt;
		const char *says = i < nb    ? bad[i].says
				   : i == nb ? "no function 'wl_no_such_fn' in"
					     : hlt_says;
		char *argv[] = {cpa,	      "monitor",    "--store_dir", store, "--probe",
				(char *)spec, "--duration", "1",	   NULL};
		int err[2], rc;
		pid_t pid;
		char *text;

		if (kprobes && strstr(says, "CONFIG_KPROBES"))
			continue; /* this kernel has them: nothing to refuse */
		if (!ftrace_refused && strstr(says, "refuses function tracing"))
			continue;
		ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
		pid = spawn_fds(argv, -1, err[1], err[1]);
		close(err[1]);
		text = slurp_fd(err[0]);
		rc = wait_exit(pid, NULL);
		ck_assert_msg(rc != 0 && strstr(text, says), "'%s': exit %d, wanted '%s' in: %s",
			      spec, rc, says, text);
		ck_assert_msg(!strstr(text, "stages running"), "'%s' started stages: %s", spec,
			      text);
		ck_assert_msg(spec != uprobe_hlt ||
				      (rc == SHM_EXIT_PERMANENT &&
				       strstr(text, " (wl_halt+0): the kernel's uprobes "
						    "cannot probe this instruction; "
						    "pick another offset")),
			      "'%s': exit %d (want %d), or not the whole line: %s", spec, rc,
			      SHM_EXIT_PERMANENT, text);
		free(text);
	}
	/* No store (day directory) was started. */
	d = opendir(store);
	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		ck_assert_msg(strncmp(de->d_name, "cpa_", 4), "store %s/%s created", store,
			      de->d_name);
	closedir(d);
	test_rm_rf(store);
}
END_TEST

/* The conf of the one run dir (cpa_*) under store, as text. */
static char *run_conf(const char *store)
{
	char path[PATH_MAX + 300] = "";
	struct dirent *de;
	DIR *d = opendir(store);

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "cpa_", 4))
			snprintf(path, sizeof(path), "%s/%s/conf", store, de->d_name);
	closedir(d);
	ck_assert_msg(path[0], "no run dir in %s", store);
	return test_slurp(path, NULL);
}

/*
 * `null` is an option's default, and --probe's is no probe: a later `--probe null`
 * on the command line, or `probe: null` in the --config file, drops every --probe
 * before it. Those are not attached and not in the run's conf; a --probe after
 * the null is probe 0.
 */
START_TEST(test_probe_null)
{
	static const char getppid_tp[] = "tracepoint:syscalls:sys_enter_getppid";
	static const char getpid_tp[] = "tracepoint:syscalls:sys_enter_getpid";
	char cpa[1100], store[PATH_MAX], cfg[PATH_MAX + 16];

	need_root_bpf();
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	for (int round = 0; round < 2; round++) {
		char *argv[] = {cpa,	       "monitor",
				"--store_dir", store,
				"-F",	       "1",
				"--duration",  "2",
				"--probe",     (char *)getppid_tp,
				"--probe",     "null",
				"--probe",     (char *)getpid_tp,
				NULL};
		char *out, *conf;
		int fds[2], rc;
		pid_t pid;
		FILE *f;

		scratch_store("probe", store, sizeof(store));
		if (round == 1) { /* the null in --config, after the command line's --probe */
			snprintf(cfg, sizeof(cfg), "%s.conf", store);
			f = fopen(cfg, "we");
			ck_assert_ptr_nonnull(f);
			ck_assert_int_ge(fputs("probe: null\n", f), 0);
			ck_assert_int_eq(fclose(f), 0);
			argv[10] = "--config";
			argv[11] = cfg;
			argv[12] = NULL;
		}
		ck_assert_int_eq(pipe2(fds, O_CLOEXEC), 0);
		pid = spawn_fds(argv, -1, fds[1], fds[1]);
		close(fds[1]);
		out = slurp_fd(fds[0]);
		rc = wait_exit(pid, NULL);
		ck_assert_msg(rc == 0, "cpa monitor exited %d: %s", rc, out);
		ck_assert_msg(!strstr(out, "getppid"), "the dropped probe is in the run: %s", out);
		conf = run_conf(store);
		if (round == 0)
			ck_assert_msg(
				strstr(conf, "\nprobe_0: tracepoint:syscalls:sys_enter_getpid\n") &&
					!strstr(conf, "probe_1"),
				"conf:\n%s", conf);
		else
			ck_assert_msg(!strstr(conf, "probe_"), "conf:\n%s", conf);
		free(conf);
		free(out);
		test_rm_rf(store);
		if (round == 1)
			unlink(cfg);
	}
}
END_TEST

int main(int argc, char **argv)
{
	Suite *s = suite_create("probe");
	TCase *tc;

	/* "budget": the probe budget alone (it measures a rate: EXCLUSIVE). */
	if (argc > 1 && !strcmp(argv[1], "budget"))
		tc = TEST_TCASE(s, "e2e", test_probe_budget);
	else
		tc = TEST_TCASE(s, "e2e", test_probe_counts, test_probe_rate_limit,
				test_probe_refused, test_probe_file_gone, test_probe_bad_specs,
				test_probe_null);
	tcase_set_timeout(tc, 240);
	/* capture's first start without a probe's file (a wrapper stage dir) */
	tc = TEST_TCASE(s, "first_start", test_probe_file_gone_first);
	tcase_set_timeout(tc, 240);
	return test_run_suite(s);
}
