// SPDX-License-Identifier: MIT
#include "capture.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "cap_bpf.h"
#include "cap_emit.h"
#include "cap_mmapev.h"
#include "cap_python.h"
#include "cap_pyname.h"
#include "cap_perf.h"
#include "cap_policy.h"
#include "cap_sched.h"
#include "cap_sys.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "shm/counters.h"
#include "shm/records.h"

#define CAP_STOP_LOSS_WAIT_NS  (NSEC_PER_SEC) /* graceful stop: wait for room for LOSS records */
#define CAP_STOP_RETRY_NS      (10 * 1000 * 1000)  /* ... re-trying every 10 ms */
#define CAP_OFFCPU_RINGBUF     (16u << 20)	   /* BPF ring buffer floor with --offcpu */
#define CAP_OFFCPU_THREADS     16384		   /* (thread, place) stash entries at once */
#define CAP_OFFCPU_TICK_LAG_NS (2 * NSEC_PER_MSEC) /* tick this long after a wall second */
#define CAP_TICK_RINGBUF_MAX   (2u << 20) /* BPF ring buffer grown for one wakeup a second */
/* The longest metrics interval on an idle host (docs/metrics.md, "Idle host"):
 * under the supervisor's stop timeout (5 s), which a STOP that comes during
 * the sleep must not outlast should its nudge (SIGURG) be missed. */
#define CAP_IDLE_TICK_MAX_NS (4 * NSEC_PER_SEC)
/* ... while at most this many samples a second fire (idle_next()). */
#define CAP_IDLE_SAMPLES_PER_S 1

struct capture {
	const volatile sig_atomic_t *term; /* SIGTERM seen */
	struct cpa_config *cfg;
	struct shm_stage *st;
	struct shm_ring_prod *ring; /* ring 0 */
	struct shm_ring_cons hints; /* unwindd's copy size hints (SHM_RING_HINT) */
	bool have_hints;
	uint32_t stack_start, stack_cap; /* the adaptive copy's bounds (docs/capture.md) */
	struct cap_emit emit;
	struct cap_bpf *bpf;		      /* the BPF backend ... */
	struct cap_perf *perf;		      /* ... or the perf_event-only one */
	struct cap_mmapev *mmapev;	      /* the mapping history (cap_mmapev.h) */
	struct cap_python *python;	      /* Python processes for BPF (cap_python.h) */
	struct cap_pyname *pyname;	      /* Python code objects sent (cap_pyname.h) */
	struct cap_sched *sched;	      /* scheduler metrics (docs/metrics.md) */
	struct cap_policy *policy;	      /* --policy: trigger policies (docs/metrics.md) */
	uint64_t bpf_stats[CPA_BPF_STAT_MAX]; /* totals as last read */
	struct probe_spec probes[CPA_PROBE_MAX];
	uint64_t probe_stats[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX]; /* totals as last read */
	uint64_t probe_read_ns; /* CLOCK_MONOTONIC of that read (the budget's window) */
	struct cpa_metrics_ent probe_ents[CPA_BPF_PROBE_MAX]; /* this second's costs (kind probe) */
	unsigned int n_probe_ents;
	uint64_t probe_real_ns;	 /* CLOCK_REALTIME of the read before: the second's start */
	uint32_t probes_refused; /* probes left out whose [lost: probe_refused] row went */
	char pin_path[96];	 /* the stats map pinned for the next generation ("" = none) */
	uint64_t down_since_ns;	 /* kernel MONOTONIC: a killed generation's estimated end */
	uint64_t down_rate;	 /* ... and its samples per second then (0: no estimate) */
	uint64_t next_tick_ns;	 /* CLOCK_MONOTONIC of the next second's work */
	/* The metrics interval: a second, longer on an idle host (idle_next());
	 * samples taken or filtered (PRODUCED + FILTERED) at the last tick; when
	 * the stats were last read (CLOCK_MONOTONIC). */
	uint64_t tick_len_ns, active_mark, stats_ns, tick_at_ns;
	/* The poll's sleep: the BPF ring buffer's epoll and the mapping
	 * history's rings (their half-full wakeup); -1: the former alone. */
	int epfd;
	/* The poll's deadline (cap_poll_next_ms()): the last poll's result,
	 * the deadline, and when the last deadline was set, ring 0 flushed and
	 * the tick ran (CLOCK_MONOTONIC); the records out (SHM_CNT_OUT) at
	 * that flush. wait_ms: the deadline the next poll waits for, poll_ms or
	 * less while Python code objects are being named (cap_pyname__soon():
	 * not kept, so that the polls go back to poll_ms at once after it). */
	int polled, poll_ms, wait_ms;
	uint64_t poll_last, flushed, now, flushed_recs;
	unsigned int cpus[CAP_MAX_CPUS];
	unsigned int nr_cpus;
};

static int config_check(const struct cpa_config *cfg)
{
	if ((cfg->flags & CPA_CFG_OFFCPU) && cfg->backend == CPA_BACKEND_PERF)
		return log_error_errno(-EOPNOTSUPP,
				       "off-CPU sampling (--offcpu) needs the BPF backend");
	if ((cfg->flags & CPA_CFG_OFFCPU) && !(cfg->offcpu_states & CPA_OFFCPU_STATE_ALL))
		return log_error_errno(-EINVAL, "off-CPU sampling with no state to record");
	if (cfg->nr_probes > CPA_PROBE_MAX)
		return log_error_errno(-EINVAL, "%u probes, at most %d", cfg->nr_probes,
				       CPA_PROBE_MAX);
	if (cfg->nr_probes > 0 && cfg->backend != CPA_BACKEND_BPF)
		return log_error_errno(-EOPNOTSUPP, "probes (--probe) need the BPF backend");
	for (unsigned int i = 0; i < cfg->nr_probes; i++)
		if (memchr(cfg->probes[i], '\0', sizeof(cfg->probes[i])) == NULL)
			return log_error_errno(-EINVAL, "probe %u not NUL-terminated", i);
	if (cfg->backend != CPA_BACKEND_BPF && cfg->backend != CPA_BACKEND_PERF)
		return log_error_errno(-EINVAL, "unknown backend %u", cfg->backend);
	if (cfg->freq == 0 || cfg->freq > 100000)
		return log_error_errno(-EINVAL, "freq %u Hz out of range 1..100000", cfg->freq);
	if (cfg->stack_size > CPA_MAX_STACK_COPY)
		return log_error_errno(-EINVAL, "stack_size %u above %u", cfg->stack_size,
				       CPA_MAX_STACK_COPY);
	if (memchr(cfg->comm, '\0', sizeof(cfg->comm)) == NULL)
		return log_error_errno(-EINVAL, "comm filter not NUL-terminated");
	return 0;
}

/* The user stack copy as this kernel and this config allow it. */
static uint32_t ustack_size(const struct cpa_config *cfg, bool *ret_refused)
{
	struct utsname u;

	*ret_refused = false;
	if ((cfg->flags & CPA_CFG_KERNEL_STACK_ONLY) || cfg->stack_size == 0)
		return 0;
	if (uname(&u) == 0 && cap_sys_ustack_copy_unsafe(u.release)) {
		if (cfg->flags & CPA_CFG_FORCE_USTACK) {
			log_warn(
				"kernel %s may deadlock on NMI user reads (5.19-6.3); copying user "
				"stacks anyway as forced",
				u.release);
			return cfg->stack_size;
		}
		log_warn("kernel %s may deadlock on NMI user reads (5.19-6.3): user stack copies "
			 "refused, FP stacks only (override: force user stacks)",
			 u.release);
		*ret_refused = true;
		return 0;
	}
	return cfg->stack_size;
}

static uint32_t target_tgid(const struct cpa_config *cfg)
{
	int tgid;

	if (cfg->target_pid <= 0)
		return 0;
	/* --pid may name any thread; the filter works on processes. */
	tgid = cap_sys_tgid_of(cfg->target_pid);
	if (tgid < 0) {
		log_warn_errno(tgid, "pid %d: %m; filtering on it as a process id",
			       cfg->target_pid);
		return (uint32_t)cfg->target_pid;
	}
	if (tgid != cfg->target_pid)
		log_info("pid %d is a thread of process %d: sampling the process", cfg->target_pid,
			 tgid);
	return (uint32_t)tgid;
}

/*
 * cap_pyname's reads past their base budget (cap_pyname.h): while the BPF
 * ring buffer is at most 1/CAP_PYNAME_ROOM_DIV full, so a read (~10 us)
 * cannot make it lose samples, and ring 0 at least half free, so the
 * records do not push samples into degradation.
 */
#define CAP_PYNAME_ROOM_DIV 16
static bool pyname_room(void *ctx)
{
	struct capture *c = ctx;
	uint64_t size, unread = cap_bpf__rb_unread(c->bpf, &size);

	return unread <= size / CAP_PYNAME_ROOM_DIV &&
	       shm_ring__free_bytes_sp(c->ring) >= c->ring->size / 2;
}

static int on_record(void *ctx, const void *data, size_t size)
{
	struct capture *c = ctx;
	const struct cpa_bpf_task *t = data;

	/* A Python sample's code objects, named while the process lives
	 * (cap_pyname.h): the records go right before the sample. */
	if (size >= sizeof(struct cpa_bpf_sample) && t->type == CPA_BPF_REC_SAMPLE) {
		if (((const struct cpa_bpf_sample *)data)->py_n)
			cap_pyname__sample(c->pyname, &c->emit, data, size);
	} else if (size >= sizeof(struct cpa_bpf_offcpu) && t->type == CPA_BPF_REC_OFFCPU) {
		cap_pyname__sample(c->pyname, &c->emit, &((const struct cpa_bpf_offcpu *)data)->s,
				   size - offsetof(struct cpa_bpf_offcpu, s));
	} else if (size >= sizeof(*t) && t->type == CPA_BPF_REC_TASK) {
		/* A gone process's learned copy size goes with it (pids are reused). */
		if (c->bpf && t->kind == CPA_BPF_TASK_EXIT)
			cap_bpf__ustack_set(c->bpf, t->pid, 0);
		cap_pyname__drop_pid(c->pyname, t->pid);
	}
	return cap_emit__record(&c->emit, data, size);
}

/*
 * unwindd's hints: how many stack bytes each process's walks need. Applied
 * once per tick, into the BPF map the sampler reads (the perf backend has a
 * fixed copy: hints are consumed and dropped).
 */
static void hints_apply(struct capture *c)
{
	struct shm_msg m;
	unsigned int n = 0;

	if (!c->have_hints)
		return;
	while (shm_ring__peek_sc(&c->hints, &m) == 0) {
		const struct cpa_ustack_hint *h = m.data;
		uint32_t bytes;

		n++;
		if (m.type != CPA_REC_USTACK_HINT || m.len < sizeof(*h) || !c->bpf)
			continue;
		bytes = h->bytes ? MIN(MAX(h->bytes, CPA_USTACK_HINT_MIN), c->stack_cap) : 0;
		if (cap_bpf__ustack_set(c->bpf, h->pid, bytes) < 0)
			shm_stage__cnt_add(c->st, SHM_CNT_ERRORS, 1);
		else
			shm_stage__cnt_add(c->st, CAP_CNT_USTACK_HINTS, 1);
	}
	if (n)
		shm_ring__release_sc(&c->hints);
}

static int backend_poll(struct capture *c, int timeout_ms)
{
	return c->perf ? cap_perf__poll(c->perf, timeout_ms) : cap_bpf__poll(c->bpf, timeout_ms);
}

static void backend_detach(struct capture *c)
{
	if (c->perf)
		cap_perf__detach(c->perf);
	else
		cap_bpf__detach(c->bpf);
}

static int backend_stats(struct capture *c, uint64_t ret[CPA_BPF_STAT_MAX])
{
	return c->perf ? cap_perf__read_stats(c->perf, ret) : cap_bpf__read_stats(c->bpf, ret);
}

static void backend_free(struct capture *c)
{
	cap_mmapev__set_python(c->mmapev, NULL);
	cap_python__free(c->python);
	cap_pyname__free(c->pyname);
	c->pyname = NULL;
	c->python = NULL;
	cap_perf__free(c->perf);
	cap_bpf__free(c->bpf);
	c->perf = NULL;
	c->bpf = NULL;
}

/* Probe hits over --probe_rate: a counter and a LOSS record of kind PROBE;
 * the probe budget (cap_bpf__probe_budget()) and what detached probes miss
 * (end: capture stops). */
static void probe_stats_sync(struct capture *c, bool end)
{
	uint64_t now[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX], d, skipped = 0, lost = 0;
	uint32_t detached;
	uint64_t t = clock_ns(CLOCK_REALTIME), mono = clock_ns(CLOCK_MONOTONIC);
	uint64_t win = c->probe_read_ns ? mono - c->probe_read_ns : 0;

	if (!c->cfg->nr_probes || !c->bpf)
		return;
	/* A probe left out: one row, so that `cpa show --probe_id N` says why
	 * it has no samples (how many it would have taken is unknown). */
	for (unsigned int i = 0; i < c->cfg->nr_probes; i++) {
		uint32_t bit = 1u << i;

		if (!(cap_bpf__probes_refused(c->bpf) & bit & ~c->probes_refused))
			continue;
		c->probes_refused |= bit;
		cap_emit__loss_add(&c->emit, (enum cap_loss_slot)(CAP_LOSS_PROBE_REF + i), 1, t);
		shm_stage__cnt_add(c->st, CAP_CNT_PROBE_REFUSED, 1);
	}
	if (cap_bpf__read_probe_stats(c->bpf, now) < 0) {
		shm_stage__cnt_add(c->st, SHM_CNT_ERRORS, 1);
		return;
	}
	c->probe_read_ns = mono;
	detached = cap_bpf__probe_budget(c->bpf, now, c->probe_stats, win);
	c->n_probe_ents = 0;
	for (unsigned int i = 0; i < c->cfg->nr_probes && win; i++) {
		struct cpa_metrics_ent *pe = &c->probe_ents[c->n_probe_ents++];

		memset(pe, 0, sizeof(*pe));
		pe->kind = CPA_MK_PROBE;
		pe->id = i;
		/* the spec's first bytes name the probe in `cpa show --sched` */
		snprintf(pe->comm, sizeof(pe->comm), "%.*s", (int)sizeof(pe->comm) - 1,
			 c->cfg->probes[i]);
		pe->runq_n = now[i][CPA_BPF_PSTAT_RUNS] - c->probe_stats[i][CPA_BPF_PSTAT_RUNS];
		pe->oncpu_ns = pe->runq_n * cap_bpf__probe_trap_ps(c->bpf, i) / 1000;
		pe->runq_ns =
			now[i][CPA_BPF_PSTAT_RUN_NS] - c->probe_stats[i][CPA_BPF_PSTAT_RUN_NS];
	}
	for (unsigned int i = 0; i < c->cfg->nr_probes; i++) {
		/* one detached just now recorded its window: it misses the next ones */
		d = detached & (1u << i) ? 0 : cap_bpf__probe_detached_rate(c->bpf, i);
		d = cap_emit__probe_detached(&c->emit, i, d, win, end, t);
		shm_stage__cnt_add(c->st, CAP_CNT_PROBE_DETACHED, d);
		d = now[i][CPA_BPF_PSTAT_SKIPPED] - c->probe_stats[i][CPA_BPF_PSTAT_SKIPPED];
		cap_emit__loss_add(&c->emit, (enum cap_loss_slot)(CAP_LOSS_PROBE_RATE + i), d, t);
		skipped += d;
		d = now[i][CPA_BPF_PSTAT_RB_LOST] - c->probe_stats[i][CPA_BPF_PSTAT_RB_LOST];
		cap_emit__loss_add(&c->emit, (enum cap_loss_slot)(CAP_LOSS_PROBE_RB + i), d, t);
		lost += d;
	}
	memcpy(c->probe_stats, now, sizeof(now));
	shm_stage__cnt_add(c->st, CAP_CNT_PROBE_SKIPPED, skipped);
	shm_stage__cnt_add(c->st, CAP_CNT_BPF_RB_LOST, lost);
}

/* Without scheduler metrics (--sched_metrics=0) the probes' costs go out
 * alone once a second: a metrics record of probe entries, no system part. */
static int probe_metrics_emit(struct capture *c)
{
	uint64_t now = clock_ns(CLOCK_REALTIME), start = c->probe_real_ns;

	c->probe_real_ns = now;
	if (!c->n_probe_ents || !start)
		return 0;
	return cap_sched__emit_ents(&c->emit, start, (uint32_t)((now - start) / NSEC_PER_MSEC),
				    c->probe_ents, c->n_probe_ents);
}

static void probes_log(const struct capture *c)
{
	for (unsigned int i = 0; i < c->cfg->nr_probes && c->bpf; i++)
		if (cap_bpf__probes_refused(c->bpf) & (1u << i))
			log_info("probe %u '%s': left out (not attached)", i, c->cfg->probes[i]);
		else
			log_info("probe %u '%s': %" PRIu64 " hits, %" PRIu64
				 " over --probe_rate or the "
				 "budget, %" PRIu64 " lost (BPF ring buffer full); %" PRIu64
				 " runs: trap %.1f ms, BPF %.1f ms",
				 i, c->cfg->probes[i], c->probe_stats[i][CPA_BPF_PSTAT_HITS],
				 c->probe_stats[i][CPA_BPF_PSTAT_SKIPPED],
				 c->probe_stats[i][CPA_BPF_PSTAT_RB_LOST],
				 c->probe_stats[i][CPA_BPF_PSTAT_RUNS],
				 (double)c->probe_stats[i][CPA_BPF_PSTAT_RUNS] *
					 (double)cap_bpf__probe_trap_ps(c->bpf, i) / 1e9,
				 (double)c->probe_stats[i][CPA_BPF_PSTAT_RUN_NS] / 1e6);
}

/* Fold the BPF side's per-CPU statistics into our counters and losses
 * (end: capture stops). */
static void stats_sync(struct capture *c, bool end)
{
	uint64_t now[CPA_BPF_STAT_MAX], d[CPA_BPF_STAT_MAX];

	if (backend_stats(c, now) < 0) {
		shm_stage__cnt_add(c->st, SHM_CNT_ERRORS, 1);
		return;
	}
	for (unsigned int i = 0; i < CPA_BPF_STAT_MAX; i++) {
		d[i] = now[i] - c->bpf_stats[i];
		c->bpf_stats[i] = now[i];
	}
	shm_stage__cnt_add(c->st, CAP_CNT_BPF_RB_LOST,
			   d[CPA_BPF_STAT_RB_LOST] + d[CPA_BPF_STAT_TASK_LOST]);
	shm_stage__cnt_add(c->st, CAP_CNT_BPF_FILTERED, d[CPA_BPF_STAT_FILTERED]);
	shm_stage__cnt_add(c->st, CAP_CNT_BPF_NO_USTACK, d[CPA_BPF_STAT_NO_USTACK]);
	cap_emit__loss_add(&c->emit, CAP_LOSS_BPF_RB, d[CPA_BPF_STAT_RB_LOST],
			   clock_ns(CLOCK_REALTIME));
	/* Off-CPU spans lost in the kernel: their ns are unknown, counted as 1 each. */
	shm_stage__cnt_add(c->st, CAP_CNT_BPF_RB_LOST, d[CPA_BPF_STAT_OFFCPU_LOST]);
	cap_emit__loss_add(&c->emit, CAP_LOSS_OFF_BPF_RB, d[CPA_BPF_STAT_OFFCPU_LOST],
			   clock_ns(CLOCK_REALTIME));
	shm_stage__cnt_add(c->st, CAP_CNT_OFFCPU_UNTRACKED,
			   d[CPA_BPF_STAT_OFFCPU_NOSTASH] + d[CPA_BPF_STAT_OFFCPU_TORN]);
	shm_stage__cnt_add(c->st, CAP_CNT_OFFCPU_BUILDS, d[CPA_BPF_STAT_OFFCPU_BUILD]);
	shm_stage__cnt_add(c->st, CAP_CNT_PRODUCED, d[CPA_BPF_STAT_PRODUCED]);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_SYNCED, now[CPA_BPF_STAT_PRODUCED]);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_TICK_NS, clock_kernel_ns(CLOCK_MONOTONIC));
	{
		/* Per second, also over a stretched interval (idle_next()). */
		uint64_t mono = clock_ns(CLOCK_MONOTONIC), dt = mono - c->stats_ns;

		shm_stage__cnt_set(c->st, CAP_CNT_GEN_RATE,
				   c->stats_ns && dt > 3 * NSEC_PER_SEC / 2
					   ? d[CPA_BPF_STAT_PRODUCED] * NSEC_PER_SEC / dt
					   : d[CPA_BPF_STAT_PRODUCED]);
		c->stats_ns = mono;
	}
	probe_stats_sync(c, end);
}

/*
 * A killed capture takes its BPF ring buffer, the records it reserved but
 * did not commit and its pending loss aggregates with it. Its BPF "stats"
 * map is pinned in bpffs (CAP_BPFFS), so its successor reads how many
 * samples it produced (CPA_BPF_STAT_PRODUCED), compares that with what it
 * delivered to ring 0 (cap_emit__prev_delivered()) and sends the
 * difference as one LOSS record "lost_with_capture" (docs/reliability.md,
 * "Kills and hangs"). Without bpffs those losses are not counted (warned).
 */
#define CAP_BPFFS "/sys/fs/bpf"

static int bpffs_ready(void)
{
	struct statfs sf;

	if (statfs(CAP_BPFFS, &sf) == 0 && sf.f_type == BPF_FS_MAGIC)
		return 0;
	/* systemd mounts it at boot; without systemd nobody may have. */
	if (mount("bpf", CAP_BPFFS, "bpf", 0, "mode=0700") < 0)
		return -errno;
	log_info("mounted bpffs on " CAP_BPFFS);
	return 0;
}

/* Pins of monitors that are gone (everything killed at once) are removed. */
static void pins_sweep(void)
{
	DIR *d = opendir(CAP_BPFFS);
	struct dirent *de;
	char path[sizeof(CAP_BPFFS) + 256];
	unsigned long long t;
	int pid;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (sscanf(de->d_name, "cpa_%d_%llu_stats", &pid, &t) == 2 && pid > 0 &&
		    kill(pid, 0) < 0 && errno == ESRCH) {
			snprintf(path, sizeof(path), CAP_BPFFS "/%s", de->d_name);
			unlink(path);
		}
	closedir(d);
}

/* Sampling again: the hole since the killed generation's last sample, as
 * samples not taken at the rate it had (an estimate, its own reason). Until
 * its LOSS record is committed, the estimate is in the arena
 * (CAP_CNT_DOWN_PENDING, published by cap_emit__commit()), so a kill before
 * that leaves it to the next generation (down_carry()). */
static void down_mark(struct capture *c)
{
	uint64_t now = clock_kernel_ns(CLOCK_MONOTONIC), est, rate = c->down_rate;

	if (!c->down_rate || now <= c->down_since_ns)
		goto closed;
	est = (now - c->down_since_ns) * c->down_rate / NSEC_PER_SEC;
	c->down_rate = 0;
	if (!est)
		goto closed;
	log_info("no capture ran for %.1f s: about %" PRIu64 " sample(s) not taken, marked as "
		 "not_sampled_while_down",
		 (double)(now - c->down_since_ns) / 1e9, est);
	shm_stage__cnt_add(c->st, CAP_CNT_DOWN_EST, est);
	/* Dated at the start of the hole, where a reader looks for it. */
	cap_emit__loss_add(&c->emit, CAP_LOSS_DOWN, est,
			   clock_ns(CLOCK_REALTIME) - (now - c->down_since_ns));
	shm_stage__cnt_set(c->st, CAP_CNT_DOWN_PENDING_TIME, c->emit.loss[CAP_LOSS_DOWN].time_ns);
	shm_stage__cnt_set(c->st, CAP_CNT_DOWN_PENDING, c->emit.loss[CAP_LOSS_DOWN].count);
	/* Out at once: a kill before our first tick must not take it along. */
	cap_emit__flush_losses(&c->emit, clock_ns(CLOCK_REALTIME), true);
	cap_emit__commit(&c->emit);
closed:
	/* Until our first sync, we sample since now, at that rate if known:
	 * a kill before it leaves the next generation a gap it can estimate. */
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_TICK_NS, now);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_RATE, rate);
	c->down_rate = 0;
	shm_stage__cnt_set(c->st, CAP_CNT_DOWN_RATE, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_DOWN_SINCE_NS, 0);
}

/* Before the fold (its commit publishes our slot): an estimate a killed
 * generation made but never committed goes into our own slot; the gauge
 * keeps it until our commit. */
static void down_carry_pending(struct capture *c)
{
	uint64_t pend = shm_stage__cnt(c->st, CAP_CNT_DOWN_PENDING);

	if (pend)
		cap_emit__loss_add(&c->emit, CAP_LOSS_DOWN, pend,
				   shm_stage__cnt(c->st, CAP_CNT_DOWN_PENDING_TIME));
}

/*
 * After the fold: a gap that a generation killed before its attach did not
 * estimate is still open, from its start: it takes the place of the one the
 * fold found (that generation sampled nothing), else the fold's gap is
 * published as the open one.
 */
static void down_carry(struct capture *c)
{
	if (shm_stage__cnt(c->st, CAP_CNT_DOWN_RATE)) {
		c->down_rate = shm_stage__cnt(c->st, CAP_CNT_DOWN_RATE);
		c->down_since_ns = shm_stage__cnt(c->st, CAP_CNT_DOWN_SINCE_NS);
	} else if (c->down_rate) {
		shm_stage__cnt_set(c->st, CAP_CNT_DOWN_SINCE_NS, c->down_since_ns);
		shm_stage__cnt_set(c->st, CAP_CNT_DOWN_RATE, c->down_rate);
	}
}

static void dead_generation_fold(struct capture *c)
{
	uint64_t now[CPA_BPF_STAT_MAX] = {}, produced, synced, carry, delivered, lost = 0;
	int r;

	r = bpffs_ready();
	if (r < 0) {
		log_warn_errno(r, "no bpffs on " CAP_BPFFS " (%m): samples a killed capture "
				  "had not delivered will not be counted as lost");
		return;
	}
	pins_sweep();
	snprintf(c->pin_path, sizeof(c->pin_path), CAP_BPFFS "/cpa_%d_%" PRIu64 "_stats",
		 (int)getppid(), c->cfg->start_realtime_ns);
	/* Only a pin this arena's capture made: another run's (a test's) is stale. */
	r = shm_stage__cnt(c->st, CAP_CNT_GEN_PINNED) ? cap_bpf__read_pinned_stats(c->pin_path, now)
						      : -ENOENT;
	if (r == -ENOENT)
		unlink(c->pin_path);
	if (r < 0 && r != -ENOENT)
		log_warn_errno(r, "read the previous generation's statistics %s: %m", c->pin_path);
	produced = now[CPA_BPF_STAT_PRODUCED];
	synced = shm_stage__cnt(c->st, CAP_CNT_GEN_SYNCED);
	carry = shm_stage__cnt(c->st, CAP_CNT_GEN_CARRY);
	delivered = cap_emit__prev_delivered(c->st, c->ring->committed);
	if (produced > synced)
		shm_stage__cnt_add(c->st, CAP_CNT_PRODUCED, produced - synced);
	/* Its last sample: its last sync, plus the time what it produced after
	 * that took at its rate (it sampled on while stopped, till the kill). */
	c->down_rate = r >= 0 ? shm_stage__cnt(c->st, CAP_CNT_GEN_RATE) : 0;
	if (c->down_rate)
		c->down_since_ns =
			shm_stage__cnt(c->st, CAP_CNT_GEN_TICK_NS) +
			(produced > synced ? produced - synced : 0) * NSEC_PER_SEC / c->down_rate;
	/* Killed before its first sync with no rate known: its rate over its
	 * life, from its attach (GEN_TICK_NS) to its last poll, at most what
	 * the timers make without probes. */
	if (r >= 0 && !c->down_rate && produced > synced &&
	    shm_stage__cnt(c->st, CAP_CNT_GEN_ALIVE_NS) >
		    shm_stage__cnt(c->st, CAP_CNT_GEN_TICK_NS)) {
		c->down_since_ns = shm_stage__cnt(c->st, CAP_CNT_GEN_ALIVE_NS);
		c->down_rate = (produced - synced) * NSEC_PER_SEC /
			       (c->down_since_ns - shm_stage__cnt(c->st, CAP_CNT_GEN_TICK_NS));
		if (!c->cfg->nr_probes)
			c->down_rate = MIN(c->down_rate, (uint64_t)c->cfg->freq * c->cfg->nr_cpus);
	}
	if (produced + carry > delivered)
		lost = produced + carry - delivered;
	if (r >= 0 && unlink(c->pin_path) < 0)
		log_warn_errno(-errno, "unlink %s: %m", c->pin_path);
	/* This generation's own gauges from here on. */
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_ACCT_HEAD, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_ACCT_NEXT, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_ACCT_DONE, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_SYNCED, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_RATE, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_ALIVE_NS, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_PINNED, 0);
	shm_stage__cnt_set(c->st, CAP_CNT_GEN_CARRY, lost);
	if (!lost)
		return;
	log_warn("the previous capture (generation %u) died with %" PRIu64
		 " sample(s) it produced and never delivered: counted as lost "
		 "(lost_with_capture)",
		 c->st->generation - 1, lost);
	shm_stage__cnt_add(c->st, CAP_CNT_LOST_DIED, lost);
	cap_emit__loss_add(&c->emit, CAP_LOSS_DIED, lost, clock_ns(CLOCK_REALTIME));
	cap_emit__flush_losses(&c->emit, clock_ns(CLOCK_REALTIME), true);
	cap_emit__commit(&c->emit);
}

/*
 * With off-CPU the tick (and its flush) runs just after each wall-clock second
 * begins, so a thread blocked for an hour has a span in every second, none in
 * two flushes of one second and none skipped.
 */
static uint64_t offcpu_next_tick(uint64_t now_mono_ns)
{
	uint64_t real = clock_ns(CLOCK_REALTIME);

	return now_mono_ns + (NSEC_PER_SEC - real % NSEC_PER_SEC) + CAP_OFFCPU_TICK_LAG_NS;
}

/* A uprobe, uretprobe or USDT spec whose file is gone (ENOENT): its path into path. */
static bool probe_file_gone(const char *spec, char *path, size_t len)
{
	struct probe_spec p;

	if (probe_spec__parse(spec, &p) < 0 ||
	    (p.type != PROBE_UPROBE && p.type != PROBE_URETPROBE && p.type != PROBE_USDT))
		return false;
	snprintf(path, len, "%s", p.path);
	return access(p.path, F_OK) < 0 && errno == ENOENT;
}

/* Still-blocked threads: their blocked time so far goes into this second. */
static void offcpu_flush(struct capture *c)
{
	int r;

	if (!c->bpf)
		return;
	r = cap_bpf__offcpu_flush(c->bpf);
	if (r < 0) {
		shm_stage__cnt_add(c->st, SHM_CNT_ERRORS, 1);
		log_warn_errno(r, "flush off-CPU spans: %m");
		return;
	}
	shm_stage__cnt_set(c->st, CAP_CNT_OFFCPU_PLACES, (uint64_t)r);
}

static int setup_perf(struct capture *c, const struct cap_bpf_opts *o)
{
	struct cap_perf_opts po = {
		.target_tgid = o->target_tgid,
		.comm = o->comm,
		.stack_size = o->stack_size,
		.kernel_only = o->kernel_only,
		.with_idle = o->with_idle,
		.freq = c->cfg->freq,
	};
	int r;

	po.stack_size = c->stack_start; /* no per-process size in perf_event */
	r = cap_perf__open(&po, c->cpus, c->nr_cpus, on_record, c, &c->perf);
	if (r < 0)
		return r;
	log_info("sampling %u CPUs at %u Hz (cpu-clock, perf backend), user stack copy %u "
		 "bytes%s",
		 c->nr_cpus, c->cfg->freq, o->stack_size,
		 o->kernel_only ? " (kernel stacks only)" : "");
	return 0;
}

static int setup_bpf(struct capture *c, struct cap_bpf_opts *o)
{
	int r;

	o->ringbuf_size = cap_bpf_ringbuf_size(c->nr_cpus, c->cfg->freq, o->stack_size,
					       c->cfg->nr_probes, c->cfg->probe_rate);
	/* Off-CPU spans come at the context-switch rate, not at freq, and a
	 * flush emits one record per stash entry at once: room for as many
	 * records as CAP_OFFCPU_RINGBUF holds with 8 KiB stacks, whatever the
	 * stack copy cap (the records are sized to it). */
	if (o->offcpu) {
		uint64_t want = (uint64_t)CAP_OFFCPU_RINGBUF / cpa_bpf_offcpu_size(8192) *
				cpa_bpf_offcpu_size(o->stack_size);
		uint32_t sz = CAP_OFFCPU_RINGBUF;

		while (sz < want && sz < (64u << 20))
			sz <<= 1;
		o->ringbuf_size = MAX(o->ringbuf_size, sz);
	}
	/*
	 * The once-a-second tick polls the buffer anyway: the forced wakeup
	 * below (half the buffer) must not come before it while samples flow
	 * at the full rate, or capture wakes twice a second (at 49 Hz on two
	 * CPUs the 1 MiB floor forced one every ~0.9 s). Room for 2.5 s of
	 * full-size samples from every CPU, up to CAP_TICK_RINGBUF_MAX (2 MiB:
	 * a forced wakeup every ~1.8 s at 49 Hz on two busy CPUs with copies
	 * trimmed as they are; a larger buffer costs capture its RSS).
	 */
	{
		uint64_t tick = (uint64_t)c->nr_cpus * c->cfg->freq *
				(cpa_bpf_sample_size(o->stack_size) + 8) * 5 / 2;
		uint32_t sz = o->ringbuf_size;

		while (sz < tick && sz < CAP_TICK_RINGBUF_MAX)
			sz <<= 1;
		o->ringbuf_size = sz;
	}
	/*
	 * Capture sleeps up to a second; a burst must wake it before either
	 * buffer overflows: before half the BPF buffer is used, and before one
	 * poll's worth would fill half of ring 0 (counted in BPF reservation
	 * bytes, which are larger than the ring 0 records they become, so the
	 * batch is well under half of ring 0).
	 */
	o->wakeup_bytes = (uint32_t)MIN((uint64_t)o->ringbuf_size / 2, c->ring->size / 2);
	/* The monitor checked them already; the file or tracefs may have
	 * changed since (an upgrade while cpa starts, a restart), so check
	 * again and say which. */
	for (unsigned int i = 0; i < c->cfg->nr_probes; i++) {
		char path[PROBE_PART_MAX];

		/* gone or changed since: left out like a probe the kernel refuses */
		if (probe_file_gone(c->cfg->probes[i], path, sizeof(path))) {
			log_warn("probe %u '%s' left out: its file %s is gone (%s) since cpa "
				 "monitor checked it; sampling and the other probes go on ([lost: "
				 "capture probe_refused])",
				 i, c->cfg->probes[i], path, strerror(ENOENT));
			o->probes_out |= 1u << i;
			o->probes_gone |= 1u << i;
		} else if (probe_spec__resolve(c->cfg->probes[i], &c->probes[i]) < 0) {
			log_warn("probe %u '%s' left out (above); sampling and the other probes "
				 "go on ([lost: capture probe_refused])",
				 i, c->cfg->probes[i]);
			o->probes_out |= 1u << i;
		}
	}
	o->probes = c->probes;
	o->nr_probes = c->cfg->nr_probes;
	o->probe_rate = (uint32_t)MIN(c->cfg->probe_rate, UINT32_MAX);
	o->probe_budget_ppm = c->cfg->probe_budget;
	for (unsigned int i = 0; i < o->nr_probes; i++)
		o->probe_texts[i] = c->cfg->probes[i];
	r = cap_bpf__open(o, on_record, c, &c->bpf);
	if (r < 0)
		return r;
	if (c->pin_path[0]) {
		r = cap_bpf__pin_stats(c->bpf, c->pin_path);
		if (r < 0) {
			log_warn_errno(r, "pin %s: %m: losses at a kill will not be counted",
				       c->pin_path);
			c->pin_path[0] = '\0';
		} else {
			shm_stage__cnt_set(c->st, CAP_CNT_GEN_PINNED, 1);
		}
	}
	r = cap_bpf__attach(c->bpf, c->cpus, c->nr_cpus, c->cfg->freq);
	if (r < 0)
		return r;
	r = cap_bpf__attach_probes(c->bpf);
	if (r < 0)
		return r;
	/* Python frames: the mapping events find the new interpreters, a
	 * scan the running ones (docs/capture.md, "Python"). */
	if (!o->kernel_only && c->mmapev &&
	    cap_python__new(cap_bpf__py_procs_fd(c->bpf), cap_bpf__py_slots_fd(c->bpf),
			    cap_bpf__py_execs_fd(c->bpf), o->target_tgid, &c->python) >= 0) {
		cap_mmapev__set_python(c->mmapev, c->python);
		log_info("python: %d interpreters running", cap_python__scan(c->python));
		if (cap_pyname__new(&c->pyname, c->st) < 0)
			log_warn("python: no memory for naming code objects here: symd reads them");
		else
			cap_pyname__set_room(c->pyname, pyname_room, c, CAP_PYNAME_BUDGET_MAX_NS);
	}
	down_mark(c);
	for (unsigned int i = 0; i < c->cfg->nr_probes; i++) {
		if (cap_bpf__probes_refused(c->bpf) & (1u << i))
			continue; /* said when it was left out */
		if (c->cfg->probe_rate)
			log_info("probe %u: %s (at most %" PRIu64 " samples/s)", i,
				 c->cfg->probes[i], c->cfg->probe_rate);
		else
			log_info("probe %u: %s (no rate limit)", i, c->cfg->probes[i]);
	}
	log_info("sampling %u CPUs at %u Hz (cpu-clock), user stack copy %u bytes%s%s, BPF ring "
		 "buffer %u KiB, prog id %u",
		 c->nr_cpus, c->cfg->freq, o->stack_start,
		 c->have_hints ? " until unwindd learns a process (adaptive)" : "",
		 o->kernel_only ? " (kernel stacks only)" : "", o->ringbuf_size >> 10,
		 cap_bpf__prog_id(c->bpf));
	if (o->offcpu)
		log_info("off-CPU: states %s%s%s, blocks of %" PRIu64 " ns to %" PRIu64
			 " ns (0 = no limit), %u places tracked",
			 (o->offcpu_states & CPA_OFFCPU_STATE_R) ? "R" : "",
			 (o->offcpu_states & CPA_OFFCPU_STATE_S) ? "S" : "",
			 (o->offcpu_states & CPA_OFFCPU_STATE_D) ? "D" : "", o->offcpu_min_ns,
			 o->offcpu_max_ns, o->offcpu_threads);
	return 0;
}

static bool denied(int r)
{
	return r == -EPERM || r == -EACCES;
}

/*
 * No privilege to sample: BPF refused, and perf_event system-wide with it.
 * A restart cannot fix that: the one line the monitor says (shm/stage.h),
 * and capture exits SHM_EXIT_PERMANENT (its detail with --verbose).
 */
static int nopriv(struct capture *c, int r)
{
	shm_stage__permanent(c->st, SHM_CAUSE_NOPRIV, shm_perf_paranoid());
	log_debug("%s", c->st->cause);
	return r;
}

/* Only plain on-CPU sampling may fall back; BPF-only modes must fail. */
static bool bpf_fallback_allowed(const struct cpa_config *cfg)
{
	return !(cfg->flags & (CPA_CFG_OFFCPU | CPA_CFG_ONESHOT)) && cfg->nr_probes == 0;
}

/* The backend's set-up done (r): no privilege is the one line; a running
 * capture without the mapping history (mmap_err) says so. */
static int backend_done(struct capture *c, int r, int mmap_err)
{
	if (denied(r))
		return nopriv(c, r);
	if (r >= 0 && mmap_err < 0)
		log_warn_errno(mmap_err, "no mapping history (%m): user frames of processes that "
					 "exit quickly will be unresolved");
	return r;
}

static int capture_setup(struct capture *c, struct shm_arena *a)
{
	struct cap_bpf_opts o = {};
	bool refused;
	int r, mmap_err = 0, bpf_err;

	c->cfg = shm_arena__config(a);
	r = config_check(c->cfg);
	if (r < 0)
		return r;

	/* The adaptive copy: --stack_size to start with, up to the cap once
	 * unwindd has seen a process's walks run out of bytes. */
	c->stack_start = ustack_size(c->cfg, &refused);
	c->stack_cap = c->stack_start ? cpa_config__stack_cap(c->stack_start) : 0;
	r = shm_arena__find_ring(a, SHM_STAGE_UNWINDD, SHM_STAGE_CAPTURE);
	if (r >= 0 && c->stack_cap > c->stack_start) {
		r = shm_arena__open_cons(a, (unsigned int)r, &c->hints);
		if (r < 0)
			return log_error_errno(r, "open the hint ring as consumer: %m");
		c->have_hints = true;
	}
	if (!c->have_hints)
		c->stack_cap = c->stack_start; /* nobody to learn from: a fixed copy */
	o.stack_size = c->stack_cap;
	/*
	 * A process unwindd has not learned yet gets the cap: the BPF side
	 * clamps every copy at the stack's top, so a shallow process copies
	 * what it has, and a deep one is complete from its first sample
	 * instead of after the hint's round trip (up to ~1 s). unwindd
	 * lowers it once 32 walks have shown what they need.
	 */
	o.stack_start = c->have_hints ? c->stack_cap : c->stack_start;
	r = cap_emit__init(&c->emit, c->ring, c->st, c->st->generation, o.stack_size);
	if (r < 0)
		return log_error_errno(r, "set up output: %m");
	c->emit.ustack_refused = refused;
	if (c->cfg->backend == CPA_BACKEND_BPF) {
		down_carry_pending(c);
		dead_generation_fold(c);
		down_carry(c);
	}

	r = cap_sys_online_cpus(c->cpus, CAP_MAX_CPUS);
	if (r < 0)
		return log_error_errno(r, "read /sys/devices/system/cpu/online: %m");
	c->nr_cpus = (unsigned int)r;

	o.target_tgid = target_tgid(c->cfg);
	o.comm = c->cfg->comm;
	o.kernel_only = c->cfg->flags & CPA_CFG_KERNEL_STACK_ONLY;
	o.with_idle = c->cfg->flags & CPA_CFG_WITH_IDLE;
	o.btf_path = c->cfg->btf_path[0] ? c->cfg->btf_path : NULL;
	o.offcpu = c->cfg->flags & CPA_CFG_OFFCPU;
	o.offcpu_states = c->cfg->offcpu_states;
	o.offcpu_min_ns = c->cfg->offcpu_min_ns;
	o.offcpu_max_ns = c->cfg->offcpu_max_ns;
	o.offcpu_threads = CAP_OFFCPU_THREADS;
	if (!o.kernel_only) {
		/* Without it unwindd reads /proc/PID/maps, racing short-lived processes. */
		/* Said once sampling runs: without privilege that is the one line. */
		mmap_err = MIN(
			cap_mmapev__open(c->cpus, c->nr_cpus, o.target_tgid, &c->emit, &c->mmapev),
			0);
	}
	if (c->cfg->policy_path[0]) {
		const char *specs[CPA_PROBE_MAX];

		for (unsigned int i = 0; i < c->cfg->nr_probes; i++)
			specs[i] = c->cfg->probes[i];
		r = cap_policy__open(c->cfg->policy_path, 100000, specs, c->cfg->nr_probes,
				     &c->policy);
		if (r < 0)
			return r;
		/* probe=: counted per process; attach=: held back until a trigger. */
		cap_policy__probe_masks(c->policy, &o.policy_rate_probes, &o.policy_attach_probes);
		/* A policy's off-CPU action: the programs loaded, gated per target. */
		o.offcpu_gated = !o.offcpu && cap_policy__wants_offcpu(c->policy);
		o.offcpu = o.offcpu || o.offcpu_gated;
	}
	if (c->cfg->backend == CPA_BACKEND_PERF)
		return backend_done(c, setup_perf(c, &o), mmap_err);

	r = setup_bpf(c, &o);
	if (r >= 0)
		return backend_done(c, r, mmap_err);
	bpf_err = r;
	/*
	 * Plain on-CPU sampling does not need BPF: rather than record nothing,
	 * say so loudly and sample through perf_event alone. BPF-only modes
	 * (off-CPU, probes, one-shot) fail instead. A program too complex for
	 * the verifier (E2BIG) is the copy's size on a kernel without
	 * bpf_loop(): one line naming the option, the log with --verbose.
	 */
	if (r == -E2BIG) {
		const char *why = cap_bpf_copy_loop() ? "" : " without bpf_loop() (Linux 5.17+)";

		/* The same program on every restart: the monitor says it once. */
		if (!bpf_fallback_allowed(c->cfg)) {
			shm_stage__permanent(
				c->st,
				"--stack_size %u: a user stack copy of up to %u bytes "
				"is too complex for this kernel's BPF verifier%s, and "
				"--offcpu, --probe and --oneshot need the BPF backend: "
				"use a lower --stack_size",
				c->cfg->stack_size, o.stack_size, why);
			log_debug("%s", c->st->cause);
			return r;
		}
		log_warn("--stack_size %u: a user stack copy of up to %u bytes is too complex for "
			 "this kernel's BPF verifier%s; using the perf backend (%u-byte copies, "
			 "filters in user space; --verbose shows the verifier's log)",
			 c->cfg->stack_size, o.stack_size, why, c->stack_start);
	} else if (!bpf_fallback_allowed(c->cfg)) {
		return denied(r) ? nopriv(c, r) : r;
	} else if (!denied(r)) {
		log_warn("BPF backend unusable (%s): falling back to the perf backend "
			 "(filters in user space, higher cost per sample)",
			 strerror(-r));
	}
	backend_free(c);
	r = setup_perf(c, &o);
	/* Said only when the fallback runs: else the one line covers it. */
	if (r >= 0 && denied(bpf_err))
		log_warn("BPF backend unusable (%s: needs CAP_BPF+CAP_PERFMON or root): "
			 "falling back to the perf backend (filters in user space, higher cost "
			 "per sample)",
			 strerror(-bpf_err));
	return backend_done(c, r, mmap_err);
}

/* Mapping events first: each mapping reaches ring 0 before the samples in it. */
static int mmapev_drain(struct capture *c)
{
	int r = c->mmapev ? cap_mmapev__drain(c->mmapev) : 0;

	return r < 0 ? log_error_errno(r, "emit mapping events: %m") : 0;
}

/* Stop sampling, drain the kernel buffers into ring 0, flush losses. */
int capture__finish(void *obj, enum shm_stage_end how)
{
	struct capture *c = obj;
	uint64_t deadline =
		clock_ns(CLOCK_MONOTONIC) + (how == SHM_END_TERM ? 0 : CAP_STOP_LOSS_WAIT_NS);
	int r;

	if (how == SHM_END_FAILED)
		return 0;
	cap_policy__undo_all(c->policy, &c->emit, clock_ns(CLOCK_REALTIME));
	backend_detach(c);
	/* Threads still blocked now: their time up to the stop counts. */
	offcpu_flush(c);
	do {
		r = mmapev_drain(c);
		if (r >= 0)
			r = backend_poll(c, 0);
		cap_emit__commit(&c->emit);
	} while (r > 0);
	if (r < 0 && r != -EINTR)
		return log_error_errno(r, "drain the kernel buffers: %m");
	stats_sync(c, true);
	/* A stretched interval's totals (idle_next()) up to now: seconds of
	 * them, not the part of one second the per-second tick leaves out. */
	if (c->sched && c->tick_len_ns > NSEC_PER_SEC &&
	    cap_sched__tick(c->sched, &c->emit, clock_ns(CLOCK_REALTIME), NULL, NULL, 0) < 0)
		log_warn("sequence numbers used up: the last metrics interval is not stored");
	cap_emit__commit(&c->emit);

	/* The consumer is still running during a graceful stop and an orphan
	 * drain: give it a moment to make room, so the store shows what we
	 * lost. */
	for (;;) {
		r = cap_emit__flush_losses(&c->emit, clock_ns(CLOCK_REALTIME), true);
		cap_emit__commit(&c->emit);
		if (r <= 0 || (how == SHM_END_STOPPED && *c->term) ||
		    clock_ns(CLOCK_MONOTONIC) >= deadline)
			break;
		shm_stage__heartbeat(c->st);
		nanosleep(&(struct timespec){.tv_nsec = CAP_STOP_RETRY_NS}, NULL);
	}
	if (r < 0)
		return log_error_errno(r, "flush loss records: %m");
	/* Left for the monitor, which stores them if it kills the consumer that
	 * kept ring 0 full (shm_loss__held()). */
	shm_stage__cnt_set(c->st, CAP_CNT_LOSS_PENDING,
			   r > 0 ? cap_emit__losses_pending(&c->emit) : 0);
	if (r > 0)
		log_warn("ring 0 full at exit: %d loss aggregate(s) not sent (counted)", r);
	probes_log(c);
	/* The run ends (STOP, or the monitor is gone): nobody will fold the
	 * pinned map. On SIGTERM from a live monitor (a restart) the next
	 * generation reads it and finds everything delivered. */
	if (c->pin_path[0] && how != SHM_END_TERM) {
		unlink(c->pin_path);
		shm_stage__cnt_set(c->st, CAP_CNT_GEN_PINNED, 0);
		c->pin_path[0] = '\0';
	}
	backend_free(c);
	cap_mmapev__free(c->mmapev);
	c->mmapev = NULL;
	log_info("stopped: %" PRIu64 " samples, %" PRIu64 " records out, %" PRIu64
		 " dropped (ring full), %" PRIu64 " degraded, %" PRIu64 " lost in the kernel",
		 shm_stage__cnt(c->st, CAP_CNT_SAMPLES), shm_stage__cnt(c->st, SHM_CNT_OUT),
		 shm_stage__cnt(c->st, SHM_CNT_DROP_RING_FULL),
		 shm_stage__cnt(c->st, SHM_CNT_DEGRADED),
		 shm_stage__cnt(c->st, CAP_CNT_BPF_RB_LOST));
	return 0;
}

/*
 * The next metrics interval (docs/metrics.md, "Idle host"). A second while
 * anything happens. While at most CAP_IDLE_SAMPLES_PER_S samples a second
 * fired on tasks other than the idle one (taken, or dropped by --pid/--comm:
 * at 49 Hz, under ~2 % of one CPU busy) it doubles up to CAP_IDLE_TICK_MAX_NS
 * (and half the hang timeout): capture sleeps through it and its record
 * covers it all, unless more records than that come (the BPF side wakes us
 * with the one past it, wake_after), which ends it then. Only when nothing
 * else needs the per-second tick: probes (their budget), policies (evaluated
 * per second), off-CPU (flushed per second), losses still to send.
 */
static uint64_t idle_next(struct capture *c, uint64_t now_ns)
{
	uint64_t act = c->bpf_stats[CPA_BPF_STAT_PRODUCED] + c->bpf_stats[CPA_BPF_STAT_FILTERED];
	uint64_t max = CAP_IDLE_TICK_MAX_NS, secs = (now_ns - c->tick_at_ns) / NSEC_PER_SEC;
	bool quiet = act - c->active_mark <= MAX(secs, 1) * CAP_IDLE_SAMPLES_PER_S;

	c->active_mark = act;
	c->tick_at_ns = now_ns;
	if (!quiet || !c->bpf || (c->mmapev && c->epfd < 0) || c->policy || c->cfg->nr_probes ||
	    (c->cfg->flags & (CPA_CFG_OFFCPU | CPA_CFG_ONESHOT)) ||
	    cap_emit__losses_pending(&c->emit))
		return NSEC_PER_SEC;
	if (c->cfg->hang_timeout_ms)
		max = MIN(max, (uint64_t)c->cfg->hang_timeout_ms * NSEC_PER_MSEC / 2);
	return MAX(MIN(c->tick_len_ns * 2, max), NSEC_PER_SEC);
}

/* ms until the next once-a-second tick is due. */
static int next_tick_ms(const struct capture *c, uint64_t now_ns)
{
	return c->next_tick_ns > now_ns
		       ? (int)((c->next_tick_ns - now_ns + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC)
		       : 0;
}

/* One poll of the kernel buffers, never past the once-a-second tick: it
 * stamps the heartbeat, so an idle capture wakes exactly once a second. */
int capture__poll(void *obj)
{
	struct capture *c = obj;
	int r = 0, wait_ms = MIN(c->wait_ms, next_tick_ms(c, c->now));

	shm_stage__cnt_set(c->st, CAP_CNT_GEN_ALIVE_NS,
			   __atomic_load_n(&c->st->heartbeat_ns, __ATOMIC_RELAXED));
	if (c->mmapev && c->bpf) {
		struct epoll_event ev;

		/* The mapping rings only while a stretched tick sleeps: every
		 * second they are drained anyway, and a churning host's would
		 * wake us more often. */
		if (c->epfd < 0 || c->tick_len_ns <= NSEC_PER_SEC)
			r = cap_bpf__wait(c->bpf, wait_ms);
		else if (epoll_wait(c->epfd, &ev, 1, wait_ms) < 0)
			r = -errno;
		wait_ms = 0;
	}
	if (r >= 0 || r == -EINTR)
		r = mmapev_drain(c);
	cap_pyname__poll(c->pyname); /* its reads' budget (cap_pyname.h) */
	if (r >= 0)
		r = backend_poll(c, wait_ms);

	if (r < 0 && r != -EINTR)
		return log_error_errno(r, "consume samples: %m");
	cap_emit__commit(&c->emit);
	shm_stage__cnt_add(c->st, SHM_CNT_WAKEUPS, 1);
	if (r > 0)
		shm_stage__cnt_add(c->st, SHM_CNT_BATCHES, 1);
	c->polled = r;
	return r;
}

int capture__tick(void *obj, uint64_t now_ns)
{
	struct capture *c = obj;
	bool naming = cap_pyname__soon(c->pyname, now_ns);
	uint32_t wake;
	int r;

	c->now = now_ns;
	if (c->polled != -EINTR) {
		c->poll_ms = cap_poll_next_ms(c->poll_ms, c->polled, now_ns - c->poll_last);
		c->poll_last = now_ns;
	}
	if (!naming && c->tick_len_ns > NSEC_PER_SEC)
		c->poll_ms = (int)(c->tick_len_ns / NSEC_PER_MSEC); /* up to the tick */
	c->wait_ms = naming ? MIN(c->poll_ms, CAP_PYNAME_POLL_MS) : c->poll_ms;
	/* More records than a stretched interval allows woke us: it ends now,
	 * seconds again. */
	if (c->tick_len_ns > NSEC_PER_SEC && c->polled > 0 && !cap_bpf__wake_left(c->bpf))
		c->next_tick_ns = now_ns;
	if (now_ns >= c->next_tick_ns) {
		/* Follow wall clock steps within a second. */
		cap_clock__update(&c->emit.clock);
		offcpu_flush(c);
		stats_sync(c, false);
		if ((c->sched ? cap_sched__tick(c->sched, &c->emit, clock_ns(CLOCK_REALTIME),
						c->policy, c->probe_ents, c->n_probe_ents)
			      : probe_metrics_emit(c)) < 0)
			return log_error_errno(-EOVERFLOW,
					       "sequence numbers of generation %u used up",
					       c->st->generation);
		c->tick_len_ns = idle_next(c, now_ns);
		c->next_tick_ns += c->tick_len_ns;
		if (c->next_tick_ns <= now_ns)
			c->next_tick_ns = now_ns + c->tick_len_ns;
		/* Past a stretched interval's allowance the BPF side wakes us. */
		wake = (uint32_t)(c->tick_len_ns / NSEC_PER_SEC) * CAP_IDLE_SAMPLES_PER_S + 1;
		if (c->bpf)
			cap_bpf__wake_after(c->bpf, c->tick_len_ns > NSEC_PER_SEC ? wake : 0);
		if (c->cfg->flags & CPA_CFG_OFFCPU)
			c->next_tick_ns = offcpu_next_tick(now_ns);
	}
	hints_apply(c);
	r = cap_emit__flush_losses(&c->emit, clock_ns(CLOCK_REALTIME), false);
	if (r < 0)
		return log_error_errno(r, "sequence numbers of generation %u used up: %m",
				       c->st->generation);
	cap_emit__commit(&c->emit);
	/* About to sleep: unwindd gets the batch period's samples in one
	 * wakeup (more than its wake_bytes woke it already); a period that
	 * carried little stretches to SHM_BATCH_IDLE_MS (shm/stage_loop.h). */
	/* A stretched tick (idle_next()) that would end past that flushes now. */
	if (now_ns - c->flushed >= SHM_BATCH_MS * NSEC_PER_MSEC / 4 * 3 &&
	    (shm_stage__cnt(c->st, SHM_CNT_OUT) - c->flushed_recs >= SHM_BATCH_SMALL_RECS ||
	     MAX(now_ns, c->tick_len_ns > NSEC_PER_SEC ? c->next_tick_ns : 0) - c->flushed >=
		     (SHM_BATCH_IDLE_MS - SHM_BATCH_MS / 4) * NSEC_PER_MSEC)) {
		shm_ring__flush_sp(c->ring);
		c->flushed = now_ns;
		c->flushed_recs = shm_stage__cnt(c->st, SHM_CNT_OUT);
	}
	return 0;
}

static void on_nudge(int sig)
{
	(void)sig;
}

int capture__new(const struct shm_stage_ctx *ctx, void **ret)
{
	/* The supervisor's nudge with a STOP: it cuts a stretched poll short
	 * (no SA_RESTART), the loop's head then sees the command. */
	struct sigaction sa = {.sa_handler = on_nudge};
	struct capture *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return log_error_errno(-ENOMEM, "allocate capture state: %m");
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGURG, &sa, NULL) < 0)
		log_warn_errno(-errno, "SIGURG handler: %m (a stop may wait for the next tick)");
	c->epfd = -1;
	c->st = ctx->st;
	/* Only a stop of this generation leaves unsent losses to the monitor. */
	shm_stage__cnt_set(c->st, CAP_CNT_LOSS_PENDING, 0);
	c->term = ctx->term;
	c->ring = ctx->out;
	r = capture_setup(c, ctx->arena);
	/* Metrics are an extra: without them the profile still records. */
	if (r >= 0 && (c->cfg->flags & CPA_CFG_SCHED_METRICS) && c->bpf &&
	    cap_sched__open(c->cfg->btf_path[0] ? c->cfg->btf_path : NULL,
			    (c->cfg->flags & CPA_CFG_SCHED_FULL) ||
				    cap_policy__wants_sched_exact(c->policy),
			    c->cfg->sched_sample, &c->sched) < 0)
		shm_stage__cnt_add(c->st, SHM_CNT_ERRORS, 1);
	if (r >= 0 && c->policy)
		cap_policy__attach(c->policy, c->bpf, c->cfg->freq, c->stack_cap);
	if (r < 0) {
		capture__free(c);
		return r;
	}
	/* The BPF load parsed the kernel's BTF (~6 MB raw, twice that parsed)
	 * and libbpf freed it after loading; nothing else will reuse that heap,
	 * so give it back now instead of carrying it in RSS for the run. */
	malloc_trim(0);
	/* A stretched tick sleeps up to CAP_IDLE_TICK_MAX_NS: the mapping
	 * history's rings must wake us before they overflow, as the BPF ring
	 * buffer does (nested: that epoll fd is readable when it has events). */
	if (c->mmapev && c->bpf) {
		struct epoll_event ev = {.events = EPOLLIN};

		c->epfd = epoll_create1(EPOLL_CLOEXEC);
		if (c->epfd >= 0 &&
		    (epoll_ctl(c->epfd, EPOLL_CTL_ADD, cap_bpf__epoll_fd(c->bpf), &ev) < 0 ||
		     cap_mmapev__watch(c->mmapev, c->epfd) < 0)) {
			close(c->epfd);
			c->epfd = -1;
		}
	}
	c->next_tick_ns = clock_ns(CLOCK_MONOTONIC) + NSEC_PER_SEC;
	c->tick_len_ns = NSEC_PER_SEC;
	c->tick_at_ns = clock_ns(CLOCK_MONOTONIC);
	if (c->cfg->flags & CPA_CFG_OFFCPU)
		c->next_tick_ns = offcpu_next_tick(clock_ns(CLOCK_MONOTONIC));
	c->poll_ms = c->wait_ms = CAP_POLL_FLOW_MS;
	c->now = c->poll_last = c->flushed = clock_ns(CLOCK_MONOTONIC);
	c->flushed_recs = shm_stage__cnt(c->st, SHM_CNT_OUT);
	*ret = c;
	return 0;
}

void capture__free(void *obj)
{
	struct capture *c = obj;

	if (!c)
		return;
	backend_free(c);
	if (c->epfd >= 0)
		close(c->epfd);
	cap_mmapev__free(c->mmapev);
	cap_sched__free(c->sched);
	cap_policy__free(c->policy);
	free(c);
}
