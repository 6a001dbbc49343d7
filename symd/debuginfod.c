// SPDX-License-Identifier: MIT
/*
 * debuginfod client: fetches the debug file of a binary that has no symbol
 * table, by build-id, in a thread of its own, never on the sampling path.
 *
 * symd asks (dfetch__want) when a binary it loaded has neither .symtab nor a
 * local debug file; the thread downloads with elfutils' libdebuginfod into
 * a cache dir of ours (<cache>/<build-id hex>/debuginfo, libdebuginfod's own
 * layout), trims that dir to its byte cap, and reports the build-id
 * (dfetch__done). symd then forgets the binary, and its next load finds the
 * file through symd_paths.debuginfod_cache like any build-id debug file: the
 * samples taken after the fetch are named, none waits for it.
 *
 * libdebuginfod (and libcurl under it) is dlopen()ed only when a URL is
 * configured: a symd without debuginfod maps neither.
 */
#include "debuginfod.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/macro.h"
#include "shm/records.h"

#define DF_QMAX	   64u	 /* build-ids waiting for the thread */
#define DF_ASKED   4096u /* build-ids asked once per lifetime (open addressing) */
#define DF_MAX_ENT 4096u /* cache entries considered when trimming */

struct dreq {
	uint8_t id[CPA_BUILD_ID_MAX];
	uint8_t len;
};

struct dfetch {
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started;
	bool stop; /* under mu; read unlocked by the progress callback too */
	struct dreq q[DF_QMAX];
	uint32_t qhead, qn;
	struct dreq done[DF_QMAX];
	uint32_t ndone;
	uint64_t asked[DF_ASKED]; /* build-id hashes, 0 = empty */
	uint32_t nasked;
	struct dfetch_stats st;
	char cache[PATH_MAX];
	uint64_t cap;

	void *dl;
	debuginfod_client *(*begin)(void);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
	void (*set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
	void (*end)(debuginfod_client *);
};

/* The fetching thread's own object, for the progress callback. */
static __thread struct dfetch *df_self;

/* Progress callback: a non-zero return aborts the transfer (symd leaving). */
static int df_abort(debuginfod_client *c, long a, long b)
{
	(void)c;
	(void)a;
	(void)b;
	return df_self && __atomic_load_n(&df_self->stop, __ATOMIC_RELAXED);
}

struct trim_ent {
	int64_t mtime;
	uint64_t size;
	char name[2 * CPA_BUILD_ID_MAX + 1];
};

static int trim_cmp(const void *a, const void *b)
{
	const struct trim_ent *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/* Oldest fetched files first until the dir is under its cap. */
static void df_trim(struct dfetch *df)
{
	_cleanup_free_ struct trim_ent *v = calloc(DF_MAX_ENT, sizeof(*v));
	uint64_t total = 0;
	uint32_t n = 0, i;
	struct dirent *de;
	DIR *d;

	if (!v || !(d = opendir(df->cache)))
		return;
	while ((de = readdir(d)) && n < DF_MAX_ENT) {
		char p[PATH_MAX + 300];
		struct stat sb;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(v[0].name))
			continue;
		snprintf(p, sizeof(p), "%s/%s/debuginfo", df->cache, de->d_name);
		if (stat(p, &sb) < 0 || !S_ISREG(sb.st_mode))
			continue;
		v[n] = (struct trim_ent){.mtime = sb.st_mtime, .size = (uint64_t)sb.st_size};
		memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1); /* length checked above */
		total += v[n].size;
		n++;
	}
	closedir(d);
	if (total <= df->cap)
		return;
	qsort(v, n, sizeof(*v), trim_cmp);
	for (i = 0; i < n && total > df->cap; i++) {
		char p[PATH_MAX + 300];

		snprintf(p, sizeof(p), "%s/%s/debuginfo", df->cache, v[i].name);
		if (unlink(p) == 0) {
			total -= v[i].size;
			df->st.trimmed++;
		}
	}
}

static void *df_main(void *arg)
{
	struct dfetch *df = arg;
	debuginfod_client *c = df->begin();

	df_self = df;
	if (c)
		df->set_progressfn(c, df_abort);
	pthread_mutex_lock(&df->mu);
	for (;;) {
		struct dreq r;
		char *path = NULL;
		int fd;

		while (!df->stop && !df->qn)
			pthread_cond_wait(&df->cv, &df->mu);
		if (df->stop)
			break;
		r = df->q[df->qhead];
		df->qhead = (df->qhead + 1) % DF_QMAX;
		df->qn--;
		pthread_mutex_unlock(&df->mu);

		fd = c ? df->find_debuginfo(c, r.id, r.len, &path) : -ENOSYS;
		if (fd >= 0) {
			close(fd);
			free(path);
			df_trim(df);
		}
		pthread_mutex_lock(&df->mu);
		if (fd >= 0) {
			df->st.fetched++;
			if (df->ndone < DF_QMAX)
				df->done[df->ndone++] = r;
		} else {
			df->st.failed++;
		}
	}
	pthread_mutex_unlock(&df->mu);
	if (c)
		df->end(c);
	return NULL;
}

int dfetch__new(const char *urls, const char *cache_dir, uint64_t cap_bytes, struct dfetch **ret)
{
	struct dfetch *df;
	int r;

	if (!urls || !*urls)
		return -EINVAL;
	df = calloc(1, sizeof(*df));
	if (!df)
		return -ENOMEM;
	pthread_mutex_init(&df->mu, NULL);
	pthread_cond_init(&df->cv, NULL);
	snprintf(df->cache, sizeof(df->cache), "%s", cache_dir);
	df->cap = cap_bytes;
	if (mkdir(cache_dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		goto fail;
	}
	df->dl = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!df->dl) {
		r = -ENOENT;
		goto fail;
	}
	df->begin = (debuginfod_client * (*)(void)) dlsym(df->dl, "debuginfod_begin");
	df->find_debuginfo = (int (*)(debuginfod_client *, const unsigned char *, int,
				      char **))dlsym(df->dl, "debuginfod_find_debuginfo");
	df->set_progressfn = (void (*)(debuginfod_client *, debuginfod_progressfn_t))dlsym(
		df->dl, "debuginfod_set_progressfn");
	df->end = (void (*)(debuginfod_client *))dlsym(df->dl, "debuginfod_end");
	if (!df->begin || !df->find_debuginfo || !df->set_progressfn || !df->end) {
		r = -ENOSYS;
		goto fail;
	}
	/* libdebuginfod takes its settings from the environment only; symd
	 * is a process of its own and sets them before its thread starts. */
	if (setenv("DEBUGINFOD_URLS", urls, 1) < 0 ||
	    setenv("DEBUGINFOD_CACHE_PATH", cache_dir, 1) < 0 ||
	    setenv("DEBUGINFOD_TIMEOUT", "30", 0) < 0) {
		r = -errno;
		goto fail;
	}
	r = -pthread_create(&df->thr, NULL, df_main, df);
	if (r < 0)
		goto fail;
	df->started = true;
	*ret = df;
	return 0;
fail:
	dfetch__free(df);
	return r;
}

void dfetch__free(struct dfetch *df)
{
	if (!df)
		return;
	if (df->started) {
		pthread_mutex_lock(&df->mu);
		__atomic_store_n(&df->stop, true, __ATOMIC_RELAXED);
		pthread_cond_signal(&df->cv);
		pthread_mutex_unlock(&df->mu);
		pthread_join(df->thr, NULL);
	}
	/* df->dl stays loaded: libcurl under it is not made to be unloaded
	 * (its global state would leak, or dangle), and symd loads it once. */
	pthread_cond_destroy(&df->cv);
	pthread_mutex_destroy(&df->mu);
	free(df);
}

void dfetch__want(struct dfetch *df, const uint8_t *id, uint8_t len)
{
	uint64_t h;
	uint32_t i;

	if (!df || len < 2 || len > CPA_BUILD_ID_MAX)
		return;
	h = hash64(id, len) | 1;
	pthread_mutex_lock(&df->mu);
	for (i = (uint32_t)h % DF_ASKED;; i = (i + 1) % DF_ASKED) {
		if (df->asked[i] == h)
			goto out; /* asked once per lifetime, answered or not */
		if (!df->asked[i])
			break;
	}
	if (df->nasked >= DF_ASKED / 2 || df->qn >= DF_QMAX) {
		df->st.dropped++;
		goto out;
	}
	df->asked[i] = h;
	df->nasked++;
	memcpy(df->q[(df->qhead + df->qn) % DF_QMAX].id, id, len);
	df->q[(df->qhead + df->qn) % DF_QMAX].len = len;
	df->qn++;
	df->st.asked++;
	pthread_cond_signal(&df->cv);
out:
	pthread_mutex_unlock(&df->mu);
}

bool dfetch__done(struct dfetch *df, uint8_t *id, uint8_t *len)
{
	bool got = false;

	if (!df)
		return false;
	pthread_mutex_lock(&df->mu);
	if (df->ndone) {
		df->ndone--;
		memcpy(id, df->done[df->ndone].id, df->done[df->ndone].len);
		*len = df->done[df->ndone].len;
		got = true;
	}
	pthread_mutex_unlock(&df->mu);
	return got;
}

void dfetch__stats(struct dfetch *df, struct dfetch_stats *ret)
{
	pthread_mutex_lock(&df->mu);
	*ret = df->st;
	pthread_mutex_unlock(&df->mu);
}
