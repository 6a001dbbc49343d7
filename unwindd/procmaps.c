// SPDX-License-Identifier: MIT
#include "procmaps.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* At least one hex digit, at most 16; stops at the first non-digit. */
static bool parse_hex(const char **p, const char *end, uint64_t *ret)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0, d;

	while (s < end && (d = hexval(*s)) >= 0) {
		if (++n > 16)
			return false;
		v = v << 4 | (uint64_t)d;
		s++;
	}
	if (!n)
		return false;
	*p = s;
	*ret = v;
	return true;
}

static bool parse_dec(const char **p, const char *end, uint64_t *ret)
{
	const char *s = *p;
	uint64_t v = 0;
	int n = 0;

	while (s < end && *s >= '0' && *s <= '9') {
		if (++n > 20)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
		s++;
	}
	if (!n)
		return false;
	*p = s;
	*ret = v;
	return true;
}

static bool expect(const char **p, const char *end, char ch)
{
	if (*p >= end || **p != ch)
		return false;
	(*p)++;
	return true;
}

static void skip_spaces(const char **p, const char *end)
{
	while (*p < end && (**p == ' ' || **p == '\t'))
		(*p)++;
}

static bool path_is(const struct procmaps_entry *e, const char *lit, size_t n)
{
	return e->path_len == n && memcmp(e->path, lit, n) == 0;
}

static void classify(struct procmaps_entry *e)
{
	static const char deleted[] = " (deleted)";
	const size_t dn = sizeof(deleted) - 1;

	if (e->path_len > dn && memcmp(e->path + e->path_len - dn, deleted, dn) == 0) {
		e->path_len -= (uint32_t)dn;
		e->deleted = true;
	}
	if (path_is(e, "[vdso]", 6))
		e->kind = PROCMAPS_VDSO;
	else if (path_is(e, "[vsyscall]", 10))
		e->kind = PROCMAPS_VSYSCALL;
	else if (e->path_len == 0 || e->path[0] == '[' || e->ino == 0)
		/* [heap], [stack], [anon:name] and inode-less files are JIT-ish
		 * memory: nothing on disk to read symbols or CFI from. */
		e->kind = PROCMAPS_ANON;
	else
		e->kind = PROCMAPS_FILE;
}

int procmaps__next(const char **pos, const char *end, struct procmaps_entry *ret)
{
	const char *p = *pos, *eol;
	uint64_t maj, min;

	if (p >= end)
		return 0;
	eol = memchr(p, '\n', (size_t)(end - p));
	if (!eol)
		eol = end;
	*pos = eol < end ? eol + 1 : end;

	memset(ret, 0, sizeof(*ret));
	if (!parse_hex(&p, eol, &ret->start) || !expect(&p, eol, '-') ||
	    !parse_hex(&p, eol, &ret->end) || !expect(&p, eol, ' '))
		return -EBADMSG;
	if (eol - p < 5 || p[4] != ' ')
		return -EBADMSG;
	ret->exec = p[2] == 'x';
	p += 5;
	if (!parse_hex(&p, eol, &ret->pgoff) || !expect(&p, eol, ' ') ||
	    !parse_hex(&p, eol, &maj) || !expect(&p, eol, ':') || !parse_hex(&p, eol, &min) ||
	    !expect(&p, eol, ' ') || !parse_dec(&p, eol, &ret->ino))
		return -EBADMSG;
	if (ret->end <= ret->start || maj > 0xfff || min > 0xfffff)
		return -EBADMSG;
	ret->dev = makedev((unsigned int)maj, (unsigned int)min);
	skip_spaces(&p, eol);
	ret->path = p;
	ret->path_len = (uint32_t)(eol - p);
	classify(ret);
	return 1;
}

uint64_t procmaps__vdso_size(const char *text, size_t len, uint64_t base)
{
	const char *pos = text, *end = text + len;
	struct procmaps_entry e;
	int r;

	while ((r = procmaps__next(&pos, end, &e)) != 0)
		if (r > 0 && e.kind == PROCMAPS_VDSO && e.start == base)
			return e.end - e.start;
	return 0;
}
