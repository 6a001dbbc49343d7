// SPDX-License-Identifier: MIT
/*
 * unwindd options beyond the pipeline, on the real stage over real arena
 * rings: --bench statistics (the numbers and the two log lines), the symd
 * restart epoch, the --parse_env_values filter on a /proc look-alike, and
 * --debug_option: a dump of this process's own stack, replayed by
 * build/bin/cpa-unwind-replay, must give the frames unwindd gave live. The
 * last case runs build/bin/unwindd with --bench in the config.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "shm/records.h"
#include "test_unwindd_util.h"
#include "test_util.h"
#include "unwindd/dump.h"
#include "unwindd/ubench.h"
#include "unwindd/unwindd.h"

#define FAKE_PID 4243u

static void env_init(struct env *e, const struct unwindd_opts *o)
{
	env_arena(e, 1u << 18, 0);
	env_start(e, o);
}

static void push_sample(struct env *e, uint32_t pid, uint16_t flags, const uint64_t *ufp,
			unsigned int n_ufp, const uint64_t *k, unsigned int n_k)
{
	uint32_t len = (uint32_t)(sizeof(struct cpa_sample) + 8 * (n_ufp + n_k));
	struct cpa_sample *s;
	uint8_t *p;

	ck_assert_int_eq(shm_ring__reserve_sp(&e->cap, len, CPA_REC_SAMPLE, (void **)&s), 0);
	memset(s, 0, sizeof(*s));
	s->seq = e->seq++;
	s->weight = 1;
	s->pid = pid;
	s->tid = pid;
	s->flags = flags;
	snprintf(s->comm, sizeof(s->comm), "worker");
	if (n_ufp)
		s->regs.ip = ufp[0];
	s->n_kstack = (uint16_t)n_k;
	s->n_ufp = (uint16_t)n_ufp;
	p = (uint8_t *)(s + 1);
	if (n_k)
		memcpy(p, k, 8 * n_k);
	if (n_ufp)
		memcpy(p + 8 * n_k, ufp, 8 * n_ufp);
	shm_ring__commit_sp(&e->cap);
}

static void push_task(struct env *e, uint32_t pid, uint32_t kind)
{
	struct cpa_task_event *t;

	ck_assert_int_eq(shm_ring__reserve_sp(&e->cap, sizeof(*t), CPA_REC_TASK, (void **)&t), 0);
	memset(t, 0, sizeof(*t));
	t->seq = e->seq++;
	t->pid = pid;
	t->tid = pid;
	t->kind = kind;
	shm_ring__commit_sp(&e->cap);
}

static int count_type(const struct outrec *recs, int n, uint16_t type)
{
	int i, c = 0;

	for (i = 0; i < n; i++)
		c += recs[i].type == type;
	return c;
}

static const struct cpa_frames *nth_frames(const struct outrec *recs, int n, int which)
{
	int i;

	for (i = 0; i < n; i++)
		if (recs[i].type == CPA_REC_FRAMES && which-- == 0)
			return (const void *)recs[i].data;
	return NULL;
}

static const struct cpa_module_def *find_module(const struct outrec *recs, int n, uint32_t id)
{
	const struct cpa_module_def *found = NULL;
	int i;

	for (i = 0; i < n; i++) {
		const struct cpa_module_def *m = (const void *)recs[i].data;

		if (recs[i].type == CPA_REC_DICT_RESET)
			found = NULL; /* ids of an older epoch */
		else if (recs[i].type == CPA_REC_MODULE && m->id == id)
			found = m;
	}
	return found;
}

int feat_marker_fn(int x);
__attribute__((noinline, used)) int feat_marker_fn(int x)
{
	return x * 3 + 1;
}

/* ---------------------------------------------------------------- bench */

static char logbuf[16384];

static void log_capture(enum log_level lvl, const char *line)
{
	size_t n = strlen(logbuf);

	(void)lvl;
	snprintf(logbuf + n, sizeof(logbuf) - n, "%s\n", line);
}

START_TEST(test_bench_buckets_and_format)
{
	static const uint64_t cpa_edges[][2] = {
		{999, 0},    {1000, 1},	  {3999, 1},	{4000, 2},
		{255999, 4}, {256000, 5}, {4095999, 8}, {4096000, 9},
	};
	struct ubench b;
	char l1[512], l2[320];
	unsigned int i;

	ck_assert_uint_eq(ubench__bucket(0), 0);
	ck_assert_uint_eq(ubench__bucket(999), 0);
	ck_assert_uint_eq(ubench__bucket(1000), 1);
	ck_assert_uint_eq(ubench__bucket(1999), 1);
	ck_assert_uint_eq(ubench__bucket(2000), 2);
	ck_assert_uint_eq(ubench__bucket(3999), 2);
	ck_assert_uint_eq(ubench__bucket(4000), 3);
	ck_assert_uint_eq(ubench__bucket(1023999), 10);
	ck_assert_uint_eq(ubench__bucket(1024000), 11);
	ck_assert_uint_eq(ubench__bucket(5 * NSEC_PER_SEC), 11);

	ubench__init(&b, NSEC_PER_SEC, 100);
	ubench__add(&b, 500, 3, CPA_STOP_END);	     /* <1 */
	ubench__add(&b, 1500, 5, CPA_STOP_END);	     /* 1-2 */
	ubench__add(&b, 3000000, 10, CPA_STOP_READ); /* >=1K */
	ubench__format(&b, 2 * NSEC_PER_SEC, l1, sizeof(l1), l2, sizeof(l2));
	ck_assert_msg(strstr(l1, "bench: 2.00s samples 3 rate 1.5/s ") != NULL, "%s", l1);
	ck_assert_msg(strstr(l1, "lat_us avg 1000.67 min 0.50 max 3000.00 ") != NULL, "%s", l1);
	ck_assert_msg(strstr(l1, "frames/sample 6.0 ") != NULL, "%s", l1);
	ck_assert_msg(strstr(l1, "stop end=2 read=1") != NULL, "%s", l1);
	ck_assert_str_eq(l2, "bench: hist_us <1:1 1-2:1 2-4:0 4-8:0 8-16:0 16-32:0 32-64:0 "
			     "64-128:0 128-256:0 256-512:0 512-1K:0 >=1K:1");

	/* CPA's buckets: <1, 1-4, 4-16, 16-64, 64-256, 256-512, ... 2048-4096, >=4096 us. */
	for (i = 0; i < sizeof(cpa_edges) / sizeof(cpa_edges[0]); i++)
		ck_assert_msg(ubench__cpa_bucket(cpa_edges[i][0]) == cpa_edges[i][1],
			      "%llu ns in bucket %u", (unsigned long long)cpa_edges[i][0],
			      ubench__cpa_bucket(cpa_edges[i][0]));
	ubench__format_cpa(&b, 2 * NSEC_PER_SEC, l1, sizeof(l1), l2, sizeof(l2));
	ck_assert_str_eq(l1, "Bench DWARF Unwind: count=3 rate=1.50/s avg=1000.67 us min=0.50 us "
			     "max=3000.00 us");
	ck_assert_str_eq(l2, "Bench DWARF Histogram: <1us=1 1-4us=1 2048-4096us=1");

	/* Not yet an interval: nothing; then one, and the counts start over. */
	log_set_sink(log_capture);
	logbuf[0] = 0;
	ck_assert(!ubench__tick(&b, 100 + NSEC_PER_SEC - 1));
	ck_assert_str_eq(logbuf, "");
	ck_assert(ubench__tick(&b, 100 + NSEC_PER_SEC));
	ck_assert_ptr_nonnull(strstr(logbuf, "samples 3 "));
	ck_assert_ptr_nonnull(strstr(logbuf, "bench: hist_us <1:1"));
	ck_assert_uint_eq(b.samples, 0);
	ck_assert_uint_eq(b.hist[11], 0);
	logbuf[0] = 0;
	ck_assert(ubench__tick(&b, 100 + 2 * NSEC_PER_SEC));
	ck_assert_msg(strstr(logbuf, "samples 0 rate 0.0/s lat_us avg 0.00 min 0.00 max 0.00") !=
			      NULL,
		      "%s", logbuf);
	ck_assert_ptr_nonnull(strstr(logbuf, "stop -"));
	/* CPA's lines: the totals every interval, no histogram without samples. */
	ck_assert_ptr_nonnull(
		strstr(logbuf, "Bench DWARF Unwind: count=0 rate=0.00/s avg=0.00 us"));
	ck_assert_ptr_null(strstr(logbuf, "Bench DWARF Histogram:"));
	log_set_sink(NULL);
}
END_TEST

START_TEST(test_bench_stage)
{
	static struct outrec recs[64];
	struct unwindd_opts o = {
		.proc_root = "/proc", .bench = true, .bench_interval_ns = NSEC_PER_SEC};
	uint64_t ufp[3] = {
		(uint64_t)(uintptr_t)&feat_marker_fn + 4,
		(uint64_t)(uintptr_t)&getpid + 2,
		(uint64_t)(uintptr_t)&feat_marker_fn + 8,
	};
	uint64_t k[1] = {0xffffffff81000010ull};
	uint64_t now;
	struct env e;
	struct ubench *b;

	env_init(&e, &o);
	b = unwindd__bench(e.u);
	ck_assert_ptr_nonnull(b);
	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 3, k, 1);
	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 3, k, 1);
	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 2, k, 1);
	push_sample(&e, 0, CPA_SF_KERNEL_THREAD, NULL, 0, k, 1); /* not unwound: not timed */
	ck_assert_int_eq(run_all(&e), 4);
	ck_assert_int_eq(pull_all(&e, recs, 64) > 0, 1);

	/* Every unwind was timed; the latencies are real (non-zero, ordered). */
	ck_assert_uint_eq(b->samples, 3);
	ck_assert_uint_eq(b->frames, 8);
	ck_assert_uint_eq(b->stop[CPA_STOP_FP], 3);
	ck_assert_uint_gt(b->lat_sum_ns, 0);
	ck_assert_uint_le(b->lat_min_ns, b->lat_max_ns);
	ck_assert_uint_le(b->lat_max_ns, b->lat_sum_ns);
	{
		uint64_t h = 0;
		unsigned int i;

		for (i = 0; i < UBENCH_BUCKETS; i++)
			h += b->hist[i];
		ck_assert_uint_eq(h, 3);
	}

	log_set_sink(log_capture);
	logbuf[0] = 0;
	now = b->start_ns;
	unwindd__tick(e.u, now + NSEC_PER_SEC / 2);
	ck_assert_str_eq(logbuf, "");
	unwindd__tick(e.u, now + NSEC_PER_SEC + 1);
	log_set_sink(NULL);
	ck_assert_msg(strstr(logbuf, "bench: 1.00s samples 3 rate 3.0/s lat_us avg ") != NULL, "%s",
		      logbuf);
	ck_assert_msg(strstr(logbuf, "frames/sample 2.7 env_skipped 0 stop fp=3") != NULL, "%s",
		      logbuf);
	ck_assert_ptr_nonnull(strstr(logbuf, "bench: hist_us <1:"));
	ck_assert_uint_eq(b->intervals, 1);
	env_free(&e);

	/* Off: no bench object at all, so no clock call on the hot path. */
	o.bench = false;
	env_init(&e, &o);
	ck_assert_ptr_null(unwindd__bench(e.u));
	env_free(&e);
}
END_TEST

/* ---------------------------------------------------------------- symd restart */

START_TEST(test_symd_restart_new_epoch)
{
	static struct outrec recs[64];
	struct unwindd_opts o = {.proc_root = "/proc", .epoch = 7};
	uint64_t ufp[2] = {
		(uint64_t)(uintptr_t)&feat_marker_fn + 4,
		(uint64_t)(uintptr_t)&getpid + 2,
	};
	const struct cpa_frames *f;
	const struct cpa_uframe *uf;
	struct env e;
	int n, i;

	env_init(&e, &o); /* arena first: the peer is in it */
	unwindd__free(e.u);
	o.peer = e.symd;
	__atomic_store_n(&e.symd->generation, 5, __ATOMIC_RELAXED);
	ck_assert_int_eq(unwindd__new(&o, &e.in, &e.out, e.st, &e.u), 0);
	/* A symd generation that changes before our first DICT_RESET changes
	 * nothing: that reset covers it. */
	__atomic_store_n(&e.symd->generation, 6, __ATOMIC_RELAXED);

	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 2, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 64);
	ck_assert_int_eq(count_type(recs, n, CPA_REC_DICT_RESET), 1);
	ck_assert_uint_eq(((const struct cpa_dict_reset *)recs[0].data)->epoch, 7);
	ck_assert_int_eq(count_type(recs, n, CPA_REC_MODULE), 2);

	/* Same symd: nothing re-sent. */
	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 2, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 64);
	ck_assert_int_eq(n, 1);
	ck_assert_int_eq(recs[0].type, CPA_REC_FRAMES);

	/* symd restarted: a new epoch, and the modules defined again before
	 * the FRAMES that use them. */
	__atomic_store_n(&e.symd->generation, 7, __ATOMIC_RELAXED);
	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 2, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 64);
	ck_assert_int_eq(n, 4);
	ck_assert_int_eq(recs[0].type, CPA_REC_DICT_RESET);
	ck_assert_uint_eq(((const struct cpa_dict_reset *)recs[0].data)->epoch, 8);
	ck_assert_int_eq(recs[1].type, CPA_REC_MODULE);
	ck_assert_int_eq(recs[2].type, CPA_REC_MODULE);
	ck_assert_int_eq(recs[3].type, CPA_REC_FRAMES);
	f = nth_frames(recs, n, 0);
	uf = (const void *)(f + 1);
	ck_assert_uint_eq(f->n_uframes, 2);
	for (i = 0; i < 2; i++)
		ck_assert_ptr_nonnull(find_module(recs, n, uf[i].module_id));
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_MODULES), 4);

	/* And only once per restart. */
	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 2, NULL, 0);
	run_all(&e);
	n = pull_all(&e, recs, 64);
	ck_assert_int_eq(n, 1);
	env_free(&e);
}
END_TEST

/* ---------------------------------------------------------------- env filter */

static char tmpdir[256];

static void tmp_make(void)
{
	test_scratch_in(tmpdir, sizeof(tmpdir), "unwindd-test");
}

static void tmp_remove(void)
{
	test_rm_rf(tmpdir);
}

/* proc/<pid>/environ in the fixture tree: NUL-separated KEY=VALUE. */
static void write_environ(uint32_t pid, const char *const *vars)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/proc/%u", tmpdir, pid);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/proc/%u/environ", tmpdir, pid);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	for (; *vars; vars++)
		fwrite(*vars, 1, strlen(*vars) + 1, f);
	fclose(f);
}

static void sample_kind_check(struct env *e, uint32_t pid, bool unwound)
{
	static struct outrec recs[16];
	uint64_t ufp[1] = {0x401000};
	uint64_t k[2] = {0xffffffff81000010ull, 0xffffffff81000020ull};
	const struct cpa_frames *f;
	int n;

	push_sample(e, pid, CPA_SF_USER_REGS, ufp, 1, k, 2);
	run_all(e);
	n = pull_all(e, recs, 16);
	f = nth_frames(recs, n, 0);
	ck_assert_ptr_nonnull(f);
	ck_assert_uint_eq(f->n_kframes, 2);
	ck_assert_mem_eq(f + 1, k, sizeof(k));
	if (unwound) {
		/* No maps in the fixture: the leaf as an unknown frame. */
		ck_assert_msg(f->n_uframes == 1, "pid %u not unwound", pid);
		ck_assert_uint_eq(f->stop_reason, CPA_STOP_NO_MAP);
	} else {
		ck_assert_msg(f->n_uframes == 0, "pid %u unwound", pid);
		ck_assert_uint_eq(f->stop_reason, CPA_STOP_NONE);
		ck_assert(!(f->flags & CPA_SF_UNWIND_PARTIAL));
	}
}

START_TEST(test_env_filter)
{
	static const char *const e_blue[] = {"HOME=/", "CPA_APP=blue", NULL};
	static const char *const e_green[] = {"CPA_APP=green", NULL};
	/* Key order decides, not environ order: CPA_ENV is the first key. */
	static const char *const e_both[] = {"CPA_APP=green", "CPA_ENV=red", NULL};
	static const char *const e_none[] = {"PATH=/bin", "CPA_APPX=blue", "XCPA_APP=blue", NULL};
	static const char *const e_red[] = {"CPA_APP=red", NULL};
	char root[300], path[400];
	struct unwindd_opts o = {.env_keys = "CPA_ENV,CPA_APP", .env_values = "red,blue"};
	struct env e;

	tmp_make();
	snprintf(root, sizeof(root), "%s/proc", tmpdir);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	write_environ(100, e_blue);
	write_environ(101, e_green);
	write_environ(102, e_both);
	write_environ(103, e_none);
	o.proc_root = root;
	env_init(&e, &o);
	sample_kind_check(&e, 100, true);
	sample_kind_check(&e, 101, false);
	sample_kind_check(&e, 102, true);
	sample_kind_check(&e, 103, false); /* SYSTEM */
	sample_kind_check(&e, 104, false); /* no environ at all: SYSTEM */
	ck_assert_uint_eq(unwindd__env_skipped(e.u), 3);
	ck_assert_uint_eq(unwindd__nr_envs(e.u), 5);
	/* Filtered samples never touched the maps cache. */
	ck_assert_uint_eq(shm_stage__cnt(e.st, UNW_CNT_MAPS_REFRESH), 2);

	/* Read once per pid: a changed file does not change the decision... */
	write_environ(101, e_red);
	sample_kind_check(&e, 101, false);
	/* ...until exec gives the process a new environment. */
	push_task(&e, 101, CPA_TASK_EXEC);
	run_all(&e);
	pull_all(&e, (struct outrec[4]){}, 4);
	sample_kind_check(&e, 101, true);

	/* Exit: kept for the grace period (queued samples), then swept. */
	push_task(&e, 100, CPA_TASK_EXIT);
	run_all(&e);
	pull_all(&e, (struct outrec[4]){}, 4);
	unlink((snprintf(path, sizeof(path), "%s/100/environ", root), path));
	sample_kind_check(&e, 100, true);
	unwindd__tick(e.u, unwindd__now(e.u) + 3 * NSEC_PER_SEC);
	ck_assert_uint_eq(unwindd__nr_envs(e.u), 4);
	sample_kind_check(&e, 100, false); /* re-read: gone, so SYSTEM */
	env_free(&e);

	/* SYSTEM may be listed; no --record_env_name: everyone is SYSTEM. */
	o.env_values = "SYSTEM";
	o.env_keys = "";
	env_init(&e, &o);
	sample_kind_check(&e, 100, true);
	sample_kind_check(&e, 102, true);
	env_free(&e);
	tmp_remove();

	/* Lists: exact items only. */
	ck_assert(unwindd__list_has("a,bb,c", "bb", 2));
	ck_assert(!unwindd__list_has("a,bb,c", "b", 1));
	ck_assert(!unwindd__list_has("a,bb,c", "bbc", 3));
	ck_assert(unwindd__list_has("a,bb,c", "c", 1));
	ck_assert(!unwindd__list_has("", "", 0));
}
END_TEST

/* ---------------------------------------------------------------- dump + replay */

/* Nested so the live stack has a few frames of our own. */
__attribute__((noinline)) static void sample_deep(struct env *e, uint8_t *stack, int depth)
{
	if (depth > 0) {
		sample_deep(e, stack, depth - 1);
		__asm__ volatile("" ::: "memory"); /* not a tail call */
		return;
	}
	take_sample(e, stack, 8192);
}

struct rframe {
	uint64_t pc, off;
	unsigned int flags;
	char mod[512];
};

/* Run the replay tool; returns its exit status, output in out. */
static int run_replay(const char *dump, const char *extra, char *out, size_t len)
{
	const char *bd = getenv("CPA_BUILD_DIR");
	char cmd[2048];
	size_t n = 0;
	FILE *p;
	int st;

	snprintf(cmd, sizeof(cmd), "%s/bin/cpa-unwind-replay '%s' %s 2>&1", bd ? bd : ".", dump,
		 extra);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	while (n + 1 < len) {
		size_t r = fread(out + n, 1, len - n - 1, p);

		if (!r)
			break;
		n += r;
	}
	out[n] = 0;
	st = pclose(p);
	ck_assert(WIFEXITED(st));
	return WEXITSTATUS(st);
}

/* The frames of replayed sample `which` (0-based) from the tool's output. */
static int parse_replay(const char *out, int which, char *stop, struct rframe *fr, int max)
{
	const char *l = out;
	int n = 0, seen = -1;

	while (l && *l) {
		const char *nl = strchr(l, '\n');
		unsigned int idx;

		if (!strncmp(l, "sample ", 7)) {
			seen++;
			if (seen == which) {
				const char *s = strstr(l, " stop=");

				ck_assert_ptr_nonnull(s);
				sscanf(s, " stop=%31s", stop);
			}
		} else if (seen == which && sscanf(l, "  #%u", &idx) == 1) {
			struct rframe *f = &fr[n];
			const char *m = strstr(l, " mod=");
			unsigned long long pc, off;

			ck_assert_int_lt(n, max);
			ck_assert_int_eq(sscanf(l, "  #%u pc=%llx off=%llx flags=%x", &idx, &pc,
						&off, &f->flags),
					 4);
			ck_assert_uint_eq(idx, (unsigned int)n);
			f->pc = pc;
			f->off = off;
			ck_assert_ptr_nonnull(m);
			snprintf(f->mod, sizeof(f->mod), "%.*s",
				 (int)((nl ? nl : m + strlen(m)) - (m + 5)), m + 5);
			n++;
		}
		l = nl ? nl + 1 : NULL;
	}
	return n;
}

static void mod_path(const struct outrec *recs, int n, const struct cpa_uframe *f, char *buf,
		     size_t len)
{
	const struct cpa_module_def *m = find_module(recs, n, f->module_id);

	if (f->flags & CPA_UF_VDSO) {
		snprintf(buf, len, "[vdso]");
		return;
	}
	ck_assert_ptr_nonnull(m);
	snprintf(buf, len, "%.*s", (int)m->path_len, (const char *)(m + 1));
}

START_TEST(test_dump_replay_equals_live)
{
	static struct outrec recs[64];
	static uint8_t stack[16384];
	static char out[65536];
	static struct rframe fr[CPA_MAX_UFRAMES + 1];
	struct unwindd_opts o = {.proc_root = "/proc"};
	const char *bd = getenv("CPA_BUILD_DIR");
	uint64_t ufp[2] = {(uint64_t)(uintptr_t)&feat_marker_fn + 4,
			   (uint64_t)(uintptr_t)&getpid + 2};
	char dump[400], exe[1024], stop[32];
	struct udump_reader *rd;
	struct udump_rec rec;
	int n, i, j, types[8] = {0};
	struct env e;

	snprintf(exe, sizeof(exe), "%s/bin/cpa-unwind-replay", bd ? bd : ".");
	ck_assert_msg(access(exe, X_OK) == 0, "%s not built", exe);
	tmp_make();
	snprintf(dump, sizeof(dump), "%s/self.dump", tmpdir);
	o.debug_pid = (uint32_t)getpid();
	o.debug_freq = 2;
	o.debug_path = dump;
	env_init(&e, &o);
	ck_assert_ptr_nonnull(unwindd__dump(e.u));

	/* Samples 1 and 3 of our pid are dumped (every 2nd, the first
	 * included); the FP-only one in between and another pid's are not. */
	sample_deep(&e, stack, 3);
	push_sample(&e, (uint32_t)getpid(), CPA_SF_USER_REGS, ufp, 2, NULL, 0);
	push_sample(&e, 1, CPA_SF_USER_REGS, ufp, 1, NULL, 0);
	sample_deep(&e, stack, 5);
	ck_assert_int_eq(run_all(&e), 4);
	n = pull_all(&e, recs, 64);
	ck_assert_uint_eq(udump__samples(unwindd__dump(e.u)), 2);
	ck_assert_uint_eq(udump__errors(unwindd__dump(e.u)), 0);
	ck_assert_uint_eq(shm_stage__cnt(e.st, SHM_CNT_ERRORS), 0);
	unwindd__free(e.u); /* closes the dump */
	e.u = NULL;

	/* The file: header, then VDSO, MAPS, MODULEs, SAMPLE, RESULT... */
	ck_assert_int_eq(udump_reader__open(dump, &rd), 0);
	ck_assert_uint_eq(udump_reader__hdr(rd)->version_major, UDUMP_VERSION_MAJOR);
	ck_assert_uint_eq(udump_reader__hdr(rd)->pid, (uint32_t)getpid());
	ck_assert_uint_eq(udump_reader__hdr(rd)->freq, 2);
	while ((i = udump_reader__next(rd, &rec)) > 0) {
		ck_assert_uint_lt(rec.type, 8);
		types[rec.type]++;
		if (rec.type == UDUMP_SAMPLE) {
			/* The raw record, bytes as they were in ring 0. */
			const struct cpa_sample *s = rec.data;

			ck_assert(cpa_rec_sample_ok(s, rec.len));
			ck_assert_uint_gt(s->stack_len, 1024);
			ck_assert_uint_le(s->stack_len, 8192);
			ck_assert_str_eq(s->comm, "selftest");
		}
	}
	ck_assert_int_eq(i, 0);
	udump_reader__free(rd);
	ck_assert_int_eq(types[UDUMP_SAMPLE], 2);
	ck_assert_int_eq(types[UDUMP_RESULT], 2);
	ck_assert_int_eq(types[UDUMP_MAPS], 1);	  /* the cache did not re-read them */
	ck_assert_int_ge(types[UDUMP_MODULE], 1); /* ours; libc too when the copy reaches it */
	ck_assert_int_eq(types[UDUMP_VDSO], 1);

	/* Replayed offline: the same frames as live, sample by sample. */
	ck_assert_int_eq(run_replay(dump, "--check", out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "live_match=2/2") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "summary: samples=2 ") != NULL, "%s", out);
	for (i = 0; i < 2; i++) {
		const struct cpa_frames *f = nth_frames(recs, n, i == 0 ? 0 : 3);
		const struct cpa_uframe *uf = (const void *)(f + 1);
		static const char *const names[] = {"none",  "end",  "no_map", "no_cfi", "read",
						    "depth", "anon", "bad",    "fp"};
		int nr = parse_replay(out, i, stop, fr, CPA_MAX_UFRAMES + 1);

		ck_assert_ptr_nonnull(f);
		ck_assert_str_eq(f->comm, "selftest");
		/* More than our own nesting: the walk went through our callers. */
		ck_assert_uint_gt(f->n_uframes, (unsigned int)(i == 0 ? 4 : 6));
		ck_assert_int_eq(nr, f->n_uframes);
		ck_assert_str_eq(stop, names[f->stop_reason]);
		for (j = 0; j < nr; j++) {
			char live_mod[512];

			ck_assert_uint_eq(fr[j].pc, uf[j].pc);
			ck_assert_uint_eq(fr[j].off, uf[j].offset);
			ck_assert_uint_eq(fr[j].flags, uf[j].flags);
			mod_path(recs, n, &uf[j], live_mod, sizeof(live_mod));
			ck_assert_str_eq(fr[j].mod, live_mod);
		}
	}
	/* The symbol of our own frames comes from .symtab. */
	ck_assert_msg(strstr(out, "sym=sample_deep+0x") != NULL, "%s", out);
	ck_assert_msg(strstr(out, "sym=take_sample") != NULL, "%s", out);

	/* --binary-root: the same libc, but another program under our path.
	 * The build-id check refuses it, so our frames do not replay past the
	 * leaf's module and --check says the samples differ. */
	{
		char arg[400], cmd[4096], self[1024];
		ssize_t sl = readlink("/proc/self/exe", self, sizeof(self) - 1);

		ck_assert_int_gt(sl, 0);
		self[sl] = 0;
		snprintf(cmd, sizeof(cmd),
			 "set -e; r='%s/root'; mkdir -p \"$r$(dirname '%s')\" "
			 "\"$r/usr/lib/x86_64-linux-gnu\"; cp /bin/true \"$r%s\"; "
			 "cp /usr/lib/x86_64-linux-gnu/libc.so.6 \"$r/usr/lib/x86_64-linux-gnu/\"",
			 tmpdir, self, self);
		ck_assert_int_eq(system(cmd), 0);
		snprintf(arg, sizeof(arg), "--check --binary-root '%s/root'", tmpdir);
		ck_assert_int_eq(run_replay(dump, arg, out, sizeof(out)), 1);
		ck_assert_msg(strstr(out, "not the same binary") != NULL, "%s", out);
		ck_assert_msg(strstr(out, "live_match=0/2") != NULL, "%s", out);
		ck_assert_msg(strstr(out, "live=differs") != NULL, "%s", out);
	}

	/* A torn tail (crash mid-write): everything before it still replays. */
	{
		struct stat sb;

		ck_assert_int_eq(stat(dump, &sb), 0);
		ck_assert_int_eq(truncate(dump, sb.st_size - 20), 0);
		ck_assert_int_eq(run_replay(dump, "", out, sizeof(out)), 0);
		ck_assert_msg(strstr(out, "torn") != NULL, "%s", out);
		ck_assert_msg(strstr(out, "summary: samples=2 ") != NULL, "%s", out);
	}
	/* Not a dump at all. */
	{
		char junk[400];
		int fd;

		snprintf(junk, sizeof(junk), "%s/junk", tmpdir);
		fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(write(fd, "not a dump, just 40 bytes of text......\n", 40), 40);
		close(fd);
		ck_assert_int_eq(run_replay(junk, "", out, sizeof(out)), 2);
		ck_assert_msg(strstr(out, "not a cpa unwind dump") != NULL, "%s", out);
		/* ...and unwindd refuses to append to it. */
		ck_assert_int_eq(udump__open(junk, 1, 1, 0, &(struct udump *){NULL}), -EBADMSG);
	}
	shm_arena__free(e.a);
	tmp_remove();
}
END_TEST

START_TEST(test_dump_cap_and_write_errors)
{
	static struct outrec recs[64];
	static uint8_t stack[16384];
	struct unwindd_opts o = {.proc_root = "/proc"};
	char dump[400];
	struct rlimit rl;
	struct stat sb;
	struct env e;
	int n, i;

	tmp_make();
	snprintf(dump, sizeof(dump), "%s/cap.dump", tmpdir);
	o.debug_pid = (uint32_t)getpid();
	o.debug_freq = 1;
	o.debug_path = dump;
	o.debug_max_bytes = 64 * 1024; /* the vDSO, maps and ~3 samples of 8 KiB */
	env_init(&e, &o);
	for (i = 0; i < 12; i++)
		sample_deep(&e, stack, 1);
	run_all(&e);
	n = pull_all(&e, recs, 64);
	/* Cap reached: dumping stopped, unwinding did not. */
	ck_assert_int_eq(count_type(recs, n, CPA_REC_FRAMES), 12);
	ck_assert(udump__stopped(unwindd__dump(e.u)));
	ck_assert_uint_gt(udump__samples(unwindd__dump(e.u)), 0);
	ck_assert_uint_lt(udump__samples(unwindd__dump(e.u)), 12);
	ck_assert_int_eq(stat(dump, &sb), 0);
	ck_assert_uint_le((uint64_t)sb.st_size, o.debug_max_bytes);
	ck_assert_uint_eq(udump__bytes(unwindd__dump(e.u)), (uint64_t)sb.st_size);
	env_free(&e);

	/* Write errors (file size limit, like a full disk): counted, the stage
	 * goes on. Only the stage runs under the limit: check's own result
	 * file must not hit it. */
	unlink(dump);
	o.debug_max_bytes = 0;
	env_init(&e, &o); /* the arena is a memfd: create it before the limit */
	for (i = 0; i < 5; i++)
		sample_deep(&e, stack, 1);
	signal(SIGXFSZ, SIG_IGN);
	ck_assert_int_eq(getrlimit(RLIMIT_FSIZE, &rl), 0);
	{
		struct rlimit lim = {.rlim_cur = 6000, .rlim_max = rl.rlim_max};
		int got, total = 0;

		if (setrlimit(RLIMIT_FSIZE, &lim) < 0)
			abort();
		while ((got = unwindd__batch(e.u, UNWINDD_BATCH)) > 0)
			total += got;
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			abort();
		ck_assert_int_eq(got, 0);
		ck_assert_int_eq(total, 5);
	}
	n = pull_all(&e, recs, 64);
	ck_assert_int_eq(count_type(recs, n, CPA_REC_FRAMES), 5);
	ck_assert_uint_ge(udump__errors(unwindd__dump(e.u)), 1);
	ck_assert_uint_ge(shm_stage__cnt(e.st, SHM_CNT_ERRORS), 1);
	ck_assert_uint_eq(udump__samples(unwindd__dump(e.u)), 0);
	env_free(&e);
	tmp_remove();
}
END_TEST

/* ---------------------------------------------------------------- process */

static int count_in_file(const char *path, const char *what)
{
	char buf[8192];
	const char *p = buf;
	ssize_t len;
	int fd = open(path, O_RDONLY | O_CLOEXEC), n = 0;

	if (fd < 0)
		return 0;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = 0;
	while ((p = strstr(p, what))) {
		n++;
		p += strlen(what);
	}
	return n;
}

START_TEST(test_process_bench_lines)
{
	const char *bd = getenv("CPA_BUILD_DIR");
	char path[1024], errpath[400], buf[8192];
	struct shm_layout l;
	struct shm_arena *a;
	struct shm_stage *st;
	struct cpa_config *cfg;
	ssize_t len;
	int status, fd, i;
	pid_t pid;

	snprintf(path, sizeof(path), "%s/bin/unwindd", bd ? bd : ".");
	ck_assert_msg(access(path, X_OK) == 0, "%s not built", path);
	tmp_make();
	snprintf(errpath, sizeof(errpath), "%s/stderr", tmpdir);
	shm_layout__default(&l, 4096, 16);
	ck_assert_int_eq(shm_arena__create(&l, &a), 0);
	cfg = shm_arena__config(a);
	cfg->flags |= CPA_CFG_BENCH;
	cfg->record_interval_s = 1;
	st = shm_arena__stage(a, SHM_STAGE_UNWINDD);
	st->generation = 2;
	shm_arena__stage(a, SHM_STAGE_SYMD)->generation = 1;
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int afd = dup(shm_arena__fd(a));
		int efd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

		if (afd < 0 || efd < 0 || dup2(afd, 3) < 0 || dup2(efd, 2) < 0)
			_exit(100);
		execl(path, path, (char *)NULL);
		_exit(101);
	}
	for (i = 0; i < 500 && shm_stage__state(st) != SHM_STATE_RUNNING; i++)
		usleep(10000);
	ck_assert_int_eq(shm_stage__state(st), SHM_STATE_RUNNING);
	/* symd restarts while we run (after our first DICT_RESET went out):
	 * the stage notices at its next batch. */
	usleep(100 * 1000);
	__atomic_store_n(&shm_arena__stage(a, SHM_STAGE_SYMD)->generation, 2, __ATOMIC_RELAXED);
	/* Two intervals of one second, idle: wait for two histogram lines
	 * (the machine may be slow: the deadline is generous). */
	for (i = 0; i < 100 && count_in_file(errpath, "bench: hist_us ") < 2; i++)
		usleep(100 * 1000);
	ck_assert_int_eq(kill(pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);

	fd = open(errpath, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	ck_assert_int_gt(len, 0);
	buf[len] = 0;
	ck_assert_msg(strstr(buf, "unwindd: bench: unwind statistics every 1 s") != NULL, "%s",
		      buf);
	{
		const char *p = buf;
		int n1 = 0, n2 = 0;

		while ((p = strstr(p, "bench: "))) {
			n1 += !strncmp(p, "bench: 1.", 9) || !strncmp(p, "bench: 2.", 9);
			n2 += !strncmp(p, "bench: hist_us ", 15);
			p += 7;
		}
		ck_assert_msg(n1 >= 2 && n2 >= 2, "%s", buf);
	}
	ck_assert_msg(strstr(buf, "samples 0 rate 0.0/s") != NULL, "%s", buf);
	ck_assert_msg(strstr(buf, "symd restarted (generation 2): new epoch 0x200000001") != NULL,
		      "%s", buf);
	{
		struct shm_ring_cons c;
		struct shm_msg m;
		uint64_t epochs[4];
		int n = 0;

		ck_assert_int_eq(shm_arena__open_cons(a, SHM_RING_UNWIND, &c), 0);
		while (shm_ring__peek_sc(&c, &m) == 0) {
			ck_assert_int_eq(m.type, CPA_REC_DICT_RESET);
			ck_assert_int_lt(n, 4);
			epochs[n++] = ((const struct cpa_dict_reset *)m.data)->epoch;
		}
		ck_assert_int_eq(n, 2);
		ck_assert_uint_eq(epochs[0], 2ull << 32);
		ck_assert_uint_eq(epochs[1], (2ull << 32) + 1);
	}
	shm_arena__free(a);
	tmp_remove();
}
END_TEST

static Suite *features_suite(void)
{
	Suite *s = suite_create("unwindd_features");
	TCase *tc;

	TEST_TCASE(s, "bench", test_bench_buckets_and_format, test_bench_stage);

	TEST_TCASE(s, "epoch", test_symd_restart_new_epoch);

	TEST_TCASE(s, "env", test_env_filter);

	tc = TEST_TCASE(s, "dump", test_dump_replay_equals_live, test_dump_cap_and_write_errors);
	tcase_set_timeout(tc, 60);

	tc = TEST_TCASE(s, "process", test_process_bench_lines);
	tcase_set_timeout(tc, 60);
	return s;
}

int main(void)
{
	return test_run_suite(features_suite());
}
