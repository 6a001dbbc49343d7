// SPDX-License-Identifier: MIT
/*
 * The readers of cost.h: /proc texts, bpf_stats through libbpf's
 * bpf_obj_get_info_by_fd(), /proc/stat.
 */
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf/profile.h"
#include "fileio.h"
#include "macro.h"
#include "cost.h"

_Static_assert(COST_MAX_PROBES == CPA_BPF_PROBE_MAX, "probe count agrees");

#define COST_TEXT_MAX (1u << 20) /* the head of a /proc text: our fields come first */

/* A /proc text into *buf (reused across calls, the caller frees it): its length or -errno. */
static ssize_t read_text(const char *path, char **buf, size_t *cap)
{
	size_t len;
	int r = read_full_file_at(AT_FDCWD, path, READ_FULL_TRUNCATE, COST_TEXT_MAX, buf, cap,
				  &len);

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

int cost_proc_read(pid_t pid, struct cost_proc *ret)
{
	_cleanup_free_ char *buf = NULL;
	char path[384];
	size_t cap = 0;
	struct cost_proc p = {0};
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

int cost_proc_mem(pid_t pid, struct cost_proc *p)
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

/* The programs of bpf/profile.bpf.c and bpf/sched.bpf.c are all named cpa_*. */
static bool cpa_prog_name(const char *name)
{
	return !strncmp(name, "cpa_", 4);
}

/* The program's name as its BTF spells it: the kernel keeps 15 characters. */
static void full_name(int fd, const struct bpf_prog_info *info, char *name, size_t size)
{
	struct bpf_func_info fi = {0};
	struct bpf_prog_info fin = {0};
	uint32_t len = sizeof(fin);
	const struct btf_type *t;
	struct btf *btf;

	snprintf(name, size, "%s", info->name);
	if (strlen(info->name) < BPF_OBJ_NAME_LEN - 1 || !info->btf_id || !info->nr_func_info)
		return;
	fin.nr_func_info = 1;
	fin.func_info_rec_size = sizeof(fi);
	fin.func_info = (uint64_t)(uintptr_t)&fi;
	if (bpf_obj_get_info_by_fd(fd, &fin, &len) < 0)
		return;
	btf = btf__load_from_kernel_by_id(info->btf_id);
	if (!btf)
		return;
	t = btf__type_by_id(btf, fi.type_id);
	if (t && t->name_off)
		snprintf(name, size, "%s", btf__name_by_offset(btf, t->name_off));
	btf__free(btf);
}

/* The info of program id, with its full name in name (unless NULL). */
static int prog_info(uint32_t id, struct bpf_prog_info *info, char *name, size_t name_size)
{
	uint32_t len = sizeof(*info);
	int fd = bpf_prog_get_fd_by_id(id), r;

	if (fd < 0)
		return fd;
	memset(info, 0, sizeof(*info));
	r = bpf_obj_get_info_by_fd(fd, info, &len);
	if (r == 0 && name)
		full_name(fd, info, name, name_size);
	close(fd);
	return r < 0 ? r : 0;
}

static void set_add(struct cost_bpf_set *set, uint32_t id)
{
	struct bpf_prog_info info;

	for (int i = 0; i < set->n; i++)
		if (set->ids[i] == id)
			return;
	if (set->n >= COST_MAX_PROGS || prog_info(id, &info, NULL, 0) < 0 ||
	    !cpa_prog_name(info.name))
		return;
	set->ids[set->n++] = id;
}

/*
 * Other cpa captures (colleagues' tests) may load the same programs on a
 * shared machine, so the name alone is not enough: take the ids that this
 * capture holds, from the "prog_id:" lines of its fdinfo (prog and link fds).
 */
int cost_bpf_find(pid_t capture_pid, struct cost_bpf_set *ret)
{
	_cleanup_free_ char *buf = NULL;
	char path[384];
	size_t cap = 0;
	struct cost_bpf_set set = {0};
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

int cost_bpf_prog(uint32_t id, char *name, size_t name_size, uint64_t *ret_ns, uint64_t *ret_cnt)
{
	struct bpf_prog_info info;
	int r = prog_info(id, &info, name, name_size);

	if (r < 0)
		return r;
	*ret_ns = info.run_time_ns;
	*ret_cnt = info.run_cnt;
	return 0;
}

int cost_bpf_read(const struct cost_bpf_set *set, struct cost_bpf *ret)
{
	struct cost_bpf b = {0};
	struct bpf_prog_info info;

	for (int i = 0; i < set->n; i++) {
		if (prog_info(set->ids[i], &info, NULL, 0) < 0)
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

/* The map named name among those the programs of set use: an fd, or -ENOENT. */
static int probe_map_fd(const struct cost_bpf_set *set, const char *name)
{
	for (int i = 0; i < set->n; i++) {
		uint32_t ids[64], len = sizeof(struct bpf_prog_info);
		struct bpf_prog_info info = {0};
		int fd = bpf_prog_get_fd_by_id(set->ids[i]), r;

		if (fd < 0)
			continue;
		info.nr_map_ids = ARRAY_SIZE(ids);
		info.map_ids = (uint64_t)(uintptr_t)ids;
		r = bpf_obj_get_info_by_fd(fd, &info, &len);
		close(fd);
		if (r < 0)
			continue;
		for (uint32_t k = 0; k < MIN(info.nr_map_ids, (uint32_t)ARRAY_SIZE(ids)); k++) {
			struct bpf_map_info mi = {0};
			uint32_t mlen = sizeof(mi);
			int mfd = bpf_map_get_fd_by_id(ids[k]);

			if (mfd < 0)
				continue;
			if (bpf_obj_get_info_by_fd(mfd, &mi, &mlen) == 0 && !strcmp(mi.name, name))
				return mfd;
			close(mfd);
		}
	}
	return -ENOENT;
}

int cost_probe_read(const struct cost_bpf_set *set, struct cost_probe ret[COST_MAX_PROBES])
{
	_cleanup_close_ int sfd = probe_map_fd(set, "probe_stats");
	_cleanup_close_ int cfd = probe_map_fd(set, "probe_ctl");
	int ncpu = libbpf_num_possible_cpus();
	_cleanup_free_ uint64_t *v = NULL;

	if (sfd < 0 || cfd < 0)
		return -ENOENT;
	if (ncpu <= 0)
		return ncpu < 0 ? ncpu : -EINVAL;
	v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t p = 0; p < COST_MAX_PROBES; p++) {
		struct cpa_bpf_probe_ctl ctl = {0};
		uint64_t sum[CPA_BPF_PSTAT_MAX] = {0};

		for (uint32_t s = 0; s < CPA_BPF_PSTAT_MAX; s++) {
			uint32_t k = p * CPA_BPF_PSTAT_MAX + s;

			if (bpf_map_lookup_elem(sfd, &k, v) < 0)
				return -errno;
			for (int c = 0; c < ncpu; c++)
				sum[s] += v[c];
		}
		if (bpf_map_lookup_elem(cfd, &p, &ctl) < 0)
			return -errno;
		ret[p] = (struct cost_probe){
			.runs = sum[CPA_BPF_PSTAT_RUNS],
			.run_ns = sum[CPA_BPF_PSTAT_RUN_NS],
			.hits = sum[CPA_BPF_PSTAT_HITS],
			.skipped = sum[CPA_BPF_PSTAT_SKIPPED],
			.trap_ps = ctl.trap_ps,
			.thin_rate = ctl.thin_rate,
			.state = ctl.state,
		};
	}
	return 0;
}

int cost_machine_busy(uint64_t *ret_busy, uint64_t *ret_total)
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
