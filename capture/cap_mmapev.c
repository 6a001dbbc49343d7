// SPDX-License-Identifier: MIT
#include "cap_mmapev.h"
#include "cap_python.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macro.h"
#include "shm/counters.h"
#include "shm/records.h"

#define MMAPEV_PAGES   128 /* data pages per CPU: a build's exec burst between two polls */
#define MMAPEV_TRAILER 16  /* sample_id_all with TID | TIME: pid, tid, time */

/* The kernel's record bodies (include/uapi/linux/perf_event.h, "enum
 * perf_event_type"), each followed by the sample_id trailer. */
struct pe_mmap2 {
	struct perf_event_header h;
	uint32_t pid, tid;
	uint64_t addr, len, pgoff;
	union {
		struct {
			uint32_t maj, min;
			uint64_t ino, ino_generation;
		};
		struct {
			uint8_t build_id_size, reserved1;
			uint16_t reserved2;
			uint8_t build_id[20];
		};
	};
	uint32_t prot, flags;
	char filename[];
};

struct pe_fork {
	struct perf_event_header h;
	uint32_t pid, ppid, tid, ptid;
	uint64_t time;
};

struct pe_comm {
	struct perf_event_header h;
	uint32_t pid, tid;
	char comm[];
};

struct pe_lost {
	struct perf_event_header h;
	uint64_t id, lost;
};

struct mmapev_cpu {
	int fd;
	void *base; /* control page, then the data pages */
};

/* A record copied out of a ring: where in buf, and its time. */
struct mmapev_rec {
	uint64_t time;
	uint32_t off;
	uint32_t order; /* ties keep ring order */
};

struct cap_mmapev {
	struct cap_emit *emit;
	uint32_t target_tgid;
	size_t page;
	uint64_t size; /* data bytes per ring */
	struct mmapev_cpu *cpus;
	unsigned int n_cpus;
	uint8_t *buf; /* the records of one drain, linear */
	size_t buf_len, buf_cap;
	struct mmapev_rec *recs;
	uint32_t n_recs, cap_recs;
	uint64_t lost;
	struct cap_python *py;
};

static int rec_cmp(const void *a, const void *b)
{
	const struct mmapev_rec *x = a, *y = b;

	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static int open_cpu(struct cap_mmapev *m, struct mmapev_cpu *c, unsigned int cpu, bool build_id)
{
	struct perf_event_attr a = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(a),
		.config = PERF_COUNT_SW_DUMMY,
		.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME,
		.sample_id_all = 1,
		.mmap = 1,
		.mmap2 = 1,
		.comm = 1,
		.comm_exec = 1,
		.task = 1,
		.build_id = build_id,
		.use_clockid = 1,
		.clockid = CLOCK_BOOTTIME, /* the samples' clock (cap_clock) */
		.watermark = 1,
		.wakeup_watermark = (uint32_t)(m->size / 2),
	};

	c->fd = (int)syscall(__NR_perf_event_open, &a, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (c->fd < 0)
		return -errno;
	c->base = mmap(NULL, m->size + m->page, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (c->base == MAP_FAILED) {
		c->base = NULL;
		return -errno;
	}
	return 0;
}

int cap_mmapev__open(const unsigned int *cpus, unsigned int n, uint32_t target_tgid,
		     struct cap_emit *emit, struct cap_mmapev **ret)
{
	struct cap_mmapev *m = calloc(1, sizeof(*m));
	bool build_id = true;
	int r = 0;

	if (!m)
		return log_error_errno(-ENOMEM, "allocate the mapping event state: %m");
	m->emit = emit;
	m->target_tgid = target_tgid;
	m->page = (size_t)sysconf(_SC_PAGESIZE);
	m->size = MMAPEV_PAGES * m->page;
	m->cpus = calloc(n, sizeof(*m->cpus));
	if (!m->cpus) {
		cap_mmapev__free(m);
		return log_error_errno(-ENOMEM, "allocate the mapping event state: %m");
	}
	for (unsigned int i = 0; i < n; i++) {
		struct mmapev_cpu *c = &m->cpus[m->n_cpus];

		c->fd = -1;
		r = open_cpu(m, c, cpus[i], build_id);
		if (r == -EINVAL && build_id) {
			/* Before 5.12: no build-ids in mmap2, files by dev and inode. */
			build_id = false;
			r = open_cpu(m, c, cpus[i], build_id);
		}
		m->n_cpus++;
		if (r == -ENODEV)
			continue;
		if (r < 0) {
			/* The caller says what it means (no mapping history). */
			log_debug("perf_event_open mmap events cpu %u: %s", cpus[i], strerror(-r));
			cap_mmapev__free(m);
			return r;
		}
	}
	log_info("mapping history: mmap2%s/comm/task events on %u CPUs, %zu KiB each",
		 build_id ? " + build-id" : "", m->n_cpus, (size_t)(m->size >> 10));
	*ret = m;
	return 0;
}

/* Copy the pending records of one ring into buf and free the ring. */
static int take_ring(struct cap_mmapev *m, struct mmapev_cpu *c)
{
	struct perf_event_mmap_page *mp = c->base;
	const uint8_t *data = (const uint8_t *)c->base + m->page;
	uint64_t head, tail, avail;

	/* Pairs with the kernel's smp_store_release of data_head. */
	head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	tail = mp->data_tail;
	avail = head - tail;
	if (avail > m->size)
		avail = m->size, tail = head - m->size; /* cannot happen: resync */
	if (m->buf_len + avail > m->buf_cap) {
		size_t cap = MAX(m->buf_cap * 2, m->buf_len + avail);
		uint8_t *nb = realloc(m->buf, cap);

		if (!nb)
			return -ENOMEM;
		m->buf = nb;
		m->buf_cap = cap;
	}
	while (tail < head) {
		uint64_t off = tail & (m->size - 1), first;
		struct perf_event_header h;
		uint8_t *dst = m->buf + m->buf_len;

		first = MIN((uint64_t)sizeof(h), m->size - off);
		memcpy(&h, data + off, first);
		memcpy((uint8_t *)&h + first, data, sizeof(h) - first);
		if (h.size < sizeof(h) || h.size > head - tail)
			break; /* a torn record: cannot happen with a sane kernel */
		first = MIN((uint64_t)h.size, m->size - off);
		memcpy(dst, data + off, first);
		memcpy(dst + first, data, h.size - first);
		tail += h.size;
		if (m->n_recs == m->cap_recs) {
			uint32_t cap = m->cap_recs ? m->cap_recs * 2 : 256;
			struct mmapev_rec *nr = realloc(m->recs, cap * sizeof(*nr));

			if (!nr)
				break;
			m->recs = nr;
			m->cap_recs = cap;
		}
		m->recs[m->n_recs] =
			(struct mmapev_rec){.off = (uint32_t)m->buf_len, .order = m->n_recs};
		if (h.size >= sizeof(h) + MMAPEV_TRAILER)
			memcpy(&m->recs[m->n_recs].time, dst + h.size - 8, 8);
		m->n_recs++;
		m->buf_len += h.size;
	}
	/* Pairs with the kernel's read of data_tail: our reads are done. */
	__atomic_store_n(&mp->data_tail, head, __ATOMIC_RELEASE);
	return 0;
}

static bool wanted(const struct cap_mmapev *m, uint32_t pid)
{
	return !m->target_tgid || pid == m->target_tgid;
}

static int handle(struct cap_mmapev *m, const uint8_t *rec, uint64_t time)
{
	const struct perf_event_header *h = (const void *)rec;
	struct cpa_map_event ev = {.time_ns = time};

	switch (h->type) {
	case PERF_RECORD_MMAP2: {
		const struct pe_mmap2 *e = (const void *)rec;
		size_t max;

		if (h->size < sizeof(*e) + MMAPEV_TRAILER || !wanted(m, e->pid))
			return 0;
		max = h->size - sizeof(*e) - MMAPEV_TRAILER;
		ev.kind = CPA_MAP_MMAP;
		ev.pid = e->pid;
		ev.tid = e->tid;
		ev.start = e->addr;
		ev.len = e->len;
		ev.pgoff = e->pgoff;
		ev.prot = e->prot;
		ev.flags = e->flags;
		if (h->misc & PERF_RECORD_MISC_MMAP_BUILD_ID) {
			ev.build_id_len = MIN(e->build_id_size, (uint8_t)CPA_BUILD_ID_MAX);
			memcpy(ev.build_id, e->build_id, ev.build_id_len);
		} else {
			ev.dev_major = e->maj;
			ev.dev_minor = e->min;
			ev.ino = e->ino;
		}
		ev.path_len = (uint16_t)MIN(strnlen(e->filename, max), (size_t)UINT16_MAX);
		if (m->py && ev.path_len < max)
			cap_python__map_event(m->py, &ev, e->filename);
		return cap_emit__map(m->emit, &ev, e->filename);
	}
	case PERF_RECORD_COMM: {
		const struct pe_comm *e = (const void *)rec;

		if (h->size < sizeof(*e) || !(h->misc & PERF_RECORD_MISC_COMM_EXEC) ||
		    !wanted(m, e->pid))
			return 0;
		ev.kind = CPA_MAP_EXEC;
		ev.pid = e->pid;
		ev.tid = e->tid;
		/* the new comm, NUL-padded to 8 bytes: within the record */
		if (m->py && strnlen(e->comm, h->size - sizeof(*e)) < h->size - sizeof(*e))
			cap_python__map_event(m->py, &ev, e->comm);
		else
			cap_python__map_event(m->py, &ev, "");
		return cap_emit__map(m->emit, &ev, "");
	}
	case PERF_RECORD_FORK: {
		const struct pe_fork *e = (const void *)rec;

		/* New processes only: a thread shares its process's mappings. */
		if (h->size < sizeof(*e) || e->pid != e->tid || e->pid == e->ppid ||
		    !wanted(m, e->pid))
			return 0;
		ev.kind = CPA_MAP_FORK;
		ev.pid = e->pid;
		ev.tid = e->tid;
		ev.ppid = e->ppid;
		cap_python__map_event(m->py, &ev, "");
		return cap_emit__map(m->emit, &ev, "");
	}
	case PERF_RECORD_LOST: {
		const struct pe_lost *e = (const void *)rec;

		if (h->size < sizeof(*e))
			return 0;
		m->lost += e->lost;
		shm_stage__cnt_add(m->emit->st, CAP_CNT_MAP_LOST, e->lost);
		cap_python__lost(m->py);
		log_warn("mapping history: %llu mmap/task events lost in the kernel (%llu so far); "
			 "their samples fall back to /proc",
			 (unsigned long long)e->lost, (unsigned long long)m->lost);
		return 0;
	}
	default:
		return 0;
	}
}

int cap_mmapev__drain(struct cap_mmapev *m)
{
	uint32_t i;
	int r = 0;

	m->buf_len = 0;
	m->n_recs = 0;
	for (i = 0; i < m->n_cpus; i++)
		if (m->cpus[i].base && take_ring(m, &m->cpus[i]) < 0)
			shm_stage__cnt_add(m->emit->st, SHM_CNT_ERRORS, 1);
	/* Each ring is in time order, but a process's fork, exec and mmaps may
	 * sit in the rings of different CPUs. */
	if (m->n_recs > 1) /* qsort(NULL, 0, ...) is undefined (UBSan) */
		qsort(m->recs, m->n_recs, sizeof(*m->recs), rec_cmp);
	for (i = 0; i < m->n_recs && r >= 0; i++)
		r = handle(m, m->buf + m->recs[i].off, m->recs[i].time);
	return r < 0 ? r : (int)m->n_recs;
}

int cap_mmapev__watch(const struct cap_mmapev *m, int epfd)
{
	for (unsigned int i = 0; i < m->n_cpus; i++) {
		struct epoll_event ev = {.events = EPOLLIN, .data.fd = m->cpus[i].fd};

		if (m->cpus[i].fd >= 0 && epoll_ctl(epfd, EPOLL_CTL_ADD, m->cpus[i].fd, &ev) < 0)
			return -errno;
	}
	return 0;
}

uint64_t cap_mmapev__lost(const struct cap_mmapev *m)
{
	return m->lost;
}

void cap_mmapev__set_python(struct cap_mmapev *m, struct cap_python *py)
{
	if (m)
		m->py = py;
}

void cap_mmapev__free(struct cap_mmapev *m)
{
	if (!m)
		return;
	for (unsigned int i = 0; m->cpus && i < m->n_cpus; i++) {
		if (m->cpus[i].base)
			munmap(m->cpus[i].base, m->size + m->page);
		if (m->cpus[i].fd >= 0)
			close(m->cpus[i].fd);
	}
	free(m->cpus);
	free(m->buf);
	free(m->recs);
	free(m);
}
