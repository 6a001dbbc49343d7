// SPDX-License-Identifier: MIT
/*
 * bench_torture: crash-consistency torture of the whole pipeline (issue 14,
 * docs/reliability.md "Kills and hangs").
 *
 * Runs the real `cpa monitor --pid LOAD` (real BPF) over a load of one busy
 * thread pinned to each CPU, and SIGKILLs a random stage (capture, unwindd,
 * symd, storer, or the monitor itself, after which a new monitor starts on
 * the same store) at random moments. After every kill the store must open
 * and read with no corrupt block. At the end it checks the accounting:
 *
 *   produced (capture's CAP_CNT_PRODUCED: what the BPF side produced, each
 *   generation, a killed one's last second added by its successor)
 *     = stored (on-CPU rows) + lost (loss rows, by reason)
 *       + in the rings when a monitor kill took the arena (counted here)
 *
 * and that no (thread, second) holds more samples than its CPU's timer can
 * make (freq + 2: the timer is per CPU and each thread is pinned, so a
 * duplicate shows as an excess; +1 for the boundary, +1 for the clock offset
 * being recomputed every second). Prints a table; exit 0 when unaccounted,
 * duplicates and corrupt blocks are all 0, 1 otherwise, 77 without root/BPF.
 *
 *   bench_torture [--kills N | --per_stage N] [--freq HZ] [--seed S] [--keep DIR]
 *                 [--pace MIN:MAX] [--duty PCT] [--healthy MS] [--hangs MS]
 *                 [--stall PCT] [--victims NAME,...] [--stop_after_kill MS]
 *                 [--replay N:G] [--hang_at_stop NAME] [--kill_at_stop storer]
 *
 * --per_stage N kills until each of the five victims has been killed N times
 * (the long run: 500 each); --pace the pause before a kill, in ms (default
 * 300:2000); --duty the share of each 10 ms the load threads spin (default
 * 100: a shared machine's long run may take less); --healthy sets the
 * monitor's CPA_HEALTHY_MS so that a stage killed every few seconds keeps a
 * short restart backoff (docs/supervisor.md, "Knobs for tests"); --stall PCT
 * keeps unwindd SIGSTOPped over the pause before PCT % of the kills and
 * resumes it after the kill (300 ms after a monitor's), so that the victim
 * dies with ring 0 full and capture dropping, and an orphaned capture stops
 * with ring 0 full (keep the pause under the hang timeout, or the stall
 * becomes a hang-kill of unwindd); --victims limits the kills to some of
 * capture, unwindd, symd, storer, monitor; --stop_after_kill MS stops the
 * monitor MS after the last kill, not once every stage runs again (0: before
 * the monitor reaped the victim; a little later: while it waits out its
 * restart backoff); --replay N:G makes lives 1..G of unwindd and of symd die
 * right after committing the output of their N-th batch, before releasing its
 * input (CPA_FAULT_KILL_AFTER_COMMIT, shm/fault.h), so each successor sends
 * that batch again, and those of the storer at their first release, once the
 * block's write landed, so each successor reads that block's input again;
 * the run then fails unless symd or the storer skipped copies, and the balance
 * must hold as always; --hang_at_stop NAME SIGSTOPs
 * unwindd, symd or the storer just before the SIGINT, with a drain timeout of
 * 3 s, so the monitor kills it at stop: what it held must be in the store as
 * lost (docs/pipeline.md, "Stopping"); --kill_at_stop storer kills the
 * storer at its drain's release, once the last blocks' writes landed
 * (CPA_FAULT_KILL_AFTER_COMMIT=storer:1:1 with --record_interval 60: its
 * first block closes at the drain), so the monitor counts what it held at
 * stop while the store has it: the run fails unless the storer died there.
 *
 * Every capture gap must be marked: the not_sampled_while_down rows stored
 * equal capture's CAP_CNT_DOWN_EST over the monitors (unless a monitor kill
 * took an estimate with the arena), and a run that killed capture before an
 * ordinary stop has some.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/timeutil.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "shm/records.h"
#include "shm/ring.h"
#include "shm/stage.h"
#include "storer/store.h"

#define NSTAGES	    SHM_STAGE_MAX
#define VICTIM_MON  NSTAGES /* the monitor */
#define MAX_REASONS 32

struct reason {
	char name[96];
	uint64_t count;
};

struct tally {
	uint64_t kills[NSTAGES + 1];
	uint64_t produced, lost_died_cnt, in_rings, monitors;
	uint64_t copies; /* skipped as copies by symd and the storer (shm/dedup.h) */
	uint64_t stored, lost, down_est, dup_excess, corrupt, torn, read_fail, reads;
	uint64_t down_marked; /* capture's CAP_CNT_DOWN_EST, every monitor */
	struct reason reasons[MAX_REASONS];
	unsigned int n_reasons;
};

static char bindir[PATH_MAX], store[PATH_MAX], logpath[PATH_MAX + 16];
static bool kill_at_stop; /* --kill_at_stop storer */
static unsigned int freq = 199, duty = 100;

static void msleep(unsigned int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ------------------------------------------------------------------ load */

static void *spin(void *arg)
{
	cpu_set_t set;
	volatile uint64_t x = 0;

	CPU_ZERO(&set);
	CPU_SET((int)(intptr_t)arg, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (duty >= 100)
		for (;;)
			x++;
	for (;;) {
		uint64_t end = clock_ns(CLOCK_MONOTONIC) + duty * 100000ULL;

		while (clock_ns(CLOCK_MONOTONIC) < end)
			x++;
		usleep((100 - duty) * 100);
	}
	return NULL;
}

static pid_t load_start(unsigned int ncpu)
{
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (nice(5) < 0) {
		/* not fatal */
	}
	for (unsigned int i = 1; i < ncpu; i++) {
		pthread_t t;

		pthread_create(&t, NULL, spin, (void *)(intptr_t)i);
	}
	spin((void *)0);
	_exit(0);
}

/* --------------------------------------------------------------- monitor */

static pid_t monitor_start(pid_t load)
{
	char cpa[PATH_MAX + 8], pidarg[16], farg[16];
	pid_t pid = fork();

	if (pid != 0)
		return pid;
	snprintf(cpa, sizeof(cpa), "%s/cpa", bindir);
	snprintf(pidarg, sizeof(pidarg), "%d", (int)load);
	snprintf(farg, sizeof(farg), "%u", freq);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);

	if (fd >= 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
	}
	/* --kill_at_stop: blocks of 60 s, the run's first closes at the drain. */
	execl(cpa, cpa, "monitor", "--pid", pidarg, "-F", farg, "--store_dir", store,
	      "--log_print_cycles", "0", kill_at_stop ? "--record_interval" : (char *)NULL, "60",
	      (char *)NULL);
	_exit(127);
}

/* Every stage RUNNING, and each one killed since a newer generation: a stage
 * SIGKILLed a moment ago still reads RUNNING until the monitor reaps it. */
static bool all_running(struct shm_arena *a, const uint32_t *killed_gen)
{
	for (int s = 0; s < NSTAGES; s++) {
		struct shm_stage *st = shm_arena__stage(a, s);

		if (shm_stage__state(st) != SHM_STATE_RUNNING ||
		    __atomic_load_n(&st->generation, __ATOMIC_ACQUIRE) <= killed_gen[s])
			return false;
	}
	return true;
}

/* All four stages RUNNING within timeout_ms: the arena attached in *ret. */
static int monitor_wait_running(pid_t mon, unsigned int timeout_ms, struct shm_arena **ret)
{
	static const uint32_t none[NSTAGES]; /* a new arena: nothing killed yet */
	struct shm_arena *a = NULL;

	for (unsigned int t = 0; t < timeout_ms; t += 50, msleep(50)) {
		if (waitpid(mon, NULL, WNOHANG) == mon)
			return -ECHILD;
		if (!a && shm_arena__attach_pid(mon, &a) < 0)
			continue;
		if (all_running(a, none)) {
			*ret = a;
			return 0;
		}
	}
	shm_arena__free(a);
	return -ETIMEDOUT;
}

static bool pid_alive(pid_t p)
{
	return p > 0 && (kill(p, 0) == 0 || errno != ESRCH);
}

/* SIGCONT a stage stopped for a stall (--stall), once. */
static void resume(pid_t *stalled)
{
	if (*stalled)
		kill(*stalled, SIGCONT);
	*stalled = 0;
}

/* Samples (and sample losses) left in the rings of a dead arena: records past
 * each consumer's position whose seq is above its mark (not passed on). */
static uint64_t rings_residue(struct shm_arena *a)
{
	static const unsigned int rings[] = {SHM_RING_CAPTURE, SHM_RING_UNWIND, SHM_RING_SYMD};
	uint64_t n = 0;

	for (unsigned int i = 0; i < 3; i++) {
		struct shm_ring_cons c;
		struct shm_msg m;
		uint64_t mark;

		if (shm_arena__open_cons(a, rings[i], &c) < 0)
			continue;
		mark = shm_ring__mark_sc(&c);
		while (shm_ring__peek_sc(&c, &m) == 0) {
			uint64_t seq;

			if (m.len < 8)
				continue;
			memcpy(&seq, m.data, 8);
			if (seq <= mark)
				continue;
			if (m.type == CPA_REC_LOSS && m.len >= sizeof(struct cpa_loss)) {
				const struct cpa_loss *l = m.data;

				n += l->kind != CPA_KIND_OFFCPU ? l->count : 0;
			} else if ((m.type == CPA_REC_SAMPLE &&
				    m.len >= sizeof(struct cpa_sample) &&
				    ((const struct cpa_sample *)m.data)->kind != CPA_KIND_OFFCPU) ||
				   (m.type == CPA_REC_FRAMES &&
				    m.len >= sizeof(struct cpa_frames) &&
				    ((const struct cpa_frames *)m.data)->kind != CPA_KIND_OFFCPU) ||
				   (m.type == CPA_REC_SAMPLE_OUT &&
				    m.len >= sizeof(struct cpa_sample_out) &&
				    ((const struct cpa_sample_out *)m.data)->kind !=
					    CPA_KIND_OFFCPU)) {
				n++;
			}
		}
	}
	return n;
}

/* A monitor is gone (killed or stopped): wait for its stages, take its counts. */
static void monitor_gone(struct shm_arena *a, bool killed, struct tally *t)
{
	struct shm_stage *cap = shm_arena__stage(a, SHM_STAGE_CAPTURE);

	for (unsigned int i = 0; i < 400; i++) {
		bool any = false;

		for (int s = 0; s < NSTAGES; s++)
			any |= pid_alive(shm_arena__stage(a, s)->pid);
		if (!any)
			break;
		msleep(50);
	}
	uint64_t produced = shm_stage__cnt(cap, CAP_CNT_PRODUCED), residue = 0;
	uint64_t copies = shm_stage__cnt(shm_arena__stage(a, SHM_STAGE_SYMD), SHM_CNT_DROP_DUP) +
			  shm_stage__cnt(shm_arena__stage(a, SHM_STAGE_STORER), SHM_CNT_DROP_DUP);

	t->produced += produced;
	t->lost_died_cnt += shm_stage__cnt(cap, CAP_CNT_LOST_DIED);
	t->down_marked += shm_stage__cnt(cap, CAP_CNT_DOWN_EST);
	if (killed)
		residue = rings_residue(a);
	t->in_rings += residue;
	t->copies += copies;
	t->monitors++;
	/* Per monitor, for a failed balance: each monitor writes its own store dir. */
	printf("torture: monitor %" PRIu64 " %s: produced %" PRIu64 ", in the rings %" PRIu64
	       ", dropped on a full ring 0 %" PRIu64 ", copies skipped %" PRIu64 "\n",
	       t->monitors, killed ? "killed" : "stopped", produced, residue,
	       shm_stage__cnt(cap, SHM_CNT_DROP_RING_FULL), copies);
	fflush(stdout);
	shm_arena__free(a);
}

/* ----------------------------------------------------------------- store */

struct tid_sec {
	uint64_t key; /* tid << 32 | (sec & 0xffffffff), 0 = empty */
	uint64_t count;
};

struct scan {
	struct tally *t;
	bool final;
	uint64_t stored, lost, down_est;
	struct tid_sec *tab;
	size_t cap, n;
};

static void tab_add(struct scan *s, uint64_t key, uint64_t count)
{
	size_t i;

	if (s->n * 2 >= s->cap) {
		struct tid_sec *old = s->tab;
		size_t oc = s->cap;

		s->cap = oc ? oc * 2 : 4096;
		s->tab = calloc(s->cap, sizeof(*s->tab));
		if (!s->tab)
			abort();
		s->n = 0;
		for (size_t j = 0; j < oc; j++)
			if (old[j].key)
				tab_add(s, old[j].key, old[j].count);
		free(old);
	}
	for (i = (key * 0x9e3779b97f4a7c15ull) >> 20 & (s->cap - 1); s->tab[i].key;
	     i = (i + 1) & (s->cap - 1))
		if (s->tab[i].key == key) {
			s->tab[i].count += count;
			return;
		}
	s->tab[i] = (struct tid_sec){key, count};
	s->n++;
}

static int on_row(void *ctx, const struct store_sample *r)
{
	struct scan *s = ctx;
	struct tally *t = s->t;

	if (r->kind == CPA_KIND_OFFCPU)
		return 0;
	if (!r->lost) {
		s->stored += r->count;
		if (s->final)
			tab_add(s, (uint64_t)r->tid << 32 | ((uint64_t)r->sec & 0xffffffffu),
				r->count);
		return 0;
	}
	const char *name = r->n_frames ? r->frames[0]->name : "[lost: ?]";
	unsigned int i;

	/* An estimate of samples never taken (no capture ran): not produced. */
	if (strstr(name, "while_down"))
		s->down_est += r->count;
	else
		s->lost += r->count;
	if (!s->final)
		return 0;

	for (i = 0; i < t->n_reasons; i++)
		if (!strcmp(t->reasons[i].name, name))
			break;
	if (i == t->n_reasons && i < MAX_REASONS)
		snprintf(t->reasons[t->n_reasons++].name, sizeof(t->reasons[0].name), "%s", name);
	if (i < MAX_REASONS)
		t->reasons[i].count += r->count;
	return 0;
}

static void on_notice(void *ctx, const char *msg)
{
	(void)ctx;
	fprintf(stderr, "torture: store notice: %s\n", msg);
}

/* Read every store dir under the root; with final, the tallies too. */
static int store_scan(struct tally *t, bool final)
{
	struct scan s = {.t = t, .final = final};
	char **names = NULL;
	uint32_t n = 0;
	int r = store_root__list(store, &names, &n);

	if (r < 0)
		return r;
	for (uint32_t i = 0; i < n; i++) {
		char p[PATH_MAX + 256], err[256];
		struct store_reader *sr;
		struct store_read_stats st;
		struct store_filter f;
		uint64_t first, last, recs;

		snprintf(p, sizeof(p), "%s/%s", store, names[i]);
		r = store_reader__open_err(p, on_notice, NULL, &sr, err, sizeof(err));
		if (r == -ENOENT)
			continue; /* created, nothing written yet */
		if (r < 0) {
			fprintf(stderr, "torture: cannot read %s: %s\n", p, err);
			t->read_fail++;
			continue;
		}
		store_filter__init(&f);
		r = store_reader__range(sr, &first, &last, &recs);
		if (r == 0)
			r = store_reader__query(sr, first, last + 2 * NSEC_PER_SEC, &f, on_row, &s);
		else if (r == -ENOENT || r == -ENODATA)
			r = 0;
		if (r < 0) {
			fprintf(stderr, "torture: query %s: %s\n", p, store_reader__error(sr));
			t->read_fail++;
		}
		if (final)
			printf("torture: store dir %s: stored %" PRIu64 ", lost %" PRIu64
			       " (running totals)\n",
			       names[i], s.stored, s.lost);
		store_reader__stats(sr, &st);
		if (st.blocks_corrupt) {
			fprintf(stderr, "torture: %s: %" PRIu64 " corrupt block(s)\n", p,
				st.blocks_corrupt);
			t->corrupt += st.blocks_corrupt;
		}
		if (final)
			t->torn += st.blocks_torn;
		store_reader__free(sr);
	}
	store_root__list_free(names, n);
	t->reads++;
	if (final) {
		t->stored = s.stored;
		t->lost = s.lost;
		t->down_est = s.down_est;
		for (size_t i = 0; i < s.cap; i++)
			if (s.tab[i].count > freq + 2)
				t->dup_excess += s.tab[i].count - (freq + 2);
	}
	free(s.tab);
	return 0;
}

/* ----------------------------------------------------------------- hangs */

/*
 * SIGSTOP each stage in turn (a hang: a stopped or spinning stage both stop
 * heartbeating) and check that the monitor finds it by its heartbeat,
 * SIGKILLs and restarts it, and that capture kept producing meanwhile.
 * Returns the number of failed checks.
 */
static int hangs_run(struct shm_arena *a, unsigned int hang_ms)
{
	static const char *const names[] = {"capture", "unwindd", "symd", "storer"};
	struct shm_stage *cap = shm_arena__stage(a, SHM_STAGE_CAPTURE);
	int fails = 0;

	printf("\n| stopped stage | restarted after (s) | produced meanwhile | dropped/lost upstream "
	       "meanwhile | lost_with_capture meanwhile |\n|---|---|---|---|---|\n");
	for (int s = 0; s < NSTAGES; s++) {
		struct shm_stage *st = shm_arena__stage(a, s);
		uint32_t gen = st->generation;
		pid_t pid = st->pid;
		uint64_t p0 = shm_stage__cnt(cap, CAP_CNT_PRODUCED);
		uint64_t d0 = shm_stage__cnt(cap, SHM_CNT_DROP_RING_FULL) +
			      shm_stage__cnt(cap, CAP_CNT_BPF_RB_LOST);
		uint64_t l0 = shm_stage__cnt(cap, CAP_CNT_LOST_DIED);
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), dt = 0;
		bool back = false;

		kill(pid, SIGSTOP);
		while (clock_ns(CLOCK_MONOTONIC) - t0 <
		       4ull * hang_ms * NSEC_PER_MSEC + 30 * NSEC_PER_SEC) {
			msleep(100);
			if (st->generation != gen && shm_stage__state(st) == SHM_STATE_RUNNING) {
				back = true;
				dt = clock_ns(CLOCK_MONOTONIC) - t0;
				break;
			}
		}
		/* For the capture row the successor has folded what the stopped
		 * one produced: PRODUCED and LOST_DIED; for the others, the
		 * stopped stage's upstream (capture) went on sampling. */
		msleep(1500);
		uint64_t p1 = shm_stage__cnt(cap, CAP_CNT_PRODUCED);
		uint64_t d1 = shm_stage__cnt(cap, SHM_CNT_DROP_RING_FULL) +
			      shm_stage__cnt(cap, CAP_CNT_BPF_RB_LOST);
		uint64_t l1 = shm_stage__cnt(cap, CAP_CNT_LOST_DIED);

		printf("| %s | %s%.1f | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " |\n", names[s],
		       back ? "" : "NOT ", (double)dt / 1e9, p1 - p0, d1 - d0, l1 - l0);
		if (!back) {
			fprintf(stderr, "torture: %s was not restarted after SIGSTOP\n", names[s]);
			kill(pid, SIGCONT);
			fails++;
		}
		if (p1 == p0) {
			fprintf(stderr, "torture: nothing was produced while %s hung\n", names[s]);
			fails++;
		}
		if (s == SHM_STAGE_CAPTURE && l1 == l0) {
			fprintf(stderr, "torture: what the stopped capture produced was not "
					"counted as lost\n");
			fails++;
		}
	}
	return fails;
}

/* ------------------------------------------------------------------ main */

/* --victims: a comma-separated list of stage names and "monitor", as a mask. */
static unsigned int victims_parse(const char *arg)
{
	unsigned int mask = 0;
	char buf[128], *save = NULL;

	snprintf(buf, sizeof(buf), "%s", arg);
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned int v = shm_stage_by_name(tok, strlen(tok));

		if (v == NSTAGES && strcmp(tok, "monitor") != 0)
			return 0;
		mask |= 1u << v;
	}
	return mask;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_torture [--kills N | --per_stage N] [--freq HZ] [--seed S] "
			"[--keep DIR] [--pace MIN:MAX] [--duty PCT] [--healthy MS] [--hangs MS] "
			"[--stall PCT] [--victims NAME,...] [--stop_after_kill MS] [--replay N:G] "
			"[--hang_at_stop NAME] [--kill_at_stop storer]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned int kills = 50, seed = (unsigned int)time(NULL), ncpu, hang_ms = 0;
	unsigned int per_stage = 0, pace_min = 300, pace_max = 2000, stall = 0, stalls = 0;
	unsigned int victims = (1u << (NSTAGES + 1)) - 1;
	uint32_t killed_gen[NSTAGES] = {}; /* each stage's generation last killed */
	int stop_after_kill = -1;	   /* ms, -1: once every stage runs again */
	pid_t stalled;
	const char *healthy = NULL;
	unsigned int replay_n = 0, replay_g = 0;
	int hang_at_stop = -1; /* stage SIGSTOPped before the SIGINT */
	bool ok, down_ok, storer_killed = false;
	int hang_fails = 0;
	const char *keep = NULL;
	struct shm_arena *a = NULL;
	struct tally t = {};
	pid_t load, mon;
	uint64_t t0, accounted;
	int64_t unaccounted;
	char self[PATH_MAX];
	ssize_t len;
	int r;

	for (int i = 1; i < argc; i++) {
		if (i + 1 >= argc)
			usage();
		if (!strcmp(argv[i], "--kills"))
			kills = (unsigned int)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--freq"))
			freq = (unsigned int)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--seed"))
			seed = (unsigned int)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--keep"))
			keep = argv[++i];
		else if (!strcmp(argv[i], "--hangs"))
			hang_ms = (unsigned int)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--per_stage"))
			per_stage = (unsigned int)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--duty"))
			duty = (unsigned int)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--stop_after_kill"))
			stop_after_kill = (int)strtol(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--stall"))
			stall = (unsigned int)strtoul(argv[++i], NULL, 10);
		else if (!strcmp(argv[i], "--victims")) {
			victims = victims_parse(argv[++i]);
			if (!victims)
				usage();
		} else if (!strcmp(argv[i], "--replay")) {
			if (sscanf(argv[++i], "%u:%u", &replay_n, &replay_g) != 2 || !replay_n ||
			    !replay_g)
				usage();
		} else if (!strcmp(argv[i], "--hang_at_stop")) {
			i++;
			hang_at_stop = (int)shm_stage_by_name(argv[i], strlen(argv[i]));
			if (hang_at_stop <= SHM_STAGE_CAPTURE || hang_at_stop >= NSTAGES)
				usage();
		} else if (!strcmp(argv[i], "--kill_at_stop")) {
			if (strcmp(argv[++i], "storer"))
				usage();
			kill_at_stop = true;
		} else if (!strcmp(argv[i], "--healthy"))
			healthy = argv[++i];
		else if (!strcmp(argv[i], "--pace")) {
			if (sscanf(argv[++i], "%u:%u", &pace_min, &pace_max) != 2 ||
			    pace_max < pace_min)
				usage();
		} else
			usage();
	}
	if (!duty || duty > 100 || stall > 100 || (kill_at_stop && replay_n))
		usage();
	if (per_stage)
		kills = per_stage * (unsigned int)__builtin_popcount(victims);
	if (geteuid() != 0) {
		fprintf(stderr, "torture: needs root (BPF): skipped\n");
		return 77;
	}
	len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (len <= 0)
		return 1;
	self[len] = '\0';
	snprintf(bindir, sizeof(bindir), "%s", self);
	*strrchr(bindir, '/') = '\0';
	if (keep) {
		snprintf(store, sizeof(store), "%s", keep);
	} else {
		const char *tmp = getenv("TMPDIR");

		snprintf(store, sizeof(store), "%s/cpa-torture-XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(store))
			return 1;
	}
	snprintf(logpath, sizeof(logpath), "%s.log", store);
	srand(seed);
	ncpu = (unsigned int)sysconf(_SC_NPROCESSORS_ONLN);
	signal(SIGPIPE, SIG_IGN);
	printf("torture: %u kills, %u Hz, seed %u, store %s, log %s%s\n", kills, freq, seed, store,
	       logpath, stall ? ", unwindd stalls before some kills" : "");
	fflush(stdout);

	if (healthy)
		setenv("CPA_HEALTHY_MS", healthy, 1);
	if (replay_n) {
		char v[96];

		/* The storer's first release raising its mark: the first block, 6 s on. */
		snprintf(v, sizeof(v), "unwindd:%u:%u,symd:%u:%u,storer:1:%u", replay_n, replay_g,
			 replay_n, replay_g, replay_g);
		setenv("CPA_FAULT_KILL_AFTER_COMMIT", v, 1);
	}
	if (hang_at_stop >= 0)
		setenv("CPA_DRAIN_TIMEOUT_MS", "3000", 1);
	if (kill_at_stop)
		setenv("CPA_FAULT_KILL_AFTER_COMMIT", "storer:1:1", 1);
	if (hang_ms) {
		char v[16];

		/* The monitor's hang timeout (docs/supervisor.md, "Knobs for tests"). */
		snprintf(v, sizeof(v), "%u", hang_ms);
		setenv("CPA_HANG_TIMEOUT_MS", v, 1);
	}
	load = load_start(ncpu);
	mon = monitor_start(load);
	r = monitor_wait_running(mon, 30000, &a);
	if (r < 0) {
		fprintf(stderr, "torture: the pipeline did not start (%s): skipped, see %s\n",
			strerror(-r), logpath);
		kill(mon, SIGKILL);
		kill(load, SIGKILL);
		waitpid(mon, NULL, 0);
		waitpid(load, NULL, 0);
		return 77;
	}
	t0 = clock_ns(CLOCK_MONOTONIC);
	if (hang_ms) {
		msleep(2000);
		hang_fails = hangs_run(a, hang_ms);
	}
	for (unsigned int k = 0; k < kills; k++) {
		unsigned int v = (unsigned int)rand() % (NSTAGES + 1);
		struct shm_stage *st;
		pid_t pid;

		/* --per_stage: a random victim among those still short of N;
		 * --victims: among those named. */
		while (!(victims & 1u << v) || (per_stage && t.kills[v] >= per_stage))
			v = (unsigned int)rand() % (NSTAGES + 1);
		stalled = 0;
		if (stall && (unsigned int)rand() % 100 < stall) {
			st = shm_arena__stage(a, SHM_STAGE_UNWINDD);
			pid = st->pid;
			if (shm_stage__state(st) == SHM_STATE_RUNNING && pid_alive(pid) &&
			    kill(pid, SIGSTOP) == 0) {
				stalled = pid;
				stalls++;
			}
		}
		msleep(pace_min + (unsigned int)rand() % (pace_max - pace_min + 1));
		if (v == VICTIM_MON) {
			/* Only while every stage runs (see docs: a monitor killed while
			 * capture restarts leaves its successor's fold undone). */
			if (!all_running(a, killed_gen)) {
				resume(&stalled);
				k--;
				continue;
			}
			kill(mon, SIGKILL);
			/* A stalled unwindd goes on only a moment later: capture
			 * meets the monitor's death with ring 0 full. */
			if (stalled)
				msleep(300);
			resume(&stalled);
			waitpid(mon, NULL, 0);
			monitor_gone(a, true, &t);
			a = NULL;
			memset(killed_gen, 0, sizeof(killed_gen)); /* a new arena */
			mon = monitor_start(load);
			r = monitor_wait_running(mon, 60000, &a);
			if (r < 0) {
				fprintf(stderr, "torture: new monitor did not start: %s\n",
					strerror(-r));
				return 1;
			}
		} else {
			st = shm_arena__stage(a, v);
			pid = st->pid;
			if (shm_stage__state(st) != SHM_STATE_RUNNING || !pid_alive(pid)) {
				resume(&stalled);
				k--;
				continue;
			}
			killed_gen[v] = __atomic_load_n(&st->generation, __ATOMIC_ACQUIRE);
			kill(pid, SIGKILL);
			resume(&stalled);
		}
		t.kills[v]++;
		if (store_scan(&t, false) < 0)
			t.read_fail++;
		if ((k + 1) % 10 == 0) {
			printf("torture: %u kills, %.0f s\n", k + 1,
			       (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9);
			fflush(stdout);
		}
	}
	/* Let every stage come back (the last one killed may wait out a 5 s
	 * backoff), then stop as an operator would; --stop_after_kill: a stop
	 * right after the last kill, the victim dead or not yet restarted. */
	if (stop_after_kill >= 0) {
		msleep((unsigned int)stop_after_kill);
	} else {
		for (unsigned int i = 0; i < 300 && !all_running(a, killed_gen); i++)
			msleep(100);
		msleep(1000);
	}
	if (hang_at_stop >= 0) {
		pid_t pid = shm_arena__stage(a, (enum shm_stage_id)hang_at_stop)->pid;

		if (pid > 0 && kill(pid, SIGSTOP) == 0)
			printf("torture: %s (pid %d) SIGSTOPped before the stop\n",
			       shm_stage_name((enum shm_stage_id)hang_at_stop), pid);
		msleep(500);
	}
	kill(mon, SIGINT);
	waitpid(mon, &r, 0);
	{
		struct shm_stage *sto = shm_arena__stage(a, SHM_STAGE_STORER);

		/* Its first life died by the knob (exit 128 + SIGKILL), never restarted. */
		storer_killed =
			__atomic_load_n(&sto->exit_code, __ATOMIC_RELAXED) == 128 + SIGKILL &&
			__atomic_load_n(&sto->generation, __ATOMIC_RELAXED) == 1;
		if (kill_at_stop)
			printf("torture: the storer %s at its drain's release\n",
			       storer_killed ? "was killed" : "was NOT killed");
	}
	monitor_gone(a, false, &t);
	kill(load, SIGKILL);
	waitpid(load, NULL, 0);
	store_scan(&t, true);

	accounted = t.stored + t.lost + t.in_rings;
	unaccounted = (int64_t)t.produced - (int64_t)accounted;
	printf("\n| kills | capture | unwindd | symd | storer | monitor | total | seconds |\n");
	printf("|---|---|---|---|---|---|---|---|\n");
	printf("| | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64 " | %" PRIu64
	       " | %u | %.0f |\n",
	       t.kills[0], t.kills[1], t.kills[2], t.kills[3], t.kills[4], kills,
	       (double)(clock_ns(CLOCK_MONOTONIC) - t0) / 1e9);
	printf("\n| figure | samples |\n|---|---|\n");
	printf("| produced (BPF, all generations) | %" PRIu64 " |\n", t.produced);
	printf("| stored | %" PRIu64 " |\n", t.stored);
	printf("| lost, in the store (by reason below) | %" PRIu64 " |\n", t.lost);
	for (unsigned int i = 0; i < t.n_reasons; i++)
		printf("| &nbsp; `%s` | %" PRIu64 " |\n", t.reasons[i].name, t.reasons[i].count);
	printf("| in the rings when a monitor kill took the arena | %" PRIu64 " |\n", t.in_rings);
	printf("| not sampled while no capture ran (estimate, not in the balance) | %" PRIu64
	       " |\n",
	       t.down_est);
	printf("| &nbsp; estimated by capture (`not_sampled_while_down` counter) | %" PRIu64 " |\n",
	       t.down_marked);
	printf("| **unaccounted** (produced - stored - lost - in rings) | %" PRId64 " |\n",
	       unaccounted);
	printf("| duplicates (over freq+2 per thread-second) | %" PRIu64 " |\n", t.dup_excess);
	printf("| copies skipped by symd and the storer (a stage's batch sent again) | %" PRIu64
	       " |\n",
	       t.copies);
	printf("| corrupt blocks / unreadable stores (over %" PRIu64 " reads) | %" PRIu64
	       " / %" PRIu64 " |\n",
	       t.reads, t.corrupt, t.read_fail);
	printf("| torn tails skipped (final read) | %" PRIu64 " |\n", t.torn);
	printf("| monitors run | %" PRIu64 " |\n", t.monitors);
	if (stall)
		printf("| unwindd stalls (SIGSTOP over a pause) | %u |\n", stalls);
	down_ok = t.kills[VICTIM_MON] ||
		  (t.down_est == t.down_marked &&
		   (!t.kills[SHM_STAGE_CAPTURE] || stop_after_kill >= 0 || t.down_est));
	ok = down_ok && unaccounted == 0 && !t.dup_excess && !t.corrupt && !t.read_fail &&
	     t.produced && !hang_fails && (!replay_n || t.copies) &&
	     (!kill_at_stop || storer_killed);
	if (!keep) {
		char cmd[PATH_MAX * 2 + 32];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", store, logpath);
		if (ok && system(cmd) != 0)
			fprintf(stderr, "torture: could not remove %s\n", store);
	}
	if (!ok)
		fprintf(stderr,
			"torture: FAILED (seed %u): unaccounted %" PRId64 ", duplicates %" PRIu64
			", corrupt %" PRIu64 ", unreadable %" PRIu64 ", produced %" PRIu64
			", hang checks failed %d, copies skipped %" PRIu64 ", gaps marked %" PRIu64
			" of %" PRIu64 "%s%s; store and log kept: %s %s\n",
			seed, unaccounted, t.dup_excess, t.corrupt, t.read_fail, t.produced,
			hang_fails, t.copies, t.down_est, t.down_marked,
			replay_n && !t.copies ? " (--replay sent none)" : "",
			kill_at_stop && !storer_killed ? " (the storer was not killed at stop)"
						       : "",
			store, logpath);
	return ok ? 0 : 1;
}
