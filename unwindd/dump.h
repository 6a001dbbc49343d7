/* SPDX-License-Identifier: MIT */
/*
 * --debug_option PID,FREQ,PATH: raw samples of one process dumped for
 * offline replay (build/bin/cpa-unwind-replay). Format, all little-endian,
 * every record 8-byte aligned (docs/unwindd.md has the byte table):
 *
 *   file header  32 B: "CPAUDUMP" u16 major u16 minor u32 hdr_size
 *                      u32 pid u32 freq u64 created (CLOCK_REALTIME ns)
 *   record       u32 type, u32 len, len payload bytes, zero pad to 8
 *     MAPS    struct udump_maps + /proc/PID/maps text (first sample, every refresh)
 *     MODULE  struct udump_module + path (a binary a dumped frame used, per live id)
 *     SAMPLE  the CPA_REC_SAMPLE record exactly as it was in ring 0
 *     RESULT  struct udump_result + struct cpa_uframe[n]: what unwindd made of it live
 *     VDSO    unwindd's own [vdso] image (the same one every 64-bit process maps)
 *
 * Writer: O_APPEND|O_CREAT|O_CLOEXEC, one write(2) per record (never torn
 * by another writer), size capped; errors are counted and logged once, never
 * retried in a loop: the stage does not stall for its debug output.
 */
#ifndef CPA_UNWINDD_DUMP_H
#define CPA_UNWINDD_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm/records.h"

#define UDUMP_MAGIC	    "CPAUDUMP"
#define UDUMP_VERSION_MAJOR 2 /* 2: struct cpa_sample carries all 17 user registers */
#define UDUMP_VERSION_MINOR 0
#define UDUMP_MAX_BYTES	    (256ull << 20) /* default cap of one dump file */
#define UDUMP_REC_MAX	    (64u << 20)	   /* a reader rejects larger records */

struct udump_file_hdr {
	char magic[8];
	uint16_t version_major;
	uint16_t version_minor;
	uint32_t hdr_size; /* sizeof(struct udump_file_hdr); readers skip what they do not know */
	uint32_t pid;
	uint32_t freq;
	uint64_t created_ns;
};
_Static_assert(sizeof(struct udump_file_hdr) == 32, "dump header layout");

enum udump_rec_type {
	UDUMP_MAPS = 1,
	UDUMP_MODULE,
	UDUMP_SAMPLE,
	UDUMP_RESULT,
	UDUMP_VDSO,
};

struct udump_rec_hdr {
	uint32_t type; /* enum udump_rec_type */
	uint32_t len;  /* payload bytes, without this header and the padding */
};
_Static_assert(sizeof(struct udump_rec_hdr) == 8, "dump record header");

/* UDUMP_MAPS, then the maps text (len - sizeof(struct udump_maps) bytes). */
struct udump_maps {
	uint32_t pid;
	uint32_t _pad0;
	uint64_t time_ns; /* CLOCK_REALTIME of the read */
};
_Static_assert(sizeof(struct udump_maps) == 16, "dump maps layout");

/* UDUMP_MODULE, then char path[path_len] (no NUL). */
struct udump_module {
	uint64_t dev; /* as /proc/PID/maps shows it (makedev) */
	uint64_t ino;
	uint32_t id; /* live module id (of the epoch the RESULTs that follow use) */
	uint32_t path_len;
	uint8_t kind; /* enum cpa_module_kind */
	uint8_t build_id_len;
	uint8_t _pad0[6];
	uint8_t build_id[CPA_BUILD_ID_MAX];
	uint8_t _pad1[4];
};
_Static_assert(sizeof(struct udump_module) == 56, "dump module layout");

/* UDUMP_RESULT, then struct cpa_uframe uframes[n_uframes]. */
struct udump_result {
	uint64_t seq; /* of the SAMPLE it belongs to */
	uint16_t stop_reason;
	uint16_t n_uframes;
	uint32_t _pad0;
};
_Static_assert(sizeof(struct udump_result) == 16, "dump result layout");

/* ---- writer (unwindd) ---- */

struct udump;

/* Open (create) path for appending. An existing file must be a dump of the
 * same major version. max_bytes 0 = UDUMP_MAX_BYTES. */
int udump__open(const char *path, uint32_t pid, uint32_t freq, uint64_t max_bytes,
		struct udump **ret);
void udump__free(struct udump *d);

/* Count a sample of pid; true when it is one to dump (every freq-th of the
 * debug pid, the first included) and the dump is still open. */
bool udump__want(struct udump *d, uint32_t pid);

/* Records. 0 or -errno; after a failure the record is not in the file. */
int udump__maps(struct udump *d, uint32_t pid, const char *text, size_t len);
/* Read proc_root/PID/maps into the dump's reused buffer (for udump__maps). */
int udump__read_maps(struct udump *d, const char *proc_root, uint32_t pid, const char **ret,
		     size_t *ret_len);
int udump__module(struct udump *d, const struct udump_module *m, const char *path);
int udump__sample(struct udump *d, const void *rec, uint32_t len);
int udump__result(struct udump *d, uint64_t seq, int stop, const struct cpa_uframe *uf,
		  unsigned int n);
/* Our own vDSO image, once per file. */
int udump__vdso(struct udump *d);

/* Whether a MODULE for (dev, ino, id) went into this file already; notes it. */
bool udump__module_seen(struct udump *d, uint64_t dev, uint64_t ino, uint32_t id);

uint64_t udump__bytes(const struct udump *d);	/* file size as we know it */
uint64_t udump__errors(const struct udump *d);	/* failed writes */
uint64_t udump__samples(const struct udump *d); /* SAMPLE records written */
bool udump__stopped(const struct udump *d);	/* cap reached or a torn write */

/* ---- reader (cpa-unwind-replay, tests) ---- */

struct udump_reader;

struct udump_rec {
	uint32_t type;
	uint32_t len;
	const void *data; /* valid until udump_reader__free */
};

/* Map the file and check the header: -EBADMSG not a dump, -EPROTONOSUPPORT
 * a newer major version. */
int udump_reader__open(const char *path, struct udump_reader **ret);
const struct udump_file_hdr *udump_reader__hdr(const struct udump_reader *r);
/* 1 and the next record, 0 at the end, -EBADMSG for a torn or bad record
 * (a crash mid-write: everything before it is good). */
int udump_reader__next(struct udump_reader *r, struct udump_rec *ret);
void udump_reader__free(struct udump_reader *r);

#endif /* CPA_UNWINDD_DUMP_H */
