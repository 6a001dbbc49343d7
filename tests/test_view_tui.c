// SPDX-License-Identifier: MIT
/*
 * cpa-view through a real terminal: tmux runs the built cpa-view, send-keys
 * types what a user types, capture-pane gives back what a user sees.
 *
 * The synthetic store (tests/test_view_util.h, written through the real
 * store writer) has known shares: hot_function 49.0% of the 10 minutes,
 * grow_function grows from 5/s to 40/s at 10:05:00. The BPF case records a
 * store with `cpa monitor` and the test workload (root + BTF, else 77).
 *
 * Waiting is "until the screen shows X" with a generous bound, never a
 * timing assertion.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "storer/store_fmt.h"
#include "test_store_util.h"
#include "test_util.h"
#include "test_view_util.h"

static char bin_dir[1024];
static char sock[108]; /* the tmux server's socket: a sun_path */
static char tmp_root[256];

static void path_of(char *buf, size_t len, const char *exe)
{
	snprintf(buf, len, "%s/%s", bin_dir, exe);
}

_printf_(1, 2) static int sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* ---- tmux ---- */

/* sock: in the run's scratch directory (test_scratch()), not /tmp/tmux-UID. */
static void tui_sock(void)
{
	const char *run = getenv(TEST_SCRATCH_ENV);

	ck_assert_int_lt(snprintf(sock, sizeof(sock), "%s/tmux-%d", run ? run : test_tmpdir(),
				  (int)getpid()),
			 (int)sizeof(sock));
}

static void tui_start(const char *args, int cols, int rows)
{
	char view[1100];

	path_of(view, sizeof(view), "cpa-view");
	tui_sock();
	sh("tmux -S '%s' kill-server 2>/dev/null", sock);
	/* remain-on-exit: a crash leaves its last screen to capture */
	ck_assert_int_eq(sh("tmux -S '%s' -f /dev/null new-session -d -x %d -y %d "
			    "'env LANG=C.UTF-8 %s %s'",
			    sock, cols, rows, view, args),
			 0);
	sh("tmux -S '%s' set-option -g remain-on-exit on >/dev/null", sock);
}

static void tui_stop(void)
{
	sh("tmux -S '%s' kill-server 2>/dev/null", sock);
	unlink(sock); /* tmux leaves it */
}

static char *screen(bool esc)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "tmux -S '%s' capture-pane -p %s -t 0", sock, esc ? "-e" : "");
	return test_cmd_out(NULL, "%s", cmd);
}

/*
 * Wait until the screen holds want and has settled: the same in two
 * captures 50 ms apart (tmux may show a frame half drawn: the header of the
 * new one, the body of the old; the README run caught that twice). 30 s
 * bound; a screen that never settles (a live view) is returned as soon as
 * it holds want. Returns the screen.
 */
static char *wait_for(const char *want)
{
	char *s = NULL, *next;
	int i;

	for (i = 0; i < 600; i++) {
		free(s);
		s = screen(false);
		if (!strstr(s, want)) {
			usleep(50000);
			continue;
		}
		for (int j = 0; j < 20; j++) {
			usleep(50000);
			next = screen(false);
			if (!strcmp(next, s)) {
				free(next);
				return s;
			}
			free(s);
			s = next;
			if (!strstr(s, want))
				break;
		}
		if (strstr(s, want))
			return s;
	}
	ck_abort_msg("screen never showed '%s'; last screen:\n%s", want, s);
	return s;
}

/* s, or the screens after it until one lacks gone (5 s bound): tmux may show
 * the new header over the old body for a frame. */
static char *wait_without(char *s, const char *gone)
{
	for (int i = 0; i < 100 && strstr(s, gone); i++) {
		free(s);
		usleep(50000);
		s = screen(false);
	}
	return s;
}

/* Keys in tmux send-keys syntax (Enter, Escape, Tab, C-u...). */
static void keys(const char *k)
{
	ck_assert_int_eq(sh("tmux -S '%s' send-keys -t 0 %s", sock, k), 0);
}

/* Literal text. */
static void type(const char *text)
{
	ck_assert_int_eq(sh("tmux -S '%s' send-keys -t 0 -l '%s'", sock, text), 0);
}

static void prompt_answer(const char *key, const char *label, const char *text)
{
	free(wait_for("range"));
	keys(key);
	free(wait_for(label));
	keys("C-u");
	type(text);
	keys("Enter");
}

/* "/pat" Enter, then the next keys (e.g. "n" to select the first match). */
static void search_for(const char *pat, const char *then)
{
	keys("/");
	free(wait_for("search (regex)"));
	keys("C-u");
	type(pat);
	keys("Enter");
	if (then)
		keys(then);
}

/* Screen line holding s (a copy), or NULL. */
static char *line_with(const char *scr, const char *s)
{
	const char *p = strstr(scr, s), *b, *e;

	if (!p)
		return NULL;
	for (b = p; b > scr && b[-1] != '\n'; b--)
		;
	e = strchr(p, '\n');
	return strndup(b, e ? (size_t)(e - b) : strlen(b));
}

static int line_no(const char *scr, const char *s)
{
	const char *p = strstr(scr, s), *q;
	int n = 0;

	if (!p)
		return -1;
	for (q = scr; q < p; q++)
		n += *q == '\n';
	return n;
}

/* ---- the synthetic store ---- */

static char store_root[300];

static void synth_setup(void)
{
	test_scratch_in(tmp_root, sizeof(tmp_root), "view-test");
	snprintf(store_root, sizeof(store_root), "%s/store", tmp_root);
	ck_assert_int_eq(mkdir(store_root, 0755), 0);
	ck_assert_int_eq(vt_write_store(store_root), 0);
}

static void synth_teardown(void)
{
	tui_stop();
	test_rm_rf(tmp_root);
}

/* Expected shares of the whole store, as the viewer prints them. */
static uint64_t vt_total(void)
{
	return (uint64_t)VT_SECS * (VT_HOT + VT_COLD + VT_VEC + VT_OFF) +
	       (uint64_t)VT_SECS / 2 * (VT_GROW0 + VT_GROW1) + VT_LOST + VT_DEGRADED;
}

static void pct_str(char *buf, size_t len, const char *prefix, double v)
{
	snprintf(buf, len, "%s%.1f%%", prefix, v);
}

START_TEST(test_first_screen)
{
	char args[512], want[64], *s, *l;

	snprintf(args, sizeof(args), "%s", store_root);
	tui_start(args, 80, 24);
	/* the flamegraph's hot frame: the whole first frame is drawn (settled) */
	s = wait_for("hot_function");
	ck_assert_ptr_nonnull(strstr(s, "cpa-view"));
	/* header: the store and its span; the whole 10 minutes selected */
	ck_assert_ptr_nonnull(strstr(s, "10:00:00-10:10:00"));
	ck_assert_ptr_nonnull(strstr(s, "range 10:00:00-10:10:00 (10m00s)"));
	/* the status counts on-CPU, off-CPU and lost apart */
	snprintf(want, sizeof(want), "%llu samples: on %u off %u lost %u",
		 (unsigned long long)vt_total(),
		 VT_SECS * (VT_HOT + VT_COLD + VT_VEC) + VT_SECS / 2 * (VT_GROW0 + VT_GROW1) +
			 VT_DEGRADED,
		 VT_SECS * VT_OFF, VT_LOST);
	ck_assert_msg(strstr(s, want), "want '%s' in\n%s", want, s);
	/* timeline: bars, the range marked, the loss at 10:01:40 and the pressure
	 * at 10:03:20 marked in their cells (8 s per cell) */
	ck_assert_ptr_nonnull(strstr(s, "\u2588\u2588\u2588\u2588"));
	l = line_with(s, "[====");
	ck_assert_ptr_nonnull(l);
	ck_assert_int_eq(strchr(l, '!') - l, 100 / 8);
	ck_assert_int_eq(strchr(l, '~') - l, 200 / 8);
	ck_assert_ptr_nonnull(strstr(l, "]"));
	free(l);
	/* the flamegraph: root, process, the hot path */
	ck_assert_int_lt(line_no(s, "app:1000"), line_no(s, "hot_function"));
	ck_assert_int_lt(line_no(s, "run_loop"), line_no(s, "hot_function"));
	/* 80x24: exactly 24 rows, hints on the last */
	ck_assert_ptr_nonnull(strstr(s, "? help"));
	free(s);
	/* the hot function and its share */
	search_for("^hot_function$", "n");
	pct_str(want, sizeof(want), "hot_function  total ",
		100.0 * VT_SECS * VT_HOT / (double)vt_total());
	s = wait_for(want);
	ck_assert_ptr_nonnull(strstr(s, "module /usr/bin/app"));
	free(s);
}
END_TEST

START_TEST(test_search)
{
	char want[128], *s, *l, *p;
	double share = 100.0 * (VT_SECS * VT_HOT + VT_SECS / 2 * (VT_GROW0 + VT_GROW1)) /
		       (double)vt_total();

	tui_start(store_root, 80, 24);
	free(wait_for("cpa-view"));
	search_for("hot|grow", NULL);
	snprintf(want, sizeof(want), "/hot|grow/ matches %.1f%% of the range", share);
	free(wait_for(want));
	/* highlighted: both matched boxes drawn on magenta (SGR 45) */
	s = screen(true);
	l = line_with(s, "hot_function");
	ck_assert_ptr_nonnull(l);
	p = strstr(l, "hot_function");
	ck_assert_msg(p - l >= 3 && memmem(l, (size_t)(p - l), "45m", 3), "no highlight: %s", l);
	p = strstr(l, "grow_function");
	ck_assert_ptr_nonnull(p);
	ck_assert_msg(memmem(l, (size_t)(p - l), "45m", 3), "no highlight: %s", l);
	/* cold_function is not highlighted: the escape right before it is not magenta */
	p = strstr(l, "cold_functi");
	ck_assert_ptr_nonnull(p);
	{
		const char *e = p;
		char *esc;

		while (e > l && *e != '\033')
			e--;
		esc = strndup(e, (size_t)(p - e));
		ck_assert_msg(!strstr(esc, "45m"), "cold highlighted: %s", l);
		free(esc);
	}
	free(l);
	free(s);
	/* n selects a match; # searches exactly the selected frame */
	keys("n");
	free(wait_for("hot_function  total"));
	keys("'#'");
	s = wait_for("/^hot_function$/ matches");
	free(s);
}
END_TEST

START_TEST(test_zoom)
{
	char *s;

	tui_start(store_root, 80, 24);
	free(wait_for("cpa-view"));
	search_for("^run_loop$", "n");
	free(wait_for("run_loop  total"));
	keys("Enter");
	/* zoomed: run_loop is the first flamegraph row, the root and process are gone */
	s = wait_for("run_loop  total");
	s = wait_without(s, "app:1000");
	ck_assert_int_lt(line_no(s, "app:1000"), 0);
	ck_assert_int_eq(line_no(s, "run_loop"), line_no(s, "hot_function") - 1);
	/* wider than before: cold_function's name fits now */
	ck_assert_ptr_nonnull(strstr(s, "cold_function "));
	free(s);
	/* Esc zooms back out to where Enter came from */
	keys("Escape");
	free(wait_for("app:1000"));
	/* deeper: zoom into main, then run_loop; Esc returns to main, 0 to the root */
	search_for("^main$", "n Enter / C-u");
	type("^run_loop$");
	keys("Enter n Enter Escape");
	/* back in main's zoom, run_loop (where we came from) selected */
	s = wait_for("run_loop  total");
	free(s);
	for (int i = 0; i < 100; i++) {
		s = screen(false);
		/* the body starts on row 13 at 80x24: header, 4 timeline rows, marks, axis,
		 * 5 series rows (metrics, triggers, legend), status */
		if (line_no(s, "main\n") == 13 && line_no(s, "app:1000") < 0)
			break;
		free(s);
		s = NULL;
		usleep(50000);
	}
	ck_assert_msg(s, "main is not the top row after Esc");
	free(s);
	keys("0");
	free(wait_for("app:1000"));
}
END_TEST

START_TEST(test_top_and_sandwich)
{
	char *s;

	tui_start(store_root, 80, 24);
	free(wait_for("cpa-view"));
	keys("Tab");
	s = wait_for("TOTAL%");
	free(s);
	keys("s");
	s = wait_for("sorted by self");
	/* by self: hot 36000, grow 13500, parse_request 12000, push_back/schedule 6000 */
	ck_assert_int_gt(line_no(s, "hot_function"), 0);
	ck_assert_int_lt(line_no(s, "hot_function"), line_no(s, "grow_function"));
	ck_assert_int_lt(line_no(s, "grow_function"), line_no(s, "parse_request"));
	ck_assert_int_lt(line_no(s, "parse_request"), line_no(s, "schedule"));
	free(s);
	keys("t");
	s = wait_for("sorted by total");
	/* by total: main first (every stack but the loss), run_loop before hot_function */
	ck_assert_int_lt(line_no(s, " main"), line_no(s, "run_loop"));
	ck_assert_int_lt(line_no(s, "run_loop"), line_no(s, "hot_function"));
	free(s);
	/* sandwich of parse_request: callers above, callees below */
	keys("s j j");
	free(wait_for("parse_request  total"));
	keys("Enter");
	s = wait_for("callers of parse_request");
	ck_assert_int_lt(line_no(s, "callers of parse_request"), line_no(s, "cold_function"));
	ck_assert_int_lt(line_no(s, "run_loop"), line_no(s, "cold_function"));
	ck_assert_int_lt(line_no(s, "cold_function"), line_no(s, "callees of parse_request"));
	free(s);
	keys("Escape");
	free(wait_for("sorted by self"));
}
END_TEST

START_TEST(test_diff)
{
	char *s, *l;

	tui_start(store_root, 80, 24);
	free(wait_for("cpa-view"));
	prompt_answer("r", "range (", "10:00:00 +5m");
	free(wait_for("range 10:00:00-10:05:00"));
	keys("A");
	free(wait_for("range A marked"));
	prompt_answer("r", "range (", "10:05:00 10:10:00");
	free(wait_for("range 10:05:00-10:10:00"));
	keys("B");
	s = wait_for("[diff]");
	/* the grown path is marked +, the shrunk one - */
	ck_assert_ptr_nonnull(strstr(s, "+grow_function"));
	ck_assert_ptr_nonnull(strstr(s, "-hot_function"));
	ck_assert_ptr_nonnull(strstr(s, "diff: A 10:00:00-10:05:00"));
	free(s);
	/* the movers table: grow_function moved most (4.6% -> 28.6%), first row */
	keys("Tab");
	s = wait_for("CHANGE");
	l = line_with(s, "CHANGE");
	ck_assert_int_eq(line_no(s, "+grow_function"), line_no(s, "CHANGE") + 1);
	free(l);
	free(s);
}
END_TEST

START_TEST(test_range_keys)
{
	char *s;

	tui_start(store_root, 80, 24);
	free(wait_for("cpa-view"));
	keys("+");
	free(wait_for("range 10:02:30-10:07:30 (5m00s)"));
	keys("g");
	free(wait_for("jump to"));
	type("10:01:00");
	keys("Enter");
	free(wait_for("range 10:01:00-10:06:00"));
	keys("]");
	free(wait_for("range 10:05:00-10:10:00"));
	keys("[");
	free(wait_for("range 10:00:00-10:05:00"));
	keys("-");
	free(wait_for("range 10:00:00-10:10:00"));
	/* filters and grouping */
	prompt_answer(":", "filter:", "pid=2000");
	/* the header's filter, not the prompt's echo; then the filtered flamegraph,
	 * which tmux may show a frame after the header (the README run once caught
	 * the screen in between: header filtered, body not yet) */
	s = wait_for("group process  pid=2000");
	for (int i = 0; i < 100 && (strstr(s, "app:1000") || !strstr(s, "db:2000")); i++) {
		usleep(50000);
		free(s);
		s = screen(false);
	}
	ck_assert_ptr_nonnull(strstr(s, "group process  pid=2000"));
	ck_assert_ptr_nonnull(strstr(s, "db:2000"));
	ck_assert_ptr_null(strstr(s, "app:1000"));
	free(s);
	prompt_answer(":", "filter:", "kind=off");
	s = wait_for("group process  kind=off");
	ck_assert_ptr_nonnull(strstr(s, "wait_event"));
	ck_assert_ptr_null(strstr(s, "hot_function"));
	ck_assert_ptr_nonnull(strstr(s, "schedule"));
	free(s);
	keys("K");
	s = wait_for("no-kernel");
	ck_assert_ptr_null(strstr(s, "schedule"));
	free(s);
	keys("G");
	free(wait_for("group thread"));
	/* help */
	keys("?");
	s = wait_for("cpa-view keys");
	ck_assert_ptr_nonnull(strstr(s, "regex search"));
	free(s);
}
END_TEST

START_TEST(test_export)
{
	char path[400], *s, *out;

	snprintf(path, sizeof(path), "%s/out.prof", tmp_root);
	tui_start(store_root, 80, 24);
	free(wait_for("cpa-view"));
	prompt_answer("x", "export folded to:", path);
	free(wait_for("stacks to"));
	snprintf(path, sizeof(path), "cat '%s/out.prof'", tmp_root);
	out = test_cmd_out(NULL, "%s", path);
	s = strstr(out, "SYSTEM;app:1000;main;run_loop;hot_function 36000\n");
	ck_assert_msg(s, "export:\n%s", out);
	ck_assert_ptr_nonnull(strstr(out, "wait_event;schedule_[k] "));
	free(out);
}
END_TEST

START_TEST(test_sizes)
{
	char *s, *l;

	tui_start(store_root, 80, 24);
	free(wait_for("cpa-view"));
	sh("tmux -S '%s' resize-window -t 0 -x 120 -y 40", sock);
	/* the axis row ends with the store's end time at the right edge */
	s = wait_for("10:10:00\n");
	for (int i = 0; i < 100; i++) {
		l = line_with(s, "cell max");
		if (l && strlen(l) == 120)
			break;
		free(l);
		l = NULL;
		free(s);
		usleep(50000);
		s = screen(false);
	}
	ck_assert_msg(l && strlen(l) == 120, "axis not redrawn at 120 columns:\n%s", s);
	free(l);
	free(s);
	sh("tmux -S '%s' resize-window -t 0 -x 50 -y 12", sock);
	free(wait_for("terminal too small: 50x12"));
	sh("tmux -S '%s' resize-window -t 0 -x 80 -y 24", sock);
	free(wait_for("hot_function"));
	tui_stop();
	/* ASCII fallback */
	{
		char args[400];

		snprintf(args, sizeof(args), "--ascii --mono %s", store_root);
		tui_start(args, 80, 24);
	}
	s = wait_for("cpa-view");
	ck_assert_ptr_nonnull(strstr(s, "####"));
	ck_assert_ptr_null(strstr(s, "\u2588"));
	free(s);
}
END_TEST

/* ---- the command line: help, version, no terminal, bad stores ---- */

/* cpa-view ARGS in tmux (a terminal) with stderr to a file; waits for it to
 * exit (30 s bound). Returns its exit code, stderr in err. */
static int tui_exit_code(const char *args, char *err, size_t errlen)
{
	char view[1100], rc_path[400], err_path[400], cmd[4096], *out;
	int code = -1;

	path_of(view, sizeof(view), "cpa-view");
	snprintf(rc_path, sizeof(rc_path), "%s/rc", tmp_root);
	snprintf(err_path, sizeof(err_path), "%s/err", tmp_root);
	unlink(rc_path);
	tui_sock();
	sh("tmux -S '%s' kill-server 2>/dev/null", sock);
	snprintf(cmd, sizeof(cmd),
		 "tmux -S '%s' -f /dev/null new-session -d -x 80 -y 24 "
		 "'env LANG=C.UTF-8 %s %s 2>%s; echo $? >%s.tmp; mv %s.tmp %s; sleep 30'",
		 sock, view, args, err_path, rc_path, rc_path, rc_path);
	ck_assert_int_eq(system(cmd), 0);
	for (int i = 0; i < 600 && access(rc_path, R_OK) != 0; i++)
		usleep(50000);
	ck_assert_msg(access(rc_path, R_OK) == 0, "cpa-view %s did not exit; screen:\n%s", args,
		      out = screen(false));
	snprintf(cmd, sizeof(cmd), "cat %s", rc_path);
	out = test_cmd_out(NULL, "%s", cmd);
	code = atoi(out);
	free(out);
	snprintf(cmd, sizeof(cmd), "cat %s", err_path);
	out = test_cmd_out(NULL, "%s", cmd);
	snprintf(err, errlen, "%s", out);
	free(out);
	tui_stop();
	return code;
}

START_TEST(test_cli)
{
	struct test_run r;
	char cmd[2400], view[1100], want[64];
	int st;

	test_run_bin(&r, "cpa-view", (const char *const[]){"--version", NULL});
	snprintf(want, sizeof(want), "cpa-view %s\n", CPA_VERSION);
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out, want);
	test_run_bin(&r, "cpa-view", (const char *const[]){"--help", NULL});
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.out, "Usage: cpa-view [OPTION]... STORE\n"), "%s", r.out);
	ck_assert_ptr_nonnull(strstr(r.out, "--version"));
	ck_assert_ptr_nonnull(strstr(r.out, "--follow"));
	ck_assert_ptr_nonnull(strstr(r.out, "Exit status"));
	ck_assert_str_eq(r.err, "");
	test_run_bin(&r, "cpa-view", (const char *const[]){"--bogus", store_root, NULL});
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "Try 'cpa-view --help'."));
	/* no terminal: one line on stderr and exit 2, at once (timeout's 124 would
	 * say it kept running) */
	path_of(view, sizeof(view), "cpa-view");
	snprintf(cmd, sizeof(cmd), "timeout 10 %s %s </dev/null >%s/out 2>%s/err", view, store_root,
		 tmp_root, tmp_root);
	st = system(cmd);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 2);
	snprintf(cmd, sizeof(cmd), "cat %s/err", tmp_root);
	{
		char *e = test_cmd_out(NULL, "%s", cmd);

		ck_assert_msg(strstr(e, "cpa-view: needs a terminal") && strchr(e, '\n') &&
				      !strchr(e, '\n')[1],
			      "stderr: '%s'", e);
		free(e);
	}
	snprintf(cmd, sizeof(cmd), "timeout 10 %s /nonexistent </dev/null >/dev/null 2>&1", view);
	st = system(cmd);
	ck_assert(WIFEXITED(st));
	ck_assert_int_eq(WEXITSTATUS(st), 2);
}
END_TEST

/* ---- bad stores ---- */

START_TEST(test_bad_stores)
{
	char args[600], dir[1024], p[1200], err[4096], *s;
	int fd;

	/* a missing path or a dir without a store: stderr and exit 1, before curses */
	snprintf(args, sizeof(args), "%s/missing", tmp_root);
	ck_assert_int_eq(tui_exit_code(args, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "cpa-view: failed to open input file: ") &&
			      strstr(err, "No such file"),
		      "stderr: '%s'", err);
	/* live mode waits for it instead */
	snprintf(args, sizeof(args), "--follow %s/missing", tmp_root);
	tui_start(args, 80, 24);
	s = wait_for("Cannot show this store");
	ck_assert_ptr_nonnull(strstr(s, "No such file"));
	ck_assert_ptr_nonnull(strstr(s, "retrying every second"));
	free(s);
	tui_stop();

	snprintf(dir, sizeof(dir), "%s/empty", tmp_root);
	mkdir(dir, 0755);
	ck_assert_int_eq(tui_exit_code(dir, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "failed to open input file: no cpa store in"), "stderr: '%s'",
		      err);

	/* a corrupt block: flip a byte inside the third block's data */
	ck_assert_int_eq(t_store_dir(store_root, dir, sizeof(dir)), 0);
	{
		struct store_idx_entry e;

		snprintf(p, sizeof(p), "%s/index", dir);
		fd = open(p, O_RDONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &e, sizeof(e), 32 + 2 * sizeof(e)), (ssize_t)sizeof(e));
		close(fd);
		snprintf(p, sizeof(p), "%s/seg_%06u.cps", dir, e.seg_no);
		fd = open(p, O_RDWR);
		ck_assert_int_ge(fd, 0);
		{
			uint8_t b;

			ck_assert_int_eq(pread(fd, &b, 1, e.off + e.len - 2), 1);
			b ^= 0x5a;
			ck_assert_int_eq(pwrite(fd, &b, 1, e.off + e.len - 2), 1);
		}
		close(fd);
	}
	tui_start(store_root, 80, 24);
	s = wait_for("corrupt blocks skipped: 1");
	ck_assert_ptr_nonnull(strstr(s, "hot_function"));
	free(s);
	tui_stop();

	/* a newer major version */
	{
		struct store_seg_hdr h;

		snprintf(p, sizeof(p), "%s/seg_000001.cps", dir);
		fd = open(p, O_RDWR);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		h.major = 2;
		h.crc = store_crc(&h, offsetof(struct store_seg_hdr, crc));
		ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
		close(fd);
	}
	ck_assert_int_eq(tui_exit_code(store_root, err, sizeof(err)), 1);
	ck_assert_msg(strstr(err, "newer than") && strstr(err, "use a newer cpa"), "stderr: '%s'",
		      err);
}
END_TEST

/* ---- live mode: the timeline grows while the store is written ---- */

START_TEST(test_live)
{
	char root[400], args[600];
	struct vgen *g = calloc(1, sizeof(*g));
	uint64_t base = vt_base_ns();
	uint32_t stack, comm, s;

	snprintf(root, sizeof(root), "%s/live", tmp_root);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(vgen_open(g, root, 2), 0);
	comm = vgen_str(g, "app");
	stack = vgen_stack(g, "main;first_minute");
	for (s = 0; s < 60; s++)
		ck_assert_int_eq(vgen_sample(g, base + s * 1000000000ULL, stack, 1, 1, 0,
					     CPA_KIND_ONCPU, 1, comm, comm),
				 0);
	ck_assert_int_eq(store_writer__flush(g->w, false), 0);
	snprintf(args, sizeof(args), "--follow %s", root);
	tui_start(args, 80, 24);
	free(wait_for("10:00:00-10:01:00 (60s)  [live]"));
	free(wait_for("first_minute"));
	/* a minute more arrives: the timeline and the range (it was at the end) follow */
	stack = vgen_stack(g, "main;second_minute");
	for (s = 60; s < 120; s++)
		ck_assert_int_eq(vgen_sample(g, base + s * 1000000000ULL, stack, 1, 1, 0,
					     CPA_KIND_ONCPU, 1, comm, comm),
				 0);
	ck_assert_int_eq(store_writer__flush(g->w, false), 0);
	free(wait_for("10:00:00-10:02:00 (2m00s)  [live]"));
	free(wait_for("second_minute"));
	vgen_close(g);
	free(g);
}
END_TEST

/* ---- cpa show --use_cui ---- */

START_TEST(test_show_use_cui)
{
	char args[2400], cpa[1100];

	path_of(cpa, sizeof(cpa), "cpa");
	if (access(cpa, X_OK) != 0)
		return; /* the front command is not built in this tree */
	tui_sock();
	sh("tmux -S '%s' kill-server 2>/dev/null", sock);
	snprintf(args, sizeof(args),
		 "tmux -S '%s' -f /dev/null new-session -d -x 80 -y 24 "
		 "'env LANG=C.UTF-8 %s show --read %s --use_cui -B 10:05:00 -E 10:06:00'",
		 sock, cpa, store_root);
	ck_assert_int_eq(system(args), 0);
	free(wait_for("range 10:05:00-10:06:00 (60s)"));
}
END_TEST

/*
 * --end alone (cpa show --use_cui -E alone passes just that) opens on the range
 * from the first record, as cpa show -E exports it; an end not after the start
 * is a usage error, as in cpa show.
 */
START_TEST(test_begin_end)
{
	char args[2400], cpa[1100];
	struct test_run r;

	snprintf(args, sizeof(args), "--end 10:06:00 %s", store_root);
	tui_start(args, 80, 24);
	free(wait_for("range 10:00:00-10:06:00 (6m00s)"));
	tui_stop();
	path_of(cpa, sizeof(cpa), "cpa");
	if (access(cpa, X_OK) == 0) {
		/* a server of its own: a new session right after kill-server may fail */
		ck_assert_int_lt(strlen(sock) + 2, sizeof(sock));
		strcat(sock, "-e");
		ck_assert_int_eq(sh("tmux -S '%s' -f /dev/null new-session -d -x 80 -y 24 "
				    "'env LANG=C.UTF-8 %s show --read %s --use_cui -E 10:07:00'",
				    sock, cpa, store_root),
				 0);
		free(wait_for("range 10:00:00-10:07:00 (7m00s)"));
		tui_stop();
	}
	test_run_bin(&r, "cpa-view",
		     (const char *const[]){"-B", "10:05:00", "-E", "10:04:00", store_root, NULL});
	ck_assert_int_eq(r.code, 2);
	ck_assert_msg(strstr(r.err, "cpa-view: --end 10:04:00 is not after --begin 10:05:00\n"),
		      "%s", r.err);
}
END_TEST

/* ---- a store recorded by real BPF ---- */

static bool can_bpf(void)
{
	return geteuid() == 0 && access("/sys/kernel/btf/vmlinux", R_OK) == 0;
}

START_TEST(test_bpf_store)
{
	char cpa[1100], wl[1100], cmd[4096], pol[400], *s, *p;
	int r;
	double share;
	FILE *f;

	path_of(cpa, sizeof(cpa), "cpa");
	path_of(wl, sizeof(wl), "cpa-workload");
	/* a policy that fires on the workload's burst: a low threshold, since the host may
	 * be busy with other work (the workload's one busy thread gets less than a CPU) */
	snprintf(pol, sizeof(pol), "%s/hot.policy", tmp_root);
	f = fopen(pol, "we");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "policy=hot item=cpu_percent op=> threshold=1 count=1 period=2 "
		   "comm=cpa-workload freq=199 duration=2 silence=60\n");
	fclose(f);
	/* record the whole machine while the workload runs 4 s, from when every stage runs
	 * (a busy host may take seconds to start them) */
	snprintf(cmd, sizeof(cmd),
		 "'%s' monitor --store_dir '%s' -F 99 --policy '%s' --duration 14 >'%s/mon.log' "
		 "2>&1 & m=$!; for i in $(seq 300); do grep -q 'all stages running' '%s/mon.log' "
		 "&& break; sleep 0.1; done; '%s' --seconds 4 --threads 1 --depth 6 >/dev/null; "
		 "wait $m",
		 cpa, store_root, pol, tmp_root, tmp_root, wl);
	r = system(cmd);
	ck_assert_int_eq(r, 0);
	tui_start(store_root, 100, 30);
	free(wait_for("cpa-view"));
	search_for("wl_path_a", NULL);
	s = wait_for("/wl_path_a/ matches");
	p = strstr(s, "matches ");
	share = strtod(p + 8, NULL);
	ck_assert_msg(share > 1.0, "wl_path_a only %.1f%% of a recording of the workload:\n%s",
		      share, s);
	free(s);
	keys("n");
	free(wait_for("wl_path_a  total"));
	keys("Tab s");
	s = wait_for("sorted by self");
	ck_assert_ptr_nonnull(strstr(s, "wl_"));
	free(s);
	/* the recorded metrics drawn (the legend has maxima), the trigger listed and jumped to */
	keys("Tab");
	s = wait_for("(T)");
	p = strstr(s, "triggers ");
	/* ours at least (another cpa-workload on the host may trigger too) */
	ck_assert_msg(p && atoi(p + 9) >= 1, "no trigger counted:\n%s", s);
	ck_assert_msg(strstr(s, "system:") && strstr(s, "max: cpu "), "%s", s);
	ck_assert_msg(strstr(s, "T-"), "no trigger window on the trigger row:\n%s", s);
	free(s);
	keys("T");
	s = wait_for("policy hot pid");
	ck_assert_msg(strstr(s, "(cpa-workload): cpu_percent") && strstr(s, "freq=199"), "%s", s);
	free(s);
	keys("Enter");
	free(wait_for("range = the window of trigger hot"));
}
END_TEST

/* Row i (0-based) of a screen (a copy). */
static char *row_of(const char *scr, int i)
{
	const char *p = scr, *e;

	for (; i > 0 && p; i--) {
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	ck_assert_ptr_nonnull(p);
	e = strchr(p, '\n');
	return strndup(p, e ? (size_t)(e - p) : strlen(p));
}

/* Byte offset of the cell-th display column of a UTF-8 line. */
static const char *col_at(const char *l, int cell)
{
	for (; *l; l++)
		if (((unsigned char)*l & 0xc0) != 0x80 && cell-- == 0)
			return l;
	return l;
}

START_TEST(test_metrics_triggers)
{
	char *s, *l, want[128];

	tui_start(store_root, 80, 24);
	/* legend: system-wide maxima (busy 95%, P99 in the 1 ms bucket, 2 CPUs x 200
	 * switches), the trigger counted, no hardware counters on this "host" */
	s = wait_for("triggers 1 (T)");
	l = row_of(s, 11);
	ck_assert_msg(strstr(l, "system:") && strstr(l, "cpu 95%") && strstr(l, "rq-p99 2.1ms") &&
			      strstr(l, "cs 400/s") && strstr(l, "IPC n/a on this host"),
		      "legend: '%s'\n%s", l, s);
	free(l);
	/* the series rows under the axis (8 s per cell, 75 cells): busy 25% then
	 * 95% of every CPU from 10:05:00 (cell 37.5); run-queue P99 ~32 us then ~2 ms */
	l = row_of(s, 7);
	ck_assert_msg(!strncmp(col_at(l, 0), "\u2582", 3) && !strncmp(col_at(l, 36), "\u2582", 3) &&
			      !strncmp(col_at(l, 38), "\u2588", 3) &&
			      !strncmp(col_at(l, 74), "\u2588", 3),
		      "cpu busy row: '%s'", l);
	free(l);
	l = row_of(s, 8);
	ck_assert_msg(!strncmp(col_at(l, 0), "\u2581", 3) && !strncmp(col_at(l, 74), "\u2588", 3),
		      "run-queue P99 row: '%s'", l);
	free(l);
	/* the trigger's window, 10:02:00-10:02:30: T in cell 120/8, - to cell 149/8 */
	l = row_of(s, 10);
	ck_assert_msg(strchr(l, 'T') && strchr(l, 'T') - l == VT_TRIG_AT / 8 &&
			      !strncmp(strchr(l, 'T'), "T---", 4) &&
			      strrchr(l, '-') - l == (VT_TRIG_AT + VT_TRIG_LEN - 1) / 8,
		      "trigger row: '%s'\n%s", l, s);
	free(l);
	free(s);
	/* the process filter: app:1000's own series (800 ms on CPU = 80% of one CPU) */
	prompt_answer(":", "filter:", "pid=1000");
	s = wait_for("pid 1000:");
	ck_assert_msg(strstr(s, "cpu 80%") && strstr(s, "cs 400/s"), "%s", s);
	free(s);
	keys(":");
	free(wait_for("filter:"));
	keys("C-u Enter");
	free(wait_for("system:"));
	/* T lists it; Enter makes its window the range */
	keys("T");
	s = wait_for("policy burst pid 1000 (app)");
	/* two rows a trigger at 80 columns: its window and what fired, then the rest */
	l = line_with(s, "policy burst");
	ck_assert_msg(strstr(l, "10:02:00-10:02:30") && strstr(l, "cpu_percent 183.20 > 50.00"),
		      "'%s'\n%s", l, s);
	free(l);
	ck_assert_msg(strstr(s, "actions freq=499 offcpu=1"), "%s", s);
	free(s);
	keys("Enter");
	s = wait_for("range 10:02:00-10:02:30 (30s)");
	ck_assert_ptr_nonnull(strstr(s, "range = the window of trigger burst pid 1000"));
	snprintf(want, sizeof(want), "%u samples",
		 VT_TRIG_LEN * (VT_HOT + VT_GROW0 + VT_COLD + VT_VEC + VT_OFF));
	ck_assert_msg(strstr(s, want), "want '%s' in\n%s", want, s);
	free(s);
}
END_TEST

/*
 * A 30-second store of many processes, from 10:00:00 on the test day, per second:
 *   app:1000       main;run_loop;hot_function   40
 *   w00..w19:5000+ main;compress;hot_inner       3 each (too narrow alone: one "+N")
 *   pid 3000       main;sh_main as "sh" in the first second (5), then it execs:
 *                  main;xz_main as "xz" (20 per second)
 */
#define VM_SECS	 30
#define VM_PROCS 20

static void write_many(const char *root)
{
	struct vgen *g = calloc(1, sizeof(*g));
	uint64_t base = vt_base_ns();
	uint32_t app, shc, xzc, hot, inner, shs, xzs, wc[VM_PROCS];
	char name[512]; /* vgen_str reads up to 512 */

	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(vgen_open(g, root, 2), 0);
	app = vgen_str(g, "app");
	shc = vgen_str(g, "sh");
	xzc = vgen_str(g, "xz");
	for (int i = 0; i < VM_PROCS; i++) {
		snprintf(name, sizeof(name), "w%02d", i);
		wc[i] = vgen_str(g, name);
	}
	hot = vgen_stack(g, "main;run_loop;hot_function");
	inner = vgen_stack(g, "main;compress;hot_inner");
	shs = vgen_stack(g, "main;sh_main");
	xzs = vgen_stack(g, "main;xz_main");
	for (uint32_t s = 0; s < VM_SECS; s++) {
		uint64_t t = base + s * 1000000000ULL;

		for (uint32_t k = 0; k < 40; k++)
			ck_assert_int_eq(vgen_sample(g, t + k * 1000, hot, 1000, 1000, 0,
						     CPA_KIND_ONCPU, 1, app, app),
					 0);
		for (uint32_t k = 0; k < (s ? 20u : 5u); k++)
			ck_assert_int_eq(vgen_sample(g, t + k * 1000, s ? xzs : shs, 3000, 3000, 0,
						     CPA_KIND_ONCPU, 1, s ? xzc : shc,
						     s ? xzc : shc),
					 0);
		for (uint32_t i = 0; i < VM_PROCS; i++)
			for (uint32_t k = 0; k < 3; k++)
				ck_assert_int_eq(vgen_sample(g, t + k * 1000, inner, 5000 + i,
							     5000 + i, 1, CPA_KIND_ONCPU, 1, wc[i],
							     wc[i]),
						 0);
	}
	vgen_close(g);
	free(g);
}

/* cpa-view at 80x24 on the store of write_many(): its first screen. */
static char *start_many(void)
{
	char root[400];

	snprintf(root, sizeof(root), "%s/many", tmp_root);
	write_many(root);
	tui_start(root, 80, 24);
	return wait_for("hot_function");
}

/* Row r of the flamegraph body at 80x24 (row 13 of the screen is its first). */
static char *body_row(const char *scr, int r)
{
	return row_of(scr, 13 + r);
}

/* The timeline's axis under its bars; one process name for a pid (the name at
 * the sample, as the exports) */
START_TEST(test_axis_and_names)
{
	char *s = start_many(), *l;

	/* 30 one-second cells: the end time ends under the last one, the scale after */
	l = line_with(s, "s/cell");
	ck_assert_ptr_nonnull(l);
	ck_assert_msg(strncmp(l, "10:00:00", 8) == 0 && strstr(l, "10:00:30") == l + 22 &&
			      strstr(l, "1s/cell") > strstr(l, "10:00:30"),
		      "axis not under the 30 cells:\n%s", s);
	free(l);
	l = line_with(s, "[====");
	ck_assert_msg(l && strstr(l, "]") == l + VM_SECS - 1, "marks:\n%s", s);
	free(l);
	/* pid 3000 ran as sh for a second, then as xz: its wide box is xz's */
	ck_assert_msg(strstr(s, "xz:3000"), "no xz:3000 box:\n%s", s);
	free(s);
}
END_TEST

/* M: group by name, every process merged; the "+N" box selected and zoomed */
START_TEST(test_group_name_and_merged)
{
	char *s = start_many(), *l;

	l = body_row(s, 1);
	ck_assert_msg(strstr(l, "app:1000") == l && strstr(l, "+2"), "row 1: '%s'\n%s", l, s);
	free(l);
	free(s);
	/* j from the root: the box under its middle is the "+21" of the narrow processes */
	keys("j");
	s = wait_for("frames too narrow");
	ck_assert_msg(strstr(s, "Enter shows them"), "%s", s);
	free(s);
	keys("Enter");
	/* zoomed: "+21" is the top row, its members below at full scale */
	s = wait_for("frames too narrow");
	s = wait_without(s, "app:1000");
	l = body_row(s, 0);
	ck_assert_msg(strncmp(l, "+2", 2) == 0, "top row: '%s'\n%s", l, s);
	free(l);
	l = body_row(s, 1);
	ck_assert_msg(l[0] == 'w' && strstr(l, " w0") && strstr(l, " w1"), "members: '%s'\n%s", l,
		      s);
	free(l);
	ck_assert_ptr_null(strstr(s, "app:1000"));
	free(s);
	keys("j");
	s = wait_for("  total");
	l = row_of(s, 22);
	ck_assert_msg(l[0] == 'w' && strstr(l, ":50") == l + 3, "details: '%s'\n%s", l, s);
	free(l);
	free(s);
	keys("Escape");
	free(wait_for("frames too narrow"));
	keys("Escape");
	free(wait_for("app:1000"));
	/* group by name: one wide "main", compress (every w process) and run_loop under it */
	keys("M");
	s = wait_for("group name");
	s = wait_without(s, "app:1000");
	l = body_row(s, 1);
	/* full width: the only box of its row (tmux drops the trailing blanks) */
	ck_assert_msg(strcmp(l, "main") == 0, "row 1: '%s'\n%s", l, s);
	free(l);
	l = body_row(s, 2);
	ck_assert_msg(strncmp(l, "compress", 8) == 0 && strstr(l, "run_loop"), "row 2: '%s'\n%s", l,
		      s);
	free(l);
	ck_assert_ptr_null(strstr(s, "app:1000"));
	free(s);
	/* M again: back to the grouping before */
	keys("M");
	free(wait_for("group process"));
	free(wait_for("app:1000"));
}
END_TEST

/* A store of a whole day: the header gives the dates */
START_TEST(test_day_header)
{
	char root[400], *s;
	struct vgen *g = calloc(1, sizeof(*g));
	struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 28, .tm_isdst = -1};
	uint64_t base = (uint64_t)mktime(&tm) * 1000000000ULL;
	uint32_t c, st;

	snprintf(root, sizeof(root), "%s/day", tmp_root);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(vgen_open(g, root, 2), 0);
	c = vgen_str(g, "app");
	st = vgen_stack(g, "main;all_day");
	for (uint64_t t = 0; t < 86400; t += 3599)
		ck_assert_int_eq(vgen_sample(g, base + t * 1000000000ULL, st, 1, 1, 0,
					     CPA_KIND_ONCPU, 1, c, c),
				 0);
	ck_assert_int_eq(
		vgen_sample(g, base + 86399 * 1000000000ULL, st, 1, 1, 0, CPA_KIND_ONCPU, 1, c, c),
		0);
	vgen_close(g);
	free(g);
	tui_start(root, 80, 24);
	s = wait_for("11-28 00:00:00 - 11-29 00:00:00 (24h00m)");
	/* the last 5 minutes stay on one day: no dates */
	ck_assert_msg(strstr(s, "range 23:55:00-00:00:00 (5m00s)"), "%s", s);
	free(s);
	keys("a");
	free(wait_for("range 11-28 00:00:00 - 11-29 00:00:00 (24h00m)"));
}
END_TEST

/* Two monitor runs of the day under one root: cpa-view opens both, as `cpa show`. */
START_TEST(test_day_runs)
{
	struct vgen *g = calloc(1, sizeof(*g));
	uint64_t t = vt_base_ns() + 3600ULL * 1000000000ULL;
	uint32_t st, app;
	char *s;

	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(vgen_open(g, store_root, 2), 0);
	store_writer__set_run_id(g->w, t);
	app = vgen_str(g, "app");
	st = vgen_stack(g, "main;second_run");
	for (uint32_t i = 0; i < 60; i++)
		ck_assert_int_eq(vgen_sample(g, t + i * 1000000000ULL, st, 1000, 1000, 0,
					     CPA_KIND_ONCPU, 1, app, app),
				 0);
	vgen_close(g);
	free(g);
	tui_start(store_root, 80, 24);
	s = wait_for("(2 runs)");
	ck_assert_msg(strstr(s, "10:00:00-11:01:00"), "%s", s);
	free(s);
	/* both runs read: second_run in the second's minute, hot_function in the first's */
	prompt_answer("r", "range (", "11:00:00 11:01:00");
	s = wait_for("second_run");
	ck_assert_ptr_nonnull(strstr(s, "60 samples"));
	free(s);
	prompt_answer("r", "range (", "10:09:00 10:10:00");
	free(wait_for("hot_function"));
}
END_TEST

/* ---- a big store: loading in the background ---- */

#define BIG_HOURS 4
/* samples per second, one in five off-CPU: enough rows that a load of hours
 * outlasts the 100 ms waited for, read by two threads (its progress line is checked) */
#define BIG_RATE 1000
#define BIG_ON	 (BIG_RATE - BIG_RATE / 5)

/* BIG_HOURS from local midnight of 2026-11-20 under root: every sample of a
 * second its own row (stack, pid, tid, cpu differ), so a range is many rows. */
static void write_big(const char *root)
{
	struct vgen *g = calloc(1, sizeof(*g));
	uint64_t base = vt_base_ns() - 10 * 3600ULL * 1000000000ULL;
	uint32_t st[40], comm[20];
	char buf[512];

	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(vgen_open(g, root, 8), 0);
	for (uint32_t i = 0; i < 20; i++) {
		snprintf(buf, sizeof(buf), "svc%u", i);
		comm[i] = vgen_str(g, buf);
	}
	for (uint32_t i = 0; i < 40; i++) {
		snprintf(buf, sizeof(buf), "main;loop_%u;work_%u;leaf_%u", i % 4, i % 13, i);
		st[i] = vgen_stack(g, buf);
	}
	for (uint64_t sec = 0; sec < BIG_HOURS * 3600ULL; sec++)
		for (uint32_t k = 0; k < BIG_RATE; k++) {
			uint32_t p = (k / 40) % 20;

			ck_assert_int_eq(vgen_sample(g, base + sec * 1000000000ULL + k * 1000ULL,
						     st[k % 40], 3000 + p, 3000 + p + k % 3, k % 8,
						     k % 5 ? CPA_KIND_ONCPU : CPA_KIND_OFFCPU,
						     k % 5 ? 1 : 1000, comm[p], comm[p]),
					 0);
		}
	vgen_close(g);
	free(g);
}

/* Sum of the counts of `cpa show`'s folded lines for [b, e) of root, on-CPU. */
static uint64_t show_on_total(const char *root, const char *b, const char *e)
{
	char cpa[1100], out[400], *txt, *line, *save = NULL;
	uint64_t sum = 0;
	int rc = -1;

	path_of(cpa, sizeof(cpa), "cpa");
	snprintf(out, sizeof(out), "%s/show.prof", tmp_root);
	free(test_cmd_out(&rc, "%s show --read '%s' -B %s -E %s --kind on -o '%s' 2>&1", cpa, root,
			  b, e, out));
	ck_assert_int_eq(rc, 0);
	txt = test_cmd_out(NULL, "cat '%s'", out);
	for (line = strtok_r(txt, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *sp = strrchr(line, ' ');

		ck_assert_ptr_nonnull(sp);
		sum += strtoull(sp + 1, NULL, 10);
	}
	free(txt);
	return sum;
}

/* "N samples: on X" of the status line for range rng (settled), X. */
static uint64_t view_on_total(const char *rng)
{
	char want[128], *s, *p;
	uint64_t on;

	snprintf(want, sizeof(want), "range %s  ", rng);
	s = wait_for(want);
	for (int i = 0; i < 600 && !strstr(s, " samples: on "); i++) {
		free(s);
		usleep(50000);
		s = wait_for(want);
	}
	p = strstr(s, " samples: on ");
	ck_assert_msg(p, "no totals on\n%s", s);
	on = strtoull(p + strlen(" samples: on "), NULL, 10);
	free(s);
	return on;
}

/*
 * The screen while a range loads: a progress line and no picture. Polled
 * without waiting for it to settle (the line moves; a load may be short), and
 * a frame tmux caught half drawn may hold the picture before: one of the
 * loading screens without it is enough, none is a failure.
 */
static void check_loading(void)
{
	char *s = NULL, *l;
	bool seen = false, clean = false;

	for (int i = 0; i < 600; i++) {
		free(s);
		s = screen(false);
		l = line_with(s, ")  loading ");
		if (l) {
			ck_assert_msg(strstr(l, "%: ") && strstr(l, " read, ") &&
					      strstr(l, " M rows  (q quits)"),
				      "progress line:\n%s", s);
			free(l);
			seen = true;
			clean = !strstr(s, "leaf_") && !strstr(s, "svc");
			if (clean)
				break;
		} else if (seen) {
			ck_abort_msg("every loading screen showed the picture before; last:\n%s",
				     s);
		}
		usleep(20000);
	}
	ck_assert_msg(seen, "no progress line; last screen:\n%s", s);
	ck_assert_msg(clean, "every loading screen showed the picture before; last:\n%s", s);
	free(s);
}

START_TEST(test_big_load)
{
	char root[400], args[1200];

	snprintf(root, sizeof(root), "%s/big", tmp_root);
	write_big(root);
	/* the first range: totals as `cpa show` counts them */
	snprintf(args, sizeof(args), "--begin 02:00:00 --end 03:00:00 '%s'", root);
	tui_start(args, 100, 30);
	ck_assert_uint_eq(view_on_total("02:00:00-03:00:00 (60m00s)"), 3600ULL * BIG_ON);
	ck_assert_uint_eq(show_on_total(root, "02:00:00", "03:00:00"), 3600ULL * BIG_ON);
	/* everything: loaded in the background with a progress line */
	keys("a");
	check_loading();
	/* keys work meanwhile: a narrower range supersedes the running load */
	keys("+");
	ck_assert_uint_eq(view_on_total("01:00:00-03:00:00 (2h00m)"), 2ULL * 3600 * BIG_ON);
	/* the whole store, then the same totals again (partly from cached sums) */
	keys("a");
	ck_assert_uint_eq(view_on_total("00:00:00-04:00:00 (4h00m)"), BIG_HOURS * 3600ULL * BIG_ON);
	keys("+");
	ck_assert_uint_eq(view_on_total("01:00:00-03:00:00 (2h00m)"), 2ULL * 3600 * BIG_ON);
	ck_assert_uint_eq(show_on_total(root, "01:00:00", "03:00:00"), 2ULL * 3600 * BIG_ON);
	free(wait_for("svc0:3"));
	tui_stop();

	/*
	 * q while the first range loads: cpa-view exits at once, cleanly. Its exit status comes
	 * from the shell tmux runs it in: tmux 3.3 now and then marks the pane dead and never
	 * reaps the child (a zombie, pane_dead_status empty), with cpa-view gone.
	 */
	snprintf(args, sizeof(args),
		 "--begin 00:00:00 --end 04:00:00 '%s'; echo \"exit $?\" > '%s/q_status'", root,
		 tmp_root);
	tui_start(args, 100, 30);
	check_loading();
	keys("q");
	{
		char path[1100], st[32] = "";

		snprintf(path, sizeof(path), "%s/q_status", tmp_root);
		for (int i = 0; i < 600 && !st[0]; i++) {
			FILE *f = fopen(path, "r");

			if (f) {
				if (!fgets(st, sizeof(st), f))
					st[0] = 0;
				fclose(f);
			}
			if (!st[0])
				usleep(50000);
		}
		ck_assert_msg(!strcmp(st, "exit 0\n"), "after q: '%s'; screen:\n%s", st,
			      screen(false));
	}
	tui_stop();
}
END_TEST

static Suite *suite(bool bpf)
{
	Suite *s = suite_create("view_tui");
	TCase *tc;

	/* One TCase, the one run: one never added to the suite would leak. */
	if (bpf) {
		tc = tcase_create("bpf");
		tcase_add_checked_fixture(tc, synth_setup, synth_teardown);
		tcase_set_timeout(tc, 180);
		tcase_add_test(tc, test_bpf_store);
		suite_add_tcase(s, tc);
		return s;
	}
	tc = tcase_create("synthetic");
	tcase_add_checked_fixture(tc, synth_setup, synth_teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_first_screen);
	tcase_add_test(tc, test_search);
	tcase_add_test(tc, test_zoom);
	tcase_add_test(tc, test_top_and_sandwich);
	tcase_add_test(tc, test_diff);
	tcase_add_test(tc, test_range_keys);
	tcase_add_test(tc, test_export);
	tcase_add_test(tc, test_sizes);
	tcase_add_test(tc, test_bad_stores);
	tcase_add_test(tc, test_show_use_cui);
	tcase_add_test(tc, test_begin_end);
	tcase_add_test(tc, test_live);
	tcase_add_test(tc, test_metrics_triggers);
	tcase_add_test(tc, test_day_runs);
	tcase_add_test(tc, test_cli);
	tcase_add_test(tc, test_axis_and_names);
	tcase_add_test(tc, test_group_name_and_merged);
	tcase_add_test(tc, test_day_header);
	suite_add_tcase(s, tc);
	/* its own case: writing and reading a big store takes minutes on a busy machine */
	tc = tcase_create("big");
	tcase_add_checked_fixture(tc, synth_setup, synth_teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, test_big_load);
	suite_add_tcase(s, tc);
	return s;
}

/* No argument: the synthetic cases. "bpf": the recorded store (77 without root/BTF). */
int main(int argc, char **argv)
{
	const char *b = getenv("CPA_BUILD_DIR");
	bool bpf = argc > 1 && !strcmp(argv[1], "bpf");

	if (system("tmux -V >/dev/null 2>&1") != 0) {
		fprintf(stderr, "tmux not installed (scripts/deps.sh): skipped\n");
		return TEST_SKIP;
	}
	if (bpf && !can_bpf()) {
		fprintf(stderr, "needs root and BTF: skipped\n");
		return TEST_SKIP;
	}
	snprintf(bin_dir, sizeof(bin_dir), "%s/bin", b ? b : "build");
	return test_run_suite(suite(bpf));
}
