// SPDX-License-Identifier: MIT
/* The process around a pipeline stage: see daemon.h. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/capability.h>
#include <stdio.h>
#include <pwd.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "safepath.h"
#include "shm/fault.h"

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

static void usage(FILE *f, const char *name)
{
	fprintf(f,
		"Usage: %s [OPTION]...\n"
		"A stage of the cpa pipeline (capture -> unwindd -> symd -> storer), started by\n"
		"'cpa monitor' with the shared arena on fd %d; not run by hand. Its settings come\n"
		"from the arena's config (the options of 'cpa monitor').\n"
		"\n"
		"  -v, --verbose   debug logging\n"
		"  -h, --help      print this help and exit\n"
		"  -V, --version   print the version and exit\n",
		name, SHM_ARENA_FD);
}

static int parse_argv(const char *name, int argc, char **argv)
{
	static const struct option opts[] = {
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "vhV", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		case 'h':
			usage(stdout, name);
			return 0;
		case 'V':
			printf("%s %s\n", name, CPA_VERSION);
			return 0;
		default:
			usage(stderr, name);
			return 2;
		}
	}
	if (optind < argc) {
		log_error("unknown argument '%s'", argv[optind]);
		return 2;
	}
	return -1;
}

#define CAPB(c) (1ull << (c))

/*
 * Keep only keep of our capabilities, for good: the bounding set loses the
 * rest (while CAP_SETPCAP is still ours), no ambient ones, no_new_privs (an
 * exec cannot give anything back), then permitted = effective = keep. An
 * unprivileged stage has nothing to drop but sets no_new_privs all the same.
 */
static int caps_drop(uint64_t keep)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct d[2] = {{0}};
	uint64_t perm;

	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	perm = d[0].permitted | (uint64_t)d[1].permitted << 32;
	keep &= perm;
	for (int c = 0; c < 64 && prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (!(keep & CAPB(c)) && (perm & CAPB(CAP_SETPCAP)))
			(void)prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
	(void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (keep == perm && (d[0].effective | (uint64_t)d[1].effective << 32) == perm &&
	    !d[0].inheritable && !d[1].inheritable)
		return 0;
	d[0].permitted = d[0].effective = (uint32_t)keep;
	d[1].permitted = d[1].effective = (uint32_t)(keep >> 32);
	d[0].inheritable = d[1].inheritable = 0;
	if (syscall(SYS_capset, &h, d) < 0)
		return -errno;
	log_debug("capabilities: kept 0x%llx of 0x%llx", (unsigned long long)keep,
		  (unsigned long long)perm);
	return 0;
}

static int drop_privileges(const struct shm_stage_desc *desc)
{
	int r = caps_drop(desc->caps);

	if (r < 0)
		log_error_errno(r, "drop capabilities: %m");
	return r;
}

/*
 * A stage whose file gave it capabilities (AT_SECURE: more than its caller
 * had) runs only for root and the install's group: anyone else drops them
 * all and is refused. Capabilities the caller already held (ambient, as
 * systemd's AmbientCapabilities= gives) are the caller's own business.
 */
static int check_caller(const char *name)
{
	struct passwd *pw;

	if (!getauxval(AT_SECURE) || cpa_group_member())
		return 0;
	(void)caps_drop(0);
	pw = getpwuid(getuid());
	log_error("%s has file capabilities: user %s (uid %u) is neither root nor in group '%s': "
		  "refused",
		  name, pw ? pw->pw_name : "?", (unsigned int)getuid(), cpa_group_name());
	return -EPERM;
}

/* The test knob of shm/fault.h, for a stage between two rings: where a kill
 * makes its successor send a batch again. */
static int fault_knob(const struct shm_stage_desc *desc, enum shm_stage_id id, uint32_t gen,
		      unsigned int *ret)
{
	int r;

	*ret = 0;
	if (desc->role != SHM_ROLE_CONSUMER)
		return 0;
	r = shm_fault__kill_after_commit(id, gen);
	if (r < 0)
		return log_error_errno(r, "%s: malformed", SHM_FAULT_KILL_ENV);
	if (r)
		log_warn("test knob %s: this life dies after its batch %d", SHM_FAULT_KILL_ENV, r);
	*ret = (unsigned int)r;
	return 0;
}

/* Rings and object as its row says, the shared loop, the finish. */
static int run_loop(const struct daemon_stage *d, struct shm_arena *a, struct shm_stage *st)
{
	const struct shm_stage_desc *desc = &shm_stages[d->id];
	struct shm_stage_loop l = d->loop;
	struct shm_ring_cons in = {0};
	struct shm_ring_prod out = {0};
	struct shm_stage_ctx ctx = {
		.arena = a,
		.cfg = shm_arena__config(a),
		.st = st,
		.generation = __atomic_load_n(&st->generation, __ATOMIC_RELAXED),
		.term = &daemon_term,
	};
	void *obj = NULL;
	int r, fr;

	if (desc->ring_in >= 0) {
		r = shm_arena__open_cons(a, (unsigned int)desc->ring_in, &in);
		if (r < 0)
			return log_error_errno(r, "open input ring %d: %m", desc->ring_in);
		ctx.in = &in;
	}
	if (desc->ring_out >= 0) {
		r = shm_arena__open_prod(a, (unsigned int)desc->ring_out, &out);
		if (r < 0)
			return log_error_errno(r, "open output ring %d: %m", desc->ring_out);
		ctx.out = &out;
	}
	r = fault_knob(desc, d->id, ctx.generation, &ctx.fault_kill_batches);
	if (r < 0)
		return r;
	/* A producer sets up with what its run keeps (capture: BPF, perf
	 * events); the others drop once set up. */
	if (desc->caps_first) {
		r = drop_privileges(desc);
		if (r < 0)
			return r;
	}
	shm_stage__heartbeat(st);
	r = d->new (&ctx, &obj);
	if (r < 0)
		return r;
	if (!desc->caps_first) {
		r = drop_privileges(desc);
		if (r < 0) {
			d->free(obj);
			return r;
		}
	}

	l.st = st;
	l.in = ctx.in;
	l.obj = obj;
	l.term = &daemon_term;
	l.next = ctx.out;
	/* --bench prints statistics every record interval, idle or not: the
	 * waits keep that deadline. */
	if (ctx.cfg && (ctx.cfg->flags & CPA_CFG_BENCH))
		l.wait_cap_ms = (int)(MAX(ctx.cfg->record_interval_s, 1u) * 1000);
	/* The stage feeding our input: for the orphan drain. */
	if (desc->ring_in >= 0 && desc->up < SHM_STAGE_MAX)
		l.up = shm_arena__stage(a, desc->up);
	r = shm_stage__run(&l);
	/* (a poll or tick logs its own failure) */
	if (r < 0 && !l.poll)
		log_error_errno(r, "input ring: %m");
	fr = d->finish(obj, r < 0 ? SHM_END_FAILED : l.end);
	/* A drain the monitor asked for: its own lines say so (debug here). */
	if (r >= 0 && desc->ring_in >= 0 && (l.orphaned || daemon_term))
		log_info("%s", l.orphaned ? "monitor gone: drained what was left" : "terminated");
	else if (r >= 0 && desc->ring_in >= 0)
		log_debug("drained");
	d->free(obj);
	return r < 0 ? r : fr;
}

int daemon__main(const struct daemon_stage *d, int argc, char **argv)
{
	const char *name = shm_stage_name(d->id);
	struct shm_arena *a = NULL;
	struct shm_stage *st;
	int r, code;

	log_set_subsystem(name);
	if (check_caller(name) < 0)
		return 2;
	r = parse_argv(name, argc, argv);
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
	r = run_loop(d, a, st);
	shm_stage__exit(st, r);
	/* A cause said (shm_stage__permanent()): no restart can fix it. */
	code = r >= 0 ? 0 : st->cause[0] ? SHM_EXIT_PERMANENT : 1;
	shm_arena__free(a);
	return code;
}
