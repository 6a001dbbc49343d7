/* SPDX-License-Identifier: MIT */
/*
 * Private to the store writer: the dictionary. symd defines strings, modules,
 * frames and stacks once per epoch, by its own ids (shm/records.h); samples
 * name them by those ids. The writer keeps symd's definitions (sym tables)
 * and gives each the id of the current segment's dictionary on first use in
 * that segment (seg_gen tells a stale segment id from a current one).
 *
 *   symd ids --(def_*)--> sym tables --(first use in a segment)--> segment dict
 *        \--> dictionary journal (store_journal_pvt.h), for a restarted storer
 */
#ifndef CPA_STORE_DICT_PVT_H
#define CPA_STORE_DICT_PVT_H

#include <stdint.h>

#include "shm/records.h"
#include "store_block_pvt.h"
#include "store_fmt.h"
#include "store_journal_pvt.h"
#include "store_tab.h"

struct sym_str {
	uint64_t off;
	uint32_t len;
	uint32_t seg_sid, seg_gen;
};

struct sym_mod {
	uint64_t path_off;
	uint32_t path_len, kind;
	uint8_t bid_len, bid[CPA_BUILD_ID_MAX];
	uint32_t seg_sid, seg_gen;
};

struct sym_frame {
	struct cpa_frame_def def;
	uint32_t seg_sid, seg_gen;
};

struct sym_stack {
	uint64_t frames_off; /* into sym.u32s */
	uint16_t n, nk;
	uint32_t seg_sid, seg_gen;
};

struct sym_tables {
	struct u32map str_map, mod_map, frame_map, stack_map; /* symd id -> index + 1 */
	VEC(struct sym_str) strs;
	VEC(struct sym_mod) mods;
	VEC(struct sym_frame) frames;
	VEC(struct sym_stack) stacks;
	struct sbuf bytes;  /* string and path bytes */
	VEC(uint32_t) u32s; /* stack frame ids */
};

struct store_dict {
	struct sym_tables sym;
	struct seg_dict seg;
	uint32_t seg_gen;
	uint64_t seg_budget;   /* the segment dictionary's bytes that rotate the segment */
	uint64_t seg_max;      /* what seg_budget may grow to (1/8 of the cap, 8 MiB at most) */
	int64_t seg_start_s;   /* data time the segment opened at */
	uint64_t *unknown_ids; /* the writer's counter: ids symd never defined */
};

/* Definitions (symd ids); each is also appended to jr. 0 or -errno. */
int store_dict__def_str(struct store_dict *dc, struct store_journal *jr,
			const struct cpa_str_def *d, const char *s);
int store_dict__def_module(struct store_dict *dc, struct store_journal *jr,
			   const struct cpa_module_def *m, const char *path);
int store_dict__def_frame(struct store_dict *dc, struct store_journal *jr,
			  const struct cpa_frame_def *f);
int store_dict__def_stack(struct store_dict *dc, struct store_journal *jr,
			  const struct cpa_stack_def *s, const uint32_t *frame_ids);
/* A new symd epoch: forget its definitions. */
void store_dict__reset(struct store_dict *dc);

/* Segment ids of symd's string (0 stays 0 = none) and stack ids; an
 * unknown stack becomes the marker "[unknown stack]". Or -ENOMEM. */
int store_dict__sym_str(struct store_dict *dc, uint32_t id);
int store_dict__sym_stack(struct store_dict *dc, uint32_t id);
/* Segment id of a one-frame marker stack named name ("[lost: ...]"). */
int store_dict__marker_stack(struct store_dict *dc, const char *name);
/* A new segment: its dictionary starts empty. */
/* A new segment from data time sec: every segment id starts over. One that filled its
 * dictionary within STORE_SEG_DICT_REFILL_S has a live set that big: the budget doubles,
 * up to seg_max, rather than a new segment at every block. */
#define STORE_SEG_DICT_REFILL_S 30
void store_dict__new_segment(struct store_dict *dc, int64_t sec);
/* Bytes of the segment dictionary's entries. */
size_t store_dict__seg_bytes(const struct store_dict *dc);
/* The segment's dictionary passed seg_budget: the next block opens a new segment, whose
 * dictionary starts empty (the store's own dictionary reset, docs/store-format.md). */
bool store_dict__seg_full(const struct store_dict *dc);
void store_dict__free(struct store_dict *dc);

#endif /* CPA_STORE_DICT_PVT_H */
