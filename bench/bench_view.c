// SPDX-License-Identifier: MIT
/*
 * bench_view: cpa-view's costs on a big store (make one with bench_view_gen).
 * Runs the viewer's own code (viewer/view.c, draw.c) against a curses
 * terminal on /dev/null, 80x24 unless told:
 *
 *   bench_view [--cols N] [--rows N] STORE
 *   bench_view --vs OTHER [--reps N] [--cols N] [--rows N] STORE
 *
 * Prints: time to the first screen (open, timeline from the index and block
 * headers, aggregate the default range, lay out, draw), re-aggregate + draw
 * of a 1-minute, 1-hour and 24-hour range (cold: the first time; warm: best
 * of 3 more, the stacks interned and the sums of closed 10-minute chunks
 * cached), with the time to the first screen of the cold 24-hour range (its
 * progress line: the range loads in the viewer's loader thread), regex search
 * over the 24-hour range, and peak RSS. Each range is timed from the request
 * to its picture drawn (vapp__render, vapp__wait, vapp__render). Goals (issue 13): first screen <=
 * 1 s, 1 minute <= 50 ms, 1 hour <= 500 ms, peak RSS <= 100 MB.
 *
 * --vs OTHER runs OTHER (another bench_view, e.g. built from an older commit)
 * and this one by turns, N times each (3), and prints each row's medians side
 * by side, A = OTHER, B = this one, with B/A of the CPU time.
 */
#include <curses.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/benchutil.h"

#include "common/timeutil.h"
#include "viewer/view.h"

static double ms_since(uint64_t t0)
{
	return (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e6;
}

/* CPU time of the last frame(): on a loaded machine, wall time is mostly waiting. */
static double last_cpu_ms;
/* Wall time of the last frame()'s first screen: the picture, or the progress
 * line of a load that takes longer than the 100 ms waited for. */
static double last_first_ms;

static double frame(struct vapp *a)
{
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);

	vapp__render(a); /* starts the load; its progress line */
	refresh();
	last_first_ms = ms_since(t0);
	vapp__wait(a);
	vapp__render(a); /* the picture */
	refresh();
	last_cpu_ms = (double)(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / 1e6;
	return ms_since(t0);
}

static void row(const char *what, double ms, const char *goal, const struct vapp *a)
{
	printf("%-34s %10.1f ms %8.1f cpu  %-8s rows %-9llu nodes %u\n", what, ms, last_cpu_ms,
	       goal, (unsigned long long)a->st.rows, a->tree.n);
}

/* ---- --vs: two binaries by turns, their rows' medians side by side */

#define VS_ROWS 16
#define VS_REPS 15

struct vs_row {
	char what[40];
	double ms[2][VS_REPS], cpu[2][VS_REPS];
	bool has_cpu;
};

/* Run bin on the store, its rows' figures into rows[] as side k, rep i. */
static int vs_run(const char *bin, char *const args[], int k, int i, struct vs_row *rows,
		  int *n_rows)
{
	char line[512];
	int fd[2], status, n;
	pid_t pid;
	FILE *in;

	if (pipe(fd) < 0)
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		dup2(fd[1], STDOUT_FILENO);
		close(fd[0]);
		close(fd[1]);
		execv(bin, args);
		_exit(127);
	}
	close(fd[1]);
	in = fdopen(fd[0], "r");
	while (in && fgets(line, sizeof(line), in)) {
		char what[40];
		double ms = 0, cpu = -1;

		if (strlen(line) < 36 || !strstr(line + 34, " ms"))
			continue; /* the rows timed, not the header or the RSS */
		snprintf(what, sizeof(what), "%.34s", line);
		for (n = (int)strlen(what); n > 0 && what[n - 1] == ' '; n--)
			what[n - 1] = '\0';
		if (sscanf(line + 34, "%lf ms %lf cpu", &ms, &cpu) < 1)
			continue;
		for (n = 0; n < *n_rows && strcmp(rows[n].what, what); n++)
			;
		if (n == *n_rows) {
			if (n == VS_ROWS)
				continue;
			snprintf(rows[n].what, sizeof(rows[n].what), "%s", what);
			(*n_rows)++;
		}
		rows[n].ms[k][i] = ms;
		rows[n].cpu[k][i] = cpu;
		rows[n].has_cpu = cpu >= 0;
	}
	if (in)
		fclose(in);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return -1;
	return 0;
}

static int vs_main(const char *other, int reps, const char *cols, const char *rows_s,
		   const char *store)
{
	static struct vs_row rows[VS_ROWS];
	char self[4096];
	char *args[] = {NULL,		"--cols",      (char *)cols, "--rows",
			(char *)rows_s, (char *)store, NULL};
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int n_rows = 0;

	if (len <= 0)
		return 1;
	self[len] = '\0';
	for (int i = 0; i < reps; i++)
		for (int k = 0; k < 2; k++) {
			const char *bin = k ? self : other;

			args[0] = (char *)bin;
			if (vs_run(bin, args, k, i, rows, &n_rows) < 0) {
				bench_say("%s failed", bin);
				return 1;
			}
		}
	printf("%d runs each, by turns, medians: A %s, B %s\n\n", reps, other, self);
	printf("%-34s %18s %18s %7s\n", "measure", "A ms (cpu)", "B ms (cpu)", "B/A cpu");
	for (int n = 0; n < n_rows; n++) {
		double ms[2], cpu[2];
		char a[32], b[32];

		for (int k = 0; k < 2; k++) {
			ms[k] = bench_median(rows[n].ms[k], (size_t)reps);
			cpu[k] = rows[n].has_cpu ? bench_median(rows[n].cpu[k], (size_t)reps) : 0;
		}
		if (rows[n].has_cpu && cpu[0] > 0) {
			snprintf(a, sizeof(a), "%.1f (%.1f)", ms[0], cpu[0]);
			snprintf(b, sizeof(b), "%.1f (%.1f)", ms[1], cpu[1]);
			printf("%-34s %18s %18s %7.2f\n", rows[n].what, a, b, cpu[1] / cpu[0]);
		} else {
			snprintf(a, sizeof(a), "%.1f", ms[0]);
			snprintf(b, sizeof(b), "%.1f", ms[1]);
			printf("%-34s %18s %18s\n", rows[n].what, a, b);
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"cols", required_argument, NULL, 'c'},
					   {"rows", required_argument, NULL, 'r'},
					   {"vs", required_argument, NULL, 'v'},
					   {"reps", required_argument, NULL, 'n'},
					   {NULL, 0, NULL, 0}};
	struct vview_opts o = {0};
	uint64_t c_start = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	struct vapp *a = calloc(1, sizeof(*a));
	char num[16];
	const char *cols = "80", *rows = "24", *vs = NULL;
	int reps = 3;
	FILE *devnull;
	SCREEN *scr;
	struct rusage ru;
	uint64_t t0;
	int64_t mid;
	int c, i;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (c == 'c')
			cols = optarg;
		else if (c == 'r')
			rows = optarg;
		else if (c == 'v')
			vs = optarg;
		else if (c == 'n')
			reps = atoi(optarg);
		else
			return 2;
	}
	if (optind != argc - 1 || !a || reps < 1 || reps > VS_REPS) {
		fprintf(stderr, "usage: bench_view [--vs OTHER [--reps N]] [--cols N] [--rows N] "
				"STORE\n");
		return 2;
	}
	if (vs) {
		free(a);
		return vs_main(vs, reps, cols, rows, argv[optind]);
	}
	o.store = argv[optind];
	setenv("COLUMNS", cols, 1);
	setenv("LINES", rows, 1);
	devnull = fopen("/dev/null", "w");
	t0 = clock_ns(CLOCK_MONOTONIC);
	if (vapp__init(a, &o) < 0) {
		fprintf(stderr, "bench_view: %s\n", a->err);
		return 1;
	}
	scr = newterm("xterm-256color", devnull, stdin);
	if (!scr)
		return 1;
	a->utf8 = true;
	a->color = true;
	vdraw__init_colors(a);
	frame(a);
	last_cpu_ms = (double)(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c_start) / 1e6;
	printf("store %s: %lld s (%s x %s terminal)\n\n", a->m.dir,
	       (long long)(a->m.last_s - a->m.first_s + 1), cols, rows);
	row("first screen (last 5 min)", ms_since(t0), "<= 1000", a);

	mid = a->m.first_s + (a->m.last_s - a->m.first_s) / 2;
	{
		/* cold: the first time each range is read; warm: best of 3 more
		 * (stacks interned, the segment's dictionary loaded again by the reader) */
		static const struct {
			const char *name, *goal;
			int64_t len; /* 0: the whole store */
		} rg[] = {{"1-minute range", "<= 50", 60},
			  {"1-hour range", "<= 500", 3600},
			  {"24-hour range", "", 0}};
		double best[3] = {1e18, 1e18, 1e18}, best_cpu[3] = {1e18, 1e18, 1e18};
		char what[64];
		size_t k;

		for (i = 0; i < 4; i++) {
			for (k = 0; k < 3; k++) {
				double ms;

				if (rg[k].len)
					vapp__set_range(a, mid, mid + rg[k].len);
				else
					vapp__set_range(a, a->m.first_s, a->m.last_s + 1);
				ms = frame(a);
				if (!i) {
					snprintf(what, sizeof(what), "%s (cold)", rg[k].name);
					row(what, ms, rg[k].goal, a);
					if (!rg[k].len)
						printf("%-34s %10.1f ms\n",
						       "  its first screen (progress)",
						       last_first_ms);
				} else {
					best[k] = ms < best[k] ? ms : best[k];
					best_cpu[k] = last_cpu_ms < best_cpu[k] ? last_cpu_ms
										: best_cpu[k];
				}
			}
		}
		for (k = 0; k < 3; k++) {
			snprintf(what, sizeof(what), "%s (warm, best of 3)", rg[k].name);
			printf("%-34s %10.1f ms %8.1f cpu  %-8s\n", what, best[k], best_cpu[k],
			       rg[k].goal);
		}
	}
	t0 = clock_ns(CLOCK_MONOTONIC);
	vapp__search(a, "handle_event_1[0-9]+\\(");
	frame(a);
	last_cpu_ms = 0; /* (the search ran before frame(): wall time only) */
	snprintf(num, sizeof(num), "%.1f%%", 100 * a->match_share);
	row("regex search over 24 h", ms_since(t0), num, a);
	/* one cell step of the timeline over 24 h: what [ ] cost when moved */
	vapp__set_range(a, mid, mid + 60);
	frame(a);
	t0 = clock_ns(CLOCK_MONOTONIC);
	for (i = 0; i < 10; i++) {
		vapp__set_range(a, mid + 60 * (i + 1), mid + 60 * (i + 2));
		frame(a);
	}
	row("step a 1-minute range (mean of 10)", ms_since(t0) / 10, "", a);
	endwin();
	delscreen(scr);
	getrusage(RUSAGE_SELF, &ru);
	printf("%-34s %10.1f MB %8s      %-8s\n", "peak RSS", (double)ru.ru_maxrss / 1024, "",
	       "<= 100");
	vapp__free(a);
	free(a);
	fclose(devnull);
	return 0;
}
