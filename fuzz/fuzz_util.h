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

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The scratch dir of this process (created on first use; exits on failure). */
const char *fuzz__dir(void);
/* Write data to <fuzz__dir()>/<name> (replacing it); its path into buf. */
void fuzz__write(const char *name, const void *data, size_t size, char *buf, size_t len);
/* A memfd holding data, offset 0 (the caller closes it). */
int fuzz__memfd(const void *data, size_t size);
/* Remove everything below path (path itself too). */
void fuzz__rm_rf(const char *path);

#endif /* CPA_FUZZ_UTIL_H */
