// SPDX-License-Identifier: MIT
/*
 * Drawing (ncursesw). The screen, top to bottom:
 *
 *   header      store, its time span, live/diff marks
 *   timeline    tl_h rows of bars: samples per second, seconds per cell to fit
 *   marks       [=====] the selected range, A the diff baseline, ! loss, ~ pressure
 *   axis        times at the left, middle and right of the timeline
 *   series      per-second metrics (CPU busy, run-queue P99, switches) under the
 *               timeline's cells, the policy triggers' windows, and their legend
 *   status      the range, its samples (on/off-CPU, lost), group, filter
 *   body        flamegraph (icicle: callers above callees), top table, sandwich, help
 *   details     the selected frame: share of range, self, total, module
 *   bottom      messages, prompts, key hints
 */
#include <curses.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/macro.h"
#include "view.h"

enum {
	P_EXE = 1,
	P_LIB,
	P_JIT,
	P_UNSYM,
	P_KERNEL,
	P_MARKER,
	P_GROUP,
	P_ROOT,
	P_MATCH,
	P_TL_ON,
	P_TL_OFF,
	P_TL_PROBE,
	P_TL_LOST,
	P_TL_UNKNOWN,
	P_GREW,
	P_SHRANK,
	P_SAME,
	P_TITLE,
	P_MARK,
	P_SER_RQ,
	P_SER_CS,
};

static const short cls_pair[VCLS_MAX] = {
	[VCLS_ROOT] = P_ROOT,	  [VCLS_EXE] = P_EXE,	  [VCLS_LIB] = P_LIB,
	[VCLS_JIT] = P_JIT,	  [VCLS_UNSYM] = P_UNSYM, [VCLS_KERNEL] = P_KERNEL,
	[VCLS_MARKER] = P_MARKER, [VCLS_GROUP] = P_GROUP,
};

/* A change of at least this share of the range is marked + / - in a diff. */
#define DIFF_MARK 0.01

void vdraw__init_colors(struct vapp *a)
{
	/* colour pair -> foreground, background (-1: the terminal's own) */
	static const struct {
		short pair, fg, bg;
	} colors[] = {
		{P_EXE, COLOR_BLACK, COLOR_YELLOW},
		{P_LIB, COLOR_BLACK, COLOR_CYAN},
		{P_JIT, COLOR_BLACK, COLOR_WHITE},
		{P_UNSYM, COLOR_BLACK, COLOR_WHITE},
		{P_KERNEL, COLOR_WHITE, COLOR_BLUE},
		{P_MARKER, COLOR_WHITE, COLOR_RED},
		{P_GROUP, COLOR_BLACK, COLOR_GREEN},
		{P_ROOT, COLOR_BLACK, COLOR_WHITE},
		{P_MATCH, COLOR_BLACK, COLOR_MAGENTA},
		{P_TL_ON, COLOR_GREEN, -1},
		{P_TL_OFF, COLOR_BLUE, -1},
		{P_TL_PROBE, COLOR_YELLOW, -1},
		{P_TL_LOST, COLOR_RED, -1},
		{P_TL_UNKNOWN, COLOR_WHITE, -1},
		{P_GREW, COLOR_WHITE, COLOR_RED},
		{P_SHRANK, COLOR_WHITE, COLOR_BLUE},
		{P_SAME, COLOR_BLACK, COLOR_WHITE},
		{P_TITLE, COLOR_BLACK, COLOR_CYAN},
		{P_MARK, COLOR_YELLOW, -1},
		{P_SER_RQ, COLOR_MAGENTA, -1},
		{P_SER_CS, COLOR_CYAN, -1},
	};

	a->color = a->color && has_colors();
	if (!a->color)
		return;
	start_color();
	use_default_colors();
	for (size_t i = 0; i < ARRAY_SIZE(colors); i++)
		init_pair(colors[i].pair, colors[i].fg, colors[i].bg);
}

static attr_t pair_attr(const struct vapp *a, short p)
{
	return a->color ? COLOR_PAIR(p) : A_NORMAL;
}

static void fmt_tod(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	snprintf(buf, len, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void fmt_span(int64_t s, char *buf, size_t len)
{
	if (s < 120)
		snprintf(buf, len, "%llds", (long long)s);
	else if (s < 7200)
		snprintf(buf, len, "%lldm%02llds", (long long)(s / 60), (long long)(s % 60));
	else
		snprintf(buf, len, "%lldh%02lldm", (long long)(s / 3600), (long long)(s / 60 % 60));
}

/* [t0, t1) as "10:00:00-10:10:00 (10m00s)"; with dates ("11-28 00:00:00 -
 * 11-29 00:00:00 (24h00m)") when it crosses midnight or spans 24 h or more. */
static void fmt_range(int64_t t0, int64_t t1, char *buf, size_t len)
{
	time_t a = (time_t)t0, b = (time_t)t1, last = (time_t)MAX(t1 - 1, t0);
	struct tm ta, tb, tl;
	char sp[32];

	localtime_r(&a, &ta);
	localtime_r(&b, &tb);
	localtime_r(&last, &tl);
	fmt_span(t1 - t0, sp, sizeof(sp));
	if (t1 - t0 < 86400 && ta.tm_yday == tl.tm_yday && ta.tm_year == tl.tm_year)
		snprintf(buf, len, "%02d:%02d:%02d-%02d:%02d:%02d (%s)", ta.tm_hour, ta.tm_min,
			 ta.tm_sec, tb.tm_hour, tb.tm_min, tb.tm_sec, sp);
	else
		snprintf(buf, len, "%02d-%02d %02d:%02d:%02d - %02d-%02d %02d:%02d:%02d (%s)",
			 ta.tm_mon + 1, ta.tm_mday, ta.tm_hour, ta.tm_min, ta.tm_sec, tb.tm_mon + 1,
			 tb.tm_mday, tb.tm_hour, tb.tm_min, tb.tm_sec, sp);
}

static double pct(uint64_t v, uint64_t total)
{
	return total ? 100.0 * (double)v / (double)total : 0;
}

/* Print s at (y, x), at most w columns, padding with spaces to w. */
static void put_cols(int y, int x, const char *s, int w)
{
	int n = (int)vlayout__cols(s);

	if (w <= 0)
		return;
	move(y, x);
	if (n <= w) {
		addstr(s);
		for (; n < w; n++)
			addch(' ');
	} else {
		/* plain text: cut at w columns (multi-byte sequences kept whole) */
		const char *p = s;
		int c = 0;

		for (; *p; p++) {
			if (((unsigned char)*p & 0xc0) != 0x80) {
				if (c == w)
					break;
				c++;
			}
		}
		addnstr(s, (int)(p - s));
	}
}

static void line_fill(int y, attr_t at, const char *s, int cols)
{
	attron(at);
	put_cols(y, 0, s, cols);
	attroff(at);
}

/* ------------------------------------------------------------ timeline */

struct tl_cell {
	uint64_t on, off, probe, lost, unknown, degraded;
};

static uint64_t cell_total(const struct tl_cell *c)
{
	return c->on + c->off + c->probe + c->lost + c->unknown;
}

static int tl_height(int rows)
{
	return rows >= 40 ? 6 : rows >= 22 ? 4 : 2;
}

/* Seconds per timeline cell and the number of cells for the view. */
static int64_t tl_geom(const struct vapp *a, int *ret_ncell)
{
	int64_t span = a->v1 - a->v0, spc = span <= a->cols ? 1 : (span + a->cols - 1) / a->cols;

	*ret_ncell = (int)MIN((int64_t)a->cols, (span + spc - 1) / spc);
	return spc;
}

static const char *const ublk[9] = {" ",      "\u2581", "\u2582", "\u2583", "\u2584",
				    "\u2585", "\u2586", "\u2587", "\u2588"};
static const char ablk[9] = {' ', '.', '.', '_', '_', 'o', 'o', '#', '#'};

static void put_level(const struct vapp *a, int y, int x, int e)
{
	e = e < 0 ? 0 : e > 8 ? 8 : e;
	if (a->utf8)
		mvaddstr(y, x, ublk[e]);
	else
		mvaddch(y, x, (chtype)ablk[e]);
}

static void draw_timeline(struct vapp *a, int y0, int h)
{
	const struct vmodel *m = &a->m;
	int cols = a->cols, i, r, ncell;
	int64_t span = a->v1 - a->v0, spc = tl_geom(a, &ncell);
	struct tl_cell *cells = calloc((size_t)MAX(ncell, 1), sizeof(*cells));
	uint64_t max = 1;
	char t0[16], t1[16], tm[16], lbl[64];

	if (!cells)
		return;
	for (i = 0; i < ncell; i++) {
		int64_t s;

		for (s = a->v0 + i * spc; s < a->v0 + (i + 1) * spc && s <= m->last_s; s++) {
			int64_t k = s - m->first_s;

			if (k < 0)
				continue;
			if (m->known[k]) {
				cells[i].on += m->exact[k].on;
				cells[i].off += m->exact[k].off;
				cells[i].probe += m->exact[k].probe;
				cells[i].lost += m->exact[k].lost;
				cells[i].degraded += m->exact[k].degraded;
			} else {
				cells[i].unknown += m->hdr[k];
			}
		}
		max = MAX(max, cell_total(&cells[i]));
	}
	for (i = 0; i < ncell; i++) {
		const struct tl_cell *c = &cells[i];
		uint64_t tot = cell_total(c);
		int level = tot ? (int)((tot * (uint64_t)h * 8 + max - 1) / max) : 0;
		bool in = a->v0 + i * spc < a->r1 && a->v0 + (i + 1) * spc > a->r0;
		short p = c->unknown >= tot / 2 && c->unknown	 ? P_TL_UNKNOWN
			  : c->off > c->on && c->off >= c->probe ? P_TL_OFF
			  : c->probe > c->on			 ? P_TL_PROBE
								 : P_TL_ON;
		attr_t at = pair_attr(a, p) | (in ? A_BOLD : A_DIM);

		attron(at);
		for (r = 0; r < h; r++)
			put_level(a, y0 + r, i, level - (h - 1 - r) * 8);
		attroff(at);
		/* marks row: the range, A, losses */
		move(y0 + h, i);
		if (c->lost) {
			attron(pair_attr(a, P_TL_LOST) | A_BOLD);
			addch('!');
			attroff(pair_attr(a, P_TL_LOST) | A_BOLD);
		} else if (c->degraded) {
			attron(pair_attr(a, P_TL_PROBE) | A_BOLD);
			addch('~');
			attroff(pair_attr(a, P_TL_PROBE) | A_BOLD);
		} else if (in) {
			bool first = a->v0 + i * spc <= a->r0,
			     last = a->v0 + (i + 1) * spc >= a->r1;

			attron(pair_attr(a, P_MARK) | A_BOLD);
			addch(first && last ? '|' : first ? '[' : last ? ']' : '=');
			attroff(pair_attr(a, P_MARK) | A_BOLD);
		} else if (a->have_a && a->v0 + i * spc < a->a1 && a->v0 + (i + 1) * spc > a->a0) {
			addch('A');
		} else {
			addch(' ');
		}
	}
	/* axis row, under the cells: the start at the first cell, the end ending
	 * under the last one, the middle under the middle; the scale between
	 * them when there is room, else after the bars */
	fmt_tod(a->v0, t0, sizeof(t0));
	fmt_tod(a->v1, t1, sizeof(t1));
	fmt_tod(a->v0 + span / 2, tm, sizeof(tm));
	snprintf(lbl, sizeof(lbl), " %llds/cell max %llu/s ", (long long)spc,
		 (unsigned long long)(max / (uint64_t)spc));
	move(y0 + h + 1, 0);
	clrtoeol();
	{
		int w = MAX(ncell, 17), n = (int)strlen(lbl);

		mvaddstr(y0 + h + 1, 0, t0);
		if (w > 40)
			mvaddstr(y0 + h + 1, w / 2 - 4, tm);
		mvaddstr(y0 + h + 1, w - 8, t1);
		if (w > 70)
			mvaddstr(y0 + h + 1, w / 4 - n / 2, lbl);
		else if (w + n <= cols)
			mvaddstr(y0 + h + 1, w, lbl);
	}
	free(cells);
}

/* ------------------------------------------------------------ series */

enum { SER_BUSY, SER_RQ, SER_CS, SER_N };

/* Rows under the axis: the SER_N series, the trigger row and the legend; only
 * the last two on a short terminal. */
static int ser_height(int rows)
{
	return rows >= 22 ? SER_N + 2 : 2;
}

static void fmt_us(double us, char *buf, size_t len)
{
	if (us >= 1000)
		snprintf(buf, len, "%.1fms", us / 1000);
	else
		snprintf(buf, len, "%.0fus", us);
}

/* Text at (y, *x) in attribute at, cut at the screen's edge; *x moves on. */
static void put_part(const struct vapp *a, int y, int *x, attr_t at, const char *s)
{
	int w = a->cols - *x, n = (int)vlayout__cols(s);

	if (w <= 0)
		return;
	attron(at);
	put_cols(y, *x, s, MIN(n, w));
	attroff(at);
	*x += MIN(n, w);
}

static void draw_series(struct vapp *a, int y0, int h)
{
	static const short pairs[SER_N] = {P_TL_ON, P_SER_RQ, P_SER_CS};
	static const char *const names[SER_N] = {"cpu busy", "runq p99", "switches"};
	const struct vseries *v = &a->m.ser;
	int ncell, i, k, x, nser = h - 2, y_trig = y0 + h - 2, y_leg = y0 + h - 1;
	int64_t spc = tl_geom(a, &ncell);
	double *val = calloc((size_t)MAX(ncell, 1) * SER_N, sizeof(*val)), max[SER_N] = {0};
	bool *have = calloc((size_t)MAX(ncell, 1), sizeof(*have)), any = false;
	attr_t trig_at = pair_attr(a, P_TL_LOST) | A_BOLD;
	char buf[512], num[32];
	size_t j, n_trig = 0;

	if (!val || !have)
		goto out;
	for (i = 0; i < ncell; i++) {
		double *c = &val[i * SER_N];
		int64_t s0 = a->v0 + i * spc;

		have[i] = vmodel__series_cell(&a->m, s0, s0 + spc, &c[SER_BUSY], &c[SER_RQ],
					      &c[SER_CS]);
		any |= have[i];
		for (k = 0; have[i] && k < SER_N; k++)
			max[k] = MAX(max[k], c[k]);
	}
	for (k = 0; k < nser; k++) {
		/* system busy is a share of every CPU: on a 0..100 scale */
		double scale = k == SER_BUSY && !v->proc ? 100 : max[k];

		if (!any) {
			snprintf(buf, sizeof(buf), "%s: not available%s", names[k],
				 v->too_long ? " (the timeline spans more than 6h: z zooms in)"
					     : " (no metrics recorded in this view)");
			line_fill(y0 + k, A_DIM, buf, a->cols);
			continue;
		}
		attron(pair_attr(a, pairs[k]));
		for (i = 0; i < ncell; i++) {
			double val_k = val[i * SER_N + k];
			int e = scale > 0 ? (int)(val_k * 8 / scale + 0.999) : 0;

			if (have[i])
				put_level(a, y0 + k, i, val_k > 0 ? MAX(e, 1) : 0);
		}
		attroff(pair_attr(a, pairs[k]));
	}
	/* trigger row: T at the start cell, - until the end */
	move(y_trig, 0);
	clrtoeol();
	for (j = 0; j < v->n_trig; j++) {
		const struct store_trigger *t = &v->trig[j];
		bool sel = a->view == VV_TRIGGERS && j == a->trig_sel;
		int64_t s0, s1, c;

		store_trigger__secs(t, &s0, &s1);
		if (s1 <= a->v0 || s0 >= a->v1)
			continue;
		n_trig++;
		attron(trig_at | (sel ? A_REVERSE : 0));
		for (c = (MAX(s0, a->v0) - a->v0) / spc;
		     c <= (MIN(s1, a->v1) - 1 - a->v0) / spc && c < ncell; c++)
			mvaddch(y_trig, (int)c, s0 >= a->v0 && c == (s0 - a->v0) / spc ? 'T' : '-');
		attroff(trig_at | (sel ? A_REVERSE : 0));
	}
	/* legend */
	move(y_leg, 0);
	clrtoeol();
	x = 0;
	if (v->proc) {
		if (v->pid >= 0)
			snprintf(buf, sizeof(buf), "pid %lld%s%s:", (long long)v->pid,
				 v->comm[0] ? " " : "", v->comm);
		else
			snprintf(buf, sizeof(buf), "%s:", v->comm);
	} else {
		snprintf(buf, sizeof(buf), "system:");
	}
	put_part(a, y_leg, &x, A_BOLD, buf);
	snprintf(buf, sizeof(buf), " triggers %zu (T) ", n_trig);
	put_part(a, y_leg, &x, n_trig ? trig_at : A_DIM, buf);
	if (any && nser) {
		put_part(a, y_leg, &x, A_NORMAL, " max: ");
		snprintf(buf, sizeof(buf), "cpu %.0f%% ", max[SER_BUSY]);
		put_part(a, y_leg, &x, pair_attr(a, P_TL_ON), buf);
		fmt_us(max[SER_RQ], num, sizeof(num));
		snprintf(buf, sizeof(buf), "rq-p99 %s ", num);
		put_part(a, y_leg, &x, pair_attr(a, P_SER_RQ), buf);
		snprintf(buf, sizeof(buf), "cs %.0f/s ", max[SER_CS]);
		put_part(a, y_leg, &x, pair_attr(a, P_SER_CS), buf);
	} else if (any) {
		put_part(a, y_leg, &x, A_DIM, "series: a taller terminal shows them ");
	} else {
		put_part(a, y_leg, &x, A_DIM, "no metrics ");
	}
	if (v->hw && v->cycles) {
		snprintf(buf, sizeof(buf), " IPC %.2f ",
			 (double)v->instructions / (double)v->cycles);
		put_part(a, y_leg, &x, A_NORMAL, buf);
	} else if (v->hw_na) {
		put_part(a, y_leg, &x, A_DIM, " IPC n/a on this host");
	}
out:
	free(val);
	free(have);
}

/* ------------------------------------------------------------ flamegraph */

static double node_share(const struct vtree *t, uint32_t n)
{
	return t->nodes[0].total ? (double)t->nodes[n].total / (double)t->nodes[0].total : 0;
}

/* Change of the node's share of its range, B (current) minus A. */
static double diff_delta(const struct vapp *a, uint32_t node)
{
	uint32_t m = vtree__match(&a->tree, node, &a->tree_a);
	double sa = m == VNODE_NONE ? 0 : node_share(&a->tree_a, m);

	return node_share(&a->tree, node) - sa;
}

static void draw_box(struct vapp *a, const struct vtree *t, const struct vbox *b, int y,
		     bool selected, bool matched, bool diff)
{
	char name[1024], label[1024];
	const struct vnode *n = &t->nodes[b->node];
	int w = (int)b->w, lw = w >= 2 ? w - 1 : w;
	attr_t at;
	const char *ell = a->utf8 ? "\u2026" : "~";

	if (w <= 0)
		return;
	if (b->n_merged)
		snprintf(name, sizeof(name), "+%u", b->n_merged);
	else
		snprintf(name, sizeof(name), "%s", strtab__str(t->names, n->name));
	if (diff && !b->n_merged) {
		double d = diff_delta(a, b->node);
		at = pair_attr(a, d >= DIFF_MARK ? P_GREW : d <= -DIFF_MARK ? P_SHRANK : P_SAME);
		if (d >= DIFF_MARK || d <= -DIFF_MARK) {
			memmove(name + 1, name, sizeof(name) - 1);
			name[sizeof(name) - 1] = '\0';
			name[0] = d > 0 ? '+' : '-';
		}
	} else if (matched) {
		at = a->color ? COLOR_PAIR(P_MATCH) : A_BOLD | A_UNDERLINE;
	} else {
		at = b->n_merged ? pair_attr(a, P_ROOT) : pair_attr(a, cls_pair[n->cls]);
	}
	if (selected)
		at |= A_REVERSE | A_BOLD;
	vlayout__label(name, (uint32_t)lw, ell, label, sizeof(label));
	attron(at);
	put_cols(y, (int)b->x, label, lw);
	attroff(at);
	if (w >= 2)
		mvaddch(y, (int)(b->x + b->w - 1), ' ');
}

/* Boxes of lay from depth top_depth on, rows h, starting at screen row y0;
 * up = true draws bottom-up (callers of a sandwich). */
static void draw_layout(struct vapp *a, const struct vtree *t, const struct vlayout *lay, int y0,
			int h, uint32_t top_depth, bool up, bool interactive)
{
	uint32_t i;

	for (i = 0; i < lay->n; i++) {
		const struct vbox *b = &lay->boxes[i];
		int row;

		if (b->depth < top_depth || b->depth >= top_depth + (uint32_t)h)
			continue;
		row = (int)(b->depth - top_depth);
		draw_box(a, t, b, up ? y0 + h - 1 - row : y0 + row,
			 interactive && b->node == a->sel && b->n_merged == a->sel_run,
			 interactive && !b->n_merged && a->have_re && b->node < a->tree.n &&
				 a->match[b->node],
			 interactive && a->diff && a->have_a);
	}
}

static void draw_flame(struct vapp *a, int y0, int h)
{
	int i;

	if (a->zoom_run)
		vlayout__build_run(&a->lay, &a->tree, a->zoom, a->zoom_run, (uint32_t)a->cols, 600,
				   3);
	else
		vlayout__build(&a->lay, &a->tree, a->zoom, (uint32_t)a->cols, 600, 3);
	i = a->sel_run ? vlayout__find_run(&a->lay, a->sel, a->sel_run)
		       : vlayout__find(&a->lay, a->sel);
	if (i < 0) {
		a->sel = a->zoom;
		a->sel_run = a->zoom_run;
		i = a->sel_run ? vlayout__find_run(&a->lay, a->sel, a->sel_run)
			       : vlayout__find(&a->lay, a->sel);
	}
	if (i >= 0)
		a->sel_run = a->lay.boxes[i].n_merged;
	if (i >= 0) {
		uint32_t d = a->lay.boxes[i].depth;

		if (d < a->top_depth)
			a->top_depth = d;
		if (d >= a->top_depth + (uint32_t)h)
			a->top_depth = d - (uint32_t)h + 1;
	}
	if (!a->tree.nodes[0].total) {
		mvaddstr(y0 + 1, 2, "no samples in this range (with these filters)");
		return;
	}
	draw_layout(a, &a->tree, &a->lay, y0, h, a->top_depth, false, true);
	if (a->top_depth)
		mvaddstr(y0, a->cols - 12, a->utf8 ? " \u2191 more \u2191 " : " ^ more ^ ");
	if (a->lay.depth > a->top_depth + (uint32_t)h)
		mvaddstr(y0 + h - 1, a->cols - 12, a->utf8 ? " \u2193 more \u2193 " : " v more v ");
}

static void draw_details(struct vapp *a, int y)
{
	const struct vtree *t = &a->tree;
	const struct vnode *n;
	char buf[1024], extra[256] = "";
	uint64_t root = t->nodes[0].total;

	if (a->view == VV_TOP || a->view == VV_SANDWICH) {
		if (a->top_sel < a->n_top) {
			const struct vtop_row *r = &a->top[a->view == VV_SANDWICH ? 0 : a->top_sel];
			uint32_t name = a->view == VV_SANDWICH ? a->sw_name : r->name;
			uint32_t k;

			for (k = 0; k < a->n_top; k++)
				if (a->top[k].name == name)
					r = &a->top[k];
			snprintf(buf, sizeof(buf), "%s  total %.1f%% (%llu)  self %.1f%% (%llu)",
				 strtab__str(&a->m.names, name), pct(r->total, root),
				 (unsigned long long)r->total, pct(r->self, root),
				 (unsigned long long)r->self);
			line_fill(y, A_BOLD, buf, a->cols);
		}
		return;
	}
	if (a->sel >= t->n)
		return;
	if (a->sel_run) {
		int i = vlayout__find_run(&a->lay, a->sel, a->sel_run);
		uint64_t v = i >= 0 ? a->lay.boxes[i].value : 0;

		snprintf(buf, sizeof(buf),
			 "+%u: %u frames too narrow to draw  total %.1f%% (%llu)  Enter shows them",
			 a->sel_run, a->sel_run, pct(v, root), (unsigned long long)v);
		line_fill(y, A_BOLD, buf, a->cols);
		return;
	}
	n = &t->nodes[a->sel];
	if (a->diff && a->have_a) {
		uint32_t m = vtree__match(t, a->sel, &a->tree_a);

		snprintf(extra, sizeof(extra), "  A %.1f%% -> B %.1f%% (%+.1f)",
			 m == VNODE_NONE ? 0 : 100 * node_share(&a->tree_a, m),
			 100 * node_share(t, a->sel), 100 * diff_delta(a, a->sel));
	} else if (n->module) {
		snprintf(extra, sizeof(extra), "  module %s", strtab__str(t->names, n->module));
	} else if (n->cls == VCLS_KERNEL) {
		snprintf(extra, sizeof(extra), "  [kernel]");
	}
	snprintf(buf, sizeof(buf), "%s  total %.1f%% (%llu)  self %.1f%% (%llu)%s",
		 vtree__name(t, a->sel), pct(n->total, root), (unsigned long long)n->total,
		 pct(n->self, root), (unsigned long long)n->self, extra);
	line_fill(y, A_BOLD, buf, a->cols);
}

/* ------------------------------------------------------------ top table, sandwich */

static void draw_top(struct vapp *a, int y0, int h)
{
	uint64_t root = a->tree.nodes[0].total, root_a = a->tree_a.nodes[0].total;
	bool diff = a->diff && a->have_a;
	char buf[1024];
	uint32_t i;
	int row;

	if (diff)
		snprintf(buf, sizeof(buf),
			 "  A TOTAL%%  B TOTAL%%    CHANGE  FUNCTION   (biggest movers first)");
	else
		snprintf(buf, sizeof(buf),
			 "  %sTOTAL%%   %sSELF%%    SAMPLES  FUNCTION   (sorted by %s; s/t)",
			 a->sort_self ? " " : "*", a->sort_self ? "*" : " ",
			 a->sort_self ? "self" : "total");
	line_fill(y0, A_BOLD | A_UNDERLINE, buf, a->cols);
	h--;
	if (a->top_sel < a->top_scroll)
		a->top_scroll = a->top_sel;
	if (a->top_sel >= a->top_scroll + (uint32_t)h)
		a->top_scroll = a->top_sel - (uint32_t)h + 1;
	for (row = 0, i = a->top_scroll; row < h && i < a->n_top; row++, i++) {
		const struct vtop_row *r = &a->top[i];
		const char *name = strtab__str(&a->m.names, r->name);
		attr_t at = i == a->top_sel ? A_REVERSE : A_NORMAL;

		if (diff)
			snprintf(buf, sizeof(buf), "  %7.2f%%  %7.2f%%  %+7.2f%%  %s%s",
				 pct(r->total_a, root_a), pct(r->total, root), 100 * r->delta,
				 r->delta >= DIFF_MARK	  ? "+"
				 : r->delta <= -DIFF_MARK ? "-"
							  : "",
				 name);
		else
			snprintf(buf, sizeof(buf), "  %6.2f%%  %6.2f%%  %9llu  %s",
				 pct(r->total, root), pct(r->self, root),
				 (unsigned long long)r->total, name);
		if (a->have_re && !regexec(&a->re, name, 0, NULL, 0) && a->color)
			at |= COLOR_PAIR(P_MATCH);
		line_fill(y0 + 1 + row, at, buf, a->cols);
	}
}

static void draw_sandwich(struct vapp *a, int y0, int h)
{
	int hu = (h - 2) / 2, hd = h - 2 - hu;
	uint32_t zu = vtree__child(&a->callers, 0, a->sw_name),
		 zd = vtree__child(&a->callees, 0, a->sw_name);
	char buf[512];
	const char *name = strtab__str(&a->m.names, a->sw_name);

	snprintf(buf, sizeof(buf), "callers of %s (above), bottom-up", name);
	line_fill(y0, A_BOLD, buf, a->cols);
	if (zu != VNODE_NONE) {
		vlayout__build(&a->lay_up, &a->callers, zu, (uint32_t)a->cols, (uint32_t)hu, 3);
		draw_layout(a, &a->callers, &a->lay_up, y0 + 1, hu, 0, true, false);
	}
	snprintf(buf, sizeof(buf), "callees of %s (below)", name);
	line_fill(y0 + 1 + hu, A_BOLD, buf, a->cols);
	if (zd != VNODE_NONE) {
		vlayout__build(&a->lay_down, &a->callees, zd, (uint32_t)a->cols, (uint32_t)hd, 3);
		draw_layout(a, &a->callees, &a->lay_down, y0 + 2 + hu, hd, 0, false, false);
	}
}

static void draw_help(struct vapp *a, int y0, int h)
{
	size_t n, i;
	const struct vkey *k = vkeymap__table(&n);
	uint32_t skip = a->help_scroll;
	int row = 0;
	char buf[512];

	line_fill(y0, A_BOLD, "cpa-view keys (j/k scroll, any other key closes)", a->cols);
	for (i = 0; i < n && row < h - 1; i++) {
		if (!k[i].name || !k[i].help)
			continue;
		if (skip) {
			skip--;
			continue;
		}
		snprintf(buf, sizeof(buf), " %-8s %s", k[i].name, k[i].help);
		put_cols(y0 + 1 + row++, 0, buf, a->cols);
	}
}

/* Word-wrapped text from row y, at most max_rows rows; returns rows used. */
static int put_wrapped(int y, int x, const char *s, int w, int max_rows)
{
	int rows = 0;

	while (*s && rows < max_rows) {
		int n = (int)strlen(s), cut = n;

		if (n > w) {
			for (cut = w; cut > w / 2 && s[cut] != ' '; cut--)
				;
			if (s[cut] != ' ')
				cut = w;
		}
		mvaddnstr(y + rows++, x, s, cut);
		s += cut;
		while (*s == ' ')
			s++;
	}
	return rows;
}

/* The trigger list: TRIG_ROWS rows a trigger (its window, then what fired, wrapped). */
#define TRIG_ROWS 2

static void draw_triggers(struct vapp *a, int y0, int h)
{
	const struct vseries *v = &a->m.ser;
	char buf[1024], desc[512], t0[16], t1[16];
	uint32_t i, per_page;
	int row;

	line_fill(y0, A_BOLD | A_UNDERLINE,
		  "policy triggers in the timeline  (j/k select, Enter: range = its window, Esc)",
		  a->cols);
	h--;
	if (!v->n_trig) {
		put_cols(y0 + 1, 2,
			 v->too_long
				 ? "the timeline spans more than 6h: z zooms in to read triggers"
				 : "no policy triggers in the timeline view (Z: the whole store)",
			 a->cols - 2);
		return;
	}
	per_page = (uint32_t)MAX(h / TRIG_ROWS, 1);
	if (a->trig_sel >= v->n_trig)
		a->trig_sel = (uint32_t)v->n_trig - 1;
	if (a->trig_sel < a->trig_scroll)
		a->trig_scroll = a->trig_sel;
	if (a->trig_sel >= a->trig_scroll + per_page)
		a->trig_scroll = a->trig_sel - per_page + 1;
	for (row = 0, i = a->trig_scroll; row + TRIG_ROWS <= h && i < v->n_trig;
	     row += TRIG_ROWS, i++) {
		const struct store_trigger *t = &v->trig[i];
		attr_t at = i == a->trig_sel ? A_REVERSE : A_NORMAL;

		fmt_tod((int64_t)(t->start_ns / 1000000000ULL), t0, sizeof(t0));
		fmt_tod((int64_t)(t->end_ns / 1000000000ULL), t1, sizeof(t1));
		store_trigger__describe(t, desc, sizeof(desc));
		snprintf(buf, sizeof(buf), "%s%s-%s%s %s", t->start_before ? "<" : "", t0, t1,
			 t->end_recorded ? "" : " (planned)", desc);
		attron(at);
		move(y0 + 1 + row, 0);
		clrtoeol();
		move(y0 + 2 + row, 0);
		clrtoeol();
		put_wrapped(y0 + 1 + row, 0, buf, a->cols, TRIG_ROWS);
		attroff(at);
	}
}

/* ------------------------------------------------------------ screen */

/* "range R  loading 37%: 8h53m of 24h00m read, 6.1 M rows": the progress line. */
static const char *load_line(const struct vapp *a, const char *rng, char *buf, size_t len)
{
	int64_t done = atomic_load_explicit(&a->ld.pg.done_s, memory_order_relaxed);
	int64_t total = atomic_load_explicit(&a->ld.pg.total_s, memory_order_relaxed);
	uint64_t rows = atomic_load_explicit(&a->ld.pg.rows, memory_order_relaxed);
	char d[32], t[32];

	if (total <= 0)
		total = MAX(a->r1 - a->r0, (int64_t)1);
	done = MIN(MAX(done, (int64_t)0), total);
	fmt_span(done, d, sizeof(d));
	fmt_span(total, t, sizeof(t));
	snprintf(buf, len, "range %s  loading %d%%: %s of %s read, %.1f M rows  (q quits)", rng,
		 (int)(100 * done / total), d, t, (double)rows / 1e6);
	return buf;
}

static void draw_header(struct vapp *a)
{
	char buf[1024], filt[256], all[96], rng[96];
	const char *dir = strrchr(a->m.dir, '/') ? strrchr(a->m.dir, '/') + 1 : a->m.dir;
	uint64_t corrupt = a->m.corrupt;
	char runs[32] = "";
	size_t o;

	vfilter__describe(&a->f, filt, sizeof(filt));
	fmt_range(a->m.first_s, a->m.last_s + 1, all, sizeof(all));
	if (a->m.n_dirs > 1)
		snprintf(runs, sizeof(runs), " (%u runs)", a->m.n_dirs);
	o = (size_t)snprintf(buf, sizeof(buf), " cpa-view  %.200s%s  %s%s%s", dir, runs, all,
			     a->o.follow ? "  [live]" : "", a->diff && a->have_a ? "  [diff]" : "");
	if (corrupt)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "  corrupt blocks skipped: %llu",
				      (unsigned long long)corrupt);
	if (a->m.n_unread) /* named on the bottom line at open, and on stderr at exit */
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "  unreadable runs: %u",
				      a->m.n_unread);
	snprintf(buf + o, sizeof(buf) - o, "  group %s%s%s%s", vgroup__name(a->f.group),
		 a->f.kernel ? "" : "  no-kernel", filt[0] ? "  " : "", filt);
	line_fill(0, pair_attr(a, P_TITLE) | (a->color ? 0 : A_REVERSE), buf, a->cols);

	fmt_range(a->r0, a->r1, rng, sizeof(rng));
	if (vapp__loading(a)) {
		line_fill(1 + tl_height(a->rows) + 2 + ser_height(a->rows), A_BOLD,
			  load_line(a, rng, buf, sizeof(buf)), a->cols);
		return;
	}
	snprintf(buf, sizeof(buf), "range %s  %llu samples: on %llu off %llu lost %llu", rng,
		 (unsigned long long)a->st.samples, (unsigned long long)a->st.on,
		 (unsigned long long)a->st.off, (unsigned long long)a->st.lost);
	if (a->st.probe) {
		o = strlen(buf);
		snprintf(buf + o, sizeof(buf) - o, " probe %llu", (unsigned long long)a->st.probe);
	}
	line_fill(1 + tl_height(a->rows) + 2 + ser_height(a->rows), A_BOLD, buf, a->cols);
}

static void draw_bottom(struct vapp *a)
{
	char buf[512];

	if (a->msg[0]) {
		line_fill(a->rows - 1, A_BOLD, a->msg, a->cols);
		return;
	}
	if (a->have_re) {
		snprintf(buf, sizeof(buf),
			 "/%s/ matches %.1f%% of the range   n/N next/prev  / clear", a->search,
			 100 * a->match_share);
		line_fill(a->rows - 1, a->color ? COLOR_PAIR(P_MATCH) : A_BOLD, buf, a->cols);
		return;
	}
	if (a->diff && a->have_a) {
		char x0[16], x1[16];

		fmt_tod(a->a0, x0, sizeof(x0));
		fmt_tod(a->a1, x1, sizeof(x1));
		snprintf(buf, sizeof(buf), "diff: A %s-%s vs B = range; +grew -shrank   D diff off",
			 x0, x1);
		line_fill(a->rows - 1, A_NORMAL, buf, a->cols);
		return;
	}
	line_fill(a->rows - 1, A_DIM,
		  "? help  [ ] - + range  g jump  Enter zoom  / search  Tab top  : filter  q quit",
		  a->cols);
}

void vdraw__screen(struct vapp *a)
{
	int tl_h, ser_h, body_y, body_h;

	getmaxyx(stdscr, a->rows, a->cols);
	erase();
	if (a->cols < VIEW_MIN_COLS || a->rows < VIEW_MIN_ROWS) {
		char buf[128];

		snprintf(buf, sizeof(buf), "terminal too small: %dx%d, cpa-view needs %dx%d",
			 a->cols, a->rows, VIEW_MIN_COLS, VIEW_MIN_ROWS);
		mvaddnstr(0, 0, buf, a->cols);
		return;
	}
	if (!a->have_model) {
		line_fill(0, A_REVERSE, " cpa-view", a->cols);
		mvaddnstr(2, 2, "Cannot show this store:", a->cols - 2);
		mvaddnstr(4 + put_wrapped(3, 2, a->err, a->cols - 4, a->rows - 6), 2,
			  a->o.follow ? "live mode: retrying every second; q quits" : "q quits",
			  a->cols - 2);
		return;
	}
	tl_h = tl_height(a->rows);
	ser_h = ser_height(a->rows);
	/* header 1, timeline tl_h, marks 1, axis 1, series ser_h, status 1 */
	draw_timeline(a, 1, tl_h);
	draw_series(a, 1 + tl_h + 2, ser_h);
	draw_header(a);
	body_y = 1 + tl_h + 2 + ser_h + 1;
	body_h = a->rows - body_y - 2;
	if (vapp__loading(a) && a->view != VV_HELP) {
		/* the picture of the range before is not shown as this one's */
		mvaddnstr(body_y + 1, 2, "loading the range: its flamegraph follows", a->cols - 4);
		mvaddnstr(body_y + 2, 2,
			  "[ ] - + g r move the range, : filters, q quits; other keys wait for it",
			  a->cols - 4);
		draw_bottom(a);
		return;
	}
	switch (a->view) {
	case VV_TOP:
		draw_top(a, body_y, body_h);
		break;
	case VV_SANDWICH:
		draw_sandwich(a, body_y, body_h);
		break;
	case VV_HELP:
		draw_help(a, 1, a->rows - 1);
		break;
	case VV_TRIGGERS:
		draw_triggers(a, body_y, body_h);
		break;
	default:
		draw_flame(a, body_y, body_h);
		break;
	}
	if (a->view != VV_HELP)
		draw_details(a, a->rows - 2);
	draw_bottom(a);
}

bool vdraw__prompt(struct vapp *a, const char *label, char *buf, size_t len)
{
	size_t n = strlen(buf);
	int ch;

	curs_set(1);
	timeout(-1);
	for (;;) {
		move(a->rows - 1, 0);
		clrtoeol();
		attron(A_BOLD);
		addnstr(label, a->cols - 1);
		attroff(A_BOLD);
		addnstr(buf, MAX(a->cols - 1 - (int)strlen(label), 0));
		refresh();
		ch = getch();
		if (ch == 27) {
			curs_set(0);
			return false;
		}
		if (ch == '\n' || ch == '\r' || ch == KEY_ENTER)
			break;
		if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
			if (n)
				buf[--n] = '\0';
		} else if (ch == 21) { /* ^U */
			n = 0;
			buf[0] = '\0';
		} else if (ch >= 32 && ch < 256 && n + 1 < len) {
			buf[n++] = (char)ch;
			buf[n] = '\0';
		}
	}
	curs_set(0);
	return true;
}
