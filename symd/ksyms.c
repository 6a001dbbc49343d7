// SPDX-License-Identifier: MIT
/*
 * Kernel symbols from /proc/kallsyms: text symbols only, sorted once, looked
 * up by binary search (a symbol covers up to the next one's start: kallsyms
 * has no sizes). Reloaded when the set of modules changes.
 */
#include "symd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"

#define KSYMS_FILE_MAX	 (256u << 20)
#define MODULES_FILE_MAX (4u << 20)
#define KSYM_LAST_SPAN	 (1u << 20) /* the last symbol has no successor */

/* Whole file into a NUL-terminated buffer (proc files have no size). */
static int read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 1u << 16;
	char *buf;

	if (fd < 0)
		return -errno;
	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		ssize_t n;

		if (cap - len < 4096) {
			char *b;

			if (cap >= max) {
				free(buf);
				return -EFBIG;
			}
			b = realloc(buf, cap * 2);
			if (!b) {
				free(buf);
				return -ENOMEM;
			}
			buf = b;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return -errno;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

static int pool_put(struct ksyms *k, const char *s, size_t n, uint32_t *ret)
{
	if (k->pool_len + n + 1 > UINT32_MAX)
		return -E2BIG;
	if (k->pool_len + n + 1 > k->pool_cap) {
		size_t cap = k->pool_cap ? k->pool_cap * 2 : (1u << 20);
		char *p;

		while (cap < k->pool_len + n + 1)
			cap *= 2;
		p = realloc(k->pool, cap);
		if (!p)
			return -ENOMEM;
		k->pool = p;
		k->pool_cap = cap;
	}
	memcpy(k->pool + k->pool_len, s, n);
	k->pool[k->pool_len + n] = '\0';
	*ret = (uint32_t)k->pool_len;
	k->pool_len += n + 1;
	return 0;
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

void ksyms__fini(struct ksyms *k)
{
	free(k->syms);
	free(k->pool);
	k->syms = NULL;
	k->pool = NULL;
	k->n = 0;
	k->pool_len = k->pool_cap = 0;
	k->loaded = false;
	k->zeroed = false;
}

int ksyms__load(struct ksyms *k, const char *path)
{
	struct ksyms nk = {0};
	_cleanup_free_ char *buf = NULL;
	char *p, *end, last_mod[64] = "";
	uint32_t last_mod_off = 0, cap = 0, off;
	bool any_nonzero = false;
	size_t len;
	int r;

	r = read_file(path, KSYMS_FILE_MAX, &buf, &len);
	if (r < 0)
		return r;
	r = pool_put(&nk, "", 0, &off);
	if (r < 0)
		goto fail;

	for (p = buf, end = buf + len; p < end;) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *q, *name, *mod = NULL;
		size_t nlen, mlen = 0;
		uint64_t addr;
		char type;

		if (!nl)
			nl = end;
		*nl = '\0';
		addr = strtoull(p, &q, 16);
		if (q == p || *q != ' ' || !q[1] || q[2] != ' ')
			goto next;
		type = q[1];
		name = q + 3;
		nlen = strcspn(name, " \t");
		if (name[nlen]) {
			char *m = name + nlen + strspn(name + nlen, " \t");

			if (*m == '[') {
				mod = m + 1;
				mlen = strcspn(mod, "]");
			}
		}
		if (addr)
			any_nonzero = true;
		if ((type != 't' && type != 'T') || nlen == 0)
			goto next;
		if (nk.n == cap) {
			struct ksym *s;

			if (cap >= SYMD_MAX_KSYMS) {
				r = -E2BIG;
				goto fail;
			}
			cap = cap ? cap * 2 : 65536;
			s = realloc(nk.syms, cap * sizeof(*s));
			if (!s) {
				r = -ENOMEM;
				goto fail;
			}
			nk.syms = s;
		}
		r = pool_put(&nk, name, nlen, &off);
		if (r < 0)
			goto fail;
		nk.syms[nk.n] = (struct ksym){.addr = addr, .name = off};
		if (mod && mlen) {
			/* Module symbols come in runs: one copy of the name per run. */
			if (mlen >= sizeof(last_mod) || strncmp(last_mod, mod, mlen) ||
			    last_mod[mlen]) {
				r = pool_put(&nk, mod, mlen, &last_mod_off);
				if (r < 0)
					goto fail;
				snprintf(last_mod, sizeof(last_mod), "%.*s", (int)mlen, mod);
			}
			nk.syms[nk.n].mod = last_mod_off;
		}
		nk.n++;
next:
		p = nl + 1;
	}
	if (nk.n)
		qsort(nk.syms, nk.n, sizeof(*nk.syms), ksym_cmp);
	/* kptr_restrict: every address reads as 0 */
	nk.zeroed = !any_nonzero;
	nk.loaded = true;
	nk.modules_hash = k->modules_hash;
	nk.next_check_ns = k->next_check_ns;
	ksyms__fini(k);
	*k = nk;
	return 0;
fail:
	ksyms__fini(&nk);
	return r;
}

int ksyms__lookup(const struct ksyms *k, uint64_t addr, const char **ret_name, const char **ret_mod,
		  uint64_t *ret_start)
{
	uint32_t lo = 0, hi = k->n, i;

	if (!k->n || k->zeroed)
		return -ENOENT;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return -ENOENT;
	i = lo - 1;
	if (lo == k->n && addr - k->syms[i].addr >= KSYM_LAST_SPAN)
		return -ENOENT;
	/* Symbols at the same address: the first after sorting wins. */
	while (i > 0 && k->syms[i - 1].addr == k->syms[i].addr)
		i--;
	*ret_name = k->pool + k->syms[i].name;
	*ret_mod = k->syms[i].mod ? k->pool + k->syms[i].mod : NULL;
	*ret_start = k->syms[i].addr;
	return 0;
}

uint64_t ksyms__modules_hash(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	uint64_t h = 0x5eed;
	char *p, *save = NULL;
	size_t len;

	if (read_file(path, MODULES_FILE_MAX, &buf, &len) < 0)
		return 0;
	/* Name, size and address of each module; refcounts change all the time
	 * and must not trigger a reload. */
	for (p = strtok_r(buf, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
		char name[128] = "", addr[32] = "";
		unsigned long size = 0;

		if (sscanf(p, "%127s %lu %*s %*s %*s %31s", name, &size, addr) < 2)
			continue;
		h ^= symd_hash(name, strlen(name)) + size * 31 + symd_hash(addr, strlen(addr));
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

size_t ksyms__bytes(const struct ksyms *k)
{
	return (size_t)k->n * sizeof(*k->syms) + k->pool_cap;
}
