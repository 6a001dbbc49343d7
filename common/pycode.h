/* SPDX-License-Identifier: MIT */
/*
 * A CPython code object read from another process's memory (docs/unwinding.md,
 * "Python"): capture reads it when it forwards a Python sample (the process is
 * alive then), symd when no such record came. The layouts of PyCodeObject and
 * str per minor version (3.10-3.13, x86-64) and the checks: the object's type
 * must be "code", its strings compact.
 */
#ifndef CPA_COMMON_PYCODE_H
#define CPA_COMMON_PYCODE_H

#include <stddef.h>
#include <stdint.h>

#define PYCODE_MAX_STR 512 /* longest name or file name read, in characters */

/* PyCodeObject and str layouts per minor version (the versions' headers, as
 * capture's offsets table: capture/cap_python.c). */
struct pycode_layout {
	unsigned int minor;
	uint16_t co_filename, co_name, co_qualname, co_firstlineno, co_linetable, co_code;
	uint16_t ascii_size, compact_size; /* sizeof(PyASCIIObject), PyCompactUnicodeObject */
};

/* len bytes of the process at addr, into buf. */
struct pycode_seg {
	uint64_t addr;
	void *buf;
	size_t len;
};

/* Read n segments of the process (capture: one process_vm_readv): 0 when all
 * were read, -ESRCH when the process is gone, another -errno else. */
typedef int (*pycode_read_fn)(void *ctx, const struct pycode_seg *segs, unsigned int n);

struct pycode_info {
	char *qualname; /* UTF-8, NUL-terminated (3.10: co_name) */
	char *filename;
	uint8_t *linetab; /* NULL (linetab_len 0) when longer than the caller's bound */
	size_t linetab_len;
	size_t linetab_size; /* co_linetable's length in the process */
	uint32_t firstlineno;
	uint32_t check; /* the co_check word (bpf/profile.h) */
};

/* The layout of CPython 3.<minor>, or NULL. */
const struct pycode_layout *pycode__layout(unsigned int minor);

/*
 * The code object at code through rd(ctx, ...), three calls, into *ret (owned
 * by the caller: pycode__info_clear()). The line table is read when at most
 * max_linetab bytes. 0, -ESRCH (the process is gone), -EINVAL (not a code
 * object or unreadable), -ENOMEM.
 */
int pycode__read(pycode_read_fn rd, void *ctx, const struct pycode_layout *l, uint64_t code,
		 size_t max_linetab, struct pycode_info *ret);
void pycode__info_clear(struct pycode_info *info);

#endif /* CPA_COMMON_PYCODE_H */
