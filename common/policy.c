// SPDX-License-Identifier: MIT
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "envlabel.h"
#include "fileio.h"
#include "inputfile.h"
#include "macro.h"

/* clang-format off */
static const char *const item_names[POLICY_ITEM_MAX] = {
	[POLICY_CPU_PERCENT] = "cpu_percent",
	[POLICY_SYSTEM_LOAD] = "system_load",
	[POLICY_RUNQ_P99_US] = "runq_latency_p99_us",
	[POLICY_THREAD_COUNT] = "thread_count",
	[POLICY_OFFCPU_PERCENT] = "offcpu_percent",
	[POLICY_PROBE_RATE] = "probe_rate",
};
/* clang-format on */

#define ITEM_LIST                                                                     \
	"cpu_percent, offcpu_percent, probe_rate, runq_latency_p99_us, system_load, " \
	"thread_count"
#define KEY_LIST                                                                      \
	"policy, item, probe, op, threshold, period, count, comm, pid, cgroup, env, " \
	"freq, offcpu, stack_size, attach, duration, silence"

static const char *const cmp_names[] = {
	[POLICY_GT] = ">", [POLICY_GE] = ">=", [POLICY_LT] = "<", [POLICY_LE] = "<="};

const char *policy_item_name(unsigned int i)
{
	i &= 0xff;
	return i > 0 && i < POLICY_ITEM_MAX ? item_names[i] : "?";
}

void policy_item_format(char *buf, size_t len, uint16_t ev_item)
{
	if ((ev_item & 0xff) == POLICY_PROBE_RATE)
		snprintf(buf, len, "%s(probe=%u)", item_names[POLICY_PROBE_RATE],
			 ev_item >> POLICY_EV_PROBE_SHIFT);
	else
		snprintf(buf, len, "%s", policy_item_name(ev_item));
}

void policy_actions_format(char *buf, size_t len, uint32_t ev_actions, uint32_t freq,
			   uint32_t stack_size)
{
	size_t n = 0;

	buf[0] = '\0';
#define APPEND(...)                                                           \
	do {                                                                  \
		if (n < len)                                                  \
			n += (size_t)snprintf(buf + n, len - n, __VA_ARGS__); \
	} while (0)
	if (ev_actions & POLICY_ACT_FREQ)
		APPEND(" freq=%u", freq);
	if (ev_actions & POLICY_ACT_OFFCPU)
		APPEND(" offcpu=1");
	if (ev_actions & POLICY_ACT_STACK_SIZE)
		APPEND(" stack_size=%u", stack_size);
	if (ev_actions & POLICY_ACT_PROBES) {
		const char *sep = "=";

		APPEND(" attach");
		for (unsigned int i = 0; i < POLICY_PROBES; i++)
			if (ev_actions & (1u << (POLICY_EV_PROBE_SHIFT + i))) {
				APPEND("%s%u", sep, i);
				sep = ",";
			}
	}
#undef APPEND
}

const char *policy_cmp_name(enum policy_cmp c)
{
	return c >= POLICY_GT && c <= POLICY_LE ? cmp_names[c] : "?";
}

bool policy_is_per_process(enum policy_item i)
{
	return i != POLICY_SYSTEM_LOAD;
}

bool policy_selects(const struct policy *p, uint32_t pid, const char *comm)
{
	if (p->pid >= 0 && pid != (uint32_t)p->pid)
		return false;
	return !p->comm[0] || !strncmp(comm, p->comm, POLICY_COMM_MAX - 1);
}

bool policy_has_proc_selector(const struct policy *p)
{
	return p->cgroup[0] || p->cgroup_id || p->env[0];
}

bool policy_cgroup_match(const struct policy *p, const char *cg_path, uint64_t cg_id)
{
	size_t n = strlen(p->cgroup);

	if (p->cgroup_id && cg_id != p->cgroup_id)
		return false;
	if (!n)
		return true;
	if (!cg_path)
		return false;
	if (n == 1) /* "/": every process */
		return true;
	return !strncmp(cg_path, p->cgroup, n) && (cg_path[n] == '\0' || cg_path[n] == '/');
}

bool policy_env_match(const struct policy *p, const char *envbuf, size_t len)
{
	const char *eq = strchr(p->env, '='), *v;
	char name[POLICY_ENV_MAX];
	size_t vlen;

	if (!p->env[0])
		return true;
	if (!eq || !envbuf)
		return false;
	snprintf(name, sizeof(name), "%.*s", (int)(eq - p->env), p->env);
	v = env_label_pick(envbuf, len, name, &vlen);
	return v && vlen == strlen(eq + 1) && !memcmp(v, eq + 1, vlen);
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

/* A probe named by probe= or attach=: its id (an index, or the --probe spec
 * as given), -1 with the reason in err. */
static int probe_id(const char *v, const struct policy_limits *lim, char *err, size_t len,
		    const char *where, const char *key)
{
	unsigned long u;

	if (!*v) {
		bad(err, len, where, "%s=: a probe (its number or its --probe spec)", key);
		return -1;
	}
	if (isdigit((unsigned char)*v)) {
		if (uint_(v, 0, POLICY_PROBES - 1, &u) < 0 ||
		    (lim->probes_known && u >= lim->nr_probes)) {
			bad(err, len, where, "%s=%s: no such probe (%u --probe given)", key, v,
			    lim->probes_known ? lim->nr_probes : POLICY_PROBES);
			return -1;
		}
		return (int)u;
	}
	if (!lim->probes_known)
		return 0; /* looked up once the --probe options are known */
	for (unsigned int i = 0; i < lim->nr_probes; i++)
		if (!strcmp(lim->probes[i], v))
			return (int)i;
	bad(err, len, where,
	    "%s=%s: not a probe of this run (name one of the %u --probe specs, as given, or "
	    "its number)",
	    key, v, lim->nr_probes);
	return -1;
}

/* One "key=value" token of a policy line into p. */
static int token(struct policy *p, const char *k, const char *v, const struct policy_limits *lim,
		 char *err, size_t len, const char *where)
{
	uint32_t freq_max = lim->freq_max;
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
		if (!p->item)
			return bad(err, len, where, "unknown item '%s' (" ITEM_LIST ")", v);
	} else if (!strcmp(k, "probe")) {
		p->probe = probe_id(v, lim, err, len, where, k);
		if (p->probe < 0)
			return -EINVAL;
	} else if (!strcmp(k, "op")) {
		for (unsigned int i = POLICY_GT; i <= POLICY_LE; i++)
			if (!strcmp(v, cmp_names[i]))
				p->cmp = (enum policy_cmp)i;
		if (!p->cmp)
			return bad(err, len, where, "op '%s': one of >, >=, <, <=", v);
	} else if (!strcmp(k, "threshold")) {
		if (num(v, 0, 1e12, &d) < 0)
			return bad(err, len, where, "threshold '%s': a number from 0 to 1e12", v);
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
	} else if (!strcmp(k, "cgroup")) {
		size_t n = strlen(v);

		if (*v == '/') {
			if (n >= POLICY_CGROUP_MAX || strstr(v, "/..") || strstr(v, "//"))
				return bad(err, len, where,
					   "cgroup '%s': a cgroup v2 path from the root of the v2 "
					   "hierarchy (/a/b, at most %d characters), or its id",
					   v, POLICY_CGROUP_MAX - 1);
			memcpy(p->cgroup, v, n + 1);
			if (n > 1 && p->cgroup[n - 1] == '/')
				p->cgroup[n - 1] = '\0';
		} else {
			char *end;

			errno = 0;
			p->cgroup_id = isdigit((unsigned char)*v) ? strtoull(v, &end, 10) : 0;
			if (!p->cgroup_id || errno || *end)
				return bad(err, len, where,
					   "cgroup '%s': a cgroup v2 path (/a/b) or a cgroup id "
					   "(a number > 0)",
					   v);
		}
	} else if (!strcmp(k, "env")) {
		const char *eq = strchr(v, '=');

		if (!eq || eq == v || memchr(v, ',', (size_t)(eq - v)) ||
		    strlen(v) >= POLICY_ENV_MAX)
			return bad(err, len, where,
				   "env '%s': NAME=VALUE (a name without ',', at most %d "
				   "characters in all)",
				   v, POLICY_ENV_MAX - 1);
		memcpy(p->env, v, strlen(v) + 1);
	} else if (!strcmp(k, "attach")) {
		_cleanup_free_ char *list = strdup(v);
		char *save = NULL, *one;

		if (!list)
			return -ENOMEM;
		if (!*v)
			return bad(err, len, where,
				   "attach=: probes to attach (numbers or --probe specs, "
				   "comma-separated)");
		for (one = strtok_r(list, ",", &save); one; one = strtok_r(NULL, ",", &save)) {
			int id = probe_id(one, lim, err, len, where, k);

			if (id < 0)
				return -EINVAL;
			p->attach |= 1u << id;
		}
		p->actions |= POLICY_ACT_PROBES;
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
		return bad(err, len, where, "unknown key '%s' (" KEY_LIST ")", k);
	}
	return 0;
}

static int line(const char *name, unsigned int no, char *s, const struct policy_limits *lim,
		struct policy_set *set, char *err, size_t len)
{
	struct policy p = {.pid = -1, .line = no, .silence = UINT32_MAX, .probe = -1};
	char where[300], *save = NULL, *tok, *keys[32];
	unsigned int seen = 0;

	snprintf(where, sizeof(where), "%s:%u", name, no);
	for (tok = strtok_r(s, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
		char *eq = strchr(tok, '=');
		int r;

		if (!eq || eq == tok)
			return bad(err, len, where, "'%s' is not key=value", tok);
		*eq = '\0';
		for (unsigned int i = 0; i < seen && i < ARRAY_SIZE(keys); i++)
			if (!strcmp(keys[i], tok))
				return bad(err, len, where, "%s= given twice", tok);
		r = token(&p, tok, eq + 1, lim, err, len, where);
		if (r < 0)
			return r;
		if (seen < ARRAY_SIZE(keys))
			keys[seen] = tok;
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
	if (p.item == POLICY_PROBE_RATE && p.probe < 0)
		return bad(
			err, len, where,
			"policy '%s': probe_rate needs probe= (the --probe whose hits are counted)",
			p.name);
	if (p.item != POLICY_PROBE_RATE && p.probe >= 0)
		return bad(err, len, where, "policy '%s': probe= is for item=probe_rate", p.name);
	if (!p.actions)
		return bad(err, len, where,
			   "policy '%s': no action (freq=, offcpu=1, stack_size=, attach=)",
			   p.name);
	if (!p.duration)
		return bad(err, len, where, "policy '%s': needs duration= (seconds)", p.name);
	if (!policy_is_per_process(p.item) &&
	    (p.comm[0] || p.pid >= 0 || policy_has_proc_selector(&p)))
		return bad(err, len, where,
			   "policy '%s': %s is system-wide, comm=/pid=/cgroup=/env= do not apply",
			   p.name, policy_item_name(p.item));
	if (!policy_is_per_process(p.item) && (p.actions & ~POLICY_ACT_FREQ))
		return bad(err, len, where,
			   "policy '%s': a system-wide item can only raise freq= (offcpu=, "
			   "stack_size= and attach= need a target process)",
			   p.name);
	if (p.silence == UINT32_MAX)
		p.silence = p.duration;
	if (set->n == POLICY_MAX)
		return bad(err, len, where, "more than %d policies", POLICY_MAX);
	set->p[set->n++] = p;
	return 0;
}

/* A probe is counted (probe=, attached all along) or attached by a
 * trigger (attach=, attached only while one is on), never both. */
static int probes_check(const char *name, const struct policy_set *set, char *err, size_t len)
{
	char where[300];

	for (unsigned int i = 0; i < set->n; i++) {
		const struct policy *c = &set->p[i];

		if (c->probe < 0)
			continue;
		for (unsigned int j = 0; j < set->n; j++) {
			const struct policy *a = &set->p[j];

			if (!(a->attach & (1u << c->probe)))
				continue;
			snprintf(where, sizeof(where), "%s:%u", name, MAX(a->line, c->line));
			return bad(err, len, where,
				   "probe %d is counted by policy '%s' (line %u, probe=) and "
				   "attached only during triggers by policy '%s' (line %u, "
				   "attach=): a probe is one or the other",
				   c->probe, c->name, c->line, a->name, a->line);
		}
	}
	return 0;
}

int policy_set__parse(const char *name, const char *text, const struct policy_limits *lim,
		      struct policy_set *ret, char *err, size_t errlen)
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
		r = line(name, no, s, lim, ret, err, errlen);
		if (r < 0)
			return r;
	}
	if (!ret->n) {
		snprintf(err, errlen, "%s: no policy in the file", name);
		return -EINVAL;
	}
	return lim->probes_known ? probes_check(name, ret, err, errlen) : 0;
}

int policy_set__load(const char *path, const struct policy_limits *lim, struct policy_set *ret,
		     char *err, size_t errlen)
{
	_cleanup_free_ char *text = NULL;
	_cleanup_close_ int fd = -1;
	size_t len, cap = 0;
	int r;

	/* A regular file, never a FIFO that would block; trusted like --config. */
	r = input_file__open(path, path, INPUT_FILE_TRUSTED, &fd, err, errlen);
	if (r < 0)
		return r;
	r = read_full_fd(fd, 0, 1 << 20, &text, &cap, &len);
	if (r < 0) {
		snprintf(err, errlen, "%s: %s", path,
			 r == -EFBIG ? "larger than 1024 KiB: not a policy file" : strerror(-r));
		return r;
	}
	if (strlen(text) != len) {
		snprintf(err, errlen, "%s: a NUL byte in the file", path);
		return -EINVAL;
	}
	return policy_set__parse(path, text, lim, ret, err, errlen);
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
			double v;

			if (!policy_selects(p, pr->pid, pr->comm))
				continue;
			if (policy_has_proc_selector(p) && !(pr->selected & (1u << pi)))
				continue;
			v = p->item == POLICY_PROBE_RATE ? pr->probe_hz[p->probe]
							 : pr->value[p->item];
			if (nf < max && sample(e, pi, pr->pid, pr->comm, v, now_s, &fires[nf]))
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
