// SPDX-License-Identifier: MIT
/*
 * bench_overhead's own readers: the arena of a running monitor, the store's
 * size, a store's folded export. Per-process CPU and memory, BPF run time and
 * the machine's busy share are common/cost.h's (shared with `cpa ctl cost`).
 * No logging here: 0 or -errno.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macro.h"
#include "overhead.h"

int ovh_arena_open(pid_t monitor_pid, struct shm_arena **ret)
{
	return shm_arena__attach_pid(monitor_pid, ret);
}

static int dir_bytes(int dfd, uint64_t *acc, uint64_t *hidden, int depth)
{
	DIR *d;
	struct dirent *de;

	if (depth > 8) {
		close(dfd);
		return 0;
	}
	d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -errno;
	}
	while ((de = readdir(d))) {
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
		    !strcmp(de->d_name, ".cpa-monitor.pid"))
			continue;
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			*(de->d_name[0] == '.' ? hidden : acc) += (uint64_t)st.st_size;
		} else if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

			if (sub >= 0)
				dir_bytes(sub, acc, hidden, depth + 1);
		}
	}
	closedir(d);
	return 0;
}

int ovh_dir_bytes(const char *dir, uint64_t *ret, uint64_t *ret_hidden)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	uint64_t hidden = 0;
	int r;

	*ret = 0;
	if (fd < 0)
		return -errno;
	r = dir_bytes(fd, ret, &hidden, 0);
	if (ret_hidden)
		*ret_hidden = hidden;
	return r;
}

/* "HH:MM:SS.mmm" after the first '[' at or after p, in seconds of the day. */
static double show_time(const char *p)
{
	unsigned int h, m;
	double sec;

	p = p ? strchr(p, '[') : NULL;
	if (!p || sscanf(p + 1, " %u:%u:%lf", &h, &m, &sec) != 3)
		return -1;
	return h * 3600.0 + m * 60.0 + sec;
}

int ovh_cpa_export(const char *cpa, const char *store, const char *out)
{
	char cmd[3 * PATH_MAX], line[512];
	unsigned long n = 0;
	double from = -1, to = -1;
	FILE *f;
	int r;

	/* `cpa show -p`: "Record Time From [ .. ] to [ .. ] Records Num: N". -n
	 * counts seconds, not records (a second can hold two blocks): ask for
	 * the seconds from the first block's to the last one's, whole. */
	snprintf(cmd, sizeof(cmd), "'%s' show --read '%s' -p 2>/dev/null", cpa, store);
	f = popen(cmd, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		const char *p = strstr(line, "Records Num:");

		if (p) {
			n = strtoul(p + 12, NULL, 10);
			from = show_time(strstr(line, "From"));
			to = show_time(strstr(line, "] to"));
		}
	}
	pclose(f);
	if (!n)
		return -ENODATA;
	if (from >= 0 && to >= 0) {
		if (to < from)
			to += 86400; /* over midnight */
		n = (unsigned long)to - (unsigned long)from + 1;
	}
	/* On-CPU samples only: an --offcpu run exports its off-CPU ones by
	 * default, whose counts are ns. */
	snprintf(cmd, sizeof(cmd),
		 "'%s' show --read '%s' -n %lu --no_env --kind on -o '%s' >/dev/null 2>&1", cpa,
		 store, n, out);
	r = system(cmd);
	return r == 0 ? 0 : -EIO;
}
