// SPDX-License-Identifier: MIT
/*
 * Binaries' symbol tables, shared by every process that maps them: keyed by
 * build-id plus the file's identity (dev+ino; the path when unwindd knew the
 * file by build-id only), else dev+ino, else the path; least recently used
 * evicted first once the byte budget is exceeded. A build-id alone is never
 * trusted: anyone can write any build-id into a binary, and one seen first
 * must not name the frames of another file claiming it (a second file with
 * the same build-id gets an entry of its own, and a warning if its symbols
 * differ). Failures are cached too (with a
 * retry time) so that a binary we cannot open costs one attempt, not one per
 * frame.
 */
#include "bincache.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "elfsym.h"
#include "shm/config.h" /* CPA_PATH_MAX */
#include "shm/records.h"

#define BIN_RETRY_OPEN_NS   (30 * NSEC_PER_SEC)
#define BIN_RETRY_REJECT_NS (600 * NSEC_PER_SEC)
#define BIN_KEY_MAX	    (1 + CPA_BUILD_ID_MAX + 16 + CPA_PATH_MAX)
#define BIN_FAILED_SLOTS    1024 /* hashes of keys a get answered NULL for */

struct binent {
	struct binent *hnext;
	struct binent *prev; /* LRU: head is the most recent */
	struct binent *next;
	uint64_t hash;
	struct symbin *bin; /* NULL: failed, see err/retry_ns */
	int err;
	uint64_t retry_ns;
	uint64_t used_ns; /* the cache's clock at the last get (bincache__idle()) */
	size_t bytes;
	uint32_t key_len;
	char *path;	 /* as the first process that asked saw it (for warnings) */
	uint8_t bid_len; /* build-id in the key, bytes 1.. */
	/* 'B' + build-id + dev + ino [+ path if dev 0] | 'I' + dev + ino | 'P' + path */
	uint8_t key[];
};

struct bincache {
	struct binent **buckets;
	uint32_t nbuckets;
	uint32_t n;
	struct binent *head;
	struct binent *tail;
	uint64_t budget;
	uint64_t now_ns; /* the clock of the last bincache__idle(): hits stamp it */
	const struct symd_paths *paths;
	struct bincache_stats stats;
	/* The keys a get answered NULL for (direct-mapped by hash; failed_lost: one
	 * was overwritten). A load that gives a binary changes earlier answers only
	 * for such a key: stats.refreshed tells symd to empty its pc cache. Under
	 * churn new binaries load every second (builds, tests): emptying the cache
	 * on each made every frame a symbol search and an intern lookup again. */
	uint64_t failed[BIN_FAILED_SLOTS];
	bool failed_lost;
};

static void failed_note(struct bincache *c, uint64_t h)
{
	uint64_t *f = &c->failed[h % BIN_FAILED_SLOTS];

	if (*f && *f != h)
		c->failed_lost = true;
	*f = h;
}

/* A load of key h gave a binary: did an earlier answer say there was none? */
static void failed_loaded(struct bincache *c, uint64_t h)
{
	uint64_t *f = &c->failed[h % BIN_FAILED_SLOTS];

	if (*f == h || c->failed_lost) {
		c->stats.refreshed++;
		c->failed_lost = false;
		if (*f == h)
			*f = 0;
	}
}

int bincache__new(uint64_t budget, const struct symd_paths *paths, struct bincache **ret)
{
	struct bincache *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->nbuckets = 256;
	c->buckets = calloc(c->nbuckets, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return -ENOMEM;
	}
	c->budget = budget;
	c->paths = paths;
	*ret = c;
	return 0;
}

static void binent__free(struct binent *e)
{
	symbin__free(e->bin);
	free(e->path);
	free(e);
}

void bincache__free(struct bincache *c)
{
	struct binent *e, *next;

	if (!c)
		return;
	for (e = c->head; e; e = next) {
		next = e->next;
		binent__free(e);
	}
	free(c->buckets);
	free(c);
}

static void lru_unlink(struct bincache *c, struct binent *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		c->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		c->tail = e->prev;
	e->prev = e->next = NULL;
}

static void lru_push(struct bincache *c, struct binent *e)
{
	e->prev = NULL;
	e->next = c->head;
	if (c->head)
		c->head->prev = e;
	c->head = e;
	if (!c->tail)
		c->tail = e;
}

static void bincache__remove(struct bincache *c, struct binent *e)
{
	struct binent **pp = &c->buckets[e->hash & (c->nbuckets - 1)];

	while (*pp && *pp != e)
		pp = &(*pp)->hnext;
	if (*pp)
		*pp = e->hnext;
	lru_unlink(c, e);
	c->stats.bytes -= e->bytes;
	c->n--;
	binent__free(e);
}

static void bincache__rehash(struct bincache *c)
{
	uint32_t nb = c->nbuckets * 2, i;
	struct binent **b = calloc(nb, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (i = 0; i < c->nbuckets; i++) {
		struct binent *e = c->buckets[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			e->hnext = b[e->hash & (nb - 1)];
			b[e->hash & (nb - 1)] = e;
		}
	}
	free(c->buckets);
	c->buckets = b;
	c->nbuckets = nb;
}

static uint32_t make_key(const struct symd_file_ref *ref, uint64_t dev, uint64_t ino, uint8_t *key)
{
	size_t n;

	if (ref->build_id_len) {
		uint32_t k = 1u + ref->build_id_len;

		key[0] = 'B';
		memcpy(key + 1, ref->build_id, ref->build_id_len);
		memcpy(key + k, &dev, 8);
		memcpy(key + k + 8, &ino, 8);
		k += 16;
		if (dev)
			return k;
		/* Known by build-id only: the path tells two such files apart. */
		n = strnlen(ref->path, CPA_PATH_MAX);
		memcpy(key + k, ref->path, n);
		return k + (uint32_t)n;
	}
	if (dev || ino) {
		key[0] = 'I';
		memcpy(key + 1, &dev, 8);
		memcpy(key + 9, &ino, 8);
		return 17;
	}
	n = strnlen(ref->path, CPA_PATH_MAX);
	key[0] = 'P';
	memcpy(key + 1, ref->path, n);
	return 1u + (uint32_t)n;
}

static void bincache__evict(struct bincache *c, struct binent *keep)
{
	while (c->stats.bytes > c->budget && c->tail && c->tail != keep) {
		c->stats.evictions++;
		bincache__remove(c, c->tail);
	}
}

void bincache__idle(struct bincache *c, uint64_t now_ns, uint64_t idle_ns)
{
	/* The LRU tail is the least recently used: stop at the first one in use. */
	while (c->tail && c->now_ns && c->tail->used_ns + idle_ns <= now_ns) {
		c->stats.idle_drops++;
		bincache__remove(c, c->tail);
	}
	c->now_ns = now_ns;
}

void bincache__set_budget(struct bincache *c, uint64_t budget)
{
	c->budget = budget;
	bincache__evict(c, NULL);
}

/* The same symbols and function starts (formatted names aside: they fill
 * in lazily). */
static bool symbin__same(const struct symbin *a, const struct symbin *b)
{
	uint32_t i;

	if (a->nsyms != b->nsyms || a->nfdes != b->nfdes || a->nloads != b->nloads ||
	    memcmp(a->fdes, b->fdes, (size_t)a->nfdes * sizeof(*a->fdes)) ||
	    memcmp(a->loads, b->loads, (size_t)a->nloads * sizeof(*a->loads)))
		return false;
	for (i = 0; i < a->nsyms; i++) {
		const struct symd_sym *x = &a->syms[i], *y = &b->syms[i];

		if (x->addr != y->addr || x->size != y->size || x->flags != y->flags ||
		    strcmp(a->pool + x->name, b->pool + y->name))
			return false;
	}
	return true;
}

/* A new entry n whose build-id another cached file claims too: the same
 * binary (another copy, e.g. in another container) or a forged build-id.
 * Loads are rare (each reads a file): a list walk. */
static void bincache__check_claim(struct bincache *c, const struct binent *n,
				  const struct symd_file_ref *ref)
{
	const struct binent *e;

	if (!n->bid_len || !n->bin)
		return;
	for (e = c->head; e; e = e->next) {
		if (e == n || !e->bin || e->bid_len != n->bid_len ||
		    memcmp(e->key + 1, n->key + 1, n->bid_len))
			continue;
		if (symbin__same(e->bin, n->bin)) {
			log_debug("'%s' (pid %u): a copy of '%s' (same build-id and symbols)",
				  ref->path, ref->pid, e->path);
			return;
		}
		c->stats.bid_conflicts++;
		log_warn("'%s' (pid %u) and '%s' claim the same build-id with different "
			 "symbols: kept apart",
			 ref->path, ref->pid, e->path);
		return;
	}
}

static bool is_rejection(int err)
{
	return err == -EBADMSG || err == -EFBIG || err == -E2BIG || err == -ETIME ||
	       err == -EOPNOTSUPP;
}

struct symbin *bincache__get(struct bincache *c, const struct symd_file_ref *ref, uint64_t dev,
			     uint64_t ino, uint64_t now_ns)
{
	uint8_t key[BIN_KEY_MAX];
	uint32_t klen = make_key(ref, dev, ino, key);
	uint64_t h = hash64(key, klen);
	struct binent *e;
	struct symbin *b = NULL;
	int r;

	for (e = c->buckets[h & (c->nbuckets - 1)]; e; e = e->hnext) {
		if (e->hash != h || e->key_len != klen || memcmp(e->key, key, klen))
			continue;
		/* Failures too: the LRU is the order of the last gets (bincache__idle()). */
		e->used_ns = c->now_ns;
		if (c->head != e) {
			lru_unlink(c, e);
			lru_push(c, e);
		}
		if (e->bin) {
			size_t bytes = symbin__bytes(e->bin);

			/* Formatted names grow the pool: keep the account true. */
			c->stats.bytes += bytes - e->bytes;
			e->bytes = bytes;
			return e->bin;
		}
		if (!now_ns)
			now_ns = clock_ns(CLOCK_MONOTONIC);
		if (now_ns < e->retry_ns) {
			failed_note(c, h);
			return NULL;
		}
		bincache__remove(c, e);
		break;
	}

	c->stats.loads++;
	if (!now_ns)
		now_ns = clock_ns(CLOCK_MONOTONIC);
	r = symbin__load(c->paths, ref, &b);
	if (r == 0) {
		c->stats.loaded++;
		failed_loaded(c, h);
	} else {
		failed_note(c, h);
	}
	if (r == 0 && b->refused) {
		c->stats.rejected++;
		log_warn("refused the MiniDebugInfo of ELF '%s' (pid %u): expands past its cap",
			 ref->path, ref->pid);
	}
	if (r < 0) {
		if (is_rejection(r)) {
			c->stats.rejected++;
			log_warn("refused ELF '%s' (pid %u): %s", ref->path, ref->pid,
				 strerror(-r));
		} else {
			c->stats.open_fail++;
			log_debug("open '%s' (pid %u): %s", ref->path, ref->pid, strerror(-r));
		}
	}

	e = calloc(1, sizeof(*e) + klen);
	if (!e) {
		symbin__free(b);
		failed_note(c, h);
		return NULL;
	}
	e->path = strdup(ref->path);
	if (!e->path) {
		free(e);
		symbin__free(b);
		failed_note(c, h);
		return NULL;
	}
	e->hash = h;
	e->key_len = klen;
	e->bid_len = key[0] == 'B' ? ref->build_id_len : 0;
	memcpy(e->key, key, klen);
	e->bin = b;
	e->err = r;
	e->retry_ns = now_ns + (is_rejection(r) ? BIN_RETRY_REJECT_NS : BIN_RETRY_OPEN_NS);
	e->used_ns = c->now_ns;
	/* symbin__bytes() is what a hit refreshes, so it is the whole account. */
	e->bytes = b ? symbin__bytes(b) : sizeof(*e) + klen;
	bincache__check_claim(c, e, ref);
	e->hnext = c->buckets[h & (c->nbuckets - 1)];
	c->buckets[h & (c->nbuckets - 1)] = e;
	lru_push(c, e);
	c->n++;
	c->stats.bytes += e->bytes;
	if (c->n > c->nbuckets)
		bincache__rehash(c);
	bincache__evict(c, e);
	return b;
}

void bincache__stats(const struct bincache *c, struct bincache_stats *ret)
{
	*ret = c->stats;
}

void bincache__forget(struct bincache *c, const uint8_t *build_id, uint8_t len)
{
	struct binent *e, *next;

	/* By the loaded file's build-id: the key may be dev+ino or the path
	 * when unwindd sent none. Rare (a debug file arrived): a list walk. */
	for (e = c->head; e; e = next) {
		next = e->next;
		if (e->bin && e->bin->build_id_len == len &&
		    !memcmp(e->bin->build_id, build_id, len))
			bincache__remove(c, e);
	}
}
