// SPDX-License-Identifier: MIT
/*
 * `cpa ctl`: look at and steer a running monitor through its arena. The
 * monitor's pid comes from <store_dir>/.cpa-monitor.pid; the arena is
 * reopened through /proc/<pid>/fd/<n> (the memfd named "cpa-arena"), which
 * needs the same rights as ptrace on the monitor (root, or the same user).
 *
 * `ctl cost` measures what the running agent costs over a window: each
 * process's CPU and memory, and the run time of capture's BPF programs, with
 * run-time statistics on for the window only (common/cost.h).
 *
 * ctl writes only the rate_limit and mem_limit_mb words (the monitor never
 * writes them after start, so ctl is their only writer at run time), lowers
 * or raises a stage's RLIMIT_AS backstop with prlimit() along with its cap,
 * and sends SIGTERM to a stage for a restart; everything else is read.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "cli.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "common/cost.h"
#include "shm/arena.h"
#include "shm/counters.h"
#include "storer/store.h"
#include "supervisor.h"

static int monitor_pid_get(const char *store_dir, pid_t *ret)
{
	_cleanup_close_ int fd = -1;
	char path[PATH_MAX], buf[32];
	long long pid;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", store_dir, CPA_PIDFILE_NAME);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		char parent[PATH_MAX];

		snprintf(parent, sizeof(parent), "%s", store_dir);
		if (errno == ENOENT && store_dir__is_store(store_dir))
			/* a cpa_* dir of the root: its monitor's pid file is in the root */
			log_error("no cpa monitor runs on '%s': it is one store dir, the monitor's "
				  "--store_dir is the root that holds it, '%s'",
				  store_dir, dirname(parent));
		else if (errno == ENOENT)
			log_error("no cpa monitor runs on '%s' (no %s)", store_dir, path);
		else
			log_error_errno(-errno, "open '%s': %m", path);
		return -ESRCH;
	}
	/* The monitor holds an exclusive flock for its whole life. */
	if (flock(fd, LOCK_SH | LOCK_NB) == 0) {
		log_error("no cpa monitor runs on '%s' (stale %s)", store_dir, path);
		return -ESRCH;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return log_error_errno(n < 0 ? -errno : -EBADMSG, "read '%s': %m", path);
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	if (parse_ll(buf, 1, INT32_MAX, &pid) < 0)
		return log_error_errno(-EBADMSG, "'%s': bad pid '%s'", path, buf);
	*ret = (pid_t)pid;
	return 0;
}

static int arena_open(pid_t pid, struct shm_arena **ret)
{
	int r = shm_arena__attach_pid(pid, ret);

	if (r == -ENOENT)
		return log_error_errno(r, "monitor pid %d has no cpa arena open", pid);
	if (r == -EACCES || r == -EPERM)
		return log_error_errno(r,
				       "open the arena of monitor pid %d (cpa ctl needs root or "
				       "the monitor's user): %m",
				       pid);
	if (r < 0)
		return log_error_errno(r, "attach the arena of monitor pid %d: %m", pid);
	return 0;
}

/* "capture, unwindd, symd or storer": the stages of the table (with only
 * those that have limit, if limit). */
static const char *stage_names(char *buf, size_t len, unsigned int limit)
{
	size_t n = 0;
	int nr = 0, k = 0;

	buf[0] = 0;
	for (int i = 0; i < SHM_STAGE_MAX; i++)
		nr += !limit || (shm_stages[i].limits & limit);
	for (int i = 0; i < SHM_STAGE_MAX && n < len; i++)
		if (!limit || (shm_stages[i].limits & limit))
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      ++k == 1	? ""
					      : k == nr ? " or "
							: ", ",
					      shm_stages[i].name);
	return buf;
}

static int stage_from_name(const char *verb, const char *name, enum shm_stage_id *ret)
{
	char names[128];

	*ret = shm_stage_by_name(name, strlen(name));
	if (*ret != SHM_STAGE_MAX)
		return 0;
	log_error("ctl %s: unknown stage '%s' (%s)", verb, name,
		  stage_names(names, sizeof(names), 0));
	return -EINVAL;
}

static bool is_child_of(pid_t pid, pid_t parent)
{
	char path[64], line[256];
	bool ok = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, "PPid:", 5)) {
			ok = atoi(line + 5) == parent;
			break;
		}
	fclose(f);
	return ok;
}

/* The stages with a cache cap (cpa ctl mem). */
static bool has_cache(enum shm_stage_id id)
{
	return shm_stages[id].limits & SHM_LIMIT_MEM;
}

/*
 * cpa ctl mem STAGE MB: the cap the stage applies on its next tick, and the
 * RLIMIT_AS backstop of the running process moved along, so that the two
 * never disagree: a raise moves the backstop first and, when that is refused
 * (raising a hard limit needs CAP_SYS_RESOURCE), leaves the cap as it was
 * (a cap above the backstop would have the stage fail its allocations
 * before it evicts); a cut lowers the cap first. The caller holds the
 * writers' lock (ctl_lock()), so two ctl runs cannot interleave these steps.
 */
static int set_mem(struct shm_stage *st, enum shm_stage_id id, pid_t mpid, long long mb)
{
	pid_t pid = __atomic_load_n(&st->pid, __ATOMIC_RELAXED);
	uint64_t old = __atomic_load_n(&st->mem_limit_mb, __ATOMIC_RELAXED);
	uint64_t as = supervisor__as_limit(id, (uint64_t)mb);
	bool backstop = as && pid > 0 && is_child_of(pid, mpid);
	struct rlimit rl = {.rlim_cur = as, .rlim_max = as};

	if (backstop && (uint64_t)mb > old && prlimit(pid, RLIMIT_AS, &rl, NULL) < 0) {
		log_error_errno(
			-errno,
			"raise the RLIMIT_AS backstop of %s (pid %d) to %llu MiB: %m (needs "
			"CAP_SYS_RESOURCE); its cache cap stays %llu MiB",
			shm_stage_name(id), pid, (unsigned long long)(as >> 20),
			(unsigned long long)old);
		return 1;
	}
	__atomic_store_n(&st->mem_limit_mb, (uint64_t)mb, __ATOMIC_RELAXED);
	printf("%s mem limit: %lld MiB (was %llu MiB)\n", shm_stage_name(id), mb,
	       (unsigned long long)old);
	if (!backstop)
		return 0;
	if ((uint64_t)mb <= old && prlimit(pid, RLIMIT_AS, &rl, NULL) < 0)
		log_warn_errno(-errno, "prlimit %s (pid %d) RLIMIT_AS: %m", shm_stage_name(id),
			       pid);
	else
		printf("%s RLIMIT_AS backstop: %llu MiB\n", shm_stage_name(id),
		       (unsigned long long)(as >> 20));
	return 0;
}

/*
 * The writers of a monitor's limits (ctl mem, ctl rate) one at a time: an
 * exclusive flock on the monitor's arena, a file of its own that each ctl
 * run opens anew (/proc/PID/fd), so their locks conflict; released when the
 * arena is freed. Not the store dir: the storer holds the store root's flock
 * for its whole life (store_root__lock()), and a ctl waiting for that waited
 * until the monitor stopped. 0, or -errno (logged).
 */
static int ctl_lock(struct shm_arena *a, pid_t mpid)
{
	if (flock(a->fd, LOCK_EX) < 0)
		return log_error_errno(-errno, "lock the arena of monitor pid %d: %m", mpid);
	return 0;
}

static void print_status(struct shm_arena *a, pid_t mpid, const char *store_dir)
{
	const struct cpa_config *c = shm_arena__config(a);
	uint64_t now = clock_kernel_ns(CLOCK_MONOTONIC);
	printf("monitor pid %d, store_dir %s, freq %u Hz, arena %llu KiB, up %llu s\n", mpid,
	       store_dir, c->freq, (unsigned long long)(a->size >> 10),
	       (unsigned long long)((clock_ns(CLOCK_REALTIME) - c->start_realtime_ns) /
				    NSEC_PER_SEC));
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		struct shm_stage *st = shm_arena__stage(a, (enum shm_stage_id)i);
		uint64_t hb = __atomic_load_n(&st->heartbeat_ns, __ATOMIC_RELAXED);
		uint64_t rate = shm_stage__rate_limit(st);
		uint64_t mem = __atomic_load_n(&st->mem_limit_mb, __ATOMIC_RELAXED);
		char age[48], rl[32], ml[48] = "";
		int col = 2;

		if (hb && hb <= now)
			snprintf(age, sizeof(age), "%.1f s ago%s", (double)(now - hb) / 1e9,
				 shm_stage__cnt(st, SHM_SLOT_ASLEEP) ? " (idle)" : "");
		else
			snprintf(age, sizeof(age), "never");
		if (rate)
			snprintf(rl, sizeof(rl), "%llu/s", (unsigned long long)rate);
		else
			snprintf(rl, sizeof(rl), "unlimited");
		if (has_cache((enum shm_stage_id)i))
			snprintf(ml, sizeof(ml), ", mem limit %llu MiB", (unsigned long long)mem);
		printf("%s: %s, pid %d, generation %u, restarts %llu, heartbeat %s, rate %s%s, "
		       "last exit %u\n",
		       shm_stage_name((enum shm_stage_id)i), shm_state_name(shm_stage__state(st)),
		       __atomic_load_n(&st->pid, __ATOMIC_RELAXED),
		       __atomic_load_n(&st->generation, __ATOMIC_RELAXED),
		       (unsigned long long)__atomic_load_n(&st->restarts, __ATOMIC_RELAXED), age,
		       rl, ml, __atomic_load_n(&st->exit_code, __ATOMIC_RELAXED));
		printf(" ");
		for (unsigned int k = 0; k < SHM_CNT_MAX; k++) {
			const char *name = shm_counter_name((enum shm_stage_id)i, k);
			char item[96];
			int len;

			if (!name)
				continue;
			len = snprintf(item, sizeof(item), " %s=%llu", name,
				       (unsigned long long)shm_stage__cnt(st, k));
			if (col + len > 100) {
				printf("\n ");
				col = 1;
			}
			fputs(item, stdout);
			col += len;
		}
		printf("\n");
	}
	for (unsigned int r = 0; r < shm_arena__nr_rings(a); r++) {
		uint64_t size;
		struct shm_ring_ctrl *rc = shm_arena__ring_mem(a, r, &size);
		const struct shm_ring_desc *d = &a->hdr->rings[r];
		uint64_t used = __atomic_load_n(&rc->prod_pos, __ATOMIC_RELAXED) -
				__atomic_load_n(&rc->cons_pos, __ATOMIC_RELAXED);

		printf("ring %u %s -> %s: %llu of %llu KiB used\n", r,
		       shm_stage_name((enum shm_stage_id)d->producer),
		       shm_stage_name((enum shm_stage_id)d->consumer),
		       (unsigned long long)(used >> 10),
		       (unsigned long long)((size - SHM_RING_CTRL_SIZE) >> 10));
	}
}

/* One process of the agent over the cost window. */
struct cost_row {
	const char *name;
	pid_t pid;
	uint32_t gen; /* the stage's generation at the start (stages only) */
	bool ok;      /* read at both ends, the same process */
	bool gone;    /* measured at the start, not at the end: restarted or exited */
	struct cost_proc p0, p1;
};

/* The stage pid in the block is only trusted while it is the monitor's child. */
static pid_t stage_pid(struct shm_stage *st, pid_t mpid, uint32_t *ret_gen)
{
	pid_t pid = __atomic_load_n(&st->pid, __ATOMIC_RELAXED);

	*ret_gen = __atomic_load_n(&st->generation, __ATOMIC_RELAXED);
	return pid > 0 && is_child_of(pid, mpid) ? pid : 0;
}

/* BPF run time counts while kernel.bpf_stats_enabled is 1 or some process
 * holds a BPF_ENABLE_STATS fd: ours, for the window. -errno with why not. */
static int bpf_stats_on(int *ret_fd)
{
	_cleanup_free_ char *buf = NULL;
	size_t cap = 0, len;
	int fd;

	*ret_fd = -1;
	if (read_full_file_at(AT_FDCWD, "/proc/sys/kernel/bpf_stats_enabled", 0, 64, &buf, &cap,
			      &len) == 0 &&
	    len && buf[0] == '1')
		return 0;
	fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	if (fd < 0)
		return fd;
	*ret_fd = fd;
	return 0;
}

/*
 * The probes' part: per probe its runs, the trap time capture calibrated
 * (docs/capture.md "Probe budget") times the runs, and the BPF time its
 * program measured itself. Returns the traps' ms (they are no process's CPU
 * nor in bpf_stats: the probed threads pay them).
 */
static double print_probes(const struct cpa_config *c, const struct cost_probe *p0,
			   const struct cost_probe *p1, double secs)
{
	static const char *const states[] = {"attached", "thinned", "detached (budget)",
					     "detached (refused at attach)",
					     "detached (file gone)"};
	double trap_ms = 0;

	printf("\n%-5s %9s %9s %9s %10s %9s %10s  %s\n", "probe", "runs", "runs/s", "trap ns",
	       "trap %CPU", "BPF ns", "BPF %CPU", "state, spec");
	for (unsigned int i = 0; i < MIN(c->nr_probes, (uint32_t)COST_MAX_PROBES); i++) {
		double runs = (double)(p1[i].runs - p0[i].runs);
		double bpf_ns = (double)(p1[i].run_ns - p0[i].run_ns);
		double trap_ns = runs * (double)p1[i].trap_ps / 1e3;
		char state[48];

		trap_ms += trap_ns / 1e6;
		if (p1[i].state == 1)
			snprintf(state, sizeof(state), "thinned to %u/s", p1[i].thin_rate);
		else
			snprintf(state, sizeof(state), "%s",
				 states[p1[i].state < ARRAY_SIZE(states) ? p1[i].state : 0]);
		printf("%-5u %9.0f %9.1f %9.0f %10.3f %9.0f %10.3f  %s, %s\n", i, runs, runs / secs,
		       (double)p1[i].trap_ps / 1e3, trap_ns / 1e7 / secs,
		       runs > 0 ? bpf_ns / runs : 0, bpf_ns / 1e7 / secs, state, c->probes[i]);
	}
	printf("%-5s %9s %9s %9s %10.3f  (trap = runs x the trap time capture measured at "
	       "attach)\n",
	       "all", "", "", "", trap_ms / 10.0 / secs);
	return trap_ms;
}

static void print_ms_row(const struct cost_row *w, double secs, double samples)
{
	double cpu_ms = (double)(w->p1.cpu_ns - w->p0.cpu_ns) / 1e6;

	if (!w->ok) {
		printf("%-9s %7d  %s\n", w->name, w->pid,
		       !w->pid	 ? "not running"
		       : w->gone ? "restarted or exited during the window: not counted"
				 : "not measured: its /proc files could not be read");
		return;
	}
	printf("%-9s %7d %9.1f %10.3f", w->name, w->pid, cpu_ms, cpu_ms / 10.0 / secs);
	if (samples > 0)
		printf(" %10.1f", cpu_ms * 1e3 / samples);
	else
		printf(" %10s", "-");
	printf(" %8.1f %9.1f\n", (double)w->p1.pss_kb / 1024, (double)w->p1.hwm_kb / 1024);
}

/* The stage fed by the kernel (capture): its samples counter is what the
 * cost is per, and the BPF programs are in its file descriptors. */
static enum shm_stage_id producer(void)
{
	int i = 0;

	while (i < SHM_STAGE_MAX - 1 && shm_stages[i].role != SHM_ROLE_PRODUCER)
		i++;
	return (enum shm_stage_id)i;
}

/*
 * `ctl cost [SECONDS]`: the agent's CPU per process and per sample, its
 * memory, and its BPF programs' run time, measured over SECONDS (default 10)
 * while it runs as it is. bench/overhead.c measures the same things around
 * a workload of its own; this is for the host at hand.
 */
static int print_cost(struct shm_arena *a, pid_t mpid, long long want)
{
	struct cost_row w[SHM_STAGE_MAX + 1] = {0};
	enum shm_stage_id prod = producer();
	struct shm_stage *cap = shm_arena__stage(a, prod);
	struct cost_bpf_set set = {0};
	uint64_t ns0[COST_MAX_PROGS] = {0}, cnt0[COST_MAX_PROGS] = {0};
	uint64_t t0, t1, s0, s1, busy0 = 0, tot0 = 0, busy1 = 0, tot1 = 0;
	const struct cpa_config *cfg = shm_arena__config(a);
	struct cost_probe pr0[COST_MAX_PROBES] = {0}, pr1[COST_MAX_PROBES] = {0};
	double secs, samples, cpa_ms = 0, bpf_ms = 0, trap_ms = 0;
	int stats_fd = -1, stats_r = 0, found = 0, probes_r = -ENOENT;
	struct timespec ts = {0};
	pid_t cap_pid;

	for (int i = 0; i <= SHM_STAGE_MAX; i++) {
		struct cost_row *r = &w[i];

		if (i < SHM_STAGE_MAX) {
			r->name = shm_stage_name((enum shm_stage_id)i);
			r->pid =
				stage_pid(shm_arena__stage(a, (enum shm_stage_id)i), mpid, &r->gen);
		} else {
			r->name = "monitor";
			r->pid = mpid;
		}
		r->ok = r->pid && cost_proc_read(r->pid, &r->p0) == 0;
	}
	cap_pid = w[prod].pid;
	if (cap_pid) {
		found = cost_bpf_find(cap_pid, &set);
		if (found > 0)
			stats_r = bpf_stats_on(&stats_fd);
	}
	for (int i = 0; i < set.n; i++) {
		if (cost_bpf_prog(set.ids[i], NULL, 0, &ns0[i], &cnt0[i]) < 0)
			ns0[i] = cnt0[i] = UINT64_MAX;
	}
	if (found > 0 && cfg->nr_probes)
		probes_r = cost_probe_read(&set, pr0);
	cost_machine_busy(&busy0, &tot0);
	s0 = shm_stage__cnt(cap, CAP_CNT_SAMPLES);
	t0 = clock_ns(CLOCK_MONOTONIC);
	printf("measuring for %lld s...\n", want);
	fflush(stdout);
	ts.tv_sec = (time_t)want;
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	t1 = clock_ns(CLOCK_MONOTONIC);
	s1 = shm_stage__cnt(cap, CAP_CNT_SAMPLES);
	if (probes_r == 0)
		probes_r = cost_probe_read(&set, pr1);
	cost_machine_busy(&busy1, &tot1);
	for (int i = 0; i <= SHM_STAGE_MAX; i++) {
		struct cost_row *r = &w[i];
		uint32_t gen = 0;

		if (!r->ok)
			continue;
		if (i < SHM_STAGE_MAX &&
		    (stage_pid(shm_arena__stage(a, (enum shm_stage_id)i), mpid, &gen) != r->pid ||
		     gen != r->gen))
			r->ok = false;
		else
			r->ok = cost_proc_read(r->pid, &r->p1) == 0 &&
				cost_proc_mem(r->pid, &r->p1) == 0 && r->p1.cpu_ns >= r->p0.cpu_ns;
		r->gone = !r->ok;
	}

	secs = (double)(t1 - t0) / 1e9;
	samples = (double)(s1 - s0);
	printf("cpa cost over %.1f s: %.0f samples (%.1f/s) of monitor pid %d\n", secs, samples,
	       samples / secs, mpid);
	printf("%-9s %7s %9s %10s %10s %8s %9s\n", "process", "pid", "CPU ms", "% of a CPU",
	       "us/sample", "PSS MiB", "peak MiB");
	for (int i = 0; i <= SHM_STAGE_MAX; i++) {
		print_ms_row(&w[i], secs, samples);
		if (w[i].ok)
			cpa_ms += (double)(w[i].p1.cpu_ns - w[i].p0.cpu_ns) / 1e6;
	}
	printf("%-9s %7s %9.1f %10.3f", "all", "", cpa_ms, cpa_ms / 10.0 / secs);
	if (samples > 0)
		printf(" %10.1f\n", cpa_ms * 1e3 / samples);
	else
		printf(" %10s\n", "-");

	if (!cap_pid) {
		printf("BPF: capture is not running\n");
	} else if (found <= 0) {
		printf("BPF: no programs found in capture's file descriptors (%s)\n",
		       found < 0 ? strerror(-found) : "none of cpa's");
	} else if (stats_r < 0) {
		printf("BPF: run time not measured: turning bpf_stats on needs CAP_SYS_ADMIN (%s)\n",
		       strerror(-stats_r));
	} else {
		printf("\n%-24s %9s %8s %9s %10s\n", "BPF program", "runs", "runs/s", "ns/run",
		       "% of a CPU");
		for (int i = 0; i < set.n; i++) {
			uint64_t ns, cnt;
			char name[64];

			if (ns0[i] == UINT64_MAX ||
			    cost_bpf_prog(set.ids[i], name, sizeof(name), &ns, &cnt) < 0 ||
			    cnt == cnt0[i])
				continue;
			ns -= ns0[i];
			cnt -= cnt0[i];
			bpf_ms += (double)ns / 1e6;
			printf("%-24s %9llu %8.1f %9.0f %10.3f\n", name, (unsigned long long)cnt,
			       (double)cnt / secs, (double)ns / (double)cnt,
			       (double)ns / 1e7 / secs);
		}
		printf("%-24s %9s %8s %9s %10.3f", "all BPF", "", "", "", bpf_ms / 10.0 / secs);
		if (samples > 0)
			printf("  (%.1f us/sample)", bpf_ms * 1e3 / samples);
		printf("\n");
	}
	if (probes_r == 0)
		trap_ms = print_probes(cfg, pr0, pr1, secs);
	else if (cfg->nr_probes && found > 0)
		printf("\nprobes: their counters could not be read (%s)\n", strerror(-probes_r));
	if (tot1 > tot0) {
		/* jiffies: USER_HZ ticks of all CPUs */
		double busy_ms = (double)(busy1 - busy0) * 1e3 / (double)sysconf(_SC_CLK_TCK);

		printf("\nmachine: %.2f CPUs busy on average; cpa (processes and BPF%s) %.2f %% "
		       "of that\n",
		       busy_ms / 1e3 / secs, cfg->nr_probes ? ", probe traps" : "",
		       busy_ms > 0 ? (cpa_ms + bpf_ms + trap_ms) * 100 / busy_ms : 0.0);
	}
	if (stats_fd >= 0)
		close(stats_fd);
	return 0;
}

int cmd_ctl(struct cpa_opts *o)
{
	const char *store_dir = o->mon.store_dir;
	struct shm_arena *a = NULL;
	enum shm_stage_id id = SHM_STAGE_MAX;
	const char *verb;
	long long n = 10; /* cost's window, rate's records/s, mem's MiB */
	char names[128];
	pid_t mpid;
	int code = 1;

	if (o->n_args < 1) {
		log_error(
			"ctl: missing action (status, cost [seconds], restart <stage>, rate <stage> "
			"<N>, mem <stage> <MiB>)");
		fprintf(stderr, "Try 'cpa ctl --help'.\n");
		return 2;
	}
	verb = o->args[0];
	if (!strcmp(verb, "status")) {
		if (o->n_args != 1)
			goto usage;
	} else if (!strcmp(verb, "cost")) {
		if (o->n_args > 2)
			goto usage;
		if (o->n_args > 1 && parse_ll(o->args[1], 1, 3600, &n) < 0) {
			log_error("ctl cost: invalid window '%s' (seconds, 1..3600)", o->args[1]);
			goto hint;
		}
	} else if (!strcmp(verb, "restart")) {
		if (o->n_args != 2)
			goto usage;
		if (stage_from_name(verb, o->args[1], &id) < 0)
			goto hint;
	} else if (!strcmp(verb, "rate") || !strcmp(verb, "mem")) {
		if (o->n_args != 3)
			goto usage;
		if (stage_from_name(verb, o->args[1], &id) < 0)
			goto hint;
		/* the values are checked before the monitor is looked for */
		if (!strcmp(verb, "mem") && !has_cache(id)) {
			log_error("ctl mem: %s has no cache to cap (%s)", shm_stage_name(id),
				  stage_names(names, sizeof(names), SHM_LIMIT_MEM));
			goto hint;
		}
		if (!strcmp(verb, "rate") && !(shm_stages[id].limits & SHM_LIMIT_RATE)) {
			log_error("ctl rate: %s applies no rate limit (%s)", shm_stage_name(id),
				  stage_names(names, sizeof(names), SHM_LIMIT_RATE));
			goto hint;
		}
		if (!strcmp(verb, "mem") && parse_ll(o->args[2], 1, 1048576, &n) < 0) {
			log_error("ctl mem: invalid value '%s' (MiB, 1..1048576)", o->args[2]);
			goto hint;
		}
		if (!strcmp(verb, "rate") && parse_ll(o->args[2], 0, LLONG_MAX, &n) < 0) {
			log_error(
				"ctl rate: invalid value '%s' (records per second, 0 = unlimited)",
				o->args[2]);
			goto hint;
		}
	} else {
		log_error("ctl: unknown action '%s' (status, cost, restart, rate, mem)", verb);
		goto hint;
	}

	if (monitor_pid_get(store_dir, &mpid) < 0)
		return 1;
	if (arena_open(mpid, &a) < 0)
		return 1;
	if (!strcmp(verb, "mem") || !strcmp(verb, "rate")) {
		if (ctl_lock(a, mpid) < 0) {
			shm_arena__free(a);
			return 1;
		}
	}

	if (!strcmp(verb, "status")) {
		print_status(a, mpid, store_dir);
		code = 0;
	} else if (!strcmp(verb, "cost")) {
		code = print_cost(a, mpid, n);
	} else if (!strcmp(verb, "restart")) {
		struct shm_stage *st = shm_arena__stage(a, id);
		uint32_t gen;
		pid_t pid = stage_pid(st, mpid, &gen);

		if (!pid) {
			log_error("%s is not running (state %s)", shm_stage_name(id),
				  shm_state_name(shm_stage__state(st)));
		} else if (kill(pid, SIGTERM) < 0) {
			log_error_errno(-errno, "kill %s (pid %d): %m", shm_stage_name(id), pid);
		} else {
			printf("sent SIGTERM to %s (pid %d); the monitor restarts it\n",
			       shm_stage_name(id), pid);
			code = 0;
		}
	} else if (!strcmp(verb, "mem")) {
		code = set_mem(shm_arena__stage(a, id), id, mpid, n);
		/* An idle stage sleeps with no deadline: wake it to apply the cap now. */
		if (code == 0 && shm_stages[id].ring_in >= 0) {
			void *ring =
				shm_arena__ring_mem(a, (unsigned int)shm_stages[id].ring_in, NULL);

			if (ring)
				shm_ring__kick(ring);
		}
	} else {
		struct shm_stage *st = shm_arena__stage(a, id);
		uint64_t old = __atomic_exchange_n(&st->rate_limit, (uint64_t)n, __ATOMIC_RELAXED);

		printf("%s rate limit: %lld records/s%s (was %llu)\n", shm_stage_name(id), n,
		       n ? "" : " (unlimited)", (unsigned long long)old);
		code = 0;
	}
	shm_arena__free(a);
	return code;
usage:
	log_error("ctl %s: wrong number of arguments", verb);
hint:
	/* a usage error, answered as the option parser answers one */
	fprintf(stderr, "Try 'cpa ctl --help'.\n");
	return 2;
}
