/* SPDX-License-Identifier: MIT */
/*
 * Compiled DWARF CFI of one ELF file (see docs/unwinding.md).
 *
 * cfi_table__build() parses .eh_frame (and .debug_frame of the file or of a
 * separate debug file) once and compiles every FDE into a sorted array of
 * rows keyed by FILE OFFSET: the walker looks a pc up with
 * file_off = pc - map_start + pgoff, no per-process relocation needed, so one
 * table serves every process that maps the file. The table is immutable after
 * build and may be read by any number of threads.
 */
#ifndef CPA_UNWINDD_CFI_H
#define CPA_UNWINDD_CFI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cfi_table;

/*
 * Build the table of the ELF open on elf_fd (a file, /proc/PID/map_files/...,
 * or a memfd holding an image read from memory such as the vDSO). debug_fd,
 * when >= 0, is a separate debug file whose .debug_frame fills address ranges
 * .eh_frame does not cover. Neither fd is kept or closed.
 * Returns 0, -ENODATA when there is no CFI at all, -EINVAL on a malformed or
 * non-x86-64 ELF, -EFBIG when the text spans more than 4 GiB, -ENOMEM.
 */
int cfi_table__build(int elf_fd, int debug_fd, struct cfi_table **ret);
void cfi_table__free(struct cfi_table *t);

/* Heap bytes held by the table (rows, index, side rules, expressions). */
size_t cfi_table__bytes(const struct cfi_table *t);
/* Rows in the table, gap rows included. */
size_t cfi_table__rows(const struct cfi_table *t);
/* Rows that need the side rule table (expressions, signal frames, odd offsets). */
size_t cfi_table__complex_rows(const struct cfi_table *t);
/* Rows whose rules include a DWARF expression (evaluated by walk.c). */
size_t cfi_table__expr_rows(const struct cfi_table *t);

/* Row i as [start, end) file offsets, for tests and benches; -ERANGE past the end. */
int cfi_table__row(const struct cfi_table *t, size_t i, uint64_t *ret_start, uint64_t *ret_end,
		   uint32_t *ret_rule);

/*
 * The lazy form, what unwindd uses: cfi_index__build() reads only the FDE
 * headers (no CFA program runs) and keeps a read-only mapping of the file(s);
 * cfi_index__table() compiles the table of the 64 KiB chunk of file offsets
 * that holds file_off on its first lookup (every FDE overlapping it) and
 * returns it, NULL in *ret when there is no CFI there. A chunk's table
 * answers like cfi_table__build()'s for every pc of the chunk. Neither fd is
 * kept or closed. The index is not thread-safe (lookups build); a table it
 * returned lives as long as the index. cfi_index__build() returns what
 * cfi_table__build() does; cfi_index__table() 0 or -ENOMEM.
 */
struct cfi_index;

int cfi_index__build(int elf_fd, int debug_fd, struct cfi_index **ret);
int cfi_index__table(struct cfi_index *x, uint64_t file_off, const struct cfi_table **ret);
void cfi_index__free(struct cfi_index *x);
/* Heap bytes: the index, the chunks built so far, inflated sections. */
size_t cfi_index__bytes(const struct cfi_index *x);
/*
 * Called at a steady period: when chunks were built before the previous
 * call and none since, drop the file pages those builds read from our page
 * tables (the 16-build drop leaves up to 15 builds' pages of a binary that
 * then goes quiet: hundreds of KiB of PSS each for the large ones). true
 * when pages were dropped.
 */
bool cfi_index__drop_quiet(struct cfi_index *x);
/* Chunks built so far, and in all. */
void cfi_index__chunks(const struct cfi_index *x, uint32_t *ret_built, uint32_t *ret_total);

#endif /* CPA_UNWINDD_CFI_H */
