// SPDX-License-Identifier: MIT
/*
 * cpa-push: post each interval of a store to Pyroscope (docs/push.md).
 *
 *   cpa-push --store_dir /var/log/cpa --url http://pyroscope:4040 [--interval 10]
 *            [--name cpa.cpu] [--host H] [--org_id ID] [--backlog 360]
 *            [--retry_ms 1000] [--protocol pyroscope|parca] [--once] [--max_posts N]
 *            [--verbose]
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/safepath.h"
#include "push.h"

static int usage(int rc)
{
	fprintf(rc ? stderr : stdout,
		"usage: cpa-push --store_dir DIR --url URL [--interval S] [--name NAME] [--host H]\n"
		"                [--org_id ID] [--backlog N] [--retry_ms MS] [--protocol pyroscope|parca]\n"
		"                [--once] [--max_posts N] [--verbose]\n");
	return rc;
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
		{"protocol", required_argument, NULL, 'P'},
		{NULL, 0, NULL, 0},
	};
	struct push_opts o = {.name = "cpa.cpu", .interval = 10, .backlog = 360, .retry_ms = 1000};
	struct push_stats st;
	long v;
	int c, r;

	log_set_subsystem("push");
	umask(CPA_UMASK); /* what it writes: 0640 (common/safepath.h) */
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o.root = optarg;
			break;
		case 'u':
			o.url = optarg;
			break;
		case 'n':
			o.name = optarg;
			break;
		case 'H':
			o.host = optarg;
			break;
		case 'O':
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
		default:
			return usage(2);
		}
	}
	if (!o.root || !o.url || optind != argc) {
		log_error("--store_dir and --url are required, and nothing else");
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
