// SPDX-License-Identifier: MIT
/*
 * Arena layout (see docs/arena.md):
 *
 *   0            page 0: struct shm_arena_hdr (magic, version, offsets, csum)
 *   config_off   struct cpa_config, page aligned
 *   stage_off    SHM_STAGE_MAX x struct shm_stage (cache-line aligned each)
 *   rings[i].off ring i: one control page + data_size bytes, page aligned
 *
 * Everything is addressed by offset from the base of the mapping, so each
 * process may map the arena at a different address.
 */
#include "arena.h"
#include "records.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/hash.h"
#include "common/macro.h"
#include "common/timeutil.h"

#define REQUIRED_SEALS (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL)

static uint64_t page_up(uint64_t x)
{
	return (x + SHM_PAGE - 1) & ~(uint64_t)(SHM_PAGE - 1);
}

static uint64_t hdr_csum(const struct shm_arena_hdr *h)
{
	return hash_fnv1a64(h, offsetof(struct shm_arena_hdr, csum));
}

void shm_layout__default(struct shm_layout *l, uint32_t stack_size, uint32_t depth)
{
	/* A capture record at its largest: header, sample, both stacks, the copy. */
	uint64_t per =
		sizeof(struct shm_rec) + sizeof(struct cpa_sample) + 8 * 127 * 2 + stack_size;
	uint64_t want = per * (depth ? depth : 64), sz = SHM_RING0_MIN;

	/*
	 * The whole arena is pre-faulted and counts against every stage's PSS,
	 * so ring 0 stops at SHM_RING0_MAX however large the in-flight budget:
	 * 8 MiB is ~0.5 s of full 8 KiB copies at 999 Hz on two CPUs, and
	 * many seconds at the default 49 Hz (most copies are trimmed shorter).
	 */
	while (sz < want && sz < SHM_RING0_MAX)
		sz <<= 1;
	memset(l, 0, sizeof(*l));
	/* The topology is the stage table's: each ring has the ends it names. */
	for (unsigned int i = 0; i < SHM_STAGE_MAX; i++) {
		const struct shm_stage_desc *d = &shm_stages[i];

		if (d->ring_in >= 0)
			l->rings[d->ring_in].consumer = i;
		if (d->ring_out >= 0) {
			l->rings[d->ring_out].producer = i;
			/* records after the producer's are small */
			l->rings[d->ring_out].data_size =
				d->role == SHM_ROLE_PRODUCER ? sz : 1u << 20;
			l->n_rings = MAX(l->n_rings, (uint32_t)d->ring_out + 1);
		}
		if (d->ring_back >= 0) {
			/* feedback, e.g. 16-byte hints, a few per process and second at most */
			l->rings[d->ring_back].producer = i;
			l->rings[d->ring_back].consumer = d->up;
			l->rings[d->ring_back].data_size = 64u << 10;
			l->n_rings = MAX(l->n_rings, (uint32_t)d->ring_back + 1);
		}
	}
}

static int layout_check(const struct shm_layout *l)
{
	uint32_t i;

	if (!l || l->n_rings == 0 || l->n_rings > SHM_MAX_RINGS)
		return -EINVAL;
	for (i = 0; i < l->n_rings; i++) {
		uint64_t d = l->rings[i].data_size;

		if (d < SHM_RING_MIN_DATA || (d & (d - 1)) || d > (1ull << 32))
			return -EINVAL;
		if (l->rings[i].producer >= SHM_STAGE_MAX || l->rings[i].consumer >= SHM_STAGE_MAX)
			return -EINVAL;
	}
	return 0;
}

void shm_arena__free(struct shm_arena *a)
{
	if (!a)
		return;
	if (a->base && a->base != MAP_FAILED)
		munmap(a->base, a->size);
	if (a->fd >= 0)
		close(a->fd);
	free(a);
}

int shm_arena__create(const struct shm_layout *layout, struct shm_arena **ret)
{
	struct shm_arena *a;
	struct shm_arena_hdr *h;
	struct cpa_config *cfg;
	uint64_t off;
	uint32_t i;
	int r;

	r = layout_check(layout);
	if (r < 0)
		return r;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = -1;

	/* Plan the offsets first; the header records them. */
	off = SHM_PAGE;
	const uint64_t config_off = off;
	off += page_up(sizeof(struct cpa_config));
	const uint64_t stage_off = off;
	off += page_up((uint64_t)SHM_STAGE_MAX * sizeof(struct shm_stage));
	uint64_t ring_off[SHM_MAX_RINGS];
	for (i = 0; i < layout->n_rings; i++) {
		ring_off[i] = off;
		off += shm_ring__mem_size(layout->rings[i].data_size);
	}
	a->size = off;

	a->fd = memfd_create(SHM_ARENA_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (a->fd < 0) {
		r = -errno;
		goto out_free;
	}
	if (ftruncate(a->fd, (off_t)a->size) < 0) {
		r = -errno;
		goto out_free;
	}
	/* Pre-fault: first touch of memory is expensive on this kind of VM,
	 * and a page fault in the middle of a ring is latency nobody asked for. */
	a->base = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, a->fd, 0);
	if (a->base == MAP_FAILED) {
		r = -errno;
		a->base = NULL;
		goto out_free;
	}

	memset(a->base, 0, SHM_PAGE);
	for (i = 0; i < layout->n_rings; i++) {
		r = shm_ring__format((uint8_t *)a->base + ring_off[i],
				     shm_ring__mem_size(layout->rings[i].data_size),
				     layout->initial_pos);
		if (r < 0)
			goto out_free;
	}
	for (i = 0; i < SHM_STAGE_MAX; i++) {
		struct shm_stage *st = (struct shm_stage *)((uint8_t *)a->base + stage_off) + i;

		st->id = i;
	}

	/* The config block carries the creator's build: a stage of another
	 * one refuses it (shm_stage__attach). The monitor fills the rest. */
	cfg = (struct cpa_config *)((uint8_t *)a->base + config_off);
	cfg->magic = CPA_CONFIG_MAGIC;
	cfg->version = CPA_CONFIG_VERSION;

	h = a->base;
	h->version_major = SHM_ARENA_VERSION_MAJOR;
	h->version_minor = SHM_ARENA_VERSION_MINOR;
	h->hdr_size = sizeof(*h);
	h->size = a->size;
	h->config_off = config_off;
	h->config_size = sizeof(struct cpa_config);
	h->stage_off = stage_off;
	h->stage_stride = sizeof(struct shm_stage);
	h->n_stages = SHM_STAGE_MAX;
	h->n_rings = layout->n_rings;
	h->creator_pid = (uint32_t)getpid();
	h->created_realtime_ns = clock_ns(CLOCK_REALTIME);
	for (i = 0; i < layout->n_rings; i++) {
		h->rings[i].off = ring_off[i];
		h->rings[i].mem_size = shm_ring__mem_size(layout->rings[i].data_size);
		h->rings[i].producer = layout->rings[i].producer;
		h->rings[i].consumer = layout->rings[i].consumer;
	}
	h->magic = SHM_ARENA_MAGIC;
	h->csum = hdr_csum(h);
	a->hdr = h;

	/* Sized once: no stage can grow or shrink it (no SIGBUS on a truncated
	 * mapping), and nobody can lift the seals. */
	if (fcntl(a->fd, F_ADD_SEALS, REQUIRED_SEALS) < 0) {
		r = -errno;
		goto out_free;
	}

	*ret = a;
	return 0;

out_free:
	shm_arena__free(a);
	return r;
}

static int range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

int shm_arena__validate(const void *base, uint64_t size)
{
	const struct shm_arena_hdr *h = base;
	uint64_t prev_end;
	uint32_t i;

	if (size < SHM_PAGE)
		return -EBADMSG;
	if (h->magic != SHM_ARENA_MAGIC)
		return -EBADMSG;
	if (h->version_major != SHM_ARENA_VERSION_MAJOR)
		return -EPROTONOSUPPORT;
	if (h->hdr_size != sizeof(*h) || h->csum != hdr_csum(h))
		return -EBADMSG;
	if (h->size != size)
		return -EBADMSG;
	if (h->config_size != sizeof(struct cpa_config) || (h->config_off % SHM_PAGE) ||
	    h->config_off < SHM_PAGE || !range_ok(h->config_off, h->config_size, size))
		return -EBADMSG;
	if (h->n_stages != SHM_STAGE_MAX || h->stage_stride != sizeof(struct shm_stage) ||
	    (h->stage_off % 64) || h->stage_off < h->config_off + h->config_size ||
	    !range_ok(h->stage_off, (uint64_t)h->n_stages * h->stage_stride, size))
		return -EBADMSG;
	if (h->n_rings == 0 || h->n_rings > SHM_MAX_RINGS)
		return -EBADMSG;

	prev_end = h->stage_off + (uint64_t)h->n_stages * h->stage_stride;
	for (i = 0; i < h->n_rings; i++) {
		const struct shm_ring_desc *d = &h->rings[i];
		int r;

		/* Rings come in order, page aligned, without overlap. */
		if ((d->off % SHM_PAGE) || d->off < prev_end ||
		    !range_ok(d->off, d->mem_size, size))
			return -EBADMSG;
		if (d->producer >= SHM_STAGE_MAX || d->consumer >= SHM_STAGE_MAX)
			return -EBADMSG;
		r = shm_ring__validate((const uint8_t *)base + d->off, d->mem_size);
		if (r < 0)
			return r;
		prev_end = d->off + d->mem_size;
	}
	return 0;
}

int shm_arena__attach(int fd, struct shm_arena **ret)
{
	struct shm_arena *a;
	struct stat stbuf;
	int seals, r;

	if (fd < 0)
		return -EBADF;
	if (fstat(fd, &stbuf) < 0)
		return -errno;
	if (stbuf.st_size < (off_t)SHM_PAGE)
		return -EBADMSG;
	seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0)
		return -errno;
	/* Unsealed, the creator could still shrink it under us (SIGBUS). */
	if ((seals & (F_SEAL_GROW | F_SEAL_SHRINK)) != (F_SEAL_GROW | F_SEAL_SHRINK))
		return -EPERM;

	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->fd = -1;
	a->size = (uint64_t)stbuf.st_size;
	a->base = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
	if (a->base == MAP_FAILED) {
		r = -errno;
		a->base = NULL;
		goto out_free;
	}
	r = shm_arena__validate(a->base, a->size);
	if (r < 0)
		goto out_free;
	a->hdr = a->base;
	a->fd = fd;
	*ret = a;
	return 0;

out_free:
	shm_arena__free(a);
	return r;
}

struct cpa_config *shm_arena__config(struct shm_arena *a)
{
	return (struct cpa_config *)((uint8_t *)a->base + a->hdr->config_off);
}

struct shm_stage *shm_arena__stage(struct shm_arena *a, enum shm_stage_id id)
{
	if ((unsigned int)id >= a->hdr->n_stages)
		return NULL;
	return (struct shm_stage *)((uint8_t *)a->base + a->hdr->stage_off) + id;
}

unsigned int shm_arena__nr_rings(const struct shm_arena *a)
{
	return a->hdr->n_rings;
}

void *shm_arena__ring_mem(struct shm_arena *a, unsigned int idx, uint64_t *ret_size)
{
	if (idx >= a->hdr->n_rings)
		return NULL;
	if (ret_size)
		*ret_size = a->hdr->rings[idx].mem_size;
	return (uint8_t *)a->base + a->hdr->rings[idx].off;
}

int shm_arena__open_prod(struct shm_arena *a, unsigned int idx, struct shm_ring_prod *ret)
{
	uint64_t sz;
	void *mem = shm_arena__ring_mem(a, idx, &sz);

	if (!mem)
		return -ENOENT;
	return shm_ring__open_prod(ret, mem, sz);
}

int shm_arena__open_cons(struct shm_arena *a, unsigned int idx, struct shm_ring_cons *ret)
{
	uint64_t sz;
	void *mem = shm_arena__ring_mem(a, idx, &sz);

	if (!mem)
		return -ENOENT;
	return shm_ring__open_cons(ret, mem, sz);
}

int shm_arena__find_ring(const struct shm_arena *a, enum shm_stage_id producer,
			 enum shm_stage_id consumer)
{
	uint32_t i;

	for (i = 0; i < a->hdr->n_rings; i++)
		if (a->hdr->rings[i].producer == (uint32_t)producer &&
		    a->hdr->rings[i].consumer == (uint32_t)consumer)
			return (int)i;
	return -ENOENT;
}

int shm_arena__attach_pid(int pid, struct shm_arena **ret)
{
	static const char want[] = "/memfd:" SHM_ARENA_NAME;
	char dir[64], path[PATH_MAX], target[PATH_MAX];
	struct dirent *de;
	int fd = -1, r;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", pid);
	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = 0;
		/* "/memfd:cpa-arena (deleted)": match the prefix. */
		if (strncmp(target, want, sizeof(want) - 1))
			continue;
		fd = open(path, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			r = -errno;
		break;
	}
	closedir(d);
	if (fd < 0)
		return de ? r : -ENOENT;
	r = shm_arena__attach(fd, ret);
	if (r < 0)
		close(fd);
	return r;
}
