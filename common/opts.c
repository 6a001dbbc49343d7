// SPDX-License-Identifier: MIT
/*
 * One table of every `cpa` option. argv and --config files go through the
 * same setter, so a value is validated the same way wherever it came from,
 * and the help text is generated from the table so it cannot drift.
 *
 * Short options differ per sub-command (CPA reused letters: -r is
 * --record_interval for monitor and --read for show), so lookups are always
 * scoped to the sub-command being parsed.
 */
#include "opts.h"

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fileio.h"
#include "inputfile.h"
#include "log.h"
#include "macro.h"
#include "policy.h"
#include "probespec.h"
#include "pushurl.h"
#include "shm/config.h"

enum opt_type {
	OPT_BOOL,
	OPT_LONG,
	OPT_LLONG,
	OPT_STR,
};

struct opt_def;
/* Extra validation of a string value; logs and returns -EINVAL. */
typedef int (*opt_check_fn)(const struct opt_def *d, const char *val, struct cpa_opts *o,
			    const char *where);

struct opt_def {
	const char *name;
	char shrt;
	uint8_t type;
	unsigned int scope;
	size_t off; /* into struct cpa_opts */
	long long min, max;
	const char *metavar;
	const char *help;
	opt_check_fn check;
};

#define MON	 OPT_SCOPE(CPA_CMD_MONITOR)
#define SHOW	 OPT_SCOPE(CPA_CMD_SHOW)
#define CTL	 OPT_SCOPE(CPA_CMD_CTL)
#define O(field) offsetof(struct cpa_opts, field)

/* --probe_budget: % of one CPU per probe (docs/capture.md "Probe budget"). */
#define CPA_PROBE_BUDGET_DEFAULT "1"

static int check_backend(const struct opt_def *d, const char *val, struct cpa_opts *o,
			 const char *where);
static int check_comm(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where);
static int check_env_list(const struct opt_def *d, const char *val, struct cpa_opts *o,
			  const char *where);
static int check_probe(const struct opt_def *d, const char *val, struct cpa_opts *o,
		       const char *where);
static int check_debug_option(const struct opt_def *d, const char *val, struct cpa_opts *o,
			      const char *where);
static int check_time(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where);
static int check_cpulist(const struct opt_def *d, const char *val, struct cpa_opts *o,
			 const char *where);
static int check_path(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where);
static int check_offcpu_state(const struct opt_def *d, const char *val, struct cpa_opts *o,
			      const char *where);
static int check_probe_budget(const struct opt_def *d, const char *val, struct cpa_opts *o,
			      const char *where);
static int check_kind(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where);
static int check_format(const struct opt_def *d, const char *val, struct cpa_opts *o,
			const char *where);
static int check_policy(const struct opt_def *d, const char *val, struct cpa_opts *o,
			const char *where);
static int check_sched_metrics(const struct opt_def *d, const char *val, struct cpa_opts *o,
			       const char *where);
static int check_push(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where);
static int policy_probes_check(const struct cpa_opts *o);

static const struct opt_def opt_table[] = {
	/* global */
	{"help", 'h', OPT_BOOL, OPT_GLOBAL, O(help), 0, 0, NULL, "print this help and exit", NULL},
	{"verbose", 'v', OPT_BOOL, OPT_GLOBAL, O(verbose), 0, 0, NULL,
	 "debug logging, per-stage statistics", NULL},
	{"duration", 'd', OPT_LONG, OPT_GLOBAL, O(duration), 0, 365L * 86400, "SEC",
	 "stop gracefully after SEC seconds, as on SIGINT (0 = run until stopped)", NULL},
	{"btf_path", 'b', OPT_STR, OPT_GLOBAL, O(btf_path), 0, 0, "PATH",
	 "custom BTF file (raw BTF or ELF with .BTF) instead of /sys/kernel/btf/vmlinux",
	 check_path},
	{"config", 'C', OPT_STR, OPT_GLOBAL, O(config), 0, 0, "FILE",
	 "read 'key: value' lines overriding the command line", check_path},

	/* cpa monitor */
	{"store_dir", 's', OPT_STR, MON | CTL, O(mon.store_dir), 0, 0, "DIR",
	 "root of the rotating stores (default " CPA_DEFAULT_STORE_DIR ")", check_path},
	{"backend", 0, OPT_STR, MON, O(mon.backend), 0, 0, "bpf|perf",
	 "sampling backend to use: bpf or perf (default bpf). perf only supports on-cpu "
	 "continuous profiling: no --offcpu, no --probe",
	 check_backend},
	{"freq", 'F', OPT_LONG, MON, O(mon.freq), CPA_FREQ_MIN, CPA_FREQ_MAX, "HZ",
	 "samples per second per CPU, 1..10000 (CPA allowed 9..99; default 49)", NULL},
	{"record_interval", 'r', OPT_LONG, MON, O(mon.record_interval), 1, 3600, "SEC",
	 "flush/rotation/query granularity, 1..3600 (default 1)", NULL},
	{"persistent_day", 'P', OPT_LONG, MON, O(mon.persistent_day), 1, 36500, "N",
	 "keep today and the latest N days before it, N > 0 (default 7)", NULL},
	{"oneshot", 0, OPT_BOOL, MON, O(mon.oneshot), 0, 0, NULL,
	 "write one folded profile (--output_prof) at exit instead of a store", NULL},
	{"output_prof", 'o', OPT_STR, MON, O(mon.output_prof), 0, 0, "PATH",
	 "output flamegraph file path of --oneshot: folded stacks, CPA's raw label first "
	 "(default cpa.prof)",
	 check_path},
	{"pid", 'p', OPT_LONG, MON, O(mon.pid), 1, 4194304, "PID",
	 "capture one process (pid or tgid; default all)", NULL},
	{"comm", 'n', OPT_STR, MON, O(mon.comm), 0, 0, "NAME",
	 "capture tasks whose comm or group-leader comm is NAME", check_comm},
	{"kernel_stack", 'K', OPT_BOOL, MON, O(mon.kernel_stack), 0, 0, NULL,
	 "kernel stacks only (no user copy, no unwinding)", NULL},
	{"offcpu", 'u', OPT_BOOL, MON, O(mon.offcpu), 0, 0, NULL,
	 "also record off-CPU samples (sched_switch), weight = blocked nanoseconds", NULL},
	{"offcpu_min_us", 0, OPT_LONG, MON, O(mon.offcpu_min_us), 0, 3600L * 1000000, "US",
	 "off-CPU: blocks shorter than US microseconds are not recorded (default 1)", NULL},
	{"offcpu_max_us", 0, OPT_LONG, MON, O(mon.offcpu_max_us), 0, 365L * 86400 * 1000000, "US",
	 "off-CPU: blocks longer than US microseconds are not recorded, 0 = no limit (default 0)",
	 NULL},
	{"offcpu_state", 0, OPT_STR, MON, O(mon.offcpu_state), 0, 0, "RSD",
	 "off-CPU: states recorded, letters of R (preempted), S (sleep), D (I/O) (default RSD)",
	 check_offcpu_state},
	{"probe", 0, OPT_STR, MON, O(mon.probe), 0, 0, "SPEC",
	 "a stack on each hit of SPEC, repeatable (up to 8): tracepoint:GROUP:NAME, "
	 "uprobe:/PATH:SYM[+OFF], uretprobe:/PATH:SYM, usdt:/PATH:PROVIDER:NAME, "
	 "kprobe:FN[+OFF], kretprobe:FN, fentry:FN, fexit:FN",
	 check_probe},
	{"probe_rate", 0, OPT_LONG, MON, O(mon.probe_rate), 0, 1000000, "N",
	 "samples per second per probe, the rest counted as lost (default 100, 0 = no limit)",
	 NULL},
	{"probe_budget", 0, OPT_STR, MON, O(mon.probe_budget), 0, 0, "PCT",
	 "% of one CPU a probe may cost (trap + BPF): thinned, then detached if thinning "
	 "cannot bring it under (default " CPA_PROBE_BUDGET_DEFAULT ", 0 = no budget)",
	 check_probe_budget},
	{"disable_sym", 'S', OPT_BOOL, MON, O(mon.disable_sym), 0, 0, NULL,
	 "no symbolization: frames as 0x<offset> [<binary>]", NULL},
	{"include_full_path", 0, OPT_BOOL, MON, O(mon.include_full_path), 0, 0, NULL,
	 "frames as 'sym [path]'", NULL},
	{"strip_name_disable", 0, OPT_BOOL, MON, O(mon.strip_name_disable), 0, 0, NULL,
	 "keep full Go symbol names (the default; wins over --go_short_names)", NULL},
	{"go_short_names", 0, OPT_BOOL, MON, O(mon.go_short_names), 0, 0, NULL,
	 "cut the package path of Go names: github.com/x/y/pkg.F -> pkg.F", NULL},
	{"push", 0, OPT_STR, MON, O(mon.push), 0, 0, "URL",
	 "post every interval of the store to Pyroscope at URL (cpa-push, restarted if it exits)",
	 check_push},
	{"pc_locations", 0, OPT_BOOL, MON, O(mon.pc_locations), 0, 0, NULL,
	 "store one frame per pc, not per function (pprof Locations at the sampled instruction; "
	 "a bigger store)",
	 NULL},
	{"record_env_name", 'R', OPT_STR, MON, O(mon.record_env_name), 0, 0, "K1,K2",
	 "env label: first of these keys found in /proc/PID/environ (else SYSTEM)", check_env_list},
	{"parse_env_values", 'V', OPT_STR, MON, O(mon.parse_env_values), 0, 0, "V1,V2",
	 "only unwind processes whose env label is one of these", check_env_list},
	{"max_queue_size", 'm', OPT_LONG, MON, O(mon.max_queue_size), 1, 1048576, "N",
	 "in-flight sample budget before backpressure (default 4096)", NULL},
	{"stack_size", 0, OPT_LONG, MON, O(mon.stack_size), CPA_STACK_SIZE_MIN, CPA_STACK_SIZE_MAX,
	 "BYTES",
	 "user stack copy: its cap is 4 x this, at most 65536 (--backend perf: the copy); "
	 "a multiple of 4096 in [4096, 65536] (default 8192)",
	 NULL},
	{"max_cache_size_mb", 0, OPT_LONG, MON, O(mon.max_cache_size_mb), 1, 1048576, "MB",
	 "cap on symbol/unwind cache memory, evicted beyond (default 1024)", NULL},
	{"max_store_size_mb", 0, OPT_LONG, MON, O(mon.max_store_size_mb), 1, 1L << 30, "MB",
	 "cap on total store size, oldest trimmed first (default 7168)", NULL},
	{"log_print_cycles", 0, OPT_LONG, MON, O(mon.log_print_cycles), 0, 1000000, "N",
	 "print runtime statistics every N intervals, 0 = never (default 1)", NULL},
	{"bench", 0, OPT_BOOL, MON, O(mon.bench), 0, 0, NULL,
	 "print per-interval unwind statistics", NULL},
	{"debug_option", 0, OPT_STR, MON, O(mon.debug_option), 0, 0, "PID,FREQ,PATH",
	 "dump every FREQ-th raw sample of PID to PATH", check_debug_option},
	{"debuginfod", 0, OPT_STR, MON, O(mon.debuginfod), 0, 0, "URLS",
	 "fetch missing debug files from these debuginfod servers (space-separated, as "
	 "DEBUGINFOD_URLS; default: that variable, else off)",
	 NULL},
	{"policy", 0, OPT_STR, MON, O(mon.policy), 0, 0, "FILE",
	 "trigger policies: more detail (freq, off-CPU, stack size, probes) for a process while "
	 "a metric crosses a threshold (docs/metrics.md); checked before anything starts",
	 check_policy},
	{"sched_metrics", 0, OPT_BOOL, MON, O(mon.sched_metrics), 0, 0, NULL,
	 "per-second scheduler metrics into the store: on-CPU time, run-queue delay, switches "
	 "per process from the kernel's task counters, load, CPU, PSI (default on; =full: "
	 "exact per-switch histograms, costs per context switch; =sampled[:N]: histograms "
	 "from 1 in N events (default 16), weighted; =0 turns them off)",
	 check_sched_metrics},
	{"debuginfod_cache_mb", 0, OPT_LONG, MON, O(mon.debuginfod_cache_mb), 1, 1048576, "MB",
	 "cap on <store_dir>/.debuginfod, oldest files removed beyond (default 1024)", NULL},

	/* cpa show */
	{"read", 'r', OPT_STR, SHOW, O(show.read), 0, 0, "DIR",
	 "store directory (cpa_YYMMDD...) or the store root (required)", check_path},
	{"starttime", 'B', OPT_STR, SHOW, O(show.starttime), 0, 0, "HH:MM:SS",
	 "start, local time of day (default: first record)", check_time},
	{"endtime", 'E', OPT_STR, SHOW, O(show.endtime), 0, 0, "HH:MM:SS",
	 "end, local time of day; decides the number of records", check_time},
	{"output_num", 'n', OPT_LONG, SHOW, O(show.output_num), 1, LONG_MAX, "N",
	 "must be a positive integer: the number of 1-second records to export from the start "
	 "(default 1; not used with --endtime, which decides); past the last record: Not Found "
	 "Enough Records",
	 NULL},
	{"output_prof", 'o', OPT_STR, SHOW, O(show.output_prof), 0, 0, "PATH",
	 "output flamegraph file path (default cpa_<HH:MM:SS.mmm>_<n>.prof; --format by its "
	 "suffix)",
	 check_path},
	{"show_range", 'p', OPT_BOOL, SHOW, O(show.show_range), 0, 0, NULL,
	 "print available record time range and exit (Records Num: the seconds holding "
	 "samples)",
	 NULL},
	{"use_cui", 'G', OPT_BOOL, SHOW, O(show.use_cui), 0, 0, NULL,
	 "open the terminal UI at the selected time", NULL},
	{"use_cache", 'u', OPT_BOOL, SHOW, O(show.use_cache), 0, 0, NULL,
	 "reuse decompressed files (accepted, a no-op: cpa's store is read in place, nothing "
	 "is decompressed to disk)",
	 NULL},
	{"split_path", 0, OPT_STR, SHOW, O(show.split_path), 0, 0, "DIR",
	 "write the selected range as a new, smaller store", check_path},
	{"show_thread_name", 'S', OPT_BOOL, SHOW, O(show.show_thread_name), 0, 0, NULL,
	 "add the thread name frame", NULL},
	{"no_pid", 'P', OPT_BOOL, SHOW, O(show.no_pid), 0, 0, NULL,
	 "label 'comm' instead of 'comm:pid'", NULL},
	{"no_env", 'V', OPT_BOOL, SHOW, O(show.no_env), 0, 0, NULL, "drop the env label", NULL},
	{"show_raw", 'R', OPT_BOOL, SHOW, O(show.show_raw), 0, 0, NULL,
	 "CPA's raw label instead of the others: thread and process name in 15 columns each, "
	 "-cgroup-cpu-pid|env",
	 NULL},
	{"target_pid", 0, OPT_LONG, SHOW, O(show.target_pid), 0, 4194304, "PID", "only this pid",
	 NULL},
	{"target_comm", 0, OPT_STR, SHOW, O(show.target_comm), 0, 0, "NAME", "only this comm",
	 check_comm},
	{"target_env", 0, OPT_STR, SHOW, O(show.target_env), 0, 0, "VALUE", "only this env label",
	 NULL},
	{"probe_id", 0, OPT_LONG, SHOW, O(show.probe_id), 0, CPA_PROBE_MAX - 1, "N",
	 "only the samples of --probe number N (0 = the first; the store's conf names them)", NULL},
	{"target_cgroup_id", 0, OPT_LLONG, SHOW, O(show.target_cgroup_id), 0, LLONG_MAX, "ID",
	 "only this cgroup id (64-bit)", NULL},
	{"target_cpu", 0, OPT_STR, SHOW, O(show.target_cpu), 0, 0, "SET",
	 "only these cpus, e.g. 1-3,5,7-9", check_cpulist},
	{"kind", 0, OPT_STR, SHOW, O(show.kind), 0, 0, "on|off|all",
	 "samples to export: on-CPU, off-CPU (counts in ns) or all (default: off-CPU when the "
	 "window has any, else on-CPU)",
	 check_kind},
	{"format", 0, OPT_STR, SHOW, O(show.format), 0, 0, "FMT",
	 "folded, pprof, svg or speedscope (default: from -o's suffix .prof, .pb.gz, .svg, "
	 ".speedscope.json; else folded)",
	 check_format},
	{"diff_base_start", 0, OPT_STR, SHOW, O(show.diff_base_start), 0, 0, "HH:MM:SS",
	 "diff against the range from this time (red grew, blue shrank)", check_time},
	{"sched", 0, OPT_BOOL, SHOW, O(show.sched), 0, 0, NULL,
	 "print the scheduler metrics of the range instead of a profile: run-queue latency "
	 "P50/P99, slices, switch reasons, per process (--target_pid/--target_comm select)",
	 NULL},
	{"triggers", 0, OPT_BOOL, SHOW, O(show.triggers), 0, 0, NULL,
	 "list the trigger policies' triggers of the range (time, policy, process, item, "
	 "threshold, value, actions, end)",
	 NULL},
	{"sched_csv", 0, OPT_STR, SHOW, O(show.sched_csv), 0, 0, "FILE",
	 "write the range's per-second scheduler metrics as CSV", check_path},
	{"sched_json", 0, OPT_STR, SHOW, O(show.sched_json), 0, 0, "FILE",
	 "write the range's per-second scheduler metrics as JSON", check_path},
	{"diff_base_end", 0, OPT_STR, SHOW, O(show.diff_base_end), 0, 0, "HH:MM:SS",
	 "end of the diff base (default: as long as the range exported)", check_time},
	{"diff_base_read", 0, OPT_STR, SHOW, O(show.diff_base_read), 0, 0, "DIR",
	 "store of the diff base (default --read), e.g. yesterday's", check_path},
};

/*
 * Flags that parse and validate but whose feature is not built yet. They are
 * refused, never silently ignored; remove a line when its feature lands.
 * value != NULL: refused only with that value. Ends at name == NULL.
 */
static const struct {
	const char *name;
	unsigned int scope;
	const char *value;
} opt_unsupported[] = {
	{NULL, 0, NULL}, /* end; empty while every flag is built */
};

static void *opt_ptr(const struct opt_def *d, struct cpa_opts *o)
{
	return (uint8_t *)o + d->off;
}

static const char *cmd_names[] = {
	[CPA_CMD_MONITOR] = "monitor", [CPA_CMD_SHOW] = "show",	      [CPA_CMD_CTL] = "ctl",
	[CPA_CMD_HELP] = "help",       [CPA_CMD_VERSION] = "version",
};

enum cpa_cmd cpa_cmd__from_name(const char *name)
{
	for (unsigned int i = 1; i < ARRAY_SIZE(cmd_names); i++)
		if (cmd_names[i] && !strcmp(name, cmd_names[i]))
			return (enum cpa_cmd)i;
	return CPA_CMD_NONE;
}

void cpa_opts__init(struct cpa_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mon.store_dir = CPA_DEFAULT_STORE_DIR;
	o->mon.backend = "bpf";
	o->mon.freq = 49;
	o->mon.record_interval = 1;
	o->mon.persistent_day = 7;
	o->mon.output_prof = "cpa.prof";
	o->mon.pid = -1;
	o->mon.max_queue_size = 4096;
	o->mon.stack_size = 8192;
	o->mon.max_cache_size_mb = 1024;
	o->mon.debuginfod_cache_mb = 1024;
	o->mon.max_store_size_mb = 7168;
	o->mon.log_print_cycles = 1;
	o->mon.offcpu_min_us = 1;
	o->mon.offcpu_state = "RSD";
	o->mon.probe_rate = CPA_PROBE_RATE_DEFAULT;
	o->mon.probe_budget = CPA_PROBE_BUDGET_DEFAULT;
	o->mon.sched_metrics = true;
	o->show.output_num = 1;
	o->show.target_pid = -1;
	o->show.target_cgroup_id = -1;
	o->show.probe_id = -1;
}

void cpa_opts__free(struct cpa_opts *o)
{
	for (size_t i = 0; i < o->n_owned; i++)
		free(o->owned[i]);
	free(o->owned);
	free(o->args);
	o->owned = NULL;
	o->args = NULL;
	o->n_owned = 0;
	o->n_args = 0;
}

static const char *own(struct cpa_opts *o, const char *s)
{
	char **n;
	char *c = strdup(s);

	if (!c)
		return NULL;
	n = realloc(o->owned, (o->n_owned + 1) * sizeof(*n));
	if (!n) {
		free(c);
		return NULL;
	}
	o->owned = n;
	o->owned[o->n_owned++] = c;
	return c;
}

int parse_ll(const char *s, long long min, long long max, long long *ret)
{
	char *end;
	long long v;

	if (!s || !*s || isspace((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (*end)
		return -EINVAL;
	if (errno == ERANGE || v < min || v > max)
		return -ERANGE;
	*ret = v;
	return 0;
}

static int parse_bool(const char *s, bool *ret)
{
	static const char *const yes[] = {"1", "true", "yes", "on", ""};
	static const char *const no[] = {"0", "false", "no", "off"};

	for (unsigned int i = 0; i < ARRAY_SIZE(yes); i++)
		if (!strcasecmp(s, yes[i]))
			return *ret = true, 0;
	for (unsigned int i = 0; i < ARRAY_SIZE(no); i++)
		if (!strcasecmp(s, no[i]))
			return *ret = false, 0;
	return -EINVAL;
}

static size_t opt_size(const struct opt_def *d)
{
	switch (d->type) {
	case OPT_BOOL:
		return sizeof(bool);
	case OPT_LONG:
		return sizeof(long);
	case OPT_LLONG:
		return sizeof(long long);
	default:
		return sizeof(const char *);
	}
}

_Static_assert(ARRAY_SIZE(opt_table) <= CPA_OPTS_MAX, "given[] has a bit per option");

static const struct opt_def *opt_find_short(char c, unsigned int scope);

/*
 * What a check derived from an option's values, put back with it by `null`:
 * every --probe so far (the list, not only the last), --debug_option's parts.
 */
static void opt_reset_derived(const struct opt_def *d, struct cpa_opts *o,
			      const struct cpa_opts *def)
{
	if (d->off == O(mon.probe)) {
		memcpy(o->mon.probes, def->mon.probes, sizeof(o->mon.probes));
		o->mon.nr_probes = def->mon.nr_probes;
	} else if (d->off == O(mon.debug_option)) {
		o->mon.debug_pid = def->mon.debug_pid;
		o->mon.debug_freq = def->mon.debug_freq;
		o->mon.debug_path = def->mon.debug_path;
	}
}

/* "where" is "" for argv, "FILE:LINE: " for config lines. */
static int opt_set_value(const struct opt_def *d, const char *val, struct cpa_opts *o,
			 const char *where)
{
	long long v;
	int r;

	/* CPA's config files write "null" for an unset value: the default. */
	if (val && !strcmp(val, "null")) {
		struct cpa_opts def;

		cpa_opts__init(&def);
		memcpy(opt_ptr(d, o), opt_ptr(d, &def), opt_size(d));
		opt_reset_derived(d, o, &def);
		if (d->type == OPT_BOOL && d->check)
			return d->check(d, *(bool *)opt_ptr(d, &def) ? "1" : "0", o, where);
		return 0;
	}
	switch (d->type) {
	case OPT_BOOL: {
		bool b = true;

		if (d->check) /* a switch with more words than on and off */
			return d->check(d, val ? val : "1", o, where);
		if (val && parse_bool(val, &b) < 0) {
			log_error("%s--%s: invalid value '%s' (a switch: use 1/0, true/false)",
				  where, d->name, val);
			return -EINVAL;
		}
		*(bool *)opt_ptr(d, o) = b;
		return 0;
	}
	case OPT_LONG:
	case OPT_LLONG:
		r = parse_ll(val, d->min, d->max, &v);
		if (r == -ERANGE) {
			char range[64];

			/* No bound above but the type's: CPA's words for -n, not 19 digits. */
			if (d->max != LLONG_MAX)
				snprintf(range, sizeof(range), "%lld..%lld", d->min, d->max);
			else if (d->min == 1)
				snprintf(range, sizeof(range), "a positive integer");
			else
				snprintf(range, sizeof(range), "%lld..2^63-1", d->min);
			/* CPA's words where a script may grep them ("persistent_day > 0"). */
			log_error("%s--%s: value '%s' out of range (must be %s)%s", where, d->name,
				  val, range,
				  d->off == O(mon.persistent_day) ? ": use persistent_day > 0"
								  : "");
			return -EINVAL;
		}
		if (r < 0) {
			log_error("%s--%s: invalid value '%s' (expected an integer)", where,
				  d->name, val);
			return -EINVAL;
		}
		if (d->type == OPT_LONG)
			*(long *)opt_ptr(d, o) = (long)v;
		else
			*(long long *)opt_ptr(d, o) = v;
		return 0;
	case OPT_STR:
		if (!*val) {
			log_error("%s--%s: empty value", where, d->name);
			return -EINVAL;
		}
		/* `--store_dir --offcpu` or `-s -K` is a forgotten value, not a
		 * directory named "--offcpu" or "-K" (write ./-K for that); a
		 * longer word such as `--target_comm -bash` stays a value. */
		if (val[0] == '-' &&
		    ((val[1] == '-' && val[2]) ||
		     (val[1] && !val[2] && opt_find_short(val[1], OPT_SCOPE(o->cmd))))) {
			log_error("%s--%s: missing value (got the option '%s')", where, d->name,
				  val);
			return -EINVAL;
		}
		if (d->check) {
			r = d->check(d, val, o, where);
			if (r < 0)
				return r;
		}
		*(const char **)opt_ptr(d, o) = val;
		return 0;
	}
	return -EINVAL;
}

/* The value, and whether the option counts as given (not after `null`). */
static int opt_set(const struct opt_def *d, const char *val, struct cpa_opts *o, const char *where)
{
	size_t i = (size_t)(d - opt_table);
	int r = opt_set_value(d, val, o, where);

	if (r < 0)
		return r;
	if (val && !strcmp(val, "null"))
		o->given[i / 64] &= ~(1ULL << (i % 64));
	else
		o->given[i / 64] |= 1ULL << (i % 64);
	return 0;
}

static const struct opt_def *opt_find_long(const char *name, size_t len, unsigned int scope)
{
	char norm[64];

	if (len >= sizeof(norm))
		return NULL;
	/* --store-dir is --store_dir: scripts from other tools use dashes. */
	for (size_t i = 0; i < len; i++)
		norm[i] = name[i] == '-' ? '_' : name[i];
	norm[len] = 0;
	for (unsigned int i = 0; i < ARRAY_SIZE(opt_table); i++)
		if ((opt_table[i].scope & scope) && !strcmp(opt_table[i].name, norm))
			return &opt_table[i];
	return NULL;
}

/* Edits from a to b (insert, delete, substitute, swap two neighbours: the
 * optimal string alignment distance); both shorter than 64. */
static unsigned int edit_distance(const char *a, size_t la, const char *b, size_t lb)
{
	unsigned int d[3][64], *pp = d[0], *p = d[1], *c = d[2];

	for (size_t j = 0; j <= lb; j++)
		p[j] = (unsigned int)j;
	for (size_t i = 1; i <= la; i++) {
		c[0] = (unsigned int)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned int v = p[j - 1] + (a[i - 1] != b[j - 1]);

			v = MIN(v, p[j] + 1);
			v = MIN(v, c[j - 1] + 1);
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
				v = MIN(v, pp[j - 2] + 1);
			c[j] = v;
		}
		unsigned int *t = pp;

		pp = p;
		p = c;
		c = t;
	}
	return p[lb];
}

/*
 * The option of scope a mistyped name most likely meant (dashes read as
 * underscores): one or two edits away, at most one per three letters, so a
 * word that is no option's name gets no guess. NULL if none is that near.
 */
static const struct opt_def *opt_nearest(const char *name, size_t len, unsigned int scope)
{
	const struct opt_def *best = NULL;
	unsigned int best_d = 3;
	char norm[64];

	if (len >= sizeof(norm))
		return NULL;
	for (size_t i = 0; i < len; i++)
		norm[i] = name[i] == '-' ? '_' : name[i];
	for (unsigned int i = 0; i < ARRAY_SIZE(opt_table); i++) {
		const char *n = opt_table[i].name;
		size_t nl = strlen(n);
		unsigned int d;

		if (!(opt_table[i].scope & scope) || nl >= sizeof(norm))
			continue;
		d = edit_distance(norm, len, n, nl);
		if (d < best_d && d * 3 <= len) {
			best = &opt_table[i];
			best_d = d;
		}
	}
	return best;
}

/* " (did you mean '<prefix><name>'?)" for a mistyped name, else "". */
static const char *guess_of(const char *name, size_t len, unsigned int scope, const char *prefix,
			    char *buf, size_t buflen)
{
	const struct opt_def *d = opt_nearest(name, len, scope);

	if (!d)
		return "";
	snprintf(buf, buflen, " (did you mean '%s%s'?)", prefix, d->name);
	return buf;
}

static const struct opt_def *opt_find_short(char c, unsigned int scope)
{
	for (unsigned int i = 0; i < ARRAY_SIZE(opt_table); i++)
		if ((opt_table[i].scope & scope) && opt_table[i].shrt == c)
			return &opt_table[i];
	return NULL;
}

static unsigned int cmd_scope(const struct cpa_opts *o)
{
	return OPT_SCOPE(o->cmd);
}

static const char *other_cmd_of(const char *name, size_t len)
{
	const struct opt_def *d = opt_find_long(name, len, MON | SHOW | CTL);

	if (!d)
		return NULL;
	return (d->scope & MON) ? "monitor" : (d->scope & SHOW) ? "show" : "ctl";
}

static int add_arg(struct cpa_opts *o, char *a)
{
	char **n = realloc(o->args, (size_t)(o->n_args + 1) * sizeof(*n));

	if (!n)
		return log_error_errno(-ENOMEM, "out of memory");
	o->args = n;
	o->args[o->n_args++] = a;
	return 0;
}

static bool is_bool_word(const char *s)
{
	return s && (!strcmp(s, "1") || !strcmp(s, "0"));
}

int cpa_opts__parse_argv(struct cpa_opts *o, int argc, char **argv)
{
	unsigned int scope = cmd_scope(o);
	bool only_args = false;
	int i, r;

	for (i = 0; i < argc; i++) {
		char *a = argv[i];
		const struct opt_def *d;

		if (only_args || a[0] != '-' || a[1] == 0) {
			r = add_arg(o, a);
			if (r < 0)
				return r;
			continue;
		}
		if (!strcmp(a, "--")) {
			only_args = true;
			continue;
		}
		if (a[1] == '-') {
			const char *name = a + 2, *eq = strchr(name, '=');
			size_t len = eq ? (size_t)(eq - name) : strlen(name);
			const char *val = eq ? eq + 1 : NULL;

			d = opt_find_long(name, len, scope);
			if (!d) {
				const char *other = other_cmd_of(name, len);
				char guess[96];

				if (other)
					log_error(
						"--%.*s is an option of 'cpa %s', not of 'cpa %s'",
						(int)len, name, other, o->cmd_name);
				else
					log_error("unknown option '--%.*s'%s", (int)len, name,
						  guess_of(name, len, scope, "--", guess,
							   sizeof(guess)));
				return -EINVAL;
			}
			if (d->type == OPT_BOOL) {
				/* Scripts write "--show_range 1": eat a stray 1 (or 0). */
				if (!val && is_bool_word(i + 1 < argc ? argv[i + 1] : NULL))
					val = argv[++i];
			} else if (!val) {
				if (i + 1 >= argc) {
					log_error("--%s: missing value (%s)", d->name, d->metavar);
					return -EINVAL;
				}
				val = argv[++i];
			}
			r = opt_set(d, val, o, "");
			if (r < 0)
				return r;
			continue;
		}
		/* Short options, bundled like getopt: -vK, -F99, -F 99. */
		for (const char *p = a + 1; *p; p++) {
			const char *val = NULL;

			d = opt_find_short(*p, scope);
			if (!d) {
				log_error("unknown option '-%c'", *p);
				return -EINVAL;
			}
			if (d->type == OPT_BOOL) {
				if (!p[1] && is_bool_word(i + 1 < argc ? argv[i + 1] : NULL))
					val = argv[++i];
				r = opt_set(d, val, o, "");
				if (r < 0)
					return r;
				continue;
			}
			if (p[1]) {
				val = p + 1;
			} else if (i + 1 < argc) {
				val = argv[++i];
			} else {
				log_error("-%c (--%s): missing value (%s)", *p, d->name,
					  d->metavar);
				return -EINVAL;
			}
			r = opt_set(d, val, o, "");
			if (r < 0)
				return r;
			break;
		}
	}
	return 0;
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

/*
 * A config file is read whole, at most CONFIG_MAX_BYTES. It must be a
 * regular file (a directory, a device such as /dev/zero or a FIFO is refused
 * before anything is read, without blocking) and, since whoever may write it
 * decides what cpa (root) runs with, trusted (common/inputfile.h).
 */
#define CONFIG_MAX_BYTES (1024 * 1024)

static int config_open(const char *path, char **buf, size_t *len)
{
	_cleanup_close_ int fd = -1;
	char what[PATH_MAX + 16], err[PATH_MAX + 256];
	size_t cap = 0;
	int r;

	snprintf(what, sizeof(what), "--config '%s'", path);
	r = input_file__open(what, path, INPUT_FILE_TRUSTED, &fd, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	r = read_full_fd(fd, 0, CONFIG_MAX_BYTES, buf, &cap, len);
	if (r == -EFBIG) {
		log_error("--config '%s': larger than %d KiB: not a config file", path,
			  CONFIG_MAX_BYTES / 1024);
		return r;
	}
	if (r < 0)
		return log_error_errno(r, "--config '%s': %m", path);
	return 0;
}

int cpa_opts__load_config(struct cpa_opts *o, const char *path)
{
	_cleanup_free_ char *buf = NULL;
	unsigned int lineno = 0;
	char *next, *end;
	size_t len = 0;
	int r;

	r = config_open(path, &buf, &len);
	if (r < 0)
		return r;

	for (char *line = buf, *stop = buf + len; line < stop; line = next) {
		char where[PATH_MAX + 32], *s, *colon, *key, *val, *nul;
		const struct opt_def *d;

		end = memchr(line, '\n', (size_t)(stop - line));
		if (!end)
			end = stop;
		*end = 0;
		next = end + 1;
		lineno++;
		snprintf(where, sizeof(where), "%s:%u: ", path, lineno);
		nul = memchr(line, 0, (size_t)(end - line));
		if (nul) {
			log_error("%sa NUL byte at column %zu: not a text file", where,
				  (size_t)(nul - line) + 1);
			r = -EINVAL;
			break;
		}
		/* '#' starts a comment at the line start or after a blank, so a
		 * value may still contain one (e.g. a path). */
		for (s = line; *s; s++)
			if (*s == '#' && (s == line || isspace((unsigned char)s[-1]))) {
				*s = 0;
				break;
			}
		s = trim(line);
		if (!*s)
			continue;
		colon = strchr(s, ':');
		if (!colon) {
			log_error("%sexpected 'key: value', got '%s'", where, s);
			r = -EINVAL;
			break;
		}
		*colon = 0;
		key = trim(s);
		val = trim(colon + 1);
		d = opt_find_long(key, strlen(key), cmd_scope(o));
		if (!d) {
			const char *other = other_cmd_of(key, strlen(key));
			char guess[96];

			if (other)
				log_error("%skey '%s' is an option of 'cpa %s', not of 'cpa %s'",
					  where, key, other, o->cmd_name);
			else
				log_error("%sunknown key '%s'%s", where, key,
					  guess_of(key, strlen(key), cmd_scope(o), "", guess,
						   sizeof(guess)));
			r = -EINVAL;
			break;
		}
		if (!strcmp(d->name, "config")) {
			log_error("%s'config' cannot be nested", where);
			r = -EINVAL;
			break;
		}
		if (d->type != OPT_BOOL && !*val) {
			log_error("%s%s: missing value", where, d->name);
			r = -EINVAL;
			break;
		}
		val = (char *)own(o, val);
		if (!val) {
			r = log_error_errno(-ENOMEM, "out of memory");
			break;
		}
		r = opt_set(d, val, o, where);
		if (r < 0)
			break;
	}
	return r;
}

static bool opt_is_set(const struct opt_def *d, struct cpa_opts *o, const char *value)
{
	void *p = opt_ptr(d, o);

	switch (d->type) {
	case OPT_BOOL:
		return *(bool *)p;
	case OPT_STR:
		return *(const char **)p && (!value || !strcmp(*(const char **)p, value));
	default:
		return false;
	}
}

/* The help note of an option on the unsupported list, "" if none. */
static const char *opt_unsupported_note(const struct opt_def *d, char *buf, size_t len)
{
	for (unsigned int i = 0; opt_unsupported[i].name; i++) {
		if (!(opt_unsupported[i].scope & d->scope) ||
		    strcmp(opt_unsupported[i].name, d->name))
			continue;
		snprintf(buf, len, " [%s%snot supported yet]",
			 opt_unsupported[i].value ? opt_unsupported[i].value : "",
			 opt_unsupported[i].value ? ": " : "");
		return buf;
	}
	return "";
}

int cpa_opts__check(struct cpa_opts *o)
{
	unsigned int scope = cmd_scope(o);
	int r;

	for (unsigned int i = 0; opt_unsupported[i].name; i++) {
		const struct opt_def *d;

		if (!(opt_unsupported[i].scope & scope))
			continue;
		d = opt_find_long(opt_unsupported[i].name, strlen(opt_unsupported[i].name), scope);
		if (d && opt_is_set(d, o, opt_unsupported[i].value)) {
			if (opt_unsupported[i].value)
				log_error("--%s %s: not supported yet", d->name,
					  opt_unsupported[i].value);
			else
				log_error("--%s: not supported yet", d->name);
			return -EINVAL;
		}
	}

	if (o->cmd == CPA_CMD_MONITOR && o->mon.stack_size % 4096) {
		log_error("--stack_size: invalid value '%ld' (must be a multiple of 4096 in [4096, "
			  "65536])",
			  o->mon.stack_size);
		return -EINVAL;
	}
	if (o->cmd == CPA_CMD_MONITOR && o->mon.offcpu_max_us &&
	    o->mon.offcpu_max_us < o->mon.offcpu_min_us) {
		log_error("--offcpu_max_us %ld is below --offcpu_min_us %ld: no block would be "
			  "recorded",
			  o->mon.offcpu_max_us, o->mon.offcpu_min_us);
		return -EINVAL;
	}
	if (o->cmd == CPA_CMD_MONITOR && o->mon.policy) {
		/* capture evaluates the policies on the scheduler metrics (BPF) */
		if (!o->mon.sched_metrics || o->mon.oneshot || !strcmp(o->mon.backend, "perf")) {
			log_error("--policy needs the scheduler metrics and the BPF backend: not "
				  "with %s",
				  !o->mon.sched_metrics ? "--sched_metrics=0"
				  : o->mon.oneshot	? "--oneshot"
							: "--backend perf");
			return -EINVAL;
		}
		r = policy_probes_check(o);
		if (r < 0)
			return r;
	}
	if (o->cmd == CPA_CMD_MONITOR && o->mon.push && o->mon.oneshot) {
		/* cpa-push posts sealed windows of a store --oneshot removes at its end:
		 * the run's last seconds would never reach the backend */
		log_error("--push follows a store, --oneshot writes one profile and removes its "
			  "store: not both");
		return -EINVAL;
	}
	if (o->cmd == CPA_CMD_MONITOR && !strcmp(o->mon.backend, "perf") &&
	    (o->mon.offcpu || o->mon.nr_probes)) {
		log_error(
			"perf backend only supports on-cpu continuous profiling: %s needs the BPF "
			"backend (--backend bpf)",
			o->mon.offcpu ? "--offcpu" : "--probe");
		return -EINVAL;
	}
	if (o->cmd == CPA_CMD_SHOW && !o->show.read && !o->help) {
		log_error("arg \"read\" required but not present: --read DIR, a store directory "
			  "(cpa_YYMMDD...) or the store root");
		return -EINVAL;
	}
	if (o->btf_path) {
		r = btf_file__check(o->btf_path);
		if (r < 0)
			return r;
	}
	return 0;
}

bool cpa_opts__given(const struct cpa_opts *o, const char *name)
{
	const struct opt_def *d = opt_find_long(name, strlen(name), cmd_scope(o));
	size_t i;

	if (!d)
		return false;
	i = (size_t)(d - opt_table);
	return o->given[i / 64] & (1ULL << (i % 64));
}

/* ", --name" onto list when the option was given. */
static void given_add(const struct cpa_opts *o, const char *name, char *list, size_t len)
{
	size_t n = strlen(list);

	if (cpa_opts__given(o, name))
		snprintf(list + n, len - n, "%s--%s", n ? ", " : "", name);
}

void cpa_opts__warn_unused(const struct cpa_opts *o)
{
	const struct monitor_opts *m = &o->mon;
	char x[256] = "";

	if (o->cmd == CPA_CMD_SHOW) {
		/* --show_range and --use_cui name what they do not use themselves (export/) */
		if (o->show.endtime && cpa_opts__given(o, "output_num") && !o->show.show_range &&
		    !o->show.use_cui)
			log_warn("--endtime %s decides the number of records: -n %ld not used",
				 o->show.endtime, o->show.output_num);
		return;
	}
	if (o->cmd != CPA_CMD_MONITOR)
		return;
	if (!m->oneshot && cpa_opts__given(o, "output_prof"))
		log_warn("-o is the profile of --oneshot: --output_prof '%s' not used without "
			 "--oneshot",
			 m->output_prof);
	if (m->oneshot && cpa_opts__given(o, "store_dir"))
		log_warn("--oneshot keeps its store next to -o and removes it: --store_dir '%s' "
			 "not used",
			 m->store_dir);
	/* a --policy may turn off-CPU sampling on for a process */
	if (!m->offcpu && !m->policy) {
		given_add(o, "offcpu_min_us", x, sizeof(x));
		given_add(o, "offcpu_max_us", x, sizeof(x));
		given_add(o, "offcpu_state", x, sizeof(x));
		if (x[0])
			log_warn("off-CPU sampling is off (no --offcpu): %s not used", x);
	}
	x[0] = 0;
	if (!m->nr_probes) {
		given_add(o, "probe_rate", x, sizeof(x));
		given_add(o, "probe_budget", x, sizeof(x));
		if (x[0])
			log_warn("no --probe given: %s not used", x);
	}
}

int cpa_opts__parse(struct cpa_opts *o, enum cpa_cmd cmd, int argc, char **argv)
{
	int r;

	o->cmd = cmd;
	o->cmd_name = cmd_names[cmd];
	r = cpa_opts__parse_argv(o, argc, argv);
	if (r < 0 || o->help)
		return r;
	if (o->config) {
		r = cpa_opts__load_config(o, o->config);
		if (r < 0)
			return r;
	}
	r = cpa_opts__check(o);
	if (r == 0)
		cpa_opts__warn_unused(o);
	return r;
}

/* ---- value checks ---- */

static int check_path(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where)
{
	(void)o;
	if (strlen(val) >= CPA_PATH_MAX) {
		log_error("%s--%s: path longer than %d bytes", where, d->name, CPA_PATH_MAX - 1);
		return -EINVAL;
	}
	return 0;
}

static int check_backend(const struct opt_def *d, const char *val, struct cpa_opts *o,
			 const char *where)
{
	(void)o;
	if (strcmp(val, "bpf") && strcmp(val, "perf")) {
		log_error("%s--%s: invalid value '%s' (must be bpf or perf)", where, d->name, val);
		return -EINVAL;
	}
	return 0;
}

/* Letters R, S, D, each at most once, at least one. */
int cpa_opts__offcpu_states(const char *val)
{
	int bits = 0, b;

	for (const char *p = val; *p; p++) {
		b = *p == 'R'	? CPA_OFFCPU_STATE_R
		    : *p == 'S' ? CPA_OFFCPU_STATE_S
		    : *p == 'D' ? CPA_OFFCPU_STATE_D
				: 0;
		if (!b || (bits & b))
			return -EINVAL;
		bits |= b;
	}
	return bits ? bits : -EINVAL;
}

long cpa_opts__probe_budget_ppm(const char *val)
{
	long whole = 0, frac = 0, scale = 10000;
	const char *p = val;

	if (!isdigit((unsigned char)*p))
		return -EINVAL;
	for (; isdigit((unsigned char)*p) && whole <= 100; p++)
		whole = whole * 10 + (*p - '0');
	if (*p == '.') {
		if (!isdigit((unsigned char)*++p))
			return -EINVAL;
		for (; isdigit((unsigned char)*p) && scale > 1; p++) {
			scale /= 10;
			frac += (*p - '0') * scale;
		}
	}
	if (*p || whole * 10000 + frac > 1000000)
		return -EINVAL;
	return whole * 10000 + frac;
}

/* "--<name>: invalid value '<val>' (<hint>)", -EINVAL. */
static int bad_value(const struct opt_def *d, const char *val, const char *where, const char *hint)
{
	log_error("%s--%s: invalid value '%s' (%s)", where, d->name, val, hint);
	return -EINVAL;
}

static int check_offcpu_state(const struct opt_def *d, const char *val, struct cpa_opts *o,
			      const char *where)
{
	(void)o;
	return cpa_opts__offcpu_states(val) < 0
		       ? bad_value(d, val, where, "letters R, S, D, e.g. SD")
		       : 0;
}

static int check_probe_budget(const struct opt_def *d, const char *val, struct cpa_opts *o,
			      const char *where)
{
	(void)o;
	return cpa_opts__probe_budget_ppm(val) < 0
		       ? bad_value(d, val, where, "percent of one CPU, 0..100, e.g. 0.5")
		       : 0;
}

/* A URL cpa-push could never post to is refused now, not retried for ever. */
static int check_push(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where)
{
	char err[128], hint[160];

	(void)o;
	if (push_url__check(val, err, sizeof(err)) == 0)
		return 0;
	snprintf(hint, sizeof(hint), "%s; e.g. http://pyroscope:4040", err);
	return bad_value(d, val, where, hint);
}

static int check_kind(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where)
{
	(void)o;
	return strcmp(val, "on") && strcmp(val, "off") && strcmp(val, "all")
		       ? bad_value(d, val, where, "must be on, off or all")
		       : 0;
}

static int check_comm(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where)
{
	(void)o;
	/* The kernel keeps 15 bytes of a comm; a longer name could never match. */
	if (strlen(val) >= CPA_COMM_LEN) {
		log_error("%s--%s: '%s' is longer than %d characters (the kernel keeps %d of a "
			  "comm: use '%.*s')",
			  where, d->name, val, CPA_COMM_LEN - 1, CPA_COMM_LEN - 1, CPA_COMM_LEN - 1,
			  val);
		return -EINVAL;
	}
	return 0;
}

static int check_env_list(const struct opt_def *d, const char *val, struct cpa_opts *o,
			  const char *where)
{
	const char *p = val;

	(void)o;
	if (strlen(val) >= CPA_ENV_LIST_MAX) {
		log_error("%s--%s: list longer than %d bytes", where, d->name,
			  CPA_ENV_LIST_MAX - 1);
		return -EINVAL;
	}
	for (;;) {
		size_t n = strcspn(p, ",");

		if (n == 0) {
			log_error("%s--%s: invalid value '%s' (empty item in the comma list)",
				  where, d->name, val);
			return -EINVAL;
		}
		for (size_t i = 0; i < n; i++)
			if (isspace((unsigned char)p[i]) ||
			    (p[i] == '=' && !strcmp(d->name, "record_env_name"))) {
				log_error("%s--%s: invalid value '%s' (item '%.*s' has '%c')",
					  where, d->name, val, (int)n, p, p[i] == '=' ? '=' : ' ');
				return -EINVAL;
			}
		if (!p[n])
			return 0;
		p += n + 1;
	}
}

/* --sched_metrics[=1|cheap|full|sampled[:N]|0]: on (the task counters),
 * exact, 1 in N events weighted, off. */
static int check_sched_metrics(const struct opt_def *d, const char *val, struct cpa_opts *o,
			       const char *where)
{
	bool b = true;
	long long n = 0;

	if (!strncasecmp(val, "sampled", 7) && (!val[7] || val[7] == ':')) {
		n = CPA_SCHED_SAMPLE_DEFAULT;
		if (val[7] && parse_ll(val + 8, 2, CPA_SCHED_SAMPLE_MAX, &n) < 0) {
			log_error("%s--%s: invalid value '%s' (sampled:N, 1 in N events, N from 2 "
				  "to %u)",
				  where, d->name, val, CPA_SCHED_SAMPLE_MAX);
			return -EINVAL;
		}
	} else if (strcasecmp(val, "full") && strcasecmp(val, "cheap") && parse_bool(val, &b) < 0) {
		log_error("%s--%s: invalid value '%s' (1 or cheap, full, sampled[:N], 0)", where,
			  d->name, val);
		return -EINVAL;
	}
	o->mon.sched_full = !strcasecmp(val, "full");
	o->mon.sched_sample = (long)n;
	o->mon.sched_metrics = b;
	return 0;
}

static int check_policy(const struct opt_def *d, const char *val, struct cpa_opts *o,
			const char *where)
{
	_cleanup_free_ struct policy_set *set = calloc(1, sizeof(*set));
	char err[512];

	(void)o;
	if (!set)
		return log_error_errno(-ENOMEM, "%s--%s: %m", where, d->name);
	if (strlen(val) >= CPA_PATH_MAX) {
		log_error("%s--%s: path longer than %d bytes", where, d->name, CPA_PATH_MAX - 1);
		return -EINVAL;
	}
	/* The --probe options may come after: probe names are looked up in
	 * cpa_opts__check(), once every option is read. */
	if (policy_set__load(val, &(struct policy_limits){.freq_max = CPA_FREQ_MAX}, set, err,
			     sizeof(err)) < 0) {
		log_error("%s--%s: %s", where, d->name, err);
		return -EINVAL;
	}
	return 0;
}

/* The policy file again, its probe=/attach= names against the --probe list. */
static int policy_probes_check(const struct cpa_opts *o)
{
	_cleanup_free_ struct policy_set *set = calloc(1, sizeof(*set));
	struct policy_limits lim = {.freq_max = CPA_FREQ_MAX,
				    .probes = o->mon.probes,
				    .nr_probes = o->mon.nr_probes,
				    .probes_known = true};
	char err[512];

	if (!set)
		return log_error_errno(-ENOMEM, "--policy: %m");
	if (policy_set__load(o->mon.policy, &lim, set, err, sizeof(err)) < 0) {
		log_error("--policy: %s", err);
		return -EINVAL;
	}
	return 0;
}

/* Repeatable: each --probe appends; probe id = its position; `null` empties the list. */
static int check_probe(const struct opt_def *d, const char *val, struct cpa_opts *o,
		       const char *where)
{
	struct probe_spec p;

	if (strlen(val) >= CPA_PROBE_SPEC_MAX) {
		log_error("%s--%s: spec longer than %d bytes", where, d->name,
			  CPA_PROBE_SPEC_MAX - 1);
		return -EINVAL;
	}
	if (probe_spec__parse(val, &p) < 0) {
		log_error("%s--%s: invalid value '%s' (expected " PROBE_SPEC_GRAMMAR ")", where,
			  d->name, val);
		return -EINVAL;
	}
	if (p.type == PROBE_UPROBE || p.type == PROBE_URETPROBE || p.type == PROBE_USDT) {
		/* A FIFO or a device is refused now, without blocking; a missing
		 * file is reported with the other checks on this machine. */
		_cleanup_close_ int fd = -1;
		char err[1300];
		int r = probe_spec__open_binary(val, &p, &fd, err, sizeof(err));

		if (r < 0 && r != -ENOENT) {
			log_error("%s--%s: %s", where, d->name, err);
			return -EINVAL;
		}
	}
	if (o->mon.nr_probes >= CPA_PROBE_MAX) {
		log_error("%s--%s: at most %d probes", where, d->name, CPA_PROBE_MAX);
		return -EINVAL;
	}
	/* The same probe twice would record each hit twice (once per probe id). */
	for (unsigned int i = 0; i < o->mon.nr_probes; i++) {
		struct probe_spec q;

		if (probe_spec__parse(o->mon.probes[i], &q) == 0 && q.type == p.type &&
		    q.off == p.off && !strcmp(q.path, p.path) && !strcmp(q.a, p.a) &&
		    !strcmp(q.b, p.b)) {
			log_error("%s--%s: '%s' is the same probe as probe %u '%s' (each hit "
				  "would be recorded twice)",
				  where, d->name, val, i, o->mon.probes[i]);
			return -EINVAL;
		}
	}
	o->mon.probes[o->mon.nr_probes++] = val;
	return 0;
}

static int check_debug_option(const struct opt_def *d, const char *val, struct cpa_opts *o,
			      const char *where)
{
	const char *c1 = strchr(val, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
	char num[32];
	long long pid, freq;

	if (!c1 || !c2 || !c2[1] || (size_t)(c1 - val) >= sizeof(num) ||
	    (size_t)(c2 - c1 - 1) >= sizeof(num))
		goto bad;
	memcpy(num, val, (size_t)(c1 - val));
	num[c1 - val] = 0;
	if (parse_ll(num, 1, 4194304, &pid) < 0)
		goto bad;
	memcpy(num, c1 + 1, (size_t)(c2 - c1 - 1));
	num[c2 - c1 - 1] = 0;
	if (parse_ll(num, 1, INT32_MAX, &freq) < 0)
		goto bad;
	if (strlen(c2 + 1) >= CPA_PATH_MAX)
		goto bad;
	o->mon.debug_pid = (long)pid;
	o->mon.debug_freq = (long)freq;
	o->mon.debug_path = c2 + 1;
	return 0;
bad:
	log_error("%s--%s: invalid value '%s' (expected PID,FREQ,PATH with PID and FREQ > 0)",
		  where, d->name, val);
	return -EINVAL;
}

bool time_of_day_valid(const char *s)
{
	unsigned int h, m, sec, ms = 0;
	int n = 0;

	if (strlen(s) < 8 || !isdigit((unsigned char)s[0]) || !isdigit((unsigned char)s[1]) ||
	    s[2] != ':' || !isdigit((unsigned char)s[3]) || !isdigit((unsigned char)s[4]) ||
	    s[5] != ':' || !isdigit((unsigned char)s[6]) || !isdigit((unsigned char)s[7]))
		return false;
	if (sscanf(s, "%2u:%2u:%2u%n", &h, &m, &sec, &n) != 3 || n != 8)
		return false;
	if (s[8]) {
		size_t i;

		if (s[8] != '.' || !s[9] || strlen(s + 9) > 3)
			return false;
		for (i = 9; s[i]; i++)
			if (!isdigit((unsigned char)s[i]))
				return false;
		ms = (unsigned int)atoi(s + 9);
	}
	return h < 24 && m < 60 && sec < 60 && ms < 1000;
}

static int check_time(const struct opt_def *d, const char *val, struct cpa_opts *o,
		      const char *where)
{
	(void)o;
	if (!time_of_day_valid(val)) {
		log_error("%s--%s: invalid time format '%s' (expected HH:MM:SS[.mmm], local time "
			  "of day)",
			  where, d->name, val);
		return -EINVAL;
	}
	return 0;
}

static int check_format(const struct opt_def *d, const char *val, struct cpa_opts *o,
			const char *where)
{
	static const char *const formats[] = {"folded", "pprof", "svg", "speedscope"};
	size_t i;

	(void)o;
	for (i = 0; i < ARRAY_SIZE(formats); i++)
		if (!strcmp(val, formats[i]))
			return 0;
	log_error("%s--%s: invalid value '%s' (expected folded, pprof, svg or speedscope)", where,
		  d->name, val);
	return -EINVAL;
}

static int check_cpulist(const struct opt_def *d, const char *val, struct cpa_opts *o,
			 const char *where)
{
	uint64_t mask[CPA_MAX_CPUS / 64];

	(void)o;
	if (cpulist__parse(val, mask, CPA_MAX_CPUS, NULL) < 0) {
		log_error(
			"%s--%s: invalid value '%s' (expected a cpu list like 1-3,5,7-9 with cpus "
			"< %d)",
			where, d->name, val, CPA_MAX_CPUS);
		return -EINVAL;
	}
	return 0;
}

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	(void)level, (void)fmt, (void)ap;
	return 0;
}

int btf_file__check(const char *path)
{
	char what[PATH_MAX + 16], err[PATH_MAX + 256], fdpath[64];
	_cleanup_close_ int fd = -1;
	uint8_t magic[4];
	libbpf_print_fn_t old;
	struct btf *btf;
	ssize_t n;
	int r;

	snprintf(what, sizeof(what), "--btf_path '%s'", path);
	r = input_file__open(what, path, 0, &fd, err, sizeof(err));
	if (r < 0) {
		log_error("%s", err);
		return r;
	}
	n = read(fd, magic, sizeof(magic));
	if (n < 0)
		return log_error_errno(-errno, "--btf_path '%s': read: %m", path);
	/* Raw BTF starts with 0xeB9F (little endian here); ELF files carry a .BTF section. */
	if (n < 4 || !((magic[0] == 0x9f && magic[1] == 0xeb) || !memcmp(magic, "\177ELF", 4))) {
		log_error("--btf_path '%s': not a BTF file (no 0xeB9F magic, not ELF)", path);
		return -EINVAL;
	}
	/* Parse it for real so a truncated or corrupt file fails here, not in capture. */
	old = libbpf_set_print(libbpf_quiet);
	/* The file just checked, not whatever path names by now. */
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", fd);
	btf = btf__parse(fdpath, NULL);
	r = btf ? 0 : -errno;
	libbpf_set_print(old);
	if (!btf) {
		if (r == 0 || r == -ENOENT)
			r = -EINVAL;
		log_error("--btf_path '%s': invalid BTF: %s", path, strerror(-r));
		return r;
	}
	btf__free(btf);
	return 0;
}

/* ---- help ---- */

/* Words of text from column col on, wrapped at width, continuation lines indented to col. */
static void print_wrapped(FILE *f, const char *text, int col, int width)
{
	int pos = col;

	while (*text) {
		int n = (int)strcspn(text, " ");

		if (pos > col && pos + 1 + n > width) {
			fprintf(f, "\n%*s", col - 1, "");
			pos = col;
		}
		fprintf(f, " %.*s", n, text);
		pos += n + 1;
		text += n;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

void cpa_opts__print_help(FILE *f, enum cpa_cmd cmd)
{
	unsigned int scope = OPT_SCOPE(cmd);

	for (int pass = 0; pass < 2; pass++) {
		fprintf(f, pass == 0 ? "\nGlobal options:\n" : "\nOptions of 'cpa %s':\n",
			cmd_names[cmd]);
		for (unsigned int i = 0; i < ARRAY_SIZE(opt_table); i++) {
			const struct opt_def *d = &opt_table[i];
			char left[64], note[64], text[512];
			bool global = d->scope == OPT_GLOBAL;

			if (!(d->scope & scope) || global != (pass == 0))
				continue;
			/* Accepted everywhere (CPA's global options), used by monitor only. */
			if (cmd != CPA_CMD_MONITOR &&
			    (d->off == O(duration) || d->off == O(btf_path)))
				continue;
			if (d->shrt)
				snprintf(left, sizeof(left), "-%c, --%s%s%s", d->shrt, d->name,
					 d->metavar ? " " : "", d->metavar ? d->metavar : "");
			else
				snprintf(left, sizeof(left), "    --%s%s%s", d->name,
					 d->metavar ? " " : "", d->metavar ? d->metavar : "");
			snprintf(text, sizeof(text), "%s%s", d->help,
				 opt_unsupported_note(d, note, sizeof(note)));
			fprintf(f, "  %-34s", left);
			print_wrapped(f, text, 37, 100);
		}
	}
}
