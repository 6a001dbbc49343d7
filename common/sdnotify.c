// SPDX-License-Identifier: MIT
#include "sdnotify.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "opts.h"

_Static_assert(sizeof(((struct sd_notifier *)0)->addr) >= sizeof(struct sockaddr_un),
	       "room for a sockaddr_un");

int sd_notifier__open(struct sd_notifier *n)
{
	const char *path = getenv("NOTIFY_SOCKET"), *wd = getenv("WATCHDOG_USEC");
	const char *wpid = getenv("WATCHDOG_PID");
	struct sockaddr_un *sa = (struct sockaddr_un *)n->addr;
	size_t len;

	memset(n, 0, sizeof(*n));
	n->fd = -1;
	if (wd && *wd) {
		long long v, pid;

		if (parse_ll(wd, 1, INT64_MAX, &v) < 0)
			return -EINVAL;
		/* WATCHDOG_PID names the process systemd expects pings from. */
		if (!wpid || !*wpid || (parse_ll(wpid, 1, INT32_MAX, &pid) == 0 && pid == getpid()))
			n->watchdog_usec = (uint64_t)v;
	}
	if (!path || !*path)
		return 0;
	len = strlen(path);
	if (len >= sizeof(sa->sun_path) || (path[0] != '/' && path[0] != '@'))
		return -EINVAL;
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, len);
	if (path[0] == '@')
		sa->sun_path[0] = 0; /* abstract namespace: no trailing NUL counted */
	n->addr_len = (unsigned int)(offsetof(struct sockaddr_un, sun_path) + len);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0)
		return -errno;
	return 0;
}

void sd_notifier__close(struct sd_notifier *n)
{
	if (n->fd >= 0)
		close(n->fd);
	n->fd = -1;
}

int sd_notifier__send(struct sd_notifier *n, const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int len;

	if (n->fd < 0)
		return 0;
	va_start(ap, fmt);
	len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (len < 0)
		return -EINVAL;
	if ((size_t)len >= sizeof(buf))
		len = sizeof(buf) - 1;
	/* Never block the supervisor on a reader that stopped reading (a
	 * wedged service manager): a full socket queue drops the message. */
	if (sendto(n->fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT, (struct sockaddr *)n->addr,
		   n->addr_len) < 0)
		return -errno;
	return 0;
}
