// SPDX-License-Identifier: MIT
/* Store dir and segment names, made and parsed once (store_dir_pvt.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/log.h"
#include "common/safepath.h"

#include "store.h"
#include "store_dir_pvt.h"

bool store_dir__seg_name(const char *name, uint32_t *ret_no)
{
	const char *p = name + 4;
	char canon[32];
	uint64_t no = 0;

	if (strncmp(name, "seg_", 4) || *p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		no = no * 10 + (uint64_t)(*p - '0');
		if (no > UINT32_MAX)
			return false;
	}
	if (strcmp(p, ".cps") || !no)
		return false;
	/* Strict: only the name the writer makes (seg_%06u.cps, from 1), so
	 * seg_1.cps or seg_0000001.cps beside seg_000001.cps is not a second
	 * copy of segment 1. */
	snprintf(canon, sizeof(canon), "seg_%06u.cps", (uint32_t)no);
	if (strcmp(name, canon))
		return false;
	*ret_no = (uint32_t)no;
	return true;
}

void store_dir__seg_path(char *buf, size_t len, const char *dir, uint32_t no)
{
	snprintf(buf, len, "%s/seg_%06u.cps", dir, no);
}

/* Every entry of dir but "." and "..", until fn returns non-zero. */
static int for_each_entry(const char *dir, store_name_fn fn, void *ctx)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int r = 0;

	if (!d)
		return -errno;
	while (!r && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			r = fn(ctx, de->d_name);
	closedir(d);
	return r;
}

struct seg_walk {
	store_seg_fn fn;
	void *ctx;
};

static int seg_entry(void *ctx, const char *name)
{
	struct seg_walk *w = ctx;
	uint32_t no;

	return store_dir__seg_name(name, &no) ? w->fn(w->ctx, name, no) : 0;
}

int store_dir__for_each_seg(const char *dir, store_seg_fn fn, void *ctx)
{
	struct seg_walk w = {fn, ctx};

	return for_each_entry(dir, seg_entry, &w);
}

struct store_walk {
	store_name_fn fn;
	void *ctx;
};

static int store_entry(void *ctx, const char *name)
{
	struct store_walk *w = ctx;

	return strncmp(name, STORE_DIR_PREFIX, strlen(STORE_DIR_PREFIX)) ? 0 : w->fn(w->ctx, name);
}

int store_dir__for_each_store(const char *root, store_name_fn fn, void *ctx)
{
	struct store_walk w = {fn, ctx};

	return for_each_entry(root, store_entry, &w);
}

static int store_file_entry(void *ctx, const char *name)
{
	(void)ctx;
	return !strncmp(name, "seg_", 4) || !strcmp(name, "index");
}

int store_dir__conf_get(const char *dir, const char *key, char *buf, size_t len)
{
	char path[PATH_MAX], line[1024];
	size_t kl = strlen(key), n;
	int r = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "%s/conf", dir);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, key, kl) || line[kl] != ':' || line[kl + 1] != ' ')
			continue;
		n = strcspn(line + kl + 2, "\n");
		r = n < len ? 0 : -ENAMETOOLONG;
		if (r == 0)
			snprintf(buf, len, "%.*s", (int)n, line + kl + 2);
	}
	fclose(f);
	return r;
}

uint64_t store_dir__run_id(const char *dir)
{
	char v[32];

	return store_dir__conf_get(dir, "run_id", v, sizeof(v)) < 0 ? 0 : strtoull(v, NULL, 10);
}

bool store_dir__is_store(const char *path)
{
	return for_each_entry(path, store_file_entry, NULL) > 0;
}

#define DAY_NAME_LEN 10 /* "cpa_YYMMDD" */

/* name: a run dir's, cpa_YYMMDD or cpa_YYMMDD_... */
static bool run_dir_name(const char *name)
{
	if (strncmp(name, STORE_DIR_PREFIX, 4) || strspn(name + 4, "0123456789") < 6)
		return false;
	return !name[DAY_NAME_LEN] || name[DAY_NAME_LEN] == '_';
}

struct list_ctx {
	const char *root;
	const char *day; /* NULL: the store dirs; else the run dirs of this day or later */
	char **names;
	uint32_t n, cap;
};

static int list_one(void *ctx, const char *name)
{
	struct list_ctx *c = ctx;
	char p[PATH_MAX + 256];

	snprintf(p, sizeof(p), "%s/%s", c->root, name);
	if (c->day ? !run_dir_name(name) || strncmp(name, c->day, DAY_NAME_LEN) < 0
		   : !store_dir__is_store(p))
		return 0;
	if (array_grow32((void **)&c->names, &c->cap, (size_t)c->n + 1, sizeof(*c->names)) < 0)
		return -ENOMEM;
	c->names[c->n] = strdup(name);
	if (!c->names[c->n])
		return -ENOMEM;
	c->n++;
	return 0;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void store_root__list_free(char **names, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
}

/* list_ctx's names under root, sorted. 0 or -errno. */
static int list_names(const char *root, const char *day, char ***ret_names, uint32_t *ret_n)
{
	struct list_ctx c = {.root = root, .day = day};
	int r = store_dir__for_each_store(root, list_one, &c);

	if (r < 0) {
		store_root__list_free(c.names, c.n);
		return r;
	}
	if (c.n)
		qsort(c.names, c.n, sizeof(*c.names), str_cmp);
	*ret_names = c.names;
	*ret_n = c.n;
	return 0;
}

int store_root__list(const char *root, char ***ret_names, uint32_t *ret_n)
{
	return list_names(root, NULL, ret_names, ret_n);
}

int store_root__for_each_shut(const char *root, const char *picked, store_shut_fn fn, void *ctx)
{
	const char *day = strrchr(picked, '/') ? strrchr(picked, '/') + 1 : picked;
	char p[PATH_MAX + 256], **names = NULL;
	uint32_t n = 0;
	int r = list_names(root, day, &names, &n), fd;

	for (uint32_t i = 0; r == 0 && i < n; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, names[i]);
		fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd >= 0)
			close(fd);
		else if (errno != ENOTDIR && errno != ENOENT)
			fn(ctx, p, errno);
	}
	store_root__list_free(names, n);
	return r;
}

int64_t store_dir__local_day(int64_t t)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!localtime_r(&tt, &tm))
		return t / 86400;
	/* Days since 1970-01-01 of the local calendar date (civil-from-days inverse). */
	{
		int64_t y = tm.tm_year + 1900, m = tm.tm_mon + 1, d = tm.tm_mday;
		int64_t era, yoe, doy, doe;

		y -= m <= 2;
		era = (y >= 0 ? y : y - 399) / 400;
		yoe = y - era * 400;
		doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
		doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
		return era * 146097 + doe - 719468;
	}
}

void store_dir__day_name(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!localtime_r(&tt, &tm))
		memset(&tm, 0, sizeof(tm));
	/* CPA's two-digit year; dirs of 2000-2099 sort in time order. */
	snprintf(buf, len, STORE_DIR_PREFIX "%02d%02d%02d", tm.tm_year % 100, tm.tm_mon + 1,
		 tm.tm_mday);
}

int64_t store_dir__name_day(const char *name)
{
	unsigned int yy, mm, dd;
	struct tm tm = {0};
	time_t t;

	if (sscanf(name, STORE_DIR_PREFIX "%2u%2u%2u", &yy, &mm, &dd) != 3 || mm < 1 || mm > 12 ||
	    dd < 1 || dd > 31)
		return -1;
	tm.tm_year = 100 + (int)yy;
	tm.tm_mon = (int)mm - 1;
	tm.tm_mday = (int)dd;
	tm.tm_hour = 12; /* noon: immune to DST edges */
	tm.tm_isdst = -1;
	t = mktime(&tm);
	return t == (time_t)-1 ? -1 : store_dir__local_day(t);
}

static int read_pid_note(const char *path)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return atoi(buf);
}

/* The holder's pid beside the lock, for the message of the one refused. Best
 * effort: the lock, not the note, is what counts (a full disk may refuse it). */
static void write_pid_note(int dfd, const char *path)
{
	char buf[32], err[PATH_MAX + 128];
	int fd = safe_path__openat(dfd, path, STORE_LOCK_NAME, O_WRONLY | O_CREAT | O_TRUNC, 0640,
				   err, sizeof(err));
	int n;

	if (fd < 0)
		return;
	n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (write(fd, buf, (size_t)n) < 0) {
		/* nothing: see above */
	}
	close(fd);
}

int store_root__lock(const char *root, int *ret_pid)
{
	char note[PATH_MAX + 16], err[PATH_MAX + 128];
	int fd;

	if (ret_pid)
		*ret_pid = 0;
	/* Walked and created without following another user's link
	 * (safepath.h). The root directory itself is locked: a lock file could
	 * be deleted under us (that is how a pid file lock was beaten), the
	 * root cannot while it holds the store. */
	fd = safe_path__dir(root, true, 0750, err, sizeof(err));
	if (fd < 0) {
		log_error("%s", err);
		return fd;
	}
	snprintf(note, sizeof(note), "%s/" STORE_LOCK_NAME, root);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno == EWOULDBLOCK ? -EBUSY : -errno;

		if (ret_pid)
			*ret_pid = read_pid_note(note);
		close(fd);
		return e;
	}
	write_pid_note(fd, note);
	return fd;
}
