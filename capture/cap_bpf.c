// SPDX-License-Identifier: MIT
#include "cap_bpf.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "common/log.h"
#include "common/macro.h"
#include "common/probespec.h"
#include "common/timeutil.h"
#include "cap_emit.h"
#include "profile.skel.h"

struct cap_bpf {
	struct profile_bpf *skel;
	struct ring_buffer *rb;
	/* The ring buffer's consumer and producer positions, mapped read-only
	 * apart from libbpf's (which keeps them private): how much is unread
	 * (cap_bpf__rb_unread()). NULL: not mapped. */
	const unsigned long *rb_cons, *rb_prod;
	uint32_t rb_size;
	struct bpf_link **links; /* one per CPU; each owns its perf event fd */
	int *pfds;		 /* those fds (not ours to close): a policy's freq */
	unsigned int n_links;
	struct bpf_link *probe_links[CPA_BPF_PROBE_MAX];
	uint32_t held_probes; /* attached by policies only (cap_bpf__policy_probe) */
	const struct probe_spec *probes;
	unsigned int nr_probes;
	int uprobe_pid; /* --pid's process, else -1: every process */
	uint32_t probe_rate, budget_ppm;
	const char *probe_texts[CPA_BPF_PROBE_MAX];
	uint32_t budget_detached; /* probes the budget detached: never attached again */
	uint32_t refused;	  /* probes left out: unresolved, or refused at attach */
	uint32_t gone;		  /* of refused, those whose file was gone at start */
	struct cpa_bpf_probe_ctl pctl[CPA_BPF_PROBE_MAX]; /* as last written to probe_ctl */
	unsigned int over[CPA_BPF_PROBE_MAX];		  /* windows in a row the trap was over */
	uint64_t det_rate[CPA_BPF_PROBE_MAX];		  /* samples/s before the detach */
	cap_bpf_record_fn fn;
	void *ctx;
	int nr_possible;
	bool offcpu;
	/* ustack_size's pid per slot as we wrote it (only we write it): an
	 * exit of a process without a learned size, nearly every one under
	 * churn, costs no map syscall. NULL: read the map. */
	uint32_t *ustack_pid;
};

/*
 * libbpf's warnings while the programs load, held until the load's outcome
 * (without --verbose): a program the verifier finds too complex (E2BIG, a
 * --stack_size this kernel cannot take) has capture say so in one line
 * rather than thousands of lines of verifier log; any other failure shows
 * them as before.
 */
static struct {
	bool on;
	FILE *f;
	char *buf;
	size_t len;
} load_log;

/* While a probe attaches: libbpf's warnings are debug lines (--verbose), the
 * outcome is ours to say in one line (probe_left_out()). */
static bool attach_quiet;

static void libbpf_lines(enum libbpf_print_level level, char *msg)
{
	size_t n;

	/* One log line per line: a verifier log is thousands of them. */
	for (char *line = msg, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		/* libbpf's own messages start with its name: ours says it once. */
		if (!strncmp(line, "libbpf: ", 8))
			line += 8;
		n = strlen(line);
		if (level == LIBBPF_WARN)
			log_warn("libbpf: %.*s", (int)n, line);
		else
			log_debug("libbpf: %.*s", (int)n, line);
	}
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	_cleanup_free_ char *msg = NULL;

	if (attach_quiet)
		level = LIBBPF_DEBUG;
	if (level != LIBBPF_WARN && !log_enabled(LOG_LVL_DEBUG))
		return 0;
	if (load_log.on && !log_enabled(LOG_LVL_DEBUG)) {
		if (!load_log.f)
			load_log.f = open_memstream(&load_log.buf, &load_log.len);
		if (load_log.f)
			vfprintf(load_log.f, fmt, ap);
		return 0;
	}
	/* Verifier logs arrive as one big multi-line message. */
	if (vasprintf(&msg, fmt, ap) < 0)
		return 0;
	libbpf_lines(level, msg);
	return 0;
}

/* Load the programs, libbpf's warnings held (load_log): shown on a failure
 * other than E2BIG, EPERM or EACCES, which the caller reports in one line
 * (the verifier's size limit; no privilege: shm/stage.h SHM_CAUSE_NOPRIV). */
static int profile_load(struct cap_bpf *b)
{
	int r;

	load_log.on = true;
	r = profile_bpf__load(b->skel);
	load_log.on = false;
	if (load_log.f) {
		fclose(load_log.f);
		if (r < 0 && r != -E2BIG && r != -EPERM && r != -EACCES)
			libbpf_lines(LIBBPF_WARN, load_log.buf);
		free(load_log.buf);
		load_log.f = NULL;
		load_log.buf = NULL;
		load_log.len = 0;
	}
	return r;
}

/* One clear line per libbpf failure; libbpf's own detail went out above.
 * No privilege is the caller's to say, once (capture.c, SHM_CAUSE_NOPRIV). */
static int bpf_fail(int r, const char *what)
{
	if (r == -EPERM || r == -EACCES) {
		log_debug("%s: %s (no privilege)", what, strerror(-r));
		return r;
	}
	if (r == -ENOENT || r == -ESRCH)
		return log_error_errno(r, "%s: %m (kernel BTF missing? try --btf_path)", what);
	return log_error_errno(r, "%s: %m", what);
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct cap_bpf *b = ctx;

	return b->fn(b->ctx, data, size);
}

int cap_bpf__ustack_set(struct cap_bpf *b, uint32_t pid, uint32_t bytes)
{
	int fd = bpf_map__fd(b->skel->maps.ustack_size);
	uint32_t slot = pid % CPA_BPF_USTACK_SLOTS;
	uint64_t v = (uint64_t)bytes << 32 | pid, cur;

	if (!bytes) {
		/* forget pid, not whoever shares its slot now */
		if (b->ustack_pid)
			cur = b->ustack_pid[slot];
		else if (bpf_map_lookup_elem(fd, &slot, &cur) < 0)
			return -errno;
		if ((uint32_t)cur != pid)
			return 0;
		v = 0;
	}
	if (bpf_map_update_elem(fd, &slot, &v, BPF_ANY) < 0)
		return -errno;
	if (b->ustack_pid)
		b->ustack_pid[slot] = (uint32_t)v;
	return 0;
}

uint32_t cap_bpf_ringbuf_size(unsigned int nr_cpus, uint32_t freq, uint32_t stack_size,
			      unsigned int nr_probes, uint64_t probe_rate)
{
	/* Half a second of samples from every CPU: five poll deadlines of slack. */
	uint64_t rec = cpa_bpf_sample_size(stack_size) + 8;
	uint64_t want = (uint64_t)nr_cpus * freq * rec / 2;

	/* A probe may use its whole second's budget in one burst (a loop):
	 * room for all of it, so a burst within the limit loses nothing.
	 * Without a limit, the 64 MiB cap below decides. */
	if (nr_probes)
		want += (uint64_t)nr_probes * (probe_rate ? MIN(probe_rate, 1u << 20) : 1u << 20) *
			rec;
	uint64_t sz = 1u << 20;

	while (sz < want && sz < (64u << 20))
		sz <<= 1;
	return (uint32_t)sz;
}

/*
 * How samples get into the ring buffer (enum cpa_bpf_rec_mode, bpf/profile.h):
 * a record at the size the copy needs where the kernel can reserve one
 * (bpf_ringbuf_reserve_dynptr, 5.19), else built in a per-CPU scratch slot
 * and output at its used length. CPA_BPF_REC_MODE=fixed|dynptr|scratch in the
 * environment picks one (bench_overhead compares them side by side).
 */
static const char *const rec_mode_names[] = {
	[CPA_BPF_REC_FIXED] = "fixed",
	[CPA_BPF_REC_DYNPTR] = "dynptr",
	[CPA_BPF_REC_SCRATCH] = "scratch",
};

static uint32_t rec_mode_pick(void)
{
	const char *env = getenv("CPA_BPF_REC_MODE");

	if (env && *env) {
		for (uint32_t i = 0; i < ARRAY_SIZE(rec_mode_names); i++)
			if (!strcmp(env, rec_mode_names[i]))
				return i;
		log_warn("CPA_BPF_REC_MODE=%s: not fixed, dynptr or scratch; ignored", env);
	}
	if (libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_ringbuf_reserve_dynptr,
				    NULL) > 0)
		return CPA_BPF_REC_DYNPTR;
	return CPA_BPF_REC_SCRATCH;
}

bool cap_bpf_copy_loop(void)
{
	const char *env = getenv("CPA_BPF_USTACK_COPY");

	if (env && !strcmp(env, "unrolled"))
		return false;
	if (env && *env && strcmp(env, "loop"))
		log_warn("CPA_BPF_USTACK_COPY=%s: not loop or unrolled; ignored", env);
	return libbpf_probe_bpf_helper(BPF_PROG_TYPE_PERF_EVENT, BPF_FUNC_loop, NULL) > 0;
}

/* The scratch slots (two per possible CPU) only where they are used. */
static int rec_mode_setup(struct cap_bpf *b)
{
	uint32_t mode = rec_mode_pick();
	bool scratch = mode == CPA_BPF_REC_SCRATCH;
	int r;

	b->skel->rodata->rec_mode = mode;
	b->skel->rodata->use_bpf_loop = cap_bpf_copy_loop();
	r = bpf_map__set_value_size(b->skel->maps.sample_scratch,
				    scratch ? b->skel->rodata->rec_size
					    : sizeof(struct cpa_bpf_sample));
	if (r >= 0)
		r = bpf_map__set_max_entries(b->skel->maps.sample_scratch,
					     scratch ? 2 * (uint32_t)b->nr_possible : 1);
	if (r < 0)
		return bpf_fail(r, "size sample scratch map");
	log_info("BPF sample records: %s, user stack copy %s", rec_mode_names[mode],
		 b->skel->rodata->use_bpf_loop ? "by bpf_loop" : "unrolled");
	return 0;
}

/* The off-CPU programs and maps: loaded only with --offcpu, sized to the stack copy. */
static int offcpu_setup(struct cap_bpf *b, const struct cap_bpf_opts *o)
{
	uint32_t vsize = cpa_bpf_offcpu_size(b->skel->rodata->stack_size);
	int r;

	b->offcpu = o->offcpu;
	b->skel->rodata->offcpu = o->offcpu;
	b->skel->rodata->offcpu_states = o->offcpu_states;
	b->skel->rodata->offcpu_min_ns = o->offcpu_min_ns;
	b->skel->rodata->offcpu_max_ns = o->offcpu_max_ns;
	b->skel->rodata->offcpu_rec_size = vsize;
	b->skel->rodata->offcpu_gated = o->offcpu_gated;
	/* The flush is run by us, never attached. */
	bpf_program__set_autoattach(b->skel->progs.cpa_offcpu_flush, false);
	if (!o->offcpu) {
		bpf_program__set_autoload(b->skel->progs.cpa_offcpu_switch, false);
		bpf_program__set_autoload(b->skel->progs.cpa_offcpu_flush, false);
		vsize = sizeof(struct cpa_bpf_offcpu);
	}
	r = bpf_map__set_value_size(b->skel->maps.offcpu_stash, vsize);
	if (r >= 0)
		r = bpf_map__set_value_size(b->skel->maps.offcpu_zero, vsize);
	if (r >= 0)
		r = bpf_map__set_max_entries(b->skel->maps.offcpu_stash,
					     o->offcpu ? MAX(o->offcpu_threads, 1u) : 1);
	if (r >= 0)
		r = bpf_map__set_max_entries(b->skel->maps.offcpu_cur,
					     o->offcpu ? MAX(o->offcpu_threads, 1u) : 1);
	return r < 0 ? bpf_fail(r, "size off-CPU maps") : 0;
}

int cap_bpf__offcpu_flush(struct cap_bpf *b)
{
	LIBBPF_OPTS(bpf_test_run_opts, t);

	if (!b->offcpu)
		return 0;
	if (bpf_prog_test_run_opts(bpf_program__fd(b->skel->progs.cpa_offcpu_flush), &t) < 0)
		return -errno;
	return (int)t.retval;
}

/* Load only the probe programs some spec needs; none are auto-attached. */
static void probes_autoload(struct cap_bpf *b)
{
	bool user = false, usdt = false, kern = false, tp = false;
	struct bpf_object *obj = b->skel->obj;
	char name[32];

	/* One fentry/fexit pair per probe id, bound to its function at load. */
	for (unsigned int i = 0; i < CPA_BPF_PROBE_MAX; i++) {
		bool in = i < b->nr_probes && !(b->refused & (1u << i));
		bool fentry = in && b->probes[i].type == PROBE_FENTRY;
		bool fexit = in && b->probes[i].type == PROBE_FEXIT;
		struct bpf_program *pe, *px;

		snprintf(name, sizeof(name), "cpa_fentry%u", i);
		pe = bpf_object__find_program_by_name(obj, name);
		snprintf(name, sizeof(name), "cpa_fexit%u", i);
		px = bpf_object__find_program_by_name(obj, name);
		bpf_program__set_autoload(pe, fentry);
		bpf_program__set_autoload(px, fexit);
		bpf_program__set_autoattach(pe, false);
		bpf_program__set_autoattach(px, false);
		if (fentry || fexit)
			bpf_program__set_attach_target(fentry ? pe : px, 0, b->probes[i].a);
	}

	for (unsigned int i = 0; i < b->nr_probes; i++) {
		if (b->refused & (1u << i))
			continue;
		switch (b->probes[i].type) {
		case PROBE_UPROBE:
		case PROBE_URETPROBE:
			user = true;
			break;
		case PROBE_USDT:
			usdt = true;
			break;
		case PROBE_KPROBE:
		case PROBE_KRETPROBE:
			kern = true;
			break;
		case PROBE_TRACEPOINT:
			tp = true;
			break;
		case PROBE_FENTRY:
		case PROBE_FEXIT:
			break;
		}
	}
	bpf_program__set_autoload(b->skel->progs.cpa_probe_user, user);
	/* The trap calibration, where some probe traps in user space. */
	bpf_program__set_autoload(b->skel->progs.cpa_probe_calib, user || usdt);
	bpf_program__set_autoattach(b->skel->progs.cpa_probe_calib, false);
	bpf_program__set_autoload(b->skel->progs.cpa_probe_usdt, usdt);
	bpf_program__set_autoload(b->skel->progs.cpa_probe_kernel, kern);
	bpf_program__set_autoload(b->skel->progs.cpa_probe_tp, tp);
	bpf_program__set_autoattach(b->skel->progs.cpa_probe_user, false);
	bpf_program__set_autoattach(b->skel->progs.cpa_probe_usdt, false);
	bpf_program__set_autoattach(b->skel->progs.cpa_probe_kernel, false);
	bpf_program__set_autoattach(b->skel->progs.cpa_probe_tp, false);
}

/*
 * The ring buffer's two position pages again, read-only (the kernel allows
 * that of both; libbpf maps the same pages for itself): what the BPF side
 * produced and what on_record() consumed, as libbpf stores it after each
 * record. Not mapped: cap_bpf__rb_unread() says full, so nothing that asks
 * it for room gets any.
 */
static void rb_positions_map(struct cap_bpf *b, uint32_t size)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	int fd = bpf_map__fd(b->skel->maps.rb);
	void *cons, *prod;

	cons = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, 0);
	if (cons == MAP_FAILED)
		return;
	prod = mmap(NULL, pg, PROT_READ, MAP_SHARED, fd, (off_t)pg);
	if (prod == MAP_FAILED) {
		munmap(cons, pg);
		return;
	}
	b->rb_cons = cons;
	b->rb_prod = prod;
	b->rb_size = size;
}

int cap_bpf__open(const struct cap_bpf_opts *o, cap_bpf_record_fn fn, void *ctx,
		  struct cap_bpf **ret)
{
	LIBBPF_OPTS(bpf_object_open_opts, oo);
	struct cap_bpf *b;
	int r;

	libbpf_set_print(libbpf_print);
	if (o->btf_path && o->btf_path[0])
		oo.btf_custom_path = o->btf_path;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->fn = fn;
	b->ctx = ctx;
	b->ustack_pid = calloc(CPA_BPF_USTACK_SLOTS, sizeof(*b->ustack_pid));
	b->nr_possible = libbpf_num_possible_cpus();
	if (b->nr_possible <= 0) {
		r = bpf_fail(b->nr_possible ? b->nr_possible : -EINVAL, "count possible CPUs");
		goto out_free;
	}

	b->skel = profile_bpf__open_opts(&oo);
	if (!b->skel) {
		r = bpf_fail(-errno, "open BPF object");
		goto out_free;
	}

	b->skel->rodata->target_tgid = o->target_tgid;
	if (o->comm && o->comm[0]) {
		b->skel->rodata->filter_comm = true;
		strncpy((char *)b->skel->rodata->comm_filter, o->comm, CPA_BPF_COMM_LEN - 1);
	}
	b->skel->rodata->stack_size = o->kernel_only ? 0 : o->stack_size;
	b->skel->rodata->stack_start =
		MIN(o->stack_start ? o->stack_start : o->stack_size, b->skel->rodata->stack_size);
	b->skel->rodata->rec_size = cpa_bpf_oncpu_size(b->skel->rodata->stack_size);
	b->skel->rodata->kernel_only = o->kernel_only;
	b->skel->rodata->with_idle = o->with_idle;
	b->skel->rodata->wakeup_bytes = MIN(o->wakeup_bytes, o->ringbuf_size / 2);
	b->skel->rodata->probe_rate = o->probe_rate;
	b->probe_rate = o->probe_rate;
	b->budget_ppm = o->probe_budget_ppm;
	memcpy(b->probe_texts, o->probe_texts, sizeof(b->probe_texts));
	b->skel->rodata->policy_rate_probes = o->policy_rate_probes;
	b->skel->rodata->policy_attach_probes = o->policy_attach_probes;
	b->held_probes = o->policy_attach_probes;
	b->probes = o->probes;
	/* With --pid, user probes trap in that process only: other processes
	 * never pay the breakpoint (the BPF filter would drop them anyway). */
	b->uprobe_pid = o->target_tgid ? (int)o->target_tgid : -1;
	b->nr_probes = MIN(o->nr_probes, (unsigned int)CPA_BPF_PROBE_MAX);
	b->refused = o->probes_out & (uint32_t)((1ull << b->nr_probes) - 1);
	b->gone = o->probes_gone & b->refused;
	probes_autoload(b);
	r = bpf_map__set_max_entries(b->skel->maps.rb, o->ringbuf_size);
	if (r < 0) {
		r = bpf_fail(r, "size BPF ring buffer");
		goto out_free;
	}
	r = offcpu_setup(b, o);
	if (r >= 0)
		r = rec_mode_setup(b);
	if (r < 0)
		goto out_free;

	r = profile_load(b);
	if (r == -E2BIG) {
		log_debug("load BPF programs: too complex for the verifier (E2BIG)");
		goto out_free;
	}
	if (r < 0) {
		r = bpf_fail(r, "load BPF programs (verifier output above)");
		goto out_free;
	}

	b->rb = ring_buffer__new(bpf_map__fd(b->skel->maps.rb), on_record, b, NULL);
	if (!b->rb) {
		r = bpf_fail(-errno, "map BPF ring buffer");
		goto out_free;
	}
	rb_positions_map(b, o->ringbuf_size);
	*ret = b;
	return 0;

out_free:
	cap_bpf__free(b);
	return r;
}

/* ---- trigger policies (docs/metrics.md): capture/cap_policy.c drives these ---- */

int cap_bpf__policy_target(struct cap_bpf *b, uint32_t tgid, uint32_t flags)
{
	int fd = bpf_map__fd(b->skel->maps.policy_targets);

	if (!flags)
		return bpf_map_delete_elem(fd, &tgid) < 0 && errno != ENOENT ? -errno : 0;
	return bpf_map_update_elem(fd, &tgid, &flags, BPF_ANY) < 0 ? -errno : 0;
}

int cap_bpf__boost(struct cap_bpf *b, uint32_t freq, uint32_t div)
{
	/* The kernel turns a cpu-clock event's frequency into a fixed period
	 * when it opens it (perf_swevent_init_hrtimer clears attr.freq), so
	 * PERF_EVENT_IOC_PERIOD takes nanoseconds here, not Hz. */
	uint64_t f = freq ? 1000000000ull / freq : 0;
	int r = 0;

	if (freq == 0 || freq > 100000)
		return -EINVAL;
	/* Others thinned first when raising, last when lowering: never a
	 * moment of everyone at the raised rate. */
	if (div > 1)
		__atomic_store_n(&b->skel->data->boost_div, div, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < b->n_links; i++)
		if (ioctl(b->pfds[i], PERF_EVENT_IOC_PERIOD, &f) < 0 && !r)
			r = -errno;
	if (div <= 1)
		__atomic_store_n(&b->skel->data->boost_div, 1, __ATOMIC_RELAXED);
	return r;
}

/* exclude_idle: a tick that finds the CPU idle runs no program (the BPF side
 * would leave at once: pid 0 is not sampled without with_idle); on an idle
 * host those were most of the program's runs. */
static int perf_open_cpu_clock(unsigned int cpu, uint32_t freq, bool exclude_idle)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = freq,
		.freq = 1,
		.exclude_idle = exclude_idle,
	};
	int fd = (int)syscall(__NR_perf_event_open, &attr, -1, (int)cpu, -1, PERF_FLAG_FD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

int cap_bpf__attach(struct cap_bpf *b, const unsigned int *cpus, unsigned int n, uint32_t freq)
{
	int r;

	b->links = calloc(n, sizeof(*b->links));
	b->pfds = calloc(n, sizeof(*b->pfds));
	if (!b->links || !b->pfds)
		return -ENOMEM;

	/* Task events first: an exec must not be missed between the first
	 * sample of the new image and the tracepoint going live. */
	r = profile_bpf__attach(b->skel);
	if (r < 0)
		return bpf_fail(r, b->offcpu ? "attach exec/exit/fork/sched_switch tracepoints"
					     : "attach exec/exit/fork tracepoints");

	for (unsigned int i = 0; i < n; i++) {
		struct bpf_link *link;
		int fd = perf_open_cpu_clock(cpus[i], freq, !b->skel->rodata->with_idle);

		if (fd == -ENODEV) /* went offline since we read the list */
			continue;
		if (fd == -EINVAL)
			return log_error_errno(fd,
					       "perf_event_open cpu-clock cpu %u at %u Hz: %m "
					       "(above kernel.perf_event_max_sample_rate?)",
					       cpus[i], freq);
		if (fd == -EACCES || fd == -EPERM)
			return bpf_fail(fd, "perf_event_open cpu-clock");
		if (fd < 0)
			return log_error_errno(fd, "perf_event_open cpu-clock cpu %u: %m", cpus[i]);
		link = bpf_program__attach_perf_event(b->skel->progs.cpa_on_cpu, fd);
		if (!link) {
			r = -errno;
			close(fd);
			return bpf_fail(r, "attach BPF program to cpu-clock");
		}
		b->pfds[b->n_links] = fd;
		b->links[b->n_links++] = link;
	}
	if (!b->n_links)
		return log_error_errno(-ENODEV, "no online CPU to sample");
	return 0;
}

static struct bpf_link *probe_attach(struct cap_bpf *b, unsigned int i)
{
	const struct probe_spec *p = &b->probes[i];
	struct profile_bpf *sk = b->skel;
	char dir[64];
	int r;

	switch (p->type) {
	case PROBE_TRACEPOINT: {
		LIBBPF_OPTS(bpf_tracepoint_opts, to, .bpf_cookie = i);

		r = probe_tracefs_dir(dir, sizeof(dir));
		if (r < 0) {
			errno = -r;
			return NULL;
		}
		return bpf_program__attach_tracepoint_opts(sk->progs.cpa_probe_tp, p->a, p->b, &to);
	}
	case PROBE_UPROBE:
	case PROBE_URETPROBE: {
		LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = i,
			    .retprobe = p->type == PROBE_URETPROBE);

		return bpf_program__attach_uprobe_opts(sk->progs.cpa_probe_user, b->uprobe_pid,
						       p->path, (size_t)p->file_off, &uo);
	}
	case PROBE_USDT: {
		LIBBPF_OPTS(bpf_usdt_opts, so, .usdt_cookie = i);

		return bpf_program__attach_usdt(sk->progs.cpa_probe_usdt, b->uprobe_pid, p->path,
						p->a, p->b, &so);
	}
	case PROBE_KPROBE:
	case PROBE_KRETPROBE: {
		LIBBPF_OPTS(bpf_kprobe_opts, ko, .bpf_cookie = i, .offset = (size_t)p->off,
			    .retprobe = p->type == PROBE_KRETPROBE);

		return bpf_program__attach_kprobe_opts(sk->progs.cpa_probe_kernel, p->a, &ko);
	}
	case PROBE_FENTRY:
	case PROBE_FEXIT: {
		char name[32];

		snprintf(name, sizeof(name), "%s%u",
			 p->type == PROBE_FENTRY ? "cpa_fentry" : "cpa_fexit", i);
		return bpf_program__attach_trace(bpf_object__find_program_by_name(sk->obj, name));
	}
	}
	errno = EINVAL;
	return NULL;
}

/* ---- the trap calibration (docs/capture.md "Probe budget") ---- */

#define CAP_CALIB_CALLS	 500 /* calls per timed round */
#define CAP_CALIB_ROUNDS 7   /* rounds: the fastest one counts */

/*
 * What a uprobe hit costs depends on the probed instruction: the kernel
 * emulates a push or a nop (one trap), and steps any other instruction out
 * of line (a second trap). Function entries start with endbr64 (CET
 * builds), a push (frame pointer, saved registers), or anything else; USDT
 * notes sit on a nop. One calibration target per class, each doing nothing.
 */
enum calib_class { CALIB_PUSH, CALIB_ENDBR, CALIB_NOP, CALIB_STEP, CALIB_MAX };

static const char *const calib_names[CALIB_MAX] = {"push", "endbr64", "nop", "other"};

int cap_trap_push(int x), cap_trap_endbr(int x), cap_trap_nop(int x), cap_trap_step(int x);
__asm__(".text\n"
	".p2align 4\n.hidden cap_trap_push\n.globl cap_trap_push\n"
	".type cap_trap_push,@function\ncap_trap_push:\n"
	"\tpush %rbp\n\tlea 1(%rdi), %eax\n\tpop %rbp\n\tret\n.size cap_trap_push, .-cap_trap_push\n"
	".p2align 4\n.hidden cap_trap_endbr\n.globl cap_trap_endbr\n"
	".type cap_trap_endbr,@function\ncap_trap_endbr:\n"
	"\tendbr64\n\tlea 1(%rdi), %eax\n\tret\n.size cap_trap_endbr, .-cap_trap_endbr\n"
	".p2align 4\n.hidden cap_trap_nop\n.globl cap_trap_nop\n"
	".type cap_trap_nop,@function\ncap_trap_nop:\n"
	"\tnop\n\tlea 1(%rdi), %eax\n\tret\n.size cap_trap_nop, .-cap_trap_nop\n"
	".p2align 4\n.hidden cap_trap_step\n.globl cap_trap_step\n"
	".type cap_trap_step,@function\ncap_trap_step:\n"
	"\tlea 1(%rdi), %eax\n\tret\n.size cap_trap_step, .-cap_trap_step\n");

static int (*const calib_fns[CALIB_MAX])(int) = {cap_trap_push, cap_trap_endbr, cap_trap_nop,
						 cap_trap_step};

/* The class of the instruction at a probe's file offset. */
static enum calib_class calib_class_of(const struct probe_spec *p)
{
	static const uint8_t endbr[4] = {0xf3, 0x0f, 0x1e, 0xfa};
	uint8_t c[4] = {0};
	int fd;

	if (p->type == PROBE_USDT)
		return CALIB_NOP;
	fd = open(p->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CALIB_STEP;
	if (pread(fd, c, sizeof(c), (off_t)p->file_off) != (ssize_t)sizeof(c))
		c[0] = 0;
	close(fd);
	if (!memcmp(c, endbr, sizeof(endbr)))
		return CALIB_ENDBR;
	if ((c[0] >= 0x50 && c[0] <= 0x57) || (c[0] == 0x41 && c[1] >= 0x50 && c[1] <= 0x57))
		return CALIB_PUSH;
	if (c[0] == 0x90 || (c[0] == 0x0f && c[1] == 0x1f) ||
	    (c[0] == 0x66 && (c[1] == 0x90 || (c[1] == 0x0f && c[2] == 0x1f))))
		return CALIB_NOP;
	return CALIB_STEP;
}

/* ns of the fastest of CAP_CALIB_ROUNDS rounds of CAP_CALIB_CALLS calls:
 * the round least disturbed by other work on the machine. */
static uint64_t calib_round_ns(int (*f)(int))
{
	int (*volatile fn)(int) = f;
	uint64_t best = UINT64_MAX;
	int x = 0;

	for (unsigned int r = 0; r < CAP_CALIB_ROUNDS; r++) {
		uint64_t t0 = clock_ns(CLOCK_MONOTONIC), t;

		for (unsigned int i = 0; i < CAP_CALIB_CALLS; i++)
			x = fn(x);
		t = clock_ns(CLOCK_MONOTONIC) - t0;
		best = MIN(best, t);
	}
	__asm__ volatile("" : : "r"(x));
	return best;
}

/* The file and file offset of our own code at addr (/proc/self/maps). */
static int self_file_off(const void *addr, char *path, size_t len, uint64_t *ret)
{
	uintptr_t a = (uintptr_t)addr;
	char line[1024];
	int r = -ENOENT;
	FILE *f = fopen("/proc/self/maps", "re");

	if (!f)
		return -errno;
	while (r < 0 && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, off;
		int n = 0;

		if (sscanf(line, "%lx-%lx %*s %lx %*s %*s%n", &lo, &hi, &off, &n) != 3 || a < lo ||
		    a >= hi)
			continue;
		while (line[n] == ' ')
			n++;
		line[strcspn(line, "\n")] = 0;
		if (line[n] != '/')
			break;
		snprintf(path, len, "%s", line + n);
		*ret = a - lo + off;
		r = 0;
	}
	fclose(f);
	return r;
}

/*
 * The time one hit of a user probe costs the probed thread beyond the BPF
 * program: breakpoint, kernel entry, uprobe dispatch, emulation or
 * out-of-line step of the probed instruction, return (and for a uretprobe
 * the return trampoline's trap). Measured on this host by timing our own
 * target of that instruction class without and with a uprobe (an empty BPF
 * program) on it; picoseconds per call, 0 if it could not be measured.
 */
static uint64_t calib_trap_ps(struct cap_bpf *b, enum calib_class cls, bool ret_probe)
{
	LIBBPF_OPTS(bpf_uprobe_opts, uo, .retprobe = ret_probe);
	struct bpf_link *link;
	uint64_t off = 0, bare, hit;
	char path[512];
	int r;

	r = self_file_off((const void *)calib_fns[cls], path, sizeof(path), &off);
	if (r < 0) {
		log_warn_errno(r, "probe trap calibration: own code not found in /proc/self/maps: "
				  "%m; trap cost not counted");
		return 0;
	}
	bare = calib_round_ns(calib_fns[cls]);
	link = bpf_program__attach_uprobe_opts(b->skel->progs.cpa_probe_calib, getpid(), path,
					       (size_t)off, &uo);
	if (!link) {
		log_warn_errno(-errno,
			       "probe trap calibration: uprobe on %s: %m; trap cost not "
			       "counted",
			       path);
		return 0;
	}
	hit = calib_round_ns(calib_fns[cls]);
	bpf_link__destroy(link);
	return hit > bare ? (hit - bare) * 1000 / CAP_CALIB_CALLS : 0;
}

/* Each probe's trap time into probe_ctl (calibrated once per class in use). */
static void probes_calibrate(struct cap_bpf *b)
{
	int fd = bpf_map__fd(b->skel->maps.probe_ctl);
	uint64_t ps[CALIB_MAX][2];

	memset(ps, 0xff, sizeof(ps));
	for (unsigned int i = 0; i < b->nr_probes; i++) {
		enum probe_type t = b->probes[i].type;

		b->pctl[i] = (struct cpa_bpf_probe_ctl){0};
		if (b->refused & (1u << i))
			b->pctl[i].state =
				b->gone & (1u << i) ? CPA_BPF_PROBE_GONE : CPA_BPF_PROBE_REFUSED;
		else if (t == PROBE_UPROBE || t == PROBE_URETPROBE || t == PROBE_USDT) {
			enum calib_class cls = calib_class_of(&b->probes[i]);
			bool ret = t == PROBE_URETPROBE;
			uint64_t *v = &ps[cls][ret];

			if (*v == UINT64_MAX) {
				*v = calib_trap_ps(b, cls, ret);
				log_info("probe trap time (%s on a %s, own code, fastest of %u x "
					 "%u calls): %.2f us per hit",
					 ret ? "uretprobe" : "uprobe", calib_names[cls],
					 CAP_CALIB_ROUNDS, CAP_CALIB_CALLS, (double)*v / 1e6);
			}
			b->pctl[i].trap_ps = *v;
		}
		if (bpf_map_update_elem(fd, &i, &b->pctl[i], BPF_ANY) < 0)
			log_warn_errno(-errno, "probe %u: write probe_ctl: %m", i);
	}
}

static void probe_ctl_set(struct cap_bpf *b, unsigned int i, uint32_t state, uint32_t thin)
{
	int fd = bpf_map__fd(b->skel->maps.probe_ctl);

	b->pctl[i].state = state;
	b->pctl[i].thin_rate = thin;
	if (bpf_map_update_elem(fd, &i, &b->pctl[i], BPF_ANY) < 0)
		log_warn_errno(-errno, "probe %u: write probe_ctl: %m", i);
}

/* What the kernel's error means: its name where strerror() has none. */
static const char *attach_reason(int err, char *buf, size_t len)
{
	if (err == 524) /* ENOTSUPP, the kernel's own: libc has no text for it */
		return "ENOTSUPP (524): the kernel's uprobes cannot take the instruction there";
	snprintf(buf, len, "%s", strerror(err));
	return buf;
}

/* Probe i could not be attached (err: errno): one line, and it is left out
 * for the rest of this capture (cpa ctl cost: state "detached (refused)"). */
static void probe_left_out(struct cap_bpf *b, unsigned int i, int err)
{
	const struct probe_spec *p = &b->probes[i];
	const char *name = b->probe_texts[i] ? b->probe_texts[i] : "?";
	char where[PROBE_PART_MAX * 3 + 64], why[128];

	switch (p->type) {
	case PROBE_UPROBE:
	case PROBE_URETPROBE:
		snprintf(where, sizeof(where), "%s on %s at file offset %#llx",
			 p->type == PROBE_UPROBE ? "uprobe" : "uretprobe", p->path,
			 (unsigned long long)p->file_off);
		break;
	case PROBE_USDT:
		snprintf(where, sizeof(where), "USDT %s:%s in %s", p->a, p->b, p->path);
		break;
	case PROBE_TRACEPOINT:
		snprintf(where, sizeof(where), "tracepoint %s:%s", p->a, p->b);
		break;
	default:
		snprintf(where, sizeof(where), "%s+%#llx", p->a, (unsigned long long)p->off);
		break;
	}
	b->refused |= 1u << i;
	probe_ctl_set(b, i, CPA_BPF_PROBE_REFUSED, 0);
	/* Out of a resource now (a later capture start may find it): not a
	 * refusal of the probe itself, and not worth stopping capture for. */
	if (err == ENOMEM || err == EMFILE || err == ENFILE || err == EAGAIN || err == EINTR)
		log_warn("probe %u '%s' left out until capture's next start: attaching its %s "
			 "failed: %s; sampling and the other probes go on ([lost: capture "
			 "probe_refused])",
			 i, name, where, attach_reason(err, why, sizeof(why)));
	else
		log_warn("probe %u '%s' left out: the kernel refused its %s: %s; sampling and the "
			 "other probes go on ([lost: capture probe_refused])",
			 i, name, where, attach_reason(err, why, sizeof(why)));
}

/* Attach probe i; left out (NULL) when the kernel refuses it. */
static struct bpf_link *probe_attach_or_leave(struct cap_bpf *b, unsigned int i)
{
	struct bpf_link *link;

	attach_quiet = true;
	link = probe_attach(b, i);
	attach_quiet = false;
	if (!link)
		probe_left_out(b, i, errno ? errno : EINVAL);
	return link;
}

int cap_bpf__attach_probes(struct cap_bpf *b)
{
	probes_calibrate(b);
	for (unsigned int i = 0; i < b->nr_probes; i++) {
		if ((b->held_probes | b->refused) & (1u << i))
			continue;
		b->probe_links[i] = probe_attach_or_leave(b, i);
	}
	return 0;
}

uint32_t cap_bpf__probes_refused(const struct cap_bpf *b)
{
	return b->refused;
}

/* ---- trigger policies: their probes (probe=, attach=) ---- */

int cap_bpf__policy_probe(struct cap_bpf *b, unsigned int id, bool on)
{
	if (id >= b->nr_probes || !(b->held_probes & (1u << id)))
		return -EINVAL;
	if (!on) {
		bpf_link__destroy(b->probe_links[id]);
		b->probe_links[id] = NULL;
		return 0;
	}
	if (b->probe_links[id] || ((b->budget_detached | b->refused) & (1u << id)))
		return 0;
	b->probe_links[id] = probe_attach_or_leave(b, id);
	return 0;
}

int cap_bpf__policy_hits(struct cap_bpf *b, cap_bpf_hit_fn fn, void *ctx)
{
	int fd = bpf_map__fd(b->skel->maps.policy_hits);
	struct cpa_bpf_policy_hit keys[256], *prev = NULL, k;
	unsigned int n = 0;
	uint64_t v;

	/* Keys first, then take each (lookup and delete is atomic per entry);
	 * 256 at a time, the rest the next second. */
	while (n < ARRAY_SIZE(keys) && bpf_map_get_next_key(fd, prev, &k) == 0) {
		keys[n] = k;
		prev = &keys[n++];
	}
	for (unsigned int i = 0; i < n; i++)
		if (bpf_map_lookup_and_delete_elem(fd, &keys[i], &v) == 0)
			fn(ctx, keys[i].tgid, keys[i].probe_id, v);
	return (int)n;
}

int cap_bpf__array_read(int fd, uint32_t n, void *vals, size_t stride)
{
	LIBBPF_OPTS(bpf_map_batch_opts, bo);
	_cleanup_free_ uint32_t *keys = calloc(n ? n : 1, sizeof(*keys));
	uint32_t count = n, out = 0;

	if (!keys)
		return -ENOMEM;
	/* One syscall for the whole array (5.6+): these are read every second,
	 * and a syscall is the dearest thing a tick does on a VM. */
	if (bpf_map_lookup_batch(fd, NULL, &out, keys, vals, &count, &bo) == 0 ||
	    (errno == ENOENT && count == n))
		return 0;
	if (errno != EINVAL && errno != ENOTSUP && errno != EOPNOTSUPP && errno != ENOENT)
		return -errno;
	for (uint32_t k = 0; k < n; k++)
		if (bpf_map_lookup_elem(fd, &k, (uint8_t *)vals + (size_t)k * stride) < 0)
			return -errno;
	return 0;
}

int cap_bpf__percpu_sum(int fd, int nr_possible, uint32_t n, uint64_t *ret)
{
	size_t stride = (size_t)nr_possible * sizeof(uint64_t);
	_cleanup_free_ uint64_t *vals = calloc(n, stride);
	int r;

	if (!vals)
		return -ENOMEM;
	r = cap_bpf__array_read(fd, n, vals, stride);
	if (r < 0)
		return r;
	for (uint32_t k = 0; k < n; k++) {
		ret[k] = 0;
		for (int c = 0; c < nr_possible; c++)
			ret[k] += vals[(size_t)k * (size_t)nr_possible + (size_t)c];
	}
	return 0;
}

int cap_bpf__read_probe_stats(struct cap_bpf *b, uint64_t ret[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX])
{
	return cap_bpf__percpu_sum(bpf_map__fd(b->skel->maps.probe_stats), b->nr_possible,
				   CPA_BPF_PROBE_MAX * CPA_BPF_PSTAT_MAX, &ret[0][0]);
}

/* ---- the probe budget ---- */

/* The samples/s that keep a probe's BPF cost within room ns per second, its
 * admitted samples having cost run_ns per second at adm per second. */
static uint32_t thin_to(double adm, double run_ns, double room, uint32_t cur)
{
	double want = run_ns > 0 && room > 0 ? adm * room / run_ns * 0.8 : 1;

	if (cur && want > cur / 2.0)
		want = cur / 2.0; /* still over: at least halve */
	return want < 1 ? 1 : want > 1e6 ? 1000000 : (uint32_t)want;
}

uint32_t cap_bpf__probe_budget(struct cap_bpf *b,
			       const uint64_t now[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX],
			       const uint64_t prev[CPA_BPF_PROBE_MAX][CPA_BPF_PSTAT_MAX],
			       uint64_t window_ns)
{
	double secs = (double)window_ns / 1e9, budget = (double)b->budget_ppm / 1e4; /* % */
	uint32_t detached = 0;

	if (!b->budget_ppm || window_ns < NSEC_PER_SEC / 2)
		return 0;
	for (unsigned int i = 0; i < b->nr_probes; i++) {
		struct cpa_bpf_probe_ctl *c = &b->pctl[i];
		const char *name = b->probe_texts[i] ? b->probe_texts[i] : "?";
		double runs = (double)(now[i][CPA_BPF_PSTAT_RUNS] - prev[i][CPA_BPF_PSTAT_RUNS]);
		double run_ns =
			(double)(now[i][CPA_BPF_PSTAT_RUN_NS] - prev[i][CPA_BPF_PSTAT_RUN_NS]) /
			secs;
		double adm =
			(double)((now[i][CPA_BPF_PSTAT_HITS] - prev[i][CPA_BPF_PSTAT_HITS]) -
				 (now[i][CPA_BPF_PSTAT_SKIPPED] - prev[i][CPA_BPF_PSTAT_SKIPPED])) /
			secs;
		double rate = runs / secs, trap_ns = rate * (double)c->trap_ps / 1e3;
		double trap_pct = trap_ns / 1e7, bpf_pct = run_ns / 1e7;
		bool at_floor;

		if (c->state == CPA_BPF_PROBE_DETACHED || !b->probe_links[i])
			continue;
		/* Over even at the floor: every hit traps, or thinned to 1/s its
		 * runs alone (the skipped ones too) cost more than the budget. */
		at_floor = trap_pct > budget || (c->thin_rate == 1 && trap_pct + bpf_pct > budget);
		b->over[i] = at_floor ? b->over[i] + 1 : 0;
		if (b->over[i] >= 2) {
			bpf_link__destroy(b->probe_links[i]);
			b->probe_links[i] = NULL;
			b->budget_detached |= 1u << i;
			b->det_rate[i] = cap_emit__probe_detached_rate(
				now[i][CPA_BPF_PSTAT_HITS] - prev[i][CPA_BPF_PSTAT_HITS], window_ns,
				c->thin_rate ? c->thin_rate : b->probe_rate);
			probe_ctl_set(b, i, CPA_BPF_PROBE_DETACHED, c->thin_rate);
			detached |= 1u << i;
			log_warn("probe %u '%s' detached: %.0f hits/s cost %.2f %% of a CPU (trap "
				 "%.2f us x %.0f/s = %.2f %%, BPF %.2f %%) even thinned to %u "
				 "samples/s, over --probe_budget %.2f %%; its samples stop here "
				 "([lost: capture probe_detached])",
				 i, name, rate, trap_pct + bpf_pct, (double)c->trap_ps / 1e6, rate,
				 trap_pct, bpf_pct, c->thin_rate, budget);
			continue;
		}
		if (trap_pct + bpf_pct > budget) {
			uint32_t lim = c->thin_rate ? c->thin_rate : b->probe_rate;
			uint32_t t = thin_to(adm, run_ns, (budget - trap_pct) * 1e7, lim);

			if (adm < 1 || (lim && t >= lim))
				continue; /* nothing left to thin */
			if (c->state != CPA_BPF_PROBE_THINNED)
				log_warn("probe %u '%s' thinned to %u samples/s: %.0f hits/s cost "
					 "%.2f %% of a CPU (trap %.2f us x %.0f/s = %.2f %%, BPF "
					 "%.2f %%), over --probe_budget %.2f %%; hits over it "
					 "[lost: capture probe_skipped]",
					 i, name, t, rate, trap_pct + bpf_pct,
					 (double)c->trap_ps / 1e6, rate, trap_pct, bpf_pct, budget);
			else
				log_debug("probe %u: thinned further to %u samples/s", i, t);
			probe_ctl_set(b, i, CPA_BPF_PROBE_THINNED, t);
		} else if (c->state == CPA_BPF_PROBE_THINNED && trap_pct + bpf_pct < budget / 2) {
			/* Room again: double it, back to --probe_rate. */
			uint64_t t = (uint64_t)c->thin_rate * 2;

			if ((b->probe_rate && t >= b->probe_rate) || t > 1000000) {
				log_info("probe %u '%s': back under --probe_budget, no longer "
					 "thinned",
					 i, name);
				probe_ctl_set(b, i, CPA_BPF_PROBE_ON, 0);
			} else {
				probe_ctl_set(b, i, CPA_BPF_PROBE_THINNED, (uint32_t)t);
			}
		}
	}
	return detached;
}

uint64_t cap_bpf__probe_detached_rate(const struct cap_bpf *b, unsigned int id)
{
	return id < CPA_BPF_PROBE_MAX && (b->budget_detached & (1u << id)) ? b->det_rate[id] : 0;
}

uint64_t cap_bpf__probe_trap_ps(const struct cap_bpf *b, unsigned int id)
{
	return id < CPA_BPF_PROBE_MAX ? b->pctl[id].trap_ps : 0;
}

int cap_bpf__poll(struct cap_bpf *b, int timeout_ms)
{
	int r, n;

	/* Records are submitted without wakeups: epoll only fires when the
	 * BPF side forced one past the watermark, so consume either way (and
	 * with nothing to wait for, consume alone: no epoll_wait). */
	r = timeout_ms ? ring_buffer__poll(b->rb, timeout_ms) : 0;
	if (r < 0 && r != -EINTR)
		return r;
	n = ring_buffer__consume(b->rb);
	if (n < 0)
		return n;
	if (r == -EINTR)
		return -EINTR;
	return r + n;
}

int cap_bpf__wait(struct cap_bpf *b, int timeout_ms)
{
	struct epoll_event ev;
	int r = epoll_wait(ring_buffer__epoll_fd(b->rb), &ev, 1, timeout_ms);

	return r < 0 ? -errno : r;
}

int cap_bpf__epoll_fd(const struct cap_bpf *b)
{
	return ring_buffer__epoll_fd(b->rb);
}

uint64_t cap_bpf__rb_unread(const struct cap_bpf *b, uint64_t *ret_size)
{
	unsigned long prod, cons;

	*ret_size = b->rb_size;
	if (!b->rb_prod)
		return b->rb_size;
	/* Pairs with the kernel's store-release of the producer position,
	 * made at reserve (bpf_ringbuf_reserve: what is reserved counts as
	 * unread, committed or not, so this is an upper bound) and with
	 * libbpf's of the consumer one. */
	cons = __atomic_load_n(b->rb_cons, __ATOMIC_ACQUIRE);
	prod = __atomic_load_n(b->rb_prod, __ATOMIC_ACQUIRE);
	return prod - cons > b->rb_size ? b->rb_size : prod - cons;
}

uint64_t cap_bpf__wake_left(const struct cap_bpf *b)
{
	int64_t n = __atomic_load_n(&b->skel->bss->wake_left, __ATOMIC_RELAXED);

	return n > 0 ? (uint64_t)n : 0;
}

void cap_bpf__wake_after(struct cap_bpf *b, uint32_t n)
{
	__atomic_store_n(&b->skel->bss->wake_left, (int64_t)n, __ATOMIC_RELAXED);
}

void cap_bpf__detach(struct cap_bpf *b)
{
	for (unsigned int i = 0; i < b->n_links; i++)
		bpf_link__destroy(b->links[i]);
	b->n_links = 0;
	for (unsigned int i = 0; i < CPA_BPF_PROBE_MAX; i++) {
		bpf_link__destroy(b->probe_links[i]);
		b->probe_links[i] = NULL;
	}
	profile_bpf__detach(b->skel);
}

int cap_bpf__read_stats(struct cap_bpf *b, uint64_t ret[CPA_BPF_STAT_MAX])
{
	return cap_bpf__percpu_sum(bpf_map__fd(b->skel->maps.stats), b->nr_possible,
				   CPA_BPF_STAT_MAX, ret);
}

int cap_bpf__pin_stats(struct cap_bpf *b, const char *path)
{
	return bpf_map__pin(b->skel->maps.stats, path);
}

int cap_bpf__read_pinned_stats(const char *path, uint64_t ret[CPA_BPF_STAT_MAX])
{
	int nr_possible = libbpf_num_possible_cpus(), r;
	_cleanup_close_ int fd = -EBADF;

	if (nr_possible < 0)
		return nr_possible;
	fd = bpf_obj_get(path);
	if (fd < 0)
		return -errno;
	r = cap_bpf__percpu_sum(fd, nr_possible, CPA_BPF_STAT_MAX, ret);
	return r;
}

int cap_bpf__py_procs_fd(const struct cap_bpf *b)
{
	return bpf_map__fd(b->skel->maps.py_procs);
}

int cap_bpf__py_slots_fd(const struct cap_bpf *b)
{
	return bpf_map__fd(b->skel->maps.py_slots);
}

int cap_bpf__py_execs_fd(const struct cap_bpf *b)
{
	return bpf_map__fd(b->skel->maps.py_execs);
}

uint32_t cap_bpf__prog_id(const struct cap_bpf *b)
{
	struct bpf_prog_info info = {};
	uint32_t len = sizeof(info);

	if (bpf_obj_get_info_by_fd(bpf_program__fd(b->skel->progs.cpa_on_cpu), &info, &len) < 0)
		return 0;
	return info.id;
}

void cap_bpf__free(struct cap_bpf *b)
{
	if (!b)
		return;
	if (b->skel)
		cap_bpf__detach(b);
	free(b->links);
	free(b->pfds);
	ring_buffer__free(b->rb);
	if (b->rb_prod) {
		munmap((void *)b->rb_cons, (size_t)sysconf(_SC_PAGESIZE));
		munmap((void *)b->rb_prod, (size_t)sysconf(_SC_PAGESIZE));
	}
	profile_bpf__destroy(b->skel);
	free(b->ustack_pid);
	free(b);
}
