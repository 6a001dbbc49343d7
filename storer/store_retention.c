// SPDX-License-Identifier: MIT
/*
 * Retention over a store root, oldest first: whole cpa_* dirs older than the
 * day budget, then segment files until the size budget holds. Dir names sort
 * in time order (cpa_YYMMDD < cpa_YYMMDD_start_HHMMSS < next day), segments
 * by number. The segment being written, and anything after it, is never
 * touched; neither is its store dir's conf or index.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "store.h"
#include "store_dir_pvt.h"

struct rdir {
	char name[256];
	int64_t day; /* local day number of its name, or -1 */
};

static int rdir_cmp(const void *a, const void *b)
{
	return strcmp(((const struct rdir *)a)->name, ((const struct rdir *)b)->name);
}

static uint64_t dir_bytes(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	uint64_t sum = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char p[PATH_MAX + 256];
		struct stat sb;

		if (de->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
			sum += (uint64_t)sb.st_blocks * 512;
	}
	closedir(d);
	return sum;
}

/* Remove a whole store dir; returns files removed. */
static int remove_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char p[PATH_MAX + 256];

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
		if (unlink(p) == 0)
			n++;
	}
	closedir(d);
	rmdir(path);
	return n;
}

struct oldest {
	uint32_t limit, best;
};

static int seg_oldest(void *ctx, const char *name, uint32_t no)
{
	struct oldest *o = ctx;

	(void)name;
	if (no && (!o->limit || no < o->limit) && (!o->best || no < o->best))
		o->best = no;
	return 0;
}

/* Oldest segment of a dir below limit (0 = any); 0 if none. */
static uint32_t oldest_seg(const char *path, uint32_t limit)
{
	struct oldest o = {.limit = limit};

	store_dir__for_each_seg(path, seg_oldest, &o);
	return o.best;
}

/* Append name to the caller's ", "-separated list (NULL: not wanted); "..." once full. */
static void note(char *names, size_t len, const char *name)
{
	size_t n;

	if (!names || !len)
		return;
	n = strlen(names);
	if (n + strlen(name) + 2 + 4 >= len) {
		if (n + 4 < len && (n < 3 || strcmp(names + n - 3, "...")))
			snprintf(names + n, len - n, "%s...", n ? ", " : "");
		return;
	}
	snprintf(names + n, len - n, "%s%s", n ? ", " : "", name);
}

struct rdirs {
	struct rdir *v;
	uint32_t n, cap;
};

static int rdir_add(void *ctx, const char *name)
{
	struct rdirs *ds = ctx;

	if (strlen(name) >= sizeof(ds->v->name))
		return 0;
	if (array_grow32((void **)&ds->v, &ds->cap, (size_t)ds->n + 1, sizeof(*ds->v)) < 0)
		return -ENOMEM;
	snprintf(ds->v[ds->n].name, sizeof(ds->v[ds->n].name), "%s", name);
	ds->v[ds->n].day = store_dir__name_day(name);
	ds->n++;
	return 0;
}

int store_retention__run(const char *root, uint32_t keep_days, uint64_t max_bytes,
			 const char *keep_dir, uint32_t keep_seg, uint64_t now_ns, char *names,
			 size_t names_len)
{
	struct rdirs ds = {0};
	struct rdir *dirs;
	uint32_t n, i;
	char kd[PATH_MAX] = "";
	int64_t today = store_dir__local_day((int64_t)(now_ns / NSEC_PER_SEC));
	uint64_t total = 0;
	int removed = 0, r;

	if (names && names_len)
		names[0] = 0;
	if (keep_dir && !realpath(keep_dir, kd))
		snprintf(kd, sizeof(kd), "%s", keep_dir);
	r = store_dir__for_each_store(root, rdir_add, &ds);
	if (r < 0) {
		free(ds.v);
		return r;
	}
	dirs = ds.v;
	n = ds.n;
	if (n)
		qsort(dirs, n, sizeof(*dirs), rdir_cmp);

	for (i = 0; i < n; i++) {
		char p[PATH_MAX], rp[PATH_MAX];
		bool is_keep;

		snprintf(p, sizeof(p), "%s/%s", root, dirs[i].name);
		is_keep = kd[0] && realpath(p, rp) && !strcmp(rp, kd);
		/* Today and the keep_days days before it stay (CPA: now - (N+1) days). */
		if (!is_keep && keep_days && dirs[i].day >= 0 &&
		    dirs[i].day < today - (int64_t)keep_days) {
			removed += remove_dir(p);
			note(names, names_len, dirs[i].name);
			dirs[i].name[0] = 0;
			continue;
		}
		total += dir_bytes(p);
	}
	for (i = 0; max_bytes && total > max_bytes && i < n; i++) {
		char p[PATH_MAX], rp[PATH_MAX];
		bool is_keep;
		uint32_t seg;

		if (!dirs[i].name[0])
			continue;
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i].name);
		is_keep = kd[0] && realpath(p, rp) && !strcmp(rp, kd);
		while (total > max_bytes && (seg = oldest_seg(p, is_keep ? keep_seg : 0))) {
			char sp[PATH_MAX + 32];
			struct stat sb;

			store_dir__seg_path(sp, sizeof(sp), p, seg);
			if (stat(sp, &sb) < 0 || unlink(sp) < 0)
				break;
			total -= MIN(total, (uint64_t)sb.st_blocks * 512);
			removed++;
			note(names, names_len, sp + strlen(root) + 1);
		}
		if (!is_keep && !oldest_seg(p, 0)) {
			uint64_t rest = dir_bytes(p);

			removed += remove_dir(p);
			note(names, names_len, dirs[i].name);
			total -= MIN(total, rest);
		}
	}
	free(dirs);
	return removed;
}

struct sum {
	const char *root;
	uint64_t total;
};

static int sum_store(void *ctx, const char *name)
{
	struct sum *s = ctx;
	char p[PATH_MAX + 256];

	snprintf(p, sizeof(p), "%s/%s", s->root, name);
	s->total += dir_bytes(p);
	return 0;
}

int store_retention__trim_oldest(const char *root, const char *keep_dir, uint32_t keep_seg,
				 char *names, size_t names_len)
{
	struct sum s = {.root = root};
	uint64_t total;
	int r = store_dir__for_each_store(root, sum_store, &s);

	if (r < 0)
		return r;
	total = s.total;
	if (!total)
		return 0;
	/* A budget one byte under what is there removes exactly the oldest file set. */
	return store_retention__run(root, 0, total - 1, keep_dir, keep_seg, 0, names, names_len);
}

int store_root__remove(const char *root)
{
	DIR *d = opendir(root);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char p[PATH_MAX + 256];
		struct stat sb;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", root, de->d_name);
		if (lstat(p, &sb) < 0)
			continue;
		if (S_ISDIR(sb.st_mode))
			n += remove_dir(p);
		else if (unlink(p) == 0)
			n++;
	}
	closedir(d);
	if (rmdir(root) < 0)
		return -errno;
	return n;
}
