// SPDX-License-Identifier: MIT
#include "pysym.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/macro.h"
#include "common/pycode.h"

struct pycode {
	uint32_t pid;  /* 0: free */
	uint32_t used; /* pysym's clock when last named or set: the LRU way goes */
	uint32_t firstlineno;
	uint32_t check; /* the co_check word (bpf/profile.h) */
	uint64_t code;
	char *qualname;
	char *filename;
	uint8_t *linetab;
	size_t linetab_len;
};

/* How many slots a pid holds: an exit (pysym__drop_pid(), every exit of
 * the host) looks through the slots only for a pid that holds some. The
 * scan reads all of them (~450 KiB): under churn, with a few hundred exits a
 * second, it was a third of symd's CPU. */
#define PYSYM_PID_BITS 14 /* 2 x PYSYM_SLOTS: at most half full */
#define PYSYM_PIDS     (1u << PYSYM_PID_BITS)

_Static_assert(PYSYM_PIDS >= 2 * PYSYM_SLOTS, "pysym: the pid table is at most half full");

struct pypid {
	uint32_t pid; /* 0: free */
	uint32_t n;   /* slots it holds */
};

struct pysym {
	char proc[64];
	struct pycode slots[PYSYM_SLOTS];
	struct pypid pids[PYSYM_PIDS]; /* linear probing */
	uint64_t scans;
	uint64_t primed;
	uint32_t clock; /* ticks at each name and set (wraps: ages are differences) */
	uint32_t mem_pid;
	int mem_fd;
};

int pysym__new(const char *proc, struct pysym **ret)
{
	struct pysym *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	snprintf(p->proc, sizeof(p->proc), "%s", proc ? proc : "/proc");
	p->mem_fd = -1;
	*ret = p;
	return 0;
}

static uint32_t pid_home(uint32_t pid)
{
	return hash32_fib(pid) >> (32 - PYSYM_PID_BITS);
}

/* pid's entry, or the free one where it would go. */
static struct pypid *pid_find(struct pysym *p, uint32_t pid)
{
	uint32_t i = pid_home(pid);

	while (p->pids[i].pid && p->pids[i].pid != pid)
		i = (i + 1) & (PYSYM_PIDS - 1);
	return &p->pids[i];
}

static void pid_hold(struct pysym *p, uint32_t pid)
{
	struct pypid *e = pid_find(p, pid);

	e->pid = pid;
	e->n++;
}

/* One slot less for pid; its entry goes with the last one (backward shift:
 * the entries after it in its run move up where their home allows). */
static void pid_release(struct pysym *p, uint32_t pid)
{
	struct pypid *e = pid_find(p, pid);
	uint32_t i = (uint32_t)(e - p->pids), j = i, k;

	if (!e->pid || --e->n)
		return;
	for (;;) {
		j = (j + 1) & (PYSYM_PIDS - 1);
		if (!p->pids[j].pid)
			break;
		k = pid_home(p->pids[j].pid);
		/* j's entry may fill i when its home is not in (i, j], cyclically */
		if (i <= j ? (k <= i || k > j) : (k <= i && k > j)) {
			p->pids[i] = p->pids[j];
			i = j;
		}
	}
	p->pids[i] = (struct pypid){0};
}

static void code_clear(struct pysym *p, struct pycode *c)
{
	if (c->pid)
		pid_release(p, c->pid);
	free(c->qualname);
	free(c->filename);
	free(c->linetab);
	memset(c, 0, sizeof(*c));
}

void pysym__drop_pid(struct pysym *p, uint32_t pid)
{
	if (!p)
		return;
	if (pid && pid_find(p, pid)->pid) {
		p->scans++;
		for (size_t i = 0; i < PYSYM_SLOTS; i++)
			if (p->slots[i].pid == pid)
				code_clear(p, &p->slots[i]);
	}
	if (p->mem_pid == pid && p->mem_fd >= 0) {
		close(p->mem_fd);
		p->mem_fd = -1;
		p->mem_pid = 0;
	}
}

uint64_t pysym__scans(const struct pysym *p)
{
	return p->scans;
}

uint32_t pysym__held(struct pysym *p, uint32_t pid)
{
	struct pypid *e = pid ? pid_find(p, pid) : NULL;

	return e && e->pid ? e->n : 0;
}

void pysym__free(struct pysym *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < PYSYM_SLOTS; i++)
		code_clear(p, &p->slots[i]);
	if (p->mem_fd >= 0)
		close(p->mem_fd);
	free(p);
}

/* pycode_read_fn over /proc/PID/mem (one open file, the last pid's). */
struct mem_ctx {
	struct pysym *p;
	uint32_t pid;
};

static int mem_read(void *ctx, const struct pycode_seg *segs, unsigned int n)
{
	struct mem_ctx *m = ctx;
	struct pysym *p = m->p;
	char path[96];

	if (p->mem_pid != m->pid || p->mem_fd < 0) {
		if (p->mem_fd >= 0)
			close(p->mem_fd);
		snprintf(path, sizeof(path), "%s/%u/mem", p->proc, m->pid);
		p->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
		p->mem_pid = m->pid;
		if (p->mem_fd < 0)
			return -ESRCH;
	}
	for (unsigned int i = 0; i < n; i++) {
		ssize_t r;

		if (!segs[i].len)
			continue;
		r = pread(p->mem_fd, segs[i].buf, segs[i].len, (off_t)segs[i].addr);
		/* 0 bytes: the process's memory is gone (it exited after the
		 * file was opened; an address it does not map is -EIO) */
		if (r == 0)
			return -ESRCH;
		if (r != (ssize_t)segs[i].len)
			return -EFAULT;
	}
	return 0;
}

/* Slot c holds info (taken) as pid's code object at code. */
static void code_set(struct pysym *p, struct pycode *c, uint32_t pid, uint64_t code,
		     struct pycode_info *info)
{
	code_clear(p, c);
	c->qualname = TAKE_PTR(info->qualname);
	c->filename = TAKE_PTR(info->filename);
	c->linetab = TAKE_PTR(info->linetab);
	c->linetab_len = info->linetab_len;
	c->firstlineno = info->firstlineno;
	c->check = info->check;
	c->pid = pid;
	c->code = code;
	c->used = ++p->clock;
	if (pid)
		pid_hold(p, pid);
	pycode__info_clear(info);
}

static int code_load(struct pysym *p, uint32_t pid, const struct pycode_layout *l, uint64_t code,
		     struct pycode *c)
{
	struct mem_ctx m = {.p = p, .pid = pid};
	struct pycode_info info;
	int r = pycode__read(mem_read, &m, l, code, PYSYM_MAX_LINETAB, &info);

	/* A failed read leaves the slot as it was: still right for samples
	 * with its own check word (a record from capture primed it). */
	if (r < 0)
		return r;
	code_set(p, c, pid, code, &info);
	return 0;
}

/*
 * (pid, code)'s slot: its own in its set, else where it goes, a free way or
 * the least recently used one. The set from a mixed hash: code addresses
 * are 16-aligned and a process's are close together (a multiplicative
 * hash's low bits, as this was, put a process's code objects in 512 of the
 * 8192 slots).
 */
static struct pycode *slot_of(struct pysym *p, uint32_t pid, uint64_t code)
{
	struct pycode *set = &p->slots[hash64_mix(code ^ ((uint64_t)pid << 47)) %
				       (PYSYM_SLOTS / PYSYM_WAYS) * PYSYM_WAYS],
		      *c = set;

	for (unsigned int w = 0; w < PYSYM_WAYS; w++) {
		if (set[w].pid == pid && set[w].code == code)
			return &set[w];
		if (c->pid && (!set[w].pid || p->clock - set[w].used > p->clock - c->used))
			c = &set[w];
	}
	return c;
}

void pysym__prime(struct pysym *p, uint32_t pid, uint64_t code, struct pycode_info *info)
{
	code_set(p, slot_of(p, pid, code), pid, code, info);
	p->primed++;
}

uint64_t pysym__primed(const struct pysym *p)
{
	return p->primed;
}

static uint32_t varint(const uint8_t *t, size_t n, size_t *i)
{
	uint32_t v = 0, shift = 0;
	uint8_t b;

	do {
		if (*i >= n || shift > 28)
			return v;
		b = t[(*i)++];
		v |= (uint32_t)(b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v;
}

static int32_t svarint(const uint8_t *t, size_t n, size_t *i)
{
	uint32_t u = varint(t, n, i);

	return (u & 1) ? -(int32_t)(u >> 1) : (int32_t)(u >> 1);
}

uint32_t pysym__line(unsigned int minor, const uint8_t *t, size_t n, uint32_t firstlineno,
		     uint64_t unit)
{
	int64_t line = firstlineno;
	uint64_t addr = 0;
	size_t i = 0;

	if (minor == 10) {
		/* (start delta in bytes, line delta; -128: no line) pairs */
		uint64_t byte = unit * 2;

		for (; i + 1 < n; i += 2) {
			int8_t ld = (int8_t)t[i + 1];
			bool none = ld == -128;

			if (!none)
				line += ld;
			if (byte < addr + t[i])
				return none || line <= 0 ? 0 : (uint32_t)line;
			addr += t[i];
		}
		return 0;
	}
	/* 3.11+: the location table (Objects/locations.md) */
	while (i < n) {
		uint8_t b = t[i++];
		unsigned int code = (b >> 3) & 15, len = (b & 7) + 1;
		bool none = false;

		switch (code) {
		case 15:
			none = true;
			break;
		case 14:
			line += svarint(t, n, &i);
			varint(t, n, &i);
			varint(t, n, &i);
			varint(t, n, &i);
			break;
		case 13:
			line += svarint(t, n, &i);
			break;
		case 10:
		case 11:
		case 12:
			line += code - 10;
			i += 2;
			break;
		default:
			i += 1;
			break;
		}
		if (unit < addr + len)
			return none || line <= 0 ? 0 : (uint32_t)line;
		addr += len;
	}
	return 0;
}

int pysym__name(struct pysym *p, uint32_t pid, unsigned int minor, uint64_t code, uint32_t instr,
		uint32_t check, char *buf, size_t len, uint32_t *ret_line)
{
	const struct pycode_layout *l = pycode__layout(minor);
	struct pycode *c;
	uint64_t unit;
	uint32_t line;
	bool cached;
	int r, n;

	if (!l)
		return -EINVAL;
	c = slot_of(p, pid, code);
	cached = c->pid == pid && c->code == code;
	/* Not the slot's code object: read the address again. The slot's may
	 * have been freed and its memory given to this one (pymalloc hands a
	 * freed block of the size class out first): kept, it would refuse
	 * every sample of this one for the process's life. */
	if (!cached || c->check != check) {
		r = code_load(p, pid, l, code, c);
		if (r < 0)
			return r;
	}
	/* Another code object at the address since the sample: a read
	 * again cannot tell what was there. */
	if (c->check != check)
		return -ESTALE;
	c->used = ++p->clock;
	if (minor == 10) {
		int32_t lasti = (int32_t)instr;

		unit = lasti > 0 ? (uint64_t)lasti : 0;
	} else {
		unit = instr > l->co_code && instr != UINT32_MAX ? (instr - l->co_code) / 2 : 0;
	}
	line = pysym__line(minor, c->linetab, c->linetab_len, c->firstlineno, unit);
	*ret_line = line;
	if (line)
		n = snprintf(buf, len, "%s (%s:%u)", c->qualname, c->filename, line);
	else
		n = snprintf(buf, len, "%s (%s)", c->qualname, c->filename);
	return n < 0 ? -EINVAL : (int)MIN((size_t)n, len - 1);
}
