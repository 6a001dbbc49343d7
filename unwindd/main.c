// SPDX-License-Identifier: MIT
/*
 * unwindd: the second stage. Attaches to the arena on fd 3, consumes ring 0
 * (SHM_RING_CAPTURE), produces ring 1 (SHM_RING_UNWIND). Lifecycle as in
 * docs/pipeline.md: STARTING -> RUNNING -> (DRAINING) -> EXITED.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macro.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "unwindd.h"

#define ARENA_FD 3
/*
 * Input wait. Each wakeup costs 40-50 us of CPU on a small VM, as much as
 * unwinding ten samples, so: while samples flow, wake on a burst
 * (WAKE_BYTES, ~150 samples with 8 KiB stacks, at most an eighth of the
 * ring so that capture keeps room for a poll interval's samples) or after
 * WAIT_MS, which bounds the latency we add before symd and the storer's
 * block deadline (1 s of grace for the whole pipeline). When a wait
 * brought nothing, the deadline doubles up to WAIT_IDLE_MS: an idle
 * unwindd wakes once a second, for the heartbeat (the monitor's hang
 * timeout is 10 s) and the sweeps. The first record after idle waits at
 * most WAIT_IDLE_MS, a burst not at all.
 */
#define WAKE_BYTES	 (1024u * 1024)
#define WAIT_MS		 250
#define WAIT_IDLE_MS	 1000
#define HEARTBEAT_NS	 (250 * 1000000ull)
#define FULL_RETRY_MS	 10
#define DEFAULT_CACHE_MB 1024u /* CPA's --max_cache_size_mb default */

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static int signals_setup(void)
{
	struct sigaction sa = {0};

	/* No SA_RESTART: a SIGTERM must cut a futex sleep short. */
	sa.sa_handler = on_term;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGTERM, &sa, NULL) < 0)
		return -errno;
	/* The monitor orchestrates shutdown; a terminal ^C is not ours. */
	sa.sa_handler = SIG_IGN;
	if (sigaction(SIGINT, &sa, NULL) < 0 || sigaction(SIGPIPE, &sa, NULL) < 0)
		return -errno;
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: unwindd [--verbose]\n"
		"  Stage of the cpa pipeline; started by `cpa monitor` with the arena on fd 3.\n");
}

static int run(struct shm_arena *arena, struct shm_stage *st)
{
	const struct cpa_config *cfg = shm_arena__config(arena);
	struct unwindd_opts o = {0};
	struct shm_ring_cons in;
	struct shm_ring_prod out;
	struct unwindd *u = NULL;
	uint64_t last_hb = 0;
	bool draining = false, waited = false;
	int wait_ms = WAIT_MS;
	int r;

	r = shm_arena__open_cons(arena, SHM_RING_CAPTURE, &in);
	if (r < 0)
		return log_error_errno(r, "open input ring %d: %m", SHM_RING_CAPTURE);
	r = shm_arena__open_prod(arena, SHM_RING_UNWIND, &out);
	if (r < 0)
		return log_error_errno(r, "open output ring %d: %m", SHM_RING_UNWIND);

	/* The generation grows on every (re)start; the low half counts the
	 * epochs of one lifetime (module id roll-over). */
	o.epoch = (uint64_t)__atomic_load_n(&st->generation, __ATOMIC_RELAXED) << 32;
	o.max_cache_bytes =
		(uint64_t)(cfg->max_cache_size_mb ? cfg->max_cache_size_mb : DEFAULT_CACHE_MB)
		<< 20;
	o.peer = shm_arena__stage(arena, SHM_STAGE_SYMD);
	o.bench = cfg->flags & CPA_CFG_BENCH;
	o.bench_interval_ns =
		(uint64_t)(cfg->record_interval_s ? cfg->record_interval_s : 1) * 1000000000ull;
	o.debug_pid = cfg->debug_pid;
	o.debug_freq = cfg->debug_freq;
	/* The config block's arrays are NUL-terminated by the monitor; a
	 * hostile or torn one must not make us read past them. */
	if (memchr(cfg->debug_path, 0, sizeof(cfg->debug_path)))
		o.debug_path = cfg->debug_path;
	if (memchr(cfg->parse_env_values, 0, sizeof(cfg->parse_env_values)) &&
	    memchr(cfg->record_env_name, 0, sizeof(cfg->record_env_name))) {
		o.env_values = cfg->parse_env_values;
		o.env_keys = cfg->record_env_name;
	}
	r = unwindd__new(&o, &in, &out, st, &u);
	if (r < 0)
		return log_error_errno(r, "set up: %m");
	if (u->skip_upto)
		log_info("resuming after seq %#llx", (unsigned long long)u->skip_upto);

	shm_stage__heartbeat(st);
	shm_stage__set_state(st, SHM_STATE_RUNNING);
	log_info("running: epoch %#llx, cache cap %llu MiB", (unsigned long long)o.epoch,
		 (unsigned long long)(o.max_cache_bytes >> 20));
	if (o.env_values && *o.env_values)
		log_info("unwinding only processes whose env value (first of '%s', else SYSTEM) "
			 "is one of '%s'",
			 o.env_keys, o.env_values);
	if (o.bench)
		log_info("bench: unwind statistics every %llu s",
			 (unsigned long long)(o.bench_interval_ns / 1000000000ull));

	while (!got_term) {
		uint64_t now = unwindd_now_ns();
		int n;

		if (now - last_hb >= HEARTBEAT_NS) {
			shm_stage__heartbeat(st);
			last_hb = now;
		}
		if (!draining && shm_stage__cmd(st) == SHM_CMD_DRAIN) {
			/* Our producer is gone: finish what it left, then leave. */
			draining = true;
			shm_stage__set_state(st, SHM_STATE_DRAINING);
			log_info("draining");
		}

		n = unwindd__process_batch(u, UNWINDD_BATCH);
		if (n == -ENOBUFS) {
			/* DICT_RESET must precede everything; symd is slow or down.
			 * Input waits in ring 0 meanwhile (capture degrades there). */
			unwindd__tick(u, now);
			usleep(FULL_RETRY_MS * 1000);
			continue;
		}
		if (n < 0) {
			r = log_error_errno(n, "input ring: %m");
			break;
		}
		unwindd__tick(u, now);
		if (n > 0) {
			wait_ms = WAIT_MS; /* data flows: back to the short deadline */
			waited = false;
			continue;
		}
		if (draining)
			break;
		if (waited && wait_ms < WAIT_IDLE_MS)
			wait_ms =
				MIN(wait_ms * 2, WAIT_IDLE_MS); /* the last wait brought nothing */
		r = shm_ring__wait_sc(&in, MIN(WAKE_BYTES, in.size / 8), wait_ms);
		waited = true;
		shm_stage__cnt_add(st, SHM_CNT_WAKEUPS, 1);
		if (r == -EBADMSG) {
			r = log_error_errno(r, "input ring: %m");
			break;
		}
		r = 0; /* woken, timed out or interrupted: all mean "look again" */
	}

	if (r >= 0) {
		/* Whatever we consumed is already committed; flush our losses. */
		unwindd__tick(u, unwindd_now_ns());
		log_info("%s", got_term ? "terminated" : "drained");
	}
	unwindd__free(u);
	return r < 0 ? r : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{},
	};
	struct shm_arena *arena = NULL;
	struct shm_stage *st;
	struct stat sb;
	int c, r;

	log_set_subsystem("unwindd");
	while ((c = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
		switch (c) {
		case 'v':
			log_set_level(LOG_LVL_DEBUG);
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}

	if (fstat(ARENA_FD, &sb) < 0) {
		log_error("no arena on fd %d: run me from `cpa monitor`", ARENA_FD);
		return 2;
	}
	r = shm_arena__attach(ARENA_FD, &arena);
	if (r < 0) {
		log_error_errno(r, "attach arena on fd %d: %m", ARENA_FD);
		return 2;
	}
	st = shm_arena__stage(arena, SHM_STAGE_UNWINDD);
	if (shm_arena__config(arena)->flags & CPA_CFG_VERBOSE)
		log_set_level(LOG_LVL_DEBUG);
	r = signals_setup();
	if (r < 0)
		log_warn_errno(r, "signal handlers: %m");

	r = run(arena, st);
	shm_stage__heartbeat(st);
	shm_stage__set_state(st, r < 0 ? SHM_STATE_FAILED : SHM_STATE_EXITED);
	shm_arena__free(arena);
	return r < 0 ? 1 : 0;
}
