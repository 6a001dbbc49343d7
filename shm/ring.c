// SPDX-License-Identifier: MIT
/*
 * shm ring: ordering contract
 * ===========================
 *
 * Two processes share struct shm_ring_ctrl and the data area. prod_pos and
 * cons_pos are 64-bit free-running byte positions (never masked in memory,
 * so they never wrap in practice, and unsigned subtraction is exact even if
 * they do: tests start them near UINT64_MAX). Invariant:
 *
 *	cons_pos <= prod_pos <= cons_pos + data_size	(mod 2^64)
 *
 * Only the producer stores prod_pos and the data bytes in [cons_pos + size ..);
 * only the consumer stores cons_pos and cons_mark. Each side keeps a private
 * copy of the other's position (cons_cache, prod_cache) and re-reads the
 * shared one only when its copy says "full" / "empty", so in the steady state
 * neither side touches the other's cache line.
 *
 *  [P1] producer, commit:  store-release prod_pos = head
 *       pairs with [C1]:   the record bytes written before the release are
 *                          visible to a consumer that load-acquires prod_pos.
 *  [C1] consumer, peek:    load-acquire prod_pos
 *  [C3] consumer, release: store-release cons_pos = tail
 *       pairs with [P2]:   every read the consumer made of a record happens
 *                          before the producer overwrites that space.
 *  [P2] producer, reserve: load-acquire cons_pos (only when it looks full)
 *
 *  [F1] format: store-release magic after every other field. The arena is
 *       formatted before any stage process exists (fork and exec order it),
 *       so no load pairs with it; it only keeps magic the last word written.
 *  [V1] validate: load-acquire prod_pos and cons_pos, pairs with [P1]/[C3].
 *       The values feed only the bounds check; relaxed would do.
 *  [O1] open: each side loads its own position relaxed (prod_pos in
 *       open_prod, cons_pos and cons_mark in open_cons/mark). Only that side
 *       stores it, and its previous owner is dead before a new one starts
 *       (see "Crash and restart"): process exit and waitpid order those
 *       stores, no atomic pairs with them.
 *
 * Sleep and wake are a Dekker handshake on two variables, prod_pos and
 * waiting, with wake_seq as the futex word:
 *
 *  [C4] consumer: seq = load-acquire wake_seq; seq_cst store waiting = 1;
 *       seq_cst load prod_pos; if enough is pending, store waiting = 0 and
 *       return; else futex_wait(wake_seq, seq, deadline).
 *  [P3] producer (commit): seq_cst store prod_pos; seq_cst load waiting;
 *       if set and enough is pending: if exchange(waiting, 0) was 1, then
 *       wake_seq += 1 (release) and futex_wake.
 *
 *  [P4] producer (flush, end of its batch): seq_cst load waiting; if set and
 *       anything committed is unread, the wake of [P3] whatever wake_bytes.
 *       A consumer that set waiting after our load saw the committed
 *       prod_pos in [C4] and did not sleep.
 *
 * wake_bytes is a hint: the consumer stores it relaxed before the seq_cst
 * store of waiting in [C4], which publishes it to a producer whose seq_cst
 * load reads waiting = 1. A stale value only moves the wake to the [C4]
 * deadline or to [P4].
 *
 * Clearing waiting (relaxed, by the consumer after [C4] or by kick) needs no
 * pair: a producer that still reads 1 does one spare wake, and the next [C4]
 * reads the new wake_seq first. kick [K1] clears it and wakes the consumer
 * whatever it asked for; the supervisor uses it so a sleeping stage reads its
 * drain command at once.
 *
 * The four seq_cst accesses sit in one total order, which makes it
 * impossible for both sides to miss each other (no standalone fences, so
 * ThreadSanitizer can check the handshake too):
 * either the consumer sees the new prod_pos and does not sleep, or the
 * producer sees waiting = 1 and bumps wake_seq, after which futex_wait on the
 * old seq returns at once. The exchange makes one wake per sleep at most, and
 * wake_bytes lets a consumer ask for a wake only after a batch has built up;
 * its deadline covers what is left below the threshold. At 50 records/s a
 * consumer therefore wakes on its deadline, not per record.
 *
 * Crash and restart (the supervisor makes sure only one process per side is
 * alive at a time):
 *  - a producer killed between reserve and commit published nothing; its
 *    successor opens at prod_pos and overwrites the half-written bytes;
 *  - a consumer killed anywhere resumes at cons_pos: every record it did not
 *    release is delivered again, none that it released is;
 *  - cons_mark is stored (relaxed) just before cons_pos [C5]; after a crash
 *    it may be ahead of cons_pos by the records of one batch, never behind.
 *    Stages store the highest sequence number they passed on in it, so a
 *    restarted stage skips records it already forwarded (exactly once).
 *
 * Prefault [P0]/[C0]: open_prod() and open_cons() touch every page of the
 * data area once through this process's own mapping, the producer with a
 * write, the consumer with a read. MAP_POPULATE fills the page tables, but on
 * a shadow-paging guest (the PVM/Firecracker VMs this runs on) the first
 * access of each page by each process still costs a hypervisor fault, ~10 us:
 * without the touch the producer paid it per new page for the ring's whole
 * first lap (40 s of ring 0 at 49 Hz), 4-5 us per capture record
 * (docs/bench.md, "First touch"). The producer's write is a compare-exchange
 * of the byte with itself, which cannot change a byte the consumer may be
 * reading (a restarted producer, records still in flight); the consumer's
 * read discards its value. Both are deliberate races on the value, hidden
 * from ThreadSanitizer.
 *
 * Hostile or corrupt memory: every length and position read from the shared
 * area is bounds-checked against data_size before use; a violation returns
 * -EBADMSG and is never followed.
 */
#include "ring.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static bool is_pow2(uint64_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

static int ring_check_desc(const struct shm_ring_ctrl *ctrl, uint64_t mem_size)
{
	uint64_t size;

	if (mem_size < shm_ring__mem_size(SHM_RING_MIN_DATA))
		return -EINVAL;
	if (ctrl->magic != SHM_RING_MAGIC)
		return -EBADMSG;
	size = ctrl->data_size;
	if (!is_pow2(size) || size < SHM_RING_MIN_DATA || ctrl->data_off != SHM_RING_CTRL_SIZE ||
	    size > mem_size - SHM_RING_CTRL_SIZE)
		return -EBADMSG;
	return 0;
}

int shm_ring__format(void *mem, uint64_t mem_size, uint64_t initial_pos)
{
	struct shm_ring_ctrl *ctrl = mem;
	uint64_t size;

	if (!mem || ((uintptr_t)mem & 63) || mem_size <= SHM_RING_CTRL_SIZE ||
	    (initial_pos & (SHM_REC_ALIGN - 1)))
		return -EINVAL;
	size = mem_size - SHM_RING_CTRL_SIZE;
	if (!is_pow2(size) || size < SHM_RING_MIN_DATA)
		return -EINVAL;

	memset(ctrl, 0, SHM_RING_CTRL_SIZE);
	ctrl->data_size = size;
	ctrl->data_off = SHM_RING_CTRL_SIZE;
	ctrl->prod_pos = initial_pos;
	ctrl->cons_pos = initial_pos;
	ctrl->wake_bytes = 1;
	/* [F1] Readers check the magic last; publish it last. */
	__atomic_store_n(&ctrl->magic, SHM_RING_MAGIC, __ATOMIC_RELEASE);
	return 0;
}

int shm_ring__validate(const void *mem, uint64_t mem_size)
{
	const struct shm_ring_ctrl *ctrl = mem;
	uint64_t prod, cons;
	int r;

	r = ring_check_desc(ctrl, mem_size);
	if (r < 0)
		return r;
	/* [V1] pairs with [P1] and [C3]; a snapshot for the bounds check only. */
	prod = __atomic_load_n(&ctrl->prod_pos, __ATOMIC_ACQUIRE);
	cons = __atomic_load_n(&ctrl->cons_pos, __ATOMIC_ACQUIRE);
	if (prod - cons > ctrl->data_size)
		return -EBADMSG;
	if ((prod | cons) & (SHM_REC_ALIGN - 1))
		return -EBADMSG;
	return 0;
}

/* [P0]/[C0]: one access per page of the data area, the value unchanged. */
#define RING_TOUCH_STRIDE 4096u /* the smallest page size */

__attribute__((no_sanitize("thread"))) static void ring_prefault(uint8_t *data, uint64_t size,
								 bool write)
{
	uint64_t sum = 0;

	for (uint64_t off = 0; off < size; off += RING_TOUCH_STRIDE) {
		uint8_t *b = data + off, v = __atomic_load_n(b, __ATOMIC_RELAXED);

		if (write)
			__atomic_compare_exchange_n(b, &v, v, false, __ATOMIC_RELAXED,
						    __ATOMIC_RELAXED);
		sum += v;
	}
	__asm__ volatile("" : : "r"(sum));
}

int shm_ring__open_prod(struct shm_ring_prod *p, void *mem, uint64_t mem_size)
{
	struct shm_ring_ctrl *ctrl = mem;
	int r;

	r = shm_ring__validate(mem, mem_size);
	if (r < 0)
		return r;
	memset(p, 0, sizeof(*p));
	p->ctrl = ctrl;
	p->data = (uint8_t *)mem + ctrl->data_off;
	p->size = ctrl->data_size;
	p->mask = p->size - 1;
	/* [O1] Resume at what was published; whatever a dead producer reserved is gone. */
	p->head = shm__load_relaxed(&ctrl->prod_pos);
	p->committed = p->head;
	p->last_rec = p->head;
	/* [P2] pairs with [C3]. */
	p->cons_cache = shm__load_acquire(&ctrl->cons_pos);
	p->max_len = shm_ring__max_payload(p->size);
	ring_prefault(p->data, p->size, true);
	return 0;
}

int shm_ring__reserve_slow(struct shm_ring_prod *p, uint32_t len, uint16_t type, void **ret_data)
{
	uint64_t total = shm__rec_total(len);
	uint64_t off = p->head & p->mask;
	uint64_t contig = p->size - off;
	uint64_t need = total <= contig ? total : contig + total;
	uint8_t *rec;

	if (len > p->max_len)
		return -EMSGSIZE;

	if (p->head + need - p->cons_cache > p->size) {
		/* [P2] pairs with [C3]: the consumer is done with every byte below cons_pos. */
		uint64_t cons = shm__load_acquire(&p->ctrl->cons_pos);

		/* Unsigned distance: a scribbled cons_pos shows up as > size. */
		if (p->committed - cons > p->size)
			return -EBADMSG;
		p->cons_cache = cons;
		if (p->head + need - cons > p->size)
			return -ENOBUFS;
	}

	if (need != total) {
		/* Fill the tail with a PAD record; the real one starts at offset 0. */
		rec = p->data + off;
		__builtin_memcpy(rec,
				 &(uint64_t){shm__hdr_word((uint32_t)(contig - SHM_REC_HDR_SIZE),
							   SHM_REC_TYPE_PAD)},
				 8);
		p->head += contig;
		off = 0;
	}

	rec = p->data + off;
	__builtin_memcpy(rec, &(uint64_t){shm__hdr_word(len, type)}, 8);
	p->last_rec = p->head;
	p->head += total;
	*ret_data = rec + SHM_REC_HDR_SIZE;
	return 0;
}

int shm_ring__peek_slow(struct shm_ring_cons *c, struct shm_msg *ret)
{
	for (;;) {
		uint64_t avail, off, contig, total;
		struct shm_rec hdr;

		if (c->tail == c->prod_cache) {
			/* [C1] pairs with [P1]: records below prod_pos are fully written. */
			uint64_t prod = shm__load_acquire(&c->ctrl->prod_pos);

			if (prod - c->tail > c->size)
				return -EBADMSG;
			c->prod_cache = prod;
			if (prod == c->tail)
				return -EAGAIN;
		}

		avail = c->prod_cache - c->tail;
		off = c->tail & c->mask;
		contig = c->size - off;
		if (avail < SHM_REC_HDR_SIZE)
			return -EBADMSG;
		__builtin_memcpy(&hdr, c->data + off, sizeof(hdr));

		if (hdr.type == SHM_REC_TYPE_PAD) {
			if ((uint64_t)hdr.len + SHM_REC_HDR_SIZE != contig || contig > avail)
				return -EBADMSG;
			c->tail += contig;
			continue;
		}
		total = shm__rec_total(hdr.len);
		if (total > avail || total > contig)
			return -EBADMSG;

		ret->data = c->data + off + SHM_REC_HDR_SIZE;
		ret->len = hdr.len;
		ret->type = hdr.type;
		ret->flags = hdr.flags;
		c->tail += total;
		return 0;
	}
}

int shm_ring__open_cons(struct shm_ring_cons *c, void *mem, uint64_t mem_size)
{
	struct shm_ring_ctrl *ctrl = mem;
	int r;

	r = shm_ring__validate(mem, mem_size);
	if (r < 0)
		return r;
	memset(c, 0, sizeof(*c));
	c->ctrl = ctrl;
	c->data = (uint8_t *)mem + ctrl->data_off;
	c->size = ctrl->data_size;
	c->mask = c->size - 1;
	/* [O1] Resume at the last released record: nothing released comes back. */
	c->tail = shm__load_relaxed(&ctrl->cons_pos);
	c->prod_cache = c->tail;
	ring_prefault(c->data, c->size, false);
	return 0;
}

uint64_t shm_ring__free_bytes_sp(struct shm_ring_prod *p)
{
	/* [P2] */
	uint64_t cons = shm__load_acquire(&p->ctrl->cons_pos);

	if (p->head - cons > p->size)
		return 0;
	p->cons_cache = cons;
	return p->size - (p->head - cons);
}

uint64_t shm_ring__mark_sc(const struct shm_ring_cons *c)
{
	/* [O1]/[C5]: only this side stores cons_mark. */
	return shm__load_relaxed(&c->ctrl->cons_mark);
}

static long futex(uint32_t *uaddr, int op, uint32_t val, const struct timespec *ts)
{
	/* Shared (not FUTEX_PRIVATE_FLAG): the word lives in a MAP_SHARED memfd. */
	return syscall(SYS_futex, uaddr, op, val, ts, NULL, 0);
}

static void ring_wake(struct shm_ring_ctrl *ctrl)
{
	/* Pairs with the load-acquire of wake_seq in [C4]: a sleeper that read the
	 * old value gets EAGAIN from futex_wait or is woken by the call below. */
	__atomic_fetch_add(&ctrl->wake_seq, 1, __ATOMIC_RELEASE);
	futex(&ctrl->wake_seq, FUTEX_WAKE, INT_MAX, NULL);
}

void shm_ring__wake_slow(struct shm_ring_prod *p)
{
	struct shm_ring_ctrl *ctrl = p->ctrl;
	/* [P3] The consumer is (about to be) asleep, so cons_pos is still. */
	uint64_t cons = shm__load_acquire(&ctrl->cons_pos);
	/* A hint published by the seq_cst store of waiting in [C4]. */
	uint64_t want = shm__load_relaxed(&ctrl->wake_bytes);

	if (p->committed - cons < (want ? want : 1))
		return; /* below its batch threshold: its deadline will fetch it */
	/* [P3] Exactly one wake per sleep: whoever clears waiting does the wake. */
	if (__atomic_exchange_n(&ctrl->waiting, 0, __ATOMIC_ACQ_REL) != 0)
		ring_wake(ctrl);
}

void shm_ring__flush_sp(struct shm_ring_prod *p)
{
	struct shm_ring_ctrl *ctrl = p->ctrl;

	/* [P4] */
	if (!__atomic_load_n(&ctrl->waiting, __ATOMIC_SEQ_CST))
		return;
	/* [P2] pairs with [C3]. */
	if (p->committed == shm__load_acquire(&ctrl->cons_pos))
		return; /* it has read everything */
	/* [P3] one wake per sleep, as in wake_slow. */
	if (__atomic_exchange_n(&ctrl->waiting, 0, __ATOMIC_ACQ_REL) != 0)
		ring_wake(ctrl);
}

void shm_ring__kick(void *mem)
{
	struct shm_ring_ctrl *ctrl = mem;

	/* [K1] relaxed: a producer that still reads 1 does one spare wake. */
	__atomic_store_n(&ctrl->waiting, 0, __ATOMIC_RELAXED);
	ring_wake(ctrl);
}

bool shm_ring__asleep(const void *mem)
{
	const struct shm_ring_ctrl *ctrl = mem;

	/* A snapshot for the supervisor's hang check; no ordering needed. */
	return __atomic_load_n(&ctrl->waiting, __ATOMIC_RELAXED) != 0;
}

int shm_ring__wait_sc(struct shm_ring_cons *c, uint64_t wake_bytes, int timeout_ms)
{
	struct shm_ring_ctrl *ctrl = c->ctrl;
	struct timespec ts, *tsp = NULL;
	uint32_t seq;
	uint64_t prod;
	long r;

	if (wake_bytes == 0)
		wake_bytes = 1;
	if (wake_bytes > c->size / 2)
		wake_bytes = c->size / 2;

	/* [C4] */
	seq = __atomic_load_n(&ctrl->wake_seq, __ATOMIC_ACQUIRE);
	/* Published by the seq_cst store of waiting below. */
	shm__store_relaxed(&ctrl->wake_bytes, wake_bytes);
	/* seq_cst store of waiting, then seq_cst load of prod_pos: mirror of [P3]. */
	__atomic_store_n(&ctrl->waiting, 1, __ATOMIC_SEQ_CST);
	prod = __atomic_load_n(&ctrl->prod_pos, __ATOMIC_SEQ_CST);
	/* Clearing waiting is relaxed: a producer that still reads 1 does one spare wake. */
	if (prod - c->tail > c->size) {
		__atomic_store_n(&ctrl->waiting, 0, __ATOMIC_RELAXED);
		return -EBADMSG;
	}
	if (prod - c->tail >= wake_bytes) {
		__atomic_store_n(&ctrl->waiting, 0, __ATOMIC_RELAXED);
		return 0;
	}

	if (timeout_ms >= 0) {
		ts.tv_sec = timeout_ms / 1000;
		ts.tv_nsec = (long)(timeout_ms % 1000) * 1000000L;
		tsp = &ts;
	}
	r = futex(&ctrl->wake_seq, FUTEX_WAIT, seq, tsp);
	__atomic_store_n(&ctrl->waiting, 0, __ATOMIC_RELAXED);
	if (r < 0) {
		if (errno == EAGAIN)
			return 0; /* woken between our read of seq and the syscall */
		if (errno == ETIMEDOUT)
			return -ETIMEDOUT;
		return -errno;
	}
	return 0;
}
