// SPDX-License-Identifier: MIT
/*
 * Store -> timeline and call trees (model.h).
 *
 * A range is aggregated in two passes: rows -> (stack, group) sums, where a
 * stack is interned once per (segment, stack id) into root-first name ids and
 * a row mostly costs a compare with the pair kept in its stack id's slot
 * (struct vslot); then each distinct (stack, group) pair is added to the tree
 * along its path. The blocks of a long range are read by two threads, each
 * summing into its own table (struct vwork; "An aggregation's shared state").
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/array.h"
#include "common/macro.h"
#include "model.h"

#define NS 1000000000ULL

/* ------------------------------------------------------------ filters */

static const char *const group_names[VG_MAX] = {"process", "thread", "cgroup",
						"env",	   "cpu",    "name"};

const char *vgroup__name(enum vgroup g)
{
	return g < VG_MAX ? group_names[g] : "?";
}

void vfilter__init(struct vfilter *f)
{
	memset(f, 0, sizeof(*f));
	f->pid = -1;
	f->cgroup = -1;
	f->probe = -1;
	f->kinds = VK_ALL;
	f->group = VG_PROCESS;
	f->kernel = true;
}

bool vfilter__selects_all(const struct vfilter *f)
{
	return f->pid < 0 && f->cgroup < 0 && f->probe < 0 && !f->comm[0] && !f->env[0] &&
	       !f->has_cpus && f->kinds == VK_ALL;
}

static int parse_kinds(const char *v, unsigned int *ret)
{
	unsigned int k = 0;
	char buf[64], *save = NULL, *tok;

	snprintf(buf, sizeof(buf), "%s", v);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "on") || !strcmp(tok, "oncpu"))
			k |= VK_ON;
		else if (!strcmp(tok, "off") || !strcmp(tok, "offcpu"))
			k |= VK_OFF;
		else if (!strcmp(tok, "probe"))
			k |= VK_PROBE;
		else if (!strcmp(tok, "lost"))
			k |= VK_LOST;
		else if (!strcmp(tok, "all"))
			k |= VK_ALL;
		else
			return -EINVAL;
	}
	if (!k)
		return -EINVAL;
	*ret = k;
	return 0;
}

int vfilter__parse(struct vfilter *f, const char *s, char *err, size_t errlen)
{
	struct vfilter n;
	char buf[512], *save = NULL, *tok;

	vfilter__init(&n);
	n.group = f->group;
	n.kernel = f->kernel;
	snprintf(buf, sizeof(buf), "%s", s);
	for (tok = strtok_r(buf, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save)) {
		char *eq = strchr(tok, '='), *end;
		const char *v;

		if (!eq || eq == tok || !eq[1]) {
			snprintf(err, errlen, "want key=value, got '%s'", tok);
			return -EINVAL;
		}
		*eq = '\0';
		v = eq + 1;
		if (!strcmp(tok, "pid")) {
			n.pid = strtoll(v, &end, 10);
			if (*end || n.pid < 0)
				goto bad;
		} else if (!strcmp(tok, "cgroup")) {
			n.cgroup = strtoll(v, &end, 0);
			if (*end || n.cgroup < 0)
				goto bad;
		} else if (!strcmp(tok, "probe")) {
			n.probe = strtoll(v, &end, 10);
			if (*end || n.probe < 0)
				goto bad;
		} else if (!strcmp(tok, "comm")) {
			snprintf(n.comm, sizeof(n.comm), "%s", v);
		} else if (!strcmp(tok, "env")) {
			snprintf(n.env, sizeof(n.env), "%s", v);
		} else if (!strcmp(tok, "cpu")) {
			if (cpulist__parse(v, n.cpus, VCPU_BITS, NULL) < 0)
				goto bad;
			n.has_cpus = true;
			snprintf(n.cpu_list, sizeof(n.cpu_list), "%s", v);
		} else if (!strcmp(tok, "kind")) {
			if (parse_kinds(v, &n.kinds) < 0)
				goto bad;
		} else {
			snprintf(err, errlen,
				 "unknown filter '%s' (pid comm cgroup cpu env kind probe)", tok);
			return -EINVAL;
		}
		continue;
bad:
		snprintf(err, errlen, "bad value for %s: '%s'", tok, v);
		return -EINVAL;
	}
	*f = n;
	return 0;
}

void vfilter__describe(const struct vfilter *f, char *buf, size_t len)
{
	static const char *const kind_names[] = {"on", "off", "probe", "lost"};
	char kinds[32] = "";
	size_t o = 0, k;

	buf[0] = '\0';
	for (k = 0; k < 4; k++)
		if (f->kinds & (1u << k))
			snprintf(kinds + strlen(kinds), sizeof(kinds) - strlen(kinds), "%s%s",
				 kinds[0] ? "," : "", kind_names[k]);
#define ADD(...)                                                              \
	do {                                                                  \
		if (o < len)                                                  \
			o += (size_t)snprintf(buf + o, len - o, __VA_ARGS__); \
	} while (0)
	if (f->pid >= 0)
		ADD("pid=%lld ", (long long)f->pid);
	if (f->comm[0])
		ADD("comm=%s ", f->comm);
	if (f->cgroup >= 0)
		ADD("cgroup=%lld ", (long long)f->cgroup);
	if (f->has_cpus)
		ADD("cpu=%s ", f->cpu_list);
	if (f->env[0])
		ADD("env=%s ", f->env);
	if (f->kinds != VK_ALL)
		ADD("kind=%s ", kinds);
	if (f->probe >= 0)
		ADD("probe=%lld ", (long long)f->probe);
#undef ADD
	o = strlen(buf);
	if (o && buf[o - 1] == ' ')
		buf[o - 1] = '\0';
}

static void to_store_filter(const struct vfilter *f, struct store_filter *sf)
{
	store_filter__init(sf);
	sf->pid = f->pid;
	sf->cgroup_id = f->cgroup;
	sf->comm = f->comm[0] ? f->comm : NULL;
	sf->env = f->env[0] ? f->env : NULL;
	if (f->has_cpus) {
		sf->cpu_set = f->cpus;
		sf->cpu_set_bits = VCPU_BITS;
	}
}

static bool kind_ok_raw(const struct vfilter *f, bool lost, uint32_t kind, uint32_t probe_id)
{
	if (f->probe >= 0 && (lost || kind != CPA_KIND_PROBE || probe_id != f->probe))
		return false;
	if (lost)
		return f->kinds & VK_LOST;
	switch (kind) {
	case CPA_KIND_ONCPU:
		return f->kinds & VK_ON;
	case CPA_KIND_OFFCPU:
		return f->kinds & VK_OFF;
	default:
		return f->kinds & VK_PROBE;
	}
}

static bool kind_ok(const struct vfilter *f, const struct store_sample *s)
{
	return kind_ok_raw(f, s->lost, s->kind, s->probe_id);
}

/* ------------------------------------------------------------ open */

/* A reader's notices, into the worker whose reader it is (ctx). */
static void on_notice(void *ctx, const char *msg)
{
	struct vwork *w = ctx;

	/* The block being written right now looks torn to a reader: not news. */
	if (strstr(msg, "torn"))
		return;
	w->notices++;
	snprintf(w->last_notice, sizeof(w->last_notice), "%s", msg);
}

static int pick_dir(const char *path, char *dir, size_t len, char *err, size_t errlen)
{
	struct stat sb;
	int r;

	if (stat(path, &sb) < 0) {
		snprintf(err, errlen, "'%s': %s", path, strerror(errno));
		return -errno;
	}
	if (store_dir__is_store(path)) {
		snprintf(dir, len, "%s", path);
		return 0;
	}
	dir[0] = 0;
	r = store_root__pick(path, -1, dir, len);
	if (r == -ENOENT)
		snprintf(err, errlen,
			 "no cpa store in '%s' (want a cpa_YYMMDD... dir or the root holding them)",
			 path);
	else if (r < 0) /* the dir that cannot be read: path, or its one store dir (as cpa show) */
		snprintf(err, errlen, "'%s': %s", dir[0] ? dir : path, strerror(-r));
	return r;
}

/* Spread each block's header count of dir over its seconds. */
static int load_timeline_dir(struct vmodel *m, const char *dir)
{
	_cleanup_free_ struct store_tl_block *bl = NULL;
	size_t n, i;
	uint64_t bad = 0;
	int r = store_timeline__read(dir, &bl, &n, &bad);

	if (r < 0)
		return r; /* no usable index: the exact counts are all there is */
	m->hdr_bad += bad;
	for (i = 0; i < n; i++) {
		int64_t s0 = bl[i].t_min_s, ns = (int64_t)bl[i].span_s + 1, s;
		uint64_t per = bl[i].n_samples / (uint64_t)ns, rem = bl[i].n_samples % (uint64_t)ns;

		for (s = 0; s < ns; s++) {
			int64_t sec = s0 + s;

			if (sec < m->first_s || sec > m->last_s)
				continue;
			m->hdr[sec - m->first_s] += per + ((uint64_t)s < rem);
		}
	}
	return 0;
}

static int load_timeline(struct vmodel *m)
{
	int r = 0;

	m->hdr_bad = 0;
	if (!m->n_dirs)
		return load_timeline_dir(m, m->dir);
	for (uint32_t i = 0; i < m->n_dirs && r != -EPROTONOSUPPORT; i++)
		r = load_timeline_dir(m, m->dirs[i]);
	return r;
}

static void dirs_free(struct vmodel *m)
{
	for (uint32_t i = 0; i < m->n_dirs; i++)
		free(m->dirs[i]);
	free(m->dirs);
	m->dirs = NULL;
	m->n_dirs = 0;
}

static void model_close(struct vmodel *m)
{
	for (uint32_t k = 0; k < VWORKERS; k++)
		if (m->work[k].r != m->r)
			store_reader__free(m->work[k].r);
	store_reader__free(m->r);
	m->r = NULL;
	for (uint32_t k = 0; k < VWORKERS; k++)
		m->work[k].r = NULL;
	dirs_free(m);
	vmodel__series_reset(m);
	free(m->hdr);
	free(m->exact);
	free(m->known);
	m->hdr = NULL;
	m->exact = NULL;
	m->known = NULL;
}

/* A run dir of the root this user cannot open: into m->unread, named. */
static void on_unread(void *ctx, const char *path, int e)
{
	struct vmodel *m = ctx;
	size_t o = strlen(m->unread);

	if (o < sizeof(m->unread) - 1)
		snprintf(m->unread + o, sizeof(m->unread) - o, "%s'%s': %s", o ? "; " : "", path,
			 strerror(e));
	m->n_unread++;
}

static int model_load(struct vmodel *m, char *err, size_t errlen)
{
	uint64_t first, last, recs;
	size_t n;
	int r;

	m->unread[0] = 0;
	m->n_unread = 0;
	if (m->root[0])
		store_root__for_each_shut(m->root, m->dir, on_unread, m);

	/* A root: every run of the picked dir's day, read as one (as `cpa show`). */
	if (m->root[0] && store_root__day_dirs(m->root, m->dir, &m->dirs, &m->n_dirs) == 0 &&
	    m->n_dirs > 1) {
		r = store_reader__open_set((const char *const *)m->dirs, m->n_dirs, on_notice,
					   &m->work[0], &m->r, err, errlen);
	} else {
		dirs_free(m);
		r = store_reader__open_err(m->dir, on_notice, &m->work[0], &m->r, err, errlen);
	}
	if (r < 0)
		return r;
	r = store_reader__range(m->r, &first, &last, &recs);
	if (r < 0 || !recs) {
		snprintf(err, errlen, "store '%s' holds no samples yet%s%s", m->dir,
			 r < 0 ? ": " : "", r < 0 ? store_reader__error(m->r) : "");
		return r < 0 ? r : -ENODATA;
	}
	m->first_s = (int64_t)(first / NS);
	m->last_s = (int64_t)(last / NS);
	if (m->last_s - m->first_s > 400L * 86400) {
		snprintf(err, errlen, "store '%s' spans more than 400 days: damaged times?",
			 m->dir);
		return -EBADMSG;
	}
	n = (size_t)(m->last_s - m->first_s + 1);
	m->hdr = calloc(n, sizeof(*m->hdr));
	m->exact = calloc(n, sizeof(*m->exact));
	m->known = calloc(n, 1);
	if (!m->hdr || !m->exact || !m->known) {
		snprintf(err, errlen, "out of memory for a %zu-second timeline", n);
		return -ENOMEM;
	}
	r = load_timeline(m);
	if (r == -EPROTONOSUPPORT) {
		snprintf(
			err, errlen,
			"store '%s' has a newer format version than this cpa-view reads: use a newer cpa",
			m->dir);
		return r;
	}
	return 0;
}

int vmodel__open(struct vmodel *m, const char *path, char *err, size_t errlen)
{
	int r;

	memset(m, 0, sizeof(*m));
	{
		/* short holds: spin a little before sleeping (a sleep costs more than the hold) */
		pthread_mutexattr_t ma;

		pthread_mutexattr_init(&ma);
		pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
		pthread_mutex_init(&m->mu, &ma);
		pthread_mutexattr_destroy(&ma);
	}
	m->workers = (uint32_t)MIN(MAX(sysconf(_SC_NPROCESSORS_ONLN), 1L), (long)VWORKERS);
	r = pick_dir(path, m->dir, sizeof(m->dir), err, errlen);
	if (r < 0)
		return r;
	if (strcmp(m->dir, path))
		snprintf(m->root, sizeof(m->root), "%s", path);
	return model_load(m, err, errlen);
}

int vmodel__reload(struct vmodel *m, char *err, size_t errlen)
{
	model_close(m);
	/* The interned stacks stay valid: segments are append-only. */
	return model_load(m, err, errlen);
}

static void tab_free(struct vaggtab *tab);
static void chunks_free(struct vmodel *m);

void vmodel__free(struct vmodel *m)
{
	uint32_t i;

	model_close(m);
	strtab__free(&m->names);
	for (uint32_t k = 0; k < VWORKERS; k++) {
		struct vwork *w = &m->work[k];

		for (i = 0; i < w->n_segs; i++)
			free(w->segs[i].slot);
		free(w->segs);
		u64map__free(&w->fcache_map);
		u64map__free(&w->pair_map);
		free(w->fcache);
		tab_free(&w->agg);
		tab_free(&w->cagg);
	}
	u64map__free(&m->stack_dedup);
	for (i = 0; i < VG_MAX; i++)
		u64map__free(&m->groups[i]);
	tab_free(&m->agg);
	u64map__free(&m->pair_map);
	free(m->pairs);
	chunks_free(m);
	free(m->ld_exact);
	free(m->stacks);
	free(m->frames);
	pthread_mutex_destroy(&m->mu);
	memset(m, 0, sizeof(*m));
}

void vmodel__unread_line(const struct vmodel *m, char *buf, size_t len)
{
	if (!m->n_unread) {
		snprintf(buf, len, "%s", "");
		return;
	}
	snprintf(buf, len, "%s: %s samples are not shown (this user cannot read %s)", m->unread,
		 m->n_unread > 1 ? "their" : "its", m->n_unread > 1 ? "those runs" : "that run");
}

uint64_t vmodel__corrupt(const struct vmodel *m)
{
	struct store_read_stats st = {0};

	if (m->r)
		store_reader__stats(m->r, &st);
	return st.blocks_corrupt + m->hdr_bad;
}

uint64_t vmodel__sec_total(const struct vmodel *m, int64_t s)
{
	const struct vsec *e;

	if (!m->hdr || s < m->first_s || s > m->last_s)
		return 0;
	if (!m->known[s - m->first_s])
		return m->hdr[s - m->first_s];
	e = &m->exact[s - m->first_s];
	return (uint64_t)e->on + e->off + e->probe + e->lost;
}

/* ------------------------------------------------------------ aggregation */

static uint8_t frame_cls(const struct store_frame *f)
{
	if (f->flags & CPA_FF_MARKER)
		return VCLS_MARKER;
	if (f->flags & CPA_FF_KERNEL)
		return VCLS_KERNEL;
	if (f->flags & CPA_FF_UNSYMBOLIZED)
		return VCLS_UNSYM;
	if (!f->module[0] || f->module[0] == '[')
		return VCLS_JIT;
	return strstr(f->module, ".so") ? VCLS_LIB : VCLS_EXE;
}

/*
 * An aggregation's shared state. Its pieces (the runs and closed chunks of
 * the range still to read, in time order) are taken by up to VWORKERS
 * threads, worker 0 from the front, worker 1 from the back, so each reads
 * whole segments but the one where they meet. A worker sums rows into its
 * own table with its own reader and slots; what the workers share (names,
 * stacks, frames, pairs, groups, the chunk cache) is taken under m->mu on
 * the slow paths (a new stack, group or pair; a chunk cached).
 */
struct vpiece {
	int64_t t0, t1;
	bool chunk; /* a closed chunk: its sums are cached */
};

struct agg_job {
	struct vmodel *m;
	const struct vfilter *f;
	bool timeline; /* unfiltered: the exact per-second counts are kept */
	bool threaded; /* more than one worker: m->mu is taken */
	struct vprogress *pg;
	struct vpiece *pieces;
	uint32_t n_pieces, cap_pieces, head, tail; /* [head, tail) not taken yet */
	int err;				   /* the first worker's error */
	atomic_bool stop;			   /* a worker failed: the others stop */
};

struct agg_ctx {
	struct agg_job *j;
	struct vwork *w;
	struct vaggtab *tab;	 /* the sums this query goes to */
	struct vrange_stats *st; /* and its counts */
	int64_t q0;		 /* the query's start */
	bool held;		 /* m->mu held to the end of the block (new stacks) */
};

static void job_lock(struct agg_job *j)
{
	if (j->threaded)
		pthread_mutex_lock(&j->m->mu);
}

static void job_unlock(struct agg_job *j)
{
	if (j->threaded)
		pthread_mutex_unlock(&j->m->mu);
}

/* m->mu for a slow path of worker c, unless it holds it for the block. */
static void ctx_lock(struct agg_ctx *c)
{
	if (!c->held)
		job_lock(c->j);
}

static void ctx_unlock(struct agg_ctx *c)
{
	if (!c->held)
		job_unlock(c->j);
}

/* The map of segment seg, NULL on ENOMEM. */
static struct vseg_map *seg_map(struct vwork *w, uint32_t seg)
{
	uint32_t i;

	if (w->last_seg < w->n_segs && w->segs[w->last_seg].seg == seg)
		return &w->segs[w->last_seg];
	for (i = 0; i < w->n_segs; i++)
		if (w->segs[i].seg == seg)
			break;
	if (i == w->n_segs) {
		struct vseg_map *ns = realloc(w->segs, (w->n_segs + 1) * sizeof(*ns));

		if (!ns)
			return NULL;
		w->segs = ns;
		w->segs[w->n_segs++] = (struct vseg_map){.seg = seg};
	}
	w->last_seg = i;
	return &w->segs[i];
}

/* The slot of stack_id in sm, NULL on ENOMEM. */
static struct vslot *seg_slot(struct vseg_map *sm, uint32_t stack_id)
{
	if (stack_id >= sm->cap) {
		uint32_t old = sm->cap;

		if (array_grow32((void **)&sm->slot, &sm->cap, (size_t)stack_id + 1,
				 sizeof(*sm->slot)) < 0)
			return NULL;
		memset(sm->slot + old, 0, (size_t)(sm->cap - old) * sizeof(*sm->slot));
	}
	return &sm->slot[stack_id];
}

/* Interned name, module and class of a frame of segment seg. Frames are
 * cached by address for the rows of one segment (of w's reader): hashing the
 * address is cheaper than hashing an 80-byte C++ name. */
static int frame_of(struct vmodel *m, struct vwork *w, uint32_t seg, const struct store_frame *f,
		    struct vpath_ent *ret)
{
	uint32_t i;

	if (seg != w->fcache_seg) {
		u64map__clear(&w->fcache_map);
		w->n_fcache = 0;
		w->fcache_seg = seg;
	}
	i = u64map__get(&w->fcache_map, (uint64_t)(uintptr_t)f);
	if (i != UINT32_MAX) {
		*ret = w->fcache[i];
		return 0;
	}
	ret->cls = frame_cls(f);
	ret->name = strtab__intern(&m->names, f->name, strlen(f->name));
	ret->module = f->module[0] ? strtab__intern(&m->names, f->module, strlen(f->module)) : 0;
	if (!ret->name ||
	    array_grow32((void **)&w->fcache, &w->cap_fcache, w->n_fcache + 1, sizeof(*w->fcache)))
		return -ENOMEM;
	w->fcache[w->n_fcache] = *ret;
	return u64map__put(&w->fcache_map, (uint64_t)(uintptr_t)f, w->n_fcache++);
}

/* Same frames (field by field: vpath_ent has padding). */
static bool frames_eq(const struct vpath_ent *a, const struct vpath_ent *b, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		if (a[i].name != b[i].name || a[i].module != b[i].module || a[i].cls != b[i].cls)
			return false;
	return true;
}

/* Interned stack of a row (into w's slot of it): index into m->stacks, or
 * UINT32_MAX on ENOMEM. Each segment numbers its stacks anew; the same frames
 * in another segment map to the same entry (hash of the frames, checked). */
static uint32_t stack_of(struct vmodel *m, struct vwork *w, const struct store_sample *s)
{
	struct vseg_map *sm = seg_map(w, s->seg);
	struct vslot *slot = sm ? seg_slot(sm, s->stack_id) : NULL;
	uint32_t i, k = 0, n, nk, cand;
	struct vstack *st;
	uint64_t h = 0x9e3779b97f4a7c15ULL;

	if (!slot)
		return UINT32_MAX;
	if (slot->stack)
		return slot->stack - 1;
	n = MIN(s->n_frames, 512u);
	nk = MIN(s->n_kframes, n);
	if (array_grow32((void **)&m->stacks, &m->cap_stacks, m->n_stacks + 1,
			 sizeof(*m->stacks)) ||
	    array_grow32((void **)&m->frames, &m->cap_frames, m->n_frames + n, sizeof(*m->frames)))
		return UINT32_MAX;
	st = &m->stacks[m->n_stacks];
	memset(st, 0, sizeof(*st));
	st->lost = s->lost;
	st->off = m->n_frames;
	st->n = (uint16_t)n;
	st->nk = (uint16_t)nk;
	for (i = n; i-- > 0;) {
		/* Stored leaf first, kernel first: n-1..0 is user root..leaf, kernel root..leaf. */
		const struct store_frame *f = s->frames[i];
		struct vpath_ent *e = &m->frames[st->off + k++];

		if (frame_of(m, w, s->seg, f, e) < 0)
			return UINT32_MAX;
		if (e->cls == VCLS_MARKER && !strncmp(f->name, "[degraded", 9))
			st->degraded = true;
		h = hash64_mix(h ^ ((uint64_t)e->name << 24 ^ (uint64_t)e->module << 4 ^ e->cls));
	}
	h = hash64_mix(h ^ nk);
	cand = u64map__get(&m->stack_dedup, h);
	if (cand != UINT32_MAX && m->stacks[cand].n == n && m->stacks[cand].nk == nk &&
	    m->stacks[cand].degraded == st->degraded &&
	    frames_eq(&m->frames[m->stacks[cand].off], &m->frames[st->off], n)) {
		/* seen in another segment: drop the copy */
		*slot = (struct vslot){
			.stack = cand + 1, .degraded = st->degraded, .lost = st->lost};
		return cand;
	}
	m->n_frames += n;
	if (cand == UINT32_MAX && u64map__put(&m->stack_dedup, h, m->n_stacks) < 0)
		return UINT32_MAX;
	*slot = (struct vslot){
		.stack = m->n_stacks + 1, .degraded = st->degraded, .lost = st->lost};
	return m->n_stacks++;
}

/* Label id of the row's group (0 = none). A process or thread is labelled
 * with its name at the sample, so a pid that execs (sh -> xz) gets a box per
 * name, as in the exports. */
static uint32_t group_of(struct agg_ctx *c, enum vgroup g, const struct store_sample *s)
{
	struct vmodel *m = c->j->m;
	struct vwork *w = c->w;
	char buf[160];
	const char *name;
	uint64_t key;
	uint32_t id;
	int n;

	if (s->lost)
		return 0;
	if (g == VG_PROCESS || g == VG_THREAD) {
		uint32_t who = g == VG_PROCESS ? s->pid : s->tid;
		struct vgroup_memo *e = &w->gmemo[who % ARRAY_SIZE(w->gmemo)];
		size_t len;

		name = g == VG_PROCESS ? store_sample__proc_name(s)
		       : s->comm[0]    ? s->comm
				       : "[unknown]";
		if (e->kind == (int)g && e->who == who && !strcmp(e->name, name))
			return e->id;
		n = snprintf(buf, sizeof(buf), "%s:%u", name, who);
		ctx_lock(c);
		id = strtab__intern(&m->names, buf, (size_t)MIN(n, (int)sizeof(buf) - 1));
		ctx_unlock(c);
		len = strlen(name);
		if (id && len < sizeof(e->name)) {
			e->kind = (int)g;
			e->who = who;
			e->id = id;
			memcpy(e->name, name, len + 1);
		}
		return id;
	}
	switch (g) {
	case VG_CGROUP:
		key = s->cgroup_id;
		break;
	case VG_CPU:
		key = s->cpu;
		break;
	case VG_ENV:
		ctx_lock(c);
		id = strtab__intern(&m->names, s->env[0] ? s->env : "SYSTEM",
				    strlen(s->env[0] ? s->env : "SYSTEM"));
		ctx_unlock(c);
		return id;
	default:
		return 0;
	}
	if (g == VG_CGROUP)
		n = snprintf(buf, sizeof(buf), "cgroup:%llu", (unsigned long long)s->cgroup_id);
	else
		n = snprintf(buf, sizeof(buf), "cpu:%u", s->cpu);
	ctx_lock(c);
	id = u64map__get(&m->groups[g], key);
	if (id == UINT32_MAX) {
		id = strtab__intern(&m->names, buf, (size_t)MIN(n, (int)sizeof(buf) - 1));
		if (id)
			u64map__put(&m->groups[g], key, id);
	}
	ctx_unlock(c);
	return id;
}

static void stats_add(struct vrange_stats *to, const struct vrange_stats *from)
{
	to->samples += from->samples;
	to->on += from->on;
	to->off += from->off;
	to->probe += from->probe;
	to->lost += from->lost;
	to->rows += from->rows;
}

/* Id of the (stack, group) pair, UINT32_MAX on ENOMEM. */
static uint32_t pair_of(struct vmodel *m, uint32_t stack, uint32_t group)
{
	uint64_t key = (uint64_t)stack << 32 | group;
	uint32_t id = u64map__get(&m->pair_map, key);

	if (id == UINT32_MAX) {
		id = m->n_pairs;
		if (array_grow32((void **)&m->pairs, &m->cap_pairs, id + 1, sizeof(*m->pairs)) ||
		    u64map__put(&m->pair_map, key, id) < 0)
			return UINT32_MAX;
		m->pairs[id] = (struct vpair){.stack = stack, .group = group};
		m->n_pairs++;
	}
	return id;
}

/* Add value to pair of tab; -ENOMEM. */
static int tab_add(struct vaggtab *tab, uint32_t pair, uint64_t value)
{
	if (!value)
		return 0;
	if (pair >= tab->cap_val) {
		uint32_t old = tab->cap_val;

		if (array_grow32((void **)&tab->val, &tab->cap_val, (size_t)pair + 1,
				 sizeof(*tab->val)))
			return -ENOMEM;
		memset(tab->val + old, 0, (size_t)(tab->cap_val - old) * sizeof(*tab->val));
	}
	if (!tab->val[pair]) {
		if (array_grow32((void **)&tab->ids, &tab->cap_ids, tab->n + 1, sizeof(*tab->ids)))
			return -ENOMEM;
		tab->ids[tab->n++] = pair;
	}
	tab->val[pair] += value;
	return 0;
}

static void tab_reset(struct vaggtab *tab)
{
	for (uint32_t i = 0; i < tab->n; i++)
		tab->val[tab->ids[i]] = 0;
	tab->n = 0;
}

static void tab_free(struct vaggtab *tab)
{
	free(tab->val);
	free(tab->ids);
	memset(tab, 0, sizeof(*tab));
}

/* Sums of from added to to; -ENOMEM. */
static int tab_merge(struct vaggtab *to, const struct vaggtab *from)
{
	for (uint32_t i = 0; i < from->n; i++)
		if (tab_add(to, from->ids[i], from->val[from->ids[i]]) < 0)
			return -ENOMEM;
	return 0;
}

/* Key of row d's group g as stored (string ids of the segment, pid, tid,
 * cgroup or cpu): rows of one segment with the same key have the same group. */
static inline void group_key(enum vgroup g, const struct store_row *d, uint32_t *ka, uint32_t *kb,
			     uint32_t *kc)
{
	*ka = *kb = *kc = 0;
	switch (g) {
	case VG_PROCESS: /* the name is the process name, else the thread name */
		*ka = d->pcomm;
		*kb = d->pcomm ? 0 : d->comm;
		*kc = d->pid;
		break;
	case VG_THREAD:
		*ka = d->comm;
		*kc = d->tid;
		break;
	case VG_CGROUP:
		*ka = (uint32_t)d->cgroup_id;
		*kb = (uint32_t)(d->cgroup_id >> 32);
		break;
	case VG_CPU:
		*kc = d->cpu;
		break;
	case VG_ENV:
		*ka = d->env;
		break;
	default:
		break;
	}
}

/*
 * Group of row i of b, of key (ka, kb, kc): a group seen before in the
 * segment costs no dictionary lookup; a new one is resolved once by
 * group_of(). 0 on ENOMEM or none.
 */
static uint32_t group_raw(struct agg_ctx *c, enum vgroup g, const struct store_rows *b, size_t i,
			  uint32_t ka, uint32_t kb, uint32_t kc)
{
	struct vwork *w = c->w;
	struct vgroup_raw *e;
	struct store_sample s;
	uint32_t id;

	if (g >= VG_NAME)
		return 0;
	e = &w->graw[(uint32_t)hash64_mix((uint64_t)b->seg << 40 ^ (uint64_t)ka << 20 ^ kb ^
					  (uint64_t)kc << 32) %
		     ARRAY_SIZE(w->graw)];
	if (e->kind == (int)g && e->seg == b->seg && e->a == ka && e->b == kb && e->c == kc)
		return e->id;
	store_rows__sample(b, i, &s);
	id = group_of(c, g, &s);
	if (id)
		*e = (struct vgroup_raw){
			.seg = b->seg, .a = ka, .b = kb, .c = kc, .id = id, .kind = (int)g};
	return id;
}

/*
 * The (stack, group) pair of row i of b, whose stack id has slot sl and whose
 * group key is (ka, kb, kc), when the slot holds another key: looked up, and
 * kept in the slot. UINT32_MAX on ENOMEM.
 */
static uint32_t row_pair(struct agg_ctx *c, enum vgroup g, const struct store_rows *b, size_t i,
			 struct vslot *sl, uint32_t ka, uint32_t kb, uint32_t kc)
{
	struct vmodel *m = c->j->m;
	uint32_t group = 0, pair;
	uint64_t key;

	if (!sl->lost) {
		group = group_raw(c, g, b, i, ka, kb, kc);
		if (!group && g < VG_NAME) {
			ctx_lock(c);
			pair = pair_of(m, sl->stack - 1, 0); /* ENOMEM: not kept */
			ctx_unlock(c);
			return pair;
		}
	}
	/* the worker's own map first; the shared one (and its lock) for a pair new to it */
	key = (uint64_t)(sl->stack - 1) << 32 | group;
	pair = u64map__get(&c->w->pair_map, key);
	if (pair == UINT32_MAX) {
		ctx_lock(c);
		pair = pair_of(m, sl->stack - 1, group);
		ctx_unlock(c);
		if (pair != UINT32_MAX && u64map__put(&c->w->pair_map, key, pair) < 0)
			return UINT32_MAX;
	}
	if (pair != UINT32_MAX)
		*sl = (struct vslot){.stack = sl->stack,
				     .pair = pair,
				     .ka = ka,
				     .kb = kb,
				     .kc = kc,
				     .kg = (uint8_t)(g + 1),
				     .degraded = sl->degraded,
				     .lost = sl->lost};
	return pair;
}

/* The slot of row i of b in sm, its stack resolved (a new one interned):
 * NULL on ENOMEM. */
static struct vslot *row_slot(struct agg_ctx *c, struct vseg_map *sm, const struct store_rows *b,
			      size_t i)
{
	struct vslot *sl = seg_slot(sm, b->rows[i].stack_id);
	struct store_sample s;
	uint32_t st;

	if (!sl || sl->stack)
		return sl;
	store_rows__sample(b, i, &s);
	/* new stacks come many to a block: m->mu is kept to its end (on_rows()) */
	if (!c->held && c->j->threaded) {
		job_lock(c->j);
		c->held = true;
	}
	st = stack_of(c->j->m, c->w, &s); /* (the same segment: sm stays) */
	return st == UINT32_MAX ? NULL : sl;
}

/* Seconds [0, d) of the worker's query done: what is new of them added to the progress. */
static void progress_to(struct agg_ctx *c, int64_t d)
{
	if (c->j->pg && d > c->w->reported) {
		atomic_fetch_add_explicit(&c->j->pg->done_s, d - c->w->reported,
					  memory_order_relaxed);
		c->w->reported = d;
	}
}

/*
 * One block's rows into c->tab and c->st, in one pass: a row's slot is
 * found by its stack id in the segment's array, its pair in the slot when
 * the row's group key is the slot's; a new stack, a new group and a new
 * pair are resolved once (row_slot(), row_pair()). The arrays are held in
 * locals, taken again after a call that may grow them.
 */
static int sum_rows(struct agg_ctx *c, const struct store_rows *b)
{
	struct agg_job *j = c->j;
	struct vmodel *m = j->m;
	struct vaggtab *tab = c->tab;
	enum vgroup g = j->f->group;
	uint8_t kg = (uint8_t)(g + 1);
	struct vseg_map *sm = seg_map(c->w, b->seg);
	const struct store_row *rows = b->rows;
	bool all_kinds = j->f->kinds == VK_ALL && j->f->probe < 0;
	bool timeline = j->timeline && rows[0].sec >= m->ld_t0 &&
			rows[b->n - 1].sec < m->ld_t1; /* rows are by second */
	struct vsec *exact = m->ld_exact;
	int64_t t0 = m->ld_t0;
	uint64_t *val = tab->val;
	uint64_t on = 0, off = 0, probe = 0, lost = 0, samples = 0, nrows = 0;
	struct vslot *slots;
	uint32_t cap, cap_val = tab->cap_val;

	if (!sm)
		return -ENOMEM;
	slots = sm->slot;
	cap = sm->cap;
	for (size_t i = 0; i < b->n; i++) {
		const struct store_row *d = &rows[i];
		uint64_t n = d->count;
		uint32_t pair, ka, kb, kc;
		struct vslot *sl;

		if (d->stack_id < cap && slots[d->stack_id].stack) {
			sl = &slots[d->stack_id];
		} else {
			sl = row_slot(c, sm, b, i);
			if (!sl)
				return -ENOMEM;
			slots = sm->slot;
			cap = sm->cap;
		}
		if (timeline || (j->timeline && d->sec >= t0 && d->sec < m->ld_t1)) {
			struct vsec *e = &exact[d->sec - t0];
			uint32_t v = (uint32_t)MIN(n, (uint64_t)UINT32_MAX);

			if (sl->degraded)
				e->degraded += v;
			if (sl->lost)
				e->lost += v;
			else if (d->kind == CPA_KIND_ONCPU)
				e->on += v;
			else if (d->kind == CPA_KIND_OFFCPU)
				e->off += v;
			else
				e->probe += v;
		}
		if (!all_kinds && !kind_ok_raw(j->f, sl->lost, d->kind, d->probe_id))
			continue;
		nrows++;
		samples += n;
		if (sl->lost)
			lost += n;
		else if (d->kind == CPA_KIND_ONCPU)
			on += n;
		else if (d->kind == CPA_KIND_OFFCPU)
			off += n;
		else
			probe += n;
		group_key(g, d, &ka, &kb, &kc);
		if (sl->kg == kg && sl->ka == ka && sl->kb == kb && sl->kc == kc) {
			pair = sl->pair;
		} else {
			pair = row_pair(c, g, b, i, sl, ka, kb, kc);
			if (pair == UINT32_MAX)
				return -ENOMEM;
		}
		if (pair < cap_val && val[pair]) {
			val[pair] += n; /* tab_add()'s common case */
		} else {
			if (tab_add(tab, pair, n) < 0)
				return -ENOMEM;
			val = tab->val;
			cap_val = tab->cap_val;
		}
	}
	c->st->rows += nrows;
	c->st->samples += samples;
	c->st->on += on;
	c->st->off += off;
	c->st->probe += probe;
	c->st->lost += lost;
	if (atomic_load_explicit(&j->stop, memory_order_relaxed))
		return -ECANCELED;
	if (j->pg) {
		progress_to(c, rows[b->n - 1].sec - c->q0);
		atomic_fetch_add_explicit(&j->pg->rows, b->n, memory_order_relaxed);
		if (atomic_load_explicit(&j->pg->cancel, memory_order_relaxed))
			return -ECANCELED;
	}
	return 0;
}

/* sum_rows(), then m->mu released if row_slot() kept it. */
static int on_rows(void *ctx, const struct store_rows *b)
{
	struct agg_ctx *c = ctx;
	int r = sum_rows(c, b);

	if (c->held) {
		c->held = false;
		job_unlock(c->j);
	}
	return r;
}

/* The rows of [t0, t1) into c->tab and c->st, through the worker's reader. */
static int agg_query(struct agg_ctx *c, int64_t t0, int64_t t1)
{
	struct store_filter sf;
	enum vgroup g = c->j->f->group;
	int r;

	to_store_filter(c->j->f, &sf);
	/* the columns a sum does not use: only the grouping's is read */
	sf.skip =
		STORE_COL_TID | STORE_COL_CPU | STORE_COL_CGROUP | STORE_COL_ENV | STORE_COL_WEIGHT;
	if (g == VG_THREAD)
		sf.skip &= ~STORE_COL_TID;
	else if (g == VG_CPU)
		sf.skip &= ~STORE_COL_CPU;
	else if (g == VG_CGROUP)
		sf.skip &= ~STORE_COL_CGROUP;
	else if (g == VG_ENV)
		sf.skip &= ~STORE_COL_ENV;
	c->w->fcache_seg =
		UINT32_MAX; /* frame addresses are the reader's: valid within one query */
	c->q0 = t0;
	c->w->reported = 0;
	r = store_reader__query_rows(c->w->r, (uint64_t)t0 * NS, (uint64_t)t1 * NS, &sf, on_rows,
				     c);
	progress_to(c, t1 - t0);
	return r;
}

static bool same_filter(const struct vfilter *a, const struct vfilter *b)
{
	return a->pid == b->pid && a->cgroup == b->cgroup && a->probe == b->probe &&
	       !strcmp(a->comm, b->comm) && !strcmp(a->env, b->env) && a->has_cpus == b->has_cpus &&
	       (!a->has_cpus || !memcmp(a->cpus, b->cpus, sizeof(a->cpus))) &&
	       a->kinds == b->kinds && a->group == b->group;
}

static void chunks_free(struct vmodel *m)
{
	for (uint32_t i = 0; i < m->n_chunks; i++) {
		free(m->chunks[i].aggs);
		free(m->chunks[i].exact);
	}
	free(m->chunks);
	m->chunks = NULL;
	m->n_chunks = m->cap_chunks = 0;
	m->chunk_aggs = 0;
}

static struct vchunk *chunk_find(struct vmodel *m, int64_t c0)
{
	for (uint32_t i = 0; i < m->n_chunks; i++)
		if (m->chunks[i].c0 == c0)
			return &m->chunks[i];
	return NULL;
}

/* The chunk from c0 is closed and its sums fit in the cache (or are there). */
static bool chunk_usable(struct vmodel *m, int64_t c0)
{
	if (c0 + VCHUNK_S + VCHUNK_CLOSED_S > m->last_s + 1)
		return false;
	if (chunk_find(m, c0))
		return true;
	return m->chunk_aggs < VCHUNK_MAX_AGGS;
}

static int64_t chunk_start(int64_t t)
{
	return t - (((t % VCHUNK_S) + VCHUNK_S) % VCHUNK_S);
}

/* The chunk from c0 read into c->tab and c->st, and its sums cached (while
 * the cache has room). */
static int agg_chunk_read(struct agg_ctx *c, int64_t c0)
{
	struct vmodel *m = c->j->m;
	struct vwork *w = c->w;
	struct vchunk nc = {.c0 = c0};
	struct agg_ctx cc = *c;
	bool keep = true;
	uint32_t i;
	int r;

	tab_reset(&w->cagg);
	cc.tab = &w->cagg;
	cc.st = &nc.st;
	r = agg_query(&cc, c0, c0 + VCHUNK_S);
	if (r < 0)
		return r;
	nc.n = w->cagg.n;
	nc.aggs = malloc((size_t)MAX(nc.n, 1u) * sizeof(*nc.aggs));
	for (i = 0; nc.aggs && i < nc.n; i++) {
		uint64_t v = w->cagg.val[w->cagg.ids[i]];

		keep = keep && v <= UINT32_MAX; /* not in 8 bytes: this chunk is not cached */
		nc.aggs[i] = (struct vcsum){w->cagg.ids[i], (uint32_t)v};
	}
	if (c->j->timeline) {
		nc.exact = malloc(VCHUNK_S * sizeof(*nc.exact));
		if (nc.exact)
			memcpy(nc.exact, &m->ld_exact[c0 - m->ld_t0], VCHUNK_S * sizeof(*nc.exact));
	}
	keep = keep && nc.aggs && (!c->j->timeline || nc.exact);
	job_lock(c->j);
	keep = keep && m->chunk_aggs < VCHUNK_MAX_AGGS && !chunk_find(m, c0) &&
	       !array_grow32((void **)&m->chunks, &m->cap_chunks, m->n_chunks + 1,
			     sizeof(*m->chunks));
	if (keep) {
		m->chunks[m->n_chunks++] = nc;
		m->chunk_aggs += nc.n;
	}
	job_unlock(c->j);
	if (!keep) {
		free(nc.aggs);
		free(nc.exact);
	}
	stats_add(c->st, &nc.st);
	return tab_merge(c->tab, &w->cagg);
}

/* The cached sums of ch added to tab and st (and the timeline's counts). */
static int agg_chunk_cached(struct agg_job *j, const struct vchunk *ch, struct vaggtab *tab,
			    struct vrange_stats *st)
{
	struct vmodel *m = j->m;

	if (j->timeline)
		memcpy(&m->ld_exact[ch->c0 - m->ld_t0], ch->exact, VCHUNK_S * sizeof(*ch->exact));
	if (j->pg) {
		atomic_fetch_add_explicit(&j->pg->done_s, VCHUNK_S, memory_order_relaxed);
		atomic_fetch_add_explicit(&j->pg->rows, ch->st.rows, memory_order_relaxed);
		if (atomic_load_explicit(&j->pg->cancel, memory_order_relaxed))
			return -ECANCELED;
	}
	for (uint32_t i = 0; i < ch->n; i++)
		if (tab_add(tab, ch->aggs[i].pair, ch->aggs[i].value) < 0)
			return -ENOMEM;
	stats_add(st, &ch->st);
	return 0;
}

static int piece_add(struct agg_job *j, int64_t t0, int64_t t1, bool chunk)
{
	if (array_grow32((void **)&j->pieces, &j->cap_pieces, j->n_pieces + 1, sizeof(*j->pieces)))
		return -ENOMEM;
	j->pieces[j->n_pieces++] = (struct vpiece){t0, t1, chunk};
	return 0;
}

/* Worker c->w's share of the pieces: worker 0 takes them from the front,
 * worker 1 from the back, until none is left or one fails. */
static int work_run(struct agg_ctx *c)
{
	struct agg_job *j = c->j;
	bool back = c->w != &j->m->work[0];
	int r = 0;

	while (r >= 0 && !atomic_load_explicit(&j->stop, memory_order_relaxed)) {
		struct vpiece p;

		job_lock(j);
		if (j->head == j->tail) {
			job_unlock(j);
			break;
		}
		p = back ? j->pieces[--j->tail] : j->pieces[j->head++];
		job_unlock(j);
		r = p.chunk ? agg_chunk_read(c, p.t0) : agg_query(c, p.t0, p.t1);
	}
	if (r < 0) {
		job_lock(j);
		if (!j->err)
			j->err = r;
		job_unlock(j);
		atomic_store(&j->stop, true);
	}
	return r;
}

static void *work_main(void *arg)
{
	work_run(arg);
	return NULL;
}

/* Spawn worker 1 on its fork of the reader (made once, kept with its
 * dictionary until the store is re-read): false when it could not be. */
static bool work_spawn(struct agg_ctx *c, pthread_t *th)
{
	struct vwork *w = c->w;

	tab_reset(&w->agg);
	memset(&w->st, 0, sizeof(w->st));
	if (!w->r && store_reader__fork(c->j->m->r, on_notice, w, &w->r) < 0)
		return false;
	return pthread_create(th, NULL, work_main, c) == 0;
}

/* Worker 1 joined: its sums, counts, reader's counts and notices to the model's. */
static int work_join(struct agg_ctx *c, pthread_t th, struct vrange_stats *st)
{
	struct vmodel *m = c->j->m;
	struct vwork *w = c->w;

	pthread_join(th, NULL);
	store_reader__sync(m->r, w->r);
	stats_add(st, &w->st);
	return tab_merge(&m->agg, &w->agg);
}

int vmodel__aggregate(struct vmodel *m, int64_t t0, int64_t t1, const struct vfilter *f,
		      struct vtree *out, struct vrange_stats *st, struct vprogress *pg)
{
	struct agg_job j = {.m = m, .f = f, .pg = pg};
	struct agg_ctx wc[VWORKERS];
	struct vpath_ent path[520];
	int64_t t, read_s = 0;
	pthread_t th;
	bool spawned = false;
	uint32_t i, k;
	int r = 0;

	memset(st, 0, sizeof(*st));
	vtree__reset(out);
	m->ld_timeline = false;
	if (!m->r)
		return -ENOENT;
	t0 = MAX(t0, m->first_s);
	t1 = MIN(t1, m->last_s + 1);
	if (t1 <= t0)
		return 0;
	if (pg)
		atomic_fetch_add_explicit(&pg->total_s, t1 - t0, memory_order_relaxed);
	if (!m->chunk_f_set || !same_filter(&m->chunk_f, f)) {
		chunks_free(m);
		m->chunk_f = *f;
		m->chunk_f_set = true;
	}
	j.timeline = vfilter__selects_all(f);
	if (j.timeline) {
		struct vsec *e = realloc(m->ld_exact, (size_t)(t1 - t0) * sizeof(*e));

		if (!e)
			return -ENOMEM;
		memset(e, 0, (size_t)(t1 - t0) * sizeof(*e));
		m->ld_exact = e;
		m->ld_t0 = t0;
		m->ld_t1 = t1;
	}
	tab_reset(&m->agg);
	for (k = 0; k < VWORKERS; k++) {
		for (i = 0; i < ARRAY_SIZE(m->work[k].gmemo); i++)
			m->work[k].gmemo[i].kind = -1;
		for (i = 0; i < ARRAY_SIZE(m->work[k].graw); i++)
			m->work[k].graw[i].kind = -1;
		wc[k] = (struct agg_ctx){
			.j = &j, .w = &m->work[k], .tab = &m->work[k].agg, .st = &m->work[k].st};
	}
	wc[0].tab = &m->agg;
	wc[0].st = st;
	m->work[0].r = m->r; /* (worker 1's: its fork) */
	/* whole closed chunks from the cache; the rest to read, by chunk */
	for (t = t0; t < t1 && r >= 0;) {
		int64_t e = MIN(chunk_start(t) + VCHUNK_S, t1);
		bool chunk = chunk_start(t) == t && e == t + VCHUNK_S && chunk_usable(m, t);
		const struct vchunk *ch = chunk ? chunk_find(m, t) : NULL;

		if (ch) {
			r = agg_chunk_cached(&j, ch, &m->agg, st);
		} else {
			r = piece_add(&j, t, e, chunk);
			read_s += e - t;
		}
		t = e;
	}
	j.tail = j.n_pieces;
	/* two workers for VPAR_MIN_S or more to read: worker 1 on a thread */
	if (r >= 0 && m->workers > 1 && j.n_pieces > 1 && read_s >= VPAR_MIN_S) {
		j.threaded = true;
		spawned = work_spawn(&wc[1], &th);
		if (!spawned)
			j.threaded = false; /* (no thread reads it) */
		m->par_loads += spawned;
	}
	if (r >= 0)
		work_run(&wc[0]);
	if (spawned) {
		int e = work_join(&wc[1], th, st);

		if (!j.err && e < 0)
			j.err = e;
	}
	free(j.pieces);
	if (r >= 0)
		r = j.err;
	if (r < 0)
		return r;
	m->ld_timeline = j.timeline;
	for (i = 0; i < m->agg.n; i++) {
		const struct vpair *a = &m->pairs[m->agg.ids[i]];
		const struct vstack *sk = &m->stacks[a->stack];
		uint32_t n = 0, nf = f->kernel ? sk->n : (uint32_t)(sk->n - sk->nk);

		if (a->group)
			path[n++] = (struct vpath_ent){.name = a->group, .cls = VCLS_GROUP};
		memcpy(&path[n], &m->frames[sk->off], nf * sizeof(*path));
		n += nf;
		r = vtree__add(out, path, n, m->agg.val[m->agg.ids[i]]);
		if (r < 0)
			return r;
	}
	vtree__sort(out);
	return 0;
}

void vmodel__commit(struct vmodel *m)
{
	m->corrupt = vmodel__corrupt(m);
	if (!m->ld_timeline)
		return;
	m->ld_timeline = false;
	if (m->ld_t0 < m->first_s || m->ld_t1 > m->last_s + 1)
		return; /* the store was re-read since: the timeline is another */
	memcpy(&m->exact[m->ld_t0 - m->first_s], m->ld_exact,
	       (size_t)(m->ld_t1 - m->ld_t0) * sizeof(*m->exact));
	memset(&m->known[m->ld_t0 - m->first_s], 1, (size_t)(m->ld_t1 - m->ld_t0));
}

/* ------------------------------------------------------------ export */

struct exp_ctx {
	struct vmodel *m;
	const struct vfilter *f;
	struct strtab lines;
	uint64_t *vals;
	uint32_t cap;
	char *buf;
	size_t len;
	bool full;
};

#define EXP_LINE_MAX (256u << 10)

/* Append s with ';' and newlines made harmless (as cpa show does). */
static void exp_put(struct exp_ctx *c, const char *s, const char *suffix)
{
	size_t n = strlen(s), k = suffix ? strlen(suffix) : 0, i;

	if (c->len + n + k + 1 >= EXP_LINE_MAX) {
		c->full = true;
		return;
	}
	for (i = 0; i < n; i++)
		c->buf[c->len++] = s[i] == ';' ? ':' : (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
	memcpy(c->buf + c->len, suffix ? suffix : "", k);
	c->len += k;
	c->buf[c->len++] = ';';
}

static int on_export(void *ctx, const struct store_sample *s)
{
	struct exp_ctx *c = ctx;
	char tmp[160];
	uint32_t i, id, before;

	if (!kind_ok(c->f, s))
		return 0;
	c->len = 0;
	exp_put(c, s->env[0] ? s->env : "SYSTEM", NULL);
	if (s->lost) {
		exp_put(c, "[lost]", NULL);
	} else {
		snprintf(tmp, sizeof(tmp), "%s:%u", store_sample__proc_name(s), s->pid);
		exp_put(c, tmp, NULL);
	}
	for (i = s->n_frames; i-- > s->n_kframes;)
		exp_put(c, s->frames[i]->name, NULL);
	if (c->f->kernel)
		for (i = s->n_kframes; i-- > 0;)
			exp_put(c, s->frames[i]->name,
				(s->frames[i]->flags & CPA_FF_MARKER) ? NULL : "_[k]");
	if (c->len)
		c->len--; /* the last ';' */
	before = strtab__count(&c->lines);
	id = strtab__intern(&c->lines, c->buf, c->len);
	if (!id || array_grow32((void **)&c->vals, &c->cap, id + 1, sizeof(*c->vals)))
		return -ENOMEM;
	if (strtab__count(&c->lines) != before) /* a new line: its slot was never set */
		c->vals[id] = 0;
	c->vals[id] += s->kind == CPA_KIND_OFFCPU ? s->weight : s->count;
	return 0;
}

static const struct strtab *exp_sort_tab;

static int exp_cmp(const void *a, const void *b)
{
	return strcmp(strtab__str(exp_sort_tab, *(const uint32_t *)a),
		      strtab__str(exp_sort_tab, *(const uint32_t *)b));
}

int vmodel__export(struct vmodel *m, int64_t t0, int64_t t1, const struct vfilter *f,
		   const char *path)
{
	struct exp_ctx c = {.m = m, .f = f};
	struct store_filter sf;
	_cleanup_free_ uint32_t *order = NULL;
	FILE *out = NULL;
	uint32_t i, n;
	int r;

	if (!m->r)
		return -ENOENT;
	c.buf = malloc(EXP_LINE_MAX);
	if (!c.buf)
		return -ENOMEM;
	to_store_filter(f, &sf);
	r = store_reader__query(m->r, (uint64_t)t0 * NS, (uint64_t)t1 * NS, &sf, on_export, &c);
	if (r < 0)
		goto out;
	n = strtab__count(&c.lines);
	order = malloc((n + 1) * sizeof(*order));
	if (!order) {
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		order[i] = i + 1;
	exp_sort_tab = &c.lines;
	qsort(order, n, sizeof(*order), exp_cmp);
	out = fopen(path, "we");
	if (!out) {
		r = -errno;
		goto out;
	}
	for (i = 0; i < n; i++)
		fprintf(out, "%s %llu\n", strtab__str(&c.lines, order[i]),
			(unsigned long long)c.vals[order[i]]);
	r = ferror(out) ? -EIO : (int)n;
	if (fclose(out) != 0 && r >= 0)
		r = -errno;
out:
	strtab__free(&c.lines);
	free(c.vals);
	free(c.buf);
	return r;
}
