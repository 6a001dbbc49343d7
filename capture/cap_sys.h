/* SPDX-License-Identifier: MIT */
/*
 * Facts about the machine capture needs: online CPUs, kernel version quirks,
 * the process a --pid belongs to. Parsers are split from the file readers so
 * the unit test can feed them strings.
 */
#ifndef CPA_CAPTURE_CAP_SYS_H
#define CPA_CAPTURE_CAP_SYS_H

#include <stdbool.h>
#include <stdint.h>

#define CAP_MAX_CPUS 4096

/* "0-3,5,7-9\n" -> cpus[] in ascending order (common/cpulist.h syntax); returns the
 * count, -EINVAL, or -E2BIG when more than max cpus are listed. */
int cap_sys_parse_cpulist(const char *s, unsigned int *cpus, unsigned int max);
/* /sys/devices/system/cpu/online; returns the count or -errno. */
int cap_sys_online_cpus(unsigned int *cpus, unsigned int max);

/* "6.1.0-18-amd64" -> 6, 1. -EINVAL when it does not start with X.Y. */
int cap_sys_parse_release(const char *release, unsigned int *ret_major, unsigned int *ret_minor);
/*
 * Upstream 5.19 .. 6.3 can deadlock when user memory is read from NMI context
 * (copy_from_user_nofault without the fix that landed in 6.4). True when
 * release falls in that range; unparsable releases are treated as safe.
 */
bool cap_sys_ustack_copy_unsafe(const char *release);

/* Thread group id of tid from /proc/<tid>/status, or -errno. */
int cap_sys_tgid_of(int tid);

#endif /* CPA_CAPTURE_CAP_SYS_H */
