/* SPDX-License-Identifier: MIT */
/*
 * symd: turns (binary, file offset) frames from unwindd into names, interns
 * strings, frames and stacks into ids and sends the storer samples plus the
 * definitions they need. See docs/symd.md.
 *
 * The stage is built as a library (cpa_symd_core) around one object, struct
 * symd, so that tests drive the very batch function main.c runs, over a
 * real arena. The modules it drives have headers of their own: elfsym.h,
 * bincache.h, debuginfod.h, ksyms.h, names.h, jitmap.h, jvm.h.
 */
#ifndef CPA_SYMD_H
#define CPA_SYMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elfsym.h" /* struct symd_paths */
#include "shm/config.h"
#include "shm/ring.h"
#include "shm/stage.h"

/* Hostile-input caps of the stage (docs/symd.md); the modules' are in their
 * headers. */
#define SYMD_MAX_ENVIRON (1u << 20)
#define SYMD_MAX_UMODS	 (1u << 18) /* unwindd module definitions kept */

struct symd_opts {
	const struct cpa_config *cfg;
	struct shm_stage *stage;
	struct shm_ring_cons *in;
	struct shm_ring_prod *out;
	uint32_t generation;
	struct symd_paths paths; /* NULL members take the defaults */
	/* Test knob: die after committing the output of this batch (shm/fault.h). */
	unsigned int fault_kill_batches;
};

struct symd;

int symd__new(const struct symd_opts *o, struct symd **ret);
void symd__free(void *s);
/* Process up to max_records input records; commit output and release the
 * input with its mark once. Returns the records consumed (0 = none pending
 * or output held back), or -errno (-EBADMSG: corrupt input ring). */
int symd__batch(struct symd *s, unsigned int max_records);
/* Periodic work: loss records, kallsyms reload check, gauges. now_ns is
 * CLOCK_MONOTONIC. Returns 0. */
int symd__tick(void *s, uint64_t now_ns);
/* The process's malloc policy for binary loads (main.c, once): blocks up to
 * SYMD_HEAP_MMAP_MIN come from the heap, which keeps up to twice that free
 * at its top; symd__tick() trims it once loads stop. */
#define SYMD_HEAP_MMAP_MIN (32u << 20)
void symd__heap_setup(void);
/* Before leaving: send the pending loss report, update the gauges. */
void symd__finish(struct symd *s);
/* True when output is held back for lack of room in the output ring. */
bool symd__output_held(const struct symd *s);
/* Tests: frames the pc cache did not answer. */
uint64_t symd__pcc_misses(const struct symd *s);

#endif /* CPA_SYMD_H */
