// SPDX-License-Identifier: MIT
/* The stage lifecycle of docs/pipeline.md, once for every stage. */
#include "stage_loop.h"

#include <errno.h>
#include <signal.h>
#include <unistd.h>

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

/* The upstream stage will write no more: it left, or its process is gone. */
static bool upstream_done(const struct shm_stage *up)
{
	enum shm_stage_state s = shm_stage__state(up);
	int32_t pid = __atomic_load_n(&up->pid, __ATOMIC_RELAXED);

	return s == SHM_STATE_EXITED || s == SHM_STATE_FAILED || s == SHM_STATE_NONE || pid <= 0 ||
	       (kill(pid, 0) < 0 && errno == ESRCH);
}

/* SIGTERM came: an orphan drain when our parent (the monitor) is gone. */
static bool orphan_begin(struct shm_stage_loop *l, pid_t parent, uint64_t mono,
			 uint64_t *ret_deadline)
{
	if (!l->up || l->orphaned || getppid() == parent)
		return false;
	l->orphaned = true;
	*ret_deadline = mono + SHM_ORPHAN_DRAIN_NS;
	if (!l->draining) {
		l->draining = true;
		shm_stage__set_state(l->st, SHM_STATE_DRAINING);
		if (l->on_drain)
			l->on_drain(l->obj);
	}
	return true;
}

/* How a loop that saw SIGTERM ends. */
static enum shm_stage_end term_end(const struct shm_stage_loop *l, pid_t parent)
{
	return l->orphaned || l->draining || getppid() != parent ? SHM_END_ORPHAN : SHM_END_TERM;
}

/* Loss aggregates the stage still has to send (its row's loss_pending gauge):
 * its tick retries them, so its wait keeps a deadline. */
static bool loss_pending(const struct shm_stage *st)
{
	uint32_t id = __atomic_load_n(&st->id, __ATOMIC_RELAXED);
	unsigned int g = id < SHM_STAGE_MAX ? shm_stages[id].loss_pending : 0;

	return g && shm_stage__cnt(st, g);
}

/*
 * The input wait. SHM_SLOT_ASLEEP says "asleep, no heartbeat needed" for
 * its length; the stamp after it comes before the flag is cleared, so the
 * supervisor never sees a cleared flag with the old stamp.
 */
static int input_wait(struct shm_stage_loop *l, uint64_t wake_bytes, int timeout_ms)
{
	int r;

	shm_stage__cnt_set(l->st, SHM_SLOT_ASLEEP, 1);
	r = shm_ring__wait_sc(l->in, wake_bytes, timeout_ms);
	shm_stage__heartbeat(l->st);
	shm_stage__cnt_set(l->st, SHM_SLOT_ASLEEP, 0);
	shm_stage__cnt_add(l->st, SHM_CNT_WAKEUPS, 1);
	return r;
}

int shm_stage__run(struct shm_stage_loop *l)
{
	uint64_t last_hb = 0, wake_cap = l->wake_bytes, orphan_deadline = 0;
	int wait_ms = l->wait_ms, timeout, waited_ms = 0;
	/* Records taken since the last wait, and when that wait began: their
	 * rate sizes the next deadline (wait_small_ms). */
	uint64_t cycle_recs = 0, slept_ns = clock_ns(CLOCK_MONOTONIC);
	bool waited = false, idle = false, stamped = false;
	pid_t parent = getppid();

	if (l->wake_ring_div && l->in)
		wake_cap = MIN(wake_cap, l->in->size / l->wake_ring_div);
	shm_stage__heartbeat(l->st);
	shm_stage__set_state(l->st, SHM_STATE_RUNNING);
	for (;;) {
		uint64_t mono = clock_ns(CLOCK_MONOTONIC), now, wake_bytes = wake_cap;
		int n, r;

		if (*l->term && !l->orphaned && !orphan_begin(l, parent, mono, &orphan_deadline)) {
			l->end = term_end(l, parent);
			break;
		}
		if (l->orphaned && mono >= orphan_deadline) {
			l->end = SHM_END_ORPHAN;
			break;
		}
		if (shm_stage__cmd(l->st) == SHM_CMD_STOP) {
			/* A producer asked to stop: its finish drains what it holds. */
			l->end = SHM_END_STOPPED;
			break;
		}

		if (stamped || mono - last_hb >= l->heartbeat_ns) {
			if (!stamped)
				shm_stage__heartbeat(l->st);
			last_hb = mono;
			stamped = false;
		}
		if (!l->draining && shm_stage__cmd(l->st) == SHM_CMD_DRAIN) {
			/* Our producer is gone: finish what it left, then leave. */
			l->draining = true;
			shm_stage__set_state(l->st, SHM_STATE_DRAINING);
			if (l->on_drain)
				l->on_drain(l->obj);
		}

		if (l->poll) {
			/* The poll was the wait; the loop's head decides the rest. */
			n = l->poll(l->obj);
			if (n < 0 && n != -EINTR)
				return n;
			r = l->tick(l->obj, clock_ns(l->clock));
			if (r < 0)
				return r;
			continue;
		}
		n = l->batch(l->obj, l->batch_max);
		if (n < 0 && n != -ENOBUFS)
			return n;
		now = l->clock == CLOCK_MONOTONIC ? clock_ns(CLOCK_MONOTONIC) : clock_ns(l->clock);
		r = l->tick(l->obj, now);
		if (r < 0)
			return r;
		if (n == -ENOBUFS) {
			/* The next stage is behind: let it catch up, keep our input. */
			sleep_ms(l->busy_ms);
			continue;
		}
		if (n > 0) {
			cycle_recs += (uint64_t)n;
			if (l->backoff == SHM_WAIT_BACKOFF_EMPTY)
				wait_ms = l->wait_ms; /* data flows: back to the short deadline */
			waited = idle = false;
			continue;
		}
		if (l->orphaned) {
			/* Leave once the upstream stage has left and its output is in. */
			if (upstream_done(l->up) && shm_ring__pending_sc(l->in) == 0) {
				l->end = SHM_END_ORPHAN;
				break;
			}
			sleep_ms(10);
			continue;
		}
		if (l->draining) {
			/* Producer gone and input empty: leave. */
			if (!l->drain_until_empty || shm_ring__pending_sc(l->in) == 0) {
				l->end = SHM_END_DRAINED;
				break;
			}
			continue;
		}
		if (*l->term)
			continue; /* the loop's head decides */
		if (l->wait_for) {
			l->wait_for(l->obj, now, &wake_bytes, &wait_ms);
		} else if (l->backoff == SHM_WAIT_BACKOFF_EMPTY && waited) {
			/* the last wait brought nothing */
			idle = idle || wait_ms >= l->wait_idle_ms || waited_ms >= l->wait_idle_ms;
			wait_ms = MIN(wait_ms * 2, l->wait_idle_ms);
		}
		timeout = wait_ms;
		if (!l->wait_for && l->wait_small_ms && timeout < l->wait_small_ms &&
		    cycle_recs * SHM_BATCH_MS <
			    SHM_BATCH_SMALL_RECS * ((mono - slept_ns) / NSEC_PER_MSEC + 1) &&
		    !loss_pending(l->st))
			timeout = l->wait_small_ms; /* a stretched batch: little flows */
		if (!l->wait_for && idle && l->idle_no_deadline && !loss_pending(l->st))
			timeout = -1; /* nothing due before input comes */
		if (l->wait_cap_ms && (timeout < 0 || timeout > l->wait_cap_ms))
			timeout = l->wait_cap_ms;
		if (l->wake_next && l->next)
			shm_ring__flush_sp(l->next);
		slept_ns = mono;
		r = input_wait(l, wake_bytes, timeout);
		waited = stamped = true;
		waited_ms = timeout;
		cycle_recs = 0;
		if (r == -EBADMSG)
			return r;
		if (!l->wait_for && l->backoff == SHM_WAIT_BACKOFF_TIMEOUT) {
			if (r == -ETIMEDOUT) {
				idle = idle || wait_ms >= l->wait_idle_ms ||
				       timeout >= l->wait_idle_ms;
				wait_ms = MIN(wait_ms * 2, l->wait_idle_ms);
			} else if (r == 0) {
				wait_ms = l->wait_ms;
				idle = false;
			}
		}
		/* woken, timed out or interrupted: all mean "look again" */
	}
	return 0;
}
