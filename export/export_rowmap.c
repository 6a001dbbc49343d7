// SPDX-License-Identifier: MIT
/*
 * The row map (export_int.h): what a row resolved to, found again by its
 * segment's stack id and a few more ids. Rows come a segment at a time, so
 * the map holds one segment: a chain per stack id, cleared when the segment
 * changes. Looking a row up is an array index and a short compare, no hash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "export_int.h"

/* Stack ids are dense from 1; one past this is not cached (a lie on disk). */
#define ROWMAP_MAX_STACK (1u << 22)

static bool same_seg(const struct rowmap *m, uint32_t src, uint32_t seg)
{
	return m->valid && m->src == src && m->seg == seg;
}

bool rowmap__find(const struct rowmap *m, uint32_t src, uint32_t seg, uint32_t stack,
		  const struct rowmap_key *k, uint32_t *ret)
{
	uint32_t e;

	if (!same_seg(m, src, seg) || stack >= m->nhead)
		return false;
	for (e = m->head[stack]; e; e = m->ents[e - 1].next)
		if (!memcmp(&m->ents[e - 1].k, k, sizeof(*k))) {
			*ret = m->ents[e - 1].val;
			return true;
		}
	return false;
}

int rowmap__put(struct rowmap *m, uint32_t src, uint32_t seg, uint32_t stack,
		const struct rowmap_key *k, uint32_t val)
{
	struct rowmap_ent *e;

	if (stack >= ROWMAP_MAX_STACK)
		return 0;
	if (!same_seg(m, src, seg)) {
		if (m->head)
			memset(m->head, 0, m->nhead * sizeof(*m->head));
		m->n = 0;
		m->src = src;
		m->seg = seg;
		m->valid = true;
	}
	if (stack >= m->nhead) {
		size_t cap = m->nhead;

		if (array_grow((void **)&m->head, &cap, (size_t)stack + 1, sizeof(*m->head)) < 0)
			return -ENOMEM;
		memset(m->head + m->nhead, 0, (cap - m->nhead) * sizeof(*m->head));
		m->nhead = (uint32_t)cap;
	}
	if (array_grow((void **)&m->ents, &m->cap, m->n + 1, sizeof(*m->ents)) < 0)
		return -ENOMEM;
	e = &m->ents[m->n++];
	e->k = *k;
	e->val = val;
	e->next = m->head[stack];
	m->head[stack] = (uint32_t)m->n;
	return 0;
}

void rowmap__free(struct rowmap *m)
{
	free(m->head);
	free(m->ents);
	memset(m, 0, sizeof(*m));
}
