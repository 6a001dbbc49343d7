/* SPDX-License-Identifier: MIT */
/*
 * The `cpa` command line: one table of every option of every sub-command
 * (opts.c), one parser for argv and for --config files, one place that says
 * which flags are parsed but not supported yet. Sub-commands only read the
 * filled struct cpa_opts.
 *
 * Errors are logged (subsystem "cpa") and returned as -EINVAL; the caller
 * prints the usage hint and exits 2.
 */
#ifndef CPA_COMMON_OPTS_H
#define CPA_COMMON_OPTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/cpulist.h" /* cpulist__parse() of --target_cpu */
#include "shm/config.h"	    /* CPA_PROBE_MAX */

enum cpa_cmd {
	CPA_CMD_NONE,
	CPA_CMD_MONITOR,
	CPA_CMD_SHOW,
	CPA_CMD_CTL,
	CPA_CMD_HELP,
	CPA_CMD_VERSION,
};

/* Which sub-commands an option belongs to (bit per enum cpa_cmd). */
#define OPT_SCOPE(cmd) (1u << (cmd))
#define OPT_GLOBAL     ((1u << CPA_CMD_MONITOR) | (1u << CPA_CMD_SHOW) | (1u << CPA_CMD_CTL))

#define CPA_FREQ_MIN	       1
#define CPA_FREQ_MAX	       10000
#define CPA_STACK_SIZE_MIN     4096
#define CPA_STACK_SIZE_MAX     65536
#define CPA_MAX_CPUS	       CPULIST_MAX_CPUS /* cpu-list bitmap width */
#define CPA_DEFAULT_STORE_DIR  "/var/log/cpa"
#define CPA_PROBE_RATE_DEFAULT 100 /* --probe_rate: samples/s per probe */
#define CPA_OPTS_MAX	       128 /* entries of the option table at most (bits of given[]) */

struct monitor_opts {
	const char *store_dir;
	const char *backend;
	long freq;
	long record_interval;
	long persistent_day;
	bool oneshot;
	const char *output_prof;
	long pid; /* -1 = all */
	const char *comm;
	bool kernel_stack;
	bool offcpu;
	long offcpu_min_us;
	long offcpu_max_us; /* 0 = no limit */
	const char *offcpu_state;
	const char *probe;		   /* the last --probe */
	const char *probes[CPA_PROBE_MAX]; /* every --probe, in order: probe id = index */
	unsigned int nr_probes;
	long probe_rate; /* 0 = no limit */
	const char *probe_budget;
	bool disable_sym;
	bool include_full_path;
	bool strip_name_disable;
	bool go_short_names;
	bool pc_locations;
	const char *push; /* --push URL: cpa-push next to the stages */
	const char *record_env_name;
	const char *parse_env_values;
	long max_queue_size;
	long stack_size;
	long max_cache_size_mb;
	long max_store_size_mb;
	long log_print_cycles;
	bool bench;
	const char *debug_option;
	/* Derived from debug_option once it validated. */
	long debug_pid;
	long debug_freq;
	const char *debug_path;
	const char *debuginfod; /* NULL: DEBUGINFOD_URLS of the environment */
	long debuginfod_cache_mb;
	bool sched_metrics; /* --sched_metrics (default on): docs/metrics.md */
	bool sched_full;    /* --sched_metrics=full: the exact per-event way */
	long sched_sample;  /* --sched_metrics=sampled[:N]: N, 1 in N events; 0 = not sampled */
	const char *policy; /* --policy FILE, checked at parse time (common/policy.h) */
};

struct show_cli {
	const char *read;
	const char *starttime;
	const char *endtime;
	long output_num;
	const char *output_prof; /* NULL: show picks cpa_<start>_<n>.prof */
	bool show_range;
	bool use_cui;
	bool use_cache;
	const char *split_path;
	bool show_thread_name;
	bool no_pid;
	bool no_env;
	bool show_raw;
	long target_pid; /* -1 = all */
	const char *target_comm;
	const char *target_env;
	long long target_cgroup_id; /* -1 = all */
	long probe_id;		    /* -1 = all */
	const char *target_cpu;
	const char *kind;   /* --kind on|off|all, NULL = auto */
	const char *format; /* --format; NULL: from -o's suffix */
	const char *diff_base_start, *diff_base_end, *diff_base_read;
	bool sched;			    /* --sched */
	const char *sched_csv, *sched_json; /* --sched_csv, --sched_json */
	bool triggers;			    /* --triggers */
};

struct cpa_opts {
	enum cpa_cmd cmd;
	const char *cmd_name;
	/* global */
	bool help;
	bool verbose;
	long duration; /* seconds, 0 = until stopped */
	const char *btf_path;
	const char *config;
	struct monitor_opts mon; /* ctl reuses mon.store_dir */
	struct show_cli show;
	/* Options given on the command line or in --config, a bit per option table entry
	 * (cpa_opts__given()): a given value equal to the default is still given. */
	uint64_t given[CPA_OPTS_MAX / 64];
	/* positional arguments (only `cpa ctl` takes any) */
	char **args;
	int n_args;
	/* strings read from a --config file, freed with the options */
	char **owned;
	size_t n_owned;
};

/* Defaults of every option (CPA's), cmd = NONE. */
void cpa_opts__init(struct cpa_opts *o);
void cpa_opts__free(struct cpa_opts *o);

/* Sub-command by name, or CPA_CMD_NONE. */
enum cpa_cmd cpa_cmd__from_name(const char *name);

/*
 * Parse argv of sub-command cmd (argv[0] is the first argument after the
 * sub-command name), then the --config file if one was given, then validate
 * (ranges, files, flags not supported yet). 0, or -EINVAL after logging why.
 */
int cpa_opts__parse(struct cpa_opts *o, enum cpa_cmd cmd, int argc, char **argv);

/* Pieces of the above, for tests and for `cpa ctl`. */
int cpa_opts__parse_argv(struct cpa_opts *o, int argc, char **argv);
int cpa_opts__load_config(struct cpa_opts *o, const char *path);
int cpa_opts__check(struct cpa_opts *o);

/*
 * Whether the option of o->cmd named name (long name) was given, on the command
 * line or in --config; a `null` value puts it back to its default: not given.
 */
bool cpa_opts__given(const struct cpa_opts *o, const char *name);
/*
 * One warning line for given options that the other options given make unused
 * (-n with --endtime, -o without --oneshot, ...). cpa_opts__parse() calls it.
 */
void cpa_opts__warn_unused(const struct cpa_opts *o);

/* Print the option list of cmd (global options included). */
void cpa_opts__print_help(FILE *f, enum cpa_cmd cmd);
/* --offcpu_state letters (R, S, D) as CPA_OFFCPU_STATE_* bits, or -EINVAL. */
int cpa_opts__offcpu_states(const char *val);
/* --probe_budget PCT (percent of one CPU, 0..100, up to 4 decimals) in
 * millionths of a CPU, or -EINVAL. */
long cpa_opts__probe_budget_ppm(const char *val);

/* Strict decimal integer in [min, max]: 0, -EINVAL or -ERANGE. */
int parse_ll(const char *s, long long min, long long max, long long *ret);

/* "HH:MM:SS" or "HH:MM:SS.mmm" local time of day. */
bool time_of_day_valid(const char *s);

/* Check that path is readable BTF (raw, magic 0xeB9F, or an ELF with .BTF). */
int btf_file__check(const char *path);

#endif /* CPA_COMMON_OPTS_H */
