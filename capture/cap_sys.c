// SPDX-License-Identifier: MIT
#include "cap_sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/macro.h"

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
	unsigned int n = 0;

	while (*s && *s != '\n') {
		unsigned int lo, hi;

		if (parse_uint(&s, &lo) < 0)
			return -EINVAL;
		hi = lo;
		if (*s == '-') {
			s++;
			if (parse_uint(&s, &hi) < 0 || hi < lo)
				return -EINVAL;
		}
		for (unsigned int c = lo; c <= hi; c++) {
			if (n >= max)
				return -E2BIG;
			cpus[n++] = c;
		}
		if (*s == ',')
			s++;
		else if (*s && *s != '\n')
			return -EINVAL;
	}
	return n ? (int)n : -EINVAL;
}

static int read_small_file(const char *path, char *buf, size_t len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

int cap_sys_online_cpus(unsigned int *cpus, unsigned int max)
{
	char buf[4096];
	int r;

	r = read_small_file("/sys/devices/system/cpu/online", buf, sizeof(buf));
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
	char path[64], buf[4096];
	const char *p;
	int r;

	if (tid <= 0)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/status", tid);
	r = read_small_file(path, buf, sizeof(buf));
	if (r < 0)
		return r;
	p = strstr(buf, "\nTgid:");
	if (!p)
		return -EBADMSG;
	return (int)strtol(p + 6, NULL, 10);
}
