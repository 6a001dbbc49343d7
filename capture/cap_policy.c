// SPDX-License-Identifier: MIT
/*
 * Trigger policies in capture (docs/metrics.md "Trigger policies"): once a
 * second, on the metrics cap_sched just read, evaluate the --policy file
 * (common/policy.c), apply the actions of a trigger through the BPF maps
 * (cap_bpf__policy_target, cap_bpf__boost, cap_bpf__ustack_set), undo them
 * when their duration is over or capture stops, and send every trigger and
 * every undo down the pipeline as a CPA_REC_EVENT for the store.
 */
#include "cap_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/policy.h"
#include "common/timeutil.h"
#include "shm/counters.h"
#include "shm/records.h"

#define CAP_POLICY_FIRES 64
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

struct active {
	unsigned int policy;
	uint32_t pid;
	uint64_t end_s;
};

struct cap_policy {
	struct policy_set set;
	struct policy_eval ev;
	struct cap_bpf *bpf;
	uint32_t base_freq, stack_cap, boost_freq;
	bool boost_all; /* the raised rate for every process (a system-wide policy) */
	struct active act[POLICY_TRACKED_MAX];
	unsigned int n_act;
	bool want_threads;
	bool want_cgroup, want_cgroup_id, want_env; /* selectors read from /proc */
	uint32_t rate_probes, attach_probes;	    /* probe ids of probe=, of attach= */
	uint32_t attached;			    /* attach= probes attached now */
	uint64_t hits_ns;			    /* CLOCK_REALTIME of the last hits read */
	char cg_root[64];			    /* the cgroup v2 mount, "" = none */
	struct policy_proc *procs; /* this second's processes, and the absent ones */
	size_t procs_cap;
	char *buf;
	size_t buf_cap;
};

/* Where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup (v2 only), or
 * /sys/fs/cgroup/unified (a hybrid host). */
static void cg_root_find(struct cap_policy *p)
{
	static const char *const dirs[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
	struct statfs f;

	for (size_t i = 0; i < ARRAY_SIZE(dirs); i++)
		if (statfs(dirs[i], &f) == 0 && f.f_type == CGROUP2_SUPER_MAGIC) {
			snprintf(p->cg_root, sizeof(p->cg_root), "%s", dirs[i]);
			return;
		}
	log_warn("policies: no cgroup v2 hierarchy mounted: cgroup= ids cannot match");
}

int cap_policy__open(const char *path, uint32_t freq_max, const char *const *probes,
		     unsigned int nr_probes, struct cap_policy **ret)
{
	struct cap_policy *p = calloc(1, sizeof(*p));
	struct policy_limits lim = {.freq_max = freq_max,
				    .probes = probes,
				    .nr_probes = nr_probes,
				    .probes_known = true};
	char err[512];
	int r;

	if (!p)
		return log_error_errno(-ENOMEM, "policies: %m");
	r = policy_set__load(path, &lim, &p->set, err, sizeof(err));
	if (r < 0) {
		free(p);
		return log_error_errno(r, "--policy: %s", err);
	}
	policy_eval__init(&p->ev, &p->set);
	for (unsigned int i = 0; i < p->set.n; i++) {
		const struct policy *pol = &p->set.p[i];

		if (pol->item == POLICY_THREAD_COUNT || pol->item == POLICY_OFFCPU_PERCENT)
			p->want_threads = true;
		p->want_cgroup |= pol->cgroup[0] || pol->cgroup_id;
		p->want_cgroup_id |= pol->cgroup_id != 0;
		p->want_env |= pol->env[0] != '\0';
		if (pol->item == POLICY_PROBE_RATE)
			p->rate_probes |= 1u << pol->probe;
		p->attach_probes |= pol->attach;
	}
	if (p->want_cgroup_id)
		cg_root_find(p);
	for (unsigned int i = 0; i < nr_probes; i++)
		if (p->attach_probes & (1u << i))
			log_info("probe %u '%s': attached only while a policy's trigger is on", i,
				 probes[i]);
	log_info("%u trigger policies from %s", p->set.n, path);
	*ret = p;
	return 0;
}

void cap_policy__probe_masks(const struct cap_policy *p, uint32_t *ret_rate, uint32_t *ret_attach)
{
	*ret_rate = p ? p->rate_probes : 0;
	*ret_attach = p ? p->attach_probes : 0;
}

bool cap_policy__wants_offcpu(const struct cap_policy *p)
{
	for (unsigned int i = 0; p && i < p->set.n; i++)
		if (p->set.p[i].actions & POLICY_ACT_OFFCPU)
			return true;
	return false;
}

bool cap_policy__wants_sched_exact(const struct cap_policy *p)
{
	for (unsigned int i = 0; p && i < p->set.n; i++)
		if (p->set.p[i].item == POLICY_RUNQ_P99_US)
			return true;
	return false;
}

void cap_policy__attach(struct cap_policy *p, struct cap_bpf *bpf, uint32_t base_freq,
			uint32_t stack_cap)
{
	p->bpf = bpf;
	p->base_freq = base_freq;
	p->boost_freq = base_freq;
	p->stack_cap = stack_cap;
	p->hits_ns = clock_ns(CLOCK_REALTIME);
}

/* Threads of pid from /proc/PID/status; NaN when gone. */
static double threads_of(struct cap_policy *p, uint32_t pid)
{
	char path[64];
	const char *t;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	if (read_full_file_at(AT_FDCWD, path, READ_FULL_TRUNCATE, 16 << 10, &p->buf, &p->buf_cap,
			      &len) < 0)
		return NAN;
	t = strstr(p->buf, "\nThreads:");
	return t ? strtod(t + 9, NULL) : NAN;
}

static void event(struct cap_policy *p, struct cap_emit *e, const struct policy_fire *f,
		  uint16_t kind, uint64_t now_real_ns)
{
	const struct policy *pol = &p->set.p[f->policy];
	struct cpa_policy_event *ev;

	if (cap_emit__reserve_seq(e, CPA_REC_EVENT, sizeof(*ev), (void **)&ev) < 0)
		return; /* counted as a drop */
	ev->time_ns = now_real_ns;
	ev->end_ns = kind == CPA_PE_START ? now_real_ns + (uint64_t)pol->duration * NSEC_PER_SEC
					  : now_real_ns;
	ev->threshold = pol->threshold;
	ev->value = kind == CPA_PE_START ? f->value : 0;
	ev->pid = f->pid;
	ev->kind = kind;
	ev->item = POLICY_EV_ITEM(pol);
	ev->cmp = (uint16_t)pol->cmp;
	ev->actions = POLICY_EV_ACTIONS(pol);
	ev->freq = pol->freq;
	ev->stack_size = pol->stack_size;
	snprintf(ev->policy, sizeof(ev->policy), "%s", pol->name);
	memcpy(ev->comm, f->comm, sizeof(ev->comm));
	ev->comm[sizeof(ev->comm) - 1] = '\0';
}

/* Make the BPF side match the active actions of pid (and the boost of all). */
static void apply(struct cap_policy *p, uint32_t pid, bool stack_changed)
{
	uint32_t flags = 0, stack = 0, freq = p->base_freq, attach = 0;
	bool everyone = false; /* a system-wide policy raises every process */
	int r = 0;

	for (unsigned int i = 0; i < p->n_act; i++) {
		const struct policy *pol = &p->set.p[p->act[i].policy];

		if (pol->actions & POLICY_ACT_FREQ)
			freq = MAX(freq, pol->freq);
		if ((pol->actions & POLICY_ACT_FREQ) && !p->act[i].pid)
			everyone = true;
		attach |= pol->attach;
		if (p->act[i].pid != pid)
			continue;
		for (unsigned int k = 0; k < POLICY_PROBES; k++)
			if (pol->attach & (1u << k))
				flags |= CPA_BPF_POLICY_PROBE(k);
		if (pol->actions & POLICY_ACT_FREQ)
			flags |= CPA_BPF_POLICY_BOOST;
		if (pol->actions & POLICY_ACT_OFFCPU)
			flags |= CPA_BPF_POLICY_OFFCPU;
		if (pol->actions & POLICY_ACT_STACK_SIZE)
			stack = MAX(stack, pol->stack_size);
	}
	if (!p->bpf)
		return;
	if (pid)
		r = cap_bpf__policy_target(p->bpf, pid, flags);
	/* attach=: a probe is attached while some trigger wants it (the BPF
	 * side keeps the hits of the targets that have its flag). */
	for (unsigned int k = 0; r >= 0 && k < POLICY_PROBES; k++) {
		uint32_t bit = 1u << k;

		if ((attach ^ p->attached) & bit) {
			r = cap_bpf__policy_probe(p->bpf, k, attach & bit);
			/* one the kernel refused was said when it was left out */
			if (r >= 0 && !(cap_bpf__probes_refused(p->bpf) & bit))
				log_info("policies: probe %u %s", k,
					 attach & bit ? "attached" : "detached");
			p->attached = r >= 0 ? p->attached ^ bit : p->attached;
		}
	}
	if (pid && r >= 0 && stack_changed)
		r = cap_bpf__ustack_set(p->bpf, pid, stack ? MIN(stack, p->stack_cap) : 0);
	if (r >= 0 && (freq != p->boost_freq || everyone != p->boost_all)) {
		uint32_t div = everyone ? 1 : (freq + p->base_freq / 2) / p->base_freq;

		r = cap_bpf__boost(p->bpf, freq, div);
		if (r >= 0 && everyone)
			log_info("policies: every process sampled at %u Hz", freq);
		else if (r >= 0)
			log_info("policies: targets sampled at %u Hz, others 1 in %u (~%u Hz)",
				 freq, div, p->base_freq);
		p->boost_freq = freq;
		p->boost_all = everyone;
	}
	if (r < 0)
		log_warn_errno(r, "policies: apply actions for pid %u: %m", pid);
}

static void end_one(struct cap_policy *p, struct cap_emit *e, unsigned int i, uint64_t now_ns)
{
	struct active a = p->act[i];
	struct policy_fire f = {.policy = a.policy, .pid = a.pid, .end_s = a.end_s};

	for (unsigned int k = 0; k < p->ev.n; k++)
		if (p->ev.t[k].policy == a.policy && p->ev.t[k].pid == a.pid)
			memcpy(f.comm, p->ev.t[k].comm, sizeof(f.comm));
	p->act[i] = p->act[--p->n_act];
	apply(p, a.pid, p->set.p[a.policy].actions & POLICY_ACT_STACK_SIZE);
	event(p, e, &f, CPA_PE_END, now_ns);
	log_info("policy '%s' for pid %u (%s): actions undone", p->set.p[a.policy].name, a.pid,
		 f.comm);
}

static int pid_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct policy_proc *)a)->pid, y = ((const struct policy_proc *)b)->pid;

	return x < y ? -1 : x > y;
}

struct hits_ctx {
	struct policy_proc *procs;
	size_t n;
	double secs;
};

static void on_hits(void *ctx, uint32_t tgid, uint32_t probe_id, uint64_t hits)
{
	struct hits_ctx *h = ctx;
	struct policy_proc key = {.pid = tgid}, *pr;

	if (probe_id >= POLICY_PROBES)
		return;
	/* A process with hits ran this second: it is in the list, unless the
	 * metrics map was full (then its hits are not seen). */
	pr = bsearch(&key, h->procs, h->n, sizeof(*pr), pid_cmp);
	if (pr)
		pr->probe_hz[probe_id] = (double)hits / h->secs;
}

/* probe_rate: each process's hits of the counted probes since the last read. */
static void probe_rates(struct cap_policy *p, struct policy_proc *procs, size_t n,
			uint64_t now_real_ns)
{
	struct hits_ctx h = {.procs = procs, .n = n};

	if (!p->rate_probes || !p->bpf)
		return;
	h.secs = now_real_ns > p->hits_ns ? (double)(now_real_ns - p->hits_ns) / 1e9 : 1.0;
	if (h.secs < 0.1)
		h.secs = 0.1;
	p->hits_ns = now_real_ns;
	qsort(procs, n, sizeof(*procs), pid_cmp);
	for (size_t i = 0; i < n; i++)
		for (unsigned int k = 0; k < POLICY_PROBES; k++)
			if (p->rate_probes & (1u << k))
				procs[i].probe_hz[k] = 0; /* ran, no hit */
	cap_bpf__policy_hits(p->bpf, on_hits, &h);
}

/* The "0::" line of /proc/PID/cgroup (the v2 path), NULL when gone. */
static const char *cgroup_of(struct cap_policy *p, uint32_t pid)
{
	char path[64], *l, *nl;
	size_t len;

	snprintf(path, sizeof(path), "/proc/%u/cgroup", pid);
	if (read_full_file_at(AT_FDCWD, path, READ_FULL_TRUNCATE, 16 << 10, &p->buf, &p->buf_cap,
			      &len) < 0)
		return NULL;
	for (l = p->buf; l && *l; l = nl) {
		nl = strchr(l, '\n');
		if (nl)
			*nl++ = '\0';
		if (!strncmp(l, "0::", 3))
			return l + 3;
	}
	return NULL;
}

/* cgroup= and env=: which policies select pr (reading /proc only for the
 * processes their pid=/comm= let through). */
static void proc_selectors(struct cap_policy *p, struct policy_proc *pr)
{
	_cleanup_free_ char *cg = NULL, *env = NULL;
	bool cg_read = false, env_read = false;
	uint64_t cg_id = 0;
	size_t env_len = 0;

	pr->selected = 0;
	for (unsigned int i = 0; i < p->set.n; i++) {
		const struct policy *pol = &p->set.p[i];

		if (!policy_has_proc_selector(pol) || !policy_selects(pol, pr->pid, pr->comm))
			continue;
		if ((pol->cgroup[0] || pol->cgroup_id) && !cg_read) {
			const char *c = cgroup_of(p, pr->pid);
			struct stat st;
			char dir[PATH_MAX];

			cg_read = true;
			cg = c ? strdup(c) : NULL;
			if (cg && p->want_cgroup_id && p->cg_root[0] &&
			    (size_t)snprintf(dir, sizeof(dir), "%s%s", p->cg_root, cg) <
				    sizeof(dir) &&
			    stat(dir, &st) == 0)
				cg_id = st.st_ino; /* the id BPF sees: the kernfs inode */
		}
		if (pol->env[0] && !env_read) {
			char path[64];

			env_read = true;
			snprintf(path, sizeof(path), "/proc/%u/environ", pr->pid);
			if (read_full_file_at(AT_FDCWD, path, READ_FULL_TRUNCATE, 1 << 20, &p->buf,
					      &p->buf_cap, &env_len) >= 0)
				env = malloc(env_len + 1);
			if (env)
				memcpy(env, p->buf, env_len);
		}
		if ((pol->cgroup[0] || pol->cgroup_id) && !policy_cgroup_match(pol, cg, cg_id))
			continue;
		if (pol->env[0] && !policy_env_match(pol, env, env_len))
			continue;
		pr->selected |= 1u << i;
	}
}

/* offcpu_percent: the share of its threads' wall time a process spent off
 * CPU, from the metrics' on-CPU time (% of one CPU) and its thread count. */
static void offcpu_fill(struct policy_proc *pr)
{
	double cpu = pr->value[POLICY_CPU_PERCENT], thr = pr->value[POLICY_THREAD_COUNT];

	if (isnan(cpu) || isnan(thr) || thr < 1)
		return;
	pr->value[POLICY_OFFCPU_PERCENT] = MAX(0.0, MIN(100.0, 100.0 - cpu / thr));
}

static bool want_offcpu(const struct cap_policy *p)
{
	for (unsigned int i = 0; i < p->set.n; i++)
		if (p->set.p[i].item == POLICY_OFFCPU_PERCENT)
			return true;
	return false;
}

/*
 * The processes of the second, plus for offcpu_percent those that did not
 * run at all (the metrics list only the ones that did) but crossed its
 * threshold in the window and still exist: 100 % off CPU.
 */
static struct policy_proc *procs_all(struct cap_policy *p, const struct policy_proc *procs,
				     size_t n, size_t *ret_n)
{
	size_t want = n + (want_offcpu(p) ? p->ev.n : 0), m = n;

	if (want > p->procs_cap) {
		struct policy_proc *np = reallocarray(p->procs, want, sizeof(*np));

		if (!np)
			return NULL;
		p->procs = np;
		p->procs_cap = want;
	}
	if (n)
		memcpy(p->procs, procs, n * sizeof(*procs));
	for (unsigned int i = 0; m < want && i < p->ev.n; i++) {
		const struct policy_track *t = &p->ev.t[i];
		const struct policy *pol = &p->set.p[t->policy];
		uint64_t mask = pol->period >= 64 ? ~0ull : (1ull << pol->period) - 1;
		struct policy_proc *pr = &p->procs[m];
		bool seen = false;
		char path[32];

		if (pol->item != POLICY_OFFCPU_PERCENT || !t->pid || !(t->bits & mask))
			continue;
		for (size_t k = 0; k < m && !seen; k++)
			seen = p->procs[k].pid == t->pid;
		snprintf(path, sizeof(path), "/proc/%u", t->pid);
		if (seen || access(path, F_OK) < 0)
			continue;
		memset(pr, 0, sizeof(*pr));
		pr->pid = t->pid;
		memcpy(pr->comm, t->comm, sizeof(pr->comm));
		for (int k = 0; k < POLICY_ITEM_MAX; k++)
			pr->value[k] = NAN;
		for (int k = 0; k < POLICY_PROBES; k++)
			pr->probe_hz[k] = NAN;
		pr->value[POLICY_OFFCPU_PERCENT] = 100.0;
		m++;
	}
	*ret_n = m;
	return p->procs;
}

void cap_policy__second(struct cap_policy *p, struct cap_emit *e, uint64_t now_real_ns,
			struct policy_proc *procs, size_t n, double load1)
{
	struct policy_fire fires[CAP_POLICY_FIRES], ends[CAP_POLICY_FIRES];
	uint64_t now_s = now_real_ns / NSEC_PER_SEC;
	unsigned int nf, ne;

	for (size_t i = 0; i < n; i++) {
		for (unsigned int k = 0; k < POLICY_PROBES; k++)
			procs[i].probe_hz[k] = NAN;
		if (p->want_threads)
			procs[i].value[POLICY_THREAD_COUNT] = threads_of(p, procs[i].pid);
		offcpu_fill(&procs[i]);
		if (p->want_cgroup || p->want_env)
			proc_selectors(p, &procs[i]);
	}
	probe_rates(p, procs, n, now_real_ns);
	{
		size_t all_n = n;
		struct policy_proc *all = procs_all(p, procs, n, &all_n);

		if (all) {
			procs = all;
			n = all_n;
		}
	}
	nf = policy_eval__second(&p->ev, now_s, procs, n, load1, fires, CAP_POLICY_FIRES, ends,
				 CAP_POLICY_FIRES, &ne);
	for (unsigned int i = 0; i < ne; i++)
		for (unsigned int k = 0; k < p->n_act; k++)
			if (p->act[k].policy == ends[i].policy && p->act[k].pid == ends[i].pid) {
				end_one(p, e, k, now_real_ns);
				break;
			}
	for (unsigned int i = 0; i < nf; i++) {
		const struct policy *pol = &p->set.p[fires[i].policy];

		if (p->n_act == ARRAY_SIZE(p->act))
			break;
		p->act[p->n_act++] = (struct active){
			.policy = fires[i].policy, .pid = fires[i].pid, .end_s = fires[i].end_s};
		apply(p, fires[i].pid, pol->actions & POLICY_ACT_STACK_SIZE);
		event(p, e, &fires[i], CPA_PE_START, now_real_ns);
		log_info("policy '%s' fired for pid %u (%s): %s %.2f %s %.2f, actions for %u s",
			 pol->name, fires[i].pid, fires[i].comm, policy_item_name(pol->item),
			 fires[i].value, policy_cmp_name(pol->cmp), pol->threshold, pol->duration);
	}
}

void cap_policy__undo_all(struct cap_policy *p, struct cap_emit *e, uint64_t now_real_ns)
{
	while (p && p->n_act)
		end_one(p, e, p->n_act - 1, now_real_ns);
}

void cap_policy__free(struct cap_policy *p)
{
	if (!p)
		return;
	free(p->buf);
	free(p->procs);
	free(p);
}
