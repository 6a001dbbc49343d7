// SPDX-License-Identifier: MIT
/*
 * test_monitor: the real `cpa monitor` supervising fake stages
 * (test_monitor_stage.c) over a real arena. No root needed. Each case starts
 * a monitor with its own store_dir and control directory, steers the fake
 * stages through files, and reads the monitor's log, `cpa ctl status` and the
 * stages' event file.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "common/sdnotify.h"
#include "shm/stage.h"
#include "test_util.h"

struct mon {
	pid_t pid;
	char dir[PATH_MAX];
	char store[PATH_MAX + 16];
	char log[PATH_MAX + 16];
};

static const char *build_dir(void)
{
	const char *b = getenv("CPA_BUILD_DIR");

	return b ? b : ".";
}

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f)
		return strdup("");
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)
		buf[0] = 0;
	fclose(f);
	return buf;
}

static uint64_t ms_now(void)
{
	return clock_ns(CLOCK_MONOTONIC) / NSEC_PER_MSEC;
}

/* Wait until every needle (NULL-terminated) shows up in one line of the file. */
static bool wait_line(const char *path, int timeout_ms, const char *const *needles)
{
	uint64_t end = ms_now() + (uint64_t)timeout_ms;

	do {
		char *buf = read_file(path), *save = NULL;
		bool found = false;

		for (char *l = strtok_r(buf, "\n", &save); l && !found;
		     l = strtok_r(NULL, "\n", &save)) {
			bool all = true;

			for (int i = 0; needles[i]; i++)
				if (!strstr(l, needles[i]))
					all = false;
			found = all;
		}
		free(buf);
		if (found)
			return true;
		usleep(20000);
	} while (ms_now() < end);
	return false;
}

#define WAIT_LOG(m, ms, ...) wait_line((m)->log, ms, (const char *const[]){__VA_ARGS__, NULL})
#define WAIT_EVENT(m, ms, ...)                                               \
	({                                                                   \
		char _p[PATH_MAX + 16];                                      \
		snprintf(_p, sizeof(_p), "%s/events", (m)->dir);             \
		wait_line(_p, ms, (const char *const[]){__VA_ARGS__, NULL}); \
	})

static void dump_log(const struct mon *m)
{
	char *s = read_file(m->log);

	fprintf(stderr, "---- monitor log %s ----\n%s---- end ----\n", m->log, s);
	free(s);
}

/* Remove a passing case's directory (a failing one keeps it for a look). */
static void mon_cleanup(struct mon *m)
{
	test_rm_rf(m->dir);
}

/* Start `cpa monitor --store_dir <dir>/store <args...>` with env "K=V" pairs. */
static void mon_start(struct mon *m, const char *const *env, const char *const *args)
{
	char cpa[PATH_MAX], stages[PATH_MAX];
	const char *argv[32];
	int n = 0;

	test_scratch_in(m->dir, sizeof(m->dir), "monitor");
	snprintf(m->store, sizeof(m->store), "%s/store", m->dir);
	snprintf(m->log, sizeof(m->log), "%s/monitor.log", m->dir);
	snprintf(cpa, sizeof(cpa), "%s/bin/cpa", build_dir());
	snprintf(stages, sizeof(stages), "%s/tests/fake-stages", build_dir());

	argv[n++] = cpa;
	argv[n++] = "monitor";
	argv[n++] = "--store_dir";
	argv[n++] = m->store;
	for (int i = 0; args && args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;

	m->pid = fork();
	ck_assert_int_ge(m->pid, 0);
	if (m->pid == 0) {
		int fd = open(m->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		dup2(fd, 2);
		dup2(fd, 1);
		setenv("CPA_STAGE_DIR", stages, 1);
		setenv("FAKE_CTL_DIR", m->dir, 1);
		unsetenv("NOTIFY_SOCKET");
		unsetenv("WATCHDOG_USEC");
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		execv(cpa, (char **)argv);
		_exit(127);
	}
}

/* Exit code of the monitor, or -1 on timeout (then it is killed). */
static int mon_wait(struct mon *m, int timeout_ms)
{
	uint64_t end = ms_now() + (uint64_t)timeout_ms;
	int status;

	do {
		pid_t p = waitpid(m->pid, &status, WNOHANG);

		if (p == m->pid) {
			m->pid = 0;
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		}
		usleep(20000);
	} while (ms_now() < end);
	kill(m->pid, SIGKILL);
	waitpid(m->pid, &status, 0);
	m->pid = 0;
	dump_log(m);
	return -1;
}

static void mon_touch(struct mon *m, const char *what)
{
	char p[PATH_MAX + 32];
	int fd;

	snprintf(p, sizeof(p), "%s/%s", m->dir, what);
	fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
}

static void mon_ready(struct mon *m)
{
	if (!WAIT_LOG(m, 10000, "all stages running")) {
		dump_log(m);
		ck_abort_msg("monitor did not report all stages running");
	}
}

/* Run `cpa ctl <args>` for m; stdout into *out (malloc'ed). Returns the exit code. */
static int ctl(struct mon *m, char **out, const char *const *args)
{
	char cpa[PATH_MAX], path[PATH_MAX + 16];
	const char *argv[16];
	int n = 0, status;
	pid_t pid;

	snprintf(cpa, sizeof(cpa), "%s/bin/cpa", build_dir());
	snprintf(path, sizeof(path), "%s/ctl.out", m->dir);
	argv[n++] = cpa;
	argv[n++] = "ctl";
	argv[n++] = "--store_dir";
	argv[n++] = m->store;
	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	pid = fork();
	if (pid == 0) {
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execv(cpa, (char **)argv);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	*out = read_file(path);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define CTL(m, out, ...) ctl(m, out, (const char *const[]){__VA_ARGS__, NULL})

static long event_num(struct mon *m, const char *stage, const char *ev, const char *key)
{
	char p[PATH_MAX + 16], prefix[64], *buf, *save = NULL;
	long v = -1;

	snprintf(p, sizeof(p), "%s/events", m->dir);
	snprintf(prefix, sizeof(prefix), "%s %s ", stage, ev);
	buf = read_file(p);
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *k;

		if (strncmp(l, prefix, strlen(prefix)) || !(k = strstr(l, key)))
			continue;
		v = atol(k + strlen(key));
	}
	free(buf);
	return v;
}

/* Line numbers of events, to check their order. */
static int event_line(struct mon *m, const char *what)
{
	char p[PATH_MAX + 16], *buf, *save = NULL;
	int i = 0, found = -1;

	snprintf(p, sizeof(p), "%s/events", m->dir);
	buf = read_file(p);
	for (char *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save), i++)
		if (!strncmp(l, what, strlen(what))) {
			found = i;
			break;
		}
	free(buf);
	return found;
}

static void check_drained_in_order(struct mon *m)
{
	int cap = event_line(m, "capture stop"), unw = event_line(m, "unwindd drain");
	int sym = event_line(m, "symd drain"), sto = event_line(m, "storer drain");
	long out = event_num(m, "capture", "stop", "out="),
	     got = event_num(m, "storer", "drain", "samples=");

	ck_assert_msg(cap >= 0 && unw > cap && sym > unw && sto > sym,
		      "drain order capture %d < unwindd %d < symd %d < storer %d", cap, unw, sym,
		      sto);
	/* Everything capture committed reached the storer, exactly once. */
	ck_assert_int_gt(out, 0);
	ck_assert_int_eq(got, out);
}

/* Stop the monitor with sig: exit 0, every stage drained in order, exactly once. */
static void mon_stop_drained(struct mon *m, int sig)
{
	kill(m->pid, sig);
	ck_assert_int_eq(mon_wait(m, 20000), 0);
	check_drained_in_order(m);
	mon_cleanup(m);
}

START_TEST(test_start_status_stop)
{
	struct mon m;
	char *out;

	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	usleep(300000);
	ck_assert_int_eq(CTL(&m, &out, "status"), 0);
	for (const char *const *s =
		     (const char *const[]){"capture: running", "unwindd: running", "symd: running",
					   "storer: running", " in=", " samples=",
					   " drop_ring_full=", "generation 1", "restarts 0", NULL};
	     *s; s++)
		ck_assert_msg(strstr(out, *s), "'%s' missing from ctl status:\n%s", *s, out);
	free(out);

	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	ck_assert(WAIT_LOG(&m, 100, "stopping (SIGTERM)"));
	ck_assert(WAIT_LOG(&m, 100, "all stages stopped and drained"));
	check_drained_in_order(&m);
	/* The pid file goes with the monitor. */
	ck_assert_int_ne(CTL(&m, &out, "status"), 0);
	ck_assert_ptr_nonnull(strstr(out, "no cpa monitor runs"));
	free(out);
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_crash_restart)
{
	struct mon m;
	char *out;

	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	mon_touch(&m, "crash-unwindd");
	if (!WAIT_LOG(&m, 5000, "unwindd (pid", "killed by SIGSEGV", "restarting in",
		      "(restart 1)"))
		dump_log(&m), ck_abort_msg("crash not reported");
	ck_assert(WAIT_LOG(&m, 5000, "unwindd restarted", "generation 2"));
	ck_assert(WAIT_EVENT(&m, 5000, "unwindd start gen=2"));
	usleep(300000);
	ck_assert_int_eq(CTL(&m, &out, "status"), 0);
	ck_assert_msg(strstr(out, "unwindd: running, pid") &&
			      strstr(out, "generation 2, restarts 1"),
		      "status after restart:\n%s", out);
	free(out);

	/* Nothing lost across the crash: ring positions live in the arena. */
	mon_stop_drained(&m, SIGINT);
}
END_TEST

START_TEST(test_hung_stage)
{
	struct mon m;

	mon_start(&m, (const char *const[]){"CPA_HANG_TIMEOUT_MS=1200", NULL}, NULL);
	mon_ready(&m);
	mon_touch(&m, "hang-symd");
	if (!WAIT_LOG(&m, 6000, "symd (pid", "hung: no heartbeat", "killing it (SIGKILL)"))
		dump_log(&m), ck_abort_msg("hang not detected");
	ck_assert(WAIT_LOG(&m, 3000, "symd (pid", "hung", "killed by SIGKILL", "restarting"));
	ck_assert(WAIT_LOG(&m, 3000, "symd restarted", "generation 2"));
	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	check_drained_in_order(&m);
	mon_cleanup(&m);
}
END_TEST

/* Setting up may take longer than the hang timeout (capture's BPF
 * verification on a loaded host): while a stage is STARTING the start timeout
 * applies, and a stage that never gets going is still killed. */
START_TEST(test_slow_start)
{
	struct mon m;
	char *out;

	mon_start(&m,
		  (const char *const[]){"CPA_HANG_TIMEOUT_MS=1200", "CPA_START_TIMEOUT_MS=8000",
					"FAKE_SLOW_START=capture:3000", NULL},
		  NULL);
	mon_ready(&m);
	ck_assert(WAIT_EVENT(&m, 100, "capture slow-start"));
	ck_assert_int_eq(CTL(&m, &out, "status"), 0);
	ck_assert_msg(strstr(out, "capture: running, pid") &&
			      strstr(out, "generation 1, restarts 0"),
		      "status after a slow start:\n%s", out);
	free(out);
	ck_assert_msg(!WAIT_LOG(&m, 0, "hung"), "a slow start was taken for a hang");
	mon_stop_drained(&m, SIGINT);
}
END_TEST

START_TEST(test_start_timeout)
{
	struct mon m;

	mon_start(&m,
		  (const char *const[]){"CPA_HANG_TIMEOUT_MS=1200", "CPA_START_TIMEOUT_MS=2500",
					"CPA_DRAIN_TIMEOUT_MS=2000", "FAKE_SLOW_START=symd:600000",
					NULL},
		  NULL);
	if (!WAIT_LOG(&m, 8000, "symd (pid", "hung while starting: no heartbeat for",
		      "killing it (SIGKILL)"))
		dump_log(&m), ck_abort_msg("a stage stuck in STARTING was not killed");
	ck_assert(WAIT_LOG(&m, 3000, "symd (pid", "hung while starting", "killed by SIGKILL",
			   "restarting"));
	kill(m.pid, SIGTERM);
	ck_assert_int_ge(mon_wait(&m, 20000), 0);
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_duration)
{
	struct mon m;
	uint64_t t0 = ms_now();

	mon_start(&m, NULL, (const char *const[]){"--duration", "2", NULL});
	ck_assert_int_eq(mon_wait(&m, 15000), 0);
	ck_assert_uint_ge(ms_now() - t0, 1900);
	ck_assert(WAIT_LOG(&m, 100, "stopping (--duration 2 s elapsed)"));
	check_drained_in_order(&m);
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_start_failure_gives_up)
{
	struct mon m;

	mon_start(&m,
		  (const char *const[]){"FAKE_FAIL_START=capture", "CPA_MAX_FAST_FAILS=3", NULL},
		  NULL);
	ck_assert_int_eq(mon_wait(&m, 15000), 1);
	ck_assert(WAIT_LOG(&m, 100, "capture (pid", "exited with code 2", "restarting"));
	ck_assert(WAIT_LOG(&m, 100, "capture failed to start 3 times in a row",
			   "exited with code 2", "giving up"));
	ck_assert(WAIT_LOG(&m, 100, "stopped with errors"));
	mon_cleanup(&m);
}
END_TEST

/*
 * A stage that exits SHM_EXIT_PERMANENT with a cause: that line once, no
 * restart (a single life), the pipeline stopped, and the monitor exits 78.
 */
START_TEST(test_permanent_not_restarted)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char env_sock[PATH_MAX + 32], path[PATH_MAX + 16], tmpl[PATH_MAX], buf[512], last[512] = "";
	struct mon m;
	char *log;
	ssize_t n;
	int fd;

	/* systemd hears the cause as the last STATUS= */
	test_scratch_in(tmpl, sizeof(tmpl), "notify");
	snprintf(path, sizeof(path), "%s/notify", tmpl);
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", path);

	mon_start(&m, (const char *const[]){"FAKE_PERMANENT=capture", env_sock, NULL}, NULL);
	ck_assert_int_eq(mon_wait(&m, 15000), SHM_EXIT_PERMANENT);
	while ((n = recv(fd, buf, sizeof(buf) - 1, 0)) > 0) {
		buf[n] = 0;
		if (strstr(buf, "STATUS="))
			snprintf(last, sizeof(last), "%s", strstr(buf, "STATUS="));
	}
	close(fd);
	unlink(path);
	rmdir(tmpl);
	ck_assert_msg(
		!strcmp(last, "STATUS=failed: capture: fake cause: the remedy the test names"),
		"last status: %s", last);
	ck_assert(WAIT_LOG(&m, 100, "capture: fake cause: the remedy the test names"));
	ck_assert(WAIT_LOG(&m, 100, "stopping (a stage cannot run)"));
	ck_assert(WAIT_LOG(&m, 100, "stopped with errors (exit code 78)"));
	log = read_file(m.log);
	ck_assert_msg(!strstr(log, "restart"), "a permanent error was restarted:\n%s", log);
	ck_assert_msg(!strstr(log, "giving up"), "a permanent error was retried:\n%s", log);
	free(log);
	ck_assert(WAIT_EVENT(&m, 100, "capture permanent"));
	mon_cleanup(&m);
}
END_TEST

/* The pid of stage in `cpa ctl status` when it runs generation gen, else 0. */
static pid_t running_pid(struct mon *m, const char *stage, unsigned int gen)
{
	char *out, want[64], *l;
	pid_t pid = 0;
	unsigned int g;
	int p;

	snprintf(want, sizeof(want), "%s: running, pid ", stage);
	if (CTL(m, &out, "status") == 0 && (l = strstr(out, want)) &&
	    sscanf(l + strlen(want), "%d, generation %u", &p, &g) == 2 && g == gen)
		pid = p;
	free(out);
	return pid;
}

/*
 * Idle consumers sleep in their input wait with no deadline and no heartbeat
 * for many hang timeouts: not hung. One that its producer woke and that does
 * not run (stopped) is hung, killed and restarted.
 */
START_TEST(test_idle_not_hung)
{
	struct mon m;
	pid_t symd;

	mon_start(&m,
		  (const char *const[]){"CPA_HANG_TIMEOUT_MS=1200", "FAKE_QUIET=1", "FAKE_IDLE=1",
					NULL},
		  NULL);
	mon_ready(&m);
	usleep(4000 * 1000);
	if (WAIT_LOG(&m, 0, "hung"))
		dump_log(&m), ck_abort_msg("an idle stage was taken for a hung one");
	symd = running_pid(&m, "symd", 1);
	ck_assert_int_gt(symd, 0);
	ck_assert_int_eq(kill(symd, SIGSTOP), 0);
	mon_touch(&m, "emit-capture");
	if (!WAIT_LOG(&m, 6000, "symd (pid", "hung: no heartbeat", "killing it (SIGKILL)"))
		dump_log(&m),
			ck_abort_msg("a woken stage that does not run was not taken for hung");
	ck_assert(WAIT_LOG(&m, 3000, "symd restarted", "generation 2"));
	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	mon_cleanup(&m);
}
END_TEST

/* A counter of stage in `cpa ctl status`, -1 if not found. */
static long ctl_counter(struct mon *m, const char *stage, const char *name)
{
	char *out, head[64], key[64], *l, *next, *k;
	long v = -1;

	snprintf(head, sizeof(head), "\n%s: ", stage);
	snprintf(key, sizeof(key), " %s=", name);
	if (CTL(m, &out, "status") == 0 && (l = strstr(out, head))) {
		next = strstr(l + 1, ": running") ? strchr(l + 1, '\n') : NULL;
		/* The counters are the indented lines after the stage's line. */
		while (next && next[1] == ' ' && v < 0) {
			char *end = strchr(next + 1, '\n');

			if (end)
				*end = 0;
			if ((k = strstr(next + 1, key)))
				v = atol(k + strlen(key));
			next = end;
		}
	}
	free(out);
	return v;
}

/* Read what the monitor told systemd so far (the datagram queue holds ~10). */
static void notify_drain(int fd, bool *status_loop, bool *status_ok)
{
	char buf[512];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT)) > 0) {
		buf[n] = 0;
		*status_loop |= strstr(buf, "STATUS=degraded: 3 of 4 stages running, unwindd "
					    "failing repeatedly") != NULL;
		*status_ok |= *status_loop &&
			      strstr(buf, "STATUS=running: capture, unwindd, symd, storer");
	}
}

START_TEST(test_crash_loop_keeps_trying)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char env_sock[PATH_MAX + 32], path[PATH_MAX + 16], *st;
	char tmpl[PATH_MAX];
	bool status_loop = false, status_ok = false, healthy = false;
	uint64_t end;
	long out0, out1;
	struct mon m;
	int fd;

	test_scratch_in(tmpl, sizeof(tmpl), "notify");
	snprintf(path, sizeof(path), "%s/notify", tmpl);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", path);

	/* The red-team case: SIGKILL within 2 s of every restart, after RUNNING,
	 * more often than the give-up count of a stage that cannot start. */
	mon_start(&m,
		  (const char *const[]){env_sock, "CPA_MAX_FAST_FAILS=3", "CPA_HEALTHY_MS=2500",
					NULL},
		  NULL);
	mon_ready(&m);
	for (unsigned int gen = 1; gen <= 7; gen++) {
		pid_t pid = 0;

		end = ms_now() + 15000;
		while (!pid && ms_now() < end) {
			notify_drain(fd, &status_loop, &status_ok);
			if (!(pid = running_pid(&m, "unwindd", gen)))
				usleep(20000);
		}
		if (!pid)
			dump_log(&m), ck_abort_msg("unwindd generation %u never ran", gen);
		ck_assert_int_eq(kill(pid, SIGKILL), 0);
	}
	if (!WAIT_LOG(&m, 100, "unwindd is failing repeatedly (3 times within 2 s of a start)",
		      "backoff of up to 5 s"))
		dump_log(&m), ck_abort_msg("no 'failing repeatedly' line");
	/* Once per streak, not once per kill. */
	ck_assert(!WAIT_LOG(&m, 0, "unwindd (pid", "killed by SIGKILL; restarting in 400 ms"));
	ck_assert(!WAIT_LOG(&m, 0, "giving up"));
	/* Left alone, it comes back, and the failure streak ends. */
	for (end = ms_now() + 20000; ms_now() < end && !healthy;) {
		notify_drain(fd, &status_loop, &status_ok);
		healthy = WAIT_LOG(&m, 0, "unwindd (pid", "healthy again", "since restart 7");
		usleep(20000);
	}
	if (!healthy)
		dump_log(&m), ck_abort_msg("unwindd not healthy again");
	notify_drain(fd, &status_loop, &status_ok);
	/* systemd heard of both states. */
	ck_assert_msg(status_loop && status_ok, "STATUS: loop %d, running again %d", status_loop,
		      status_ok);
	/* Samples flow again: the storer keeps counting. */
	out0 = ctl_counter(&m, "storer", "samples");
	usleep(500000);
	out1 = ctl_counter(&m, "storer", "samples");
	ck_assert_msg(out0 > 0 && out1 > out0, "storer samples %ld, then %ld", out0, out1);
	ck_assert_int_eq(CTL(&m, &st, "status"), 0);
	ck_assert_msg(strstr(st, "generation 8, restarts 7"), "%s", st);
	free(st);
	close(fd);
	unlink(path);
	rmdir(tmpl);
	/* Exactly once across the seven kills. */
	mon_stop_drained(&m, SIGTERM);
}
END_TEST

/* A /proc file (size 0 to stat: read to EOF), malloc'ed. */
static char *read_proc(const char *path)
{
	char *buf = calloc(1, 65536);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n, len = 0;

	ck_assert_ptr_nonnull(buf);
	while (fd >= 0 && len < 65535 && (n = read(fd, buf + len, (size_t)(65535 - len))) > 0)
		len += n;
	if (fd >= 0)
		close(fd);
	return buf;
}

/* "Max address space" of pid in bytes, 0 = unlimited or unreadable. */
static unsigned long long as_limit_of(pid_t pid)
{
	char p[64], *buf, *l;
	unsigned long long v = 0;

	snprintf(p, sizeof(p), "/proc/%d/limits", pid);
	buf = read_proc(p);
	l = strstr(buf, "Max address space");
	if (l)
		v = strtoull(l + strlen("Max address space"), NULL, 10);
	free(buf);
	return v;
}

/* `cpa ctl cost`: every process of the agent measured over the window, by the
 * pids status names; the fake capture holds no BPF program and it says so;
 * a bad window is refused. */
START_TEST(test_ctl_cost)
{
	static const char *const names[] = {"capture", "unwindd", "symd", "storer"};
	struct mon m;
	char *out, want[64];

	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	usleep(300000);
	ck_assert_int_eq(CTL(&m, &out, "cost", "1"), 0);
	ck_assert_msg(strstr(out, "cpa cost over 1."), "no window in:\n%s", out);
	for (unsigned int i = 0; i < ARRAY_SIZE(names); i++) {
		pid_t pid = running_pid(&m, names[i], 1);

		ck_assert_int_gt(pid, 0);
		snprintf(want, sizeof(want), "\n%-9s %7d ", names[i], pid);
		ck_assert_msg(strstr(out, want), "no row '%s' in:\n%s", want + 1, out);
	}
	snprintf(want, sizeof(want), "\n%-9s %7d ", "monitor", m.pid);
	ck_assert_msg(strstr(out, want), "no monitor row in:\n%s", out);
	ck_assert_msg(strstr(out, "BPF: no programs found in capture's file descriptors"),
		      "fake capture's BPF line missing:\n%s", out);
	free(out);
	ck_assert_int_eq(CTL(&m, &out, "cost", "0"), 2);
	ck_assert_ptr_nonnull(strstr(out, "invalid window '0'"));
	free(out);
	ck_assert_int_eq(CTL(&m, &out, "cost", "1", "2"), 2);
	free(out);
	mon_stop_drained(&m, SIGINT);
}
END_TEST

START_TEST(test_ctl_mem)
{
	unsigned long long sym_as;
	struct mon m;
	char *out;
	pid_t pid;

	mon_start(&m, NULL, (const char *const[]){"--max_cache_size_mb", "256", NULL});
	mon_ready(&m);
	ck_assert(WAIT_LOG(&m, 100,
			   "memory: unwindd, symd and storer keep their caches under 256 MiB"));
	ck_assert_int_eq(CTL(&m, &out, "status"), 0);
	ck_assert_msg(strstr(out, "unwindd: running") && strstr(out, "mem limit 256 MiB"), "%s",
		      out);
	free(out);
	/* The backstop the monitor set at spawn (none in a sanitizer build). */
	pid = running_pid(&m, "symd", 1);
	ck_assert_int_gt(pid, 0);
	sym_as = as_limit_of(pid);
	ck_assert(sym_as == (2ull * 256 + 1024) << 20 || sym_as == 0);

	ck_assert_int_eq(CTL(&m, &out, "mem", "symd", "64"), 0);
	ck_assert_msg(strstr(out, "symd mem limit: 64 MiB (was 256 MiB)"), "%s", out);
	free(out);
	if (sym_as)
		ck_assert_uint_eq(as_limit_of(pid), (2ull * 64 + 1024) << 20);
	ck_assert_int_eq(CTL(&m, &out, "status"), 0);
	ck_assert_msg(strstr(out, "mem limit 64 MiB"), "%s", out);
	free(out);
	/* A restarted symd keeps the new limit. */
	ck_assert_int_eq(CTL(&m, &out, "restart", "symd"), 0);
	free(out);
	ck_assert(WAIT_LOG(&m, 5000, "symd restarted", "generation 2"));
	for (uint64_t end = ms_now() + 5000; !(pid = running_pid(&m, "symd", 2)) && ms_now() < end;)
		usleep(20000);
	ck_assert_int_gt(pid, 0);
	if (sym_as)
		ck_assert_uint_eq(as_limit_of(pid), (2ull * 64 + 1024) << 20);

	/* The storer's dictionaries have a cap too (issue 27); capture has no cache. */
	ck_assert_int_eq(CTL(&m, &out, "mem", "storer", "64"), 0);
	ck_assert_msg(strstr(out, "storer mem limit: 64 MiB (was 256 MiB)"), "%s", out);
	free(out);
	ck_assert_int_eq(CTL(&m, &out, "mem", "capture", "64"), 2);
	ck_assert_msg(strstr(out, "capture has no cache to cap"), "%s", out);
	free(out);
	ck_assert_int_eq(CTL(&m, &out, "mem", "symd", "0"), 2);
	free(out);
	mon_stop_drained(&m, SIGTERM);
}
END_TEST

/* symd's cache cap as `cpa ctl status` shows it (MiB), -1 if not found. */
static long long symd_cap(struct mon *m)
{
	char *out, *l;
	long long mb = -1;

	ck_assert_int_eq(CTL(m, &out, "status"), 0);
	l = strstr(out, "\nsymd: ");
	l = l ? strstr(l, "mem limit ") : NULL;
	if (l)
		mb = strtoll(l + strlen("mem limit "), NULL, 10);
	free(out);
	return mb;
}

/* Two `cpa ctl mem symd` runs at once, output dropped. */
static void ctl_mem_pair(struct mon *m, const char *a, const char *b)
{
	const char *v[2] = {a, b};
	char cpa[PATH_MAX];
	pid_t pid[2];

	snprintf(cpa, sizeof(cpa), "%s/bin/cpa", build_dir());
	for (int i = 0; i < 2; i++) {
		pid[i] = fork();
		ck_assert_int_ge(pid[i], 0);
		if (pid[i] == 0) {
			int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

			dup2(fd, 1);
			dup2(fd, 2);
			execl(cpa, cpa, "ctl", "--store_dir", m->store, "mem", "symd", v[i],
			      (char *)NULL);
			_exit(127);
		}
	}
	for (int i = 0; i < 2; i++)
		waitpid(pid[i], NULL, 0);
}

/*
 * The cache cap and the RLIMIT_AS backstop ctl mem moves along never
 * disagree: not after a cut then a raise (raising a hard limit needs
 * CAP_SYS_RESOURCE: without it the raise is refused, exit 1, and the cap
 * stays), not after two ctl runs at once. A cap above its backstop has the
 * stage fail allocations before it evicts.
 */
START_TEST(test_ctl_mem_backstop_agrees)
{
	struct mon m;
	char *out;
	pid_t pid;
	int rc;

	mon_start(&m, NULL, (const char *const[]){"--max_cache_size_mb", "256", NULL});
	mon_ready(&m);
	pid = running_pid(&m, "symd", 1);
	ck_assert_int_gt(pid, 0);
	if (!as_limit_of(pid)) { /* a sanitizer build sets no backstop */
		mon_stop_drained(&m, SIGTERM);
		return;
	}
	ck_assert_int_eq(CTL(&m, &out, "mem", "symd", "64"), 0);
	free(out);
	rc = CTL(&m, &out, "mem", "symd", "512");
	ck_assert_msg(rc == 0 || (rc == 1 && strstr(out, "needs CAP_SYS_RESOURCE") &&
				  strstr(out, "its cache cap stays 64 MiB")),
		      "exit %d: %s", rc, out);
	free(out);
	ck_assert_int_eq(symd_cap(&m), rc == 0 ? 512 : 64);
	ck_assert_uint_eq(as_limit_of(pid), (2ull * (unsigned long long)symd_cap(&m) + 1024) << 20);
	for (int i = 0; i < 10; i++) {
		ctl_mem_pair(&m, i % 2 ? "40" : "30", i % 2 ? "700" : "600");
		ck_assert_uint_eq(as_limit_of(pid), (2ull * (unsigned long long)symd_cap(&m) + 1024)
							    << 20);
	}
	mon_stop_drained(&m, SIGTERM);
}
END_TEST

/* CapEff of pid, ~0 if unreadable or without no_new_privs. */
static unsigned long long cap_eff(pid_t pid)
{
	char p[64], *buf, *l;
	unsigned long long v = ~0ull;

	snprintf(p, sizeof(p), "/proc/%d/status", pid);
	buf = read_proc(p);
	l = strstr(buf, "\nCapEff:");
	if (l)
		v = strtoull(l + 8, NULL, 16);
	l = strstr(buf, "\nNoNewPrivs:");
	if (!l || atoi(l + 13) != 1)
		v = ~0ull; /* no_new_privs must be set too */
	free(buf);
	return v;
}

START_TEST(test_stage_capabilities)
{
	/* The policy, stated here independently of common/daemon.c. */
	const unsigned long long procs =
		1ull << 19 /* SYS_PTRACE */ | 1ull << 2 /* DAC_READ_SEARCH */;
	const struct {
		const char *stage;
		unsigned long long caps;
	} want[] = {
		{"capture", 1ull << 39 /* BPF */ | 1ull << 38 /* PERFMON */ |
				    1ull << 21 /* SYS_ADMIN */ | 1ull << 24 /* SYS_RESOURCE */ |
				    1ull << 14 /* IPC_LOCK */ | procs},
		{"unwindd", procs | 1ull << 40 /* CHECKPOINT_RESTORE */},
		{"symd", procs | 1ull << 40 | 1ull << 34 /* SYSLOG */ | 1ull << 7 /* SETUID */ |
				 1ull << 6 /* SETGID */},
		{"storer", 0},
	};
	unsigned long long mine;
	char *buf = read_proc("/proc/self/status"), *l = strstr(buf, "\nCapEff:");
	struct mon m;

	mine = l ? strtoull(l + 8, NULL, 16) : 0;
	free(buf);
	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		pid_t pid = running_pid(&m, want[i].stage, 1);

		ck_assert_int_gt(pid, 0);
		/* What it keeps of what it had; nothing at all without privileges. */
		ck_assert_msg(cap_eff(pid) == (want[i].caps & mine),
			      "%s: CapEff %llx, want %llx (no_new_privs set)", want[i].stage,
			      cap_eff(pid), want[i].caps & mine);
	}
	mon_stop_drained(&m, SIGTERM);
}
END_TEST

START_TEST(test_store_dir_refused)
{
	char dir[PATH_MAX];
	struct mon m;

	/* A store anyone can write: refused before any stage runs. */
	test_scratch_in(dir, sizeof(dir), "wwstore");
	ck_assert_int_eq(chmod(dir, 0777), 0);
	mon_start(&m, NULL, (const char *const[]){"--store_dir", dir, NULL});
	ck_assert_int_eq(mon_wait(&m, 20000), 1);
	if (!WAIT_LOG(&m, 100, "--store_dir '", "writable by anyone (mode 0777): refused"))
		dump_log(&m), ck_abort_msg("no refusal");
	ck_assert(!WAIT_LOG(&m, 0, "all stages running"));
	mon_cleanup(&m);
	if (geteuid() == 0) {
		ck_assert_int_eq(chmod(dir, 0755), 0);
		ck_assert_int_eq(chown(dir, 65534, 65534), 0);
		mon_start(&m, NULL, (const char *const[]){"--store_dir", dir, NULL});
		ck_assert_int_eq(mon_wait(&m, 20000), 1);
		ck_assert(WAIT_LOG(&m, 100, "owned by uid 65534, not by root or uid 0: refused"));
		mon_cleanup(&m);
	}
	test_rm_rf(dir);
}
END_TEST

START_TEST(test_ctl_rate_restart)
{
	struct mon m;
	char *out;

	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	ck_assert_int_eq(CTL(&m, &out, "rate", "unwindd", "250"), 0);
	ck_assert_ptr_nonnull(strstr(out, "unwindd rate limit: 250 records/s (was 0)"));
	free(out);
	ck_assert_int_eq(CTL(&m, &out, "status"), 0);
	ck_assert_msg(strstr(out, "rate 250/s"), "%s", out);
	free(out);

	ck_assert_int_eq(CTL(&m, &out, "restart", "symd"), 0);
	ck_assert_ptr_nonnull(strstr(out, "sent SIGTERM to symd"));
	free(out);
	ck_assert(WAIT_LOG(&m, 5000, "symd (pid", "exited with code 0", "restarting"));
	ck_assert(WAIT_LOG(&m, 5000, "symd restarted", "generation 2"));

	ck_assert_int_eq(CTL(&m, &out, "restart", "nosuch"), 2);
	ck_assert_ptr_nonnull(strstr(out, "unknown stage 'nosuch'"));
	free(out);
	ck_assert_int_eq(CTL(&m, &out, "rate", "symd", "-5"), 2);
	free(out);

	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	check_drained_in_order(&m);
	mon_cleanup(&m);
}
END_TEST

/*
 * `cpa ctl restart` a few times in a row: an operator's restart is not a
 * failure. Every one is restarted at the shortest backoff, none makes the
 * stage "failing repeatedly".
 */
START_TEST(test_ctl_restart_not_failure)
{
	struct mon m;
	char *out, gen[32], *log;

	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	for (unsigned int g = 2; g <= 6; g++) {
		uint64_t end = ms_now() + 10000;
		bool running = false;

		ck_assert_int_eq(CTL(&m, &out, "restart", "symd"), 0);
		free(out);
		snprintf(gen, sizeof(gen), "generation %u", g);
		if (!WAIT_LOG(&m, 5000, "symd restarted", gen))
			dump_log(&m), ck_abort_msg("symd not restarted into %s", gen);
		/* The next restart needs the new generation running. */
		snprintf(gen, sizeof(gen), "symd: running, pid");
		while (!running && ms_now() < end) {
			char want[48];

			snprintf(want, sizeof(want), "generation %u,", g);
			if (CTL(&m, &out, "status") == 0) {
				char *l = strstr(out, gen);

				running = l && strstr(l, want) && strstr(l, want) < strchr(l, '\n');
			}
			free(out);
			if (!running)
				usleep(20000);
		}
		ck_assert_msg(running, "symd generation %u not running", g);
	}
	ck_assert(WAIT_LOG(&m, 100, "symd (pid", "exited with code 0", "restarting in 100 ms",
			   "(restart 5)"));
	log = read_file(m.log);
	ck_assert_msg(!strstr(log, "failing repeatedly"), "a restart counted as a failure:\n%s",
		      log);
	free(log);

	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_drain_timeout)
{
	struct mon m;

	mon_start(&m,
		  (const char *const[]){"FAKE_IGNORE_DRAIN=symd", "CPA_DRAIN_TIMEOUT_MS=800", NULL},
		  NULL);
	mon_ready(&m);
	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 1);
	ck_assert(WAIT_LOG(&m, 100, "symd (pid", "did not drain within 800 ms",
			   "killing it (SIGKILL)"));
	/* The storer still gets its turn after symd was killed. */
	ck_assert_int_ge(event_line(&m, "storer drain"), 0);
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_second_monitor_refused)
{
	struct mon m, m2;
	char cpa[PATH_MAX], *log;
	int status;
	pid_t pid;

	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	snprintf(cpa, sizeof(cpa), "%s/bin/cpa", build_dir());
	snprintf(m2.log, sizeof(m2.log), "%s/second.log", m.dir);
	pid = fork();
	if (pid == 0) {
		int fd = open(m2.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		dup2(fd, 2);
		setenv("CPA_STAGE_DIR", "/nonexistent-but-checked-later", 1);
		execl(cpa, cpa, "monitor", "--store_dir", m.store, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	log = read_file(m2.log);
	ck_assert_int_ne(WEXITSTATUS(status), 0);
	ck_assert_msg(strstr(log, "not usable") || strstr(log, "another cpa monitor"), "%s", log);
	free(log);

	/* Same stage dir: the pid file lock is what refuses it. */
	pid = fork();
	if (pid == 0) {
		int fd = open(m2.log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		char stages[PATH_MAX];

		dup2(fd, 2);
		snprintf(stages, sizeof(stages), "%s/tests/fake-stages", build_dir());
		setenv("CPA_STAGE_DIR", stages, 1);
		execl(cpa, cpa, "monitor", "--store_dir", m.store, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &status, 0);
	log = read_file(m2.log);
	ck_assert_int_eq(WEXITSTATUS(status), 1);
	ck_assert_msg(strstr(log, "another cpa monitor (pid"), "%s", log);
	free(log);

	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_sd_notify)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char env_sock[PATH_MAX + 32], path[PATH_MAX + 16], buf[512];
	bool ready = false, watchdog = false, stopping = false;
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
	uint64_t end;
	struct mon m;
	int fd;

	/* A socket path before the monitor's dir exists: make our own dir. */
	char tmpl[PATH_MAX];

	test_scratch_in(tmpl, sizeof(tmpl), "notify");
	snprintf(path, sizeof(path), "%s/notify", tmpl);
	ck_assert_uint_lt(strlen(path), sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", path);

	mon_start(&m, (const char *const[]){env_sock, "WATCHDOG_USEC=400000", NULL}, NULL);
	end = ms_now() + 10000;
	while (ms_now() < end && !(ready && watchdog)) {
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);

		if (n <= 0)
			continue;
		buf[n] = 0;
		ready |= strstr(buf, "READY=1") != NULL;
		watchdog |= strstr(buf, "WATCHDOG=1") != NULL;
	}
	ck_assert_msg(ready && watchdog, "ready %d watchdog %d", ready, watchdog);
	kill(m.pid, SIGTERM);
	end = ms_now() + 10000;
	while (ms_now() < end && !stopping) {
		ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);

		if (n <= 0)
			continue;
		buf[n] = 0;
		stopping |= strstr(buf, "STOPPING=1") != NULL;
	}
	ck_assert(stopping);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	close(fd);
	unlink(path);
	rmdir(tmpl);
	/* Stages must not see the monitor's systemd variables. */
	ck_assert(WAIT_EVENT(&m, 100, "capture start gen=1 notify=none"));
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_stop_while_consumer_down)
{
	struct mon m;

	/* unwindd is down (100 ms backoff) or just back when the stop reaches it. */
	mon_start(&m, NULL, NULL);
	mon_ready(&m);
	mon_touch(&m, "crash-unwindd");
	ck_assert(WAIT_LOG(&m, 5000, "unwindd (pid", "killed by SIGSEGV"));
	kill(m.pid, SIGTERM);
	ck_assert_int_eq(mon_wait(&m, 20000), 0);
	/* Whether it was restarted by backoff or for the drain, nothing is lost. */
	check_drained_in_order(&m);
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_second_signal_kills)
{
	struct mon m;
	uint64_t t0;

	mon_start(
		&m,
		(const char *const[]){"FAKE_IGNORE_DRAIN=symd", "CPA_DRAIN_TIMEOUT_MS=30000", NULL},
		NULL);
	mon_ready(&m);
	kill(m.pid, SIGTERM);
	ck_assert(WAIT_LOG(&m, 5000, "draining symd"));
	t0 = ms_now();
	kill(m.pid, SIGINT);
	ck_assert_int_eq(mon_wait(&m, 10000), 1);
	ck_assert_uint_lt(ms_now() - t0, 5000);
	ck_assert(WAIT_LOG(&m, 100, "second signal: killing every stage now"));
	mon_cleanup(&m);
}
END_TEST

START_TEST(test_sd_notify_abstract)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct sd_notifier n;
	char name[64], env[80], buf[128];
	socklen_t len;
	ssize_t got;
	int fd;

	snprintf(name, sizeof(name), "cpa-test-notify-%d", getpid());
	memcpy(sa.sun_path + 1, name, strlen(name)); /* abstract: leading NUL */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, len), 0);

	snprintf(env, sizeof(env), "@%s", name);
	setenv("NOTIFY_SOCKET", env, 1);
	setenv("WATCHDOG_USEC", "2000000", 1);
	setenv("WATCHDOG_PID", "1", 1); /* not us: no watchdog */
	ck_assert_int_eq(sd_notifier__open(&n), 0);
	ck_assert(sd_notifier__enabled(&n));
	ck_assert_uint_eq(n.watchdog_usec, 0);
	ck_assert_int_eq(sd_notifier__send(&n, "READY=1\nSTATUS=%s", "x"), 0);
	got = recv(fd, buf, sizeof(buf) - 1, 0);
	ck_assert_int_gt(got, 0);
	buf[got] = 0;
	ck_assert_str_eq(buf, "READY=1\nSTATUS=x");
	sd_notifier__close(&n);

	snprintf(env, sizeof(env), "%d", getpid());
	setenv("WATCHDOG_PID", env, 1);
	ck_assert_int_eq(sd_notifier__open(&n), 0);
	ck_assert_uint_eq(n.watchdog_usec, 2000000);
	sd_notifier__close(&n);

	setenv("NOTIFY_SOCKET", "relative/path", 1);
	ck_assert_int_eq(sd_notifier__open(&n), -EINVAL);
	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	unsetenv("WATCHDOG_PID");
	ck_assert_int_eq(sd_notifier__open(&n), 0);
	ck_assert(!sd_notifier__enabled(&n));
	ck_assert_int_eq(sd_notifier__send(&n, "READY=1"), 0); /* no-op */
	close(fd);
}
END_TEST

static Suite *monitor_suite(void)
{
	Suite *s = suite_create("monitor");
	TCase *tc = tcase_create("supervise");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_start_status_stop);
	tcase_add_test(tc, test_crash_restart);
	tcase_add_test(tc, test_hung_stage);
	tcase_add_test(tc, test_idle_not_hung);
	tcase_add_test(tc, test_slow_start);
	tcase_add_test(tc, test_start_timeout);
	tcase_add_test(tc, test_duration);
	tcase_add_test(tc, test_start_failure_gives_up);
	tcase_add_test(tc, test_permanent_not_restarted);
	tcase_add_test(tc, test_crash_loop_keeps_trying);
	tcase_add_test(tc, test_ctl_cost);
	tcase_add_test(tc, test_ctl_mem);
	tcase_add_test(tc, test_ctl_mem_backstop_agrees);
	tcase_add_test(tc, test_stage_capabilities);
	tcase_add_test(tc, test_store_dir_refused);
	tcase_add_test(tc, test_ctl_rate_restart);
	tcase_add_test(tc, test_ctl_restart_not_failure);
	tcase_add_test(tc, test_drain_timeout);
	tcase_add_test(tc, test_second_monitor_refused);
	tcase_add_test(tc, test_sd_notify);
	tcase_add_test(tc, test_stop_while_consumer_down);
	tcase_add_test(tc, test_second_signal_kills);
	tcase_add_test(tc, test_sd_notify_abstract);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return test_run_suite(monitor_suite());
}
