/* SPDX-License-Identifier: MIT */
/*
 * The backend URL of cpa-push (`cpa-push --url`, `cpa monitor --push`): one
 * check for both, so a URL that could never be posted to is refused at the
 * option check (exit 2) instead of failing every post for ever (docs/push.md).
 */
#ifndef CPA_PUSHURL_H
#define CPA_PUSHURL_H

#include <stddef.h>

/* A URL's bytes, with its NUL: cpa-push builds each post's URL from it. */
#define PUSH_URL_MAX 2048

/*
 * 0 when url is http:// or https:// (any case), a host (a name, an IPv4
 * address or [IPv6]), an optional :port 1..65535, an optional path; no
 * query nor fragment (cpa-push appends its own path and query), no blank
 * nor control character, shorter than PUSH_URL_MAX. Else -EINVAL and the
 * reason in err.
 */
int push_url__check(const char *url, char *err, size_t errlen);

#endif /* CPA_PUSHURL_H */
