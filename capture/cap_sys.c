// SPDX-License-Identifier: MIT
#include "cap_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cpulist.h"
#include "common/fileio.h"
#include "common/macro.h"

#define CAP_SYS_FILE_MAX (64u << 10) /* a sysfs list or a /proc status file */

static int parse_uint(const char **s, unsigned int *ret)
{
	char *end;
	unsigned long v;

	if (**s < '0' || **s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(*s, &end, 10);
	if (errno || v > CAP_MAX_CPUS * 16ul)
		return -EINVAL;
	*s = end;
	*ret = (unsigned int)v;
	return 0;
}

int cap_sys_parse_cpulist(const char *s, unsigned int *cpus, unsigned int max)
{
	uint64_t mask[CPULIST_WORDS(CPULIST_MAX_CPUS)];
	unsigned int n = 0, hi, c;

	if (cpulist__parse(s, mask, CPULIST_MAX_CPUS, &hi) < 0)
		return -EINVAL;
	for (c = 0; c <= hi; c++) {
		if (!cpulist__test(mask, CPULIST_MAX_CPUS, c))
			continue;
		if (n >= max)
			return -E2BIG;
		cpus[n++] = c;
	}
	return (int)n;
}

int cap_sys_online_cpus(unsigned int *cpus, unsigned int max)
{
	_cleanup_free_ char *buf = NULL;
	size_t len;
	int r;

	r = read_full_file("/sys/devices/system/cpu/online", 0, CAP_SYS_FILE_MAX, &buf, &len);
	if (r < 0)
		return r;
	return cap_sys_parse_cpulist(buf, cpus, max);
}

int cap_sys_parse_release(const char *release, unsigned int *ret_major, unsigned int *ret_minor)
{
	const char *s = release;
	unsigned int major, minor;

	if (parse_uint(&s, &major) < 0 || *s++ != '.' || parse_uint(&s, &minor) < 0)
		return -EINVAL;
	*ret_major = major;
	*ret_minor = minor;
	return 0;
}

bool cap_sys_ustack_copy_unsafe(const char *release)
{
	unsigned int major, minor, v;

	if (cap_sys_parse_release(release, &major, &minor) < 0)
		return false;
	v = major * 1000 + minor;
	return v >= 5019 && v < 6004;
}

int cap_sys_tgid_of(int tid)
{
	_cleanup_free_ char *buf = NULL;
	char path[64];
	const char *p;
	size_t len;
	int r;

	if (tid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	r = read_full_file(path, 0, CAP_SYS_FILE_MAX, &buf, &len);
	if (r < 0)
		return r;
	p = strstr(buf, "\nTgid:");
	if (!p)
		return -EBADMSG;
	return (int)strtol(p + 6, NULL, 10);
}
