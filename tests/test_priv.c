// SPDX-License-Identifier: MIT
/*
 * test_priv: least privilege of the real pipeline (issue 14, "Least
 * privilege"), with the real `cpa monitor`, the four real stages and real BPF.
 *
 * - bpf_fds: while it runs (whole machine, off-CPU, scheduler metrics and a
 *   tracepoint probe on, so every BPF object capture makes exists), only
 *   capture holds BPF objects: no fd of the monitor, unwindd, symd or the
 *   storer is a BPF map, program, link, iterator or BTF object or a perf
 *   event, and none of them maps a BPF map (the ring buffer).
 *
 * Needs root and BTF (exit 77 otherwise).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_proc.h"
#include "test_util.h"

static char bin_dir[1024];

struct mon {
	pid_t pid;
	char store[64];
	char log[128];
};

/* The monitor's log so far (malloc'ed). */
static char *mon_log(const struct mon *m)
{
	int fd = open(m->log, O_RDONLY | O_CLOEXEC);

	ck_assert_int_ge(fd, 0);
	return slurp_fd(fd);
}

/* cpa monitor --store_dir <tmp> args...; returns once every stage runs. */
static void mon_start(struct mon *m, const char *const *args)
{
	char cpa[1100];
	char *argv[32] = {cpa, "monitor", "--store_dir", m->store};
	int n = 4, fd;

	snprintf(m->store, sizeof(m->store), "/tmp/cpa-priv-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(m->store));
	snprintf(m->log, sizeof(m->log), "%s.log", m->store);
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	for (int i = 0; args[i]; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	fd = open(m->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	m->pid = spawn_fds(argv, -1, fd, fd);
	close(fd);
	for (int i = 0; i < 1200; i++) {
		char *text = mon_log(m);
		bool up = strstr(text, "all stages running");

		ck_assert_msg(!strstr(text, "ERROR"), "monitor failed: %s", text);
		free(text);
		if (up)
			return;
		usleep(50 * 1000);
	}
	ck_abort_msg("cpa monitor did not start in 60 s");
}

/* SIGINT: every stage drains into the store; the monitor exits 0. */
static void mon_stop(struct mon *m)
{
	char *text;
	int rc;

	kill(m->pid, SIGINT);
	rc = wait_exit(m->pid, NULL);
	text = mon_log(m);
	ck_assert_msg(rc == 0, "cpa monitor exited %d:\n%s", rc, text);
	free(text);
	run_sh("rm -rf '%s' '%s'", m->store, m->log);
}

/* The pid `cpa ctl status` shows for stage. */
static pid_t stage_pid(const struct mon *m, const char *stage)
{
	char cpa[1100], want[64], *out, *l;
	char *argv[] = {cpa, "ctl", "--store_dir", (char *)m->store, "status", NULL};
	int rc, pid = 0;

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	out = run(argv, &rc);
	ck_assert_msg(rc == 0, "cpa ctl status exited %d: %s", rc, out);
	snprintf(want, sizeof(want), "%s: running, pid ", stage);
	l = strstr(out, want);
	ck_assert_msg(l && sscanf(l + strlen(want), "%d", &pid) == 1 && pid > 0,
		      "no running %s in: %s", stage, out);
	free(out);
	return pid;
}

/* What a process holds of BPF: its fds by kind, and its BPF mappings. */
struct bpf_held {
	int maps, progs, links, other; /* other: iter, BTF, perf event */
	int mapped;		       /* lines of /proc/PID/maps naming a BPF map */
	char first[600];	       /* the first such fd, for the message */
};

static void bpf_held_of(pid_t pid, struct bpf_held *h)
{
	char dir[64], path[PATH_MAX], target[256];
	struct dirent *de;
	FILE *f;
	DIR *d;

	memset(h, 0, sizeof(*h));
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	ck_assert_msg(d, "%s: %m", dir);
	while ((de = readdir(d))) {
		ssize_t n;
		int *cnt = NULL;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n = readlink(path, target, sizeof(target) - 1);
		if (n < 0)
			continue; /* closed meanwhile */
		target[n] = 0;
		if (!strcmp(target, "anon_inode:bpf-map"))
			cnt = &h->maps;
		else if (!strcmp(target, "anon_inode:bpf-prog"))
			cnt = &h->progs;
		else if (!strcmp(target, "anon_inode:bpf_link"))
			cnt = &h->links;
		else if (!strncmp(target, "anon_inode:bpf", 14) ||
			 !strncmp(target, "anon_inode:btf", 14) ||
			 !strcmp(target, "anon_inode:[perf_event]"))
			cnt = &h->other;
		if (!cnt)
			continue;
		(*cnt)++;
		if (!h->first[0])
			snprintf(h->first, sizeof(h->first), "fd %s -> %s", de->d_name, target);
	}
	closedir(d);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	ck_assert_msg(f, "%s: %m", path);
	while (fgets(target, sizeof(target), f))
		if (strstr(target, "anon_inode:bpf"))
			h->mapped++;
	fclose(f);
}

START_TEST(test_bpf_fds_only_capture)
{
	static const char *const stages[] = {"unwindd", "symd", "storer"};
	struct bpf_held h;
	struct mon m;

	test_need_root_bpf(bin_dir, sizeof(bin_dir));
	mon_start(&m, (const char *const[]){"-F", "49", "--offcpu", "--probe",
					    "tracepoint:syscalls:sys_enter_getppid", NULL});

	/* The control: capture holds them, so the look would see them. */
	bpf_held_of(stage_pid(&m, "capture"), &h);
	fprintf(stderr, "capture: %d BPF maps, %d programs, %d links, %d other, %d mapped\n",
		h.maps, h.progs, h.links, h.other, h.mapped);
	ck_assert_int_gt(h.maps, 0);
	ck_assert_int_gt(h.progs, 0);
	ck_assert_int_gt(h.mapped, 0); /* the BPF ring buffer */

	bpf_held_of(m.pid, &h);
	ck_assert_msg(!h.maps && !h.progs && !h.links && !h.other && !h.mapped,
		      "the monitor holds BPF objects: %d maps, %d programs, %d links, %d other, "
		      "%d mapped (%s)",
		      h.maps, h.progs, h.links, h.other, h.mapped, h.first);
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
		bpf_held_of(stage_pid(&m, stages[i]), &h);
		ck_assert_msg(!h.maps && !h.progs && !h.links && !h.other && !h.mapped,
			      "%s holds BPF objects: %d maps, %d programs, %d links, %d other, "
			      "%d mapped (%s)",
			      stages[i], h.maps, h.progs, h.links, h.other, h.mapped, h.first);
	}
	mon_stop(&m);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;

	/* Before Check forks the cases, so a skip is a skip. */
	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		fprintf(stderr, "skip: needs root and BTF\n");
		return TEST_SKIP;
	}
	s = suite_create("priv");
	tc = tcase_create("priv");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test_bpf_fds_only_capture);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
