// SPDX-License-Identifier: MIT
/*
 * `cpa monitor`: turn the options into an arena and a struct cpa_config,
 * take the store_dir's pid file, and hand over to the supervisor.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/probespec.h"
#include "common/safepath.h"
#include "common/timeutil.h"
#include "push_keeper.h"
#include "shm/arena.h"
#include "export/show.h"
#include "storer/store.h"
#include "supervisor.h"

/*
 * One monitor per store: the pid file is flock()ed for the monitor's life, so
 * a second monitor fails at once and `cpa ctl` can tell a stale file.
 */
static int pidfile_take(const char *dir, char *path, size_t len, int *ret_fd)
{
	_cleanup_close_ int fd = -1, dfd = -1;
	char buf[32], err[PATH_MAX + 128];
	ssize_t wn = 0;
	int r = 0;

	if ((size_t)snprintf(path, len, "%s/%s", dir, CPA_PIDFILE_NAME) >= len)
		return log_error_errno(-ENAMETOOLONG, "pid file path too long");
	dfd = safe_path__dir(dir, false, 0, err, sizeof(err));
	if (dfd >= 0)
		fd = safe_path__openat(dfd, path, CPA_PIDFILE_NAME, O_RDWR | O_CREAT, 0640, err,
				       sizeof(err));
	r = dfd < 0 ? dfd : fd < 0 ? fd : 0;
	if (r == -EPERM) {
		log_error("--store_dir %s", err);
		return r;
	}
	if (r < 0)
		return log_error_errno(r, "--store_dir '%s': cannot write '%s': %m", dir, path);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		ssize_t n;

		r = -errno;
		if (r != -EWOULDBLOCK)
			return log_error_errno(r, "flock '%s': %m", path);
		n = pread(fd, buf, sizeof(buf) - 1, 0);
		buf[n > 0 ? n : 0] = 0;
		buf[strcspn(buf, "\n")] = 0;
		log_error("another cpa monitor (pid %s) is running on --store_dir '%s'",
			  *buf ? buf : "?", dir);
		return -EBUSY;
	}
	snprintf(buf, sizeof(buf), "%d\n", getpid());
	if (ftruncate(fd, 0) < 0 || (wn = pwrite(fd, buf, strlen(buf), 0)) < 0)
		r = -errno;
	else if (wn != (ssize_t)strlen(buf))
		r = -ENOSPC;
	if (r < 0) {
		/* A full disk: no empty or torn pid file is left behind (the lock is ours). */
		unlink(path);
		return log_error_errno(r, "--store_dir '%s': cannot write '%s': %m", dir, path);
	}
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int copy_str(char *dst, size_t len, const char *src, const char *flag)
{
	if (!src)
		src = "";
	if (strlen(src) >= len)
		return log_error_errno(-ENAMETOOLONG, "%s: value longer than %zu bytes", flag,
				       len - 1);
	memcpy(dst, src, strlen(src) + 1);
	return 0;
}

/* Every --probe checked against this machine now, before any stage runs:
 * a missing file, symbol, tracepoint or kprobes support is one clear error. */
static int config_probes(struct cpa_config *c, const struct monitor_opts *m)
{
	struct probe_spec p;
	int r;

	if (m->nr_probes && c->backend != CPA_BACKEND_BPF)
		return log_error_errno(-EINVAL, "--probe needs the BPF backend (--backend bpf)");
	for (unsigned int i = 0; i < m->nr_probes; i++) {
		r = probe_spec__resolve(m->probes[i], &p);
		if (r < 0)
			return r;
		r = copy_str(c->probes[i], sizeof(c->probes[i]), m->probes[i], "--probe");
		if (r < 0)
			return r;
	}
	c->nr_probes = m->nr_probes;
	c->probe_rate = (uint64_t)m->probe_rate;
	/* shm/config.h probe_budget: millionths of one CPU, 0 = none */
	c->probe_budget = (uint32_t)MAX(cpa_opts__probe_budget_ppm(m->probe_budget), 0);
	return 0;
}

static int config_fill(struct cpa_config *c, const struct cpa_opts *o, const char *store_dir)
{
	const struct monitor_opts *m = &o->mon;
	char btf[PATH_MAX];
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);
	int r;

	memset(c, 0, sizeof(*c));
	c->magic = CPA_CONFIG_MAGIC;
	c->version = CPA_CONFIG_VERSION;
	c->flags = (m->kernel_stack ? CPA_CFG_KERNEL_STACK_ONLY : 0) |
		   (m->offcpu ? CPA_CFG_OFFCPU : 0) | (m->disable_sym ? CPA_CFG_DISABLE_SYM : 0) |
		   (m->include_full_path ? CPA_CFG_FULL_PATH : 0) |
		   (m->strip_name_disable ? CPA_CFG_STRIP_NAME_OFF : 0) |
		   (m->go_short_names ? CPA_CFG_GO_SHORT : 0) |
		   (m->pc_locations ? CPA_CFG_PC_LOCATIONS : 0) |
		   (m->sched_metrics && !m->oneshot ? CPA_CFG_SCHED_METRICS : 0) |
		   (m->sched_full ? CPA_CFG_SCHED_FULL : 0) | (m->oneshot ? CPA_CFG_ONESHOT : 0) |
		   (m->bench ? CPA_CFG_BENCH : 0) | (o->verbose ? CPA_CFG_VERBOSE : 0);
	c->backend = strcmp(m->backend, "perf") ? CPA_BACKEND_BPF : CPA_BACKEND_PERF;
	c->freq = (uint32_t)m->freq;
	c->record_interval_s = (uint32_t)m->record_interval;
	c->persistent_day = (uint32_t)m->persistent_day;
	c->stack_size = (uint32_t)m->stack_size;
	c->sched_sample = m->sched_metrics ? (uint32_t)m->sched_sample : 0;
	c->max_queue_size = (uint32_t)m->max_queue_size;
	c->max_cache_size_mb = (uint32_t)m->max_cache_size_mb;
	c->max_store_size_mb = (uint32_t)m->max_store_size_mb;
	c->log_print_cycles = (uint32_t)m->log_print_cycles;
	c->target_pid = (int32_t)m->pid;
	c->nr_cpus = ncpu > 0 ? (uint32_t)ncpu : 1;
	c->debug_pid = (uint32_t)m->debug_pid;
	c->debug_freq = (uint32_t)m->debug_freq;
	c->start_realtime_ns = clock_ns(CLOCK_REALTIME);
	c->offcpu_min_ns = (uint64_t)m->offcpu_min_us * 1000;
	c->offcpu_max_ns = (uint64_t)m->offcpu_max_us * 1000;
	r = cpa_opts__offcpu_states(m->offcpu_state);
	c->offcpu_states = r > 0 ? (uint32_t)r : CPA_OFFCPU_STATE_ALL;

	r = copy_str(c->comm, sizeof(c->comm), m->comm, "--comm");
	if (r == 0)
		r = copy_str(c->store_dir, sizeof(c->store_dir), store_dir, "--store_dir");
	if (r == 0)
		r = copy_str(c->output_prof, sizeof(c->output_prof), m->output_prof,
			     "--output_prof");
	/* Stages may chdir: hand them absolute paths. */
	if (r == 0 && o->btf_path) {
		if (!realpath(o->btf_path, btf))
			return log_error_errno(-errno, "--btf_path '%s': %m", o->btf_path);
		r = copy_str(c->btf_path, sizeof(c->btf_path), btf, "--btf_path");
	}
	if (r == 0)
		r = copy_str(c->debug_path, sizeof(c->debug_path), m->debug_path, "--debug_option");
	c->debuginfod_cache_mb = (uint32_t)m->debuginfod_cache_mb;
	if (r == 0)
		r = copy_str(c->debuginfod_urls, sizeof(c->debuginfod_urls),
			     m->debuginfod ? m->debuginfod : getenv("DEBUGINFOD_URLS"),
			     "--debuginfod");
	if (r == 0 && m->policy) {
		/* docs/metrics.md "Trigger policies": capture evaluates them on the metrics. */
		if (!(c->flags & CPA_CFG_SCHED_METRICS) || c->backend != CPA_BACKEND_BPF)
			return log_error_errno(-EINVAL, "--policy needs the scheduler metrics and "
							"the BPF backend (not --sched_metrics=0, "
							"--oneshot or --backend perf)");
		if (!realpath(m->policy, btf))
			return log_error_errno(-errno, "--policy '%s': %m", m->policy);
		r = copy_str(c->policy_path, sizeof(c->policy_path), btf, "--policy");
	}
	if (r == 0)
		r = copy_str(c->record_env_name, sizeof(c->record_env_name), m->record_env_name,
			     "--record_env_name");
	if (r == 0)
		r = copy_str(c->parse_env_values, sizeof(c->parse_env_values), m->parse_env_values,
			     "--parse_env_values");
	if (r < 0)
		return r;
	return config_probes(c, m);
}

static int stage_dir_find(char *buf, size_t len)
{
	const char *env = getenv("CPA_STAGE_DIR");
	int r;

	if (env && *env) {
		if ((size_t)snprintf(buf, len, "%s", env) >= len)
			return log_error_errno(-ENAMETOOLONG, "CPA_STAGE_DIR too long");
	} else {
		r = self_exe_dir(buf, len);
		if (r < 0)
			return log_error_errno(r, "readlink /proc/self/exe: %m");
	}
	for (int i = 0; i < SHM_STAGE_MAX; i++) {
		char path[PATH_MAX + 16];
		const char *name = shm_stage_name((enum shm_stage_id)i);

		snprintf(path, sizeof(path), "%s/%s", buf, name);
		if (access(path, X_OK) < 0)
			return log_error_errno(
				-errno,
				"stage '%s' not usable at '%s': %m (build it, or set "
				"CPA_STAGE_DIR)",
				name, path);
		/* The stage would refuse us itself (common/daemon.c); say it once, now. */
		if (getxattr(path, "security.capability", NULL, 0) > 0 && !cpa_group_member()) {
			log_error("stage '%s' has file capabilities: uid %u is neither root nor in "
				  "group '%s': refused (docs/packaging.md)",
				  path, (unsigned int)getuid(), cpa_group_name());
			return -EPERM;
		}
	}
	return 0;
}

/*
 * Not root: capture's privilege comes from its file (cpa-setcap) or from our
 * ambient capabilities (systemd's AmbientCapabilities=). With neither, and
 * kernel.perf_event_paranoid above 0 (no system-wide perf_event without
 * CAP_PERFMON: neither BPF's sampling events nor the perf backend's), it
 * cannot sample whatever the options: the line capture would give, now,
 * before a store dir or a stage exists (file capabilities count only without
 * no_new_privs: systemd's NoNewPrivileges= keeps an exec from gaining them).
 * Anything less certain (root with capabilities taken away) is capture's to
 * find, with the same line.
 */
static int preflight_privilege(const char *stage_dir)
{
	char path[PATH_MAX + 16];
	int paranoid;

	if (geteuid() == 0 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_PERFMON, 0, 0) == 1 ||
	    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_SYS_ADMIN, 0, 0) == 1)
		return 0;
	/* File capabilities, unless no_new_privs keeps an exec from gaining them. */
	snprintf(path, sizeof(path), "%s/%s", stage_dir, shm_stage_name(SHM_STAGE_CAPTURE));
	if (getxattr(path, "security.capability", NULL, 0) > 0 &&
	    prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
		return 0;
	paranoid = shm_perf_paranoid();
	if (paranoid <= 0)
		return 0;
	log_error("capture: " SHM_CAUSE_NOPRIV, paranoid);
	return -EPERM;
}

/*
 * --oneshot: the run writes a store like any other run, into a private root
 * next to the output file (the same file system, and a directory we can
 * write to, checked before anything starts); after the drain,
 * show_export_root() folds it into --output_prof, the folding `cpa show`
 * does, and the root is removed. docs/pipeline.md, "One-shot".
 */
static int oneshot_root(const char *output, char *buf, size_t len)
{
	const char *slash = strrchr(output, '/');
	char err[PATH_MAX + 128];
	struct stat sb;
	int n;

	if (!*output || (stat(output, &sb) == 0 && S_ISDIR(sb.st_mode))) {
		log_error("--output_prof '%s': want a file name, not a directory", output);
		return -EISDIR;
	}
	/* Refused now, not after the run, if it is another user's link (safepath.h). */
	n = safe_path__check(output, err, sizeof(err));
	if (n < 0) {
		log_error("--output_prof %s", err);
		return n;
	}
	if (!slash)
		n = snprintf(buf, len, "./.cpa-oneshot-XXXXXX");
	else
		n = snprintf(buf, len, "%.*s/.cpa-oneshot-XXXXXX", (int)(slash - output), output);
	if (n < 0 || (size_t)n >= len)
		return log_error_errno(-ENAMETOOLONG, "--output_prof '%s': path too long", output);
	if (!mkdtemp(buf))
		return log_error_errno(-errno, "--output_prof '%s': cannot create '%s': %m", output,
				       buf);
	return 0;
}

static void oneshot_remove(const char *root)
{
	int r = store_root__remove(root);

	if (r < 0)
		log_warn("one-shot: cannot remove the work store '%s': %s", root, strerror(-r));
}

/* The monitor's paths (16 KiB). */
struct monitor_dirs {
	char stage_dir[PATH_MAX], store_dir[PATH_MAX], pidfile[PATH_MAX], oneshot_dir[PATH_MAX];
};

int cmd_monitor(struct cpa_opts *o)
{
	const struct monitor_opts *m = &o->mon;
	struct supervisor_params p = {0};
	struct shm_arena *arena = NULL;
	struct shm_layout layout;
	_cleanup_close_ int pidfd = -1;
	/* On the heap, as the supervisor: the monitor's own samples stay
	 * within a small stack copy. */
	_cleanup_free_ struct monitor_dirs *d = calloc(1, sizeof(*d));
	const char *store_arg = m->store_dir;
	sigset_t mask;
	pid_t keeper = -1;
	int r, code = 1;

	log_set_subsystem("monitor");
	if (!d) {
		log_error_errno(-ENOMEM, "allocate: %m");
		return 1;
	}

	r = supervisor_params__init(&p);
	if (r < 0)
		return 2;
	r = stage_dir_find(d->stage_dir, sizeof(d->stage_dir));
	if (r < 0)
		goto out;
	if (preflight_privilege(d->stage_dir) < 0) {
		code = SHM_EXIT_PERMANENT;
		goto out;
	}
	if (m->oneshot) {
		if (oneshot_root(m->output_prof, d->oneshot_dir, sizeof(d->oneshot_dir)) < 0)
			return 1;
		store_arg = d->oneshot_dir;
	}
	{
		char err[PATH_MAX + 128];
		struct stat st;

		/* Walked without following another user's link (safepath.h). */
		r = safe_path__dir(store_arg, true, 0750, err, sizeof(err));
		if (r == -EPERM)
			log_error("--store_dir %s", err);
		else if (r == -ENOTDIR && stat(store_arg, &st) == 0 && !S_ISDIR(st.st_mode))
			log_error("--store_dir '%s': exists and is not a directory", store_arg);
		else if (r < 0)
			log_error_errno(r, "--store_dir '%s': cannot create it: %m", store_arg);
		if (r < 0)
			goto out;
		close(r);
	}
	if (!realpath(store_arg, d->store_dir)) {
		log_error_errno(-errno, "--store_dir '%s': %m", store_arg);
		goto out;
	}
	r = pidfile_take(d->store_dir, d->pidfile, sizeof(d->pidfile), &pidfd);
	if (r < 0) {
		*d->pidfile = 0; /* another monitor's: not ours to remove */
		goto out;
	}

	shm_layout__default(&layout, (uint32_t)m->stack_size, (uint32_t)m->max_queue_size);
	r = shm_arena__create(&layout, &arena);
	if (r < 0) {
		log_error_errno(r, "create the arena (stack_size %ld, max_queue_size %ld): %m",
				m->stack_size, m->max_queue_size);
		goto out;
	}
	/* An option this machine refuses (a --probe target, --policy): no
	 * restart fixes it (docs/cli.md, "Exit codes"). */
	r = config_fill(shm_arena__config(arena), o, d->store_dir);
	if (r < 0) {
		code = SHM_EXIT_PERMANENT;
		goto out;
	}
	log_info("cpa %s: store_dir %s, freq %ld Hz, %u cpus, arena %llu KiB, stages from %s",
		 CPA_VERSION, d->store_dir, m->freq, shm_arena__config(arena)->nr_cpus,
		 (unsigned long long)(arena->size >> 10), d->stage_dir);
	if (m->oneshot)
		log_info("one-shot: the profile goes to '%s' when the run ends", m->output_prof);

	/* Before any fork: the signalfd sees every signal, no handler runs. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0) {
		log_error_errno(-errno, "sigprocmask: %m");
		goto out;
	}
	signal(SIGPIPE, SIG_IGN);

	p.stage_dir = d->stage_dir;
	p.verbose = o->verbose;
	p.duration_ms = (uint64_t)o->duration * 1000;
	p.stats_every_ms = (uint64_t)m->log_print_cycles * (uint64_t)m->record_interval * 1000;
	if (m->push)
		keeper = push_keeper__start(d->stage_dir, d->store_dir, m->push);
	code = supervisor__run(arena, &p);
	push_keeper__stop(keeper);
	/* Every stage has drained (or was killed): what the store holds is final. */
	if (m->oneshot && show_export_root(d->store_dir, m->output_prof) < 0)
		code = 1;
out:
	if (*d->pidfile)
		unlink(d->pidfile);
	if (*d->oneshot_dir)
		oneshot_remove(d->oneshot_dir);
	shm_arena__free(arena);
	return code;
}
