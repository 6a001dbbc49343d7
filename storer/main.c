// SPDX-License-Identifier: MIT
/*
 * storer: the last stage. Consumes SHM_RING_SYMD, writes the store with
 * io_uring + zstd. The process and its loop are common/daemon.h and
 * shm/stage_loop.h (docs/pipeline.md); this is the table of its hooks.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/daemon.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "storer.h"

#define HEARTBEAT_NS (NSEC_PER_SEC / 4)

struct stage {
	struct store_writer *w;
	struct storer *s;
};

static void stage_free(void *obj)
{
	struct stage *x = obj;

	if (!x)
		return;
	storer__free(x->s);
	store_writer__free(x->w);
	free(x);
}

static int stage_new(struct shm_arena *a, struct shm_stage *st, struct shm_ring_cons *in,
		     struct shm_ring_prod *out, void **ret)
{
	struct cpa_config *cfg = shm_arena__config(a);
	struct store_writer_opts o = {0};
	struct stage *x;
	int r;

	(void)out;
	x = calloc(1, sizeof(*x));
	if (!x)
		return log_error_errno(-ENOMEM, "set up: %m");
	o.root = cfg->store_dir[0] ? cfg->store_dir : "/var/log/cpa";
	o.cpu_num = cfg->nr_cpus;
	o.freq = cfg->freq;
	o.record_interval = cfg->record_interval_s ? cfg->record_interval_s : 1;
	o.persistent_day = cfg->persistent_day;
	o.stack_size = cfg->stack_size;
	o.kernel_stack = cfg->flags & CPA_CFG_KERNEL_STACK_ONLY;
	o.record_env_name = cfg->record_env_name;
	for (uint32_t i = 0; i < cfg->nr_probes && i < STORE_PROBES_MAX; i++)
		o.probes[o.nr_probes++] = cfg->probes[i];
	o.max_store_bytes = (uint64_t)cfg->max_store_size_mb << 20;
	r = store_writer__new(&o, &x->w);
	if (r == -EBUSY) {
		int pid = 0;
		int fd = store_root__lock(o.root, &pid);

		if (fd >= 0)
			close(fd);
		stage_free(x);
		return log_error_errno(
			r,
			"store '%s' is in use by another cpa monitor (storer pid %d): "
			"one monitor per store dir, use another --store_dir",
			o.root, pid);
	}
	if (r < 0) {
		stage_free(x);
		return log_error_errno(r, "store writer for '%s' (io_uring + zstd): %m", o.root);
	}
	store_writer__set_run_id(x->w, cfg->start_realtime_ns);
	r = store_writer__journal_open(x->w, o.root);
	if (r < 0)
		log_warn_errno(
			r, "dictionary journal in '%s': %m (a restart will show [unknown stack])",
			o.root);
	else if (r > 0)
		log_info("replayed %d symd definitions from the dictionary journal", r);
	r = storer__new(st, in, x->w, &x->s);
	if (r < 0) {
		stage_free(x);
		return log_error_errno(r, "set up: %m");
	}
	log_info("writing to '%s', resuming after seq %llu", o.root,
		 (unsigned long long)storer__resume_seq(x->s));
	*ret = x;
	return 0;
}

static int stage_batch(void *obj, unsigned int max)
{
	return storer__batch(((struct stage *)obj)->s, max);
}

static void stage_tick(void *obj, uint64_t now_ns)
{
	(void)storer__tick(((struct stage *)obj)->s, now_ns);
}

/* The writer decides: wake on STORER_WAKE_BYTES of new input, sleep until
 * the open block is due (at most STORER_IDLE_MS). */
static void stage_wait_for(void *obj, uint64_t now_ns, uint64_t *ret_wake_bytes, int *ret_ms)
{
	struct storer *s = ((struct stage *)obj)->s;

	*ret_wake_bytes = storer__wake_bytes(s);
	*ret_ms = storer__sleep_ms(s, now_ns);
}

static void stage_finish(void *obj, int r, bool draining, bool terminated)
{
	/* Drain: the last block is fsynced. SIGTERM (restart): written, not
	 * synced. A corrupt input: what we have is synced. */
	(void)storer__finish(((struct stage *)obj)->s, r < 0 || draining || !terminated);
}

int main(int argc, char **argv)
{
	static const struct daemon_stage d = {
		.name = "storer",
		.id = SHM_STAGE_STORER,
		.in_ring = SHM_RING_SYMD,
		.out_ring = -1,
		.new = stage_new,
		.finish = stage_finish,
		.free = stage_free,
		.loop.batch = stage_batch,
		.loop.tick = stage_tick,
		.loop.wait_for = stage_wait_for,
		.loop.clock = CLOCK_REALTIME, /* block deadlines are sample time */
		.loop.batch_max = STORER_BATCH,
		.loop.heartbeat_ns = HEARTBEAT_NS,
	};

	return daemon__main(&d, argc, argv);
}
