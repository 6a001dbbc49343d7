/* SPDX-License-Identifier: MIT */
/*
 * The benches' common reading of stacks: `cpa show` folded output and
 * `perf script` text, tallied the same way so that cpa and perf can be put
 * side by side (bench_fidelity on one program, bench_churn on the whole
 * machine). No logging: the readers return 0 or -errno.
 */
#ifndef CPA_BENCH_FOLD_H
#define CPA_BENCH_FOLD_H

#include <stdbool.h>
#include <stdio.h>

#define FOLD_MAX_NAMES 4096

/* Counts by name (first FOLD_MAX_NAMES names; later new names are not counted). */
struct tally {
	char *names[FOLD_MAX_NAMES];
	double counts[FOLD_MAX_NAMES];
	int n;
};

void tally_add(struct tally *t, const char *name, double c);
double tally_get(const struct tally *t, const char *name);
void tally_free(struct tally *t);
/* The index of the k-th largest count not yet in used[], or -1. */
int tally_top(const struct tally *t, bool *used);

/* One profiler's view of a set of samples. */
struct fold_side {
	double samples;
	double complete; /* the stack holds a process or thread start (fold_is_root) */
	/* Samples with a user part (a user frame, or a user-side stop marker). */
	double user;
	double user_known_leaf; /* the innermost user frame names its module */
	/* User samples not stopped for want of CFI or at JIT code: those whose
	 * binaries have unwind information; and of them, the rooted ones. */
	double user_cfi;
	double user_cfi_rooted;
	struct tally self;	   /* leaf frame (fold_self_key) */
	struct tally stops;	   /* cpa's stop / degraded markers, by name */
	struct tally unknown_comm; /* user samples with an unknown leaf module, by comm */
};

void fold_side_free(struct fold_side *s);

/* _start, __libc_start_main(_impl), __libc_start_call_main, start_thread,
 * clone3, clone: perf's unwinder ends at __libc_start_call_main (libc's CFI
 * marks it outermost); cpa continues to __libc_start_main and _start. */
bool fold_is_root(const char *frame);
/* cpa's "lib+0x1234" and "0x1234 [lib]" and perf's "[unknown]" alike. */
const char *fold_self_key(const char *frame);

/* One line of `cpa show` folded output, "comm:pid;root;...;leaf; COUNT"
 * (modified in place). Markers are CPA's "<# NO MAP #>" or the store's
 * "[unwind stopped: no map]" / "[degraded: ...]". */
void fold_cpa_line(char *line, struct fold_side *s);
int fold_cpa_file(const char *path, struct fold_side *s);

/* `perf script -F comm,pid,tid,ip,sym,dso` (tid and dso optional): a header
 * line, then one frame per line (leaf first, "ip sym (dso)"), a blank line
 * between samples. A frame is a user frame by its address (below the
 * kernel's half); its module is unknown when the dso is "[unknown]". */
int fold_perf_stream(FILE *f, struct fold_side *s);
int fold_perf_file(const char *path, struct fold_side *s);

#endif /* CPA_BENCH_FOLD_H */
