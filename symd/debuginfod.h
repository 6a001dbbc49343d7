/* SPDX-License-Identifier: MIT */
/*
 * symd: debug files fetched by build-id from debuginfod servers, in a thread
 * of their own, into a capped disk cache (debuginfod.c).
 */
#ifndef CPA_SYMD_DEBUGINFOD_H
#define CPA_SYMD_DEBUGINFOD_H

#include <stdbool.h>
#include <stdint.h>

struct dfetch;
struct dfetch_stats {
	uint64_t asked;	  /* build-ids queued */
	uint64_t fetched; /* debug files now in the cache */
	uint64_t failed;  /* not found, server down, aborted */
	uint64_t dropped; /* not queued: queue or asked-set full */
	uint64_t trimmed; /* cached files removed to stay under the cap */
};
/* Start the fetching thread (libdebuginfod is dlopen()ed here). urls as in
 * DEBUGINFOD_URLS; cache_dir is created; files over cap_bytes are trimmed
 * oldest first. -ENOENT: no libdebuginfod.so.1. */
int dfetch__new(const char *urls, const char *cache_dir, uint64_t cap_bytes, struct dfetch **ret);
void dfetch__free(struct dfetch *df);
/* Queue a fetch (once per build-id per lifetime; never blocks on it). */
void dfetch__want(struct dfetch *df, const uint8_t *id, uint8_t len);
/* A build-id whose debug file arrived since the last call; false if none. */
bool dfetch__done(struct dfetch *df, uint8_t *id, uint8_t *len);
void dfetch__stats(struct dfetch *df, struct dfetch_stats *ret);

#endif /* CPA_SYMD_DEBUGINFOD_H */
