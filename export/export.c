// SPDX-License-Identifier: MIT
/*
 * The export interface (export.h) and what the formats share: the u32
 * vector, the name tree, format names and suffixes. Formats: export_pprof.c,
 * export_svg.c, export_speedscope.c, export_folded.c. docs/export.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/macro.h"
#include "common/safepath.h"
#include "common/timeutil.h"
#include "export_int.h"

/* ---------------------------------------------------------------- u32vec */

int u32vec__push(struct u32vec *a, uint32_t x)
{
	if (array_grow((void **)&a->v, &a->cap, a->n + 1, sizeof(*a->v)) < 0)
		return -ENOMEM;
	a->v[a->n++] = x;
	return 0;
}

void u32vec__free(struct u32vec *a)
{
	free(a->v);
	memset(a, 0, sizeof(*a));
}

/* ---------------------------------------------------------------- tree */

int tree__init(struct tree *t)
{
	memset(t, 0, sizeof(*t));
	t->cap = 1024;
	t->nodes = calloc(t->cap, sizeof(*t->nodes));
	if (!t->nodes)
		return -ENOMEM;
	t->n = 1; /* the root, name "" */
	return xtab__intern_str(&t->names, "all", &t->nodes[0].name) < 0 ? -ENOMEM : 0;
}

void tree__free(struct tree *t)
{
	xtab__free(&t->names);
	xtab__free(&t->edges);
	xtab__free(&t->runs);
	xtab__free(&t->stacks);
	xtab__free(&t->paths);
	u32vec__free(&t->path_node);
	u32vec__free(&t->stack_run);
	u32vec__free(&t->frames);
	free(t->nodes);
	memset(t, 0, sizeof(*t));
}

/* The name as the folded export prints it: ';' and newlines would split a line. */
static int intern_name(struct tree *t, const char *s, const char *suffix, uint32_t *ret)
{
	char buf[4096];
	size_t n = strnlen(s, sizeof(buf) - 8), c = strcspn(s, ";\n\r");

	/* most names need no change: interned as they are */
	if (!suffix && c >= n && !s[n])
		return xtab__intern(&t->names, s, (uint32_t)n + 1, ret) < 0 ? -ENOMEM : 0;
	memcpy(buf, s, n);
	for (; c < n; c++)
		buf[c] = buf[c] == ';' ? ':' : (buf[c] == '\n' || buf[c] == '\r') ? ' ' : buf[c];
	if (suffix)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s", suffix);
	buf[n] = 0;
	return xtab__intern(&t->names, buf, (uint32_t)n + 1, ret) < 0 ? -ENOMEM : 0;
}

static int child(struct tree *t, uint32_t parent, uint32_t name, uint32_t flags, uint32_t *ret)
{
	uint32_t key[2] = {parent, name}, id;
	int r = xtab__intern(&t->edges, key, sizeof(key), &id);

	if (r < 0)
		return r;
	id++; /* node 0 is the root */
	if (r == 1) {
		r = array_grow32((void **)&t->nodes, &t->cap, (size_t)t->n + 1, sizeof(*t->nodes));
		if (r < 0)
			return r;
		t->nodes[id] = (struct tnode){.parent = parent,
					      .name = name,
					      .flags = flags,
					      .depth = t->nodes[parent].depth + 1};
		t->n++;
		if (t->nodes[id].depth > t->max_depth)
			t->max_depth = t->nodes[id].depth;
	}
	*ret = id;
	return 0;
}

/* Frame names of a stack, root first, as a run (export_int.h), cached per
 * (src, seg, stack_id); *ret_run is the run's id, UINT32_MAX when not kept. */
static int stack_frames(struct tree *t, uint32_t src, const struct store_sample *s,
			const uint32_t **ret, uint32_t *ret_run)
{
	uint32_t key[3] = {src, s->seg, s->stack_id}, id, i, name, run;
	bool cache = s->n_frames > 1; /* a lone frame may stand for an undefined id */
	int r;

	*ret_run = UINT32_MAX;
	if (cache) {
		r = xtab__intern(&t->stacks, key, sizeof(key), &id);
		if (r < 0)
			return r;
		if (r == 0) {
			*ret_run = t->stack_run.v[id];
			*ret = xtab__get(&t->runs, *ret_run, NULL);
			return 0;
		}
	}
	t->frames.n = 0;
	if (u32vec__push(&t->frames, s->n_frames) < 0)
		return -ENOMEM;
	/* Stored leaf first, kernel frames first: user root..leaf, then kernel root..leaf. */
	for (i = s->n_frames; i-- > 0;) {
		const struct store_frame *f = s->frames[i];
		bool k = i < s->n_kframes;
		uint32_t fl = (k ? TN_KERNEL : 0) | ((f->flags & CPA_FF_MARKER) ? TN_MARKER : 0);

		r = intern_name(t, f->name, k && !(f->flags & CPA_FF_MARKER) ? "_[k]" : NULL,
				&name);
		if (r < 0 || u32vec__push(&t->frames, name) < 0 || u32vec__push(&t->frames, fl) < 0)
			return -ENOMEM;
	}
	*ret = t->frames.v; /* valid until the next call */
	if (!cache)
		return 0;
	r = xtab__intern(&t->runs, t->frames.v, (uint32_t)(t->frames.n * sizeof(uint32_t)), &run);
	if (r < 0 || u32vec__push(&t->stack_run, run) < 0)
		return -ENOMEM;
	*ret_run = run;
	return 0;
}

int tree__path(struct tree *t, const struct export_opts *o, uint32_t src,
	       const struct store_sample *s, uint32_t *ret_node)
{
	const uint32_t *fr;
	uint32_t node = 0, name, i, n, run;
	char tmp[64];
	int r;

	if (!o->no_env) {
		r = intern_name(t, s->env[0] ? s->env : "SYSTEM", NULL, &name);
		if (r < 0 || (r = child(t, node, name, TN_LABEL, &node)) < 0)
			return r;
	}
	if (s->lost) {
		r = intern_name(t, "[lost]", NULL, &name);
		if (r < 0 || (r = child(t, node, name, TN_LABEL, &node)) < 0)
			return r;
	} else {
		const char *pc = store_sample__proc_name(s);

		if (o->no_pid) {
			r = intern_name(t, pc, NULL, &name);
		} else {
			snprintf(tmp, sizeof(tmp), ":%u", s->pid);
			r = intern_name(t, pc, tmp, &name);
		}
		if (r < 0 || (r = child(t, node, name, TN_LABEL, &node)) < 0)
			return r;
		if (o->show_thread_name) {
			r = intern_name(t, s->comm[0] ? s->comm : pc, NULL, &name);
			if (r < 0 || (r = child(t, node, name, TN_LABEL, &node)) < 0)
				return r;
		}
	}
	r = stack_frames(t, src, s, &fr, &run);
	if (r < 0)
		return r;
	/* The same frames under the same labels end at the same node: look it up
	 * once instead of walking the frames for every row and every segment. */
	if (run != UINT32_MAX) {
		uint32_t key[2] = {node, run}, pid_;

		r = xtab__intern(&t->paths, key, sizeof(key), &pid_);
		if (r < 0)
			return r;
		if (r == 0) {
			node = t->path_node.v[pid_];
			goto found;
		}
		if (u32vec__push(&t->path_node, 0) < 0)
			return -ENOMEM;
	}
	n = fr[0];
	for (i = 0; i < n; i++) {
		r = child(t, node, fr[1 + 2 * i], fr[2 + 2 * i], &node);
		if (r < 0)
			return r;
	}
	if (run != UINT32_MAX)
		t->path_node.v[t->path_node.n - 1] = node;
found:
	*ret_node = node;
	return 0;
}

static void tree_value(struct tree *t, uint32_t node, uint32_t kind, uint64_t count,
		       uint64_t weight, int side)
{
	if (kind == CPA_KIND_OFFCPU)
		t->nodes[node].self[side].off += weight;
	else
		t->nodes[node].self[side].on += count;
}

int tree__add(struct tree *t, const struct export_opts *o, uint32_t src,
	      const struct store_sample *s, int side)
{
	uint32_t node;
	int r = tree__path(t, o, src, s, &node);

	if (r < 0)
		return r;
	tree_value(t, node, s->kind, s->count, s->weight, side);
	return 0;
}

static const struct tree *sort_tree;

static int child_cmp(const void *a, const void *b)
{
	return strcmp(tree__name(sort_tree, *(const uint32_t *)a),
		      tree__name(sort_tree, *(const uint32_t *)b));
}

int tree__link(struct tree *t)
{
	_cleanup_free_ uint32_t *cnt = calloc(t->n + 1, sizeof(uint32_t));
	_cleanup_free_ uint32_t *ord = malloc((size_t)t->n * sizeof(uint32_t));
	uint32_t i, j;

	if (!cnt || !ord)
		return -ENOMEM;
	/* Bucket the nodes by parent, sort each bucket by name, chain it. */
	for (i = 1; i < t->n; i++)
		cnt[t->nodes[i].parent + 1]++;
	for (i = 1; i <= t->n; i++)
		cnt[i] += cnt[i - 1];
	for (i = 1; i < t->n; i++)
		ord[cnt[t->nodes[i].parent]++] = i;
	/* cnt[p] is now the end of p's bucket; its start is the end of p - 1's. */
	sort_tree = t;
	for (i = 0; i < t->n; i++) {
		uint32_t b = i ? cnt[i - 1] : 0, e = cnt[i];

		t->nodes[i].first_child = 0;
		if (e <= b)
			continue;
		qsort(ord + b, e - b, sizeof(*ord), child_cmp);
		t->nodes[i].first_child = ord[b];
		for (j = b; j < e; j++)
			t->nodes[ord[j]].next_sibling = j + 1 < e ? ord[j + 1] : 0;
	}
	sort_tree = NULL;
	return 0;
}

/* ---------------------------------------------------------------- interface */

static const struct {
	const char *name, *suffix;
} formats[EXPORT_FORMAT_MAX] = {
	[EXPORT_FOLDED] = {"folded", ".prof"},
	[EXPORT_PPROF] = {"pprof", ".pb.gz"},
	[EXPORT_SVG] = {"svg", ".svg"},
	[EXPORT_SPEEDSCOPE] = {"speedscope", ".speedscope.json"},
};

int export__parse_format(const char *s, enum export_format *ret)
{
	unsigned int i;

	for (i = 0; i < EXPORT_FORMAT_MAX; i++) {
		if (!strcmp(s, formats[i].name)) {
			*ret = (enum export_format)i;
			return 0;
		}
	}
	return -EINVAL;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

int export__format_of_path(const char *path, enum export_format *ret)
{
	unsigned int i;

	for (i = 0; i < EXPORT_FORMAT_MAX; i++) {
		if (ends_with(path, formats[i].suffix)) {
			*ret = (enum export_format)i;
			return 0;
		}
	}
	return -ENOENT;
}

const char *export__suffix(enum export_format f)
{
	return f < EXPORT_FORMAT_MAX ? formats[f].suffix : "";
}

const char *export__format_name(enum export_format f)
{
	return f < EXPORT_FORMAT_MAX ? formats[f].name : "?";
}

const char *export__kind_name(unsigned int k)
{
	static const char *const names[] = {"oncpu", "offcpu", "probe"};

	return k < ARRAY_SIZE(names) ? names[k] : "?";
}

int export__fail(struct exporter *e, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->err, sizeof(e->err), fmt, ap);
	va_end(ap);
	return err;
}

int export__new(enum export_format f, const struct export_opts *o, struct exporter **ret)
{
	struct exporter *e;
	int r;

	if (f >= EXPORT_FORMAT_MAX)
		return -EINVAL;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->fmt = f;
	e->o = *o;
	e->st.min_sec = INT64_MAX;
	e->st.max_sec = INT64_MIN;
	r = f == EXPORT_PPROF ? export_pprof__new(e) : tree__init(&e->tree);
	if (r < 0) {
		export__free(e);
		return r;
	}
	*ret = e;
	return 0;
}

void export__free(struct exporter *e)
{
	if (!e)
		return;
	if (e->fmt == EXPORT_PPROF)
		export_pprof__free(e);
	tree__free(&e->tree);
	rowmap__free(&e->rows);
	free(e);
}

void export__new_source(struct exporter *e)
{
	e->src++;
}

int export__add_trigger(struct exporter *e, const struct store_trigger *t)
{
	if (e->n_trig == EXPORT_TRIGGERS_MAX)
		return export__fail(e, -E2BIG, "more than %d policy triggers in the range",
				    EXPORT_TRIGGERS_MAX);
	e->trig[e->n_trig++] = *t;
	return 0;
}

int export__trigger_of(const struct exporter *e, const struct store_sample *s)
{
	return export__trigger_at(e, s->sec, s->lost, s->pid);
}

int export__trigger_at(const struct exporter *e, int64_t sec, bool lost, uint32_t pid)
{
	for (uint32_t i = 0; i < e->n_trig; i++) {
		const struct store_trigger *t = &e->trig[i];
		int64_t s0, s1;

		store_trigger__secs(t, &s0, &s1);
		if (sec >= s0 && sec < s1 && !lost && (!t->ev.pid || t->ev.pid == pid))
			return (int)i;
	}
	return -1;
}

static void fmt_tod(int64_t sec, char *buf, size_t len)
{
	time_t tt = (time_t)sec;
	struct tm tm;

	localtime_r(&tt, &tm);
	snprintf(buf, len, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void export__trigger_text(const struct store_trigger *t, char *buf, size_t len)
{
	char a[16], b[16];
	int64_t s0, s1;
	size_t o;

	store_trigger__secs(t, &s0, &s1);
	fmt_tod(s0, a, sizeof(a));
	fmt_tod(s1, b, sizeof(b));
	o = (size_t)snprintf(buf, len, "%s-%s ", a, b);
	if (o < len)
		store_trigger__describe(t, buf + o, len - o);
}

/* Speedscope: a row inside a trigger's window also goes below a label of its
 * own, "[trigger HH:MM:SS-HH:MM:SS policy P pid N]", so that it becomes a
 * profile of its own named after the window. */
static int add_trigger_copy(struct exporter *e, const struct store_sample *s, int side)
{
	int i = export__trigger_of(e, s);
	struct export_opts o = e->o;
	struct store_sample c = *s;
	char lbl[128], a[16], b[16];
	int64_t s0, s1;

	if (i < 0)
		return 0;
	store_trigger__secs(&e->trig[i], &s0, &s1);
	fmt_tod(s0, a, sizeof(a));
	fmt_tod(s1, b, sizeof(b));
	snprintf(lbl, sizeof(lbl), "[trigger %s-%s policy %.*s pid %u]", a, b,
		 (int)sizeof(e->trig[i].ev.policy), e->trig[i].ev.policy, e->trig[i].ev.pid);
	c.env = lbl;
	o.no_env = false;
	return tree__add(&e->tree, &o, e->src, &c, side);
}

static void count_row(struct exporter *e, int64_t sec, int side)
{
	e->st.rows[side]++;
	if (!side) {
		if (sec < e->st.min_sec)
			e->st.min_sec = sec;
		if (sec > e->st.max_sec)
			e->st.max_sec = sec;
	} else {
		e->have_base = true;
	}
}

/* A row past count_row(), as a sample. */
static int add_sample(struct exporter *e, const struct store_sample *s, int side)
{
	if (e->fmt == EXPORT_PPROF)
		return export_pprof__add(e, s, side);
	if (e->fmt == EXPORT_SPEEDSCOPE && e->n_trig && !side) {
		int r = add_trigger_copy(e, s, side);

		if (r < 0)
			return r;
	}
	return tree__add(&e->tree, &e->o, e->src, s, side);
}

/* The row's kind is one the options take. */
static bool kind_taken(const struct exporter *e, uint32_t kind)
{
	return e->o.kinds == EXPORT_KINDS_ALL ||
	       (e->o.kinds == EXPORT_KINDS_OFF) == (kind == CPA_KIND_OFFCPU);
}

static int add(struct exporter *e, const struct store_sample *s, int side)
{
	if (!kind_taken(e, s->kind))
		return 0;
	count_row(e, s->sec, side);
	return add_sample(e, s, side);
}

int export__add(void *ctx, const struct store_sample *s)
{
	return add(ctx, s, 0);
}

int export__add_base(void *ctx, const struct store_sample *s)
{
	return add(ctx, s, 1);
}

/*
 * One block's rows: a row whose key was seen before ends at that key's node;
 * a new key is resolved once (store_rows__sample()). Speedscope's trigger
 * copies look at every row's second: with triggers it takes the rows one by
 * one. pprof keeps its own cache (export_pprof__add_row()).
 */
static int add_rows(struct exporter *e, const struct store_rows *b, int side)
{
	bool each = e->fmt == EXPORT_SPEEDSCOPE && e->n_trig && !side;
	const struct rowmap *rm = e->fmt == EXPORT_PPROF ? export_pprof__rows(e) : &e->rows;
	struct store_sample s;
	int r;

	for (size_t i = 0; i < b->n; i++) {
		const struct store_row *d = &b->rows[i];
		/* what of a row its place in the tree is made of (tree__path() reads no more) */
		struct rowmap_key k = {{d->comm, d->pcomm, d->env, e->o.no_pid ? 0 : d->pid}};
		uint32_t node;

		if (i + ROWMAP_AHEAD < b->n)
			rowmap__prefetch(rm, b->rows[i + ROWMAP_AHEAD].stack_id);
		if (!kind_taken(e, d->kind))
			continue;
		count_row(e, d->sec, side);
		if (e->fmt == EXPORT_PPROF) {
			if (i + ROWMAP_AHEAD / 2 < b->n)
				export_pprof__prefetch_row(e, b, i + ROWMAP_AHEAD / 2, side);
			r = export_pprof__add_row(e, b, i, side);
			if (r < 0)
				return r;
			continue;
		}
		if (!each && rowmap__find(&e->rows, e->src, b->seg, d->stack_id, &k, &node)) {
			tree_value(&e->tree, node, d->kind, d->count, d->weight, side);
			continue;
		}
		store_rows__sample(b, i, &s);
		if (each) {
			r = add_sample(e, &s, side);
			if (r < 0)
				return r;
			continue;
		}
		r = tree__path(&e->tree, &e->o, e->src, &s, &node);
		if (r < 0)
			return r;
		tree_value(&e->tree, node, d->kind, d->count, d->weight, side);
		/* a lone frame may stand for an undefined id: not kept (as tree.paths) */
		if (s.n_frames > 1 &&
		    rowmap__put(&e->rows, e->src, b->seg, d->stack_id, &k, node) < 0)
			return -ENOMEM;
	}
	return 0;
}

uint32_t export__rows_skip(const struct exporter *e)
{
	/* pprof labels and speedscope's trigger copies take every field; the
	 * tree takes the row's kind, second, names, pid, stack, count and weight */
	if (e->fmt == EXPORT_PPROF || (e->fmt == EXPORT_SPEEDSCOPE && e->n_trig))
		return 0;
	return STORE_COL_TID | STORE_COL_CPU | STORE_COL_CGROUP;
}

int export__add_rows(void *ctx, const struct store_rows *b)
{
	return add_rows(ctx, b, 0);
}

int export__add_base_rows(void *ctx, const struct store_rows *b)
{
	return add_rows(ctx, b, 1);
}

size_t export__utf8_len(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	unsigned int c = p[0], n, i, cp;

	if (c < 0x80)
		return c ? 1 : 0;
	if (c >= 0xc2 && c <= 0xdf)
		n = 1, cp = c & 0x1f;
	else if ((c & 0xf0) == 0xe0)
		n = 2, cp = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 3, cp = c & 0x07;
	else
		return 0;
	for (i = 1; i <= n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* overlong, surrogates, past U+10FFFF, and the non-characters XML forbids */
	if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
		return 0;
	return n + 1;
}

int export_file__open(struct export_file *x, const char *path)
{
	struct stat st;
	int fd, r;

	x->f = NULL;
	x->path = path;
	x->dfd = -1;
	x->tmp[0] = 0;
	x->err[0] = 0;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* /dev/stdout, a fifo: nothing to replace, written in place */
		x->f = fopen(path, "we");
		return x->f ? 0 : -errno;
	}
	/* The walk refuses what another user planted on the way (docs/cli.md). */
	r = safe_path__check(path, x->err, sizeof(x->err));
	if (r < 0)
		return r;
	r = safe_path__parent(path, &x->dfd, x->leaf, sizeof(x->leaf), x->err, sizeof(x->err));
	if (r < 0)
		return r;
	/* 0666 less the umask, as fopen() creates; an existing file's mode is kept */
	fd = safe_path__tmpfile(x->dfd, x->leaf, 0666, x->tmp, sizeof(x->tmp), x->err,
				sizeof(x->err));
	if (fd < 0) {
		r = fd;
		goto fail;
	}
	if (fstatat(x->dfd, x->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
		(void)fchmod(fd, st.st_mode & 07777);
	x->f = fdopen(fd, "w");
	if (x->f)
		return 0;
	r = -errno;
	close(fd);
	unlinkat(x->dfd, x->tmp, 0);
fail:
	close(x->dfd);
	x->dfd = -1;
	return r;
}

int export_file__close(struct export_file *x, bool ok)
{
	int r = 0;

	if (!x->f)
		return ok ? -EBADF : 0;
	if (ok && (fflush(x->f) != 0 || ferror(x->f) || fsync(fileno(x->f)) < 0))
		r = -(errno ? errno : EIO);
	if (fclose(x->f) != 0 && !r)
		r = -(errno ? errno : EIO);
	x->f = NULL;
	if (x->dfd < 0)
		return ok && r == -EINVAL ? 0 : r; /* fsync of a pipe or a tty */
	if (ok && !r && renameat(x->dfd, x->tmp, x->dfd, x->leaf) < 0)
		r = -errno;
	if (!ok || r)
		unlinkat(x->dfd, x->tmp, 0);
	close(x->dfd);
	x->dfd = -1;
	return r;
}

int export__write(struct exporter *e, const char *path)
{
	struct export_file x;
	FILE *f;
	int r = export_file__open(&x, path);

	if (r < 0 && x.err[0])
		return export__fail(e, r, "%s", x.err);
	if (r < 0)
		return export__fail(e, r, "open '%s': %s", path, strerror(-r));
	f = x.f;
	errno = 0;
	switch (e->fmt) {
	case EXPORT_PPROF:
		r = export_pprof__write(e, f);
		break;
	case EXPORT_SVG:
		r = export_svg__write(e, f);
		break;
	case EXPORT_SPEEDSCOPE:
		r = export_speedscope__write(e, f);
		break;
	default:
		r = export_folded__write(e, f);
		break;
	}
	if (r >= 0) {
		r = export_file__close(&x, true);
		if (r < 0)
			return export__fail(e, r, "write '%s': %s", path, strerror(-r));
	} else {
		export_file__close(&x, false);
	}
	return r;
}

void export__stats(const struct exporter *e, struct export_stats *ret)
{
	*ret = e->st;
}

const char *export__error(const struct exporter *e)
{
	return e->err;
}

int export__store_freq(const char *store_dir, uint32_t *ret)
{
	char path[4096], line[256];
	FILE *f;
	int r = -ENOENT;

	snprintf(path, sizeof(path), "%s/conf", store_dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned int v;

		if (sscanf(line, "freq: %u", &v) == 1 && v > 0) {
			*ret = v;
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}
