// SPDX-License-Identifier: MIT
#include "cap_perf.h"

#include <asm/perf_regs.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macro.h"
#include "common/procroot.h"

/* User registers asked for, in the bit order perf writes them. */
/* Every general-purpose register (a CFA rule may name any); the kernel
 * writes them in mask-bit order: ax bx cx dx si di bp sp ip r8..r15. */
#define CAP_PERF_REGS                                                                           \
	((1ull << PERF_REG_X86_AX) | (1ull << PERF_REG_X86_BX) | (1ull << PERF_REG_X86_CX) |    \
	 (1ull << PERF_REG_X86_DX) | (1ull << PERF_REG_X86_SI) | (1ull << PERF_REG_X86_DI) |    \
	 (1ull << PERF_REG_X86_BP) | (1ull << PERF_REG_X86_SP) | (1ull << PERF_REG_X86_IP) |    \
	 (1ull << PERF_REG_X86_R8) | (1ull << PERF_REG_X86_R9) | (1ull << PERF_REG_X86_R10) |   \
	 (1ull << PERF_REG_X86_R11) | (1ull << PERF_REG_X86_R12) | (1ull << PERF_REG_X86_R13) | \
	 (1ull << PERF_REG_X86_R14) | (1ull << PERF_REG_X86_R15))
#define CAP_PERF_NREGS	    8
#define CAP_PERF_MAX_STACK  65528u /* sample_stack_user: u64 aligned, below U16_MAX */
#define CAP_PERF_ID_TRAILER 24	   /* sample_id_all: TID + TIME + CPU */
#define CAP_COMM_CACHE	    4096   /* direct-mapped tid -> comm */
#define CAP_PERF_MAX_REC    65536

struct cap_perf_cpu {
	int fd;
	void *base; /* control page + data */
	uint8_t *data;
	uint64_t size; /* data bytes, power of two */
	/* drain cursor */
	uint64_t head, tail;
	struct perf_event_header next;
	uint64_t next_time;
	bool has_next;
};

struct comm_slot {
	uint32_t tid;
	char comm[CPA_BPF_COMM_LEN];
};

struct cap_perf {
	struct cap_perf_opts o;
	char comm_filter[CPA_BPF_COMM_LEN];
	uint64_t sample_type;
	struct cap_perf_cpu *cpus;
	unsigned int n_cpus;
	int epfd;
	size_t page;
	cap_bpf_record_fn fn;
	void *ctx;
	struct cpa_bpf_sample *bs; /* scratch in the BPF layout */
	uint32_t bs_size;
	uint8_t rec[CAP_PERF_MAX_REC]; /* a record that wrapped the ring, made linear */
	uint64_t stats[CPA_BPF_STAT_MAX];
	struct comm_slot comms[CAP_COMM_CACHE];
};

static const char *comm_of(struct cap_perf *p, uint32_t tid)
{
	struct comm_slot *s = &p->comms[tid % CAP_COMM_CACHE];
	char path[64], buf[64];
	ssize_t n;
	int fd;

	if (s->tid == tid && tid)
		return s->comm;
	/* A miss costs two syscalls; comm changes arrive as PERF_RECORD_COMM. */
	memset(s, 0, sizeof(*s));
	s->tid = tid;
	snprintf(path, sizeof(path), "/proc/%u/comm", tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return s->comm;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		buf[n] = '\0';
		buf[strcspn(buf, "\n")] = '\0';
		memcpy(s->comm, buf, MIN(strlen(buf), (size_t)CPA_BPF_COMM_LEN - 1));
	}
	return s->comm;
}

static void comm_set(struct cap_perf *p, uint32_t tid, const char *comm, size_t max)
{
	struct comm_slot *s = &p->comms[tid % CAP_COMM_CACHE];

	memset(s, 0, sizeof(*s));
	s->tid = tid;
	memcpy(s->comm, comm, MIN(max, (size_t)CPA_BPF_COMM_LEN - 1));
	s->comm[strnlen(s->comm, CPA_BPF_COMM_LEN - 1)] = '\0';
}

static bool wanted(struct cap_perf *p, uint32_t pid, uint32_t tid)
{
	if (p->o.target_tgid && pid != p->o.target_tgid)
		return false;
	if (!p->comm_filter[0])
		return true;
	return !strcmp(comm_of(p, tid), p->comm_filter) || !strcmp(comm_of(p, pid), p->comm_filter);
}

/* Bounds-checked reader over one record. */
struct rd {
	const uint8_t *p, *end;
	bool bad;
};

static uint64_t rd64(struct rd *r)
{
	uint64_t v = 0;

	if (r->end - r->p < 8) {
		r->bad = true;
		return 0;
	}
	memcpy(&v, r->p, 8);
	r->p += 8;
	return v;
}

static const uint8_t *rd_bytes(struct rd *r, uint64_t n)
{
	const uint8_t *q = r->p;

	if ((uint64_t)(r->end - r->p) < n) {
		r->bad = true;
		return NULL;
	}
	r->p += n;
	return q;
}

static int on_sample(struct cap_perf *p, const struct perf_event_header *h)
{
	struct rd r = {(const uint8_t *)(h + 1), (const uint8_t *)h + h->size, false};
	struct cpa_bpf_sample *bs = p->bs;
	uint64_t v, nr, abi = PERF_SAMPLE_REGS_ABI_NONE, dyn = 0, ctxmark = 0;
	const uint8_t *ips, *stack = NULL;
	uint32_t pid, tid, nk = 0, nu = 0;

	(void)rd64(&r); /* ip: also the first callchain entry */
	v = rd64(&r);
	pid = (uint32_t)v;
	tid = (uint32_t)(v >> 32);
	bs->time_ns = rd64(&r);
	bs->cpu = (uint32_t)rd64(&r);
	nr = rd64(&r);
	ips = rd_bytes(&r, nr * 8);
	if (p->sample_type & PERF_SAMPLE_REGS_USER) {
		abi = rd64(&r);
		if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
			bs->regs.ax = rd64(&r);
			bs->regs.bx = rd64(&r);
			bs->regs.cx = rd64(&r);
			bs->regs.dx = rd64(&r);
			bs->regs.si = rd64(&r);
			bs->regs.di = rd64(&r);
			bs->regs.bp = rd64(&r);
			bs->regs.sp = rd64(&r);
			bs->regs.ip = rd64(&r);
			bs->regs.r8 = rd64(&r);
			bs->regs.r9 = rd64(&r);
			bs->regs.r10 = rd64(&r);
			bs->regs.r11 = rd64(&r);
			bs->regs.r12 = rd64(&r);
			bs->regs.r13 = rd64(&r);
			bs->regs.r14 = rd64(&r);
			bs->regs.r15 = rd64(&r);
		}
	}
	if (p->sample_type & PERF_SAMPLE_STACK_USER) {
		v = rd64(&r);
		if (v) {
			stack = rd_bytes(&r, v);
			dyn = rd64(&r);
			if (dyn > v)
				r.bad = true;
		}
	}
	bs->cgroup_id = (p->sample_type & PERF_SAMPLE_CGROUP) ? rd64(&r) : 0;
	if (r.bad || nr > 4096)
		return p->fn(p->ctx, h, 0); /* an empty record: counted as corrupt */

	if (tid == 0 && !p->o.with_idle)
		return 0;
	if (!wanted(p, pid, tid)) {
		p->stats[CPA_BPF_STAT_FILTERED]++;
		return 0;
	}

	bs->type = CPA_BPF_REC_SAMPLE;
	bs->flags = 0;
	bs->pid = pid;
	bs->tid = tid;
	memcpy(bs->comm, comm_of(p, tid), CPA_BPF_COMM_LEN);
	memcpy(bs->pcomm, comm_of(p, pid), CPA_BPF_COMM_LEN);
	if ((h->misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL)
		bs->flags |= CPA_BPF_F_IN_KERNEL;

	/* The callchain is one array with context markers between the parts. */
	for (uint64_t i = 0; i < nr; i++) {
		memcpy(&v, ips + 8 * i, 8);
		if (v >= (uint64_t)PERF_CONTEXT_MAX) {
			ctxmark = v;
			continue;
		}
		if (ctxmark == (uint64_t)PERF_CONTEXT_KERNEL && nk < CPA_BPF_MAX_KSTACK)
			bs->kstack[nk++] = v;
		else if (ctxmark == (uint64_t)PERF_CONTEXT_USER && nu < CPA_BPF_MAX_UFP)
			bs->ufp[nu++] = v;
	}
	bs->kstack_len = (int32_t)(8 * nk);
	bs->ufp_len = (int32_t)(8 * nu);

	bs->stack_len = 0;
	if (pid == 0 || (!p->o.kernel_only && abi == PERF_SAMPLE_REGS_ABI_NONE)) {
		bs->flags |= CPA_BPF_F_KERNEL_THREAD;
		memset(&bs->regs, 0, sizeof(bs->regs));
	} else if (!p->o.kernel_only) {
		bs->flags |= CPA_BPF_F_USER_REGS;
		if (p->sample_type & PERF_SAMPLE_STACK_USER) {
			dyn = MIN(dyn, (uint64_t)p->o.stack_size);
			if (stack && dyn)
				memcpy(bs->stack, stack, dyn);
			bs->stack_len = (uint32_t)dyn;
			if (!dyn) {
				bs->flags |= CPA_BPF_F_NO_USTACK;
				p->stats[CPA_BPF_STAT_NO_USTACK]++;
			} else if (dyn < p->o.stack_size) {
				bs->flags |= CPA_BPF_F_USTACK_TRUNC;
				p->stats[CPA_BPF_STAT_USTACK_TRUNC]++;
			}
		}
	}
	return p->fn(p->ctx, bs, p->bs_size);
}

static int on_task(struct cap_perf *p, uint32_t kind, uint32_t pid, uint32_t tid, uint64_t time_ns,
		   const char *comm)
{
	struct cpa_bpf_task t = {
		.type = CPA_BPF_REC_TASK,
		.kind = kind,
		.time_ns = time_ns,
		.pid = pid,
		.tid = tid,
	};

	if (!wanted(p, pid, tid))
		return 0;
	memcpy(t.comm, comm, CPA_BPF_COMM_LEN);
	/* The BPF exec event's mount namespace, read while it (mostly) lives. */
	if (kind == CPA_BPF_TASK_EXEC)
		t.mnt_ns = proc_mnt_ns(NULL, pid);
	return p->fn(p->ctx, &t, sizeof(t));
}

static int on_record(struct cap_perf *p, const struct perf_event_header *h)
{
	const uint8_t *b = (const uint8_t *)(h + 1);
	uint32_t u[4];
	uint64_t t;

	switch (h->type) {
	case PERF_RECORD_SAMPLE:
		return on_sample(p, h);
	case PERF_RECORD_LOST:
		if (h->size >= sizeof(*h) + 16) {
			memcpy(&t, b + 8, 8);
			p->stats[CPA_BPF_STAT_RB_LOST] += t;
		}
		return 0;
	case PERF_RECORD_COMM:
		if (h->size < sizeof(*h) + 8 + CAP_PERF_ID_TRAILER)
			return 0;
		memcpy(u, b, 8);
		comm_set(p, u[1], (const char *)b + 8,
			 h->size - sizeof(*h) - 8 - CAP_PERF_ID_TRAILER);
		if (!(h->misc & PERF_RECORD_MISC_COMM_EXEC) || u[0] != u[1])
			return 0;
		memcpy(&t, (const uint8_t *)h + h->size - CAP_PERF_ID_TRAILER + 8, 8);
		return on_task(p, CPA_BPF_TASK_EXEC, u[0], u[1], t, comm_of(p, u[1]));
	case PERF_RECORD_FORK:
		if (h->size < sizeof(*h) + 24)
			return 0;
		/* A new task has its parent's comm. Set it now: the tid may be a
		 * reused one whose old comm is still cached. */
		memcpy(u, b, 16);
		{
			char comm[CPA_BPF_COMM_LEN];

			memcpy(comm, comm_of(p, u[3]), sizeof(comm));
			comm_set(p, u[2], comm, sizeof(comm));
		}
		return 0;
	case PERF_RECORD_EXIT:
		if (h->size < sizeof(*h) + 24)
			return 0;
		memcpy(u, b, 16);
		memcpy(&t, b + 16, 8);
		/* perf reports every thread; the leader's exit stands for the process.
		 * Its comm stays cached: samples in other CPUs' rings may come later. */
		if (u[0] != u[2])
			return 0;
		return on_task(p, CPA_BPF_TASK_EXIT, u[0], u[2], t, comm_of(p, u[2]));
	default:
		return 0;
	}
}

/* Copy len bytes at ring position pos, across the wrap if need be. */
static void ring_copy(const struct cap_perf_cpu *c, uint64_t pos, void *dst, size_t len)
{
	uint64_t off = pos & (c->size - 1), first = MIN((uint64_t)len, c->size - off);

	memcpy(dst, c->data + off, first);
	memcpy((uint8_t *)dst + first, c->data, len - first);
}

/* Look at the next record of c: its header and its time. False when empty. */
static bool cursor_peek(struct cap_perf_cpu *c)
{
	struct perf_event_header *h = &c->next;

	if (c->head - c->tail < sizeof(*h))
		return false;
	ring_copy(c, c->tail, h, sizeof(*h));
	if (h->size < sizeof(*h) || h->size > c->head - c->tail) {
		c->tail = c->head; /* cannot happen with a sane kernel: resync */
		return false;
	}
	c->next_time = 0; /* no time: handle it first */
	if (h->type == PERF_RECORD_SAMPLE && h->size >= sizeof(*h) + 24)
		ring_copy(c, c->tail + sizeof(*h) + 16, &c->next_time, 8); /* after ip, pid/tid */
	else if (h->type != PERF_RECORD_SAMPLE && h->size >= sizeof(*h) + CAP_PERF_ID_TRAILER)
		ring_copy(c, c->tail + h->size - CAP_PERF_ID_TRAILER + 8, &c->next_time, 8);
	return true;
}

/*
 * Drain every CPU's ring in time order. Each ring is ordered, but a task's
 * rename (PERF_RECORD_COMM) may sit in one CPU's ring and its next samples
 * in another's: handling the rings one after the other would label those
 * samples with the old comm, and samples handled after the exit with none.
 */
static int drain_all(struct cap_perf *p)
{
	int n = 0, r = 0;

	for (unsigned int i = 0; i < p->n_cpus; i++) {
		struct cap_perf_cpu *c = &p->cpus[i];
		struct perf_event_mmap_page *mp = c->base;

		if (!mp)
			continue;
		/* Pairs with the kernel's smp_store_release of data_head. */
		c->head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
		c->tail = mp->data_tail;
		c->has_next = cursor_peek(c);
	}
	for (;;) {
		struct cap_perf_cpu *c = NULL;
		const struct perf_event_header *rec;

		for (unsigned int i = 0; i < p->n_cpus; i++)
			if (p->cpus[i].has_next && (!c || p->cpus[i].next_time < c->next_time))
				c = &p->cpus[i];
		if (!c)
			break;
		if ((c->tail & (c->size - 1)) + c->next.size <= c->size) {
			rec = (const struct perf_event_header *)(c->data +
								 (c->tail & (c->size - 1)));
		} else {
			ring_copy(c, c->tail, p->rec, c->next.size);
			rec = (const struct perf_event_header *)p->rec;
		}
		r = on_record(p, rec);
		c->tail += c->next.size;
		n++;
		if (r < 0)
			break;
		c->has_next = cursor_peek(c);
	}
	for (unsigned int i = 0; i < p->n_cpus; i++) {
		struct perf_event_mmap_page *mp = p->cpus[i].base;

		/* Pairs with the kernel's read of data_tail: our reads are done. */
		if (mp)
			__atomic_store_n(&mp->data_tail, p->cpus[i].tail, __ATOMIC_RELEASE);
	}
	return r < 0 ? r : n;
}

int cap_perf__poll(struct cap_perf *p, int timeout_ms)
{
	struct epoll_event ev[16];
	int r, n;

	r = epoll_wait(p->epfd, ev, ARRAY_SIZE(ev), timeout_ms);
	if (r < 0 && errno != EINTR)
		return -errno;
	n = drain_all(p);
	if (n < 0)
		return n;
	return r < 0 ? -EINTR : n;
}

static uint64_t data_pages(uint32_t freq, uint32_t stack_size, size_t page)
{
	/* Half a second of one CPU's samples, like the BPF ring buffer. */
	uint64_t want = (uint64_t)freq * (stack_size + 1024 + 2048) / 2, pages = 64;

	while (pages * page < want && pages < 4096)
		pages <<= 1;
	return pages;
}

static int open_cpu(struct cap_perf *p, struct cap_perf_cpu *c, unsigned int cpu)
{
	uint64_t pages = data_pages(p->o.freq, p->o.stack_size, p->page);
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = p->o.freq,
		.freq = 1,
		.sample_type = p->sample_type,
		.sample_max_stack = CPA_BPF_MAX_KSTACK,
		.exclude_callchain_user = p->o.kernel_only,
		.exclude_idle = !p->o.with_idle,
		.use_clockid = 1,
		.clockid = CLOCK_BOOTTIME, /* same clock as the BPF backend */
		.comm = 1,
		.comm_exec = 1,
		.task = 1,
		.sample_id_all = 1,
		.watermark = 1,
		.wakeup_watermark = (uint32_t)(pages * p->page / 2),
	};
	struct epoll_event ev = {.events = EPOLLIN};

	if (p->sample_type & PERF_SAMPLE_REGS_USER)
		a.sample_regs_user = CAP_PERF_REGS;
	if (p->sample_type & PERF_SAMPLE_STACK_USER)
		a.sample_stack_user = p->o.stack_size;

	c->fd = (int)syscall(__NR_perf_event_open, &a, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (c->fd < 0)
		return -errno;
	c->size = pages * p->page;
	c->base = mmap(NULL, c->size + p->page, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->base == MAP_FAILED) {
		c->base = NULL;
		return -errno;
	}
	c->data = (uint8_t *)c->base + p->page;
	ev.data.u32 = cpu;
	if (epoll_ctl(p->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -errno;
	return 0;
}

int cap_perf__open(const struct cap_perf_opts *o, const unsigned int *cpus, unsigned int n,
		   cap_bpf_record_fn fn, void *ctx, struct cap_perf **ret)
{
	struct cap_perf *p;
	int r;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->o = *o;
	p->o.stack_size = o->kernel_only ? 0 : MIN(o->stack_size, CAP_PERF_MAX_STACK) & ~7u;
	if (o->comm)
		strncpy(p->comm_filter, o->comm, CPA_BPF_COMM_LEN - 1);
	p->fn = fn;
	p->ctx = ctx;
	p->page = (size_t)sysconf(_SC_PAGESIZE);
	p->epfd = -1;
	p->bs_size = cpa_bpf_sample_size(p->o.stack_size);
	p->bs = calloc(1, p->bs_size);
	p->cpus = calloc(n, sizeof(*p->cpus));
	if (!p->bs || !p->cpus) {
		r = -ENOMEM;
		goto out_free;
	}
	for (unsigned int i = 0; i < n; i++)
		p->cpus[i].fd = -1;
	p->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (p->epfd < 0) {
		r = log_error_errno(-errno, "epoll_create1: %m");
		goto out_free;
	}

	p->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
			 PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_CGROUP;
	if (!o->kernel_only)
		p->sample_type |= PERF_SAMPLE_REGS_USER;
	if (p->o.stack_size)
		p->sample_type |= PERF_SAMPLE_STACK_USER;

	for (unsigned int i = 0; i < n; i++) {
		struct cap_perf_cpu *c = &p->cpus[p->n_cpus];

		r = open_cpu(p, c, cpus[i]);
		if (r == -EINVAL && (p->sample_type & PERF_SAMPLE_CGROUP)) {
			/* Before 5.7: no cgroup ids in samples. */
			p->sample_type &= ~(uint64_t)PERF_SAMPLE_CGROUP;
			if (c->base)
				munmap(c->base, c->size + p->page);
			if (c->fd >= 0)
				close(c->fd);
			*c = (struct cap_perf_cpu){.fd = -1};
			r = open_cpu(p, c, cpus[i]);
		}
		p->n_cpus++;
		if (r == -ENODEV)
			continue;
		/* No privilege: the caller says so, once (SHM_CAUSE_NOPRIV). */
		if (r == -EACCES || r == -EPERM) {
			log_debug("perf_event_open cpu-clock cpu %u (perf backend): %s", cpus[i],
				  strerror(-r));
			goto out_free;
		}
		if (r < 0) {
			r = log_error_errno(
				r, "perf_event_open cpu-clock cpu %u (perf backend): %m", cpus[i]);
			goto out_free;
		}
	}
	*ret = p;
	return 0;

out_free:
	cap_perf__free(p);
	return r;
}

void cap_perf__detach(struct cap_perf *p)
{
	for (unsigned int i = 0; i < p->n_cpus; i++)
		if (p->cpus[i].fd >= 0)
			ioctl(p->cpus[i].fd, PERF_EVENT_IOC_DISABLE, 0);
}

int cap_perf__read_stats(struct cap_perf *p, uint64_t ret[CPA_BPF_STAT_MAX])
{
	memcpy(ret, p->stats, sizeof(p->stats));
	return 0;
}

void cap_perf__free(struct cap_perf *p)
{
	if (!p)
		return;
	for (unsigned int i = 0; p->cpus && i < p->n_cpus; i++) {
		if (p->cpus[i].base)
			munmap(p->cpus[i].base, p->cpus[i].size + p->page);
		if (p->cpus[i].fd >= 0)
			close(p->cpus[i].fd);
	}
	if (p->epfd >= 0)
		close(p->epfd);
	free(p->cpus);
	free(p->bs);
	free(p);
}
