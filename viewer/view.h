/* SPDX-License-Identifier: MIT */
/*
 * cpa-view's state and actions (view.c) and its drawing (draw.c). main.c
 * only parses the command line, sets up curses and runs the loop:
 *
 *   vapp__init -> loop { vapp__render; key = getch; vapp__key } -> vapp__free
 *
 * A range is aggregated by a loader thread (view.c, "Loading"): vapp__render
 * starts it and draws its progress until it is done; vapp__loading() says
 * when one runs (main.c then polls getch so the progress moves). The bench
 * drives the same functions against a terminal on /dev/null.
 */
#ifndef CPA_VIEW_H
#define CPA_VIEW_H

#include <pthread.h>
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>

#include "keymap.h"
#include "layout.h"
#include "model.h"
#include "tree.h"

/* Smallest terminal the screen is laid out for. */
#define VIEW_MIN_COLS 60
#define VIEW_MIN_ROWS 16

struct vview_opts {
	const char *store;
	const char *begin, *end; /* HH:MM:SS of the store's first day, or NULL */
	bool ascii, mono, follow;
};

/* One function of the top table. */
struct vtop_row {
	uint32_t name;
	uint64_t self, total;	  /* in B (or the only range) */
	uint64_t self_a, total_a; /* in A when diffing */
	double delta;		  /* total share B - A, diff only */
};

/* The loader thread's job and result (view.c, "Loading"). */
struct vload {
	pthread_t th;
	bool running; /* started and not yet joined (the UI thread's flag) */
	bool lent;    /* the trees of the picture before are the loader's to fill */
	atomic_bool done;
	struct vprogress pg;
	/* the job: set before the start, read-only while it runs */
	int64_t r0, r1, a0, a1;
	bool diff;
	struct vfilter f;
	uint64_t t_start; /* CLOCK_MONOTONIC ns */
	/* the result: the loader's until done */
	int r, r_a;
	struct vtree tree, tree_a;
	struct vrange_stats st, st_a;
	/* the zoom and selection paths of the picture before, kept across the load */
	uint32_t zp[520], sp[520], zn, sn;
};

struct vapp {
	struct vview_opts o;
	struct vmodel m;
	bool have_model;
	char err[512]; /* the store could not be shown: why */
	struct vfilter f;
	enum vgroup group_before_name; /* the grouping M goes back to */
	int64_t r0, r1;		       /* selected range [r0, r1), unix seconds */
	int64_t v0, v1;		       /* timeline view */
	struct vtree tree;
	struct vrange_stats st;
	bool dirty;
	double agg_ms; /* last aggregation */
	/* diff: A is the baseline, the current range is B */
	bool diff, have_a;
	int64_t a0, a1;
	struct vtree tree_a;
	struct vrange_stats st_a;
	/* flamegraph */
	uint32_t zoom;			     /* node at the top of the flamegraph */
	uint32_t zoom_run;		     /* > 0: zoomed into the merged box ("+N") of this many
						siblings from zoom */
	uint32_t zstack[32], zstack_run[32]; /* earlier zooms, for Esc (cleared on
						re-aggregation) */
	uint32_t n_zstack;
	uint32_t sel;	  /* selected node */
	uint32_t sel_run; /* > 0: the merged box of this many siblings from sel is selected */
	uint32_t top_depth;
	struct vlayout lay;
	/* search */
	regex_t re;
	bool have_re;
	char search[128];
	uint8_t *match; /* per node of tree */
	uint32_t n_match_cap;
	double match_share;
	/* top table */
	struct vtop_row *top;
	uint32_t n_top, cap_top;
	uint32_t top_sel, top_scroll;
	bool sort_self;
	/* sandwich */
	uint32_t sw_name;
	struct vtree callers, callees;
	struct vlayout lay_up, lay_down;
	/* trigger list (model's ser.trig) */
	uint32_t trig_sel, trig_scroll;
	/* screen */
	unsigned int view, prev_view; /* enum vview */
	uint32_t help_scroll;
	bool utf8, color;
	int rows, cols;
	char msg[1280];
	bool quit;
	struct vload ld;
};

int vapp__init(struct vapp *a, const struct vview_opts *o);
void vapp__free(struct vapp *a);
/* Recompute what changed and draw the screen (stdscr); no refresh. */
void vapp__render(struct vapp *a);
/* One key (curses code). Prompts read more keys through vapp_getch. */
void vapp__key(struct vapp *a, int key);
/* Select [r0, r1) (unix seconds, clamped to the store) / search pat (regex,
 * "" clears): what the keys do, for the bench and scripted use. */
void vapp__set_range(struct vapp *a, int64_t r0, int64_t r1);
void vapp__search(struct vapp *a, const char *pat);
/* Live mode tick: re-read the store, follow the end (not while loading). */
void vapp__tick(struct vapp *a);
/* A range is being loaded: its progress is on the screen, most keys wait. */
bool vapp__loading(const struct vapp *a);
/* Wait for the load running (if any) and take its picture (the bench). */
void vapp__wait(struct vapp *a);

/* "HH:MM:SS" -> seconds of the day, or -1. */
long vapp__parse_tod(const char *s);

/* draw.c */
void vdraw__init_colors(struct vapp *a);
void vdraw__screen(struct vapp *a);
/* Read a line on the bottom row; false when cancelled (Esc). */
bool vdraw__prompt(struct vapp *a, const char *label, char *buf, size_t len);

#endif /* CPA_VIEW_H */
