// SPDX-License-Identifier: MIT
/*
 * Kernel symbols from /proc/kallsyms: text symbols only, sorted once, looked
 * up by binary search (a symbol covers up to the next one's start: kallsyms
 * has no sizes). Reloaded when the set of modules changes. Layout and why
 * in ksyms.h (struct ksyms): ~2.5 MB for a 120k-symbol kernel, not ~10.
 */
#include "ksyms.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/array.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/macro.h"

#define KSYMS_FILE_MAX	 (256u << 20)
#define MODULES_FILE_MAX (4u << 20)
#define KSYM_LAST_SPAN	 (1u << 20) /* the last symbol has no successor */
#define KSYM_READ_BUF	 (64u << 10)
#define KSYM_PAD	 (1u << 31) /* in ksym.name: padding before, see fold_padding() */
#define KSYM_NAME_MASK	 (KSYM_PAD - 1)
#define KSYM_PAD_MAX	 64u
#define KSYM_MBUF_MIN	 (64u << 10)

/* Growable anonymous mapping: mremap() grows it without a copy, and trim/
 * free hand the pages straight back (a freed malloc block of this size
 * would stay in the allocator, resident, until it decides to purge). */
struct mbuf {
	uint8_t *p;
	size_t len;
	size_t cap;
};

static size_t page_up(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) & ~(pg - 1);
}

static int mbuf_reserve(struct mbuf *b, size_t more)
{
	size_t need = b->len + more, cap;
	void *p;

	if (need <= b->cap)
		return 0;
	cap = array_next_cap(b->cap, need, KSYM_MBUF_MIN, SIZE_MAX);
	if (b->p)
		p = mremap(b->p, b->cap, cap, MREMAP_MAYMOVE);
	else
		p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int mbuf_put(struct mbuf *b, const void *d, size_t n)
{
	int r;

	if (!n)
		return 0; /* nothing mapped yet: memcpy(NULL, ..., 0) is UB */
	r = mbuf_reserve(b, n);
	if (r < 0)
		return r;
	memcpy(b->p + b->len, d, n);
	b->len += n;
	return 0;
}

/* Shrink to the pages in use: the doubling would otherwise keep up to half
 * of the mapping reserved (never touched, but counted in the gauge). */
static void mbuf_trim(struct mbuf *b)
{
	size_t sz = page_up(b->len);
	void *p;

	if (!b->p || sz >= b->cap)
		return;
	if (!sz) {
		munmap(b->p, b->cap);
		*b = (struct mbuf){0};
		return;
	}
	p = mremap(b->p, b->cap, sz, 0);
	if (p != MAP_FAILED)
		b->cap = sz;
}

static void mbuf_free(struct mbuf *b)
{
	if (b->p)
		munmap(b->p, b->cap);
	*b = (struct mbuf){0};
}

static void unmap(void *p, size_t len)
{
	if (p && len)
		munmap(p, page_up(len));
}

/* Parser state of one load. */
struct kload {
	struct mbuf syms; /* struct ksym */
	struct mbuf far;  /* struct ksym_far */
	struct mbuf pool;
	uint64_t hi; /* upper address bits of the compact table */
	bool hi_set;
	bool any_nonzero;
	uint32_t count;
	uint32_t prev_off, prev_len; /* last name put */
	uint32_t mod_off;	     /* last module name stored */
	char mod[64];
};

static int pool_put(struct kload *l, const char *s, size_t n, uint32_t *ret)
{
	char nul = '\0';
	int r;

	if (l->pool.len + n + 1 > KSYM_NAME_MASK) /* the top bit is KSYM_PAD */
		return -E2BIG;
	*ret = (uint32_t)l->pool.len;
	r = mbuf_put(&l->pool, s, n);
	return r < 0 ? r : mbuf_put(&l->pool, &nul, 1);
}

/*
 * Names without a malloc each, and shared where kallsyms repeats itself.
 * Half of a 6.x x86 kernel's text symbols are "__pfx_foo" (or "__cfi_foo"):
 * the padding right before "foo" that the call-depth-tracking thunk or the
 * FineIBT hash check sits in. A pc there is the entry of a call to foo, so
 * it is named "foo" (one frame with foo in a profile), and the name is
 * stored once for both lines.
 */
static int name_put(struct kload *l, const char *name, size_t n, uint32_t *ret)
{
	const char *pool = (const char *)l->pool.p;
	int r;

	if (n > 6 && (!memcmp(name, "__pfx_", 6) || !memcmp(name, "__cfi_", 6))) {
		name += 6;
		n -= 6;
	}
	if (n == l->prev_len && !memcmp(pool + l->prev_off, name, n)) {
		*ret = l->prev_off;
		return 0;
	}
	r = pool_put(l, name, n, ret);
	if (r < 0)
		return r;
	l->prev_off = *ret;
	l->prev_len = (uint32_t)n;
	return 0;
}

/* One line: "<addr> <type> <name>[\t[<module>]]". */
static int parse_line(struct kload *l, char *p)
{
	char *q, *name, *mod = NULL;
	size_t nlen, mlen = 0;
	uint32_t off;
	uint64_t addr;
	char type;
	int r;

	addr = strtoull(p, &q, 16);
	if (q == p || *q != ' ' || !q[1] || q[2] != ' ')
		return 0;
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
		l->any_nonzero = true;
	/* Text only (data symbols never hold a pc): a symbol then covers up
	 * to the next text symbol. */
	if ((type != 't' && type != 'T' && type != 'w' && type != 'W') || nlen == 0)
		return 0;
	if (l->count >= SYMD_MAX_KSYMS)
		return -E2BIG;
	r = name_put(l, name, nlen, &off);
	if (r < 0)
		return r;
	l->count++;
	if (!mod || !mlen) {
		/* vmlinux: all of its text shares the upper 32 bits (x86-64,
		 * arm64), so 8 bytes a symbol; anything else goes far. */
		if (!l->hi_set) {
			l->hi = addr >> 32;
			l->hi_set = true;
		}
		if (addr >> 32 == l->hi) {
			struct ksym e = {.off = (uint32_t)addr, .name = off};

			return mbuf_put(&l->syms, &e, sizeof(e));
		}
		return mbuf_put(&l->far, &(struct ksym_far){.addr = addr, .name = off},
				sizeof(struct ksym_far));
	}
	/* Module symbols come in runs: one copy of the module name per run. */
	if (mlen >= sizeof(l->mod) || strncmp(l->mod, mod, mlen) || l->mod[mlen]) {
		r = pool_put(l, mod, mlen, &l->mod_off);
		if (r < 0)
			return r;
		snprintf(l->mod, sizeof(l->mod), "%.*s", (int)mlen, mod);
	}
	return mbuf_put(&l->far, &(struct ksym_far){.addr = addr, .name = off, .mod = l->mod_off},
			sizeof(struct ksym_far));
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

static int ksym_far_cmp(const void *a, const void *b)
{
	const struct ksym_far *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

/* Read in KSYM_READ_BUF chunks and parse whole lines as they come: the
 * file (5+ MB) is never held in memory. */
static int parse_file(struct kload *l, int fd)
{
	size_t have = 0, total = 0;
	bool skip = false; /* inside a line longer than the buffer */
	char *buf;
	int r = 0;

	buf = mmap(NULL, KSYM_READ_BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return -ENOMEM;
	for (;;) {
		char *p = buf, *end, *nl;
		ssize_t n = read(fd, buf + have, KSYM_READ_BUF - 1 - have);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			break;
		}
		total += (size_t)n;
		if (total > KSYMS_FILE_MAX) {
			r = -EFBIG;
			break;
		}
		have += (size_t)n;
		end = buf + have;
		if (n == 0 && have && !skip) /* last line without a newline */
			*end++ = '\n';
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			*nl = '\0';
			if (!skip)
				r = parse_line(l, p);
			skip = false;
			if (r < 0)
				goto out;
			p = nl + 1;
		}
		if (n == 0)
			break;
		have = (size_t)(end - p);
		if (have == KSYM_READ_BUF - 1) {
			skip = true; /* not a kallsyms line: drop it */
			have = 0;
		} else if (have && p != buf) {
			memmove(buf, p, have);
		}
	}
out:
	munmap(buf, KSYM_READ_BUF);
	return r;
}

static bool ksyms_sorted(const struct ksym *e, uint32_t n)
{
	uint32_t i;

	for (i = 1; i < n; i++)
		if (ksym_cmp(&e[i - 1], &e[i]) > 0)
			return false;
	return true;
}

/*
 * "__pfx_foo" was named "foo" (name_put), so after sorting it is an entry
 * with foo's name offset right before foo, the padding size below it. Fold
 * each such pair into foo's entry with KSYM_PAD set: a lookup that lands in
 * the pad bytes before a flagged entry answers foo. Half the entries of a
 * 6.x x86 kernel. Only pairs exactly pad bytes apart fold, with pad the
 * first distance seen (CONFIG_FUNCTION_PADDING_BYTES, 16 on x86); any other
 * pair stays two entries, which answer the same name anyway.
 */
static uint32_t fold_padding(struct ksym *e, uint32_t n, uint32_t *ret_pad)
{
	uint32_t i, o = 0, pad = 0;

	for (i = 0; i < n; i++) {
		if (i + 1 < n && e[i].name == e[i + 1].name && e[i + 1].off > e[i].off &&
		    e[i + 1].off - e[i].off <= KSYM_PAD_MAX &&
		    (!pad || e[i + 1].off - e[i].off == pad)) {
			pad = e[i + 1].off - e[i].off;
			e[o] = e[i + 1];
			e[o++].name |= KSYM_PAD;
			i++;
			continue;
		}
		e[o++] = e[i];
	}
	*ret_pad = pad;
	return o;
}

void ksyms__fini(struct ksyms *k)
{
	unmap(k->syms, (size_t)k->n * sizeof(*k->syms));
	unmap(k->far, (size_t)k->nfar * sizeof(*k->far));
	unmap(k->pool, k->pool_len);
	k->syms = NULL;
	k->far = NULL;
	k->pool = NULL;
	k->n = k->nfar = 0;
	k->pool_len = 0;
	k->mapped = 0;
	k->base = 0;
	k->loaded = false;
	k->zeroed = false;
}

int ksyms__load(struct ksyms *k, const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct kload l = {0};
	struct ksyms nk = {0};
	uint32_t off;
	int r;

	if (fd < 0)
		return -errno;
	r = pool_put(&l, "", 0, &off); /* offset 0: "" (no module) */
	if (r < 0)
		goto fail;
	r = parse_file(&l, fd);
	if (r < 0)
		goto fail;
	mbuf_trim(&l.far);
	mbuf_trim(&l.pool);
	nk.syms = (struct ksym *)l.syms.p;
	nk.n = (uint32_t)(l.syms.len / sizeof(struct ksym));
	nk.far = (struct ksym_far *)l.far.p;
	nk.nfar = (uint32_t)(l.far.len / sizeof(struct ksym_far));
	nk.base = l.hi << 32;
	nk.pool = (char *)l.pool.p;
	nk.pool_len = l.pool.len;
	/* vmlinux comes address-ordered: usually no sort at all. */
	if (!ksyms_sorted(nk.syms, nk.n))
		qsort(nk.syms, nk.n, sizeof(*nk.syms), ksym_cmp);
	nk.n = fold_padding(nk.syms, nk.n, &nk.pad);
	l.syms.len = (size_t)nk.n * sizeof(struct ksym);
	mbuf_trim(&l.syms);
	nk.syms = (struct ksym *)l.syms.p;
	nk.mapped = l.syms.cap + l.far.cap + l.pool.cap;
	if (nk.nfar)
		qsort(nk.far, nk.nfar, sizeof(*nk.far), ksym_far_cmp);
	/* kptr_restrict: every address reads as 0 */
	nk.zeroed = !l.any_nonzero;
	nk.loaded = true;
	nk.modules_hash = k->modules_hash;
	nk.next_check_ns = k->next_check_ns;
	ksyms__fini(k);
	*k = nk;
	return 0;
fail:
	mbuf_free(&l.syms);
	mbuf_free(&l.far);
	mbuf_free(&l.pool);
	return r;
}

static inline uint64_t ksym_addr(const struct ksyms *k, uint32_t i)
{
	return k->base + k->syms[i].off;
}

int ksyms__lookup(const struct ksyms *k, uint64_t addr, const char **ret_name, const char **ret_mod,
		  uint64_t *ret_start)
{
	uint32_t lo = 0, hi = k->n, flo = 0, fhi = k->nfar, i;
	uint64_t start = 0;
	bool found = false;

	if (k->zeroed)
		return -ENOENT;
	/* The covering symbol is the last one at or below addr in either
	 * table; it has a successor if either table has one past addr. */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (ksym_addr(k, mid) <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (flo < fhi) {
		uint32_t mid = flo + (fhi - flo) / 2;

		if (k->far[mid].addr <= addr)
			flo = mid + 1;
		else
			fhi = mid;
	}
	if (lo < k->n && (k->syms[lo].name & KSYM_PAD) && ksym_addr(k, lo) - addr <= k->pad &&
	    (lo == 0 || ksym_addr(k, lo - 1) < ksym_addr(k, lo) - k->pad)) {
		/* In the padding before the next symbol: its entry (unless
		 * another symbol starts inside the padding, as before). */
		i = lo;
		start = ksym_addr(k, lo) - k->pad;
		found = true;
	} else if (lo > 0) {
		for (i = lo - 1; i > 0 && k->syms[i - 1].off == k->syms[i].off; i--)
			;
		start = ksym_addr(k, i);
		found = true;
	}
	if (flo > 0 && (!found || k->far[flo - 1].addr > start)) {
		if (lo == k->n && flo == k->nfar && addr - k->far[flo - 1].addr >= KSYM_LAST_SPAN)
			return -ENOENT;
		/* Symbols at the same address: the first after sorting wins. */
		for (i = flo - 1; i > 0 && k->far[i - 1].addr == k->far[i].addr; i--)
			;
		*ret_name = k->pool + k->far[i].name;
		*ret_mod = k->far[i].mod ? k->pool + k->far[i].mod : NULL;
		*ret_start = k->far[i].addr;
		return 0;
	}
	if (!found)
		return -ENOENT;
	if (lo == k->n && flo == k->nfar && addr - start >= KSYM_LAST_SPAN)
		return -ENOENT;
	*ret_name = k->pool + (k->syms[i].name & KSYM_NAME_MASK);
	*ret_mod = NULL;
	*ret_start = start;
	return 0;
}

uint64_t ksyms__modules_hash(const char *path)
{
	_cleanup_free_ char *buf = NULL;
	uint64_t h = 0x5eed;
	char *p, *save = NULL;
	size_t len;

	if (read_full_file(path, 0, MODULES_FILE_MAX, &buf, &len) < 0)
		return 0;
	/* Name, size and address of each module; refcounts change all the time
	 * and must not trigger a reload. */
	for (p = strtok_r(buf, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
		char name[128] = "", addr[32] = "";
		unsigned long size = 0;

		if (sscanf(p, "%127s %lu %*s %*s %*s %31s", name, &size, addr) < 2)
			continue;
		h ^= hash64(name, strlen(name)) + size * 31 + hash64(addr, strlen(addr));
		h *= 0x100000001b3ULL;
	}
	return h ? h : 1;
}

size_t ksyms__bytes(const struct ksyms *k)
{
	return k->mapped;
}
