// SPDX-License-Identifier: MIT
/*
 * JIT symbol maps (/tmp/perf-PID.map, the format perf defined and every JIT
 * writes): parse, sort, look up. The per-pid state that holds them (and the
 * env label, read from /proc/PID/environ with common/envlabel.c's rule)
 * lives in symd.c.
 */
#include "procinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "names.h"

#define JIT_FILE_MAX (256u << 20)

struct jitsym {
	uint64_t start;
	uint64_t size;
	uint32_t name;
	uint32_t line; /* later lines win at the same start (code was replaced) */
};

struct jitmap {
	struct jitsym *syms;
	uint32_t n;
	char *pool;
	size_t pool_len;
};

void jitmap__free(struct jitmap *j)
{
	if (!j)
		return;
	free(j->syms);
	free(j->pool);
	free(j);
}

size_t jitmap__bytes(const struct jitmap *j)
{
	return sizeof(*j) + (size_t)j->n * sizeof(*j->syms) + j->pool_len;
}

static int jitsym_cmp(const void *a, const void *b)
{
	const struct jitsym *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->line > y->line ? -1 : x->line < y->line;
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

int jitmap__load(const char *path, size_t max_bytes, const uint32_t *uids, struct jitmap **ret)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	_cleanup_free_ char *buf = NULL;
	struct jitmap *j;
	struct stat st;
	size_t len = 0, pos = 0, buf_cap = 0;
	uint32_t cap = 0, line = 0;
	char *p, *end;
	int err;

	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno; /* a symlink is nobody's map */
	if (fstat(fd, &st) < 0)
		return -errno;
	err = jitmap_trusted(&st, uids);
	if (err < 0)
		return err;
	max_bytes = MIN(max_bytes, (size_t)JIT_FILE_MAX);
	if ((uint64_t)st.st_size + 1 + sizeof(*j) > max_bytes)
		return -EFBIG;
	/* Read up to the size seen: the JIT appends while we read. */
	err = read_full_fd(fd, READ_FULL_TRUNCATE, (size_t)st.st_size, &buf, &buf_cap, &len);
	if (err < 0)
		return err;

	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	/* The names are the file's bytes, NUL-terminated in place. */
	j->pool = TAKE_PTR(buf);
	j->pool_len = len + 1;
	for (p = j->pool, end = j->pool + len; p < end; p = p + pos + 1, line++) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *q, *r;
		uint64_t start, size;

		pos = nl ? (size_t)(nl - p) : (size_t)(end - p);
		p[pos] = '\0';
		start = strtoull(p, &q, 16);
		if (q == p || *q != ' ')
			continue;
		size = strtoull(q + 1, &r, 16);
		if (r == q + 1 || *r != ' ' || !r[1] || size == 0)
			continue;
		if (j->n == cap) {
			/* The entries count in max_bytes too: grow to what is left. */
			size_t left =
				(max_bytes - j->pool_len - sizeof(*j)) / sizeof(struct jitsym);
			struct jitsym *s;

			if (cap >= SYMD_MAX_JIT_SYMS)
				break;
			cap = (uint32_t)MIN(MIN(cap ? (size_t)cap * 2 : 1024, left),
					    (size_t)SYMD_MAX_JIT_SYMS);
			if (cap <= j->n) {
				jitmap__free(j);
				return -EFBIG;
			}
			s = realloc(j->syms, cap * sizeof(*s));
			if (!s) {
				jitmap__free(j);
				return -ENOMEM;
			}
			j->syms = s;
		}
		if (strlen(r + 1) > SYMD_MAX_NAME)
			r[1 + SYMD_MAX_NAME] = '\0';
		j->syms[j->n++] = (struct jitsym){
			.start = start,
			.size = size,
			.name = (uint32_t)(r + 1 - j->pool),
			.line = line,
		};
	}
	if (j->n)
		qsort(j->syms, j->n, sizeof(*j->syms), jitsym_cmp);
	*ret = j;
	return 0;
}

const char *jitmap__lookup(const struct jitmap *j, uint64_t pc, uint64_t *ret_start)
{
	uint32_t lo = 0, hi = j->n, i, back;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (j->syms[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Sorted by start, newest line first among equals: walk back over the
	 * run that starts at or below pc. */
	for (i = lo, back = 0; i > 0 && back < 16; i--, back++) {
		const struct jitsym *s = &j->syms[i - 1];

		if (pc - s->start < s->size) {
			uint32_t k = i - 1;

			/* prefer the newest entry with the same start */
			while (k > 0 && j->syms[k - 1].start == s->start)
				k--;
			if (pc - j->syms[k].start < j->syms[k].size)
				s = &j->syms[k];
			*ret_start = s->start;
			return j->pool + s->name;
		}
	}
	return NULL;
}
