// SPDX-License-Identifier: MIT
/* The stage lifecycle of docs/pipeline.md, once for every stage. */
#include "stage_loop.h"

#include <errno.h>

#include "common/macro.h"
#include "common/timeutil.h"
#include "counters.h"

int shm_stage__attach(int fd, enum shm_stage_id id, struct shm_arena **ret_arena,
		      struct shm_stage **ret_st)
{
	struct shm_arena *a = NULL;
	struct cpa_config *cfg;
	struct shm_stage *st;
	int r;

	r = shm_arena__attach(fd, &a);
	if (r < 0)
		return r;
	cfg = shm_arena__config(a);
	st = shm_arena__stage(a, id);
	if (!cfg || !st || cfg->magic != CPA_CONFIG_MAGIC || cfg->version != CPA_CONFIG_VERSION) {
		shm_arena__free(a);
		return -EPROTO;
	}
	*ret_arena = a;
	*ret_st = st;
	return 0;
}

void shm_stage__exit(struct shm_stage *st, int r)
{
	shm_stage__heartbeat(st);
	shm_stage__set_state(st, r < 0 ? SHM_STATE_FAILED : SHM_STATE_EXITED);
}

static void sleep_ms(int ms)
{
	struct timespec ts = ns_to_timespec((uint64_t)ms * NSEC_PER_MSEC);

	nanosleep(&ts, NULL);
}

int shm_stage__run(struct shm_stage_loop *l)
{
	uint64_t last_hb = 0, wake_cap = l->wake_bytes;
	int wait_ms = l->wait_ms;
	bool waited = false;

	if (l->wake_ring_div)
		wake_cap = MIN(wake_cap, l->in->size / l->wake_ring_div);
	shm_stage__heartbeat(l->st);
	shm_stage__set_state(l->st, SHM_STATE_RUNNING);
	while (!*l->term) {
		uint64_t mono = clock_ns(CLOCK_MONOTONIC), now, wake_bytes = wake_cap;
		int n, r;

		if (mono - last_hb >= l->heartbeat_ns) {
			shm_stage__heartbeat(l->st);
			last_hb = mono;
		}
		if (!l->draining && shm_stage__cmd(l->st) == SHM_CMD_DRAIN) {
			/* Our producer is gone: finish what it left, then leave. */
			l->draining = true;
			shm_stage__set_state(l->st, SHM_STATE_DRAINING);
			if (l->on_drain)
				l->on_drain(l->obj);
		}

		n = l->batch(l->obj, l->batch_max);
		if (n < 0 && n != -ENOBUFS)
			return n;
		now = l->clock == CLOCK_MONOTONIC ? clock_ns(CLOCK_MONOTONIC) : clock_ns(l->clock);
		l->tick(l->obj, now);
		if (n == -ENOBUFS) {
			/* The next stage is behind: let it catch up, keep our input. */
			sleep_ms(l->busy_ms);
			continue;
		}
		if (n > 0) {
			if (l->backoff == SHM_WAIT_BACKOFF_EMPTY)
				wait_ms = l->wait_ms; /* data flows: back to the short deadline */
			waited = false;
			continue;
		}
		if (l->draining) {
			/* Producer gone and input empty: leave. */
			if (!l->drain_until_empty || shm_ring__pending_sc(l->in) == 0)
				break;
			continue;
		}
		if (*l->term)
			break;
		if (l->wait_for)
			l->wait_for(l->obj, now, &wake_bytes, &wait_ms);
		else if (l->backoff == SHM_WAIT_BACKOFF_EMPTY && waited)
			wait_ms = MIN(wait_ms * 2,
				      l->wait_idle_ms); /* the last wait brought nothing */
		r = shm_ring__wait_sc(l->in, wake_bytes, wait_ms);
		waited = true;
		shm_stage__cnt_add(l->st, SHM_CNT_WAKEUPS, 1);
		if (r == -EBADMSG)
			return r;
		if (!l->wait_for && l->backoff == SHM_WAIT_BACKOFF_TIMEOUT) {
			if (r == -ETIMEDOUT)
				wait_ms = MIN(wait_ms * 2, l->wait_idle_ms);
			else if (r == 0)
				wait_ms = l->wait_ms;
		}
		/* woken, timed out or interrupted: all mean "look again" */
	}
	return 0;
}
