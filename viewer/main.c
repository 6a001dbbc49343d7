// SPDX-License-Identifier: MIT
/*
 * cpa-view: the terminal flamegraph over a cpa store.
 *
 *   cpa-view [--ascii] [--mono] [--follow] [-B HH:MM:SS] [-E HH:MM:SS] STORE
 *
 * STORE is a store dir (cpa_YYMMDD...) or the root holding them (the newest is
 * opened). Everything else is in view.c / draw.c (docs/viewer.md).
 */
#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "view.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: cpa-view [--ascii] [--mono] [--follow] [-B HH:MM:SS] [-E HH:MM:SS] STORE\n"
		"  STORE      a store dir (cpa_YYMMDD...) or the store root (newest dir)\n"
		"  -B, -E     open on this range (local time of the store's first day)\n"
		"  --ascii    no UTF-8 block characters\n"
		"  --mono     no colours (also: NO_COLOR set)\n"
		"  --follow   live mode: follow a store being written\n"
		"keys: press ? in the viewer, or see docs/viewer.md\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{"ascii", no_argument, NULL, 'a'},
		{"mono", no_argument, NULL, 'm'},
		{"follow", no_argument, NULL, 'f'},
		{"begin", required_argument, NULL, 'B'},
		{"starttime", required_argument, NULL, 'B'},
		{"end", required_argument, NULL, 'E'},
		{"endtime", required_argument, NULL, 'E'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct vview_opts o = {0};
	struct vapp *a;
	int c, r;

	while ((c = getopt_long(argc, argv, "amfB:E:h", lopts, NULL)) != -1) {
		switch (c) {
		case 'a':
			o.ascii = true;
			break;
		case 'm':
			o.mono = true;
			break;
		case 'f':
			o.follow = true;
			break;
		case 'B':
		case 'E':
			if (vapp__parse_tod(optarg) < 0) {
				fprintf(stderr, "cpa-view: bad time '%s': want HH:MM:SS\n", optarg);
				return 2;
			}
			*(c == 'B' ? &o.begin : &o.end) = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1) {
		usage(stderr);
		return 2;
	}
	o.store = argv[optind];
	setlocale(LC_ALL, "");
	a = calloc(1, sizeof(*a));
	if (!a)
		return 1;
	r = vapp__init(a, &o);
	if (r == -ENOMEM) {
		fprintf(stderr, "cpa-view: out of memory\n");
		return 1;
	}
	/* A bad store is shown in the UI (with the reason), not only on stderr. */
	a->utf8 = !o.ascii && !strcmp(nl_langinfo(CODESET), "UTF-8");
	a->color = !o.mono && !getenv("NO_COLOR");
	set_escdelay(25);
	if (!initscr()) {
		fprintf(stderr, "cpa-view: cannot open the terminal\n");
		return 1;
	}
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	curs_set(0);
	vdraw__init_colors(a);
	while (!a->quit) {
		vapp__render(a);
		refresh();
		timeout(a->o.follow ? 1000 : -1);
		c = getch();
		if (c == ERR) {
			if (a->o.follow)
				vapp__tick(a);
			continue;
		}
		vapp__key(a, c);
	}
	endwin();
	if (!a->have_model)
		fprintf(stderr, "cpa-view: %s\n", a->err);
	r = a->have_model ? 0 : 1;
	vapp__free(a);
	free(a);
	return r;
}
