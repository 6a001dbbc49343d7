/* SPDX-License-Identifier: MIT */
/*
 * The key map: (view, key) -> action, one table that the dispatcher, the `?`
 * help screen and docs/viewer.md all follow. No curses here: keys are ints,
 * with curses' KEY_* codes passed through unchanged.
 */
#ifndef CPA_VKEYMAP_H
#define CPA_VKEYMAP_H

#include <stddef.h>

enum vview {
	VV_FLAME = 1u << 0,
	VV_TOP = 1u << 1,
	VV_SANDWICH = 1u << 2,
	VV_HELP = 1u << 3,
	VV_TRIGGERS = 1u << 4, /* the list of policy triggers in the timeline view */
	VV_ALL = VV_FLAME | VV_TOP | VV_SANDWICH | VV_TRIGGERS,
};

enum vact {
	VA_NONE,
	VA_QUIT,
	VA_HELP,
	VA_BACK, /* zoom out / leave the view */
	VA_LEFT,
	VA_RIGHT,
	VA_UP,
	VA_DOWN,
	VA_ENTER, /* zoom into the frame / open the sandwich */
	VA_ZOOM_RESET,
	VA_RANGE_PREV, /* range back by its own width */
	VA_RANGE_NEXT,
	VA_RANGE_BACK, /* by one timeline cell */
	VA_RANGE_FWD,
	VA_RANGE_WIDER,
	VA_RANGE_NARROWER,
	VA_RANGE_ALL,
	VA_RANGE_SET, /* prompt: start end */
	VA_JUMP,      /* prompt: HH:MM:SS */
	VA_TL_ZOOM_IN,
	VA_TL_ZOOM_OUT,
	VA_SEARCH,
	VA_SEARCH_SEL,
	VA_MATCH_NEXT,
	VA_MATCH_PREV,
	VA_TOP,
	VA_SORT_SELF,
	VA_SORT_TOTAL,
	VA_FILTER,
	VA_GROUP,
	VA_GROUP_NAME, /* group by name (every process merged) on / off */
	VA_KERNEL,
	VA_MARK_A,
	VA_MARK_B,
	VA_DIFF_OFF,
	VA_EXPORT,
	VA_FOLLOW,
	VA_REDRAW,
	VA_TRIGGERS, /* the trigger list on / off */
};

struct vkey {
	int key;
	unsigned int views; /* enum vview bits */
	enum vact act;
	const char *name; /* as written in the help */
	const char *help;
};

/* Action of key in view, VA_NONE if unbound. */
enum vact vkeymap__lookup(enum vview view, int key);
/* The table, in help order. */
const struct vkey *vkeymap__table(size_t *ret_n);

#endif /* CPA_VKEYMAP_H */
