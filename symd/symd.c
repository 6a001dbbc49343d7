// SPDX-License-Identifier: MIT
/*
 * The symd stage proper: input records from unwindd in, interned
 * definitions and samples out.
 *
 *   ring 1 (unwindd ids)                       ring 2 (symd ids, this epoch)
 *   DICT_RESET  -> forget umods[] (START: skip DICT_RESET epoch=gen<<32|n
 *                  unwindd's replayed batch)   (the first one: START)
 *   MODULE      -> umods[id]                    STR / MODULE / FRAME / STACK
 *   FRAMES      -> names -> frame ids -> stack  ... each before first use
 *                                               SAMPLE_OUT (seq kept)
 *   TASK exit   -> drop per-pid state
 *   LOSS        -> forwarded                    LOSS (also our own drops)
 *
 * Every id we send is remembered only in the intern tables. If a definition
 * could not be written (output full) or the tables outgrow their budget, the
 * tables are cleared and a new DICT_RESET starts a fresh epoch: simpler and
 * safer than tracking which definitions made it.
 */
#include "common/envlabel.h"
#include "symd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bincache.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/heaptrim.h"
#include "common/intern.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/procroot.h"
#include "common/pycode.h"
#include "common/timeutil.h"
#include "debuginfod.h"
#include "elfsym.h"
#include "ksyms.h"
#include "names.h"
#include "jitmap.h"
#include "jvm.h"
#include "pysym.h"
#include "shm/counters.h"
#include "shm/dedup.h"
#include "shm/fault.h"
#include "shm/loss.h"
#include "shm/records.h"

#define SYMD_PID_MAX	       65536u
#define SYMD_KSYM_CHECK_NS     (5 * NSEC_PER_SEC)
#define SYMD_JIT_RECHECK_NS    NSEC_PER_SEC
#define SYMD_JVM_PERIOD_NS     (NSEC_PER_SEC / 5)  /* JVM perf map requests: at most this often */
#define SYMD_JVM_PERIOD_MAX_NS (60 * NSEC_PER_SEC) /* ... backing off to this */
#define SYMD_JVM_READ_NS       (NSEC_PER_SEC / 20) /* the map read after a request ... */
#define SYMD_JVM_WAIT_NS       (2 * NSEC_PER_SEC)  /* ... while it may still come */
#define SYMD_JVM_WAIT_ONE_NS   (NSEC_PER_SEC / 2)  /* a request waited for at most ... */
#define SYMD_JVM_WAIT_MAX_NS   NSEC_PER_SEC	   /* ... out of a budget of 5 % of the time */
#define SYMD_LOSS_FLUSH_NS     NSEC_PER_SEC
#define SYMD_HEAP_TRIM_NS      (10 * NSEC_PER_SEC) /* no binary loaded that long: trim */
#define SYMD_TRIM_EVERY_NS     NSEC_PER_SEC	   /* heap_trim__maybe() at most this often */
#define SYMD_TRIM_FREE	       (8u << 20) /* ... once the heap's free bytes grew this much */
#define SYMD_BIN_IDLE_NS       (60 * NSEC_PER_SEC)  /* a binary no frame named that long goes */
#define SYMD_BIN_QUIET_IDLE_NS (300 * NSEC_PER_SEC) /* ... that long once loads stopped */
#define SYMD_EPOCH_BYTES       (4u << 20)	    /* intern tables: a new epoch past this */
#define SYMD_EPOCH_MIN_NS      (30 * NSEC_PER_SEC)  /* ... unless it refilled that fast */
#define SYMD_EPOCH_MAX	       (16u << 20) /* ... doubling up to this (and 1/4 of the cap) */
#define SYMD_MAX_STACK	       CPA_MAX_STACK_FRAMES
#define SYMD_FRAME_NAME_MAX    (SYMD_MAX_NAME + CPA_PATH_MAX + 8)
#define SYMD_PCC_BITS	       16	  /* at most 64 Ki slots (2 MiB) */
#define SYMD_PCC_MIN_BITS      10	  /* from 1 Ki slots (32 KiB) */
#define SYMD_PCC_KERNEL	       UINT32_MAX /* module key of kernel pcs */
/* frame_user()'s flag (not a frame flag): the symbol is CPython's evaluation
 * loop, whose frames a Python sample's frames replace. */
#define SYMD_FF_PYEVAL 0x8000u

/* A module as unwindd defined it (unwindd's id space). */
struct umod {
	uint32_t id; /* 0: free slot */
	bool defined;
	bool recover_tried; /* not defined to us: looked up in /proc/PID/maps once */
	uint8_t bid_len;
	uint16_t kind;
	uint32_t pid;
	uint32_t out_id; /* our MODULE id in epoch out_epoch, 0 = none */
	uint32_t out_epoch;
	uint64_t dev;
	uint64_t ino;
	uint64_t map_start;
	uint64_t map_end;
	uint32_t mnt_ns; /* pid's mount namespace when defined, 0: unknown */
	uint8_t bid[CPA_BUILD_ID_MAX];
	char *path;
};

struct pidinfo {
	struct pidinfo *next;
	uint32_t pid;
	bool env_read;
	bool jit_tried;
	char *env; /* NULL: "SYSTEM" */
	size_t env_len;
	struct jitmap *jit;
	uint64_t jit_next_ns;
	int64_t jit_size;
	int64_t jit_refused; /* size of the map file refused as it is, -1: none */
	uint64_t jit_used;   /* jit_clock of the last lookup: LRU eviction */
	int64_t jit_mtime;   /* of the map file loaded (a JVM rewrites it) */
	uint8_t jit_src;     /* which path it came from: pidinfo__load_jit() */
	bool jvm_checked;
	bool jvm; /* a HotSpot JVM: its perf map is asked for (jvm.c) */
	uint64_t jvm_next_ns;
	uint64_t jvm_asked_ns;
	uint64_t jvm_period_ns;
	uint64_t jvm_misses; /* JIT frames its map did not name */
	uint64_t jvm_misses_asked;
};

/*
 * The pc cache: (unwindd module id or kernel, offset, leaf) -> frame id of
 * the current epoch. Direct-mapped; an entry is valid only with the current
 * pcc_gen, which moves whenever an answer could change (our reset, unwindd's
 * reset or a redefinition, a binary or kallsyms (re)loaded). In steady state
 * a frame costs one slot compare instead of a symbol search, a snprintf and
 * two hash lookups.
 */
struct pcc_ent {
	uint64_t off;
	uint32_t mod;
	uint32_t gen;
	uint32_t fid;
	uint16_t leaf;
	uint16_t fflags; /* frame flags, to count hits and misses */
	uint64_t _pad;
};

struct symd {
	const struct cpa_config *cfg;
	uint32_t flags;
	struct shm_stage *st;
	struct shm_ring_cons *in;
	struct shm_ring_prod *out;
	uint32_t generation;
	struct symd_paths paths;
	char env_keys[CPA_ENV_LIST_MAX];

	struct umod *umods; /* open addressing by id; cleared, never deleted from */
	uint32_t umods_cap;
	uint32_t umods_n;
	/* Each process's mount namespace from its exec event: a module of a
	 * gone one is opened through a live process of it (common/procroot.h). */
	struct proc_mnt_tab mnt;

	struct bincache *bins;
	struct dfetch *df; /* debuginfod, NULL = off */
	char dcache[CPA_PATH_MAX + 16];
	struct bincache_stats bin_seen; /* last values turned into counters */
	uint64_t bins_loads_seen;
	uint64_t bins_refreshed_seen; /* bincache loads that change an answer: pcc_gen */
	struct symbin *vdso;
	bool vdso_tried;
	struct ksyms ks;
	bool ks_tried;
	bool ks_active; /* kernel frames seen since the last modules check */
	bool kptr_warned;

	struct pidinfo **pids;
	uint32_t npids;
	size_t jit_bytes;  /* perf maps held */
	size_t jit_budget; /* perf maps at most (1/4 of the cap) */
	uint64_t jit_clock;
	uint64_t cap;	      /* --max_cache_size_mb or cpa ctl mem, bytes */
	uint64_t sym_budget;  /* binary cache + perf maps (3/4 of the cap) */
	bool jit_warned[2];   /* too big, not trusted: one warning each */
	uint64_t jvm_wait_ns; /* JVM perf map requests: time left to wait for them */
	uint64_t jvm_wait_at; /* ... as of then */

	struct intern strs;
	struct intern frames;
	struct intern stacks;
	struct intern mods;
	uint32_t resets; /* epoch counter within this generation */
	bool need_reset;
	bool held;

	/* Copies from our predecessor or unwindd's (shm/dedup.h); dd.high is
	 * the highest input seq handled, our release mark. */
	struct shm_dedup dd;
	bool start_sent;	 /* this life's first reset, with CPA_RESET_START, is out */
	unsigned int fault_left; /* batches to the test knob's kill (0: off) */

	uint64_t intern_budget;	    /* 1/4 of the cap: what the epoch budget may grow to */
	uint64_t epoch_budget;	    /* intern bytes that start a new epoch (symd__epoch_full()) */
	uint64_t epoch_ns;	    /* tick clock when this epoch started */
	uint64_t tick_ns;	    /* the last tick's clock */
	struct shm_loss_table loss; /* own drops, upstream losses not forwarded yet */
	uint64_t loss_next_ns;
	uint64_t heap_loads;	 /* bincache loads at the last look */
	uint64_t heap_last_load; /* when they last grew */
	bool heap_untrimmed;	 /* loads since the last malloc_trim() */
	struct heap_trim trim;	 /* common/heaptrim.h */
	uint64_t trim_ns;	 /* its last look */
	struct shm_rate rate;
	uint64_t gauge_bytes;

	struct pcc_ent *pcc;
	uint32_t pcc_gen;
	uint32_t pcc_bits;
	uint32_t pcc_max_bits;
	uint32_t pcc_evict;  /* live entries replaced since the last resize */
	uint64_t pcc_misses; /* symd__pcc_misses() */

	/* Per-frame counters, added to the stage block once per batch: a
	 * load and store of a shared cache line per frame was 15 % of the
	 * batch function in a profile at 999 Hz. */
	uint64_t acc_lookups, acc_hits, acc_misses, acc_ksyms;

	/* comm and pcomm of the last sample: consecutive samples mostly come
	 * from the same threads, and a 16-byte compare is cheaper than a
	 * hash and a probe. Valid in the epoch (resets) they were made in. */
	struct comm_ent {
		char comm[CPA_COMM_LEN];
		uint32_t id;
		uint32_t epoch;
	} comm_cache[2];

	uint32_t ids[SYMD_MAX_STACK + 2];
	char name[SYMD_FRAME_NAME_MAX];

	/* Python frames (pysym.h, docs/unwinding.md "Python") */
	struct pysym *py;
	uint32_t pyev[CPA_MAX_UWALK + 1];    /* ids[] indexes of evaluation frames */
	uint32_t merged[SYMD_MAX_STACK + 2]; /* the stack with them replaced */
};

static inline void cnt(struct symd *s, unsigned int idx, uint64_t n)
{
	shm_stage__cnt_add(s->st, idx, n);
}

/* ---- output ---- */

static int emit2(struct symd *s, uint16_t type, const void *a, uint32_t alen, const void *b,
		 uint32_t blen)
{
	void *d;
	int r = shm_ring__reserve_sp(s->out, alen + blen, type, &d);

	if (r < 0)
		return r;
	memcpy(d, a, alen);
	if (blen)
		memcpy((uint8_t *)d + alen, b, blen);
	cnt(s, SHM_CNT_OUT, 1);
	cnt(s, SHM_CNT_BYTES_OUT, alen + blen);
	return 0;
}

static int symd__reset_sp(struct symd *s)
{
	struct cpa_dict_reset d;
	int r;

	intern__free(&s->strs);
	intern__free(&s->frames);
	intern__free(&s->stacks);
	intern__free(&s->mods);
	s->pcc_gen++;
	s->epoch_ns = s->tick_ns;
	/* umods' cached MODULE ids belong to the old epoch from here on, sent
	 * or not. */
	s->resets++;
	d = (struct cpa_dict_reset){.epoch = ((uint64_t)s->generation << 32) | s->resets};
	if (!s->start_sent) {
		/* The storer skips what our predecessor sent above our start. */
		d.flags = CPA_RESET_START;
		d.resume_seq = s->dd.resume;
	}
	r = emit2(s, CPA_REC_DICT_RESET, &d, sizeof(d), NULL, 0);
	if (r < 0)
		return r;
	s->need_reset = false;
	s->start_sent = true;
	return 0;
}

/* Interned and, the first time, defined downstream. A definition that
 * cannot be written poisons the epoch: the caller drops the sample and the
 * next record starts a new epoch. */
static int str_id(struct symd *s, const char *str, size_t len, uint32_t *ret)
{
	struct cpa_str_def d;
	int r;

	r = intern__get(&s->strs, str, (uint32_t)len, ret);
	if (r <= 0)
		return r;
	d = (struct cpa_str_def){.id = *ret, .len = (uint32_t)len};
	r = emit2(s, CPA_REC_STR, &d, sizeof(d), str, (uint32_t)len);
	if (r < 0) {
		s->need_reset = true;
		return r;
	}
	cnt(s, SYM_CNT_STRINGS, 1);
	return 0;
}

static int comm_id(struct symd *s, struct comm_ent *c, const char *comm, uint32_t *ret)
{
	int r;

	if (c->id && c->epoch == s->resets && !memcmp(c->comm, comm, CPA_COMM_LEN)) {
		*ret = c->id;
		return 0;
	}
	r = str_id(s, comm, strnlen(comm, CPA_COMM_LEN), ret);
	if (r < 0)
		return r;
	memcpy(c->comm, comm, CPA_COMM_LEN);
	c->id = *ret;
	c->epoch = s->resets;
	return 0;
}

struct modkey {
	uint32_t kind;
	uint8_t bid_len;
	uint8_t bid[CPA_BUILD_ID_MAX];
	uint8_t _pad[3];
	uint64_t dev;
	uint64_t ino;
};

static int mod_id(struct symd *s, const struct cpa_module_def *def, const char *path, uint32_t *ret)
{
	uint8_t key[sizeof(struct modkey) + CPA_PATH_MAX];
	struct modkey mk = {0};
	size_t plen = strlen(path);
	struct cpa_module_def d;
	int r;

	mk.kind = def->kind;
	mk.bid_len = def->build_id_len;
	memcpy(mk.bid, def->build_id, def->build_id_len);
	mk.dev = def->dev;
	mk.ino = def->ino;
	memcpy(key, &mk, sizeof(mk));
	memcpy(key + sizeof(mk), path, plen);
	r = intern__get(&s->mods, key, (uint32_t)(sizeof(mk) + plen), ret);
	if (r <= 0)
		return r;
	d = *def;
	d.id = *ret;
	d.path_len = (uint32_t)plen;
	r = emit2(s, CPA_REC_MODULE, &d, sizeof(d), path, (uint32_t)plen);
	if (r < 0)
		s->need_reset = true;
	return r;
}

struct framekey {
	uint32_t module_id;
	uint32_t name_id;
	uint32_t flags;
	uint32_t _pad0;
	uint64_t pc_off; /* with --pc_locations: the pc's offset (or kernel address), else 0 */
};

static int frame_id_pc(struct symd *s, uint32_t module_id, const char *name, size_t nlen,
		       uint32_t flags, uint64_t offset, uint64_t pc_off, uint32_t *ret);

static int frame_id(struct symd *s, uint32_t module_id, const char *name, size_t nlen,
		    uint32_t flags, uint64_t offset, uint32_t *ret)
{
	return frame_id_pc(s, module_id, name, nlen, flags, offset, 0, ret);
}

/*
 * A symbolized frame. With --pc_locations (CPA_CFG_PC_LOCATIONS) it is keyed
 * by its pc too and its offset is the pc's, not the symbol's start: pprof
 * Locations then name the sampled instruction (docs/export.md). Names, and
 * so folded output, do not change.
 */
static int frame_id_pc(struct symd *s, uint32_t module_id, const char *name, size_t nlen,
		       uint32_t flags, uint64_t offset, uint64_t pc_off, uint32_t *ret)
{
	struct framekey k = {.module_id = module_id, .flags = flags};
	struct cpa_frame_def d;
	int r;

	if (s->flags & CPA_CFG_PC_LOCATIONS)
		k.pc_off = pc_off;

	r = str_id(s, name, nlen, &k.name_id);
	if (r < 0)
		return r;
	/* Symbolized frames are keyed by name, not by pc: every sample in a
	 * function shares one frame, so stacks repeat and intern well. */
	r = intern__get(&s->frames, &k, sizeof(k), ret);
	if (r <= 0)
		return r;
	d = (struct cpa_frame_def){
		.id = *ret,
		.name_id = k.name_id,
		.module_id = module_id,
		.flags = flags,
		.offset = k.pc_off ? k.pc_off : offset,
	};
	r = emit2(s, CPA_REC_FRAME, &d, sizeof(d), NULL, 0);
	if (r < 0)
		s->need_reset = true;
	return r;
}

static int marker_id(struct symd *s, const char *name, uint32_t *ret)
{
	return frame_id(s, 0, name, strlen(name), CPA_FF_MARKER, 0, ret);
}

/* ---- per-pid state ---- */

static void bins_rebudget(struct symd *s)
{
	if (s->bins)
		bincache__set_budget(
			s->bins, s->sym_budget - MIN((uint64_t)s->jit_bytes, s->sym_budget / 2));
}

/* Replace p's perf map with j (NULL: drop it). Perf maps and the binary
 * cache share the symbol tables' 3/4 of the cap: what the maps hold, the
 * binary cache may not. */
static void pidinfo__set_jit(struct symd *s, struct pidinfo *p, struct jitmap *j, int64_t size)
{
	if (p->jit)
		s->jit_bytes -= jitmap__bytes(p->jit);
	jitmap__free(p->jit);
	p->jit = j;
	p->jit_size = j ? size : -1;
	if (j)
		s->jit_bytes += jitmap__bytes(j);
	bins_rebudget(s);
}

static void pidinfo__free(struct symd *s, struct pidinfo *p)
{
	if (p->jvm)
		jvm__reap(); /* its requests' children, if they are done */
	pidinfo__set_jit(s, p, NULL, 0);
	free(p->env);
	free(p);
}

static void pids__drop(struct symd *s, uint32_t pid)
{
	struct pidinfo **pp = &s->pids[pid & (SYMD_PID_MAX - 1)];

	while (*pp) {
		if ((*pp)->pid == pid) {
			struct pidinfo *p = *pp;

			*pp = p->next;
			pidinfo__free(s, p);
			s->npids--;
			return;
		}
		pp = &(*pp)->next;
	}
}

static void pids__clear(struct symd *s)
{
	uint32_t i;

	for (i = 0; i < SYMD_PID_MAX; i++) {
		while (s->pids[i]) {
			struct pidinfo *p = s->pids[i];

			s->pids[i] = p->next;
			pidinfo__free(s, p);
		}
	}
	s->npids = 0;
}

static struct pidinfo *pids__get(struct symd *s, uint32_t pid)
{
	struct pidinfo **head = &s->pids[pid & (SYMD_PID_MAX - 1)], *p;

	for (p = *head; p; p = p->next)
		if (p->pid == pid)
			return p;
	/* Exit events keep this small; a lost exit must not grow it forever. */
	if (s->npids >= SYMD_PID_MAX)
		pids__clear(s);
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->jit_size = -1;
	p->jit_refused = -1;
	p->next = *head;
	*head = p;
	s->npids++;
	return p;
}

static const char *proc_dir(const struct symd *s)
{
	return s->paths.proc ? s->paths.proc : "/proc";
}

static void pidinfo__read_env(struct symd *s, struct pidinfo *p)
{
	_cleanup_free_ char *env = NULL;
	char path[128];
	const char *v;
	size_t len, vlen;

	p->env_read = true;
	snprintf(path, sizeof(path), "%s/%u/environ", proc_dir(s), p->pid);
	if (read_full_file(path, READ_FULL_TRUNCATE, SYMD_MAX_ENVIRON, &env, &len) < 0)
		return;
	v = env_label_pick(env, len, s->env_keys, &vlen);
	if (!v)
		return;
	if (vlen > SYMD_MAX_NAME)
		vlen = SYMD_MAX_NAME;
	p->env = strndup(v, vlen);
	p->env_len = p->env ? vlen : 0;
}

/* The pid as the process sees it (NSpid's last field): JITs in a container
 * name their map after that one. */
static uint32_t ns_pid(struct symd *s, uint32_t pid, uint32_t *uids)
{
	_cleanup_free_ char *st = NULL;
	char path[128], *l;
	size_t len;
	uint32_t ns = pid;

	/* Unknown (the process is gone): only root's maps are trusted. */
	uids[0] = uids[1] = 0;
	snprintf(path, sizeof(path), "%s/%u/status", proc_dir(s), pid);
	if (read_full_file(path, READ_FULL_TRUNCATE, 1u << 16, &st, &len) < 0)
		return pid;
	l = strstr(st, "\nUid:");
	if (l) {
		unsigned int r, e;

		if (sscanf(l + 5, "%u %u", &r, &e) == 2)
			uids[0] = r, uids[1] = e;
	}
	l = strstr(st, "\nNSpid:");
	if (l) {
		char *e = strchr(l + 1, '\n'), *q = l + 7;

		if (e)
			*e = '\0';
		while (*q) {
			char *endp;
			unsigned long v = strtoul(q, &endp, 10);

			if (endp == q)
				break;
			ns = (uint32_t)v;
			q = endp;
		}
	}
	return ns;
}

/* Make room for want bytes of perf maps: the least recently used maps of
 * other pids go (counted in cache_evict). */
static void jit_make_room(struct symd *s, const struct pidinfo *keep, size_t want)
{
	while (s->jit_bytes + want > s->jit_budget) {
		struct pidinfo *lru = NULL;

		for (uint32_t b = 0; b < SYMD_PID_MAX; b++)
			for (struct pidinfo *q = s->pids[b]; q; q = q->next)
				if (q->jit && q != keep && (!lru || q->jit_used < lru->jit_used))
					lru = q;
		if (!lru)
			return;
		pidinfo__set_jit(s, lru, NULL, 0);
		lru->jit_next_ns = 0; /* its next anon frame loads it again */
		cnt(s, SYM_CNT_CACHE_EVICT, 1);
	}
}

/* A map refused as it is: counted and warned about once, not once a second. */
static void jit_refuse(struct symd *s, struct pidinfo *p, const char *path, int64_t size, int err)
{
	bool perm = err == -EPERM;

	p->jit_refused = size;
	cnt(s, SYM_CNT_JIT_REFUSED, 1);
	if (!s->jit_warned[perm]) {
		s->jit_warned[perm] = true;
		if (perm)
			log_warn("perf map '%s' refused: not a regular file owned by pid %u's user "
				 "or root, or writable by others (jit_refused counts these)",
				 path, p->pid);
		else
			log_warn("perf map '%s' refused: %lld bytes, over the %zu bytes perf maps "
				 "may hold (1/4 of --max_cache_size_mb; jit_refused counts these)",
				 path, (long long)size, s->jit_budget);
	} else {
		log_debug("perf map '%s' refused: %s", path, strerror(-err));
	}
}

static void pidinfo__load_jit(struct symd *s, struct pidinfo *p, uint64_t now)
{
	/* Its map as it sees it (in its root), else ours. */
	char root[2][256] = {}, path[2][64], shown[320];
	uint32_t uids[2];
	unsigned int i;

	p->jit_next_ns = now + SYMD_JIT_RECHECK_NS;
	snprintf(root[0], sizeof(root[0]), "%s/%u/root", proc_dir(s), p->pid);
	snprintf(path[0], sizeof(path[0]), "/tmp/perf-%u.map", ns_pid(s, p->pid, uids));
	snprintf(path[1], sizeof(path[1]), "/tmp/perf-%u.map", p->pid);
	for (i = 0; i < 2; i++) {
		int64_t mtime;
		struct jitmap *j = NULL;
		struct stat st;
		int r;

		if (proc_root_stat(root[i], path[i], O_NOFOLLOW, &st) < 0)
			continue;
		mtime = (int64_t)st.st_mtim.tv_sec * NSEC_PER_SEC + st.st_mtim.tv_nsec;
		if (p->jit && p->jit_src == i && st.st_size == p->jit_size &&
		    (!p->jvm || mtime == p->jit_mtime))
			return; /* unchanged since the last load */
		if (st.st_size == p->jit_refused)
			return; /* refused as it is */
		/* What the JIT appended (a JVM rewrites it all), timed. */
		if (p->jit && p->jit_src == i && (p->jvm || st.st_size > p->jit_size)) {
			size_t before = jitmap__bytes(p->jit);

			jit_make_room(s, p, (size_t)MAX(st.st_size - p->jit_size, (int64_t)0));
			r = jitmap__update(p->jit, root[i], path[i],
					   s->jit_budget - (s->jit_bytes - before), uids,
					   clock_ns(CLOCK_REALTIME), p->jvm ? JITMAP_REREAD : 0);
			s->jit_bytes += jitmap__bytes(p->jit) - before;
			bins_rebudget(s);
			if (r >= 0) {
				p->jit_size = st.st_size;
				p->jit_mtime = mtime;
				if (r > 0)
					p->jvm_period_ns = 0; /* it named new code */
				return;
			}
		}
		pidinfo__set_jit(s, p, NULL, 0);
		r = -EFBIG;
		if ((uint64_t)st.st_size < s->jit_budget) {
			jit_make_room(s, p, (size_t)st.st_size);
			r = jitmap__load(root[i], path[i], s->jit_budget - s->jit_bytes, uids, &j);
			/* Its entries did not fit beside the others: alone, then. */
			if (r == -EFBIG && s->jit_bytes) {
				jit_make_room(s, p, s->jit_budget);
				r = jitmap__load(root[i], path[i], s->jit_budget - s->jit_bytes,
						 uids, &j);
			}
		}
		if (r == -EPERM || r == -EFBIG || r == -EBADMSG) {
			snprintf(shown, sizeof(shown), "%s%s", root[i], path[i]);
			jit_refuse(s, p, shown, st.st_size, r);
			return;
		}
		if (r < 0)
			continue;
		pidinfo__set_jit(s, p, j, st.st_size);
		p->jit_refused = -1;
		p->jit_mtime = mtime;
		p->jit_src = (uint8_t)i;
		p->jvm_period_ns = 0;
		return;
	}
}

/*
 * A JVM whose JIT frames its perf map does not name (or that has none) is
 * asked to write it (jvm.c): five times a second at most and only while such
 * misses grow; the wait doubles (up to a minute) while the maps it writes
 * name nothing new.
 */
static void jvm_miss(struct symd *s, struct pidinfo *p, uint64_t now)
{
	uint64_t now2;
	uint32_t uids[2];
	int r;

	if (!p->jvm)
		return;
	p->jvm_misses++;
	/* A request in flight: read its map as soon as it is there. */
	if (now - p->jvm_asked_ns < SYMD_JVM_WAIT_NS)
		p->jit_next_ns = MIN(p->jit_next_ns, now + SYMD_JVM_READ_NS);
	if (now < p->jvm_next_ns || p->jvm_misses == p->jvm_misses_asked)
		return;
	p->jvm_misses_asked = p->jvm_misses;
	p->jvm_period_ns = p->jvm_period_ns ? MIN(p->jvm_period_ns * 2, SYMD_JVM_PERIOD_MAX_NS)
					    : SYMD_JVM_PERIOD_NS;
	p->jvm_next_ns = now + p->jvm_period_ns;
	/* Waiting for the map names the samples still in the pipeline (the
	 * miss comes ~1 s after the code ran); at most 5 % of the time. */
	s->jvm_wait_ns = MIN(s->jvm_wait_ns + (now - s->jvm_wait_at) / 20, SYMD_JVM_WAIT_MAX_NS);
	s->jvm_wait_at = now;
	r = jvm__request_perfmap(proc_dir(s), p->pid, ns_pid(s, p->pid, uids),
				 MIN(s->jvm_wait_ns, SYMD_JVM_WAIT_ONE_NS));
	if (r < 0) {
		log_debug("pid %u: perf map request: %s", p->pid, strerror(-r));
		return;
	}
	now2 = clock_ns(CLOCK_MONOTONIC);
	s->jvm_wait_ns -= MIN(s->jvm_wait_ns, now2 - now);
	s->jvm_wait_at = now2;
	log_debug("pid %u: JVM asked for its perf map (%s, %llu ms)", p->pid,
		  r ? "written" : "pending", (unsigned long long)(now2 - now) / 1000000);
	p->jvm_asked_ns = now;
	/* read what it wrote now, or soon */
	p->jit_next_ns = r ? now : now + SYMD_JVM_READ_NS;
}

static const char *jit_lookup(struct symd *s, uint32_t pid, uint64_t pc, uint64_t time_ns,
			      uint64_t *ret_start)
{
	struct pidinfo *p = pids__get(s, pid);
	const char *name = NULL;
	uint64_t now;

	if (!p)
		return NULL;
	p->jit_used = ++s->jit_clock;
	if (!p->jvm_checked) {
		p->jvm_checked = true;
		p->jvm = jvm__is_jvm(proc_dir(s), p->pid);
	}
	if (p->jit) {
		name = jitmap__lookup_at(p->jit, pc, time_ns, ret_start);
		/* Named from a map read after the sample: nothing newer can
		 * have replaced that code before it. */
		if (name && time_ns <= jitmap__read_ns(p->jit))
			goto out;
	}
	/* A miss may mean new JIT code, a hit after the last read code that
	 * replaced the entry's: read what the map gained, at most once a
	 * second. */
	now = clock_ns(CLOCK_MONOTONIC);
	if (!p->jit_tried || now >= p->jit_next_ns) {
		p->jit_tried = true;
		pidinfo__load_jit(s, p, now);
		if (p->jit)
			name = jitmap__lookup_at(p->jit, pc, time_ns, ret_start);
	}
	if (!name) {
		jvm_miss(s, p, now);
		return NULL;
	}
out:
	/* HotSpot's template interpreter is one code blob for every method. */
	if (p->jvm && !strcmp(name, "Interpreter"))
		return "[java interpreted]";
	return name;
}

/* ---- symbol sources ---- */

static struct symbin *vdso_get(struct symd *s)
{
	unsigned long base;
	FILE *f;
	char line[256];

	if (s->vdso_tried)
		return s->vdso;
	s->vdso_tried = true;
	/* Every 64-bit process of this kernel maps the same vDSO image we do. */
	base = getauxval(AT_SYSINFO_EHDR);
	if (!base)
		return NULL;
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (strstr(line, "[vdso]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2 &&
		    lo == base) {
			if (symbin__load_mem((const void *)lo, hi - lo, &s->vdso) < 0)
				s->vdso = NULL;
			break;
		}
	}
	fclose(f);
	return s->vdso;
}

/* Loaded once at start (symd__new), never on a sample's path: the read
 * alone is ~50 ms of system time on a 120k-symbol kernel. */
static void ksyms_ensure(struct symd *s)
{
	const char *path = s->paths.kallsyms ? s->paths.kallsyms : "/proc/kallsyms";
	uint64_t t0;
	int r;

	if (s->ks_tried)
		return;
	s->ks_tried = true;
	s->ks.modules_hash =
		ksyms__modules_hash(s->paths.modules ? s->paths.modules : "/proc/modules");
	s->ks.next_check_ns = clock_ns(CLOCK_MONOTONIC) + SYMD_KSYM_CHECK_NS;
	s->pcc_gen++;
	t0 = clock_ns(CLOCK_MONOTONIC);
	r = ksyms__load(&s->ks, path);
	if (r < 0) {
		log_warn("load '%s': %s; kernel frames stay hex", path, strerror(-r));
		return;
	}
	log_debug("%s: %u + %u symbols, %zu KiB, %llu ms", path, s->ks.n, s->ks.nfar,
		  ksyms__bytes(&s->ks) >> 10,
		  (unsigned long long)((clock_ns(CLOCK_MONOTONIC) - t0) / 1000000));
	if (s->ks.zeroed && !s->kptr_warned) {
		s->kptr_warned = true;
		log_warn(
			"'%s' shows zero addresses (kernel.kptr_restrict?): kernel frames stay hex",
			path);
	}
}

/* ---- frames ---- */

static int kmod_id(struct symd *s, const char *mod, uint32_t *ret)
{
	struct cpa_module_def d = {.kind = CPA_MOD_KERNEL};
	char path[96];

	snprintf(path, sizeof(path), "[%s]", mod ? mod : "kernel.kallsyms");
	return mod_id(s, &d, path, ret);
}

static int frame_kernel(struct symd *s, uint64_t pc, bool leaf, uint32_t *ret, uint32_t *ret_flags)
{
	const char *name, *mod;
	uint64_t start;
	uint32_t mid;
	int n, r;

	if (!(s->flags & CPA_CFG_DISABLE_SYM)) {
		/* Return addresses may sit past a noreturn call's last byte. */
		if (ksyms__lookup(&s->ks, leaf ? pc : pc - 1, &name, &mod, &start) == 0) {
			r = kmod_id(s, mod, &mid);
			if (r < 0)
				return r;
			*ret_flags = CPA_FF_KERNEL;
			if (mod)
				n = snprintf(s->name, sizeof(s->name), "%s [%s]", name, mod);
			else
				n = snprintf(s->name, sizeof(s->name), "%s", name);
			return frame_id_pc(s, mid, s->name, MIN((size_t)n, sizeof(s->name) - 1),
					   CPA_FF_KERNEL, start, pc, ret);
		}
	}
	r = kmod_id(s, NULL, &mid);
	if (r < 0)
		return r;
	*ret_flags = CPA_FF_KERNEL | CPA_FF_UNSYMBOLIZED;
	n = snprintf(s->name, sizeof(s->name), "0x%" PRIx64, pc);
	return frame_id(s, mid, s->name, (size_t)n, CPA_FF_KERNEL | CPA_FF_UNSYMBOLIZED, pc, ret);
}

static void umods__clear(struct symd *s);

static struct umod *umods__find(const struct symd *s, uint32_t id)
{
	uint32_t i;

	if (!s->umods_cap)
		return NULL;
	for (i = hash32_fib(id) & (s->umods_cap - 1); s->umods[i].id;
	     i = (i + 1) & (s->umods_cap - 1))
		if (s->umods[i].id == id)
			return &s->umods[i];
	return NULL;
}

/* The slot of id, created empty if new. unwindd's ids only grow within its
 * epoch (evicted binaries come back with new ids), so the table is capped:
 * past SYMD_MAX_UMODS it is cleared, and ids still in use are recovered
 * from /proc/PID/maps on their next frame. Pointers into the table are
 * valid until the next insert. */
static struct umod *umods__insert(struct symd *s, uint32_t id)
{
	struct umod *u = umods__find(s, id), *old;
	uint32_t cap, i, j;

	if (u)
		return u;
	if ((uint64_t)(s->umods_n + 1) * 2 > s->umods_cap) {
		if (s->umods_cap >= SYMD_MAX_UMODS) {
			log_debug("%u module definitions: forgetting them all", s->umods_n);
			umods__clear(s);
			s->pcc_gen++;
		}
		cap = s->umods_cap ? s->umods_cap * 2 : 1024;
		old = s->umods;
		s->umods = calloc(cap, sizeof(*s->umods));
		if (!s->umods) {
			s->umods = old;
			return NULL;
		}
		for (i = 0; i < s->umods_cap; i++) {
			if (!old[i].id)
				continue;
			for (j = hash32_fib(old[i].id) & (cap - 1); s->umods[j].id;
			     j = (j + 1) & (cap - 1))
				;
			s->umods[j] = old[i];
		}
		free(old);
		s->umods_cap = cap;
	}
	for (i = hash32_fib(id) & (s->umods_cap - 1); s->umods[i].id;
	     i = (i + 1) & (s->umods_cap - 1))
		;
	s->umods_n++;
	s->umods[i].id = id;
	return &s->umods[i];
}

static uint64_t dev_of(unsigned int maj, unsigned int min)
{
	/* the kernel's new_encode_dev(), as stat() reports st_dev */
	return (uint64_t)(min & 0xff) | ((uint64_t)maj << 8) | ((uint64_t)(min & ~0xffu) << 12);
}

/*
 * A module id unwindd defined before we started (we are a restarted symd
 * and its definition was consumed by our predecessor). unwindd never reuses
 * an id within its epoch, so the mapping that holds this pc in this process
 * names the same binary: rebuild the definition from /proc/PID/maps once.
 */
static struct umod *umod_recover(struct symd *s, uint32_t id, uint32_t pid, uint64_t pc)
{
	_cleanup_free_ char *maps = NULL;
	char path[64], *line, *save = NULL;
	struct umod *u;
	size_t len;

	u = umods__insert(s, id);
	if (!u || u->recover_tried)
		return NULL;
	u->recover_tried = true;
	snprintf(path, sizeof(path), "%s/%u/maps", proc_dir(s), pid);
	if (read_full_file(path, READ_FULL_TRUNCATE, 16u << 20, &maps, &len) < 0)
		return NULL;
	for (line = strtok_r(maps, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		unsigned long lo, hi, pgoff, ino;
		unsigned int maj, min;
		int pos = 0;
		char *p, *del;

		if (sscanf(line, "%lx-%lx %*s %lx %x:%x %lu %n", &lo, &hi, &pgoff, &maj, &min, &ino,
			   &pos) < 6 ||
		    pc < lo || pc >= hi)
			continue;
		p = line + pos;
		del = strstr(p, " (deleted)");
		if (del && !del[10])
			*del = '\0';
		if (p[0] == '/' && ino) {
			u->kind = CPA_MOD_FILE;
		} else if (!strcmp(p, "[vdso]")) {
			u->kind = CPA_MOD_VDSO;
		} else {
			return NULL;
		}
		u->path = strdup(p);
		if (!u->path)
			return NULL;
		u->defined = true;
		u->pid = pid;
		u->dev = dev_of(maj, min);
		u->ino = ino;
		u->map_start = lo;
		u->map_end = hi;
		log_debug("module %u recovered from %s: '%s'", id, path, u->path);
		return u;
	}
	return NULL;
}

static struct umod *umod_get(struct symd *s, uint32_t id, uint32_t pid, uint64_t pc)
{
	struct umod *u;

	if (id == 0)
		return NULL;
	u = umods__find(s, id);
	if (u && u->defined)
		return u;
	return umod_recover(s, id, pid, pc);
}

static int umod_out_id(struct symd *s, struct umod *m, uint32_t *ret)
{
	struct cpa_module_def d;
	int r;

	if (m->out_id && m->out_epoch == s->resets) {
		*ret = m->out_id;
		return 0;
	}
	d = (struct cpa_module_def){
		.kind = m->kind,
		.pid = m->pid,
		.dev = m->dev,
		.ino = m->ino,
		.map_start = m->map_start,
		.map_end = m->map_end,
		.build_id_len = m->bid_len,
	};
	memcpy(d.build_id, m->bid, m->bid_len);
	r = mod_id(s, &d, m->path, ret);
	if (r < 0)
		return r;
	m->out_id = *ret;
	m->out_epoch = s->resets;
	return 0;
}

static struct symbin *umod_bin(struct symd *s, struct umod *m)
{
	struct symd_file_ref ref = {
		.path = m->path,
		.pid = m->pid,
		.map_start = m->map_start,
		.map_end = m->map_end,
		.dev = m->dev,
		.ino = m->ino,
		.build_id = m->bid,
		.build_id_len = m->bid_len,
		.mnt_ns = m->mnt_ns,
		.mnt_tab = &s->mnt,
	};
	struct bincache_stats after;
	struct symbin *b;

	b = bincache__get(s->bins, &ref, m->dev, m->ino, 0);
	/* No symbol table here: ask debuginfod (in the background; the
	 * binary is forgotten and loaded again when the file arrives). */
	if (s->df && b && b->build_id_len &&
	    !(b->src & (SYMBIN_SRC_SYMTAB | SYMBIN_SRC_DEBUG_BUILDID | SYMBIN_SRC_DEBUGLINK |
			SYMBIN_SRC_DEBUGINFOD)))
		dfetch__want(s->df, b->build_id, b->build_id_len);
	/* A cold binary can take seconds (capped per binary); a record full
	 * of them must not look like a hang to the monitor. */
	bincache__stats(s->bins, &after);
	if (after.loads != s->bins_loads_seen) {
		s->bins_loads_seen = after.loads;
		shm_stage__heartbeat(s->st);
	}
	/* A binary that failed before may now answer earlier misses. A failed
	 * attempt changes no answer, nor does the first load of a binary (nothing
	 * asked for it before): under churn most attempts are binaries already
	 * gone or new ones, and each bump empties the whole pc cache. */
	if (after.refreshed != s->bins_refreshed_seen) {
		s->bins_refreshed_seen = after.refreshed;
		s->pcc_gen++;
	}
	return b;
}

/* The symbol of a user frame, or NULL. *ret_fde: no symbol, but an FDE
 * gave the function's start (in *ret_off). */
static const char *user_symbol(struct symd *s, const struct cpa_frames *f,
			       const struct cpa_uframe *uf, struct umod *m, uint64_t *ret_off,
			       bool *ret_fde)
{
	uint64_t off = uf->offset;
	bool keep_go = !(s->flags & CPA_CFG_GO_SHORT) || (s->flags & CPA_CFG_STRIP_NAME_OFF);
	struct symbin *b = NULL;
	const char *name;

	if ((uf->flags & CPA_UF_ANON) || (m && m->kind == CPA_MOD_ANON))
		return jit_lookup(s, f->pid, uf->pc, f->time_ns, ret_off);
	if (!m)
		return NULL;
	/* Return addresses point after the call; the call may be a function's
	 * last instruction (noreturn), so look up the byte before. */
	if (!(uf->flags & CPA_UF_LEAF) && off > 0)
		off--;
	if (m->kind == CPA_MOD_VDSO || (uf->flags & CPA_UF_VDSO)) {
		b = vdso_get(s);
	} else if (m->kind == CPA_MOD_FILE) {
		b = umod_bin(s, m);
	}
	if (!b)
		return NULL;
	if (symbin__lookup(b, off, keep_go, &name, ret_off) == 0)
		return name;
	*ret_fde = symbin__func_start(b, off, ret_off) == 0;
	return NULL;
}

static int frame_user(struct symd *s, const struct cpa_frames *f, const struct cpa_uframe *uf,
		      uint32_t *ret, uint32_t *ret_flags)
{
	struct umod *m = umod_get(s, uf->module_id, f->pid, uf->pc);
	const char *path = m ? m->path : (uf->flags & CPA_UF_ANON) ? "[anon]" : "[unknown]";
	const char *base;
	uint32_t mid = 0;
	uint64_t off;
	bool fde = false;
	int n, r;

	if (m) {
		r = umod_out_id(s, m, &mid);
		if (r < 0)
			return r;
	}
	if (!(s->flags & CPA_CFG_DISABLE_SYM)) {
		const char *sym;

		sym = user_symbol(s, f, uf, m, &off, &fde);
		if (sym) {
			*ret_flags = strcmp(sym, "_PyEval_EvalFrameDefault") ? 0 : SYMD_FF_PYEVAL;
			if (s->flags & CPA_CFG_FULL_PATH)
				n = snprintf(s->name, sizeof(s->name), "%s [%s]", sym, path);
			else
				n = snprintf(s->name, sizeof(s->name), "%s", sym);
			return frame_id_pc(s, mid, s->name, MIN((size_t)n, sizeof(s->name) - 1), 0,
					   off, uf->offset, ret);
		}
	}
	*ret_flags = CPA_FF_UNSYMBOLIZED;
	base = symd_basename(path);
	if (fde) {
		/* No symbol: the function is named by its start (from its FDE),
		 * so every pc of it is one frame. */
		n = snprintf(s->name, sizeof(s->name), "%s+0x%" PRIx64, base, off);
		return frame_id(s, mid, s->name, MIN((size_t)n, sizeof(s->name) - 1),
				CPA_FF_UNSYMBOLIZED, off, ret);
	}
	off = (uf->flags & CPA_UF_ANON) ? uf->pc : uf->offset;
	/* "[vdso]", "[anon]" are already bracketed */
	n = snprintf(s->name, sizeof(s->name),
		     base[0] == '[' ? "0x%" PRIx64 " %s" : "0x%" PRIx64 " [%s]", off, base);
	return frame_id(s, mid, s->name, MIN((size_t)n, sizeof(s->name) - 1), CPA_FF_UNSYMBOLIZED,
			off, ret);
}

static const char *stop_marker(uint16_t reason)
{
	switch (reason) {
	case CPA_STOP_NO_MAP:
		return "[unwind stopped: no map]";
	case CPA_STOP_NO_CFI:
		return "[unwind stopped: no cfi]";
	case CPA_STOP_READ:
		return "[unwind stopped: stack read]";
	case CPA_STOP_DEPTH:
		return "[unwind stopped: depth limit]";
	case CPA_STOP_ANON:
		return "[unwind stopped: jit]";
	case CPA_STOP_BAD:
		return "[unwind stopped: bad frame]";
	case CPA_STOP_DELETED:
		return "[unwind stopped: deleted]";
	case CPA_STOP_EXEC:
		return "[exec: image replaced]";
	case CPA_STOP_EXIT:
		return "[exit: address space gone]";
	default:
		return "[unwind stopped: unknown]";
	}
}

static int stack_id(struct symd *s, const uint32_t *ids, uint32_t n, uint32_t nk, uint32_t *ret)
{
	struct cpa_stack_def d;
	int r;

	/* Kernel frames are distinct frame ids (CPA_FF_KERNEL), so the id list
	 * alone fixes the kernel/user split. */
	r = intern__get(&s->stacks, ids, n * 4, ret);
	if (r <= 0)
		return r;
	d = (struct cpa_stack_def){.id = *ret, .n_frames = (uint16_t)n, .n_kframes = (uint16_t)nk};
	r = emit2(s, CPA_REC_STACK, &d, sizeof(d), ids, n * 4);
	if (r < 0) {
		s->need_reset = true;
		return r;
	}
	cnt(s, SYM_CNT_STACKS, 1);
	return 0;
}

static void loss_add(struct symd *s, uint32_t stage, uint32_t reason, uint32_t kind, uint64_t count,
		     uint64_t weight, uint64_t seq, uint64_t time_ns)
{
	(void)shm_loss__add(&s->loss, stage, reason, kind, count, weight, seq, time_ns);
}

static int loss_emit(void *ctx, const struct cpa_loss *l)
{
	return emit2(ctx, CPA_REC_LOSS, l, sizeof(*l), NULL, 0);
}

/*
 * Pending losses go out before any later record with a seq, oldest first,
 * so seqs leave symd in order (the storer's restart rule skips seq <= mark:
 * a loss sent after later samples could be skipped). -ENOBUFS if some stay.
 */
static int loss_flush(struct symd *s)
{
	return shm_loss__flush(&s->loss, loss_emit, s);
}

static void loss_own(struct symd *s, unsigned int counter, const struct cpa_frames *f)
{
	cnt(s, counter, 1);
	loss_add(s, SHM_STAGE_SYMD, counter, f->kind, 1, f->weight, f->seq, f->time_ns);
}

static struct pcc_ent *pcc_slot(struct symd *s, uint32_t mod, uint64_t off, bool leaf)
{
	uint64_t h = hash64_fib(off ^ ((uint64_t)mod << 33) ^ ((uint64_t)leaf << 32));

	return &s->pcc[h >> (64 - s->pcc_bits)];
}

static bool pcc_hit(const struct symd *s, const struct pcc_ent *e, uint32_t mod, uint64_t off,
		    bool leaf)
{
	return e->gen == s->pcc_gen && e->off == off && e->mod == mod && e->leaf == leaf;
}

static void pcc_fill(struct symd *s, struct pcc_ent *e, uint32_t mod, uint64_t off, bool leaf,
		     uint32_t fid, uint32_t fflags)
{
	/* The frame may have needed a binary load or a reset: only an answer
	 * of the current generation is kept. */
	if (e->gen == s->pcc_gen)
		s->pcc_evict++;
	*e = (struct pcc_ent){.off = off,
			      .mod = mod,
			      .gen = s->pcc_gen,
			      .fid = fid,
			      .leaf = leaf,
			      .fflags = (uint16_t)fflags};
}

/*
 * The cache starts small and doubles when live entries keep evicting each
 * other (the working set outgrew it): a profile of one program touches a
 * few hundred pcs, and every page of a 2 MiB table spread by a hash would
 * be resident (and, on this VM, an expensive first touch on a sample's
 * path). The new table starts empty; it is only a cache.
 */
static void pcc_maybe_grow(struct symd *s)
{
	struct pcc_ent *n;

	if (s->pcc_bits >= s->pcc_max_bits || s->pcc_evict < (1u << s->pcc_bits) / 8)
		return;
	n = calloc(1u << (s->pcc_bits + 1), sizeof(*n));
	if (!n)
		return;
	free(s->pcc);
	s->pcc = n;
	s->pcc_bits++;
	s->pcc_evict = 0;
}

static void cnt_flush(struct symd *s)
{
	if (s->acc_lookups) {
		cnt(s, SYM_CNT_LOOKUPS, s->acc_lookups);
		cnt(s, SYM_CNT_HITS, s->acc_hits);
		cnt(s, SYM_CNT_MISSES, s->acc_misses);
	}
	if (s->acc_ksyms)
		cnt(s, SYM_CNT_KSYMS, s->acc_ksyms);
	s->acc_lookups = s->acc_hits = s->acc_misses = s->acc_ksyms = 0;
}

/* The cache slots of a sample are cold (the workload ran in between):
 * start all their loads at once instead of one cache miss per frame. */
static void pcc_prefetch(struct symd *s, const struct cpa_frames *f, const uint64_t *kpc,
			 const struct cpa_uframe *uf)
{
	uint32_t i;

	for (i = 0; i < f->n_kframes; i++)
		__builtin_prefetch(
			pcc_slot(s, SYMD_PCC_KERNEL, kpc[i], i == 0 && f->kind != CPA_KIND_OFFCPU));
	for (i = 0; i < f->n_uframes; i++) {
		struct cpa_uframe u;

		memcpy(&u, &uf[i], sizeof(u));
		__builtin_prefetch(pcc_slot(s, u.module_id, u.offset, u.flags & CPA_UF_LEAF));
	}
}

/* The root marker of a Python sample whose frames are missing, by cause. */
static const char *py_marker(const struct cpa_frames *f, uint32_t groups, uint32_t nev, int err)
{
	switch (f->py_status) {
	case CPA_PY_NOSYM:
		return "[python: no _PyRuntime symbol]";
	case CPA_PY_UNSUPPORTED:
		return "[python: version without offsets]";
	case CPA_PY_READ_FAIL:
		return "[python: frames unreadable]";
	case CPA_PY_TRUNC:
		return "[python: depth limit]";
	default:
		break;
	}
	if (groups > nev)
		return "[python: frames without evaluation loop]";
	if (err == -ESRCH)
		return "[python: process gone before naming]";
	if (err)
		return "[python: code object freed]";
	return NULL;
}

/*
 * A Python sample: each group of its Python frames (one evaluation, leaf
 * first, ending at a CPA_PY_ENTRY frame) takes the place of one
 * _PyEval_EvalFrameDefault frame of the native stack, leaf first
 * (s->pyev[nev]: their ids[] indexes). A group none of whose frames could be
 * named leaves its native frame. s->ids[0..*n) is rewritten; one root marker
 * says why Python frames are missing, if they are.
 */
static int py_merge(struct symd *s, const struct cpa_frames *f, const struct cpa_pyframe *pyf,
		    uint32_t nev, uint32_t *n)
{
	uint32_t m = 0, g = 0, i, j = 0, groups = 0, line;
	const char *marker;
	int r, len, err = 0;

	for (i = 0; i < f->n_py; i++)
		if ((pyf[i].code & CPA_PY_ENTRY) || i + 1 == f->n_py)
			groups++;
	for (i = 0; i < *n; i++) {
		bool named = false;

		if (g >= nev || i != s->pyev[g] || j >= f->n_py) {
			if (m >= SYMD_MAX_STACK - 2)
				return 0; /* no room: the native stack as it is */
			s->merged[m++] = s->ids[i];
			continue;
		}
		g++;
		for (; j < f->n_py; j++) {
			struct cpa_pyframe pf;
			bool entry;

			memcpy(&pf, &pyf[j], sizeof(pf));
			entry = pf.code & CPA_PY_ENTRY;
			len = pysym__name(s->py, f->pid, f->py_minor, pf.code & ~CPA_PY_ENTRY,
					  pf.instr, pf.check, s->name, sizeof(s->name), &line);
			if (len >= 0 && m < SYMD_MAX_STACK - 2) {
				r = frame_id(s, 0, s->name, (size_t)len, CPA_FF_PYTHON, line,
					     &s->merged[m]);
				if (r < 0)
					return r;
				m++;
				named = true;
			} else if (len < 0) {
				err = len;
			}
			if (entry) {
				j++;
				break;
			}
		}
		if (!named) {
			if (m >= SYMD_MAX_STACK - 2)
				return 0;
			s->merged[m++] = s->ids[i];
		}
	}
	marker = py_marker(f, groups, nev, err);
	if (marker) {
		r = marker_id(s, marker, &s->merged[m]);
		if (r < 0)
			return r;
		m++;
	}
	memcpy(s->ids, s->merged, m * sizeof(s->ids[0]));
	*n = m;
	return 0;
}

static int sample_out(struct symd *s, const struct cpa_frames *f, const uint8_t *body)
{
	const uint64_t *kpc = (const uint64_t *)body;
	const struct cpa_uframe *uf = (const struct cpa_uframe *)(kpc + f->n_kframes);
	struct cpa_sample_out o = {0};
	uint32_t n = 0, nk, i, nev = 0;
	const char *marker = NULL;
	int r;

	pcc_prefetch(s, f, kpc, uf);

	for (i = 0; i < f->n_kframes; i++) {
		/* On-CPU and probe samples start with the interrupted (or
		 * probed) pc; off-CPU stacks are return addresses throughout. */
		bool exact = i == 0 && f->kind != CPA_KIND_OFFCPU;
		struct pcc_ent *e = pcc_slot(s, SYMD_PCC_KERNEL, kpc[i], exact);
		uint32_t ff;

		if (!pcc_hit(s, e, SYMD_PCC_KERNEL, kpc[i], exact)) {
			s->pcc_misses++;
			r = frame_kernel(s, kpc[i], exact, &s->ids[n], &ff);
			if (r < 0)
				return r;
			pcc_fill(s, e, SYMD_PCC_KERNEL, kpc[i], exact, s->ids[n], ff);
		}
		s->ids[n++] = e->fid;
		if (!(e->fflags & CPA_FF_UNSYMBOLIZED))
			s->acc_ksyms++;
	}
	nk = n;
	if (nk)
		s->ks_active = true;
	for (i = 0; i < f->n_uframes; i++) {
		struct cpa_uframe u;

		struct pcc_ent *e;
		bool leaf;
		uint32_t ff;

		memcpy(&u, &uf[i], sizeof(u));
		leaf = u.flags & CPA_UF_LEAF;
		/* JIT frames change meaning when the perf map grows: not cached. */
		if (u.flags & CPA_UF_ANON) {
			r = frame_user(s, f, &u, &s->ids[n], &ff);
			if (r < 0)
				return r;
		} else {
			e = pcc_slot(s, u.module_id, u.offset, leaf);
			if (!pcc_hit(s, e, u.module_id, u.offset, leaf)) {
				s->pcc_misses++;
				r = frame_user(s, f, &u, &s->ids[n], &ff);
				if (r < 0)
					return r;
				pcc_fill(s, e, u.module_id, u.offset, leaf, s->ids[n], ff);
			}
			s->ids[n] = e->fid;
			ff = e->fflags;
		}
		if (ff & SYMD_FF_PYEVAL)
			s->pyev[nev++] = n;
		n++;
		if (!(s->flags & CPA_CFG_DISABLE_SYM)) {
			s->acc_lookups++;
			if (ff & CPA_FF_UNSYMBOLIZED)
				s->acc_misses++;
			else
				s->acc_hits++;
		}
	}
	if (f->flags & CPA_SF_DEGRADED)
		marker = "[degraded: no user stack]";
	else if (f->stop_reason != CPA_STOP_END && f->stop_reason != CPA_STOP_FP &&
		 f->stop_reason != CPA_STOP_NONE)
		marker = stop_marker(f->stop_reason);
	else if (n == 0 && (s->flags & CPA_CFG_KERNEL_STACK_ONLY) && !(f->flags & CPA_SF_IN_KERNEL))
		/* --kernel_stack: a sample of user code has no frames to show; its
		 * own text, not the storer's "[unknown stack]" of a lost stack id. */
		marker = "[user mode]";
	if (marker) {
		r = marker_id(s, marker, &s->ids[n]);
		if (r < 0)
			return r;
		n++;
	}
	if (f->py_minor && !(s->flags & CPA_CFG_DISABLE_SYM)) {
		r = py_merge(s, f, (const struct cpa_pyframe *)(uf + f->n_uframes), nev, &n);
		if (r < 0)
			return r;
	} else if (nev && n < SYMD_MAX_STACK) {
		/* CPython's evaluation loop in a process capture had not (yet)
		 * found an interpreter in (docs/unwinding.md, "Python"). */
		r = marker_id(s, "[python: interpreter not found]", &s->ids[n]);
		if (r < 0)
			return r;
		n++;
	}
	/* The state an off-CPU sample blocked in, as CPA shows it: the
	 * outermost frame, a marker named from the state letter. */
	if (f->kind == CPA_KIND_OFFCPU && f->offcpu_state) {
		char name[32];

		snprintf(name, sizeof(name), "<# OFFCPU SAMPLE: (%c) #>", f->offcpu_state);
		r = marker_id(s, name, &s->ids[n]);
		if (r < 0)
			return r;
		n++;
	}
	r = stack_id(s, s->ids, n, nk, &o.stack_id);
	if (r < 0)
		return r;
	r = comm_id(s, &s->comm_cache[0], f->comm, &o.comm_id);
	if (r < 0)
		return r;
	r = comm_id(s, &s->comm_cache[1], f->pcomm, &o.pcomm_id);
	if (r < 0)
		return r;
	if (s->env_keys[0]) {
		struct pidinfo *p = pids__get(s, f->pid);

		if (p && !p->env_read)
			pidinfo__read_env(s, p);
		if (p && p->env)
			r = str_id(s, p->env, p->env_len, &o.env_id);
		else
			r = str_id(s, ENV_LABEL_NONE, sizeof(ENV_LABEL_NONE) - 1, &o.env_id);
		if (r < 0)
			return r;
	}
	o.seq = f->seq;
	o.time_ns = f->time_ns;
	o.cgroup_id = f->cgroup_id;
	o.weight = f->weight;
	o.pid = f->pid;
	o.tid = f->tid;
	o.cpu = f->cpu;
	o.kind = f->kind;
	o.flags = f->flags;
	o.probe_id = f->probe_id;
	return emit2(s, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
}

static bool rate_ok(struct symd *s)
{
	/* No clock read unless a limit is set. */
	return !shm_stage__rate_limit(s->st) ||
	       shm_rate__admit(&s->rate, s->st, clock_ns(CLOCK_MONOTONIC));
}

static size_t intern_bytes(const struct symd *s)
{
	return intern__bytes(&s->strs) + intern__bytes(&s->frames) + intern__bytes(&s->stacks) +
	       intern__bytes(&s->mods);
}

/* A sequenced record: true when it is a copy of one already handled
 * (counted), else its seq becomes our mark. */
static bool is_copy(struct symd *s, uint64_t seq, bool loss)
{
	if (shm_dedup__copy(&s->dd, seq, loss)) {
		cnt(s, SHM_CNT_DROP_DUP, 1);
		return true;
	}
	shm_dedup__pass(&s->dd, seq);
	return false;
}

/*
 * The intern tables hold every definition of the epoch, and the storer mirrors them (and
 * journals them) until our next DICT_RESET: under churn new stacks come all the time, most
 * of them never seen again. So an epoch ends once its tables pass epoch_budget (4 MiB, at
 * most 1/4 of the cap); the next one is refilled with what is live. An epoch that filled
 * within SYMD_EPOCH_MIN_NS has a live set that big: the budget doubles rather than
 * resetting over and over, up to SYMD_EPOCH_MAX whatever the cap (the storer holds the
 * same definitions again: a budget that follows a 1 GiB cap let churn grow both stages by
 * tens of MB), and halves again (not below 4 MiB) after an epoch that took four times as
 * long: the live set shrank.
 */
static void symd__epoch_full(struct symd *s)
{
	uint64_t took = s->tick_ns - s->epoch_ns, max = MIN(SYMD_EPOCH_MAX, s->intern_budget);

	s->need_reset = true;
	if (took < SYMD_EPOCH_MIN_NS && s->epoch_budget < max)
		s->epoch_budget = MIN(2 * s->epoch_budget, max);
	else if (took >= 4 * SYMD_EPOCH_MIN_NS && s->epoch_budget > SYMD_EPOCH_BYTES)
		s->epoch_budget = MAX(s->epoch_budget / 2, MIN(SYMD_EPOCH_BYTES, max));
}

static void on_frames(struct symd *s, const struct shm_msg *m)
{
	struct cpa_frames f;
	int r;

	if (m->len < sizeof(f)) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	/* One copy of the header: checks and use see the same counts. */
	memcpy(&f, m->data, sizeof(f));
	if (!cpa_rec_frames_ok(&f, m->len)) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	if (is_copy(s, f.seq, false))
		return;
	if (!rate_ok(s)) {
		loss_own(s, SHM_CNT_DROP_RATE, &f);
		return;
	}
	if (shm_loss__pending(&s->loss) && loss_flush(s) < 0) {
		/* Our loss report does not fit: neither does this sample. */
		loss_own(s, SHM_CNT_DROP_RING_FULL, &f);
		return;
	}
	r = sample_out(s, &f, (const uint8_t *)m->data + sizeof(f));
	pcc_maybe_grow(s);
	if (r < 0) {
		/* The epoch may hold ids never defined downstream: start over. */
		s->need_reset = true;
		loss_own(s, r == -ENOBUFS ? SHM_CNT_DROP_RING_FULL : SHM_CNT_ERRORS, &f);
		return;
	}
	if (intern_bytes(s) > s->epoch_budget)
		symd__epoch_full(s);
}

/* u is defined as d says (path: d's). */
static bool umod_same(const struct umod *u, const struct cpa_module_def *d, const char *path)
{
	return u->defined && u->kind == d->kind && u->pid == d->pid && u->dev == d->dev &&
	       u->ino == d->ino && u->map_start == d->map_start && u->map_end == d->map_end &&
	       u->bid_len == d->build_id_len && !memcmp(u->bid, d->build_id, u->bid_len) &&
	       u->path && !strcmp(u->path, path);
}

static void on_module(struct symd *s, const struct shm_msg *m)
{
	struct cpa_module_def d;
	struct umod *u;
	char *path;

	if (m->len < sizeof(d)) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	memcpy(&d, m->data, sizeof(d));
	if (!cpa_rec_module_ok(&d, m->len) || d.id == 0 || d.path_len >= CPA_PATH_MAX) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	path = strndup((const char *)m->data + sizeof(d), d.path_len);
	if (!path) {
		cnt(s, SHM_CNT_ERRORS, 1);
		return;
	}
	/* The pc cache holds answers of ids we met (umod_get() inserts them):
	 * a new id changes none, nor does a definition we have as it is. Every
	 * new binary bumped the generation before: under churn, a few times a
	 * second, each one emptying the cache, kernel frames too. */
	u = umods__find(s, d.id);
	if (u && !umod_same(u, &d, path))
		s->pcc_gen++;
	/* A pid we meet first here, while it lives (forked, never exec'd
	 * since we started): its namespace, once. */
	if (d.pid && !proc_mnt_of(&s->mnt, d.pid)) {
		uint32_t ns = proc_mnt_ns(s->paths.proc, d.pid);

		if (ns)
			proc_mnt_note(&s->mnt, d.pid, ns);
	}
	u = umods__insert(s, d.id);
	if (!u) {
		free(path);
		cnt(s, SHM_CNT_ERRORS, 1);
		return;
	}
	free(u->path);
	*u = (struct umod){
		.id = d.id,
		.defined = true,
		.bid_len = d.build_id_len,
		.kind = (uint16_t)d.kind,
		.pid = d.pid,
		.dev = d.dev,
		.ino = d.ino,
		.map_start = d.map_start,
		.map_end = d.map_end,
		.mnt_ns = proc_mnt_of(&s->mnt, d.pid),
		.path = path,
	};
	memcpy(u->bid, d.build_id, d.build_id_len);
	/* Open it now, while the process that maps it is alive: the frames
	 * that use it come right after, but a short-lived process may be gone
	 * by then, and with it /proc/PID/map_files and /proc/PID/root. */
	if (u->kind == CPA_MOD_FILE && !(s->flags & CPA_CFG_DISABLE_SYM))
		umod_bin(s, u);
}

static void umods__clear(struct symd *s)
{
	uint32_t i;

	for (i = 0; i < s->umods_cap; i++)
		free(s->umods[i].path);
	free(s->umods);
	s->umods = NULL;
	s->umods_cap = 0;
	s->umods_n = 0;
}

static void on_task(struct symd *s, const struct shm_msg *m)
{
	struct cpa_task_event t;

	if (m->len < sizeof(t)) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	memcpy(&t, m->data, sizeof(t));
	if (is_copy(s, t.seq, false))
		return;
	/* exec replaces the image (new environment, new JIT); capture sends
	 * EXIT once per process, from its last thread, whatever its tid. */
	if (t.kind == CPA_TASK_EXEC)
		proc_mnt_note(&s->mnt, t.pid, t.mnt_ns);
	else if (t.kind == CPA_TASK_EXIT)
		proc_mnt_exit(&s->mnt, t.pid);
	if (t.kind == CPA_TASK_EXEC || t.kind == CPA_TASK_EXIT) {
		pids__drop(s, t.pid);
		pysym__drop_pid(s->py, t.pid);
	}
}

/* A code object capture read at sample time (CPA_REC_PYCODE): into pysym's
 * cache, where the sample after it finds it. */
static void on_pycode(struct symd *s, const struct shm_msg *m)
{
	struct pycode_info info = {0};
	struct cpa_pycode c;
	const char *b;

	if (m->len < sizeof(c)) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	memcpy(&c, m->data, sizeof(c));
	if (cpa_rec_pycode_size(&c) > m->len || !c.pid) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	if (is_copy(s, c.seq, false) || !s->py)
		return;
	b = (const char *)m->data + sizeof(c);
	info.qualname = strndup(b, c.qualname_len);
	info.filename = strndup(b + c.qualname_len, c.filename_len);
	info.linetab = malloc(c.linetab_len ? c.linetab_len : 1);
	if (!info.qualname || !info.filename || !info.linetab) {
		pycode__info_clear(&info);
		cnt(s, SHM_CNT_ERRORS, 1);
		return;
	}
	memcpy(info.linetab, b + c.qualname_len + c.filename_len, c.linetab_len);
	info.linetab_len = c.linetab_len;
	info.firstlineno = c.firstlineno;
	info.check = c.check;
	pysym__prime(s->py, c.pid, c.code, &info);
}

static void on_loss(struct symd *s, const struct shm_msg *m)
{
	struct cpa_loss l;
	int r;

	if (m->len < sizeof(l)) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	memcpy(&l, m->data, sizeof(l));
	if (is_copy(s, l.seq, true))
		return;
	/* Not a copy, yet below our mark: a restarted unwindd's
	 * lost_pending_at_kill, numbered with the mark it resumed from, after
	 * the batch it sent again. It leaves at our mark: seqs stay in order. */
	if (l.seq < s->dd.high)
		l.seq = s->dd.high;
	if (shm_loss__pending(&s->loss))
		loss_flush(s);
	r = shm_loss__pending(&s->loss) ? -ENOBUFS : emit2(s, CPA_REC_LOSS, &l, sizeof(l), NULL, 0);
	if (r < 0) {
		/* Cannot forward it now: keep it, under its own stage and reason. */
		loss_add(s, l.stage, l.reason, l.kind, l.count, l.weight, l.seq, l.time_ns);
	}
}

/* Metrics and policy events (docs/metrics.md): passed on to the storer
 * unchanged. Both records start with their seq. */
static void on_forward(struct symd *s, const struct shm_msg *m)
{
	uint64_t seq;

	if (m->len < sizeof(struct cpa_policy_event)) {
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		return;
	}
	memcpy(&seq, m->data, sizeof(seq));
	if (is_copy(s, seq, false))
		return;
	if (emit2(s, m->type, m->data, m->len, NULL, 0) < 0)
		cnt(s, SHM_CNT_DROP_RING_FULL, 1);
}

static void symd__handle(struct symd *s, const struct shm_msg *m)
{
	switch (m->type) {
	case CPA_REC_FRAMES:
		on_frames(s, m);
		break;
	case CPA_REC_MODULE:
		on_module(s, m);
		break;
	case CPA_REC_DICT_RESET: {
		struct cpa_dict_reset d;

		if (m->len < sizeof(d)) {
			cnt(s, SHM_CNT_DROP_CORRUPT, 1);
			break;
		}
		memcpy(&d, m->data, sizeof(d));
		if (d.flags & CPA_RESET_START)
			shm_dedup__producer_start(&s->dd, d.resume_seq);
		umods__clear(s);
		s->pcc_gen++;
		break;
	}
	case CPA_REC_TASK:
		on_task(s, m);
		break;
	case CPA_REC_LOSS:
		on_loss(s, m);
		break;
	case CPA_REC_METRICS:
	case CPA_REC_EVENT:
		on_forward(s, m);
		break;
	case CPA_REC_PYCODE:
		on_pycode(s, m);
		break;
	default:
		cnt(s, SHM_CNT_DROP_CORRUPT, 1);
		break;
	}
}

/* Room we want in the output before taking another input record: a sample
 * with all-new frames needs a few KiB, a quarter ring is ample. Below it we
 * leave input where it is (the input ring is the buffer) instead of
 * dropping: a restarting storer then loses nothing. */
static uint64_t out_headroom(const struct symd *s)
{
	return s->out->size / 4;
}

uint64_t symd__pcc_misses(const struct symd *s)
{
	return s->pcc_misses;
}

bool symd__output_held(const struct symd *s)
{
	return s->held;
}

int symd__batch(struct symd *s, unsigned int max_records)
{
	unsigned int n = 0;
	int r = 0;

	s->held = false;
	while (n < max_records) {
		struct shm_msg m;

		if (shm_ring__free_bytes_sp(s->out) < out_headroom(s)) {
			s->held = true;
			break;
		}
		if (s->need_reset && symd__reset_sp(s) < 0) {
			s->held = true;
			break;
		}
		r = shm_ring__peek_sc(s->in, &m);
		if (r == -EAGAIN) {
			r = 0;
			break;
		}
		if (r < 0) {
			cnt(s, SHM_CNT_ERRORS, 1);
			break;
		}
		n++;
		cnt(s, SHM_CNT_IN, 1);
		cnt(s, SHM_CNT_BYTES_IN, m.len);
		symd__handle(s, &m);
	}
	/* Output first, then the input with its mark: a crash in between makes
	 * the successor redo the batch, and the storer skips what it has (our
	 * successor's first reset says where it started: shm/dedup.h). */
	shm_ring__commit_sp(s->out);
	if (n) {
		shm_fault__commit_point(&s->fault_left);
		shm_ring__release_mark_sc(s->in, s->dd.high);
		/* What is pending now dies with a SIGKILL: the count waits in
		 * the arena for our successor (only after the release: before
		 * it, a kill redoes the batch). */
		shm_loss__publish(&s->loss, s->st, SYM_CNT_LOSS_PENDING);
		cnt(s, SHM_CNT_BATCHES, 1);
		cnt_flush(s);
	}
	return r < 0 ? r : (int)n;
}

static void symd__flush_loss(struct symd *s)
{
	if (!shm_loss__pending(&s->loss))
		return;
	loss_flush(s); /* what does not fit waits for the next second */
	shm_ring__commit_sp(s->out);
	shm_loss__publish(&s->loss, s->st, SYM_CNT_LOSS_PENDING);
}

static void symd__gauges(struct symd *s)
{
	struct bincache_stats bs;
	uint64_t bytes;

	bincache__stats(s->bins, &bs);
	cnt(s, SYM_CNT_CACHE_EVICT, bs.evictions - s->bin_seen.evictions);
	cnt(s, SYM_CNT_BIN_REJECTED, bs.rejected - s->bin_seen.rejected);
	cnt(s, SYM_CNT_BIN_OPEN_FAIL, bs.open_fail - s->bin_seen.open_fail);
	s->bin_seen = bs;
	bytes = bs.bytes + ksyms__bytes(&s->ks) + s->jit_bytes + intern_bytes(s) +
		((size_t)sizeof(*s->pcc) << s->pcc_bits) + (size_t)s->umods_cap * sizeof(*s->umods);
	cnt(s, SYM_CNT_CACHE_BYTES, bytes - s->gauge_bytes); /* gauge: add the delta */
	s->gauge_bytes = bytes;
}

void symd__finish(struct symd *s)
{
	symd__flush_loss(s);
	symd__gauges(s);
}

/* The cap is live: cpa ctl mem writes it into our block. The symbol tables
 * shrink now; the intern tables at the next batch (a reset). */
static void symd__apply_cap(struct symd *s)
{
	uint64_t mb = s->st ? __atomic_load_n(&s->st->mem_limit_mb, __ATOMIC_RELAXED) : 0;
	uint64_t cap = mb << 20;

	if (!mb || cap == s->cap)
		return;
	log_info("cache cap: %llu MiB (was %llu MiB)", (unsigned long long)mb,
		 (unsigned long long)(s->cap >> 20));
	s->cap = cap;
	s->intern_budget = cap / 4;
	s->epoch_budget = MIN(SYMD_EPOCH_BYTES, s->intern_budget);
	s->sym_budget = cap - cap / 4;
	s->jit_budget = cap / 4;
	jit_make_room(s, NULL, 0);
	bins_rebudget(s);
}

/*
 * A binary's load reads its tables into transient multi-MB buffers (cc1's
 * .dynstr is 1.3 MB, libLLVM's 3 MB); main.c keeps glibc from mapping and
 * unmapping each (symd__heap_setup()), so a burst of loads reuses pages that
 * are already ours. Once no binary was loaded for SYMD_HEAP_TRIM_NS, or the
 * heap's free bytes grew SYMD_TRIM_FREE since the last trim, the free part of
 * the heap goes back to the kernel.
 */
void symd__heap_setup(void)
{
	mallopt(M_MMAP_THRESHOLD, SYMD_HEAP_MMAP_MIN);
	mallopt(M_TRIM_THRESHOLD, 2 * SYMD_HEAP_MMAP_MIN);
}

static void symd__heap_tick(struct symd *s, uint64_t now)
{
	struct bincache_stats bs;

	bincache__stats(s->bins, &bs);
	if (bs.loads != s->heap_loads) {
		s->heap_loads = bs.loads;
		s->heap_last_load = now;
		s->heap_untrimmed = true;
	}
	/* While binaries load (churn) the cache holds what ran in the last minute. Once loads
	 * stopped (an idle host) it holds 5 minutes, as unwindd does: a process sampled every
	 * few minutes would otherwise load its binaries again at each sample (~3 ms, some
	 * 250 page faults). */
	bincache__idle(s->bins, now,
		       now - s->heap_last_load < SYMD_BIN_IDLE_NS ? SYMD_BIN_IDLE_NS
								  : SYMD_BIN_QUIET_IDLE_NS);
	if (s->heap_untrimmed && now - s->heap_last_load >= SYMD_HEAP_TRIM_NS) {
		s->heap_untrimmed = false;
		heap_trim__maybe(&s->trim, 0);
	} else if (now - s->trim_ns >= SYMD_TRIM_EVERY_NS) {
		/* Under churn loads never stop (most are binaries already gone): what
		 * loads, epochs and idle binaries freed goes back once it is
		 * SYMD_TRIM_FREE (a quarter of the cap if less): the next loads touch
		 * those pages again, at most once a second, and only after the caches
		 * moved (an idle host's wakeup skips mallinfo2()). */
		s->trim_ns = now;
		heap_trim__maybe_moved(&s->trim, MIN(s->cap / 4, SYMD_TRIM_FREE),
				       bs.loads + bs.evictions + bs.idle_drops + s->resets +
					       s->gauge_bytes);
	}
}

int symd__tick(void *obj, uint64_t now)
{
	struct symd *s = obj;
	uint8_t bid[CPA_BUILD_ID_MAX], blen;

	if (!s->epoch_ns)
		s->epoch_ns = now;
	s->tick_ns = now;

	while (dfetch__done(s->df, bid, &blen)) {
		bincache__forget(s->bins, bid, blen);
		s->pcc_gen++; /* later samples of it get the new names */
	}
	if (now >= s->loss_next_ns) {
		s->loss_next_ns = now + SYMD_LOSS_FLUSH_NS;
		symd__flush_loss(s);
	}
	/* Modules matter only to kernel frames: no check while none arrive
	 * (idle costs no wakeup of ours), and none at all without module
	 * support (no /proc/modules: hash 0 at load). */
	if (s->ks.loaded && s->ks.modules_hash && s->ks_active && now >= s->ks.next_check_ns) {
		uint64_t h =
			ksyms__modules_hash(s->paths.modules ? s->paths.modules : "/proc/modules");

		s->ks.next_check_ns = now + SYMD_KSYM_CHECK_NS;
		s->ks_active = false;
		if (h && h != s->ks.modules_hash) {
			log_info("kernel modules changed: reloading kallsyms");
			s->ks.modules_hash = h;
			s->ks_tried = false;
			ksyms_ensure(s);
		}
	}
	symd__heap_tick(s, now);
	symd__apply_cap(s);
	symd__gauges(s);
	return 0;
}

int symd__new(const struct symd_opts *o, struct symd **ret)
{
	struct symd *s = calloc(1, sizeof(*s));
	uint64_t cap, carried;
	int r;

	if (!s)
		return -ENOMEM;
	s->cfg = o->cfg;
	s->flags = o->cfg->flags;
	s->st = o->stage;
	s->in = o->in;
	s->out = o->out;
	s->generation = o->generation;
	s->fault_left = o->fault_kill_batches;
	s->paths = o->paths;
	/* The mount namespaces of processes that exec'd before we started
	 * (no exec event names them): for those gone before we open their
	 * modules. Only with the real /proc, as unwindd's seed. */
	if (!s->paths.proc) {
		uint32_t noted = proc_mnt_seed(NULL, &s->mnt);

		log_debug("%u processes' mount namespaces noted", noted);
	}
	snprintf(s->env_keys, sizeof(s->env_keys), "%.*s", (int)sizeof(s->env_keys) - 1,
		 o->cfg->record_env_name);
	intern__init(&s->strs);
	intern__init(&s->frames);
	intern__init(&s->stacks);
	intern__init(&s->mods);
	s->pids = calloc(SYMD_PID_MAX, sizeof(*s->pids));
	cap = (uint64_t)(o->cfg->max_cache_size_mb ? o->cfg->max_cache_size_mb : 1024) << 20;
	/* The pc cache takes at most 1/16 of the cap, 2 MiB from 32 MiB up. */
	for (s->pcc_max_bits = SYMD_PCC_BITS;
	     s->pcc_max_bits > 8 && (sizeof(*s->pcc) << s->pcc_max_bits) > cap / 16;
	     s->pcc_max_bits--)
		;
	s->pcc_bits = MIN(SYMD_PCC_MIN_BITS, s->pcc_max_bits);
	s->pcc = calloc(1u << s->pcc_bits, sizeof(*s->pcc));
	if (s->pcc && pysym__new(proc_dir(s), &s->py) < 0) {
		free(s->pcc);
		s->pcc = NULL;
	}
	s->pcc_gen = 1;
	if (!s->pids || !s->pcc) {
		r = -ENOMEM;
		goto out_free;
	}
	/* The cap covers everything we cache: symbol tables get 3/4, the
	 * intern tables 1/4 (a reset refills them with what is live). */
	s->intern_budget = cap / 4;
	s->epoch_budget = MIN(SYMD_EPOCH_BYTES, s->intern_budget);
	if (o->cfg->debuginfod_urls[0] && !(s->flags & CPA_CFG_DISABLE_SYM)) {
		char urls[sizeof(o->cfg->debuginfod_urls)];

		snprintf(urls, sizeof(urls), "%.*s", (int)sizeof(urls) - 1,
			 o->cfg->debuginfod_urls);
		snprintf(s->dcache, sizeof(s->dcache), "%.*s/.debuginfod", CPA_PATH_MAX - 1,
			 o->cfg->store_dir[0] ? o->cfg->store_dir : "/var/cache/cpa");
		r = dfetch__new(urls, s->dcache,
				(uint64_t)(o->cfg->debuginfod_cache_mb ?: 1024) << 20, &s->df);
		if (r < 0)
			log_warn("debuginfod (%s) off: %s", urls, strerror(-r));
		else
			s->paths.debuginfod_cache = s->dcache;
	}
	/* Perf maps: at most 1/4 of the cap, taken from the symbol tables'
	 * 3/4 while they hold it (pidinfo__set_jit()). */
	s->cap = cap;
	s->sym_budget = cap - cap / 4;
	s->jit_budget = cap / 4;
	r = bincache__new(s->sym_budget, &s->paths, &s->bins);
	if (r < 0)
		goto out_free;
	shm_dedup__init(&s->dd, shm_ring__mark_sc(s->in));
	s->need_reset = true;
	/* What a killed predecessor left pending: ours now, sent before
	 * anything else with a seq (its seq is the resume mark). */
	carried = shm_loss__carry(&s->loss, s->st, SYM_CNT_LOSS_PENDING, SHM_STAGE_SYMD,
				  SYM_CNT_LOST_AT_KILL, s->dd.high ? s->dd.high : 1,
				  clock_ns(CLOCK_REALTIME));
	if (carried)
		log_warn("the previous symd left %" PRIu64 " lost sample(s) not yet reported: "
			 "sending them as lost_pending_at_kill",
			 carried);
	if (!(s->flags & CPA_CFG_DISABLE_SYM))
		ksyms_ensure(s);
	/* Every lifetime starts with a reset; if the ring is full now, the
	 * first batch sends it before anything else. */
	if (symd__reset_sp(s) == 0)
		shm_ring__commit_sp(s->out);
	*ret = s;
	return 0;

out_free:
	symd__free(s);
	return r;
}

void symd__free(void *obj)
{
	struct symd *s = obj;

	if (!s)
		return;
	if (s->pids)
		pids__clear(s);
	free(s->pids);
	free(s->pcc);
	pysym__free(s->py);
	umods__clear(s);
	dfetch__free(s->df);
	bincache__free(s->bins);
	symbin__free(s->vdso);
	ksyms__fini(&s->ks);
	intern__free(&s->strs);
	intern__free(&s->frames);
	intern__free(&s->stacks);
	intern__free(&s->mods);
	free(s);
}
