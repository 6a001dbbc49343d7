// SPDX-License-Identifier: MIT
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fileio.h"
#include "macro.h"

static const char *const item_names[POLICY_ITEM_MAX] = {
	[POLICY_CPU_PERCENT] = "cpu_percent",
	[POLICY_SYSTEM_LOAD] = "system_load",
	[POLICY_RUNQ_P99_US] = "runq_latency_p99_us",
	[POLICY_THREAD_COUNT] = "thread_count",
};

/* Items of the issue that need what the metrics do not carry yet. */
static const char *const items_later[] = {"offcpu_percent", "probe_rate"};

static const char *const cmp_names[] = {
	[POLICY_GT] = ">", [POLICY_GE] = ">=", [POLICY_LT] = "<", [POLICY_LE] = "<="};

const char *policy_item_name(enum policy_item i)
{
	return i > 0 && i < POLICY_ITEM_MAX ? item_names[i] : "?";
}

const char *policy_cmp_name(enum policy_cmp c)
{
	return c >= POLICY_GT && c <= POLICY_LE ? cmp_names[c] : "?";
}

bool policy_is_per_process(enum policy_item i)
{
	return i != POLICY_SYSTEM_LOAD;
}

_printf_(4, 5) static int bad(char *err, size_t len, const char *where, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(err, len, "%s: %s", where, msg);
	return -EINVAL;
}

static int num(const char *v, double lo, double hi, double *ret)
{
	char *end;
	double d;

	errno = 0;
	d = strtod(v, &end);
	if (errno || end == v || *end || isnan(d) || d < lo || d > hi)
		return -EINVAL;
	*ret = d;
	return 0;
}

static int uint_(const char *v, unsigned long lo, unsigned long hi, unsigned long *ret)
{
	char *end;
	unsigned long u;

	if (!isdigit((unsigned char)*v))
		return -EINVAL;
	errno = 0;
	u = strtoul(v, &end, 10);
	if (errno || *end || u < lo || u > hi)
		return -EINVAL;
	*ret = u;
	return 0;
}

/* One "key=value" token of a policy line into p; seen collects the keys. */
static int token(struct policy *p, const char *k, const char *v, uint32_t freq_max, char *err,
		 size_t len, const char *where)
{
	unsigned long u;
	double d;

	if (!strcmp(k, "policy")) {
		size_t n = strlen(v);

		if (!n || n >= POLICY_NAME_MAX)
			return bad(err, len, where, "policy name of 1..%d characters, got '%s'",
				   POLICY_NAME_MAX - 1, v);
		for (size_t i = 0; i < n; i++)
			if (!isalnum((unsigned char)v[i]) && !strchr("_.-", v[i]))
				return bad(err, len, where,
					   "policy name '%s': letters, digits, '_', '.', '-' only",
					   v);
		memcpy(p->name, v, n + 1);
	} else if (!strcmp(k, "item")) {
		for (unsigned int i = 1; i < POLICY_ITEM_MAX; i++)
			if (!strcmp(v, item_names[i]))
				p->item = (enum policy_item)i;
		for (size_t i = 0; i < ARRAY_SIZE(items_later); i++)
			if (!strcmp(v, items_later[i]))
				return bad(err, len, where, "item %s is not supported yet", v);
		if (!p->item)
			return bad(err, len, where,
				   "unknown item '%s' (cpu_percent, system_load, "
				   "runq_latency_p99_us, thread_count)",
				   v);
	} else if (!strcmp(k, "op")) {
		for (unsigned int i = POLICY_GT; i <= POLICY_LE; i++)
			if (!strcmp(v, cmp_names[i]))
				p->cmp = (enum policy_cmp)i;
		if (!p->cmp)
			return bad(err, len, where, "op '%s': one of >, >=, <, <=", v);
	} else if (!strcmp(k, "threshold")) {
		if (num(v, 0, 1e12, &d) < 0)
			return bad(err, len, where, "threshold '%s': a number >= 0", v);
		p->threshold = d;
	} else if (!strcmp(k, "period")) {
		if (uint_(v, 1, POLICY_PERIOD_MAX, &u) < 0)
			return bad(err, len, where, "period '%s': seconds, 1..%d", v,
				   POLICY_PERIOD_MAX);
		p->period = (unsigned int)u;
	} else if (!strcmp(k, "count")) {
		if (uint_(v, 1, POLICY_PERIOD_MAX, &u) < 0)
			return bad(err, len, where, "count '%s': seconds, 1..%d", v,
				   POLICY_PERIOD_MAX);
		p->count = (unsigned int)u;
	} else if (!strcmp(k, "comm")) {
		size_t n = strlen(v);

		if (!n || n >= POLICY_COMM_MAX)
			return bad(err, len, where,
				   "comm '%s': 1..15 characters (the kernel keeps 15)", v);
		memcpy(p->comm, v, n + 1);
	} else if (!strcmp(k, "pid")) {
		if (uint_(v, 1, 4194304, &u) < 0)
			return bad(err, len, where, "pid '%s': 1..4194304", v);
		p->pid = (int64_t)u;
	} else if (!strcmp(k, "freq")) {
		if (uint_(v, 1, freq_max, &u) < 0)
			return bad(err, len, where, "freq '%s': Hz, 1..%u", v, freq_max);
		p->freq = (uint32_t)u;
		p->actions |= POLICY_ACT_FREQ;
	} else if (!strcmp(k, "offcpu")) {
		if (strcmp(v, "1") && strcmp(v, "0"))
			return bad(err, len, where, "offcpu '%s': 1 or 0", v);
		if (*v == '1')
			p->actions |= POLICY_ACT_OFFCPU;
	} else if (!strcmp(k, "stack_size")) {
		if (uint_(v, 4096, 65536, &u) < 0 || u % 4096)
			return bad(err, len, where,
				   "stack_size '%s': a multiple of 4096 in [4096, 65536]", v);
		p->stack_size = (uint32_t)u;
		p->actions |= POLICY_ACT_STACK_SIZE;
	} else if (!strcmp(k, "duration")) {
		if (uint_(v, 1, POLICY_DURATION_MAX, &u) < 0)
			return bad(err, len, where, "duration '%s': seconds, 1..%d", v,
				   POLICY_DURATION_MAX);
		p->duration = (unsigned int)u;
	} else if (!strcmp(k, "silence")) {
		if (uint_(v, 0, 86400, &u) < 0)
			return bad(err, len, where, "silence '%s': seconds, 0..86400", v);
		p->silence = (unsigned int)u;
	} else {
		return bad(err, len, where,
			   "unknown key '%s' (policy, item, op, threshold, period, count, comm, "
			   "pid, freq, offcpu, stack_size, duration, silence)",
			   k);
	}
	return 0;
}

static int line(const char *name, unsigned int no, char *s, uint32_t freq_max,
		struct policy_set *set, char *err, size_t len)
{
	struct policy p = {.pid = -1, .line = no, .silence = UINT32_MAX};
	char where[300], *save = NULL, *tok;
	unsigned int seen = 0;

	snprintf(where, sizeof(where), "%s:%u", name, no);
	for (tok = strtok_r(s, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
		char *eq = strchr(tok, '=');
		int r;

		if (!eq || eq == tok)
			return bad(err, len, where, "'%s' is not key=value", tok);
		*eq = '\0';
		r = token(&p, tok, eq + 1, freq_max, err, len, where);
		if (r < 0)
			return r;
		seen++;
	}
	if (!seen)
		return 0;
	if (!p.name[0])
		return bad(err, len, where, "no policy=NAME");
	for (unsigned int i = 0; i < set->n; i++)
		if (!strcmp(set->p[i].name, p.name))
			return bad(err, len, where, "policy '%s' already defined on line %u",
				   p.name, set->p[i].line);
	if (!p.item)
		return bad(err, len, where, "policy '%s': no item=", p.name);
	if (!p.cmp)
		p.cmp = POLICY_GT;
	if (!p.period || !p.count)
		return bad(err, len, where, "policy '%s': needs period= and count=", p.name);
	if (p.count > p.period)
		return bad(err, len, where, "policy '%s': count %u is more than period %u", p.name,
			   p.count, p.period);
	if (!p.actions)
		return bad(err, len, where, "policy '%s': no action (freq=, offcpu=1, stack_size=)",
			   p.name);
	if (!p.duration)
		return bad(err, len, where, "policy '%s': needs duration= (seconds)", p.name);
	if (!policy_is_per_process(p.item) && (p.comm[0] || p.pid >= 0))
		return bad(err, len, where,
			   "policy '%s': %s is system-wide, comm=/pid= do not apply", p.name,
			   policy_item_name(p.item));
	if (!policy_is_per_process(p.item) && (p.actions & ~POLICY_ACT_FREQ))
		return bad(err, len, where,
			   "policy '%s': a system-wide item can only raise freq= (offcpu= and "
			   "stack_size= need a target process)",
			   p.name);
	if (p.silence == UINT32_MAX)
		p.silence = p.duration;
	if (set->n == POLICY_MAX)
		return bad(err, len, where, "more than %d policies", POLICY_MAX);
	set->p[set->n++] = p;
	return 0;
}

int policy_set__parse(const char *name, const char *text, uint32_t freq_max, struct policy_set *ret,
		      char *err, size_t errlen)
{
	_cleanup_free_ char *buf = strdup(text);
	char *s, *nl;
	unsigned int no = 0;
	int r;

	if (!buf)
		return -ENOMEM;
	memset(ret, 0, sizeof(*ret));
	for (s = buf; s; s = nl) {
		char *hash;

		nl = strchr(s, '\n');
		if (nl)
			*nl++ = '\0';
		no++;
		hash = strchr(s, '#');
		if (hash)
			*hash = '\0';
		r = line(name, no, s, freq_max, ret, err, errlen);
		if (r < 0)
			return r;
	}
	if (!ret->n) {
		snprintf(err, errlen, "%s: no policy in the file", name);
		return -EINVAL;
	}
	return 0;
}

int policy_set__load(const char *path, uint32_t freq_max, struct policy_set *ret, char *err,
		     size_t errlen)
{
	_cleanup_free_ char *text = NULL;
	size_t len;
	int r = read_full_file(path, 0, 1 << 20, &text, &len);

	if (r < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(-r));
		return r;
	}
	if (strlen(text) != len) {
		snprintf(err, errlen, "%s: a NUL byte in the file", path);
		return -EINVAL;
	}
	return policy_set__parse(path, text, freq_max, ret, err, errlen);
}

/* ---------------------------------------------------------------- evaluation */

void policy_eval__init(struct policy_eval *e, const struct policy_set *set)
{
	memset(e, 0, sizeof(*e));
	e->set = set;
}

static bool crosses(const struct policy *p, double v)
{
	if (isnan(v))
		return false;
	switch (p->cmp) {
	case POLICY_GT:
		return v > p->threshold;
	case POLICY_GE:
		return v >= p->threshold;
	case POLICY_LT:
		return v < p->threshold;
	case POLICY_LE:
		return v <= p->threshold;
	}
	return false;
}

static void advance(struct policy_track *t, uint64_t now_s)
{
	uint64_t d = now_s > t->last_s ? now_s - t->last_s : 0;

	t->bits = d >= 64 ? 0 : t->bits << d;
	t->last_s = now_s;
}

static struct policy_track *track(struct policy_eval *e, unsigned int policy, uint32_t pid,
				  uint64_t now_s)
{
	unsigned int i, w = 0;

	for (i = 0; i < e->n; i++)
		if (e->t[i].policy == policy && e->t[i].pid == pid)
			return &e->t[i];
	if (e->n == POLICY_TRACKED_MAX) {
		/* Forget the windows that hold nothing. */
		for (i = 0; i < e->n; i++) {
			struct policy_track *t = &e->t[i];

			advance(t, now_s);
			if (t->bits || t->active_to_s || t->silent_to_s > now_s)
				e->t[w++] = *t;
		}
		e->n = w;
		if (e->n == POLICY_TRACKED_MAX)
			return NULL;
	}
	e->t[e->n] = (struct policy_track){.policy = policy, .pid = pid, .last_s = now_s};
	return &e->t[e->n++];
}

static unsigned int popcount_period(uint64_t bits, unsigned int period)
{
	uint64_t mask = period >= 64 ? ~0ull : (1ull << period) - 1;

	return (unsigned int)__builtin_popcountll(bits & mask);
}

static bool sample(struct policy_eval *e, unsigned int pi, uint32_t pid, const char *comm, double v,
		   uint64_t now_s, struct policy_fire *f)
{
	const struct policy *p = &e->set->p[pi];
	struct policy_track *t = track(e, pi, pid, now_s);

	if (!t)
		return false;
	advance(t, now_s);
	if (comm)
		snprintf(t->comm, sizeof(t->comm), "%s", comm);
	if (crosses(p, v))
		t->bits |= 1;
	if (t->active_to_s || now_s < t->silent_to_s ||
	    popcount_period(t->bits, p->period) < p->count)
		return false;
	t->active_to_s = now_s + p->duration;
	t->silent_to_s = now_s + MAX(p->silence, p->duration);
	*f = (struct policy_fire){.policy = pi, .pid = pid, .value = v, .end_s = t->active_to_s};
	memcpy(f->comm, t->comm, sizeof(f->comm));
	return true;
}

unsigned int policy_eval__second(struct policy_eval *e, uint64_t now_s,
				 const struct policy_proc *procs, size_t n, double load1,
				 struct policy_fire *fires, unsigned int max,
				 struct policy_fire *ends, unsigned int max_ends,
				 unsigned int *ret_n_ends)
{
	unsigned int nf = 0, ne = 0;

	for (unsigned int pi = 0; pi < e->set->n; pi++) {
		const struct policy *p = &e->set->p[pi];

		if (!policy_is_per_process(p->item)) {
			if (nf < max && sample(e, pi, 0, NULL, load1, now_s, &fires[nf]))
				nf++;
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			const struct policy_proc *pr = &procs[i];

			if (p->pid >= 0 && pr->pid != (uint32_t)p->pid)
				continue;
			if (p->comm[0] && strncmp(pr->comm, p->comm, POLICY_COMM_MAX - 1))
				continue;
			if (nf < max &&
			    sample(e, pi, pr->pid, pr->comm, pr->value[p->item], now_s, &fires[nf]))
				nf++;
		}
	}
	for (unsigned int i = 0; i < e->n; i++) {
		struct policy_track *t = &e->t[i];

		if (!t->active_to_s || now_s < t->active_to_s || ne >= max_ends)
			continue;
		ends[ne] = (struct policy_fire){
			.policy = t->policy, .pid = t->pid, .end_s = t->active_to_s};
		memcpy(ends[ne].comm, t->comm, sizeof(ends[ne].comm));
		ne++;
		t->active_to_s = 0;
	}
	*ret_n_ends = ne;
	return nf;
}
