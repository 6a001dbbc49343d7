// SPDX-License-Identifier: MIT
/*
 * cpa-push: post each interval of a store to Pyroscope (docs/push.md).
 *
 *   cpa-push --store_dir /var/log/cpa --url http://pyroscope:4040 [--interval 10]
 *            [--name cpa.cpu] [--host H] [--org_id ID] [--backlog 360]
 *            [--retry_ms 1000] [--protocol pyroscope|parca] [--once [--timeout 60]]
 *            [--max_posts N] [--verbose]
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/pushurl.h"
#include "common/safepath.h"
#include "push.h"
#include "storer/store.h"

static int usage(int rc)
{
	if (rc) {
		fprintf(stderr, "Usage: cpa-push --store_dir DIR --url URL [OPTION]...\n"
				"Try 'cpa-push --help'.\n");
		return rc;
	}
	printf("Usage: cpa-push --store_dir DIR --url URL [OPTION]...\n"
	       "Post each interval of a cpa store, as pprof, to Pyroscope (/ingest) or Parca\n"
	       "(/profiles/writeraw). Only sealed intervals are posted; the position is kept in\n"
	       "DIR/.cpa-push.pos, so a restart sends nothing twice and skips nothing.\n"
	       "\n"
	       "      --store_dir DIR     the store root of 'cpa monitor' (required)\n"
	       "      --url URL           the backend's base URL, e.g. http://pyroscope:4040\n"
	       "                          (required)\n"
	       "      --protocol P        pyroscope or parca (default pyroscope)\n"
	       "      --interval S        seconds per posted profile, 1..3600 (default 10)\n"
	       "      --name NAME         application name (default cpa.cpu)\n"
	       "      --host H            host label (default: the hostname)\n"
	       "      --org_id ID         X-Scope-OrgID header (multi-tenant Pyroscope)\n"
	       "      --backlog N         intervals kept waiting before the oldest are given up,\n"
	       "                          1..1000000 (default 360)\n"
	       "      --retry_ms MS       first retry delay of a failed post (at most the\n"
	       "                          interval), doubled up to the interval, 1..600000\n"
	       "                          (default 1000)\n"
	       "      --once              post what is sealed now, then exit\n"
	       "      --timeout S         with --once: give up when the backend accepts no post\n"
	       "                          for S seconds, 1..86400 (default 60); a post it\n"
	       "                          refuses (3xx, 4xx but 408/425/429) gives up at once\n"
	       "      --max_posts N       exit after N posts, 1..2^30\n"
	       "  -v, --verbose           debug logging\n"
	       "  -h, --help              print this help and exit\n"
	       "  -V, --version           print the version and exit\n"
	       "\n"
	       "SIGINT or SIGTERM stop it (a post in flight is cancelled and sent again on the\n"
	       "next start). Exit status: 0 when stopped, 1 on a run-time failure (with --once:\n"
	       "windows left unposted; the position is kept, the next run posts them), 2 on a\n"
	       "usage error. docs/push.md has the details.\n");
	return 0;
}

static int num(const char *flag, const char *v, long lo, long hi, long *ret)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (!*v || *end || n < lo || n > hi) {
		log_error("--%s: invalid value '%s' (must be %ld..%ld)", flag, v, lo, hi);
		return -1;
	}
	*ret = n;
	return 0;
}

/*
 * --name, --host and --org_id go into the series name (name{host=H}), the
 * Parca JSON and a header as they are: a value that would break those (or be
 * cut short) would have every post refused, so it is refused here.
 */
static int label_ok(const char *flag, const char *v, size_t max, const char *forbidden)
{
	const char *p;

	if (!*v || strlen(v) > max) {
		log_error("--%s: invalid value '%s' (1..%zu characters)", flag, v, max);
		return -1;
	}
	for (p = v; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f || strchr(forbidden, *p)) {
			log_error("--%s: invalid value '%s' (no blank nor control character%s%s)",
				  flag, v, forbidden[1] ? ", none of " : "", forbidden + 1);
			return -1;
		}
	return 0;
}

#define LABEL_FORBIDDEN " {}=,\"\\"

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"store_dir", required_argument, NULL, 's'},
		{"url", required_argument, NULL, 'u'},
		{"interval", required_argument, NULL, 'i'},
		{"name", required_argument, NULL, 'n'},
		{"host", required_argument, NULL, 'H'},
		{"org_id", required_argument, NULL, 'O'},
		{"backlog", required_argument, NULL, 'b'},
		{"retry_ms", required_argument, NULL, 'r'},
		{"once", no_argument, NULL, '1'},
		{"max_posts", required_argument, NULL, 'm'},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{"protocol", required_argument, NULL, 'P'},
		{"timeout", required_argument, NULL, 't'},
		{NULL, 0, NULL, 0},
	};
	struct push_opts o = {
		.name = "cpa.cpu", .interval = 10, .backlog = 360, .retry_ms = 1000, .timeout = 60};
	bool timeout_set = false;
	struct push_stats st;
	char err[128], url[PUSH_URL_MAX], parent[4096];
	struct stat sb;
	long v;
	int c, r;

	log_set_subsystem("push");
	umask(CPA_UMASK); /* what it writes: 0640 (common/safepath.h) */
	while ((c = getopt_long(argc, argv, "vhV", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.root = optarg;
			break;
		case 'u':
			o.url = optarg;
			break;
		case 'n':
			if (label_ok("name", optarg, 200, LABEL_FORBIDDEN) < 0)
				return 2;
			o.name = optarg;
			break;
		case 'H':
			if (label_ok("host", optarg, 253, LABEL_FORBIDDEN) < 0)
				return 2;
			o.host = optarg;
			break;
		case 'O':
			if (label_ok("org_id", optarg, 200, " ") < 0)
				return 2;
			o.org_id = optarg;
			break;
		case 'i':
			if (num("interval", optarg, 1, 3600, &v) < 0)
				return 2;
			o.interval = (uint32_t)v;
			break;
		case 'b':
			if (num("backlog", optarg, 1, 1000000, &v) < 0)
				return 2;
			o.backlog = (uint32_t)v;
			break;
		case 'r':
			if (num("retry_ms", optarg, 1, 600000, &v) < 0)
				return 2;
			o.retry_ms = (uint32_t)v;
			break;
		case 'm':
			if (num("max_posts", optarg, 1, 1L << 30, &o.max_posts) < 0)
				return 2;
			break;
		case '1':
			o.once = true;
			break;
		case 't':
			if (num("timeout", optarg, 1, 86400, &v) < 0)
				return 2;
			o.timeout = (uint32_t)v;
			timeout_set = true;
			break;
		case 'P':
			if (strcmp(optarg, "pyroscope") && strcmp(optarg, "parca")) {
				log_error("--protocol: invalid value '%s' (pyroscope or parca)",
					  optarg);
				return 2;
			}
			o.parca = !strcmp(optarg, "parca");
			break;
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		case 'h':
			return usage(0);
		case 'V':
			printf("cpa-push %s\n", CPA_VERSION);
			return 0;
		default:
			return usage(2);
		}
	}
	if (!o.root || !o.url || optind != argc) {
		log_error("--store_dir and --url are required, and nothing else");
		return usage(2);
	}
	if (timeout_set && !o.once) {
		/* without --once it retries for ever: a daemon outlives an outage */
		log_error("--timeout applies to --once only");
		return usage(2);
	}
	if (push_url__check(o.url, err, sizeof(err)) < 0) {
		log_error("--url: invalid value '%s' (%s; e.g. http://pyroscope:4040)", o.url, err);
		return usage(2);
	}
	/* the posts' paths are appended: "http://h:4040/" + "/ingest" is no route */
	snprintf(url, sizeof(url), "%s", o.url);
	for (size_t n = strlen(url); n && url[n - 1] == '/'; n--)
		url[n - 1] = 0;
	o.url = url;
	/* the root the monitor writes, whose cpa_* dirs are followed: a path that
	 * is no directory, or one store dir, would be waited on for ever */
	if (stat(o.root, &sb) < 0) {
		log_error("--store_dir '%s': %s", o.root, strerror(errno));
		return 1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		log_error("--store_dir '%s': not a directory", o.root);
		return 1;
	}
	if (store_dir__is_store(o.root)) {
		snprintf(parent, sizeof(parent), "%s", o.root);
		log_error("--store_dir '%s' is one store dir: give the store root that holds "
			  "the cpa_* dirs, '%s' (cpa monitor's --store_dir)",
			  o.root, dirname(parent));
		return usage(2);
	}
	r = push__run(&o, &st);
	log_info("stopped at %lld: %llu posts, %llu failed posts, %llu empty windows, %llu windows "
		 "given up",
		 (long long)st.pos, (unsigned long long)st.posts,
		 (unsigned long long)st.post_errors, (unsigned long long)st.windows_empty,
		 (unsigned long long)st.windows_dropped);
	return r < 0 ? 1 : 0;
}
