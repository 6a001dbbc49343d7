// SPDX-License-Identifier: MIT
/*
 * `cpa show` (export/show.c) over a store written by the store library: the
 * lines scripts parse, byte for byte, the folded .prof layout, labels,
 * filters and errors.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "export/export.h"
#include "export/show.h"
#include "common/log.h"
#include "shm/stage.h"
#include "storer/store.h"
#include "test_store_util.h"
#include "test_util.h"

#define NSTACKS	   5
#define NSEC	   10
#define RATE_OF(s) (s) /* stack s is sampled s times a second */

static char *root;
static char store[1024];
static char out[4096];

/*
 * Stack MARKER_STACK as symd sends an unwind stop: kernel frame 1, user
 * frames 30 (leaf) and 31, then the marker frame at the root end.
 */
#define MARKER_STACK  50
#define UNKNOWN_STACK 51 /* like 50, with a frame symd never defined in the middle */
#define MARKER_FRAME  500
static void marker_stack(struct store_writer *w)
{
	static const char name[] = "[unwind stopped: no cfi]";
	struct {
		struct cpa_str_def d;
		char s[64];
	} str = {.d = {.id = 900, .len = sizeof(name) - 1}};
	struct cpa_frame_def f = {.id = MARKER_FRAME, .name_id = 900, .flags = CPA_FF_MARKER};
	struct cpa_stack_def sd = {.id = MARKER_STACK, .n_frames = 4, .n_kframes = 1};
	uint32_t ids[] = {1, T_KFRAMES + 30, T_KFRAMES + 31, MARKER_FRAME};

	struct cpa_stack_def ud = {.id = UNKNOWN_STACK, .n_frames = 4, .n_kframes = 1};
	uint32_t uids[] = {1, T_KFRAMES + 30, 999, T_KFRAMES + 31}; /* 999: never defined */

	memcpy(str.s, name, sizeof(name) - 1);
	store_writer__def_str(w, &str.d, str.s);
	store_writer__def_frame(w, &f);
	store_writer__def_stack(w, &sd, ids);
	store_writer__def_stack(w, &ud, uids);
}

/* 10 seconds from 10:00:00, stacks 1..5 sampled s times a second, a stack
 * ending in an unwind stop at 10:00:05, and a loss record at 10:00:03. */
static void build_store(void)
{
	struct store_writer_opts o = {.record_interval = 1};
	struct store_writer *w;
	uint64_t seq = 1, base = t_base_ns();
	uint32_t sec, s, k;

	w = t_store_new(&o, &root);
	t_defs(w, NSTACKS, 0);
	marker_stack(w);
	for (sec = 0; sec < NSEC; sec++) {
		for (s = 1; s <= NSTACKS; s++)
			for (k = 0; k < RATE_OF(s); k++) {
				struct cpa_sample_out smp;

				t_sample(&smp, seq++,
					 base + sec * T_NS + (s * 100 + k * 10) * 1000000ULL, s, 0);
				ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
			}
		if (sec == 5) {
			struct cpa_sample_out smp;

			t_sample(&smp, seq++, base + sec * T_NS + 990000000ULL, MARKER_STACK, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
			t_sample(&smp, seq++, base + sec * T_NS + 990000000ULL, UNKNOWN_STACK, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		}
		if (sec == 3)
			ck_assert_int_eq(t_add_loss(w, seq++, base + sec * T_NS + 1000, 7,
						    SHM_STAGE_UNWINDD),
					 0);
	}
	t_store_close(w, root, store, sizeof(store));
}

static void setup(void)
{
	t_utc();
	build_store();
}

static void teardown(void)
{
	t_rm_rf(root);
	free(root);
}

static struct show_opts defaults(void)
{
	struct show_opts o = {.read = store,
			      .output_num = 1,
			      .target_pid = -1,
			      .target_cgroup_id = -1,
			      .probe_id = -1};
	return o;
}

/* Run show_run with stdout captured into out[]. */
static int run(const struct show_opts *o)
{
	char path[1100];
	int fd, saved, r;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stdout", root);
	fflush(stdout);
	fd = open(path, O_CREAT | O_TRUNC | O_RDWR, 0644);
	ck_assert_int_ge(fd, 0);
	saved = dup(1);
	dup2(fd, 1);
	r = show_run(o);
	fflush(stdout);
	dup2(saved, 1);
	close(saved);
	n = pread(fd, out, sizeof(out) - 1, 0);
	out[n > 0 ? n : 0] = 0;
	close(fd);
	return r;
}

/* o writes its .prof to root/name: that path in path[len]. */
static void prof_to(struct show_opts *o, char *path, size_t len, const char *name)
{
	snprintf(path, len, "%s/%s", root, name);
	o->output_prof = path;
}

/* The folded line of stack s with the default labels. */
static void folded(uint32_t s, const char *labels, char *buf, size_t len)
{
	uint32_t nk = T_STACK_KFRAMES(s), j;
	char name[160];

	snprintf(buf, len, "%s", labels);
	/* root first: the user frames, then the kernel ones (j < nk) */
	for (j = T_STACK_FRAMES(s); j-- > 0;) {
		t_frame_name(t_stack_frame(s, j), name, sizeof(name));
		strcat(buf, name);
		strcat(buf, j < nk ? "_[k];" : ";");
	}
}

struct prof {
	char lines[64][8192];
	unsigned long long counts[64];
	int n;
};

/* Parse a .prof: every line "stack; COUNT". */
static void read_prof(const char *path, struct prof *p)
{
	FILE *f = fopen(path, "r");
	char line[8192];

	ck_assert_msg(f != NULL, "no %s", path);
	p->n = 0;
	while (fgets(line, sizeof(line), f)) {
		char *sp = strrchr(line, ' ');

		ck_assert_int_lt(p->n, 64);
		ck_assert_ptr_nonnull(sp);
		ck_assert_msg(sp > line && sp[-1] == ';', "no '; ' before the count: %s", line);
		ck_assert_int_eq(line[strlen(line) - 1], '\n');
		*sp = 0;
		snprintf(p->lines[p->n], sizeof(p->lines[0]), "%s", line);
		p->counts[p->n] = strtoull(sp + 1, NULL, 10);
		p->n++;
	}
	fclose(f);
}

static unsigned long long prof_count(const struct prof *p, const char *line)
{
	int i;

	for (i = 0; i < p->n; i++)
		if (!strcmp(p->lines[i], line))
			return p->counts[i];
	return 0;
}

START_TEST(test_show_range)
{
	struct show_opts o = defaults();

	o.show_range = true;
	ck_assert_int_eq(run(&o), 0);
	/* Last sample: stack 5, k 4 of 10:00:09 -> 09.540. */
	ck_assert_str_eq(out,
			 "Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records Num: 10\n");
	/* The store root works too, also when a later run captured nothing (its
	 * empty cpa_261120_start_110000 is newer). */
	{
		struct store_writer_opts wo = {.root = root, .record_interval = 1};
		struct store_writer *w;

		ck_assert_int_eq(store_writer__new(&wo, &w), 0);
		store_writer__set_run_id(w, t_base_ns() + 3600 * T_NS);
		store_writer__free(w);
	}
	o.read = root;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(out,
			 "Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records Num: 10\n");
}
END_TEST

/* Run the export and check CPA's two lines: the window asked, the rows written. */
static void export_expect(const struct show_opts *o, const char *path, const char *window,
			  const char *written)
{
	char want[2048];

	ck_assert_int_eq(run(o), 0);
	snprintf(want, sizeof(want),
		 "Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records Num: 10\n"
		 "Export Record Time From [ %s ]\nWrite  [ %s ] Record to %s, Stack Type 6\n",
		 window, written, path);
	ck_assert_str_eq(out, want);
}

START_TEST(test_show_export)
{
	struct show_opts o = defaults();
	char path[1100], line[8192];
	struct prof p;
	uint32_t s;

	prof_to(&o, path, sizeof(path), "out.prof");
	o.starttime = "10:00:02";
	o.output_num = 3;
	export_expect(&o, path, "10:00:02.000 - 10:00:05.000", "10:00:02.000 - 10:00:05.000");
	read_prof(path, &p);
	ck_assert_int_eq(p.n, 6);
	for (s = 1; s <= NSTACKS; s++) {
		folded(s,
		       s % 3 == 2   ? "ENV_A;db:1002;"
		       : s % 3 == 1 ? "ENV_A;app:1001;"
				    : "ENV_A;app:1000;",
		       line, sizeof(line));
		ck_assert_msg(prof_count(&p, line) == 3 * RATE_OF(s), "stack %u: %s", s, line);
	}

	/* --endtime decides the number of records. */
	o.endtime = "10:00:04";
	o.output_num = 1;
	export_expect(&o, path, "10:00:02.000 - 10:00:04.000", "10:00:02.000 - 10:00:04.000");
	read_prof(path, &p);
	folded(5, "ENV_A;db:1002;", line, sizeof(line));
	ck_assert_uint_eq(prof_count(&p, line), 2 * 5);

	/* Milliseconds as docs/cli.md says; rows are per second, so the window
	 * is the whole seconds the two times fall into: 2, 3 and 4. */
	o.starttime = "10:00:02.999";
	o.endtime = "10:00:04.01";
	export_expect(&o, path, "10:00:02.000 - 10:00:05.000", "10:00:02.000 - 10:00:05.000");
	read_prof(path, &p);
	folded(5, "ENV_A;db:1002;", line, sizeof(line));
	ck_assert_uint_eq(prof_count(&p, line), 3 * 5);
	o.starttime = "10:00:02.500";
	o.endtime = "10:00:02.600"; /* within one second: that second */
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	ck_assert_uint_eq(prof_count(&p, line), 5);
}
END_TEST

START_TEST(test_show_default_name)
{
	struct show_opts o = defaults();
	char cwd[1024];
	struct prof p;

	ck_assert_ptr_nonnull(getcwd(cwd, sizeof(cwd)));
	ck_assert_int_eq(chdir(root), 0);
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(
		out,
		"Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records Num: 10\n"
		"Export Record Time From [ 10:00:00.000 - 10:00:01.000 ]\n"
		"Write  [ 10:00:00.000 - 10:00:01.000 ] Record to cpa_10:00:00.000_1.prof, Stack Type 5\n");
	read_prof("cpa_10:00:00.000_1.prof", &p);
	ck_assert_int_eq(p.n, 5);
	ck_assert_int_eq(chdir(cwd), 0);
}
END_TEST

START_TEST(test_show_labels)
{
	struct show_opts o = defaults();
	char path[1100], line[8192];
	struct prof p;

	prof_to(&o, path, sizeof(path), "l.prof");
	o.no_pid = true;
	o.no_env = true;
	o.show_thread_name = true;
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	/* Stacks 1 and 4 share pid 1001, process "app": merged by the label. */
	folded(1, "app;worker;", line, sizeof(line));
	ck_assert_uint_eq(prof_count(&p, line), 1);
	folded(5, "db;worker;", line, sizeof(line));
	ck_assert_uint_eq(prof_count(&p, line), 5);
}
END_TEST

/* The raw label alone, then the frames: CPA's columns, byte for byte. */
START_TEST(test_show_raw)
{
	struct show_opts o = defaults();
	char path[1100], line[8192];
	struct prof p;
	int i;

	prof_to(&o, path, sizeof(path), "raw.prof");
	o.show_raw = true;
	o.show_thread_name = true; /* the raw label has the thread name already */
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	/* Stack 5: thread "worker", process "db", cgroup 2^32 + 1, cpu 1, pid 1002. */
	folded(5, "worker         db             -4294967297-1-1002|ENV_A;", line, sizeof(line));
	ck_assert_uint_eq(prof_count(&p, line), 5);
	folded(4, "worker         app            -4294967296-0-1001|ENV_A;", line, sizeof(line));
	ck_assert_uint_eq(prof_count(&p, line), 4);
	ck_assert_int_eq(p.n, NSTACKS);
	for (i = 0; i < p.n; i++) {
		const char *semi = strchr(p.lines[i], ';');

		/* Scripts slice columns 0-15 and 15-30; no other label follows. */
		ck_assert_int_eq(strncmp(p.lines[i], "worker         ", 15), 0);
		ck_assert_int_eq(p.lines[i][30], '-');
		ck_assert_ptr_nonnull(semi);
		ck_assert_int_eq(strncmp(semi - 6, "|ENV_A;", 7), 0);
		ck_assert_ptr_null(strstr(semi, ";ENV_A;"));
		ck_assert_ptr_null(strstr(semi, ":100"));
	}
}
END_TEST

/* Markers are "<# ... #>" frames in the root layer, before any normal frame. */
START_TEST(test_show_markers)
{
	struct show_opts o = defaults();
	char path[1100], frames[4096], line[8192], f31[160], f30[160], k1[160];
	struct prof p;

	prof_to(&o, path, sizeof(path), "m.prof");
	o.starttime = "10:00:03";
	o.output_num = 3;
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	ck_assert_uint_eq(prof_count(&p, "SYSTEM;[lost];<# LOST: UNWINDD DROP RING FULL #>;"), 7);
	/* Stack 50 keeps its marker at the root end: printed first, no _[k]. */
	t_frame_name(T_KFRAMES + 31, f31, sizeof(f31));
	t_frame_name(T_KFRAMES + 30, f30, sizeof(f30));
	t_frame_name(1, k1, sizeof(k1));
	snprintf(frames, sizeof(frames), "<# NO CFI #>;%s;%s;%s_[k];", f31, f30, k1);
	snprintf(line, sizeof(line), "ENV_A;db:1002;%s", frames);
	ck_assert_msg(prof_count(&p, line) == 1, "no %s", line);
	for (int i = 0; i < p.n; i++)
		ck_assert_ptr_null(strstr(p.lines[i], "[unwind"));
	/* A frame whose definition is lost keeps its place: not a marker. */
	snprintf(line, sizeof(line), "ENV_A;app:1000;%s;[unknown frame];%s;%s_[k];", f31, f30, k1);
	ck_assert_msg(prof_count(&p, line) == 1, "no %s", line);

	/* With --show_raw the marker follows the raw label directly. */
	o.show_raw = true;
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	snprintf(line, sizeof(line), "worker         db             -4294967296-0-1002|ENV_A;%s",
		 frames);
	ck_assert_msg(prof_count(&p, line) == 1, "no %s", line);
}
END_TEST

/* More records than the store holds: an error, nothing written. */
START_TEST(test_show_not_enough)
{
	struct show_opts o = defaults();
	char path[1100];

	log_set_level(LOG_LVL_ERROR);
	prof_to(&o, path, sizeof(path), "ne.prof");
	o.output_num = NSEC + 1; /* 10:00:00 .. 10:00:11, the last record is in 10:00:09 */
	ck_assert_int_eq(run(&o), -ENODATA);
	ck_assert_str_eq(out, "Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records "
			      "Num: 10\n");
	ck_assert_int_ne(access(path, F_OK), 0);
	o.output_num = NSEC; /* exactly what there is */
	ck_assert_int_eq(run(&o), 0);
	ck_assert_ptr_nonnull(
		strstr(out, "Export Record Time From [ 10:00:00.000 - 10:00:10.000 ]\n"));
	o.starttime = "10:00:08";
	o.output_num = 3;
	ck_assert_int_eq(run(&o), -ENODATA);
	o.starttime = "10:00:11";
	o.output_num = 1;
	ck_assert_int_eq(run(&o), -ENODATA);
	o.starttime = "10:00:05";
	o.endtime = "10:00:12";
	ck_assert_int_eq(run(&o), -ENODATA);
	/* A start before the first record starts at it: the line says so. */
	o.starttime = "09:59:58";
	o.endtime = NULL;
	o.output_num = 2;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_ptr_nonnull(
		strstr(out, "Export Record Time From [ 10:00:00.000 - 10:00:02.000 ]\n"));
}
END_TEST

/* ---- the real `cpa show` ---- */

/* `cpa show --read <the store> args...` */
#define RUN_BIN(r, ...) \
	test_run_bin(r, "cpa", (const char *const[]){"show", "--read", store, __VA_ARGS__, NULL})

/* What a script sees: the range line on every run, the raw label, the error exit. */
START_TEST(test_show_binary)
{
	static struct test_run r;
	char path[1100], line[8192];
	struct prof p;

	snprintf(path, sizeof(path), "%s/bin.prof", root);
	RUN_BIN(&r, "-B", "10:00:05", "-n", "1", "-o", path, "--show_raw", "1");
	ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
	snprintf(line, sizeof(line),
		 "Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records Num: 10\n"
		 "Export Record Time From [ 10:00:05.000 - 10:00:06.000 ]\n"
		 "Write  [ 10:00:05.000 - 10:00:06.000 ] Record to %s, Stack Type 7\n",
		 path);
	ck_assert_str_eq(r.out, line);
	read_prof(path, &p);
	folded(3, "worker         app            -4294967297-1-1000|ENV_A;", line, sizeof(line));
	ck_assert_uint_eq(prof_count(&p, line), 3);

	RUN_BIN(&r, "-n", "11");
	ck_assert_int_ne(r.code, 0);
	ck_assert_msg(strstr(r.err, "Not Found Enough Records"), "%s", r.err);
	ck_assert_str_eq(r.out, "Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records "
				"Num: 10\n");
	RUN_BIN(&r, "-B", "12:00:00");
	ck_assert_int_ne(r.code, 0);
	ck_assert_msg(strstr(r.err, "Not Found Enough Records"), "%s", r.err);

	/* --show_range names a given -n as unused, the default value too */
	RUN_BIN(&r, "--show_range", "1", "-n", "1");
	ck_assert_int_eq(r.code, 0);
	ck_assert_msg(strstr(r.err, "--show_range prints the store's range only: -n not used"),
		      "%s", r.err);
	RUN_BIN(&r, "--show_range", "1");
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.err, "");

	/* an output the option names that cannot be written: the option named */
	RUN_BIN(&r, "-B", "10:00:05", "-o", "/tmp");
	ck_assert_int_eq(r.code, 1);
	ck_assert_msg(strstr(r.err, "ERROR: -o: open '/tmp': Is a directory"), "%s", r.err);
	RUN_BIN(&r, "-B", "10:00:05", "-o", "/tmp", "--format", "pprof");
	ck_assert_int_eq(r.code, 1);
	ck_assert_msg(strstr(r.err, "ERROR: -o: open '/tmp': Is a directory"), "%s", r.err);
	/* a --diff_base_read that does not exist: that option named, not --read */
	RUN_BIN(&r, "-B", "10:00:05", "-o", path, "--diff_base_start", "10:00:01",
		"--diff_base_read", "/nonexistent-base");
	ck_assert_int_eq(r.code, 1);
	ck_assert_msg(strstr(r.err, "ERROR: failed to open input file: '/nonexistent-base': No "
				    "such file or directory (--diff_base_read: ") &&
			      !strstr(r.err, "(--read: "),
		      "%s", r.err);
}
END_TEST

START_TEST(test_show_filters)
{
	struct show_opts o = defaults();
	char path[1100];
	struct prof p;
	int i;

	prof_to(&o, path, sizeof(path), "f.prof");
	o.output_num = NSEC;
	o.target_pid = 1001; /* stacks 1 and 4 */
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	ck_assert_int_eq(p.n, 2);
	for (i = 0; i < p.n; i++)
		ck_assert_ptr_nonnull(strstr(p.lines[i], ";app:1001;"));

	/* A probe the run did not have (no probe_0 line in conf): an error. */
	o = defaults();
	o.output_prof = path;
	o.output_num = NSEC;
	o.probe_id = 0;
	ck_assert_int_eq(run(&o), -ENOENT);
	/* the range first, as on every run (scripts read it) */
	ck_assert_str_eq(out, "Record Time From [ 10:00:00.100 ] to [ 10:00:09.540 ] Records "
			      "Num: 10\n");

	o = defaults();
	o.output_prof = path;
	o.target_comm = "db";
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	ck_assert_int_eq(p.n, 2); /* stacks 2 and 5 */

	o = defaults();
	o.output_prof = path;
	o.target_cpu = "1"; /* odd stacks */
	o.target_cgroup_id = 0x100000001LL;
	o.target_env = "ENV_A";
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	ck_assert_int_eq(p.n, 3);

	o.target_env = "OTHER";
	ck_assert_int_eq(run(&o), -ENODATA);
}
END_TEST

START_TEST(test_show_errors)
{
	struct show_opts o = defaults();
	char p[1100];

	log_set_level(LOG_LVL_ERROR);
	o.read = "/nonexistent/cpa";
	ck_assert_int_lt(run(&o), 0);
	snprintf(p, sizeof(p), "%s/empty", root);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	o.read = p;
	ck_assert_int_eq(run(&o), -ENOENT);

	o = defaults();
	o.starttime = "25:00:00";
	ck_assert_int_eq(run(&o), -EINVAL);
	o.starttime = "10:00";
	ck_assert_int_eq(run(&o), -EINVAL);
	o.starttime = "10:00:00.1234";
	ck_assert_int_eq(run(&o), -EINVAL);
	o.starttime = "10:00:00.";
	ck_assert_int_eq(run(&o), -EINVAL);
	o.starttime = "11:00:00"; /* no records there */
	ck_assert_int_eq(run(&o), -ENODATA);
	o.starttime = "10:00:05";
	o.endtime = "10:00:04";
	ck_assert_int_eq(run(&o), -EINVAL);
	o = defaults();
	o.output_num = 0;
	ck_assert_int_eq(run(&o), -EINVAL);
	o = defaults();
	o.target_cpu = "3-1";
	ck_assert_int_eq(run(&o), -EINVAL);
	o = defaults();
	prof_to(&o, p, sizeof(p), "no/such/dir/x.prof");
	ck_assert_int_lt(run(&o), 0);
}
END_TEST

/*
 * `cpa monitor --oneshot`'s export: every record of the root's stores, the
 * same lines and counts as `cpa show --show_raw` writes for the whole range
 * (CPA's one-shot file: the raw label first); then store_root__remove()
 * leaves nothing of the root.
 */
START_TEST(test_show_export_root)
{
	struct show_opts o = defaults();
	struct prof *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	char pa[1100], pb[1100];
	int i;

	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	snprintf(pa, sizeof(pa), "%s/show.prof", root);
	snprintf(pb, sizeof(pb), "%s/oneshot.prof", root);
	o.output_num = NSEC;
	o.output_prof = pa;
	o.show_raw = true;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_int_eq(show_export_root(root, pb), 0);
	read_prof(pa, a);
	read_prof(pb, b);
	ck_assert_int_eq(a->n, b->n);
	ck_assert_int_gt(a->n, NSTACKS);
	for (i = 0; i < a->n; i++) {
		ck_assert_str_eq(a->lines[i], b->lines[i]);
		ck_assert_uint_eq(a->counts[i], b->counts[i]);
	}
	ck_assert_int_gt(store_root__remove(root), 0);
	ck_assert_int_eq(access(root, F_OK), -1);
	free(a);
	free(b);
}
END_TEST

/* ---- CPA's behaviours (issue 28): a second store, its own root ---- */

static char logbuf[8192];

static void log_capture(enum log_level lvl, const char *line)
{
	(void)lvl;
	strncat(logbuf, line, sizeof(logbuf) - strlen(logbuf) - 2);
	strcat(logbuf, "\n");
}

/* o from b to e: Not Found Enough Records, the log saying want. */
static void refused_saying(struct show_opts *o, const char *b, const char *e, const char *want)
{
	logbuf[0] = 0;
	o->starttime = b;
	o->endtime = e;
	ck_assert_int_eq(run(o), -ENODATA);
	ck_assert_msg(strstr(logbuf, want), "want '%s' in: %s", want, logbuf);
}

/*
 * A window that ends before the store's first record holds nothing: Not Found
 * Enough Records naming the window asked, not "the export starts at" the
 * first record and then a window that ends before it starts.
 */
START_TEST(test_show_before_store)
{
	struct show_opts o = defaults();
	char path[1100];

	log_set_level(LOG_LVL_WARN);
	log_set_sink(log_capture);
	prof_to(&o, path, sizeof(path), "before.prof");
	refused_saying(&o, "09:00:00", "09:30:00",
		       "Not Found Enough Records: asked for [ 09:00:00.000 - 09:30:00.000 ], the "
		       "store holds [ 10:00:00.000 - 10:00:10.000 ]: the window ends before the "
		       "first record");
	ck_assert_msg(!strstr(logbuf, "Export First Record"), "%s", logbuf);
	ck_assert_int_ne(access(path, F_OK), 0);
	/* ending where the first record's second starts: still nothing */
	refused_saying(&o, "09:00:00", "10:00:00", "asked for [ 09:00:00.000 - 10:00:00.000 ]");
	/* reaching into it: moved to the first record, as in CPA */
	logbuf[0] = 0;
	o.endtime = "10:00:02";
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(logbuf, "Export First Record"), "%s", logbuf);
	ck_assert_ptr_nonnull(
		strstr(out, "Export Record Time From [ 10:00:00.000 - 10:00:02.000 ]\n"));
	/* from a root, an end before the start is the next day's: said when refused */
	o.read = root;
	refused_saying(
		&o, "10:00:05", "10:00:04",
		"asked for [ 10:00:05.000 - 10:00:04.000 ], the store holds [ 10:00:00.000 - "
		"10:00:10.000 ]: the --endtime 10:00:04 before the --starttime is the next "
		"day's, a window of 86399 s");
	log_set_sink(NULL);
	log_set_level(LOG_LVL_ERROR);
}
END_TEST

/*
 * The fixture of the "cpa" case, as a run with scheduler metrics: metrics alone in seconds 0-1 and
 * 10-11 (before the first sample and after the last), samples in seconds 2-9, more metrics among
 * them, and in second 5 an off-CPU sample of thread 1234 of process 1000 (1 ms blocked).
 */
static char *mroot;
static char mstore[1024];

static void setup_metrics(void)
{
	struct store_writer_opts o = {.record_interval = 1};
	struct store_writer *w;
	uint64_t seq = 1, base = t_base_ns();
	uint32_t sec, s;

	t_utc();
	mroot = t_mkdtemp();
	root = mroot; /* run() keeps its stdout there */
	o.root = mroot;
	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	t_defs(w, NSTACKS, 0);
	for (sec = 0; sec < 12; sec++) {
		struct cpa_metrics m = {.seq = seq++,
					.time_ns = base + sec * T_NS + 500000000ULL,
					.interval_ms = 1000,
					.nr_cpus = 2};
		struct cpa_sample_out smp;

		ck_assert_int_eq(store_writer__add_metrics(w, &m, NULL), 0);
		if (sec < 2 || sec > 9)
			continue;
		for (s = 1; s <= NSTACKS; s++) {
			t_sample(&smp, seq++, base + sec * T_NS + s * 100000000ULL, s, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		}
		if (sec == 5) {
			t_sample(&smp, seq++, base + sec * T_NS + 900000000ULL, 1, 0);
			smp.kind = CPA_KIND_OFFCPU;
			smp.pid = 1000;
			smp.tid = 1234;
			smp.weight = 1000000;
			ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		}
	}
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(mroot, mstore, sizeof(mstore)), 0);
}

static void teardown_metrics(void)
{
	log_set_sink(NULL);
	t_rm_rf(mroot);
	free(mroot);
}

/*
 * Records Num is exactly the seconds holding samples, whatever else the
 * store holds (metrics seconds, the index or a rebuilt one), and
 * --output_num <Records Num> exports them all.
 */
START_TEST(test_show_records_num)
{
	char path[1100], idx[1100], first[8192];
	struct show_opts o = defaults();
	static const char range[] =
		"Record Time From [ 10:00:02.000 ] to [ 10:00:09.000 ] Records Num: 8\n";

	o.read = mstore;
	o.show_range = true;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(out, range);

	/* -n <Records Num> from the first record: every second of samples. */
	snprintf(path, sizeof(path), "%s/all.prof", mroot);
	o.show_range = false;
	o.output_num = 8;
	o.output_prof = path;
	o.kind = SHOW_KIND_ON;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "Write  [ 10:00:02.000 - 10:00:10.000 ] Record to "), "%s", out);
	snprintf(first, sizeof(first), "%s", out);

	/* The index rebuilt from the segments (docs/store-format.md): the same. */
	snprintf(idx, sizeof(idx), "%s/index", mstore);
	ck_assert_int_eq(unlink(idx), 0);
	o.show_range = true;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(out, range);
	o.show_range = false;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(out, first);
}
END_TEST

/* The off-CPU raw label, as CPA's: the thread id in the pid slot, the tgid in the cgroup slot. */
START_TEST(test_show_raw_offcpu)
{
	char path[1100];
	struct show_opts o = defaults();
	struct prof p;

	snprintf(path, sizeof(path), "%s/off.prof", mroot);
	o.read = mstore;
	o.starttime = "10:00:05";
	o.output_prof = path;
	o.show_raw = true;
	o.kind = SHOW_KIND_OFF;
	ck_assert_int_eq(run(&o), 0);
	read_prof(path, &p);
	ck_assert_int_eq(p.n, 1);
	ck_assert_msg(
		strncmp(p.lines[0], "worker         app            -1000-1-1234|ENV_A;", 49) == 0,
		"%s", p.lines[0]);
	ck_assert_uint_eq(p.counts[0], 1000000);
}
END_TEST

/* The log holds before, the metrics store's dir, then after. */
static void logged_of_mstore(const char *before, const char *after)
{
	char want[1400];

	snprintf(want, sizeof(want), "%s%s%s", before, mstore, after);
	ck_assert_msg(strstr(logbuf, want), "want '%s' in: %s", want, logbuf);
}

/*
 * Quiet changes to the request are said on stderr: a -B before the first
 * record (the export starts there), and a folded export of a range with both
 * kinds (which one was written, how to get the other).
 */
START_TEST(test_show_said)
{
	char path[1100];
	struct show_opts o = defaults();

	snprintf(path, sizeof(path), "%s/x.prof", mroot);
	o.read = mstore;
	o.output_prof = path;
	o.starttime = "09:59:00";
	o.output_num = 2;
	logbuf[0] = 0;
	log_set_sink(log_capture);
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "Export Record Time From [ 10:00:02.000 - 10:00:04.000 ]"), "%s",
		      out);
	ck_assert_msg(strstr(logbuf, "Not Found Record in Start in 09:59:00.000, Export First "
				     "Record: --starttime 09:59:00 is before the store's first "
				     "record, the export starts at 10:00:02.000"),
		      "%s", logbuf);
	ck_assert_ptr_null(strstr(logbuf, "off-CPU"));

	/* Second 5 holds both kinds: the default writes off-CPU, and says so. */
	logbuf[0] = 0;
	o.starttime = "10:00:05";
	o.output_num = 1;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(logbuf, "the range holds on- and off-CPU samples: wrote the off-CPU "
				     "ones only (counts in ns); --kind on writes the on-CPU ones"),
		      "%s", logbuf);
	/* Asked for one kind: nothing to say. */
	logbuf[0] = 0;
	o.kind = SHOW_KIND_ON;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(logbuf, "");
	/* The one-shot file of such a run: no --kind there, so it says what a run writes. */
	ck_assert_int_eq(show_export_root(mroot, path), 0);
	ck_assert_msg(strstr(logbuf, "the run holds on- and off-CPU samples: wrote the off-CPU "
				     "ones only (counts in ns), as CPA's --offcpu one-shot"),
		      "%s", logbuf);

	/* A diff base without records (seconds 10-11 hold metrics only): its range, its
	 * store and the options that chose them named. */
	logbuf[0] = 0;
	o.kind = SHOW_KIND_AUTO;
	o.starttime = "10:00:02";
	o.output_num = 2;
	o.format = "pprof";
	o.diff_base_start = "10:00:10";
	o.diff_base_end = "10:00:11";
	ck_assert_int_eq(run(&o), 0);
	logged_of_mstore("the diff base [ 10:00:10.000 - 10:00:11.000 ] of '",
			 "' holds no records (--diff_base_start, --diff_base_end, "
			 "--diff_base_read): every stack shows as new");
	/* A base reaching past the store's end (seconds 10-11 hold metrics, none after):
	 * its seconds there hold nothing, so the range's stacks would seem to grow. Said. */
	logbuf[0] = 0;
	o.starttime = "10:00:02";
	o.diff_base_start = "10:00:08";
	o.diff_base_end = "10:00:14";
	ck_assert_int_eq(run(&o), 0);
	logged_of_mstore("the diff base [ 10:00:08.000 - 10:00:14.000 ] reaches outside the "
			 "records of '",
			 "' [ 10:00:00.000 - 10:00:12.000 ]: ");
	/* within them: nothing said */
	logbuf[0] = 0;
	o.diff_base_start = "10:00:06";
	o.diff_base_end = "10:00:08";
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(!strstr(logbuf, "diff base"), "%s", logbuf);
}
END_TEST

/* The "Stack Type N" of the Write line in out[], or -1. */
static long stack_type(void)
{
	const char *p = strstr(out, "Stack Type ");

	return p ? strtol(p + 11, NULL, 10) : -1;
}

/* A run of o that says text on stderr. */
static void said(const struct show_opts *o, const char *text)
{
	logbuf[0] = 0;
	ck_assert_msg(run(o) == 0, "%s", logbuf);
	ck_assert_msg(strstr(logbuf, text), "want '%s' in: %s", text, logbuf);
}

/*
 * --kind takes every export format (second 5 holds the five on-CPU stacks and
 * one off-CPU row of another process), and an option that what the others ask
 * for does not use says so on stderr, once, instead of being ignored.
 */
START_TEST(test_show_unused_opts)
{
	static const char *const fmts[] = {"pprof", "svg", "speedscope"};
	char path[1100], split[1100];
	struct show_opts o = defaults();

	o.read = mstore;
	o.starttime = "10:00:05";
	o.output_num = 1;
	log_set_sink(log_capture);
	for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
		snprintf(path, sizeof(path), "%s/k.%s", mroot, fmts[i]);
		o.output_prof = path;
		o.format = fmts[i];
		o.kind = SHOW_KIND_AUTO;
		ck_assert_int_eq(run(&o), 0);
		ck_assert_msg(stack_type() == 6, "%s, every kind: %s", fmts[i], out);
		o.kind = SHOW_KIND_ON;
		ck_assert_int_eq(run(&o), 0);
		ck_assert_msg(stack_type() == 5, "%s, --kind on: %s", fmts[i], out);
		o.kind = SHOW_KIND_OFF;
		ck_assert_int_eq(run(&o), 0);
		ck_assert_msg(stack_type() == 1, "%s, --kind off: %s", fmts[i], out);
	}
	o.kind = SHOW_KIND_AUTO;

	/* what each format takes: nothing said */
	logbuf[0] = 0;
	o.format = "pprof";
	o.no_pid = o.no_env = true;
	ck_assert_int_eq(run(&o), 0);
	o.format = "svg";
	o.show_thread_name = true;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(!strstr(logbuf, "--no_pid") && !strstr(logbuf, "--no_env") &&
			      !strstr(logbuf, "--show_thread_name"),
		      "%s", logbuf);

	/* --show_raw is the plain .prof's, whose raw label the label switches do not change */
	o.show_raw = true;
	o.show_thread_name = o.no_env = false;
	said(&o,
	     "--show_raw is the plain folded .prof's raw label: the svg export does not use it");
	o.format = NULL;
	snprintf(path, sizeof(path), "%s/raw.prof", mroot);
	said(&o, "--show_raw writes CPA's raw label, whose layout is fixed: --no_pid change "
		 "nothing");
	o.show_raw = o.no_pid = false;

	/* pprof's samples carry the thread name already */
	o.format = "pprof";
	o.show_thread_name = true;
	said(&o, "--show_thread_name: pprof labels every sample with its thread name (comm) "
		 "already");
	o.show_thread_name = false;

	/* a format and a file of another format's suffix */
	snprintf(path, sizeof(path), "%s/x.svg", mroot);
	said(&o, "has the suffix of svg: --format pprof writes pprof into it");
	/* no format, and a suffix that reads as one but is not its (folded text) */
	o.format = NULL;
	snprintf(path, sizeof(path), "%s/x.pprof", mroot);
	said(&o, "/x.pprof' looks like pprof, but only .pb.gz picks it: writing folded stacks "
		 "(--format pprof writes pprof)");
	snprintf(path, sizeof(path), "%s/x.SVG", mroot);
	said(&o, "/x.SVG' looks like svg, but only .svg picks it");
	snprintf(path, sizeof(path), "%s/x.json", mroot);
	said(&o, "/x.json' looks like speedscope, but only .speedscope.json picks it");
	snprintf(path, sizeof(path), "%s/x.txt", mroot);
	logbuf[0] = 0;
	ck_assert_msg(run(&o) == 0, "%s", logbuf);
	ck_assert_msg(!strstr(logbuf, "looks like"), "%s", logbuf);
	o.format = "pprof";

	/* a split keeps every field */
	snprintf(split, sizeof(split), "%s/split", mroot);
	o.split_path = split;
	o.format = NULL;
	o.output_prof = NULL;
	o.no_pid = true;
	said(&o, "--split_path writes a store, every field of each row kept: --no_pid not used");
	o.no_pid = false;
	/* ... of the kinds --kind takes */
	o.kind = SHOW_KIND_OFF;
	snprintf(split, sizeof(split), "%s/split_off", mroot);
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "Split 1 samples into "), "%s", out);
	o.kind = SHOW_KIND_ON;
	snprintf(split, sizeof(split), "%s/split_on", mroot);
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "Split 5 samples into "), "%s", out);
	o.kind = SHOW_KIND_AUTO;
	/* ... and an empty one fails and leaves no dir behind */
	snprintf(split, sizeof(split), "%s/split_none", mroot);
	o.target_pid = 4242;
	logbuf[0] = 0;
	ck_assert_int_eq(run(&o), -ENODATA);
	ck_assert_msg(strstr(logbuf, "no records in ["), "%s", logbuf);
	ck_assert_msg(access(split, F_OK) < 0 && errno == ENOENT, "%s left behind", split);
	o.target_pid = -1;
	o.split_path = NULL;

	/* --sched_csv, --sched_json without scheduler metrics: fail, no file left */
	{
		char csv[1100], json[1100];

		snprintf(csv, sizeof(csv), "%s/m.csv", mroot);
		snprintf(json, sizeof(json), "%s/m.json", mroot);
		o.sched_csv = csv;
		o.sched_json = json;
		logbuf[0] = 0;
		ck_assert_int_eq(run(&o), -ENODATA);
		ck_assert_msg(strstr(logbuf, "no scheduler metrics in ["), "%s", logbuf);
		ck_assert_msg(access(csv, F_OK) < 0 && errno == ENOENT, "%s left behind", csv);
		ck_assert_msg(access(json, F_OK) < 0 && errno == ENOENT, "%s left behind", json);
		/* one that was there (a device, a user's file) is not removed */
		o.sched_csv = "/dev/null";
		o.sched_json = NULL;
		ck_assert_int_eq(run(&o), -ENODATA);
		ck_assert_int_eq(access("/dev/null", F_OK), 0);
		o.sched_csv = NULL;
	}

	/* the policy triggers are no profile */
	o.triggers = true;
	o.output_prof = path;
	o.kind = SHOW_KIND_ON;
	said(&o, "--triggers prints the scheduler metrics or the policy triggers, not a profile: "
		 "-o, --kind not used");
	o.triggers = false;
	o.kind = SHOW_KIND_AUTO;

	/* the store's range alone, and cpa-view, take no profile options */
	o.show_range = true;
	o.format = "svg";
	said(&o, "--show_range prints the store's range only: -o, --format not used");
	o.show_range = false;
	o.use_cui = true;
	o.target_pid = 1001;
	logbuf[0] = 0;
	show_warn_unused(&o);
	ck_assert_msg(strstr(logbuf, "--use_cui runs cpa-view on --read from --starttime to "
				     "--endtime: -o, --format, --target_pid not used"),
		      "%s", logbuf);
	o.use_cui = false;
	o.target_pid = -1;
	o.format = "pprof";

	/* --sched_csv and --sched_json that cannot be written: the option named */
	logbuf[0] = 0;
	o.sched_csv = mroot;
	ck_assert_int_lt(run(&o), 0);
	ck_assert_msg(strstr(logbuf, "--sched_csv: open '") && strstr(logbuf, "Is a directory"),
		      "%s", logbuf);
	o.sched_csv = NULL;
	logbuf[0] = 0;
	o.sched_json = mroot;
	ck_assert_int_lt(run(&o), 0);
	ck_assert_msg(strstr(logbuf, "--sched_json: open '"), "%s", logbuf);
	o.sched_json = NULL;

	/* speedscope has no diff: said before anything is read */
	logbuf[0] = 0;
	o.format = "speedscope";
	o.diff_base_start = "10:00:02";
	ck_assert_int_eq(run(&o), -EINVAL);
	ck_assert_msg(strstr(logbuf, "speedscope has no diff view"), "%s", logbuf);
}
END_TEST

/* ---------------------------------------------------------------- reading by rows */

#define MSEC	 30
#define MSTACKS	 60
#define MSEG_SEC 4 /* a segment (with a dictionary of its own) every 4 s of data */

/* 30 s in 8 segments: 60 stacks over 3 processes, 2 threads, 2 CPUs, one row in
 * five off-CPU, a few rows per stack and second. */
static void setup_segments(void)
{
	struct store_writer_opts o = {
		.record_interval = 1, .freq = 100, .segment_seconds = MSEG_SEC};
	struct store_writer *w;
	uint64_t seq = 1, base = t_base_ns();
	uint32_t sec, s, k;

	t_utc();
	w = t_store_new(&o, &root);
	t_defs(w, MSTACKS, 0);
	for (sec = 0; sec < MSEC; sec++)
		for (s = 1; s <= MSTACKS; s++)
			for (k = 0; k < 1 + (s + sec) % 4; k++) {
				struct cpa_sample_out smp;

				t_sample(&smp, seq++, base + sec * T_NS + k * 1000000ull, s, 0);
				/* names, pid and env vary apart from the stack */
				smp.pid = 1000 + (s + k + sec) % 3;
				smp.tid = smp.pid + k % 2;
				smp.cpu = k;
				smp.pcomm_id = k % 2 ? T_STR_PCOMM2 : T_STR_PCOMM;
				smp.env_id = k % 3 ? T_STR_ENV : 0;
				if ((s + k) % 5 == 0) {
					smp.kind = CPA_KIND_OFFCPU;
					smp.weight = 1000 + s * 7 + k;
				}
				ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
			}
	t_store_close(w, root, store, sizeof(store));
}

struct by_sample {
	struct exporter *e;
	bool off; /* which kind to take */
};

static int take_kind(void *ctx, const struct store_sample *s)
{
	struct by_sample *b = ctx;

	if ((s->kind == CPA_KIND_OFFCPU) != b->off)
		return 0;
	return export__add(b->e, s);
}

/*
 * `cpa show`'s folded .prof folds rows by key and builds a line per key;
 * the export library's folded file, fed sample by sample
 * (store_reader__query()), builds one per row. Over a store of many
 * segments (each with its own ids), with every label option, the two files
 * are the same bytes.
 */
START_TEST(test_show_folded_rows_vs_samples)
{
	static const struct {
		bool no_pid, no_env, thread;
	} lab[] = {{0, 0, 0}, {1, 0, 0}, {0, 1, 1}, {1, 1, 1}};
	char a[1100], b[1100];
	struct store_reader *r;

	snprintf(a, sizeof(a), "%s/seg_000002.cps", store);
	ck_assert_msg(access(a, F_OK) == 0, "one segment only: %s", a);
	ck_assert_int_eq(store_reader__open(store, NULL, NULL, &r), 0);
	for (size_t i = 0; i < sizeof(lab) / sizeof(lab[0]); i++)
		for (int off = 0; off < 2; off++) {
			struct export_opts eo = {.no_pid = lab[i].no_pid,
						 .no_env = lab[i].no_env,
						 .show_thread_name = lab[i].thread};
			struct show_opts o = defaults();
			struct by_sample bs = {.off = off};
			char *x, *y;

			o.no_pid = lab[i].no_pid;
			o.no_env = lab[i].no_env;
			o.show_thread_name = lab[i].thread;
			o.kind = off ? SHOW_KIND_OFF : SHOW_KIND_ON;
			o.starttime = "10:00:00";
			o.output_num = MSEC;
			prof_to(&o, a, sizeof(a), "rows.prof");
			ck_assert_int_eq(run(&o), 0);

			snprintf(b, sizeof(b), "%s/samples.prof", root);
			ck_assert_int_eq(export__new(EXPORT_FOLDED, &eo, &bs.e), 0);
			ck_assert_int_eq(store_reader__query(r, t_base_ns(),
							     t_base_ns() + MSEC * T_NS, NULL,
							     take_kind, &bs),
					 0);
			ck_assert_int_eq(export__write(bs.e, b), 0);
			export__free(bs.e);
			x = test_slurp(a, NULL);
			y = test_slurp(b, NULL);
			ck_assert_msg(strlen(x) > 1000, "%s", x);
			ck_assert_msg(!strcmp(x, y), "labels %zu, off %d:\n%.1500s\n---\n%.1500s",
				      i, off, x, y);
			free(x);
			free(y);
		}
	store_reader__free(r);
}
END_TEST

/*
 * `cpa show` on a terminal (script(1) gives it a pty): a read past the bar's
 * delay (CPA_SHOW_PROGRESS_MS=0 here, a second by default) draws a progress
 * bar on stderr and wipes it at the end. With stderr a file: no bar.
 */
START_TEST(test_show_progress_tty)
{
	const char *bd = getenv("CPA_BUILD_DIR");
	char *o;
	int rc;

	ck_assert_ptr_nonnull(bd);
	if (system("script -V >/dev/null 2>&1") != 0) {
		fprintf(stderr, "no script(1): the terminal case is not run\n");
	} else {
		o = test_cmd_out(
			&rc,
			"CPA_SHOW_PROGRESS_MS=0 script -qec \"'%s/bin/cpa' show --read '%s' "
			"-B 10:00:00 -n %d --kind on -o '%s/tty.prof'\" /dev/null",
			bd, store, MSEC, root);
		ck_assert_msg(rc == 0, "exit %d: %s", rc, o);
		ck_assert_msg(strstr(o, "reading [") && strstr(o, "] 100%"), "no bar: %s", o);
		ck_assert_msg(strstr(o, "Write  ["), "%s", o);
		free(o);
		/* the other formats too */
		o = test_cmd_out(
			&rc,
			"CPA_SHOW_PROGRESS_MS=0 script -qec \"'%s/bin/cpa' show --read '%s' "
			"-B 10:00:00 -n %d --format svg -o '%s/tty.svg'\" /dev/null",
			bd, store, MSEC, root);
		ck_assert_msg(rc == 0 && strstr(o, "] 100%"), "exit %d: %s", rc, o);
		free(o);
	}
	o = test_cmd_out(&rc,
			 "CPA_SHOW_PROGRESS_MS=0 '%s/bin/cpa' show --read '%s' -B 10:00:00 -n %d "
			 "--kind on -o '%s/file.prof' 2>&1 >/dev/null",
			 bd, store, MSEC, root);
	ck_assert_msg(rc == 0, "exit %d: %s", rc, o);
	ck_assert_msg(!strstr(o, "reading ["), "a bar on a file: %s", o);
	free(o);
}
END_TEST

/*
 * An idle host's stretched interval (docs/metrics.md, "Idle host"): a record of 4 s counts as
 * the 4 seconds it covers, and PSI is a share of the time the records cover. Three records, of
 * 1, 4 and 1 s, each with the CPU stalled 10 % of its interval: 6 seconds, PSI cpu 10 %.
 */
START_TEST(test_show_sched_stretched)
{
	static const uint32_t at[] = {0, 1, 5}, ms[] = {1000, 4000, 1000};
	struct store_writer_opts wo = {.record_interval = 1};
	struct show_opts o = defaults();
	uint64_t base = t_base_ns();
	_cleanup_free_ char *mr = t_mkdtemp();
	struct store_writer *w;
	char sdir[1024];

	wo.root = mr;
	ck_assert_int_eq(store_writer__new(&wo, &w), 0);
	for (unsigned int i = 0; i < 3; i++) {
		struct cpa_metrics m = {
			.seq = i + 1,
			.time_ns = base + at[i] * T_NS,
			.interval_ms = ms[i],
			.flags = CPA_MF_SYSTEM | CPA_MF_COUNTERS,
			.nr_cpus = 2,
			.load_milli = {500, 500, 500},
			.cpu_busy_ticks = ms[i] / 100,
			.cpu_idle_ticks = ms[i] / 100,
			.psi_some_us = {ms[i] * 100, CPA_METRICS_PSI_NONE, CPA_METRICS_PSI_NONE},
			.psi_full_us = {0, CPA_METRICS_PSI_NONE, CPA_METRICS_PSI_NONE}};

		ck_assert_int_eq(store_writer__add_metrics(w, &m, NULL), 0);
	}
	store_writer__free(w);
	ck_assert_int_eq(t_store_dir(mr, sdir, sizeof(sdir)), 0);
	o.read = sdir;
	o.sched = true;
	o.starttime = "10:00:00";
	o.output_num = 6;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "]: 6 seconds\n"), "%s", out);
	ck_assert_msg(strstr(out, "Pressure (PSI some): cpu 10.00% io n/a memory n/a\n"), "%s",
		      out);
	ck_assert_msg(strstr(out, "CPU busy 50.0%"), "%s", out);
	ck_assert_msg(strstr(out, "task counters in 6 of 6 seconds"), "%s", out);
	t_rm_rf(mr);
}
END_TEST

/*
 * A store whose last record is an idle host's stretched interval (docs/metrics.md, "Idle
 * host"): samples in 10:00:00 and 10:00:01, a metrics record of 1 s at 10:00:00 and one of
 * 4 s at 10:00:01, so the store covers [10:00:00, 10:00:05). A range ending inside the last
 * interval is found (folded and --sched), one past its end is "Not Found Enough Records".
 */
START_TEST(test_show_range_stretched)
{
	static const uint32_t ms[] = {1000, 4000};
	struct store_writer_opts wo = {.record_interval = 1};
	struct show_opts o = defaults();
	uint64_t seq = 1, base = t_base_ns();
	char *mr = NULL, sdir[1024], path[1100];
	struct store_writer *w = t_store_new(&wo, &mr);

	t_defs(w, NSTACKS, 0);
	for (uint32_t i = 0; i < 2; i++) {
		struct cpa_metrics m = {.seq = seq++,
					.time_ns = base + i * T_NS + 2000000ULL,
					.interval_ms = ms[i],
					.flags = CPA_MF_SYSTEM | CPA_MF_COUNTERS,
					.nr_cpus = 2,
					.cpu_busy_ticks = 1,
					.cpu_idle_ticks = ms[i] / 10};
		struct cpa_sample_out smp;

		t_sample(&smp, seq++, base + i * T_NS + 500000000ULL, 1, 0);
		ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		ck_assert_int_eq(store_writer__add_metrics(w, &m, NULL), 0);
	}
	t_store_close(w, mr, sdir, sizeof(sdir));
	log_set_level(LOG_LVL_ERROR);
	o.read = sdir;
	snprintf(path, sizeof(path), "%s/st.prof", mr);
	o.output_prof = path;
	o.starttime = "10:00:00";
	o.endtime = "10:00:04"; /* inside the last interval */
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "Export Record Time From [ 10:00:00.000 - 10:00:04.000 ]\n"),
		      "%s", out);
	ck_assert_msg(strstr(out, "Write  ["), "%s", out);
	ck_assert_int_eq(access(path, F_OK), 0);
	o.endtime = NULL;
	o.output_num = 5; /* to its end */
	o.sched = true;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "]: 5 seconds\n"), "%s", out);
	o.output_num = 6; /* past it */
	ck_assert_int_eq(run(&o), -ENODATA);
	o.sched = false;
	o.starttime = "10:00:05";
	o.output_num = 1;
	ck_assert_int_eq(run(&o), -ENODATA);
	t_rm_rf(mr);
	free(mr);
}
END_TEST

/* ---- a window across local midnight (a root with runs on two days) ---- */

/*
 * One monitor run from 23:50 local, TZ explicit and not UTC (local midnight is
 * not UTC's): samples from 23:59:50 to 00:00:09, the writer rotating into the
 * next day's dir at midnight. Each second stack 1 before midnight, stack 2
 * after it, stack 3 on both sides.
 */
/* A writer of a monitor run started at 23:50 local on 2026-11-20 in a new
 * root; 23:59:50, 10 s before midnight, into *base. */
static uint32_t seg_seconds; /* segment_seconds of run_to_midnight()'s writer (0: default) */

static struct store_writer *run_to_midnight(uint64_t *base)
{
	struct store_writer_opts o = {.record_interval = 1, .segment_seconds = seg_seconds};
	struct tm tm = {.tm_year = 126,
			.tm_mon = 10,
			.tm_mday = 20,
			.tm_hour = 23,
			.tm_min = 59,
			.tm_sec = 50,
			.tm_isdst = -1};
	struct store_writer *w;

	*base = (uint64_t)mktime(&tm) * T_NS;
	w = t_store_new(&o, &root);
	store_writer__set_run_id(w, *base - 590 * T_NS);
	t_defs(w, NSTACKS, 0);
	return w;
}

static void setup_midnight(void)
{
	struct store_writer *w;
	uint64_t seq = 1, base;

	setenv("TZ", "CPA-1", 1); /* UTC+1, no tzdata needed */
	tzset();
	w = run_to_midnight(&base);
	for (uint32_t sec = 0; sec < 20; sec++) {
		struct cpa_sample_out smp;

		t_sample(&smp, seq++, base + sec * T_NS + 100000000ULL, sec < 10 ? 1 : 2, 0);
		ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		t_sample(&smp, seq++, base + sec * T_NS + 200000000ULL, 3, 0);
		ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
	}
	store_writer__free(w);
	snprintf(store, sizeof(store), "%s/cpa_261120", root);
}

/* The counts of stacks 1, 2 and 3 in the .prof at path, and no other line. */
static void midnight_counts(const char *path, unsigned long long c1, unsigned long long c2,
			    unsigned long long c3)
{
	static const char *const labels[] = {"", "ENV_A;app:1001;", "ENV_A;db:1002;",
					     "ENV_A;app:1000;"};
	const unsigned long long want[] = {0, c1, c2, c3};
	char line[8192];
	struct prof p;
	int lines = 0;

	read_prof(path, &p);
	for (uint32_t s = 1; s <= 3; s++) {
		folded(s, labels[s], line, sizeof(line));
		ck_assert_msg(prof_count(&p, line) == want[s], "stack %u: %llu, want %llu", s,
			      prof_count(&p, line), want[s]);
		lines += want[s] > 0;
	}
	ck_assert_int_eq(p.n, lines);
}

START_TEST(test_show_midnight)
{
	struct show_opts o = defaults();
	char path[1100], want[2048], sdir[1100];
	static const char range[] =
		"Record Time From [ 23:59:50.100 ] to [ 23:59:59.200 ] Records Num: 10\n";

	log_set_level(LOG_LVL_ERROR);
	snprintf(sdir, sizeof(sdir), "%s/cpa_261121", root);
	ck_assert_msg(access(sdir, F_OK) == 0, "no next-day dir %s", sdir);
	o.read = root;
	prof_to(&o, path, sizeof(path), "mid.prof");
	/* 5 seconds each side of midnight, by -n and by an -E earlier than -B */
	o.starttime = "23:59:55";
	o.output_num = 10;
	ck_assert_int_eq(run(&o), 0);
	snprintf(want, sizeof(want),
		 "%sExport Record Time From [ 23:59:55.000 - 00:00:05.000 ]\n"
		 "Write  [ 23:59:55.000 - 00:00:05.000 ] Record to %s, Stack Type 3\n",
		 range, path);
	ck_assert_str_eq(out, want);
	midnight_counts(path, 5, 5, 10);
	o.output_num = 1;
	o.endtime = "00:00:05";
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(out, want);
	midnight_counts(path, 5, 5, 10);
	/* the whole run: the picked day's records to the next day's last */
	o.starttime = "23:59:50";
	o.endtime = "00:00:10";
	ck_assert_int_eq(run(&o), 0);
	midnight_counts(path, 10, 10, 20);
	/* a window within one day reads that day */
	o.endtime = NULL;
	o.starttime = "00:00:02";
	o.output_num = 3;
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "Export Record Time From [ 00:00:02.000 - 00:00:05.000 ]\n"),
		      "%s", out);
	midnight_counts(path, 0, 3, 3);
	o.starttime = "23:59:52";
	ck_assert_int_eq(run(&o), 0);
	midnight_counts(path, 3, 0, 3);

	/* the range is the picked day's, as before */
	o.show_range = true;
	o.starttime = "23:59:55";
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(out, range);
	o.starttime = NULL; /* the newest day */
	ck_assert_int_eq(run(&o), 0);
	ck_assert_str_eq(out,
			 "Record Time From [ 00:00:00.100 ] to [ 00:00:09.200 ] Records Num: 10\n");
	o.show_range = false;

	/* what the store does not hold is still Not Found Enough Records */
	logbuf[0] = 0;
	log_set_sink(log_capture);
	unlink(path);
	o.starttime = "23:59:55";
	o.output_num = 16; /* to 00:00:11, the last record is in 00:00:09 */
	ck_assert_int_eq(run(&o), -ENODATA);
	ck_assert_msg(strstr(logbuf, "Not Found Enough Records: asked for [ 23:59:55.000 - "
				     "00:00:11.000 ], the store holds [ 23:59:50.000 - "
				     "00:00:10.000 ]"),
		      "%s", logbuf);
	ck_assert_int_ne(access(path, F_OK), 0);
	o.output_num = 1;
	o.endtime = "00:00:12";
	ck_assert_int_eq(run(&o), -ENODATA);
	/* a store dir is one day: -n past its end as before, -E before -B says where to read */
	logbuf[0] = 0;
	o.read = store;
	o.endtime = NULL;
	o.output_num = 10;
	ck_assert_int_eq(run(&o), -ENODATA);
	ck_assert_msg(strstr(logbuf, "Not Found Enough Records: asked for [ 23:59:55.000 - "
				     "00:00:05.000 ], the store holds [ 23:59:50.000 - "
				     "00:00:00.000 ]"),
		      "%s", logbuf);
	logbuf[0] = 0;
	o.endtime = "00:00:05";
	ck_assert_int_eq(run(&o), -EINVAL);
	ck_assert_msg(strstr(logbuf, "--endtime 00:00:05 is not after the start (a store dir holds "
				     "one day: --read its root for a window across midnight)"),
		      "%s", logbuf);
	log_set_sink(NULL);
	ck_assert_int_ne(access(path, F_OK), 0);

	/* the real `cpa show` as the incident's user runs it, TZ from the environment */
	{
		static struct test_run r;

		test_run_bin(&r, "cpa",
			     (const char *const[]){"show", "--read", root, "-B", "23:59:58", "-E",
						   "00:00:02", "-o", path, NULL});
		ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
		snprintf(want, sizeof(want),
			 "%sExport Record Time From [ 23:59:58.000 - 00:00:02.000 ]\n"
			 "Write  [ 23:59:58.000 - 00:00:02.000 ] Record to %s, Stack Type 3\n",
			 range, path);
		ck_assert_str_eq(r.out, want);
		ck_assert_str_eq(r.err, "");
		midnight_counts(path, 2, 2, 4);
		test_run_bin(&r, "cpa",
			     (const char *const[]){"show", "--read", store, "-B", "23:59:58", "-E",
						   "00:00:02", "-o", path, NULL});
		ck_assert_int_eq(r.code, 1);
		ck_assert_msg(strstr(r.err, "--read its root for a window across midnight"), "%s",
			      r.err);
	}

	/* a damaged segment of the picked day is said once, though the day is read twice */
	{
		char seg[1200];
		int fd;
		const char *hit;

		snprintf(seg, sizeof(seg), "%s/seg_000001.cps", store);
		fd = open(seg, O_WRONLY);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, "XXXX", 4, 0), 4);
		close(fd);
		logbuf[0] = 0;
		log_set_level(LOG_LVL_WARN);
		log_set_sink(log_capture);
		o.read = root;
		o.starttime = "23:59:55";
		o.endtime = NULL;
		o.output_num = 10;
		ck_assert_int_eq(run(&o), 0);
		log_set_sink(NULL);
		hit = strstr(logbuf, "bad segment header");
		ck_assert_msg(hit && !strstr(hit + 1, "bad segment header"), "%s", logbuf);
		midnight_counts(path, 5, 5, 10);
		/* without the next day: the message of a window that is not there, said once */
		t_rm_rf(sdir);
		logbuf[0] = 0;
		log_set_sink(log_capture);
		ck_assert_int_eq(run(&o), -ENODATA);
		log_set_sink(NULL);
		hit = strstr(logbuf, "bad segment header");
		ck_assert_msg(hit && !strstr(hit + 1, "bad segment header"), "%s", logbuf);
		ck_assert_msg(strstr(logbuf, "Not Found Enough Records: asked for [ 23:59:55.000 - "
					     "00:00:05.000 ], the store holds [ 23:59:50.000 - "
					     "00:00:00.000 ]"),
			      "%s", logbuf);
	}
}
END_TEST

/* The folded diff at path: stacks 1, 2 and 3 with base and new counts want[s] (0 0: absent). */
static void diff_counts(const char *path, const unsigned int want[4][2])
{
	static const char *const labels[] = {"", "ENV_A;app:1001;", "ENV_A;db:1002;",
					     "ENV_A;app:1000;"};
	char line[8192], *txt = test_slurp(path, NULL);

	for (uint32_t s = 1; s <= 3; s++) {
		size_t l;

		folded(s, labels[s], line, sizeof(line));
		if (!want[s][0] && !want[s][1]) { /* in neither range: no line */
			ck_assert_msg(!strstr(txt, line), "'%s' in:\n%s", line, txt);
			continue;
		}
		l = strlen(line);
		snprintf(line + l, sizeof(line) - l, " %u %u\n", want[s][0], want[s][1]);
		ck_assert_msg(strstr(txt, line), "no '%s' in:\n%s", line, txt);
	}
	free(txt);
}

/* A diff of o into path: the base range printed as base ("HH:MM:SS.mmm - ..."), its counts want. */
static void diff_run(const struct show_opts *o, const char *path, const char *base,
		     const unsigned int want[4][2])
{
	char line[128];

	ck_assert_int_eq(run(o), 0);
	snprintf(line, sizeof(line), "Diff Base Record Time From [ %s ]", base);
	ck_assert_msg(strstr(out, line), "%s", out);
	diff_counts(path, want);
}

/*
 * A diff base across midnight from the root, --diff_base_read's or --read's own:
 * the base is on the day its start picks and takes the next day's runs too, as
 * --read's range does, while the exported range is on one day; with an exported
 * range across midnight, on its day that holds the base's start.
 */
START_TEST(test_show_midnight_diff_base)
{
	static const unsigned int want[4][2] = {{0, 0}, {2, 0}, {2, 2}, {4, 2}};
	static const unsigned int want_n[4][2] = {{0, 0}, {2, 0}, {2, 4}, {4, 4}};
	static const unsigned int want_both[4][2] = {{0, 0}, {2, 5}, {2, 5}, {4, 10}};
	static const unsigned int want_next[4][2] = {{0, 0}, {0, 5}, {2, 5}, {2, 10}};
	char path[1100];

	log_set_level(LOG_LVL_ERROR);
	for (int on_read = 0; on_read < 2; on_read++) {
		struct show_opts o = defaults();

		o.read = root;
		prof_to(&o, path, sizeof(path), "diff.prof");
		o.diff_base_read = on_read ? NULL : root;
		o.starttime = "00:00:05";
		o.output_num = 2;
		o.diff_base_start = "23:59:58";
		o.diff_base_end = "00:00:02";
		diff_run(&o, path, "23:59:58.000 - 00:00:02.000", want);
		/* -n's length from the base's start, across midnight too */
		o.diff_base_end = NULL;
		o.output_num = 4;
		diff_run(&o, path, "23:59:58.000 - 00:00:02.000", want_n);
		/* the exported range across midnight too: the base within it */
		o.starttime = "23:59:55";
		o.endtime = "00:00:05";
		o.diff_base_end = "00:00:02";
		diff_run(&o, path, "23:59:58.000 - 00:00:02.000", want_both);
		/* ... and a base on the range's second day */
		o.diff_base_start = "00:00:06";
		o.diff_base_end = "00:00:08";
		diff_run(&o, path, "00:00:06.000 - 00:00:08.000", want_next);
	}
}
END_TEST

/* ---- a window over three days (a root with a run on each of three UTC days) ---- */

#define DAY 86400L

/*
 * One monitor run over three UTC days, the writer rotating at each midnight:
 * stack 1 each second of 23:59:50-59 on 2026-11-20, stack 2 of 12:00:00-09 on
 * the 21st, stack 3 of 00:00:00-09 on the 22nd. Only the first day's records
 * span 23:59:5x: -B 23:59:50 picks it.
 */
static void setup_three_days(void)
{
	static const uint64_t at[] = {0, 12 * 3600 + 10, DAY + 10}; /* from 23:59:50 */
	struct store_writer *w;
	uint64_t seq = 1, base;

	t_utc();
	w = run_to_midnight(&base);
	for (uint32_t d = 0; d < 3; d++)
		for (uint32_t sec = 0; sec < 10; sec++) {
			struct cpa_sample_out smp;

			t_sample(&smp, seq++, base + (at[d] + sec) * T_NS + 100000000ULL, d + 1, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		}
	store_writer__free(w);
	snprintf(store, sizeof(store), "%s/cpa_261120", root);
}

/*
 * From the root, -B 23:59:50 -n <a day and 20 s> covers the three days: every
 * sample read once, as folded, pprof and a diff whose base (on --read, or
 * --diff_base_read) is the same range; and a base reaching a third day from a
 * range of two reads it too (it reopened the second day instead).
 */
START_TEST(test_show_three_days)
{
	static const unsigned int same[4][2] = {{0, 0}, {10, 10}, {10, 10}, {10, 10}};
	static const unsigned int later[4][2] = {{0, 0}, {0, 5}, {10, 5}, {5, 0}};
	char path[1100], want[2048], d[1100];
	struct show_opts o = defaults();

	log_set_level(LOG_LVL_ERROR);
	for (int i = 0; i < 3; i++) {
		snprintf(d, sizeof(d), "%s/cpa_2611%d", root, 20 + i);
		ck_assert_msg(access(d, F_OK) == 0, "no day dir %s", d);
	}
	o.read = root;
	prof_to(&o, path, sizeof(path), "three.prof");
	o.starttime = "23:59:50";
	o.output_num = DAY + 20; /* to 00:00:10 on the 22nd */
	ck_assert_int_eq(run(&o), 0);
	snprintf(want, sizeof(want),
		 "Record Time From [ 23:59:50.100 ] to [ 23:59:59.100 ] Records Num: 10\n"
		 "Export Record Time From [ 23:59:50.000 - 00:00:10.000 ]\n"
		 "Write  [ 23:59:50.000 - 00:00:10.000 ] Record to %s, Stack Type 3\n",
		 path);
	ck_assert_str_eq(out, want);
	midnight_counts(path, 10, 10, 10);
	/* pprof: the same range, the same stacks */
	prof_to(&o, path, sizeof(path), "three.pb.gz");
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(strstr(out, "Export Record Time From [ 23:59:50.000 - 00:00:10.000 ]\n"),
		      "%s", out);
	snprintf(want, sizeof(want),
		 "Write  [ 23:59:50.000 - 00:00:10.000 ] Record to %s, Stack Type 3\n", path);
	ck_assert_msg(strstr(out, want), "%s", out);
	/* a diff whose base is the same three days, on --read's store and on its own */
	prof_to(&o, path, sizeof(path), "three.diff");
	o.format = "folded";
	o.diff_base_start = "23:59:50";
	for (int on_read = 0; on_read < 2; on_read++) {
		o.diff_base_read = on_read ? NULL : root;
		diff_run(&o, path, "23:59:50.000 - 00:00:10.000", same);
	}
	/* a range of two days, its base from the second day into the third */
	o.starttime = "23:59:55";
	o.output_num = DAY / 2 + 10; /* to 12:00:05 on the 21st */
	o.diff_base_start = "12:00:00";
	o.diff_base_end = "00:00:05"; /* on the 22nd */
	for (int on_read = 0; on_read < 2; on_read++) {
		o.diff_base_read = on_read ? NULL : root;
		diff_run(&o, path, "12:00:00.000 - 00:00:05.000", later);
	}
}
END_TEST

/* The three days, each day's 10 s in two segment files of 5 s. */
static void setup_three_days_segs(void)
{
	seg_seconds = 5;
	setup_three_days();
	seg_seconds = 0;
}

/* How many lines of logbuf hold both a and b. */
static int log_lines_with(const char *a, const char *b)
{
	int n = 0;

	for (const char *p = logbuf; *p;) {
		size_t l = strcspn(p, "\n");
		char *line = strndup(p, l);

		n += strstr(line, a) && strstr(line, b);
		free(line);
		p += l + (p[l] ? 1 : 0);
	}
	return n;
}

/*
 * diff_run() of o with its base by --diff_base_read, then on --read: each time
 * the unreadable seg[0] (the range's day) named once, with its day's count
 * line, and seg[1] (the 21st's) and its count line n1 times.
 */
static void unread_base(struct show_opts *o, const char *path, const char *base,
			const unsigned int want[4][2], char seg[2][1300], int n1)
{
	for (int on_read = 0; on_read < 2; on_read++) {
		o->diff_base_read = on_read ? NULL : root;
		logbuf[0] = 0;
		diff_run(o, path, base, want);
		ck_assert_msg(log_lines_with(seg[0], "skipped") == 1, "%s", logbuf);
		ck_assert_msg(log_lines_with(seg[1], "skipped") == n1, "%s", logbuf);
		ck_assert_msg(log_lines_with("/cpa_261120': skipped", "1 segment file(s)") == 1,
			      "%s", logbuf);
		ck_assert_msg(log_lines_with("/cpa_261121': skipped", "1 segment file(s)") == n1,
			      "%s", logbuf);
	}
}

/*
 * A run file the reader cannot open (a directory in its place: the open of a
 * segment fails as for one of another user, EACCES), in the exported range's
 * day and in the diff base's: each is named once, in one warning, whether the
 * base is on --read (another day, or the range's own) or --diff_base_read; the
 * rest is exported.
 */
START_TEST(test_show_unreadable_file)
{
	static const unsigned int want[4][2] = {{0, 0}, {0, 5}, {5, 0}, {0, 0}};
	static const unsigned int want_same[4][2] = {{0, 0}, {5, 5}, {0, 0}, {0, 0}};
	char path[1100], seg[2][1300];
	struct show_opts o = defaults();

	for (int d = 0; d < 2; d++) {
		char from[sizeof(seg) + 8];

		snprintf(seg[d], sizeof(seg[d]), "%s/cpa_2611%d/seg_000002.cps", root, 20 + d);
		snprintf(from, sizeof(from), "%s.moved", seg[d]);
		ck_assert_int_eq(rename(seg[d], from), 0);
		ck_assert_int_eq(mkdir(seg[d], 0755), 0);
	}
	log_set_level(LOG_LVL_WARN);
	o.read = root;
	prof_to(&o, path, sizeof(path), "unread.diff");
	o.format = "folded";
	o.starttime = "23:59:50";
	o.output_num = 5; /* the first segment's seconds */
	logbuf[0] = 0;
	log_set_sink(log_capture);
	/* the range alone */
	ck_assert_int_eq(run(&o), 0);
	ck_assert_msg(log_lines_with(seg[0], "skipped") == 1, "%s", logbuf);
	midnight_counts(path, 5, 0, 0);
	/* a base on another day, by --diff_base_read and on --read: both days named */
	o.diff_base_start = "12:00:00";
	unread_base(&o, path, "12:00:00.000 - 12:00:05.000", want, seg, 1);
	/* a base on the range's own day: its file named once */
	o.diff_base_start = "23:59:50";
	unread_base(&o, path, "23:59:50.000 - 23:59:55.000", want_same, seg, 0);
	log_set_sink(NULL);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("show");
	TCase *tc = TEST_TCASE(s, "show", test_show_range, test_show_export, test_show_default_name,
			       test_show_labels, test_show_raw, test_show_markers,
			       test_show_not_enough, test_show_before_store, test_show_binary,
			       test_show_filters, test_show_errors, test_show_export_root,
			       test_show_sched_stretched, test_show_range_stretched);

	tcase_add_checked_fixture(tc, setup, teardown);
	/* CPA's behaviours, over a store with metrics-only seconds and an off-CPU sample. */
	tc = TEST_TCASE(s, "cpa", test_show_records_num, test_show_raw_offcpu, test_show_said,
			test_show_unused_opts);
	tcase_add_checked_fixture(tc, setup_metrics, teardown_metrics);
	/* Reading by rows (store_reader__query_rows()) against sample by sample. */
	tc = TEST_TCASE(s, "rows", test_show_folded_rows_vs_samples, test_show_progress_tty);
	tcase_add_checked_fixture(tc, setup_segments, teardown);
	/* A root whose run spans local midnight. */
	tc = TEST_TCASE(s, "midnight", test_show_midnight, test_show_midnight_diff_base);
	tcase_add_checked_fixture(tc, setup_midnight, teardown);
	/* A root with a run over three days. */
	tc = TEST_TCASE(s, "three_days", test_show_three_days);
	tcase_add_checked_fixture(tc, setup_three_days, teardown);
	tc = TEST_TCASE(s, "unreadable", test_show_unreadable_file);
	tcase_add_checked_fixture(tc, setup_three_days_segs, teardown);
	return test_run_suite(s);
}
