/* SPDX-License-Identifier: MIT */
/*
 * cpa-push: tails a store and posts each interval's profile (pprof) to an
 * existing backend: Pyroscope's /ingest or Parca's /profiles/writeraw
 * (docs/push.md). Its own process: it
 * only reads the store (sealed blocks), so a slow or absent backend never
 * touches the pipeline.
 */
#ifndef CPA_PUSH_H
#define CPA_PUSH_H

#include <stdbool.h>
#include <stdint.h>

struct push_opts {
	const char *root;   /* the store root (--store_dir of the monitor) */
	const char *url;    /* backend base URL, e.g. http://pyroscope:4040 */
	const char *name;   /* application name (default "cpa.cpu") */
	const char *host;   /* host label (default: hostname) */
	const char *org_id; /* X-Scope-OrgID, NULL = none */
	uint32_t interval;  /* seconds per upload (default 10) */
	uint32_t backlog;   /* windows kept when the backend is down (default 360) */
	uint32_t retry_ms;  /* first retry delay after a failed post (default 1000) */
	bool parca;	    /* Parca's /profiles/writeraw instead of Pyroscope's /ingest */
	bool once;	    /* exit when caught up */
	uint32_t timeout;   /* --once: seconds a failing post is retried (default 60) */
	long max_posts;	    /* exit after this many posts (tests), 0 = no limit */
};

struct push_stats {
	uint64_t posts, post_errors, windows_empty, windows_dropped;
	int64_t pos; /* next window's start (unix seconds) */
};

/*
 * 0 when stopped (signal, --once caught up, max_posts), or -errno (logged):
 * with --once, -ETIMEDOUT when no post was accepted for o->timeout seconds and
 * -EREMOTEIO when the backend refused a post for good (a 3xx or 4xx but 408,
 * 425, 429); either logs one line naming the windows not posted.
 */
int push__run(const struct push_opts *o, struct push_stats *ret);

#endif /* CPA_PUSH_H */
