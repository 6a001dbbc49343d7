/* SPDX-License-Identifier: MIT */
/*
 * symd: JIT symbol maps, /tmp/perf-PID.map (procinfo.c).
 */
#ifndef CPA_SYMD_PROCINFO_H
#define CPA_SYMD_PROCINFO_H

#include <stddef.h>
#include <stdint.h>

#define SYMD_MAX_JIT_SYMS (1u << 20)

struct jitmap;
/*
 * Load a perf map of at most max_bytes of memory (file bytes + entries; the
 * file alone at most 256 MiB): -EFBIG past it. With uids (the process's real
 * and effective uid), the file must be a regular file (not a symlink: opened
 * O_NOFOLLOW) owned by one of them or by root and not writable by others,
 * else -EPERM; NULL skips that check (tests, fuzzing).
 */
int jitmap__load(const char *path, size_t max_bytes, const uint32_t *uids, struct jitmap **ret);
void jitmap__free(struct jitmap *j);
const char *jitmap__lookup(const struct jitmap *j, uint64_t pc, uint64_t *ret_start);
size_t jitmap__bytes(const struct jitmap *j);

#endif /* CPA_SYMD_PROCINFO_H */
