/* SPDX-License-Identifier: MIT */
/*
 * The call tree of a range: node 0 is the root ("all"), every other node a
 * frame under its caller, merged by name (as flamegraphs do). Built from the
 * aggregated stacks of a range (model.c) or from folded lines (tests), then
 * sorted: children by total, largest first.
 */
#ifndef CPA_VTREE_H
#define CPA_VTREE_H

#include <stdbool.h>
#include <stdint.h>

#include "vmap.h"

#define VNODE_NONE UINT32_MAX

/* Frame classes: the colour of a box. */
enum vcls {
	VCLS_ROOT,
	VCLS_EXE,    /* user code in the main executable (or any file not a .so) */
	VCLS_LIB,    /* user code in a shared library */
	VCLS_JIT,    /* anonymous / JIT / vdso */
	VCLS_UNSYM,  /* unsymbolized 0x... [binary] */
	VCLS_KERNEL, /* kernel frames */
	VCLS_MARKER, /* [lost: ...], [unknown stack], [unwind stopped ...] */
	VCLS_GROUP,  /* synthetic root: process, thread, cgroup, env, cpu */
	VCLS_MAX,
};

struct vnode {
	uint32_t name;		      /* strtab id */
	uint32_t module;	      /* strtab id, 0 = none */
	uint32_t parent, child, next; /* VNODE_NONE = none */
	uint32_t depth;
	uint8_t cls;
	uint64_t total, self;
};

struct vtree {
	struct strtab *names; /* shared, not owned */
	struct vnode *nodes;
	uint32_t n, cap;
	struct u64map kids; /* parent << 32 | name -> node */
};

/* One frame of a path handed to vtree__add (root first). */
struct vpath_ent {
	uint32_t name, module;
	uint8_t cls;
};

int vtree__init(struct vtree *t, struct strtab *names);
void vtree__reset(struct vtree *t);
void vtree__free(struct vtree *t);
/* Add value along path (root first): totals of every node, self of the last. */
int vtree__add(struct vtree *t, const struct vpath_ent *path, uint32_t n, uint64_t value);
uint32_t vtree__child(const struct vtree *t, uint32_t parent, uint32_t name);
/* Children by total (largest first), then name. */
void vtree__sort(struct vtree *t);
/* "a;b;c 12": a folded line as `cpa show` writes it ("_[k]" marks kernel frames). */
int vtree__add_folded(struct vtree *t, const char *line);
/* Same path (by names, from the root) in other, or VNODE_NONE. */
uint32_t vtree__match(const struct vtree *t, uint32_t node, const struct vtree *other);

static inline const char *vtree__name(const struct vtree *t, uint32_t node)
{
	return strtab__str(t->names, t->nodes[node].name);
}

#endif /* CPA_VTREE_H */
