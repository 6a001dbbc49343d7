// SPDX-License-Identifier: MIT
#include "cap_pyname.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common/hash.h"
#include "common/macro.h"
#include "common/pycode.h"
#include "common/timeutil.h"
#include "shm/counters.h"
#include "shm/records.h"

#define PID_BITS (1u << 16) /* a bit per pid % PID_BITS: may it hold slots */

/* The code address's low 48 bits (x86-64 and arm64 user space), and in the
 * 16 above them when it was sent: records sent so far / SENT_UNIT. */
#define SENT_CODE_MASK ((1ull << 48) - 1)
#define SENT_UNIT      16
#define SENT_OLD       (CAP_PYNAME_RESEND / SENT_UNIT) /* stamp age: send it again */
/*
 * That stamp wraps every 2^16 * SENT_UNIT (~1 M) records: an entry left
 * unsampled that long would look fresh again. Every SENT_SWEEP records the
 * entries past SENT_OLD go (sent_sweep()), so none is ever older than
 * SENT_OLD + SENT_SWEEP / SENT_UNIT (2^14 + 64) stamps, and the 16-bit
 * difference is its true age. 4096 entries per 262,144 records.
 */
#define SENT_SWEEP (SENT_UNIT << 14)

struct sent {
	uint64_t code_at;
	uint32_t pid; /* 0: free */
	uint32_t check;
};
_Static_assert(sizeof(struct sent) * CAP_PYNAME_WAYS == 64, "a bucket is a cache line");

/* A process code objects were sent for lately: CLOCK_MONOTONIC of its last. */
struct busy {
	uint64_t ns;
	uint32_t pid; /* 0: free */
};

struct cap_pyname {
	struct sent slots[CAP_PYNAME_SLOTS];
	uint64_t pids[PID_BITS / 64];
	struct busy busy[CAP_PYNAME_BUSY_PIDS];
	struct shm_stage *st;	  /* its CAP_CNT_PYCODE_* counters, NULL: none */
	uint64_t spent_ns;	  /* reading code objects since the poll began */
	uint64_t sends;		  /* CPA_REC_PYCODE records sent */
	cap_pyname_room_fn *room; /* past the base budget: room for more reads? */
	void *room_ctx;		  /* its argument */
	uint64_t max_ns;	  /* ... up to this much of reads a poll */
};

static void cnt_add(struct cap_pyname *n, unsigned int idx)
{
	if (n->st)
		shm_stage__cnt_add(n->st, idx, 1);
}

/* Code objects sent for pid now: its entry, else a free or the oldest one. */
static void busy_mark(struct cap_pyname *n, uint32_t pid)
{
	struct busy *b = &n->busy[0];

	for (unsigned int i = 0; i < CAP_PYNAME_BUSY_PIDS; i++) {
		if (n->busy[i].pid == pid) {
			b = &n->busy[i];
			break;
		}
		if (!n->busy[i].pid || n->busy[i].ns < b->ns)
			b = &n->busy[i];
	}
	b->pid = pid;
	b->ns = clock_ns(CLOCK_MONOTONIC);
}

bool cap_pyname__soon(const struct cap_pyname *n, uint64_t now_ns)
{
	if (!n)
		return false;
	for (unsigned int i = 0; i < CAP_PYNAME_BUSY_PIDS; i++)
		if (n->busy[i].pid && now_ns - n->busy[i].ns < CAP_PYNAME_BUSY_NS)
			return true;
	return false;
}

int cap_pyname__new(struct cap_pyname **ret, struct shm_stage *st)
{
	struct cap_pyname *n = calloc(1, sizeof(*n));

	if (!n)
		return -ENOMEM;
	n->st = st;
	*ret = n;
	return 0;
}

void cap_pyname__free(struct cap_pyname *n)
{
	free(n);
}

void cap_pyname__poll(struct cap_pyname *n)
{
	if (n)
		n->spent_ns = 0;
}

void cap_pyname__set_room(struct cap_pyname *n, cap_pyname_room_fn *room, void *ctx,
			  uint64_t max_ns)
{
	n->room = room;
	n->room_ctx = ctx;
	n->max_ns = max_ns;
}

/* May the poll read one more code object: within its base budget, or past it
 * while the buffers have room (counted). */
static bool budget_left(struct cap_pyname *n)
{
	if (n->spent_ns < CAP_PYNAME_BUDGET_NS)
		return true;
	if (!n->room || n->spent_ns >= n->max_ns || !n->room(n->room_ctx))
		return false;
	cnt_add(n, CAP_CNT_PYCODE_PAST_BUDGET);
	return true;
}

/* The stamp of a send now. */
static uint16_t sent_at(const struct cap_pyname *n)
{
	return (uint16_t)(n->sends / SENT_UNIT);
}

/* Sent again when sampled: its stamp SENT_OLD or more ago (wrap-safe while
 * sent_sweep() runs). */
static bool sent_old(const struct cap_pyname *n, const struct sent *s)
{
	return (uint16_t)(sent_at(n) - (s->code_at >> 48)) >= SENT_OLD;
}

/* The entries a sample would send again go: free ways, and no stamp left to
 * wrap. */
static void sent_sweep(struct cap_pyname *n)
{
	for (size_t i = 0; i < CAP_PYNAME_SLOTS; i++)
		if (n->slots[i].pid && sent_old(n, &n->slots[i]))
			n->slots[i] = (struct sent){0};
}

/* A full bucket's way sent longest ago: the one symd is likeliest to have
 * let go, and to be sent again anyway (a way taken in turn could be one this
 * very sample sent). */
static unsigned int sent_oldest(const struct cap_pyname *n, const struct sent *b)
{
	uint16_t now = sent_at(n), oldest = 0;
	unsigned int w = 0;

	for (unsigned int k = 0; k < CAP_PYNAME_WAYS; k++) {
		uint16_t age = (uint16_t)(now - (b[k].code_at >> 48));

		if (age > oldest) {
			oldest = age;
			w = k;
		}
	}
	return w;
}

/* One record sent. */
static void sent_count(struct cap_pyname *n)
{
	if (++n->sends % SENT_SWEEP == 0)
		sent_sweep(n);
}

void cap_pyname__count_sends(struct cap_pyname *n, uint64_t k)
{
	while (k--)
		sent_count(n);
}

void cap_pyname__drop_pid(struct cap_pyname *n, uint32_t pid)
{
	uint64_t bit = 1ull << (pid % 64), *w;

	if (!n)
		return;
	for (unsigned int i = 0; i < CAP_PYNAME_BUSY_PIDS; i++)
		if (n->busy[i].pid == pid)
			n->busy[i] = (struct busy){0}; /* gone: nothing more to read */
	w = &n->pids[(pid % PID_BITS) / 64];
	if (!(*w & bit))
		return;
	*w &= ~bit;
	for (size_t i = 0; i < CAP_PYNAME_SLOTS; i++)
		if (n->slots[i].pid == pid)
			n->slots[i] = (struct sent){0};
		else if (n->slots[i].pid % PID_BITS == pid % PID_BITS)
			*w |= bit; /* another pid of the same bit keeps it */
}

/* pycode_read_fn: another process's memory, one syscall. */
static int vm_read(void *ctx, const struct pycode_seg *segs, unsigned int n)
{
	pid_t pid = (pid_t)(uintptr_t)ctx;
	struct iovec local[8], remote[8];
	size_t want = 0;
	ssize_t r;

	if (n > ARRAY_SIZE(local))
		return -EINVAL;
	for (unsigned int i = 0; i < n; i++) {
		local[i] = (struct iovec){.iov_base = segs[i].buf, .iov_len = segs[i].len};
		remote[i] = (struct iovec){.iov_base = (void *)(uintptr_t)segs[i].addr,
					   .iov_len = segs[i].len};
		want += segs[i].len;
	}
	r = process_vm_readv(pid, local, n, remote, n, 0);
	if (r == (ssize_t)want)
		return 0;
	return r < 0 && errno == ESRCH ? -ESRCH : -EFAULT;
}

/* Read pid's code object and emit it. -ESRCH: the process is gone. */
static int send_code(struct cap_pyname *n, struct cap_emit *e, uint32_t pid,
		     const struct pycode_layout *l, uint64_t code)
{
	struct pycode_info info;
	struct cpa_pycode *c;
	size_t ql, fl;
	int r;

	r = pycode__read(vm_read, (void *)(uintptr_t)pid, l, code, CPA_PYCODE_MAX_LINETAB, &info);
	if (r < 0) {
		cnt_add(n, CAP_CNT_PYCODE_FAILED);
		return r;
	}
	/* A longer line table is left to symd's own read. */
	if (info.linetab_len != info.linetab_size) {
		pycode__info_clear(&info);
		return 0;
	}
	ql = MIN(strlen(info.qualname), (size_t)UINT16_MAX);
	fl = MIN(strlen(info.filename), (size_t)UINT16_MAX);
	r = cap_emit__reserve_seq(e, CPA_REC_PYCODE,
				  (uint32_t)(sizeof(*c) + ql + fl + info.linetab_len), (void **)&c);
	if (r == 0) {
		uint8_t *p = (uint8_t *)(c + 1);

		c->code = code;
		c->pid = pid;
		c->check = info.check;
		c->firstlineno = info.firstlineno;
		c->linetab_len = (uint32_t)info.linetab_len;
		c->qualname_len = (uint16_t)ql;
		c->filename_len = (uint16_t)fl;
		c->py_minor = (uint8_t)l->minor;
		memcpy(p, info.qualname, ql);
		memcpy(p + ql, info.filename, fl);
		memcpy(p + ql + fl, info.linetab, info.linetab_len);
		cnt_add(n, CAP_CNT_PYCODE_SENT);
		sent_count(n);
		busy_mark(n, pid);
	}
	pycode__info_clear(&info);
	return r;
}

void cap_pyname__sample(struct cap_pyname *n, struct cap_emit *e, const struct cpa_bpf_sample *bs,
			size_t size)
{
	const struct pycode_layout *l;
	const struct cpa_bpf_pyframe *pf;
	uint32_t npy = bs->py_n;

	if (likely(!npy) || !n || npy > CPA_BPF_MAX_PYFRAMES || bs->stack_len > size ||
	    size < sizeof(*bs) + bs->stack_len + sizeof(*pf) * npy)
		return;
	l = pycode__layout(bs->py_ver & 0xff);
	if (!l)
		return;
	pf = (const struct cpa_bpf_pyframe *)(bs->stack + bs->stack_len);
	for (uint32_t i = 0; i < npy; i++) {
		struct cpa_bpf_pyframe f;
		unsigned int w, again = CAP_PYNAME_WAYS;
		uint64_t code, t0, at;
		struct sent *b;
		int r;

		memcpy(&f, &pf[i], sizeof(f));
		code = f.code & ~CPA_BPF_PY_ENTRY;
		b = &n->slots[hash64_mix(code ^ ((uint64_t)bs->pid << 47) ^ f.check) %
			      (CAP_PYNAME_SLOTS / CAP_PYNAME_WAYS) * CAP_PYNAME_WAYS];
		for (w = 0; w < CAP_PYNAME_WAYS; w++)
			if (b[w].pid == bs->pid && b[w].check == f.check &&
			    ((b[w].code_at ^ code) & SENT_CODE_MASK) == 0)
				break;
		/* Sent, and not too many records ago for symd to hold it still. */
		if (w < CAP_PYNAME_WAYS && !sent_old(n, &b[w]))
			continue;
		if (w < CAP_PYNAME_WAYS)
			again = w; /* read and sent again, in its way */
		if (!budget_left(n)) {
			cnt_add(n, CAP_CNT_PYCODE_DEFERRED); /* the rest: symd's own read */
			return;
		}
		t0 = clock_ns(CLOCK_MONOTONIC);
		r = send_code(n, e, bs->pid, l, code);
		n->spent_ns += clock_ns(CLOCK_MONOTONIC) - t0;
		if (r == -ESRCH)
			return; /* gone: symd says so */
		if (r == -ENOBUFS || r == -EOVERFLOW || r == -EAGAIN)
			return; /* ring 0 full: the next sample tries again */
		/* Sent, or not a code object to read (symd tries itself): not again.
		 * Into a free way of its bucket, else the next one in turn. */
		w = again;
		if (w == CAP_PYNAME_WAYS)
			for (w = 0; w < CAP_PYNAME_WAYS && b[w].pid; w++)
				;
		if (w == CAP_PYNAME_WAYS)
			w = sent_oldest(n, b);
		at = (code & SENT_CODE_MASK) | (uint64_t)sent_at(n) << 48;
		b[w] = (struct sent){.code_at = at, .pid = bs->pid, .check = f.check};
		n->pids[(bs->pid % PID_BITS) / 64] |= 1ull << (bs->pid % 64);
	}
}
