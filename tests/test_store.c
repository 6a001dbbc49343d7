// SPDX-License-Identifier: MIT
/*
 * Store library and storer stage: round trip, time index, torn tail,
 * corruption, version check, the stage's batch function over a real arena
 * ring, io_uring use, retention, and the bytes/sample measurement.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "storer/store.h"
#include "storer/store_fmt.h" /* crc32c, to forge headers */
#include "storer/storer.h"
#include "test_store_util.h"
#include "test_util.h"

#define MAX_STACKS 64

struct expect {
	uint32_t nsec, nstacks;
	uint32_t *cnt;	/* [sec * (nstacks + 1) + stack] */
	uint32_t *lost; /* [sec] */
	uint64_t samples;
	char **sig; /* [stack]: frame names joined */
};

struct got {
	const struct expect *e;
	uint64_t base_s;
	uint32_t *cnt;
	uint32_t *lost;
	uint64_t rows, bad_frames, unknown;
};

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

static char *stack_sig(uint32_t s)
{
	char *buf = calloc(1, 8192), name[160];
	uint32_t j;

	for (j = 0; j < T_STACK_FRAMES(s); j++) {
		t_frame_name(t_stack_frame(s, j), name, sizeof(name));
		strcat(buf, name);
		strcat(buf, "|");
	}
	return buf;
}

static void expect_init(struct expect *e, uint32_t nsec, uint32_t nstacks)
{
	uint32_t s;

	memset(e, 0, sizeof(*e));
	e->nsec = nsec;
	e->nstacks = nstacks;
	e->cnt = calloc((size_t)nsec * (nstacks + 1), sizeof(uint32_t));
	e->lost = calloc(nsec, sizeof(uint32_t));
	e->sig = calloc(nstacks + 1, sizeof(char *));
	for (s = 1; s <= nstacks; s++)
		e->sig[s] = stack_sig(s);
}

static void expect_free(struct expect *e)
{
	uint32_t s;

	for (s = 1; s <= e->nstacks; s++)
		free(e->sig[s]);
	free(e->sig);
	free(e->cnt);
	free(e->lost);
}

/*
 * Steady workload: rate samples per second (e.g. 2 CPUs x 49 Hz), stacks
 * skewed like a real profile (a few hot, a long tail), a loss record every
 * tenth second. dict_reset_at: second at which symd "restarts" (new ids).
 */
static uint64_t feed(struct store_writer *w, struct expect *e, uint64_t base, uint32_t rate,
		     uint32_t dict_reset_at)
{
	uint64_t seed = 42, seq = 1;
	uint32_t sec, k, off = 0;

	t_defs(w, e->nstacks, off);
	for (sec = 0; sec < e->nsec; sec++) {
		if (sec == dict_reset_at) {
			off = 10000;
			store_writer__dict_reset(w, 2);
			t_defs(w, e->nstacks, off);
		}
		for (k = 0; k < rate; k++) {
			double u = (double)(lcg(&seed) % 10000) / 10000.0;
			uint32_t s = 1 + (uint32_t)(u * u * u * e->nstacks);
			struct cpa_sample_out o;

			t_sample(&o, seq++, base + sec * T_NS + (uint64_t)k * (T_NS / rate), s,
				 off);
			ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
			e->cnt[sec * (e->nstacks + 1) + s]++;
			e->samples++;
		}
		if (sec % 10 == 5) {
			ck_assert_int_eq(t_add_loss(w, seq++, base + sec * T_NS + 500000000, 5,
						    SHM_STAGE_CAPTURE),
					 0);
			e->lost[sec] += 5;
		}
	}
	return seq;
}

static int on_row(void *ctx, const struct store_sample *s)
{
	struct got *g = ctx;
	const struct expect *e = g->e;
	int64_t sec = s->sec - (int64_t)g->base_s;
	char sig[8192] = "";
	uint32_t j, st = 0;

	g->rows++;
	ck_assert(sec >= 0 && sec < (int64_t)e->nsec);
	if (s->lost) {
		ck_assert_str_eq(s->frames[0]->name, "[lost: capture drop_ring_full]");
		g->lost[sec] += (uint32_t)s->count;
		ck_assert_uint_eq(s->weight, s->count);
		return 0;
	}
	for (j = 0; j < s->n_frames; j++) {
		const struct store_frame *f = s->frames[j];
		bool k = j < s->n_kframes;

		strcat(sig, f->name);
		strcat(sig, "|");
		if (k != !!(f->flags & CPA_FF_KERNEL))
			g->bad_frames++;
		if (!k && (strcmp(f->module, "/usr/bin/app") || f->build_id_len != 20 ||
			   memcmp(f->build_id, t_build_id, 20)))
			g->bad_frames++;
	}
	for (j = 1; j <= e->nstacks; j++)
		if (!strcmp(e->sig[j], sig)) {
			st = j;
			break;
		}
	if (!st) {
		g->unknown++;
		return 0;
	}
	if (s->n_kframes != T_STACK_KFRAMES(st) ||
	    s->frames[0]->offset != t_frame_off(t_stack_frame(st, 0)))
		g->bad_frames++;
	ck_assert_str_eq(s->comm, "worker");
	ck_assert_str_eq(s->pcomm, st % 3 == 2 ? "db" : "app");
	ck_assert_str_eq(s->env, "ENV_A");
	ck_assert_uint_eq(s->pid, 1000 + st % 3);
	ck_assert_uint_eq(s->cgroup_id, 0x100000000ULL + st % 2);
	g->cnt[sec * (e->nstacks + 1) + st] += (uint32_t)s->count;
	return 0;
}

static void got_init(struct got *g, const struct expect *e, uint64_t base)
{
	memset(g, 0, sizeof(*g));
	g->e = e;
	g->base_s = base / T_NS;
	g->cnt = calloc((size_t)e->nsec * (e->nstacks + 1), sizeof(uint32_t));
	g->lost = calloc(e->nsec, sizeof(uint32_t));
}

static void got_free(struct got *g)
{
	free(g->cnt);
	free(g->lost);
}

/* Seconds [from, to) must match exactly; others must be empty unless skip. */
static void got_check(const struct got *g, uint32_t from, uint32_t to, int64_t skip_sec)
{
	const struct expect *e = g->e;
	uint32_t sec, s;

	ck_assert_uint_eq(g->bad_frames, 0);
	ck_assert_uint_eq(g->unknown, 0);
	for (sec = 0; sec < e->nsec; sec++) {
		bool in = sec >= from && sec < to && (int64_t)sec != skip_sec;

		for (s = 1; s <= e->nstacks; s++) {
			uint32_t want = in ? e->cnt[sec * (e->nstacks + 1) + s] : 0;

			if ((int64_t)sec == skip_sec)
				continue;
			ck_assert_msg(g->cnt[sec * (e->nstacks + 1) + s] == want,
				      "sec %u stack %u: got %u want %u", sec, s,
				      g->cnt[sec * (e->nstacks + 1) + s], want);
		}
		if ((int64_t)sec != skip_sec)
			ck_assert_uint_eq(g->lost[sec], in ? e->lost[sec] : 0);
	}
}

/* Block length of the next writer: 0 = the default (5 s); 1 for tests that
 * damage exactly one second. Check forks per test, so it is per test. */
static uint32_t t_block_s;

static struct store_writer *new_writer(const char *root)
{
	struct store_writer_opts o = {
		.root = root,
		.block_seconds = t_block_s,
		.cpu_num = 2,
		.freq = 49,
		.record_interval = 1,
		.stack_size = 8192,
		.record_env_name = "ENV",
	};
	struct store_writer *w = NULL;

	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	return w;
}

static char notices[8192];

static void on_notice(void *ctx, const char *msg)
{
	(*(int *)ctx)++;
	if (strlen(notices) + strlen(msg) + 2 < sizeof(notices)) {
		strcat(notices, msg);
		strcat(notices, "\n");
	}
}

/* Write a store of nsec seconds; returns root (caller frees) and its dir. */
static char *make_store(struct expect *e, uint32_t nsec, uint32_t nstacks, uint32_t rate,
			uint32_t reset_at, char *dir, size_t dlen, struct store_writer_stats *ws)
{
	char *root = t_mkdtemp();
	struct store_writer *w;

	ck_assert_ptr_nonnull(root);
	expect_init(e, nsec, nstacks);
	w = new_writer(root);
	feed(w, e, t_base_ns(), rate, reset_at);
	ck_assert_int_eq(store_writer__flush(w, true), 0);
	if (ws)
		store_writer__stats(w, ws);
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(root, dir, dlen), 0);
	return root;
}

static void query_all(const char *dir, struct got *g, int *nnot, struct store_read_stats *st)
{
	struct store_reader *r = NULL;

	ck_assert_int_eq(store_reader__open(dir, on_notice, nnot, &r), 0);
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, NULL, on_row, g), 0);
	if (st)
		store_reader__stats(r, st);
	store_reader__free(r);
}

START_TEST(test_roundtrip)
{
	struct expect e;
	struct got g;
	struct store_writer_stats ws;
	struct store_read_stats st;
	struct store_reader *r;
	char dir[1024];
	uint64_t first, last, recs;
	int nn = 0;
	char *root = make_store(&e, 300, 60, 98, 150, dir, sizeof(dir), &ws);

	/* io_uring did the writes, and the fsyncs at the end. */
	ck_assert_uint_gt(ws.uring_writes, ws.blocks);
	ck_assert_uint_ge(ws.uring_fsyncs, 2);
	ck_assert_uint_eq(ws.write_errors, 0);
	ck_assert_uint_eq(ws.samples, e.samples);
	ck_assert_uint_eq(ws.blocks, 300 / STORE_BLOCK_SECONDS);

	got_init(&g, &e, t_base_ns());
	query_all(dir, &g, &nn, &st);
	ck_assert_int_eq(nn, 0);
	got_check(&g, 0, 300, -1);
	ck_assert_uint_eq(st.blocks_indexed, 300 / STORE_BLOCK_SECONDS);
	ck_assert_uint_eq(st.blocks_recovered, 0);

	ck_assert_int_eq(store_reader__open(dir, NULL, NULL, &r), 0);
	ck_assert_int_eq(store_reader__range(r, &first, &last, &recs), 0);
	ck_assert_uint_eq(first, t_base_ns());
	ck_assert_uint_eq(last / T_NS, t_base_ns() / T_NS + 299);
	ck_assert_uint_eq(recs, 300);
	store_reader__free(r);

	/* conf has CPA's keys. */
	{
		char p[1100], buf[1024] = "";
		FILE *f;

		snprintf(p, sizeof(p), "%s/conf", dir);
		f = fopen(p, "r");
		ck_assert_ptr_nonnull(f);
		ck_assert_uint_gt(fread(buf, 1, sizeof(buf) - 1, f), 0);
		fclose(f);
		ck_assert_ptr_nonnull(strstr(buf, "version: "));
		ck_assert_ptr_nonnull(strstr(buf, "cpu_num: 2\n"));
		ck_assert_ptr_nonnull(strstr(buf, "freq: 49\n"));
		ck_assert_ptr_nonnull(strstr(buf, "record_interval: 1\n"));
		ck_assert_ptr_nonnull(strstr(buf, "record_env_name: ENV\n"));
		ck_assert_ptr_nonnull(strstr(buf, "kernel_stack: 0\n"));
		ck_assert_ptr_nonnull(strstr(buf, "stack_size: 8192\n"));
		ck_assert_ptr_nonnull(strstr(buf, "persistent_day: 0\n"));
	}
	got_free(&g);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* Steady workload: 2 CPUs x 49 Hz for 10 minutes. Prints bytes/sample. */
START_TEST(test_bytes_per_sample)
{
	struct expect e;
	struct store_writer_stats ws;
	char dir[1024];
	char *root = make_store(&e, 600, 60, 98, UINT32_MAX, dir, sizeof(dir), &ws);
	uint64_t bytes = t_dir_bytes(dir);
	double bps = (double)bytes / (double)e.samples;

	printf("store: %llu samples, %llu bytes on disk (%llu raw), %.3f bytes/sample, %llu blocks\n",
	       (unsigned long long)e.samples, (unsigned long long)bytes,
	       (unsigned long long)ws.bytes_raw, bps, (unsigned long long)ws.blocks);
	ck_assert_msg(bps <= 2.6, "%.3f bytes/sample > 2.6", bps);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* A one-minute window out of an hour: only its blocks (and dictionary
 * sections) are read. */
START_TEST(test_index_window)
{
	struct expect e;
	struct got g;
	struct store_read_stats st;
	struct store_reader *r;
	char dir[1024];
	uint64_t base = t_base_ns(), t0 = base + 1800 * T_NS;
	int nn = 0;
	char *root = make_store(&e, 3600, 40, 20, UINT32_MAX, dir, sizeof(dir), NULL);

	got_init(&g, &e, base);
	ck_assert_int_eq(store_reader__open(dir, on_notice, &nn, &r), 0);
	ck_assert_int_eq(store_reader__query(r, t0, t0 + 60 * T_NS, NULL, on_row, &g), 0);
	store_reader__stats(r, &st);
	store_reader__free(r);
	got_check(&g, 1800, 1860, -1);
	ck_assert_uint_eq(st.blocks_indexed, 3600 / STORE_BLOCK_SECONDS);
	ck_assert_uint_eq(st.blocks_read, 60 / STORE_BLOCK_SECONDS);
	/* Dictionary sections: only blocks that introduced new entries. */
	ck_assert_uint_lt(st.dict_reads, 200);
	ck_assert_uint_lt(st.bytes_read, 200 * 1024);
	printf("window: %llu data blocks, %llu dict sections, %llu bytes read of %llu\n",
	       (unsigned long long)st.blocks_read, (unsigned long long)st.dict_reads,
	       (unsigned long long)st.bytes_read, (unsigned long long)t_dir_bytes(dir));
	got_free(&g);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

static void seg_path(const char *dir, uint32_t no, char *buf, size_t len)
{
	snprintf(buf, len, "%s/seg_%06u.cps", dir, no);
}

START_TEST(test_torn_tail)
{
	t_block_s = 1;
	struct expect e;
	struct got g;
	struct store_read_stats st;
	char dir[1024], seg[1100];
	struct stat sb;
	int nn = 0;
	char *root = make_store(&e, 30, 20, 50, UINT32_MAX, dir, sizeof(dir), NULL);

	seg_path(dir, 1, seg, sizeof(seg));
	ck_assert_int_eq(stat(seg, &sb), 0);
	/* Cut the last block in half: the crash came mid-write. */
	ck_assert_int_eq(truncate(seg, sb.st_size - 40), 0);
	got_init(&g, &e, t_base_ns());
	query_all(dir, &g, &nn, &st);
	got_check(&g, 0, 29, -1);
	ck_assert_uint_ge(st.blocks_torn, 1);
	ck_assert_int_ge(nn, 1);
	got_free(&g);

	/* Cut inside a block header, and drop the index: the scan copes. */
	ck_assert_int_eq(truncate(seg, sb.st_size / 2), 0);
	snprintf(seg, sizeof(seg), "%s/index", dir);
	ck_assert_int_eq(unlink(seg), 0);
	got_init(&g, &e, t_base_ns());
	query_all(dir, &g, &nn, &st);
	ck_assert_uint_gt(st.blocks_recovered, 2);
	ck_assert_uint_lt(st.blocks_recovered, 29);
	got_check(&g, 0, (uint32_t)st.blocks_recovered, -1);
	got_free(&g);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* Offset of block number k (0-based) of segment 1, walking the headers. */
static uint64_t block_off(const char *seg, uint32_t k, uint32_t *ret_len)
{
	int fd = open(seg, O_RDONLY);
	uint64_t off = 64;
	uint8_t h[56];
	uint32_t i, dz, az;

	ck_assert_int_ge(fd, 0);
	for (i = 0;; i++) {
		ck_assert_int_eq(pread(fd, h, sizeof(h), (off_t)off), 56);
		memcpy(&dz, h + 24, 4);
		memcpy(&az, h + 36, 4);
		if (i == k) {
			*ret_len = 56 + dz + az;
			break;
		}
		off += 56 + dz + az;
	}
	close(fd);
	return off;
}

START_TEST(test_corrupt_block)
{
	t_block_s = 1;
	struct expect e;
	struct got g;
	struct store_read_stats st;
	char dir[1024], seg[1100];
	uint32_t len;
	uint64_t off;
	int fd, nn = 0;
	char *root = make_store(&e, 30, 20, 50, UINT32_MAX, dir, sizeof(dir), NULL);
	uint8_t junk[16];

	notices[0] = 0;
	seg_path(dir, 1, seg, sizeof(seg));
	off = block_off(seg, 12, &len);
	fd = open(seg, O_WRONLY);
	memset(junk, 0x5a, sizeof(junk));
	/* Flip bytes at the end of block 12's rows (the data section). */
	ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), (off_t)(off + len - 20)), 16);
	close(fd);
	got_init(&g, &e, t_base_ns());
	query_all(dir, &g, &nn, &st);
	ck_assert_uint_eq(st.blocks_corrupt, 1);
	ck_assert_int_eq(nn, 1);
	ck_assert_ptr_nonnull(strstr(notices, "corrupt"));
	got_check(&g, 0, 30, 12);
	ck_assert_uint_eq(g.lost[12] + g.cnt[12 * 21 + 1], 0);
	got_free(&g);

	/* A smashed header in the middle (and no index): the rest is found again. */
	fd = open(seg, O_WRONLY);
	off = block_off(seg, 20, &len);
	ck_assert_int_eq(pwrite(fd, junk, sizeof(junk), (off_t)off), 16);
	close(fd);
	snprintf(seg, sizeof(seg), "%s/index", dir);
	unlink(seg);
	got_init(&g, &e, t_base_ns());
	query_all(dir, &g, &nn, &st);
	ck_assert_uint_eq(st.blocks_recovered, 29);
	ck_assert_uint_eq(g.lost[25], e.lost[25]);
	ck_assert_uint_eq(g.cnt[29 * 21 + 1], e.cnt[29 * 21 + 1]);
	got_free(&g);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* Random damage anywhere: never a crash, never a hang. */
START_TEST(test_fuzz_damage)
{
	struct expect e;
	char dir[1024], seg[1100];
	struct stat sb;
	uint64_t seed = 7;
	int round, nn = 0;
	char *root = make_store(&e, 20, 20, 50, UINT32_MAX, dir, sizeof(dir), NULL);

	seg_path(dir, 1, seg, sizeof(seg));
	ck_assert_int_eq(stat(seg, &sb), 0);
	for (round = 0; round < 200; round++) {
		int fd = open(seg, O_WRONLY), i;
		struct store_reader *r;
		struct got g;

		for (i = 0; i < 4; i++) {
			uint8_t b = (uint8_t)lcg(&seed);

			ck_assert_int_eq(
				pwrite(fd, &b, 1, (off_t)(lcg(&seed) % (uint64_t)sb.st_size)), 1);
		}
		close(fd);
		got_init(&g, &e, t_base_ns());
		if (store_reader__open(dir, on_notice, &nn, &r) == 0) {
			uint64_t a, b, c;

			store_reader__range(r, &a, &b, &c);
			store_reader__query(r, 0, UINT64_MAX / 2, NULL, on_row, &g);
			store_reader__free(r);
		}
		got_free(&g);
	}
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

static void bump_major(const char *path, size_t crc_at, size_t major_at, uint16_t major)
{
	uint8_t h[64];
	uint32_t crc;
	int fd = open(path, O_RDWR);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, h, crc_at + 4, 0), (ssize_t)(crc_at + 4));
	memcpy(h + major_at, &major, 2);
	crc = store_crc32c(0, h, crc_at);
	memcpy(h + crc_at, &crc, 4);
	ck_assert_int_eq(pwrite(fd, h, crc_at + 4, 0), (ssize_t)(crc_at + 4));
	close(fd);
}

START_TEST(test_newer_major)
{
	struct expect e;
	char dir[1024], seg[1100], err[512];
	struct store_reader *r = NULL;
	char *root = make_store(&e, 5, 10, 20, UINT32_MAX, dir, sizeof(dir), NULL);

	seg_path(dir, 1, seg, sizeof(seg));
	bump_major(seg, 60, 8, STORE_VERSION_MAJOR + 1);
	ck_assert_int_eq(store_reader__open_err(dir, NULL, NULL, &r, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(err, "newer"));
	{
		char want[32]; /* the file's version: the next major, our minor */

		snprintf(want, sizeof(want), "%d.%d", STORE_VERSION_MAJOR + 1, STORE_VERSION_MINOR);
		ck_assert_ptr_nonnull(strstr(err, want));
	}
	/* A newer minor is fine. */
	bump_major(seg, 60, 8, STORE_VERSION_MAJOR);
	bump_major(seg, 60, 10, STORE_VERSION_MINOR + 3);
	ck_assert_int_eq(store_reader__open_err(dir, NULL, NULL, &r, err, sizeof(err)), 0);
	store_reader__free(r);
	/* The index header is checked too. */
	snprintf(seg, sizeof(seg), "%s/index", dir);
	bump_major(seg, 28, 8, STORE_VERSION_MAJOR + 1);
	ck_assert_int_eq(store_reader__open_err(dir, NULL, NULL, &r, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_ptr_nonnull(strstr(err, "newer"));
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

START_TEST(test_filters)
{
	struct expect e;
	struct got g;
	struct store_filter f;
	struct store_reader *r;
	char dir[1024];
	uint64_t cpus[1] = {0x2};
	uint32_t sec, s;
	uint64_t want = 0, got = 0;
	char *root = make_store(&e, 20, 30, 60, UINT32_MAX, dir, sizeof(dir), NULL);

	ck_assert_int_eq(store_reader__open(dir, NULL, NULL, &r), 0);
	store_filter__init(&f);
	f.pid = 1001;	  /* stacks with s % 3 == 1 */
	f.cpu_set = cpus; /* cpu 1: s % 2 == 1 */
	f.cpu_set_bits = 8;
	f.comm = "app";
	f.env = "ENV_A";
	f.cgroup_id = 0x100000001LL;
	got_init(&g, &e, t_base_ns());
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, &f, on_row, &g), 0);
	for (sec = 0; sec < 20; sec++)
		for (s = 1; s <= 30; s++) {
			if (s % 3 == 1 && s % 2 == 1)
				want += e.cnt[sec * 31 + s];
			got += g.cnt[sec * 31 + s];
		}
	ck_assert_uint_gt(want, 0);
	ck_assert_uint_eq(got, want);
	got_free(&g);
	f.comm = "nosuch";
	got_init(&g, &e, t_base_ns());
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, &f, on_row, &g), 0);
	ck_assert_uint_eq(g.rows, 0);
	got_free(&g);
	store_reader__free(r);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

START_TEST(test_segments_and_days)
{
	struct store_writer_opts o = {.root = NULL, .record_interval = 1, .segment_seconds = 100};
	struct store_writer *w;
	struct expect e;
	struct got g;
	struct store_read_stats st;
	char *root = t_mkdtemp(), dir[1024], seg[1100];
	int nn = 0;

	o.root = root;
	expect_init(&e, 350, 20);
	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	feed(w, &e, t_base_ns(), 30, 120);
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	seg_path(dir, 4, seg, sizeof(seg));
	ck_assert_int_eq(access(seg, F_OK), 0);
	got_init(&g, &e, t_base_ns());
	query_all(dir, &g, &nn, &st);
	got_check(&g, 0, 350, -1);
	got_free(&g);

	/* A second run the same day gets cpa_YYMMDD_start_HHMMSS; midnight rotates. */
	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	{
		struct cpa_sample_out s;
		uint64_t t = t_base_ns() + 14 * 3600 * T_NS - 2 * T_NS; /* 23:59:58 */
		int i;

		t_defs(w, 5, 0);
		for (i = 0; i < 5; i++) {
			t_sample(&s, 100 + i, t + (uint64_t)i * T_NS, 1, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &s), 0);
		}
	}
	store_writer__free(w);
	{
		DIR *d = opendir(root);
		struct dirent *de;
		int plain = 0, start = 0, next = 0;

		while ((de = readdir(d))) {
			if (!strcmp(de->d_name, "cpa_261120"))
				plain++;
			else if (!strncmp(de->d_name, "cpa_261120_start_", 17))
				start++;
			else if (!strcmp(de->d_name, "cpa_261121"))
				next++;
		}
		closedir(d);
		ck_assert_int_eq(plain, 1);
		ck_assert_int_eq(start, 1);
		ck_assert_int_eq(next, 1);
	}
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

START_TEST(test_retention)
{
	char *root = t_mkdtemp(), p[1100], names[512];
	const char *dirs[] = {"cpa_261101", "cpa_261116", "cpa_261117", "cpa_261119_start_101010",
			      "cpa_261120"};
	uint64_t now = t_base_ns(); /* 2026-11-20 */
	unsigned int i;
	int r;

	for (i = 0; i < 5; i++) {
		int fd;

		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/%s/seg_000001.cps", root, dirs[i]);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_eq(ftruncate(fd, 0), 0);
		ck_assert_int_eq(write(fd, p, 100), 100);
		close(fd);
		snprintf(p, sizeof(p), "%s/%s/conf", root, dirs[i]);
		close(open(p, O_CREAT | O_WRONLY, 0644));
	}
	snprintf(p, sizeof(p), "%s/cpa_261120", root);
	/* --persistent_day 3 keeps today and the 3 days before (17..20): the 1st and
	 * the 16th go, 2 files each, and the caller learns which. */
	r = store_retention__run(root, 3, 0, p, 1, now, names, sizeof(names));
	ck_assert_int_eq(r, 4);
	ck_assert_str_eq(names, "cpa_261101, cpa_261116");
	snprintf(p, sizeof(p), "%s/cpa_261116", root);
	ck_assert_int_ne(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/cpa_261117", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	/* Size: 1 byte budget removes everything but the store being written. */
	snprintf(p, sizeof(p), "%s/cpa_261120", root);
	r = store_retention__run(root, 0, 1, p, 1, now, names, sizeof(names));
	ck_assert_int_eq(r, 4);
	ck_assert_str_eq(names, "cpa_261117/seg_000001.cps, cpa_261117, "
				"cpa_261119_start_101010/seg_000001.cps, cpa_261119_start_101010");
	snprintf(p, sizeof(p), "%s/cpa_261120/seg_000001.cps", root);
	ck_assert_int_eq(access(p, F_OK), 0);

	/* Full disk: the oldest segment goes, one at a time, never the current one. */
	for (i = 2; i <= 3; i++) {
		int fd;

		snprintf(p, sizeof(p), "%s/cpa_261120/seg_%06u.cps", root, i);
		fd = open(p, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_eq(write(fd, p, 100), 100);
		close(fd);
	}
	snprintf(p, sizeof(p), "%s/cpa_261120", root);
	ck_assert_int_eq(store_retention__trim_oldest(root, p, 3, names, sizeof(names)), 1);
	ck_assert_str_eq(names, "cpa_261120/seg_000001.cps");
	ck_assert_int_eq(store_retention__trim_oldest(root, p, 3, NULL, 0), 1);
	ck_assert_int_eq(store_retention__trim_oldest(root, p, 3, NULL, 0), 0);
	snprintf(p, sizeof(p), "%s/cpa_261120/seg_000003.cps", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* The run's store dir and conf exist from the monitor's start, before any
 * sample; a later run the same day is _start_HHMMSS of its own start. */
START_TEST(test_dir_at_start)
{
	char *root = t_mkdtemp(), p[1100], conf[512];
	uint64_t base = t_base_ns(); /* 10:00:00 */
	struct store_writer *w;
	struct cpa_sample_out o;
	int fd;
	ssize_t n;

	w = new_writer(root);
	store_writer__set_run_id(w, base);
	snprintf(p, sizeof(p), "%s/cpa_261120/conf", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	ck_assert_str_eq(store_writer__dir(w) + strlen(root), "/cpa_261120");
	store_writer__free(w); /* captured nothing */
	fd = open(p, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	n = read(fd, conf, sizeof(conf) - 1);
	close(fd);
	ck_assert_int_gt(n, 0);
	conf[n] = 0;
	ck_assert_ptr_nonnull(strstr(conf, "freq: 49\n"));

	/* Second run started at 11:30:15, first sample at 11:31:00. */
	w = new_writer(root);
	store_writer__set_run_id(w, base + 5415 * T_NS);
	snprintf(p, sizeof(p), "%s/cpa_261120_start_113015/conf", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	t_defs(w, 3, 0);
	t_sample(&o, 1, base + 5460 * T_NS, 1, 0);
	ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
	store_writer__free(w);
	snprintf(p, sizeof(p), "%s/cpa_261120_start_113015/seg_000001.cps", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/cpa_261120_start_113100", root);
	ck_assert_int_ne(access(p, F_OK), 0);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* The end of a stage test: final flush, then everything freed and removed. */
static void stage_done(struct storer *s, struct store_writer *w, struct shm_arena *a, char *root)
{
	ck_assert_int_eq(storer__finish(s, true), 0);
	storer__free(s);
	store_writer__free(w);
	shm_arena__free(a);
	t_rm_rf(root);
	free(root);
}

static char t_log[4096];

static void log_into(enum log_level lvl, const char *line)
{
	(void)lvl;
	strncat(t_log, line, sizeof(t_log) - strlen(t_log) - 2);
	strcat(t_log, "\n");
}

/* The storer's log line of a retention removal names what went. */
START_TEST(test_retention_log)
{
	struct shm_layout l;
	struct shm_arena *a = NULL;
	struct shm_ring_cons c;
	struct store_writer_opts o = {.record_interval = 1, .persistent_day = 7};
	struct store_writer *w;
	struct storer *s;
	char *root = t_mkdtemp(), p[1100];
	uint64_t base = t_base_ns(); /* 2026-11-20 */
	const char *dirs[] = {"cpa_261112", "cpa_261113"};

	for (unsigned int i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/%s", root, dirs[i]);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		snprintf(p, sizeof(p), "%s/%s/seg_000001.cps", root, dirs[i]);
		close(open(p, O_CREAT | O_WRONLY, 0644));
	}
	shm_layout__default(&l, 4096, 16);
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	ck_assert_int_eq(shm_arena__open_cons(a, SHM_RING_SYMD, &c), 0);
	o.root = root;
	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	store_writer__set_run_id(w, base);
	ck_assert_int_eq(storer__new(shm_arena__stage(a, SHM_STAGE_STORER), &c, w, &s), 0);
	log_set_sink(log_into);
	/* The default 7 days keep the 13th..20th (8 day dirs); the 12th goes. */
	storer__tick(s, base);
	log_set_sink(NULL);
	ck_assert_msg(strstr(t_log, "retention removed 1 file(s): cpa_261112\n"), "%s", t_log);
	snprintf(p, sizeof(p), "%s/cpa_261113", root);
	ck_assert_int_eq(access(p, F_OK), 0);
	stage_done(s, w, a, root);
}
END_TEST

/* ------------------------------------------------------------ the stage */

static void drain(struct storer *s)
{
	int n;

	do {
		n = storer__batch(s, STORER_BATCH);
		ck_assert_int_ge(n, 0);
	} while (n > 0);
}

/* The stage tests' rig: ring 2 of a new arena open at both ends (positions
 * from initial_pos), and a storer on it writing run base into root. */
static struct shm_arena *stage_rig(uint64_t initial_pos, const char *root, uint64_t base,
				   struct shm_ring_prod *p, struct shm_ring_cons *c,
				   struct store_writer **w, struct storer **s)
{
	struct shm_layout l;
	struct shm_arena *a = NULL;

	shm_layout__default(&l, 4096, 16);
	l.initial_pos = initial_pos;
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	ck_assert_int_eq(shm_arena__open_prod(a, SHM_RING_SYMD, p), 0);
	ck_assert_int_eq(shm_arena__open_cons(a, SHM_RING_SYMD, c), 0);
	*w = new_writer(root);
	store_writer__set_run_id(*w, base);
	ck_assert_int_eq(storer__new(shm_arena__stage(a, SHM_STAGE_STORER), c, *w, s), 0);
	return a;
}

START_TEST(test_stage_batch)
{
	struct shm_arena *a;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct storer *s;
	struct store_writer *w;
	struct shm_stage *st;
	struct expect e;
	struct got g;
	char *root = t_mkdtemp(), dir[1024];
	uint64_t base = t_base_ns(), seq = 1;
	uint32_t sec, k;
	int nn = 0;

	/* 2^64 - 4096 (8-aligned): wrap the positions early */
	a = stage_rig(UINT64_MAX - 4095, root, base, &p, &c, &w, &s);
	st = shm_arena__stage(a, SHM_STAGE_STORER);
	expect_init(&e, 20, 30);
	ring_defs(&p, 30);
	drain(s);

	for (sec = 0; sec < 20; sec++) {
		for (k = 0; k < 50; k++) {
			struct cpa_sample_out o;
			uint32_t stk = 1 + (sec * 7 + k * 13) % 30;

			t_sample(&o, seq++, base + sec * T_NS + k * 20000000ULL, stk, 0);
			put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
			e.cnt[sec * 31 + stk]++;
		}
		if (sec % 10 == 5) {
			struct cpa_loss lo = {.seq = seq++,
					      .time_ns = base + sec * T_NS,
					      .count = 5,
					      .stage = SHM_STAGE_CAPTURE,
					      .reason = SHM_CNT_DROP_RING_FULL};

			put_rec(&p, CPA_REC_LOSS, &lo, sizeof(lo), NULL, 0);
			e.lost[sec] += 5;
		}
		/* A malformed record: counted, skipped. */
		if (sec == 3) {
			struct cpa_str_def bad = {.id = 9, .len = 1000};

			put_rec(&p, CPA_REC_STR, &bad, sizeof(bad), NULL, 0);
		}
		shm_ring__commit_sp(&p);
		drain(s);
		storer__tick(s, base + sec * T_NS);
	}
	ck_assert_int_eq(storer__finish(s, true), 0);
	storer__free(s);
	/* The mark is the last seq stored; the ring is fully released. */
	ck_assert_uint_eq(shm_ring__mark_sc(&c), seq - 1);
	ck_assert_uint_eq(shm_ring__pending_sc(&c), 0);
	ck_assert_uint_eq(shm_stage__cnt(st, STO_CNT_SAMPLES), 1000);
	ck_assert_uint_eq(shm_stage__cnt(st, STO_CNT_LOST_SAMPLES), 10);
	ck_assert_uint_eq(shm_stage__cnt(st, SHM_CNT_DROP_CORRUPT), 1);
	ck_assert_uint_eq(shm_stage__cnt(st, STO_CNT_BLOCKS), 20 / STORE_BLOCK_SECONDS);
	ck_assert_uint_gt(shm_stage__cnt(st, STO_CNT_BYTES_DISK), 0);
	ck_assert_uint_gt(shm_stage__cnt(st, SHM_CNT_BATCHES), 0);
	store_writer__free(w);

	/* A restarted storer skips what the mark covers: feed old and new seqs. */
	/* Same monitor run: it continues the same store dir (next segment). */
	w = new_writer(root);
	store_writer__set_run_id(w, base);
	ck_assert_int_eq(storer__new(st, &c, w, &s), 0);
	ring_defs(&p, 30);
	{
		struct cpa_sample_out o;

		t_sample(&o, seq - 5, base + 19 * T_NS, 1, 0); /* already stored */
		put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
		t_sample(&o, seq, base + 25 * T_NS, 1, 0); /* new */
		put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
		shm_ring__commit_sp(&p);
	}
	drain(s);
	ck_assert_int_eq(storer__finish(s, true), 0);
	storer__free(s);
	ck_assert_uint_eq(shm_stage__cnt(st, SHM_CNT_DROP_DUP), 1);
	ck_assert_uint_eq(shm_ring__mark_sc(&c), seq);
	store_writer__free(w);

	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	{
		char seg2[1100];

		seg_path(dir, 2, seg2, sizeof(seg2));
		ck_assert_int_eq(access(seg2, F_OK), 0);
	}
	got_init(&g, &e, base);
	{
		struct store_reader *r;

		ck_assert_int_eq(store_reader__open(dir, on_notice, &nn, &r), 0);
		ck_assert_int_eq(store_reader__query(r, 0, base + 20 * T_NS, NULL, on_row, &g), 0);
		store_reader__free(r);
	}
	got_check(&g, 0, 20, -1);
	got_free(&g);
	expect_free(&e);
	shm_arena__free(a);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* The storer sleeps until its open block is due; with no block open and
 * no write in flight it has no deadline and wakes on any record. */
/* symd killed after it committed a batch's output and before it released
 * that batch's input: its successor sends the batch again and says where it
 * started in its first reset. Each sample and loss is stored once, and the
 * successor's lost_pending_at_kill too. */
struct replay_sums {
	uint64_t samples, lost;
};

static int on_replay_row(void *ctx, const struct store_sample *s)
{
	struct replay_sums *sum = ctx;

	if (s->lost)
		sum->lost += s->count;
	else
		sum->samples += s->count;
	return 0;
}

static void put_loss(struct shm_ring_prod *p, uint64_t seq, uint64_t t, uint32_t stage,
		     uint32_t reason, uint64_t count)
{
	struct cpa_loss l = {.seq = seq,
			     .time_ns = t,
			     .count = count,
			     .weight = count,
			     .stage = stage,
			     .reason = reason};

	put_rec(p, CPA_REC_LOSS, &l, sizeof(l), NULL, 0);
}

START_TEST(test_stage_symd_replay)
{
	struct cpa_sample_out o;
	struct shm_ring_prod p; /* we play symd */
	struct shm_ring_cons c;
	struct store_writer *w;
	struct storer *s;
	struct shm_arena *a;
	struct shm_stage *st;
	struct cpa_dict_reset start = {
		.epoch = 2ull << 32, .resume_seq = 5, .flags = CPA_RESET_START};
	struct replay_sums sum = {0};
	struct store_reader *r;
	char *root = t_mkdtemp(), dir[1024];
	uint64_t base = t_base_ns(), seq;
	int nn = 0;

	a = stage_rig(0, root, base, &p, &c, &w, &s);
	st = shm_arena__stage(a, SHM_STAGE_STORER);

	/* symd A: samples 1..10, a loss of 3 at 11. */
	ring_defs(&p, 4);
	for (seq = 1; seq <= 10; seq++) {
		t_sample(&o, seq, base + seq * 1000, 1, 0);
		put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
	}
	put_loss(&p, 11, base + 11000, SHM_STAGE_SYMD, SHM_CNT_DROP_RING_FULL, 3);
	shm_ring__commit_sp(&p);
	drain(s);

	/* symd B released up to 5 only: its carry at 5, then 6..11 again,
	 * then new records 12..15. */
	put_rec(&p, CPA_REC_DICT_RESET, &start, sizeof(start), NULL, 0);
	ring_defs(&p, 4);
	put_loss(&p, 5, base + 5000, SHM_STAGE_SYMD, SYM_CNT_LOST_AT_KILL, 4);
	for (seq = 6; seq <= 14; seq++) {
		if (seq == 11) {
			put_loss(&p, 11, base + 11000, SHM_STAGE_SYMD, SHM_CNT_DROP_RING_FULL, 3);
			continue;
		}
		t_sample(&o, seq, base + seq * 1000, 2, 0);
		put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
	}
	put_loss(&p, 15, base + 15000, SHM_STAGE_SYMD, SHM_CNT_DROP_RING_FULL, 2);
	shm_ring__commit_sp(&p);
	drain(s);
	ck_assert_int_eq(storer__finish(s, true), 0);
	storer__free(s);
	store_writer__free(w);

	ck_assert_uint_eq(shm_stage__cnt(st, SHM_CNT_DROP_DUP), 6);
	ck_assert_uint_eq(shm_stage__cnt(st, STO_CNT_SAMPLES), 13);
	ck_assert_uint_eq(shm_stage__cnt(st, STO_CNT_LOST_SAMPLES), 3 + 4 + 2);
	ck_assert_uint_eq(shm_ring__mark_sc(&c), 15);
	/* What a reader of the store sees. */
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	ck_assert_int_eq(store_reader__open(dir, on_notice, &nn, &r), 0);
	ck_assert_int_eq(store_reader__query(r, 0, base + 60 * T_NS, NULL, on_replay_row, &sum), 0);
	store_reader__free(r);
	ck_assert_uint_eq(sum.samples, 13);
	ck_assert_uint_eq(sum.lost, 9);
	shm_arena__free(a);
	t_rm_rf(root);
	free(root);
}
END_TEST

START_TEST(test_stage_sleep)
{
	struct shm_layout l;
	struct shm_arena *a = NULL;
	struct shm_ring_prod p;
	struct shm_ring_cons c;
	struct storer *s;
	struct store_writer *w;
	struct cpa_sample_out o;
	char *root = t_mkdtemp();
	uint64_t base = t_base_ns(), dl;

	shm_layout__default(&l, 4096, 16);
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	ck_assert_int_eq(shm_arena__open_prod(a, SHM_RING_SYMD, &p), 0);
	ck_assert_int_eq(shm_arena__open_cons(a, SHM_RING_SYMD, &c), 0);
	w = new_writer(root);
	ck_assert_int_eq(storer__new(shm_arena__stage(a, SHM_STAGE_STORER), &c, w, &s), 0);
	ck_assert_int_eq(storer__sleep_ms(s, base), -1);
	ck_assert_uint_eq(storer__wake_bytes(s), 1);

	ring_defs(&p, 30);
	t_sample(&o, 1, base, 1, 0);
	put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
	shm_ring__commit_sp(&p);
	drain(s);
	dl = store_writer__deadline(w);
	ck_assert_uint_gt(dl, base);
	/* What the open block holds is not released: it must not count as new. */
	ck_assert_uint_gt(storer__unreleased(s), 0);
	ck_assert_uint_eq(storer__wake_bytes(s), storer__unreleased(s) + STORER_WAKE_BYTES);
	ck_assert_int_eq(storer__sleep_ms(s, dl - 3 * T_NS), 3000);
	ck_assert_int_eq(storer__sleep_ms(s, dl - 300000000ULL), 300);
	ck_assert_int_eq(storer__sleep_ms(s, dl), 0);
	storer__tick(s, dl);
	ck_assert_uint_eq(store_writer__deadline(w), 0);
	/* The block's writes done: nothing is due until the next record. */
	ck_assert_int_eq(store_writer__flush(w, false), 0);
	ck_assert_int_eq(storer__sleep_ms(s, dl), -1);
	ck_assert_uint_eq(storer__wake_bytes(s), 1);
	stage_done(s, w, a, root);
}
END_TEST

/* The storer executable on arena a (fd 3), as the monitor starts it. */
static pid_t start_storer(const char *bin, struct shm_arena *a, struct shm_stage *st)
{
	pid_t pid = fork();

	if (pid == 0) {
		dup2(shm_arena__fd(a), 3);
		execl(bin, "storer", (char *)NULL);
		_exit(127);
	}
	st->pid = pid;
	return pid;
}

/* The real executable: arena on fd 3, records in, DRAIN, exit 0, store on disk. */
START_TEST(test_stage_process)
{
	const char *bd = getenv("CPA_BUILD_DIR");
	char bin[1100], dir[1024];
	struct shm_layout l;
	struct shm_arena *a = NULL;
	struct shm_ring_prod p;
	struct cpa_config *cfg;
	struct shm_stage *st;
	char *root = t_mkdtemp();
	uint64_t base = t_base_ns(), seq = 1;
	int status, i;
	pid_t pid;

	if (!bd)
		bd = ".";
	snprintf(bin, sizeof(bin), "%s/bin/storer", bd);
	ck_assert_msg(access(bin, X_OK) == 0, "%s not built", bin);
	/* Without an arena: exit 2 with a clear message. */
	pid = fork();
	if (pid == 0) {
		close(3);
		execl(bin, "storer", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 2);

	shm_layout__default(&l, 4096, 16);
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	cfg = shm_arena__config(a);
	snprintf(cfg->store_dir, sizeof(cfg->store_dir), "%s", root);
	cfg->freq = 49;
	cfg->record_interval_s = 1;
	cfg->nr_cpus = 2;
	cfg->start_realtime_ns = base; /* the monitor started at the data's time */
	st = shm_arena__stage(a, SHM_STAGE_STORER);
	ck_assert_int_eq(shm_arena__open_prod(a, SHM_RING_SYMD, &p), 0);
	/* A run that captures nothing still leaves its store dir and conf. */
	pid = start_storer(bin, a, st);
	for (i = 0; i < 500 && shm_stage__state(st) != SHM_STATE_RUNNING; i++)
		usleep(10000);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	snprintf(dir, sizeof(dir), "%s/cpa_261120/conf", root);
	ck_assert_msg(access(dir, F_OK) == 0, "no %s after a run without samples", dir);
	ring_defs(&p, 10);
	for (i = 0; i < 300; i++) {
		struct cpa_sample_out o;

		t_sample(&o, seq++, base + (uint64_t)i * (T_NS / 30), 1 + i % 10, 0);
		put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
	}
	shm_ring__commit_sp(&p);

	pid = start_storer(bin, a, st);
	/* Wait for RUNNING and for the input to be consumed, then DRAIN. */
	for (i = 0; i < 500 && shm_stage__cnt(st, STO_CNT_SAMPLES) < 300; i++)
		usleep(10000);
	ck_assert_uint_eq(shm_stage__cnt(st, STO_CNT_SAMPLES), 300);
	ck_assert_uint_gt(st->heartbeat_ns, 0);
	__atomic_store_n(&st->cmd, SHM_CMD_DRAIN, __ATOMIC_RELEASE);
	shm_ring__kick(shm_arena__ring_mem(a, SHM_RING_SYMD, NULL));
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(shm_stage__state(st), SHM_STATE_EXITED);
	/* Two 5-second blocks, or three: this data is a day old, so a block
	 * can be due (and closed by the deadline) between two input batches. */
	ck_assert_uint_ge(shm_stage__cnt(st, STO_CNT_BLOCKS), 2);
	ck_assert_uint_le(shm_stage__cnt(st, STO_CNT_BLOCKS), 4);
	{
		struct shm_ring_cons c;

		ck_assert_int_eq(shm_arena__open_cons(a, SHM_RING_SYMD, &c), 0);
		ck_assert_uint_eq(shm_ring__mark_sc(&c), 300);
		ck_assert_uint_eq(shm_ring__pending_sc(&c), 0);
	}
	/* Restart (same run: same dir), more input without definitions, then
	 * SIGTERM: leaves promptly, exit 0, what it took is in the store, and
	 * the dictionary journal gave the new life symd's ids. */
	for (i = 0; i < 60; i++) {
		struct cpa_sample_out o;

		t_sample(&o, seq++, base + 10 * T_NS + (uint64_t)i * (T_NS / 30), 1 + i % 10, 0);
		put_rec(&p, CPA_REC_SAMPLE_OUT, &o, sizeof(o), NULL, 0);
	}
	shm_ring__commit_sp(&p);
	__atomic_store_n(&st->cmd, SHM_CMD_NONE, __ATOMIC_RELEASE);
	pid = start_storer(bin, a, st);
	for (i = 0; i < 500 && shm_stage__cnt(st, STO_CNT_SAMPLES) < 360; i++)
		usleep(10000);
	ck_assert_uint_eq(shm_stage__cnt(st, STO_CNT_SAMPLES), 360);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	ck_assert_int_eq(shm_stage__state(st), SHM_STATE_EXITED);

	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	{
		struct store_reader *r;
		uint64_t f, la, recs;

		struct expect e;
		struct got g;

		ck_assert_int_eq(store_reader__open(dir, NULL, NULL, &r), 0);
		ck_assert_int_eq(store_reader__range(r, &f, &la, &recs), 0);
		ck_assert_uint_eq(recs, 12);
		expect_init(&e, 12, 10);
		got_init(&g, &e, base);
		ck_assert_int_eq(store_reader__query(r, base + 10 * T_NS, base + 12 * T_NS, NULL,
						     on_row, &g),
				 0);
		ck_assert_uint_eq(g.unknown, 0);
		ck_assert_uint_eq(g.bad_frames, 0);
		ck_assert_uint_eq(g.rows, 20);
		got_free(&g);
		expect_free(&e);
		store_reader__free(r);
	}
	shm_arena__free(a);
	t_rm_rf(root);
	free(root);
}
END_TEST

/*
 * A full disk without root: RLIMIT_FSIZE makes writes past the limit fail
 * (EFBIG), like ENOSPC. The writer counts, keeps taking samples, retries,
 * and once the limit is lifted everything lands.
 */
START_TEST(test_write_errors)
{
	struct expect e;
	struct got g;
	char dir[1024];
	char *root = t_mkdtemp();
	int nn = 0, status;
	pid_t pid;

	expect_init(&e, 60, 20);
	/* In a child without Check calls: the limit would hit Check's own files too. */
	pid = fork();
	if (pid == 0) {
		struct store_writer_opts o = {
			.root = root, .record_interval = 1, .block_seconds = 1};
		struct store_writer_stats ws;
		struct store_writer *w;
		struct rlimit rl, small;
		uint64_t seed = 42, seq = 1;
		uint32_t sec, k;
		int i;

		signal(SIGXFSZ, SIG_IGN);
		if (getrlimit(RLIMIT_FSIZE, &rl) || store_writer__new(&o, &w))
			_exit(10);
		small = rl;
		small.rlim_cur = 6000; /* the first blocks fit, the rest do not */
		if (setrlimit(RLIMIT_FSIZE, &small))
			_exit(11);
		t_defs(w, 20, 0);
		for (sec = 0; sec < 60; sec++)
			for (k = 0; k < 50; k++) {
				double u = (double)(lcg(&seed) % 10000) / 10000.0;
				struct cpa_sample_out so;

				t_sample(&so, seq++,
					 t_base_ns() + sec * T_NS + (uint64_t)k * (T_NS / 50),
					 1 + (uint32_t)(u * u * u * 20), 0);
				if (store_writer__add_sample(w, &so))
					_exit(12);
			}
		store_writer__close_block(w);
		for (i = 0; i < 50; i++) {
			store_writer__tick(w, t_base_ns() + 3600 * T_NS);
			usleep(2000);
		}
		store_writer__stats(w, &ws);
		if (!ws.write_errors || ws.last_error != -EFBIG) {
			fprintf(stderr, "write_errors %llu last %d disk %llu\n",
				(unsigned long long)ws.write_errors, ws.last_error,
				(unsigned long long)ws.bytes_disk);
			_exit(13);
		}
		if (ws.samples != 3000)
			_exit(14);
		/* Space is back: the retries go through. */
		if (setrlimit(RLIMIT_FSIZE, &rl))
			_exit(15);
		if (store_writer__flush(w, true))
			_exit(16);
		store_writer__stats(w, &ws);
		if (ws.dropped_blocks)
			_exit(17);
		store_writer__free(w);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	/* The parent knows what the child fed: same generator. */
	{
		uint64_t seed = 42;
		uint32_t sec, k;

		for (sec = 0; sec < 60; sec++)
			for (k = 0; k < 50; k++) {
				double u = (double)(lcg(&seed) % 10000) / 10000.0;

				e.cnt[sec * 21 + 1 + (uint32_t)(u * u * u * 20)]++;
			}
	}
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	got_init(&g, &e, t_base_ns());
	query_all(dir, &g, &nn, NULL);
	got_check(&g, 0, 60, -1);
	got_free(&g);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* The wall clock steps back two hours and forward again: nothing is lost,
 * every second is found by a window query. */
START_TEST(test_clock_step)
{
	struct store_writer *w;
	struct store_reader *r;
	char *root = t_mkdtemp(), dir[1024];
	uint64_t base = t_base_ns(), seq = 1, total = 0;
	const int64_t offs[3] = {0, -7200, 10};
	int part, i;

	t_block_s = 0;
	w = new_writer(root);
	t_defs(w, 5, 0);
	for (part = 0; part < 3; part++)
		for (i = 0; i < 100; i++) {
			struct cpa_sample_out o;

			t_sample(&o, seq++,
				 (uint64_t)((int64_t)base + offs[part] * (int64_t)T_NS) +
					 (uint64_t)i * (T_NS / 10),
				 1 + i % 5, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
		}
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	ck_assert_int_eq(store_reader__open(dir, NULL, NULL, &r), 0);
	for (part = 0; part < 3; part++) {
		struct expect e;
		struct got g;
		uint64_t t0 = (uint64_t)((int64_t)base + offs[part] * (int64_t)T_NS), k;

		expect_init(&e, 10, 5);
		got_init(&g, &e, t0);
		ck_assert_int_eq(store_reader__query(r, t0, t0 + 10 * T_NS, NULL, on_row, &g), 0);
		for (k = 0; k < 10 * 6; k++)
			total += g.cnt[k];
		got_free(&g);
		expect_free(&e);
	}
	ck_assert_uint_eq(total, 300);
	store_reader__free(r);
	t_rm_rf(root);
	free(root);
}
END_TEST

/* store_reader__query()'s rows' seconds, as a bitmap from t0 (n seconds). */
struct secmap {
	int64_t t0;
	uint32_t n;
	uint8_t *has;
};

static int on_sec(void *ctx, const struct store_sample *s)
{
	struct secmap *m = ctx;

	ck_assert(s->sec >= m->t0 && s->sec < m->t0 + m->n);
	m->has[s->sec - m->t0] = 1;
	return 0;
}

/* store_reader__records() against the seconds of every row, read one by one. */
static void check_records(const char *dir, int64_t t0, uint32_t n)
{
	struct secmap m = {.t0 = t0, .n = n, .has = calloc(n, 1)};
	struct store_reader *r;
	int64_t first = 0, last = 0, want_first = -1, want_last = -1;
	uint64_t recs = 0, want = 0;

	ck_assert_int_eq(store_reader__open(dir, NULL, NULL, &r), 0);
	ck_assert_int_eq(store_reader__query(r, (uint64_t)t0 * T_NS, (uint64_t)(t0 + n) * T_NS,
					     NULL, on_sec, &m),
			 0);
	for (uint32_t i = 0; i < n; i++) {
		if (!m.has[i])
			continue;
		want++;
		if (want_first < 0)
			want_first = t0 + i;
		want_last = t0 + i;
	}
	ck_assert_int_eq(store_reader__records(r, &first, &last, &recs), 0);
	ck_assert_uint_eq(recs, want);
	ck_assert_int_eq(first, want_first);
	ck_assert_int_eq(last, want_last);
	store_reader__free(r);
	free(m.has);
}

/*
 * Records Num (store_reader__records()) is exactly the seconds holding rows:
 * runs of seconds with gaps, blocks of 1 to 3 seconds, a clock step back
 * (blocks out of time order, seconds written twice), metrics-only seconds;
 * with the index and with it rebuilt from the segments.
 */
START_TEST(test_records_exact)
{
	struct store_writer *w;
	char *root = t_mkdtemp(), dir[1024], idx[1100];
	uint64_t base = t_base_ns(), seq = 1, rng = 7;
	int64_t t0 = (int64_t)(base / T_NS) - 100;
	/* the second written at each step: forward with gaps, then a step back */
	int64_t sec = 0;

	t_block_s = 3;
	w = new_writer(root);
	t_defs(w, 5, 0);
	for (int i = 0; i < 400; i++) {
		struct cpa_sample_out o;

		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		if (i == 250)
			sec -= 80; /* the clock stepped back: seconds already written */
		else
			sec += (rng >> 33) % 4 == 0 ? 1 + (int64_t)((rng >> 40) % 6) : 0;
		if ((rng >> 45) % 7 == 0) {
			struct cpa_metrics mt = {.seq = seq++,
						 .time_ns = base + (uint64_t)(sec + 1000) * T_NS,
						 .interval_ms = 1000,
						 .nr_cpus = 2};

			/* metrics alone, far from any sample: no record */
			ck_assert_int_eq(store_writer__add_metrics(w, &mt, NULL), 0);
		}
		t_sample(&o, seq++, base + (uint64_t)sec * T_NS + (rng >> 50) % T_NS, 1 + i % 5, 0);
		ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
	}
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	check_records(dir, t0, 3000);
	snprintf(idx, sizeof(idx), "%s/index", dir);
	ck_assert_int_eq(unlink(idx), 0);
	check_records(dir, t0, 3000);
	t_block_s = 0;
	t_rm_rf(root);
	free(root);
}
END_TEST

/* The dictionary journal: a new writer life knows the previous life's symd ids. */
START_TEST(test_journal)
{
	char *root = t_mkdtemp(), dir[1024], p[1100];
	struct store_writer *w;
	struct expect e;
	struct got g;
	struct cpa_sample_out o;
	struct store_reader *r;
	uint64_t base = t_base_ns();
	int n, nn = 0;

	t_block_s = 1;
	expect_init(&e, 3, 10);
	w = new_writer(root);
	store_writer__set_run_id(w, base);
	ck_assert_int_eq(store_writer__journal_open(w, root), 0);
	store_writer__dict_reset(w, 5);
	t_defs(w, 10, 0);
	t_sample(&o, 1, base, 3, 0);
	ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
	e.cnt[0 * 11 + 3]++;
	store_writer__free(w);

	w = new_writer(root);
	store_writer__set_run_id(w, base);
	n = store_writer__journal_open(w, root);
	ck_assert_int_eq(n, 5 + 1 + 2 * T_FRAMES + 10);
	t_sample(&o, 2, base + T_NS, 7, 0); /* no definitions sent in this life */
	ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
	e.cnt[1 * 11 + 7]++;
	/* A new epoch replaces the journal file. */
	store_writer__dict_reset(w, 6);
	t_defs(w, 10, 500);
	t_sample(&o, 3, base + 2 * T_NS, 9, 500);
	ck_assert_int_eq(store_writer__add_sample(w, &o), 0);
	e.cnt[2 * 11 + 9]++;
	store_writer__free(w);
	snprintf(p, sizeof(p), "%s/.storer-dict-%020d", root, 5);
	ck_assert_int_ne(access(p, F_OK), 0);
	snprintf(p, sizeof(p), "%s/.storer-dict-%020d", root, 6);
	ck_assert_int_eq(access(p, F_OK), 0);

	ck_assert_int_eq(t_store_dir(root, dir, sizeof(dir)), 0);
	got_init(&g, &e, base);
	ck_assert_int_eq(store_reader__open(dir, on_notice, &nn, &r), 0);
	ck_assert_int_eq(store_reader__query(r, 0, UINT64_MAX / 2, NULL, on_row, &g), 0);
	store_reader__free(r);
	got_check(&g, 0, 3, -1);
	got_free(&g);
	expect_free(&e);
	t_rm_rf(root);
	free(root);
}
END_TEST

static Suite *store_suite(void)
{
	Suite *s = suite_create("store");
	TEST_TCASE(s, "format", test_roundtrip, test_bytes_per_sample, test_index_window,
		   test_torn_tail, test_corrupt_block, test_fuzz_damage, test_newer_major,
		   test_filters, test_segments_and_days, test_retention, test_dir_at_start,
		   test_write_errors, test_clock_step, test_journal, test_records_exact);
	TEST_TCASE(s, "stage", test_stage_batch, test_stage_symd_replay, test_stage_sleep,
		   test_retention_log, test_stage_process);
	return s;
}

int main(void)
{
	/* Local time decides day dirs and HH:MM:SS: pin it. */
	t_utc();
	return test_run_suite(store_suite());
}
