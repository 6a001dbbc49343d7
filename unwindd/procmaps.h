/* SPDX-License-Identifier: MIT */
/*
 * /proc/PID/maps parsing without stdio: procmaps__next() makes one pass over
 * a buffer with no allocation and no copies (paths point into the caller's
 * buffer); procmaps__read() fills that buffer, growing it with realloc() and
 * reusing it across calls. It runs on every mapping-cache miss, so it is
 * written for speed and for hostile input (a line that does not parse is
 * skipped, never followed past the buffer).
 *
 *   55d0c8a00000-55d0c8a02000 r-xp 00002000 fd:01 1312  /usr/bin/cat
 *   ^start       ^end         ^perms ^pgoff  ^dev  ^ino ^path (may hold spaces)
 */
#ifndef CPA_UNWINDD_PROCMAPS_H
#define CPA_UNWINDD_PROCMAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum procmaps_kind {
	PROCMAPS_FILE,	   /* backed by a file with an inode */
	PROCMAPS_ANON,	   /* no file: JIT, [heap], [anon:...], [stack] */
	PROCMAPS_VDSO,	   /* [vdso] */
	PROCMAPS_VSYSCALL, /* [vsyscall] */
};

struct procmaps_entry {
	uint64_t start;
	uint64_t end;
	uint64_t pgoff;
	uint64_t dev; /* makedev(major, minor) */
	uint64_t ino;
	const char *path;  /* into the parsed buffer, not NUL-terminated */
	uint32_t path_len; /* " (deleted)" already cut off */
	bool exec;
	bool deleted;
	uint8_t kind; /* enum procmaps_kind */
};

/*
 * Parse the next line at *pos (< end) into ret and advance *pos past it.
 * Returns 1 for a parsed line, 0 at the end of the buffer, -EBADMSG for a
 * malformed line (*pos still advances, so the caller may skip it).
 */
int procmaps__next(const char **pos, const char *end, struct procmaps_entry *ret);

/* Size of the [vdso] mapping at base in a maps text, or 0 when it is not there. */
uint64_t procmaps__vdso_size(const char *text, size_t len, uint64_t base);

/* A maps file larger than this is hostile (the cap of its read_full_file_at()). */
#define PROCMAPS_TEXT_MAX (64u << 20)

#endif /* CPA_UNWINDD_PROCMAPS_H */
