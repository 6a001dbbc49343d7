// SPDX-License-Identifier: MIT
/*
 * bench_overhead's readers: per-process CPU, context switches and memory
 * from /proc, BPF program run time from bpf_stats, the arena of a running
 * monitor, and the store's size. No logging here: 0 or -errno.
 *
 * CPU comes from schedstat (nanoseconds, summed over the live threads)
 * rather than from /proc/PID/stat (10 ms ticks): an idle agent uses a few
 * milliseconds in 20 s, below the tick. stat's utime/stime still give the
 * user/system split.
 */
#include <bpf/bpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/macro.h"
#include "overhead.h"

#define OVH_TEXT_MAX (1u << 20) /* the head of a /proc text: our fields come first */

/* A /proc text into *buf (reused across calls, the caller frees it): its length or -errno. */
static ssize_t read_text(const char *path, char **buf, size_t *cap)
{
	size_t len;
	int r = read_full_file_at(AT_FDCWD, path, READ_FULL_TRUNCATE, OVH_TEXT_MAX, buf, cap, &len);

	return r < 0 ? r : (ssize_t)len;
}

/* Value of "key:<blanks>N" in a /proc text, or 0. */
static uint64_t field_u64(const char *text, const char *key)
{
	size_t klen = strlen(key);
	const char *p = text;

	while ((p = strstr(p, key))) {
		if ((p == text || p[-1] == '\n') && p[klen] == ':')
			return strtoull(p + klen + 1, NULL, 10);
		p += klen;
	}
	return 0;
}

int ovh_proc_read(pid_t pid, struct ovh_proc *ret)
{
	_cleanup_free_ char *buf = NULL;
	char path[384];
	size_t cap = 0;
	struct ovh_proc p = {0};
	struct dirent *de;
	const char *s;
	ssize_t n;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	n = read_text(path, &buf, &cap);
	if (n < 0)
		return (int)n;
	/* comm may hold blanks and parentheses: fields count from the last ')'. */
	s = strrchr(buf, ')');
	if (!s)
		return -EBADMSG;
	/* ") S ppid ..." : utime is field 14, stime 15; after ')' that is the 12th/13th. */
	for (int f = 0; f < 12 && s; f++)
		s = strchr(s + 1, ' ');
	if (!s)
		return -EBADMSG;
	if (sscanf(s, " %" SCNu64 " %" SCNu64, &p.utime, &p.stime) != 2)
		return -EBADMSG;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		uint64_t run;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", pid, de->d_name);
		if (read_text(path, &buf, &cap) > 0 && sscanf(buf, "%" SCNu64, &run) == 1)
			p.cpu_ns += run;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/status", pid, de->d_name);
		if (read_text(path, &buf, &cap) > 0) {
			p.vcsw += field_u64(buf, "voluntary_ctxt_switches");
			p.ivcsw += field_u64(buf, "nonvoluntary_ctxt_switches");
		}
	}
	closedir(d);
	*ret = p;
	return 0;
}

int ovh_proc_mem(pid_t pid, struct ovh_proc *p)
{
	_cleanup_free_ char *buf = NULL;
	char path[64];
	size_t cap = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", pid);
	n = read_text(path, &buf, &cap);
	if (n < 0)
		return (int)n;
	p->rss_kb = field_u64(buf, "Rss");
	p->pss_kb = field_u64(buf, "Pss");
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	n = read_text(path, &buf, &cap);
	if (n < 0)
		return (int)n;
	p->hwm_kb = field_u64(buf, "VmHWM");
	return 0;
}

/* The programs of bpf/profile.bpf.c (names are cut to 15 characters by the kernel). */
static bool cpa_prog_name(const char *name)
{
	return !strcmp(name, "cpa_on_cpu") || !strcmp(name, "cpa_exec") ||
	       !strcmp(name, "cpa_exit") || !strncmp(name, "cpa_", 4);
}

static int prog_info(uint32_t id, struct bpf_prog_info *info)
{
	uint32_t len = sizeof(*info);
	int fd, r;

	fd = bpf_prog_get_fd_by_id(id);
	if (fd < 0)
		return fd;
	memset(info, 0, sizeof(*info));
	r = bpf_obj_get_info_by_fd(fd, info, &len);
	close(fd);
	return r < 0 ? r : 0;
}

static void set_add(struct ovh_bpf_set *set, uint32_t id)
{
	struct bpf_prog_info info;

	for (int i = 0; i < set->n; i++)
		if (set->ids[i] == id)
			return;
	if (set->n >= OVH_MAX_PROGS || prog_info(id, &info) < 0 || !cpa_prog_name(info.name))
		return;
	set->ids[set->n++] = id;
}

/*
 * Other cpa captures (colleagues' tests) may load the same programs on a
 * shared machine, so the name alone is not enough: take the ids that this
 * capture holds, from the "prog_id:" lines of its fdinfo (prog and link fds).
 */
int ovh_bpf_find(pid_t capture_pid, struct ovh_bpf_set *ret)
{
	_cleanup_free_ char *buf = NULL;
	char path[384];
	size_t cap = 0;
	struct ovh_bpf_set set = {0};
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", capture_pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		const char *p;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", capture_pid, de->d_name);
		if (read_text(path, &buf, &cap) <= 0)
			continue;
		for (p = buf; (p = strstr(p, "prog_id:")); p += 8)
			set_add(&set, (uint32_t)strtoul(p + 8, NULL, 10));
	}
	closedir(d);
	*ret = set;
	return set.n;
}

int ovh_bpf_read(const struct ovh_bpf_set *set, struct ovh_bpf *ret)
{
	struct ovh_bpf b = {0};
	struct bpf_prog_info info;

	for (int i = 0; i < set->n; i++) {
		if (prog_info(set->ids[i], &info) < 0)
			continue;
		b.all_ns += info.run_time_ns;
		b.all_cnt += info.run_cnt;
		if (!strcmp(info.name, "cpa_on_cpu")) {
			b.sample_ns += info.run_time_ns;
			b.sample_cnt += info.run_cnt;
		}
	}
	*ret = b;
	return 0;
}

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

int ovh_machine_busy(uint64_t *ret_busy, uint64_t *ret_total)
{
	uint64_t v[10] = {0}, total = 0;
	_cleanup_free_ char *buf = NULL;
	size_t cap = 0;
	ssize_t n;

	n = read_text("/proc/stat", &buf, &cap);
	if (n < 0)
		return (int)n;
	if (sscanf(buf,
		   "cpu %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64 " %" SCNu64
		   " %" SCNu64 " %" SCNu64,
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) < 8)
		return -EBADMSG;
	for (int i = 0; i < 8; i++)
		total += v[i];
	*ret_total = total;
	*ret_busy = total - v[3] - v[4]; /* minus idle and iowait */
	return 0;
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
