// SPDX-License-Identifier: MIT
/*
 * cpa: the front command. Sub-commands monitor (the supervisor), show (export
 * a time range), ctl (inspect/steer a running monitor), help, version.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "common/log.h"
#include "common/safepath.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cpa <command> [options]\n"
		"Continuous profiling agent, compatible with CPA's command line.\n"
		"\n"
		"Available COMMAND:\n"
		"  monitor   run the profiler: sample every CPU, keep a per-second history in a\n"
		"            store (or one profile with --oneshot)\n"
		"  show      read a store: print its record range, export a time range as folded\n"
		"            stacks (.prof), pprof, SVG or speedscope, a diff of two ranges, a\n"
		"            smaller store; scheduler metrics, triggers; the terminal UI\n"
		"  ctl       a running monitor: status | cost | restart | rate | mem\n"
		"  help      [command]: this text, or the options of a command\n"
		"  version   print the version (also --version)\n"
		"\n"
		"Run 'cpa <command> --help' for the options of a command.\n");
}

static void usage_cmd(FILE *f, enum cpa_cmd cmd)
{
	switch (cmd) {
	case CPA_CMD_MONITOR:
		fprintf(f,
			"Usage: cpa monitor [options]\n"
			"Sample every CPU and keep a rolling per-second history in --store_dir.\n"
			"SIGINT, SIGTERM or --duration stop it cleanly (everything is drained).\n");
		break;
	case CPA_CMD_SHOW:
		fprintf(f,
			"Usage: cpa show --read DIR [options]\n"
			"Print the record range of a store, and export a time range of it: folded\n"
			"stacks (.prof, the default), pprof, SVG or speedscope (--format), a diff of\n"
			"two ranges, a new smaller store (--split_path); or print its scheduler\n"
			"metrics (--sched) and triggers (--triggers); or open cpa-view (--use_cui).\n");
		break;
	case CPA_CMD_CTL:
		fprintf(f,
			"Usage: cpa ctl [--store_dir DIR] status\n"
			"       cpa ctl [--store_dir DIR] cost [seconds, default 10]\n"
			"       cpa ctl [--store_dir DIR] restart capture|unwindd|symd|storer\n"
			"       cpa ctl [--store_dir DIR] rate capture|unwindd|symd <records/s, 0 = "
			"unlimited>\n"
			"       cpa ctl [--store_dir DIR] mem unwindd|symd|storer <cache cap, MiB>\n"
			"Talks to the 'cpa monitor' whose pid is in DIR/" CPA_PIDFILE_NAME ".\n"
			"\n"
			"  status    state, pid, restarts, heartbeat, rate limit and counters of each\n"
			"            stage; ring fill\n"
			"  cost      what the agent costs this host, measured over SECONDS (1..3600):\n"
			"            CPU and memory per process, BPF run time per program\n"
			"  restart   restart one stage (nothing in its input ring is lost)\n"
			"  rate      set a stage's rate limit, live\n"
			"  mem       set a stage's cache cap, live\n");
		break;
	default:
		usage(f);
		return;
	}
	cpa_opts__print_help(f, cmd);
	if (cmd != CPA_CMD_MONITOR)
		fprintf(f, "\n--duration and --btf_path (CPA's global options) are accepted and "
			   "ignored here.\n");
}

int self_exe_dir(char *buf, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", buf, len - 1);
	char *slash;

	if (n < 0)
		return -errno;
	if ((size_t)n >= len - 1)
		return -ENAMETOOLONG;
	buf[n] = 0;
	slash = strrchr(buf, '/');
	if (!slash)
		return -EINVAL;
	*slash = 0;
	return 0;
}

/*
 * A daemon started with stdin/stdout/stderr closed would hand those numbers to
 * the next open(): the arena memfd could become a stage's stdin. Fill them (no
 * O_CLOEXEC here: they are the std fds every child inherits).
 */
static void std_fds_ensure(void)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
			_exit(1);
}

int main(int argc, char **argv)
{
	struct cpa_opts o;
	enum cpa_cmd cmd;
	int r;

	std_fds_ensure();
	/* Stores, dumps, exports: directories 0750, files 0640; the stages inherit it. */
	umask(CPA_UMASK);
	log_set_subsystem("cpa");
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return 0;
	}
	cmd = !strcmp(argv[1], "--version") ? CPA_CMD_VERSION : cpa_cmd__from_name(argv[1]);
	switch (cmd) {
	case CPA_CMD_NONE:
		log_error("unknown command '%s'", argv[1]);
		usage(stderr);
		return 2;
	case CPA_CMD_VERSION:
	case CPA_CMD_HELP:
		/* version takes no argument, help one command */
		if (argc > (cmd == CPA_CMD_HELP ? 3 : 2)) {
			log_error("unexpected argument '%s'", argv[cmd == CPA_CMD_HELP ? 3 : 2]);
			fprintf(stderr, "Try 'cpa --help'.\n");
			return 2;
		}
		if (cmd == CPA_CMD_VERSION) {
			printf("cpa %s\n", CPA_VERSION);
			return 0;
		}
		if (argc > 2) {
			enum cpa_cmd c = cpa_cmd__from_name(argv[2]);

			if (c == CPA_CMD_NONE) {
				log_error("unknown command '%s'", argv[2]);
				usage(stderr);
				return 2;
			}
			usage_cmd(stdout, c);
		} else {
			usage(stdout);
		}
		return 0;
	default:
		break;
	}

	cpa_opts__init(&o);
	r = cpa_opts__parse(&o, cmd, argc - 2, argv + 2);
	if (r < 0) {
		fprintf(stderr, "Try 'cpa %s --help'.\n", argv[1]);
		cpa_opts__free(&o);
		return 2;
	}
	if (o.help) {
		usage_cmd(stdout, cmd);
		cpa_opts__free(&o);
		return 0;
	}
	if (o.verbose)
		log_set_level(LOG_LVL_DEBUG);
	if (cmd != CPA_CMD_CTL && o.n_args > 0) {
		log_error("unexpected argument '%s'", o.args[0]);
		fprintf(stderr, "Try 'cpa %s --help'.\n", argv[1]);
		cpa_opts__free(&o);
		return 2;
	}

	switch (cmd) {
	case CPA_CMD_MONITOR:
		r = cmd_monitor(&o);
		break;
	case CPA_CMD_SHOW:
		r = cmd_show(&o);
		break;
	case CPA_CMD_CTL:
		r = cmd_ctl(&o);
		break;
	default:
		r = 2;
	}
	cpa_opts__free(&o);
	return r;
}
