/* SPDX-License-Identifier: MIT */
/*
 * symd: JIT symbol maps, /tmp/perf-PID.map (jitmap.c).
 */
#ifndef CPA_SYMD_JITMAP_H
#define CPA_SYMD_JITMAP_H

#include <stddef.h>
#include <stdint.h>

#define SYMD_MAX_JIT_SYMS (1u << 20)

struct jitmap;
/*
 * Load a perf map of at most max_bytes of memory (file bytes + entries; the
 * file alone at most 256 MiB): -EFBIG past it. With uids (the process's real
 * and effective uid), the file must be a regular file (not a symlink: opened
 * O_NOFOLLOW) owned by one of them or by root and not writable by others,
 * else -EPERM; NULL skips that check (tests, fuzzing). Its entries may name
 * code of any time; the map's read time is now (CLOCK_REALTIME). path is
 * looked up under root (common/procroot.h: "" ours, else a process's root).
 */
int jitmap__load(const char *root, const char *path, size_t max_bytes, const uint32_t *uids,
		 struct jitmap **ret);
/*
 * Read the lines the JIT appended since the last read, checked and bounded as
 * jitmap__load() (max_bytes: the whole map's). Their entries were written
 * after the last read, so they name no sample taken before it; now_ns
 * (CLOCK_REALTIME) becomes the read time. 1: new entries, 0: none, -ESTALE:
 * the file was replaced or cut (load it again), -EFBIG (the pool keeps every
 * read's bytes: load it again), -EPERM, -errno.
 */
int jitmap__update(struct jitmap *j, const char *root, const char *path, size_t max_bytes,
		   const uint32_t *uids, uint64_t now_ns, unsigned int flags);
/* jitmap__update() flag: the JIT rewrites its whole map (HotSpot's
 * Compiler.perfmap): read it all again, keep the entries already known
 * (with their time), add the others. */
#define JITMAP_REREAD 1u
/*
 * The entry that covers pc for a sample taken at time_ns (CLOCK_REALTIME):
 * of the entries that cover it, the last line of the file among those
 * written before the sample could run (a later entry for an overlapping
 * range is code that replaced the earlier one); when none was, the first.
 * time_ns 0: the last line. NULL when no entry covers pc.
 */
const char *jitmap__lookup_at(const struct jitmap *j, uint64_t pc, uint64_t time_ns,
			      uint64_t *ret_start);
const char *jitmap__lookup(const struct jitmap *j, uint64_t pc, uint64_t *ret_start);
/* CLOCK_REALTIME of the last read. */
uint64_t jitmap__read_ns(const struct jitmap *j);
size_t jitmap__bytes(const struct jitmap *j);
void jitmap__free(struct jitmap *j);

#endif /* CPA_SYMD_JITMAP_H */
