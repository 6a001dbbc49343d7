// SPDX-License-Identifier: MIT
/*
 * Dump writer and reader (dump.h). The writer runs inside unwindd on one
 * sample in FREQ of one pid: plain blocking write(2)s to a regular file,
 * one per record, so an O_APPEND file never holds half of a record unless
 * the disk filled up in the middle of one (then we stop: a reader stops at a
 * torn record and everything before it is good).
 */
#include "dump.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/safepath.h"
#include "common/timeutil.h"
#include "procmaps.h"

#define UDUMP_SEEN_MAX 1024

struct udump_seen {
	uint64_t dev;
	uint64_t ino;
	uint32_t id;
};

struct udump {
	int fd;
	char path[1024];
	uint32_t pid;
	uint32_t freq;
	uint64_t max_bytes;
	uint64_t bytes;
	uint64_t count; /* samples of pid seen */
	uint64_t samples;
	uint64_t errors;
	bool stopped;
	bool vdso_done;
	uint64_t checked_ns; /* may_dump() last passed (CLOCK_MONOTONIC) */

	char *buf; /* maps text, reused */
	size_t buf_cap;

	struct udump_seen seen[UDUMP_SEEN_MAX];
	unsigned int n_seen;
};

/* ---- writer ---- */

static int write_iov(struct udump *d, struct iovec *iov, int n_iov, size_t total)
{
	ssize_t w;

	if (d->stopped)
		return -ENOSPC;
	if (d->bytes + total > d->max_bytes) {
		d->stopped = true;
		log_warn("debug dump '%s': reached its cap of %llu bytes, no more samples dumped",
			 d->path, (unsigned long long)d->max_bytes);
		return -EFBIG;
	}
	do
		w = writev(d->fd, iov, n_iov);
	while (w < 0 && errno == EINTR);
	if (w == (ssize_t)total) {
		d->bytes += total;
		return 0;
	}
	d->errors++;
	if (w >= 0) {
		/* Part of a record is in the file: anything after it would be
		 * misread, so that is the end of this dump. */
		d->stopped = true;
		log_error("debug dump '%s': short write (%zd of %zu bytes), dump stopped", d->path,
			  w, total);
		return -EIO;
	}
	w = -errno;
	if (d->errors == 1)
		log_error_errno((int)w,
				"debug dump '%s': write: %m (counted in errors, logged once)",
				d->path);
	return (int)w;
}

static int write_rec(struct udump *d, uint32_t type, const void *a, size_t alen, const void *b,
		     size_t blen)
{
	static const uint8_t zero[8];
	struct udump_rec_hdr h;
	struct iovec iov[4];
	size_t len = alen + blen, pad = ALIGN_UP(len, 8) - len;
	int n = 0;

	if (len > UDUMP_REC_MAX)
		return -E2BIG;
	h.type = type;
	h.len = (uint32_t)len;
	iov[n++] = (struct iovec){.iov_base = &h, .iov_len = sizeof(h)};
	if (alen)
		iov[n++] = (struct iovec){.iov_base = (void *)a, .iov_len = alen};
	if (blen)
		iov[n++] = (struct iovec){.iov_base = (void *)b, .iov_len = blen};
	if (pad)
		iov[n++] = (struct iovec){.iov_base = (void *)zero, .iov_len = pad};
	return write_iov(d, iov, n, sizeof(h) + len + pad);
}

/* The three first numbers of /proc/PID/status's line key ("Uid:", "Gid:"). */
static int status_ids(FILE *f, const char *key, unsigned long v[3])
{
	char line[256];

	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			return sscanf(line + strlen(key), "%lu %lu %lu", &v[0], &v[1], &v[2]) == 3
				       ? 0
				       : -EBADMSG;
	return -EBADMSG;
}

/*
 * A dump holds the target's raw stack memory: only of a process the real
 * user could ptrace (whatever capabilities the stage holds). Root may dump
 * any; anyone else a process whose real, effective and saved uids and gids
 * are the real user's, that holds no capability and is dumpable (the /proc
 * entry of a process that is not is root's).
 */
static int may_dump(uint32_t pid)
{
	unsigned long u[3], g[3], caps = 0;
	char path[64], line[256];
	FILE *f;
	uid_t uid = getuid();
	gid_t gid = getgid();
	struct stat sb;
	bool ok;

	if (uid == 0)
		return 0;
	snprintf(path, sizeof(path), "/proc/%u", pid);
	if (stat(path, &sb) < 0)
		return -errno;
	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	if (status_ids(f, "Uid:", u) < 0 || status_ids(f, "Gid:", g) < 0) {
		fclose(f);
		return -EBADMSG;
	}
	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "CapPrm:", 7))
			caps = strtoul(line + 7, NULL, 16);
	fclose(f);
	ok = sb.st_uid == uid && sb.st_gid == gid && !caps;
	for (int i = 0; i < 3; i++)
		ok = ok && u[i] == uid && g[i] == gid;
	if (!ok) {
		log_error("--debug_option: uid %u could not ptrace pid %u (uid %lu, gid %lu%s): "
			  "refused to dump its memory",
			  (unsigned int)uid, pid, u[1], g[1], caps ? ", capabilities" : "");
		return -EPERM;
	}
	return 0;
}

int udump__open(const char *path, uint32_t pid, uint32_t freq, uint64_t max_bytes,
		struct udump **ret)
{
	_cleanup_close_ int fd = -1;
	struct udump *d;
	struct stat sb;
	char err[PATH_MAX + 128];
	int r;

	if (!path || !*path || !pid)
		return -EINVAL;
	if (strlen(path) >= sizeof(d->path))
		return -ENAMETOOLONG;
	r = may_dump(pid);
	if (r < 0)
		return r;
	fd = safe_path__open(path, O_RDWR | O_APPEND | O_CREAT, 0640, err, sizeof(err));
	if (fd < 0) {
		log_error("%s", err);
		return fd;
	}
	if (fstat(fd, &sb) < 0)
		return -errno;
	if (!S_ISREG(sb.st_mode))
		return -EINVAL;
	if (sb.st_size > 0) {
		/* Appending after a restart: the file must be one of ours. */
		struct udump_file_hdr h;

		if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h) ||
		    memcmp(h.magic, UDUMP_MAGIC, 8) != 0)
			return -EBADMSG;
		if (h.version_major != UDUMP_VERSION_MAJOR)
			return -EPROTONOSUPPORT;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	snprintf(d->path, sizeof(d->path), "%s", path);
	d->pid = pid;
	d->freq = freq ? freq : 1;
	d->max_bytes = max_bytes ? max_bytes : UDUMP_MAX_BYTES;
	d->bytes = (uint64_t)sb.st_size;
	d->checked_ns = clock_ns(CLOCK_MONOTONIC);
	d->fd = TAKE_FD(fd);
	if (!d->bytes) {
		struct udump_file_hdr h = {
			.version_major = UDUMP_VERSION_MAJOR,
			.version_minor = UDUMP_VERSION_MINOR,
			.hdr_size = sizeof(h),
			.pid = pid,
			.freq = d->freq,
			.created_ns = clock_ns(CLOCK_REALTIME),
		};
		struct iovec iov = {.iov_base = &h, .iov_len = sizeof(h)};

		memcpy(h.magic, UDUMP_MAGIC, 8);
		r = write_iov(d, &iov, 1, sizeof(h));
		if (r < 0) {
			udump__free(d);
			return r;
		}
	}
	*ret = d;
	return 0;
}

void udump__free(struct udump *d)
{
	if (!d)
		return;
	if (d->fd >= 0)
		close(d->fd);
	free(d->buf);
	free(d);
}

bool udump__want(struct udump *d, uint32_t pid)
{
	uint64_t now;

	if (!d || pid != d->pid || d->stopped || d->count++ % d->freq != 0)
		return false;
	/* Asked again each second: the pid may now be another process's. */
	now = clock_ns(CLOCK_MONOTONIC);
	if (now - d->checked_ns >= NSEC_PER_SEC) {
		if (may_dump(pid) < 0) {
			d->stopped = true;
			return false;
		}
		d->checked_ns = now;
	}
	return true;
}

int udump__maps(struct udump *d, uint32_t pid, const char *text, size_t len)
{
	struct udump_maps h = {.pid = pid, .time_ns = clock_ns(CLOCK_REALTIME)};

	return write_rec(d, UDUMP_MAPS, &h, sizeof(h), text, len);
}

static int read_maps(struct udump *d, const char *path, size_t *ret_len)
{
	return read_full_file_at(AT_FDCWD, path, 0, PROCMAPS_TEXT_MAX, &d->buf, &d->buf_cap,
				 ret_len);
}

int udump__read_maps(struct udump *d, const char *proc_root, uint32_t pid, const char **ret,
		     size_t *ret_len)
{
	char path[300];
	int r;

	snprintf(path, sizeof(path), "%s/%u/maps", proc_root ? proc_root : "/proc", pid);
	r = read_maps(d, path, ret_len);
	if (r < 0)
		return r;
	*ret = d->buf;
	return 0;
}

bool udump__module_seen(struct udump *d, uint64_t dev, uint64_t ino, uint32_t id)
{
	unsigned int i;

	for (i = 0; i < d->n_seen; i++)
		if (d->seen[i].ino == ino && d->seen[i].dev == dev && d->seen[i].id == id)
			return true;
	if (d->n_seen == UDUMP_SEEN_MAX)
		d->n_seen = 0; /* forget: a repeated definition is harmless */
	d->seen[d->n_seen++] = (struct udump_seen){.dev = dev, .ino = ino, .id = id};
	return false;
}

int udump__module(struct udump *d, const struct udump_module *m, const char *path)
{
	return write_rec(d, UDUMP_MODULE, m, sizeof(*m), path, m->path_len);
}

int udump__sample(struct udump *d, const void *rec, uint32_t len)
{
	int r = write_rec(d, UDUMP_SAMPLE, rec, len, NULL, 0);

	if (r == 0)
		d->samples++;
	return r;
}

int udump__result(struct udump *d, uint64_t seq, int stop, const struct cpa_uframe *uf,
		  unsigned int n)
{
	struct udump_result h = {
		.seq = seq,
		.stop_reason = (uint16_t)stop,
		.n_uframes = (uint16_t)n,
	};

	return write_rec(d, UDUMP_RESULT, &h, sizeof(h), uf, sizeof(*uf) * n);
}

int udump__vdso(struct udump *d)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR), size;
	size_t len = 0;
	int r;

	if (d->vdso_done)
		return 0;
	d->vdso_done = true;
	if (!base)
		return -ENOENT;
	r = read_maps(d, "/proc/self/maps", &len);
	if (r < 0)
		return r;
	size = procmaps__vdso_size(d->buf, len, base);
	if (!size)
		return -ENOENT;
	return write_rec(d, UDUMP_VDSO, (const void *)(uintptr_t)base, size, NULL, 0);
}

uint64_t udump__bytes(const struct udump *d)
{
	return d->bytes;
}

uint64_t udump__errors(const struct udump *d)
{
	return d->errors;
}

uint64_t udump__samples(const struct udump *d)
{
	return d->samples;
}

bool udump__stopped(const struct udump *d)
{
	return d->stopped;
}

/* ---- reader ---- */

struct udump_reader {
	const uint8_t *base;
	size_t size;
	size_t pos;
	struct udump_file_hdr hdr;
};

int udump_reader__open(const char *path, struct udump_reader **ret)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct udump_reader *r;
	struct stat sb;
	void *base;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &sb) < 0)
		return -errno;
	if ((size_t)sb.st_size < sizeof(struct udump_file_hdr))
		return -EBADMSG;
	base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (base == MAP_FAILED)
		return -errno;
	r = calloc(1, sizeof(*r));
	if (!r) {
		munmap(base, (size_t)sb.st_size);
		return -ENOMEM;
	}
	r->base = base;
	r->size = (size_t)sb.st_size;
	memcpy(&r->hdr, base, sizeof(r->hdr));
	if (memcmp(r->hdr.magic, UDUMP_MAGIC, 8) != 0 || r->hdr.hdr_size < sizeof(r->hdr) ||
	    r->hdr.hdr_size > r->size) {
		udump_reader__free(r);
		return -EBADMSG;
	}
	if (r->hdr.version_major > UDUMP_VERSION_MAJOR) {
		udump_reader__free(r);
		return -EPROTONOSUPPORT;
	}
	r->pos = ALIGN_UP((size_t)r->hdr.hdr_size, 8);
	*ret = r;
	return 0;
}

const struct udump_file_hdr *udump_reader__hdr(const struct udump_reader *r)
{
	return &r->hdr;
}

int udump_reader__next(struct udump_reader *r, struct udump_rec *ret)
{
	struct udump_rec_hdr h;

	if (r->pos >= r->size)
		return 0;
	if (r->size - r->pos < sizeof(h))
		return -EBADMSG;
	memcpy(&h, r->base + r->pos, sizeof(h));
	if (h.len > UDUMP_REC_MAX || h.len > r->size - r->pos - sizeof(h))
		return -EBADMSG;
	ret->type = h.type;
	ret->len = h.len;
	ret->data = r->base + r->pos + sizeof(h);
	r->pos += sizeof(h) + ALIGN_UP((size_t)h.len, 8);
	if (r->pos > r->size)
		r->pos = r->size; /* the last record's padding may be missing: fine */
	return 1;
}

void udump_reader__free(struct udump_reader *r)
{
	if (!r)
		return;
	if (r->base)
		munmap((void *)r->base, r->size);
	free(r);
}
