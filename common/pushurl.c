// SPDX-License-Identifier: MIT
/* The backend URL of cpa-push (pushurl.h). */
#include "pushurl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static int bad(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return -EINVAL;
}

int push_url__check(const char *url, char *err, size_t errlen)
{
	const char *auth, *end, *host, *port = NULL, *p;
	unsigned long n = 0;

	if (strlen(url) >= PUSH_URL_MAX) {
		snprintf(err, errlen, "longer than %d bytes", PUSH_URL_MAX - 1);
		return -EINVAL;
	}
	if (!strncasecmp(url, "http://", 7))
		auth = url + 7;
	else if (!strncasecmp(url, "https://", 8))
		auth = url + 8;
	else
		return bad(err, errlen, "it must start with http:// or https://");
	for (p = url; *p; p++)
		if ((unsigned char)*p <= 0x20 || *p == 0x7f)
			return bad(err, errlen, "a blank or a control character in it");
	if (strpbrk(url, "?#"))
		return bad(err, errlen,
			   "no query or fragment: cpa-push adds the path and query of its posts");
	end = auth + strcspn(auth, "/");
	host = auth;
	for (p = auth; p < end; p++)
		if (*p == '@')
			host = p + 1;
	if (*host == '[') {
		p = memchr(host, ']', (size_t)(end - host));
		if (!p || p == host + 1)
			return bad(err, errlen, "an IPv6 host is [address]");
		if (p + 1 < end && p[1] != ':')
			return bad(err, errlen, "only :port may follow ]");
		port = p + 1 < end ? p + 2 : NULL;
	} else {
		p = memchr(host, ':', (size_t)(end - host));
		if (p == host || host == end)
			return bad(err, errlen, "no host");
		port = p ? p + 1 : NULL;
	}
	if (port) {
		if (port == end)
			return bad(err, errlen, "an empty port after ':'");
		for (p = port; p < end; p++) {
			if (*p < '0' || *p > '9')
				return bad(err, errlen, "the port is a number, 1..65535");
			n = n * 10 + (unsigned long)(*p - '0');
			if (n > 65535)
				break;
		}
		if (n < 1 || n > 65535)
			return bad(err, errlen, "the port is a number, 1..65535");
	}
	return 0;
}
