// SPDX-License-Identifier: MIT
/*
 * cpa-view's state machine: keys -> range, zoom, selection, search, views;
 * and the recomputation a change calls for (aggregation, layout, search
 * shares, the top table, the sandwich trees). Drawing is in draw.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "view.h"

#define MAX_PATH_NAMES 520

/* ------------------------------------------------------------ time helpers */

long vapp__parse_tod(const char *s)
{
	unsigned int h, m, sec, ms;
	char extra;
	int n = sscanf(s, "%2u:%2u:%2u.%3u%c", &h, &m, &sec, &ms, &extra);

	/* HH:MM:SS, or HH:MM:SS.mmm as cpa show takes it (milliseconds ignored) */
	if (n == 3 && sscanf(s, "%2u:%2u:%2u%c", &h, &m, &sec, &extra) != 3)
		return -1;
	if ((n != 3 && n != 4) || h > 23 || m > 59 || sec > 59)
		return -1;
	return (long)h * 3600 + m * 60 + sec;
}

/* Seconds of the day tod on the first store day where it falls inside the store. */
static int64_t tod_to_time(const struct vapp *a, long tod)
{
	int64_t day = local_midnight(a->m.first_s), t;

	for (t = day + tod; t <= a->m.last_s; t += 86400)
		if (t >= a->m.first_s)
			return t;
	return day + tod;
}

/* ------------------------------------------------------------ range */

static int64_t store_end(const struct vapp *a)
{
	return a->m.last_s + 1;
}

static void view_contain_range(struct vapp *a)
{
	int64_t w = a->v1 - a->v0;

	if (a->v0 <= a->r0 && a->r1 <= a->v1)
		return;
	if (a->r1 - a->r0 > w) {
		a->v0 = a->m.first_s;
		a->v1 = store_end(a);
		return;
	}
	if (a->r0 < a->v0)
		a->v0 = a->r0;
	else
		a->v0 = a->r1 - w;
	a->v1 = a->v0 + w;
}

static void set_range(struct vapp *a, int64_t r0, int64_t r1)
{
	int64_t w = r1 - r0, lo = a->m.first_s, hi = store_end(a);

	if (w < 1)
		w = 1;
	if (w > hi - lo)
		w = hi - lo;
	if (r0 < lo)
		r0 = lo;
	if (r0 + w > hi)
		r0 = hi - w;
	if (r0 == a->r0 && r0 + w == a->r1)
		return;
	a->r0 = r0;
	a->r1 = r0 + w;
	view_contain_range(a);
	a->dirty = true;
}

/* Seconds per timeline cell for the current width. */
static int64_t tl_spc(const struct vapp *a)
{
	int64_t cells = a->cols > 0 ? a->cols : 80, span = a->v1 - a->v0;

	return span <= cells ? 1 : (span + cells - 1) / cells;
}

/* ------------------------------------------------------------ name paths */

static uint32_t path_of(const struct vtree *t, uint32_t node, uint32_t *names)
{
	uint32_t n = 0, i;

	while (node && node != VNODE_NONE && n < MAX_PATH_NAMES) {
		names[n++] = t->nodes[node].name;
		node = t->nodes[node].parent;
	}
	for (i = 0; i < n / 2; i++) {
		uint32_t x = names[i];

		names[i] = names[n - 1 - i];
		names[n - 1 - i] = x;
	}
	return n;
}

/* Deepest node along names (root first) that exists in t. */
static uint32_t find_path(const struct vtree *t, const uint32_t *names, uint32_t n)
{
	uint32_t cur = 0, i;

	for (i = 0; i < n; i++) {
		uint32_t c = vtree__child(t, cur, names[i]);

		if (c == VNODE_NONE)
			break;
		cur = c;
	}
	return cur;
}

/* ------------------------------------------------------------ search */

static void search_update(struct vapp *a)
{
	const struct vtree *t = &a->tree;
	_cleanup_free_ uint8_t *name_state = NULL; /* 0 unknown, 1 no, 2 yes */
	_cleanup_free_ uint8_t *inside = NULL;
	uint64_t sum = 0;
	uint32_t i;

	a->match_share = 0;
	if (a->n_match_cap < t->n) {
		uint8_t *nm = realloc(a->match, t->n);

		if (!nm)
			return;
		a->match = nm;
		a->n_match_cap = t->n;
	}
	memset(a->match, 0, t->n);
	if (!a->have_re)
		return;
	name_state = calloc(strtab__count(t->names) + 1, 1);
	inside = calloc(t->n, 1);
	if (!name_state || !inside)
		return;
	for (i = 1; i < t->n; i++) {
		const struct vnode *n = &t->nodes[i];

		if (!name_state[n->name])
			name_state[n->name] =
				regexec(&a->re, strtab__str(t->names, n->name), 0, NULL, 0) ? 1 : 2;
		a->match[i] = name_state[n->name] == 2;
		/* nodes are created after their parent: parents come first */
		if (a->match[i] && !inside[n->parent])
			sum += n->total;
		inside[i] = a->match[i] || inside[n->parent];
	}
	a->match_share = t->nodes[0].total ? (double)sum / (double)t->nodes[0].total : 0;
}

static void set_search(struct vapp *a, const char *pat)
{
	int r;

	if (a->have_re)
		regfree(&a->re);
	a->have_re = false;
	snprintf(a->search, sizeof(a->search), "%s", pat);
	if (pat[0]) {
		r = regcomp(&a->re, pat, REG_EXTENDED | REG_NOSUB);
		if (r) {
			char e[128];

			regerror(r, &a->re, e, sizeof(e));
			snprintf(a->msg, sizeof(a->msg), "bad regex '%s': %s", pat, e);
			a->search[0] = '\0';
		} else {
			a->have_re = true;
		}
	}
	search_update(a);
}

/* ------------------------------------------------------------ top table */

static int top_cmp_self(const void *x, const void *y)
{
	const struct vtop_row *a = x, *b = y;

	if (a->self != b->self)
		return a->self > b->self ? -1 : 1;
	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	return a->name < b->name ? -1 : a->name > b->name;
}

static int top_cmp_total(const void *x, const void *y)
{
	const struct vtop_row *a = x, *b = y;

	if (a->total != b->total)
		return a->total > b->total ? -1 : 1;
	if (a->self != b->self)
		return a->self > b->self ? -1 : 1;
	return a->name < b->name ? -1 : a->name > b->name;
}

static int top_cmp_delta(const void *x, const void *y)
{
	const struct vtop_row *a = x, *b = y;
	double da = a->delta < 0 ? -a->delta : a->delta, db = b->delta < 0 ? -b->delta : b->delta;

	if (da != db)
		return da > db ? -1 : 1;
	return a->name < b->name ? -1 : a->name > b->name;
}

/* Per name: self summed, total summed over outermost occurrences only. */
static void name_totals(const struct vtree *t, uint64_t *self, uint64_t *total)
{
	uint32_t i;

	for (i = 1; i < t->n; i++) {
		const struct vnode *n = &t->nodes[i];
		uint32_t p = n->parent;
		bool nested = false;

		self[n->name] += n->self;
		for (; p && p != VNODE_NONE; p = t->nodes[p].parent)
			if (t->nodes[p].name == n->name) {
				nested = true;
				break;
			}
		if (!nested)
			total[n->name] += n->total;
	}
}

static void top_update(struct vapp *a)
{
	uint32_t nn = strtab__count(&a->m.names) + 1, i;
	_cleanup_free_ uint64_t *s = calloc(nn, sizeof(*s)), *t = calloc(nn, sizeof(*t));
	_cleanup_free_ uint64_t *sa = NULL, *ta = NULL;
	bool diff = a->diff && a->have_a;
	double rb = (double)MAX(a->tree.nodes[0].total, 1),
	       ra = diff ? (double)MAX(a->tree_a.nodes[0].total, 1) : 1;

	a->n_top = 0;
	if (!s || !t)
		return;
	if (diff) {
		sa = calloc(nn, sizeof(*sa));
		ta = calloc(nn, sizeof(*ta));
		if (!sa || !ta)
			return;
		name_totals(&a->tree_a, sa, ta);
	}
	name_totals(&a->tree, s, t);
	if (a->cap_top < nn) {
		struct vtop_row *nt = realloc(a->top, nn * sizeof(*nt));

		if (!nt)
			return;
		a->top = nt;
		a->cap_top = nn;
	}
	for (i = 1; i < nn; i++) {
		if (!t[i] && !(diff && ta[i]))
			continue;
		a->top[a->n_top++] = (struct vtop_row){
			.name = i,
			.self = s[i],
			.total = t[i],
			.self_a = diff ? sa[i] : 0,
			.total_a = diff ? ta[i] : 0,
			.delta = diff ? (double)t[i] / rb - (double)ta[i] / ra : 0,
		};
	}
	qsort(a->top, a->n_top, sizeof(*a->top),
	      diff	     ? top_cmp_delta
	      : a->sort_self ? top_cmp_self
			     : top_cmp_total);
	if (a->top_sel >= a->n_top)
		a->top_sel = a->n_top ? a->n_top - 1 : 0;
}

/* ------------------------------------------------------------ sandwich */

static void add_callees(struct vtree *out, const struct vtree *t, uint32_t node,
			struct vpath_ent *path, uint32_t depth)
{
	const struct vnode *n = &t->nodes[node];
	uint32_t c;

	if (depth >= MAX_PATH_NAMES)
		return;
	path[depth] = (struct vpath_ent){n->name, n->module, n->cls};
	if (n->self)
		vtree__add(out, path, depth + 1, n->self);
	for (c = n->child; c != VNODE_NONE; c = t->nodes[c].next)
		add_callees(out, t, c, path, depth + 1);
}

static void sandwich_update(struct vapp *a)
{
	const struct vtree *t = &a->tree;
	struct vpath_ent *path = malloc(MAX_PATH_NAMES * sizeof(*path));
	uint32_t i;

	vtree__reset(&a->callers);
	vtree__reset(&a->callees);
	if (!path)
		return;
	for (i = 1; i < t->n; i++) {
		const struct vnode *n = &t->nodes[i];
		uint32_t p, k = 0;
		bool nested = false;

		if (n->name != a->sw_name)
			continue;
		for (p = n->parent; p && p != VNODE_NONE; p = t->nodes[p].parent)
			if (t->nodes[p].name == n->name)
				nested = true;
		if (nested)
			continue;
		add_callees(&a->callees, t, i, path, 0);
		/* callers: the function, then its parent, grandparent, ... */
		for (p = i; p && p != VNODE_NONE && k < MAX_PATH_NAMES; p = t->nodes[p].parent, k++)
			path[k] = (struct vpath_ent){t->nodes[p].name, t->nodes[p].module,
						     t->nodes[p].cls};
		vtree__add(&a->callers, path, k, n->total);
	}
	vtree__sort(&a->callers);
	vtree__sort(&a->callees);
	free(path);
}

/* ------------------------------------------------------------ loading
 *
 * A range is aggregated by one loader thread while the UI thread keeps
 * reading keys and drawing. The handoff:
 *
 *  - The UI thread fills a->ld's job (range, A range, filter), records the
 *    zoom and selection paths, and starts the thread. From then until it
 *    joins it, the loader (with the second reading thread vmodel__aggregate()
 *    may start, joined before it returns) owns the model's reader and aggregation state
 *    (a->m.r, names, stacks, the chunk cache, ld_exact) and a->ld's result
 *    (trees, stats, return codes); the UI thread touches none of them.
 *  - Meanwhile the UI thread owns the rest: range, filter, timeline (hdr,
 *    exact, known), metrics series, screen. It draws the header, timeline and
 *    a progress line from a->ld.pg (atomics), not the tree of the range
 *    before (its names are the loader's now): no stale picture is shown.
 *  - The loader ends by setting a->ld.done (release). The UI thread sees it
 *    (acquire), joins, and takes the result: trees swapped in, exact counts
 *    committed (vmodel__commit), search and tables recomputed.
 *  - A newer request sets a->ld.pg.cancel: the loader stops at the end of
 *    the store block it reads (-ECANCELED), the UI thread joins it, drops the result and starts
 *    the new load. Quitting does the same.
 */

static void *loader_main(void *arg)
{
	struct vapp *a = arg;
	struct vload *l = &a->ld;

	l->r = vmodel__aggregate(&a->m, l->r0, l->r1, &l->f, &l->tree, &l->st, &l->pg);
	l->r_a = 0;
	if (l->r >= 0 && l->diff)
		l->r_a =
			vmodel__aggregate(&a->m, l->a0, l->a1, &l->f, &l->tree_a, &l->st_a, &l->pg);
	atomic_store_explicit(&l->done, true, memory_order_release);
	return NULL;
}

bool vapp__loading(const struct vapp *a)
{
	return a->ld.running;
}

static void tree_swap(struct vtree *x, struct vtree *y)
{
	struct vtree t = *x;

	*x = *y;
	*y = t;
}

static void load_start(struct vapp *a)
{
	struct vload *l = &a->ld;

	if (!l->lent) {
		l->zn = path_of(&a->tree, a->zoom, l->zp);
		l->sn = path_of(&a->tree, a->sel, l->sp);
		/* the picture before is not drawn while loading: the loader reuses its
		 * memory (a 24-hour tree is tens of MB) */
		tree_swap(&a->tree, &l->tree);
		tree_swap(&a->tree_a, &l->tree_a);
		l->lent = true;
	}
	l->r0 = a->r0;
	l->r1 = a->r1;
	l->diff = a->diff && a->have_a;
	l->a0 = a->a0;
	l->a1 = a->a1;
	l->f = a->f;
	atomic_store(&l->done, false);
	atomic_store(&l->pg.cancel, false);
	atomic_store(&l->pg.done_s, 0);
	atomic_store(&l->pg.rows, 0);
	/* both ranges' seconds from the start, so the progress never goes back */
	atomic_store(&l->pg.total_s, 0);
	l->t_start = clock_ns(CLOCK_MONOTONIC);
	a->dirty = false;
	if (pthread_create(&l->th, NULL, loader_main, a) != 0) {
		loader_main(a); /* no thread: load here */
		l->th = pthread_self();
		l->running = true;
		return;
	}
	l->running = true;
}

/* Join the loader (cancelled first when cancel); true when it ran to the end. */
static bool load_join(struct vapp *a, bool cancel)
{
	struct vload *l = &a->ld;

	if (!l->running)
		return false;
	if (cancel)
		atomic_store(&l->pg.cancel, true);
	if (!pthread_equal(l->th, pthread_self()))
		pthread_join(l->th, NULL);
	l->running = false;
	return l->r != -ECANCELED && l->r_a != -ECANCELED;
}

/* The loader's picture on the screen (UI thread, after the join). */
static void load_take(struct vapp *a)
{
	struct vload *l = &a->ld;

	tree_swap(&a->tree, &l->tree);
	a->st = l->st;
	tree_swap(&a->tree_a, &l->tree_a);
	if (l->diff)
		a->st_a = l->st_a;
	l->lent = false;
	if (l->r < 0)
		snprintf(a->msg, sizeof(a->msg), "read failed: %s", strerror(-l->r));
	else if (l->r_a < 0)
		snprintf(a->msg, sizeof(a->msg), "read of A failed: %s", strerror(-l->r_a));
	else
		vmodel__commit(&a->m);
	a->agg_ms = (double)(clock_ns(CLOCK_MONOTONIC) - l->t_start) / 1e6;
	/* Keep the zoom and the selection where the same frames still exist. */
	a->zoom = find_path(&a->tree, l->zp, l->zn);
	if (a->zoom_run && a->zoom) /* a merged box may not survive: its caller */
		a->zoom = a->tree.nodes[a->zoom].parent;
	a->zoom_run = 0;
	a->n_zstack = 0;
	a->sel = find_path(&a->tree, l->sp, l->sn);
	a->sel_run = 0;
	search_update(a);
	if (a->view & (VV_TOP | VV_SANDWICH))
		top_update(a);
	if (a->view == VV_SANDWICH)
		sandwich_update(a);
}

/* Take the loader's picture if it is done; start a load if one is wanted
 * (a running one superseded first). true when a load was started. */
static bool load_step(struct vapp *a)
{
	if (a->ld.running && a->dirty) {
		load_join(a, true); /* superseded: its picture is of another request */
	} else if (a->ld.running && atomic_load_explicit(&a->ld.done, memory_order_acquire)) {
		if (load_join(a, false))
			load_take(a);
	}
	if (a->ld.running || !a->dirty)
		return false;
	load_start(a);
	return true;
}

void vapp__wait(struct vapp *a)
{
	if (load_join(a, false))
		load_take(a);
	if (a->dirty) {
		load_start(a);
		vapp__wait(a);
	}
}

/* ------------------------------------------------------------ init */

int vapp__init(struct vapp *a, const struct vview_opts *o)
{
	int r;

	memset(a, 0, sizeof(*a));
	a->o = *o;
	a->view = VV_FLAME;
	a->sort_self = false;
	vfilter__init(&a->f);
	r = vmodel__open(&a->m, o->store, a->err, sizeof(a->err));
	if (vtree__init(&a->tree, &a->m.names) < 0 || vtree__init(&a->tree_a, &a->m.names) < 0 ||
	    vtree__init(&a->callers, &a->m.names) < 0 ||
	    vtree__init(&a->callees, &a->m.names) < 0 ||
	    vtree__init(&a->ld.tree, &a->m.names) < 0 ||
	    vtree__init(&a->ld.tree_a, &a->m.names) < 0)
		return -ENOMEM;
	a->m.corrupt = vmodel__corrupt(&a->m);
	if (r < 0)
		return r;
	a->have_model = true;
	vmodel__unread_line(&a->m, a->msg, sizeof(a->msg));
	a->v0 = a->m.first_s;
	a->v1 = store_end(a);
	/* A short store is shown whole; a long one opens on its last 5 minutes. */
	if (a->v1 - a->v0 <= 3600) {
		a->r0 = a->v0;
		a->r1 = a->v1;
	} else {
		a->r0 = a->v1 - 300;
		a->r1 = a->v1;
	}
	if (o->begin || o->end) {
		/* --end alone: from the first record, as cpa show -E */
		long tod = o->begin ? vapp__parse_tod(o->begin) : -1;
		int64_t b = tod >= 0 ? tod_to_time(a, tod) : o->begin ? a->r0 : a->v0;
		int64_t e = b + (a->r1 - a->r0);

		if (o->end && vapp__parse_tod(o->end) >= 0)
			e = local_midnight(b) + vapp__parse_tod(o->end);
		if (e <= b)
			e = b + 60;
		a->r0 = a->r1 = 0;
		set_range(a, b, e);
	}
	a->dirty = true;
	return 0;
}

void vapp__free(struct vapp *a)
{
	load_join(a, true);
	if (a->have_re)
		regfree(&a->re);
	free(a->match);
	free(a->top);
	vlayout__free(&a->lay);
	vlayout__free(&a->lay_up);
	vlayout__free(&a->lay_down);
	vtree__free(&a->tree);
	vtree__free(&a->tree_a);
	vtree__free(&a->callers);
	vtree__free(&a->callees);
	vtree__free(&a->ld.tree);
	vtree__free(&a->ld.tree_a);
	vmodel__free(&a->m);
}

void vapp__render(struct vapp *a)
{
	if (a->have_model && load_step(a)) {
		/* a short load is waited for (100 ms), not flashed as a progress line */
		for (int i = 0; i < 50 && !atomic_load_explicit(&a->ld.done, memory_order_acquire);
		     i++)
			nanosleep(&(struct timespec){.tv_nsec = 2000000}, NULL);
		load_step(a);
	}
	if (a->have_model && !a->ld.running) {
		int r = vmodel__series(&a->m, a->v0, a->v1, &a->f);

		if (r < 0)
			snprintf(a->msg, sizeof(a->msg), "read of the metrics failed: %s",
				 strerror(-r));
	}
	vdraw__screen(a);
}

void vapp__tick(struct vapp *a)
{
	int64_t old_end = a->have_model ? store_end(a) : 0;
	bool at_end = a->have_model && a->r1 >= old_end, view_end = a->v1 >= old_end;
	uint32_t n_unread = a->m.n_unread;
	int r;

	if (a->ld.running)
		return; /* the loader owns the reader: next tick */
	if (!a->have_model) {
		r = vmodel__open(&a->m, a->o.store, a->err, sizeof(a->err));
		if (r < 0)
			return;
		a->m.corrupt = vmodel__corrupt(&a->m);
		a->have_model = true;
		a->err[0] = '\0';
		vmodel__unread_line(&a->m, a->msg, sizeof(a->msg));
		a->v0 = a->r0 = a->m.first_s;
		a->v1 = a->r1 = store_end(a);
		a->dirty = true;
		return;
	}
	r = vmodel__reload(&a->m, a->err, sizeof(a->err));
	if (r < 0) {
		a->have_model = false;
		return;
	}
	a->m.corrupt = vmodel__corrupt(&a->m);
	if (a->m.n_unread > n_unread) /* a run this user cannot read: said when it appears */
		vmodel__unread_line(&a->m, a->msg, sizeof(a->msg));
	if (store_end(a) == old_end)
		return;
	if (view_end)
		a->v1 = store_end(a);
	if (at_end) {
		int64_t w = a->r1 - a->r0;

		a->r0 = a->r1 = 0;
		set_range(a, store_end(a) - w, store_end(a));
	}
	a->dirty = true;
}

void vapp__set_range(struct vapp *a, int64_t r0, int64_t r1)
{
	if (a->have_model)
		set_range(a, r0, r1);
}

void vapp__search(struct vapp *a, const char *pat)
{
	set_search(a, pat);
}

/* ------------------------------------------------------------ flame navigation */

static int sel_box(const struct vapp *a)
{
	return a->sel_run ? vlayout__find_run(&a->lay, a->sel, a->sel_run)
			  : vlayout__find(&a->lay, a->sel);
}

static void select_box(struct vapp *a, const struct vbox *b)
{
	a->sel = b->node;
	a->sel_run = b->n_merged;
}

static void nav_lr(struct vapp *a, int dir)
{
	int i = sel_box(a), j;

	if (i < 0)
		return;
	for (j = i + dir; j >= 0 && (uint32_t)j < a->lay.n; j += dir) {
		const struct vbox *b = &a->lay.boxes[j];

		if (b->depth != a->lay.boxes[i].depth)
			return;
		select_box(a, b); /* a merged box too: Enter zooms into it */
		return;
	}
}

static void nav_down(struct vapp *a)
{
	int i = sel_box(a);
	uint32_t j, mid;
	const struct vbox *sb;
	uint32_t parent;

	if (i < 0)
		return;
	sb = &a->lay.boxes[i];
	mid = sb->x + sb->w / 2;
	/* under a merged box (the top of a zoom into one): its members */
	parent = sb->n_merged ? a->tree.nodes[sb->node].parent : sb->node;
	for (j = 0; j < a->lay.n; j++) {
		const struct vbox *b = &a->lay.boxes[j];

		if (b->depth == sb->depth + 1 && a->tree.nodes[b->node].parent == parent &&
		    mid >= b->x && mid < b->x + b->w) {
			select_box(a, b);
			return;
		}
	}
	for (j = 0; j < a->lay.n; j++) {
		const struct vbox *b = &a->lay.boxes[j];

		if (b->depth == sb->depth + 1 && a->tree.nodes[b->node].parent == parent) {
			select_box(a, b);
			return;
		}
	}
}

static void match_step(struct vapp *a, int dir)
{
	int i = sel_box(a), n = (int)a->lay.n, k;

	if (!a->have_re) {
		snprintf(a->msg, sizeof(a->msg), "no search: press / first");
		return;
	}
	for (k = 1; k <= n; k++) {
		int j = ((i < 0 ? 0 : i) + dir * k % n + n) % n;
		const struct vbox *b = &a->lay.boxes[j];

		if (!b->n_merged && b->node < a->tree.n && a->match[b->node]) {
			select_box(a, b);
			return;
		}
	}
	snprintf(a->msg, sizeof(a->msg), "no visible match for /%s/", a->search);
}

/* ------------------------------------------------------------ prompts */

static void prompt_jump(struct vapp *a)
{
	char buf[64] = "";
	long tod;

	if (!vdraw__prompt(a, "jump to (HH:MM:SS): ", buf, sizeof(buf)) || !buf[0])
		return;
	tod = vapp__parse_tod(buf);
	if (tod < 0) {
		snprintf(a->msg, sizeof(a->msg), "bad time '%s': want HH:MM:SS", buf);
		return;
	}
	set_range(a, tod_to_time(a, tod), tod_to_time(a, tod) + (a->r1 - a->r0));
}

static int64_t parse_span(const char *s)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (v <= 0)
		return -1;
	if (!*end || !strcmp(end, "s"))
		return v;
	if (!strcmp(end, "m"))
		return v * 60;
	if (!strcmp(end, "h"))
		return v * 3600;
	return -1;
}

static void prompt_range(struct vapp *a)
{
	char buf[64] = "", s1[32], s2[32];
	long t1;
	int64_t b, e;

	if (!vdraw__prompt(a, "range (HH:MM:SS HH:MM:SS | HH:MM:SS +5m): ", buf, sizeof(buf)) ||
	    !buf[0])
		return;
	if (sscanf(buf, "%31s %31s", s1, s2) != 2 || (t1 = vapp__parse_tod(s1)) < 0)
		goto bad;
	b = tod_to_time(a, t1);
	if (s2[0] == '+') {
		int64_t w = parse_span(s2 + 1);

		if (w < 0)
			goto bad;
		e = b + w;
	} else {
		long t2 = vapp__parse_tod(s2);

		if (t2 < 0)
			goto bad;
		e = local_midnight(b) + t2;
		if (e <= b)
			e += 86400;
	}
	set_range(a, b, e);
	return;
bad:
	snprintf(a->msg, sizeof(a->msg), "bad range '%s'", buf);
}

static void prompt_filter(struct vapp *a)
{
	char buf[256], err[160];

	vfilter__describe(&a->f, buf, sizeof(buf));
	if (!vdraw__prompt(a, "filter: ", buf, sizeof(buf)))
		return;
	if (vfilter__parse(&a->f, buf, err, sizeof(err)) < 0) {
		snprintf(a->msg, sizeof(a->msg), "%s", err);
		return;
	}
	a->dirty = true;
}

static void fmt_hms(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	localtime_r(&tt, &tm);
	snprintf(buf, len, "%02d%02d%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void prompt_export(struct vapp *a)
{
	char buf[512], hms[16];
	int r;

	fmt_hms(a->r0, hms, sizeof(hms));
	snprintf(buf, sizeof(buf), "cpa_view_%s_%lld.prof", hms, (long long)(a->r1 - a->r0));
	if (!vdraw__prompt(a, "export folded to: ", buf, sizeof(buf)) || !buf[0])
		return;
	r = vmodel__export(&a->m, a->r0, a->r1, &a->f, buf);
	if (r < 0)
		snprintf(a->msg, sizeof(a->msg), "export to '%.160s' failed: %s", buf,
			 strerror(-r));
	else
		snprintf(a->msg, sizeof(a->msg), "wrote %d stacks to %.200s", r, buf);
}

static void search_selected(struct vapp *a)
{
	const char *name;
	char pat[128];
	size_t o = 0;

	if (a->view == VV_TOP && a->top_sel < a->n_top)
		name = strtab__str(&a->m.names, a->top[a->top_sel].name);
	else if (a->sel && !a->sel_run)
		name = vtree__name(&a->tree, a->sel);
	else
		return;
	pat[o++] = '^';
	for (; *name && o + 3 < sizeof(pat); name++) {
		if (strchr("\\^$.|?*+()[]{}", *name))
			pat[o++] = '\\';
		pat[o++] = *name;
	}
	pat[o++] = '$';
	pat[o] = '\0';
	set_search(a, pat);
}

/* ------------------------------------------------------------ triggers */

/* The range becomes the selected trigger's window (whole seconds around it). */
static void trigger_jump(struct vapp *a)
{
	const struct store_trigger *t;
	int64_t r0, r1;

	if (a->trig_sel >= a->m.ser.n_trig)
		return;
	t = &a->m.ser.trig[a->trig_sel];
	store_trigger__secs(t, &r0, &r1);
	snprintf(a->msg, sizeof(a->msg), "range = the window of trigger %.*s pid %u",
		 (int)sizeof(t->ev.policy), t->ev.policy, t->ev.pid);
	set_range(a, r0, r1);
	a->view = VV_FLAME;
}

/* ------------------------------------------------------------ keys */

static void go_view(struct vapp *a, unsigned int v)
{
	a->view = v;
	if (v & (VV_TOP | VV_SANDWICH))
		top_update(a);
	if (v == VV_SANDWICH)
		sandwich_update(a);
}

/* Keys that work while a range loads: they need no picture (and no names). */
static bool key_while_loading(enum vact act)
{
	switch (act) {
	case VA_NONE:
	case VA_QUIT:
	case VA_HELP:
	case VA_REDRAW:
	case VA_RANGE_PREV:
	case VA_RANGE_NEXT:
	case VA_RANGE_BACK:
	case VA_RANGE_FWD:
	case VA_RANGE_WIDER:
	case VA_RANGE_NARROWER:
	case VA_RANGE_ALL:
	case VA_JUMP:
	case VA_RANGE_SET:
	case VA_TL_ZOOM_IN:
	case VA_TL_ZOOM_OUT:
	case VA_FILTER:
	case VA_GROUP:
	case VA_GROUP_NAME:
	case VA_KERNEL:
	case VA_MARK_A:
	case VA_MARK_B:
	case VA_FOLLOW:
		return true;
	default:
		return false;
	}
}

void vapp__key(struct vapp *a, int key)
{
	enum vact act;
	int64_t w = a->r1 - a->r0;
	char buf[128];

	a->msg[0] = '\0';
	if (a->view == VV_HELP) {
		if (key == 'j' || key == 0402)
			a->help_scroll++;
		else if ((key == 'k' || key == 0403) && a->help_scroll)
			a->help_scroll--;
		else if (vkeymap__lookup(VV_HELP, key) == VA_QUIT)
			a->quit = true;
		else if (vkeymap__lookup(VV_HELP, key) != VA_REDRAW)
			a->view = a->prev_view;
		return;
	}
	act = vkeymap__lookup((enum vview)a->view, key);
	if (!a->have_model && act != VA_QUIT && act != VA_HELP && act != VA_FOLLOW &&
	    act != VA_REDRAW)
		return;
	if (a->ld.running && !key_while_loading(act)) {
		snprintf(a->msg, sizeof(a->msg),
			 "loading the range: this key waits for its picture (q quits)");
		return;
	}
	switch (act) {
	case VA_NONE:
		if (key >= 32 && key < 127)
			snprintf(a->msg, sizeof(a->msg), "key '%c' does nothing here: ? for help",
				 key);
		break;
	case VA_QUIT:
		a->quit = true;
		break;
	case VA_HELP:
		a->prev_view = a->view;
		a->view = VV_HELP;
		a->help_scroll = 0;
		break;
	case VA_BACK:
		if (a->view == VV_TRIGGERS) {
			a->view = VV_FLAME;
		} else if (a->view == VV_SANDWICH) {
			a->view = VV_TOP;
		} else if (a->view == VV_TOP) {
			a->view = VV_FLAME;
		} else if (a->zoom) {
			a->sel = a->zoom;
			a->sel_run = a->zoom_run;
			if (a->n_zstack) {
				a->n_zstack--;
				a->zoom = a->zstack[a->n_zstack];
				a->zoom_run = a->zstack_run[a->n_zstack];
			} else {
				a->zoom = a->tree.nodes[a->sel].parent;
				a->zoom_run = 0;
			}
			a->top_depth = 0;
		}
		break;
	case VA_LEFT:
		nav_lr(a, -1);
		break;
	case VA_RIGHT:
		nav_lr(a, 1);
		break;
	case VA_UP:
		if (a->view == VV_TRIGGERS) {
			if (a->trig_sel)
				a->trig_sel--;
		} else if (a->view == VV_TOP) {
			if (a->top_sel)
				a->top_sel--;
		} else if (a->view == VV_FLAME &&
			   (a->sel != a->zoom || a->sel_run != a->zoom_run) && a->sel) {
			int i = sel_box(a), j;

			/* the box above the middle of this one: the caller, or the
			 * merged box this one is a member of */
			if (i >= 0 && a->lay.boxes[i].depth &&
			    (j = vlayout__at(&a->lay, a->lay.boxes[i].depth - 1,
					     a->lay.boxes[i].x + a->lay.boxes[i].w / 2)) >= 0) {
				select_box(a, &a->lay.boxes[j]);
			} else {
				a->sel = a->tree.nodes[a->sel].parent;
				a->sel_run = 0;
			}
		}
		break;
	case VA_DOWN:
		if (a->view == VV_TRIGGERS) {
			if (a->trig_sel + 1 < a->m.ser.n_trig)
				a->trig_sel++;
		} else if (a->view == VV_TOP) {
			if (a->top_sel + 1 < a->n_top)
				a->top_sel++;
		} else if (a->view == VV_FLAME) {
			nav_down(a);
		}
		break;
	case VA_ENTER:
		if (a->view == VV_TRIGGERS) {
			trigger_jump(a);
		} else if (a->view == VV_TOP) {
			if (a->top_sel < a->n_top) {
				a->sw_name = a->top[a->top_sel].name;
				go_view(a, VV_SANDWICH);
			}
		} else if (a->view == VV_FLAME &&
			   (a->sel_run > 1 || a->tree.nodes[a->sel].child != VNODE_NONE) &&
			   (a->sel != a->zoom || a->sel_run != a->zoom_run)) {
			if (a->n_zstack < ARRAY_SIZE(a->zstack)) {
				a->zstack[a->n_zstack] = a->zoom;
				a->zstack_run[a->n_zstack++] = a->zoom_run;
			}
			a->zoom = a->sel;
			a->zoom_run = a->sel_run > 1 ? a->sel_run : 0;
			a->top_depth = 0;
		}
		break;
	case VA_ZOOM_RESET:
		a->zoom = 0;
		a->zoom_run = 0;
		a->n_zstack = 0;
		a->top_depth = 0;
		break;
	case VA_RANGE_PREV:
		set_range(a, a->r0 - w, a->r1 - w);
		break;
	case VA_RANGE_NEXT:
		set_range(a, a->r0 + w, a->r1 + w);
		break;
	case VA_RANGE_BACK:
		set_range(a, a->r0 - tl_spc(a), a->r1 - tl_spc(a));
		break;
	case VA_RANGE_FWD:
		set_range(a, a->r0 + tl_spc(a), a->r1 + tl_spc(a));
		break;
	case VA_RANGE_WIDER:
		set_range(a, a->r0 - w / 2, a->r1 + (w + 1) / 2);
		break;
	case VA_RANGE_NARROWER:
		set_range(a, a->r0 + w / 4, a->r0 + w / 4 + MAX(w / 2, 1));
		break;
	case VA_RANGE_ALL:
		set_range(a, a->v0, a->v1);
		break;
	case VA_JUMP:
		prompt_jump(a);
		break;
	case VA_RANGE_SET:
		prompt_range(a);
		break;
	case VA_TL_ZOOM_IN: {
		int64_t span = MAX((a->v1 - a->v0) / 8, MAX(w * 4, (int64_t)60)), c = a->r0 + w / 2;

		a->v0 = MAX(c - span / 2, a->m.first_s);
		a->v1 = MIN(a->v0 + span, store_end(a));
		view_contain_range(a);
		break;
	}
	case VA_TL_ZOOM_OUT:
		a->v0 = a->m.first_s;
		a->v1 = store_end(a);
		break;
	case VA_SEARCH:
		snprintf(buf, sizeof(buf), "%s", a->search);
		if (vdraw__prompt(a, "search (regex): /", buf, sizeof(buf)))
			set_search(a, buf);
		break;
	case VA_SEARCH_SEL:
		search_selected(a);
		break;
	case VA_MATCH_NEXT:
		match_step(a, 1);
		break;
	case VA_MATCH_PREV:
		match_step(a, -1);
		break;
	case VA_TOP:
		go_view(a, a->view == VV_FLAME ? VV_TOP : VV_FLAME);
		break;
	case VA_SORT_SELF:
	case VA_SORT_TOTAL:
		a->sort_self = act == VA_SORT_SELF;
		a->top_sel = 0;
		top_update(a);
		break;
	case VA_FILTER:
		prompt_filter(a);
		break;
	case VA_GROUP:
		a->f.group = (enum vgroup)((a->f.group + 1) % VG_MAX);
		snprintf(a->msg, sizeof(a->msg), "group by %s", vgroup__name(a->f.group));
		a->dirty = true;
		break;
	case VA_GROUP_NAME:
		if (a->f.group == VG_NAME) {
			a->f.group = a->group_before_name;
		} else {
			a->group_before_name = a->f.group;
			a->f.group = VG_NAME;
		}
		snprintf(a->msg, sizeof(a->msg), "group by %s%s", vgroup__name(a->f.group),
			 a->f.group == VG_NAME ? ": every process merged (M: back)" : "");
		a->dirty = true;
		break;
	case VA_KERNEL:
		a->f.kernel = !a->f.kernel;
		snprintf(a->msg, sizeof(a->msg), "kernel frames %s", a->f.kernel ? "on" : "off");
		a->dirty = true;
		break;
	case VA_MARK_A:
		a->a0 = a->r0;
		a->a1 = a->r1;
		a->have_a = true;
		snprintf(a->msg, sizeof(a->msg), "range A marked: move to range B and press B");
		if (a->diff)
			a->dirty = true;
		break;
	case VA_MARK_B:
		if (!a->have_a) {
			snprintf(a->msg, sizeof(a->msg), "mark range A first (A)");
			break;
		}
		a->diff = true;
		a->dirty = true;
		break;
	case VA_DIFF_OFF:
		a->diff = false;
		if (a->view & (VV_TOP | VV_SANDWICH))
			top_update(a);
		break;
	case VA_EXPORT:
		prompt_export(a);
		break;
	case VA_FOLLOW:
		a->o.follow = !a->o.follow;
		snprintf(a->msg, sizeof(a->msg), "live mode %s", a->o.follow ? "on" : "off");
		break;
	case VA_TRIGGERS:
		if (a->view == VV_TRIGGERS) {
			a->view = VV_FLAME;
			break;
		}
		a->view = VV_TRIGGERS;
		a->trig_sel = a->trig_scroll = 0;
		break;
	case VA_REDRAW:
		break;
	}
}
