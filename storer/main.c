// SPDX-License-Identifier: MIT
/*
 * storer: the last stage. Consumes SHM_RING_SYMD, writes the store with
 * io_uring + zstd. Lifecycle per docs/pipeline.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "storer.h"

#define NS 1000000000ULL
#ifndef SHM_ARENA_FD
#define SHM_ARENA_FD 3 /* docs/pipeline.md; not (yet) in shm/arena.h */
#endif

static volatile sig_atomic_t got_term;

static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

static int run(struct shm_arena *a)
{
	struct cpa_config *cfg = shm_arena__config(a);
	struct shm_stage *st = shm_arena__stage(a, SHM_STAGE_STORER);
	struct store_writer_opts o = {0};
	struct store_writer *w = NULL;
	struct shm_ring_cons in;
	struct storer s;
	bool draining = false;
	uint64_t last_hb = 0;
	int r;

	r = shm_arena__open_cons(a, SHM_RING_SYMD, &in);
	if (r < 0)
		return log_error_errno(r, "open input ring %d: %m", SHM_RING_SYMD);
	o.root = cfg->store_dir[0] ? cfg->store_dir : "/var/log/cpa";
	o.cpu_num = cfg->nr_cpus;
	o.freq = cfg->freq;
	o.record_interval = cfg->record_interval_s ? cfg->record_interval_s : 1;
	o.persistent_day = cfg->persistent_day;
	o.stack_size = cfg->stack_size;
	o.kernel_stack = cfg->flags & CPA_CFG_KERNEL_STACK_ONLY;
	o.record_env_name = cfg->record_env_name;
	o.max_store_bytes = (uint64_t)cfg->max_store_size_mb << 20;
	r = store_writer__new(&o, &w);
	if (r < 0)
		return log_error_errno(r, "store writer for '%s' (io_uring + zstd): %m", o.root);
	store_writer__set_run_id(w, cfg->start_realtime_ns);
	r = store_writer__journal_open(w, o.root);
	if (r < 0)
		log_warn_errno(
			r, "dictionary journal in '%s': %m (a restart will show [unknown stack])",
			o.root);
	else if (r > 0)
		log_info("replayed %d symd definitions from the dictionary journal", r);
	storer__init(&s, st, &in, w);
	log_info("writing to '%s', resuming after seq %llu", o.root,
		 (unsigned long long)s.resume_mark);

	shm_stage__set_state(st, SHM_STATE_RUNNING);
	for (;;) {
		uint64_t mono = clock_ns(CLOCK_MONOTONIC), real;
		int n;

		if (mono - last_hb >= NS / 4) {
			shm_stage__heartbeat(st);
			last_hb = mono;
		}
		if (!draining && shm_stage__cmd(st) == SHM_CMD_DRAIN) {
			draining = true;
			shm_stage__set_state(st, SHM_STATE_DRAINING);
		}
		n = storer__batch(&s, STORER_BATCH);
		if (n < 0) {
			log_error_errno(n, "input ring is corrupt: %m");
			storer__finish(&s, true);
			store_writer__free(w);
			shm_stage__set_state(st, SHM_STATE_FAILED);
			return n;
		}
		real = clock_ns(CLOCK_REALTIME);
		storer__tick(&s, real);
		if (got_term)
			break;
		if (n == 0) {
			if (draining)
				break;
			r = shm_ring__wait_sc(&in, storer__wake_bytes(&s),
					      storer__sleep_ms(&s, real));
			shm_stage__cnt_add(st, SHM_CNT_WAKEUPS, 1);
			if (r == -EBADMSG) {
				log_error("input ring is corrupt");
				break;
			}
		}
	}
	/* Drain: the last block is fsynced. SIGTERM (restart): written, not synced. */
	storer__finish(&s, draining || !got_term);
	store_writer__free(w);
	log_info("%s", got_term ? "terminated" : "drained");
	shm_stage__set_state(st, SHM_STATE_EXITED);
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_term};
	struct shm_arena *a = NULL;
	int i, r;

	log_set_subsystem("storer");
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v"))
			log_set_level(LOG_LVL_DEBUG);
	}
	if (fcntl(SHM_ARENA_FD, F_GETFD) < 0) {
		fprintf(stderr, "no arena on fd 3: run me from `cpa monitor`\n");
		return 2;
	}
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGINT, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	r = shm_arena__attach(SHM_ARENA_FD, &a);
	if (r < 0) {
		log_error_errno(r, "attach arena on fd 3: %m");
		return 2;
	}
	r = run(a);
	shm_arena__free(a);
	return r < 0 ? 1 : 0;
}
