// SPDX-License-Identifier: MIT
/* The key map (keymap.h). Curses key codes are spelled as numbers here so
 * that this file (and its test) does not need curses: KEY_DOWN 0402 ... */
#include "keymap.h"

#define K_DOWN	    0402
#define K_UP	    0403
#define K_LEFT	    0404
#define K_RIGHT	    0405
#define K_HOME	    0406
#define K_BACKSPACE 0407
#define K_ENTER	    0527
#define K_RESIZE    0632
#define CTRL(c)	    ((c)&0x1f)

static const struct vkey keys[] = {
	{'?', VV_ALL | VV_HELP, VA_HELP, "?", "show / hide this help"},
	{'q', VV_ALL, VA_QUIT, "q", "quit"},
	{'Q', VV_ALL, VA_QUIT, NULL, NULL},
	{CTRL('c'), VV_ALL | VV_HELP, VA_QUIT, NULL, NULL},
	{'q', VV_HELP, VA_HELP, NULL, NULL},
	{27, VV_HELP, VA_HELP, NULL, NULL},
	/* timeline and range */
	{'[', VV_ALL, VA_RANGE_PREV, "[ ]", "move the range back / forward by its own width"},
	{']', VV_ALL, VA_RANGE_NEXT, NULL, NULL},
	{'{', VV_ALL, VA_RANGE_BACK, "{ }", "move the range back / forward by one timeline cell"},
	{'}', VV_ALL, VA_RANGE_FWD, NULL, NULL},
	{'-', VV_ALL, VA_RANGE_WIDER, "- +", "range twice as wide / half as wide"},
	{'+', VV_ALL, VA_RANGE_NARROWER, NULL, NULL},
	{'=', VV_ALL, VA_RANGE_NARROWER, NULL, NULL},
	{'a', VV_ALL, VA_RANGE_ALL, "a", "range = everything in the timeline"},
	{'g', VV_ALL, VA_JUMP, "g", "jump: range starts at HH:MM:SS (same width)"},
	{'r', VV_ALL, VA_RANGE_SET, "r",
	 "set the range: HH:MM:SS HH:MM:SS, or HH:MM:SS +60s/+5m/+1h"},
	{'z', VV_ALL, VA_TL_ZOOM_IN, "z", "zoom the timeline in around the range"},
	{'Z', VV_ALL, VA_TL_ZOOM_OUT, "Z", "timeline back to the whole store"},
	/* flamegraph */
	{'h', VV_FLAME | VV_SANDWICH, VA_LEFT, "h j k l",
	 "select frame left / child / parent / right (arrows too)"},
	{K_LEFT, VV_FLAME | VV_SANDWICH, VA_LEFT, NULL, NULL},
	{'l', VV_FLAME | VV_SANDWICH, VA_RIGHT, NULL, NULL},
	{K_RIGHT, VV_FLAME | VV_SANDWICH, VA_RIGHT, NULL, NULL},
	{'k', VV_ALL, VA_UP, NULL, NULL},
	{K_UP, VV_ALL, VA_UP, NULL, NULL},
	{'j', VV_ALL, VA_DOWN, NULL, NULL},
	{K_DOWN, VV_ALL, VA_DOWN, NULL, NULL},
	{'\n', VV_ALL, VA_ENTER, "Enter", "zoom into the frame; in the top table: sandwich view"},
	{'\r', VV_ALL, VA_ENTER, NULL, NULL},
	{K_ENTER, VV_ALL, VA_ENTER, NULL, NULL},
	{27, VV_ALL, VA_BACK, "Esc",
	 "zoom out one level / back to the previous view (Backspace, u)"},
	{K_BACKSPACE, VV_ALL, VA_BACK, NULL, NULL},
	{127, VV_ALL, VA_BACK, NULL, NULL},
	{'u', VV_ALL, VA_BACK, NULL, NULL},
	{'0', VV_FLAME, VA_ZOOM_RESET, "0", "zoom out to the root"},
	{K_HOME, VV_FLAME, VA_ZOOM_RESET, NULL, NULL},
	/* search */
	{'/', VV_FLAME | VV_TOP, VA_SEARCH, "/",
	 "regex search (empty: clear); matches highlighted, share shown"},
	{'#', VV_FLAME | VV_TOP, VA_SEARCH_SEL, "#", "search the selected frame's name"},
	{'n', VV_FLAME, VA_MATCH_NEXT, "n N", "select the next / previous match"},
	{'N', VV_FLAME, VA_MATCH_PREV, NULL, NULL},
	/* table and sandwich */
	{'\t', VV_ALL, VA_TOP, "Tab", "flamegraph <-> top functions table"},
	{'s', VV_TOP, VA_SORT_SELF, "s t", "top table: sort by self / by total"},
	{'t', VV_TOP, VA_SORT_TOTAL, NULL, NULL},
	/* filters */
	{':', VV_ALL, VA_FILTER, ":",
	 "filter: pid= comm= cgroup= cpu=0-3 env= kind=on,off,probe,lost probe="},
	{'G', VV_ALL, VA_GROUP, "G",
	 "group the root by process / thread / cgroup / env / cpu / name"},
	{'M', VV_ALL, VA_GROUP_NAME, "M",
	 "group by name on / off: every process merged, frames by name"},
	{'K', VV_ALL, VA_KERNEL, "K", "kernel frames on / off"},
	/* diff */
	{'A', VV_ALL, VA_MARK_A, "A", "mark the range as A (the baseline)"},
	{'B', VV_ALL, VA_MARK_B, "B", "mark the range as B: diff B against A (+ grew, - shrank)"},
	{'D', VV_ALL, VA_DIFF_OFF, "D", "diff off"},
	/* misc */
	{'x', VV_ALL, VA_EXPORT, "x",
	 "export the range (with filters) as folded stacks (cpa show's .prof)"},
	{'T', VV_ALL, VA_TRIGGERS, "T",
	 "policy triggers in the timeline: list (j/k select, Enter sets the range to one)"},
	{'F', VV_ALL, VA_FOLLOW, "F", "live: follow the store being written"},
	{CTRL('l'), VV_ALL, VA_REDRAW, "^L", "redraw"},
	{K_RESIZE, VV_ALL | VV_HELP, VA_REDRAW, NULL, NULL},
};

enum vact vkeymap__lookup(enum vview view, int key)
{
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (keys[i].key == key && (keys[i].views & view))
			return keys[i].act;
	return VA_NONE;
}

const struct vkey *vkeymap__table(size_t *ret_n)
{
	*ret_n = sizeof(keys) / sizeof(keys[0]);
	return keys;
}
