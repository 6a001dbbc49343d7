/* SPDX-License-Identifier: MIT */
/*
 * Trigger policies (`cpa monitor --policy FILE`, docs/metrics.md "Trigger
 * policies"): the file grammar and its checks, and the once-a-second
 * evaluation (sliding windows, silence periods). No I/O besides reading the
 * file, no logging: the monitor checks a file before it starts anything and
 * capture, which has the metrics and the BPF maps the actions go through,
 * parses it again and evaluates it.
 */
#ifndef CPA_COMMON_POLICY_H
#define CPA_COMMON_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define POLICY_MAX	    16
#define POLICY_NAME_MAX	    32
#define POLICY_COMM_MAX	    16
#define POLICY_PERIOD_MAX   60
#define POLICY_TRACKED_MAX  1024 /* (policy, process) windows at once */
#define POLICY_DURATION_MAX 3600
#define POLICY_PROBES	    8 /* probe ids, as --probe (CPA_PROBE_MAX) */
#define POLICY_CGROUP_MAX   256
#define POLICY_ENV_MAX	    128

enum policy_item {
	POLICY_CPU_PERCENT = 1, /* per process: % of one CPU in the second */
	POLICY_SYSTEM_LOAD,	/* 1-minute load average */
	POLICY_RUNQ_P99_US,	/* per process: P99 run-queue latency in the second */
	POLICY_THREAD_COUNT,	/* per process: threads */
	POLICY_OFFCPU_PERCENT,	/* per process: % of its threads' wall time off CPU */
	POLICY_PROBE_RATE,	/* per process: hits per second of one --probe */
	POLICY_ITEM_MAX,
};

enum policy_cmp { POLICY_GT = 1, POLICY_GE, POLICY_LT, POLICY_LE };

enum policy_action {
	POLICY_ACT_FREQ = 1u << 0,	 /* sample the target at freq Hz */
	POLICY_ACT_OFFCPU = 1u << 1,	 /* off-CPU samples of the target */
	POLICY_ACT_STACK_SIZE = 1u << 2, /* copy stack_size bytes of the target's stacks */
	POLICY_ACT_PROBES = 1u << 3,	 /* attach the probes named by attach= */
};

/*
 * In a stored trigger (struct cpa_policy_event): the item's low byte is the
 * enum policy_item, bits 8..15 the probe id of a probe_rate item; the
 * actions' low byte is the enum policy_action set, bits 8..15 the probe ids
 * attach= attached (bit 8 + id).
 */
#define POLICY_EV_PROBE_SHIFT 8
#define POLICY_EV_ITEM(p)       \
	((uint16_t)((p)->item | \
		    ((p)->item == POLICY_PROBE_RATE ? (p)->probe << POLICY_EV_PROBE_SHIFT : 0)))
#define POLICY_EV_ACTIONS(p) ((p)->actions | (p)->attach << POLICY_EV_PROBE_SHIFT)

struct policy {
	char name[POLICY_NAME_MAX];
	unsigned int line; /* in the file */
	enum policy_item item;
	enum policy_cmp cmp;
	double threshold;
	unsigned int period, count;	/* count of the last period seconds cross it */
	char comm[POLICY_COMM_MAX];	/* target selector, "" = any */
	int64_t pid;			/* target selector, -1 = any */
	char cgroup[POLICY_CGROUP_MAX]; /* target selector: v2 path (and below), "" = any */
	uint64_t cgroup_id;		/* target selector: v2 cgroup id, 0 = any */
	char env[POLICY_ENV_MAX];	/* target selector: NAME=VALUE, "" = any */
	int probe;			/* probe_rate: the probe id counted, else -1 */
	uint32_t actions;		/* enum policy_action */
	uint32_t freq, stack_size;
	uint32_t attach;		/* POLICY_ACT_PROBES: bit per probe id */
	unsigned int duration, silence; /* seconds */
};

/* What the file is checked against. */
struct policy_limits {
	uint32_t freq_max;	   /* the highest --freq cpa allows */
	const char *const *probes; /* the run's --probe specs, probe id = index */
	unsigned int nr_probes;
	/* false: probe=/attach= names are not looked up yet (the --probe
	 * options may come later on the command line); the monitor checks
	 * the file again with them once all options are read. */
	bool probes_known;
};

struct policy_set {
	struct policy p[POLICY_MAX];
	unsigned int n;
};

/*
 * Parse and check the file at path into *ret. On an error, -EINVAL (or
 * -errno of the read) with "FILE:LINE: reason" in err.
 */
int policy_set__load(const char *path, const struct policy_limits *lim, struct policy_set *ret,
		     char *err, size_t errlen);
/* The same over text in memory (name stands for the file in messages). */
int policy_set__parse(const char *name, const char *text, const struct policy_limits *lim,
		      struct policy_set *ret, char *err, size_t errlen);

/* enum policy_item; a stored item (POLICY_EV_ITEM) is masked to its low byte. */
const char *policy_item_name(unsigned int i);
const char *policy_cmp_name(enum policy_cmp c);
bool policy_is_per_process(enum policy_item i);
/* "probe_rate(probe=2)" for a stored item (POLICY_EV_ITEM), else the name. */
void policy_item_format(char *buf, size_t len, uint16_t ev_item);
/* " freq=499 offcpu=1 stack_size=16384 attach=0,2" for stored actions
 * (POLICY_EV_ACTIONS), as the policy file writes them. */
void policy_actions_format(char *buf, size_t len, uint32_t ev_actions, uint32_t freq,
			   uint32_t stack_size);

/* Selectors the evaluator checks itself: pid and comm. */
bool policy_selects(const struct policy *p, uint32_t pid, const char *comm);
/* Does p select by cgroup= or env= (what capture reads /proc for)? */
bool policy_has_proc_selector(const struct policy *p);
/* cgroup=: cg_path is the process's v2 path ("/a/b", the "0::" line of
 * /proc/PID/cgroup), cg_id the id of that cgroup (0 = unknown). A path
 * matches that cgroup and those below it, an id that cgroup only. */
bool policy_cgroup_match(const struct policy *p, const char *cg_path, uint64_t cg_id);
/* env=: envbuf is a /proc/PID/environ image of len bytes (common/envlabel.h). */
bool policy_env_match(const struct policy *p, const char *envbuf, size_t len);

/* One process in one second, as the evaluator sees it. */
struct policy_proc {
	uint32_t pid;
	char comm[POLICY_COMM_MAX];
	double value[POLICY_ITEM_MAX];	/* per-process items; NaN = not known */
	double probe_hz[POLICY_PROBES]; /* probe_rate, by probe id; NaN = not counted */
	uint32_t selected;		/* bit per policy: its cgroup=/env= match */
};

/* A trigger: the policy's actions for the target from now for duration s. */
struct policy_fire {
	unsigned int policy; /* index in the set */
	uint32_t pid;	     /* 0 for a system item */
	char comm[POLICY_COMM_MAX];
	double value; /* the value of the second that fired */
	uint64_t end_s;
};

struct policy_track {
	unsigned int policy;
	uint32_t pid;
	uint64_t bits;	      /* last seconds, bit 0 = the newest */
	uint64_t last_s;      /* second of the newest bit */
	uint64_t silent_to_s; /* no trigger before this second */
	uint64_t active_to_s; /* actions on until this second, 0 = none */
	char comm[POLICY_COMM_MAX];
};

struct policy_eval {
	const struct policy_set *set;
	struct policy_track t[POLICY_TRACKED_MAX];
	unsigned int n;
};

void policy_eval__init(struct policy_eval *e, const struct policy_set *set);
/*
 * Second now_s: the processes that ran (n of them) and the load. Triggers
 * go to fires (up to max; how many is returned), actions whose duration is
 * over go to ends (up to max_ends, *ret_n_ends).
 */
unsigned int policy_eval__second(struct policy_eval *e, uint64_t now_s,
				 const struct policy_proc *procs, size_t n, double load1,
				 struct policy_fire *fires, unsigned int max,
				 struct policy_fire *ends, unsigned int max_ends,
				 unsigned int *ret_n_ends);

#endif /* CPA_COMMON_POLICY_H */
