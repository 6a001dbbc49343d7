// SPDX-License-Identifier: MIT
/*
 * Stacks of cpa (`cpa show` folded) and of perf (`perf script`) tallied
 * alike (fold.h): samples, rooted share, leaf shares, cpa's stop markers,
 * and for user samples the share whose leaf module is known.
 */
#include "fold.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void tally_add(struct tally *t, const char *name, double c)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (!strcmp(t->names[i], name)) {
			t->counts[i] += c;
			return;
		}
	if (t->n == FOLD_MAX_NAMES)
		return;
	t->names[t->n] = strdup(name);
	if (t->names[t->n])
		t->counts[t->n++] = c;
}

double tally_get(const struct tally *t, const char *name)
{
	int i;

	for (i = 0; i < t->n; i++)
		if (!strcmp(t->names[i], name))
			return t->counts[i];
	return 0;
}

void tally_free(struct tally *t)
{
	int i;

	for (i = 0; i < t->n; i++)
		free(t->names[i]);
	t->n = 0;
}

int tally_top(const struct tally *t, bool *used)
{
	int best = -1;

	for (int m = 0; m < t->n; m++)
		if (!used[m] && (best < 0 || t->counts[m] > t->counts[best]))
			best = m;
	if (best >= 0)
		used[best] = true;
	return best;
}

void fold_side_free(struct fold_side *s)
{
	tally_free(&s->self);
	tally_free(&s->stops);
	tally_free(&s->unknown_comm);
}

bool fold_is_root(const char *f)
{
	static const char *const roots[] = {
		"_start", "__libc_start_main", "__libc_start_main_impl", "__libc_start_call_main",
		"start_thread", "clone3", "clone",
		/* Go: goroutines, threads' g0 stacks, the main thread (.abi0: ELF symbol) */
		"runtime.goexit", "runtime.goexit.abi0", "runtime.mstart", "runtime.mstart.abi0",
		"runtime.rt0_go", "runtime.rt0_go.abi0",
		/* inside execve past its point of no return:
		 * the old image's callers are gone, nothing is
		 * left to unwind (docs/unwindd.md) */
		"<# EXEC: IMAGE REPLACED #>", "<# EXIT: ADDRESS SPACE GONE #>", NULL};
	int i;

	for (i = 0; roots[i]; i++)
		if (!strcmp(f, roots[i]))
			return true;
	return false;
}

const char *fold_self_key(const char *f)
{
	if (!strncmp(f, "0x", 2) || strstr(f, "+0x"))
		return "[unknown]";
	return f;
}

/* ---- cpa ---------------------------------------------------------------------------------- */

static bool cpa_is_marker(const char *f)
{
	return !strncmp(f, "<#", 2) || !strncmp(f, "[unwind stopped", 15) ||
	       !strncmp(f, "[degraded", 9);
}

/* A marker that says something about the user part (not the off-CPU state, not a loss). */
static bool cpa_user_marker(const char *f)
{
	return cpa_is_marker(f) && !strstr(f, "OFFCPU") && !strstr(f, "LOST") &&
	       !strstr(f, "USER MODE");
}

/* The stop markers that mean "this binary has no unwind information for us". */
static bool cpa_no_unwind_info(const char *f)
{
	return strstr(f, "NO CFI") || strstr(f, "no cfi") || strstr(f, "JIT") || strstr(f, "jit]");
}

/* "0x7f12 [unknown]", or a bare "[unknown]": a frame whose module nobody knew. */
static bool cpa_unknown_module(const char *f)
{
	size_t n = strlen(f);

	return !strcmp(f, "[unknown]") ||
	       (!strncmp(f, "0x", 2) && n > 10 && !strcmp(f + n - 10, " [unknown]"));
}

void fold_cpa_line(char *line, struct fold_side *s)
{
	char *sp, *tok, *save = NULL, *leaf = NULL, *uleaf = NULL, comm[64] = "";
	bool complete = false, user = false, no_info = false;
	double c;

	line[strcspn(line, "\n")] = 0;
	sp = strrchr(line, ' ');
	if (!sp)
		return;
	c = strtod(sp + 1, NULL);
	if (c <= 0)
		return;
	*sp = 0;
	tok = strtok_r(line, ";", &save); /* comm:pid */
	if (!tok)
		return;
	snprintf(comm, sizeof(comm), "%.*s", (int)strcspn(tok, ":"), tok);
	while ((tok = strtok_r(NULL, ";", &save))) {
		size_t n = strlen(tok);
		bool kernel = n > 4 && !strcmp(tok + n - 4, "_[k]");

		if (kernel)
			tok[n - 4] = 0;
		if (cpa_is_marker(tok)) {
			tally_add(&s->stops, tok, c);
			user |= cpa_user_marker(tok);
			no_info |= cpa_no_unwind_info(tok);
			complete = complete || fold_is_root(tok); /* exec, exit */
			continue;
		}
		if (!kernel) {
			user = true;
			uleaf = tok;
		}
		complete = complete || fold_is_root(tok);
		leaf = tok;
	}
	s->samples += c;
	if (complete)
		s->complete += c;
	if (leaf)
		tally_add(&s->self, fold_self_key(leaf), c);
	if (!user)
		return;
	s->user += c;
	if (uleaf && !cpa_unknown_module(uleaf))
		s->user_known_leaf += c;
	else
		tally_add(&s->unknown_comm, comm, c);
	if (!no_info) {
		s->user_cfi += c;
		if (complete)
			s->user_cfi_rooted += c;
	}
}

int fold_cpa_file(const char *path, struct fold_side *s)
{
	FILE *f = fopen(path, "re");
	char *line = NULL;
	size_t cap = 0;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0)
		fold_cpa_line(line, s);
	free(line);
	fclose(f);
	return 0;
}

/* ---- perf --------------------------------------------------------------------------------- */

struct perf_sample {
	char comm[64];
	char leaf[512];
	bool any, complete, user, user_known;
};

static void perf_sample_end(struct perf_sample *p, struct fold_side *s)
{
	s->samples++;
	if (p->complete)
		s->complete++;
	tally_add(&s->self, p->any ? fold_self_key(p->leaf) : "[unknown]", 1);
	if (!p->user)
		return;
	s->user++;
	s->user_cfi++; /* perf does not tell a binary without CFI apart */
	if (p->complete)
		s->user_cfi_rooted++;
	if (p->user_known)
		s->user_known_leaf++;
	else
		tally_add(&s->unknown_comm, p->comm, 1);
}

/* "comm pid/tid" (comm may hold blanks): everything before the last field. */
static void perf_header(const char *line, struct perf_sample *p)
{
	size_t n = strcspn(line, "\n");

	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	while (n && line[n - 1] != ' ' && line[n - 1] != '\t')
		n--;
	while (n && (line[n - 1] == ' ' || line[n - 1] == '\t'))
		n--;
	snprintf(p->comm, sizeof(p->comm), "%.*s", (int)n, line + strspn(line, " \t"));
}

/* "\t    7f12ab sym+0x10 (/usr/lib/libc.so.6)": ip, sym, dso. */
static void perf_frame(char *line, struct perf_sample *p)
{
	char *q, *sym, *dso = NULL, *end;
	unsigned long long ip;

	line[strcspn(line, "\n")] = 0;
	q = line + strspn(line, " \t");
	ip = strtoull(q, &end, 16);
	if (end == q)
		return;
	sym = end + strspn(end, " \t");
	end = sym + strlen(sym);
	if (end > sym && end[-1] == ')') {
		char *open = strrchr(sym, '(');

		/* the dso is the last "(...)" after a blank */
		if (open && open > sym && open[-1] == ' ') {
			open[-1] = 0;
			end[-1] = 0;
			dso = open + 1;
		}
	}
	if (!dso)
		sym[strcspn(sym, " ")] = 0;
	if (!p->any)
		snprintf(p->leaf, sizeof(p->leaf), "%s", sym);
	p->any = true;
	p->complete = p->complete || fold_is_root(sym);
	/* The innermost user frame: the first one below the kernel's half. */
	if (ip < 0x800000000000ull && !p->user) {
		p->user = true;
		p->user_known = !dso || strcmp(dso, "[unknown]");
	}
}

int fold_perf_stream(FILE *f, struct fold_side *s)
{
	struct perf_sample p = {0};
	char *line = NULL;
	size_t cap = 0;
	bool in = false;

	for (;;) {
		ssize_t n = getline(&line, &cap, f);

		if (n <= 0 || line[0] == '\n') {
			if (in)
				perf_sample_end(&p, s);
			in = false;
			if (n <= 0)
				break;
			continue;
		}
		if (!in) {
			in = true;
			memset(&p, 0, sizeof(p));
			perf_header(line, &p);
			continue;
		}
		perf_frame(line, &p);
	}
	free(line);
	return 0;
}

int fold_perf_file(const char *path, struct fold_side *s)
{
	FILE *f = fopen(path, "re");
	int r;

	if (!f)
		return -errno;
	r = fold_perf_stream(f, s);
	fclose(f);
	return r;
}
