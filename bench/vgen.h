/* SPDX-License-Identifier: MIT */
/*
 * Synthetic stores written through the real store writer, for bench_view_gen
 * and cpa-view's tests (tests/test_view_util.h): stacks are given as folded
 * text ("main;run;work", kernel frames suffixed "_[k]", root first) and
 * samples name them.
 */
#ifndef CPA_BENCH_VGEN_H
#define CPA_BENCH_VGEN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/intern.h"
#include "shm/counters.h"
#include "shm/stage.h"
#include "storer/store.h"

#define VG_NAMES_MAX (1u << 15)

struct vgen {
	struct store_writer *w;
	uint32_t next_id; /* one id space for strings, frames, stacks, modules: simple */
	uint64_t seq;
	uint32_t mod_exe, mod_lib;
	struct intern names;		/* frame name (with its "_[k]") -> ids[] */
	uint32_t ids[VG_NAMES_MAX + 1]; /* frame id of intern id */
};

static inline uint32_t vgen_str(struct vgen *g, const char *s)
{
	struct {
		struct cpa_str_def d;
		char s[512];
	} str;

	str.d.id = ++g->next_id;
	str.d.len = (uint32_t)strnlen(s, sizeof(str.s));
	memcpy(str.s, s, str.d.len);
	store_writer__def_str(g->w, &str.d, str.s);
	return str.d.id;
}

static inline uint32_t vgen_module(struct vgen *g, const char *path)
{
	struct {
		struct cpa_module_def m;
		char p[256];
	} mod;

	memset(&mod, 0, sizeof(mod));
	mod.m.id = ++g->next_id;
	mod.m.kind = CPA_MOD_FILE;
	mod.m.path_len = (uint32_t)strlen(path);
	memcpy(mod.p, path, mod.m.path_len);
	store_writer__def_module(g->w, &mod.m, path);
	return mod.m.id;
}

static inline int vgen_open(struct vgen *g, const char *root, uint32_t cpus)
{
	struct store_writer_opts o = {.root = root,
				      .cpu_num = cpus,
				      .freq = 49,
				      .record_interval = 1,
				      .stack_size = 32768,
				      .kernel_stack = true};

	memset(g, 0, sizeof(*g));
	if (store_writer__new(&o, &g->w) < 0)
		return -1;
	g->mod_exe = vgen_module(g, "/usr/bin/app");
	g->mod_lib = vgen_module(g, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	return 0;
}

static inline uint32_t vgen_frame(struct vgen *g, const char *name, size_t len)
{
	uint32_t j, sid;
	struct cpa_frame_def f = {0};
	bool k = len > 4 && !memcmp(name + len - 4, "_[k]", 4);
	int r = intern__get(&g->names, name, (uint32_t)len, &j);

	if (r == 0)
		return g->ids[j];
	if (r < 0 || j > VG_NAMES_MAX) {
		fprintf(stderr, "vgen: more than %u distinct frame names\n", VG_NAMES_MAX);
		abort();
	}
	{
		char tmp[512];

		snprintf(tmp, sizeof(tmp), "%.*s", (int)(k ? len - 4 : len), name);
		sid = vgen_str(g, tmp);
	}
	f.id = ++g->next_id;
	f.name_id = sid;
	f.flags = k ? CPA_FF_KERNEL : name[0] == '[' ? CPA_FF_MARKER : 0;
	f.module_id = k || name[0] == '['		      ? 0
		      : len >= 5 && !memcmp(name, "libc_", 5) ? g->mod_lib
							      : g->mod_exe;
	f.offset = 0x1000 + f.id * 16;
	store_writer__def_frame(g->w, &f);
	g->ids[j] = f.id;
	return f.id;
}

/* "main;run;leaf_[k]" root first -> stack id. */
static inline uint32_t vgen_stack(struct vgen *g, const char *folded)
{
	uint32_t root_first[256], ids[256], n = 0, nk = 0, i;
	const char *p = folded;
	struct cpa_stack_def sd;

	while (*p && n < 256) {
		const char *e = strchr(p, ';');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		root_first[n] = vgen_frame(g, p, len);
		if (len > 4 && !memcmp(p + len - 4, "_[k]", 4))
			nk++;
		n++;
		if (!e)
			break;
		p = e + 1;
	}
	/* stored leaf first, kernel frames first: the reverse of root first */
	for (i = 0; i < n; i++)
		ids[i] = root_first[n - 1 - i];
	sd.id = ++g->next_id;
	sd.n_frames = (uint16_t)n;
	sd.n_kframes = (uint16_t)nk;
	store_writer__def_stack(g->w, &sd, ids);
	return sd.id;
}

static inline int vgen_sample(struct vgen *g, uint64_t t_ns, uint32_t stack, uint32_t pid,
			      uint32_t tid, uint32_t cpu, uint16_t kind, uint64_t weight,
			      uint32_t comm, uint32_t pcomm)
{
	struct cpa_sample_out o = {.seq = ++g->seq,
				   .time_ns = t_ns,
				   .cgroup_id = 0x100 + pid % 4,
				   .weight = weight,
				   .pid = pid,
				   .tid = tid,
				   .cpu = cpu,
				   .kind = kind,
				   .stack_id = stack,
				   .comm_id = comm,
				   .pcomm_id = pcomm};

	return store_writer__add_sample(g->w, &o);
}

static inline int vgen_loss(struct vgen *g, uint64_t t_ns, uint64_t count)
{
	struct cpa_loss l = {.seq = ++g->seq,
			     .time_ns = t_ns,
			     .count = count,
			     .weight = count,
			     .stage = SHM_STAGE_CAPTURE,
			     .reason = SHM_CNT_DROP_RING_FULL};

	return store_writer__add_loss(g->w, &l);
}

/* One second of metrics: the system part (2 CPUs, 100 ticks each, busy of
 * them busy, no hardware counters on this "host"), both CPUs and app:1000
 * (oncpu_ms on CPU, switches context switches, every wait in runq bucket rq_b). */
static inline int vgen_metrics(struct vgen *g, uint64_t t_ns, uint32_t busy, uint32_t oncpu_ms,
			       uint32_t switches, uint32_t rq_b)
{
	struct cpa_metrics m = {.seq = ++g->seq,
				.time_ns = t_ns,
				.interval_ms = 1000,
				.n_ents = 3,
				.flags = CPA_MF_SYSTEM | CPA_MF_HW_NA,
				.nr_cpus = 2,
				.cpu_busy_ticks = busy,
				.cpu_idle_ticks = 200 - busy};
	struct cpa_metrics_ent e[3];

	memset(e, 0, sizeof(e));
	for (int i = 0; i < CPA_PSI_MAX; i++)
		m.psi_some_us[i] = m.psi_full_us[i] = CPA_METRICS_PSI_NONE;
	for (int i = 0; i < 3; i++) {
		e[i].kind = i < 2 ? CPA_MK_CPU : CPA_MK_PROC;
		e[i].id = i < 2 ? (uint32_t)i : 1000;
		e[i].oncpu_ns = (uint64_t)oncpu_ms * 1000000ULL / (i < 2 ? 2 : 1);
		e[i].switches[CPA_MR_PREEMPT] = switches / (i < 2 ? 2 : 1);
		e[i].runq_n = e[i].runq_hist[rq_b] = switches / (i < 2 ? 2 : 1);
		e[i].slices = e[i].runq_n;
	}
	snprintf(e[2].comm, sizeof(e[2].comm), "app");
	return store_writer__add_metrics(g->w, &m, e);
}

/* A policy trigger of app:1000 (item 1 = cpu_percent, cmp 1 = '>'), or its end. */
static inline int vgen_trigger(struct vgen *g, uint64_t t_ns, uint16_t kind, uint64_t end_ns)
{
	struct cpa_policy_event ev = {.seq = ++g->seq,
				      .time_ns = t_ns,
				      .end_ns = end_ns,
				      .threshold = 50,
				      .value = 183.2,
				      .pid = 1000,
				      .kind = kind,
				      .item = 1,
				      .cmp = 1,
				      .actions = 3, /* freq, offcpu */
				      .freq = 499};

	snprintf(ev.policy, sizeof(ev.policy), "burst");
	snprintf(ev.comm, sizeof(ev.comm), "app");
	return store_writer__add_event(g->w, &ev);
}

static inline void vgen_close(struct vgen *g)
{
	store_writer__flush(g->w, true);
	store_writer__free(g->w);
	intern__free(&g->names);
	memset(g, 0, sizeof(*g));
}

#endif /* CPA_BENCH_VGEN_H */
