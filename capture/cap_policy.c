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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fileio.h"
#include "common/log.h"
#include "common/macro.h"
#include "common/policy.h"
#include "common/timeutil.h"
#include "shm/counters.h"
#include "shm/records.h"

#define CAP_POLICY_FIRES 64

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
	char *buf;
	size_t buf_cap;
};

int cap_policy__open(const char *path, uint32_t freq_max, struct cap_policy **ret)
{
	struct cap_policy *p = calloc(1, sizeof(*p));
	char err[512];
	int r;

	if (!p)
		return log_error_errno(-ENOMEM, "policies: %m");
	r = policy_set__load(path, freq_max, &p->set, err, sizeof(err));
	if (r < 0) {
		free(p);
		return log_error_errno(r, "--policy: %s", err);
	}
	policy_eval__init(&p->ev, &p->set);
	for (unsigned int i = 0; i < p->set.n; i++)
		if (p->set.p[i].item == POLICY_THREAD_COUNT)
			p->want_threads = true;
	log_info("%u trigger policies from %s", p->set.n, path);
	*ret = p;
	return 0;
}

bool cap_policy__wants_offcpu(const struct cap_policy *p)
{
	for (unsigned int i = 0; p && i < p->set.n; i++)
		if (p->set.p[i].actions & POLICY_ACT_OFFCPU)
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
	ev->item = (uint16_t)pol->item;
	ev->cmp = (uint16_t)pol->cmp;
	ev->actions = pol->actions;
	ev->freq = pol->freq;
	ev->stack_size = pol->stack_size;
	snprintf(ev->policy, sizeof(ev->policy), "%s", pol->name);
	memcpy(ev->comm, f->comm, sizeof(ev->comm));
	ev->comm[sizeof(ev->comm) - 1] = '\0';
}

/* Make the BPF side match the active actions of pid (and the boost of all). */
static void apply(struct cap_policy *p, uint32_t pid, bool stack_changed)
{
	uint32_t flags = 0, stack = 0, freq = p->base_freq;
	bool everyone = false; /* a system-wide policy raises every process */
	int r = 0;

	for (unsigned int i = 0; i < p->n_act; i++) {
		const struct policy *pol = &p->set.p[p->act[i].policy];

		if (pol->actions & POLICY_ACT_FREQ)
			freq = MAX(freq, pol->freq);
		if ((pol->actions & POLICY_ACT_FREQ) && !p->act[i].pid)
			everyone = true;
		if (p->act[i].pid != pid)
			continue;
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

void cap_policy__second(struct cap_policy *p, struct cap_emit *e, uint64_t now_real_ns,
			struct policy_proc *procs, size_t n, double load1)
{
	struct policy_fire fires[CAP_POLICY_FIRES], ends[CAP_POLICY_FIRES];
	uint64_t now_s = now_real_ns / NSEC_PER_SEC;
	unsigned int nf, ne;

	if (p->want_threads)
		for (size_t i = 0; i < n; i++)
			procs[i].value[POLICY_THREAD_COUNT] = threads_of(p, procs[i].pid);
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
	free(p);
}
