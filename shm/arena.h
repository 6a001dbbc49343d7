/* SPDX-License-Identifier: MIT */
/*
 * The cpa arena: one memfd, sized once, sealed, mapped by the supervisor and
 * every stage. It holds a self-describing header, the run configuration, one
 * control block per stage and the SPSC rings. Offsets only, no pointers.
 * See docs/arena.md for the picture.
 *
 * Library code: no logging, no globals; every function returns 0 or -errno.
 */
#ifndef CPA_SHM_ARENA_H
#define CPA_SHM_ARENA_H

#include <stdint.h>

#include "config.h"
#include "ring.h"
#include "stage.h"

#define SHM_ARENA_MAGIC		0x4e45524141504355ULL /* "UCPAAREN" */
#define SHM_ARENA_VERSION_MAJOR 1
#define SHM_ARENA_VERSION_MINOR 0
#define SHM_MAX_RINGS		16
#define SHM_PAGE		4096u
/* memfd name of the arena, as /proc/PID/fd shows it: "/memfd:" SHM_ARENA_NAME. */
#define SHM_ARENA_NAME "cpa-arena"
/* The supervisor hands every stage the arena memfd as this descriptor. */
#define SHM_ARENA_FD 3

/* Well-known ring indexes of the default pipeline. */
enum shm_ring_id {
	SHM_RING_CAPTURE, /* capture -> unwindd */
	SHM_RING_UNWIND,  /* unwindd -> symd */
	SHM_RING_SYMD,	  /* symd -> storer */
	SHM_RING_HINT,	  /* unwindd -> capture: CPA_REC_USTACK_HINT (feedback, not data) */
	SHM_RING_DEFAULT_NR,
};

struct shm_ring_desc {
	uint64_t off;	   /* from the arena start, page aligned */
	uint64_t mem_size; /* control page + data */
	uint32_t producer; /* enum shm_stage_id */
	uint32_t consumer;
};

/* Page 0 of the arena. Immutable after create; checksummed. */
struct shm_arena_hdr {
	uint64_t magic;
	uint16_t version_major;
	uint16_t version_minor;
	uint32_t hdr_size;
	uint64_t size; /* total arena bytes */
	uint64_t config_off;
	uint64_t config_size;
	uint64_t stage_off; /* SHM_STAGE_MAX blocks, each stage_stride bytes */
	uint32_t stage_stride;
	uint32_t n_stages;
	uint32_t n_rings;
	uint32_t creator_pid;
	uint64_t created_realtime_ns;
	struct shm_ring_desc rings[SHM_MAX_RINGS];
	uint64_t csum; /* FNV-1a 64 of every byte above */
};
_Static_assert(sizeof(struct shm_arena_hdr) <= SHM_PAGE, "arena header fits page 0");

/* What to build: ring sizes (data bytes, powers of two) and their ends. */
struct shm_layout {
	uint32_t n_rings;
	struct {
		uint64_t data_size;
		uint32_t producer;
		uint32_t consumer;
	} rings[SHM_MAX_RINGS];
	uint64_t initial_pos; /* starting ring position (tests: near UINT64_MAX) */
};

/* Process-local handle. */
struct shm_arena {
	int fd;
	uint64_t size;
	void *base;
	struct shm_arena_hdr *hdr;
};

#define SHM_RING0_MIN (1ull << 20)
#define SHM_RING0_MAX (8ull << 20)

/* The pipeline's three rings, the first sized for depth capture records of
 * stack_size bytes of user stack, between SHM_RING0_MIN and SHM_RING0_MAX;
 * the others 1 MiB (records after unwinding are small). */
void shm_layout__default(struct shm_layout *l, uint32_t stack_size, uint32_t depth);

/* memfd + ftruncate + mmap(MAP_POPULATE) + format + seal. */
int shm_arena__create(const struct shm_layout *layout, struct shm_arena **ret);
/* Map fd and validate everything (magic, version, size, checksum, offsets,
 * rings, seals). Takes ownership of fd on success only. */
int shm_arena__attach(int fd, struct shm_arena **ret);
/*
 * Attach the arena that process pid (the monitor) holds open, found through
 * /proc/<pid>/fd (its memfd is named SHM_ARENA_NAME). -ENOENT when pid holds
 * none; -EACCES/-EPERM without root or pid's user. Used by `cpa ctl` and the
 * benches, which read counters live.
 */
int shm_arena__attach_pid(int pid, struct shm_arena **ret);
/* Validate an arena image already in memory (used by attach and by tests). */
int shm_arena__validate(const void *base, uint64_t size);
/* Unmap and close; accepts NULL and half-built arenas. */
void shm_arena__free(struct shm_arena *a);

static inline int shm_arena__fd(const struct shm_arena *a)
{
	return a->fd;
}

struct cpa_config *shm_arena__config(struct shm_arena *a);
struct shm_stage *shm_arena__stage(struct shm_arena *a, enum shm_stage_id id);
unsigned int shm_arena__nr_rings(const struct shm_arena *a);
/* Ring memory of ring idx, or NULL; *ret_size gets its mem_size. */
void *shm_arena__ring_mem(struct shm_arena *a, unsigned int idx, uint64_t *ret_size);
int shm_arena__open_prod(struct shm_arena *a, unsigned int idx, struct shm_ring_prod *ret);
int shm_arena__open_cons(struct shm_arena *a, unsigned int idx, struct shm_ring_cons *ret);
/* Index of the first ring from producer to consumer, or -ENOENT. */
int shm_arena__find_ring(const struct shm_arena *a, enum shm_stage_id producer,
			 enum shm_stage_id consumer);

#endif /* CPA_SHM_ARENA_H */
