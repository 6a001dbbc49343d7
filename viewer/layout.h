/* SPDX-License-Identifier: MIT */
/*
 * Flamegraph layout: a tree and a zoom node -> boxes on a character grid,
 * and the readable shortening of long frame names. No curses here, so the
 * tests check boxes and labels directly.
 *
 * Columns come from cumulative values on one scale (x = off * width / total),
 * so boxes never overlap and a row's boxes add up to its parent. A run of
 * siblings each narrower than min_w becomes one merged box ("+N"); a merged
 * box is not descended into, but can be laid out on its own (build_run).
 */
#ifndef CPA_VLAYOUT_H
#define CPA_VLAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "tree.h"

struct vbox {
	uint32_t node;	   /* first node of a merged run */
	uint32_t n_merged; /* 0: one frame; > 1: that many narrow frames */
	uint32_t x, w;
	uint32_t depth; /* 0 = the zoom node */
	uint64_t value;
};

struct vlayout {
	struct vbox *boxes; /* sorted by (depth, x) */
	uint32_t n, cap;
	uint32_t depth; /* rows used */
};

/* Boxes of zoom and below, max_depth rows at most. 0 or -ENOMEM. */
int vlayout__build(struct vlayout *l, const struct vtree *t, uint32_t zoom, uint32_t width,
		   uint32_t max_depth, uint32_t min_w);
/* Zoom into a merged box: the run of n siblings from first as the top box
 * (n_merged = n, the full width), its members below it at full scale. */
int vlayout__build_run(struct vlayout *l, const struct vtree *t, uint32_t first, uint32_t n,
		       uint32_t width, uint32_t max_depth, uint32_t min_w);
void vlayout__free(struct vlayout *l);
/* Index of the box showing node (not merged), or -1. */
int vlayout__find(const struct vlayout *l, uint32_t node);
/* Index of the merged box whose run starts at first, of n frames if there is
 * one (else the first such box), or -1. */
int vlayout__find_run(const struct vlayout *l, uint32_t first, uint32_t n);
/* Box at (depth, column), or -1. */
int vlayout__at(const struct vlayout *l, uint32_t depth, uint32_t x);

/*
 * name shortened to at most w display columns: argument lists, template
 * arguments and Rust hash suffixes go first, then leading namespaces, then
 * the tail is cut with ellipsis (one column: "~" or "\u2026"). Returns buf.
 */
char *vlayout__label(const char *name, uint32_t w, const char *ellipsis, char *buf, size_t len);

/* Display columns of a UTF-8 string (bytes that start a code point). */
size_t vlayout__cols(const char *s);

#endif /* CPA_VLAYOUT_H */
