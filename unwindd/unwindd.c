// SPDX-License-Identifier: MIT
/*
 * unwindd stage work: one input batch at a time, output committed once per
 * batch, then the input released with the highest seq passed on.
 *
 * Output order matters downstream: symd skips seq <= its mark after a
 * restart, so every record with a seq leaves here in seq order. Our own loss
 * records carry the seq of the last sample they stand for, and pending ones
 * are flushed before any later record; while they cannot be flushed, later
 * records are dropped into them too (the ring is full anyway).
 */
#include "common/envlabel.h"
#include "unwindd.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "dump.h"
#include "shm/counters.h"
#include "shm/fault.h"
#include "shm/loss.h"
#include "ucache.h"
#include "walk.h"

struct unwindd {
	struct unwindd_opts o;
	struct shm_ring_cons *in;
	struct shm_ring_prod *out;
	struct shm_stage *st;
	struct ucache *cache;
	struct shm_ring_prod hint; /* valid when have_hint */
	bool have_hint;

	uint64_t epoch;	    /* current dictionary epoch */
	uint32_t peer_gen;  /* symd generation our definitions were sent to */
	uint64_t skip_upto; /* input mark at start: seq <= this was passed on already */
	uint64_t mark;	    /* highest input seq handled */
	bool reset_sent;
	bool start_sent;	 /* the life's first reset, with CPA_RESET_START, is out */
	unsigned int fault_left; /* batches to the test knob's kill (0: off) */

	uint64_t now_ns; /* CLOCK_MONOTONIC at the start of the batch */
	uint64_t last_sweep_ns;
	uint64_t walk_complex_seen; /* walker's complex_rows already counted */

	struct shm_rate rate;
	struct shm_loss_table loss; /* our own drops, upstream losses not forwarded yet */

	/* Per-sample scratch: no allocation on the hot path. */
	struct cpa_uframe uf[CPA_MAX_UWALK + 1];
	struct ubin *touched[CPA_MAX_UWALK + 1];
	unsigned int n_touched;

	/* --bench: NULL when off (then no clock call on the hot path). */
	struct ubench *bench;

	/* --debug_option: the dump, and the binaries the sample being dumped used. */
	struct udump *dump;
	bool dumping;	       /* the sample in hand is being dumped */
	uint64_t dump_maps_ns; /* the dumped pid's maps refresh_ns last dumped; ~0 = never */
	struct ubin *dump_bins[CPA_MAX_UWALK + 1];
	unsigned int n_dump_bins;

	/* --parse_env_values: per-pid decisions (environ read once per pid). */
	struct uenv **envs;
	uint32_t envs_mask;
	uint32_t n_envs;
	char *env_buf; /* UNWINDD_ENVIRON_MAX + 1, allocated when the filter is on */
	size_t env_cap;
	uint64_t env_skipped;
};

void unwindd_opts__defaults(struct unwindd_opts *o)
{
	if (!o->refresh_ns)
		o->refresh_ns = 100 * NSEC_PER_MSEC;
	if (!o->refresh_ip_ns)
		o->refresh_ip_ns = 10 * NSEC_PER_MSEC;
	if (!o->dead_grace_ns)
		o->dead_grace_ns = 2 * NSEC_PER_SEC;
	if (!o->idle_ns)
		o->idle_ns = 300 * NSEC_PER_SEC;
	if (!o->proc_root)
		o->proc_root = "/proc";
	if (!o->max_module_id)
		/* Ids are never reused within an epoch, so binary churn (eviction,
		 * re-use) grows them; symd tracks 2^20 (SYMD_MAX_MODULE_ID). */
		o->max_module_id = 1u << 19;
}

static inline void cnt(struct unwindd *u, unsigned int idx, uint64_t n)
{
	shm_stage__cnt_add(u->st, idx, n);
}

static void gauge_set(struct unwindd *u, unsigned int idx, uint64_t v)
{
	/* Single writer, so a plain store is the whole update. */
	__atomic_store_n(&u->st->cnt[idx], v, __ATOMIC_RELAXED);
}

static int emit(struct unwindd *u, uint16_t type, uint32_t len, void **ret)
{
	int r = shm_ring__reserve_sp(u->out, len, type, ret);

	if (unlikely(r < 0))
		return r;
	/* Everything reserved is committed at the end of the batch. */
	cnt(u, SHM_CNT_OUT, 1);
	cnt(u, SHM_CNT_BYTES_OUT, len);
	return 0;
}

/* ---- loss records ---- */

static void loss_add(struct unwindd *u, uint32_t stage, uint32_t reason, uint32_t kind,
		     uint64_t count, uint64_t weight, uint64_t seq, uint64_t time_ns)
{
	(void)shm_loss__add(&u->loss, stage, reason, kind, count, weight, seq, time_ns);
}

static int loss_emit(void *ctx, const struct cpa_loss *l)
{
	struct cpa_loss *out;
	int r = emit(ctx, CPA_REC_LOSS, sizeof(*out), (void **)&out);

	if (r < 0)
		return r;
	memcpy(out, l, sizeof(*out));
	return 0;
}

/* What is pending once our input is released: a SIGKILL takes the table
 * with it, so the count waits in the arena for our successor. */
static void loss_publish(struct unwindd *u)
{
	shm_loss__publish(&u->loss, u->st, UNW_CNT_LOSS_PENDING);
}

/* The count a killed predecessor left pending (loss_publish()): ours now. */
static void loss_carry(struct unwindd *u)
{
	uint64_t n = shm_loss__carry(&u->loss, u->st, UNW_CNT_LOSS_PENDING, SHM_STAGE_UNWINDD,
				     UNW_CNT_LOST_AT_KILL, u->mark ? u->mark : 1,
				     clock_ns(CLOCK_REALTIME));

	if (n)
		log_warn("the previous unwindd left %" PRIu64 " lost sample(s) not yet reported: "
			 "sending them as lost_pending_at_kill",
			 n);
}

/* true when nothing is pending any more */
static bool loss_flush(struct unwindd *u)
{
	if (likely(!shm_loss__pending(&u->loss)))
		return true;
	return shm_loss__flush(&u->loss, loss_emit, u) == 0;
}

/* ---- module definitions ---- */

static void touch(struct unwindd *u, struct ubin *b)
{
	unsigned int i;

	if (likely(!b || b->def_sent))
		return;
	for (i = 0; i < u->n_touched; i++)
		if (u->touched[i] == b)
			return;
	if (u->n_touched < ARRAY_SIZE(u->touched))
		u->touched[u->n_touched++] = b;
}

static int emit_module(struct unwindd *u, struct ubin *b)
{
	struct cpa_module_def *m;
	int r;

	r = emit(u, CPA_REC_MODULE, sizeof(*m) + b->path_len, (void **)&m);
	if (r < 0)
		return r;
	memset(m, 0, sizeof(*m));
	m->id = b->id;
	m->kind = b->mod_kind;
	m->pid = b->def_pid;
	m->path_len = b->path_len;
	m->dev = b->dev;
	m->ino = b->ino;
	m->map_start = b->def_start;
	m->map_end = b->def_end;
	m->build_id_len = b->build_id_len;
	memcpy(m->build_id, b->build_id, sizeof(m->build_id));
	memcpy(m + 1, b->path, b->path_len);
	b->def_sent = true;
	cnt(u, UNW_CNT_MODULES, 1);
	return 0;
}

/* ---- unwinding ---- */

struct sample_view {
	struct cpa_sample s; /* header copied out of shared memory once */
	const uint64_t *kstack;
	const uint64_t *ufp;
	const uint8_t *stack;
};

/* User frames from the kernel's frame-pointer chain. */
static int unwind_fp(const struct cpa_sample *s, const uint64_t *ufp, unwindd_find_fn find,
		     void *ctx, struct cpa_uframe *out, unsigned int *ret_n)
{
	unsigned int i, n = 0, n_ufp = s->n_ufp;
	int stop = CPA_STOP_FP;

	/* No chain at all (the kernel could not read it) but registers: the
	 * ip alone still says where the thread was. */
	if (!n_ufp && (s->flags & CPA_SF_USER_REGS) && s->regs.ip) {
		ufp = &s->regs.ip;
		n_ufp = 1;
	}
	for (i = 0; i < n_ufp && n < CPA_MAX_UWALK + 1; i++) {
		uint64_t pc = ufp[i];
		struct cpa_uframe *f = &out[n];
		struct unw_loc l;
		int r;

		if (!pc)
			break;
		r = find(ctx, pc, i == 0 ? UNWINDD_FIND_IP : 0, &l);
		if (r < 0) {
			/* The leaf alone is still worth an [unknown] frame; past it,
			 * an unmapped pc is the end of a broken chain, not a frame. */
			if (i == 0) {
				f->pc = pc;
				f->offset = pc;
				f->module_id = 0;
				f->flags = s->flags & CPA_SF_USER_REGS ? CPA_UF_LEAF : 0;
				n++;
			}
			stop = CPA_STOP_NO_MAP;
			break;
		}
		f->pc = pc;
		f->offset = l.file_off;
		f->module_id = l.module_id;
		f->flags = l.flags;
		/* The kernel's chain starts with the interrupted ip; the rest are
		 * return addresses (looked up as pc - 1 downstream). */
		if (i == 0 && (!(s->flags & CPA_SF_USER_REGS) || pc == s->regs.ip))
			f->flags |= CPA_UF_LEAF;
		else
			f->flags |= CPA_UF_FP;
		n++;
	}
	*ret_n = n;
	return stop;
}

struct seam_walk {
	unwindd_find_fn find;
	void *ctx;
	unsigned int calls; /* the first find of a walk is the interrupted ip */
};

static int seam_walk_find(void *ctx, uint64_t pc, struct unw_loc *ret)
{
	struct seam_walk *w = ctx;

	return w->find(w->ctx, pc, UNWINDD_FIND_TABLE | (w->calls++ == 0 ? UNWINDD_FIND_IP : 0),
		       ret);
}

/*
 * The walk reached a Go stack switch (systemstack, morestack, or another
 * SPWRITE function: mcall, asmcgocall: ugo.h): the frame's caller is on the
 * goroutine's stack, which the copy (of g0's stack) does not hold. The
 * kernel's frame-pointer chain goes there (Go keeps rbp across the switch,
 * as perf's FP walk sees): go on with it from the switch frame's return
 * address. Its frames carry CPA_UF_FP; it ends at goexit (CPA_STOP_END) or
 * where the chain does. Where the chain does not pass the frame (off-CPU
 * samples follow no downward jump) or leads nowhere mapped right past it, an
 * SPWRITE frame is where Go's own traceback ends: a complete stack (mcall's callee never returns,
 * the thread now schedules for nobody); at systemstack/morestack, which Go's traceback crosses, the
 * goroutine's frames are missing: CPA_STOP_BAD.
 */
static int go_splice(const struct cpa_sample *s, const uint64_t *ufp, struct seam_walk *w,
		     struct cpa_uframe *out, unsigned int *ret_n)
{
	unsigned int i, n = *ret_n, n0 = n;
	uint64_t pc = out[n - 1].pc;
	int stop = CPA_STOP_FP;
	struct unw_loc sw = {.go = UNW_GO_NONE, .go_sp = -1};
	bool spwrite = w->find(w->ctx, out[n - 1].flags & CPA_UF_LEAF ? pc : pc - 1,
			       UNWINDD_FIND_TABLE, &sw) == 0 &&
		       sw.go == UNW_GO_SPWRITE;

	for (i = 0; i < s->n_ufp && ufp[i] != pc; i++)
		;
	if (i == s->n_ufp) /* the chain does not pass there */
		return spwrite ? CPA_STOP_END : CPA_STOP_BAD;
	for (i++; i < s->n_ufp && ufp[i] && n < CPA_MAX_UWALK + 1; i++) {
		struct unw_loc l = {.go = UNW_GO_NONE, .go_sp = -1};
		struct cpa_uframe *f = &out[n];

		if (w->find(w->ctx, ufp[i] - 1, UNWINDD_FIND_TABLE, &l) < 0) {
			/* right past an SPWRITE frame: no caller, as for Go */
			stop = spwrite && n == n0 ? CPA_STOP_END : CPA_STOP_NO_MAP;
			break;
		}
		f->pc = ufp[i];
		f->offset = l.file_off + 1;
		f->module_id = l.module_id;
		f->flags = l.flags | CPA_UF_FP;
		n++;
		if (l.go == UNW_GO_BOTTOM) {
			stop = CPA_STOP_END;
			break;
		}
	}
	*ret_n = n;
	return stop;
}

/*
 * THE SEAM: user frames for one sample. The DWARF CFI walk when the sample
 * carries user registers and stack bytes; its frames stand as they are even
 * when it stops early (never replaced by the kernel's FP chain, which in
 * FP-less code invents callers). The FP chain only for samples that have no
 * stack copy to walk (--stack_size 0, degraded under pressure, unreadable),
 * and then every frame past the leaf is marked CPA_UF_FP. *ret_fp_deeper says
 * the FP chain had more frames than a partial CFI walk (a diagnostic: the
 * chain is not used). cpa-unwind-replay runs this same function on dumps.
 */
int unwindd__unwind(const struct cpa_sample *s, const uint64_t *ufp, const uint8_t *stack,
		    unwindd_find_fn find, void *ctx, struct cpa_uframe *out, unsigned int *ret_n,
		    bool *ret_fp_deeper, uint64_t *ret_top)
{
	*ret_fp_deeper = false;
	if (ret_top)
		*ret_top = 0;
	if ((s->flags & CPA_SF_USER_REGS) && s->stack_len &&
	    !(s->flags & (CPA_SF_DEGRADED | CPA_SF_NO_USTACK))) {
		struct unw_regs regs;
		const struct unw_stack stk = {
			.bytes = stack,
			.base = s->stack_sp,
			.len = s->stack_len,
		};
		struct seam_walk w = {.find = find, .ctx = ctx};
		unsigned int n = 0;
		int stop;

		memcpy(&regs, &s->regs, sizeof(regs));
		/* Per frame, where a module has no CFI at all (built without
		 * unwind tables) the walker follows rbp instead of stopping. */
		stop = unw_walk_flags(&regs, &stk, seam_walk_find, &w,
				      UNW_F_FP_FALLBACK | UNW_F_GO_SWITCH | UNW_F_FP_JIT, out,
				      CPA_MAX_UWALK + 1, &n, ret_top);
		if (stop == UNW_STOP_GO_SWITCH)
			stop = go_splice(s, ufp, &w, out, &n);
		if (n > CPA_MAX_UWALK + 1)
			n = CPA_MAX_UWALK + 1;
		*ret_fp_deeper = stop != CPA_STOP_END && stop != CPA_STOP_ANON && n < s->n_ufp;
		*ret_n = n;
		return stop;
	}
	return unwind_fp(s, ufp, find, ctx, out, ret_n);
}

struct live_find {
	struct unwindd *u;
	struct uproc *p;
	bool last_gone; /* the last pc found is in a binary we cannot open */
};

static void dump_note_bin(struct unwindd *u, struct ubin *b)
{
	unsigned int i;

	for (i = 0; i < u->n_dump_bins; i++)
		if (u->dump_bins[i] == b)
			return;
	if (u->n_dump_bins < ARRAY_SIZE(u->dump_bins))
		u->dump_bins[u->n_dump_bins++] = b;
}

/* unwindd_find_fn of the stage: the maps cache answers, and owns the tables. */
static int live_find(void *ctx, uint64_t pc, unsigned int how, struct unw_loc *ret)
{
	struct live_find *w = ctx;
	struct unwindd *u = w->u;
	struct uloc l;
	int r = how & UNWINDD_FIND_IP ? ucache__find_ip(u->cache, w->p, pc, u->now_ns, &l)
				      : ucache__find(u->cache, w->p, pc, u->now_ns, &l);

	if (r < 0)
		return -ENOENT;
	w->last_gone = false;
	touch(u, l.bin);
	if (unlikely(u->dumping) && l.bin)
		dump_note_bin(u, l.bin);
	ret->table = how & UNWINDD_FIND_TABLE ? ucache__cfi(u->cache, w->p, &l) : NULL;
	if (how & UNWINDD_FIND_TABLE)
		ret->go = ucache__go(&l, &ret->go_sp);
	if (!ret->table && l.bin && l.bin->gone)
		w->last_gone = true;
	ret->file_off = l.file_off;
	ret->module_id = l.module_id;
	ret->flags = l.flags;
	return 0;
}

/* ---- the adaptive stack copy (docs/capture.md) ---- */

#define UCOPY_WINDOW	32u		   /* complete walks per shrink decision */
#define UCOPY_SLACK	1024		   /* bytes above the deepest need seen, at least */
#define UCOPY_RESEND_NS (NSEC_PER_SEC / 2) /* a hint not applied yet: send it again */

static void ucopy_send(struct unwindd *u, struct uproc *p, uint32_t bytes)
{
	struct cpa_ustack_hint *h;

	if (shm_ring__reserve_sp(&u->hint, sizeof(*h), CPA_REC_USTACK_HINT, (void **)&h) < 0)
		return; /* full: the next walk that needs it asks again */
	*h = (struct cpa_ustack_hint){.pid = p->pid, .bytes = bytes, .time_ns = u->now_ns};
	shm_ring__commit_sp(&u->hint);
	p->ucopy = bytes;
	p->ucopy_sent_ns = u->now_ns;
	cnt(u, UNW_CNT_USTACK_HINTS, 1);
}

/*
 * Learn from one walk how many stack bytes this process needs. A walk that
 * ran out of copied bytes raises the size to the cap at once (one round trip
 * through capture, not one per doubling: samples in between are incomplete);
 * complete walks then lower it, once per window of them, to their deepest
 * need plus slack: a quarter of it, at least UCOPY_SLACK (a recursion a
 * little deeper than any of the window's walks, e.g. std::sort's, would else
 * stop with CPA_STOP_READ: 0.6 % of a C++ program's samples with 1 KiB). A
 * walk that runs out after a lowering (the process went deeper than the
 * window saw: a supervisor idling in epoll_wait that logs now and then, a
 * compiler's recursion) proves the lowering wrong: the size that failed,
 * doubled, becomes a floor no later lowering goes under, and the window
 * doubles (up to 32 times), so a process costs a bounded number of
 * incomplete samples, not one per window. A hint capture has not applied
 * yet (samples still arrive short) is sent again now and then, which also
 * re-teaches a restarted capture.
 */
#define UCOPY_MISSES_MAX 5

static void ucopy_learn(struct unwindd *u, struct uproc *p, const struct cpa_sample *s, int stop,
			uint64_t top)
{
	uint32_t cur, want, copied, cap = u->o.ustack_cap;
	uint64_t need;

	if (!u->have_hint || !s->stack_len || !top)
		return;
	/* capture gives a process it has no hint for the cap (docs/capture.md) */
	cur = p->ucopy ? p->ucopy : cap;
	if (stop == CPA_STOP_READ) {
		p->ucopy_need = 0;
		p->ucopy_walks = 0;
		p->ucopy_copied = 0;
		/* Copied all that was asked (not a hint still in flight), and
		 * that was a lowered size: the lowering was wrong. */
		if (cur < cap && s->stack_len >= cur) {
			p->ucopy_floor = (uint32_t)MIN((uint64_t)cur * 2, (uint64_t)cap);
			if (p->ucopy_misses < UCOPY_MISSES_MAX)
				p->ucopy_misses++;
			cnt(u, UNW_CNT_UCOPY_MISS, 1);
		}
		want = cap;
		if (want > cur || (s->stack_len < cur && want > s->stack_len &&
				   u->now_ns - p->ucopy_sent_ns >= UCOPY_RESEND_NS))
			ucopy_send(u, p, want);
		return;
	}
	if (stop != CPA_STOP_END && stop != CPA_STOP_ANON)
		return;
	need = top > s->stack_sp ? top - s->stack_sp : 0;
	need += MAX(need / 4, (uint64_t)UCOPY_SLACK);
	if (need > p->ucopy_need)
		p->ucopy_need = (uint32_t)MIN(need, (uint64_t)UINT32_MAX);
	p->ucopy_copied = MAX(p->ucopy_copied, s->stack_len);
	if (++p->ucopy_walks < (UCOPY_WINDOW << p->ucopy_misses))
		return;
	want = MAX((p->ucopy_need + 1023) / 1024 * 1024, CPA_USTACK_HINT_MIN);
	want = MAX(want, p->ucopy_floor);
	copied = p->ucopy_copied;
	p->ucopy_need = 0;
	p->ucopy_walks = 0;
	p->ucopy_copied = 0;
	/*
	 * Hysteresis: a quarter below the current size, or stay. And only
	 * where the copies were longer than that: the BPF side already trims
	 * each copy at its thread's stack top (a glibc thread's fsbase, the
	 * main thread's start_stack), so there a lower size saves nothing and
	 * would only cut a deeper phase of the program short until the next
	 * round trip (openssl speed: AES-GCM, then RSA with an 11 KB frame:
	 * 10 % `stack read`).
	 */
	if (want + want / 4 < cur && copied > want + want / 4)
		ucopy_send(u, p, want);
}

static bool stop_is_partial(int stop);

static int unwind_user(struct unwindd *u, struct uproc *p, const struct sample_view *v,
		       unsigned int *ret_n)
{
	struct live_find w = {.u = u, .p = p};
	bool fp_deeper;
	uint64_t top;
	int stop;

	stop = unwindd__unwind(&v->s, v->ufp, v->stack, live_find, &w, u->uf, ret_n, &fp_deeper,
			       &top);
	if (fp_deeper)
		cnt(u, UNW_CNT_FP_DEEPER, 1);
	/* Stopped in a binary deleted before we could read its unwind table:
	 * its own reason, not a walk that went wrong. */
	if (w.last_gone && stop_is_partial(stop))
		stop = CPA_STOP_DELETED;
	/* Inside execve past its point of no return: the leaf is the old
	 * image's syscall; whatever a walk found above it (a kernel FP chain
	 * through the new address space) is not its callers. Known from the
	 * mapping history (after the exec's comm event) or from the BPF side
	 * (the stack unreadable while task->in_execve: from exec_mmap on). */
	if (*ret_n && ((u->uf[0].flags & CPA_UF_PRE_EXEC) ||
		       (v->s.flags & (CPA_SF_IN_EXEC | CPA_SF_NO_USTACK)) ==
			       (CPA_SF_IN_EXEC | CPA_SF_NO_USTACK))) {
		*ret_n = 1;
		return CPA_STOP_EXEC;
	}
	/* Likewise while the process exits, its address space being torn
	 * down (exit_mmap): the leaf is the exit syscall. */
	if (*ret_n && (v->s.flags & (CPA_SF_IN_EXIT | CPA_SF_NO_USTACK)) ==
			      (CPA_SF_IN_EXIT | CPA_SF_NO_USTACK)) {
		*ret_n = 1;
		return CPA_STOP_EXIT;
	}
	ucopy_learn(u, p, &v->s, stop, top);
	return stop;
}

static void count_stop(struct unwindd *u, int stop)
{
	static const unsigned int idx[CPA_STOP_MAX] = {
		[CPA_STOP_END] = UNW_CNT_STOP_END,	 [CPA_STOP_NO_MAP] = UNW_CNT_STOP_NO_MAP,
		[CPA_STOP_NO_CFI] = UNW_CNT_STOP_NO_CFI, [CPA_STOP_READ] = UNW_CNT_STOP_READ,
		[CPA_STOP_DEPTH] = UNW_CNT_STOP_DEPTH,	 [CPA_STOP_ANON] = UNW_CNT_STOP_ANON,
		[CPA_STOP_BAD] = UNW_CNT_STOP_BAD,	 [CPA_STOP_DELETED] = UNW_CNT_STOP_DELETED,
		[CPA_STOP_EXEC] = UNW_CNT_STOP_EXEC,	 [CPA_STOP_EXIT] = UNW_CNT_STOP_EXIT,
	};

	if (stop > 0 && stop < CPA_STOP_MAX && idx[stop])
		cnt(u, idx[stop], 1);
}

static bool stop_is_partial(int stop)
{
	switch (stop) {
	case CPA_STOP_NO_MAP:
	case CPA_STOP_NO_CFI:
	case CPA_STOP_READ:
	case CPA_STOP_DEPTH:
	case CPA_STOP_BAD:
	case CPA_STOP_DELETED:
		return true;
	default:
		return false;
	}
}

/* ---- --parse_env_values ---- */

/* One decision per pid, made from /proc/PID/environ on its first sample. */
struct uenv {
	struct uenv *next;
	uint32_t pid;
	bool allow;
	uint64_t last_use;
	uint64_t dead_ns; /* exit seen; kept dead_grace_ns for queued samples */
};

bool unwindd__list_has(const char *list, const char *value, size_t len)
{
	const char *p = list;

	while (p && *p) {
		size_t n = strcspn(p, ",");

		if (n == len && !memcmp(p, value, len))
			return true;
		p += n;
		if (*p == ',')
			p++;
	}
	return false;
}

static uint32_t env_hash(uint32_t pid, uint32_t mask)
{
	return hash32_fib(pid) & mask;
}

static struct uenv *env_peek(struct unwindd *u, uint32_t pid)
{
	struct uenv *e;

	for (e = u->envs[env_hash(pid, u->envs_mask)]; e; e = e->next)
		if (e->pid == pid)
			return e;
	return NULL;
}

static void env_grow(struct unwindd *u)
{
	uint32_t n = (u->envs_mask + 1) * 2, i;
	struct uenv **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return; /* longer chains, still correct */
	for (i = 0; i <= u->envs_mask; i++) {
		struct uenv *e = u->envs[i], *next;

		for (; e; e = next) {
			uint32_t h = env_hash(e->pid, n - 1);

			next = e->next;
			e->next = nb[h];
			nb[h] = e;
		}
	}
	free(u->envs);
	u->envs = nb;
	u->envs_mask = n - 1;
}

/* The process's env value (as symd labels it) is in --parse_env_values. */
static bool env_decide(struct unwindd *u, uint32_t pid)
{
	const char *v = NULL;
	size_t len = 0, vlen = 0;
	char path[300];

	snprintf(path, sizeof(path), "%s/%u/environ", u->o.proc_root, pid);
	if (read_full_file_at(AT_FDCWD, path, READ_FULL_TRUNCATE, UNWINDD_ENVIRON_MAX, &u->env_buf,
			      &u->env_cap, &len) < 0)
		len = 0;
	if (len && u->o.env_keys)
		v = env_label_pick(u->env_buf, len, u->o.env_keys, &vlen);
	if (!v) {
		/* No key found, or environ unreadable (exited, kernel thread):
		 * symd labels it SYSTEM, and so do we. */
		v = ENV_LABEL_NONE;
		vlen = 6;
	}
	return unwindd__list_has(u->o.env_values, v, vlen);
}

static bool env_allows(struct unwindd *u, uint32_t pid)
{
	struct uenv *e = env_peek(u, pid);
	uint32_t h;

	if (likely(e)) {
		e->last_use = u->now_ns;
		return e->allow;
	}
	if (u->n_envs > u->envs_mask)
		env_grow(u);
	e = calloc(1, sizeof(*e));
	if (!e) {
		cnt(u, SHM_CNT_ERRORS, 1);
		return env_decide(u, pid); /* undecided is worse than uncached */
	}
	e->pid = pid;
	e->last_use = u->now_ns;
	e->allow = env_decide(u, pid);
	h = env_hash(pid, u->envs_mask);
	e->next = u->envs[h];
	u->envs[h] = e;
	u->n_envs++;
	return e->allow;
}

static void env_task(struct unwindd *u, const struct cpa_task_event *t)
{
	struct uenv **pp, *e;

	if (!u->envs)
		return;
	for (pp = &u->envs[env_hash(t->pid, u->envs_mask)]; (e = *pp); pp = &e->next)
		if (e->pid == t->pid)
			break;
	if (!e)
		return;
	if (t->kind == CPA_TASK_EXIT) {
		if (!e->dead_ns)
			e->dead_ns = u->now_ns ? u->now_ns : 1;
		return;
	}
	/* exec: a new environment (or a reused pid); decide again. */
	*pp = e->next;
	free(e);
	u->n_envs--;
}

static void env_sweep(struct unwindd *u, uint64_t now_ns)
{
	uint32_t i;

	for (i = 0; u->envs && i <= u->envs_mask; i++) {
		struct uenv **pp = &u->envs[i], *e;

		while ((e = *pp)) {
			if ((e->dead_ns && now_ns > e->dead_ns &&
			     now_ns - e->dead_ns >= u->o.dead_grace_ns) ||
			    (now_ns > e->last_use && now_ns - e->last_use >= u->o.idle_ns)) {
				*pp = e->next;
				free(e);
				u->n_envs--;
			} else {
				pp = &e->next;
			}
		}
	}
}

/* ---- --debug_option ---- */

static void dump_sample(struct unwindd *u, struct uproc *p, const struct shm_msg *msg,
			const struct cpa_sample *s, int stop, unsigned int n_u)
{
	unsigned int i;
	int r = 0;

	(void)udump__vdso(u->dump); /* once per file; a failure is not a sample's */
	/* The maps the unwind used: on the first dumped sample and whenever the
	 * cache re-read them since (an env-filtered pid has no cache entry). */
	if (p ? p->refresh_ns != u->dump_maps_ns : u->dump_maps_ns == UINT64_MAX) {
		const char *text;
		size_t len;

		/* Gone already: the sample still goes out, without maps. */
		if (udump__read_maps(u->dump, u->o.proc_root, s->pid, &text, &len) == 0) {
			r = udump__maps(u->dump, s->pid, text, len);
			if (r == 0)
				u->dump_maps_ns = p ? p->refresh_ns : 0;
		}
	}
	for (i = 0; r >= 0 && i < u->n_dump_bins; i++) {
		const struct ubin *b = u->dump_bins[i];
		struct udump_module m = {
			.dev = b->dev,
			.ino = b->ino,
			.id = b->id,
			.path_len = b->path_len,
			.kind = (uint8_t)b->mod_kind,
			.build_id_len = b->build_id_len,
		};

		if (udump__module_seen(u->dump, b->dev, b->ino, b->id))
			continue;
		memcpy(m.build_id, b->build_id, sizeof(m.build_id));
		r = udump__module(u->dump, &m, b->path);
	}
	if (r >= 0)
		r = udump__sample(u->dump, msg->data, msg->len);
	if (r >= 0)
		r = udump__result(u->dump, s->seq, stop, u->uf, n_u);
	if (r < 0) {
		cnt(u, SHM_CNT_ERRORS, 1);
		cnt(u, UNW_CNT_DUMP_ERRORS, 1); /* logged once by the writer */
	}
	u->dumping = false;
}

/* ---- input records ---- */

static void drop_corrupt(struct unwindd *u)
{
	cnt(u, SHM_CNT_DROP_CORRUPT, 1);
	/* Nothing in it can be trusted, not even its seq: the last one we
	 * handled keeps the output ordered (and 0 would read as "before any
	 * mark" to a fresh consumer). */
	loss_add(u, SHM_STAGE_UNWINDD, SHM_CNT_DROP_CORRUPT, CPA_KIND_ONCPU, 1, 1,
		 u->mark ? u->mark : 1, 0);
}

static bool seen(struct unwindd *u, uint64_t seq)
{
	if (seq <= u->skip_upto) {
		cnt(u, SHM_CNT_DROP_DUP, 1);
		return true;
	}
	if (seq > u->mark)
		u->mark = seq;
	return false;
}

static bool rate_ok(struct unwindd *u)
{
	return shm_rate__admit(&u->rate, u->st, u->now_ns);
}

static void drop_sample(struct unwindd *u, const struct cpa_sample *s, uint32_t reason)
{
	cnt(u, reason, 1);
	loss_add(u, SHM_STAGE_UNWINDD, reason, s->kind, 1, s->weight, s->seq, s->time_ns);
}

static void handle_sample(struct unwindd *u, const struct shm_msg *msg)
{
	struct sample_view v;
	const struct cpa_sample *s = &v.s;
	struct uproc *p = NULL;
	unsigned int n_u = 0, i;
	int stop = CPA_STOP_NONE;
	struct cpa_frames *f;
	uint32_t len;
	uint8_t *o;

	if (msg->len < sizeof(v.s)) {
		drop_corrupt(u);
		return;
	}
	memcpy(&v.s, msg->data, sizeof(v.s));
	if (!cpa_rec_sample_ok(s, msg->len) || s->kind >= CPA_KIND_MAX) {
		drop_corrupt(u);
		return;
	}
	if (seen(u, s->seq))
		return;
	if (!rate_ok(u)) {
		drop_sample(u, s, SHM_CNT_DROP_RATE);
		return;
	}
	v.kstack = (const uint64_t *)((const uint8_t *)msg->data + sizeof(v.s));
	v.ufp = v.kstack + s->n_kstack;
	v.stack = (const uint8_t *)(v.ufp + s->n_ufp);

	u->n_touched = 0;
	if (unlikely(u->dump)) {
		u->dumping = udump__want(u->dump, s->pid);
		u->n_dump_bins = 0;
	}
	if (s->pid && !(s->flags & CPA_SF_KERNEL_THREAD) &&
	    (s->n_ufp || (s->flags & CPA_SF_USER_REGS))) {
		if (unlikely(u->envs) && !env_allows(u, s->pid)) {
			/* --parse_env_values: kernel frames only, CPA_STOP_NONE. */
			u->env_skipped++;
			cnt(u, UNW_CNT_ENV_SKIPPED, 1);
			if (u->bench)
				u->bench->env_skipped++;
		} else {
			p = ucache__proc(u->cache, s->pid, u->now_ns);
			if (p)
				p->sample_ns = s->time_ns;
			if (!p) {
				cnt(u, SHM_CNT_ERRORS, 1);
			} else if (unlikely(u->bench)) {
				uint64_t t0 = clock_ns(CLOCK_MONOTONIC);

				stop = unwind_user(u, p, &v, &n_u);
				ubench__add(u->bench, clock_ns(CLOCK_MONOTONIC) - t0, n_u, stop);
			} else {
				stop = unwind_user(u, p, &v, &n_u);
			}
		}
	}
	if (unlikely(u->dumping))
		dump_sample(u, p, msg, s, stop, n_u);

	/* Keep the output in seq order: older losses go first or this joins them. */
	if (!loss_flush(u)) {
		drop_sample(u, s, SHM_CNT_DROP_RING_FULL);
		return;
	}
	for (i = 0; i < u->n_touched; i++) {
		if (!u->touched[i]->def_sent && emit_module(u, u->touched[i]) < 0) {
			drop_sample(u, s, SHM_CNT_DROP_RING_FULL);
			return;
		}
	}

	/* The Python frames go on as they came, for symd (docs/unwinding.md, "Python"). */
	len = (uint32_t)(sizeof(*f) + 8u * s->n_kstack + sizeof(struct cpa_uframe) * n_u +
			 sizeof(struct cpa_pyframe) * s->n_py);
	if (emit(u, CPA_REC_FRAMES, len, (void **)&f) < 0) {
		drop_sample(u, s, SHM_CNT_DROP_RING_FULL);
		return;
	}
	memset(f, 0, sizeof(*f));
	f->seq = s->seq;
	f->time_ns = s->time_ns;
	f->cgroup_id = s->cgroup_id;
	f->weight = s->weight;
	f->pid = s->pid;
	f->tid = s->tid;
	f->cpu = s->cpu;
	f->kind = s->kind;
	f->flags = s->flags | (stop_is_partial(stop) ? CPA_SF_UNWIND_PARTIAL : 0);
	memcpy(f->comm, s->comm, sizeof(f->comm));
	memcpy(f->pcomm, s->pcomm, sizeof(f->pcomm));
	f->n_kframes = s->n_kstack;
	f->n_uframes = (uint16_t)n_u;
	f->stop_reason = (uint16_t)stop;
	f->probe_id = s->probe_id;
	f->offcpu_state = s->offcpu_state;
	o = (uint8_t *)(f + 1);
	memcpy(o, v.kstack, 8u * s->n_kstack);
	memcpy(o + 8u * s->n_kstack, u->uf, sizeof(struct cpa_uframe) * n_u);
	f->py_minor = s->py_minor;
	f->py_status = s->py_status;
	f->n_py = s->n_py;
	memcpy(o + 8u * s->n_kstack + sizeof(struct cpa_uframe) * n_u, v.stack + s->stack_len,
	       sizeof(struct cpa_pyframe) * s->n_py);

	cnt(u, UNW_CNT_FRAMES, n_u);
	count_stop(u, stop);
}

static void handle_task(struct unwindd *u, const struct shm_msg *msg)
{
	struct cpa_task_event t;
	void *out;

	if (msg->len < sizeof(t)) {
		drop_corrupt(u);
		return;
	}
	memcpy(&t, msg->data, sizeof(t));
	if (t.kind != CPA_TASK_EXEC && t.kind != CPA_TASK_EXIT) {
		drop_corrupt(u);
		return;
	}
	if (seen(u, t.seq))
		return;
	env_task(u, &t);
	if (t.kind == CPA_TASK_EXEC)
		ucache__task_exec(u->cache, t.pid, t.mnt_ns);
	else
		/* capture sends EXIT once per process, when its last thread
		 * leaves (any tid), so the address space is gone. */
		ucache__task_exit(u->cache, t.pid, u->now_ns, t.time_ns);

	/* symd drops its per-pid caches on the same event. */
	if (!loss_flush(u) || emit(u, CPA_REC_TASK, sizeof(t), &out) < 0) {
		cnt(u, SHM_CNT_DROP_RING_FULL, 1);
		return;
	}
	memcpy(out, &t, sizeof(t));
}

/* The kernel's mapping events: into the history, not passed on (symd gets
 * what it needs in the module definitions). */
static void handle_map(struct unwindd *u, const struct shm_msg *msg)
{
	const struct cpa_map_event *ev = msg->data;
	struct cpa_map_event m;

	if (msg->len < sizeof(m)) {
		drop_corrupt(u);
		return;
	}
	memcpy(&m, ev, sizeof(m));
	if (!cpa_rec_map_ok(&m, msg->len)) {
		drop_corrupt(u);
		return;
	}
	if (seen(u, m.seq))
		return;
	cnt(u, UNW_CNT_MAP_EVENTS, 1);
	if (ucache__map_event(u->cache, &m, (const char *)(ev + 1)) < 0)
		cnt(u, SHM_CNT_ERRORS, 1);
}

static void handle_loss(struct unwindd *u, const struct shm_msg *msg)
{
	struct cpa_loss l;
	void *out;

	if (msg->len < sizeof(l)) {
		drop_corrupt(u);
		return;
	}
	memcpy(&l, msg->data, sizeof(l));
	if (seen(u, l.seq))
		return;
	if (loss_flush(u) && emit(u, CPA_REC_LOSS, sizeof(l), &out) == 0) {
		memcpy(out, &l, sizeof(l));
		return;
	}
	/* Forwarded later, aggregated, still under the upstream stage's name. */
	loss_add(u, l.stage, l.reason, l.kind, l.count, l.weight, l.seq, l.time_ns);
}

/* Metrics and policy events (docs/metrics.md), capture's Python code objects
 * (for symd): not ours, passed on unchanged. Each starts with its seq. */
static void handle_forward(struct unwindd *u, const struct shm_msg *msg)
{
	uint64_t seq;
	void *out;

	if (msg->len < (msg->type == CPA_REC_PYCODE ? sizeof(struct cpa_pycode)
						    : sizeof(struct cpa_policy_event))) {
		drop_corrupt(u);
		return;
	}
	memcpy(&seq, msg->data, sizeof(seq));
	if (seen(u, seq))
		return;
	if (!loss_flush(u) || emit(u, msg->type, msg->len, &out) < 0) {
		cnt(u, SHM_CNT_DROP_RING_FULL, 1);
		return;
	}
	memcpy(out, msg->data, msg->len);
}

/* ---- stage object ---- */

int unwindd__start(struct unwindd *u)
{
	struct cpa_dict_reset *d;
	int r;

	if (u->reset_sent)
		return 0;
	r = emit(u, CPA_REC_DICT_RESET, sizeof(*d), (void **)&d);
	if (r < 0)
		return r;
	*d = (struct cpa_dict_reset){.epoch = u->epoch};
	if (!u->start_sent) {
		/* symd skips what our predecessor sent above our start mark. */
		d->flags = CPA_RESET_START;
		d->resume_seq = u->skip_upto;
	}
	shm_ring__commit_sp(u->out);
	u->reset_sent = true;
	u->start_sent = true;
	return 0;
}

static void new_epoch(struct unwindd *u)
{
	u->epoch++;
	u->reset_sent = false;
	ucache__epoch_reset(u->cache);
}

int unwindd__batch(void *obj, unsigned int max)
{
	struct unwindd *u = obj;
	struct shm_msg msgs[UNWINDD_BATCH];
	int n, i, r;

	if (u->o.peer) {
		/* Pairs with nothing: the monitor bumps it before it spawns symd;
		 * any recent value will do, we only compare. */
		uint32_t g = __atomic_load_n(&u->o.peer->generation, __ATOMIC_RELAXED);

		if (unlikely(g != u->peer_gen)) {
			u->peer_gen = g;
			/* A new symd forgot our module ids: define them again
			 * before their next use. The caches stay. */
			if (u->reset_sent) {
				new_epoch(u);
				log_info("symd restarted (generation %u): new epoch %#llx, "
					 "module definitions re-sent on next use",
					 g, (unsigned long long)u->epoch);
			}
		}
	}
	if (unlikely(ucache__next_id(u->cache) > u->o.max_module_id) &&
	    ucache__nr_bins(u->cache) + 2 < u->o.max_module_id / 2) {
		/* Everything already in ring 1 keeps the old ids: symd reads it
		 * before the reset that follows. (With the cache itself near the
		 * limit a new epoch would not help: ids just keep growing.) */
		new_epoch(u);
	}
	r = unwindd__start(u);
	if (r < 0)
		return r;
	if (max > UNWINDD_BATCH)
		max = UNWINDD_BATCH;
	n = shm_ring__peek_batch_sc(u->in, msgs, max);
	if (n <= 0)
		return n;

	u->now_ns = clock_ns(CLOCK_MONOTONIC);
	for (i = 0; i < n; i++) {
		const struct shm_msg *m = &msgs[i];

		cnt(u, SHM_CNT_IN, 1);
		cnt(u, SHM_CNT_BYTES_IN, m->len);
		switch (m->type) {
		case CPA_REC_SAMPLE:
			handle_sample(u, m);
			break;
		case CPA_REC_TASK:
			handle_task(u, m);
			break;
		case CPA_REC_LOSS:
			handle_loss(u, m);
			break;
		case CPA_REC_MAP:
			handle_map(u, m);
			break;
		case CPA_REC_METRICS:
		case CPA_REC_EVENT:
		case CPA_REC_PYCODE: /* for symd */
			handle_forward(u, m);
			break;
		default:
			drop_corrupt(u);
			break;
		}
	}
	(void)loss_flush(u);
	shm_ring__commit_sp(u->out);
	shm_fault__commit_point(&u->fault_left);
	/* Only after our output is visible: a restart resumes after this. */
	shm_ring__release_mark_sc(u->in, u->mark);
	loss_publish(u);
	cnt(u, SHM_CNT_BATCHES, 1);
	return n;
}

int unwindd__tick(void *obj, uint64_t now_ns)
{
	struct unwindd *u = obj;

	/* A caller's clock may be older than the batch's, which stamps its
	 * processes: never go back in time (the sweeps subtract). */
	if (now_ns < u->now_ns)
		now_ns = u->now_ns;
	u->now_ns = now_ns;
	if (u->st) {
		/* The cap is live: cpa ctl mem writes it into our block. */
		uint64_t mb = __atomic_load_n(&u->st->mem_limit_mb, __ATOMIC_RELAXED);

		if (mb && mb << 20 != u->o.max_cache_bytes) {
			log_info("cache cap: %llu MiB (was %llu MiB)", (unsigned long long)mb,
				 (unsigned long long)(u->o.max_cache_bytes >> 20));
			u->o.max_cache_bytes = mb << 20;
			ucache__set_max_bytes(u->cache, u->o.max_cache_bytes);
		}
	}
	if (u->reset_sent && shm_loss__pending(&u->loss)) {
		(void)loss_flush(u);
		shm_ring__commit_sp(u->out);
		loss_publish(u);
	}
	if (now_ns - u->last_sweep_ns >= NSEC_PER_SEC / 4) {
		ucache__sweep(u->cache, now_ns);
		env_sweep(u, now_ns);
		u->last_sweep_ns = now_ns;
	}
	if (u->bench)
		(void)ubench__tick(u->bench, now_ns);
	gauge_set(u, UNW_CNT_CACHE_BYTES, ucache__bytes(u->cache));
	{
		struct unw_stats ws;

		/* The walker counts per thread without atomics; publish the delta. */
		unw_stats__read(&ws);
		cnt(u, UNW_CNT_CFI_EXPR, ws.complex_rows - u->walk_complex_seen);
		u->walk_complex_seen = ws.complex_rows;
	}
	return 0;
}

/* --bench, --debug_option, --parse_env_values: only what is asked for exists. */
static int unwindd_features_new(struct unwindd *u)
{
	int r;

	if (u->o.bench) {
		u->bench = malloc(sizeof(*u->bench));
		if (!u->bench)
			return -ENOMEM;
		ubench__init(u->bench, u->o.bench_interval_ns, u->now_ns);
	}
	if (u->o.debug_pid && u->o.debug_path && *u->o.debug_path) {
		r = udump__open(u->o.debug_path, u->o.debug_pid, u->o.debug_freq,
				u->o.debug_max_bytes, &u->dump);
		/* A debug aid: without it the stage still runs. */
		if (r < 0)
			log_error_errno(r, "debug dump '%s': open: %m (no samples dumped)",
					u->o.debug_path);
		else
			log_info("dumping every %u. sample of pid %u to '%s'",
				 u->o.debug_freq ? u->o.debug_freq : 1, u->o.debug_pid,
				 u->o.debug_path);
	}
	if (u->o.env_values && *u->o.env_values) {
		u->envs_mask = 255;
		u->envs = calloc(u->envs_mask + 1, sizeof(*u->envs));
		u->env_buf = malloc(UNWINDD_ENVIRON_MAX + 1);
		u->env_cap = UNWINDD_ENVIRON_MAX + 1;
		if (!u->envs || !u->env_buf)
			return -ENOMEM;
	}
	return 0;
}

int unwindd__new(const struct unwindd_opts *o, struct shm_ring_cons *in, struct shm_ring_prod *out,
		 struct shm_stage *st, struct unwindd **ret)
{
	struct ucache_opts co = {0};
	struct unwindd *u;
	int r;

	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->o = *o;
	u->fault_left = o->fault_kill_batches;
	unwindd_opts__defaults(&u->o);
	u->epoch = u->o.epoch;
	u->in = in;
	u->out = out;
	u->st = st;
	if (o->hint && o->ustack_cap > o->ustack_start && o->ustack_start) {
		u->hint = *o->hint;
		u->have_hint = true;
	}
	u->o.hint = NULL; /* copied: the caller's may go away */
	co.max_bytes = u->o.max_cache_bytes;
	co.refresh_ns = u->o.refresh_ns;
	co.refresh_ip_ns = u->o.refresh_ip_ns;
	co.dead_grace_ns = u->o.dead_grace_ns;
	co.idle_ns = u->o.idle_ns;
	co.proc_root = u->o.proc_root;
	/* The real /proc only: tests with fixture roots read their maps lazily. */
	co.seed = !strcmp(u->o.proc_root, "/proc");
	co.st = st;
	r = ucache__new(&co, &u->cache);
	if (r < 0) {
		free(u);
		return r;
	}
	if (u->o.peer)
		u->peer_gen = __atomic_load_n(&u->o.peer->generation, __ATOMIC_RELAXED);
	u->dump_maps_ns = UINT64_MAX;
	u->now_ns = clock_ns(CLOCK_MONOTONIC);
	r = unwindd_features_new(u);
	if (r < 0) {
		unwindd__free(u);
		return r;
	}
	u->skip_upto = shm_ring__mark_sc(in);
	u->mark = u->skip_upto;
	loss_carry(u);
	u->now_ns = clock_ns(CLOCK_MONOTONIC);
	u->last_sweep_ns = u->now_ns;
	*ret = u;
	return 0;
}

void unwindd__free(void *obj)
{
	struct unwindd *u = obj;

	if (!u)
		return;
	ucache__free(u->cache);
	udump__free(u->dump);
	free(u->bench);
	if (u->envs) {
		uint32_t i;

		for (i = 0; i <= u->envs_mask; i++) {
			while (u->envs[i]) {
				struct uenv *e = u->envs[i];

				u->envs[i] = e->next;
				free(e);
			}
		}
		free(u->envs);
	}
	free(u->env_buf);
	free(u);
}

unsigned int unwindd__finish(struct unwindd *u, uint64_t wait_ns)
{
	uint64_t deadline = clock_ns(CLOCK_MONOTONIC) + wait_ns;

	unwindd__tick(u, clock_ns(CLOCK_MONOTONIC));
	while (shm_loss__pending(&u->loss)) {
		/* A DICT_RESET first, if the link still owes one (symd restarted). */
		if (!u->reset_sent)
			(void)unwindd__batch(u, 0);
		if (u->reset_sent)
			(void)loss_flush(u);
		shm_ring__commit_sp(u->out);
		loss_publish(u);
		if (!shm_loss__pending(&u->loss) || clock_ns(CLOCK_MONOTONIC) >= deadline)
			break;
		shm_stage__heartbeat(u->st);
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
	return shm_loss__pending(&u->loss);
}

uint64_t unwindd__resume_seq(const struct unwindd *u)
{
	return u->skip_upto;
}

uint64_t unwindd__now(const struct unwindd *u)
{
	return u->now_ns;
}

struct ucache *unwindd__cache(const struct unwindd *u)
{
	return u->cache;
}

struct ubench *unwindd__bench(const struct unwindd *u)
{
	return u->bench;
}

struct udump *unwindd__dump(const struct unwindd *u)
{
	return u->dump;
}

uint64_t unwindd__env_skipped(const struct unwindd *u)
{
	return u->env_skipped;
}

uint32_t unwindd__nr_envs(const struct unwindd *u)
{
	return u->n_envs;
}

void unwindd__sweep_next_tick(struct unwindd *u)
{
	u->last_sweep_ns = 0;
}
