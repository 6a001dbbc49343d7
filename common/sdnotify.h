/* SPDX-License-Identifier: MIT */
/*
 * The sd_notify datagram protocol, written out (no libsystemd): one
 * AF_UNIX/SOCK_DGRAM datagram of "KEY=value\n" lines to $NOTIFY_SOCKET, a
 * path or, when it starts with '@', an abstract socket name.
 */
#ifndef CPA_COMMON_SDNOTIFY_H
#define CPA_COMMON_SDNOTIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/macro.h"

struct sd_notifier {
	int fd; /* -1 when not run by systemd */
	unsigned int addr_len;
	char addr[110];		/* struct sockaddr_un, kept opaque here */
	uint64_t watchdog_usec; /* 0 = no watchdog asked */
};

/* Read NOTIFY_SOCKET / WATCHDOG_USEC / WATCHDOG_PID. 0 (also when not under
 * systemd: then every send is a no-op) or -errno for a malformed variable. */
int sd_notifier__open(struct sd_notifier *n);
void sd_notifier__close(struct sd_notifier *n);
static inline bool sd_notifier__enabled(const struct sd_notifier *n)
{
	return n->fd >= 0;
}
/* Send one datagram; 0, or -errno (callers log once and carry on). */
int sd_notifier__send(struct sd_notifier *n, const char *fmt, ...) _printf_(2, 3);

#endif /* CPA_COMMON_SDNOTIFY_H */
