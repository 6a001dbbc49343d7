// SPDX-License-Identifier: MIT
/*
 * symd executable: attach to the arena on fd 3, consume ring 1, produce
 * ring 2, per docs/pipeline.md (batches, deadline waits, marks, DRAIN,
 * SIGTERM, heartbeat).
 */
#include "symd.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/macro.h"
#include "shm/arena.h"

#define SYMD_ARENA_FD	   3
#define SYMD_BATCH	   256
#define SYMD_WAIT_MIN_MS   200	/* deadline once a batch's worth arrives */
#define SYMD_WAIT_MAX_MS   1000 /* heartbeat and loss flush once a second */
#define SYMD_WAKE_BYTES	   (64u << 10)
#define SYMD_HELD_SLEEP_NS (10 * 1000000L)
#define SYMD_HEARTBEAT_NS  (200ull * 1000000ull)

/*
 * jemalloc: one arena and no thread cache (one thread: neither buys speed,
 * both hold memory), and freed pages go back at once instead of after ten
 * seconds: binary loads free megabytes of section copies, and jemalloc
 * purges on a delay only during later allocator calls, which a symd in
 * steady state does not make (its per-sample path does not allocate).
 * Ignored without jemalloc (sanitizer builds).
 */
const char *malloc_conf = "narenas:1,tcache:false,dirty_decay_ms:0,muzzy_decay_ms:0";

static volatile sig_atomic_t symd_term;

static void on_sigterm(int sig)
{
	(void)sig;
	symd_term = 1;
}

static void signals_setup(void)
{
	struct sigaction sa = {.sa_handler = on_sigterm};

	/* No SA_RESTART: the futex wait returns -EINTR and we leave promptly. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGINT, SIG_IGN); /* the monitor orchestrates shutdown */
	signal(SIGPIPE, SIG_IGN);
}

int main(int argc, char **argv)
{
	struct shm_ring_cons in;
	struct shm_ring_prod out;
	struct shm_arena *a = NULL;
	struct cpa_config *cfg;
	struct shm_stage *st;
	struct symd *s = NULL;
	uint64_t wake_bytes, last_hb = 0;
	int wait_ms = SYMD_WAIT_MIN_MS;
	bool draining = false;
	int i, r;

	log_set_subsystem("symd");
	for (i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v"))
			log_set_level(LOG_LVL_DEBUG);

	if (fcntl(SYMD_ARENA_FD, F_GETFD) < 0) {
		log_error("no arena on fd 3: run me from `cpa monitor`");
		return 2;
	}
	r = shm_arena__attach(SYMD_ARENA_FD, &a);
	if (r < 0) {
		log_error_errno(r, "attach arena on fd 3: %m");
		return 2;
	}
	cfg = shm_arena__config(a);
	st = shm_arena__stage(a, SHM_STAGE_SYMD);
	if (!cfg || !st || cfg->magic != CPA_CONFIG_MAGIC || cfg->version != CPA_CONFIG_VERSION) {
		log_error("arena config missing or of another version");
		shm_arena__free(a);
		return 2;
	}
	if (cfg->flags & CPA_CFG_VERBOSE)
		log_set_level(LOG_LVL_DEBUG);
	signals_setup();

	r = shm_arena__open_cons(a, SHM_RING_UNWIND, &in);
	if (r < 0) {
		log_error_errno(r, "open input ring %d: %m", SHM_RING_UNWIND);
		goto out_fail;
	}
	r = shm_arena__open_prod(a, SHM_RING_SYMD, &out);
	if (r < 0) {
		log_error_errno(r, "open output ring %d: %m", SHM_RING_SYMD);
		goto out_fail;
	}
	r = symd__new(&(struct symd_opts){.cfg = cfg,
					  .stage = st,
					  .in = &in,
					  .out = &out,
					  .generation = __atomic_load_n(&st->generation,
									__ATOMIC_RELAXED)},
		      &s);
	if (r < 0) {
		log_error_errno(r, "set up: %m");
		goto out_fail;
	}
	wake_bytes = MIN((uint64_t)SYMD_WAKE_BYTES, in.size / 2);
	shm_stage__heartbeat(st);
	shm_stage__set_state(st, SHM_STATE_RUNNING);
	log_info("running (generation %u, resume after seq %#llx)",
		 __atomic_load_n(&st->generation, __ATOMIC_RELAXED),
		 (unsigned long long)shm_ring__mark_sc(&in));

	while (!symd_term) {
		uint64_t now;
		int n;

		if (!draining && shm_stage__cmd(st) == SHM_CMD_DRAIN) {
			draining = true;
			shm_stage__set_state(st, SHM_STATE_DRAINING);
		}
		n = symd__run_batch(s, SYMD_BATCH);
		if (n < 0) {
			log_error_errno(n, "input ring: %m");
			goto out_fail;
		}
		now = symd_now_ns();
		symd__tick(s, now);
		if (now - last_hb >= SYMD_HEARTBEAT_NS) {
			shm_stage__heartbeat(st);
			last_hb = now;
		}
		if (n > 0)
			continue;
		if (symd__output_held(s)) {
			/* The storer is behind: let it catch up, keep our input. */
			nanosleep(&(struct timespec){.tv_nsec = SYMD_HELD_SLEEP_NS}, NULL);
			continue;
		}
		if (draining) {
			/* Producer gone and input empty: flush and leave. */
			if (shm_ring__pending_sc(&in) == 0)
				break;
			continue;
		}
		/* -ETIMEDOUT / -EINTR just loop: the deadline work and the
		 * SIGTERM check are at the top.
		 * Adaptive deadline: every wakeup costs 40-50 us of CPU on a
		 * small VM, whatever it finds. A deadline that passes with less
		 * than a batch pending (idle, or a low rate) doubles it up to
		 * 1 s: the same records then come in one wakeup instead of
		 * five. A batch's worth (the producer's futex wake) or a kick
		 * (DRAIN) brings it back to 200 ms. */
		r = shm_ring__wait_sc(&in, wake_bytes, wait_ms);
		if (r == -ETIMEDOUT)
			wait_ms = MIN(wait_ms * 2, SYMD_WAIT_MAX_MS);
		else if (r == 0)
			wait_ms = SYMD_WAIT_MIN_MS;
		shm_stage__cnt_add(st, SHM_CNT_WAKEUPS, 1);
	}

	/* SIGTERM or drained: everything passed on is committed and released
	 * (run_batch does both per batch); flush our own loss report. */
	symd__finish(s);
	log_info("%s", symd_term ? "terminated" : "drained");
	symd__free(s);
	shm_stage__set_state(st, SHM_STATE_EXITED);
	shm_arena__free(a);
	return 0;

out_fail:
	symd__free(s);
	shm_stage__set_state(st, SHM_STATE_FAILED);
	shm_arena__free(a);
	return 1;
}
