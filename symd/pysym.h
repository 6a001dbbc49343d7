/* SPDX-License-Identifier: MIT */
/*
 * Python frames' names (docs/unwinding.md, "Python"): a CPython code object
 * as capture read it at sample time (CPA_REC_PYCODE), else read from
 * /proc/PID/mem (common/pycode.h) once per (process, code address), cached with
 * its qualified name, file, first line and line table (read again when a
 * sample's check word is not the cached one's). The cache is set-associative,
 * a set's least recently named or primed entry makes room: a flood of
 * capture's records for new code objects does not push out the ones every
 * sample names (a process's main(), its loop), which a process gone by the
 * time its last samples come could not give again. The line of an
 * instruction is decoded from the table (3.10's pairs, 3.11+'s location
 * table). Names are "qualname (file:line)".
 */
#ifndef CPA_SYMD_PYSYM_H
#define CPA_SYMD_PYSYM_H

#include <stddef.h>
#include <stdint.h>

#define PYSYM_SLOTS	  8192	      /* (pid, code) entries kept ... */
#define PYSYM_WAYS	  4	      /* ... in sets of this many, the least recently used out */
#define PYSYM_MAX_LINETAB (64u << 10) /* longest line table read */

struct pysym;
struct pycode_info;

/* proc: the /proc to read (tests: a fixture's). */
int pysym__new(const char *proc, struct pysym **ret);
void pysym__free(struct pysym *p);
/* pid exited: its entries and its open mem file go. Its slots are looked
 * through only when it holds some (a count per pid). */
void pysym__drop_pid(struct pysym *p, uint32_t pid);
/* Tests: the slots pid holds; how many drops looked through the slots. */
uint32_t pysym__held(struct pysym *p, uint32_t pid);
uint64_t pysym__scans(const struct pysym *p);
/*
 * The name of pid's frame (code, instr) of CPython 3.minor into buf[len]
 * ("qualname (file:line)"), *ret_line its line (0: none). Returns the name's
 * length, or -errno: -ESRCH the process is gone, -EINVAL not a code object,
 * -ESTALE another code object than the sample's (check, bpf/profile.h). instr:
 * the frame's instruction as cpa_pyframe has it.
 */
int pysym__name(struct pysym *p, uint32_t pid, unsigned int minor, uint64_t code, uint32_t instr,
		uint32_t check, char *buf, size_t len, uint32_t *ret_line);
/* pid's code object at code as capture read it (CPA_REC_PYCODE): into its
 * slot, as if read here; info's buffers are taken (info is cleared). */
void pysym__prime(struct pysym *p, uint32_t pid, uint64_t code, struct pycode_info *info);
/* Tests: code objects primed so far. */
uint64_t pysym__primed(const struct pysym *p);
/* Line of the code unit at unit in a line table (3.minor), first line
 * firstlineno; 0 when none. Exposed for tests. */
uint32_t pysym__line(unsigned int minor, const uint8_t *tab, size_t n, uint32_t firstlineno,
		     uint64_t unit);

#endif /* CPA_SYMD_PYSYM_H */
