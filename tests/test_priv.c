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
 * - mount_ns: a process in its own mount namespace runs binaries at a path
 *   where the host has another build of the same program (other function
 *   names); its symbols are in a debug file it finds by .gnu_debuglink in its
 *   directory or by build-id under its /usr/lib/debug, which the host has not
 *   (a decoy debug file of the host's build at the same place). Profiled by
 *   the real pipeline, its frames name its own functions: unwindd and symd
 *   looked up its files in its namespace (/proc/PID/map_files, /proc/PID/root),
 *   not at our paths. Two more reach their debug file through an ABSOLUTE
 *   symlink (by debuglink, by build-id) whose target only the namespace has
 *   (the host has a decoy there): named too, the link resolved in the
 *   process's root (common/procroot.h, proc_root_open()), not in ours.
 *
 * Needs root and BTF (exit 77 otherwise).
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_proc.h"
#include "test_util.h"

static char bin_dir[1024];

struct mon {
	pid_t pid;
	char store[PATH_MAX];
	char log[PATH_MAX + 8];
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
	int n = 4;

	scratch_store("priv", m->store, sizeof(m->store));
	snprintf(m->log, sizeof(m->log), "%s.log", m->store);
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	for (int i = 0; args[i]; i++)
		argv[n++] = (char *)args[i];
	argv[n] = NULL;
	m->pid = spawn_monitor(argv, m->log, 60);
}

/* SIGINT: every stage drains into the store; the monitor exits 0. */
/* Stop the monitor as an operator would: every stage drains into the store. */
static void mon_halt(struct mon *m)
{
	char *text;
	int rc;

	kill(m->pid, SIGINT);
	rc = wait_exit(m->pid, NULL);
	text = mon_log(m);
	ck_assert_msg(rc == 0, "cpa monitor exited %d:\n%s", rc, text);
	free(text);
}

static void mon_remove(struct mon *m)
{
	test_rm_rf(m->store);
	unlink(m->log);
}

static void mon_stop(struct mon *m)
{
	mon_halt(m);
	mon_remove(m);
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

/* The whole store as folded stacks ("comm:pid;root;...;leaf COUNT"), no env label. */
static char *show_all(const struct mon *m)
{
	char cpa[1100], start[32], num[32], prof[PATH_MAX + 64];
	char *rng[] = {cpa, "show", "--read", (char *)m->store, "--show_range", NULL};
	char *exp[] = {cpa, "show", "--read", (char *)m->store, "-B", start, "--output_num",
		       num, "-o",   prof,     "--no_env",	NULL};
	int h0, m0, s0, ms0, h1, m1, s1, ms1, rc, fd;
	regmatch_t rm[1];
	regex_t re;
	long n, span;
	char *out;

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	out = run(rng, &rc);
	ck_assert_msg(rc == 0, "cpa show --show_range exited %d: %s", rc, out);
	ck_assert_int_eq(regcomp(&re, "^Record Time From \\[", REG_EXTENDED | REG_NEWLINE), 0);
	ck_assert_msg(regexec(&re, out, 1, rm, 0) == 0, "no range in '%s'", out);
	regfree(&re);
	ck_assert_int_eq(
		sscanf(out + rm[0].rm_so,
		       "Record Time From [ %d:%d:%d.%d ] to [ %d:%d:%d.%d ] Records Num: %ld", &h0,
		       &m0, &s0, &ms0, &h1, &m1, &s1, &ms1, &n),
		9);
	free(out);
	span = (h1 * 3600L + m1 * 60 + s1) - (h0 * 3600L + m0 * 60 + s0) + 1;
	snprintf(start, sizeof(start), "%02d:%02d:%02d", h0, m0, s0);
	snprintf(num, sizeof(num), "%ld", span > 0 ? span : span + 86400);
	snprintf(prof, sizeof(prof), "%s/out.prof", m->store);
	out = run(exp, &rc);
	ck_assert_msg(rc == 0, "cpa show exited %d: %s", rc, out);
	free(out);
	fd = open(prof, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return slurp_fd(fd);
}

struct comm_stats {
	long samples, inside, host, unnamed;
	char first_bad[512];
};

/* Folded lines of processes named comm: how many name which build's functions,
 * and how many hold a frame of the binary not named (symd's "0x... [comm]", or
 * "comm+0x..." for a function known by its FDE only). */
static void comm_stats_of(const char *prof, const char *comm, struct comm_stats *cs)
{
	char head[64], miss[64], fde[64];
	const char *l = prof;

	memset(cs, 0, sizeof(*cs));
	snprintf(head, sizeof(head), "%s:", comm);
	snprintf(miss, sizeof(miss), "[%s]", comm);
	snprintf(fde, sizeof(fde), "%s+0x", comm);
	while (l && *l) {
		const char *e = strchr(l, '\n'), *sp;
		size_t len = e ? (size_t)(e - l) : strlen(l);
		char line[4096];
		long cnt;

		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		l = e ? e + 1 : NULL;
		sp = strrchr(line, ' ');
		if (strncmp(line, head, strlen(head)) || !sp)
			continue;
		cnt = atol(sp + 1);
		cs->samples += cnt;
		if (strstr(line, "ns_inside_"))
			cs->inside += cnt;
		if (strstr(line, "ns_host_"))
			cs->host += cnt;
		if (strstr(line, miss) || strstr(line, fde))
			cs->unnamed += cnt;
		if ((strstr(line, "ns_host_") || strstr(line, miss) || strstr(line, fde)) &&
		    !cs->first_bad[0])
			snprintf(cs->first_bad, sizeof(cs->first_bad), "%.500s", line);
	}
}

START_TEST(test_mount_ns_binaries)
{
	static const char *const comms[] = {"spin-link", "spin-bid", "spin-alink", "spin-abid"};
	char work[PATH_MAX], *prof;
	struct comm_stats cs;
	struct mon m;
	pid_t ns;

	test_need_root_bpf(bin_dir, sizeof(bin_dir));
	test_scratch_in(work, sizeof(work), "ns");
	/* host/: the host's build at the path (with a decoy debug file of its
	 * own); ns/: what the namespace sees there instead, stripped, its
	 * symbols in spin.debug (by debuglink) and under dbg/ (by build-id),
	 * which the namespace sees as /usr/lib/debug. */
	run_sh("set -e; W='%s'; B='%s'; mkdir $W/host $W/ns $W/dbg; "
	       "cp $B/cpa-ns-spin-host $W/host/spin-link; cp $B/cpa-ns-spin-host $W/host/spin-bid; "
	       "objcopy --only-keep-debug $B/cpa-ns-spin-host $W/host/spin.debug; "
	       "objcopy --only-keep-debug $B/cpa-ns-spin-inside $W/ns/spin.debug; "
	       "objcopy --strip-all --add-gnu-debuglink=$W/ns/spin.debug $B/cpa-ns-spin-inside "
	       "$W/ns/spin-link; "
	       "objcopy --strip-all $B/cpa-ns-spin-inside $W/ns/spin-bid; "
	       "bid=$(readelf -n $B/cpa-ns-spin-inside | sed -n 's/.*Build ID: //p'); "
	       "test -n \"$bid\"; d=$W/dbg/.build-id/$(echo $bid | cut -c1-2); mkdir -p $d; "
	       "cp $W/ns/spin.debug $d/$(echo $bid | cut -c3-).debug; "
	       "test ! -e /usr/lib/debug/.build-id/$(echo $bid | cut -c1-2)/$(echo $bid | cut -c3-).debug",
	       work, bin_dir);
	/* Through absolute links to opt/, where the namespace sees nsopt/ and
	 * the host has decoys: spin-alink (no build-id) by its debuglink
	 * (ns/spin-alink.debug -> W/opt/spin-alink.debug), spin-abid (the
	 * build without frame pointers: a build-id of its own) by build-id
	 * (dbg/.build-id/xx/yy.debug -> W/opt/spin-abid.debug). */
	run_sh("set -e; W='%s'; B='%s'; mkdir $W/opt $W/nsopt; "
	       "cp $B/cpa-ns-spin-host $W/host/spin-alink; cp $B/cpa-ns-spin-host $W/host/spin-abid; "
	       "cp $W/host/spin.debug $W/opt/spin-alink.debug; "
	       "cp $W/host/spin.debug $W/opt/spin-abid.debug; "
	       "cp $W/ns/spin.debug $W/nsopt/spin-alink.debug; "
	       "objcopy --strip-all --remove-section=.note.gnu.build-id "
	       "--add-gnu-debuglink=$W/nsopt/spin-alink.debug $B/cpa-ns-spin-inside "
	       "$W/ns/spin-alink; ln -s $W/opt/spin-alink.debug $W/ns/spin-alink.debug; "
	       "objcopy --only-keep-debug $B/cpa-ns-spin-inside-nofp $W/nsopt/spin-abid.debug; "
	       "objcopy --strip-all $B/cpa-ns-spin-inside-nofp $W/ns/spin-abid; "
	       "bid=$(readelf -n $B/cpa-ns-spin-inside-nofp | sed -n 's/.*Build ID: //p'); "
	       "test -n \"$bid\"; d=$W/dbg/.build-id/$(echo $bid | cut -c1-2); mkdir -p $d; "
	       "ln -s $W/opt/spin-abid.debug $d/$(echo $bid | cut -c3-).debug; "
	       "test ! -e /usr/lib/debug/.build-id/$(echo $bid | cut -c1-2)/$(echo $bid | cut -c3-).debug",
	       work, bin_dir);

	mon_start(&m, (const char *const[]){"-F", "99", NULL});
	/* All run in one new mount namespace (private: the host sees none of
	 * its mounts) where host/ shows ns/, /usr/lib/debug dbg/, opt/ nsopt/. Each
	 * spins 2 s of CPU, then sleeps until go exists: the monitor drains
	 * while they live. A process in another namespace gone before symd
	 * names its frames cannot be named (its files are gone with it: not
	 * what this case is about), and on a loaded host symd may get the
	 * first sample more than 2 s late (CI, 2026-11-30: 201 of 201 unnamed). */
	ns = fork();
	ck_assert_int_ge(ns, 0);
	if (ns == 0) {
		char cmd[4 * PATH_MAX];

		snprintf(cmd, sizeof(cmd),
			 "export W='%s'; exec unshare -m --propagation private sh -c '"
			 "mount --bind $W/ns $W/host && mount --bind $W/dbg /usr/lib/debug && "
			 "mount --bind $W/nsopt $W/opt || exit 1; "
			 "$W/host/spin-link 2 $W/spun-link $W/go & a=$!; "
			 "$W/host/spin-bid 2 $W/spun-bid $W/go & b=$!; "
			 "$W/host/spin-alink 2 $W/spun-alink $W/go & c=$!; "
			 "$W/host/spin-abid 2 $W/spun-abid $W/go & d=$!; "
			 "wait $a && wait $b && wait $c && wait $d'",
			 work);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	for (int i = 0;; i++) {
		char spun[PATH_MAX + 32];
		size_t done = 0;

		for (size_t c = 0; c < sizeof(comms) / sizeof(comms[0]); c++) {
			snprintf(spun, sizeof(spun), "%s/spun-%s", work, comms[c] + 5);
			done += !access(spun, F_OK);
		}
		if (done == sizeof(comms) / sizeof(comms[0]))
			break;
		ck_assert_msg(waitpid(ns, NULL, WNOHANG) == 0, "the namespace's shell ended early");
		ck_assert_msg(i < 2400, "the spinners did not spin 2 s of CPU in 120 s");
		usleep(50000);
	}
	/* Read once everything is in: a loaded machine's storer may not have
	 * sealed a block of the 2 s run yet. */
	mon_halt(&m);
	run_sh("touch '%s/go'", work);
	ck_assert_int_eq(wait_exit(ns, NULL), 0);
	prof = show_all(&m);
	mon_remove(&m);

	for (size_t i = 0; i < sizeof(comms) / sizeof(comms[0]); i++) {
		comm_stats_of(prof, comms[i], &cs);
		fprintf(stderr,
			"%s: %ld samples, %ld name ns_inside_*, %ld ns_host_*, %ld unnamed\n",
			comms[i], cs.samples, cs.inside, cs.host, cs.unnamed);
		ck_assert_msg(cs.samples > 0, "no sample of %s", comms[i]);
		ck_assert_msg(cs.inside > 0, "%s: no frame names the namespace's functions",
			      comms[i]);
		ck_assert_msg(
			!cs.host && !cs.unnamed,
			"%s: %ld samples name the host's build, %ld frames of it unnamed: '%s'",
			comms[i], cs.host, cs.unnamed, cs.first_bad);
	}
	free(prof);
	test_rm_rf(work);
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
	tcase_add_test(tc, test_mount_ns_binaries);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
