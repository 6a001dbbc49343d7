// SPDX-License-Identifier: MIT
/*
 * The supervisor loop. One thread, one epoll set with a signalfd (SIGCHLD,
 * SIGINT, SIGTERM, SIGHUP); everything else (restart backoff, stop
 * deadlines, the stages' hang deadlines, statistics, the systemd watchdog)
 * is a deadline that bounds the epoll timeout, so an idle supervisor sleeps
 * until the oldest heartbeat could turn into a hang (~9 s), not for a fixed
 * tick. No signal handlers: a handler could run in the middle of a spawn,
 * the signalfd cannot.
 *
 *   RUNNING --SIGINT/SIGTERM/--duration/give-up/permanent--> STOPPING --all done--> DONE
 *                                                     | 2nd signal
 *                                                     v
 *                                                  KILLING (SIGKILL all) --> DONE
 *
 * A stage that exits SHM_EXIT_PERMANENT (shm/stage.h: no privilege, a
 * configuration the kernel refuses) is never restarted: its cause line once,
 * the stop, and the monitor exits with that code (stage_permanent()).
 *
 * STOPPING walks the pipeline from the producer down, one stage at a time:
 * the producer (capture) gets cmd STOP (SIGTERM, then SIGKILL after
 * stop_timeout each), then the ring consumers (unwindd, symd, storer) in turn
 * get cmd DRAIN plus a kick of their input ring, so each one finds its input
 * final and can consume it to the end. What a stage is (role, input ring,
 * limits, the gauge a successor folds) is its row in shm_stages.
 */
#include "supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "common/opts.h"
#include "common/sdnotify.h"
#include "shm/loss.h"
#include "shm/stage_loop.h"
#include "storer/store.h"
#include "storer/storer.h"

#define BACKOFF_MIN_MS		100
#define BACKOFF_MAX_MS		5000
#define FAST_FAIL_MS		2000  /* dying sooner than this after spawn is a fast failure */
#define LOOP_FAILS		3     /* fast failures in a row: "failing repeatedly" */
#define SUP_DURATION_STARTUP_MS 30000 /* --duration: the most start-up may add */
#define STATS_QUIET_TURNS	3     /* stats turns with nothing moving before the line sleeps */

enum sup_phase {
	SUP_RUNNING,
	SUP_STOPPING,
	SUP_KILLING,
	SUP_DONE,
};

struct sup_stage {
	enum shm_stage_id id;
	const struct shm_stage_desc *d; /* its row in shm_stages */
	const char *name;
	char path[PATH_MAX];
	struct shm_stage *blk;
	pid_t pid; /* > 0 until reaped */
	uint64_t spawn_ns;
	uint64_t restart_at_ns; /* 0: no restart pending */
	uint64_t backoff_ms;
	unsigned int fast_fails;
	uint64_t restarts;
	bool seen_running;
	bool ever_running; /* some generation reached RUNNING: it can start */
	bool looping;	   /* failing repeatedly: restarts logged at debug level */
	bool hung_killed;
	bool hung_starting; /* hung_killed before it reached RUNNING */
	uint64_t hung_for_ns;
	uint64_t woken_ns; /* seen woken from its input wait and not beating since */
	bool stop_asked;   /* part of the shutdown: never restarted */
	bool stop_done;
	bool term_sent;
	bool fold_started; /* started during a stop to fold its fold_gauge (once) */
	bool gave_up;
	uint64_t deadline_ns; /* of the current stop step */
	uint64_t as_limit;    /* RLIMIT_AS set at spawn, 0 = none */
	uint64_t last_cnt[SHM_CNT_MAX];
};

struct supervisor {
	struct shm_arena *arena;
	struct supervisor_params p;
	struct sup_stage st[SHM_STAGE_MAX];
	struct sd_notifier notify;
	char **envp;
	char *argv_verbose;
	int epfd, sigfd;
	enum sup_phase phase;
	int stop_idx;	      /* stage being stopped (pipeline order = enum order) */
	char stop_order[128]; /* "capture first, then drain unwindd, symd, storer" */
	char all_names[128];  /* "capture, unwindd, symd, storer" */
	int exit_code;
	bool permanent;		    /* a stage exited SHM_EXIT_PERMANENT: so does cpa monitor */
	char permanent_status[320]; /* its cause, systemd's last STATUS= */
	bool ready_sent;
	char status[384];
	uint64_t start_ns;
	uint64_t stop_at_ns; /* --duration: from the moment every stage runs */
	uint64_t next_stats_ns;
	uint64_t stats_line_ns;	  /* when the last line's counters were taken */
	unsigned int stats_still; /* stats turns in a row that found little moving */
	bool stats_quiet;	  /* STATS_QUIET_TURNS of them: no deadline of its own */
	uint64_t next_watchdog_ns;
};

static int env_ms(const char *name, uint64_t *v)
{
	const char *s = getenv(name);
	long long x;

	if (!s || !*s)
		return 0;
	if (parse_ll(s, 1, 24LL * 3600 * 1000, &x) < 0) {
		log_error("%s: invalid value '%s' (milliseconds, 1..86400000)", name, s);
		return -EINVAL;
	}
	*v = (uint64_t)x;
	return 0;
}

int supervisor_params__init(struct supervisor_params *p)
{
	const char *s = getenv("CPA_MAX_FAST_FAILS");
	int r;

	p->hang_timeout_ms = 10000;
	p->start_timeout_ms = 60000;
	p->stop_timeout_ms = 5000;
	p->drain_timeout_ms = 20000;
	p->max_fast_fails = 5;
	p->healthy_ms = 60000;
	r = env_ms("CPA_HANG_TIMEOUT_MS", &p->hang_timeout_ms);
	if (r == 0)
		r = env_ms("CPA_START_TIMEOUT_MS", &p->start_timeout_ms);
	if (r == 0)
		r = env_ms("CPA_HEALTHY_MS", &p->healthy_ms);
	if (r == 0)
		r = env_ms("CPA_STOP_TIMEOUT_MS", &p->stop_timeout_ms);
	if (r == 0)
		r = env_ms("CPA_DRAIN_TIMEOUT_MS", &p->drain_timeout_ms);
	if (r == 0 && s && *s) {
		long long x;

		if (parse_ll(s, 1, 1000, &x) < 0) {
			log_error("CPA_MAX_FAST_FAILS: invalid value '%s' (1..1000)", s);
			return -EINVAL;
		}
		p->max_fast_fails = (unsigned int)x;
	}
	return r;
}

/* "exited with code 2", "killed by SIGSEGV (core dumped)". */
static void describe_status(int status, char *buf, size_t len)
{
	if (WIFEXITED(status)) {
		snprintf(buf, len, "exited with code %d", WEXITSTATUS(status));
	} else if (WIFSIGNALED(status)) {
		const char *abbrev = sigabbrev_np(WTERMSIG(status));

		if (abbrev)
			snprintf(buf, len, "killed by SIG%s%s", abbrev,
				 WCOREDUMP(status) ? " (core dumped)" : "");
		else
			snprintf(buf, len, "killed by signal %d", WTERMSIG(status));
	} else {
		snprintf(buf, len, "stopped (status 0x%x)", status);
	}
}

static bool status_clean(int status)
{
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * An unasked stage that left with code 0 (its way of obeying a SIGTERM from
 * a live monitor) or died of SIGTERM (before its handler was set): someone
 * asked it to go, `cpa ctl restart` or an operator's kill. The monitor itself
 * only sends SIGTERM during a stop.
 */
static bool status_asked(int status)
{
	return status_clean(status) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
}

static void notify(struct supervisor *s, const char *fmt, const char *arg)
{
	int r;

	if (!sd_notifier__enabled(&s->notify))
		return;
	r = sd_notifier__send(&s->notify, fmt, arg);
	if (r == -EAGAIN)
		log_debug("sd_notify: the service manager's queue is full, message dropped");
	else if (r < 0)
		log_warn_errno(r, "sd_notify: %m");
}

static void set_status(struct supervisor *s, const char *status)
{
	if (!strcmp(s->status, status))
		return;
	snprintf(s->status, sizeof(s->status), "%s", status);
	notify(s, "STATUS=%s", status);
}

/* The stages' environment: ours, with CPA_ARENA_FD=3 and without systemd's
 * variables (a stage must not talk to systemd in the monitor's name). */
static char **build_envp(void)
{
	extern char **environ;
	static const char *const drop[] = {"CPA_ARENA_FD=", "NOTIFY_SOCKET=", "WATCHDOG_USEC=",
					   "WATCHDOG_PID=", "LISTEN_FDS=",    "LISTEN_PID="};
	size_t n = 0, k = 0;
	char **envp;

	while (environ[n])
		n++;
	envp = calloc(n + 2, sizeof(*envp));
	if (!envp)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		bool skip = false;

		for (unsigned int j = 0; j < ARRAY_SIZE(drop); j++)
			if (!strncmp(environ[i], drop[j], strlen(drop[j])))
				skip = true;
		if (!skip)
			envp[k++] = environ[i];
	}
	envp[k++] = (char *)"CPA_ARENA_FD=3";
	envp[k] = NULL;
	return envp;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SUP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SUP_SANITIZED 1
#endif
#endif

uint64_t supervisor__as_limit(enum shm_stage_id id, uint64_t mb)
{
#ifdef SUP_SANITIZED
	(void)id, (void)mb;
	return 0;
#else
	if ((unsigned int)id >= SHM_STAGE_MAX || !(shm_stages[id].limits & SHM_LIMIT_MEM))
		return 0;
	return (2 * mb + 1024) << 20;
#endif
}

/* Child side of a spawn: only async-signal-safe calls until execve. */
_Noreturn static void spawn_child(struct supervisor *s, struct sup_stage *st, int errfd,
				  pid_t parent)
{
	char *argv[3] = {st->path, s->argv_verbose, NULL};
	int arena_fd = shm_arena__fd(s->arena), err;
	struct sigaction sa = {.sa_handler = SIG_DFL};
	sigset_t none;

	/* The stage may read its own pid from its block right away. */
	__atomic_store_n(&st->blk->pid, (int32_t)getpid(), __ATOMIC_RELAXED);
	/* A stage without its supervisor must not outlive it (SIGTERM: leave promptly). */
	if (prctl(PR_SET_PDEATHSIG, SIGTERM) < 0 || getppid() != parent)
		_exit(127);
	for (int sig = 1; sig < _NSIG; sig++)
		sigaction(sig, &sa, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* The memory backstop (the stage's own cap is the limit it keeps). */
	if (st->as_limit) {
		struct rlimit rl = {.rlim_cur = st->as_limit, .rlim_max = st->as_limit};

		setrlimit(RLIMIT_AS, &rl);
	}

	/* Keep the error pipe clear of fd 3 before fd 3 becomes the arena. */
	if (errfd <= 3) {
		int nfd = fcntl(errfd, F_DUPFD_CLOEXEC, 10);

		if (nfd < 0)
			_exit(127);
		errfd = nfd;
	}
	if (arena_fd != 3) {
		if (dup2(arena_fd, 3) < 0) /* dup2 leaves the new fd without CLOEXEC */
			goto fail;
	} else if (fcntl(3, F_SETFD, 0) < 0) {
		goto fail;
	}
	/* Anything the monitor inherited without CLOEXEC stays out of the stages. */
	close_range(4, ~0u, CLOSE_RANGE_CLOEXEC);

	execve(st->path, argv, s->envp);
fail:
	err = errno;
	(void)!write(errfd, &err, sizeof(err));
	_exit(127);
}

static int stage_spawn(struct supervisor *s, struct sup_stage *st)
{
	_cleanup_close_ int rfd = -1;
	int pfd[2], err = 0;
	uint32_t gen;
	ssize_t n;
	pid_t pid, parent = getpid();

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return log_error_errno(-errno, "%s: pipe: %m", st->name);
	rfd = pfd[0];

	/* The limit of now: cpa ctl mem may have changed it. */
	st->as_limit = supervisor__as_limit(
		st->id, __atomic_load_n(&st->blk->mem_limit_mb, __ATOMIC_RELAXED));
	/* docs/pipeline.md: generation, cmd and state are set before the stage runs. */
	gen = __atomic_load_n(&st->blk->generation, __ATOMIC_RELAXED) + 1;
	__atomic_store_n(&st->blk->generation, gen, __ATOMIC_RELAXED);
	__atomic_store_n(&st->blk->restarts, st->restarts, __ATOMIC_RELAXED);
	__atomic_store_n(&st->blk->pid, 0, __ATOMIC_RELAXED);
	st->spawn_ns = clock_kernel_ns(CLOCK_MONOTONIC);
	__atomic_store_n(&st->blk->started_ns, st->spawn_ns, __ATOMIC_RELAXED);
	/* A life killed in its input wait left the flag: not this one's. */
	shm_stage__cnt_set(st->blk, SHM_SLOT_ASLEEP, 0);
	/* No stage runs: its cause is ours to clear. */
	memset(st->blk->cause, 0, sizeof(st->blk->cause));
	st->woken_ns = 0;
	__atomic_store_n(&st->blk->cmd, (uint32_t)SHM_CMD_NONE, __ATOMIC_RELEASE);
	shm_stage__set_state(st->blk, SHM_STATE_STARTING);

	pid = fork();
	if (pid < 0) {
		err = -errno;
		close(pfd[1]);
		return log_error_errno(err, "%s: fork: %m", st->name);
	}
	if (pid == 0)
		spawn_child(s, st, pfd[1], parent);
	close(pfd[1]);
	__atomic_store_n(&st->blk->pid, (int32_t)pid, __ATOMIC_RELAXED);

	/* EOF means execve succeeded (the CLOEXEC write end went away). */
	do
		n = read(rfd, &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	if (n == sizeof(err)) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		__atomic_store_n(&st->blk->pid, 0, __ATOMIC_RELAXED);
		shm_stage__set_state(st->blk, SHM_STATE_FAILED);
		return log_error_errno(-err, "%s: exec '%s': %m", st->name, st->path);
	}

	st->pid = pid;
	st->seen_running = false;
	st->hung_killed = false;
	st->restart_at_ns = 0;
	log_debug("%s started (pid %d, generation %u)", st->name, pid, gen);
	return 0;
}

static void begin_stop(struct supervisor *s, const char *why);

/*
 * A stop step's line (stopping capture, draining a consumer, its exit):
 * info, but debug in the stop after a permanent error, where the cause line
 * and the last line say what the user needs (docs/supervisor.md, "Permanent
 * errors"); warnings and errors of the stop stay what they are.
 */
static enum log_level step_lvl(const struct supervisor *s)
{
	return s->permanent ? LOG_LVL_DEBUG : LOG_LVL_INFO;
}

static void stage_give_up(struct supervisor *s, struct sup_stage *st, const char *what)
{
	log_error("%s failed to start %u times in a row (last: %s); giving up", st->name,
		  st->fast_fails, what);
	st->gave_up = true;
	st->restart_at_ns = 0;
	s->exit_code = 1;
	begin_stop(s, "a stage cannot start");
}

/*
 * A stage that exited SHM_EXIT_PERMANENT cannot run, whatever a restart
 * does (no privilege, a configuration the kernel refuses): its cause line,
 * once, no restart, the pipeline stopped, and cpa monitor exits with the
 * same code (docs/supervisor.md, "Permanent errors").
 */
static void stage_permanent(struct supervisor *s, struct sup_stage *st)
{
	char cause[sizeof(st->blk->cause)];

	memcpy(cause, st->blk->cause, sizeof(cause));
	cause[sizeof(cause) - 1] = 0;
	snprintf(s->permanent_status, sizeof(s->permanent_status), "failed: %s: %s", st->name,
		 cause[0] ? cause : "an error a restart cannot fix");
	if (cause[0])
		log_error("%s: %s", st->name, cause);
	else
		log_error("%s: exited with code %d (an error a restart cannot fix) without saying "
			  "why (--verbose shows its log)",
			  st->name, SHM_EXIT_PERMANENT);
	st->gave_up = true;
	st->restart_at_ns = 0;
	if (st->stop_asked || s->phase == SUP_KILLING)
		st->stop_done = true;
	s->permanent = true;
	begin_stop(s, "a stage cannot run");
}

/* A stage that ran healthy_ms since its spawn: its failure streak is over. */
static void stage_healthy(struct supervisor *s, struct sup_stage *st, uint64_t now)
{
	if (!st->pid || !st->seen_running || now - st->spawn_ns < s->p.healthy_ms * NSEC_PER_MSEC)
		return;
	if (st->looping)
		log_info("%s (pid %d) healthy again: running %.0f s since restart %llu", st->name,
			 st->pid, (double)(now - st->spawn_ns) / NSEC_PER_SEC,
			 (unsigned long long)st->restarts);
	st->looping = false;
	st->fast_fails = 0;
	st->backoff_ms = BACKOFF_MIN_MS;
}

/*
 * A stage died without being asked by the monitor: count it, then restart
 * it after a backoff (100 ms doubling to 5 s, reset once a generation runs
 * healthy_ms). One asked to leave by someone else (asked: cpa ctl restart, a
 * SIGTERM) is no failure: restarted after the shortest backoff, not counted.
 * Only a stage that never reached RUNNING in this monitor's life gives up
 * (a set-up failure: no BPF, a bad config); one that has run is restarted
 * for as long as it takes, whatever kills it.
 */
static void stage_failed(struct supervisor *s, struct sup_stage *st, const char *what,
			 uint64_t uptime_ns, bool asked)
{
	bool fast = !st->seen_running || uptime_ns < FAST_FAIL_MS * NSEC_PER_MSEC;

	if (uptime_ns >= s->p.healthy_ms * NSEC_PER_MSEC) {
		st->backoff_ms = BACKOFF_MIN_MS;
		st->fast_fails = 0;
		st->looping = false;
	}
	/* An asked restart is no failure: the streak and the backoff stay. */
	if (!asked)
		st->fast_fails = fast ? st->fast_fails + 1 : 0;
	if (!asked && !st->ever_running && st->fast_fails >= s->p.max_fast_fails) {
		stage_give_up(s, st, what);
		return;
	}
	if (s->phase == SUP_KILLING || s->phase == SUP_DONE)
		return;
	if (s->phase == SUP_STOPPING && st->d->role == SHM_ROLE_PRODUCER) {
		/* Its producer role is over; nothing to restart it for. */
		st->stop_done = true;
		return;
	}
	if (asked) {
		st->restart_at_ns =
			clock_kernel_ns(CLOCK_MONOTONIC) + BACKOFF_MIN_MS * NSEC_PER_MSEC;
		log_info("%s: asked to leave (cpa ctl restart, a SIGTERM); restarting in %d ms "
			 "(restart %llu)",
			 what, BACKOFF_MIN_MS, (unsigned long long)st->restarts + 1);
		return;
	}
	st->restart_at_ns = clock_kernel_ns(CLOCK_MONOTONIC) + st->backoff_ms * NSEC_PER_MSEC;
	if (st->looping) {
		log_debug("%s; restarting in %llu ms (restart %llu)", what,
			  (unsigned long long)st->backoff_ms, (unsigned long long)st->restarts + 1);
	} else if (st->ever_running && st->fast_fails >= LOOP_FAILS) {
		/* Once per streak, not once per death. */
		st->looping = true;
		log_error("%s; %s is failing repeatedly (%u times within %d s of a start): "
			  "restarting it with a backoff of up to %d s, further restarts "
			  "logged with --verbose until it runs %llu s",
			  what, st->name, st->fast_fails, FAST_FAIL_MS / 1000,
			  BACKOFF_MAX_MS / 1000, (unsigned long long)(s->p.healthy_ms / 1000));
	} else {
		log_warn("%s; restarting in %llu ms (restart %llu)", what,
			 (unsigned long long)st->backoff_ms, (unsigned long long)st->restarts + 1);
	}
	st->backoff_ms = MIN(st->backoff_ms * 2, (uint64_t)BACKOFF_MAX_MS);
}

/*
 * A stage with a fold_gauge (capture) that died unasked (a kill, a crash)
 * left samples it produced and never delivered; only its successor counts
 * them, by folding the statistics map it pinned (docs/capture.md, loss item
 * 5). During a stop nobody would restart it, so start one now that folds,
 * finds STOP and leaves: the store shows that loss. Once per stop; false
 * when there is nothing to fold.
 */
static bool stage_fold_start(struct supervisor *s, struct sup_stage *st)
{
	char status[128];

	if (!st->d->fold_gauge || st->fold_started || !shm_stage__cnt(st->blk, st->d->fold_gauge))
		return false;
	st->fold_started = true;
	log_info("%s died with samples it did not deliver: starting it to count them and stop",
		 st->name);
	if (stage_spawn(s, st) < 0) {
		s->exit_code = 1;
		return false;
	}
	st->stop_asked = true;
	st->term_sent = false;
	/* Its BPF load, then the stop. */
	st->deadline_ns = st->spawn_ns + 2 * s->p.stop_timeout_ms * NSEC_PER_MSEC;
	__atomic_store_n(&st->blk->cmd, (uint32_t)SHM_CMD_STOP, __ATOMIC_RELEASE);
	snprintf(status, sizeof(status), "stopping: %s (counting a killed generation)", st->name);
	set_status(s, status);
	return true;
}

static int held_emit(void *ctx, const struct cpa_loss *l)
{
	void *rec;
	int r = shm_ring__reserve_sp(ctx, sizeof(*l), CPA_REC_LOSS, &rec);

	if (r < 0)
		return r;
	memcpy(rec, l, sizeof(*l));
	return 0;
}

/* Into st's output ring, as its last records: the next stage's drain takes
 * them. The stage is dead, so the monitor is that ring's only producer. A
 * full ring is waited on (the next stage still runs) for up to 2 s. */
static int held_to_ring(struct supervisor *s, struct sup_stage *st, struct shm_loss_table *t)
{
	const struct timespec pause = {.tv_nsec = 10 * 1000 * 1000};
	struct shm_ring_prod p;
	int r = shm_arena__open_prod(s->arena, (unsigned int)st->d->ring_out, &p);

	for (int tries = 0; r >= 0; tries++) {
		r = shm_loss__flush(t, held_emit, &p);
		shm_ring__commit_sp(&p);
		if (r != -ENOBUFS || tries == 200)
			break;
		nanosleep(&pause, NULL);
	}
	return r;
}

/*
 * The sink's cut-off beyond the arena: the highest seq the complete blocks at
 * the tail of this run's store hold, read as a restarted storer reads it
 * (store_root__stored_seq()). A storer killed after a block's write completed
 * and before its release left the ring's mark below that block: its samples
 * are stored, not held. 0 for a stage with an output ring, or when the
 * store cannot say (then they count as held: lost and stored).
 */
static uint64_t stop_stored_seq(struct supervisor *s, struct sup_stage *st)
{
	const struct cpa_config *cfg = shm_arena__config(s->arena);
	uint64_t seq = 0;
	int r;

	if (st->d->ring_out >= 0)
		return 0;
	r = store_root__stored_seq(cfg->store_dir[0] ? cfg->store_dir : CPA_DEFAULT_STORE_DIR,
				   cfg->start_realtime_ns, shm_loss__passed(s->arena, st->id),
				   &seq);
	if (r < 0)
		log_warn_errno(r,
			       "%s: reading what the store holds: %m (what it held is counted "
			       "from its ring's mark)",
			       st->name);
	return r < 0 ? 0 : seq;
}

/*
 * A consumer killed at stop (it did not drain in time, or died draining) is
 * not started again: what it held is counted as lost, from the arena
 * (shm_loss__held()) and, for the sink, the store's tail (stop_stored_seq()),
 * in LOSS records sent on through its output ring, or, for the sink,
 * appended to the store by the monitor itself. docs/pipeline.md, "Stopping".
 */
static void stop_count_held(struct supervisor *s, struct sup_stage *st)
{
	struct shm_loss_table t = {0};
	uint64_t n = shm_loss__held(s->arena, st->id, stop_stored_seq(s, st), &t);
	int r;

	if (!n)
		return;
	if (st->d->ring_out >= 0)
		r = held_to_ring(s, st, &t);
	else
		r = storer__append_losses(shm_arena__config(s->arena), t.ent, t.n);
	if (r < 0)
		log_error_errno(r,
				"%s held %llu sample(s) when it was killed; they could not be "
				"stored as lost: %m",
				st->name, (unsigned long long)n);
	else
		log_warn("%s held %llu sample(s) when it was killed: counted as lost (%s)",
			 st->name, (unsigned long long)n,
			 shm_counter_name(st->id, st->d->lost_at_stop));
}

static void stage_reaped(struct supervisor *s, struct sup_stage *st, int status)
{
	uint64_t uptime = clock_kernel_ns(CLOCK_MONOTONIC) - st->spawn_ns;
	enum shm_stage_state state = shm_stage__state(st->blk);
	char how[96], what[256];
	pid_t pid = st->pid;

	st->pid = 0;
	if (state == SHM_STATE_RUNNING || state == SHM_STATE_DRAINING)
		st->seen_running = true;
	__atomic_store_n(&st->blk->exit_code,
			 WIFEXITED(status)     ? (uint32_t)WEXITSTATUS(status)
			 : WIFSIGNALED(status) ? 128u + (uint32_t)WTERMSIG(status)
					       : 255u,
			 __ATOMIC_RELAXED);
	/* The stage is gone: nobody else will say it did not leave cleanly. */
	if (!status_clean(status) || (state != SHM_STATE_EXITED && state != SHM_STATE_FAILED))
		shm_stage__set_state(st->blk,
				     status_clean(status) ? SHM_STATE_EXITED : SHM_STATE_FAILED);
	describe_status(status, how, sizeof(how));

	if (WIFEXITED(status) && WEXITSTATUS(status) == SHM_EXIT_PERMANENT) {
		stage_permanent(s, st);
		return;
	}
	if (st->stop_asked) {
		if (status_clean(status)) {
			log_printf(step_lvl(s), "%s (pid %d) %s", st->name, pid,
				   st->d->role == SHM_ROLE_PRODUCER ? "stopped"
								    : "drained and exited");
		} else if (st->term_sent && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) {
			log_warn("%s (pid %d) left on SIGTERM, not on STOP", st->name, pid);
		} else {
			log_error("%s (pid %d) %s while stopping", st->name, pid, how);
			s->exit_code = 1;
		}
		if (!status_clean(status) && stage_fold_start(s, st))
			return;
		if (!status_clean(status) && st->d->role != SHM_ROLE_PRODUCER)
			stop_count_held(s, st);
		st->stop_done = true;
		return;
	}

	if (st->hung_killed)
		snprintf(what, sizeof(what), "%s (pid %d) hung%s: no heartbeat for %.1f s, %s",
			 st->name, pid, st->hung_starting ? " while starting" : "",
			 (double)st->hung_for_ns / NSEC_PER_SEC, how);
	else
		snprintf(what, sizeof(what), "%s (pid %d) %s", st->name, pid, how);
	if (s->phase == SUP_KILLING) {
		st->stop_done = true;
		log_warn("%s", what);
		return;
	}
	stage_failed(s, st, what, uptime, status_asked(status));
}

static void reap_children(struct supervisor *s)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		bool ours = false;

		if (pid <= 0)
			break;
		for (int i = 0; i < SHM_STAGE_MAX; i++)
			if (s->st[i].pid == pid) {
				stage_reaped(s, &s->st[i], status);
				ours = true;
			}
		if (!ours)
			log_debug("reaped unknown child %d", pid);
	}
}

static void kick_input(struct supervisor *s, struct sup_stage *st)
{
	void *mem = st->d->ring_in >= 0
			    ? shm_arena__ring_mem(s->arena, (unsigned int)st->d->ring_in, NULL)
			    : NULL;

	if (mem)
		shm_ring__kick(mem);
}

static uint64_t ring_pending(struct supervisor *s, int ring)
{
	struct shm_ring_ctrl *c;

	if (ring < 0)
		return 0;
	c = shm_arena__ring_mem(s->arena, (unsigned int)ring, NULL);
	if (!c)
		return 0;
	/* Both loads relaxed: a snapshot for a log line or a decision to start
	 * a consumer, not a synchronising read of record contents. */
	return __atomic_load_n(&c->prod_pos, __ATOMIC_RELAXED) -
	       __atomic_load_n(&c->cons_pos, __ATOMIC_RELAXED);
}

static void stop_step_begin(struct supervisor *s)
{
	uint64_t now = clock_kernel_ns(CLOCK_MONOTONIC);

	while (s->stop_idx < SHM_STAGE_MAX) {
		struct sup_stage *st = &s->st[s->stop_idx];
		char status[128];

		if (st->stop_done || st->gave_up) {
			s->stop_idx++;
			continue;
		}
		if (st->d->role == SHM_ROLE_PRODUCER) {
			bool down = !st->pid && st->restart_at_ns;

			st->restart_at_ns = 0;
			/* Killed a moment ago, waiting out its restart backoff. */
			if (down && stage_fold_start(s, st))
				return;
			if (!st->pid) {
				st->stop_done = true;
				continue;
			}
			st->stop_asked = true;
			st->deadline_ns = now + s->p.stop_timeout_ms * NSEC_PER_MSEC;
			__atomic_store_n(&st->blk->cmd, (uint32_t)SHM_CMD_STOP, __ATOMIC_RELEASE);
			/* An idle capture may sleep up to 4 s (docs/metrics.md, "Idle
			 * host"): the nudge cuts it short (it ignores the signal). */
			kill(st->pid, SIGURG);
			log_printf(step_lvl(s), "stopping %s (pid %d)", st->name, st->pid);
			snprintf(status, sizeof(status), "stopping: %s", st->name);
			set_status(s, status);
			return;
		}
		/* A consumer that is down with input left is started to drain it:
		 * stopping must not lose what is already in the ring. */
		if (!st->pid && ring_pending(s, st->d->ring_in) > 0) {
			log_printf(step_lvl(s),
				   "%s is down with %llu bytes in its input: starting it to drain",
				   st->name, (unsigned long long)ring_pending(s, st->d->ring_in));
			st->restart_at_ns = 0;
			if (stage_spawn(s, st) < 0) {
				s->exit_code = 1;
				st->stop_done = true;
				continue;
			}
		}
		st->restart_at_ns = 0;
		if (!st->pid) {
			st->stop_done = true;
			continue;
		}
		st->stop_asked = true;
		st->deadline_ns = now + s->p.drain_timeout_ms * NSEC_PER_MSEC;
		__atomic_store_n(&st->blk->cmd, (uint32_t)SHM_CMD_DRAIN, __ATOMIC_RELEASE);
		kick_input(s, st);
		log_printf(step_lvl(s), "draining %s (pid %d): %llu bytes pending in its input",
			   st->name, st->pid, (unsigned long long)ring_pending(s, st->d->ring_in));
		snprintf(status, sizeof(status), "stopping: draining %s", st->name);
		set_status(s, status);
		return;
	}
	s->phase = SUP_DONE;
}

static void stop_step_check(struct supervisor *s, uint64_t now)
{
	struct sup_stage *st;

	if (s->stop_idx >= SHM_STAGE_MAX) {
		s->phase = SUP_DONE;
		return;
	}
	st = &s->st[s->stop_idx];
	if (st->stop_done) {
		s->stop_idx++;
		stop_step_begin(s);
		return;
	}
	if (!st->pid || now < st->deadline_ns)
		return;
	if (st->d->role == SHM_ROLE_PRODUCER && !st->term_sent) {
		log_warn("%s (pid %d) did not stop within %llu ms; sending SIGTERM", st->name,
			 st->pid, (unsigned long long)s->p.stop_timeout_ms);
		kill(st->pid, SIGTERM);
		st->term_sent = true;
		st->deadline_ns = now + s->p.stop_timeout_ms * NSEC_PER_MSEC;
		return;
	}
	log_error("%s (pid %d) did not %s within %llu ms; killing it (SIGKILL)", st->name, st->pid,
		  st->d->role == SHM_ROLE_PRODUCER ? "stop" : "drain",
		  (unsigned long long)(st->d->role == SHM_ROLE_PRODUCER ? s->p.stop_timeout_ms
									: s->p.drain_timeout_ms));
	kill(st->pid, SIGKILL);
	s->exit_code = 1;
	st->deadline_ns = UINT64_MAX;
}

static void begin_stop(struct supervisor *s, const char *why)
{
	if (s->phase != SUP_RUNNING)
		return;
	/* After a permanent error, the one line: the order is a step. */
	if (s->permanent)
		log_info("stopping (%s)", why);
	else
		log_info("stopping (%s): %s", why, s->stop_order);
	notify(s, "STOPPING=1\nSTATUS=%s", "stopping");
	s->phase = SUP_STOPPING;
	s->stop_idx = 0;
	stop_step_begin(s);
}

static void kill_all(struct supervisor *s)
{
	log_warn("second signal: killing every stage now (SIGKILL)");
	s->phase = SUP_KILLING;
	s->exit_code = 1;
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		s->st[i].restart_at_ns = 0;
		s->st[i].stop_asked = false;
		if (s->st[i].pid)
			kill(s->st[i].pid, SIGKILL);
	}
}

/*
 * How long st may go without a beat: the hang timeout once it runs, the start
 * timeout (if longer) while it is still STARTING. Setting up can take one long
 * step with no beat in it: capture's BPF verification is seconds on a loaded
 * host (systemd's TimeoutStartSec= next to WatchdogSec=).
 */
static uint64_t beat_timeout_ns(const struct supervisor *s, const struct sup_stage *st)
{
	uint64_t ms = s->p.hang_timeout_ms;

	if (shm_stage__state(st->blk) == SHM_STATE_STARTING)
		ms = MAX(ms, s->p.start_timeout_ms);
	return ms * NSEC_PER_MSEC;
}

/* Its last sign of life: the last heartbeat of this generation, else the spawn. */
static uint64_t last_beat(const struct sup_stage *st)
{
	uint64_t hb = __atomic_load_n(&st->blk->heartbeat_ns, __ATOMIC_RELAXED);

	/* A heartbeat from an earlier generation does not count. */
	return MAX(hb, st->spawn_ns);
}

/*
 * A stage asleep in its input wait (SHM_SLOT_ASLEEP) beats no more: it is
 * not hung while nobody has woken it (the ring's waiting word still set).
 * Once its producer or a kick woke it, its clock runs from when we first
 * saw that (woken_ns), as if it had beaten then.
 */
static bool asleep(struct supervisor *s, struct sup_stage *st, uint64_t now)
{
	void *ring;

	if (st->d->ring_in < 0 || !shm_stage__cnt(st->blk, SHM_SLOT_ASLEEP)) {
		st->woken_ns = 0;
		return false;
	}
	ring = shm_arena__ring_mem(s->arena, (unsigned int)st->d->ring_in, NULL);
	if (ring && shm_ring__asleep(ring)) {
		st->woken_ns = 0;
		return true;
	}
	if (!st->woken_ns)
		st->woken_ns = now;
	return false;
}

/* Its last sign of life, for the hang check: the last beat, or when we saw it woken. */
static uint64_t alive_at(const struct sup_stage *st)
{
	return MAX(last_beat(st), st->woken_ns);
}

/* When st counts as hung if it does not beat again; 0 when it is not watched.
 * Asleep: look again in a hang timeout (it may wake and hang meanwhile). */
static uint64_t hang_deadline(struct supervisor *s, struct sup_stage *st, uint64_t now)
{
	if (!st->pid || st->hung_killed || st->stop_asked)
		return 0;
	if (asleep(s, st, now))
		return now + beat_timeout_ns(s, st);
	return alive_at(st) + beat_timeout_ns(s, st);
}

static void check_hung(struct supervisor *s, uint64_t now)
{
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		struct sup_stage *st = &s->st[i];
		uint64_t last, timeout;

		if (!hang_deadline(s, st, now) || asleep(s, st, now))
			continue;
		last = alive_at(st);
		timeout = beat_timeout_ns(s, st);
		/* last may be newer than now: a spawn or a heartbeat since now was read. */
		if (last >= now || now - last <= timeout)
			continue;
		st->hung_for_ns = now - last;
		st->hung_starting = shm_stage__state(st->blk) == SHM_STATE_STARTING;
		log_error("%s (pid %d) hung%s: no heartbeat for %.1f s; killing it (SIGKILL)",
			  st->name, st->pid, st->hung_starting ? " while starting" : "",
			  (double)st->hung_for_ns / NSEC_PER_SEC);
		st->hung_killed = true;
		kill(st->pid, SIGKILL);
	}
}

static uint64_t cnt_drops(const struct shm_stage *blk, const struct shm_stage_desc *desc,
			  const uint64_t *last)
{
	static const unsigned int drops[] = {SHM_CNT_DROP_RING_FULL, SHM_CNT_DROP_RATE,
					     SHM_CNT_DROP_CORRUPT};
	uint64_t d = 0;

	for (unsigned int i = 0; i < ARRAY_SIZE(drops); i++)
		d += shm_stage__cnt(blk, drops[i]) - last[drops[i]];
	if (desc->drop_cnt)
		d += shm_stage__cnt(blk, desc->drop_cnt) - last[desc->drop_cnt];
	return d;
}

/* Something moved since the last line: a record in or out, a drop or a degraded one. */
static bool stats_moved(const struct supervisor *s)
{
	static const unsigned int moves[] = {SHM_CNT_IN, SHM_CNT_OUT, SHM_CNT_DEGRADED};

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		const struct sup_stage *st = &s->st[i];

		for (unsigned int k = 0; k < ARRAY_SIZE(moves); k++)
			if (shm_stage__cnt(st->blk, moves[k]) != st->last_cnt[moves[k]])
				return true;
		if (cnt_drops(st->blk, st->d, st->last_cnt))
			return true;
	}
	return false;
}

/*
 * Little moved since the last line: no drop, no degraded record, and the
 * producer's output stayed under a small batch per batch period
 * (SHM_BATCH_SMALL_RECS per SHM_BATCH_MS, shm/stage_loop.h): an idle host's
 * metrics records and a few samples, which the pipeline carries in stretched
 * batches.
 */
static bool stats_little(const struct supervisor *s, uint64_t now)
{
	uint64_t ms = (now - s->stats_line_ns) / NSEC_PER_MSEC;

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		const struct sup_stage *st = &s->st[i];

		if (cnt_drops(st->blk, st->d, st->last_cnt) ||
		    shm_stage__cnt(st->blk, SHM_CNT_DEGRADED) != st->last_cnt[SHM_CNT_DEGRADED])
			return false;
		if (st->d->role == SHM_ROLE_PRODUCER &&
		    (shm_stage__cnt(st->blk, SHM_CNT_OUT) - st->last_cnt[SHM_CNT_OUT]) *
				    SHM_BATCH_MS >=
			    (uint64_t)SHM_BATCH_SMALL_RECS * MAX(ms, (uint64_t)1))
			return false;
	}
	return true;
}

static void print_stats(struct supervisor *s)
{
	char line[1024];
	size_t n = 0;

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		struct sup_stage *st = &s->st[i];
		const struct shm_stage *blk = st->blk;
		uint64_t d_in = shm_stage__cnt(blk, SHM_CNT_IN) - st->last_cnt[SHM_CNT_IN];
		uint64_t d_out = shm_stage__cnt(blk, SHM_CNT_OUT) - st->last_cnt[SHM_CNT_OUT];
		uint64_t d_drop = cnt_drops(blk, st->d, st->last_cnt);
		uint64_t d_deg =
			shm_stage__cnt(blk, SHM_CNT_DEGRADED) - st->last_cnt[SHM_CNT_DEGRADED];
		const char *state = shm_state_name(shm_stage__state(blk));

		if (s->p.verbose) {
			char more[512];
			size_t m = 0;

			more[0] = 0;
			for (unsigned int c = 0; c < SHM_CNT_MAX && m < sizeof(more) - 1; c++) {
				const char *name = shm_counter_name(st->id, c);
				uint64_t d = shm_stage__cnt(blk, c) - st->last_cnt[c];

				if (!name || !d || c == SHM_CNT_IN || c == SHM_CNT_OUT)
					continue;
				m += (size_t)snprintf(more + m, sizeof(more) - m, " %s +%llu", name,
						      (unsigned long long)d);
			}
			log_info("stats %s: %s pid %d gen %u restarts %llu: in +%llu out +%llu "
				 "drops +%llu%s",
				 st->name, state, st->pid, blk->generation,
				 (unsigned long long)st->restarts, (unsigned long long)d_in,
				 (unsigned long long)d_out, (unsigned long long)d_drop, more);
		} else if (n < sizeof(line) - 1) {
			n += (size_t)snprintf(
				line + n, sizeof(line) - n, "%s%s %s in %llu out %llu drop %llu",
				i ? " | " : "", st->name, state, (unsigned long long)d_in,
				(unsigned long long)d_out, (unsigned long long)d_drop);
			if (d_deg && n < sizeof(line) - 1)
				n += (size_t)snprintf(line + n, sizeof(line) - n, " degraded %llu",
						      (unsigned long long)d_deg);
		}
		for (unsigned int c = 0; c < SHM_CNT_MAX; c++)
			st->last_cnt[c] = shm_stage__cnt(blk, c);
	}
	if (!s->p.verbose)
		log_info("stats: %s", line);
}

static void update_ready(struct supervisor *s)
{
	char buf[256];
	size_t n = 0;
	int running = 0;

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		struct sup_stage *st = &s->st[i];

		if (st->pid && shm_stage__state(st->blk) == SHM_STATE_RUNNING) {
			if (!st->seen_running)
				log_debug("%s (pid %d) running", st->name, st->pid);
			st->seen_running = true;
			st->ever_running = true;
			running++;
		}
	}
	if (s->phase != SUP_RUNNING)
		return;
	if (running == SHM_STAGE_MAX) {
		snprintf(buf, sizeof(buf), "running: %s", s->all_names);
		set_status(s, buf);
		if (!s->ready_sent) {
			for (int i = SHM_STAGE_MAX - 1; i >= 0; i--)
				n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s %d",
						      i == SHM_STAGE_MAX - 1 ? "" : ", ",
						      s->st[i].name, s->st[i].pid);
			log_info("all stages running (%s)", buf);
			notify(s, "READY=1\nSTATUS=%s", s->status);
			s->ready_sent = true;
			/* --duration counts sampled time: from here, not from a
			 * start-up that a loaded host may stretch. */
			if (s->p.duration_ms)
				s->stop_at_ns = clock_kernel_ns(CLOCK_MONOTONIC) +
						s->p.duration_ms * NSEC_PER_MSEC;
		}
		return;
	}
	n = (size_t)snprintf(buf, sizeof(buf), "degraded: %d of %d stages running", running,
			     SHM_STAGE_MAX);
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		const struct sup_stage *st = &s->st[i];

		if (n >= sizeof(buf) - 1)
			break;
		if (st->looping)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n,
					      ", %s failing repeatedly (%llu restarts)", st->name,
					      (unsigned long long)st->restarts);
		else if (st->restart_at_ns)
			n += (size_t)snprintf(buf + n, sizeof(buf) - n, ", %s restarting",
					      st->name);
	}
	set_status(s, buf);
}

static bool any_alive(const struct supervisor *s)
{
	for (int i = 0; i < SHM_STAGE_MAX; i++)
		if (s->st[i].pid)
			return true;
	return false;
}

/* Everything time-driven; runs after every wakeup, now read once for it. */
static void sup_step(struct supervisor *s, uint64_t now)
{
	if (s->phase == SUP_RUNNING && s->stop_at_ns && now >= s->stop_at_ns) {
		char why[64];

		snprintf(why, sizeof(why), "--duration %llu s elapsed",
			 (unsigned long long)(s->p.duration_ms / 1000));
		begin_stop(s, why);
	}
	if (s->phase == SUP_RUNNING || s->phase == SUP_STOPPING) {
		for (int i = SHM_STAGE_MAX - 1; i >= 0; i--) {
			struct sup_stage *st = &s->st[i];

			if (!st->restart_at_ns || now < st->restart_at_ns || st->pid)
				continue;
			st->restarts++;
			if (stage_spawn(s, st) < 0) {
				char what[128];

				snprintf(what, sizeof(what), "%s could not be started", st->name);
				stage_failed(s, st, what, 0, false);
			} else {
				log_printf(st->looping ? LOG_LVL_DEBUG : LOG_LVL_INFO,
					   "%s restarted (pid %d, generation %u, restart %llu)",
					   st->name, st->pid, st->blk->generation,
					   (unsigned long long)st->restarts);
			}
		}
		for (int i = 0; i < SHM_STAGE_MAX; i++)
			stage_healthy(s, &s->st[i], now);
		check_hung(s, now);
	}
	if (s->phase == SUP_STOPPING)
		stop_step_check(s, now);
	if (s->phase == SUP_KILLING && !any_alive(s))
		s->phase = SUP_DONE;
	update_ready(s);

	if (s->p.stats_every_ms && now >= s->next_stats_ns) {
		uint64_t every = s->p.stats_every_ms * NSEC_PER_MSEC;

		/* A pipeline where nothing moved has no line; three turns in a
		 * row where little moved (not a start-up's pause; an idle host's
		 * metrics records and a few samples) and the line has no
		 * deadline of its own: it comes at a wakeup for other work (a
		 * hang check, within a hang timeout) with what moved meanwhile
		 * (quiet), until a turn finds more moving. */
		bool moved = stats_moved(s);

		s->stats_still = !moved || stats_little(s, now) ? s->stats_still + 1 : 0;
		s->stats_quiet = s->stats_still >= STATS_QUIET_TURNS;
		if (s->phase == SUP_RUNNING && moved) {
			print_stats(s);
			s->stats_line_ns = now;
		}
		/* Keep the phase: a late wakeup must not push every later line back. */
		s->next_stats_ns += every;
		if (s->next_stats_ns <= now)
			s->next_stats_ns = now + every;
	}
	if (s->notify.watchdog_usec && now >= s->next_watchdog_ns) {
		notify(s, "%s", "WATCHDOG=1");
		s->next_watchdog_ns = now + s->notify.watchdog_usec * 1000 / 2;
	}
}

/* How long epoll may sleep: until the nearest deadline. A stage's hang
 * deadline is its last heartbeat + the hang timeout, read now; a stage that
 * beats meanwhile only moves it later, so waking at it checks in time. */
static int next_timeout_ms(struct supervisor *s, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	int64_t ms;

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		uint64_t hang = s->phase == SUP_RUNNING || s->phase == SUP_STOPPING
					? hang_deadline(s, &s->st[i], now)
					: 0;

		if (hang)
			next = MIN(next, hang + NSEC_PER_MSEC);
		if (s->st[i].restart_at_ns)
			next = MIN(next, s->st[i].restart_at_ns);
		/* The end of a failure streak is logged when it happens. */
		if (s->st[i].pid && s->st[i].seen_running &&
		    (s->st[i].fast_fails || s->st[i].backoff_ms > BACKOFF_MIN_MS))
			next = MIN(next, s->st[i].spawn_ns + s->p.healthy_ms * NSEC_PER_MSEC);
		if (s->st[i].pid && s->st[i].stop_asked && s->st[i].deadline_ns)
			next = MIN(next, s->st[i].deadline_ns);
		/* A starting stage is polled until it says RUNNING (READY=1 waits on it). */
		if (s->st[i].pid && !s->st[i].seen_running)
			next = MIN(next, now + 50 * NSEC_PER_MSEC);
	}
	if (s->stop_at_ns && s->phase == SUP_RUNNING)
		next = MIN(next, s->stop_at_ns);
	if (s->notify.watchdog_usec)
		next = MIN(next, s->next_watchdog_ns);
	if (s->p.stats_every_ms && s->phase == SUP_RUNNING && !s->stats_quiet)
		next = MIN(next, s->next_stats_ns);
	if (next == UINT64_MAX)
		return -1; /* nothing due: only a signal wakes us */
	if (next <= now)
		return 0;
	ms = (int64_t)((next - now + NSEC_PER_MSEC - 1) / NSEC_PER_MSEC);
	return (int)MIN(ms, (int64_t)INT32_MAX);
}

static int handle_signals(struct supervisor *s)
{
	struct signalfd_siginfo si;
	ssize_t n;

	while ((n = read(s->sigfd, &si, sizeof(si))) == sizeof(si)) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap_children(s);
			break;
		case SIGINT:
		case SIGTERM:
			if (s->phase == SUP_RUNNING) {
				char why[32];

				snprintf(why, sizeof(why), "SIG%s",
					 sigabbrev_np((int)si.ssi_signo));
				begin_stop(s, why);
			} else if (s->phase == SUP_STOPPING) {
				kill_all(s);
			}
			break;
		case SIGHUP:
			log_info("SIGHUP: nothing to reload (restart stages with 'cpa ctl')");
			break;
		}
	}
	if (n < 0 && errno != EAGAIN)
		return log_error_errno(-errno, "read signalfd: %m");
	/* SIGCHLD coalesces: whatever the signals were, reap what is there. */
	reap_children(s);
	return 0;
}

/*
 * How the stages' memory is held: their own cache caps (mem_limit_mb, from
 * --max_cache_size_mb, live through cpa ctl mem) and an RLIMIT_AS backstop.
 * A cgroup v2 memory.max per stage would be the kernel's enforcement; it
 * needs the memory controller delegated to our cgroup, which is said once.
 */
static void log_memory_limits(struct supervisor *s)
{
	const struct cpa_config *cfg = shm_arena__config(s->arena);
	uint64_t mb = cfg->max_cache_size_mb ? cfg->max_cache_size_mb : 1024;
	_cleanup_free_ char *ctrl = NULL;
	enum shm_stage_id capped = SHM_STAGE_MAX;
	const char *v2 = NULL;
	char names[128] = "";
	size_t len, n = 0;
	int nr = 0, k = 0;

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		if (!__atomic_load_n(&s->st[i].blk->mem_limit_mb, __ATOMIC_RELAXED))
			__atomic_store_n(&s->st[i].blk->mem_limit_mb, mb, __ATOMIC_RELAXED);
		nr += !!(s->st[i].d->limits & SHM_LIMIT_MEM);
	}
	/* "unwindd and symd": the stages with a cache */
	for (int i = 0; i < SHM_STAGE_MAX && n < sizeof(names); i++) {
		if (!(s->st[i].d->limits & SHM_LIMIT_MEM))
			continue;
		capped = (enum shm_stage_id)i;
		k++;
		n += (size_t)snprintf(names + n, sizeof(names) - n, "%s%s",
				      k == 1	? ""
				      : k == nr ? " and "
						: ", ",
				      s->st[i].name);
	}
	if (read_full_file("/sys/fs/cgroup/cgroup.controllers", 0, 4096, &ctrl, &len) == 0)
		v2 = "/sys/fs/cgroup";
	else if (read_full_file("/sys/fs/cgroup/unified/cgroup.controllers", 0, 4096, &ctrl,
				&len) == 0)
		v2 = "/sys/fs/cgroup/unified";
	if (ctrl)
		ctrl[strcspn(ctrl, "\n")] = 0;
	log_info("memory: %s keep their caches under %llu MiB each (cpa ctl mem "
		 "changes it live), RLIMIT_AS %llu MiB as a backstop%s; no cgroup memory.max "
		 "(%s%s%s%s)",
		 names, (unsigned long long)mb,
		 (unsigned long long)(supervisor__as_limit(capped, mb) >> 20),
		 supervisor__as_limit(capped, mb) ? "" : " (none: sanitizer build)",
		 v2 ? "the cgroup v2 hierarchy at " : "no cgroup v2 hierarchy", v2 ? v2 : "",
		 v2 ? " has controllers: " : "", v2 ? (*ctrl ? ctrl : "none") : "");
}

/*
 * The store directory is where root's stages write and the storer creates
 * directories: whoever else may write it could plant symlinks or dirs there.
 * It must be owned by root or by us and not writable by others.
 */
static int check_store_dir(const struct supervisor *s)
{
	const char *dir = shm_arena__config(s->arena)->store_dir;
	struct stat sb;

	if (!dir[0])
		return 0;
	if (stat(dir, &sb) < 0)
		return log_error_errno(-errno, "--store_dir '%s': %m", dir);
	if (sb.st_uid != 0 && sb.st_uid != geteuid()) {
		log_error("--store_dir '%s': owned by uid %u, not by root or uid %u: refused", dir,
			  (unsigned int)sb.st_uid, (unsigned int)geteuid());
		return -EPERM;
	}
	if (sb.st_mode & S_IWOTH) {
		log_error("--store_dir '%s': writable by anyone (mode %04o): refused", dir,
			  (unsigned int)(sb.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

/* The table's names in the words of the log and STATUS= lines: every stage
 * in pipeline order, and the stop order (producers first, then drains). */
static void stage_lists(struct supervisor *s)
{
	size_t a = 0, o = 0;
	bool drains = false;

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		const struct shm_stage_desc *d = &shm_stages[i];
		bool producer = d->role == SHM_ROLE_PRODUCER;
		const char *sep = !producer && !drains ? (o ? ", then drain " : "drain ")
				  : o		       ? ", "
						       : "";

		if (a < sizeof(s->all_names))
			a += (size_t)snprintf(s->all_names + a, sizeof(s->all_names) - a, "%s%s",
					      i ? ", " : "", d->name);
		if (o < sizeof(s->stop_order))
			o += (size_t)snprintf(s->stop_order + o, sizeof(s->stop_order) - o,
					      "%s%s%s", sep, d->name, producer ? " first" : "");
		drains = drains || !producer;
	}
}

static int sup_setup(struct supervisor *s)
{
	struct epoll_event ev = {.events = EPOLLIN};
	sigset_t mask;
	int r;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	s->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->sigfd < 0)
		return log_error_errno(-errno, "signalfd: %m");
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->epfd < 0)
		return log_error_errno(-errno, "epoll_create1: %m");
	ev.data.fd = s->sigfd;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->sigfd, &ev) < 0)
		return log_error_errno(-errno, "epoll_ctl: %m");

	r = sd_notifier__open(&s->notify);
	if (r < 0)
		log_warn_errno(r,
			       "NOTIFY_SOCKET/WATCHDOG_USEC malformed, not notifying systemd: %m");
	if (s->notify.watchdog_usec)
		log_debug("systemd watchdog: pinging every %llu ms",
			  (unsigned long long)(s->notify.watchdog_usec / 2000));

	s->envp = build_envp();
	if (!s->envp)
		return log_error_errno(-ENOMEM, "out of memory");

	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		struct sup_stage *st = &s->st[i];

		st->id = (enum shm_stage_id)i;
		st->d = &shm_stages[i];
		st->name = st->d->name;
		st->blk = shm_arena__stage(s->arena, st->id);
		st->backoff_ms = BACKOFF_MIN_MS;
		if ((size_t)snprintf(st->path, sizeof(st->path), "%s/%s", s->p.stage_dir,
				     st->name) >= sizeof(st->path))
			return log_error_errno(-ENAMETOOLONG, "stage path too long");
	}
	stage_lists(s);
	log_memory_limits(s);
	return check_store_dir(s);
}

static void sup_teardown(struct supervisor *s)
{
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->sigfd >= 0)
		close(s->sigfd);
	sd_notifier__close(&s->notify);
	free(s->envp);
}

int supervisor__run(struct shm_arena *arena, const struct supervisor_params *p)
{
	/* On the heap: 21 KB (stage paths, argv) under a 21 KB cmd_monitor()
	 * made the monitor's own samples need a 44 KB stack copy, past the
	 * adaptive copy's cap (`[unwind stopped: stack read]` in every
	 * whole-machine profile). */
	_cleanup_free_ struct supervisor *s = calloc(1, sizeof(*s));
	int r;

	if (!s) {
		log_error_errno(-ENOMEM, "allocate the supervisor: %m");
		return 1;
	}
	s->arena = arena;
	s->p = *p;
	/* For the stages to read (none sizes its sleeps by it: an idle stage
	 * sleeps in its input wait without a heartbeat, SHM_SLOT_ASLEEP). */
	shm_arena__config(arena)->hang_timeout_ms = (uint32_t)MIN(p->hang_timeout_ms, UINT32_MAX);
	s->epfd = -1;
	s->sigfd = -1;
	s->argv_verbose = p->verbose ? (char *)"--verbose" : NULL;

	r = sup_setup(s);
	if (r < 0)
		goto out;

	s->start_ns = clock_kernel_ns(CLOCK_MONOTONIC);
	/* Until every stage runs (then the clock restarts): start-up gets
	 * SUP_DURATION_STARTUP_MS on top, so a pipeline that never comes up
	 * still ends. */
	s->stop_at_ns = p->duration_ms ? s->start_ns + (p->duration_ms + SUP_DURATION_STARTUP_MS) *
							       NSEC_PER_MSEC
				       : 0;
	s->next_stats_ns = s->start_ns + p->stats_every_ms * NSEC_PER_MSEC;
	s->stats_line_ns = s->start_ns;
	s->next_watchdog_ns = s->start_ns;
	set_status(s, "starting stages");

	/* Consumers first, so capture's first records already have a reader. */
	for (int i = SHM_STAGE_MAX - 1; i >= 0; i--) {
		r = stage_spawn(s, &s->st[i]);
		if (r < 0) {
			s->exit_code = 1;
			begin_stop(s, "a stage could not be started");
			break;
		}
	}

	/*
	 * One clock read per wakeup, shared by the step and the next timeout
	 * (on this kind of VM every syscall of an idle tick is ~10-50 us). A
	 * deadline set during the step from a later clock read is at most that
	 * step's length late. Children are reaped when SIGCHLD says so
	 * (handle_signals), not on every wakeup.
	 */
	while (s->phase != SUP_DONE) {
		struct epoll_event evs[4];
		uint64_t now;
		int n;

		now = clock_kernel_ns(CLOCK_MONOTONIC);
		sup_step(s, now);
		if (s->phase == SUP_DONE)
			break;
		n = epoll_wait(s->epfd, evs, ARRAY_SIZE(evs), next_timeout_ms(s, now));
		if (n < 0 && errno != EINTR) {
			r = log_error_errno(-errno, "epoll_wait: %m");
			kill_all(s);
			continue;
		}
		for (int i = 0; i < n; i++)
			if (evs[i].data.fd == s->sigfd)
				handle_signals(s);
	}
	r = 0;
out:
	if (r < 0)
		s->exit_code = 1;
	if (s->permanent) {
		s->exit_code = SHM_EXIT_PERMANENT;
		/* What `systemctl status` shows once the service has failed. */
		set_status(s, s->permanent_status);
	}
	if (s->exit_code == 0)
		log_info("all stages stopped and drained");
	else
		log_error("stopped with errors (exit code %d)", s->exit_code);
	sup_teardown(s);
	return s->exit_code;
}
