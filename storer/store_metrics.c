// SPDX-License-Identifier: MIT
/*
 * The metrics section (format 1.1, docs/store-format.md "Metrics section"):
 * per-second CPA_REC_METRICS records, encoded after a data section's rows
 * when the block flag STORE_BF_METRICS is set. A 1.0 reader decodes the rows
 * and never looks past them, so it skips the section without knowing it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "store.h"
#include "store_fmt.h"
#include "store_metrics_pvt.h"

#define ROW_COLUMNS 13 /* of the data section (store_block.c) */

static void hist_put(struct sbuf *b, const uint32_t *h)
{
	unsigned int nz = 0, i, prev = 0;

	for (i = 0; i < CPA_METRICS_HIST; i++)
		nz += h[i] != 0;
	sbuf__varint(b, nz);
	for (i = 0; i < CPA_METRICS_HIST; i++) {
		if (!h[i])
			continue;
		sbuf__varint(b, i - prev);
		sbuf__varint(b, h[i]);
		prev = i;
	}
}

static bool hist_get(struct rbuf *r, uint32_t *h)
{
	uint64_t nz = rbuf__varint(r), i, at = 0, v;

	if (nz > CPA_METRICS_HIST)
		return false;
	for (i = 0; i < nz; i++) {
		at += rbuf__varint(r);
		if (at >= CPA_METRICS_HIST)
			return false;
		v = rbuf__varint(r); /* once: MIN() evaluates twice */
		h[at] = (uint32_t)MIN(v, UINT32_MAX);
	}
	return !r->bad;
}

void store_metrics__encode(struct sbuf *b, const struct cpa_metrics *m,
			   const struct cpa_metrics_ent *ents)
{
	unsigned int i, j;

	sbuf__varint(b, m->time_ns);
	sbuf__varint(b, m->interval_ms);
	sbuf__varint(b, m->flags);
	for (i = 0; i < 3; i++)
		sbuf__varint(b, m->load_milli[i]);
	sbuf__varint(b, m->nr_cpus);
	sbuf__varint(b, m->cpu_busy_ticks);
	sbuf__varint(b, m->cpu_iowait_ticks);
	sbuf__varint(b, m->cpu_idle_ticks);
	/* PSI: value + 1, 0 = not present */
	for (i = 0; i < CPA_PSI_MAX; i++) {
		sbuf__varint(b, ((uint64_t)m->psi_some_us[i] + 1) & 0xffffffffu);
		sbuf__varint(b, ((uint64_t)m->psi_full_us[i] + 1) & 0xffffffffu);
	}
	sbuf__varint(b, m->hw_cycles);
	sbuf__varint(b, m->hw_instructions);
	sbuf__varint(b, m->hw_cache_misses);
	sbuf__varint(b, m->dropped);
	sbuf__varint(b, m->n_ents);
	for (i = 0; i < m->n_ents; i++) {
		const struct cpa_metrics_ent *e = &ents[i];
		size_t cl = strnlen(e->comm, CPA_COMM_LEN);

		sbuf__varint(b, e->kind);
		sbuf__varint(b, e->id);
		sbuf__varint(b, cl);
		sbuf__put(b, e->comm, cl);
		sbuf__varint(b, e->oncpu_ns);
		sbuf__varint(b, e->runq_ns);
		sbuf__varint(b, e->runq_n);
		sbuf__varint(b, e->slices);
		for (j = 0; j < CPA_MR_MAX; j++)
			sbuf__varint(b, e->switches[j]);
		hist_put(b, e->runq_hist);
		hist_put(b, e->slice_hist);
	}
}

static void str_put(struct sbuf *b, const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	sbuf__varint(b, n);
	sbuf__put(b, s, n);
}

static bool str_get(struct rbuf *r, char *dst, size_t max)
{
	uint64_t n = rbuf__varint(r);
	const uint8_t *p;

	if (r->bad || n >= max)
		return false;
	p = rbuf__bytes(r, n);
	if (!p)
		return false;
	memcpy(dst, p, n);
	dst[n] = '\0';
	return true;
}

void store_metrics__encode_event(struct sbuf *b, const struct cpa_policy_event *ev)
{
	sbuf__varint(b, ev->time_ns);
	sbuf__varint(b, ev->end_ns);
	sbuf__varint(b, ev->kind);
	sbuf__varint(b, ev->item);
	sbuf__varint(b, ev->cmp);
	sbuf__varint(b, ev->pid);
	sbuf__varint(b, ev->actions);
	sbuf__varint(b, ev->freq);
	sbuf__varint(b, ev->stack_size);
	sbuf__put(b, &ev->threshold, sizeof(double)); /* IEEE 754, little-endian */
	sbuf__put(b, &ev->value, sizeof(double));
	str_put(b, ev->policy, CPA_POLICY_NAME_LEN - 1);
	str_put(b, ev->comm, CPA_COMM_LEN - 1);
}

static int decode_events(struct rbuf *r, uint64_t t0_ns, uint64_t t1_ns, store_event_fn fn,
			 void *ctx)
{
	uint64_t n = rbuf__varint(r), i;
	int ret;

	if (r->bad || n > r->len)
		return -EBADMSG;
	for (i = 0; i < n; i++) {
		struct cpa_policy_event ev = {0};
		const uint8_t *d;

		ev.time_ns = rbuf__varint(r);
		ev.end_ns = rbuf__varint(r);
		ev.kind = (uint16_t)rbuf__varint(r);
		ev.item = (uint16_t)rbuf__varint(r);
		ev.cmp = (uint16_t)rbuf__varint(r);
		ev.pid = (uint32_t)rbuf__varint(r);
		ev.actions = (uint32_t)rbuf__varint(r);
		ev.freq = (uint32_t)rbuf__varint(r);
		ev.stack_size = (uint32_t)rbuf__varint(r);
		d = rbuf__bytes(r, 2 * sizeof(double));
		if (!d || !str_get(r, ev.policy, sizeof(ev.policy)) ||
		    !str_get(r, ev.comm, sizeof(ev.comm)))
			return -EBADMSG;
		memcpy(&ev.threshold, d, sizeof(double));
		memcpy(&ev.value, d + sizeof(double), sizeof(double));
		if (ev.time_ns < t0_ns || ev.time_ns >= t1_ns || !fn)
			continue;
		ret = fn(ctx, &ev);
		if (ret)
			return ret;
	}
	return 0;
}

int store_metrics__offset(const uint8_t *p, size_t len, size_t *ret_off)
{
	struct rbuf r = {.p = p, .len = len};
	uint64_t n = rbuf__varint(&r), i;

	if (r.bad || n > len)
		return -EBADMSG;
	for (i = 0; i < n * ROW_COLUMNS && !r.bad; i++)
		rbuf__varint(&r);
	if (r.bad)
		return -EBADMSG;
	*ret_off = r.pos;
	return 0;
}

int store_metrics__decode(const uint8_t *p, size_t len, uint64_t t0_ns, uint64_t t1_ns,
			  store_metrics_fn fn, store_event_fn efn, void *ctx)
{
	struct rbuf r = {.p = p, .len = len};
	_cleanup_free_ struct cpa_metrics_ent *ents = NULL;
	uint64_t nrec = rbuf__varint(&r), i, j, k;
	int ret;

	if (r.bad || nrec > len)
		return -EBADMSG;
	ents = calloc(CPA_METRICS_PER_REC, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	for (i = 0; i < nrec; i++) {
		struct cpa_metrics m = {0};
		uint64_t v;

		m.time_ns = rbuf__varint(&r);
		m.interval_ms = (uint32_t)rbuf__varint(&r);
		m.flags = (uint16_t)rbuf__varint(&r);
		for (j = 0; j < 3; j++)
			m.load_milli[j] = (uint32_t)rbuf__varint(&r);
		m.nr_cpus = (uint32_t)rbuf__varint(&r);
		m.cpu_busy_ticks = rbuf__varint(&r);
		m.cpu_iowait_ticks = rbuf__varint(&r);
		m.cpu_idle_ticks = rbuf__varint(&r);
		for (j = 0; j < CPA_PSI_MAX; j++) {
			v = rbuf__varint(&r);
			m.psi_some_us[j] = v ? (uint32_t)(v - 1) : CPA_METRICS_PSI_NONE;
			v = rbuf__varint(&r);
			m.psi_full_us[j] = v ? (uint32_t)(v - 1) : CPA_METRICS_PSI_NONE;
		}
		m.hw_cycles = rbuf__varint(&r);
		m.hw_instructions = rbuf__varint(&r);
		m.hw_cache_misses = rbuf__varint(&r);
		m.dropped = (uint32_t)rbuf__varint(&r);
		v = rbuf__varint(&r);
		if (r.bad || v > CPA_METRICS_PER_REC)
			return -EBADMSG;
		m.n_ents = (uint16_t)v;
		memset(ents, 0, sizeof(*ents) * CPA_METRICS_PER_REC);
		for (j = 0; j < m.n_ents; j++) {
			struct cpa_metrics_ent *e = &ents[j];
			const uint8_t *c;
			uint64_t cl;

			e->kind = (uint16_t)rbuf__varint(&r);
			e->id = (uint32_t)rbuf__varint(&r);
			cl = rbuf__varint(&r);
			if (cl >= CPA_COMM_LEN)
				return -EBADMSG;
			c = rbuf__bytes(&r, cl);
			if (!c)
				return -EBADMSG;
			memcpy(e->comm, c, cl);
			e->oncpu_ns = rbuf__varint(&r);
			e->runq_ns = rbuf__varint(&r);
			e->runq_n = rbuf__varint(&r);
			e->slices = rbuf__varint(&r);
			for (k = 0; k < CPA_MR_MAX; k++)
				e->switches[k] = rbuf__varint(&r);
			if (!hist_get(&r, e->runq_hist) || !hist_get(&r, e->slice_hist))
				return -EBADMSG;
		}
		if (r.bad)
			return -EBADMSG;
		if (m.time_ns < t0_ns || m.time_ns >= t1_ns || !fn)
			continue;
		ret = fn(ctx, &m, ents);
		if (ret)
			return ret;
	}
	return decode_events(&r, t0_ns, t1_ns, efn, ctx);
}
