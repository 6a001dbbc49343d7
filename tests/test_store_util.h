/* SPDX-License-Identifier: MIT */
/*
 * Synthetic symd-style workload for the store tests: deterministic strings,
 * modules, frames and stacks, and samples spread over seconds.
 */
#ifndef CPA_TEST_STORE_UTIL_H
#define CPA_TEST_STORE_UTIL_H

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shm/stage.h"
#include "storer/store.h"
#include "test_util.h"

#define T_NS		   1000000000ULL
#define T_STR_PCOMM	   1
#define T_STR_COMM	   2
#define T_STR_ENV	   3
#define T_STR_PATH	   4
#define T_STR_PCOMM2	   5
#define T_STR_FRAME0	   100
#define T_KFRAMES	   24 /* frame ids 1..24 are kernel frames */
#define T_FRAMES	   400
#define T_STACK_FRAMES(s)  (6 + (s) % 23)
#define T_STACK_KFRAMES(s) ((s) % 4)

static inline void t_frame_name(uint32_t fid, char *buf, size_t len)
{
	if (fid <= T_KFRAMES)
		snprintf(buf, len, "__x64_sys_kfunc_%u", fid);
	else
		snprintf(buf, len, "app::service::Handler%u::process_request_%u(Request const&)",
			 fid % 37, fid);
}

/* Frame id of position j (leaf first, kernel first) of stack s. */
static inline uint32_t t_stack_frame(uint32_t s, uint32_t j)
{
	uint32_t nk = T_STACK_KFRAMES(s);

	if (j < nk)
		return 1 + (s * 7 + j * 3) % T_KFRAMES;
	/* Stacks share their roots (main, loop) like real programs do. */
	{
		uint32_t n = T_STACK_FRAMES(s), from_root = n - 1 - j;

		if (from_root < 3)
			return T_KFRAMES + 1 + from_root;
		return T_KFRAMES + 4 + (s * 13 + from_root * 11) % (T_FRAMES - T_KFRAMES - 4);
	}
}

static inline uint64_t t_frame_off(uint32_t fid)
{
	return fid <= T_KFRAMES ? 0xffffffff81000000ULL + fid * 64 : 0x1000 + fid * 48;
}

static const uint8_t t_build_id[20] = {0xde, 0xad, 0xbe, 0xef, 1,  2,  3,  4,  5,  6,
				       7,    8,	   9,	 10,   11, 12, 13, 14, 15, 16};

/* Symd id spaces can differ across a DICT_RESET: ids shifted by off. */
static inline void t_defs(struct store_writer *w, uint32_t nstacks, uint32_t off)
{
	struct {
		struct cpa_str_def d;
		char s[128];
	} str;
	struct {
		struct cpa_module_def m;
		char p[64];
	} mod;
	static const char *const fixed[] = {NULL, "app", "worker", "ENV_A", "/usr/bin/app", "db"};
	uint32_t i, j;

	for (i = 1; i < 6; i++) {
		str.d.id = i + off;
		str.d.len = (uint32_t)strlen(fixed[i]);
		memcpy(str.s, fixed[i], str.d.len);
		store_writer__def_str(w, &str.d, str.s);
	}
	memset(&mod, 0, sizeof(mod));
	mod.m.id = 1 + off;
	mod.m.kind = CPA_MOD_FILE;
	mod.m.path_len = (uint32_t)strlen("/usr/bin/app");
	mod.m.build_id_len = 20;
	memcpy(mod.m.build_id, t_build_id, 20);
	store_writer__def_module(w, &mod.m, "/usr/bin/app");
	for (i = 1; i <= T_FRAMES; i++) {
		struct cpa_frame_def f = {0};

		str.d.id = T_STR_FRAME0 + i + off;
		t_frame_name(i, str.s, sizeof(str.s));
		str.d.len = (uint32_t)strlen(str.s);
		store_writer__def_str(w, &str.d, str.s);
		f.id = i + off;
		f.name_id = T_STR_FRAME0 + i + off;
		f.module_id = i <= T_KFRAMES ? 0 : 1 + off;
		f.flags = i <= T_KFRAMES ? CPA_FF_KERNEL : 0;
		f.offset = t_frame_off(i);
		store_writer__def_frame(w, &f);
	}
	for (i = 1; i <= nstacks; i++) {
		struct cpa_stack_def sd = {.id = i + off,
					   .n_frames = (uint16_t)T_STACK_FRAMES(i),
					   .n_kframes = (uint16_t)T_STACK_KFRAMES(i)};
		uint32_t ids[64];

		for (j = 0; j < sd.n_frames; j++)
			ids[j] = t_stack_frame(i, j) + off;
		store_writer__def_stack(w, &sd, ids);
	}
}

static inline void t_sample(struct cpa_sample_out *s, uint64_t seq, uint64_t t, uint32_t stack,
			    uint32_t off)
{
	memset(s, 0, sizeof(*s));
	s->seq = seq;
	s->time_ns = t;
	s->cgroup_id = 0x100000000ULL + (stack % 2);
	s->weight = 1;
	s->pid = 1000 + stack % 3;
	s->tid = s->pid + stack % 2;
	s->cpu = stack % 2;
	s->kind = CPA_KIND_ONCPU;
	s->stack_id = stack + off;
	s->comm_id = T_STR_COMM + off;
	s->pcomm_id = (stack % 3 == 2 ? T_STR_PCOMM2 : T_STR_PCOMM) + off;
	s->env_id = T_STR_ENV + off;
}

/* A loss of n samples (weight n) at t that stage dropped on a full ring:
 * store_writer__add_loss()'s result. */
static inline int t_add_loss(struct store_writer *w, uint64_t seq, uint64_t t, uint64_t n,
			     uint32_t stage)
{
	struct cpa_loss l = {.seq = seq,
			     .time_ns = t,
			     .count = n,
			     .weight = n,
			     .stage = stage,
			     .reason = SHM_CNT_DROP_RING_FULL};

	return store_writer__add_loss(w, &l);
}

/* 2026-11-20 10:00:00 local: a fixed day, far from midnight. */
static inline uint64_t t_base_ns(void)
{
	struct tm tm = {.tm_year = 126, .tm_mon = 10, .tm_mday = 20, .tm_hour = 10, .tm_isdst = -1};

	return (uint64_t)mktime(&tm) * T_NS;
}

/* A scratch directory (test_scratch()), and rm -rf. */
static inline char *t_mkdtemp(void)
{
	return test_scratch("store-test");
}

static inline void t_rm_rf(const char *path)
{
	test_rm_rf(path);
}

/* Times print in UTC, whatever the host's zone: the tests compare hh:mm:ss. */
static inline void t_utc(void)
{
	setenv("TZ", "UTC", 1);
	tzset();
}

/* First cpa_* dir under root. */
static inline int t_store_dir(const char *root, char *buf, size_t len)
{
	DIR *d = opendir(root);
	struct dirent *de;
	int r = -1;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, "cpa_", 4)) {
			snprintf(buf, len, "%s/%s", root, de->d_name);
			r = 0;
			break;
		}
	closedir(d);
	return r;
}

static inline uint64_t t_dir_bytes(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t sum = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char p[1400];
		struct stat sb;

		snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
		if (de->d_name[0] != '.' && stat(p, &sb) == 0 && S_ISREG(sb.st_mode))
			sum += (uint64_t)sb.st_size;
	}
	closedir(d);
	return sum;
}

/* ---- the dictionary as symd sends it: DICT_RESET, the fixed strings, one
 * module, nframes frames (<= T_FRAMES) and nstacks stacks shaped like
 * t_stack_frame()'s, as (type, head, tail) records to a sink: a real ring
 * (ring_defs() below) or a byte buffer (fuzz/seeds.c). */
typedef void (*t_rec_fn)(void *ctx, uint16_t type, const void *a, uint32_t alen, const void *b,
			 uint32_t blen);

static inline void t_defs_emit(t_rec_fn put, void *ctx, uint32_t nframes, uint32_t nstacks)
{
	struct cpa_dict_reset dr = {.epoch = 1};
	static const char *const fixed[] = {NULL, "app", "worker", "ENV_A", "/usr/bin/app", "db"};
	struct cpa_module_def m = {
		.id = 1, .kind = CPA_MOD_FILE, .path_len = 12, .build_id_len = 20};
	uint32_t i, j;
	char name[160];

	put(ctx, CPA_REC_DICT_RESET, &dr, sizeof(dr), NULL, 0);
	for (i = 1; i < 6; i++) {
		struct cpa_str_def s = {.id = i, .len = (uint32_t)strlen(fixed[i])};

		put(ctx, CPA_REC_STR, &s, sizeof(s), fixed[i], s.len);
	}
	memcpy(m.build_id, t_build_id, 20);
	put(ctx, CPA_REC_MODULE, &m, sizeof(m), "/usr/bin/app", 12);
	for (i = 1; i <= nframes; i++) {
		struct cpa_str_def s = {.id = T_STR_FRAME0 + i};
		struct cpa_frame_def f = {.id = i,
					  .name_id = T_STR_FRAME0 + i,
					  .module_id = i <= T_KFRAMES ? 0 : 1,
					  .flags = i <= T_KFRAMES ? CPA_FF_KERNEL : 0,
					  .offset = t_frame_off(i)};

		t_frame_name(i, name, sizeof(name));
		s.len = (uint32_t)strlen(name);
		put(ctx, CPA_REC_STR, &s, sizeof(s), name, s.len);
		put(ctx, CPA_REC_FRAME, &f, sizeof(f), NULL, 0);
	}
	for (i = 1; i <= nstacks; i++) {
		struct cpa_stack_def sd = {.id = i,
					   .n_frames = (uint16_t)T_STACK_FRAMES(i),
					   .n_kframes = (uint16_t)T_STACK_KFRAMES(i)};
		uint32_t ids[64];

		for (j = 0; j < sd.n_frames; j++)
			ids[j] = 1 + (t_stack_frame(i, j) - 1) % nframes;
		put(ctx, CPA_REC_STACK, &sd, sizeof(sd), ids, 4 * sd.n_frames);
	}
}

/* ---- symd's records through a real ring (the stage tests); ring_defs():
 * t_defs_emit() of all T_FRAMES frames, committed every 64 records. */
#ifdef CPA_SHM_RING_H
static inline void put_rec(struct shm_ring_prod *p, uint16_t type, const void *a, uint32_t alen,
			   const void *b, uint32_t blen)
{
	void *d;

	ck_assert_int_eq(shm_ring__reserve_sp(p, alen + blen, type, &d), 0);
	memcpy(d, a, alen);
	if (blen)
		memcpy((uint8_t *)d + alen, b, blen);
}

struct t_ring_sink {
	struct shm_ring_prod *p;
	uint32_t n;
};

static inline void t_ring_put(void *ctx, uint16_t type, const void *a, uint32_t alen, const void *b,
			      uint32_t blen)
{
	struct t_ring_sink *k = (struct t_ring_sink *)ctx;

	put_rec(k->p, type, a, alen, b, blen);
	if (++k->n % 64 == 0)
		shm_ring__commit_sp(k->p);
}

static inline void ring_defs(struct shm_ring_prod *p, uint32_t nstacks)
{
	struct t_ring_sink k = {.p = p};

	t_defs_emit(t_ring_put, &k, T_FRAMES, nstacks);
	shm_ring__commit_sp(p);
}
#endif /* CPA_SHM_RING_H */

/* A writer of a fixture store in a new temporary root (*root, freed by the caller). */
static inline struct store_writer *t_store_new(struct store_writer_opts *o, char **root)
{
	struct store_writer *w;

	*root = t_mkdtemp();
	o->root = *root;
	if (store_writer__new(o, &w) < 0) {
		fprintf(stderr, "store_writer__new(%s) failed\n", *root);
		abort();
	}
	return w;
}

/* Close the writer of a fixture store and find the store dir it wrote under root. */
static inline void t_store_close(struct store_writer *w, const char *root, char *buf, size_t len)
{
	store_writer__free(w);
	if (t_store_dir(root, buf, len) < 0) {
		fprintf(stderr, "no store dir under %s\n", root);
		abort();
	}
}

#endif /* CPA_TEST_STORE_UTIL_H */
