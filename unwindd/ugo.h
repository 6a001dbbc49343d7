/* SPDX-License-Identifier: MIT */
/*
 * What unwindd needs of a Go binary's .gopclntab (common/gopclntab.h): the
 * frame size at a pc (for Go code without CFI: stripped binaries have no
 * .debug_frame and Go emits no .eh_frame), and the runtime functions where a
 * walk ends (the bottoms of goroutine and thread stacks) or leaves the stack
 * it walks (systemstack, mcall, morestack: they switch to g0's stack and
 * back). docs/unwinding.md, "Go".
 */
#ifndef CPA_UNWINDD_UGO_H
#define CPA_UNWINDD_UGO_H

#include <stddef.h>
#include <stdint.h>

#include "common/gopclntab.h"

struct ugo;

/* The pclntab of the ELF open at fd: 0 and *ret, or -ENOENT (no
 * .gopclntab: not Go), -EINVAL/-EOPNOTSUPP/-EFBIG/-ENOMEM/-EIO. */
int ugo__open(int fd, struct ugo **ret);
void ugo__free(struct ugo *g);
size_t ugo__bytes(const struct ugo *g);

/*
 * Classify the code at file offset off: an enum unw_go (walk.h), and in
 * *ret_sp the bytes the function has pushed below its entry sp there (-1
 * when the table does not say).
 */
unsigned int ugo__at(const struct ugo *g, uint64_t off, int32_t *ret_sp);

#endif /* CPA_UNWINDD_UGO_H */
