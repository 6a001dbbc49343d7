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

#include "store.h"
#include "common/macro.h"
#include "store_fmt.h"

struct rdir {
	char name[256];
	int64_t day; /* local day number of its name, or -1 */
};

static int rdir_cmp(const void *a, const void *b)
{
	return strcmp(((const struct rdir *)a)->name, ((const struct rdir *)b)->name);
}

static int64_t name_day(const char *name)
{
	unsigned int yy, mm, dd;
	struct tm tm = {0};
	time_t t;

	if (sscanf(name, "cpa_%2u%2u%2u", &yy, &mm, &dd) != 3 || mm < 1 || mm > 12 || dd < 1 ||
	    dd > 31)
		return -1;
	tm.tm_year = 100 + (int)yy;
	tm.tm_mon = (int)mm - 1;
	tm.tm_mday = (int)dd;
	tm.tm_hour = 12; /* noon: immune to DST edges */
	tm.tm_isdst = -1;
	t = mktime(&tm);
	return t == (time_t)-1 ? -1 : store_fmt__local_day(t);
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

/* Oldest segment of a dir below limit (0 = any); 0 if none. */
static uint32_t oldest_seg(const char *path, uint32_t limit)
{
	DIR *d = opendir(path);
	struct dirent *de;
	uint32_t best = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		unsigned int no;

		if (sscanf(de->d_name, "seg_%u.cps", &no) != 1 || !no)
			continue;
		if (limit && no >= limit)
			continue;
		if (!best || no < best)
			best = no;
	}
	closedir(d);
	return best;
}

int store_retention__run(const char *root, uint32_t keep_days, uint64_t max_bytes,
			 const char *keep_dir, uint32_t keep_seg, uint64_t now_ns)
{
	struct rdir *dirs = NULL;
	uint32_t n = 0, cap = 0, i;
	char kd[PATH_MAX] = "";
	int64_t today = store_fmt__local_day((int64_t)(now_ns / 1000000000ULL));
	uint64_t total = 0;
	DIR *d = opendir(root);
	struct dirent *de;
	int removed = 0;

	if (!d)
		return -errno;
	if (keep_dir && !realpath(keep_dir, kd))
		snprintf(kd, sizeof(kd), "%s", keep_dir);
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "cpa_", 4) || strlen(de->d_name) >= sizeof(dirs->name))
			continue;
		if (n == cap) {
			struct rdir *nd = realloc(dirs, (cap ? cap * 2 : 16) * sizeof(*dirs));

			if (!nd) {
				closedir(d);
				free(dirs);
				return -ENOMEM;
			}
			dirs = nd;
			cap = cap ? cap * 2 : 16;
		}
		snprintf(dirs[n].name, sizeof(dirs[n].name), "%s", de->d_name);
		dirs[n].day = name_day(de->d_name);
		n++;
	}
	closedir(d);
	if (n)
		qsort(dirs, n, sizeof(*dirs), rdir_cmp);

	for (i = 0; i < n; i++) {
		char p[PATH_MAX], rp[PATH_MAX];
		bool is_keep;

		snprintf(p, sizeof(p), "%s/%s", root, dirs[i].name);
		is_keep = kd[0] && realpath(p, rp) && !strcmp(rp, kd);
		if (!is_keep && keep_days && dirs[i].day >= 0 &&
		    dirs[i].day <= today - (int64_t)keep_days) {
			removed += remove_dir(p);
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

			snprintf(sp, sizeof(sp), "%s/seg_%06u.cps", p, seg);
			if (stat(sp, &sb) < 0 || unlink(sp) < 0)
				break;
			total -= MIN(total, (uint64_t)sb.st_blocks * 512);
			removed++;
		}
		if (!is_keep && !oldest_seg(p, 0)) {
			uint64_t rest = dir_bytes(p);

			removed += remove_dir(p);
			total -= MIN(total, rest);
		}
	}
	free(dirs);
	return removed;
}

int store_retention__trim_oldest(const char *root, const char *keep_dir, uint32_t keep_seg)
{
	DIR *d = opendir(root);
	struct dirent *de;
	uint64_t total = 0;

	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char p[PATH_MAX + 256];

		if (strncmp(de->d_name, "cpa_", 4))
			continue;
		snprintf(p, sizeof(p), "%s/%s", root, de->d_name);
		total += dir_bytes(p);
	}
	closedir(d);
	if (!total)
		return 0;
	/* A budget one byte under what is there removes exactly the oldest file set. */
	return store_retention__run(root, 0, total - 1, keep_dir, keep_seg, 0);
}
