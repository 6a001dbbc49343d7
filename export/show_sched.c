// SPDX-License-Identifier: MIT
/*
 * `cpa show --sched`, `--sched_csv FILE`, `--sched_json FILE`: the
 * per-second scheduler and system metrics of a range (docs/metrics.md), as a
 * perf-agent-style summary on stdout or as a series for other tools.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/policy.h"
#include "common/macro.h"
#include "common/timeutil.h"
#include "show.h"
#include "storer/store.h"

#define NS NSEC_PER_SEC

/* One process's (or CPU's, or everything's) metrics summed over the range. */
struct sacc {
	uint32_t id;
	char comm[CPA_COMM_LEN];
	struct cpa_metrics_ent e;
};

/* cpa_metrics_ent._pad0 as the reader fills it here: the entry came from the
 * task counters (CPA_MF_COUNTERS), or every second summed into it did. */
#define ENT_COUNTERS 1u

struct sched_ctx {
	const struct show_opts *o;
	/* system part */
	/* secs: the seconds the records cover (a record of an idle host's
	 * stretched interval covers its interval_ms, docs/metrics.md "Idle host");
	 * psi_ms, hw_ms: the time the PSI and hardware totals cover. */
	uint64_t secs, load_sum, load_max, busy, iowait, idle;
	uint64_t psi_some[CPA_PSI_MAX], psi_ms[CPA_PSI_MAX];
	uint64_t hw_ms, cycles, instr, cmiss;
	bool hw_na;
	uint64_t dropped, counter_secs, exact_secs, sampled_secs;
	struct sacc all;
	struct sacc *procs, *cpus, *probes; /* probes: slices counts their seconds */
	size_t n_procs, cap_procs, n_cpus, cap_cpus, n_probes, cap_probes;
	uint64_t probe_ms; /* interval covered by the probes' records */
	/* series */
	FILE *csv, *json;
	bool json_first, json_sec_open;
};

static void ent_add(struct cpa_metrics_ent *d, const struct cpa_metrics_ent *s)
{
	d->oncpu_ns += s->oncpu_ns;
	d->runq_ns += s->runq_ns;
	d->runq_n += s->runq_n;
	d->slices += s->slices;
	for (int i = 0; i < CPA_MR_MAX; i++)
		d->switches[i] += s->switches[i];
	for (int i = 0; i < CPA_METRICS_HIST; i++) {
		d->runq_hist[i] += s->runq_hist[i];
		d->slice_hist[i] += s->slice_hist[i];
	}
}

/* NaN for no histogram (the task counters have none): printed "-", "", null. */
static double hist_q_us(const uint32_t *h, double p)
{
	uint64_t n = 0;

	for (int i = 0; i < CPA_METRICS_HIST; i++)
		n += h[i];
	return n ? cpa_metrics_hist_quantile(h, p) / 1000.0 : NAN;
}

static const char *num(char *buf, size_t len, int width, double v, const char *none)
{
	if (isnan(v))
		snprintf(buf, len, "%*s", width, none);
	else
		snprintf(buf, len, "%*.1f", width, v);
	return buf;
}

static bool proc_selected(const struct show_opts *o, const struct cpa_metrics_ent *e)
{
	if (e->kind != CPA_MK_PROC)
		return false;
	if (o->target_pid >= 0 && e->id != (uint32_t)o->target_pid)
		return false;
	return !o->target_comm || !strncmp(e->comm, o->target_comm, CPA_COMM_LEN - 1);
}

static struct sacc *acc_find(struct sacc **v, size_t *n, size_t *cap, uint32_t id)
{
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].id == id)
			return &(*v)[i];
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 64;
		struct sacc *nv = realloc(*v, nc * sizeof(*nv));

		if (!nv)
			return NULL;
		*v = nv;
		*cap = nc;
	}
	memset(&(*v)[*n], 0, sizeof(**v));
	(*v)[*n].id = id;
	return &(*v)[(*n)++];
}

/* What every output says of an entry. */
struct ent_sum {
	double oncpu_ms, rq_p50, rq_p99, rq_mean, sl_p50;
	unsigned long long waits, slices, preempt, sleep, iowait;
};

static struct ent_sum ent_sum(const struct cpa_metrics_ent *e)
{
	return (struct ent_sum){
		.oncpu_ms = (double)e->oncpu_ns / 1e6,
		.rq_p50 = hist_q_us(e->runq_hist, 0.5),
		.rq_p99 = hist_q_us(e->runq_hist, 0.99),
		.rq_mean = e->runq_n ? (double)e->runq_ns / (double)e->runq_n / 1000.0 : 0.0,
		.sl_p50 = hist_q_us(e->slice_hist, 0.5),
		.waits = e->runq_n,
		.slices = e->slices,
		.preempt = e->switches[CPA_MR_PREEMPT],
		.sleep = e->switches[CPA_MR_SLEEP],
		.iowait = e->switches[CPA_MR_IOWAIT],
	};
}

static void csv_ent(FILE *f, const char *t, const char *kind, const struct cpa_metrics_ent *e)
{
	struct ent_sum m = ent_sum(e);
	char p50[24], p99[24], sl[24], io[24] = "";

	if (!(e->_pad0 & ENT_COUNTERS))
		snprintf(io, sizeof(io), "%llu", m.iowait);
	fprintf(f, "%s,%s,%u,%s,%.3f,%llu,%s,%s,%.1f,%llu,%s,%llu,%llu,%s,,,,,,,\n", t, kind, e->id,
		e->kind == CPA_MK_PROC ? e->comm : "", m.oncpu_ms, m.waits,
		num(p50, sizeof(p50), 0, m.rq_p50, ""), num(p99, sizeof(p99), 0, m.rq_p99, ""),
		m.rq_mean, m.slices, num(sl, sizeof(sl), 0, m.sl_p50, ""), m.preempt, m.sleep, io);
}

static void json_ent(FILE *f, const struct cpa_metrics_ent *e, bool first)
{
	struct ent_sum m = ent_sum(e);
	bool proc = e->kind == CPA_MK_PROC;
	char p50[24], p99[24], sl[24], io[24] = "null";

	if (!(e->_pad0 & ENT_COUNTERS))
		snprintf(io, sizeof(io), "%llu", m.iowait);

	fprintf(f,
		"%s\n      {\"%s\": %u, %s%s%s\"oncpu_ms\": %.3f, \"runq_waits\": %llu, "
		"\"runq_p50_us\": %s, \"runq_p99_us\": %s, \"runq_mean_us\": %.1f, "
		"\"slices\": %llu, \"slice_p50_us\": %s, \"preempted\": %llu, "
		"\"voluntary\": %llu, \"iowait\": %s}",
		first ? "" : ",", proc ? "pid" : "cpu", e->id, proc ? "\"comm\": \"" : "",
		proc ? e->comm : "", proc ? "\", " : "", m.oncpu_ms, m.waits,
		num(p50, sizeof(p50), 0, m.rq_p50, "null"),
		num(p99, sizeof(p99), 0, m.rq_p99, "null"), m.rq_mean, m.slices,
		num(sl, sizeof(sl), 0, m.sl_p50, "null"), m.preempt, m.sleep, io);
}

static double pct(uint64_t a, uint64_t total)
{
	return total ? 100.0 * (double)a / (double)total : 0.0;
}

static void series_system(struct sched_ctx *c, const struct cpa_metrics *m, const char *t)
{
	uint64_t tot = m->cpu_busy_ticks + m->cpu_iowait_ticks + m->cpu_idle_ticks;
	char psi[CPA_PSI_MAX][24], jpsi[CPA_PSI_MAX][24];

	for (int i = 0; i < CPA_PSI_MAX; i++) {
		psi[i][0] = '\0';
		if (m->psi_some_us[i] != CPA_METRICS_PSI_NONE)
			snprintf(psi[i], sizeof(psi[i]), "%u", m->psi_some_us[i]);
		strcpy(jpsi[i], psi[i][0] ? psi[i] : "null");
	}
	if (c->csv) {
		fprintf(c->csv, "%s,system,,,,,,,,,,,,,%.2f,%.1f,%.1f,%s,%s,%s,", t,
			m->load_milli[0] / 1000.0, pct(m->cpu_busy_ticks, tot),
			pct(m->cpu_iowait_ticks, tot), psi[0], psi[1], psi[2]);
		if (m->flags & CPA_MF_HW && m->hw_cycles)
			fprintf(c->csv, "%.3f", (double)m->hw_instructions / (double)m->hw_cycles);
		fputc('\n', c->csv);
	}
	if (c->json) {
		fprintf(c->json,
			"%s\n  {\"time\": \"%s\", \"time_ns\": %llu, \"interval_ms\": %u, "
			"\"load1\": %.2f, "
			"\"cpu_busy_pct\": %.1f, \"cpu_iowait_pct\": %.1f, \"psi_some_us\": "
			"{\"cpu\": %s, \"io\": %s, \"memory\": %s}, ",
			c->json_sec_open ? "\n  ]}," : "", t, (unsigned long long)m->time_ns,
			m->interval_ms ? m->interval_ms : 1000, m->load_milli[0] / 1000.0,
			pct(m->cpu_busy_ticks, tot), pct(m->cpu_iowait_ticks, tot), jpsi[0],
			jpsi[1], jpsi[2]);
		if (m->flags & CPA_MF_HW && m->hw_cycles)
			fprintf(c->json, "\"ipc\": %.3f, \"cache_misses\": %llu, ",
				(double)m->hw_instructions / (double)m->hw_cycles,
				(unsigned long long)m->hw_cache_misses);
		else
			fprintf(c->json, "\"ipc\": null, \"cache_misses\": null, ");
		fprintf(c->json, "\"entries\": [");
		c->json_first = true;
		c->json_sec_open = true;
	}
}

static int on_metrics(void *ctx, const struct cpa_metrics *m, const struct cpa_metrics_ent *ents)
{
	struct sched_ctx *c = ctx;
	char t[32];

	show_fmt_tod(m->time_ns, t, sizeof(t));
	if (m->flags & CPA_MF_SYSTEM) {
		uint64_t ms = m->interval_ms ? m->interval_ms : 1000;
		uint64_t w = MAX((ms + 500) / 1000, 1);

		c->secs += w;
		c->load_sum += (uint64_t)m->load_milli[0] * w;
		c->load_max = MAX(c->load_max, m->load_milli[0]);
		c->busy += m->cpu_busy_ticks;
		c->iowait += m->cpu_iowait_ticks;
		c->idle += m->cpu_idle_ticks;
		c->dropped += m->dropped;
		for (int i = 0; i < CPA_PSI_MAX; i++)
			if (m->psi_some_us[i] != CPA_METRICS_PSI_NONE) {
				c->psi_some[i] += m->psi_some_us[i];
				c->psi_ms[i] += ms;
			}
		if (m->flags & CPA_MF_HW) {
			c->hw_ms += ms;
			c->cycles += m->hw_cycles;
			c->instr += m->hw_instructions;
			c->cmiss += m->hw_cache_misses;
		}
		if (m->flags & CPA_MF_HW_NA)
			c->hw_na = true;
		series_system(c, m, t);
		if (m->flags & CPA_MF_COUNTERS)
			c->counter_secs += w;
		else if (m->flags & CPA_MF_SAMPLED)
			c->sampled_secs += w;
		else
			c->exact_secs += w;
	}
	for (unsigned int i = 0; i < m->n_ents; i++) {
		struct cpa_metrics_ent ec = ents[i], *e = &ec;
		struct sacc *a;

		e->_pad0 = m->flags & CPA_MF_COUNTERS ? ENT_COUNTERS : 0;
		if (e->kind == CPA_MK_PROBE) {
			a = acc_find(&c->probes, &c->n_probes, &c->cap_probes, e->id);
			if (!a)
				return -ENOMEM;
			a->e.runq_n += e->runq_n;
			a->e.oncpu_ns += e->oncpu_ns;
			a->e.runq_ns += e->runq_ns;
			a->e.slices += m->interval_ms;
			memcpy(a->e.comm, e->comm, CPA_COMM_LEN);
			if (c->csv)
				fprintf(c->csv, "%s,probe,%u,%s,%.3f,%llu,,,%.3f,,,,,,,,,,,,\n", t,
					e->id, e->comm, (double)e->oncpu_ns / 1e6,
					(unsigned long long)e->runq_n,
					e->runq_n ? (double)e->runq_ns / (double)e->runq_n / 1e3
						  : 0.0);
			if (c->json && c->json_sec_open) {
				fprintf(c->json,
					"%s\n      {\"probe\": %u, \"spec\": \"%s\", \"hits\": %llu, "
					"\"trap_ms\": %.3f, \"bpf_ms\": %.3f}",
					c->json_first ? "" : ",", e->id, e->comm,
					(unsigned long long)e->runq_n, (double)e->oncpu_ns / 1e6,
					(double)e->runq_ns / 1e6);
				c->json_first = false;
			}
			continue;
		}
		if (e->kind == CPA_MK_CPU) {
			a = acc_find(&c->cpus, &c->n_cpus, &c->cap_cpus, e->id);
		} else if (proc_selected(c->o, e)) {
			a = acc_find(&c->procs, &c->n_procs, &c->cap_procs, e->id);
			ent_add(&c->all.e, e);
			c->all.e._pad0 |= e->_pad0;
		} else {
			continue;
		}
		if (!a)
			return -ENOMEM;
		ent_add(&a->e, e);
		/* iowait is known only where no second came from the counters */
		a->e._pad0 |= e->_pad0;
		a->e.id = e->id;
		a->e.kind = e->kind;
		memcpy(a->e.comm, e->comm, CPA_COMM_LEN);
		if (c->csv)
			csv_ent(c->csv, t, e->kind == CPA_MK_PROC ? "process" : "cpu", e);
		if (c->json && c->json_sec_open) {
			json_ent(c->json, e, c->json_first);
			c->json_first = false;
		}
	}
	return 0;
}

static int oncpu_cmp(const void *x, const void *y)
{
	const struct sacc *a = x, *b = y;

	return a->e.oncpu_ns < b->e.oncpu_ns ? 1 : a->e.oncpu_ns > b->e.oncpu_ns ? -1 : 0;
}

static void print_row(const struct cpa_metrics_ent *e, const char *label)
{
	struct ent_sum m = ent_sum(e);
	uint64_t sw = m.preempt + m.sleep + m.iowait;
	char p50[24], p99[24], sl[24], io[24];

	if (e->_pad0 & ENT_COUNTERS)
		snprintf(io, sizeof(io), "%8s", "-");
	else
		snprintf(io, sizeof(io), "%7.1f%%", pct(m.iowait, sw));
	printf("%-24s %10.1f %8llu %s %s %9.1f %8llu %s %7.1f%% %7.1f%% %s\n", label, m.oncpu_ms,
	       m.waits, num(p50, sizeof(p50), 9, m.rq_p50, "-"),
	       num(p99, sizeof(p99), 9, m.rq_p99, "-"), m.rq_mean, m.slices,
	       num(sl, sizeof(sl), 9, m.sl_p50, "-"), pct(m.preempt, sw), pct(m.sleep, sw), io);
}

static void print_summary(struct sched_ctx *c, const char *a, const char *b)
{
	uint64_t tot = c->busy + c->iowait + c->idle;
	static const char *const psi_name[CPA_PSI_MAX] = {"cpu", "io", "memory"};
	char label[48];

	printf("Scheduler metrics [ %s - %s ]: %llu seconds\n", a, b, (unsigned long long)c->secs);
	printf("System: load average %.2f (max %.2f), CPU busy %.1f%%, iowait %.1f%%\n",
	       c->secs ? (double)c->load_sum / (double)c->secs / 1000.0 : 0.0,
	       (double)c->load_max / 1000.0, pct(c->busy, tot), pct(c->iowait, tot));
	printf("Pressure (PSI some):");
	for (int i = 0; i < CPA_PSI_MAX; i++) {
		if (c->psi_ms[i])
			printf(" %s %.2f%%", psi_name[i],
			       (double)c->psi_some[i] / ((double)c->psi_ms[i] * 10.0));
		else
			printf(" %s n/a", psi_name[i]);
	}
	printf("\n");
	if (c->hw_ms && c->cycles)
		printf("Hardware: IPC %.2f, cache misses %.0f/s\n",
		       (double)c->instr / (double)c->cycles,
		       (double)c->cmiss * 1000.0 / (double)c->hw_ms);
	else
		printf("Hardware counters (IPC, cache misses): not available on this host\n");
	if (c->dropped)
		printf("Processes not tracked (map full): %llu\n", (unsigned long long)c->dropped);
	if (c->counter_secs)
		printf("Source: the kernel's task counters in %llu of %llu seconds (no histograms: "
		       "'-'; SLEEP holds IOWAIT; --sched_metrics=full or sampled has them)\n",
		       (unsigned long long)c->counter_secs,
		       (unsigned long long)(c->counter_secs + c->exact_secs + c->sampled_secs));
	if (c->sampled_secs)
		printf("Source: 1 in N wakeups and switches, each counted N times "
		       "(--sched_metrics=sampled) in %llu of %llu seconds: estimates\n",
		       (unsigned long long)c->sampled_secs,
		       (unsigned long long)(c->counter_secs + c->exact_secs + c->sampled_secs));
	printf("\n%-24s %10s %8s %9s %9s %9s %8s %9s %8s %8s %8s\n", "PROCESS", "ONCPU_MS", "WAITS",
	       "RQ_P50_US", "RQ_P99_US", "RQ_AVG_US", "SLICES", "SL_P50_US", "PREEMPT", "SLEEP",
	       "IOWAIT");
	print_row(&c->all.e, "[all selected]");
	if (c->n_procs) /* NULL when the range has no process */
		qsort(c->procs, c->n_procs, sizeof(*c->procs), oncpu_cmp);
	for (size_t i = 0; i < c->n_procs; i++) {
		snprintf(label, sizeof(label), "%.15s:%u", c->procs[i].e.comm, c->procs[i].id);
		print_row(&c->procs[i].e, label);
	}
	printf("\n");
	for (size_t i = 0; i < c->n_cpus; i++) {
		snprintf(label, sizeof(label), "[cpu %u]", c->cpus[i].id);
		print_row(&c->cpus[i].e, label);
	}
	if (c->n_probes)
		printf("\n%-24s %12s %12s %12s\n", "PROBE", "HITS/S", "TRAP_%CPU", "BPF_%CPU");
	for (size_t i = 0; i < c->n_probes; i++) {
		const struct cpa_metrics_ent *e = &c->probes[i].e;
		double sec = (double)e->slices / 1000.0;

		snprintf(label, sizeof(label), "%u %.15s", c->probes[i].id, e->comm);
		printf("%-24s %12.0f %11.3f%% %11.3f%%\n", label,
		       sec > 0 ? (double)e->runq_n / sec : 0.0,
		       sec > 0 ? (double)e->oncpu_ns / (sec * 1e7) : 0.0,
		       sec > 0 ? (double)e->runq_ns / (sec * 1e7) : 0.0);
	}
	fflush(stdout);
}

/* opt: the option naming path, named in the message; *made: the file is new
 * (an export that fails removes it), not one that was there (/dev/stdout). */
static FILE *open_out(const char *opt, const char *path, bool *made)
{
	FILE *f = fopen(path, "wxe");

	*made = f != NULL;
	if (!f && errno == EEXIST)
		f = fopen(path, "we");
	if (!f)
		log_error_errno(-errno, "%s: open '%s': %m", opt, path);
	return f;
}

static int close_out(FILE *f, const char *opt, const char *path)
{
	if (!f)
		return 0;
	if (ferror(f) | (fclose(f) != 0))
		return log_error_errno(-(errno ? errno : EIO), "%s: write '%s': %m", opt, path);
	return 0;
}

/* ---- policy triggers (docs/metrics.md "Trigger policies") ---- */

/* One line per trigger that starts in the window, paired with its end by the
 * store reader: "Trigger TIME policy NAME pid N (COMM): ..., until TIME". */
static int print_triggers(const struct show_opts *o, struct store_reader *r, int64_t t0, int64_t n)
{
	_cleanup_free_ struct store_trigger *v = NULL;
	unsigned int shown = 0;
	size_t nv = 0;
	int ret = store_reader__triggers(r, (uint64_t)t0 * NS, (uint64_t)(t0 + n) * NS, &v, &nv);

	if (ret < 0)
		return log_error_errno(ret, "read the policy events: %m");
	for (size_t i = 0; i < nv; i++) {
		const struct store_trigger *t = &v[i];
		char a[32], b[32], what[256];

		if (t->start_before)
			continue;
		if (o->target_pid >= 0 && t->ev.pid != (uint32_t)o->target_pid)
			continue;
		if (o->target_comm && strncmp(t->ev.comm, o->target_comm, CPA_COMM_LEN - 1))
			continue;
		show_fmt_tod(t->start_ns, a, sizeof(a));
		show_fmt_tod(t->end_ns, b, sizeof(b));
		store_trigger__describe(t, what, sizeof(what));
		printf("Trigger %s %s, until %s%s\n", a, what, b,
		       t->end_recorded ? "" : " (planned; no end recorded in the range)");
		shown++;
	}
	if (!shown)
		printf("No policy triggers in the range\n");
	fflush(stdout);
	return 0;
}

bool show_sched_wanted(const struct show_opts *o)
{
	return o->sched || o->sched_csv || o->sched_json || o->triggers;
}

int show_sched(const struct show_opts *o, struct store_reader *r, int64_t t0, int64_t n)
{
	struct sched_ctx c = {.o = o, .json_first = true};
	char a[32], b[32];
	bool made_csv = false, made_json = false;
	int ret = 0, e;

	if (o->triggers && !o->sched && !o->sched_csv && !o->sched_json)
		return print_triggers(o, r, t0, n);
	if (o->sched_csv && !(c.csv = open_out("--sched_csv", o->sched_csv, &made_csv)))
		return -EIO;
	if (o->sched_json && !(c.json = open_out("--sched_json", o->sched_json, &made_json))) {
		if (c.csv)
			fclose(c.csv);
		if (made_csv)
			unlink(o->sched_csv);
		return -EIO;
	}
	if (c.csv)
		fprintf(c.csv, "time,kind,id,comm,oncpu_ms,runq_waits,runq_p50_us,runq_p99_us,"
			       "runq_mean_us,slices,slice_p50_us,preempted,voluntary,iowait,load1,"
			       "cpu_busy_pct,cpu_iowait_pct,psi_cpu_some_us,psi_io_some_us,"
			       "psi_mem_some_us,ipc\n");
	if (c.json)
		fprintf(c.json, "{\"seconds\": [");
	ret = store_reader__metrics(r, (uint64_t)t0 * NS, (uint64_t)(t0 + n) * NS, on_metrics, &c);
	if (ret < 0)
		log_error_errno(ret, "read the metrics: %m");
	if (c.json)
		fprintf(c.json, "%s\n]}\n", c.json_sec_open ? "\n  ]}" : "");
	e = close_out(c.csv, "--sched_csv", o->sched_csv);
	ret = ret < 0 ? ret : e;
	e = close_out(c.json, "--sched_json", o->sched_json);
	ret = ret < 0 ? ret : e;
	show_fmt_tod((uint64_t)t0 * NS, a, sizeof(a));
	show_fmt_tod((uint64_t)(t0 + n) * NS, b, sizeof(b));
	if (ret >= 0 && !c.secs && !c.n_probes) {
		log_error("no scheduler metrics in [ %s - %s ] (recorded with --sched_metrics, the "
			  "default, on a BPF-capable host)",
			  a, b);
		ret = -ENODATA;
	}
	/* A failed or empty export leaves no file it made. */
	if (ret < 0 && made_csv)
		unlink(o->sched_csv);
	if (ret < 0 && made_json)
		unlink(o->sched_json);
	if (ret >= 0 && o->sched)
		print_summary(&c, a, b);
	if (ret >= 0 && (o->sched || o->triggers))
		ret = print_triggers(o, r, t0, n);
	if (ret >= 0 && o->sched_csv)
		printf("Write scheduler metrics to %s\n", o->sched_csv);
	if (ret >= 0 && o->sched_json)
		printf("Write scheduler metrics to %s\n", o->sched_json);
	free(c.procs);
	free(c.cpus);
	free(c.probes);
	return ret;
}
