// SPDX-License-Identifier: MIT
/*
 * test_nsgone: short-lived processes of another mount namespace (a container,
 * `unshare -m`), named and unwound after they exit (docs/unwindd.md, "Gone
 * processes of another mount namespace"; docs/symd.md, "Lookup path", step 3).
 *
 * Each namespace sees at a path of ours (host/NAME/) a stripped build of the spin
 * program with other function names (ns_inside_*) and its debug file next to
 * it (.gnu_debuglink), where the host has an unstripped build named
 * ns_host_*: once with frame pointers, once without (the walk needs the
 * binary's .eh_frame). unwindd and symd are stopped (SIGSTOP) while the
 * processes run and exit, so both meet them gone, /proc/PID/map_files and
 * /proc/PID/root with them.
 *
 * - gone-*: a sibling of their namespace lives on (`sleep`): their frames
 *   name the namespace's functions, the walk goes through ns_inside_mid, and
 *   never the host's build.
 * - alone-*: nothing of their namespace is left: unnamed (as before), never
 *   the host's.
 * - early-*: exec'd before the monitor started (no exec event names their
 *   namespace; stopped until unwindd and symd are), a sibling lives on: named
 *   as gone-* through the namespace unwindd's and symd's seeds of /proc note.
 *
 * Needs root, BTF and unshare (exit 77 otherwise).
 */
#include <check.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_proc.h"
#include "test_util.h"

#define SPIN "cpa-nsgone-spin" /* the programs' comm */

static char bin_dir[1024];

struct spin_stats {
	long samples, inside, host, mid;
};

static void count_line(void *ctx, char *stack, long n)
{
	struct spin_stats *st = ctx;

	st->samples += n;
	if (strstr(stack, "ns_inside_"))
		st->inside += n;
	if (strstr(stack, "ns_host_"))
		st->host += n;
	if (strstr(stack, "ns_inside_mid;ns_inside_leaf"))
		st->mid += n;
}

/* The folded stacks of the process whose pid the file at path holds. */
static void stats_of(const char *prof, const char *path, struct spin_stats *st)
{
	char *pid = test_slurp(path, NULL);

	ck_assert_ptr_nonnull(pid);
	memset(st, 0, sizeof(*st));
	fold_lines_of(prof, atoi(pid), count_line, st);
	free(pid);
}

/* Wait (up to 2 min) for dir/name to appear. */
static void wait_file(const char *dir, const char *name)
{
	char path[PATH_MAX + 32];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int i = 0; i < 1200 && access(path, F_OK) != 0; i++)
		usleep(100 * 1000);
	ck_assert_msg(access(path, F_OK) == 0, "no %s: the namespace's programs did not run", name);
}

START_TEST(test_gone_in_namespace)
{
	static const char *const names[] = {"gone-link",  "gone-nofp",	"alone-link",
					    "alone-nofp", "early-link", "early-nofp"};
	char work[PATH_MAX], store[PATH_MAX + 8], log[PATH_MAX + 16], prof[PATH_MAX + 16];
	char cpa[1100], path[PATH_MAX + 32];
	/* Their samples only: the rest of a busy host would fill ring 0
	 * while unwindd is stopped. */
	char *margv[] = {cpa, "monitor", "--store_dir", store, "-F", "99", "-n", SPIN, NULL};
	pid_t mon, stages[2] = {0, 0};
	struct spin_stats st;
	char *text;

	test_need_root_bpf(bin_dir, sizeof(bin_dir));
	test_scratch_in(work, sizeof(work), "nsgone");
	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	snprintf(store, sizeof(store), "%s/store", work);
	snprintf(log, sizeof(log), "%s/monitor.log", work);
	snprintf(prof, sizeof(prof), "%s/out.prof", work);
	/* host/NAME/SPIN: the host's build, unstripped; ns/NAME/SPIN: the
	 * namespace's, stripped, its symbols in SPIN.debug next to it (found by
	 * debuglink). One comm for all four, told apart by pid. */
	run_sh("set -e; W='%s'; B='%s'; mkdir $W/host $W/ns; "
	       "for n in gone-link gone-nofp alone-link alone-nofp early-link early-nofp; do "
	       "v=${n#*-}; s=; [ $v = nofp ] && s=-nofp; "
	       "mkdir $W/host/$n $W/ns/$n; cp $B/cpa-ns-spin-host$s $W/host/$n/" SPIN "; "
	       "objcopy --only-keep-debug $B/cpa-ns-spin-inside$s $W/ns/$n/" SPIN ".debug; "
	       "objcopy --strip-all --add-gnu-debuglink=$W/ns/$n/" SPIN ".debug "
	       "$B/cpa-ns-spin-inside$s $W/ns/$n/" SPIN "; done",
	       work, bin_dir);

	/* Before the monitor: exec'd (its comm is the program's), then stopped
	 * until unwindd and symd are; a sibling (sleep) lives on. */
	run_sh("export W='%s'; unshare -m --propagation private sh -c '"
	       "mount --bind $W/ns $W/host || exit 1; sleep 600 & s=$!; "
	       "for n in early-link early-nofp; do $W/host/$n/" SPIN " 0.3 & p=$!; "
	       "until [ \"$(cat /proc/$p/comm 2>/dev/null)\" = " SPIN " ]; do :; done; "
	       "kill -STOP $p; echo $p > $W/$n.pid; done; touch $W/early-up; "
	       "while [ ! -e $W/early-go ]; do sleep 0.1; done; "
	       "for n in early-link early-nofp; do p=$(cat $W/$n.pid); kill -CONT $p; wait $p; done; "
	       "touch $W/early-ran; while [ ! -e $W/release ]; do sleep 0.1; done; kill $s' "
	       ">$W/early.log 2>&1 &",
	       work);
	wait_file(work, "early-up");

	/* Stopped stages must not be taken for hung ones. */
	setenv("CPA_HANG_TIMEOUT_MS", "300000", 1);
	mon = spawn_monitor(margv, log, 60);
	unsetenv("CPA_HANG_TIMEOUT_MS");
	for (int i = 0; i < 100 && !(stages[0] && stages[1]); i++) {
		stages[0] = monitor_stage_pid(mon, "unwindd");
		stages[1] = monitor_stage_pid(mon, "symd");
		if (!(stages[0] && stages[1]))
			usleep(100 * 1000);
	}
	ck_assert_msg(stages[0] > 0 && stages[1] > 0, "no unwindd/symd under monitor %d", mon);
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(kill(stages[i], SIGSTOP), 0);

	/* With a sibling: sleep lives until the monitor has drained. Made
	 * first: a mount namespace's inode is reused once it is freed, and the
	 * one without a sibling must not get this one's. */
	run_sh("export W='%s'; unshare -m --propagation private sh -c '"
	       "mount --bind $W/ns $W/host || exit 1; sleep 600 & s=$!; touch $W/up; "
	       "while [ ! -e $W/alone-done ]; do sleep 0.1; done; "
	       "$W/host/gone-link/" SPIN " 0.3 & echo $! > $W/gone-link.pid; wait $!; "
	       "$W/host/gone-nofp/" SPIN " 0.3 & echo $! > $W/gone-nofp.pid; wait $!; "
	       "touch $W/ran; while [ ! -e $W/release ]; do sleep 0.1; done; kill $s' "
	       ">$W/ns.log 2>&1 &",
	       work);
	wait_file(work, "up");
	/* Without one: the namespace is empty once this returns. */
	run_sh("export W='%s'; unshare -m --propagation private sh -c '"
	       "mount --bind $W/ns $W/host || exit 1; "
	       "$W/host/alone-link/" SPIN " 0.3 & echo $! > $W/alone-link.pid; wait $! || exit 1; "
	       "$W/host/alone-nofp/" SPIN " 0.3 & echo $! > $W/alone-nofp.pid; wait $!' && "
	       "touch $W/alone-done",
	       work);
	wait_file(work, "ran");
	snprintf(path, sizeof(path), "%s/early-go", work);
	run_sh("touch '%s'", path);
	wait_file(work, "early-ran");

	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(kill(stages[i], SIGCONT), 0);
	kill(mon, SIGINT);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	snprintf(path, sizeof(path), "%s/release", work);
	run_sh("touch '%s'", path);
	text = monitor_fold_all(cpa, store, prof);

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		bool alone = !strncmp(names[i], "alone", 5);

		snprintf(path, sizeof(path), "%s/%s.pid", work, names[i]);
		stats_of(text, path, &st);
		fprintf(stderr,
			"%s: %ld samples, %ld name ns_inside_*, %ld through ns_inside_mid, "
			"%ld ns_host_*\n",
			names[i], st.samples, st.inside, st.mid, st.host);
		ck_assert_msg(st.samples > 0, "no sample of %s", names[i]);
		ck_assert_msg(!st.host, "%s: %ld samples name the host's build", names[i], st.host);
		if (alone) {
			/* Nothing shows its files any more: not named (nor the
			 * walk through its binary taken). */
			ck_assert_msg(!st.inside && !st.mid,
				      "%s: gone with its namespace, %ld samples named", names[i],
				      st.inside);
			continue;
		}
		ck_assert_msg(st.inside > 0 && st.mid > 0,
			      "%s: gone, its namespace alive: %ld of %ld samples name its "
			      "functions, %ld unwound through ns_inside_mid",
			      names[i], st.inside, st.samples, st.mid);
	}
	free(text);
	test_rm_rf(work);
}
END_TEST

int main(void)
{
	/* Before Check forks the cases, so a skip is a skip. */
	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0 ||
	    system("unshare -m true >/dev/null 2>&1") != 0) {
		fprintf(stderr, "skip: needs root, BTF and unshare -m\n");
		return TEST_SKIP;
	}
	return run_one_test(suite_create("nsgone"), tcase_create("nsgone"), test_gone_in_namespace,
			    240);
}
