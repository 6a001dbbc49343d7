// SPDX-License-Identifier: MIT
/*
 * cpa-view: the terminal flamegraph over a cpa store.
 *
 *   cpa-view [--ascii] [--mono] [--follow] [-B HH:MM:SS] [-E HH:MM:SS] STORE
 *
 * STORE is a store dir (cpa_YYMMDD...) or the root holding them (the newest is
 * opened). The store is opened and the terminal checked before curses starts:
 * either failing is a line on stderr. Everything else is in view.c / draw.c
 * (docs/viewer.md).
 */
#include <curses.h>
#include <errno.h>
#include <getopt.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/timeutil.h"

#include "view.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: cpa-view [OPTION]... STORE\n"
		   "The terminal flamegraph of a cpa store: timeline, range, flamegraph, search,\n"
		   "top table, sandwich view, filters, grouping, diff.\n"
		   "\n"
		   "  STORE                 a store dir (cpa_YYMMDD...) or the store root (its\n"
		   "                        newest day, every run of it read as one)\n"
		   "  -B, --begin HH:MM:SS  open on this range: its start (also --starttime),\n"
		   "  -E, --end HH:MM:SS    and its end (also --endtime); local time of the\n"
		   "                        store's first day\n"
		   "  -a, --ascii           no UTF-8 block characters\n"
		   "  -m, --mono            no colours (also: NO_COLOR set)\n"
		   "  -f, --follow          live mode: follow a store being written (a missing\n"
		   "                        or empty store is waited for)\n"
		   "  -h, --help            print this help and exit\n"
		   "  -V, --version         print the version and exit\n"
		   "\n"
		   "Keys: press ? in the viewer (docs/viewer.md lists them too).\n"
		   "Needs a terminal on stdin and stdout.\n"
		   "Exit status: 0 after q, 1 if the store cannot be opened, 2 on a usage\n"
		   "error or without a terminal.\n");
}

/* The store is opened before curses starts: a bad one is a line on stderr. */
static int open_store(struct vapp *a, const struct vview_opts *o)
{
	int r = vapp__init(a, o);

	if (r == -ENOMEM) {
		fprintf(stderr, "cpa-view: out of memory\n");
		return 1;
	}
	/* live mode waits for a store that does not exist or is empty yet */
	if (r < 0 && !o->follow) {
		fprintf(stderr, "cpa-view: failed to open input file: %s\n", a->err);
		return 1;
	}
	return 0;
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
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct vview_opts o = {0};
	struct vapp *a;
	unsigned int n_fast_err = 0;
	bool gone = false;
	int c, r;

	while ((c = getopt_long(argc, argv, "amfB:E:hV", lopts, NULL)) != -1) {
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
		case 'V':
			printf("cpa-view %s\n", CPA_VERSION);
			return 0;
		default:
			fprintf(stderr, "Try 'cpa-view --help'.\n");
			return 2;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "cpa-view: %s\nTry 'cpa-view --help'.\n",
			optind < argc ? "one STORE, please" : "missing STORE");
		return 2;
	}
	/* as cpa show says it: an end at or before the start is no range */
	if (o.begin && o.end && vapp__parse_tod(o.end) <= vapp__parse_tod(o.begin)) {
		fprintf(stderr,
			"cpa-view: --end %s is not after --begin %s\nTry 'cpa-view --help'.\n",
			o.end, o.begin);
		return 2;
	}
	o.store = argv[optind];
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
		/* curses without a terminal reads EOF forever: refuse */
		fprintf(stderr, "cpa-view: needs a terminal on stdin and stdout; "
				"for a file, use cpa show\n");
		return 2;
	}
	setlocale(LC_ALL, "");
	a = calloc(1, sizeof(*a));
	if (!a)
		return 1;
	r = open_store(a, &o);
	if (r) {
		vapp__free(a);
		free(a);
		return r;
	}
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
		uint64_t t0;

		vapp__render(a);
		refresh();
		/* while a range loads, wake to move its progress line */
		timeout(vapp__loading(a) ? 150 : a->o.follow ? 1000 : -1);
		t0 = clock_ns(CLOCK_MONOTONIC);
		c = getch();
		if (c == ERR) {
			/* A read that fails at once, again and again: the terminal is gone
			 * (hangup, EOF). Quit rather than spin. */
			if (clock_ns(CLOCK_MONOTONIC) - t0 < 100000000ULL) {
				if (++n_fast_err >= 50) {
					gone = true;
					break;
				}
			} else {
				n_fast_err = 0;
			}
			if (a->o.follow)
				vapp__tick(a);
			continue;
		}
		n_fast_err = 0;
		vapp__key(a, c);
	}
	endwin();
	if (gone)
		fprintf(stderr, "cpa-view: the terminal went away\n");
	if (!a->have_model)
		fprintf(stderr, "cpa-view: %s\n", a->err);
	else if (a->m.n_unread) {
		char un[1280];

		vmodel__unread_line(&a->m, un, sizeof(un));
		fprintf(stderr, "cpa-view: warning: %s\n", un);
	}
	r = gone ? 1 : a->have_model ? 0 : 1;
	vapp__free(a);
	free(a);
	return r;
}
