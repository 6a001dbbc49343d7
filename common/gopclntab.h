/* SPDX-License-Identifier: MIT */
/*
 * Go's own symbol table, .gopclntab (Go 1.16+, little-endian, 64-bit): the
 * name of every function, its extent, its stack-pointer delta at every pc
 * (pcsp) and its file:line. Stripped Go binaries (-ldflags='-s -w') keep it:
 * the runtime needs it for its tracebacks. symd names frames from it, unwindd
 * takes frame sizes from it where there is no CFI (docs/unwinding.md).
 *
 * The section is untrusted input: every read is bounds-checked against the
 * bytes given, nothing is allocated, no logging; errors are -errno. The
 * bytes are borrowed: they must outlive the struct.
 */
#ifndef CPA_GOPCLNTAB_H
#define CPA_GOPCLNTAB_H

#include <stddef.h>
#include <stdint.h>

struct gopclntab {
	const uint8_t *data;
	size_t len;
	uint64_t text;	      /* vaddr the function entries are relative to (1.18+) */
	uint32_t version;     /* 116, 118 or 120 */
	uint32_t nfunc;	      /* entries of functab */
	uint32_t quantum;     /* pc quantum (1 on x86) */
	uint32_t field;	      /* bytes per functab field: 4 (1.18+) or 8 (1.16) */
	uint64_t funcnametab; /* offsets of the tables in data */
	uint64_t cutab;
	uint64_t filetab;
	uint64_t pctab;
	uint64_t functab; /* also the base of the _func records */
};

struct gofunc {
	uint64_t entry; /* vaddr of the first instruction */
	uint64_t end;	/* vaddr past the last one (the next function's entry) */
	const char *name;
	uint32_t off; /* of its _func record, from functab */
	uint32_t index;
};

/*
 * Check the header of the section's bytes and fill t. text_va: the vaddr of
 * the .text section (Go 1.18+ functions are offsets from it; the header's own
 * copy may be unrelocated); 0 takes the header's. -EINVAL: not a pclntab;
 * -EOPNOTSUPP: a version or layout this does not read (Go < 1.16, 32-bit,
 * big-endian).
 */
int gopclntab__init(struct gopclntab *t, const void *data, size_t len, uint64_t text_va);

/* Function i (0 <= i < nfunc). -EINVAL if its record is out of bounds. */
int gopclntab__func(const struct gopclntab *t, uint32_t i, struct gofunc *ret);

/* The function holding vaddr pc: -ENOENT outside every function. */
int gopclntab__find(const struct gopclntab *t, uint64_t pc, struct gofunc *ret);

/*
 * Bytes the function has pushed below its entry sp at pc (0 at the entry:
 * the return address sits at sp + *ret). -ENOENT when pc is outside f or
 * the table says nothing there, -EINVAL when the table is corrupt.
 */
int gopclntab__sp(const struct gopclntab *t, const struct gofunc *f, uint64_t pc, int32_t *ret);

/*
 * Go's funcFlag of f (runtime/symtab.go, Go 1.17+; 0 in a 1.16 binary):
 * TOPFRAME marks the outermost frame of a stack (goexit, mstart, rt0_go,
 * sigtramp), SPWRITE a function that writes sp in a way pcsp cannot say
 * (mcall, systemstack, gogo, asmcgocall): Go's traceback ends at both.
 * -EINVAL if the record is out of bounds.
 */
#define GOFUNC_TOPFRAME 0x1u
#define GOFUNC_SPWRITE	0x2u
int gopclntab__flag(const struct gopclntab *t, const struct gofunc *f, uint8_t *ret);

/* Source file and line of pc in f (file points into the section). */
int gopclntab__line(const struct gopclntab *t, const struct gofunc *f, uint64_t pc,
		    const char **ret_file, int32_t *ret_line);

#endif /* CPA_GOPCLNTAB_H */
