// SPDX-License-Identifier: MIT
/*
 * --split_path: a range of a store as a new store, written by the real store
 * writer (storer/store.h) from the reader's rows. The rows carry resolved
 * names, so they are interned again into symd-style definitions (strings,
 * modules, frames, stacks: ids from 1 in the new store's one dictionary
 * epoch) and replayed as samples at their second. Everything a reader sees
 * is kept: labels, kind, probe, cgroup, cpu, frames with module, build-id,
 * offset and flags, loss rows (their "[lost: ...]" marker frame).
 *
 * All or nothing: when a write fails (a full disk) the store dirs the split
 * made are removed again, and the root's .cpa-lock goes either way.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export_int.h"

struct store_split {
	struct store_writer *w;
	uint32_t src;
	struct xtab strs;  /* string -> id - 1 */
	struct xtab mods;  /* path NUL build-id -> id - 1 */
	struct xtab frms;  /* struct cpa_frame_def without id -> id - 1 */
	struct xtab stks;  /* frame ids + n_kframes -> id - 1 */
	struct xtab cache; /* (src, seg, stack_id) -> stkval */
	struct u32vec stkval;
	uint64_t samples, seq;
	char *root;
	char **before; /* the root's entries before the split: what it must not remove */
	size_t nbefore;
	bool done;
};

#define NS 1000000000ull

/* Names in the root now (it may not exist yet). */
static int snapshot(struct store_split *sp)
{
	DIR *d = opendir(sp->root);
	struct dirent *de;
	size_t cap = 0;

	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while ((de = readdir(d))) {
		if (sp->nbefore == cap) {
			char **nb = realloc(sp->before, (cap = cap ? cap * 2 : 16) * sizeof(*nb));

			if (!nb)
				goto oom;
			sp->before = nb;
		}
		if (!(sp->before[sp->nbefore] = strdup(de->d_name)))
			goto oom;
		sp->nbefore++;
	}
	closedir(d);
	return 0;
oom:
	closedir(d);
	return -ENOMEM;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* The writer is gone: drop the lock note; without ok, the dirs the split made. */
static void finish(struct store_split *sp, bool ok)
{
	char path[4096];
	DIR *d;
	struct dirent *de;
	size_t i;

	sp->done = true;
	snprintf(path, sizeof(path), "%s/.cpa-lock", sp->root);
	unlink(path);
	if (ok || !(d = opendir(sp->root)))
		return;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "cpa_", 4))
			continue;
		for (i = 0; i < sp->nbefore && strcmp(sp->before[i], de->d_name); i++)
			;
		if (i < sp->nbefore)
			continue;
		snprintf(path, sizeof(path), "%s/%s", sp->root, de->d_name);
		nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	}
	closedir(d);
}

int store_split__new(const char *root, uint32_t freq, struct store_split **ret)
{
	struct store_writer_opts o = {.root = root, .freq = freq, .record_interval = 1};
	struct store_split *sp = calloc(1, sizeof(*sp));
	int r;

	if (!sp)
		return -ENOMEM;
	sp->root = strdup(root);
	r = sp->root ? snapshot(sp) : -ENOMEM;
	if (r >= 0)
		r = store_writer__new(&o, &sp->w);
	if (r < 0) {
		/* another writer's lock (-EBUSY) is not ours to remove */
		sp->done = !sp->root || r == -EBUSY;
		store_split__free(sp);
		return r;
	}
	*ret = sp;
	return 0;
}

void store_split__free(struct store_split *sp)
{
	size_t i;

	if (!sp)
		return;
	store_writer__free(sp->w);
	if (!sp->done)
		finish(sp, false);
	for (i = 0; i < sp->nbefore; i++)
		free(sp->before[i]);
	free(sp->before);
	free(sp->root);
	xtab__free(&sp->strs);
	xtab__free(&sp->mods);
	xtab__free(&sp->frms);
	xtab__free(&sp->stks);
	xtab__free(&sp->cache);
	u32vec__free(&sp->stkval);
	free(sp);
}

void store_split__new_source(struct store_split *sp)
{
	sp->src++;
}

static int str_def(struct store_split *sp, const char *s, uint32_t *ret)
{
	uint32_t len = (uint32_t)strlen(s), id;
	int r;

	if (!len) {
		*ret = 0; /* "none" */
		return 0;
	}
	r = xtab__intern(&sp->strs, s, len, &id);
	if (r < 0)
		return r;
	*ret = id + 1;
	if (r == 1) {
		struct cpa_str_def d = {.id = id + 1, .len = len};

		return store_writer__def_str(sp->w, &d, s);
	}
	return 0;
}

static int module_def(struct store_split *sp, const struct store_frame *f, uint32_t *ret)
{
	char key[4096 + CPA_BUILD_ID_MAX + 2];
	size_t pl = strlen(f->module);
	uint32_t id;
	int r;

	if (!pl) {
		*ret = 0;
		return 0;
	}
	if (pl > 4096)
		pl = 4096;
	memcpy(key, f->module, pl);
	key[pl] = 0;
	key[pl + 1] = (char)f->build_id_len;
	memcpy(key + pl + 2, f->build_id, f->build_id_len);
	r = xtab__intern(&sp->mods, key, (uint32_t)(pl + 2 + f->build_id_len), &id);
	if (r < 0)
		return r;
	*ret = id + 1;
	if (r == 1) {
		struct cpa_module_def m = {.id = id + 1,
					   .kind = CPA_MOD_FILE,
					   .path_len = (uint32_t)pl,
					   .build_id_len = f->build_id_len};

		memcpy(m.build_id, f->build_id, f->build_id_len);
		return store_writer__def_module(sp->w, &m, key);
	}
	return 0;
}

static int frame_def(struct store_split *sp, const struct store_frame *f, uint32_t *ret)
{
	struct cpa_frame_def d;
	uint32_t id;
	int r;

	memset(&d, 0, sizeof(d));
	if ((r = str_def(sp, f->name, &d.name_id)) < 0 || (r = module_def(sp, f, &d.module_id)) < 0)
		return r;
	d.flags = f->flags;
	d.offset = f->offset;
	r = xtab__intern(&sp->frms, &d, sizeof(d), &id);
	if (r < 0)
		return r;
	*ret = id + 1;
	if (r == 1) {
		d.id = id + 1;
		return store_writer__def_frame(sp->w, &d);
	}
	return 0;
}

static int stack_def(struct store_split *sp, const struct store_sample *s, uint32_t *ret)
{
	uint32_t key[3] = {sp->src, s->seg, s->stack_id}, ids[CPA_MAX_STACK_FRAMES + 1], cid = 0,
		 id, i, n = s->n_frames < CPA_MAX_STACK_FRAMES ? s->n_frames : CPA_MAX_STACK_FRAMES;
	bool cache = s->n_frames > 1; /* a lone frame may stand for an undefined id */
	int r;

	if (cache) {
		r = xtab__intern(&sp->cache, key, sizeof(key), &cid);
		if (r < 0)
			return r;
		if (r == 0) {
			*ret = sp->stkval.v[cid];
			return 0;
		}
	}
	for (i = 0; i < n; i++) {
		r = frame_def(sp, s->frames[i], &ids[i]);
		if (r < 0)
			return r;
	}
	ids[n] = s->n_kframes; /* part of the key: where the kernel frames end */
	r = xtab__intern(&sp->stks, ids, (n + 1) * (uint32_t)sizeof(*ids), &id);
	if (r < 0)
		return r;
	*ret = id + 1;
	if (r == 1) {
		struct cpa_stack_def d = {.id = id + 1,
					  .n_frames = (uint16_t)n,
					  .n_kframes =
						  (uint16_t)(s->n_kframes < n ? s->n_kframes : n)};

		r = store_writer__def_stack(sp->w, &d, ids);
		if (r < 0)
			return r;
	}
	if (cache && u32vec__push(&sp->stkval, *ret) < 0)
		return -ENOMEM;
	return 0;
}

int store_split__add(void *ctx, const struct store_sample *s)
{
	struct store_split *sp = ctx;
	struct cpa_sample_out o;
	uint64_t i;
	int r;

	memset(&o, 0, sizeof(o));
	r = stack_def(sp, s, &o.stack_id);
	if (r < 0)
		return r;
	if ((r = str_def(sp, s->comm, &o.comm_id)) < 0 ||
	    (r = str_def(sp, s->pcomm, &o.pcomm_id)) < 0 ||
	    (r = str_def(sp, s->env, &o.env_id)) < 0)
		return r;
	o.time_ns = (uint64_t)s->sec * NS;
	o.cgroup_id = s->cgroup_id;
	o.pid = s->pid;
	o.tid = s->tid;
	o.cpu = s->cpu;
	o.kind = s->kind;
	o.probe_id = s->probe_id;
	/* A row of count N is N samples; their weights add up to the row's. */
	for (i = 0; i < s->count; i++) {
		o.seq = ++sp->seq;
		o.weight = s->weight / s->count + (i + 1 == s->count ? s->weight % s->count : 0);
		r = store_writer__add_sample(sp->w, &o);
		if (r < 0)
			return r;
		sp->samples++;
	}
	return 0;
}

int store_split__close(struct store_split *sp, uint64_t *ret_samples, char *dir, size_t len)
{
	struct store_writer_stats st;
	int r = store_writer__flush(sp->w, true);

	store_writer__stats(sp->w, &st);
	/* any write that failed, any sample not stored: the store is torn */
	if (r >= 0 && (st.write_errors || st.dropped_blocks || st.refused_samples ||
		       st.lost_samples_discarded || st.fsync_errors || st.store_gone))
		r = st.last_error < 0 ? st.last_error : -EIO;
	if (ret_samples)
		*ret_samples = sp->samples;
	if (dir)
		snprintf(dir, len, "%s", store_writer__dir(sp->w));
	store_writer__free(sp->w);
	sp->w = NULL;
	finish(sp, r >= 0);
	return r;
}
