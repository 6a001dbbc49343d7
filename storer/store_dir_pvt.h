/* SPDX-License-Identifier: MIT */
/*
 * Private to the store library: the names of the store on disk, made and
 * parsed in one place for the writer, the reader and retention.
 *
 *   <root>/cpa_YYMMDD[_start_HHMMSS]/    a store dir: one local day of one run
 *                                   conf, index, seg_NNNNNN.cps (NNNNNN from 1)
 *
 * Store dir names sort in time order (cpa_YYMMDD < cpa_YYMMDD_start_HHMMSS <
 * the next day), segments by number.
 */
#ifndef CPA_STORE_DIR_PVT_H
#define CPA_STORE_DIR_PVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_DIR_PREFIX "cpa_"
#define STORE_LOCK_NAME	 ".cpa-lock" /* store_root__lock(): the pid of the root lock's holder */

/* Exactly "seg_<decimal>.cps": true, with the number in *ret_no. */
bool store_dir__seg_name(const char *name, uint32_t *ret_no);
/* dir/seg_NNNNNN.cps of segment no. */
void store_dir__seg_path(char *buf, size_t len, const char *dir, uint32_t no);

/* Called per entry; a non-zero return stops the walk and is returned. */
typedef int (*store_seg_fn)(void *ctx, const char *name, uint32_t seg_no);
typedef int (*store_name_fn)(void *ctx, const char *name);

/* Every seg_*.cps in dir, in directory order. 0, fn's stop value, or -errno
 * when dir cannot be opened. */
int store_dir__for_each_seg(const char *dir, store_seg_fn fn, void *ctx);
/* Every cpa_* entry of root, in directory order (same returns). */
int store_dir__for_each_store(const char *root, store_name_fn fn, void *ctx);

/* run_id of a store dir's conf (the monitor run that writes it), 0 if none. */
uint64_t store_dir__run_id(const char *dir);

/* "cpa_YYMMDD" of the local day of unix second t. */
void store_dir__day_name(int64_t t, char *buf, size_t len);
/* Days since 1970-01-01 of the local calendar date of unix second t. */
int64_t store_dir__local_day(int64_t t);
/* Local day number of a cpa_YYMMDD... name, or -1 when it is not one. */
int64_t store_dir__name_day(const char *name);

#endif /* CPA_STORE_DIR_PVT_H */
