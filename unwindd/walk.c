// SPDX-License-Identifier: MIT
/*
 * Stack walker over compiled CFI (cfi_pvt.h). Per frame:
 *
 *   find(pc) -> table, file_off        caller's mapping lookup
 *   pc cache  (table gen, key) -> rule  direct-mapped, per thread
 *     miss -> page index + binary search of the table's row[] (start, rule) pairs
 *   packed rule: CFA = rsp|rbp + off; RA = *(CFA-8); rbp = same | *(CFA+k)
 *   side rule:   general rules and a bounded DWARF expression evaluator
 *
 * Every stack read goes through stk_read(), which refuses anything outside
 * [base, base + len) of the copy: a garbage stack ends the walk, never the
 * process.
 */
#include <errno.h>
#include <string.h>

#include "common/hash.h"
#include "common/macro.h"
#include "cfi_pvt.h"
#include "walk.h"

/* DWARF expression opcodes the evaluator knows */
#define DW_OP_addr	     0x03
#define DW_OP_deref	     0x06
#define DW_OP_const1u	     0x08
#define DW_OP_const1s	     0x09
#define DW_OP_const2u	     0x0a
#define DW_OP_const2s	     0x0b
#define DW_OP_const4u	     0x0c
#define DW_OP_const4s	     0x0d
#define DW_OP_const8u	     0x0e
#define DW_OP_const8s	     0x0f
#define DW_OP_constu	     0x10
#define DW_OP_consts	     0x11
#define DW_OP_dup	     0x12
#define DW_OP_drop	     0x13
#define DW_OP_over	     0x14
#define DW_OP_pick	     0x15
#define DW_OP_swap	     0x16
#define DW_OP_rot	     0x17
#define DW_OP_abs	     0x19
#define DW_OP_and	     0x1a
#define DW_OP_div	     0x1b
#define DW_OP_minus	     0x1c
#define DW_OP_mod	     0x1d
#define DW_OP_mul	     0x1e
#define DW_OP_neg	     0x1f
#define DW_OP_not	     0x20
#define DW_OP_or	     0x21
#define DW_OP_plus	     0x22
#define DW_OP_plus_uconst    0x23
#define DW_OP_shl	     0x24
#define DW_OP_shr	     0x25
#define DW_OP_shra	     0x26
#define DW_OP_xor	     0x27
#define DW_OP_bra	     0x28
#define DW_OP_eq	     0x29
#define DW_OP_ge	     0x2a
#define DW_OP_gt	     0x2b
#define DW_OP_le	     0x2c
#define DW_OP_lt	     0x2d
#define DW_OP_ne	     0x2e
#define DW_OP_skip	     0x2f
#define DW_OP_lit0	     0x30
#define DW_OP_lit31	     0x4f
#define DW_OP_breg0	     0x70
#define DW_OP_breg31	     0x8f
#define DW_OP_bregx	     0x92
#define DW_OP_deref_size     0x94
#define DW_OP_nop	     0x96
#define DW_OP_call_frame_cfa 0x9c
#define DW_OP_stack_value    0x9f

/* Bounds of the evaluator: CFI expressions are a handful of ops. */
#define EVAL_STACK 16
#define EVAL_STEPS 64

/* A power of two; 2048 entries x 12 bytes stays in L1/L2. */
#ifndef UNW_CACHE_BITS
#define UNW_CACHE_BITS 11
#endif
#define UNW_CACHE_SIZE (1u << UNW_CACHE_BITS)

struct unw_cache {
	uint64_t tag[UNW_CACHE_SIZE]; /* gen << 32 | key; 0 = empty (gen starts at 1) */
	uint32_t rule[UNW_CACHE_SIZE];
};

static __thread struct unw_cache unw_cache;
static __thread struct unw_stats unw_stats;

void unw_stats__read(struct unw_stats *ret)
{
	*ret = unw_stats;
}

static inline bool stk_read(const struct unw_stack *s, uint64_t addr, uint64_t *v)
{
	uint64_t o = addr - s->base; /* wraps huge when addr < base */

	if (unlikely(s->len < 8 || o > s->len - 8u))
		return false;
	memcpy(v, s->bytes + o, 8);
	return true;
}

/* Out of line: keeps the hit path of rule_of() free of register saves. */
static __attribute__((noinline)) uint32_t rule_miss(const struct cfi_table *t, uint64_t off,
						    uint32_t h, uint64_t tag)
{
	uint32_t w = cfi_table__lookup(t, off);

	unw_stats.cache_misses++;
	unw_cache.tag[h] = tag;
	unw_cache.rule[h] = w;
	return w;
}

static inline uint32_t rule_of(const struct cfi_table *t, uint64_t off)
{
	uint64_t key = off - t->base;
	uint64_t tag;
	uint32_t h;

	if (unlikely(key >= t->span))
		return CFI_K_GAP;
	tag = (uint64_t)t->gen << 32 | key;
	h = (hash32_fib((uint32_t)key) ^ t->gen * 0x85ebca6bu) >> (32 - UNW_CACHE_BITS);
	if (likely(unw_cache.tag[h] == tag)) {
		unw_stats.cache_hits++;
		return unw_cache.rule[h];
	}
	return rule_miss(t, off, h, tag);
}

/* DWARF numbers of the caller-saved registers: rax rdx rcx rsi rdi r8-r11. */
#define UNW_VOLATILE_REGS                                                                     \
	(1u << DW_RAX | 1u << DW_RDX | 1u << DW_RCX | 1u << DW_RSI | 1u << DW_RDI | 1u << 8 | \
	 1u << 9 | 1u << 10 | 1u << 11)

/*
 * Register dw of the frame. live: the frame is the leaf, whose caller-saved
 * registers the sample holds; above it they are unknown (no rule restores
 * them). DW_RA is rip: the PLT expression tests the pc's offset in its stub.
 */
static bool reg_get(const struct unw_regs *r, uint64_t dw, bool live, uint64_t *v)
{
	if (dw > DW_RA || (!live && (UNW_VOLATILE_REGS >> dw & 1)))
		return false;
	*v = ((const uint64_t *)r)[dw]; /* struct unw_regs is in DWARF order */
	return true;
}

/* DWARF number of the register a rule slot restores. */
static const uint8_t slot_dw[CFI_S_NR] = {
	[CFI_S_RA] = DW_RA,   [CFI_S_RBP] = DW_RBP, [CFI_S_RBX] = DW_RBX, [CFI_S_R12] = DW_R12,
	[CFI_S_R13] = DW_R13, [CFI_S_R14] = DW_R14, [CFI_S_R15] = DW_R15,
};

/*
 * Evaluate the pooled expression at expr_off. push_cfa: register rules start
 * with the CFA on the stack (DWARF 5 6.4.2.3). Returns 0 or a CPA_STOP_*.
 */
static int eval(const struct cfi_table *t, uint32_t expr_off, const struct unw_regs *r, bool live,
		const struct unw_stack *s, bool push_cfa, uint64_t cfa, uint64_t *out)
{
	uint64_t st[EVAL_STACK];
	unsigned int sp = 0, steps = 0;
	struct cfi_rd rd;
	const uint8_t *start;
	uint16_t len;

	if (expr_off + 2u > t->expr_len)
		return CPA_STOP_BAD;
	memcpy(&len, t->expr + expr_off, 2);
	if (expr_off + 2u + len > t->expr_len)
		return CPA_STOP_BAD;
	start = t->expr + expr_off + 2;
	rd = (struct cfi_rd){start, start + len, false};
	if (push_cfa)
		st[sp++] = cfa;

#define NEED(k)                              \
	do {                                 \
		if (sp < (k))                \
			return CPA_STOP_BAD; \
	} while (0)
#define PUSH(v)                              \
	do {                                 \
		uint64_t v_ = (v);           \
		if (sp >= EVAL_STACK)        \
			return CPA_STOP_BAD; \
		st[sp++] = v_;               \
	} while (0)
#define BINOP(expr)                                      \
	do {                                             \
		NEED(2);                                 \
		uint64_t b_ = st[--sp], a_ = st[sp - 1]; \
		(void)a_;                                \
		(void)b_;                                \
		st[sp - 1] = (expr);                     \
	} while (0)

	while (rd.p < rd.end) {
		uint8_t op = *rd.p++;
		uint64_t v, a;
		int64_t sv;

		if (++steps > EVAL_STEPS)
			return CPA_STOP_BAD; /* a backward bra loop */
		if (op >= DW_OP_lit0 && op <= DW_OP_lit31) {
			PUSH(op - DW_OP_lit0);
			continue;
		}
		if (op >= DW_OP_breg0 && op <= DW_OP_breg31) {
			sv = cfi_rd_sleb(&rd);
			if (!reg_get(r, op - DW_OP_breg0, live, &v))
				return CPA_STOP_BAD;
			PUSH(v + (uint64_t)sv);
			continue;
		}
		if (op >= DW_OP_const1u && op <= DW_OP_const8s) {
			/* const1u, const1s, ... const8s: n = 1, 2, 4, 8 bytes; the odd
			 * ops (the s ones) sign-extend */
			unsigned int n = 1u << ((op - DW_OP_const1u) / 2), sh = 64 - 8 * n;

			v = cfi_rd_u(&rd, n);
			PUSH((op - DW_OP_const1u) & 1 ? (uint64_t)((int64_t)(v << sh) >> sh) : v);
			continue;
		}
		switch (op) {
		case DW_OP_addr:
			PUSH(cfi_rd_u(&rd, 8));
			break;
		case DW_OP_constu:
			PUSH(cfi_rd_uleb(&rd));
			break;
		case DW_OP_consts:
			PUSH((uint64_t)cfi_rd_sleb(&rd));
			break;
		case DW_OP_bregx:
			a = cfi_rd_uleb(&rd);
			sv = cfi_rd_sleb(&rd);
			if (!reg_get(r, a, live, &v))
				return CPA_STOP_BAD;
			PUSH(v + (uint64_t)sv);
			break;
		case DW_OP_dup:
			NEED(1);
			PUSH(st[sp - 1]);
			break;
		case DW_OP_drop:
			NEED(1);
			sp--;
			break;
		case DW_OP_over:
			NEED(2);
			PUSH(st[sp - 2]);
			break;
		case DW_OP_pick:
			a = cfi_rd_u(&rd, 1);
			NEED(a + 1);
			PUSH(st[sp - 1 - a]);
			break;
		case DW_OP_swap:
			NEED(2);
			v = st[sp - 1];
			st[sp - 1] = st[sp - 2];
			st[sp - 2] = v;
			break;
		case DW_OP_rot:
			NEED(3);
			v = st[sp - 1];
			st[sp - 1] = st[sp - 2];
			st[sp - 2] = st[sp - 3];
			st[sp - 3] = v;
			break;
		case DW_OP_deref:
			NEED(1);
			if (!stk_read(s, st[sp - 1], &v))
				return CPA_STOP_READ;
			st[sp - 1] = v;
			break;
		case DW_OP_deref_size:
			a = cfi_rd_u(&rd, 1);
			NEED(1);
			if (a == 0 || a > 8)
				return CPA_STOP_BAD;
			if (!stk_read(s, st[sp - 1], &v))
				return CPA_STOP_READ; /* 8-byte window: conservative near the top */
			st[sp - 1] = a == 8 ? v : v & ((1ull << (8 * a)) - 1);
			break;
		case DW_OP_abs:
			NEED(1);
			if ((int64_t)st[sp - 1] < 0)
				st[sp - 1] = -st[sp - 1];
			break;
		case DW_OP_neg:
			NEED(1);
			st[sp - 1] = -st[sp - 1];
			break;
		case DW_OP_not:
			NEED(1);
			st[sp - 1] = ~st[sp - 1];
			break;
		case DW_OP_and:
			BINOP(a_ & b_);
			break;
		case DW_OP_or:
			BINOP(a_ | b_);
			break;
		case DW_OP_xor:
			BINOP(a_ ^ b_);
			break;
		case DW_OP_plus:
			BINOP(a_ + b_);
			break;
		case DW_OP_minus:
			BINOP(a_ - b_);
			break;
		case DW_OP_mul:
			BINOP(a_ * b_);
			break;
		case DW_OP_div:
			NEED(2);
			if (!st[sp - 1] || (st[sp - 1] == ~0ull && st[sp - 2] == 1ull << 63))
				return CPA_STOP_BAD;
			BINOP((uint64_t)((int64_t)a_ / (int64_t)b_));
			break;
		case DW_OP_mod:
			NEED(2);
			if (!st[sp - 1])
				return CPA_STOP_BAD;
			BINOP(a_ % b_);
			break;
		case DW_OP_shl:
			BINOP(b_ >= 64 ? 0 : a_ << b_);
			break;
		case DW_OP_shr:
			BINOP(b_ >= 64 ? 0 : a_ >> b_);
			break;
		case DW_OP_shra:
			BINOP(b_ >= 64 ? (uint64_t)((int64_t)a_ >> 63)
				       : (uint64_t)((int64_t)a_ >> b_));
			break;
		case DW_OP_eq:
			BINOP(a_ == b_);
			break;
		case DW_OP_ne:
			BINOP(a_ != b_);
			break;
		case DW_OP_ge:
			BINOP((int64_t)a_ >= (int64_t)b_);
			break;
		case DW_OP_gt:
			BINOP((int64_t)a_ > (int64_t)b_);
			break;
		case DW_OP_le:
			BINOP((int64_t)a_ <= (int64_t)b_);
			break;
		case DW_OP_lt:
			BINOP((int64_t)a_ < (int64_t)b_);
			break;
		case DW_OP_plus_uconst:
			NEED(1);
			st[sp - 1] += cfi_rd_uleb(&rd);
			break;
		case DW_OP_skip:
		case DW_OP_bra: {
			int16_t d = (int16_t)cfi_rd_u(&rd, 2);

			if (op == DW_OP_bra) {
				NEED(1);
				if (!st[--sp])
					break;
			}
			if (d < start - rd.p || d > rd.end - rd.p)
				return CPA_STOP_BAD;
			rd.p += d;
			break;
		}
		case DW_OP_call_frame_cfa:
			if (!push_cfa)
				return CPA_STOP_BAD; /* the CFA rule itself cannot use the CFA */
			PUSH(cfa);
			break;
		case DW_OP_nop:
			break;
		case DW_OP_stack_value:
			/* value-ness comes from the rule kind (val_expression) */
			rd.p = rd.end;
			break;
		default:
			return CPA_STOP_BAD;
		}
		if (rd.bad)
			return CPA_STOP_BAD;
	}
#undef NEED
#undef PUSH
#undef BINOP
	if (!sp || rd.bad)
		return CPA_STOP_BAD;
	*out = st[sp - 1];
	return 0;
}

/*
 * The value of slot i saved at addr. A register saved below the stack pointer
 * was already restored (an epilogue after its pop: the CFI still names the
 * slot, which is dead and outside the copy): it keeps its current value.
 */
static inline int saved_at(const struct unw_regs *r, const struct unw_stack *s, int i,
			   uint64_t addr, uint64_t *v)
{
	if (addr < r->sp && i != CFI_S_RA) {
		*v = ((const uint64_t *)r)[slot_dw[i]]; /* restored */
		return 0;
	}
	return stk_read(s, addr, v) ? 0 : CPA_STOP_READ;
}

/*
 * The general rule: every value computed from the callee's registers, then
 * stored (saved_at(): what was saved below the stack pointer is restored).
 */
static int step_x(const struct cfi_table *t, const struct cfi_xrule *x, struct unw_regs *r,
		  bool live, const struct unw_stack *s)
{
	uint64_t cfa, v[CFI_S_NR];
	int ret;

	unw_stats.complex_rows++;
	if (x->cfa_kind == CFI_CFA_REG) {
		/*
		 * A CFA in a caller-saved register above the leaf (OpenSSL's
		 * asm keeps it in rax across calls to routines that leave rax
		 * alone): no rule restores such a register, so it holds the
		 * sampled value unless a callee wrote it. Taken as libunwind
		 * and perf take it; a wrong value fails the walk's checks (the
		 * CFA above sp and in the copy, the return address mapped).
		 */
		bool carry = !live && x->cfa_reg < DW_RA && (UNW_VOLATILE_REGS >> x->cfa_reg & 1);

		if (!reg_get(r, x->cfa_reg, live || carry, &cfa) || x->cfa_reg == DW_RA)
			return CPA_STOP_BAD;
		if (carry) {
			if (cfa <= r->sp)
				return CPA_STOP_BAD;
			unw_stats.carried_cfa++;
		}
		cfa += (uint64_t)(int64_t)x->cfa_off;
	} else {
		ret = eval(t, (uint32_t)x->cfa_off, r, live, s, false, 0, &cfa);
		if (ret)
			return ret;
	}
	if (x->r[CFI_S_RA].kind == CFI_R_UNDEF)
		return CPA_STOP_END; /* _start, clone3, start_thread say so */

	for (int i = 0; i < CFI_S_NR; i++) {
		const struct cfi_xreg *xr = &x->r[i];
		uint64_t addr;

		switch (xr->kind) {
		case CFI_R_SAME:
		case CFI_R_UNDEF:
		default:
			v[i] = 0;
			continue;
		case CFI_R_OFF:
			ret = saved_at(r, s, i, cfa + (uint64_t)(int64_t)xr->off, &v[i]);
			if (ret)
				return ret;
			continue;
		case CFI_R_VAL_OFF:
			v[i] = cfa + (uint64_t)(int64_t)xr->off;
			continue;
		case CFI_R_REG:
			if (!reg_get(r, (uint64_t)xr->off, live, &v[i]))
				return CPA_STOP_BAD;
			continue;
		case CFI_R_EXPR:
			ret = eval(t, (uint32_t)xr->off, r, live, s, true, cfa, &addr);
			if (!ret)
				ret = saved_at(r, s, i, addr, &v[i]);
			if (ret)
				return ret;
			continue;
		case CFI_R_VAL_EXPR:
			ret = eval(t, (uint32_t)xr->off, r, live, s, true, cfa, &v[i]);
			if (ret)
				return ret;
			continue;
		}
	}
	/*
	 * Registers a rule leaves unchanged (SAME, or UNDEF on a callee-saved
	 * one) keep their value; the RA slot becomes the caller's ip.
	 */
#define SET(slot, field)                           \
	do {                                       \
		if (x->r[slot].kind > CFI_R_UNDEF) \
			r->field = v[slot];        \
	} while (0)
	SET(CFI_S_RA, ip);
	SET(CFI_S_RBP, bp);
	SET(CFI_S_RBX, bx);
	SET(CFI_S_R12, r12);
	SET(CFI_S_R13, r13);
	SET(CFI_S_R14, r14);
	SET(CFI_S_R15, r15);
#undef SET
	if (x->r[CFI_S_RA].kind == CFI_R_SAME)
		return CPA_STOP_BAD; /* RA "same value" would loop forever */
	r->sp = cfa;
	return 0;
}

static inline int step_rule(const struct cfi_table *t, uint32_t w, struct unw_regs *r, bool live,
			    const struct unw_stack *s, bool *ret_signal)
{
	uint64_t cfa, ra, bp, slot;

	*ret_signal = false;
	switch (CFI_RULE_KIND(w)) {
	case CFI_K_RSP:
		cfa = r->sp + CFI_RULE_CFA_OFF(w);
		break;
	case CFI_K_RBP:
		cfa = r->bp + CFI_RULE_CFA_OFF(w);
		break;
	case CFI_K_X: {
		const struct cfi_xrule *x = &t->x[CFI_RULE_X(w)];

		if (x->flags & CFI_XF_SIGNAL) {
			*ret_signal = true;
			unw_stats.signal_frames++;
		}
		return step_x(t, x, r, live, s);
	}
	default:
		return CPA_STOP_NO_CFI;
	}
	if (!stk_read(s, cfa - 8, &ra))
		return CPA_STOP_READ;
	/* A slot below sp: the epilogue already popped rbp (its value is live). */
	slot = cfa + (uint64_t)CFI_RULE_RBP_OFF(w);
	if (CFI_RULE_RBP_SAVED(w) && slot >= r->sp) {
		if (!stk_read(s, slot, &bp))
			return CPA_STOP_READ;
		r->bp = bp;
	}
	r->ip = ra;
	r->sp = cfa;
	return 0;
}

int unw_step(const struct cfi_table *t, uint64_t file_off, struct unw_regs *regs,
	     const struct unw_stack *stack, bool *ret_signal)
{
	return step_rule(t, rule_of(t, file_off), regs, false, stack, ret_signal);
}

/*
 * The frame-pointer rule for code without CFI: CFA = rbp + 16, RA at rbp + 8,
 * caller's rbp at rbp. Only taken when rbp points into the copy above sp.
 */
/* The rule takes the return address from a register (DW_CFA_register). */
static bool ra_in_reg(const struct cfi_table *t, uint32_t w)
{
	return t && CFI_RULE_KIND(w) == CFI_K_X &&
	       t->x[CFI_RULE_X(w)].r[CFI_S_RA].kind == CFI_R_REG;
}

static int step_fp(struct unw_regs *r, const struct unw_stack *s)
{
	uint64_t ra, bp;

	if (r->bp < r->sp || (r->bp & 7))
		return CPA_STOP_NO_CFI; /* rbp is not a frame pointer here */
	if (!stk_read(s, r->bp + 8, &ra) || !stk_read(s, r->bp, &bp))
		return CPA_STOP_READ;
	r->ip = ra;
	r->sp = r->bp + 16;
	r->bp = bp;
	return 0;
}

/*
 * Go code without CFI (a stripped binary): the frame size from .gopclntab.
 * CFA = sp + pushed + 8, RA below it. Go saves rbp at CFA - 16 and points
 * rbp there once its prologue did; until then (and in a frameless function)
 * rbp is the caller's and stays.
 */
static int step_go(struct unw_regs *r, int32_t pushed, const struct unw_stack *s)
{
	uint64_t cfa = r->sp + (uint64_t)pushed + 8, ra, bp;

	if (!stk_read(s, cfa - 8, &ra))
		return CPA_STOP_READ;
	if (pushed >= 16 && r->bp == cfa - 16) {
		if (!stk_read(s, cfa - 16, &bp))
			return CPA_STOP_READ;
		r->bp = bp;
	}
	r->ip = ra;
	r->sp = cfa;
	return 0;
}

int unw_walk_flags(const struct unw_regs *regs, const struct unw_stack *stack, unw_find_fn find,
		   void *ctx, unsigned int flags, struct cpa_uframe *out, unsigned int max,
		   unsigned int *ret_n, uint64_t *ret_top)
{
	struct unw_regs r = *regs;
	uint64_t top = regs->sp;
	unsigned int n = 0;
	bool exact = true; /* the leaf's ip is not a return address */
	/* r.ip is a frame-pointer guess for a frame in a CFI gap (UNW_F_FP_JIT): a
	 * guess that leads nowhere mapped is that frame's missing CFI, not a
	 * mapping the history lacks (glibc's clone3 after its syscall, where
	 * rbp is no frame pointer) */
	bool gap_guess = false;
	uint32_t next_flags = 0;
	int stop;

	unw_stats.walks++;
	for (;;) {
		struct cpa_uframe *f;
		struct unw_loc loc;
		uint64_t old_sp = r.sp;
		bool sig = false;
		uint32_t w;

		if (n >= max) {
			stop = CPA_STOP_DEPTH;
			break;
		}
		/*
		 * A return address may be the first byte after a noreturn call
		 * at the very end of a function: look up the call instead.
		 */
		loc.go = UNW_GO_NONE;
		loc.go_sp = -1;
		if (find(ctx, exact ? r.ip : r.ip - 1, &loc) < 0) {
			stop = gap_guess ? CPA_STOP_NO_CFI : CPA_STOP_NO_MAP;
			break;
		}
		gap_guess = false;
		f = &out[n++];
		f->pc = r.ip;
		f->offset = loc.file_off + (exact ? 0 : 1);
		f->module_id = loc.module_id;
		f->flags = loc.flags | (exact ? CPA_UF_LEAF : 0) | next_flags;
		next_flags = 0;
		unw_stats.frames++;
		if (loc.flags & CPA_UF_ANON) {
			f->offset = r.ip;
			/* JIT code has no CFI; V8 (and HotSpot with
			 * -XX:+PreserveFramePointer) keeps rbp chained. */
			if (!(flags & UNW_F_FP_JIT) || step_fp(&r, stack)) {
				stop = CPA_STOP_ANON;
				break;
			}
			next_flags = CPA_UF_FP;
			unw_stats.fp_frames++;
			exact = false;
			if (r.ip == 0 || r.sp <= old_sp) {
				stop = CPA_STOP_ANON;
				break;
			}
			if (r.sp > top)
				top = r.sp;
			continue;
		}
		if (unlikely(loc.go >= UNW_GO_BOTTOM)) {
			/* Go: the bottom of a goroutine or thread stack, or a
			 * switch to another stack (walk.h). */
			if (loc.go == UNW_GO_BOTTOM) {
				stop = CPA_STOP_END;
				break;
			}
			if (flags & UNW_F_GO_SWITCH) {
				stop = UNW_STOP_GO_SWITCH;
				break;
			}
		}
		w = loc.table ? rule_of(loc.table, loc.file_off) : 0;
		if (!loc.table && loc.go == UNW_GO_CODE && loc.go_sp >= 0)
			stop = step_go(&r, loc.go_sp, stack);
		else
			stop = loc.table ? step_rule(loc.table, w, &r, n == 1, stack, &sig)
					 : CPA_STOP_NO_CFI;
		if (stop == CPA_STOP_NO_CFI &&
		    ((!loc.table && (flags & UNW_F_FP_FALLBACK)) ||
		     (loc.table && (flags & UNW_F_FP_JIT) && CFI_RULE_KIND(w) == CFI_K_GAP))) {
			gap_guess = loc.table != NULL;
			stop = step_fp(&r, stack);
			next_flags = CPA_UF_FP;
			unw_stats.fp_frames++;
		}
		if (stop)
			break;
		if (sig)
			f->flags |= CPA_UF_SIGNAL;
		/*
		 * Progress check: the stack grows down, so a caller's CFA lies
		 * above. A signal frame may jump anywhere (sigaltstack). The
		 * leaf alone may keep its sp when its rule takes the return
		 * address from a register: a function that popped it there
		 * (vfork: `pop %rdi; syscall; push %rdi`, CFA = rsp, RA in rdi)
		 * has its caller's CFA at rsp. An RA read from the stack at an
		 * unmoved sp is nonsense, and only the leaf has live registers.
		 */
		if (r.ip == 0 || (!sig && r.sp < old_sp) ||
		    (!sig && r.sp == old_sp && !(n == 1 && ra_in_reg(loc.table, w))) ||
		    (sig && r.sp == old_sp)) {
			stop = CPA_STOP_BAD;
			break;
		}
		exact = sig;
		if (r.sp > top)
			top = r.sp;
	}
	*ret_n = n;
	if (ret_top)
		*ret_top = top;
	return stop;
}

int unw_walk(const struct unw_regs *regs, const struct unw_stack *stack, unw_find_fn find,
	     void *ctx, struct cpa_uframe *out, unsigned int max, unsigned int *ret_n)
{
	return unw_walk_flags(regs, stack, find, ctx, 0, out, max, ret_n, NULL);
}

static const char *const stop_names[CPA_STOP_MAX] = {
	[CPA_STOP_NONE] = "none",	[CPA_STOP_END] = "end",	  [CPA_STOP_NO_MAP] = "no_map",
	[CPA_STOP_NO_CFI] = "no_cfi",	[CPA_STOP_READ] = "read", [CPA_STOP_DEPTH] = "depth",
	[CPA_STOP_ANON] = "anon",	[CPA_STOP_BAD] = "bad",	  [CPA_STOP_FP] = "fp",
	[CPA_STOP_DELETED] = "deleted", [CPA_STOP_EXEC] = "exec", [CPA_STOP_EXIT] = "exit",
};
_Static_assert(CPA_STOP_EXIT + 1 == CPA_STOP_MAX, "a name for every stop reason");

const char *unw_stop_name(unsigned int stop)
{
	return stop < CPA_STOP_MAX ? stop_names[stop] : "?";
}
