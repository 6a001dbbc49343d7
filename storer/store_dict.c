// SPDX-License-Identifier: MIT
/* The store writer's dictionary (store_dict_pvt.h): symd ids -> segment ids. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "store_dict_pvt.h"

_Static_assert(STORE_MAX_FRAMES >= CPA_MAX_STACK_FRAMES,
	       "a reader takes every stack a writer makes");

/* ------------------------------------------------------------ segment ids */

static int dict_str(struct store_dict *dc, const void *s, uint32_t len)
{
	return seg_dict__intern(&dc->seg.str, s, len);
}

int store_dict__marker_stack(struct store_dict *dc, const char *name)
{
	struct seg_frame_key fk = {0};
	struct {
		uint16_t n, nk;
		uint32_t f;
	} sk;
	int r;

	r = dict_str(dc, name, (uint32_t)strlen(name));
	if (r < 0)
		return r;
	fk.name_sid = (uint32_t)r;
	fk.flags = CPA_FF_MARKER;
	r = seg_dict__intern(&dc->seg.frame, &fk, sizeof(fk));
	if (r < 0)
		return r;
	sk.n = 1;
	sk.nk = 0;
	sk.f = (uint32_t)r;
	return seg_dict__intern(&dc->seg.stack, &sk, sizeof(sk));
}

static struct sym_str *sym_str_get(struct store_dict *dc, uint32_t id)
{
	uint32_t i = u32map__get(&dc->sym.str_map, id);

	return i ? &dc->sym.strs.v[i - 1] : NULL;
}

/* Segment string id of symd string id (0 stays 0 = none). */
int store_dict__sym_str(struct store_dict *dc, uint32_t id)
{
	struct sym_str *s;
	int r;

	if (!id)
		return 0;
	s = sym_str_get(dc, id);
	if (!s) {
		(*dc->unknown_ids)++;
		return 0;
	}
	if (s->seg_gen == dc->seg_gen && s->seg_sid)
		return (int)s->seg_sid;
	r = dict_str(dc, dc->sym.bytes.p + s->off, s->len);
	if (r > 0) {
		s->seg_sid = (uint32_t)r;
		s->seg_gen = dc->seg_gen;
	}
	return r;
}

static int seg_sym_mod(struct store_dict *dc, uint32_t id)
{
	uint32_t i = id ? u32map__get(&dc->sym.mod_map, id) : 0;
	struct seg_mod_key k;
	struct sym_mod *m;
	int r;

	if (!i)
		return 0;
	m = &dc->sym.mods.v[i - 1];
	if (m->seg_gen == dc->seg_gen && m->seg_sid)
		return (int)m->seg_sid;
	memset(&k, 0, sizeof(k));
	r = dict_str(dc, dc->sym.bytes.p + m->path_off, m->path_len);
	if (r < 0)
		return r;
	k.kind = m->kind;
	k.path_sid = (uint32_t)r;
	k.bid_len = m->bid_len;
	memcpy(k.bid, m->bid, m->bid_len);
	r = seg_dict__intern(&dc->seg.mod, &k, sizeof(k));
	if (r > 0) {
		m->seg_sid = (uint32_t)r;
		m->seg_gen = dc->seg_gen;
	}
	return r;
}

static int seg_sym_frame(struct store_dict *dc, uint32_t id)
{
	uint32_t i = u32map__get(&dc->sym.frame_map, id);
	struct seg_frame_key k = {0};
	struct sym_frame *f;
	int r;

	if (!i) {
		(*dc->unknown_ids)++;
		r = dict_str(dc, STORE_FRAME_UNKNOWN, sizeof(STORE_FRAME_UNKNOWN) - 1);
		if (r < 0)
			return r;
		k.name_sid = (uint32_t)r;
		k.flags = CPA_FF_MARKER;
		return seg_dict__intern(&dc->seg.frame, &k, sizeof(k));
	}
	f = &dc->sym.frames.v[i - 1];
	if (f->seg_gen == dc->seg_gen && f->seg_sid)
		return (int)f->seg_sid;
	r = store_dict__sym_str(dc, f->def.name_id);
	if (r < 0)
		return r;
	k.name_sid = (uint32_t)r;
	r = seg_sym_mod(dc, f->def.module_id);
	if (r < 0)
		return r;
	k.mod_sid = (uint32_t)r;
	k.flags = f->def.flags;
	k.offset = f->def.offset;
	r = seg_dict__intern(&dc->seg.frame, &k, sizeof(k));
	if (r > 0) {
		f->seg_sid = (uint32_t)r;
		f->seg_gen = dc->seg_gen;
	}
	return r;
}

int store_dict__sym_stack(struct store_dict *dc, uint32_t id)
{
	uint32_t i = id ? u32map__get(&dc->sym.stack_map, id) : 0;
	uint32_t key[SEG_STACK_KEY_MAX];
	struct sym_stack *s;
	uint32_t j;
	int r;

	if (!i) {
		(*dc->unknown_ids)++;
		return store_dict__marker_stack(dc, "[unknown stack]");
	}
	s = &dc->sym.stacks.v[i - 1];
	if (s->seg_gen == dc->seg_gen && s->seg_sid)
		return (int)s->seg_sid;
	key[0] = (uint32_t)s->n | (uint32_t)s->nk << 16;
	for (j = 0; j < s->n; j++) {
		r = seg_sym_frame(dc, dc->sym.u32s.v[s->frames_off + j]);
		if (r < 0)
			return r;
		key[1 + j] = (uint32_t)r;
	}
	r = seg_dict__intern(&dc->seg.stack, key, 4 * (1 + s->n));
	if (r > 0) {
		s->seg_sid = (uint32_t)r;
		s->seg_gen = dc->seg_gen;
	}
	return r;
}

/* ------------------------------------------------------------ definitions */

void store_dict__reset(struct store_dict *dc)
{
	struct sym_tables *t = &dc->sym;

	u32map__free(&t->str_map);
	u32map__free(&t->mod_map);
	u32map__free(&t->frame_map);
	u32map__free(&t->stack_map);
	t->strs.n = t->mods.n = t->frames.n = t->stacks.n = t->u32s.n = 0;
	t->bytes.len = 0;
	t->bytes.oom = false;
}

int store_dict__def_str(struct store_dict *dc, struct store_journal *jr,
			const struct cpa_str_def *d, const char *s)
{
	struct sym_str e = {.off = dc->sym.bytes.len, .len = d->len};
	int r;

	if (!d->id)
		return -EINVAL;
	sbuf__put(&dc->sym.bytes, s, d->len);
	if (dc->sym.bytes.oom)
		return -ENOMEM;
	r = VEC_PUSH(dc->sym.strs, e);
	if (r < 0)
		return r;
	store_journal__append(jr, CPA_REC_STR, d, sizeof(*d), s, d->len);
	return u32map__set(&dc->sym.str_map, d->id, (uint32_t)r);
}

int store_dict__def_module(struct store_dict *dc, struct store_journal *jr,
			   const struct cpa_module_def *m, const char *path)
{
	struct sym_mod e = {
		.path_off = dc->sym.bytes.len, .path_len = m->path_len, .kind = m->kind};
	int r;

	if (!m->id || m->build_id_len > CPA_BUILD_ID_MAX)
		return -EINVAL;
	e.bid_len = m->build_id_len;
	memcpy(e.bid, m->build_id, m->build_id_len);
	sbuf__put(&dc->sym.bytes, path, m->path_len);
	if (dc->sym.bytes.oom)
		return -ENOMEM;
	r = VEC_PUSH(dc->sym.mods, e);
	if (r < 0)
		return r;
	store_journal__append(jr, CPA_REC_MODULE, m, sizeof(*m), path, m->path_len);
	return u32map__set(&dc->sym.mod_map, m->id, (uint32_t)r);
}

int store_dict__def_frame(struct store_dict *dc, struct store_journal *jr,
			  const struct cpa_frame_def *f)
{
	struct sym_frame e = {.def = *f};
	int r;

	if (!f->id)
		return -EINVAL;
	r = VEC_PUSH(dc->sym.frames, e);
	if (r < 0)
		return r;
	store_journal__append(jr, CPA_REC_FRAME, f, sizeof(*f), NULL, 0);
	return u32map__set(&dc->sym.frame_map, f->id, (uint32_t)r);
}

int store_dict__def_stack(struct store_dict *dc, struct store_journal *jr,
			  const struct cpa_stack_def *s, const uint32_t *frame_ids)
{
	struct sym_stack e = {.frames_off = dc->sym.u32s.n, .n = s->n_frames, .nk = s->n_kframes};
	uint32_t i;
	int r;

	if (!s->id || s->n_kframes > s->n_frames || s->n_frames > CPA_MAX_STACK_FRAMES)
		return -EINVAL;
	for (i = 0; i < s->n_frames; i++) {
		r = VEC_PUSH(dc->sym.u32s, frame_ids[i]);
		if (r < 0)
			return r;
	}
	r = VEC_PUSH(dc->sym.stacks, e);
	if (r < 0)
		return r;
	store_journal__append(jr, CPA_REC_STACK, s, sizeof(*s), frame_ids, 4u * s->n_frames);
	return u32map__set(&dc->sym.stack_map, s->id, (uint32_t)r);
}

void store_dict__new_segment(struct store_dict *dc, int64_t sec)
{
	if (store_dict__seg_full(dc) && sec - dc->seg_start_s < STORE_SEG_DICT_REFILL_S)
		dc->seg_budget = MIN(2 * dc->seg_budget, dc->seg_max);
	dc->seg_start_s = sec;
	seg_dict__reset(&dc->seg);
	dc->seg_gen++;
}

/* What its entries take (a new segment keeps the tables' room for the next one). */
static size_t seg_used(const struct intern *t)
{
	return (size_t)t->n * (sizeof(struct intern_ent) + 2 * sizeof(uint32_t)) + t->pool_len;
}

size_t store_dict__seg_bytes(const struct store_dict *dc)
{
	return seg_used(&dc->seg.str) + seg_used(&dc->seg.mod) + seg_used(&dc->seg.frame) +
	       seg_used(&dc->seg.stack);
}

bool store_dict__seg_full(const struct store_dict *dc)
{
	return dc->seg_budget && store_dict__seg_bytes(dc) > dc->seg_budget;
}

void store_dict__free(struct store_dict *dc)
{
	store_dict__reset(dc);
	free(dc->sym.strs.v);
	free(dc->sym.mods.v);
	free(dc->sym.frames.v);
	free(dc->sym.stacks.v);
	free(dc->sym.u32s.v);
	sbuf__free(&dc->sym.bytes);
	seg_dict__free(&dc->seg);
}
