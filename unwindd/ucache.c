// SPDX-License-Identifier: MIT
#include "ucache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/array.h"
#include "common/fileio.h"
#include "common/hash.h"
#include "common/heaptrim.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/procroot.h"
#include "common/timeutil.h"
#include "elfid.h"
#include "procmaps.h"
#include "shm/counters.h"

#include "cfi.h"
#include "ugo.h"
#include "walk.h"

#define IDENT_RETRY_NS	 (1000ull * 1000 * 1000) /* re-try opening a binary after this */
#define REFRESH_MAX_NS	 (5 * IDENT_RETRY_NS)	 /* default cap of the backed-off throttle */
#define NEG_TTL_NS	 (30 * IDENT_RETRY_NS)	 /* default trust in a known-missing page */
#define NEG_PAGE_SHIFT	 12
#define MISS_LEVEL_MAX	 30			 /* cap >> level stays meaningful */
#define BIDS_SLOTS	 1024			 /* build-id table: chains are fine past this */
#define ROOT_FDS	 8			 /* process roots held open: root_fd() */
#define HIST_GRACE_NS	 (5 * IDENT_RETRY_NS)	 /* floor of the history's grace */
#define BIN_IDLE_SCAN_NS (10ull * 1000000000ull) /* idle_bins() at most this often */
#define QUIET_PAGES_NS	 (2ull * 1000000000ull)	 /* quiet_pages(): a build-free period */
#define UNMAPPED_IDLE_NS (30ull * 1000000000ull) /* idle_bins(): an index nothing maps */
#define TRIM_FREED	 (4ull << 20)		 /* heap_trim__maybe() past this much free */

/* An unwind index shared by every binary with the same build-id whose file
 * (and debug file) is the same inode, e.g. one known by dev + inode and by
 * build-id only. A build-id alone proves nothing: anyone can write any.
 * Its chunk tables are compiled on the first walk through each 64 KiB of the
 * binary (cfi.h). */
struct ucfi {
	struct ucfi *next;
	struct cfi_index *index; /* NULL: none (a stripped Go binary: go alone) */
	struct ugo *go;		 /* a Go binary's .gopclntab (ugo.h), or NULL */
	uint64_t bytes;
	uint64_t dev, ino;   /* the file it was built from (fstat) */
	uint64_t ddev, dino; /* its debug file's; 0 = none */
	uint32_t refs;
	uint8_t build_id_len;
	uint8_t build_id[CPA_BUILD_ID_MAX];
};

struct ucache {
	struct ucache_opts o;
	char proc_root[256];

	struct uproc **procs;
	uint32_t procs_mask;
	uint32_t n_procs;

	struct ubin **bins;
	uint32_t bins_mask;
	uint32_t n_bins;
	uint32_t next_id;

	struct ubin vdso;
	struct ubin vsyscall;
	const void *vdso_img; /* our own vDSO: the same image every 64-bit process maps */
	uint64_t vdso_size;

	struct ucfi *cfis;
	uint64_t bytes;

	/* The mapping history (maphist.h), the binaries named by a build-id
	 * in mapping events, and the newest time_ns seen (the history's now). */
	struct maphist *mh;
	struct ubin *bids[BIDS_SLOTS];
	uint64_t hist_now;
	/* Each process's mount namespace, from exec events and forks: a gone
	 * one's files are looked up through a live process of it. */
	struct proc_mnt_tab mnt;
	/* The roots of the processes whose mapping events came last (root_fd()),
	 * by pid % ROOT_FDS; held: fd is a result (an fd, or -errno). */
	struct {
		uint32_t pid;
		int fd;
		bool held;
	} roots[ROOT_FDS];

	/* Scratch for maps reads and parsing; reused so a refresh allocates
	 * only when a process grows. */
	char *buf;
	size_t buf_cap;
	struct umap *tmp;
	uint32_t tmp_cap;
	uint64_t last_sweep_ns;
	uint64_t last_idle_ns;	/* idle_bins() */
	uint64_t last_quiet_ns; /* quiet_pages() */
	struct heap_trim trim;	/* common/heaptrim.h, with quiet_pages() */
	uint64_t quiet_drops;	/* indexes quiet_pages() dropped pages of */
};

static void cnt(struct ucache *c, unsigned int idx, uint64_t n)
{
	if (c->o.st)
		shm_stage__cnt_add(c->o.st, idx, n);
}

static uint32_t hash_pid(uint32_t pid, uint32_t mask)
{
	return hash32_fib(pid) & mask;
}

static uint32_t hash_bin(uint64_t dev, uint64_t ino, uint32_t mask)
{
	uint64_t h = hash64_fib(ino ^ (dev << 32 | dev >> 32));

	return (uint32_t)(h >> 32) & mask;
}

/* ---- processes ---- */

static int procs_grow(struct ucache *c)
{
	uint32_t n = (c->procs_mask + 1) * 2, i;
	struct uproc **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return -ENOMEM;
	for (i = 0; i <= c->procs_mask; i++) {
		struct uproc *p = c->procs[i], *next;

		for (; p; p = next) {
			uint32_t h = hash_pid(p->pid, n - 1);

			next = p->hnext;
			p->hnext = nb[h];
			nb[h] = p;
		}
	}
	c->bytes += (uint64_t)(n - c->procs_mask - 1) * sizeof(*nb);
	free(c->procs);
	c->procs = nb;
	c->procs_mask = n - 1;
	return 0;
}

struct uproc *ucache__proc_peek(struct ucache *c, uint32_t pid)
{
	struct uproc *p;

	for (p = c->procs[hash_pid(pid, c->procs_mask)]; p; p = p->hnext)
		if (p->pid == pid)
			return p;
	return NULL;
}

struct uproc *ucache__proc(struct ucache *c, uint32_t pid, uint64_t now_ns)
{
	struct uproc *p = ucache__proc_peek(c, pid);
	uint32_t h;

	if (likely(p)) {
		p->last_use = now_ns;
		return p;
	}
	if (c->n_procs >= c->procs_mask + 1 && procs_grow(c) < 0)
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->last_use = now_ns;
	h = hash_pid(pid, c->procs_mask);
	p->hnext = c->procs[h];
	c->procs[h] = p;
	c->n_procs++;
	c->bytes += sizeof(*p);
	return p;
}

static void proc_drop_maps(struct ucache *c, struct uproc *p)
{
	uint32_t i;

	for (i = 0; i < p->n_maps; i++)
		if (p->maps[i].bin)
			p->maps[i].bin->refs--;
	p->n_maps = 0;
	p->last_hit = 0;
	(void)c;
}

static void proc_free(struct ucache *c, struct uproc *p)
{
	struct uproc **pp = &c->procs[hash_pid(p->pid, c->procs_mask)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == p) {
			*pp = p->hnext;
			break;
		}
	}
	proc_drop_maps(c, p);
	c->bytes -= sizeof(*p) + (uint64_t)p->cap_maps * sizeof(struct umap);
	c->n_procs--;
	free(p->maps);
	free(p);
}

/* ---- binaries ---- */

static int bins_grow(struct ucache *c)
{
	uint32_t n = (c->bins_mask + 1) * 2, i;
	struct ubin **nb = calloc(n, sizeof(*nb));

	if (!nb)
		return -ENOMEM;
	for (i = 0; i <= c->bins_mask; i++) {
		struct ubin *b = c->bins[i], *next;

		for (; b; b = next) {
			uint32_t h = hash_bin(b->dev, b->ino, n - 1);

			next = b->hnext;
			b->hnext = nb[h];
			nb[h] = b;
		}
	}
	c->bytes += (uint64_t)(n - c->bins_mask - 1) * sizeof(*nb);
	free(c->bins);
	c->bins = nb;
	c->bins_mask = n - 1;
	return 0;
}

static struct ubin *bin_peek(const struct ucache *c, uint64_t dev, uint64_t ino)
{
	struct ubin *b;

	for (b = c->bins[hash_bin(dev, ino, c->bins_mask)]; b; b = b->hnext)
		if (b->ino == ino && b->dev == dev)
			return b;
	return NULL;
}

static struct ubin *bin_get(struct ucache *c, const struct procmaps_entry *e)
{
	uint32_t h = hash_bin(e->dev, e->ino, c->bins_mask);
	struct ubin *b = bin_peek(c, e->dev, e->ino);

	if (b)
		return b;

	if (c->n_bins >= c->bins_mask + 1 && bins_grow(c) == 0)
		h = hash_bin(e->dev, e->ino, c->bins_mask);
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->path = strndup(e->path, e->path_len);
	if (!b->path) {
		free(b);
		return NULL;
	}
	b->dev = e->dev;
	b->ino = e->ino;
	b->path_len = e->path_len;
	b->mod_kind = CPA_MOD_FILE;
	b->id = ++c->next_id;
	b->hnext = c->bins[h];
	c->bins[h] = b;
	c->n_bins++;
	c->bytes += sizeof(*b) + b->path_len + 1;
	return b;
}

static void cfi_put(struct ucache *c, struct ucfi *f)
{
	struct ucfi **pp;

	if (!f || --f->refs > 0)
		return;
	for (pp = &c->cfis; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	cfi_index__free(f->index);
	c->bytes -= f->bytes + sizeof(*f) + ugo__bytes(f->go);
	ugo__free(f->go);
	free(f);
}

static void bin_drop_cfi(struct ucache *c, struct ubin *b)
{
	cfi_put(c, b->cfi);
	b->cfi = NULL;
	b->cfi_tried = false;
}

static void bin_free(struct ucache *c, struct ubin *b)
{
	struct ubin **pp = &c->bins[hash_bin(b->dev, b->ino, c->bins_mask)];

	for (; *pp; pp = &(*pp)->hnext) {
		if (*pp == b) {
			*pp = b->hnext;
			break;
		}
	}
	if (b->in_bids) {
		struct ubin **bp = &c->bids[hash64(b->build_id, b->build_id_len) % BIDS_SLOTS];

		for (; *bp; bp = &(*bp)->bnext) {
			if (*bp == b) {
				*bp = b->bnext;
				break;
			}
		}
	}
	bin_drop_cfi(c, b);
	c->bytes -= sizeof(*b) + b->path_len + 1;
	c->n_bins--;
	free(b->path);
	free(b);
}

enum bin_view {
	BIN_LIVE_ROOT, /* root/<path> of the live process */
	BIN_OURS,      /* our path, the process gone */
	BIN_PEER,      /* root/<path> of a live process of the gone one's namespace */
};

/*
 * The file opened is b's. The live process's root/<path>: the same inode
 * (an overlay's file shows another dev there than its mapping). Our path:
 * the same dev and inode. A peer's: the same build-id when b has one, else
 * the same dev and inode: the peer is picked by a mount namespace id the
 * kernel reuses once the namespace is gone, and inode numbers repeat across
 * filesystems, so an inode alone proves nothing there (an overlay's file
 * without a build-id is not taken). A binary known by build-id only (dev 0):
 * the same build-id.
 */
static bool bin_is_file(const struct ubin *b, int fd, enum bin_view view)
{
	uint8_t bid[CPA_BUILD_ID_MAX];
	struct stat sb;
	uint8_t n = 0;

	if ((b->dev || !b->ino) && !(view == BIN_PEER && b->build_id_len))
		return fstat(fd, &sb) == 0 && (uint64_t)sb.st_ino == b->ino &&
		       (view == BIN_LIVE_ROOT || (uint64_t)sb.st_dev == b->dev);
	return b->build_id_len && elfid__from_fd(fd, bid, &n) == 0 && n == b->build_id_len &&
	       memcmp(bid, b->build_id, n) == 0;
}

/* b's path under the root of peer, a live process of the gone one's mount
 * namespace: b's file there (-ENOENT: none, try ours). */
static int bin_open_peer(struct ucache *c, const struct ubin *b, uint32_t peer, char *root,
			 size_t root_size)
{
	char proot[sizeof(c->proc_root) + 16];
	int fd;

	snprintf(proot, sizeof(proot), "%s/%u/root", c->proc_root, peer);
	fd = proc_root_open(proot, b->path, O_RDONLY);
	if (fd < 0)
		return -ENOENT;
	if (!bin_is_file(b, fd, BIN_PEER)) {
		close(fd);
		return -ENOENT;
	}
	if (root)
		snprintf(root, root_size, "%s", proot);
	return fd;
}

/*
 * Open the file behind a mapping as the process sees it. map_files/ names
 * the exact inode even when the path was deleted or lives in another mount
 * namespace; it needs CAP_CHECKPOINT_RESTORE (or SYS_ADMIN), so fall back to
 * root/<path> (the process's namespace and root) and check that it is still
 * the same inode. The path as we see it only once the process is gone, and
 * only when it is the same file: dev and inode, or (known by build-id only)
 * the build-id; a process in a container may see another file there. A gone
 * process of another mount namespace (its exec event named it) first has
 * its path looked up under the root of a live process of that namespace,
 * checked as root/<path> is. root (when not NULL) gets where the process's
 * other files are: "" for ours, "<proc>/PID/root" for another mount
 * namespace or root (PID that live process's for a gone one).
 */
static int bin_open(struct ucache *c, const struct ubin *b, uint32_t pid, uint64_t start,
		    uint64_t end, char *root, size_t root_size)
{
	char path[512];
	int fd, kind = proc_root_kind(c->proc_root, pid);
	uint32_t peer = 0;
	bool ours = false;

	if (root)
		snprintf(root, root_size, "%s", "");
	if (root && kind == PROC_ROOT_OTHER)
		snprintf(root, root_size, "%s/%u/root", c->proc_root, pid);
	snprintf(path, sizeof(path), "%s/%u/map_files/%llx-%llx", c->proc_root, pid,
		 (unsigned long long)start, (unsigned long long)end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0)
		return fd;
	if (kind >= 0) {
		snprintf(path, sizeof(path), "%s/%u/root", c->proc_root, pid);
		fd = proc_root_open(path, b->path, O_RDONLY);
		if (fd < 0)
			return fd;
	} else if (b->path[0] == '/' &&
		   (peer = proc_mnt_peer(c->proc_root, &c->mnt, proc_mnt_of(&c->mnt, pid))) &&
		   (fd = bin_open_peer(c, b, peer, root, root_size)) != -ENOENT) {
		return fd;
	} else if (b->path[0] == '/') {
		/* The process is gone (its /proc/PID with it): the path as we
		 * see it, checked to be the same file below (a regular
		 * file: anyone may have put a FIFO there since). */
		fd = proc_root_open("", b->path, O_RDONLY);
		ours = true;
	} else {
		return kind;
	}
	if (fd < 0)
		return fd;
	if (!bin_is_file(b, fd, ours ? BIN_OURS : BIN_LIVE_ROOT)) {
		close(fd);
		return -ESTALE;
	}
	return fd;
}

static void bin_identify(struct ucache *c, struct ubin *b, uint32_t pid, const struct umap *m,
			 uint64_t now_ns)
{
	_cleanup_close_ int fd = -1;

	b->def_pid = pid;
	b->def_start = m->start;
	b->def_end = m->end;
	if (b == &c->vdso) {
		if (c->vdso_img)
			(void)elfid__from_mem(c->vdso_img, c->vdso_size, b->build_id,
					      &b->build_id_len);
		b->identified = true;
		return;
	}
	if (b->mod_kind != CPA_MOD_FILE) {
		b->identified = true;
		return;
	}
	fd = bin_open(c, b, pid, m->start, m->end, NULL, 0);
	if (fd < 0) {
		/* Mostly a process that exited before we got to its sample. The
		 * definition goes out as it is (path, this pid); a later hit from a
		 * live process tries again and re-sends it complete. */
		b->ident_retry_ns = now_ns + IDENT_RETRY_NS;
		return;
	}
	b->identified = true;
	(void)elfid__from_fd(fd, b->build_id, &b->build_id_len);
	/* symd takes a re-definition of an id as an update. */
	b->def_sent = false;
}

/* ---- maps ---- */

static int maps_read(struct ucache *c, uint32_t pid, size_t *ret_len)
{
	size_t old_cap = c->buf_cap;
	char path[300];
	int r;

	snprintf(path, sizeof(path), "%s/%u/maps", c->proc_root, pid);
	r = read_full_file_at(AT_FDCWD, path, 0, PROCMAPS_TEXT_MAX, &c->buf, &c->buf_cap, ret_len);
	c->bytes += c->buf_cap - old_cap; /* the scratch counts against the cache cap */
	return r;
}

static const struct umap *proc_lookup(struct uproc *p, uint64_t pc);

static bool neg_has(const struct uproc *p, uint64_t page)
{
	uint32_t i;

	for (i = 0; i < p->n_neg; i++)
		if (p->neg[i] == page)
			return true;
	return false;
}

static void neg_add(struct uproc *p, uint64_t page)
{
	if (neg_has(p, page))
		return;
	if (p->n_neg < UCACHE_NEG_SLOTS) {
		p->neg[p->n_neg++] = page;
		return;
	}
	/* Full: forget the oldest-placed one; it costs one read if it comes back. */
	p->neg[p->neg_next] = page;
	p->neg_next = (p->neg_next + 1) % UCACHE_NEG_SLOTS;
}

/* After a read: keep only the pages that still miss, so the whole set is
 * known as of this read (a library mapped there since is found). */
static void neg_prune(struct uproc *p)
{
	uint32_t i, n = 0;

	for (i = 0; i < p->n_neg; i++)
		if (!proc_lookup(p, p->neg[i] << NEG_PAGE_SHIFT))
			p->neg[n++] = p->neg[i];
	p->n_neg = n;
	p->neg_next = 0;
	p->last_hit = 0;
}

static void neg_clear(struct uproc *p)
{
	p->n_neg = 0;
	p->neg_next = 0;
	p->miss_level = 0;
}

static int umap_cmp(const void *a, const void *b)
{
	const struct umap *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* The executable mappings of pid's /proc/PID/maps into c->tmp (sorted by
 * start; binaries looked up but no references taken): how many, or -errno. */
static int maps_parse(struct ucache *c, uint32_t pid)
{
	struct procmaps_entry e;
	const char *pos, *end;
	uint32_t n = 0;
	bool sorted = true;
	size_t len = 0;
	int r;

	r = maps_read(c, pid, &len);
	if (r < 0)
		return r;
	pos = c->buf;
	end = c->buf + len;
	while ((r = procmaps__next(&pos, end, &e)) != 0) {
		struct umap *m;

		if (r < 0 || !e.exec)
			continue;
		if (n == c->tmp_cap) {
			uint32_t old = c->tmp_cap;

			if (array_grow32_first((void **)&c->tmp, &c->tmp_cap, (size_t)n + 1,
					       sizeof(*c->tmp), 256) < 0)
				return -ENOMEM;
			c->bytes += (uint64_t)(c->tmp_cap - old) * sizeof(*c->tmp);
		}
		m = &c->tmp[n];
		memset(m, 0, sizeof(*m));
		m->start = e.start;
		m->end = e.end;
		m->pgoff = e.pgoff;
		switch (e.kind) {
		case PROCMAPS_FILE:
			m->kind = UMAP_FILE;
			m->bin = bin_get(c, &e);
			if (!m->bin)
				m->kind = UMAP_ANON; /* out of memory: still resolves, as anon */
			break;
		case PROCMAPS_VDSO:
			m->kind = UMAP_VDSO;
			break;
		case PROCMAPS_VSYSCALL:
			m->kind = UMAP_VSYSCALL;
			break;
		default:
			m->kind = UMAP_ANON;
			break;
		}
		if (n && m->start < c->tmp[n - 1].start)
			sorted = false;
		n++;
	}
	if (!sorted)
		qsort(c->tmp, n, sizeof(*c->tmp), umap_cmp);
	return (int)n;
}

int ucache__refresh(struct ucache *c, struct uproc *p, uint64_t now_ns)
{
	uint32_t n, i;
	int r;

	p->refresh_ns = now_ns ? now_ns : 1;
	p->read_failed = true; /* until the new list is in place */
	cnt(c, UNW_CNT_MAPS_REFRESH, 1);
	r = maps_parse(c, p->pid);
	if (r < 0) {
		if (r != -ENOMEM)
			cnt(c, UNW_CNT_MAPS_FAIL, 1);
		return r;
	}
	n = (uint32_t)r;

	/* New references first: a binary in both the old and the new list never
	 * drops to zero references in between. */
	for (i = 0; i < n; i++)
		if (c->tmp[i].bin)
			c->tmp[i].bin->refs++;
	proc_drop_maps(c, p);
	if (n > p->cap_maps) {
		struct umap *nm = realloc(p->maps, n * sizeof(*nm));

		if (!nm) {
			for (i = 0; i < n; i++)
				if (c->tmp[i].bin)
					c->tmp[i].bin->refs--;
			return -ENOMEM;
		}
		c->bytes += (uint64_t)(n - p->cap_maps) * sizeof(*nm);
		p->maps = nm;
		p->cap_maps = n;
	}
	if (n)
		memcpy(p->maps, c->tmp, n * sizeof(*p->maps));
	p->n_maps = n;
	p->read_failed = false;
	neg_prune(p);
	return 0;
}

static const struct umap *proc_lookup(struct uproc *p, uint64_t pc)
{
	uint32_t lo = 0, hi = p->n_maps;
	const struct umap *m;

	/* Consecutive frames of a stack often share a mapping. */
	if (p->last_hit < p->n_maps) {
		m = &p->maps[p->last_hit];
		if (pc >= m->start && pc < m->end)
			return m;
	}
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		m = &p->maps[mid];
		if (pc < m->start)
			hi = mid;
		else if (pc >= m->end)
			lo = mid + 1;
		else {
			p->last_hit = mid;
			return m;
		}
	}
	return NULL;
}

static int find(struct ucache *c, struct uproc *p, uint64_t pc, uint64_t now_ns,
		uint64_t throttle_ns, struct uloc *ret)
{
	const struct umap *m = NULL;
	struct ubin *b = NULL;
	bool pre_exec = false;

	/* The mappings in force when the sample was taken, if the kernel told us. */
	if (p->sample_ns) {
		if (unlikely(p->sample_ns > c->hist_now))
			c->hist_now = p->sample_ns; /* the sweep's clock, with the events' */
		m = maphist__find(c->mh, p->pid, pc, p->sample_ns, &pre_exec);
		if (m)
			cnt(c, UNW_CNT_HIST_HITS, 1);
	}
	if (!m)
		m = proc_lookup(p, pc);
	if (unlikely(!m)) {
		/* A miss means a dlopen, an exec we did not hear of, or a bad pc
		 * (end of a stack, garbage return address, vanished JIT code).
		 * The read is what costs (seq_read + openat were a third of the
		 * stage), so: never for a page that already missed a read, not
		 * per sample, and rarer for a process whose reads do not help. */
		uint64_t page = pc >> NEG_PAGE_SHIFT;

		if (p->dead_ns)
			return -ENOENT;
		if (p->refresh_ns && now_ns - p->refresh_ns < c->o.neg_ttl_ns && neg_has(p, page))
			return -ENOENT;
		if (p->refresh_ns && p->refresh_ns == now_ns && !p->read_failed) {
			/* Read in this very batch: the miss is as good as a read's. */
			neg_add(p, page);
			return -ENOENT;
		}
		if (p->miss_level) {
			/* Never below the plain throttle, whatever the cap says. */
			uint64_t cap = MAX(c->o.refresh_max_ns, throttle_ns);

			throttle_ns = throttle_ns > cap >> p->miss_level
					      ? cap
					      : throttle_ns << p->miss_level;
		}
		if (p->refresh_ns && now_ns - p->refresh_ns < throttle_ns)
			return -ENOENT;
		if (ucache__refresh(c, p, now_ns) < 0) {
			/* Mostly a process that is gone: back off as for a miss. */
			p->miss_level += p->miss_level < MISS_LEVEL_MAX;
			return -ENOENT;
		}
		m = proc_lookup(p, pc);
		if (!m) {
			neg_add(p, page);
			p->miss_level += p->miss_level < MISS_LEVEL_MAX;
			return -ENOENT;
		}
		p->miss_level = 0; /* the maps had changed: keep following them closely */
	}

	ret->map = m;
	ret->flags = 0;
	switch (m->kind) {
	case UMAP_FILE:
		b = m->bin;
		ret->file_off = pc - m->start + m->pgoff;
		break;
	case UMAP_VDSO:
		b = &c->vdso;
		ret->file_off = pc - m->start;
		ret->flags = CPA_UF_VDSO;
		break;
	case UMAP_VSYSCALL:
		b = &c->vsyscall;
		ret->file_off = pc;
		ret->flags = CPA_UF_ANON;
		break;
	default:
		ret->bin = NULL;
		ret->module_id = 0;
		ret->file_off = pc;
		ret->flags = CPA_UF_ANON;
		return 0;
	}
	if (unlikely(!b->identified) && now_ns >= b->ident_retry_ns)
		bin_identify(c, b, p->pid, m, now_ns);
	b->last_use = now_ns;
	ret->bin = b;
	ret->module_id = b->id;
	if (pre_exec)
		ret->flags |= CPA_UF_PRE_EXEC;
	return 0;
}

int ucache__find(struct ucache *c, struct uproc *p, uint64_t pc, uint64_t now_ns, struct uloc *ret)
{
	return find(c, p, pc, now_ns, c->o.refresh_ns, ret);
}

int ucache__find_ip(struct ucache *c, struct uproc *p, uint64_t pc, uint64_t now_ns,
		    struct uloc *ret)
{
	return find(c, p, pc, now_ns, MIN(c->o.refresh_ip_ns, c->o.refresh_ns), ret);
}

/* The chunk table of the index that covers off: compiled on its first use,
 * its bytes counted then. */
static const struct cfi_table *ucfi_table(struct ucache *c, struct ucfi *f, uint64_t off)
{
	const struct cfi_table *t = NULL;
	size_t bytes;

	if (!f->index)
		return NULL;
	cfi_index__table(f->index, off, &t);
	bytes = cfi_index__bytes(f->index);
	if (unlikely(bytes != f->bytes)) {
		c->bytes += bytes - f->bytes;
		f->bytes = bytes;
	}
	return t;
}

const struct cfi_table *ucache__cfi(struct ucache *c, struct uproc *p, const struct uloc *loc)
{
	struct ubin *b = loc->bin;

	if (!b)
		return NULL;
	if (likely(b->cfi))
		return ucfi_table(c, b->cfi, loc->file_off);
	if (b->cfi_tried || p->last_use < b->cfi_retry_ns)
		return NULL;
	{
		_cleanup_close_ int fd = -1, dfd = -1;
		char root[sizeof(c->proc_root) + 16] = "";
		struct cfi_index *t = NULL;
		struct ugo *go = NULL;
		struct ucfi *f;
		int r;

		struct stat st = {}, dst = {};

		if (b == &c->vdso) {
			/* The vDSO has no file: hand the builder our own copy. */
			if (!c->vdso_img)
				return NULL;
			b->cfi_tried = true;
			fd = memfd_create("cpa-vdso", MFD_CLOEXEC);
			if (fd < 0 || write(fd, c->vdso_img, c->vdso_size) != (ssize_t)c->vdso_size)
				return NULL;
		} else if (b->mod_kind == CPA_MOD_FILE) {
			fd = bin_open(c, b, p->pid, loc->map->start, loc->map->end, root,
				      sizeof(root));
			/* Not there by any name, or another file there now: deleted. */
			b->gone = fd == -ENOENT || fd == -ESTALE;
			if (fd < 0) {
				/* This process is gone; another one may still map it. */
				b->cfi_retry_ns = p->last_use + IDENT_RETRY_NS;
				log_debug("no unwind table for '%s' (pid %u): open: %s", b->path,
					  p->pid, strerror(-fd));
				return NULL;
			}
		} else {
			b->cfi_tried = true; /* [vsyscall]: no ELF to read */
			return NULL;
		}
		if (b->build_id_len >= 2) {
			/* Where the process would find it (its root), and only
			 * with the binary's build-id. */
			char dpath[128];
			int n = snprintf(dpath, sizeof(dpath), "/usr/lib/debug/.build-id/%02x/",
					 b->build_id[0]);
			uint8_t dbid[CPA_BUILD_ID_MAX], dlen = 0;
			unsigned int i;

			for (i = 1; i < b->build_id_len; i++)
				n += snprintf(dpath + n, sizeof(dpath) - (size_t)n, "%02x",
					      b->build_id[i]);
			snprintf(dpath + n, sizeof(dpath) - (size_t)n, ".debug");
			dfd = proc_root_open(root, dpath, O_RDONLY);
			if (dfd >= 0 &&
			    (elfid__from_fd(dfd, dbid, &dlen) < 0 || dlen != b->build_id_len ||
			     memcmp(dbid, b->build_id, dlen) != 0)) {
				close(dfd);
				dfd = -1;
			}
		}
		/* Shared with a binary of the same build-id only when it is
		 * the very same file (and debug file): a build-id is forgeable,
		 * and one binary's table unwinding another's frames would
		 * mislead every walk through it. */
		if (b->build_id_len && fstat(fd, &st) == 0 && (dfd < 0 || fstat(dfd, &dst) == 0)) {
			for (f = c->cfis; f; f = f->next) {
				if (f->build_id_len == b->build_id_len &&
				    memcmp(f->build_id, b->build_id, b->build_id_len) == 0 &&
				    f->dev == (uint64_t)st.st_dev &&
				    f->ino == (uint64_t)st.st_ino &&
				    f->ddev == (uint64_t)dst.st_dev &&
				    f->dino == (uint64_t)dst.st_ino) {
					f->refs++;
					b->cfi = f;
					return ucfi_table(c, f, loc->file_off);
				}
			}
		}
		b->cfi_tried = true; /* a build that fails fails again */
		r = cfi_index__build(fd, dfd, &t);
		/* Go code has no CFI in a stripped binary: its pclntab sizes
		 * the frames, and marks where Go stacks end or switch. */
		(void)ugo__open(fd, &go);
		if ((r < 0 || !t) && !go) {
			/* Once per binary (cfi_tried): not a hot path. */
			log_debug("no unwind table for '%s': %s", b->path,
				  strerror(r < 0 ? -r : EINVAL));
			return NULL;
		}
		if (r < 0)
			t = NULL;
		f = calloc(1, sizeof(*f));
		if (!f) {
			cfi_index__free(t);
			ugo__free(go);
			return NULL;
		}
		f->index = t;
		f->go = go;
		f->bytes = cfi_index__bytes(t);
		f->refs = 1;
		f->build_id_len = b->build_id_len;
		memcpy(f->build_id, b->build_id, sizeof(f->build_id));
		f->dev = (uint64_t)st.st_dev;
		f->ino = (uint64_t)st.st_ino;
		f->ddev = (uint64_t)dst.st_dev;
		f->dino = (uint64_t)dst.st_ino;
		if (b->build_id_len && st.st_ino) {
			/* Without a build-id nothing else can share it. */
			f->next = c->cfis;
			c->cfis = f;
		}
		c->bytes += f->bytes + sizeof(*f) + ugo__bytes(go);
		b->cfi = f;
		return ucfi_table(c, f, loc->file_off);
	}
}

unsigned int ucache__go(const struct uloc *loc, int32_t *ret_sp)
{
	*ret_sp = -1;
	if (!loc->bin || !loc->bin->cfi || !loc->bin->cfi->go)
		return UNW_GO_NONE;
	return ugo__at(loc->bin->cfi->go, loc->file_off, ret_sp);
}

/* ---- task events ---- */

/*
 * The root of pid (<proc>/PID/root) opened O_PATH, for the mapping events of
 * its burst after an exec (4-8 of them): each path then costs an openat2 and
 * an fstat, not also the walk to /proc/PID/root again (a new process's /proc
 * directory is cold: bin_own_view()). A failure (-errno: gone) is kept as
 * well. At most ROOT_FDS held (a slot by pid); dropped at the pid's exec,
 * fork or exit event (a reused pid, maybe another root) and all at each
 * sweep: a container's root is not held past a quarter second.
 */
static int root_fd(struct ucache *c, uint32_t pid)
{
	char root[sizeof(c->proc_root) + 16];
	__typeof__(c->roots[0]) *r = &c->roots[pid % ROOT_FDS];

	if (r->held && r->pid == pid)
		return r->fd;
	if (r->held && r->fd >= 0)
		close(r->fd);
	snprintf(root, sizeof(root), "%s/%u/root", c->proc_root, pid);
	r->fd = proc_root_dir(root);
	r->pid = pid;
	r->held = true;
	return r->fd;
}

/* pid's root no longer held (all: pid 0). */
static void root_fd_drop(struct ucache *c, uint32_t pid)
{
	for (unsigned int i = 0; i < ROOT_FDS; i++) {
		if (!c->roots[i].held || (pid && c->roots[i].pid != pid))
			continue;
		if (c->roots[i].fd >= 0)
			close(c->roots[i].fd);
		c->roots[i].held = false;
	}
}

void ucache__task_exit(struct ucache *c, uint32_t pid, uint64_t now_ns, uint64_t time_ns)
{
	struct uproc *p = ucache__proc_peek(c, pid);

	root_fd_drop(c, pid);
	maphist__exit(c->mh, pid, time_ns);
	proc_mnt_exit(&c->mnt, pid);
	if (p && !p->dead_ns)
		p->dead_ns = now_ns ? now_ns : 1;
}

void ucache__task_exec(struct ucache *c, uint32_t pid, uint32_t mnt_ns)
{
	struct uproc *p = ucache__proc_peek(c, pid);

	root_fd_drop(c, pid);
	proc_mnt_note(&c->mnt, pid, mnt_ns);
	if (!p)
		return;
	/* A new image (or a reused pid): nothing of the old maps applies. */
	proc_drop_maps(c, p);
	neg_clear(p);
	p->refresh_ns = 0;
	p->dead_ns = 0;
}

/* ---- the mapping history ---- */

static void hist_ref(void *ctx, struct ubin *b, int delta)
{
	(void)ctx;
	b->refs += (uint32_t)delta;
}

static struct ubin **bid_slot(struct ucache *c, const uint8_t *bid, uint8_t len)
{
	return &c->bids[hash64(bid, len) % BIDS_SLOTS];
}

/* The key (dev 0, this ino) of a binary known by build-id and path only. */
static uint64_t bid_key(const struct cpa_map_event *ev, const char *path)
{
	return (hash64(ev->build_id, ev->build_id_len) ^ hash64(path, ev->path_len)) | 1ull << 63;
}

/* A binary named by this build-id at this path: a gone process's mapping
 * (no file to stat) is taken to be the one seen at the same path before. */
static struct ubin *bid_find(struct ucache *c, const uint8_t *bid, uint8_t len, const char *path,
			     uint32_t path_len)
{
	struct ubin *b;

	for (b = *bid_slot(c, bid, len); b; b = b->bnext)
		if (b->build_id_len == len && !memcmp(b->build_id, bid, len) &&
		    b->path_len == path_len && !memcmp(b->path, path, path_len))
			return b;
	return NULL;
}

/*
 * A binary with this build-id at this path that our own view of the path
 * leads to (checked at most every OWN_VIEW_NS): the file a process in our
 * root and mount namespace maps there, found without a stat of
 * /proc/PID/root/path per mapping event. A new process's /proc directory is
 * built for that lookup (dentry allocations, ~5 us a stat on this VM): the
 * stat per event was a fifth of unwindd's CPU under churn, 4-8 of them per
 * exec. Only a binary a process was seen mapping through the same file as
 * ours (bin_of_event()) is taken: a file elsewhere claiming the build-id (a
 * container's, a chroot's) never becomes the binary of our path; one that
 * maps such a file at our path gets ours, built from the same build-id.
 */
#define OWN_VIEW_NS NSEC_PER_SEC

static bool own_view_is(const struct ubin *b, const char *path, uint32_t path_len)
{
	char buf[PATH_MAX];
	struct stat sb;

	if (path_len >= sizeof(buf))
		return false;
	memcpy(buf, path, path_len);
	buf[path_len] = '\0';
	return stat(buf, &sb) == 0 && sb.st_dev == b->dev && sb.st_ino == b->ino;
}

static struct ubin *bin_own_view(struct ucache *c, const struct cpa_map_event *ev, const char *path)
{
	struct ubin *b;

	for (b = *bid_slot(c, ev->build_id, ev->build_id_len); b; b = b->bnext) {
		if (!b->own_view_ns || b->gone || b->build_id_len != ev->build_id_len ||
		    memcmp(b->build_id, ev->build_id, ev->build_id_len) ||
		    b->path_len != ev->path_len || memcmp(b->path, path, ev->path_len))
			continue;
		if (c->hist_now - b->own_view_ns < OWN_VIEW_NS)
			return b;
		if (own_view_is(b, path, ev->path_len)) {
			b->own_view_ns = c->hist_now;
			return b;
		}
		b->own_view_ns = 0; /* our path leads elsewhere now */
	}
	return NULL;
}

/*
 * A gone process's mapping (its /proc/PID/root cannot be looked at): the file
 * our own path leads to is its binary when that file has the event's
 * build-id, as bin_own_view() takes it for a live process's. The build-id is
 * read once per file (dev + inode; then the binary is identified), and the
 * binary is marked own_view_ns: later mappings of it take bin_own_view()
 * without a stat. In an exec storm nearly every process is gone before its
 * events are handled, and each of its 4-8 mappings paid a failed lookup in
 * /proc (~5 us); the binaries are the same few again and again. A file
 * elsewhere never becomes the binary of our path: the build-id read is our
 * file's.
 */
static struct ubin *bin_own_path(struct ucache *c, const struct cpa_map_event *ev, const char *path)
{
	struct procmaps_entry e = {.path = path, .path_len = ev->path_len};
	uint8_t bid[CPA_BUILD_ID_MAX];
	uint8_t n = 0;
	char buf[PATH_MAX];
	struct stat sb, fsb;
	struct ubin *b;
	int fd, r;

	if (ev->path_len >= sizeof(buf))
		return NULL;
	memcpy(buf, path, ev->path_len);
	buf[ev->path_len] = '\0';
	if (stat(buf, &sb) < 0 || !S_ISREG(sb.st_mode))
		return NULL;
	b = bin_peek(c, sb.st_dev, sb.st_ino);
	if (!b || !b->identified || !b->build_id_len) {
		/* A regular file still: not a FIFO put there since. */
		fd = proc_root_open("", buf, O_RDONLY);
		if (fd < 0)
			return NULL;
		r = fstat(fd, &fsb) == 0 && fsb.st_dev == sb.st_dev && fsb.st_ino == sb.st_ino
			    ? elfid__from_fd(fd, bid, &n)
			    : -ESTALE;
		close(fd);
		if (r < 0)
			return NULL;
	} else {
		n = b->build_id_len;
		memcpy(bid, b->build_id, n);
	}
	if (n != ev->build_id_len || memcmp(bid, ev->build_id, n))
		return NULL;
	e.dev = sb.st_dev;
	e.ino = sb.st_ino;
	b = bin_get(c, &e);
	if (b)
		b->own_view_ns = c->hist_now;
	return b;
}

/*
 * The binary of a mapping event. By dev and inode when the kernel gave
 * them; by build-id otherwise, which anyone can forge, so never by it
 * alone: the path is looked up (stat, in the process's root) so that it is
 * the same binary as /proc shows (dev + inode), and only when the path or
 * the process is gone already is it the binary seen before with that
 * build-id at that path, or one kept under a key of its own (dev 0) and
 * opened by path + build-id check.
 */
static struct ubin *bin_of_event(struct ucache *c, const struct cpa_map_event *ev, const char *path)
{
	struct procmaps_entry e = {
		.path = path,
		.path_len = ev->path_len,
		.dev = makedev(ev->dev_major, ev->dev_minor),
		.ino = ev->ino,
	};
	char buf[PATH_MAX];
	struct stat sb;
	struct ubin *b, *own = NULL;
	bool found = false;

	if (!ev->build_id_len)
		return bin_get(c, &e);
	b = bin_own_view(c, ev, path);
	if (b)
		return b;
	if (ev->path_len < sizeof(buf)) {
		int rfd = root_fd(c, ev->pid);

		memcpy(buf, path, ev->path_len);
		buf[ev->path_len] = '\0';
		/* Only the file the process sees: our path may be another. */
		found = rfd >= 0 && proc_root_statat(rfd, buf, 0, &sb) == 0;
	}
	if (!found) {
		/* Gone: our path, when it holds this build, else the binary seen
		 * with it at that path, else one of its own (dev 0). Our path
		 * that holds another build is looked at again after a second. */
		b = bid_find(c, ev->build_id, ev->build_id_len, path, ev->path_len);
		if (b && (b->dev || (b->own_miss_ns && c->hist_now - b->own_miss_ns < OWN_VIEW_NS)))
			return b;
		own = bin_own_path(c, ev, path);
		if (own) {
			b = own;
		} else if (b) {
			b->own_miss_ns = c->hist_now;
			return b;
		} else {
			e.dev = 0;
			e.ino = bid_key(ev, path);
		}
	} else {
		e.dev = sb.st_dev;
		e.ino = sb.st_ino;
	}
	if (!own)
		b = bin_get(c, &e);
	if (!b)
		return NULL;
	if (!found && !own)
		b->own_miss_ns = c->hist_now;
	if (b->build_id_len && (b->build_id_len != ev->build_id_len ||
				memcmp(b->build_id, ev->build_id, ev->build_id_len))) {
		/* The path holds another build now (rebuilt since): key it apart. */
		e.dev = 0;
		e.ino = bid_key(ev, path);
		b = bin_get(c, &e);
		if (!b)
			return NULL;
	}
	if (!b->identified || !b->build_id_len) {
		memcpy(b->build_id, ev->build_id, ev->build_id_len);
		b->build_id_len = ev->build_id_len;
		b->identified = true;
		b->def_sent = false;
		b->def_pid = ev->pid;
		b->def_start = ev->start;
		b->def_end = ev->start + ev->len;
	}
	if (!b->in_bids) {
		struct ubin **slot = bid_slot(c, b->build_id, b->build_id_len);

		b->bnext = *slot;
		*slot = b;
		b->in_bids = true;
	}
	/* The process's file is the one our path leads to: later mappings of
	 * it at this path need no stat (bin_own_view()). */
	if (found && b->dev == (uint64_t)sb.st_dev && b->ino == (uint64_t)sb.st_ino &&
	    !b->own_view_ns && own_view_is(b, path, ev->path_len))
		b->own_view_ns = c->hist_now;
	return b;
}

static bool path_is(const char *path, uint32_t len, const char *lit)
{
	return len == strlen(lit) && !memcmp(path, lit, len);
}

int ucache__map_event(struct ucache *c, const struct cpa_map_event *ev, const char *path)
{
	struct umap m = {0};

	if (ev->time_ns > c->hist_now)
		c->hist_now = ev->time_ns;
	switch (ev->kind) {
	case CPA_MAP_EXEC:
		root_fd_drop(c, ev->pid);
		return maphist__exec(c->mh, ev->pid, ev->time_ns);
	case CPA_MAP_FORK:
		root_fd_drop(c, ev->pid);
		/* A child (not a thread) starts in its parent's namespace. */
		proc_mnt_note(&c->mnt, ev->pid, proc_mnt_of(&c->mnt, ev->ppid));
		return maphist__fork(c->mh, ev->pid, ev->ppid, ev->time_ns);
	case CPA_MAP_MMAP:
		break;
	default:
		return -EINVAL;
	}
	if (!ev->len || ev->start + ev->len < ev->start)
		return -EINVAL;
	m.start = ev->start;
	m.end = ev->start + ev->len;
	m.pgoff = ev->pgoff;
	if (path_is(path, ev->path_len, "[vdso]")) {
		m.kind = UMAP_VDSO;
	} else if (path_is(path, ev->path_len, "[vsyscall]")) {
		m.kind = UMAP_VSYSCALL;
	} else if (!ev->path_len || path[0] != '/' ||
		   (ev->path_len >= 6 && !memcmp(path, "//anon", 6)) ||
		   (!ev->build_id_len && !ev->ino)) {
		/* "//anon", "[heap]", "[anon:...]": JIT-ish memory. */
		m.kind = UMAP_ANON;
	} else {
		m.kind = UMAP_FILE;
		m.bin = bin_of_event(c, ev, path);
		if (!m.bin)
			m.kind = UMAP_ANON; /* out of memory: still resolves, as anon */
	}
	return maphist__mmap(c->mh, ev->pid, ev->time_ns, &m);
}

/* Every process's executable mappings as of now, in force since forever:
 * processes that exist at start have no mapping events before their exit. */
static void hist_seed(struct ucache *c)
{
	DIR *d = opendir(c->proc_root);
	struct dirent *de;
	uint32_t procs = 0, other = 0, self = proc_mnt_self();

	if (!d)
		return;
	while ((de = readdir(d))) {
		char *end;
		unsigned long pid = strtoul(de->d_name, &end, 10);
		int n, i;

		if (*end || !pid || pid > UINT32_MAX)
			continue;
		n = maps_parse(c, (uint32_t)pid);
		for (i = 0; i < n; i++)
			if (maphist__mmap(c->mh, (uint32_t)pid, 0, &c->tmp[i]) < 0)
				break;
		procs += n > 0;
		/* Its mount namespace: no exec event will tell it (a process of
		 * a container gone later is looked up through a peer). */
		if (n > 0) {
			uint32_t ns = proc_mnt_ns(c->proc_root, (uint32_t)pid);

			if (ns)
				proc_mnt_note(&c->mnt, (uint32_t)pid, ns);
			other += ns && ns != self;
		}
	}
	closedir(d);
	log_debug("mapping history seeded from %u processes (%u of other mount namespaces)", procs,
		  other);
}

/* ---- sweep and eviction ---- */

static int bin_lru_cmp(const void *a, const void *b)
{
	const struct ubin *x = *(struct ubin *const *)a, *y = *(struct ubin *const *)b;

	return x->last_use < y->last_use ? -1 : x->last_use > y->last_use;
}

static int proc_lru_cmp(const void *a, const void *b)
{
	const struct uproc *x = *(struct uproc *const *)a, *y = *(struct uproc *const *)b;

	return x->last_use < y->last_use ? -1 : x->last_use > y->last_use;
}

/* Oldest first: unwind tables are the big items and can be rebuilt; a
 * binary no mapping refers to any more goes entirely. */
static void evict_bins(struct ucache *c, uint64_t target)
{
	_cleanup_free_ struct ubin **bv = NULL;
	uint32_t i, n = 0;

	bv = malloc((c->n_bins + 1) * sizeof(*bv));
	if (!bv)
		return;
	for (i = 0; i <= c->bins_mask; i++) {
		struct ubin *b;

		for (b = c->bins[i]; b; b = b->hnext)
			bv[n++] = b;
	}
	qsort(bv, n, sizeof(*bv), bin_lru_cmp);
	for (i = 0; i < n && c->bytes > target; i++) {
		struct ubin *b = bv[i];
		bool evicted = false;

		if (b->cfi) {
			bin_drop_cfi(c, b);
			evicted = true;
		}
		if (b->refs == 0) {
			bin_free(c, b);
			evicted = true;
		}
		if (evicted)
			cnt(c, UNW_CNT_CACHE_EVICT, 1);
	}
}

static void evict(struct ucache *c)
{
	/* Evict down to 7/8 of the cap so that we do not sort on every batch. */
	uint64_t target = c->o.max_bytes - c->o.max_bytes / 8;
	_cleanup_free_ struct uproc **pv = NULL;
	uint32_t i, n = 0;

	evict_bins(c, target);
	if (c->bytes <= target)
		return;

	/* Still over: forget the maps of the least recently sampled processes
	 * (re-read on their next sample); their binaries may go then. */
	pv = malloc((c->n_procs + 1) * sizeof(*pv));
	if (!pv)
		return;
	for (i = 0; i <= c->procs_mask; i++) {
		struct uproc *p;

		for (p = c->procs[i]; p; p = p->hnext)
			pv[n++] = p;
	}
	qsort(pv, n, sizeof(*pv), proc_lru_cmp);
	for (i = 0; i < n && c->bytes > target; i++)
		proc_free(c, pv[i]);
	evict_bins(c, target);
}

void ucache__set_max_bytes(struct ucache *c, uint64_t max_bytes)
{
	c->o.max_bytes = max_bytes;
	if (max_bytes && c->bytes > max_bytes)
		evict(c);
}

/*
 * An unwind index keeps its file mapped (the inode, even deleted, and one or
 * two VMAs), and is small enough that the byte cap rarely evicts it: on a
 * host that runs new binaries all day (CI), indexes of binaries nothing maps
 * any more would pile up. One no mapping refers to (refs 0: no process, no
 * history entry) and unused for 30 s goes (a later walk builds the index
 * again); the binary itself once unused for idle_ns (5 min: a later mapping
 * makes it again, with a new module id), so that their count is bounded by
 * what ran lately, not by everything that ever ran (each build's new test
 * programs and libraries).
 */
static void idle_bins(struct ucache *c, uint64_t now_ns)
{
	uint64_t idle = MIN(c->o.idle_ns, UNMAPPED_IDLE_NS);

	for (uint32_t i = 0; idle && i <= c->bins_mask; i++) {
		for (struct ubin *b = c->bins[i], *next; b; b = next) {
			uint64_t unused = now_ns > b->last_use ? now_ns - b->last_use : 0;

			next = b->hnext;
			if (b->refs || unused < idle)
				continue;
			if (unused >= c->o.idle_ns) {
				bin_free(c, b);
				cnt(c, UNW_CNT_CACHE_EVICT, 1);
			} else if (b->cfi) {
				bin_drop_cfi(c, b);
			}
		}
	}
}

/* The file pages of indexes that built chunks and went quiet since. */
/* How many indexes dropped pages. */
static unsigned int quiet_pages(struct ucache *c)
{
	unsigned int n = 0;

	for (struct ucfi *f = c->cfis; f; f = f->next)
		n += cfi_index__drop_quiet(f->index);
	return n;
}

void ucache__sweep(struct ucache *c, uint64_t now_ns)
{
	uint32_t i;

	root_fd_drop(c, 0);
	for (i = 0; i <= c->procs_mask; i++) {
		struct uproc *p = c->procs[i], *next;

		for (; p; p = next) {
			next = p->hnext;
			/* The caller's clock may be older than the batch that last
			 * used p (unwindd reads it before the batch): a time in our
			 * future is "just now", not 2^64 ns ago. */
			if (p->dead_ns && now_ns > p->dead_ns &&
			    now_ns - p->dead_ns >= c->o.dead_grace_ns)
				proc_free(c, p);
			else if (c->o.idle_ns && now_ns > p->last_use &&
				 now_ns - p->last_use >= c->o.idle_ns)
				proc_free(c, p);
		}
	}
	/* Samples trail their mapping events by up to a poll or two: keep an
	 * ended mapping a little longer than queued samples can be old. */
	maphist__sweep(c->mh, c->hist_now, MAX(c->o.dead_grace_ns, HIST_GRACE_NS));
	if (now_ns - c->last_quiet_ns >= QUIET_PAGES_NS) {
		c->quiet_drops += quiet_pages(c);
		/* What sweeps and evictions freed goes back once it is much: glibc keeps
		 * freed chunks, and under churn the heap never shrinks by itself. A
		 * cache that did not move freed nothing: no look at the heap then. */
		heap_trim__maybe_moved(&c->trim, TRIM_FREED,
				       ucache__bytes(c) + c->quiet_drops + c->n_procs);
		c->last_quiet_ns = now_ns;
	}
	if (now_ns - c->last_idle_ns >= BIN_IDLE_SCAN_NS) {
		idle_bins(c, now_ns);
		c->last_idle_ns = now_ns;
	}
	if (c->o.max_bytes && c->bytes > c->o.max_bytes)
		evict(c);
	c->last_sweep_ns = now_ns;
}

void ucache__epoch_reset(struct ucache *c)
{
	uint32_t i;

	/* Ids start again from 1, dense over what is cached now. */
	c->next_id = 0;
	c->vdso.id = ++c->next_id;
	c->vsyscall.id = ++c->next_id;
	c->vdso.def_sent = false;
	c->vsyscall.def_sent = false;
	for (i = 0; i <= c->bins_mask; i++) {
		struct ubin *b;

		for (b = c->bins[i]; b; b = b->hnext) {
			b->id = ++c->next_id;
			b->def_sent = false;
		}
	}
}

uint32_t ucache__next_id(const struct ucache *c)
{
	return c->next_id + 1;
}

uint64_t ucache__bytes(const struct ucache *c)
{
	return c->bytes + maphist__bytes(c->mh);
}

struct maphist *ucache__history(const struct ucache *c)
{
	return c->mh;
}

uint32_t ucache__nr_procs(const struct ucache *c)
{
	return c->n_procs;
}

uint32_t ucache__nr_bins(const struct ucache *c)
{
	return c->n_bins;
}

/* ---- life cycle ---- */

/* Our own vDSO image: its build-id names every 64-bit process's [vdso]. */
static void vdso_find(struct ucache *c)
{
	uint64_t base = getauxval(AT_SYSINFO_EHDR);
	_cleanup_free_ char *maps = NULL;
	size_t len;

	if (!base || read_full_file("/proc/self/maps", 0, PROCMAPS_TEXT_MAX, &maps, &len) < 0)
		return;
	c->vdso_size = procmaps__vdso_size(maps, len, base);
	if (c->vdso_size)
		c->vdso_img = (const void *)(uintptr_t)base;
}

int ucache__new(const struct ucache_opts *o, struct ucache **ret)
{
	struct ucache *c;
	int r;

	r = elfid__init();
	if (r < 0)
		return r;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->o = *o;
	if (!c->o.refresh_max_ns)
		c->o.refresh_max_ns = REFRESH_MAX_NS;
	if (!c->o.neg_ttl_ns)
		c->o.neg_ttl_ns = NEG_TTL_NS;
	snprintf(c->proc_root, sizeof(c->proc_root), "%s", o->proc_root ? o->proc_root : "/proc");
	c->procs_mask = 255;
	c->bins_mask = 255;
	c->procs = calloc(c->procs_mask + 1, sizeof(*c->procs));
	c->bins = calloc(c->bins_mask + 1, sizeof(*c->bins));
	if (!c->procs || !c->bins) {
		ucache__free(c);
		return -ENOMEM;
	}
	c->bytes = sizeof(*c) + (uint64_t)(c->procs_mask + 1) * sizeof(*c->procs) +
		   (uint64_t)(c->bins_mask + 1) * sizeof(*c->bins);

	c->vdso.mod_kind = CPA_MOD_VDSO;
	c->vdso.path = (char *)"[vdso]";
	c->vdso.path_len = 6;
	c->vdso.id = ++c->next_id;
	c->vsyscall.mod_kind = CPA_MOD_ANON;
	c->vsyscall.path = (char *)"[vsyscall]";
	c->vsyscall.path_len = 10;
	c->vsyscall.id = ++c->next_id;
	vdso_find(c);
	r = maphist__new(hist_ref, c, &c->mh);
	if (r < 0) {
		ucache__free(c);
		return r;
	}
	if (o->seed)
		hist_seed(c);
	*ret = c;
	return 0;
}

void ucache__free(struct ucache *c)
{
	uint32_t i;

	if (!c)
		return;
	root_fd_drop(c, 0);
	/* Its entries hold references to the binaries: gone first. */
	maphist__free(c->mh);
	if (c->procs) {
		for (i = 0; i <= c->procs_mask; i++)
			while (c->procs[i])
				proc_free(c, c->procs[i]);
	}
	if (c->bins) {
		for (i = 0; i <= c->bins_mask; i++)
			while (c->bins[i])
				bin_free(c, c->bins[i]);
	}
	bin_drop_cfi(c, &c->vdso);
	free(c->procs);
	free(c->bins);
	free(c->buf);
	free(c->tmp);
	free(c);
}
