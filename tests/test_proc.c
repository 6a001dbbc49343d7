// SPDX-License-Identifier: MIT
#include "test_proc.h"
#include "test_util.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

static pid_t spawn_fds_env(char *const argv[], int in, int out, int err, char *const env[])
{
	pid_t pid = fork();

	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (in >= 0)
			dup2(in, 0);
		if (out >= 0)
			dup2(out, 1);
		if (err >= 0)
			dup2(err, 2);
		for (int i = 0; env && env[i]; i++)
			putenv(env[i]);
		execv(argv[0], argv);
		fprintf(stderr, "exec %s: %m\n", argv[0]);
		_exit(127);
	}
	return pid;
}

bool stack_before_exec(const char *stack)
{
	return strstr(stack, ";spawn_fds_env;") != NULL;
}

pid_t spawn_fds(char *const argv[], int in, int out, int err)
{
	return spawn_fds_env(argv, in, out, err, NULL);
}

pid_t spawn_env(char *const argv[], int *ret_out, const char *err_path, char *const env[])
{
	int pfd[2] = {-1, -1}, efd = -1;
	pid_t pid;

	if (ret_out)
		ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	if (err_path) {
		efd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		ck_assert_msg(efd >= 0, "open '%s': %m", err_path);
	}
	pid = spawn_fds_env(argv, -1, pfd[1], efd, env);
	if (efd >= 0)
		close(efd);
	if (ret_out) {
		close(pfd[1]);
		*ret_out = pfd[0];
	}
	return pid;
}

pid_t spawn_io(char *const argv[], int *ret_in, int *ret_out)
{
	int pfd[2] = {-1, -1}, ifd[2] = {-1, -1};
	pid_t pid;

	if (ret_out)
		ck_assert_int_eq(pipe2(pfd, O_CLOEXEC), 0);
	if (ret_in)
		ck_assert_int_eq(pipe2(ifd, O_CLOEXEC), 0);
	pid = spawn_fds(argv, ifd[0], pfd[1], -1);
	if (ret_out) {
		close(pfd[1]);
		*ret_out = pfd[0];
	}
	if (ret_in) {
		close(ifd[0]);
		*ret_in = ifd[1];
	}
	return pid;
}

pid_t spawn(char *const argv[], int *ret_out)
{
	return spawn_io(argv, NULL, ret_out);
}

int wait_exit(pid_t pid, struct rusage *ru)
{
	int status;

	ck_assert_int_eq(wait4(pid, &status, 0, ru), pid);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

char *slurp_fd(int fd)
{
	char *buf = test_read_all(fd, NULL);

	close(fd);
	return buf;
}

char *run(char *const argv[], int *ret_rc)
{
	int out;
	pid_t pid = spawn(argv, &out);
	char *s = slurp_fd(out);

	*ret_rc = wait_exit(pid, NULL);
	return s;
}

void run_sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int r;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	r = system(cmd);
	ck_assert_msg(r == 0, "command failed (%d): %s", r, cmd);
}

void wait_monitor_up(const char *log, int timeout_s)
{
	for (int i = 0; i < timeout_s * 20; i++) {
		int fd = open(log, O_RDONLY | O_CLOEXEC);
		char *text;
		bool up;

		ck_assert_msg(fd >= 0, "open '%s': %m", log);
		text = slurp_fd(fd);
		up = strstr(text, "all stages running");
		ck_assert_msg(!strstr(text, "ERROR"), "monitor failed: %s", text);
		free(text);
		if (up)
			return;
		usleep(50 * 1000);
	}
	ck_abort_msg("cpa monitor did not start in %d s", timeout_s);
}

pid_t spawn_monitor(char *const argv[], const char *log, int timeout_s)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	pid_t pid;

	ck_assert_msg(fd >= 0, "open '%s': %m", log);
	pid = spawn_fds(argv, -1, fd, fd);
	close(fd);
	wait_monitor_up(log, timeout_s);
	return pid;
}

void test_need_root_bpf(char *bin_dir, size_t len)
{
	const char *b = getenv("CPA_BUILD_DIR");

	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0) {
		fprintf(stderr, "skip: needs root and BTF\n");
		exit(77);
	}
	ck_assert_msg(b != NULL, "CPA_BUILD_DIR not set");
	snprintf(bin_dir, len, "%s/bin", b);
}

char *monitor_fold_all(const char *cpa, const char *store, const char *prof)
{
	return monitor_fold_kind(cpa, store, prof, NULL);
}

char *monitor_stop_fold(pid_t mon, const pid_t *pids, int n, unsigned int settle_s, const char *cpa,
			const char *store, const char *prof)
{
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(wait_exit(pids[i], NULL), 0);
	sleep(settle_s);
	kill(mon, SIGINT);
	ck_assert_int_eq(wait_exit(mon, NULL), 0);
	return monitor_fold_all(cpa, store, prof);
}

char *monitor_fold_kind(const char *cpa, const char *store, const char *prof, const char *kind)
{
	int h0, m0, s0, ms0, h1, m1, s1, ms1, rc;
	char *out = test_cmd_out(&rc, "'%s' show --read '%s' --show_range", cpa, store);
	long span;

	ck_assert_int_eq(rc, 0);
	ck_assert_msg(sscanf(out, "Record Time From [ %d:%d:%d.%d ] to [ %d:%d:%d.%d ]", &h0, &m0,
			     &s0, &ms0, &h1, &m1, &s1, &ms1) == 8,
		      "show_range: %s", out);
	free(out);
	span = (h1 * 3600L + m1 * 60 + s1) - (h0 * 3600L + m0 * 60 + s0) + 1;
	out = test_cmd_out(&rc,
			   "'%s' show --read '%s' -B %02d:%02d:%02d --output_num %ld -o '%s' "
			   "--no_env%s%s",
			   cpa, store, h0, m0, s0, span > 0 ? span : span + 86400, prof,
			   kind ? " --kind " : "", kind ? kind : "");
	ck_assert_msg(rc == 0, "cpa show: %s", out);
	free(out);
	return test_slurp(prof, NULL);
}

/* The pid of the monitor mon's stage process named comm, 0 if none. */
pid_t monitor_stage_pid(pid_t mon, const char *comm)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;

	ck_assert_ptr_nonnull(d);
	while (!found && (e = readdir(d))) {
		char path[300], name[64];
		int pid = atoi(e->d_name), ppid;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%*d (%63[^)]) %*c %d", name, &ppid) == 2 && ppid == mon &&
		    !strcmp(name, comm))
			found = pid;
		fclose(f);
	}
	closedir(d);
	return found;
}

void scratch_store(const char *tag, char *buf, size_t len)
{
	char *dir = test_scratch(tag);

	ck_assert_int_lt(snprintf(buf, len, "%s/store", dir), (int)len);
	ck_assert_int_eq(mkdir(buf, 0755), 0);
	free(dir);
}

int run_one_test(Suite *s, TCase *tc, const TTest *t, int timeout_s)
{
	tcase_set_timeout(tc, timeout_s);
	tcase_add_test(tc, t);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}

void fold_lines_of(const char *prof, pid_t pid, void (*fn)(void *ctx, char *stack, long count),
		   void *ctx)
{
	const char *line = prof;
	char label[32];

	snprintf(label, sizeof(label), ":%d;", pid);
	while (line && *line) {
		const char *eol = strchr(line, '\n');
		char *l = strndup(line, eol ? (size_t)(eol - line) : strlen(line));
		char *sp = strrchr(l, ' '), *semi = strchr(l, ';'), *at = strstr(l, label);

		line = eol ? eol + 1 : NULL;
		if (sp && semi && at && at < semi) {
			*sp = 0;
			fn(ctx, semi, strtol(sp + 1, NULL, 10));
		}
		free(l);
	}
}

int test_e2e_ready(char *bin_dir, size_t len)
{
	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0 ||
	    !getenv("CPA_BUILD_DIR")) {
		fprintf(stderr, "skip: needs root, BTF and CPA_BUILD_DIR\n");
		return 77;
	}
	snprintf(bin_dir, len, "%s/bin", getenv("CPA_BUILD_DIR"));
	return 0;
}
