// SPDX-License-Identifier: MIT
/*
 * The mapping history (unwindd/maphist.h): "what was mapped at address A in
 * pid P at time T" across mmap, overlap, exec, fork, exit and pid reuse, and
 * the references it holds on the caller's binaries; and the same through
 * ucache, fed the kernel's CPA_REC_MAP events for a real file after its
 * process is gone.
 */
#include <check.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "shm/records.h"
#include "test_util.h"
#include "unwindd/elfid.h"
#include "unwindd/maphist.h"
#include "unwindd/ucache.h"

/* Fake binaries: maphist never looks inside, only counts references. */
static struct fake_bin {
	int refs;
} bins[4];

static void ref(void *ctx, struct ubin *b, int delta)
{
	(void)ctx;
	((struct fake_bin *)(void *)b)->refs += delta;
}

static struct umap file_map(uint64_t start, uint64_t end, uint64_t pgoff, int bin)
{
	return (struct umap){.start = start,
			     .end = end,
			     .pgoff = pgoff,
			     .bin = (struct ubin *)(void *)&bins[bin],
			     .kind = UMAP_FILE};
}

static struct maphist *hist_new(void)
{
	struct maphist *h;

	memset(bins, 0, sizeof(bins));
	ck_assert_int_eq(maphist__new(ref, NULL, &h), 0);
	return h;
}

/* The bin index at (pid, addr, t), -1 for nothing mapped. */
static int at(struct maphist *h, uint32_t pid, uint64_t addr, uint64_t t)
{
	const struct umap *m = maphist__find(h, pid, addr, t, NULL);

	return m ? (int)((struct fake_bin *)(void *)m->bin - bins) : -1;
}

START_TEST(test_mmap_lookup_by_time)
{
	struct maphist *h = hist_new();
	struct umap m = file_map(0x1000, 0x5000, 0x2000, 0);
	const struct umap *got;

	ck_assert(!maphist__has(h, 10));
	ck_assert_int_eq(maphist__mmap(h, 10, 100, &m), 0);
	ck_assert(maphist__has(h, 10));
	ck_assert_int_eq(at(h, 10, 0x1000, 99), -1); /* before it was mapped */
	ck_assert_int_eq(at(h, 10, 0x1000, 100), 0);
	ck_assert_int_eq(at(h, 10, 0x4fff, 1000), 0);
	ck_assert_int_eq(at(h, 10, 0x5000, 1000), -1); /* end is exclusive */
	ck_assert_int_eq(at(h, 11, 0x1000, 1000), -1); /* another pid */
	got = maphist__find(h, 10, 0x3000, 500, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert_uint_eq(got->pgoff, 0x2000);
	/* The same mapping again (a /proc seed and its event): one entry. */
	ck_assert_int_eq(maphist__mmap(h, 10, 200, &m), 0);
	ck_assert_uint_eq(maphist__nr_maps(h, 10), 1);
	ck_assert_int_eq(bins[0].refs, 1);
	maphist__free(h);
	ck_assert_int_eq(bins[0].refs, 0);
}
END_TEST

/* A new mapping over part of an old one: the old one ends there, what it
 * had outside the new range stays (with its file offsets). */
START_TEST(test_overlap_splits)
{
	struct maphist *h = hist_new();
	struct umap a = file_map(0x10000, 0x20000, 0, 0), b = file_map(0x14000, 0x18000, 0, 1);
	const struct umap *m;

	ck_assert_int_eq(maphist__mmap(h, 7, 100, &a), 0);
	ck_assert_int_eq(maphist__mmap(h, 7, 200, &b), 0);
	ck_assert_int_eq(at(h, 7, 0x15000, 150), 0); /* before the new one: the old one */
	ck_assert_int_eq(at(h, 7, 0x15000, 250), 1);
	ck_assert_int_eq(at(h, 7, 0x11000, 250), 0); /* left of it */
	m = maphist__find(h, 7, 0x19000, 250, NULL); /* right of it */
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(at(h, 7, 0x19000, 250), 0);
	ck_assert_uint_eq(m->start, 0x18000);
	ck_assert_uint_eq(m->pgoff, 0x8000);
	ck_assert_int_eq(bins[0].refs, 3); /* the old entry and its two pieces */
	ck_assert_int_eq(bins[1].refs, 1);

	/* Out of order: a mapping older than one already known over its range
	 * is cut where the later one starts. */
	ck_assert_int_eq(maphist__mmap(h, 8, 500, &b), 0);
	ck_assert_int_eq(maphist__mmap(h, 8, 300, &a), 0);
	ck_assert_int_eq(at(h, 8, 0x15000, 400), 0);
	ck_assert_int_eq(at(h, 8, 0x15000, 600), 1);
	maphist__free(h);
	ck_assert_int_eq(bins[0].refs + bins[1].refs, 0);
}
END_TEST

START_TEST(test_exec_new_generation)
{
	struct maphist *h = hist_new();
	struct umap old = file_map(0x400000, 0x401000, 0, 0),
		    img = file_map(0x500000, 0x501000, 0, 1);

	ck_assert_int_eq(maphist__mmap(h, 5, 100, &old), 0);
	ck_assert_int_eq(maphist__exec(h, 5, 1000), 0);
	ck_assert_int_eq(maphist__mmap(h, 5, 1001, &img), 0);
	ck_assert_int_eq(at(h, 5, 0x400000, 999), 0);
	ck_assert_int_eq(at(h, 5, 0x500000, 1002), 1);
	/* Long after the exec the old image is not there... */
	ck_assert_int_eq(at(h, 5, 0x400000, 1000 + 1000000000ull), -1);
	/* ...but right after it a sample in the kernel's execve still shows it. */
	ck_assert_int_eq(at(h, 5, 0x400000, 1500), 0);
	/* An mmap event that arrives after the exec but is older than it ends
	 * at the exec. */
	{
		struct umap late = file_map(0x600000, 0x601000, 0, 2);

		ck_assert_int_eq(maphist__mmap(h, 5, 900, &late), 0);
		ck_assert_int_eq(at(h, 5, 0x600000, 950), 2);
		ck_assert_int_eq(at(h, 5, 0x600000, 1000 + 1000000000ull), -1);
	}
	maphist__free(h);
}
END_TEST

/*
 * An exec storm (a process that execs itself, `exec sh script` in a loop):
 * a sample taken inside exec N, past the point of no return, is often
 * processed after exec N+1 is known. It is still looked up in the image
 * exec N replaced, and says so; a pc the new image maps is not.
 */
START_TEST(test_exec_storm_window)
{
	struct maphist *h = hist_new();
	struct umap a = file_map(0x400000, 0x401000, 0, 0), b = file_map(0x500000, 0x501000, 0, 1),
		    c = file_map(0x600000, 0x601000, 0, 2);
	const uint64_t ms = 1000000;
	bool pre = true;

	ck_assert_int_eq(maphist__mmap(h, 9, 1 * ms, &a), 0);
	ck_assert_int_eq(maphist__exec(h, 9, 10 * ms), 0); /* a -> b */
	ck_assert_int_eq(maphist__mmap(h, 9, 10 * ms + 10, &b), 0);
	ck_assert_int_eq(maphist__exec(h, 9, 20 * ms), 0); /* b -> c */
	ck_assert_int_eq(maphist__mmap(h, 9, 20 * ms + 10, &c), 0);

	/* In exec 1 (before b was mapped), processed after exec 2. */
	ck_assert_ptr_nonnull(maphist__find(h, 9, 0x400000, 10 * ms + 5, &pre));
	ck_assert(pre);
	/* In exec 2: image b's pc. */
	ck_assert_int_eq(at(h, 9, 0x500000, 20 * ms + 5), 1);
	ck_assert_ptr_nonnull(maphist__find(h, 9, 0x500000, 20 * ms + 5, &pre));
	ck_assert(pre);
	/* In exec 2, a's pc is two images old: not there. */
	ck_assert_int_eq(at(h, 9, 0x400000, 20 * ms + 5), -1);
	/* A pc mapped at its time is no exec case. */
	ck_assert_ptr_nonnull(maphist__find(h, 9, 0x600000, 25 * ms, &pre));
	ck_assert(!pre);
	/* Out of order: an exec older than the latest still counts. */
	ck_assert_int_eq(maphist__exec(h, 9, 15 * ms), 0);
	ck_assert_ptr_nonnull(maphist__find(h, 9, 0x500000, 15 * ms + 5, &pre));
	ck_assert(pre);
	maphist__free(h);
}
END_TEST

START_TEST(test_fork_inherits)
{
	struct maphist *h = hist_new();
	struct umap lib = file_map(0x7000, 0x8000, 0, 0), dl = file_map(0x9000, 0xa000, 0, 1);

	ck_assert_int_eq(maphist__mmap(h, 1, 10, &lib), 0);
	ck_assert_int_eq(maphist__fork(h, 2, 1, 100), 0);
	ck_assert_int_eq(at(h, 2, 0x7000, 150), 0);
	ck_assert_int_eq(at(h, 2, 0x7000, 50), -1); /* the child did not exist yet */
	/* The parent maps more after the fork: not the child's. */
	ck_assert_int_eq(maphist__mmap(h, 1, 200, &dl), 0);
	ck_assert_int_eq(at(h, 1, 0x9000, 250), 1);
	ck_assert_int_eq(at(h, 2, 0x9000, 250), -1);
	/* An unknown parent leaves the child without a history (/proc then). */
	ck_assert_int_eq(maphist__fork(h, 4, 3, 100), 0);
	ck_assert(!maphist__has(h, 4));
	ck_assert_int_eq(bins[0].refs, 2);
	maphist__free(h);
	ck_assert_int_eq(bins[0].refs, 0);
}
END_TEST

/* dlopen, dlclose (no event), exit: the library answers for samples up to
 * the exit, and the process is kept until the sweep is past it by the grace. */
START_TEST(test_exit_and_sweep)
{
	struct maphist *h = hist_new();
	struct umap dl = file_map(0x9000, 0xa000, 0, 1);

	ck_assert_int_eq(maphist__mmap(h, 3, 1000, &dl), 0);
	maphist__exit(h, 3, 5000);
	ck_assert_int_eq(at(h, 3, 0x9000, 4999), 1);
	maphist__sweep(h, 6000, 2000); /* within the grace */
	ck_assert_int_eq(at(h, 3, 0x9000, 4999), 1);
	maphist__sweep(h, 8000, 2000);
	ck_assert(!maphist__has(h, 3));
	ck_assert_int_eq(bins[1].refs, 0);

	/* Ended mappings of a live process go too; those in force stay. */
	{
		struct umap a = file_map(0x1000, 0x2000, 0, 0), b = file_map(0x1000, 0x2000, 0, 2);

		ck_assert_int_eq(maphist__mmap(h, 9, 100, &a), 0);
		ck_assert_int_eq(maphist__mmap(h, 9, 200, &b), 0);
		maphist__sweep(h, 10000, 2000);
		ck_assert_uint_eq(maphist__nr_maps(h, 9), 1);
		ck_assert_int_eq(bins[0].refs, 0);
		ck_assert_int_eq(at(h, 9, 0x1000, 10000), 2);
	}
	maphist__free(h);
}
END_TEST

/* Entries that ended at different times leave at the sweep past each one's
 * end (the sweep skips a process whose earliest end is not past the
 * horizon: that bound must follow each sweep and each new end). */
START_TEST(test_sweep_each_end_in_turn)
{
	struct maphist *h = hist_new();
	struct umap a = file_map(0x1000, 0x2000, 0, 0), b = file_map(0x1000, 0x2000, 0, 1),
		    c = file_map(0x1000, 0x2000, 0, 2), keep = file_map(0x8000, 0x9000, 0, 3);

	ck_assert_int_eq(maphist__mmap(h, 5, 100, &keep), 0);
	ck_assert_int_eq(maphist__mmap(h, 5, 100, &a), 0);
	ck_assert_int_eq(maphist__mmap(h, 5, 3000, &b), 0); /* a ends at 3000 */
	ck_assert_int_eq(maphist__mmap(h, 5, 6000, &c), 0); /* b ends at 6000 */
	ck_assert_uint_eq(maphist__nr_maps(h, 5), 4);
	maphist__sweep(h, 4000, 2000); /* horizon 2000: nothing ended before */
	ck_assert_uint_eq(maphist__nr_maps(h, 5), 4);
	ck_assert_int_eq(at(h, 5, 0x1000, 2500), 0);
	maphist__sweep(h, 5500, 2000); /* horizon 3500: a goes */
	ck_assert_uint_eq(maphist__nr_maps(h, 5), 3);
	ck_assert_int_eq(bins[0].refs, 0);
	ck_assert_int_eq(at(h, 5, 0x1000, 4000), 1);
	maphist__sweep(h, 7000, 2000); /* horizon 5000: b stays (ends at 6000) */
	ck_assert_uint_eq(maphist__nr_maps(h, 5), 3);
	ck_assert_int_eq(at(h, 5, 0x1000, 5500), 1);
	maphist__sweep(h, 8500, 2000); /* horizon 6500: b goes */
	ck_assert_uint_eq(maphist__nr_maps(h, 5), 2);
	ck_assert_int_eq(bins[1].refs, 0);
	/* An exec ends the rest; the image of before leaves once past it. */
	ck_assert_int_eq(maphist__exec(h, 5, 9000), 0);
	maphist__sweep(h, 10000, 2000);
	ck_assert_uint_eq(maphist__nr_maps(h, 5), 2);
	ck_assert_int_eq(at(h, 5, 0x8000, 8999), 3);
	maphist__sweep(h, 11500, 2000);
	ck_assert_int_eq(bins[2].refs, 0);
	ck_assert_int_eq(bins[3].refs, 0);
	ck_assert_int_eq(at(h, 5, 0x8000, 8999), -1);
	maphist__free(h);
}
END_TEST

/* A pid reused by a new process (fork into it): samples of the old process
 * still see its mappings, samples of the new one its own. */
START_TEST(test_pid_reuse)
{
	struct maphist *h = hist_new();
	struct umap old = file_map(0x1000, 0x2000, 0, 0), par = file_map(0x3000, 0x4000, 0, 1);

	ck_assert_int_eq(maphist__mmap(h, 42, 100, &old), 0);
	maphist__exit(h, 42, 500);
	ck_assert_int_eq(maphist__mmap(h, 1, 50, &par), 0);
	ck_assert_int_eq(maphist__fork(h, 42, 1, 600), 0);
	ck_assert_int_eq(at(h, 42, 0x1000, 400), 0);
	ck_assert_int_eq(at(h, 42, 0x1000, 700), -1);
	ck_assert_int_eq(at(h, 42, 0x3000, 700), 1);
	ck_assert_int_eq(at(h, 42, 0x3000, 400), -1);
	/* The new process is alive: a sweep long after the old exit keeps it. */
	maphist__sweep(h, 100000, 2000);
	ck_assert_int_eq(at(h, 42, 0x3000, 100000), 1);
	maphist__free(h);
}
END_TEST

/*
 * Through ucache: the kernel's events for a real file (a build-id, no
 * dev/inode, as 6.x sends them) in a process that no longer exists resolve
 * to that file's module, with the build-id the kernel gave, and the file is
 * opened by path for its unwind table when it has that build-id: our path
 * may name another file than the process's (a container), so another
 * build-id there gives no table.
 */
/* The kernel's event of path mapped in pid at 300 (its build-id, no dev/inode, as 6.x sends
 * them; 0x555555554000 + 0x4000, file offset 0x1000) into ev and c, then pid's exit at 400. */
static void gone_mmap(struct ucache *c, const char *path, uint32_t pid, struct cpa_map_event *ev,
		      uint8_t *bid, uint8_t *bid_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elfid__init(), 0);
	ck_assert_int_eq(elfid__from_fd(fd, bid, bid_len), 0);
	close(fd);
	ck_assert_uint_ge(*bid_len, 2);
	memset(ev, 0, sizeof(*ev));
	ev->kind = CPA_MAP_MMAP;
	ev->pid = pid;
	ev->time_ns = 300;
	ev->start = 0x555555554000;
	ev->len = 0x4000;
	ev->pgoff = 0x1000;
	ev->build_id_len = *bid_len;
	memcpy(ev->build_id, bid, *bid_len);
	ev->path_len = (uint16_t)strlen(path);
	ck_assert_int_eq(ucache__map_event(c, ev, path), 0);
	ucache__task_exit(c, pid, 1, 400);
}

START_TEST(test_ucache_events_gone_process)
{
	const char *path = "/usr/bin/true";
	const uint32_t pid = 0x7ffffff0; /* no such process */
	struct ucache_opts o = {.dead_grace_ns = 1000000000ull};
	struct cpa_map_event ev = {0};
	struct ucache *c;
	struct uproc *p;
	uint8_t bid[ELFID_MAX], bid_len = 0;
	struct uloc l;
	struct stat sb;

	if (stat(path, &sb) < 0)
		return;
	ck_assert_int_eq(ucache__new(&o, &c), 0);
	ev.kind = CPA_MAP_FORK;
	ev.pid = pid;
	ev.ppid = pid - 1; /* unknown parent */
	ev.time_ns = 100;
	ck_assert_int_eq(ucache__map_event(c, &ev, ""), 0);
	ev.kind = CPA_MAP_EXEC;
	ev.time_ns = 200;
	ck_assert_int_eq(ucache__map_event(c, &ev, ""), 0);
	gone_mmap(c, path, pid, &ev, bid, &bid_len);

	p = ucache__proc(c, pid, 1);
	ck_assert_ptr_nonnull(p);
	p->sample_ns = 350;
	ck_assert_int_eq(ucache__find(c, p, 0x555555555010, 1, &l), 0);
	ck_assert_ptr_nonnull(l.bin);
	ck_assert_str_eq(l.bin->path, path);
	ck_assert_uint_eq(l.file_off, 0x2010);
	/* Our path holds a file with the event's build-id: that file's binary
	 * (dev + inode), taken by later mappings without a look in /proc. */
	ck_assert_uint_eq(l.bin->dev, (uint64_t)sb.st_dev);
	ck_assert_uint_eq(l.bin->ino, (uint64_t)sb.st_ino);
	ck_assert_uint_ne(l.bin->own_view_ns, 0);
	ck_assert_uint_eq(l.bin->build_id_len, bid_len);
	ck_assert_mem_eq(l.bin->build_id, bid, bid_len);
	/* Its unwind table: opened by path (the process and its /proc are
	 * gone), the same build-id there. */
	ck_assert_ptr_nonnull(ucache__cfi(c, p, &l));
	ck_assert(!l.bin->gone);
	/* Before the mapping existed: nothing (and /proc has no such pid). */
	p->sample_ns = 250;
	ck_assert_int_lt(ucache__find(c, p, 0x555555555010, 2, &l), 0);

	/* A temporary build product deleted before we could open it: its
	 * mapping resolves (module and offset known), its table cannot be
	 * read, and the binary says why (the walk's stop reason "deleted"). */
	ev.time_ns = 500;
	ev.start = 0x600000;
	ev.len = 0x1000;
	ev.pgoff = 0;
	memset(ev.build_id, 0xcd, 20);
	ev.path_len = (uint16_t)strlen("/nonexistent/cpa-tmp-prog");
	ck_assert_int_eq(ucache__map_event(c, &ev, "/nonexistent/cpa-tmp-prog"), 0);
	p->sample_ns = 600;
	ck_assert_int_eq(ucache__find(c, p, 0x600100, 3, &l), 0);
	ck_assert_ptr_nonnull(l.bin);
	ck_assert_uint_eq(l.bin->dev, 0); /* known by build-id only */
	ck_assert_ptr_null(ucache__cfi(c, p, &l));
	ck_assert(l.bin->gone);

	/* Another build at the same path as ours (the process's file was
	 * another one): our file is not taken for it. */
	ev.time_ns = 700;
	ev.start = 0x700000;
	ev.len = 0x4000;
	ev.pgoff = 0x1000;
	memset(ev.build_id, 0xab, bid_len);
	ev.path_len = (uint16_t)strlen(path);
	ck_assert_int_eq(ucache__map_event(c, &ev, path), 0);
	p->sample_ns = 800;
	ck_assert_int_eq(ucache__find(c, p, 0x701010, 4, &l), 0);
	ck_assert_ptr_nonnull(l.bin);
	ck_assert_ptr_null(ucache__cfi(c, p, &l));
	ck_assert(l.bin->gone);
	ucache__free(c);
}
END_TEST

/*
 * Binaries no process maps any more go once unused for idle_ns, so that
 * their number follows what ran lately (a CI host runs new test programs all
 * day): the unwind index after 30 s, the binary after idle_ns.
 */
START_TEST(test_ucache_idle_bins_go)
{
	const char *path = "/usr/bin/true";
	const uint32_t pid = 0x7ffffff0; /* no such process */
	struct ucache_opts o = {.dead_grace_ns = 1000000000ull, .idle_ns = 60000000000ull};
	struct cpa_map_event ev = {0};
	uint8_t bid[ELFID_MAX], bid_len = 0;
	struct ucache *c;
	struct uproc *p;
	struct uloc l;
	uint32_t n;

	if (access(path, R_OK) < 0)
		return;
	ck_assert_int_eq(ucache__new(&o, &c), 0);
	gone_mmap(c, path, pid, &ev, bid, &bid_len);
	p = ucache__proc(c, pid, 1);
	ck_assert_ptr_nonnull(p);
	p->sample_ns = 350;
	ck_assert_int_eq(ucache__find(c, p, 0x555555555010, 1, &l), 0);
	ck_assert_ptr_nonnull(ucache__cfi(c, p, &l));
	n = ucache__nr_bins(c);
	ck_assert_uint_ge(n, 1);

	/* The history's clock (another process's event) past the exit's grace. */
	memset(&ev, 0, sizeof(ev));
	ev.kind = CPA_MAP_FORK;
	ev.pid = pid - 1;
	ev.ppid = pid - 2;
	ev.time_ns = 20000000000ull;
	ck_assert_int_eq(ucache__map_event(c, &ev, ""), 0);
	ucache__sweep(c, 20000000000ull); /* unused 20 s: kept */
	ck_assert_uint_eq(ucache__nr_bins(c), n);
	ucache__sweep(c, 40000000000ull); /* 40 s: its index goes, the binary stays */
	ck_assert_uint_eq(ucache__nr_bins(c), n);
	ucache__sweep(c, 70000000000ull); /* 70 s: gone */
	ck_assert_uint_eq(ucache__nr_bins(c), n - 1);
	ucache__free(c);
}
END_TEST

/*
 * A forged build-id: two different libraries claim one, the attacker's
 * mapped first. The kernel's events give the build-id and no dev/inode; the
 * victim's mapping must still resolve to the victim's file (module path,
 * binary) and get an unwind table built from it, not the attacker's. A
 * second mapping of the same file shares the binary and its table.
 */
START_TEST(test_ucache_forged_build_id)
{
	static const uint8_t bid[20] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23,
					0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67};
	const uint32_t pid = (uint32_t)getpid(); /* alive: its root resolves the paths */
	struct ucache_opts o = {.dead_grace_ns = 1000000000ull};
	char dir[PATH_MAX], cmd[PATH_MAX + 2048], evil[PATH_MAX + 64], victim[PATH_MAX + 64];
	const struct cfi_table *te, *tv;
	struct cpa_map_event ev = {0};
	struct ubin *attacker;
	struct ucache *c;
	struct uproc *p;
	struct uloc l;

	test_scratch_in(dir, sizeof(dir), "maphist");
	snprintf(evil, sizeof(evil), "%s/libevil.so", dir);
	snprintf(victim, sizeof(victim), "%s/libvictim.so", dir);
	snprintf(
		cmd, sizeof(cmd),
		"cd '%s' && "
		"printf 'void EVIL_fake_name_A(void) { for (volatile int i = 0; i < 9; i++) ; }\\n' "
		"> evil.c && "
		"printf 'void leaf_spin(void) { for (volatile int i = 0; i < 9; i++) ; }\\n"
		"void other(void) { leaf_spin(); }\\n' > victim.c && "
		"cc -O1 -shared -fPIC -Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567 "
		"-o libevil.so evil.c && "
		"cc -O1 -shared -fPIC -Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567 "
		"-o libvictim.so victim.c",
		dir);
	ck_assert_int_eq(system(cmd), 0);

	ck_assert_int_eq(ucache__new(&o, &c), 0);
	ev.kind = CPA_MAP_MMAP;
	ev.pid = pid;
	ev.time_ns = 100;
	ev.start = 0x10000000000;
	ev.len = 0x1000;
	ev.pgoff = 0x1000;
	ev.build_id_len = sizeof(bid);
	memcpy(ev.build_id, bid, sizeof(bid));
	ev.path_len = (uint16_t)strlen(evil);
	ck_assert_int_eq(ucache__map_event(c, &ev, evil), 0);
	ev.time_ns = 200;
	ev.start = 0x20000000000;
	ev.path_len = (uint16_t)strlen(victim);
	ck_assert_int_eq(ucache__map_event(c, &ev, victim), 0);

	p = ucache__proc(c, pid, 1);
	ck_assert_ptr_nonnull(p);
	p->sample_ns = 300;
	ck_assert_int_eq(ucache__find(c, p, 0x10000000010, 1, &l), 0);
	ck_assert_ptr_nonnull(l.bin);
	ck_assert_str_eq(l.bin->path, evil);
	attacker = l.bin;
	te = ucache__cfi(c, p, &l);
	ck_assert_ptr_nonnull(te);

	ck_assert_int_eq(ucache__find(c, p, 0x20000000010, 2, &l), 0);
	ck_assert_ptr_nonnull(l.bin);
	ck_assert_ptr_ne(l.bin, attacker);
	ck_assert_str_eq(l.bin->path, victim);
	ck_assert_uint_ne(l.module_id, attacker->id);
	tv = ucache__cfi(c, p, &l);
	ck_assert_ptr_nonnull(tv);
	ck_assert_ptr_ne(tv, te); /* built from the victim's file */

	/* The victim's file mapped again: the same binary and table. */
	ev.time_ns = 250;
	ev.start = 0x30000000000;
	ck_assert_int_eq(ucache__map_event(c, &ev, victim), 0);
	ck_assert_int_eq(ucache__find(c, p, 0x30000000010, 3, &l), 0);
	ck_assert_str_eq(l.bin->path, victim);
	ck_assert_ptr_eq(ucache__cfi(c, p, &l), tv);
	ucache__free(c);

	test_rm_rf(dir);
}
END_TEST

/*
 * Mapping events of a file our own path leads to need no stat of
 * /proc/PID/root/path each (bin_own_view()), and that shortcut must not let
 * a file elsewhere that claims the build-id at the same path (a chroot's,
 * seen first) become the binary of our path. Two fake /proc entries: pid
 * 101's root is a scratch "chroot" holding a forged copy at the same
 * absolute path, pid 102's root is ours.
 */
START_TEST(test_ucache_own_view_no_poisoning)
{
	static const uint8_t bid[20] = {0xfe, 0xed, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23,
					0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x99};
	char dir[PATH_MAX], cmd[4 * PATH_MAX + 2048], lib[PATH_MAX + 64], proc[PATH_MAX + 64];
	struct ucache_opts o = {.dead_grace_ns = 1000000000ull};
	struct cpa_map_event ev = {0};
	struct ucache *c;
	struct uproc *p;
	struct uloc l;
	struct ubin *forged, *ours;
	struct stat st;

	test_scratch_in(dir, sizeof(dir), "ownview");
	snprintf(lib, sizeof(lib), "%s/lib/libown.so", dir);
	snprintf(proc, sizeof(proc), "%s/proc", dir);
	snprintf(
		cmd, sizeof(cmd),
		"set -e; cd '%s' && mkdir -p lib proc/101 proc/102 chroot'%s/lib' && "
		"printf 'void own_fn(void) { for (volatile int i = 0; i < 9; i++) ; }\\n' > a.c && "
		"printf 'void forged_fn(void) { for (volatile int i = 0; i < 7; i++) ; }\\n' > b.c && "
		"cc -O1 -shared -fPIC -Wl,--build-id=0xfeed456789abcdef0123456789abcdef01234599 "
		"-o lib/libown.so a.c && "
		"cc -O1 -shared -fPIC -Wl,--build-id=0xfeed456789abcdef0123456789abcdef01234599 "
		"-o 'chroot%s' b.c && "
		"ln -s '%s/chroot' proc/101/root && ln -s / proc/102/root",
		dir, dir, lib, dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(stat(lib, &st), 0);

	o.proc_root = proc;
	ck_assert_int_eq(ucache__new(&o, &c), 0);
	ev.kind = CPA_MAP_MMAP;
	ev.len = 0x1000;
	ev.pgoff = 0x1000;
	ev.build_id_len = sizeof(bid);
	memcpy(ev.build_id, bid, sizeof(bid));
	ev.path_len = (uint16_t)strlen(lib);

	/* The chroot's forgery first, then ours at the same path. */
	ev.pid = 101;
	ev.time_ns = 100;
	ev.start = 0x10000000000;
	ck_assert_int_eq(ucache__map_event(c, &ev, lib), 0);
	ev.pid = 102;
	ev.time_ns = 200;
	ev.start = 0x20000000000;
	ck_assert_int_eq(ucache__map_event(c, &ev, lib), 0);

	p = ucache__proc(c, 101, 1);
	ck_assert_ptr_nonnull(p);
	p->sample_ns = 300;
	ck_assert_int_eq(ucache__find(c, p, 0x10000000010, 1, &l), 0);
	forged = l.bin;
	ck_assert_ptr_nonnull(forged);
	ck_assert_uint_ne(forged->ino, (uint64_t)st.st_ino);
	ck_assert_uint_eq(forged->own_view_ns, 0);

	p = ucache__proc(c, 102, 1);
	ck_assert_ptr_nonnull(p);
	p->sample_ns = 300;
	ck_assert_int_eq(ucache__find(c, p, 0x20000000010, 2, &l), 0);
	ours = l.bin;
	ck_assert_ptr_ne(ours, forged);
	ck_assert_uint_eq(ours->dev, (uint64_t)st.st_dev);
	ck_assert_uint_eq(ours->ino, (uint64_t)st.st_ino);
	ck_assert_uint_ne(ours->own_view_ns, 0);

	/* Later mappings of our path, by either process: our file's binary,
	 * never the forgery's. */
	ev.time_ns = 400;
	ev.start = 0x30000000000;
	ck_assert_int_eq(ucache__map_event(c, &ev, lib), 0);
	ev.pid = 101;
	ev.time_ns = 500;
	ev.start = 0x40000000000;
	ck_assert_int_eq(ucache__map_event(c, &ev, lib), 0);
	p = ucache__proc(c, 102, 1);
	p->sample_ns = 600;
	ck_assert_int_eq(ucache__find(c, p, 0x30000000010, 3, &l), 0);
	ck_assert_ptr_eq(l.bin, ours);
	p = ucache__proc(c, 101, 1);
	p->sample_ns = 600;
	ck_assert_int_eq(ucache__find(c, p, 0x40000000010, 4, &l), 0);
	ck_assert_ptr_eq(l.bin, ours);

	/* Our file replaced by another with the same build-id: once the
	 * shortcut's second is up, a new mapping is the new file's. */
	snprintf(cmd, sizeof(cmd), "cd '%s' && cp lib/libown.so lib/new.so && mv lib/new.so '%s'",
		 dir, lib);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(stat(lib, &st), 0);
	ck_assert_uint_ne(ours->ino, (uint64_t)st.st_ino);
	ev.pid = 102;
	ev.time_ns = 500 + 2000000000ull;
	ev.start = 0x50000000000;
	ck_assert_int_eq(ucache__map_event(c, &ev, lib), 0);
	p = ucache__proc(c, 102, 1);
	p->sample_ns = ev.time_ns + 100;
	ck_assert_int_eq(ucache__find(c, p, 0x50000000010, 5, &l), 0);
	ck_assert_ptr_ne(l.bin, ours);
	ck_assert_uint_eq(l.bin->ino, (uint64_t)st.st_ino);
	ucache__free(c);

	test_rm_rf(dir);
}
END_TEST

/* The inode of the binary pid's mapping at pc is of, as of sample_ns. */
static uint64_t bin_ino_at(struct ucache *c, uint32_t pid, uint64_t sample_ns, uint64_t pc)
{
	struct uproc *p = ucache__proc(c, pid, 1);
	struct uloc l;

	ck_assert_ptr_nonnull(p);
	p->sample_ns = sample_ns;
	ck_assert_int_eq(ucache__find(c, p, pc, 1, &l), 0);
	ck_assert_ptr_nonnull(l.bin);
	return l.bin->ino;
}

/*
 * A process's root is opened once for the mapping events of its burst
 * (ucache.c, root_fd()), and never kept across its pid's fork: a reused pid
 * may live in another root. Fake /proc: pid 103's root is chroot a, then
 * (the pid reused by a fork) chroot b, each with its own copy of the file at
 * the path (which ours does not have).
 */
START_TEST(test_ucache_root_per_pid)
{
	static const char path[] = "/lib/cpa-held/libheld.so";
	char dir[PATH_MAX], cmd[2 * PATH_MAX + 1024], file[PATH_MAX + 64];
	struct ucache_opts o = {.dead_grace_ns = 1000000000ull};
	struct cpa_map_event ev;
	uint8_t bid[ELFID_MAX], bid_len = 0;
	struct stat sa, sb;
	struct ucache *c;
	int fd;

	ck_assert_int_eq(elfid__init(), 0);
	ck_assert_int_ne(access(path, F_OK), 0);
	test_scratch_in(dir, sizeof(dir), "rootpid");
	snprintf(
		cmd, sizeof(cmd),
		"set -e; cd '%s' && mkdir -p proc/103 a/lib/cpa-held b/lib/cpa-held && "
		"printf 'void held_fn(void) { for (volatile int i = 0; i < 9; i++) ; }\n' > a.c && "
		"cc -O1 -shared -fPIC -Wl,--build-id -o a%s a.c && cp a%s b%s && "
		"ln -s '%s/a' proc/103/root",
		dir, path, path, path, dir);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(file, sizeof(file), "%s/a%s", dir, path);
	ck_assert_int_eq(stat(file, &sa), 0);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elfid__from_fd(fd, bid, &bid_len), 0);
	close(fd);
	snprintf(file, sizeof(file), "%s/b%s", dir, path);
	ck_assert_int_eq(stat(file, &sb), 0);
	ck_assert_uint_ne(sa.st_ino, sb.st_ino);

	snprintf(file, sizeof(file), "%s/proc", dir);
	o.proc_root = file;
	ck_assert_int_eq(ucache__new(&o, &c), 0);
	ev = (struct cpa_map_event){.kind = CPA_MAP_MMAP,
				    .pid = 103,
				    .time_ns = 100,
				    .start = 0x10000000000,
				    .len = 0x1000,
				    .pgoff = 0x1000,
				    .build_id_len = bid_len,
				    .path_len = (uint16_t)strlen(path)};
	memcpy(ev.build_id, bid, bid_len);
	ck_assert_int_eq(ucache__map_event(c, &ev, path), 0);

	/* pid 103 gone, reused in chroot b. */
	snprintf(cmd, sizeof(cmd), "cd '%s' && ln -sfn '%s/b' proc/103/root", dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	ev.kind = CPA_MAP_FORK;
	ev.ppid = 1;
	ev.time_ns = 200;
	ck_assert_int_eq(ucache__map_event(c, &ev, ""), 0);
	ev.kind = CPA_MAP_MMAP;
	ev.time_ns = 300;
	ev.start = 0x20000000000;
	ck_assert_int_eq(ucache__map_event(c, &ev, path), 0);
	/* The binary of the mapping: b's file. */
	ck_assert_uint_eq(bin_ino_at(c, 103, 400, ev.start + 0x10), (uint64_t)sb.st_ino);
	ucache__free(c);
	test_rm_rf(dir);
}
END_TEST

/*
 * A gone process of another mount namespace (its exec event named it): its
 * binary, at a path ours does not have, is opened under the root of a live
 * process of that namespace, for its unwind table; a child forked from it
 * is of its namespace too. A namespace with no live process left, a file
 * there with another build-id, or (no build-id) one with the mapping's inode
 * number on another dev: no table (as before), never another file. The
 * inode alone proves nothing: namespace ids are reused, and inode numbers
 * repeat across filesystems (two tmpfs number their first file alike).
 */
START_TEST(test_ucache_gone_namespace_peer)
{
	char dir[1024], lib[1100], proc[1100], nslib[2200], nsfile[1200], cmd[8192];
	struct ucache_opts o = {.dead_grace_ns = 1000000000ull};
	struct cpa_map_event ev = {0};
	uint8_t bid[ELFID_MAX], bid_len = 0;
	struct stat st, lst;
	uint32_t ns;
	int fd;

	test_scratch_in(dir, sizeof(dir), "nspeer");
	/* lib: a path only the namespace has (under nsroot/); proc/201 lives
	 * in it, its ns/mnt's inode the namespace's. */
	snprintf(lib, sizeof(lib), "%s/lib/libns.so", dir);
	snprintf(nslib, sizeof(nslib), "%s/nsroot%s", dir, lib);
	snprintf(proc, sizeof(proc), "%s/proc", dir);
	snprintf(nsfile, sizeof(nsfile), "%s/201/ns/mnt", proc);
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s' && mkdir -p proc/201/ns \"$(dirname '%s')\" && "
		 "printf 'void ns_fn(void) { for (volatile int i = 0; i < 9; i++) ; }\\n' > a.c && "
		 "cc -O1 -shared -fPIC -Wl,--build-id -o '%s' a.c && touch proc/201/ns/mnt && "
		 "ln -s '%s/nsroot' proc/201/root",
		 dir, nslib, nslib, dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(stat(nsfile, &st), 0);
	ns = (uint32_t)st.st_ino;
	ck_assert_int_eq(stat(nslib, &lst), 0);
	fd = open(nslib, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(elfid__init(), 0);
	ck_assert_int_eq(elfid__from_fd(fd, bid, &bid_len), 0);
	close(fd);
	o.proc_root = proc;

	/* case 0: exec'd in ns; 1: forked from such a process; 2: exec'd in a
	 * namespace nobody is left in; 3: in ns, but the file there is
	 * another build; 4: in ns, mapped without a build-id from another
	 * filesystem's file with the same inode number. */
	for (int i = 0; i < 5; i++) {
		const uint32_t pid = 300 + (uint32_t)i;
		struct ucache *c;
		struct uproc *p;
		struct uloc l;

		ck_assert_int_eq(ucache__new(&o, &c), 0);
		if (i == 1) {
			ucache__task_exec(c, 299, ns);
			ev = (struct cpa_map_event){
				.kind = CPA_MAP_FORK, .pid = pid, .ppid = 299, .time_ns = 100};
			ck_assert_int_eq(ucache__map_event(c, &ev, ""), 0);
		} else {
			ucache__task_exec(c, pid, i == 2 ? ns + 1 : ns);
		}
		memset(&ev, 0, sizeof(ev));
		ev.kind = CPA_MAP_MMAP;
		ev.pid = pid;
		ev.time_ns = 300;
		ev.start = 0x555555554000;
		ev.len = 0x1000;
		ev.build_id_len = bid_len;
		memcpy(ev.build_id, bid, bid_len);
		if (i == 3)
			ev.build_id[0] ^= 0xff;
		if (i == 4) {
			ev.build_id_len = 0;
			ev.dev_major = major(lst.st_dev) + 7;
			ev.dev_minor = minor(lst.st_dev);
			ev.ino = (uint64_t)lst.st_ino;
		}
		ev.path_len = (uint16_t)strlen(lib);
		ck_assert_int_eq(ucache__map_event(c, &ev, lib), 0);
		ucache__task_exit(c, pid, 1, 400);

		p = ucache__proc(c, pid, 1);
		ck_assert_ptr_nonnull(p);
		p->sample_ns = 350;
		ck_assert_int_eq(ucache__find(c, p, 0x555555554010, 1, &l), 0);
		ck_assert_ptr_nonnull(l.bin);
		if (i < 2) {
			ck_assert_msg(ucache__cfi(c, p, &l) != NULL, "case %d: no table", i);
			ck_assert(!l.bin->gone);
		} else {
			ck_assert_msg(ucache__cfi(c, p, &l) == NULL, "case %d: a table", i);
			ck_assert(l.bin->gone);
		}
		ucache__free(c);
	}
	test_rm_rf(dir);
}
END_TEST

static Suite *maphist_suite(void)
{
	Suite *s = suite_create("maphist");
	TEST_TCASE(s, "history", test_mmap_lookup_by_time, test_overlap_splits,
		   test_exec_new_generation, test_exec_storm_window, test_fork_inherits,
		   test_exit_and_sweep, test_sweep_each_end_in_turn, test_pid_reuse,
		   test_ucache_events_gone_process, test_ucache_forged_build_id,
		   test_ucache_own_view_no_poisoning, test_ucache_idle_bins_go,
		   test_ucache_gone_namespace_peer, test_ucache_root_per_pid);
	return s;
}

int main(void)
{
	return test_run_suite(maphist_suite());
}
