/* SPDX-License-Identifier: MIT */
/*
 * Internals shared by the export formats (export*.c only): an intern table
 * (bytes -> dense id), the stack cache, the name tree that folded-diff, SVG
 * and speedscope are written from, and the format vtable.
 */
#ifndef CPA_EXPORT_INT_H
#define CPA_EXPORT_INT_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/intern.h"
#include "export.h"

/* ---- intern table: byte strings -> ids 0, 1, 2, ... in first-seen order ----
 * The common intern table (common/intern.h) with 8-byte aligned keys, ids
 * counted from 0. A zeroed xtab is an empty one. */

struct xtab {
	struct intern t; /* INTERN_ALIGN8, set by the first xtab__intern() */
};

/* 1 when new, 0 when it was there, -ENOMEM. */
static inline int xtab__intern(struct xtab *t, const void *p, uint32_t len, uint32_t *ret_id)
{
	uint32_t id;
	int r;

	t->t.flags |= INTERN_ALIGN8;
	r = intern__get(&t->t, p, len, &id);
	if (r >= 0)
		*ret_id = id - 1;
	return r;
}
/* -ENOENT when absent. */
static inline int xtab__find(const struct xtab *t, const void *p, uint32_t len, uint32_t *ret_id)
{
	uint32_t id = intern__find(&t->t, p, len);

	if (!id)
		return -ENOENT;
	*ret_id = id - 1;
	return 0;
}
static inline const void *xtab__get(const struct xtab *t, uint32_t id, uint32_t *ret_len)
{
	return intern__key(&t->t, id + 1, ret_len);
}
static inline const char *xtab__str(const struct xtab *t, uint32_t id)
{
	return xtab__get(t, id, NULL); /* strings are interned with their NUL */
}
static inline int xtab__intern_str(struct xtab *t, const char *s, uint32_t *ret_id)
{
	return xtab__intern(t, s, (uint32_t)strlen(s) + 1, ret_id);
}
/* Ids handed out: 0 .. xtab__count() - 1. */
static inline uint32_t xtab__count(const struct xtab *t)
{
	return intern__count(&t->t);
}
static inline void xtab__free(struct xtab *t)
{
	intern__free(&t->t);
}

/* A growable uint32 array. */
struct u32vec {
	uint32_t *v;
	size_t n, cap;
};
int u32vec__push(struct u32vec *a, uint32_t x);
void u32vec__free(struct u32vec *a);

/* ---- the row map (export_rowmap.c): (src, seg, stack_id, key) -> u32 ----
 * What a row of store_reader__query_rows() resolved to, kept for the rows
 * after it with the same key: one segment at a time (a new (src, seg)
 * starts it over), a chain per stack id. A cache: a row not found is
 * resolved again. Callers zero the key's unused words. */
struct rowmap_key {
	uint32_t w[10];
};
struct rowmap_ent {
	struct rowmap_key k;
	uint32_t val, next; /* next: entry index + 1, 0 = end */
};
struct rowmap {
	bool valid;
	uint32_t src, seg;
	uint32_t *head; /* head[stack_id]: entry index + 1 */
	uint32_t nhead;
	struct rowmap_ent *ents;
	size_t n, cap;
};
bool rowmap__find(const struct rowmap *m, uint32_t src, uint32_t seg, uint32_t stack,
		  const struct rowmap_key *k, uint32_t *ret);
/* 0 or -ENOMEM; a stack id past any real one is not kept. */
int rowmap__put(struct rowmap *m, uint32_t src, uint32_t seg, uint32_t stack,
		const struct rowmap_key *k, uint32_t val);
void rowmap__free(struct rowmap *m);
/* Rows ahead whose entry a loop over a block's rows prefetches: a block's rows
 * come by (second, pid, tid, stack), so each looks up an entry far from the
 * last one, a cache miss. */
#define ROWMAP_AHEAD 16
/* Starts loading the first entry of stack's chain (no more than a hint). */
static inline void rowmap__prefetch(const struct rowmap *m, uint32_t stack)
{
	uint32_t e;

	if (stack < m->nhead && (e = m->head[stack]) != 0) {
		__builtin_prefetch(&m->ents[e - 1]);
		__builtin_prefetch((const char *)&m->ents[e] - 1);
	}
}

/* ---- the name tree (folded diff, svg, speedscope) ---- */

enum tnode_flag {
	TN_LABEL = 1u << 0,  /* env, process or thread label, not a frame */
	TN_KERNEL = 1u << 1, /* kernel frame */
	TN_MARKER = 1u << 2, /* [lost: ...], [unwind stopped: ...] */
};

/* Per side ([0] new, [1] base of a diff): what ended at this node. */
struct tval {
	uint64_t on;  /* on-CPU / probe samples */
	uint64_t off; /* off-CPU blocked ns */
};

struct tnode {
	uint32_t parent;		    /* node id; the root is node 0 */
	uint32_t name;			    /* id in tree.names */
	uint32_t first_child, next_sibling; /* built by tree__link(), 0 = none */
	uint32_t flags;
	uint32_t depth;
	struct tval self[2];
};

struct tree {
	struct xtab names; /* sanitised names with NUL */
	struct xtab edges; /* (parent, name) -> node id - 1 */
	struct tnode *nodes;
	uint32_t n, cap;
	uint32_t max_depth;
	/* A stack's frames as a run: count, then (name id, flags) pairs, root
	 * first. The runs, one id each whatever segment or store they came from: */
	struct xtab runs;
	struct xtab stacks;	 /* (src, seg, stack_id) -> its run's id in stack_run */
	struct u32vec stack_run; /* per stack: run id */
	struct u32vec frames;	 /* a run being built */
	/* (label node, run id) -> the stack's last node: rows repeat, and so do
	 * stacks in every segment (hourly, each with its own stack ids) */
	struct xtab paths;
	struct u32vec path_node;
};

int tree__init(struct tree *t);
void tree__free(struct tree *t);
/* The node a sample's path (labels, then frames) ends at, made as needed. */
int tree__path(struct tree *t, const struct export_opts *o, uint32_t src,
	       const struct store_sample *s, uint32_t *ret_node);
int tree__add(struct tree *t, const struct export_opts *o, uint32_t src,
	      const struct store_sample *s, int side);
/* Children lists sorted by name (flamegraph order), depth-first ids. */
int tree__link(struct tree *t);
static inline const char *tree__name(const struct tree *t, uint32_t node)
{
	return xtab__str(&t->names, t->nodes[node].name);
}

/* Value helpers: folded = samples + ns (what `cpa show` prints); time = ns. */
static inline uint64_t tval_folded(const struct tval *v)
{
	return v->on + v->off;
}
static inline uint64_t tval_time(const struct tval *v, uint32_t freq)
{
	return freq ? v->on * (1000000000ull / freq) + v->off : v->on + v->off;
}

/* ---- formats ---- */

struct exporter {
	enum export_format fmt;
	struct export_opts o;
	uint32_t src;
	bool have_base;
	struct export_stats st;
	char err[256];
	struct tree tree; /* folded, svg, speedscope */
	/* export__add_rows(): (src, seg, stack_id, string ids, pid) -> tree node */
	struct rowmap rows;
	void *pp; /* pprof's state */
	struct store_trigger trig[EXPORT_TRIGGERS_MAX];
	uint32_t n_trig;
};

/* Index of the first trigger whose window holds row s (its process, or a
 * system-wide trigger), or -1. */
int export__trigger_of(const struct exporter *e, const struct store_sample *s);
/* The same for a row's second, loss marker flag and pid. */
int export__trigger_at(const struct exporter *e, int64_t sec, bool lost, uint32_t pid);
/* "10:02:00-10:02:30 policy burst pid 1000 (app): cpu_percent 183.20 > 50.00, actions ..." */
void export__trigger_text(const struct store_trigger *t, char *buf, size_t len);

int export_folded__write(struct exporter *e, FILE *f);
int export_svg__write(struct exporter *e, FILE *f);
int export_speedscope__write(struct exporter *e, FILE *f);

int export_pprof__new(struct exporter *e);
int export_pprof__add(struct exporter *e, const struct store_sample *s, int side);
/* Row i of b, resolved once per (src, seg, stack, names) (export__add_rows()). */
int export_pprof__add_row(struct exporter *e, const struct store_rows *b, size_t i, int side);
/* A hint: loads the sample slot row i will go to, when known (nothing changes). */
void export_pprof__prefetch_row(const struct exporter *e, const struct store_rows *b, size_t i,
				int side);
/* pprof's row map (export_pprof__add_row()'s cache), for rowmap__prefetch(). */
const struct rowmap *export_pprof__rows(const struct exporter *e);
/* Writes gzip'd protobuf to fd f. */
int export_pprof__write(struct exporter *e, FILE *f);
void export_pprof__free(struct exporter *e);

/* printf into e->err; returns err (negative errno). */
int export__fail(struct exporter *e, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Bytes of the well-formed UTF-8 character at s (1..4), 0 at the NUL or at a
 * byte that starts no valid character (the writers put U+FFFD there). */
size_t export__utf8_len(const char *s);

/* Name of a sample kind ("oncpu", "offcpu", "probe"). */
const char *export__kind_name(unsigned int kind);

#endif /* CPA_EXPORT_INT_H */
