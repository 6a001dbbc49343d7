// SPDX-License-Identifier: MIT
/*
 * JIT symbol maps (/tmp/perf-PID.map, the format perf defined and every JIT
 * writes): parse, sort, look up, read what the JIT appended. The per-pid
 * state that holds them (and the env label, read from /proc/PID/environ with
 * common/envlabel.c's rule) lives in symd.c.
 *
 * A JIT appends a line per code object it makes; when it frees code and
 * reuses the range, the new code's line comes later in the file. So among
 * the entries that cover a pc, the last line wins, but only for samples
 * taken after it was written: each entry keeps the time of the read before
 * the one that found it (it was written after that), and a sample older
 * than that is named after the code the range held before.
 */
#include "jitmap.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "common/procroot.h"
#include "common/timeutil.h"
#include "names.h"

#define JIT_FILE_MAX (256u << 20)
#define JIT_BACK_MAX 64 /* overlapping entries looked at per lookup */

struct jitsym {
	uint64_t start;
	uint64_t size;
	uint64_t after_ns; /* written after this time (CLOCK_REALTIME), 0: any time */
	uint32_t name;
	uint32_t line; /* later lines win (code was replaced) */
};

struct jitmap {
	struct jitsym *syms; /* sorted by start, then line */
	uint64_t *maxend;    /* maxend[i]: the highest end of syms[0..i] */
	uint32_t n, cap, lines;
	char *pool; /* the file's bytes, lines NUL-terminated in place */
	size_t pool_len, pool_cap;
	uint64_t file_off; /* bytes parsed: up to the end of the last whole line */
	uint64_t read_ns;
	dev_t dev;
	ino_t ino;
};

void jitmap__free(struct jitmap *j)
{
	if (!j)
		return;
	free(j->syms);
	free(j->maxend);
	free(j->pool);
	free(j);
}

size_t jitmap__bytes(const struct jitmap *j)
{
	return sizeof(*j) + (size_t)j->cap * (sizeof(*j->syms) + sizeof(*j->maxend)) + j->pool_cap;
}

uint64_t jitmap__read_ns(const struct jitmap *j)
{
	return j->read_ns;
}

static int jitsym_cmp(const void *a, const void *b)
{
	const struct jitsym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

/* May this map name code of a process running as uids[0] (real) / uids[1]
 * (effective)? Its owner or root wrote it, and nobody else can. */
static int jitmap_trusted(const struct stat *st, const uint32_t *uids)
{
	if (!S_ISREG(st->st_mode))
		return -EBADMSG;
	if (!uids)
		return 0;
	if (st->st_uid != 0 && st->st_uid != uids[0] && st->st_uid != uids[1])
		return -EPERM;
	if (st->st_mode & S_IWOTH)
		return -EPERM;
	return 0;
}

static int jitmap_open(const char *root, const char *path, const uint32_t *uids, struct stat *st)
{
	int fd = proc_root_open(root, path, O_RDONLY | O_NOFOLLOW), err;

	/* A symlink is nobody's map; proc_root_open() opens regular files only. */
	if (fd < 0)
		return fd == -ELOOP ? -EPERM : fd;
	if (fstat(fd, st) < 0)
		err = -errno;
	else
		err = jitmap_trusted(st, uids);
	if (err < 0) {
		close(fd);
		return err;
	}
	return fd;
}

/* Room for one more entry, counted in max_bytes with the pool. */
static int jitmap_grow(struct jitmap *j, size_t max_bytes)
{
	size_t fixed = sizeof(*j) + j->pool_cap, per = sizeof(*j->syms) + sizeof(*j->maxend);
	size_t left = max_bytes > fixed ? (max_bytes - fixed) / per : 0;
	uint32_t cap;
	void *p;

	if (j->cap >= SYMD_MAX_JIT_SYMS)
		return -EFBIG;
	cap = (uint32_t)MIN(MIN(j->cap ? (size_t)j->cap * 2 : 1024, left),
			    (size_t)SYMD_MAX_JIT_SYMS);
	if (cap <= j->n)
		return -EFBIG;
	p = realloc(j->syms, cap * sizeof(*j->syms));
	if (!p)
		return -ENOMEM;
	j->syms = p;
	p = realloc(j->maxend, cap * sizeof(*j->maxend));
	if (!p)
		return -ENOMEM;
	j->maxend = p;
	j->cap = cap;
	return 0;
}

/* Parse the whole lines of pool[from, pool_len); a last partial one is read
 * again with the rest of its line. 1: new entries, 0: none, -errno. */
/* Is there an entry of the same code among the first n (sorted)? */
static bool jitmap_known(const struct jitmap *j, uint32_t n, uint64_t start, uint64_t size,
			 const char *name)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (j->syms[mid].start < start)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && j->syms[lo].start == start; lo++)
		if (j->syms[lo].size == size && !strcmp(j->pool + j->syms[lo].name, name))
			return true;
	return false;
}

static int jitmap_parse(struct jitmap *j, size_t from, size_t max_bytes, uint64_t after_ns,
			bool dedupe)
{
	char *p = j->pool + from, *end = j->pool + j->pool_len;
	uint32_t n0 = j->n;
	int err = 0;

	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *q, *r;
		uint64_t start, size;

		if (!nl)
			break; /* written half: the next read takes it whole */
		*nl = '\0';
		j->lines++;
		q = p;
		p = nl + 1;
		j->file_off += (uint64_t)(p - q);
		start = strtoull(q, &r, 16);
		if (r == q || *r != ' ')
			continue;
		q = r + 1;
		size = strtoull(q, &r, 16);
		if (r == q || *r != ' ' || !r[1] || size == 0 || start + size < start)
			continue;
		if (j->n == j->cap) {
			err = jitmap_grow(j, max_bytes);
			if (err < 0)
				break;
		}
		if (strlen(r + 1) > SYMD_MAX_NAME)
			r[1 + SYMD_MAX_NAME] = '\0';
		if (dedupe && jitmap_known(j, n0, start, size, r + 1))
			continue; /* a rewritten map: the code it had before */
		j->syms[j->n++] = (struct jitsym){
			.start = start,
			.size = size,
			.after_ns = after_ns,
			.name = (uint32_t)(r + 1 - j->pool),
			.line = j->lines,
		};
	}
	if (j->n != n0) {
		uint64_t m = 0;

		qsort(j->syms, j->n, sizeof(*j->syms), jitsym_cmp);
		for (uint32_t i = 0; i < j->n; i++) {
			m = MAX(m, j->syms[i].start + j->syms[i].size);
			j->maxend[i] = m;
		}
	}
	return err < 0 ? err : j->n != n0;
}

/* Read the file from j->file_off up to the size fstat saw, parse it. */
static int jitmap_read(struct jitmap *j, int fd, const struct stat *st, size_t max_bytes,
		       uint64_t after_ns, bool dedupe)
{
	size_t want, from, cap;
	ssize_t got;
	char *pool;

	max_bytes = MIN(max_bytes, (size_t)JIT_FILE_MAX);
	if ((uint64_t)st->st_size <= j->file_off)
		return 0;
	/* Read up to the size seen: the JIT appends while we read. */
	want = (size_t)((uint64_t)st->st_size - j->file_off);
	/* A partial line left by the last read is dropped from the pool and
	 * read again whole. */
	from = j->pool_len;
	while (from > 0 && j->pool[from - 1] != '\0')
		from--;
	cap = from + want + 1;
	if ((uint64_t)st->st_size + 1 + sizeof(*j) > max_bytes ||
	    cap + sizeof(*j) + (size_t)j->cap * (sizeof(*j->syms) + sizeof(*j->maxend)) > max_bytes)
		return -EFBIG;
	if (cap > j->pool_cap) {
		pool = realloc(j->pool, cap);
		if (!pool)
			return -ENOMEM;
		/* The names are offsets into the pool: they move with it. */
		j->pool = pool;
		j->pool_cap = cap;
	}
	got = read_upto(fd, j->pool + from, want, (off_t)j->file_off);
	if (got < 0)
		return (int)got;
	j->pool_len = from + (size_t)got;
	j->pool[j->pool_len] = '\0';
	return jitmap_parse(j, from, max_bytes, after_ns, dedupe);
}

int jitmap__load(const char *root, const char *path, size_t max_bytes, const uint32_t *uids,
		 struct jitmap **ret)
{
	_cleanup_close_ int fd = -1;
	struct jitmap *j;
	struct stat st;
	int err;

	fd = jitmap_open(root, path, uids, &st);
	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size + 1 + sizeof(*j) > MIN(max_bytes, (size_t)JIT_FILE_MAX))
		return -EFBIG;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->dev = st.st_dev;
	j->ino = st.st_ino;
	j->read_ns = clock_ns(CLOCK_REALTIME);
	err = jitmap_read(j, fd, &st, max_bytes, 0, false);
	if (err < 0) {
		jitmap__free(j);
		return err;
	}
	*ret = j;
	return 0;
}

int jitmap__update(struct jitmap *j, const char *root, const char *path, size_t max_bytes,
		   const uint32_t *uids, uint64_t now_ns, unsigned int flags)
{
	_cleanup_close_ int fd = -1;
	struct stat st;
	uint64_t prev = j->read_ns;
	bool reread = flags & JITMAP_REREAD;

	fd = jitmap_open(root, path, uids, &st);
	if (fd < 0)
		return fd;
	if (!reread &&
	    (st.st_dev != j->dev || st.st_ino != j->ino || (uint64_t)st.st_size < j->file_off))
		return -ESTALE;
	j->dev = st.st_dev;
	j->ino = st.st_ino;
	if (reread)
		j->file_off = 0;
	j->read_ns = MAX(now_ns, prev);
	return jitmap_read(j, fd, &st, max_bytes, prev, reread);
}

const char *jitmap__lookup_at(const struct jitmap *j, uint64_t pc, uint64_t time_ns,
			      uint64_t *ret_start)
{
	const struct jitsym *valid = NULL, *first = NULL, *s;
	uint32_t lo = 0, hi = j->n, i, back;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (j->syms[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Every entry at or below pc whose range may reach it: back while the
	 * highest end so far lies above pc. */
	for (i = lo, back = 0; i > 0 && back < JIT_BACK_MAX && j->maxend[i - 1] > pc; i--, back++) {
		s = &j->syms[i - 1];
		if (pc - s->start >= s->size)
			continue;
		if (!time_ns || s->after_ns < time_ns) {
			if (!valid || s->line > valid->line)
				valid = s;
		}
		if (!first || s->line < first->line)
			first = s;
	}
	s = valid ? valid : first;
	if (!s)
		return NULL;
	*ret_start = s->start;
	return j->pool + s->name;
}

const char *jitmap__lookup(const struct jitmap *j, uint64_t pc, uint64_t *ret_start)
{
	return jitmap__lookup_at(j, pc, 0, ret_start);
}
