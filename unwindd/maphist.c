// SPDX-License-Identifier: MIT
#include "maphist.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "common/hash.h"
#include "common/macro.h"

/* How long after an exec a pc may still be the old image's (in execve). */
#define MH_EXEC_WINDOW_NS (20ull * 1000 * 1000)

struct mh_map {
	struct umap m;
	uint64_t t_from; /* in force over [t_from, t_to) */
	uint64_t t_to;
	bool exec_end; /* t_to is an exec's time */
};

struct mh_proc {
	struct mh_proc *hnext;
	uint32_t pid;
	uint32_t n, cap;
	uint32_t last_hit;
	struct mh_map *maps;
	uint64_t exec_ns; /* the latest exec known; 0 = none */
	uint64_t dead_ns; /* exit seen; 0 = alive */
	/* No entry ends before this (MH_FOREVER: none has ended): the sweep
	 * passes a process whose history has nothing to drop without reading
	 * its entries (hundreds of processes, a hundred entries each, four
	 * sweeps a second). */
	uint64_t min_to;
};

struct maphist {
	maphist_ref_fn ref;
	void *ctx;
	struct mh_proc **procs;
	uint32_t mask;
	uint32_t n_procs;
	uint64_t bytes;
};

static uint32_t slot(const struct maphist *h, uint32_t pid)
{
	return (uint32_t)hash64_mix(pid) & h->mask;
}

static struct mh_proc *peek(const struct maphist *h, uint32_t pid)
{
	struct mh_proc *p;

	for (p = h->procs[slot(h, pid)]; p; p = p->hnext)
		if (p->pid == pid)
			return p;
	return NULL;
}

static int grow(struct maphist *h)
{
	uint32_t n = (h->mask + 1) * 2, i;
	struct mh_proc **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return -ENOMEM;
	for (i = 0; i <= h->mask; i++) {
		struct mh_proc *p = h->procs[i], *next;

		for (; p; p = next) {
			uint32_t s = (uint32_t)hash64_mix(p->pid) & (n - 1);

			next = p->hnext;
			p->hnext = nb[s];
			nb[s] = p;
		}
	}
	h->bytes += (uint64_t)(n - h->mask - 1) * sizeof(*nb);
	free(h->procs);
	h->procs = nb;
	h->mask = n - 1;
	return 0;
}

static struct mh_proc *get(struct maphist *h, uint32_t pid)
{
	struct mh_proc *p = peek(h, pid);
	uint32_t s;

	if (p)
		return p;
	if (h->n_procs > h->mask && grow(h) < 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->min_to = MH_FOREVER;
	s = slot(h, pid);
	p->hnext = h->procs[s];
	h->procs[s] = p;
	h->n_procs++;
	h->bytes += sizeof(*p);
	return p;
}

/* Every end time an entry gets goes through here (min_to). */
static void end_at(struct mh_proc *p, struct mh_map *e, uint64_t t, bool exec)
{
	e->t_to = t;
	e->exec_end = exec;
	if (t < p->min_to)
		p->min_to = t;
}

static void entry_drop(struct maphist *h, struct mh_map *e)
{
	if (e->m.bin && h->ref)
		h->ref(h->ctx, e->m.bin, -1);
}

static void proc_free(struct maphist *h, struct mh_proc *p)
{
	struct mh_proc **pp = &h->procs[slot(h, p->pid)];
	uint32_t i;

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == p) {
			*pp = p->hnext;
			break;
		}
	}
	for (i = 0; i < p->n; i++)
		entry_drop(h, &p->maps[i]);
	h->bytes -= sizeof(*p) + (uint64_t)p->cap * sizeof(*p->maps);
	h->n_procs--;
	free(p->maps);
	free(p);
}

/* Append one entry as it is (no overlap rules). */
static int push(struct maphist *h, struct mh_proc *p, const struct umap *m, uint64_t from,
		uint64_t to)
{
	struct mh_map *e;

	if (p->n == p->cap) {
		uint32_t old = p->cap;

		if (array_grow32_first((void **)&p->maps, &p->cap, (size_t)p->n + 1,
				       sizeof(*p->maps), 16) < 0)
			return -ENOMEM;
		h->bytes += (uint64_t)(p->cap - old) * sizeof(*p->maps);
	}
	e = &p->maps[p->n++];
	e->m = *m;
	e->t_from = from;
	end_at(p, e, to, false);
	if (m->bin && h->ref)
		h->ref(h->ctx, m->bin, +1);
	return 0;
}

static bool overlaps(const struct umap *a, uint64_t start, uint64_t end)
{
	return a->start < end && start < a->end;
}

/* A piece [start, end) of e's mapping, as its own umap. */
static struct umap piece(const struct umap *m, uint64_t start, uint64_t end)
{
	struct umap r = *m;

	r.start = start;
	r.end = end;
	if (m->kind == UMAP_FILE)
		r.pgoff = m->pgoff + (start - m->start);
	return r;
}

static int insert(struct maphist *h, struct mh_proc *p, uint64_t t, const struct umap *m)
{
	uint64_t to = MH_FOREVER;
	uint32_t i, n = p->n;
	int r;

	if (m->end <= m->start)
		return -EINVAL;
	/* Known from before (a /proc seed, a repeated event): nothing new. */
	for (i = 0; i < n; i++) {
		struct mh_map *e = &p->maps[i];

		if (e->t_from <= t && t < e->t_to && e->m.start == m->start && e->m.end == m->end &&
		    e->m.pgoff == m->pgoff && e->m.bin == m->bin && e->m.kind == m->kind)
			return 0;
	}
	for (i = 0; i < n; i++) {
		struct mh_map *e = &p->maps[i];
		struct umap old;
		uint64_t old_to;

		if (!overlaps(&e->m, m->start, m->end))
			continue;
		if (e->t_from > t) {
			/* A later mapping over the range is already known. */
			to = MIN(to, e->t_from);
			continue;
		}
		if (e->t_to <= t)
			continue;
		/* In force at t: it ends now; what lies outside m goes on. */
		old = e->m;
		old_to = e->t_to;
		end_at(p, e, t, false);
		if (old.start < m->start) {
			r = push(h, p, (struct umap[]){piece(&old, old.start, m->start)}, t,
				 old_to);
			if (r < 0)
				return r;
		}
		if (old.end > m->end) {
			r = push(h, p, (struct umap[]){piece(&old, m->end, old.end)}, t, old_to);
			if (r < 0)
				return r;
		}
	}
	if (p->exec_ns > t && p->exec_ns < to) {
		r = push(h, p, m, t, p->exec_ns);
		if (r == 0)
			p->maps[p->n - 1].exec_end = true;
		return r;
	}
	if (to <= t)
		return 0;
	return push(h, p, m, t, to);
}

int maphist__mmap(struct maphist *h, uint32_t pid, uint64_t t, const struct umap *m)
{
	struct mh_proc *p = get(h, pid);

	return p ? insert(h, p, t, m) : -ENOMEM;
}

static void end_all(struct mh_proc *p, uint64_t t, bool exec)
{
	uint32_t i;

	for (i = 0; i < p->n; i++)
		if (p->maps[i].t_from < t && p->maps[i].t_to > t)
			end_at(p, &p->maps[i], t, exec);
}

int maphist__exec(struct maphist *h, uint32_t pid, uint64_t t)
{
	struct mh_proc *p = get(h, pid);

	if (!p)
		return -ENOMEM;
	end_all(p, t, true);
	p->exec_ns = MAX(p->exec_ns, t);
	p->dead_ns = 0;
	return 0;
}

int maphist__fork(struct maphist *h, uint32_t pid, uint32_t ppid, uint64_t t)
{
	struct mh_proc *parent = peek(h, ppid), *p;
	uint32_t i;
	int r;

	if (!parent) /* unknown parent: the child's samples read /proc */
		return 0;
	p = get(h, pid);
	if (!p)
		return -ENOMEM;
	/* get() may rehash the table, never move a process: parent stays valid. */
	end_all(p, t, false); /* a reused pid: the old process is over */
	p->dead_ns = 0;
	for (i = 0; i < parent->n; i++) {
		struct umap m;

		if (parent->maps[i].t_from > t || parent->maps[i].t_to <= t)
			continue;
		m = parent->maps[i].m;
		r = insert(h, p, t, &m);
		if (r < 0)
			return r;
	}
	return 0;
}

void maphist__exit(struct maphist *h, uint32_t pid, uint64_t t)
{
	struct mh_proc *p = peek(h, pid);

	if (p && (!p->dead_ns || t > p->dead_ns))
		p->dead_ns = t ? t : 1;
}

static const struct mh_map *find_at(struct mh_proc *p, uint64_t addr, uint64_t t)
{
	const struct mh_map *best = NULL;
	uint32_t i;

	/* Consecutive frames of a stack often share a mapping. */
	if (p->last_hit < p->n) {
		const struct mh_map *e = &p->maps[p->last_hit];

		if (addr >= e->m.start && addr < e->m.end && e->t_from <= t && t < e->t_to)
			return e;
	}
	for (i = 0; i < p->n; i++) {
		const struct mh_map *e = &p->maps[i];

		if (addr < e->m.start || addr >= e->m.end || e->t_from > t || t >= e->t_to)
			continue;
		if (!best || e->t_from > best->t_from) {
			best = e;
			p->last_hit = i;
		}
	}
	return best;
}

/*
 * A sample taken inside execve past its point of no return (the exec's comm
 * event comes early in begin_new_exec) still carries the old image's user
 * registers: look addr up in the image the exec just before t replaced,
 * within MH_EXEC_WINDOW_NS. That exec is known by the mappings it ended:
 * unwindd may be hundreds of execs behind in an exec storm, so the latest
 * exec would not do.
 */
static const struct mh_map *find_pre_exec(const struct mh_proc *p, uint64_t addr, uint64_t t)
{
	const struct mh_map *best = NULL;
	uint64_t last = 0;
	uint32_t i;

	for (i = 0; i < p->n; i++)
		if (p->maps[i].exec_end && p->maps[i].t_to <= t && p->maps[i].t_to > last)
			last = p->maps[i].t_to;
	/* A later exec that ended nothing (no history before it) is no help. */
	if (!last || t - last >= MH_EXEC_WINDOW_NS || (p->exec_ns <= t && p->exec_ns > last))
		return NULL;
	for (i = 0; i < p->n; i++) {
		const struct mh_map *e = &p->maps[i];

		if (e->exec_end && e->t_to == last && addr >= e->m.start && addr < e->m.end &&
		    (!best || e->t_from > best->t_from))
			best = e;
	}
	return best;
}

const struct umap *maphist__find(struct maphist *h, uint32_t pid, uint64_t addr, uint64_t t,
				 bool *ret_pre_exec)
{
	struct mh_proc *p = peek(h, pid);
	const struct mh_map *e;

	if (ret_pre_exec)
		*ret_pre_exec = false;
	if (!p)
		return NULL;
	e = find_at(p, addr, t);
	if (e)
		return &e->m;
	e = find_pre_exec(p, addr, t);
	if (e && ret_pre_exec)
		*ret_pre_exec = true;
	return e ? &e->m : NULL;
}

bool maphist__has(const struct maphist *h, uint32_t pid)
{
	return peek(h, pid) != NULL;
}

void maphist__sweep(struct maphist *h, uint64_t now, uint64_t grace_ns)
{
	uint64_t horizon = now > grace_ns ? now - grace_ns : 0;
	uint32_t i, j, k;

	if (!horizon)
		return;
	for (i = 0; i <= h->mask; i++) {
		struct mh_proc *p = h->procs[i], *next;

		for (; p; p = next) {
			next = p->hnext;
			if (p->dead_ns && p->dead_ns < horizon) {
				proc_free(h, p);
				continue;
			}
			if (p->min_to < horizon) {
				p->min_to = MH_FOREVER;
				for (j = 0, k = 0; j < p->n; j++) {
					if (p->maps[j].t_to < horizon) {
						entry_drop(h, &p->maps[j]);
						continue;
					}
					p->min_to = MIN(p->min_to, p->maps[j].t_to);
					p->maps[k++] = p->maps[j];
				}
				p->n = k;
				p->last_hit = 0;
			}
			if (!p->n && p->exec_ns < horizon)
				proc_free(h, p); /* nothing left to answer with */
		}
	}
}

uint64_t maphist__bytes(const struct maphist *h)
{
	return h->bytes;
}

uint32_t maphist__nr_procs(const struct maphist *h)
{
	return h->n_procs;
}

uint32_t maphist__nr_maps(const struct maphist *h, uint32_t pid)
{
	const struct mh_proc *p = peek(h, pid);

	return p ? p->n : 0;
}

int maphist__new(maphist_ref_fn ref, void *ctx, struct maphist **ret)
{
	struct maphist *h = calloc(1, sizeof(*h));

	if (!h)
		return -ENOMEM;
	h->ref = ref;
	h->ctx = ctx;
	h->mask = 255;
	h->procs = calloc(h->mask + 1, sizeof(*h->procs));
	if (!h->procs) {
		free(h);
		return -ENOMEM;
	}
	h->bytes = sizeof(*h) + (uint64_t)(h->mask + 1) * sizeof(*h->procs);
	*ret = h;
	return 0;
}

void maphist__free(struct maphist *h)
{
	uint32_t i;

	if (!h)
		return;
	for (i = 0; i <= h->mask; i++)
		while (h->procs[i])
			proc_free(h, h->procs[i]);
	free(h->procs);
	free(h);
}
