// SPDX-License-Identifier: MIT
/*
 * JIT runtimes under the real monitor (whole machine, cpa's defaults), with
 * the programs of tests/workload/jit_src.h: hotLoop called by work, for a few
 * seconds of CPU. `test_jit node`: node --perf-basic-prof (V8 writes
 * /tmp/perf-PID.map); `test_jit java`: java with no flags (symd asks the JVM
 * for its perf map over the attach protocol) and java -XX:+PreserveFramePointer.
 * Per program:
 *
 *   - >= 95 % of its samples name the hot code (hotLoop or work, which the JIT
 *     may have inlined it into) on their stack;
 *   - node and java with frame pointers: >= 90 % of the stacks are complete
 *     (rooted at _start, clone3 or start_thread: V8 builtins and JIT frames
 *     walked by frame pointer) and at most 5 % carry a stop marker.
 *
 * Root + BTF + the runtime, else 77.
 */
#include <check.h>
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "test_proc.h"
#include "test_util.h"
#include "workload/jit_src.h"

static char bin_dir[4096];
static char dir[PATH_MAX]; /* main()'s test_scratch(): kept if the test fails */
static const char *runtime;
static char node_path[4096], java_path[4096];

/* The path of a command, as the shell finds it ("" when it does not). */
static void which(const char *cmd, char *ret, size_t len)
{
	char line[512];
	FILE *f;

	snprintf(line, sizeof(line), "command -v %s", cmd);
	ret[0] = 0;
	f = popen(line, "r");
	if (!f)
		return;
	if (fgets(ret, (int)len, f))
		ret[strcspn(ret, "\n")] = 0;
	pclose(f);
}

struct jit_stats {
	long samples, hot, marked, complete;
	long startup; /* not hot, in the JVM's loading and creation */
};

static bool is_root(const char *f)
{
	return !strcmp(f, "_start") || !strcmp(f, "clone3") || !strcmp(f, "start_thread");
}

static bool is_hot(const char *f)
{
	/* V8: "JS:*work /path/hot.js:7:14"; HotSpot: "long Hot.hotLoop(long)" */
	return strstr(f, "Hot.hotLoop(") || strstr(f, "Hot.work(") ||
	       (strstr(f, "hot.js:") && (strstr(f, "hotLoop ") || strstr(f, "work ")));
}

/* One line of the program's stacks: semi = ";root;...;leaf", c samples. */
static void jit_line(void *ctx, char *semi, long c)
{
	struct jit_stats *st = ctx;
	char *copy = strdup(semi);
	bool hot = false, first = true;

	st->samples += c;
	if (!strncmp(semi + 1, "<# ", 3))
		st->marked += c;
	for (char *tok = strtok(semi + 1, ";"); tok; tok = strtok(NULL, ";")) {
		if (first && is_root(tok))
			st->complete += c;
		first = false;
		hot = hot || is_hot(tok);
	}
	if (!hot && (strstr(copy, ";LoadJavaVM;") || strstr(copy, ";JNI_CreateJavaVM;")))
		st->startup += c;
	if (hot)
		st->hot += c;
	else if (st->samples - st->hot <= 10 * c)
		fprintf(stderr, "  not hot (%ld): %.200s ... %.200s\n", c, copy,
			strrchr(copy, ';') ? strrchr(copy, ';') : "");
	free(copy);
}

static void jit_stats_of(const char *prof, pid_t pid, struct jit_stats *st)
{
	memset(st, 0, sizeof(*st));
	fold_lines_of(prof, pid, jit_line, st);
}

static pid_t start(char *const argv[])
{
	return spawn_fds(argv, -1, -1, -1);
}

START_TEST(test_jit_programs)
{
	char cpa[4200], store[4200], log[4200], prof[4200], js[8400], *text;
	char *margv[] = {cpa, "monitor", "--store_dir", store, NULL};
	/* in dir: node writes an isolate-*-v8.log into its cwd (exec: the same pid) */
	char *node[] = {"/bin/sh", "-c", js, NULL};
	char *java[] = {java_path, "-cp", dir, "Hot", "8", NULL};
	char *java_fp[] = {java_path, "-XX:+PreserveFramePointer", "-cp", dir, "Hot", "8", NULL};
	const char *names[3];
	bool whole[3];
	int n = 0;
	pid_t mon, pids[3];

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin_dir);
	snprintf(store, sizeof(store), "%s/store", dir);
	snprintf(log, sizeof(log), "%s/monitor.log", dir);
	snprintf(prof, sizeof(prof), "%s/out.prof", dir);
	snprintf(js, sizeof(js), "cd '%s' && exec '%s' --perf-basic-prof hot.js 8", dir, node_path);
	mon = spawn_monitor(margv, log, 60);
	sleep(1);
	if (!strcmp(runtime, "node")) {
		names[n] = "node --perf-basic-prof";
		whole[n] = true;
		pids[n++] = start(node);
	} else {
		names[n] = "java";
		whole[n] = false; /* compiled frames keep no frame pointer */
		pids[n++] = start(java);
		names[n] = "java -XX:+PreserveFramePointer";
		whole[n] = true;
		pids[n++] = start(java_fp);
	}
	text = monitor_stop_fold(mon, pids, n, 2, cpa, store, prof);
	for (int i = 0; i < n; i++) {
		struct jit_stats st;
		double all;

		jit_stats_of(text, pids[i], &st);
		all = (double)MAX(st.samples, 1);
		fprintf(stderr,
			"e2e jit %s: %ld samples, hot code named %.2f %%, complete %.2f %%, stop "
			"markers %.2f %%\n",
			names[i], st.samples, 100.0 * (double)st.hot / all,
			100.0 * (double)st.complete / all, 100.0 * (double)st.marked / all);
		ck_assert_msg(st.samples >= 100, "%s: %ld samples", names[i], st.samples);
		/* of the samples past the JVM's start-up: a loaded host gives it
		 * a larger share of the 8 s (8 of 395 once, 94.9 % named in all) */
		ck_assert_msg(st.hot >= 0.95 * (double)(st.samples - st.startup),
			      "%s: hot code named in %ld of %ld (%ld in the JVM's start-up)",
			      names[i], st.hot, st.samples, st.startup);
		if (!whole[i])
			continue;
		ck_assert_msg(st.complete >= 0.90 * (double)st.samples, "%s: %ld of %ld complete",
			      names[i], st.complete, st.samples);
		ck_assert_msg(st.marked <= 0.05 * (double)st.samples, "%s: %ld of %ld marked",
			      names[i], st.marked, st.samples);
	}
	free(text);
	/* passed: the perf maps the runtimes wrote where symd reads them */
	for (int i = 0; i < n; i++) {
		char map[64];

		snprintf(map, sizeof(map), "/tmp/perf-%d.map", (int)pids[i]);
		unlink(map);
	}
}
END_TEST

static int put(const char *name, const char *text)
{
	char path[4200];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(path);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	Suite *s = suite_create("jit");
	TCase *tc = tcase_create("jit");
	char cmd[8400], perfdata[300];
	struct passwd *pw;
	bool had_perfdata;
	int r;

	runtime = argc > 1 ? argv[1] : "node";
	if (test_e2e_ready(bin_dir, sizeof(bin_dir)))
		return 77;
	which("node", node_path, sizeof(node_path));
	which("java", java_path, sizeof(java_path));
	if (!strcmp(runtime, "node")
		    ? !node_path[0]
		    : !java_path[0] || system("command -v javac > /dev/null") != 0) {
		fprintf(stderr, "skip: no %s\n", runtime);
		return 77;
	}
	/* the JVMs' (javac's too) /tmp/hsperfdata_<user>: removed, when empty, if
	 * the test made it */
	pw = getpwuid(geteuid());
	snprintf(perfdata, sizeof(perfdata), "/tmp/hsperfdata_%s", pw ? pw->pw_name : "root");
	had_perfdata = access(perfdata, F_OK) == 0;
	test_scratch_in(dir, sizeof(dir), "jit");
	if (put("hot.js", jit_node_src) < 0 || put("Hot.java", jit_java_src) < 0)
		return 1;
	if (strcmp(runtime, "node")) {
		/* no attach: a monitor running meanwhile would have javac write a
		 * /tmp/perf-PID.map */
		snprintf(cmd, sizeof(cmd),
			 "cd '%s' && javac -J-XX:+DisableAttachMechanism -d . Hot.java", dir);
		r = system(cmd);
		if (r != 0) {
			fprintf(stderr, "javac failed (%d)\n", r);
			return 1;
		}
	}
	r = run_one_test(s, tc, test_jit_programs, 240);
	if (r == EXIT_SUCCESS && !had_perfdata)
		rmdir(perfdata);
	return r;
}
