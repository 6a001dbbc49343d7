// SPDX-License-Identifier: MIT
/*
 * pprof export: a gzip'd perftools.profiles.Profile (profile.proto of
 * github.com/google/pprof), encoded by hand: the message is a handful of
 * varint/length-delimited fields, zlib does the gzip, and no generated code
 * or protobuf runtime is needed (docs/export.md says why).
 *
 *   sample_type  samples/count, cpu/nanoseconds, off-cpu/nanoseconds
 *                (default_sample_type "cpu"; period_type cpu/nanoseconds,
 *                period 1e9/freq)
 *   sample       location ids (leaf first), three values, labels pid, tid,
 *                cpu, cgroup (numbers), comm, process, env, kind (strings),
 *                probe (number, probe samples only), trigger (the policy's
 *                name, on samples inside a policy trigger's window); no
 *                pid and tid with --no_pid, no env with --no_env; a
 *                diff base's samples are negated and labelled
 *                pprof::base=true (what `pprof -diff_base` does)
 *   mapping      first one naming the host and the range (no locations:
 *                pprof's "File:" is the first mapping's), then one per
 *                (path, build-id) of user code, then one "[kernel]"
 *   location     one per frame: address = mapping start + file offset
 *                (user; the mapping's file_offset is 0) or the kernel
 *                address; a line naming the function, with its line
 *                number from the binary's DWARF .debug_line when the
 *                binary is at its path here with the same build-id
 *   string_table UTF-8 (proto3): bytes that are not become U+FFFD
 *   function     name = system_name = the frame's name; filename and
 *                start_line from DWARF likewise
 *   comment      one per policy trigger of the range (`pprof -comments`)
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "common/array.h"
#include "common/hash.h"
#include "common/macro.h"
#include "export_int.h"

/* User mappings are laid out 64 GiB apart (one mapping's size): the size
 * enters pprof's mapping key, so it must not depend on the range exported. */
#define MAP_SHIFT    36
#define MAP_SIZE     (1ull << MAP_SHIFT)
#define KERNEL_START 0xffff800000000000ull
#define KERNEL_LIMIT 0xffffffffffffffffull

struct pp_map {
	uint32_t file, build_id; /* string ids */
	uint32_t kernel;	 /* no padding: the struct is a hash key */
};

struct pp_func {
	uint32_t name; /* string id */
};

struct pp_loc {
	uint32_t map; /* mapping id (1-based), 0 = none */
	uint32_t func;
	uint64_t addr;
};

/* A sample's stack and names, resolved: interned in pprof.rvals. */
struct pp_rval {
	uint32_t stack, comm, process, env;
};

/* The rest of a sample's key but its cpu: interned in pprof.ctxs (a few per thread). */
struct pp_ctx {
	uint32_t pid, tid, kind, probe, side;
	uint32_t trigger; /* string id of the policy whose window holds the row, 0 = none */
	uint64_t cgroup;
};

/* A direct-mapped cache in front of pprof.ctxs: a row's ctx in one compare; 16 k slots,
 * so a busy host's few thousand (thread, kind) pairs seldom evict each other. */
#define CTX_CACHE 16384
struct pp_cslot {
	struct pp_ctx k;
	uint32_t id; /* + 1, 0 = empty */
	uint32_t pad;
};

/* A slot of the table of samples: (rval, ctx, cpu) -> sample, and the sums of its rows. */
struct pp_slot {
	uint32_t rv, ctx, cpu;
	uint32_t sample; /* + 1, 0 = empty slot */
	uint64_t count, weight;
};

/* A sample's key, by sample id (the order samples are written in). */
struct pp_sid {
	uint32_t rv, ctx, cpu;
};

struct pprof {
	struct xtab strs;     /* string table; "" is 0 */
	struct xtab maps;     /* pp_map -> id - 1 */
	struct xtab funcs;    /* (name, map) -> id - 1 */
	struct xtab locs;     /* pp_loc -> id - 1 */
	struct xtab stacks;   /* location ids, leaf first -> stack */
	struct xtab stkcache; /* (src, seg, stack_id) -> stkval */
	struct u32vec stkval;
	struct xtab rvals; /* pp_rval -> id */
	struct xtab ctxs;  /* pp_ctx -> id */
	struct pp_cslot *ccache;
	/* a frame's fields and strings -> its location (frame_loc()) */
	struct xtab frames;
	struct u32vec frameloc;
	uint8_t *fkey;
	size_t capfkey;
	/* (rval, ctx, cpu) -> sample: one flat table of every sample, open
	 * addressing, each slot holding its rows' sums: a row costs one probe */
	struct pp_slot *slots;
	uint32_t mask, nslots_used;
	struct pp_sid *sids;
	size_t nsids, capsids;
	/* export_pprof__add_row(): (src, seg, stack_id, comm, pcomm, env ids) -> rval id */
	struct rowmap rows;
	/* the segment's string ids -> string id + 1 (0 = not yet), one segment at a time */
	uint32_t seg_src, seg;
	bool seg_valid;
	uint32_t *segstr;
	size_t capsegstr;
	uint32_t s_kernel, s_oncpu[CPA_KIND_MAX + 1];
};

static int str_id(struct pprof *p, const char *s, uint32_t *ret)
{
	const char *c = s;
	size_t k, n = 0;
	char *fix;
	int r;

	/* a string seen before is in the table as is (what is there is UTF-8) */
	if (xtab__find(&p->strs, s, (uint32_t)strlen(s), ret) == 0)
		return 0;
	while ((k = export__utf8_len(c)))
		c += k;
	/* Interned without the NUL: the table is written back as is. */
	if (!*c)
		return xtab__intern(&p->strs, s, (uint32_t)(c - s), ret) < 0 ? -ENOMEM : 0;
	/* profile.proto is proto3: strings must be UTF-8; other bytes become U+FFFD */
	fix = malloc(3 * strlen(s) + 1);
	if (!fix)
		return -ENOMEM;
	for (c = s; *c; c += k ? k : 1) {
		k = export__utf8_len(c);
		memcpy(fix + n, k ? c : "\xef\xbf\xbd", k ? k : 3);
		n += k ? k : 3;
	}
	r = xtab__intern(&p->strs, fix, (uint32_t)n, ret) < 0 ? -ENOMEM : 0;
	free(fix);
	return r;
}

int export_pprof__new(struct exporter *e)
{
	struct pprof *p = calloc(1, sizeof(*p));
	uint32_t id;

	if (!p)
		return -ENOMEM;
	e->pp = p;
	if (str_id(p, "", &id) < 0 || str_id(p, "[kernel]", &p->s_kernel) < 0)
		return -ENOMEM;
	return 0;
}

void export_pprof__free(struct exporter *e)
{
	struct pprof *p = e->pp;

	if (!p)
		return;
	xtab__free(&p->strs);
	xtab__free(&p->maps);
	xtab__free(&p->funcs);
	xtab__free(&p->locs);
	xtab__free(&p->stacks);
	xtab__free(&p->stkcache);
	u32vec__free(&p->stkval);
	xtab__free(&p->rvals);
	xtab__free(&p->ctxs);
	free(p->ccache);
	xtab__free(&p->frames);
	u32vec__free(&p->frameloc);
	free(p->fkey);
	free(p->slots);
	free(p->sids);
	rowmap__free(&p->rows);
	free(p->segstr);
	free(p);
	e->pp = NULL;
}

static int location_of(struct pprof *p, const struct store_frame *f, bool kernel, uint32_t *ret)
{
	struct pp_map m;
	struct pp_loc l;
	uint32_t fk[2], id;
	char hex[2 * CPA_BUILD_ID_MAX + 1];
	int r;

	memset(&m, 0, sizeof(m));
	memset(&l, 0, sizeof(l));
	if (kernel && !(f->flags & CPA_FF_MARKER)) {
		m.kernel = 1;
		m.file = p->s_kernel;
		l.addr = f->offset;
	} else if (f->module && f->module[0] && f->offset < MAP_SIZE) {
		unsigned int i;

		for (i = 0; i < f->build_id_len && i < CPA_BUILD_ID_MAX; i++) {
			hex[2 * i] = "0123456789abcdef"[f->build_id[i] >> 4];
			hex[2 * i + 1] = "0123456789abcdef"[f->build_id[i] & 15];
		}
		hex[2 * i] = 0;
		if (str_id(p, f->module, &m.file) < 0 || str_id(p, hex, &m.build_id) < 0)
			return -ENOMEM;
		l.addr = f->offset;
	}
	if (m.file) {
		r = xtab__intern(&p->maps, &m, sizeof(m), &id);
		if (r < 0)
			return r;
		l.map = id + 1; /* user addresses get their mapping's start at write */
	}
	if (str_id(p, f->name, &fk[0]) < 0)
		return -ENOMEM;
	fk[1] = l.map;
	r = xtab__intern(&p->funcs, fk, sizeof(fk), &id);
	if (r < 0)
		return r;
	l.func = id + 1;
	r = xtab__intern(&p->locs, &l, sizeof(l), &id);
	if (r < 0)
		return r;
	*ret = id + 1;
	return 0;
}

/* Bytes of a frame's key before its module and name. */
#define FKEY_HEAD 40

/* Location of frame f: location_of() once per distinct frame (its fields and
 * strings), not once per segment (each with its own stack ids) naming it. */
static int frame_loc(struct pprof *p, const struct store_frame *f, bool kernel, uint32_t *ret)
{
	const char *mod = f->module ? f->module : "";
	size_t lm = strlen(mod), ln = strlen(f->name), len = FKEY_HEAD + lm + 1 + ln;
	uint32_t fl = f->flags, id;
	uint8_t *k;
	int r;

	if (len > UINT32_MAX / 2)
		return location_of(p, f, kernel, ret);
	if (len > p->capfkey && array_grow_first((void **)&p->fkey, &p->capfkey, len, 1, 256) < 0)
		return -ENOMEM;
	k = p->fkey;
	memset(k, 0, FKEY_HEAD);
	memcpy(k, &f->offset, 8);
	memcpy(k + 8, &fl, 4);
	k[12] = kernel;
	k[13] = (uint8_t)MIN(f->build_id_len, CPA_BUILD_ID_MAX);
	memcpy(k + 14, f->build_id, k[13]);
	memcpy(k + FKEY_HEAD, mod, lm + 1);
	memcpy(k + FKEY_HEAD + lm + 1, f->name, ln);
	r = xtab__intern(&p->frames, k, (uint32_t)len, &id);
	if (r < 0)
		return r;
	if (r == 0) {
		*ret = p->frameloc.v[id];
		return 0;
	}
	r = location_of(p, f, kernel, ret);
	if (r < 0)
		return r;
	return u32vec__push(&p->frameloc, *ret) < 0 ? -ENOMEM : 0;
}

static int stack_of(struct exporter *e, struct pprof *p, const struct store_sample *s,
		    uint32_t *ret)
{
	uint32_t key[3] = {e->src, s->seg, s->stack_id}, cid = 0, locs[CPA_MAX_STACK_FRAMES], i,
		 n = 0;
	bool cache = s->n_frames > 1; /* a lone frame may stand for an undefined id */
	int r;

	if (cache) {
		r = xtab__intern(&p->stkcache, key, sizeof(key), &cid);
		if (r < 0)
			return r;
		if (r == 0) {
			*ret = p->stkval.v[cid];
			return 0;
		}
	}
	for (i = 0; i < s->n_frames && n < ARRAY_SIZE(locs); i++) {
		r = frame_loc(p, s->frames[i], i < s->n_kframes, &locs[n]);
		if (r < 0)
			return r;
		n++;
	}
	r = xtab__intern(&p->stacks, locs, n * (uint32_t)sizeof(*locs), ret);
	if (r < 0)
		return r;
	if (cache && u32vec__push(&p->stkval, *ret) < 0)
		return -ENOMEM;
	return 0;
}

/* A sample's stack and names as pprof ids, in the order strings are first seen. */
static int resolve(struct exporter *e, struct pprof *p, const struct store_sample *s,
		   struct pp_rval *ret)
{
	int r = stack_of(e, p, s, &ret->stack);

	if (r < 0)
		return r;
	ret->env = 0; /* --no_env: no env label, the string not in the table */
	if (str_id(p, s->comm, &ret->comm) < 0 || str_id(p, s->pcomm, &ret->process) < 0 ||
	    (!e->o.no_env && str_id(p, s->env, &ret->env) < 0))
		return -ENOMEM;
	return 0;
}

/* Stack ids are dense from 1, string ids too; one past this is not cached. */
#define SEGSTR_MAX (1u << 22)

/* String id of the segment's string sid, whose text is s: str_id() once per segment. */
static int seg_str_id(struct exporter *e, struct pprof *p, uint32_t seg, uint32_t sid,
		      const char *s, uint32_t *ret)
{
	if (!p->seg_valid || p->seg_src != e->src || p->seg != seg) {
		if (p->segstr)
			memset(p->segstr, 0, p->capsegstr * sizeof(*p->segstr));
		p->seg_src = e->src;
		p->seg = seg;
		p->seg_valid = true;
	}
	if (sid >= SEGSTR_MAX)
		return str_id(p, s, ret);
	if (sid >= p->capsegstr) {
		size_t cap = p->capsegstr;

		if (array_grow((void **)&p->segstr, &cap, (size_t)sid + 1, sizeof(*p->segstr)) < 0)
			return -ENOMEM;
		memset(p->segstr + p->capsegstr, 0, (cap - p->capsegstr) * sizeof(*p->segstr));
		p->capsegstr = cap;
	}
	if (!p->segstr[sid]) {
		if (str_id(p, s, ret) < 0)
			return -ENOMEM;
		p->segstr[sid] = *ret + 1;
	}
	*ret = p->segstr[sid] - 1;
	return 0;
}

/* The policy trigger whose window holds the row: its name's string id, 0 = none. */
static int trigger_of(struct exporter *e, struct pprof *p, int64_t sec, bool lost, uint32_t pid,
		      int side, uint32_t *ret)
{
	char pol[CPA_POLICY_NAME_LEN + 1];
	int ti = side ? -1 : export__trigger_at(e, sec, lost, pid);

	*ret = 0;
	if (ti < 0)
		return 0;
	snprintf(pol, sizeof(pol), "%.*s", CPA_POLICY_NAME_LEN, e->trig[ti].ev.policy);
	return str_id(p, pol, ret) < 0 ? -ENOMEM : 0;
}

static inline bool ctx_eq(const struct pp_ctx *a, const struct pp_ctx *b)
{
	return a->pid == b->pid && a->tid == b->tid && a->kind == b->kind && a->probe == b->probe &&
	       a->side == b->side && a->trigger == b->trigger && a->cgroup == b->cgroup;
}

/* c's slot of pprof.ccache. */
static inline uint32_t ctx_cache_pos(const struct pp_ctx *c)
{
	return (uint32_t)hash64_mix(
		       ((uint64_t)c->pid << 32 | c->tid) ^
		       hash64_fib(c->kind | c->side << 8 | (uint64_t)c->trigger << 16)) &
	       (CTX_CACHE - 1);
}

/* Id of c in pprof.ctxs: a row's thread, kind, cgroup, ... */
static int ctx_of(struct pprof *p, const struct pp_ctx *c, uint32_t *ret)
{
	struct pp_cslot *x;
	int r;

	if (!p->ccache && !(p->ccache = calloc(CTX_CACHE, sizeof(*p->ccache))))
		return -ENOMEM;
	x = &p->ccache[ctx_cache_pos(c)];
	if (x->id && ctx_eq(&x->k, c)) {
		*ret = x->id - 1;
		return 0;
	}
	r = xtab__intern(&p->ctxs, c, sizeof(*c), ret);
	if (r < 0)
		return r;
	x->k = *c;
	x->id = *ret + 1;
	return 0;
}

static inline uint32_t slot_hash(uint32_t rv, uint32_t ctx, uint32_t cpu)
{
	return (uint32_t)hash64_mix(((uint64_t)rv << 32 | ctx) ^ hash64_fib(cpu + 1ull));
}

/* The slot of (rv, ctx, cpu): its sample's, or the empty one it goes to. */
static struct pp_slot *slot_of(const struct pprof *p, uint32_t rv, uint32_t ctx, uint32_t cpu)
{
	uint32_t pos = slot_hash(rv, ctx, cpu) & p->mask;

	for (;; pos = (pos + 1) & p->mask) {
		struct pp_slot *x = &p->slots[pos];

		if (!x->sample || (x->rv == rv && x->ctx == ctx && x->cpu == cpu))
			return x;
	}
}

/* Huge pages (THP "madvise") for the 2 MiB pages inside [p, p + len), before
 * they are touched: a big table's random probes miss no TLB, and a big buffer
 * faults in 512 pages at a time. */
static void huge_advise(void *p, size_t len)
{
	uintptr_t huge = 2u << 20, a = ((uintptr_t)p + huge - 1) & ~(huge - 1),
		  z = ((uintptr_t)p + len) & ~(huge - 1);

	if (z > a)
		(void)madvise((void *)a, z - a, MADV_HUGEPAGE);
}

/* Zeroed memory for n slots. */
static struct pp_slot *slots_alloc(size_t n)
{
	struct pp_slot *x = calloc(n, sizeof(*x));

	if (x)
		huge_advise(x, n * sizeof(*x));
	return x;
}

/* Room for one more sample: load under 3/4. */
static int slots_room(struct pprof *p)
{
	uint32_t old = p->slots ? p->mask + 1 : 0, i;
	struct pp_slot *o = p->slots, *n;

	if (o && ((uint64_t)p->nslots_used + 1) * 4 <= (uint64_t)old * 3)
		return 0;
	if (old > (1u << 30))
		return -ENOMEM;
	n = slots_alloc(old ? (size_t)old * 2 : 1u << 10);
	if (!n)
		return -ENOMEM;
	p->slots = n;
	p->mask = (old ? old * 2 : 1u << 10) - 1;
	for (i = 0; i < old; i++)
		if (o[i].sample)
			*slot_of(p, o[i].rv, o[i].ctx, o[i].cpu) = o[i];
	free(o);
	return 0;
}

/* A row onto its sample (rval id rv, the rest of its key c), made when new. */
static int add_sample(struct pprof *p, uint32_t rv, const struct pp_ctx *c, uint32_t cpu,
		      uint64_t count, uint64_t weight)
{
	struct pp_slot *x;
	uint32_t ctx;
	int r = ctx_of(p, c, &ctx);

	if (r < 0 || (r = slots_room(p)) < 0)
		return r;
	x = slot_of(p, rv, ctx, cpu);
	if (!x->sample) {
		if (p->nsids >= UINT32_MAX - 1 ||
		    array_grow((void **)&p->sids, &p->capsids, p->nsids + 1, sizeof(*p->sids)) < 0)
			return -ENOMEM;
		p->sids[p->nsids++] = (struct pp_sid){rv, ctx, cpu};
		*x = (struct pp_slot){
			.rv = rv, .ctx = ctx, .cpu = cpu, .sample = (uint32_t)p->nsids};
		p->nslots_used++;
	}
	x->count += count;
	x->weight += weight;
	return 0;
}

/* The ctx of a row (add_key()), its trigger aside. */
static inline struct pp_ctx row_ctx(const struct exporter *e, uint32_t pid, uint32_t tid,
				    uint32_t kind, uint32_t probe_id, uint64_t cgroup, int side)
{
	/* --no_pid: no pid and tid labels, so the samples of processes of the same
	 * names merge (a trigger's window still goes by the row's pid) */
	return (struct pp_ctx){.pid = e->o.no_pid ? 0 : pid,
			       .tid = e->o.no_pid ? 0 : tid,
			       .kind = kind,
			       .probe = kind == CPA_KIND_PROBE ? probe_id : 0,
			       .side = (uint32_t)side,
			       .cgroup = cgroup};
}

/* The row's values onto its sample: resolved rv, the rest from the row. */
static int add_key(struct exporter *e, struct pprof *p, const struct pp_rval *rv, int64_t sec,
		   bool lost, uint32_t pid, uint32_t tid, uint32_t cpu, uint32_t kind,
		   uint32_t probe_id, uint64_t cgroup, uint64_t count, uint64_t weight, int side,
		   uint32_t rv_id)
{
	struct pp_ctx c = row_ctx(e, pid, tid, kind, probe_id, cgroup, side);
	int r = trigger_of(e, p, sec, lost, pid, side, &c.trigger);

	if (r < 0)
		return r;
	if (rv && (r = xtab__intern(&p->rvals, rv, sizeof(*rv), &rv_id)) < 0)
		return r;
	return add_sample(p, rv_id, &c, cpu, count, weight);
}

int export_pprof__add(struct exporter *e, const struct store_sample *s, int side)
{
	struct pprof *p = e->pp;
	struct pp_rval rv;
	int r = resolve(e, p, s, &rv);

	if (r < 0)
		return r;
	return add_key(e, p, &rv, s->sec, s->lost, s->pid, s->tid, s->cpu, s->kind, s->probe_id,
		       s->cgroup_id, s->count, s->weight, side, 0);
}

const struct rowmap *export_pprof__rows(const struct exporter *e)
{
	return &((const struct pprof *)e->pp)->rows;
}

/*
 * The slot of the table of samples row i of b goes to, loaded ahead when its
 * rval and ctx are known already (its stack seen before in this segment, its
 * ctx in the cache; no triggers): a big table's probe is a cache miss a row.
 */
void export_pprof__prefetch_row(const struct exporter *e, const struct store_rows *b, size_t i,
				int side)
{
	const struct pprof *p = e->pp;
	const struct store_row *d = &b->rows[i];
	struct rowmap_key key = {{d->comm, d->pcomm, e->o.no_env ? 0 : d->env}};
	struct pp_ctx c;
	const struct pp_cslot *x;
	uint32_t rv;

	if (e->n_trig || !p->slots || !p->ccache ||
	    !rowmap__find(&p->rows, e->src, b->seg, d->stack_id, &key, &rv))
		return;
	c = row_ctx(e, d->pid, d->tid, d->kind, d->probe_id, d->cgroup_id, side);
	x = &p->ccache[ctx_cache_pos(&c)];
	if (x->id && ctx_eq(&x->k, &c))
		__builtin_prefetch(&p->slots[slot_hash(rv, x->id - 1, d->cpu) & p->mask], 1);
}

int export_pprof__add_row(struct exporter *e, const struct store_rows *b, size_t i, int side)
{
	struct pprof *p = e->pp;
	const struct store_row *d = &b->rows[i];
	struct rowmap_key key = {{d->comm, d->pcomm, e->o.no_env ? 0 : d->env}};
	struct store_sample s;
	struct pp_rval rv;
	uint32_t id;
	bool lost = false;
	int r;

	if (!rowmap__find(&p->rows, e->src, b->seg, d->stack_id, &key, &id)) {
		store_rows__sample(b, i, &s);
		r = stack_of(e, p, &s, &rv.stack);
		if (r < 0)
			return r;
		rv.env = 0;
		if (seg_str_id(e, p, b->seg, d->comm, s.comm, &rv.comm) < 0 ||
		    seg_str_id(e, p, b->seg, d->pcomm, s.pcomm, &rv.process) < 0 ||
		    (!e->o.no_env && seg_str_id(e, p, b->seg, d->env, s.env, &rv.env) < 0))
			return -ENOMEM;
		lost = s.lost;
		r = xtab__intern(&p->rvals, &rv, sizeof(rv), &id);
		if (r < 0)
			return r;
		/* a lone frame may stand for an undefined id: not kept (as stkcache) */
		if (s.n_frames > 1 &&
		    rowmap__put(&p->rows, e->src, b->seg, d->stack_id, &key, id) < 0)
			return -ENOMEM;
	}
	return add_key(e, p, NULL, d->sec, lost, d->pid, d->tid, d->cpu, d->kind, d->probe_id,
		       d->cgroup_id, d->count, d->weight, side, id);
}

/* ---------------------------------------------------------------- encoding */

struct pbuf {
	uint8_t *b;
	size_t n, cap;
	bool oom;
};

static void pb_reserve(struct pbuf *b, size_t k)
{
	if (!b->oom && array_grow_first((void **)&b->b, &b->cap, b->n + k, 1, 4096) < 0)
		b->oom = true;
}

static inline size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static inline size_t varint_put(uint8_t *o, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		o[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	o[n++] = (uint8_t)v;
	return n;
}

static inline void pb_varint(struct pbuf *b, uint64_t v)
{
	if (b->cap - b->n < 10) {
		pb_reserve(b, 10);
		if (b->oom)
			return;
	}
	b->n += varint_put(b->b + b->n, v);
}

static void pb_bytes(struct pbuf *b, const void *p, size_t len)
{
	pb_reserve(b, len);
	if (b->oom)
		return;
	memcpy(b->b + b->n, p, len);
	b->n += len;
}

/* Field tags: wire type 0 (varint) or 2 (length-delimited). */
static void pb_uint(struct pbuf *b, uint32_t field, uint64_t v)
{
	if (!v)
		return; /* proto3: zero is the default, not written */
	pb_varint(b, (uint64_t)field << 3);
	pb_varint(b, v);
}

static void pb_int(struct pbuf *b, uint32_t field, int64_t v)
{
	pb_uint(b, field, (uint64_t)v); /* int64: two's complement varint */
}

static void pb_msg(struct pbuf *b, uint32_t field, const struct pbuf *m)
{
	pb_varint(b, (uint64_t)field << 3 | 2);
	pb_varint(b, m->n);
	pb_bytes(b, m->b, m->n);
	if (m->oom)
		b->oom = true;
}

static void pb_str(struct pbuf *b, uint32_t field, const void *s, size_t len)
{
	pb_varint(b, (uint64_t)field << 3 | 2);
	pb_varint(b, len);
	pb_bytes(b, s, len);
}

static void value_type(struct pbuf *out, struct pbuf *m, uint32_t field, uint32_t type,
		       uint32_t unit)
{
	m->n = 0;
	pb_uint(m, 1, type);
	pb_uint(m, 2, unit);
	pb_msg(out, field, m);
}

static void label(struct pbuf *out, struct pbuf *m, uint32_t key, uint32_t str, int64_t num,
		  bool is_num)
{
	m->n = 0;
	pb_uint(m, 1, key);
	if (is_num) {
		/* A zero num is still a label: write it explicitly. */
		pb_varint(m, 3 << 3);
		pb_varint(m, (uint64_t)num);
	} else {
		pb_uint(m, 2, str);
	}
	pb_msg(out, 3, m);
}

static int gz_write(struct exporter *e, FILE *f, const struct pbuf *b)
{
	_cleanup_free_ uint8_t *out = NULL;
	z_stream z = {0};
	size_t cap;
	int r, err;

	/* windowBits 15 + 16: a gzip wrapper, as pprof expects. Level 1: a
	 * profile is mostly varints that level 6 shrinks ~7 % more at 2x the time.
	 * memLevel 9 and one call over the whole buffer into one output buffer
	 * (its bound counted first): no flush between chunks. */
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return export__fail(e, -ENOMEM, "pprof: deflateInit2 failed");
	cap = deflateBound(&z, b->n);
	out = malloc(cap);
	if (!out) {
		deflateEnd(&z);
		return export__fail(e, -ENOMEM, "pprof: out of memory");
	}
	huge_advise(out, cap);
	z.next_in = b->b;
	z.avail_in = (uInt)b->n; /* profiles over 4 GiB are not a goal */
	z.next_out = out;
	z.avail_out = (uInt)cap;
	r = deflate(&z, Z_FINISH);
	deflateEnd(&z);
	if (r != Z_STREAM_END)
		return export__fail(e, -EIO, "pprof: deflate failed");
	errno = 0;
	if (fwrite(out, 1, z.total_out, f) != z.total_out) {
		err = errno ? errno : EIO;
		return export__fail(e, -EIO, "pprof: write failed: %s", strerror(err));
	}
	return 0;
}

/* ---- source lines from DWARF, at write time ---- */

/* A user mapping's binary, opened once: NULL when absent, another build, or no DWARF. */
struct pp_dbg {
	bool tried;
	int fd;
	Dwarf *dw;
};

struct pp_lines {
	struct pp_dbg *dbg;  /* per mapping index */
	uint32_t *func_file; /* per function: string id of its file, 0 = none */
	int64_t *func_start; /* per function: its first line */
	int64_t *loc_line;   /* per location: its line, 0 = none */
	bool *map_has;	     /* per mapping index: some location has a line */
};

static void str_copy(const struct pprof *p, uint32_t id, char *buf, size_t len)
{
	uint32_t n;
	const char *s = xtab__get(&p->strs, id, &n);

	snprintf(buf, len, "%.*s", (int)n, s);
}

static Dwarf *dbg_open(const struct pprof *p, const struct pp_map *m, struct pp_dbg *d)
{
	char path[4096], want[2 * CPA_BUILD_ID_MAX + 1], have[2 * CPA_BUILD_ID_MAX + 1];
	const unsigned char *bid;
	struct stat st;
	ssize_t n, i;

	if (d->tried)
		return d->dw;
	d->tried = true;
	str_copy(p, m->file, path, sizeof(path));
	str_copy(p, m->build_id, want, sizeof(want));
	/* O_NONBLOCK and regular files only: a mapped path may be a fifo or a device now */
	if (!want[0] || (d->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) < 0)
		return NULL;
	if (fstat(d->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(d->fd);
		return NULL;
	}
	d->dw = dwarf_begin(d->fd, DWARF_C_READ);
	n = d->dw ? dwelf_elf_gnu_build_id(dwarf_getelf(d->dw), (const void **)&bid) : -1;
	for (i = 0; i < n && i < CPA_BUILD_ID_MAX; i++)
		snprintf(have + 2 * i, 3, "%02x", bid[i]);
	have[n > 0 ? 2 * i : 0] = 0;
	if (n <= 0 || strcmp(have, want)) {
		if (d->dw)
			dwarf_end(d->dw);
		d->dw = NULL;
		close(d->fd);
	}
	return d->dw;
}

/* File offset -> virtual address through the PT_LOAD that maps it. */
static bool vaddr_of(Dwarf *dw, uint64_t off, Dwarf_Addr *ret)
{
	Elf *elf = dwarf_getelf(dw);
	size_t n, i;
	GElf_Phdr ph;

	if (elf_getphdrnum(elf, &n) < 0)
		return false;
	for (i = 0; i < n; i++)
		if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && off >= ph.p_offset &&
		    off < ph.p_offset + ph.p_filesz) {
			*ret = off - ph.p_offset + ph.p_vaddr;
			return true;
		}
	return false;
}

/* Line of location i, and its function's file and first line when not known yet. */
static void line_of(struct pprof *p, struct pp_lines *ls, uint32_t i)
{
	const struct pp_loc *l = xtab__get(&p->locs, i, NULL);
	const struct pp_map *m;
	Dwarf *dw;
	Dwarf_Addr va;
	Dwarf_Die cu, *scopes = NULL;
	Dwarf_Line *ln;
	const char *src;
	int line = 0, ns, k;

	if (!l->map)
		return;
	m = xtab__get(&p->maps, l->map - 1, NULL);
	if (m->kernel || !(dw = dbg_open(p, m, &ls->dbg[l->map - 1])) ||
	    !vaddr_of(dw, l->addr, &va) || !dwarf_addrdie(dw, va, &cu) ||
	    !(ln = dwarf_getsrc_die(&cu, va)) || dwarf_lineno(ln, &line) != 0 || line <= 0 ||
	    !(src = dwarf_linesrc(ln, NULL, NULL)))
		return;
	ls->loc_line[i] = line;
	ls->map_has[l->map - 1] = true;
	if (ls->func_file[l->func - 1])
		return;
	/* the function: the outermost subprogram at the address, else the line's file */
	ls->func_start[l->func - 1] = line;
	ns = dwarf_getscopes(&cu, va, &scopes);
	for (k = ns - 1; k >= 0; k--)
		if (dwarf_tag(&scopes[k]) == DW_TAG_subprogram) {
			const char *df = dwarf_decl_file(&scopes[k]);

			if (df)
				src = df;
			if (dwarf_decl_line(&scopes[k], &line) == 0 && line > 0)
				ls->func_start[l->func - 1] = line;
			break;
		}
	free(scopes);
	(void)str_id(p, src, &ls->func_file[l->func - 1]);
}

static void lines_free(struct pprof *p, struct pp_lines *ls)
{
	uint32_t i;

	for (i = 0; ls->dbg && i < xtab__count(&p->maps); i++)
		if (ls->dbg[i].dw) {
			dwarf_end(ls->dbg[i].dw);
			close(ls->dbg[i].fd);
		}
	free(ls->dbg);
	free(ls->func_file);
	free(ls->func_start);
	free(ls->loc_line);
	free(ls->map_has);
}

static int lines_resolve(struct pprof *p, struct pp_lines *ls)
{
	uint32_t i;

	ls->dbg = calloc(xtab__count(&p->maps) + 1, sizeof(*ls->dbg));
	ls->map_has = calloc(xtab__count(&p->maps) + 1, sizeof(*ls->map_has));
	ls->func_file = calloc(xtab__count(&p->funcs) + 1, sizeof(*ls->func_file));
	ls->func_start = calloc(xtab__count(&p->funcs) + 1, sizeof(*ls->func_start));
	ls->loc_line = calloc(xtab__count(&p->locs) + 1, sizeof(*ls->loc_line));
	if (!ls->dbg || !ls->map_has || !ls->func_file || !ls->func_start || !ls->loc_line)
		return -ENOMEM;
	for (i = 0; i < xtab__count(&p->locs); i++)
		line_of(p, ls, i);
	return 0;
}

/* Each sample's values, from its slot's sums: [count, count x period (on-CPU),
 * blocked ns (off-CPU)], negated for a diff's base. Sums of what each row
 * adds, in int64's wrap-around arithmetic the same whatever the order. */
static void sample_vals(const struct exporter *e, const struct pprof *p, int64_t (*vals)[3])
{
	uint64_t period = e->o.freq ? 1000000000ull / e->o.freq : 0;
	uint32_t i;

	for (i = 0; p->slots && i <= p->mask; i++) {
		const struct pp_slot *x = &p->slots[i];
		const struct pp_ctx *k;
		uint64_t sign;
		int64_t *v;

		if (!x->sample)
			continue;
		k = xtab__get(&p->ctxs, x->ctx, NULL);
		sign = k->side ? UINT64_MAX : 1; /* -1 */
		v = vals[x->sample - 1];
		v[0] = (int64_t)(sign * x->count);
		if (k->kind == CPA_KIND_OFFCPU)
			v[2] = (int64_t)(sign * x->weight);
		else if (k->kind == CPA_KIND_ONCPU)
			v[1] = (int64_t)(sign * x->count * period);
	}
}

/* ---- samples: each encoded from pieces made once per rval and per ctx ---- */

/* The label keys' string ids, in this order, then the kinds' names. */
enum {
	PP_SID_PID,
	PP_SID_TID,
	PP_SID_CPU,
	PP_SID_CGROUP,
	PP_SID_COMM,
	PP_SID_PROC,
	PP_SID_ENV,
	PP_SID_KIND,
	PP_SID_PROBE,
	PP_SID_BASE,
	PP_SID_TRUE,
	PP_SID_TRIG,
	PP_SID_KINDS,
	PP_SID_N = PP_SID_KINDS + CPA_KIND_MAX,
};

struct pp_piece {
	size_t off, len; /* in pp_pieces.buf */
};

/* A sample is [its stack's location ids][values][pid, tid][cpu][cgroup][comm,
 * process, env][kind, probe, base, trigger]: per rval the stack and the
 * names, per ctx the pid and tid, the cgroup, the rest (rv[2 * id + 0..1],
 * cx[3 * id + 0..2]). */
struct pp_pieces {
	struct pbuf buf;
	struct pp_piece *rv, *cx;
};

static void pieces_free(struct pp_pieces *pc)
{
	free(pc->buf.b);
	free(pc->rv);
	free(pc->cx);
}

static size_t piece_put(uint8_t *o, const struct pp_pieces *pc, const struct pp_piece *x)
{
	memcpy(o, pc->buf.b + x->off, x->len);
	return x->len;
}

static void piece_end(struct pp_pieces *pc, struct pp_piece *x)
{
	x->len = pc->buf.n - x->off;
}

static int pieces_make(const struct exporter *e, const struct pprof *p, struct pp_pieces *pc,
		       const uint32_t *sid)
{
	uint32_t nrv = xtab__count(&p->rvals), ncx = xtab__count(&p->ctxs), i, j, nl;
	struct pbuf *o = &pc->buf, sub = {0}, m = {0};

	pc->rv = calloc(2 * (size_t)nrv + 1, sizeof(*pc->rv));
	pc->cx = calloc(3 * (size_t)ncx + 1, sizeof(*pc->cx));
	if (!pc->rv || !pc->cx)
		return -ENOMEM;
	for (i = 0; i < nrv; i++) {
		const struct pp_rval *rv = xtab__get(&p->rvals, i, NULL);
		const uint32_t *locs = xtab__get(&p->stacks, rv->stack, &nl);
		struct pp_piece *x = &pc->rv[2 * i];

		nl /= sizeof(uint32_t);
		/* packed location ids */
		sub.n = 0;
		for (j = 0; j < nl; j++)
			pb_varint(&sub, locs[j]);
		x[0].off = o->n;
		pb_str(o, 1, sub.b, sub.n);
		piece_end(pc, &x[0]);
		x[1].off = o->n;
		if (rv->comm)
			label(o, &m, sid[PP_SID_COMM], rv->comm, 0, false);
		if (rv->process)
			label(o, &m, sid[PP_SID_PROC], rv->process, 0, false);
		if (rv->env)
			label(o, &m, sid[PP_SID_ENV], rv->env, 0, false);
		piece_end(pc, &x[1]);
	}
	for (i = 0; i < ncx; i++) {
		const struct pp_ctx *k = xtab__get(&p->ctxs, i, NULL);
		struct pp_piece *x = &pc->cx[3 * i];

		x[0].off = o->n;
		if (!e->o.no_pid) {
			label(o, &m, sid[PP_SID_PID], 0, k->pid, true);
			label(o, &m, sid[PP_SID_TID], 0, k->tid, true);
		}
		piece_end(pc, &x[0]);
		x[1].off = o->n;
		label(o, &m, sid[PP_SID_CGROUP], 0, (int64_t)k->cgroup, true);
		piece_end(pc, &x[1]);
		x[2].off = o->n;
		if (k->kind < CPA_KIND_MAX)
			label(o, &m, sid[PP_SID_KIND], sid[PP_SID_KINDS + k->kind], 0, false);
		if (k->kind == CPA_KIND_PROBE)
			label(o, &m, sid[PP_SID_PROBE], 0, k->probe, true);
		if (k->side)
			label(o, &m, sid[PP_SID_BASE], sid[PP_SID_TRUE], 0, false);
		if (k->trigger)
			label(o, &m, sid[PP_SID_TRIG], k->trigger, 0, false);
		piece_end(pc, &x[2]);
	}
	free(sub.b);
	free(m.b);
	return o->oom || sub.oom || m.oom ? -ENOMEM : 0;
}

/* Sample sd (values v) at the end of b: its bytes; with b NULL only their count. */
static size_t sample_put(struct pbuf *b, const struct pp_pieces *pc, const struct pp_sid *sd,
			 const int64_t *v, uint32_t cpu_key)
{
	const struct pp_piece *rv = &pc->rv[2 * sd->rv], *cx = &pc->cx[3 * sd->ctx];
	uint8_t vb[3 * 10], lb[2 * 10 + 4], *o;
	size_t vn = 0, ln = 0, len, j;

	/* values, packed */
	for (j = 0; j < 3; j++)
		vn += varint_put(vb + vn, (uint64_t)v[j]);
	/* the cpu label: key, num (written when zero too) */
	lb[ln++] = 1 << 3;
	ln += varint_put(lb + ln, cpu_key);
	lb[ln++] = 3 << 3;
	ln += varint_put(lb + ln, sd->cpu);
	/* stack, values, pid, tid, cpu, cgroup, names, kind ... (as pb_msg() nests them) */
	len = rv[0].len + 1 + varint_len(vn) + vn + cx[0].len + 1 + varint_len(ln) + ln +
	      cx[1].len + rv[1].len + cx[2].len;
	if (!b)
		return 1 + varint_len(len) + len;
	pb_reserve(b, 1 + varint_len(len) + len);
	if (b->oom)
		return 0;
	o = b->b + b->n;
	*o++ = 2 << 3 | 2;
	o += varint_put(o, len);
	o += piece_put(o, pc, &rv[0]);
	*o++ = 2 << 3 | 2;
	o += varint_put(o, vn);
	memcpy(o, vb, vn);
	o += vn;
	o += piece_put(o, pc, &cx[0]);
	*o++ = 3 << 3 | 2;
	o += varint_put(o, ln);
	memcpy(o, lb, ln);
	o += ln;
	o += piece_put(o, pc, &cx[1]);
	o += piece_put(o, pc, &rv[1]);
	o += piece_put(o, pc, &cx[2]);
	len = (size_t)(o - (b->b + b->n));
	b->n += len;
	return len;
}

/* "File:" of pprof's header: "HOST cpa HH:MM:SS - HH:MM:SS" (no '/': pprof prints its base name).
 */
static int main_name(struct exporter *e, struct pprof *p, uint32_t *ret)
{
	char host[256] = "", name[1024], *c;

	if (gethostname(host, sizeof(host) - 1) < 0)
		snprintf(host, sizeof(host), "localhost");
	snprintf(name, sizeof(name), "%s %s", host, e->o.title ? e->o.title : "cpa");
	for (c = name; *c; c++)
		if (*c == '/')
			*c = ':';
	return str_id(p, name, ret);
}

int export_pprof__write(struct exporter *e, FILE *f)
{
	struct pprof *p = e->pp;
	struct pbuf b = {0}, m = {0}, sub = {0};
	uint32_t s_samples, s_count, s_cpu, s_ns, s_off, s_pid, s_tid, s_cpul, s_cg, s_comm, s_proc,
		s_env, s_kind, s_probe, s_base, s_true, s_trig, s_kinds[CPA_KIND_MAX], i, j = 0;
	uint32_t s_comments[EXPORT_TRIGGERS_MAX];
	_cleanup_free_ uint32_t *mapid = NULL;
	_cleanup_free_ int64_t(*vals)[3] = NULL;
	struct pp_lines ls = {0};
	struct pp_pieces pc = {0};
	uint32_t s_main, s_ids[PP_SID_N];
	size_t nb;
	int r = 0;

	if (str_id(p, "samples", &s_samples) < 0 || str_id(p, "count", &s_count) < 0 ||
	    str_id(p, "cpu", &s_cpu) < 0 || str_id(p, "nanoseconds", &s_ns) < 0 ||
	    str_id(p, "off-cpu", &s_off) < 0 || str_id(p, "pid", &s_pid) < 0 ||
	    str_id(p, "tid", &s_tid) < 0 || str_id(p, "cpu", &s_cpul) < 0 ||
	    str_id(p, "cgroup", &s_cg) < 0 || str_id(p, "comm", &s_comm) < 0 ||
	    str_id(p, "process", &s_proc) < 0 || str_id(p, "env", &s_env) < 0 ||
	    str_id(p, "kind", &s_kind) < 0 || str_id(p, "probe", &s_probe) < 0 ||
	    str_id(p, "pprof::base", &s_base) < 0 || str_id(p, "true", &s_true) < 0 ||
	    str_id(p, "trigger", &s_trig) < 0 || main_name(e, p, &s_main) < 0)
		return export__fail(e, -ENOMEM, "pprof: out of memory");
	for (i = 0; i < e->n_trig; i++) {
		char text[512], c[600];

		export__trigger_text(&e->trig[i], text, sizeof(text));
		snprintf(c, sizeof(c), "trigger %s", text);
		if (str_id(p, c, &s_comments[i]) < 0)
			return export__fail(e, -ENOMEM, "pprof: out of memory");
	}
	for (i = 0; i < CPA_KIND_MAX; i++)
		if (str_id(p, export__kind_name(i), &s_kinds[i]) < 0)
			return export__fail(e, -ENOMEM, "pprof: out of memory");
	{
		const uint32_t ids[PP_SID_N] = {s_pid, s_tid,  s_cpul,	s_cg,	s_comm, s_proc,
						s_env, s_kind, s_probe, s_base, s_true, s_trig};

		memcpy(s_ids, ids, sizeof(ids));
		memcpy(s_ids + PP_SID_KINDS, s_kinds, sizeof(s_kinds));
	}

	if (lines_resolve(p, &ls) < 0) {
		lines_free(p, &ls);
		return export__fail(e, -ENOMEM, "pprof: out of memory");
	}
	/* Mapping ids: 1 names the host and range (pprof's "File:", the main
	 * binary), then user code, [kernel] last. */
	mapid = calloc(xtab__count(&p->maps) + 1, sizeof(*mapid));
	if (!mapid) {
		lines_free(p, &ls);
		return export__fail(e, -ENOMEM, "pprof: out of memory");
	}
	j = 1;
	for (i = 0; i < xtab__count(&p->maps); i++)
		if (!((const struct pp_map *)xtab__get(&p->maps, i, NULL))->kernel)
			mapid[i] = ++j;
	for (i = 0; i < xtab__count(&p->maps); i++)
		if (!mapid[i])
			mapid[i] = ++j;

	value_type(&b, &m, 1, s_samples, s_count);
	value_type(&b, &m, 1, s_cpu, s_ns);
	value_type(&b, &m, 1, s_off, s_ns);

	vals = calloc(p->nsids + 1, sizeof(*vals));
	if (!vals || pieces_make(e, p, &pc, s_ids) < 0) {
		lines_free(p, &ls);
		pieces_free(&pc);
		free(sub.b);
		return export__fail(e, -ENOMEM, "pprof: out of memory");
	}
	sample_vals(e, p, vals);
	/* the samples' size first: one buffer, in huge pages */
	for (i = 0, nb = 0; i < p->nsids; i++)
		if (vals[i][0] || vals[i][1] || vals[i][2])
			nb += sample_put(NULL, &pc, &p->sids[i], vals[i], s_ids[PP_SID_CPU]);
	pb_reserve(&b, nb);
	if (!b.oom)
		huge_advise(b.b + b.n, nb);
	for (i = 0; i < p->nsids && !b.oom; i++)
		if (vals[i][0] || vals[i][1] || vals[i][2]) {
			sample_put(&b, &pc, &p->sids[i], vals[i], s_ids[PP_SID_CPU]);
			e->st.stacks++;
		}
	pieces_free(&pc);
	/* mapping 1: below every user mapping (those start at 2 << MAP_SHIFT) */
	m.n = 0;
	pb_uint(&m, 1, 1);
	pb_uint(&m, 2, 1ull << MAP_SHIFT);
	pb_uint(&m, 3, 2ull << MAP_SHIFT);
	pb_uint(&m, 5, s_main);
	pb_uint(&m, 7, 1);
	pb_msg(&b, 3, &m);
	for (j = 2; j <= xtab__count(&p->maps) + 1; j++) {
		const struct pp_map *mp;
		uint64_t id = j;

		for (i = 0; mapid[i] != j; i++) /* a few hundred mappings at most */
			;
		mp = xtab__get(&p->maps, i, NULL);
		m.n = 0;
		pb_uint(&m, 1, id);
		pb_uint(&m, 2, mp->kernel ? KERNEL_START : id << MAP_SHIFT);
		pb_uint(&m, 3, mp->kernel ? KERNEL_LIMIT : (id << MAP_SHIFT) + MAP_SIZE);
		pb_uint(&m, 5, mp->file);
		pb_uint(&m, 6, mp->build_id);
		pb_uint(&m, 7, 1); /* has_functions: symbolized here, nothing for pprof to do */
		if (ls.map_has[i]) {
			pb_uint(&m, 8, 1); /* has_filenames */
			pb_uint(&m, 9, 1); /* has_line_numbers */
		}
		pb_msg(&b, 3, &m);
	}
	for (i = 0; i < xtab__count(&p->locs); i++) {
		const struct pp_loc *l = xtab__get(&p->locs, i, NULL);

		const struct pp_map *mp = l->map ? xtab__get(&p->maps, l->map - 1, NULL) : NULL;
		uint64_t id = l->map ? mapid[l->map - 1] : 0;

		m.n = 0;
		pb_uint(&m, 1, i + 1);
		pb_uint(&m, 2, id);
		pb_uint(&m, 3, l->addr + (mp && !mp->kernel ? id << MAP_SHIFT : 0));
		sub.n = 0;
		pb_uint(&sub, 1, l->func);
		if (ls.loc_line[i])
			pb_int(&sub, 2, ls.loc_line[i]);
		pb_msg(&m, 4, &sub);
		pb_msg(&b, 4, &m);
	}
	for (i = 0; i < xtab__count(&p->funcs); i++) {
		const uint32_t *fk = xtab__get(&p->funcs, i, NULL);

		m.n = 0;
		pb_uint(&m, 1, i + 1);
		pb_uint(&m, 2, fk[0]);
		pb_uint(&m, 3, fk[0]);
		if (ls.func_file[i]) {
			pb_uint(&m, 4, ls.func_file[i]);
			pb_int(&m, 5, ls.func_start[i]);
		}
		pb_msg(&b, 5, &m);
	}
	for (i = 0; i < xtab__count(&p->strs); i++) {
		uint32_t len;
		const void *s = xtab__get(&p->strs, i, &len);

		pb_str(&b, 6, s, len);
	}
	pb_int(&b, 9, (int64_t)e->o.t0_ns);
	pb_int(&b, 10, (int64_t)(e->o.t1_ns - e->o.t0_ns));
	value_type(&b, &m, 11, s_cpu, s_ns);
	pb_int(&b, 12, e->o.freq ? 1000000000ll / e->o.freq : 0);
	for (i = 0; i < e->n_trig; i++)
		pb_int(&b, 13, s_comments[i]);
	pb_uint(&b, 14, s_cpu);
	if (b.oom || m.oom || sub.oom)
		r = export__fail(e, -ENOMEM, "pprof: out of memory");
	else
		r = gz_write(e, f, &b);
	free(b.b);
	free(m.b);
	free(sub.b);
	lines_free(p, &ls);
	return r;
}
