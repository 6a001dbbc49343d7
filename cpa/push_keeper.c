// SPDX-License-Identifier: MIT
/*
 * The keeper of cpa-push (push_keeper.h). It dies with the monitor
 * (PR_SET_PDEATHSIG), restarts cpa-push after 1 s, doubling up to 60 s while
 * it keeps failing within a minute of its start, and passes SIGTERM on.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "push_keeper.h"

static volatile sig_atomic_t keeper_stop;

static void keeper_on_term(int sig)
{
	(void)sig;
	keeper_stop = 1;
}

static void keeper_main(const char *exe, const char *store_dir, const char *url)
{
	struct sigaction sa = {.sa_handler = keeper_on_term};
	unsigned int backoff = 1;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL); /* the monitor blocks them for its signalfd */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGCHLD, SIG_DFL);
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	log_set_subsystem("push-keeper");
	while (!keeper_stop) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC) / NSEC_PER_SEC;
		pid_t pid = fork();
		int st = 0;

		if (pid < 0) {
			log_error_errno(-errno, "fork: %m");
			_exit(1);
		}
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGTERM);
			execl(exe, exe, "--store_dir", store_dir, "--url", url, (char *)NULL);
			log_error_errno(-errno, "exec '%s': %m", exe);
			_exit(127);
		}
		while (waitpid(pid, &st, 0) < 0) {
			if (errno != EINTR)
				break;
			if (keeper_stop)
				kill(pid, SIGTERM);
		}
		if (keeper_stop)
			break;
		if (clock_ns(CLOCK_MONOTONIC) / NSEC_PER_SEC - t0 >= 60)
			backoff = 1;
		log_warn("cpa-push (pid %d) exited (%s %d), restarting in %u s", pid,
			 WIFSIGNALED(st) ? "signal" : "status",
			 WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), backoff);
		for (unsigned int i = 0; i < backoff * 10 && !keeper_stop; i++)
			usleep(100000);
		backoff = backoff * 2 > 60 ? 60 : backoff * 2;
	}
	_exit(0);
}

pid_t push_keeper__start(const char *dir, const char *store_dir, const char *url)
{
	char exe[PATH_MAX];
	pid_t pid;

	snprintf(exe, sizeof(exe), "%s/cpa-push", dir);
	if (access(exe, X_OK) < 0)
		return log_error_errno(-errno, "--push: '%s': %m", exe);
	pid = fork();
	if (pid < 0)
		return log_error_errno(-errno, "--push: fork: %m");
	if (pid == 0)
		keeper_main(exe, store_dir, url);
	log_info("cpa-push to %s (keeper pid %d)", url, pid);
	return pid;
}

void push_keeper__stop(pid_t keeper)
{
	if (keeper <= 0)
		return;
	kill(keeper, SIGTERM);
	while (waitpid(keeper, NULL, 0) < 0 && errno == EINTR)
		;
}
