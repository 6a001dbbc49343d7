// SPDX-License-Identifier: MIT
/*
 * `cpa show`'s progress bar (show.h): on stderr, only when stderr is a
 * terminal and the read has taken more than a second; the line is wiped
 * when the read is done, so what follows starts on a clean line.
 * CPA_SHOW_PROGRESS_MS=N sets the delay to N ms (tests draw it at once).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "show.h"

#define BAR_WIDTH 30
#define AFTER_MS  1000

void show_progress__init(struct show_progress *p, int64_t t0, int64_t n)
{
	const char *env = getenv("CPA_SHOW_PROGRESS_MS");

	*p = (struct show_progress){
		.on = isatty(STDERR_FILENO) == 1,
		.t0 = t0,
		.n = n > 0 ? n : 1,
		.last = -1,
		.after_ns =
			(uint64_t)(env && *env ? strtoul(env, NULL, 10) : AFTER_MS) * 1000000ull,
	};
	if (p->on)
		p->start_ns = clock_ns(CLOCK_MONOTONIC);
}

void show_progress__at(struct show_progress *p, int64_t sec)
{
	int64_t done = sec + 1 - p->t0;
	int pct, fill;
	char bar[BAR_WIDTH + 1];

	if (!p->on)
		return;
	if (clock_ns(CLOCK_MONOTONIC) - p->start_ns < p->after_ns)
		return;
	if (done < 0)
		done = 0;
	if (done > p->n)
		done = p->n;
	pct = (int)(done * 100 / p->n);
	if (pct == p->last)
		return;
	p->last = pct;
	fill = pct * BAR_WIDTH / 100;
	for (int i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[BAR_WIDTH] = 0;
	fprintf(stderr, "\rreading [%s] %3d%%", bar, pct);
	fflush(stderr);
	p->shown = true;
}

void show_progress__done(struct show_progress *p)
{
	if (!p->shown)
		return;
	fprintf(stderr, "\r%*s\r", BAR_WIDTH + 20, "");
	fflush(stderr);
	p->shown = false;
}
