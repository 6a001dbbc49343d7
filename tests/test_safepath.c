// SPDX-License-Identifier: MIT
/*
 * common/safepath: the rule on real links and files another user (nobody,
 * uid 65534) planted in a world-writable sticky directory, and the API export
 * -o and --split_path use (a temp file beside the target, renameat). Root
 * only (it plays both users), else exit 77. tests/test_paths.sh runs the same
 * attack through cpa monitor.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/safepath.h"
#include "test_util.h"

#define NOBODY 65534

static char top[PATH_MAX], shared[PATH_MAX + 16], secret[PATH_MAX + 16];
static char err[PATH_MAX + 256];

/* Run fn(arg) as nobody in a child: what another user plants. */
static void as_nobody(int (*fn)(const char *, const char *), const char *a, const char *b)
{
	pid_t pid = fork();
	int status;

	ck_assert_int_ge(pid, 0);
	if (!pid) {
		if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) < 0)
			_exit(2);
		_exit(fn(a, b) < 0 ? 1 : 0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && !WEXITSTATUS(status), "as nobody: %d", status);
}

static int plant_dir(const char *path, const char *unused)
{
	(void)unused;
	return mkdir(path, 0777);
}

static int plant_file(const char *path, const char *unused)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);

	(void)unused;
	return fd < 0 ? -1 : close(fd);
}

static void setup(void)
{
	char path[PATH_MAX + 32];
	int fd;

	if (geteuid() != 0)
		exit(TEST_SKIP);
	test_scratch_in(top, sizeof(top), "safepath");
	ck_assert_int_eq(chmod(top, 0755), 0);
	snprintf(shared, sizeof(shared), "%s/shared", top);
	ck_assert_int_eq(mkdir(shared, 0777), 0);
	ck_assert_int_eq(chmod(shared, 01777), 0); /* what /tmp is */
	snprintf(secret, sizeof(secret), "%s/root", top);
	ck_assert_int_eq(mkdir(secret, 0700), 0);
	snprintf(path, sizeof(path), "%s/file", secret);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "root\n", 5), 5);
	close(fd);
}

static void teardown(void)
{
	test_rm_rf(top);
}

/* dir (what nobody planted, a kind) is refused, and so is a file under it. */
static void dir_refused(const char *dir, const char *kind)
{
	char sub[PATH_MAX + 64];

	ck_assert_int_eq(safe_path__dir(dir, true, 0750, err, sizeof(err)), -EPERM);
	ck_assert_msg(strstr(err, kind) && strstr(err, "owned by uid 65534"), "%s", err);
	snprintf(sub, sizeof(sub), "%s/day/seg", dir);
	ck_assert_int_eq(safe_path__open(sub, O_WRONLY | O_CREAT, 0640, err, sizeof(err)), -EPERM);
}

/* The file path (what nobody planted, words) is not opened for writing. */
static void file_refused(const char *path, const char *words)
{
	ck_assert_int_eq(
		safe_path__open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640, err, sizeof(err)),
		-EPERM);
	ck_assert_msg(strstr(err, words), "%s", err);
	ck_assert_int_eq(safe_path__check(path, err, sizeof(err)), -EPERM);
}

/* Links nobody planted are not followed: for a directory, a leaf, the parent. */
START_TEST(test_others_links)
{
	char link[PATH_MAX + 32], file[PATH_MAX + 32], sub[PATH_MAX + 64], leaf[NAME_MAX + 1];
	int dfd = -1;

	snprintf(file, sizeof(file), "%s/file", secret);
	snprintf(link, sizeof(link), "%s/store", shared);
	as_nobody(symlink, secret, link);
	dir_refused(link, "symlink");
	snprintf(sub, sizeof(sub), "%s/day/seg", link);
	ck_assert_int_eq(safe_path__parent(sub, &dfd, leaf, sizeof(leaf), err, sizeof(err)),
			 -EPERM);

	snprintf(link, sizeof(link), "%s/out.prof", shared);
	as_nobody(symlink, file, link);
	file_refused(link, "symlink 'out.prof' is owned by uid 65534");
	/* root's file is as it was, and nothing was created in root's directory */
	ck_assert_int_eq(access(file, F_OK), 0);
	{
		struct stat sb;

		ck_assert_int_eq(stat(file, &sb), 0);
		ck_assert_int_eq(sb.st_size, 5);
		snprintf(sub, sizeof(sub), "%s/day", secret);
		ck_assert_int_ne(access(sub, F_OK), 0);
	}
}
END_TEST

/* Nobody's directory or file in the sticky directory is not ours to write into. */
START_TEST(test_others_entries)
{
	char dir[PATH_MAX + 32], path[PATH_MAX + 64];

	snprintf(dir, sizeof(dir), "%s/store", shared);
	as_nobody(plant_dir, dir, NULL);
	dir_refused(dir, "directory");

	snprintf(path, sizeof(path), "%s/out.prof", shared);
	as_nobody(plant_file, path, NULL);
	file_refused(path, "file 'out.prof' is owned by uid 65534");
}
END_TEST

/* Our own and root's: links followed, directories created, files written; hard links refused. */
START_TEST(test_ours)
{
	char mine[PATH_MAX + 32], path[PATH_MAX + 64], hard[PATH_MAX + 32];
	struct stat sb;
	int fd;

	snprintf(mine, sizeof(mine), "%s/mine", shared);
	ck_assert_int_eq(symlink(secret, mine), 0);
	snprintf(path, sizeof(path), "%s/a/b", mine);
	fd = safe_path__dir(path, true, 0750, err, sizeof(err));
	ck_assert_msg(fd >= 0, "%s", err);
	close(fd);
	snprintf(path, sizeof(path), "%s/a/b", secret);
	ck_assert_int_eq(stat(path, &sb), 0);
	ck_assert(S_ISDIR(sb.st_mode));

	snprintf(path, sizeof(path), "%s/a/b/out", mine);
	fd = safe_path__open(path, O_WRONLY | O_CREAT | O_TRUNC, 0640, err, sizeof(err));
	ck_assert_msg(fd >= 0, "%s", err);
	close(fd);

	snprintf(path, sizeof(path), "%s/file", secret);
	snprintf(hard, sizeof(hard), "%s/hard", top);
	ck_assert_int_eq(link(path, hard), 0);
	ck_assert_int_eq(safe_path__open(hard, O_WRONLY, 0, err, sizeof(err)), -EPERM);
	ck_assert_msg(strstr(err, "hard links"), "%s", err);
}
END_TEST

/* The export pattern: a temp file beside the target, then renameat in the same directory. */
START_TEST(test_tmpfile_rename)
{
	char path[PATH_MAX + 32], leaf[NAME_MAX + 1], tmp[NAME_MAX + 16], buf[16];
	int dfd = -1, fd, rfd;
	struct stat sb;

	snprintf(path, sizeof(path), "%s/out.svg", top);
	ck_assert_int_eq(safe_path__parent(path, &dfd, leaf, sizeof(leaf), err, sizeof(err)), 0);
	ck_assert_str_eq(leaf, "out.svg");
	fd = safe_path__tmpfile(dfd, leaf, 0640, tmp, sizeof(tmp), err, sizeof(err));
	ck_assert_msg(fd >= 0, "%s", err);
	ck_assert_int_eq(fstat(fd, &sb), 0);
	ck_assert_int_eq(sb.st_mode & 07777, 0640 & ~(mode_t)umask(0));
	ck_assert_int_eq(write(fd, "svg\n", 4), 4);
	close(fd);
	ck_assert_int_eq(renameat(dfd, tmp, dfd, leaf), 0);
	close(dfd);
	rfd = open(path, O_RDONLY);
	ck_assert_int_ge(rfd, 0);
	ck_assert_int_eq(read(rfd, buf, sizeof(buf)), 4);
	close(rfd);
	/* a relative path: the parent is the working directory */
	ck_assert_int_eq(safe_path__parent("x.prof", &dfd, leaf, sizeof(leaf), err, sizeof(err)),
			 0);
	ck_assert_str_eq(leaf, "x.prof");
	close(dfd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("safepath");
	TCase *tc = tcase_create("safepath");

	if (geteuid() != 0)
		return TEST_SKIP;
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_others_links);
	tcase_add_test(tc, test_others_entries);
	tcase_add_test(tc, test_ours);
	tcase_add_test(tc, test_tmpfile_rename);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
