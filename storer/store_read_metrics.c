// SPDX-License-Identifier: MIT
/*
 * Store reader, metrics (store_reader_pvt.h): the metrics sections of a range
 * (decoded by store_metrics.c), their policy events, and the triggers made
 * of those events (START paired with END).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/policy.h"
#include "common/timeutil.h"
#include "store_metrics_pvt.h"
#include "store_reader_pvt.h"

/* Format 1.1's metrics sections (docs/metrics.md): no dictionary needed. */
static int metrics_walk(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns, store_metrics_fn fn,
			store_event_fn efn, void *ctx)
{
	struct blk_iter it;
	struct rseg *s;
	struct rblock *b;
	int ret;

	/* A set (every run of a day): each run's metrics in turn. */
	for (uint32_t i = 0; i < r->n_subs; i++) {
		ret = metrics_walk(r->subs[i], t0_ns, t1_ns, fn, efn, ctx);
		if (ret)
			return ret;
	}
	blk_iter__init(&it, t0_ns, t1_ns, STORE_BF_METRICS, false);
	while ((ret = blk_iter__next(r, &it, &s, &b)) > 0) {
		struct store_block_hdr h;
		size_t off;
		int n = store_read__section(r, s, b, true, &h);

		if (n == -ENOMEM)
			return n;
		if (n < 0 || !(h.flags & STORE_BF_METRICS))
			continue;
		ret = store_metrics__offset(r->rawbuf, (size_t)n, &off);
		if (!ret)
			ret = store_metrics__decode(r->rawbuf + off, (size_t)n - off, t0_ns, t1_ns,
						    fn, efn, ctx);
		if (ret == STORE_METRICS_NEWER) {
			/* not damage: the block and its samples are good */
			if (!r->metrics_newer)
				store_read__notice(
					r,
					"%s: scheduler metrics of a newer format than this "
					"cpa reads, skipped (their samples are read): use "
					"a newer cpa to read them",
					s->path);
			r->metrics_newer = true;
			ret = 0;
			continue;
		}
		if (ret == -EBADMSG) {
			r->st.blocks_corrupt++;
			store_read__notice(
				r, "%s: block at %u has a malformed metrics section, skipped",
				s->path, b->off);
			continue;
		}
		if (ret)
			return ret;
	}
	return ret;
}

int store_reader__metrics(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			  store_metrics_fn fn, void *ctx)
{
	return metrics_walk(r, t0_ns, t1_ns, fn, NULL, ctx);
}

/* The longest interval a record covers that store_reader__range_end() looks
 * back for: capture's stretch is at most 4 s (docs/metrics.md, "Idle host"). */
#define RANGE_END_LOOKBACK_S 64

static int on_range_end(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	uint64_t *end_s = ctx, ms = m->interval_ms ? m->interval_ms : 1000;
	/* its seconds, as `cpa show --sched` counts them (export/show_sched.c) */
	uint64_t e = m->time_ns / NSEC_PER_SEC + MAX((ms + 500) / 1000, 1);

	(void)ents;
	*end_s = MAX(*end_s, e);
	return 0;
}

uint64_t store_reader__range_end(struct store_reader *r, uint64_t last_ns)
{
	uint64_t last_s = last_ns / NSEC_PER_SEC, end_s = last_s + 1;
	uint64_t from_s = last_s > RANGE_END_LOOKBACK_S ? last_s - RANGE_END_LOOKBACK_S : 0;

	if (metrics_walk(r, from_s * NSEC_PER_SEC, end_s * NSEC_PER_SEC, on_range_end, NULL,
			 &end_s) < 0)
		end_s = last_s + 1;
	return end_s * NSEC_PER_SEC;
}

int store_reader__events(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns, store_event_fn fn,
			 void *ctx)
{
	return metrics_walk(r, t0_ns, t1_ns, NULL, fn, ctx);
}

/* ------------------------------------------------------------ triggers */

struct trig_acc {
	uint64_t t0_ns;
	struct store_trigger *v;
	size_t n, cap;
};

static int on_trig_event(void *ctx, const struct cpa_policy_event *ev)
{
	struct trig_acc *a = ctx;
	struct store_trigger *t;

	if (ev->kind == CPA_PE_END) {
		/* the oldest open START of the same policy and target */
		for (size_t i = 0; i < a->n; i++) {
			t = &a->v[i];
			if (!t->end_recorded && !t->start_before && t->ev.pid == ev->pid &&
			    !strncmp(t->ev.policy, ev->policy, sizeof(ev->policy))) {
				t->end_ns = ev->time_ns;
				t->end_recorded = true;
				return 0;
			}
		}
	} else if (ev->kind != CPA_PE_START) {
		return 0;
	}
	if (a->n == a->cap) {
		size_t nc = a->cap ? a->cap * 2 : 16;
		struct store_trigger *nv = realloc(a->v, nc * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		a->v = nv;
		a->cap = nc;
	}
	t = &a->v[a->n++];
	*t = (struct store_trigger){.ev = *ev};
	if (ev->kind == CPA_PE_START) {
		t->start_ns = ev->time_ns;
		t->end_ns = MAX(ev->end_ns, ev->time_ns);
	} else {
		t->start_ns = MIN(a->t0_ns, ev->time_ns);
		t->end_ns = ev->time_ns;
		t->end_recorded = t->start_before = true;
	}
	return 0;
}

static int trig_cmp(const void *x, const void *y)
{
	const struct store_trigger *a = x, *b = y;

	return a->start_ns < b->start_ns ? -1 : a->start_ns > b->start_ns;
}

int store_reader__triggers(struct store_reader *r, uint64_t t0_ns, uint64_t t1_ns,
			   struct store_trigger **ret, size_t *ret_n)
{
	struct trig_acc a = {.t0_ns = t0_ns};
	int e = store_reader__events(r, t0_ns, t1_ns, on_trig_event, &a);

	if (e < 0) {
		free(a.v);
		return e;
	}
	if (a.n)
		qsort(a.v, a.n, sizeof(*a.v), trig_cmp);
	*ret = a.v;
	*ret_n = a.n;
	return 0;
}

void store_trigger__describe(const struct store_trigger *t, char *buf, size_t len)
{
	const struct cpa_policy_event *e = &t->ev;
	char item[64], acts[128];
	size_t o;

	o = (size_t)snprintf(buf, len, "policy %.*s pid %u (%.*s)", (int)sizeof(e->policy),
			     e->policy, e->pid, (int)sizeof(e->comm), e->comm);
	if (e->kind != CPA_PE_START || o >= len)
		return; /* an END only: the start (and what fired) is before the range */
	/* the stored item and actions carry probe ids (POLICY_EV_ITEM/ACTIONS):
	 * the policy file's words, as `cpa show --triggers` prints them */
	policy_item_format(item, sizeof(item), e->item);
	policy_actions_format(acts, sizeof(acts), e->actions, e->freq, e->stack_size);
	snprintf(buf + o, len - o, ": %s %.2f %s %.2f, actions%s", item, e->value,
		 policy_cmp_name((enum policy_cmp)e->cmp), e->threshold, acts);
}
