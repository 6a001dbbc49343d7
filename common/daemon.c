// SPDX-License-Identifier: MIT
/* The process around a pipeline stage: see daemon.h. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>

#include "log.h"

volatile sig_atomic_t daemon_term;

static void on_sigterm(int sig)
{
	(void)sig;
	daemon_term = 1;
}

static int signals_setup(void)
{
	struct sigaction sa = {.sa_handler = on_sigterm};

	/* No SA_RESTART: a SIGTERM must cut a futex sleep or a poll short. */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) < 0)
		return -errno;
	/* The monitor orchestrates shutdown; a terminal's ^C is not ours. */
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGPIPE, &sa, NULL) < 0)
		return -errno;
	return 0;
}

static void usage(const char *name)
{
	fprintf(stderr,
		"usage: %s [--verbose]\n"
		"  Stage of the cpa pipeline; started by `cpa monitor` with the arena on fd %d.\n",
		name, SHM_ARENA_FD);
}

static int parse_argv(const char *name, int argc, char **argv)
{
	static const struct option opts[] = {
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		case 'h':
			usage(name);
			return 0;
		default:
			usage(name);
			return 2;
		}
	}
	if (optind < argc) {
		log_error("unknown argument '%s'", argv[optind]);
		return 2;
	}
	return -1;
}

/* The consumer stages: rings, object, the shared loop, the finish. */
static int run_loop(const struct daemon_stage *d, struct shm_arena *a, struct shm_stage *st)
{
	struct shm_stage_loop l = d->loop;
	struct shm_ring_cons in = {0};
	struct shm_ring_prod out = {0};
	void *obj = NULL;
	int r;

	if (d->in_ring >= 0) {
		r = shm_arena__open_cons(a, (unsigned int)d->in_ring, &in);
		if (r < 0)
			return log_error_errno(r, "open input ring %d: %m", d->in_ring);
	}
	if (d->out_ring >= 0) {
		r = shm_arena__open_prod(a, (unsigned int)d->out_ring, &out);
		if (r < 0)
			return log_error_errno(r, "open output ring %d: %m", d->out_ring);
	}
	r = d->new (a, st, &in, d->out_ring >= 0 ? &out : NULL, &obj);
	if (r < 0)
		return r;

	l.st = st;
	l.in = &in;
	l.obj = obj;
	l.term = &daemon_term;
	/* The stage feeding our input (pipeline order): for the orphan drain. */
	if (d->in_ring >= 0 && d->id > SHM_STAGE_CAPTURE)
		l.up = shm_arena__stage(a, (enum shm_stage_id)(d->id - 1));
	r = shm_stage__run(&l);
	if (r < 0)
		log_error_errno(r, "input ring: %m");
	d->finish(obj, r, l.draining, daemon_term);
	if (r >= 0)
		log_info("%s", l.orphaned    ? "monitor gone: drained what was left"
			       : daemon_term ? "terminated"
					     : "drained");
	d->free(obj);
	return r;
}

int daemon__main(const struct daemon_stage *d, int argc, char **argv)
{
	struct shm_arena *a = NULL;
	struct shm_stage *st;
	int r;

	log_set_subsystem(d->name);
	r = parse_argv(d->name, argc, argv);
	if (r >= 0)
		return r;
	if (fcntl(SHM_ARENA_FD, F_GETFD) < 0) {
		log_error("no arena on fd %d: run me from `cpa monitor`", SHM_ARENA_FD);
		return 2;
	}
	r = shm_stage__attach(SHM_ARENA_FD, d->id, &a, &st);
	if (r == -EPROTO) {
		log_error("arena config missing or of another version");
		return 2;
	}
	if (r < 0) {
		log_error_errno(r, "attach arena on fd %d: %m", SHM_ARENA_FD);
		return 2;
	}
	if (shm_arena__config(a)->flags & CPA_CFG_VERBOSE)
		log_set_level(LOG_LVL_DEBUG);
	r = signals_setup();
	if (r < 0) {
		log_error_errno(r, "install signal handlers: %m");
		shm_arena__free(a);
		return 1;
	}

	if (d->run) {
		r = d->run(a, st);
	} else {
		r = run_loop(d, a, st);
		shm_stage__exit(st, r);
	}
	shm_arena__free(a);
	return r < 0 ? 1 : 0;
}
