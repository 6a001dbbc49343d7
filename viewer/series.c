// SPDX-License-Identifier: MIT
/*
 * The per-second metrics series and the policy triggers of the timeline view
 * (model.h, docs/viewer.md "Metrics and triggers"): one walk over the view's
 * metrics sections (store_reader__metrics(), store_reader__triggers()), kept per second so the
 * drawing sums any number of seconds per cell exactly (histograms included).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "model.h"

#define NS 1000000000ULL

static bool ent_selected(const struct vseries *v, const struct cpa_metrics_ent *e)
{
	if (e->kind != CPA_MK_PROC)
		return false;
	if (v->pid >= 0 && e->id != (uint32_t)v->pid)
		return false;
	return !v->comm[0] || !strncmp(e->comm, v->comm, CPA_COMM_LEN - 1);
}

static void ent_add(struct vmsec *d, const struct cpa_metrics_ent *e)
{
	for (int i = 0; i < CPA_MR_MAX; i++)
		d->switches += e->switches[i];
	for (int i = 0; i < CPA_METRICS_HIST; i++)
		d->runq_hist[i] += e->runq_hist[i];
}

static int on_metrics(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct vseries *v = ctx;
	int64_t s = (int64_t)(m->time_ns / NS);
	struct vmsec *d;

	if (s < v->t0 || s >= v->t1)
		return 0;
	d = &v->sec[s - v->t0];
	v->any = true;
	if (m->flags & CPA_MF_SYSTEM) {
		d->have = true;
		if (!v->proc) {
			d->busy += m->cpu_busy_ticks;
			d->total += m->cpu_busy_ticks + m->cpu_iowait_ticks + m->cpu_idle_ticks;
		} else {
			d->total += (uint64_t)m->interval_ms * 1000000ULL;
		}
		if (m->flags & CPA_MF_HW) {
			v->hw = true;
			v->cycles += m->hw_cycles;
			v->instructions += m->hw_instructions;
		}
		if (m->flags & CPA_MF_HW_NA)
			v->hw_na = true;
	}
	for (uint32_t i = 0; i < m->n_ents; i++) {
		const struct cpa_metrics_ent *e = &ents[i];

		if (v->proc ? ent_selected(v, e) : e->kind == CPA_MK_CPU) {
			ent_add(d, e);
			if (v->proc)
				d->busy += e->oncpu_ns;
		}
	}
	return 0;
}

void vmodel__series_reset(struct vmodel *m)
{
	free(m->ser.sec);
	free(m->ser.trig);
	memset(&m->ser, 0, sizeof(m->ser));
}

int vmodel__series(struct vmodel *m, int64_t t0, int64_t t1, const struct vfilter *f)
{
	struct vseries *v = &m->ser;
	int r;

	if (v->loaded && v->t0 == t0 && v->t1 == t1 && v->pid == f->pid &&
	    !strcmp(v->comm, f->comm))
		return 0;
	vmodel__series_reset(m);
	v->loaded = true;
	v->t0 = t0;
	v->t1 = t1;
	v->pid = f->pid;
	snprintf(v->comm, sizeof(v->comm), "%s", f->comm);
	v->proc = v->pid >= 0 || v->comm[0];
	if (!m->r || t1 <= t0)
		return 0;
	if (t1 - t0 > VSERIES_MAX_SPAN) {
		v->too_long = true;
		return 0;
	}
	v->sec = calloc((size_t)(t1 - t0), sizeof(*v->sec));
	if (!v->sec)
		return -ENOMEM;
	r = store_reader__metrics(m->r, (uint64_t)t0 * NS, (uint64_t)t1 * NS, on_metrics, v);
	if (r < 0)
		return r;
	return store_reader__triggers(m->r, (uint64_t)t0 * NS, (uint64_t)t1 * NS, &v->trig,
				      &v->n_trig);
}

bool vmodel__series_cell(const struct vmodel *m, int64_t s0, int64_t s1, double *busy_pct,
			 double *rq_p99_us, double *cs_per_s)
{
	const struct vseries *v = &m->ser;
	struct vmsec sum = {0};
	uint64_t n = 0;

	if (!v->sec)
		return false;
	for (int64_t s = MAX(s0, v->t0); s < MIN(s1, v->t1); s++) {
		const struct vmsec *d = &v->sec[s - v->t0];

		if (!d->have)
			continue;
		n++;
		sum.busy += d->busy;
		sum.total += d->total;
		sum.switches += d->switches;
		for (int i = 0; i < CPA_METRICS_HIST; i++)
			sum.runq_hist[i] += d->runq_hist[i];
	}
	if (!n)
		return false;
	*busy_pct = sum.total ? 100.0 * (double)sum.busy / (double)sum.total : 0;
	*rq_p99_us = cpa_metrics_hist_quantile(sum.runq_hist, 0.99) / 1000.0;
	*cs_per_s = (double)sum.switches / (double)n;
	return true;
}
