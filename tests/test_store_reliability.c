// SPDX-License-Identifier: MIT
/*
 * The store under damage, hostile files and operator accidents
 * (docs/reliability.md, "Store"): a full disk at creation and later (real
 * tmpfs, root only: `test_store_reliability disk`), a storer killed right
 * after a block boundary or right after submitting blocks' writes, a flipped
 * version byte, a FIFO / sparse / magic-filled / copied segment, the store
 * dir deleted while writing, a second writer on the same root, `cpa show
 * --read ROOT` over two runs of a day, and a torn tail said at default
 * verbosity.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "shm/fault.h"
#include "storer/store.h"
#include "storer/store_fmt.h"
#include "storer/storer.h"
#include "test_store_util.h"
#include "test_util.h"

#define NSTACKS	   12
#define LOST_STORE "[lost: storer write_errors]"
#define LOST_IO	   "[lost: storer io_errors]"

/* ------------------------------------------------------------ helpers */

struct tally {
	uint64_t samples;    /* non-loss rows' counts */
	uint64_t lost_store; /* [lost: storer write_errors] */
	uint64_t lost_io;    /* [lost: storer io_errors] */
	uint64_t lost_other;
	uint64_t rows;
};

static int tally_row(void *ctx, const struct store_sample *s)
{
	struct tally *t = ctx;

	t->rows++;
	if (!s->lost)
		t->samples += s->count;
	else if (s->n_frames && !strcmp(s->frames[s->n_frames - 1]->name, LOST_STORE))
		t->lost_store += s->count;
	else if (s->n_frames && !strcmp(s->frames[s->n_frames - 1]->name, LOST_IO))
		t->lost_io += s->count;
	else
		t->lost_other += s->count;
	return 0;
}

struct notes {
	int n;
	char last[512];
	char all[8192];
};

static void on_note(void *ctx, const char *msg)
{
	struct notes *nt = ctx;

	if (!nt)
		return;
	nt->n++;
	snprintf(nt->last, sizeof(nt->last), "%s", msg);
	if (strlen(nt->all) + strlen(msg) + 2 < sizeof(nt->all)) {
		strcat(nt->all, msg);
		strcat(nt->all, "\n");
	}
}

/* Everything in dir (a store dir); the reader's stats into rs (NULL: not wanted). */
static void tally_dir_stats(const char *dir, struct tally *t, struct notes *nt,
			    struct store_read_stats *rs)
{
	struct store_reader *r;
	char err[512];
	int e = store_reader__open_err(dir, on_note, nt, &r, err, sizeof(err));

	ck_assert_msg(e == 0, "open %s: %s", dir, err);
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, NULL, tally_row, t), 0);
	if (rs)
		store_reader__stats(r, rs);
	store_reader__free(r);
}

static void tally_dir(const char *dir, struct tally *t, struct notes *nt)
{
	tally_dir_stats(dir, t, nt, NULL);
}

static void tally_root(const char *root, struct tally *t)
{
	char **names;
	uint32_t n;

	ck_assert_int_eq(store_root__list(root, &names, &n), 0);
	for (uint32_t i = 0; i < n; i++) {
		char p[1200];
		struct store_reader *r;

		snprintf(p, sizeof(p), "%s/%s", root, names[i]);
		if (store_reader__open(p, NULL, NULL, &r) < 0)
			continue;
		ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, NULL, tally_row, t), 0);
		store_reader__free(r);
	}
	store_root__list_free(names, n);
}

static int count_store_dirs(const char *root)
{
	char **names;
	uint32_t n;

	ck_assert_int_eq(store_root__list(root, &names, &n), 0);
	store_root__list_free(names, n);
	return (int)n;
}

static struct store_writer *writer(const char *root, uint32_t seg_s, uint32_t max_retry)
{
	struct store_writer_opts o = {.root = root,
				      .cpu_num = 2,
				      .freq = 49,
				      .record_interval = 1,
				      .segment_seconds = seg_s,
				      .max_retry_bytes = max_retry};
	struct store_writer *w;

	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	return w;
}

/* nsec seconds from base at rate samples/s, straight into a writer. */
static uint64_t feed(struct store_writer *w, uint64_t base, uint32_t nsec, uint32_t rate,
		     uint64_t *seq)
{
	uint64_t n = 0;

	for (uint32_t sec = 0; sec < nsec; sec++)
		for (uint32_t k = 0; k < rate; k++) {
			struct cpa_sample_out o;

			t_sample(&o, (*seq)++, base + sec * T_NS + k * (T_NS / rate),
				 1 + (sec + k) % NSTACKS, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
			n++;
		}
	return n;
}

/* A store of nsec seconds in segments of seg_s seconds; its dir into dir. */
static uint64_t make_store(const char *root, uint32_t nsec, uint32_t seg_s, char *dir, size_t len)
{
	struct store_writer *w = writer(root, seg_s, 0);
	uint64_t seq = 1, n;

	store_writer__set_run_id(w, t_base_ns());
	t_defs(w, NSTACKS, 0);
	n = feed(w, t_base_ns(), nsec, 20, &seq);
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(root, dir, len), 0);
	return n;
}

static void seg_file(const char *dir, uint32_t no, char *buf, size_t len)
{
	snprintf(buf, len, "%s/seg_%06u.cps", dir, no);
}

static void copy_file(const char *from, const char *to)
{
	char cmd[3000];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	ck_assert_int_eq(system(cmd), 0);
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	uint8_t b;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x02; /* major 1 -> 3: "newer" if the crc were not checked first */
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

static char t_log[16384];

static void log_into(enum log_level lvl, const char *line)
{
	(void)lvl;
	if (strlen(t_log) + strlen(line) + 2 < sizeof(t_log)) {
		strcat(t_log, line);
		strcat(t_log, "\n");
	}
}

static int count_in(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* ------------------------------------------------------------ corruption */

/* A flipped byte in the version field of one segment or of the index is
 * corruption: the store still reads, the other segments whole. */
START_TEST(test_version_byte)
{
	char *root = t_mkdtemp(), dir[1024], p[1100];
	struct tally t = {0}, t0 = {0};
	struct notes nt = {0};
	uint64_t n = make_store(root, 30, 10, dir, sizeof(dir)); /* 3 segments */
	struct store_reader *r;
	char err[512];

	tally_dir(dir, &t0, NULL);
	ck_assert_uint_eq(t0.samples, n);
	seg_file(dir, 1, p, sizeof(p));
	flip_byte(p, 8);
	snprintf(p, sizeof(p), "%s/index", dir);
	flip_byte(p, 8);
	ck_assert_msg(store_reader__open_err(dir, on_note, &nt, &r, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, NULL, tally_row, &t), 0);
	store_reader__free(r);
	/* Segment 1's blocks are self-describing: nothing is lost at all. */
	ck_assert_uint_eq(t.samples, n);
	ck_assert_msg(strstr(nt.all, "bad segment header (corrupt)"), "%s", nt.all);
	ck_assert_msg(strstr(nt.all, "bad index header (corrupt), rebuilding"), "%s", nt.all);
	ck_assert_msg(!strstr(nt.all, "newer"), "%s", nt.all);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* ------------------------------------------------------------ hostile files */

static void tally_guarded(const char *dir, struct tally *t, struct notes *nt)
{
	/* A hang is the failure mode here: the test dies rather than waits. */
	alarm(120);
	tally_dir(dir, t, nt);
	alarm(0);
}

/* A FIFO in place of the index or of a segment: no hang, the rest reads. */
START_TEST(test_fifo)
{
	char *root = t_mkdtemp(), dir[1024], p[1100];
	uint64_t n = make_store(root, 30, 10, dir, sizeof(dir));
	struct tally t = {0}, t2 = {0};
	struct notes nt = {0};

	seg_file(dir, 2, p, sizeof(p));
	tally_dir(dir, &t2, NULL); /* what segment 2 holds: all minus the others */
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(mkfifo(p, 0644), 0);
	snprintf(p, sizeof(p), "%s/index", dir);
	ck_assert_int_eq(unlink(p), 0);
	ck_assert_int_eq(mkfifo(p, 0644), 0);
	tally_guarded(dir, &t, &nt);
	ck_assert_uint_gt(t.samples, 0);
	ck_assert_uint_lt(t.samples, n); /* segment 2 is gone, 1 and 3 are there */
	ck_assert_uint_eq(t.samples, n - 10 * 20);
	ck_assert_msg(strstr(nt.all, "seg_000002.cps: not a regular file, skipped"), "%s", nt.all);
	ck_assert_msg(strstr(nt.all, "index: not a regular file"), "%s", nt.all);
	{
		struct store_tl_block *tl = NULL;
		size_t tn = 0;

		alarm(60);
		ck_assert_int_lt(store_timeline__read(dir, &tl, &tn, NULL), 0);
		alarm(0);
		free(tl);
	}
	t_rm_rf(root);
	free(root);
}
END_TEST

/* A sparse 100 GiB segment (holes) and a segment of nothing but block magics:
 * bounded work, one notice for a run of garbage, the real segment whole. */
START_TEST(test_sparse_and_magic)
{
	char *root = t_mkdtemp(), dir[1024], p[1100];
	uint64_t n = make_store(root, 10, 3600, dir, sizeof(dir));
	struct tally t = {0};
	struct notes nt = {0};
	struct store_read_stats st;
	struct store_reader *r;
	int fd;

	seg_file(dir, 7, p, sizeof(p));
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 100LL << 30), 0);
	/* a little garbage in the middle of the holes */
	ck_assert_int_eq(pwrite(fd, "CPABxxxxxxxx", 12, 50LL << 30), 12);
	close(fd);

	seg_file(dir, 8, p, sizeof(p));
	fd = open(p, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	{
		static char buf[1 << 20];

		for (size_t i = 0; i < sizeof(buf); i += 4)
			memcpy(buf + i, "CPAB", 4);
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	}
	close(fd);

	alarm(120);
	ck_assert_int_eq(store_reader__open(dir, on_note, &nt, &r), 0);
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, NULL, tally_row, &t), 0);
	store_reader__stats(r, &st);
	store_reader__free(r);
	alarm(0);
	ck_assert_uint_eq(t.samples, n);
	/* 4 MiB of magics: one notice for the run (and one for the header), not
	 * a million. */
	ck_assert_int_eq(count_in(nt.all, "seg_000008.cps"), 2);
	ck_assert_msg(strstr(nt.all, "seg_000008.cps: 4194240 unreadable bytes at 64, skipped"),
		      "%s", nt.all);
	ck_assert_msg(strstr(nt.all, "seg_000007.cps: 107374182400 bytes, larger than a segment"),
		      "%s", nt.all);
	ck_assert_uint_ge(st.bytes_skipped, 4u << 20);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* Copies of a segment under other names: only the canonical name counts, a
 * copy under another canonical name is caught by its header. */
START_TEST(test_segment_copies)
{
	static const char *const names[] = {"seg_000000.cps",  "seg_-1.cps", "seg_1.cps",
					    "seg_0000001.cps", "seg_+1.cps", "seg_000001.cps.bak"};
	char *root = t_mkdtemp(), dir[1024], p[1100], q[1200];
	uint64_t n = make_store(root, 20, 10, dir, sizeof(dir));
	struct tally t = {0};
	struct notes nt = {0};

	seg_file(dir, 1, p, sizeof(p));
	for (size_t i = 0; i < ARRAY_SIZE(names); i++) {
		snprintf(q, sizeof(q), "%s/%s", dir, names[i]);
		copy_file(p, q);
	}
	seg_file(dir, 9, q, sizeof(q));
	copy_file(p, q);
	tally_dir(dir, &t, &nt);
	ck_assert_uint_eq(t.samples, n);
	ck_assert_msg(
		strstr(nt.all, "seg_000009.cps: its header says segment 1 (a copy?), skipped"),
		"%s", nt.all);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* ------------------------------------------------------------ operator accidents */

/* One writer per store root: a second one (a second monitor) is refused. */
START_TEST(test_root_lock)
{
	char *root = t_mkdtemp();
	struct store_writer_opts o = {.root = root};
	struct store_writer *w1, *w2;
	int pid = 0;

	ck_assert_int_eq(store_writer__new(&o, &w1), 0);
	ck_assert_int_eq(store_writer__new(&o, &w2), -EBUSY);
	ck_assert_int_eq(store_root__lock(root, &pid), -EBUSY);
	ck_assert_int_eq(pid, getpid());
	/* The lock is on the root itself: deleting files beats nothing. */
	{
		char p[1100];

		snprintf(p, sizeof(p), "%s/.cpa-lock", root);
		ck_assert_int_eq(unlink(p), 0);
		ck_assert_int_eq(store_writer__new(&o, &w2), -EBUSY);
	}
	store_writer__free(w1);
	ck_assert_int_eq(store_writer__new(&o, &w2), 0);
	store_writer__free(w2);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* rm -rf of the store dir while writing: noticed within a second, a new dir
 * is made, and the open block's samples are a loss row there. */
START_TEST(test_store_deleted)
{
	char *root = t_mkdtemp(), dir[1024];
	struct store_writer *w = writer(root, 3600, 0);
	struct store_writer_stats ws;
	uint64_t seq = 1, base = t_base_ns(), before, after;
	struct tally t = {0};

	store_writer__set_run_id(w, base);
	t_defs(w, NSTACKS, 0);
	feed(w, base, 10, 20, &seq);
	store_writer__tick(w, base + 11 * T_NS);	 /* blocks up to 10 s written */
	before = feed(w, base + 10 * T_NS, 2, 20, &seq); /* in the open block */
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	t_rm_rf(dir);
	store_writer__tick(w, base + 12 * T_NS);
	store_writer__stats(w, &ws);
	ck_assert_uint_eq(ws.store_gone, 1);
	after = feed(w, base + 20 * T_NS, 10, 20, &seq);
	store_writer__free(w);
	ck_assert_int_eq(count_store_dirs(root), 1);
	tally_root(root, &t);
	ck_assert_uint_eq(t.samples, after);
	ck_assert_uint_eq(t.lost_store, before);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* What is done to the newest segment's last block after the kill. */
enum tail_damage {
	TAIL_WHOLE,
	TAIL_TORN,    /* cut short: the write did not complete */
	TAIL_FLIPPED, /* a byte of its data section flipped: its CRC fails */
};

/*
 * A storer (a child) takes secs seconds of per_sec samples from the ring in
 * batches and dies by SIGKILL: delay_us after the last batch, or, with
 * commit, at its commit-th release that raises the mark, once the blocks'
 * writes landed and before the release (CPA_FAULT_KILL_AFTER_COMMIT=
 * storer:commit:1). dmg is done to the last block of its segment; a restarted
 * storer takes the rest: every sample that reads back is in the store
 * exactly once. What the restart skipped as copies into *ret_dup.
 */
static void kill_and_restart_at(uint32_t secs, uint32_t per_sec, useconds_t delay_us,
				unsigned int commit, enum tail_damage dmg, uint64_t *ret_dup)
{
	char *root = t_mkdtemp();
	struct shm_layout l;
	struct shm_arena *a = NULL;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct shm_stage *st;
	uint64_t base = t_base_ns(), seq = 1, fed = 0;
	struct tally t = {0};
	struct store_writer *w;
	struct storer *s;
	int status;
	pid_t pid;

	shm_layout__default(&l, 4096, 16);
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	st = shm_arena__stage(a, SHM_STAGE_STORER);
	ck_assert_int_eq(shm_arena__open_prod(a, SHM_RING_SYMD, &p), 0);
	ring_defs(&p, NSTACKS);
	for (uint32_t sec = 1; sec <= secs; sec++)
		for (uint32_t k = 0; k < per_sec; k++) {
			struct cpa_sample_out o;

			t_sample(&o, seq++, base + sec * T_NS + k * (T_NS / per_sec),
				 1 + (sec + k) % NSTACKS, 0);
			put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
			fed++;
		}
	shm_ring__commit_sp(&p);

	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct store_writer_opts o = {.root = root, .record_interval = 1};
		char knob[32];
		int n;

		snprintf(knob, sizeof(knob), "storer:%u:1", commit);
		if (commit && setenv(SHM_FAULT_KILL_ENV, knob, 1) < 0)
			_exit(5);
		if (shm_arena__open_cons(a, SHM_RING_SYMD, &c) < 0 || store_writer__new(&o, &w) < 0)
			_exit(2);
		store_writer__set_run_id(w, base);
		if (store_writer__journal_open(w, root) < 0 || storer__new(st, &c, w, &s) < 0)
			_exit(3);
		do
			n = storer__batch(s, STORER_BATCH);
		while (n > 0);
		/* A write that took longer than the release's wait: a tick releases it. */
		for (int i = 0; commit && i < 500; i++) {
			usleep(10000);
			storer__tick(s, base + 7 * T_NS);
		}
		if (delay_us)
			usleep(delay_us);
		if (!commit)
			raise(SIGKILL);
		_exit(4); /* the knob did not kill */
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "child status %#x",
		      status);

	if (dmg != TAIL_WHOLE) {
		char dir[1024], seg[1100];
		struct stat sb;

		ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
		seg_file(dir, 1, seg, sizeof(seg));
		ck_assert_int_eq(stat(seg, &sb), 0);
		ck_assert_int_gt(sb.st_size, (off_t)(sizeof(struct store_seg_hdr) + 40));
		if (dmg == TAIL_TORN)
			ck_assert_int_eq(truncate(seg, sb.st_size - 40), 0);
		else
			flip_byte(seg, sb.st_size - 1);
	}
	ck_assert_int_eq(shm_arena__open_cons(a, SHM_RING_SYMD, &c), 0);
	{
		struct store_writer_opts o = {.root = root, .record_interval = 1};

		ck_assert_int_eq(store_writer__new(&o, &w), 0);
	}
	store_writer__set_run_id(w, base);
	ck_assert_int_ge(store_writer__journal_open(w, root), 1);
	ck_assert_int_eq(storer__new(st, &c, w, &s), 0);
	while (storer__batch(s, STORER_BATCH) > 0)
		;
	ck_assert_int_eq(storer__finish(s, true), 0);
	storer__free(s);
	store_writer__free(w);
	tally_root(root, &t);
	ck_assert_msg(t.samples == fed, "stored %llu of %llu samples (%s)",
		      (unsigned long long)t.samples, (unsigned long long)fed,
		      t.samples > fed ? "duplicates" : "lost");
	*ret_dup = shm_stage__cnt(st, SHM_CNT_DROP_DUP);
	shm_arena__free(a);
	t_rm_rf(root);
	free(root);
}

static void kill_and_restart(uint32_t secs, uint32_t per_sec, useconds_t delay_us)
{
	uint64_t dup;

	kill_and_restart_at(secs, per_sec, delay_us, 0, TAIL_WHOLE, &dup);
	ck_assert_uint_eq(dup, 0);
}

/*
 * A storer killed (SIGKILL) right after a batch in which a block closed and
 * the next one opened: the restarted storer stores every sample exactly
 * once. The input is released only up to the record that opened the new block.
 */
START_TEST(test_kill_after_block_boundary)
{
	/* 4 s of block 1, then 2 s of block 2, committed at once: one batch.
	 * Block 1 is handed to io_uring, block 2 is open: die 200 ms later. */
	kill_and_restart(6, 20, 200000);
}
END_TEST

/*
 * Killed at once after batches that closed many blocks (1 sample a second,
 * a block every 5 s): the blocks' writes were submitted, some still queued
 * for io-wq (ext4 punts buffered writes to it), which the kill cancels. The
 * input of a block is released only once its write completed: nothing is
 * lost, nothing stored twice. Several rounds: the kill lands at a different
 * point of the writes each time.
 */
START_TEST(test_kill_after_submit)
{
	kill_and_restart(240, 1, 0);
}
END_TEST

/*
 * Killed between a block's landed write and the release of its input
 * (CPA_FAULT_KILL_AFTER_COMMIT=storer:N:1): the ring's mark is below the
 * block, so the restarted storer reads its samples again. It starts from the
 * highest seq the store's tail holds and skips them: stored once. A torn or
 * corrupt last block holds nothing that reads back, so its seq does not
 * count and its samples are stored again.
 */
START_TEST(test_kill_after_landed)
{
	static const struct {
		uint32_t secs, per_sec;
		unsigned int commit;
		enum tail_damage dmg;
	} c[] = {
		/* block 1 (seconds 1-4, 80 samples) landed, block 2 open */
		{6, 20, 1, TAIL_WHOLE},
		{6, 20, 1, TAIL_TORN},
		{6, 20, 1, TAIL_FLIPPED},
		/* a block every 5 s, dozens landed in the batch */
		{240, 1, 1, TAIL_WHOLE},
		{240, 1, 1, TAIL_TORN},
		{240, 1, 1, TAIL_FLIPPED},
	};
	uint64_t dup;

	kill_and_restart_at(c[_i].secs, c[_i].per_sec, 0, c[_i].commit, c[_i].dmg, &dup);
	/* Whole: the landed blocks were read again and skipped. */
	if (c[_i].dmg == TAIL_WHOLE)
		ck_assert_uint_gt(dup, 0);
	if (_i == 0)
		ck_assert_uint_eq(dup, 80);
	if (_i == 1 || _i == 2)
		ck_assert_uint_eq(dup, 0);
}
END_TEST

/* A store of 50 s at 20 samples/s, seqs 1..1000: 10 blocks, block k holding
 * 100k+1..100k+100; their index entries by block into ents (by offset). */
static void seq_store(const char *root, uint64_t run_id, bool with_seq, char *dir, size_t len,
		      struct store_idx_entry *ents)
{
	struct store_writer *w = writer(root, 3600, 0);
	uint64_t seq = 1, base = t_base_ns();
	char p[1100];
	int fd, n = 0;

	store_writer__set_run_id(w, run_id);
	t_defs(w, NSTACKS, 0);
	for (uint32_t sec = 0; sec < 50; sec++)
		for (uint32_t k = 0; k < 20; k++) {
			struct cpa_sample_out o;

			t_sample(&o, with_seq ? seq : 0, base + sec * T_NS + k * (T_NS / 20),
				 1 + (sec + k) % NSTACKS, 0);
			seq++;
			ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
		}
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(root, dir, len), 0);
	snprintf(p, sizeof(p), "%s/index", dir);
	fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (off_t off = sizeof(struct store_idx_hdr);
	     pread(fd, &ents[n], sizeof(ents[n]), off) == (ssize_t)sizeof(ents[n]);
	     off += (off_t)sizeof(ents[n]))
		n++;
	close(fd);
	ck_assert_int_eq(n, 10);
	for (int i = 1; i < n; i++)
		ck_assert_uint_gt(ents[i].off, ents[i - 1].off);
}

static uint64_t stored_seq(const char *root, uint64_t run_id, uint64_t mark)
{
	uint64_t seq = 1234;

	ck_assert_int_eq(store_root__stored_seq(root, run_id, mark, &seq), 0);
	return seq;
}

/*
 * Where a restarted storer resumes (store_root__stored_seq()): the highest seq
 * of the blocks that are whole at the tail of its run's store, counted only
 * from a block known to have everything before it written (released: at or
 * below the ring's mark, or the segment's start), and only up to the first
 * block that is not whole (a hole left by a write the kill cancelled while a
 * later one completed, a torn or corrupt block).
 */
START_TEST(test_stored_seq_tail)
{
	char *root = t_mkdtemp(), dir[1024], seg[1100];
	uint64_t run = t_base_ns();
	struct store_idx_entry e[10];
	struct store_seg_hdr h;
	struct stat sb;
	int fd;

	seq_store(root, run, true, dir, sizeof(dir), e);
	ck_assert_uint_eq(stored_seq(root, run, 0), 1000);
	ck_assert_uint_eq(stored_seq(root, run, 500), 1000);
	/* Another run's store (another seq space) says nothing. */
	ck_assert_uint_eq(stored_seq(root, run + 1, 0), 0);
	/* An empty newest segment (only its header): the one before it. */
	seg_file(dir, 1, seg, sizeof(seg));
	fd = open(seg, O_RDONLY);
	ck_assert_int_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	h.seg_no = 2;
	h.crc = store_crc(&h, offsetof(struct store_seg_hdr, crc));
	seg_file(dir, 2, seg, sizeof(seg));
	fd = open(seg, O_WRONLY | O_CREAT, 0644);
	ck_assert_int_eq(pwrite(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);
	ck_assert_uint_eq(stored_seq(root, run, 500), 1000);
	ck_assert_int_eq(unlink(seg), 0);
	/* Block 7 never written (zeros), 8 and 9 complete and indexed: from the
	 * newest block at or below the mark (4, 500) up to the hole: 700. */
	seg_file(dir, 1, seg, sizeof(seg));
	{
		uint8_t zero[4096] = {0};

		fd = open(seg, O_WRONLY);
		ck_assert_uint_le(e[7].len, sizeof(zero));
		ck_assert_int_eq(pwrite(fd, zero, e[7].len, e[7].off), (ssize_t)e[7].len);
		close(fd);
	}
	ck_assert_uint_eq(stored_seq(root, run, 500), 700);
	ck_assert_uint_eq(stored_seq(root, run, 0), 700);
	t_rm_rf(root);

	/* A torn last block, then a corrupt one: the block before it. */
	seq_store(root, run, true, dir, sizeof(dir), e);
	seg_file(dir, 1, seg, sizeof(seg));
	ck_assert_int_eq(stat(seg, &sb), 0);
	ck_assert_int_eq(truncate(seg, sb.st_size - 40), 0);
	ck_assert_uint_eq(stored_seq(root, run, 500), 900);
	ck_assert_uint_eq(stored_seq(root, run, 0), 900);
	ck_assert_int_eq(truncate(seg, sb.st_size), 0); /* its last 40 bytes now zeros */
	ck_assert_uint_eq(stored_seq(root, run, 500), 900);
	t_rm_rf(root);

	/* Blocks without a seq (a store before 1.2 has none either): 0. */
	seq_store(root, run, false, dir, sizeof(dir), e);
	ck_assert_uint_eq(stored_seq(root, run, 0), 0);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* ------------------------------------------------------------ cpa show */

#define RUN_SHOW(r, rd, ...) \
	test_run_bin(r, "cpa", (const char *const[]){"show", "--read", rd, __VA_ARGS__, NULL})

static uint64_t prof_total(const char *path)
{
	FILE *f = fopen(path, "r");
	char line[16384];
	uint64_t sum = 0;

	ck_assert_msg(f != NULL, "no %s", path);
	while (fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');

		if (sp)
			sum += strtoull(sp + 1, NULL, 10);
	}
	fclose(f);
	return sum;
}

/* Two monitor runs the same day (a restart at 10:00:30): a window over both
 * exports both. */
START_TEST(test_show_spans_runs)
{
	static struct test_run r;
	char *root = t_mkdtemp(), out[1100];
	uint64_t base = t_base_ns(), seq = 1, n1, n2;
	struct store_writer *w;

	w = writer(root, 3600, 0);
	store_writer__set_run_id(w, base);
	t_defs(w, NSTACKS, 0);
	n1 = feed(w, base, 20, 10, &seq);
	store_writer__free(w);
	w = writer(root, 3600, 0);
	store_writer__set_run_id(w, base + 30 * T_NS);
	t_defs(w, NSTACKS, 0);
	n2 = feed(w, base + 30 * T_NS, 20, 10, &seq);
	store_writer__free(w);
	ck_assert_int_eq(count_store_dirs(root), 2);

	snprintf(out, sizeof(out), "%s/w.prof", root);
	RUN_SHOW(&r, root, "-B", "10:00:00", "-E", "10:00:50", "-o", out);
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	ck_assert_uint_eq(prof_total(out), n1 + n2);
	/* The range line covers both runs. */
	ck_assert_msg(
		strstr(r.out,
		       "Record Time From [ 10:00:00.000 ] to [ 10:00:49.900 ] Records Num: 40"),
		"%s", r.out);
	/* Only the second run's part of the day. */
	RUN_SHOW(&r, root, "-B", "10:00:35", "-n", "5", "-o", out);
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	ck_assert_uint_eq(prof_total(out), 50);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* A torn tail: one warning line at default verbosity, and --show_range counts
 * only what is readable. */
START_TEST(test_show_torn_tail)
{
	static struct test_run r;
	char *root = t_mkdtemp(), dir[1024], p[1100];
	struct stat sb;

	make_store(root, 20, 3600, dir, sizeof(dir)); /* 4 blocks of 5 s */
	seg_file(dir, 1, p, sizeof(p));
	ck_assert_int_eq(stat(p, &sb), 0);
	ck_assert_int_eq(truncate(p, sb.st_size - 40), 0);
	RUN_SHOW(&r, dir, "--show_range", "1");
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	ck_assert_msg(strstr(r.out, "Records Num: 15\n"), "%s", r.out);
	ck_assert_msg(strstr(r.err, "skipped 1 torn and 0 corrupt block(s)"), "%s", r.err);
	ck_assert_int_eq(count_in(r.err, "\n"), 1);
	t_rm_rf(root);
	free(root);
}
END_TEST

/*
 * A segment cut to half its size, its index whole: the blocks past the end are
 * one warning line for the segment (its path, how many blocks and bytes, the
 * count exact) beside the summary, not one line per block.
 */
START_TEST(test_show_truncated_segment)
{
	static struct test_run r;
	char *root = t_mkdtemp(), dir[1024], p[1100], want[1300];
	uint32_t past = 0, cut;
	uint64_t bytes = 0;
	size_t len;
	char *idx;
	struct stat sb;

	make_store(root, 200, 3600, dir, sizeof(dir)); /* 40 blocks of 5 s, one segment */
	seg_file(dir, 1, p, sizeof(p));
	ck_assert_int_eq(stat(p, &sb), 0);
	cut = (uint32_t)(sb.st_size / 2);
	ck_assert_int_eq(truncate(p, cut), 0);
	/* what the index says lies past the cut */
	snprintf(want, sizeof(want), "%s/index", dir);
	idx = test_slurp(want, &len);
	for (size_t off = sizeof(struct store_idx_hdr); off + sizeof(struct store_idx_entry) <= len;
	     off += sizeof(struct store_idx_entry)) {
		struct store_idx_entry e;

		memcpy(&e, idx + off, sizeof(e));
		if (e.seg_no == 1 && e.off >= cut) {
			past++;
			bytes += e.len;
		}
	}
	free(idx);
	ck_assert_uint_gt(past, 10);
	RUN_SHOW(&r, dir, "--show_range", "1");
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	snprintf(want, sizeof(want),
		 "WARNING: %s: %u indexed block(s), %llu bytes, lie past the end of the file "
		 "(%u bytes: truncated), skipped\n",
		 p, past, (unsigned long long)bytes, cut);
	ck_assert_msg(strstr(r.err, want), "want '%s' in: %s", want, r.err);
	ck_assert_msg(strstr(r.err, "torn and 0 corrupt block(s)"), "%s", r.err); /* the summary */
	ck_assert_msg(count_in(r.err, "\n") == 2, "%s", r.err);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* ------------------------------------------------------------ full disk (root) */

static char mnt[PATH_MAX];

static void fill_disk(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_CREAT | O_WRONLY | O_APPEND, 0644);

	ck_assert_int_ge(fd, 0);
	while (write(fd, buf, sizeof(buf)) > 0)
		;
	ck_assert_int_eq(errno, ENOSPC);
	close(fd);
}

/* sec seconds of samples from t0 through the ring into the storer. */
static uint64_t ring_feed(struct shm_ring_prod *p, struct storer *s, uint64_t t0, uint32_t nsec,
			  uint64_t *seq)
{
	uint64_t n = 0;

	for (uint32_t sec = 0; sec < nsec; sec++) {
		for (uint32_t k = 0; k < 20; k++) {
			struct cpa_sample_out o;

			t_sample(&o, (*seq)++, t0 + sec * T_NS + k * (T_NS / 20),
				 1 + (sec + k) % NSTACKS, 0);
			put_rec(p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
			n++;
		}
		shm_ring__commit_sp(p);
		while (storer__batch(s, STORER_BATCH) > 0)
			;
		storer__tick(s, clock_ns(CLOCK_REALTIME));
	}
	return n;
}

/* A storer over a real ring into a writer on root, as the stage runs it: the
 * journal in root, the run's dir made now, the definitions taken, max_retry
 * bytes kept for retry (1: one op), the log captured in t_log. fault, if not
 * NULL, is the writer's CPA_FAULT_IO. */
struct rig {
	struct shm_arena *a;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct shm_stage *st;
	struct store_writer *w;
	struct storer *s;
};

static void rig_start(struct rig *g, const char *root, uint64_t t0, const char *fault,
		      uint32_t max_retry)
{
	struct store_writer_opts o = {
		.root = root, .record_interval = 1, .max_retry_bytes = max_retry};
	struct shm_layout l;

	memset(g, 0, sizeof(*g));
	shm_layout__default(&l, 4096, 16);
	ck_assert_int_eq(shm_arena__create(&l, &g->a), 0);
	g->st = shm_arena__stage(g->a, SHM_STAGE_STORER);
	ck_assert_int_eq(shm_arena__open_prod(g->a, SHM_RING_SYMD, &g->p), 0);
	ck_assert_int_eq(shm_arena__open_cons(g->a, SHM_RING_SYMD, &g->c), 0);
	if (fault)
		ck_assert_int_eq(setenv("CPA_FAULT_IO", fault, 1), 0);
	ck_assert_int_eq(store_writer__new(&o, &g->w), 0);
	unsetenv("CPA_FAULT_IO");
	t_log[0] = 0;
	log_set_sink(log_into);
	store_writer__set_run_id(g->w, t0);
	ck_assert_int_ge(store_writer__journal_open(g->w, root), 0);
	ck_assert_int_eq(storer__new(g->st, &g->c, g->w, &g->s), 0);
	ring_defs(&g->p, NSTACKS);
	while (storer__batch(g->s, STORER_BATCH) > 0)
		;
}

/* Frees the storer and the writer; the arena stays (g->a) for its counters. */
static void rig_stop(struct rig *g)
{
	log_set_sink(NULL);
	storer__free(g->s);
	store_writer__free(g->w);
}

/*
 * Space returns (the filler goes): a second later (retries are due a second
 * after a failure) nsec more seconds of samples from t0, then ticks a second
 * apart until the storer says, once more, that the store takes writes again.
 * Returns the samples fed.
 */
static uint64_t space_returns(const char *filler, struct shm_ring_prod *p, struct storer *s,
			      uint64_t t0, uint32_t nsec, uint64_t *seq, int times_before)
{
	uint64_t n;

	ck_assert_int_eq(unlink(filler), 0);
	usleep(1100000);
	n = ring_feed(p, s, t0, nsec, seq);
	for (int i = 0; i < 10 && count_in(t_log, "is writable again") == times_before; i++) {
		usleep(1100000);
		storer__tick(s, clock_ns(CLOCK_REALTIME));
	}
	ck_assert_int_eq(count_in(t_log, "is writable again"), times_before + 1);
	return n;
}

/*
 * The red-team repro on a real 2 MiB tmpfs: the disk is full when the store
 * is created. The storer keeps consuming (the ring never fills), makes one
 * store dir, reports once, and once space returns stores again and says what
 * it lost as a loss row. Then the disk fills again with the store open:
 * blocks past the retry budget are given up, and counted in the store too.
 * stored + lost == fed, exactly.
 */
START_TEST(test_full_disk)
{
	char root[PATH_MAX + 64], filler[PATH_MAX + 64];
	struct rig g;
	struct store_writer_stats ws;
	struct tally t = {0};
	uint64_t now = clock_ns(CLOCK_REALTIME), t0 = (now / T_NS - 900) * T_NS, seq = 1, fed = 0;
	uint32_t sec;

	snprintf(root, sizeof(root), "%s/s", mnt);
	snprintf(filler, sizeof(filler), "%s/filler", mnt);
	fill_disk(filler);
	rig_start(&g, root, t0, NULL, 1);

	/* Phase 1: no store dir can be made. 3 s apart in real time, so the
	 * writer retries the creation a few times. */
	for (int i = 0; i < 3; i++) {
		fed += ring_feed(&g.p, g.s, t0 + (uint64_t)i * 10 * T_NS, 10, &seq);
		usleep(1100000);
	}
	store_writer__stats(g.w, &ws);
	ck_assert_uint_eq(ws.refused_samples, fed);
	/* Sampling never blocks: every record was consumed and released. */
	ck_assert_uint_eq(shm_ring__pending_sc(&g.c), 0);
	ck_assert_uint_eq(shm_ring__free_bytes_sp(&g.p), g.p.size);
	ck_assert_int_le(count_store_dirs(root), 1);
	ck_assert_int_eq(count_in(t_log, "counting what is lost"), 1);

	fed += space_returns(filler, &g.p, g.s, t0 + 40 * T_NS, 20, &seq, 0);

	/* Phase 2: the disk fills up again under an open store. Space can come
	 * back behind the filler's back: pages of the journal, given up in
	 * phase 1, that a write still in flight held (the CI run of ad4c870:
	 * 6 write errors and no block given up, the other blocks fit). So the
	 * filler takes back what is free after every 10 s fed, and the feed
	 * goes on (at least 120 s, at most 600 s) until a block is given up. */
	fill_disk(filler);
	for (sec = 60; sec < 660; sec += 10) {
		fed += ring_feed(&g.p, g.s, t0 + sec * T_NS, 10, &seq);
		store_writer__stats(g.w, &ws);
		if (ws.dropped_blocks > 0 && sec >= 170)
			break;
		usleep(50000);
		fill_disk(filler);
	}
	sec += 10;
	store_writer__stats(g.w, &ws);
	ck_assert_uint_gt(ws.write_errors, 0);
	ck_assert_msg(
		ws.dropped_blocks > 0, "no block given up (%llu write errors, %llu trimmed): %s",
		(unsigned long long)ws.write_errors, (unsigned long long)ws.trimmed_files, t_log);
	ck_assert_int_eq(count_in(t_log, "counting what is lost"), 2);
	/* The journal (~40 KiB of definitions, more than the segment) gave its
	 * space to the samples. */
	ck_assert_uint_gt(ws.journal_given_up, 0);
	ck_assert_int_eq(count_in(t_log, "gave up the dictionary journal"), 1);
	fed += space_returns(filler, &g.p, g.s, t0 + sec * T_NS, 10, &seq, 1);
	ck_assert_int_eq(storer__finish(g.s, true), 0);
	store_writer__stats(g.w, &ws);
	rig_stop(&g);

	ck_assert_int_eq(count_store_dirs(root), 1);
	tally_root(root, &t);
	ck_assert_uint_gt(t.lost_store, 0);
	ck_assert_uint_eq(t.lost_store,
			  ws.refused_samples + ws.lost_samples_dropped + ws.lost_samples_discarded);
	ck_assert_uint_eq(t.samples + t.lost_store, fed);
	ck_assert_uint_eq(shm_stage__cnt(g.st, STO_CNT_LOST_SAMPLES), t.lost_store);
	shm_arena__free(g.a);
}
END_TEST

/* ------------------------------------------------------------ I/O errors */

/* The reader's view of the one store dir under root: rows into t; no block
 * may be corrupt or torn (an index entry never points at a failed write). */
static void read_sound(const char *root, struct tally *t, struct notes *nt)
{
	struct store_read_stats rs;
	char dir[1024];

	ck_assert_int_eq(count_store_dirs(root), 1);
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	tally_dir_stats(dir, t, nt, &rs);
	ck_assert_msg(rs.blocks_corrupt == 0 && rs.blocks_torn == 0, "corrupt %llu torn %llu: %s",
		      (unsigned long long)rs.blocks_corrupt, (unsigned long long)rs.blocks_torn,
		      nt->all);
	ck_assert_uint_gt(rs.blocks_read, 0);
}

/* `cpa show` of root from t_base_ns() (10:00:00) for nsec seconds: its
 * total; the export must hold marker. */
static uint64_t show_total(const char *root, uint32_t nsec, const char *marker)
{
	static struct test_run r;
	char out[1100], cmd[2400], end[16];
	const char *err;

	snprintf(out, sizeof(out), "%s/all.prof", root);
	snprintf(end, sizeof(end), "10:%02u:%02u", nsec / 60 % 60, nsec % 60);
	RUN_SHOW(&r, root, "-B", "10:00:00", "-E", end, "-o", out);
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	snprintf(cmd, sizeof(cmd), "grep -q -F '%s' '%s'", marker, out);
	ck_assert_msg(system(cmd) == 0, "no %s in the export", marker);
	/* Every file header is there, no block is corrupt (a block given up in
	 * the middle of a segment may leave unreadable bytes: its samples are
	 * in the loss row). */
	/* The store may start after 10:00:00 (its first blocks failed): cpa show
	 * says it moved -B there (its first line), which is no damage. */
	err = strstr(r.err, "Export First Record");
	err = err && strchr(err, '\n') ? strchr(err, '\n') + 1 : r.err;
	ck_assert_msg(!strstr(err, "header") &&
			      (!*err || strstr(err, " 0 torn and 0 corrupt block(s)")),
		      "%s", r.err);
	return prof_total(out);
}

/*
 * Writes failing with EIO (CPA_FAULT_IO: the 60 write submissions after the
 * first 6, retries included, complete with -EIO without writing), with a
 * retry budget of one op (_i 0) and of 4 KiB (_i 1): the storer
 * keeps consuming (the ring never fills), says so once, gives up blocks past
 * the retry budget, and once writes go through again says so once and stores
 * what it lost as [lost: storer io_errors]. stored + lost == fed, exactly;
 * every block in the store reads back; `cpa show` exports it all.
 */
START_TEST(test_eio_writes)
{
	char *root = t_mkdtemp();
	struct rig g;
	struct store_writer_stats ws;
	struct notes nt = {0};
	struct tally t = {0};
	uint64_t t0 = t_base_ns(), seq = 1, fed = 0;
	int i;

	/* One op kept: every failed block but the last is given up, each the
	 * first of its segment (with the dictionary): a new segment each time.
	 * 4 KiB: the first block of a segment stays, those after it are given
	 * up, leaving a hole in the middle of the segment. */
	rig_start(&g, root, t0, "write:6:60", _i ? 4096 : 1);
	/* Ten seconds of samples (ten blocks) a second apart in real time, so
	 * the kept block is retried in between, until the faults are spent and
	 * the storer says the store is writable again. */
	for (i = 0; i < 30 && !count_in(t_log, "is writable again"); i++) {
		fed += ring_feed(&g.p, g.s, t0 + (uint64_t)i * 10 * T_NS, 10, &seq);
		/* Sampling never blocks: every record was consumed and released. */
		ck_assert_uint_eq(shm_ring__pending_sc(&g.c), 0);
		ck_assert_uint_eq(shm_ring__free_bytes_sp(&g.p), g.p.size);
		usleep(1100000);
		storer__tick(g.s, clock_ns(CLOCK_REALTIME));
	}
	ck_assert_int_eq(count_in(t_log, "is writable again"), 1);
	/* Writing goes on after the errors. */
	fed += ring_feed(&g.p, g.s, t0 + (uint64_t)i * 10 * T_NS, 10, &seq);
	ck_assert_int_eq(storer__finish(g.s, true), 0);
	store_writer__stats(g.w, &ws);
	rig_stop(&g);

	/* Reported once when the errors started, once when they stopped. */
	ck_assert_msg(count_in(t_log, "Input/output error (counting what is lost") == 1, "%s",
		      t_log);
	ck_assert_int_eq(count_in(t_log, "counting what is lost"), 1);
	ck_assert_int_eq(count_in(t_log, "gave up a block"), 1);
	ck_assert_int_eq(count_in(t_log, "is writable again"), 1);
	ck_assert_int_eq(ws.write_errors, 60);
	ck_assert_int_eq(ws.last_error, -EIO);
	ck_assert_uint_gt(ws.dropped_blocks, 0);
	ck_assert_uint_eq(ws.refused_samples, 0);
	ck_assert_uint_eq(ws.lost_io, ws.lost_samples_dropped + ws.lost_samples_discarded);

	read_sound(root, &t, &nt);
	fprintf(stderr,
		"test_eio_writes(%d): fed %llu = stored %llu + [lost: storer io_errors] %llu; %llu "
		"block(s) given up, %llu written, %llu write(s) submitted; reader notes: %s\n",
		_i, (unsigned long long)fed, (unsigned long long)t.samples,
		(unsigned long long)t.lost_io, (unsigned long long)ws.dropped_blocks,
		(unsigned long long)ws.blocks, (unsigned long long)ws.uring_writes,
		nt.n ? nt.all : "none");
	ck_assert_uint_gt(t.lost_io, 0);
	ck_assert_uint_eq(t.lost_io, ws.lost_io);
	{
		char line[128];

		snprintf(line, sizeof(line),
			 "%llu [lost: storer io_errors], 0 [lost: storer write_errors]",
			 (unsigned long long)t.lost_io);
		ck_assert_msg(strstr(t_log, line), "no '%s' in: %s", line, t_log);
	}
	ck_assert_uint_eq(t.lost_store, 0);
	ck_assert_uint_eq(t.lost_other, 0);
	ck_assert_uint_eq(t.samples + t.lost_io, fed);
	ck_assert_uint_eq(shm_stage__cnt(g.st, STO_CNT_LOST_SAMPLES), t.lost_io);
	ck_assert_uint_eq(show_total(root, (uint32_t)(i + 1) * 10, "<# LOST: STORER IO ERRORS #>"),
			  fed);
	shm_arena__free(g.a);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* Every sample fed is in the store under root, no loss row, nothing damaged;
 * then root (freed) and g's arena go. */
static void all_stored(char *root, struct rig *g, uint64_t fed)
{
	struct notes nt = {0};
	struct tally t = {0};

	read_sound(root, &t, &nt);
	ck_assert_uint_eq(t.samples, fed);
	ck_assert_uint_eq(t.lost_io + t.lost_store + t.lost_other, 0);
	shm_arena__free(g->a);
	t_rm_rf(root);
	free(root);
}

/*
 * A failed fsync (the final flush's, CPA_FAULT_IO "fsync:0:1"): the flush
 * says so (-EIO, one log line), nothing already written is counted as lost
 * (it reads back), and the next blocks go to a new segment, so that a later
 * fsync covers only data written after the error.
 */
START_TEST(test_eio_fsync)
{
	char *root = t_mkdtemp(), dir[1024], seg[1100];
	struct rig g;
	struct store_writer_stats ws;
	uint64_t t0 = t_base_ns(), seq = 1, fed = 0;

	rig_start(&g, root, t0, "fsync:0:1", 1);
	fed += ring_feed(&g.p, g.s, t0, 10, &seq);
	ck_assert_int_eq(storer__finish(g.s, true), -EIO);
	ck_assert_int_eq(count_in(t_log, "fsync failed"), 1);
	ck_assert_int_eq(count_in(t_log, "counting what is lost"), 0);
	fed += ring_feed(&g.p, g.s, t0 + 10 * T_NS, 10, &seq);
	ck_assert_int_eq(storer__finish(g.s, true), 0);
	store_writer__stats(g.w, &ws);
	rig_stop(&g);

	ck_assert_uint_eq(ws.fsync_errors, 1);
	ck_assert_uint_eq(ws.dropped_blocks, 0);
	ck_assert_int_eq(count_in(t_log, "fsync failed"), 1);
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	seg_file(dir, 2, seg, sizeof(seg));
	ck_assert_msg(access(seg, F_OK) == 0, "no new segment after the failed fsync");
	seg_file(dir, 3, seg, sizeof(seg));
	ck_assert_int_ne(access(seg, F_OK), 0);
	all_stored(root, &g, fed);
}
END_TEST

/* Every write short (half of what was asked, "short:0:100000"): the rest
 * goes at the matching offset; nothing lost, nothing corrupt. */
START_TEST(test_short_writes)
{
	char *root = t_mkdtemp();
	struct rig g;
	struct store_writer_stats ws;
	uint64_t t0 = t_base_ns(), seq = 1, fed;

	rig_start(&g, root, t0, "short:0:100000", 1);
	fed = ring_feed(&g.p, g.s, t0, 20, &seq);
	ck_assert_int_eq(storer__finish(g.s, true), 0);
	store_writer__stats(g.w, &ws);
	rig_stop(&g);
	ck_assert_uint_eq(ws.write_errors, 0);
	/* Each block took at least two writes. */
	ck_assert_uint_ge(ws.uring_writes, 2 * ws.blocks);
	all_stored(root, &g, fed);
}
END_TEST

/* A malformed CPA_FAULT_IO is refused, not ignored. */
START_TEST(test_fault_spec)
{
	static const char *const bad[] = {"eio",	"write:1",   "write:1:0",
					  "write:1:2,", "fsync:x:1", "write:1:2;short:0:1"};
	char *root = t_mkdtemp();
	struct store_writer_opts o = {.root = root};
	struct store_writer *w;

	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		ck_assert_int_eq(setenv("CPA_FAULT_IO", bad[i], 1), 0);
		ck_assert_msg(store_writer__new(&o, &w) == -EINVAL, "%s accepted", bad[i]);
	}
	ck_assert_int_eq(setenv("CPA_FAULT_IO", "write:1:2,fsync:0:1,short:3:4", 1), 0);
	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	unsetenv("CPA_FAULT_IO");
	store_writer__free(w);
	t_rm_rf(root);
	free(root);
}
END_TEST

static void disk_setup(void)
{
	/* In a mount namespace of this process's own: gone with it, however it ends. */
	ck_assert_int_eq(test_tmpfs(mnt, sizeof(mnt), "tmpfs", "size=2m"), 0);
}

static void disk_teardown(void)
{
	umount2(mnt, MNT_DETACH);
	rmdir(mnt);
}

int main(int argc, char **argv)
{
	Suite *s = suite_create("store_reliability");
	TCase *tc;

	if (argc > 1 && !strcmp(argv[1], "disk")) {
		if (geteuid() != 0) {
			fprintf(stderr, "needs root (mounts a tmpfs): skipped\n");
			return TEST_SKIP;
		}
		tc = tcase_create("disk");
		tcase_add_unchecked_fixture(tc, disk_setup, disk_teardown);
		tcase_add_test(tc, test_full_disk);
		suite_add_tcase(s, tc);
		return test_run_suite(s);
	}
	TEST_TCASE(s, "damage", test_version_byte, test_fifo, test_sparse_and_magic,
		   test_segment_copies);
	TEST_TCASE(s, "accidents", test_root_lock, test_store_deleted,
		   test_kill_after_block_boundary);
	tc = tcase_create("kill_after_submit");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_kill_after_submit, 0, 10);
	suite_add_tcase(s, tc);
	tc = tcase_create("kill_after_landed");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_kill_after_landed, 0, 6);
	tcase_add_test(tc, test_stored_seq_tail);
	suite_add_tcase(s, tc);
	TEST_TCASE(s, "show", test_show_spans_runs, test_show_torn_tail,
		   test_show_truncated_segment);
	tc = tcase_create("io_errors");
	tcase_set_timeout(tc, 120);
	tcase_add_loop_test(tc, test_eio_writes, 0, 2);
	tcase_add_test(tc, test_eio_fsync);
	tcase_add_test(tc, test_short_writes);
	tcase_add_test(tc, test_fault_spec);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
