/* SPDX-License-Identifier: MIT */
/*
 * Helpers of the fuzz targets (docs/reliability.md, "Fuzzing and hostile
 * input"). Each target defines LLVMFuzzerTestOneInput(); it is linked either
 * with libFuzzer (preset fuzz) or with replay.c, which runs it over files
 * (the regression corpus under ctest, no libFuzzer needed).
 *
 * Parsers that take a path get the input through a file in a per-process
 * scratch dir (fuzz__dir()), removed at exit.
 */
#ifndef CPA_FUZZ_UTIL_H
#define CPA_FUZZ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storer/store.h"

struct shm_ring_prod;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The scratch dir of this process (created on first use; exits on failure). */
const char *fuzz__dir(void);
/* Write data to <fuzz__dir()>/<name> (replacing it); its path into buf. */
void fuzz__write(const char *name, const void *data, size_t size, char *buf, size_t len);
/* A memfd holding data, offset 0 (the caller closes it). */
int fuzz__memfd(const void *data, size_t size);
/* Remove everything below path (path itself too). */
void fuzz__rm_rf(const char *path);

/*
 * Push the records of data into p: each is a 2-byte type, a 2-byte length
 * and that many payload bytes (cut short at the end of data). take(ctx,
 * false) is called when the ring is full (then the record is tried once
 * more), take(ctx, true) after a loss record and about every KiB of input
 * (the consumer's tick); everything is committed at the end.
 */
void fuzz__feed(const uint8_t *data, size_t size, struct shm_ring_prod *p,
		void (*take)(void *ctx, bool tick), void *ctx);

/* The hex number at the start of the line at *pos (0 if none); *pos moves
 * to the next line. For lookups at the addresses a text input names. */
uint64_t fuzz__line_addr(const char **pos, const char *end);

/* Writer options of the store targets: 5-second blocks into root. */
static inline struct store_writer_opts fuzz__writer_opts(const char *root)
{
	return (struct store_writer_opts){.root = root,
					  .block_seconds = 5,
					  .cpu_num = 2,
					  .freq = 49,
					  .record_interval = 1,
					  .stack_size = 8192};
}

#endif /* CPA_FUZZ_UTIL_H */
