// SPDX-License-Identifier: MIT
/*
 * A store root some of whose run dirs this user cannot read (another user's
 * runs, chmod 000): `cpa show` and cpa-view run as nobody say which dir and
 * why, and show what they can. Root, setpriv and a build dir nobody may enter,
 * else 77.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "storer/store.h"
#include "test_store_util.h"
#include "test_util.h"
#include "viewer/model.h"

#define NOBODY 65534

static char root[PATH_MAX], out[PATH_MAX + 16];

/* 10 s of samples from 2026-11-20 10:00:00 + off seconds into root: run dir
 * cpa_261120 (off 0). */
static void write_run(const char *r, uint64_t off)
{
	struct store_writer_opts o = {.record_interval = 1, .root = r};
	struct store_writer *w;
	uint64_t seq = 1, base = t_base_ns() + off * T_NS;

	ck_assert_int_eq(store_writer__new(&o, &w), 0);
	t_defs(w, 3, 0);
	for (uint32_t sec = 0; sec < 10; sec++)
		for (uint32_t s = 1; s <= 3; s++) {
			struct cpa_sample_out smp;

			t_sample(&smp, seq++, base + sec * T_NS + s * 100000000ULL, s, 0);
			ck_assert_int_eq(store_writer__add_sample(w, &smp), 0);
		}
	store_writer__free(w);
}

/* A run dir of another user's that nobody may open: name under r, mode 000. */
static void shut_run(const char *r, const char *name, char *path, size_t len)
{
	char seg[PATH_MAX + 64];
	FILE *f;

	snprintf(path, len, "%s/%s", r, name);
	ck_assert_int_eq(mkdir(path, 0755), 0);
	snprintf(seg, sizeof(seg), "%s/seg_000001.cps", path);
	f = fopen(seg, "w");
	ck_assert_ptr_nonnull(f);
	fputs("segment bytes\n", f);
	fclose(f);
	ck_assert_int_eq(chmod(path, 0), 0);
}

static void setup(void)
{
	t_utc();
	test_scratch_in(root, sizeof(root), "readperm");
	ck_assert_int_eq(chmod(root, 0755), 0); /* nobody walks in */
	write_run(root, 0);
	snprintf(out, sizeof(out), "%s/out", root);
	ck_assert_int_eq(mkdir(out, 0777), 0);
	ck_assert_int_eq(chmod(out, 0777), 0);
}

/* `cpa show --read rd ARGS 2>&1` as nobody: its output, exit code in *rc. */
static char *show_nobody(int *rc, const char *rd, const char *args)
{
	const char *b = getenv("CPA_BUILD_DIR");

	return test_cmd_out(rc,
			    "setpriv --reuid=%d --regid=%d --clear-groups '%s/bin/cpa' show --read "
			    "'%s' %s 2>&1",
			    NOBODY, NOBODY, b ? b : ".", rd, args);
}

/* How many times s occurs in h. */
static int count(const char *h, const char *s)
{
	int n = 0;

	for (const char *p = strstr(h, s); p; p = strstr(p + 1, s))
		n++;
	return n;
}

/*
 * The newest run dirs (a later run of the day, the next day) cannot be read:
 * the export of what can be read still comes, and each of those dirs is named
 * once, with the reason; a range only such a dir may hold is refused, naming it.
 */
START_TEST(test_show_newest_unreadable)
{
	char later[PATH_MAX + 32], next[PATH_MAX + 32], want[PATH_MAX + 160], args[PATH_MAX + 64];
	char *o;
	int rc;

	shut_run(root, "cpa_261120_start_110000", later, sizeof(later));
	shut_run(root, "cpa_261121", next, sizeof(next));
	snprintf(args, sizeof(args), "-n 1 -o '%s/a.prof'", out);
	o = show_nobody(&rc, root, args);
	ck_assert_msg(rc == 0 && strstr(o, "Write  [ 10:00:00.000 - 10:00:01.000 ] Record to"),
		      "exit %d: %s", rc, o);
	snprintf(want, sizeof(want), "%s/a.prof", out);
	ck_assert_int_eq(access(want, F_OK), 0);
	for (int i = 0; i < 2; i++) {
		snprintf(want, sizeof(want),
			 "WARNING: '%s': Permission denied: its samples are not in this output",
			 i ? next : later);
		ck_assert_msg(count(o, want) == 1, "'%s' not said once: %s", i ? next : later, o);
	}
	free(o);

	/* 11:30 of that day: only the unreadable later run may hold it */
	o = show_nobody(&rc, root, "-B 11:30:00 -n 60");
	snprintf(want, sizeof(want),
		 "; they may be in '%s', which this user cannot read (Permission denied)", later);
	ck_assert_msg(rc == 1 && strstr(o, "ERROR: Not Found Enough Records") && strstr(o, want),
		      "exit %d: %s", rc, o);
	free(o);

	/* a store dir given itself: nothing to say about its neighbours */
	snprintf(want, sizeof(want), "%s/cpa_261120", root);
	snprintf(args, sizeof(args), "-n 1 -o '%s/b.prof'", out);
	o = show_nobody(&rc, want, args);
	ck_assert_msg(rc == 0 && !strstr(o, "WARNING"), "exit %d: %s", rc, o);
	free(o);
}
END_TEST

/*
 * A diff base on a day before the range's (the range on the 21st, the base on
 * the 20th): a run dir of the base's day nobody may read is named once, with
 * the base on --read (the range's pick names the days from its own on only)
 * and by --diff_base_read; the diff of what can be read is written.
 */
START_TEST(test_show_base_unreadable)
{
	char later[PATH_MAX + 32], want[PATH_MAX + 160], args[3 * PATH_MAX];
	char *o;
	int rc;

	write_run(root, 26 * 3600); /* cpa_261121, from 12:00:00 */
	shut_run(root, "cpa_261120_start_110000", later, sizeof(later));
	snprintf(want, sizeof(want),
		 "WARNING: '%s': Permission denied: its samples are not in this output", later);
	for (int i = 0; i < 2; i++) {
		snprintf(args, sizeof(args),
			 "-B 12:00:00 -n 5 --diff_base_start 10:00:00 --format folded -o "
			 "'%s/d.prof' %s%s%s",
			 out, i ? "--diff_base_read '" : "", i ? root : "", i ? "'" : "");
		o = show_nobody(&rc, root, args);
		ck_assert_msg(rc == 0 && strstr(o, "Diff Base Record Time From [ 10:00:00.000 - "
						   "10:00:05.000 ]"),
			      "exit %d: %s", rc, o);
		ck_assert_msg(count(o, want) == 1, "'%s' not said once: %s", later, o);
		free(o);
	}
}
END_TEST

/*
 * cpa-view's model opened on path as nobody, in a forked child: into got,
 * "R MSG" when vmodel__open() fails (R its -errno, MSG its message), else
 * "0 N FIRST LAST UNREAD" (the unreadable run dirs, the timeline's seconds).
 */
static void view_nobody(const char *path, char *got, size_t len)
{
	int p[2], st;
	pid_t pid;
	ssize_t n;

	ck_assert_int_eq(pipe(p), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct vmodel *m = calloc(1, sizeof(*m));
		char e[1024] = "";
		int r = -1;

		close(p[0]);
		if (m && setgroups(0, NULL) == 0 && setresgid(NOBODY, NOBODY, NOBODY) == 0 &&
		    setresuid(NOBODY, NOBODY, NOBODY) == 0)
			r = vmodel__open(m, path, e, sizeof(e));
		if (r)
			dprintf(p[1], "%d %s", r, e);
		else
			dprintf(p[1], "0 %u %lld %lld %s", m->n_unread, (long long)m->first_s,
				(long long)m->last_s, m->unread);
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], got, len - 1);
	got[n > 0 ? n : 0] = 0;
	close(p[0]);
	waitpid(pid, &st, 0);
}

/*
 * cpa-view on a root whose only run nobody may read: the message names that
 * dir and the reason, as cpa show's does (not just "read store root").
 */
START_TEST(test_view_unreadable_named)
{
	char dir[PATH_MAX + 32], want[PATH_MAX + 96], err[1024] = "";
	char one[PATH_MAX + 16];

	snprintf(one, sizeof(one), "%s/one", root);
	ck_assert_int_eq(mkdir(one, 0755), 0);
	write_run(one, 0);
	snprintf(dir, sizeof(dir), "%s/cpa_261120", one);
	ck_assert_int_eq(chmod(dir, 0), 0);
	view_nobody(one, err, sizeof(err));
	snprintf(want, sizeof(want), "%d '%s': Permission denied", -EACCES, dir);
	ck_assert_msg(!strncmp(err, want, strlen(want)) && !strstr(err, "store root"), "%s", err);
}
END_TEST

/*
 * cpa-view on a root with a readable older run and an unreadable newer one of
 * the same day: it opens the older run's data and names the newer dir and why
 * (the model's line the screen shows); on the next day's too.
 */
START_TEST(test_view_newest_unreadable)
{
	char later[PATH_MAX + 32], next[PATH_MAX + 32], want[2 * PATH_MAX + 128], got[2048] = "";
	long long first = (long long)(t_base_ns() / T_NS), f = 0, l = 0;
	unsigned int nu = 0;
	int r = -1;

	shut_run(root, "cpa_261120_start_110000", later, sizeof(later));
	shut_run(root, "cpa_261121", next, sizeof(next));
	view_nobody(root, got, sizeof(got));
	ck_assert_msg(sscanf(got, "%d %u %lld %lld", &r, &nu, &f, &l) == 4 && r == 0 && nu == 2 &&
			      f == first && l == first + 9,
		      "want the older run's 10 s from %lld and 2 dirs named: %s", first, got);
	snprintf(want, sizeof(want), "'%s': Permission denied; '%s': Permission denied", later,
		 next);
	ck_assert_msg(strstr(got, want), "want \"%s\": %s", want, got);
}
END_TEST

/* The tmux pane's screen (socket sock). */
static char *pane(const char *sock)
{
	return test_cmd_out(NULL, "tmux -S '%s' capture-pane -p -t 0", sock);
}

/*
 * The real cpa-view as nobody in a terminal (tmux) on that root: the header
 * counts the unreadable runs, the bottom line names them and why; after q,
 * stderr says it once more (the terminal's last words).
 */
START_TEST(test_view_tui_unreadable)
{
	const char *b = getenv("CPA_BUILD_DIR");
	char later[PATH_MAX + 32], next[PATH_MAX + 32], sock[108], rc[PATH_MAX + 32],
		err[PATH_MAX + 32], want[3 * PATH_MAX], *scr = NULL, *o;
	int i, r;

	if (system("tmux -V >/dev/null 2>&1")) {
		fprintf(stderr, "no tmux: cpa-view's screen not looked at\n");
		return;
	}
	shut_run(root, "cpa_261120_start_110000", later, sizeof(later));
	shut_run(root, "cpa_261121", next, sizeof(next));
	ck_assert_int_lt(snprintf(sock, sizeof(sock), "%s/tmux", out), (int)sizeof(sock));
	snprintf(rc, sizeof(rc), "%s/rc", out);
	snprintf(err, sizeof(err), "%s/err", out);
	/* wide enough for both paths on the bottom line; the session ends with
	 * cpa-view (a failed check leaves it at most 60 s) */
	free(test_cmd_out(
		&r,
		"tmux -S '%s' -f /dev/null new-session -d -x 400 -y 30 \"timeout --foreground 60 "
		"setpriv --reuid=%d --regid=%d --clear-groups env LANG=C.UTF-8 "
		"'%s/bin/cpa-view' '%s' 2>'%s'; echo \\$? >'%s.tmp'; mv '%s.tmp' '%s'\" "
		">/dev/null 2>&1",
		sock, NOBODY, NOBODY, b ? b : ".", root, err, rc, rc, rc));
	ck_assert_int_eq(r, 0);
	snprintf(want, sizeof(want),
		 "'%s': Permission denied; '%s': Permission denied: their samples are not shown "
		 "(this user cannot read those runs)",
		 later, next);
	for (i = 0; i < 300; i++) {
		free(scr);
		scr = pane(sock);
		if (strstr(scr, want) && strstr(scr, "unreadable runs: 2"))
			break;
		usleep(50000);
	}
	ck_assert_msg(i < 300, "want \"%s\" and the header's count:\n%s", want, scr);
	ck_assert_msg(strstr(scr, "cpa_261120 ") && strstr(scr, "10:00:00-10:00:10"),
		      "the older run's 10 s:\n%s", scr);
	free(scr);
	free(test_cmd_out(&r, "tmux -S '%s' send-keys -t 0 q", sock));
	ck_assert_int_eq(r, 0);
	for (i = 0; i < 300 && access(rc, R_OK); i++)
		usleep(50000);
	o = test_cmd_out(NULL, "cat '%s' '%s'", rc, err);
	free(test_cmd_out(NULL, "tmux -S '%s' kill-server 2>&1", sock));
	unlink(sock);
	snprintf(want, sizeof(want), "0\ncpa-view: warning: '%s': Permission denied; '%s'", later,
		 next);
	ck_assert_msg(!strncmp(o, want, strlen(want)) && count(o, "cpa-view:") == 1, "%s", o);
	free(o);
}
END_TEST

/* nobody runs the built cpa and reaches the scratch dirs (setpriv, dirs others may enter) */
static bool nobody_can(void)
{
	const char *b = getenv("CPA_BUILD_DIR");
	char *s = test_scratch("readperm-probe");
	char cmd[2 * PATH_MAX + 128];
	bool ok;

	chmod(s, 0755);
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=%d --regid=%d --clear-groups sh -c \"'%s/bin/cpa' version && "
		 "test -x '%s'\" >/dev/null 2>&1",
		 NOBODY, NOBODY, b ? b : ".", s);
	ok = geteuid() == 0 && system(cmd) == 0;
	test_rm_rf(s);
	free(s);
	return ok;
}

int main(void)
{
	Suite *s = suite_create("read_perm");
	TCase *tc;

	if (!nobody_can()) {
		fprintf(stderr, "needs root, setpriv and a cpa and scratch dir nobody may reach: "
				"skipped\n");
		return TEST_SKIP;
	}
	tc = TEST_TCASE(s, "nobody", test_show_newest_unreadable, test_show_base_unreadable,
			test_view_unreadable_named, test_view_newest_unreadable,
			test_view_tui_unreadable);
	tcase_add_checked_fixture(tc, setup, NULL);
	return test_run_suite(s);
}
