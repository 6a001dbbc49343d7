// SPDX-License-Identifier: MIT
/* The process around a pipeline stage: see daemon.h. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/capability.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

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

#define CAPB(c) (1ull << (c))

/*
 * What a stage keeps once it is set up (docs/reliability.md, "Limits and
 * privileges"). capture: BPF and perf events (SYS_ADMIN for what the kernel
 * still gates on it: tracefs, some BPF helpers; SYS_RESOURCE/IPC_LOCK for
 * locked BPF memory), /proc/PID of any user (SYS_PTRACE, DAC_READ_SEARCH).
 * unwindd, symd: other processes' maps and files (SYS_PTRACE for
 * /proc/PID/maps and /proc/PID/root, CHECKPOINT_RESTORE for
 * /proc/PID/map_files, DAC_READ_SEARCH for binaries we may not read);
 * symd also SYSLOG (kallsyms addresses under kptr_restrict). storer: none.
 */
uint64_t daemon__caps_kept(enum shm_stage_id id)
{
	const uint64_t procs = CAPB(CAP_SYS_PTRACE) | CAPB(CAP_DAC_READ_SEARCH);

	switch (id) {
	case SHM_STAGE_CAPTURE:
		return CAPB(CAP_BPF) | CAPB(CAP_PERFMON) | CAPB(CAP_SYS_ADMIN) |
		       CAPB(CAP_SYS_RESOURCE) | CAPB(CAP_IPC_LOCK) | procs;
	case SHM_STAGE_UNWINDD:
		return procs | CAPB(CAP_CHECKPOINT_RESTORE);
	case SHM_STAGE_SYMD:
		return procs | CAPB(CAP_CHECKPOINT_RESTORE) | CAPB(CAP_SYSLOG);
	default:
		return 0;
	}
}

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

static int drop_privileges(const struct daemon_stage *d)
{
	int r = caps_drop(daemon__caps_kept(d->id));

	if (r < 0)
		log_error_errno(r, "drop capabilities: %m");
	return r;
}

int daemon__wait_cap_ms(const struct cpa_config *cfg)
{
	uint32_t hang = cfg && cfg->hang_timeout_ms ? cfg->hang_timeout_ms : 10000;

	return (int)MAX(hang / 4, 1u);
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
	/* Set up: from here on only what the stage needs. */
	r = drop_privileges(d);
	if (r < 0) {
		d->free(obj);
		return r;
	}

	l.st = st;
	l.in = &in;
	l.obj = obj;
	l.term = &daemon_term;
	l.next = d->out_ring >= 0 ? &out : NULL;
	l.wait_cap_ms = daemon__wait_cap_ms(shm_arena__config(a));
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
		/* A stage with its own loop sets up inside it: it keeps what it
		 * needs for that too (capture: BPF, perf events). */
		r = drop_privileges(d);
		if (r == 0)
			r = d->run(a, st);
		else
			shm_stage__exit(st, r);
	} else {
		r = run_loop(d, a, st);
		shm_stage__exit(st, r);
	}
	shm_arena__free(a);
	return r < 0 ? 1 : 0;
}
