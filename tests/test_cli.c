// SPDX-License-Identifier: MIT
/*
 * test_cli: the option parser in-process (cpa_cli, messages captured through
 * the log sink) and the built `cpa` binary end to end (CPA_BUILD_DIR). No root;
 * `test_cli nonroot` (test_cli_nonroot) runs cpa as nobody: root only, else 77.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <regex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/log.h"
#include "shm/config.h"
#include "common/opts.h"
#include "common/pushurl.h"
#include "test_util.h"

static char logbuf[8192];

static void sink(enum log_level lvl, const char *line)
{
	(void)lvl;
	strncat(logbuf, line, sizeof(logbuf) - strlen(logbuf) - 2);
	strcat(logbuf, "\n");
}

static struct cpa_opts O;

/* Parse argv (NULL-terminated) as sub-command cmd; full parse incl. config and checks. */
static int parse_v(enum cpa_cmd cmd, const char *const *args)
{
	char *argv[64];
	int n = 0;

	for (; args[n]; n++)
		argv[n] = (char *)args[n];
	argv[n] = NULL;
	logbuf[0] = 0;
	cpa_opts__free(&O);
	cpa_opts__init(&O);
	return cpa_opts__parse(&O, cmd, n, argv);
}

#define PARSE(cmd, ...) parse_v(cmd, (const char *const[]){__VA_ARGS__, NULL})
#define MON		CPA_CMD_MONITOR
#define SHOW		CPA_CMD_SHOW

#define ASSERT_LOG(s) ck_assert_msg(strstr(logbuf, s), "'%s' not in log: %s", s, logbuf)

static void setup(void)
{
	log_set_sink(sink);
	cpa_opts__init(&O);
}

static void teardown(void)
{
	cpa_opts__free(&O);
	log_set_sink(NULL);
}

START_TEST(test_defaults)
{
	ck_assert_int_eq(PARSE(MON, "-v"), 0);
	ck_assert(O.verbose);
	ck_assert_str_eq(O.mon.store_dir, "/var/log/cpa");
	ck_assert_str_eq(O.mon.backend, "bpf");
	ck_assert_int_eq(O.mon.freq, 49);
	ck_assert_int_eq(O.mon.record_interval, 1);
	ck_assert_int_eq(O.mon.persistent_day, 7);
	ck_assert_str_eq(O.mon.output_prof, "cpa.prof");
	ck_assert_int_eq(O.mon.pid, -1);
	ck_assert_int_eq(O.mon.max_queue_size, 4096);
	ck_assert_int_eq(O.mon.stack_size, 8192);
	ck_assert_int_eq(O.mon.max_cache_size_mb, 1024);
	ck_assert_int_eq(O.mon.max_store_size_mb, 7168);
	ck_assert_int_eq(O.mon.log_print_cycles, 1);
	ck_assert_int_eq(O.duration, 0);
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp"), 0);
	ck_assert_int_eq(O.show.output_num, 1);
	ck_assert_int_eq(O.show.target_pid, -1);
	ck_assert_int_eq(O.show.target_cgroup_id, -1);
	ck_assert_ptr_null(O.show.output_prof);
}
END_TEST

START_TEST(test_value_forms)
{
	ck_assert_int_eq(PARSE(MON, "--freq", "99"), 0);
	ck_assert_int_eq(O.mon.freq, 99);
	ck_assert_int_eq(PARSE(MON, "--freq=98"), 0);
	ck_assert_int_eq(O.mon.freq, 98);
	ck_assert_int_eq(PARSE(MON, "-F", "97"), 0);
	ck_assert_int_eq(O.mon.freq, 97);
	ck_assert_int_eq(PARSE(MON, "-F96"), 0);
	ck_assert_int_eq(O.mon.freq, 96);
	ck_assert_int_eq(PARSE(MON, "--store-dir", "/tmp/a", "-d", "5", "--comm=nginx"), 0);
	ck_assert_str_eq(O.mon.store_dir, "/tmp/a");
	ck_assert_int_eq(O.duration, 5);
	ck_assert_str_eq(O.mon.comm, "nginx");
	/* -r means --record_interval for monitor, --read for show. */
	ck_assert_int_eq(PARSE(MON, "-r", "5"), 0);
	ck_assert_int_eq(O.mon.record_interval, 5);
	ck_assert_int_eq(
		PARSE(SHOW, "-r", "/tmp", "-n", "30", "-B", "10:00:00", "-E", "10:00:30.500"), 0);
	ck_assert_str_eq(O.show.read, "/tmp");
	ck_assert_int_eq(O.show.output_num, 30);
	ck_assert_str_eq(O.show.starttime, "10:00:00");
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "--target_pid", "42", "--target_cgroup_id",
			       "18446744073709551", "--target_cpu", "0-3,8", "--target_comm", "x"),
			 0);
	ck_assert_int_eq(O.show.target_pid, 42);
	ck_assert_int_eq(O.show.target_cgroup_id, 18446744073709551LL);
	ck_assert_str_eq(O.show.target_cpu, "0-3,8");
	ck_assert_int_eq(PARSE(MON, "--record_env_name", "K1,K2", "-p", "1234", "--stack_size",
			       "16384", "-m", "128"),
			 0);
	ck_assert_str_eq(O.mon.record_env_name, "K1,K2");
	ck_assert_int_eq(O.mon.pid, 1234);
	ck_assert_int_eq(O.mon.stack_size, 16384);
	ck_assert_int_eq(O.mon.max_queue_size, 128);
}
END_TEST

START_TEST(test_bool_stray_one)
{
	ck_assert_int_eq(PARSE(SHOW, "--show_range", "1", "--no_pid", "1", "--use_cache", "1",
			       "--show_raw", "1", "-r", "/tmp"),
			 0);
	ck_assert(O.show.show_range && O.show.no_pid && O.show.use_cache && O.show.show_raw);
	ck_assert_int_eq(O.n_args, 0);
	/* 0 after a switch clears it (documented choice). */
	ck_assert_int_eq(PARSE(SHOW, "--no_pid", "1", "--no_pid", "0", "-r", "/tmp"), 0);
	ck_assert(!O.show.no_pid);
	ck_assert_int_eq(PARSE(SHOW, "-p", "1", "-r", "/tmp", "-S"), 0);
	ck_assert(O.show.show_range && O.show.show_thread_name);
	ck_assert_int_eq(PARSE(SHOW, "--no_env=true", "--show_raw=false", "-r", "/tmp"), 0);
	ck_assert(O.show.no_env && !O.show.show_raw);
	/* bundled short switches */
	ck_assert_int_eq(PARSE(MON, "-vK", "1", "-S"), 0);
	ck_assert(O.verbose && O.mon.kernel_stack && O.mon.disable_sym);
	/* anything but 1/0 after a switch is not eaten: here an unexpected argument */
	ck_assert_int_eq(PARSE(MON, "-K", "2"), 0);
	ck_assert_int_eq(O.n_args, 1);
	ck_assert_int_eq(PARSE(MON, "--kernel_stack=maybe"), -EINVAL);
	ASSERT_LOG("--kernel_stack: invalid value 'maybe'");
}
END_TEST

/* --sched_metrics: on by default (the task counters), =full the per-switch
 * programs, =sampled[:N] 1 in N events, =0 off; the last one given wins
 * (docs/metrics.md). */
START_TEST(test_sched_metrics_values)
{
	ck_assert_int_eq(PARSE(MON, "-F", "49"), 0);
	ck_assert(O.mon.sched_metrics && !O.mon.sched_full);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=full"), 0);
	ck_assert(O.mon.sched_metrics && O.mon.sched_full);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=full", "--sched_metrics"), 0);
	ck_assert(O.mon.sched_metrics && !O.mon.sched_full);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=full", "--sched_metrics=cheap"), 0);
	ck_assert(O.mon.sched_metrics && !O.mon.sched_full);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=full", "--sched_metrics", "0"), 0);
	ck_assert(!O.mon.sched_metrics && !O.mon.sched_full);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=FULL", "--sched_metrics=null"), 0);
	ck_assert(O.mon.sched_metrics && !O.mon.sched_full);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=exact"), -EINVAL);
	ASSERT_LOG("--sched_metrics: invalid value 'exact' (1 or cheap, full, sampled[:N], 0)");
	/* sampled[:N]: 1 in N events, 16 unless given; another value clears it */
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampled"), 0);
	ck_assert(O.mon.sched_metrics && !O.mon.sched_full);
	ck_assert_int_eq(O.mon.sched_sample, 16);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampled:64"), 0);
	ck_assert(O.mon.sched_metrics && !O.mon.sched_full);
	ck_assert_int_eq(O.mon.sched_sample, 64);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampled:4", "--sched_metrics=full"), 0);
	ck_assert(O.mon.sched_metrics && O.mon.sched_full);
	ck_assert_int_eq(O.mon.sched_sample, 0);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampled:4", "--sched_metrics", "0"), 0);
	ck_assert(!O.mon.sched_metrics && O.mon.sched_sample == 0);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampled:4", "--sched_metrics=null"), 0);
	ck_assert(O.mon.sched_metrics && O.mon.sched_sample == 0);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampled:1"), -EINVAL);
	ASSERT_LOG("--sched_metrics: invalid value 'sampled:1' (sampled:N, 1 in N events, N "
		   "from 2 to 65536)");
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampled:x"), -EINVAL);
	ck_assert_int_eq(PARSE(MON, "--sched_metrics=sampledx"), -EINVAL);
	ASSERT_LOG("--sched_metrics: invalid value 'sampledx'");
}
END_TEST

START_TEST(test_bad_values_named)
{
	static const struct {
		enum cpa_cmd cmd;
		const char *flag, *val, *msg;
	} cases[] = {
		{MON, "--freq", "0", "--freq: value '0' out of range (must be 1..10000)"},
		{MON, "--freq", "10001", "--freq: value '10001' out of range"},
		{MON, "--freq", "abc", "--freq: invalid value 'abc' (expected an integer)"},
		{MON, "--freq", "49hz", "--freq: invalid value '49hz'"},
		{MON, "--persistent_day", "0",
		 "--persistent_day: value '0' out of range (must be 1..36500): use persistent_day "
		 "> 0"},
		{MON, "--persistent_day", "-1", "--persistent_day: value '-1' out of range"},
		/* no bound above: CPA's words, not the type's limit */
		{SHOW, "--output_num", "0",
		 "--output_num: value '0' out of range (must be a positive integer)"},
		{SHOW, "--target_cgroup_id", "-1",
		 "--target_cgroup_id: value '-1' out of range (must be 0..2^63-1)"},
		{MON, "--record_interval", "0", "--record_interval: value '0' out of range"},
		{MON, "--max_queue_size", "0", "--max_queue_size: value '0' out of range"},
		{MON, "--pid", "-5", "--pid: value '-5' out of range"},
		{MON, "--duration", "x", "--duration: invalid value 'x'"},
		{MON, "--backend", "dtrace",
		 "--backend: invalid value 'dtrace' (must be bpf or perf)"},
		{MON, "--comm", "a-very-long-process-name",
		 "--comm: 'a-very-long-process-name' is longer than 15"},
		{MON, "--record_env_name", "K1,,K2",
		 "--record_env_name: invalid value 'K1,,K2' (empty item"},
		{MON, "--record_env_name", "K=1", "--record_env_name: invalid value 'K=1'"},
		{MON, "--debug_option", "12,x,/tmp/d",
		 "--debug_option: invalid value '12,x,/tmp/d' (expected PID,FREQ,PATH"},
		{MON, "--debug_option", "12,10", "--debug_option: invalid value '12,10'"},
		{MON, "--probe", "kprobe", "--probe: invalid value 'kprobe'"},
		{MON, "--probe", "uprobe:lib:sym", "--probe: invalid value 'uprobe:lib:sym'"},
		{MON, "--probe", "fentry:a:b", "--probe: invalid value 'fentry:a:b'"},
		{MON, "--probe", "fexit:fn+4", "--probe: invalid value 'fexit:fn+4'"},
		{MON, "--probe", "tracepoint:sched", "--probe: invalid value 'tracepoint:sched'"},
		{MON, "--probe", "usdt:/bin/x:name", "--probe: invalid value 'usdt:/bin/x:name'"},
		{MON, "--probe", "uprobe:/bin/x:sym+",
		 "--probe: invalid value 'uprobe:/bin/x:sym+'"},
		{MON, "--probe", "kretprobe:fn+4", "--probe: invalid value 'kretprobe:fn+4'"},
		{MON, "--probe", "uretprobe:/bin/x:fn+4",
		 "--probe: invalid value 'uretprobe:/bin/x:fn+4'"},
		{MON, "--probe_rate", "-1", "--probe_rate: value '-1' out of range"},
		{MON, "--probe_budget", "101", "--probe_budget: invalid value '101'"},
		{MON, "--probe_budget", "0.", "--probe_budget: invalid value '0.'"},
		{MON, "--probe_budget", "-1", "--probe_budget: invalid value '-1'"},
		{MON, "--probe_budget", "1%", "--probe_budget: invalid value '1%'"},
		{SHOW, "--probe_id", "8", "--probe_id: value '8' out of range"},
		/* the kernel keeps 15 bytes of a comm: a longer one would match nothing */
		{SHOW, "--target_comm", "a-very-long-process-name",
		 "--target_comm: 'a-very-long-process-name' is longer than 15 characters (the "
		 "kernel keeps 15 of a comm: use 'a-very-long-pro')"},
		{SHOW, "--output_num", "0", "--output_num: value '0' out of range"},
		{SHOW, "--starttime", "25:00:00",
		 "--starttime: invalid time format '25:00:00' (expected HH:MM:SS"},
		{SHOW, "--endtime", "12:34", "--endtime: invalid time format '12:34'"},
		{SHOW, "--target_cpu", "3-1", "--target_cpu: invalid value '3-1'"},
		{SHOW, "--target_cgroup_id", "-2", "--target_cgroup_id: value '-2' out of range"},
		{MON, "--store_dir", "--offcpu",
		 "--store_dir: missing value (got the option '--offcpu')"},
		{SHOW, "--read", "--no_env", "--read: missing value (got the option '--no_env')"},
		/* a short option of the command where the value was forgotten */
		{MON, "--store_dir", "-K", "--store_dir: missing value (got the option '-K')"},
		{MON, "-o", "-S", "--output_prof: missing value (got the option '-S')"},
		{SHOW, "--output_prof", "-S", "--output_prof: missing value (got the option '-S')"},
	};

	for (unsigned int i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int r = PARSE(cases[i].cmd, cases[i].flag, cases[i].val, "-r", "/tmp");

		if (cases[i].cmd == MON)
			r = PARSE(MON, cases[i].flag, cases[i].val);
		ck_assert_msg(r == -EINVAL, "%s %s accepted", cases[i].flag, cases[i].val);
		ASSERT_LOG(cases[i].msg);
	}
	/* a word that is no option stays a value: a login shell's comm */
	ck_assert_int_eq(PARSE(SHOW, "--target_comm", "-bash", "-r", "/tmp"), 0);
	ck_assert_str_eq(O.show.target_comm, "-bash");
	ck_assert_int_eq(PARSE(SHOW, "--target_comm", "-Z", "-r", "/tmp"), 0);
	ck_assert_int_eq(PARSE(MON, "--freq"), -EINVAL);
	ASSERT_LOG("--freq: missing value (HZ)");
	ck_assert_int_eq(PARSE(MON, "--bogus"), -EINVAL);
	ASSERT_LOG("unknown option '--bogus'");
	ck_assert_msg(!strstr(logbuf, "did you mean"), "%s", logbuf);
	/* a typo: the option meant named, of this command (a dash for an underscore too) */
	ck_assert_int_eq(PARSE(MON, "--duraton", "5"), -EINVAL);
	ASSERT_LOG("unknown option '--duraton' (did you mean '--duration'?)");
	ck_assert_int_eq(PARSE(MON, "--store-dri", "/tmp"), -EINVAL);
	ASSERT_LOG("unknown option '--store-dri' (did you mean '--store_dir'?)");
	ck_assert_int_eq(PARSE(SHOW, "--startime", "10:00:00", "-r", "/tmp"), -EINVAL);
	ASSERT_LOG("unknown option '--startime' (did you mean '--starttime'?)");
	ck_assert_int_eq(PARSE(SHOW, "--target-pdi", "1", "-r", "/tmp"), -EINVAL);
	ASSERT_LOG("unknown option '--target-pdi' (did you mean '--target_pid'?)");
	ck_assert_int_eq(PARSE(MON, "-Z"), -EINVAL);
	ASSERT_LOG("unknown option '-Z'");
	ck_assert_int_eq(PARSE(MON, "--read", "/tmp"), -EINVAL);
	ASSERT_LOG("--read is an option of 'cpa show', not of 'cpa monitor'");
	ck_assert_int_eq(PARSE(SHOW, "-n", "3"), -EINVAL);
	ASSERT_LOG("arg \"read\" required but not present: --read DIR");
	/* CPA's words: perf samples on-CPU only; refused before anything starts. */
	ck_assert_int_eq(PARSE(MON, "--backend", "perf", "--offcpu"), -EINVAL);
	ASSERT_LOG("perf backend only supports on-cpu continuous profiling: --offcpu needs the BPF "
		   "backend");
	ck_assert_int_eq(
		PARSE(MON, "--backend", "perf", "--probe", "tracepoint:sched:sched_switch"),
		-EINVAL);
	ASSERT_LOG("perf backend only supports on-cpu continuous profiling: --probe needs the BPF "
		   "backend");
}
END_TEST

START_TEST(test_stack_size)
{
	static const char *const ok[] = {"4096", "8192", "12288", "65536"};
	static const char *const bad[] = {"0", "4095", "5000", "69632", "131072", "-4096"};

	for (unsigned int i = 0; i < 4; i++) {
		ck_assert_int_eq(PARSE(MON, "--stack_size", ok[i]), 0);
		ck_assert_int_eq(O.mon.stack_size, atol(ok[i]));
	}
	for (unsigned int i = 0; i < 6; i++) {
		ck_assert_msg(PARSE(MON, "--stack_size", bad[i]) == -EINVAL, "%s accepted", bad[i]);
		ck_assert_msg(strstr(logbuf, "--stack_size") && strstr(logbuf, bad[i]), "%s",
			      logbuf);
	}
	PARSE(MON, "--stack_size", "5000");
	ASSERT_LOG("must be a multiple of 4096 in [4096, 65536]");
}
END_TEST

START_TEST(test_cpulist)
{
	uint64_t m[CPA_MAX_CPUS / 64];
	unsigned int max;
	static const char *const bad[] = {"",	"3-1", "1,,2", "a",	 "1-",	 "-1",
					  "1,", ",1",  "8192", "1-8192", "1 ,2", "0x3"};

	ck_assert_int_eq(cpulist__parse("1-3,5,7-9", m, CPA_MAX_CPUS, &max), 0);
	ck_assert_uint_eq(m[0], (1u << 1) | (1u << 2) | (1u << 3) | (1u << 5) | (1u << 7) |
					(1u << 8) | (1u << 9));
	ck_assert_uint_eq(max, 9);
	ck_assert_int_eq(cpulist__parse("0", m, CPA_MAX_CPUS, &max), 0);
	ck_assert_uint_eq(m[0], 1);
	ck_assert_int_eq(cpulist__parse("64-65,8191", m, CPA_MAX_CPUS, &max), 0);
	ck_assert_uint_eq(m[0], 0);
	ck_assert_uint_eq(m[1], 3);
	ck_assert_uint_eq(m[127], 1ull << 63);
	ck_assert_uint_eq(max, 8191);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cpulist__parse(bad[i], m, CPA_MAX_CPUS, NULL) == -EINVAL,
			      "'%s' accepted", bad[i]);
}
END_TEST

/* Every flag once refused as "not supported yet" is built: all parse now. */
START_TEST(test_built_flags_accepted)
{
	/* Built since: accepted now. */
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "-G"), 0);
	ck_assert_int_eq(PARSE(MON, "--bench"), 0);
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "--split_path", "/tmp/s"), 0);
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "--format", "svg", "--diff_base_start",
			       "10:00:00", "--diff_base_end", "10:01:00"),
			 0);
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "--format", "perf"), -EINVAL);
	/* --probe is repeatable: probe id = position; at most CPA_PROBE_MAX. */
	ck_assert_int_eq(PARSE(MON, "--probe", "tracepoint:sched:sched_switch", "--probe",
			       "uprobe:/bin/true:main+0x10", "--probe", "usdt:/bin/x:prov:name",
			       "--probe_rate", "0"),
			 0);
	ck_assert_uint_eq(O.mon.nr_probes, 3);
	ck_assert_str_eq(O.mon.probes[1], "uprobe:/bin/true:main+0x10");
	ck_assert_int_eq(O.mon.probe_rate, 0);
	/* --probe_budget: percent of one CPU, in millionths of it. */
	ck_assert_str_eq(O.mon.probe_budget, "1");
	ck_assert_int_eq(PARSE(MON, "--probe_budget", "0.25"), 0);
	ck_assert_int_eq(cpa_opts__probe_budget_ppm(O.mon.probe_budget), 2500);
	ck_assert_int_eq(cpa_opts__probe_budget_ppm("0"), 0);
	ck_assert_int_eq(cpa_opts__probe_budget_ppm("100"), 1000000);
	ck_assert_int_eq(cpa_opts__probe_budget_ppm("0.0001"), 1);
	ck_assert_int_eq(cpa_opts__probe_budget_ppm("0.00015"), -EINVAL); /* 4 decimals at most */
	ck_assert_int_eq(PARSE(MON, "--probe", "tracepoint:a:b1", "--probe", "tracepoint:a:b2",
			       "--probe", "tracepoint:a:b3", "--probe", "tracepoint:a:b4",
			       "--probe", "tracepoint:a:b5", "--probe", "tracepoint:a:b6",
			       "--probe", "tracepoint:a:b7", "--probe", "tracepoint:a:b8",
			       "--probe", "tracepoint:a:b9"),
			 -EINVAL);
	ASSERT_LOG("--probe: at most 8 probes");
	/* The same probe twice (also spelt differently) would record each hit twice. */
	ck_assert_int_eq(PARSE(MON, "--probe", "tracepoint:a:b", "--probe", "tracepoint:a:b"),
			 -EINVAL);
	ASSERT_LOG("--probe: 'tracepoint:a:b' is the same probe as probe 0 'tracepoint:a:b'");
	ck_assert_int_eq(PARSE(MON, "--probe", "uprobe:/bin/x:f", "--probe", "uprobe:/bin/x:f+0x0"),
			 -EINVAL);
	ASSERT_LOG("--probe: 'uprobe:/bin/x:f+0x0' is the same probe as probe 0 'uprobe:/bin/x:f'");
	ck_assert_int_eq(PARSE(MON, "--probe", "uprobe:/bin/x:f", "--probe", "uretprobe:/bin/x:f",
			       "--probe", "uprobe:/bin/x:f+4"),
			 0);
	ck_assert_int_eq(PARSE(MON, "--backend", "perf"), 0);
	ck_assert_int_eq(PARSE(MON, "--debug_option", "12,10,/tmp/dump"), 0);
	ck_assert_int_eq(PARSE(MON, "--parse_env_values", "a,b"), 0);
	ck_assert_int_eq(PARSE(MON, "--offcpu"), 0);
	ck_assert_int_eq(PARSE(MON, "-u", "--offcpu_min_us", "50", "--offcpu_max_us", "0"), 0);
	ck_assert_int_eq(PARSE(MON, "-u", "--offcpu_state", "SD"), 0);
	ck_assert_int_eq(cpa_opts__offcpu_states(O.mon.offcpu_state),
			 CPA_OFFCPU_STATE_S | CPA_OFFCPU_STATE_D);
	ck_assert_int_eq(PARSE(MON, "-u", "--offcpu_state", "SS"), -EINVAL);
	ASSERT_LOG("--offcpu_state: invalid value 'SS'");
	ck_assert_int_eq(PARSE(MON, "-u", "--offcpu_state", "x"), -EINVAL);
	ck_assert_int_eq(PARSE(MON, "-u", "--offcpu_min_us", "50", "--offcpu_max_us", "10"),
			 -EINVAL);
	ASSERT_LOG("--offcpu_max_us 10 is below --offcpu_min_us 50");
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "--kind", "off"), 0);
	ck_assert_str_eq(O.show.kind, "off");
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "--kind", "offcpu"), -EINVAL);
	ASSERT_LOG("--kind: invalid value 'offcpu' (must be on, off or all)");
	ck_assert_int_eq(PARSE(MON, "--oneshot", "-o", "/tmp/x.prof"), 0);
	ck_assert(O.mon.oneshot);
	ck_assert_str_eq(O.mon.output_prof, "/tmp/x.prof");
	/* Cleared again by "false" in a config, it is not refused. */
	ck_assert_int_eq(PARSE(MON, "--backend", "bpf"), 0);
	ck_assert_int_eq(PARSE(MON, "--offcpu", "0"), 0);
	/* Parsed before refused: the value is already checked. */
	logbuf[0] = 0;
	cpa_opts__free(&O);
	cpa_opts__init(&O);
	O.cmd = MON;
	O.cmd_name = "monitor";
	ck_assert_int_eq(cpa_opts__parse_argv(&O, 2, (char *[]){"--debug_option", "12,10,/tmp/x"}),
			 0);
	ck_assert_int_eq(O.mon.debug_pid, 12);
	ck_assert_int_eq(O.mon.debug_freq, 10);
	ck_assert_str_eq(O.mon.debug_path, "/tmp/x");
}
END_TEST

static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "we");

	ck_assert_ptr_nonnull(f);
	fputs(s, f);
	fclose(f);
}

START_TEST(test_config_file)
{
	char path[PATH_MAX];
	int fd = test_mkstemp(path, sizeof(path), "cli");

	ck_assert_int_ge(fd, 0);
	close(fd);
	write_file(path, "# CPA-style config\n"
			 "freq: 200\n"
			 "\n"
			 "kernel_stack: false\n"
			 "  store_dir :  /tmp/cfg-store   # trailing comment\n"
			 "disable_sym: true\n"
			 "verbose:\n"
			 "record_env_name: POD,APP\n");
	ck_assert_int_eq(PARSE(MON, "--freq", "99", "-K", "--config", path), 0);
	ck_assert_int_eq(O.mon.freq, 200); /* the file overrides the command line */
	ck_assert(!O.mon.kernel_stack);	   /* false clears a switch */
	ck_assert(O.mon.disable_sym);
	ck_assert(O.verbose);
	ck_assert_str_eq(O.mon.store_dir, "/tmp/cfg-store");
	ck_assert_str_eq(O.mon.record_env_name, "POD,APP");

	write_file(path, "freq: 100\nbogus_key: 1\n");
	ck_assert_int_eq(PARSE(MON, "-C", path), -EINVAL);
	ck_assert_msg(strstr(logbuf, path) && strstr(logbuf, ":2: unknown key 'bogus_key'"), "%s",
		      logbuf);
	write_file(path, "freq: 100\npersistant_day: 3\n");
	ck_assert_int_eq(PARSE(MON, "-C", path), -EINVAL);
	ASSERT_LOG(":2: unknown key 'persistant_day' (did you mean 'persistent_day'?)");

	write_file(path, "freq: 0\n");
	ck_assert_int_eq(PARSE(MON, "-C", path), -EINVAL);
	ck_assert_msg(strstr(logbuf, ":1: --freq: value '0' out of range"), "%s", logbuf);

	write_file(path, "stack_size: 5000\n");
	ck_assert_int_eq(PARSE(MON, "-C", path), -EINVAL);
	ASSERT_LOG("--stack_size");

	write_file(path, "just words\n");
	ck_assert_int_eq(PARSE(MON, "-C", path), -EINVAL);
	ASSERT_LOG(":1: expected 'key: value'");

	write_file(path, "read: /tmp\n");
	ck_assert_int_eq(PARSE(MON, "-C", path), -EINVAL);
	ASSERT_LOG(":1: key 'read' is an option of 'cpa show'");

	write_file(path, "offcpu: true\n");
	ck_assert_int_eq(PARSE(MON, "-C", path), 0);
	ck_assert(O.mon.offcpu);

	write_file(path, "show_range: 1\nno_pid: true\nread: /tmp\n");
	ck_assert_int_eq(PARSE(SHOW, "--config", path), 0);
	ck_assert(O.show.show_range && O.show.no_pid);
	ck_assert_str_eq(O.show.read, "/tmp");

	unlink(path);
	ck_assert_int_lt(PARSE(MON, "--config", path), 0);
	ASSERT_LOG("No such file or directory");
}
END_TEST

START_TEST(test_config_hostile)
{
	char path[PATH_MAX];
	int fd = test_mkstemp(path, sizeof(path), "cli");
	FILE *f;

	ck_assert_int_ge(fd, 0);
	close(fd);

	/* A directory: a clear refusal, not an empty config. */
	ck_assert_int_eq(PARSE(MON, "--config", "/tmp"), -EISDIR);
	ASSERT_LOG("--config '/tmp': is a directory");
	/* A device is never read (/dev/zero would grow without bound). */
	ck_assert_int_eq(PARSE(MON, "--config", "/dev/zero"), -EINVAL);
	ASSERT_LOG("--config '/dev/zero': not a regular file");

	/* Over the 1 MiB cap: refused whole, not parsed up to the cap. */
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 80000; i++)
		fputs("freq: 100 # padding\n", f);
	fclose(f);
	ck_assert_int_eq(PARSE(MON, "--config", path), -EFBIG);
	ASSERT_LOG("larger than 1024 KiB");

	/* A NUL byte: the line number, not a line silently cut at the NUL. */
	f = fopen(path, "we");
	ck_assert_ptr_nonnull(f);
	{
		static const char nul[] = "freq: 100\nstore_dir: /tmp/a\0/etc\n";

		ck_assert_uint_eq(fwrite(nul, 1, sizeof(nul) - 1, f), sizeof(nul) - 1);
	}
	fclose(f);
	ck_assert_int_eq(PARSE(MON, "--config", path), -EINVAL);
	ASSERT_LOG(":2: a NUL byte at column 18");

	/* Writable by anyone: anyone would decide how cpa runs. */
	write_file(path, "freq: 100\n");
	ck_assert_int_eq(chmod(path, 0666), 0);
	ck_assert_int_eq(PARSE(MON, "--config", path), -EPERM);
	ASSERT_LOG("writable by anyone (mode 0666)");
	ck_assert_int_eq(chmod(path, 0644), 0);
	ck_assert_int_eq(PARSE(MON, "--config", path), 0);
	ck_assert_int_eq(O.mon.freq, 100);
	/* Owned by someone else (root can make such a file). */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		ck_assert_int_eq(PARSE(MON, "--config", path), -EPERM);
		ASSERT_LOG("owned by uid 65534, not by root or uid 0");
		ck_assert_int_eq(chown(path, 0, 0), 0);
	}
	/* A last line without a newline still counts. */
	write_file(path, "freq: 100\nfreq: 333");
	ck_assert_int_eq(PARSE(MON, "--config", path), 0);
	ck_assert_int_eq(O.mon.freq, 333);
	unlink(path);
}
END_TEST

START_TEST(test_btf_path)
{
	char path[PATH_MAX];
	static const unsigned char fake_btf[] = {0x9f, 0xeb, 1, 0, 24, 0, 0, 0, 0, 0, 0, 0};
	int fd = test_mkstemp(path, sizeof(path), "btf");

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(PARSE(MON, "-b", "/nonexistent/btf"), -ENOENT);
	ASSERT_LOG("--btf_path '/nonexistent/btf': No such file or directory");
	ck_assert_int_eq(write(fd, "hello world\n", 12), 12);
	ck_assert_int_eq(PARSE(MON, "--btf_path", path), -EINVAL);
	ASSERT_LOG("not a BTF file");
	/* Right magic, truncated header: libbpf rejects it. */
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(pwrite(fd, fake_btf, sizeof(fake_btf), 0), (ssize_t)sizeof(fake_btf));
	ck_assert_int_lt(PARSE(MON, "--btf_path", path), 0);
	ASSERT_LOG("invalid BTF");
	close(fd);
	unlink(path);
	if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
		ck_assert_int_eq(PARSE(MON, "--btf_path", "/sys/kernel/btf/vmlinux"), 0);
}
END_TEST

START_TEST(test_time_of_day)
{
	ck_assert(time_of_day_valid("00:00:00"));
	ck_assert(time_of_day_valid("23:59:59"));
	ck_assert(time_of_day_valid("12:00:00.5"));
	ck_assert(time_of_day_valid("12:00:00.123"));
	ck_assert(!time_of_day_valid("24:00:00"));
	ck_assert(!time_of_day_valid("12:60:00"));
	ck_assert(!time_of_day_valid("1:00:00"));
	ck_assert(!time_of_day_valid("12:00:00.1234"));
	ck_assert(!time_of_day_valid("12:00:00."));
	ck_assert(!time_of_day_valid("12:00:00x"));
}
END_TEST

/* ---- the binary ---- */

#define RUN(r, ...) test_run_bin(r, "cpa", (const char *const[]){__VA_ARGS__, NULL})

START_TEST(test_bin_version_usage)
{
	static struct test_run r;
	char want[64];

	RUN(&r, "version");
	snprintf(want, sizeof(want), "cpa %s\n", CPA_VERSION);
	ck_assert_int_eq(r.code, 0);
	ck_assert_str_eq(r.out, want);

	RUN(&r, NULL);
	ck_assert_int_eq(r.code, 2);
	ck_assert_str_eq(r.out, "");
	ck_assert_ptr_nonnull(strstr(r.err, "Usage: cpa <command>"));

	RUN(&r, "frobnicate");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "unknown command 'frobnicate'"));
	ck_assert_ptr_nonnull(strstr(r.err, "Usage: cpa <command>"));

	/* version takes no argument, help one command */
	RUN(&r, "version", "--short");
	ck_assert_int_eq(r.code, 2);
	ck_assert_str_eq(r.out, "");
	ck_assert_ptr_nonnull(strstr(r.err, "unexpected argument '--short'"));
	RUN(&r, "--version", "x");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "unexpected argument 'x'"));
	RUN(&r, "help", "show", "monitor");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "unexpected argument 'monitor'"));

	RUN(&r, "help");
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "monitor"));
	RUN(&r, "help", "show");
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "--read DIR"));
	RUN(&r, "monitor", "--help");
	ck_assert_int_eq(r.code, 0);
	ck_assert_ptr_nonnull(strstr(r.out, "--freq HZ"));
	ck_assert_ptr_nonnull(strstr(r.out, "1..10000"));
	ck_assert_ptr_nonnull(strstr(r.out, "--offcpu"));
}
END_TEST

START_TEST(test_bin_errors)
{
	static struct test_run r;
	char dir[PATH_MAX], store[PATH_MAX + 8];
	regex_t re;

	RUN(&r, "monitor", "--freq", "0");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--freq: value '0' out of range"));
	ck_assert_ptr_nonnull(strstr(r.err, "Try 'cpa monitor --help'."));
	/* CPA's log prefix, which people grep for */
	ck_assert_int_eq(regcomp(&re,
				 "^\\[[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{4}\\] ",
				 REG_EXTENDED | REG_NOSUB),
			 0);
	ck_assert_int_eq(regexec(&re, r.err, 0, NULL, 0), 0);
	regfree(&re);

	RUN(&r, "monitor", "--offcpu_state", "Q");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--offcpu_state: invalid value 'Q'"));

	RUN(&r, "monitor", "extra");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "unexpected argument 'extra'"));

	RUN(&r, "show", "--output_num", "0", "-r", "/tmp");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--output_num"));

	/* Set-up errors of the monitor: exit 1 with the reason. */
	setenv("CPA_STAGE_DIR", "/nonexistent-stage-dir", 1);
	snprintf(store, sizeof(store), "%s/store", test_scratch_in(dir, sizeof(dir), "cli-store"));
	RUN(&r, "monitor", "--store_dir", store);
	unsetenv("CPA_STAGE_DIR");
	ck_assert_int_eq(r.code, 1);
	ck_assert_ptr_nonnull(
		strstr(r.err, "stage 'capture' not usable at '/nonexistent-stage-dir/capture'"));
	RUN(&r, "monitor", "--store_dir", "/etc/hostname/store");
	ck_assert_int_eq(r.code, 1);
	ck_assert_ptr_nonnull(strstr(
		r.err, "--store_dir '/etc/hostname/store': cannot create it: Not a directory"));
	/* an existing file is named as such, not as a directory that cannot be created */
	RUN(&r, "monitor", "--store_dir", "/etc/hostname");
	ck_assert_int_eq(r.code, 1);
	ck_assert_msg(strstr(r.err, "--store_dir '/etc/hostname': exists and is not a directory"),
		      "%s", r.err);

	RUN(&r, "ctl");
	ck_assert_int_eq(r.code, 2);
	RUN(&r, "ctl", "--store_dir", "/nonexistent-store", "status");
	ck_assert_int_eq(r.code, 1);
	ck_assert_ptr_nonnull(strstr(r.err, "no cpa monitor runs on '/nonexistent-store'"));
	/* a store dir of the root given for the root: named as such, with the root */
	{
		char sd[PATH_MAX + 64], seg[PATH_MAX + 96], want[2 * PATH_MAX + 200];
		FILE *f;

		snprintf(sd, sizeof(sd), "%s/cpa_261129", dir);
		ck_assert_int_eq(mkdir(sd, 0750), 0);
		snprintf(seg, sizeof(seg), "%s/seg_000001.cps", sd);
		f = fopen(seg, "we");
		ck_assert_ptr_nonnull(f);
		fclose(f);
		RUN(&r, "ctl", "--store_dir", sd, "status");
		snprintf(want, sizeof(want),
			 "no cpa monitor runs on '%s': it is one store dir, the monitor's "
			 "--store_dir is the root that holds it, '%s'",
			 sd, dir);
		ck_assert_msg(r.code == 1 && strstr(r.err, want), "exit %d: %s", r.code, r.err);
	}
	/* a bad value is a usage error (2) whether a monitor runs or not */
	RUN(&r, "ctl", "--store_dir", "/nonexistent-store", "cost", "abc");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "cost: invalid window 'abc' (seconds, 1..3600)"));
	RUN(&r, "ctl", "--store_dir", "/nonexistent-store", "rate", "symd", "many");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "rate: invalid value 'many'"));
	RUN(&r, "ctl", "--store_dir", "/nonexistent-store", "mem", "symd", "0");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "mem: invalid value '0' (MiB, 1..1048576)"));
	RUN(&r, "ctl", "--store_dir", "/nonexistent-store", "mem", "capture", "64");
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "mem: capture has no cache to cap"));
	/* the storer reads no rate limit: a value it would ignore is refused */
	RUN(&r, "ctl", "--store_dir", "/nonexistent-store", "rate", "storer", "100");
	ck_assert_int_eq(r.code, 2);
	ck_assert_msg(strstr(r.err, "rate: storer applies no rate limit (capture, unwindd or "
				    "symd)"),
		      "%s", r.err);
	/* every usage error of ctl names the verb and ends as the other commands' do */
	{
		static const char *const bad[][4] = {
			{"bogus"},
			{"restart", "nosuch"},
			{"rate", "symd", "many"},
			{"mem", "capture", "64"},
			{"cost", "abc"},
			{"restart"},
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			test_run_bin(&r, "cpa",
				     (const char *const[]){"ctl", "--store_dir",
							   "/nonexistent-store", bad[i][0],
							   bad[i][1], bad[i][2], NULL});
			ck_assert_msg(r.code == 2 && strstr(r.err, "ERROR: ctl") &&
					      strstr(r.err, "\nTry 'cpa ctl --help'.\n"),
				      "ctl %s %s: exit %d: %s", bad[i][0],
				      bad[i][1] ? bad[i][1] : "", r.code, r.err);
		}
	}
}
END_TEST

/* --push URL (and cpa-push --url): a URL no post could reach is refused at the
 * option check, not retried for ever by the keeper. */
START_TEST(test_push_url)
{
	static const char *const good[] = {
		"http://pyroscope:4040", "https://p.example.com",
		"HTTP://h:1/",		 "http://10.0.0.1:4040/pr",
		"http://[::1]:4040",	 "http://u:pw@h:4040",
		"http://h:65535",	 "https://grafana.net/pyroscope/",
	};
	static const char *const bad[][2] = {
		{"", "http:// or https://"},	    {"pyroscope:4040", "http:// or https://"},
		{"ftp://h", "http:// or https://"}, {"http://", "no host"},
		{"http://:4040", "no host"},	    {"http:///ingest", "no host"},
		{"http://h:", "an empty port"},	    {"http://h:0", "1..65535"},
		{"http://h:65536", "1..65535"},	    {"http://h:99999999999999999999", "1..65535"},
		{"http://h:40x0", "1..65535"},	    {"http://h /x", "blank"},
		{"http://h/x\n", "control"},	    {"http://h/?name=x", "no query"},
		{"http://h/#f", "no query"},	    {"http://[]:1", "[address]"},
		{"http://[::1]x", "only :port"},
	};
	char err[128];

	for (unsigned int i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		ck_assert_msg(push_url__check(good[i], err, sizeof(err)) == 0, "'%s' refused: %s",
			      good[i], err);
	for (unsigned int i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(push_url__check(bad[i][0], err, sizeof(err)) == -EINVAL,
			      "'%s' accepted", bad[i][0]);
		ck_assert_msg(!bad[i][1] || strstr(err, bad[i][1]), "'%s': %s", bad[i][0], err);
	}
	{
		char *lng = malloc(PUSH_URL_MAX + 16);

		ck_assert_ptr_nonnull(lng);
		memset(lng, 'a', PUSH_URL_MAX + 15);
		memcpy(lng, "http://h/", 9);
		lng[PUSH_URL_MAX] = 0;
		ck_assert_int_eq(push_url__check(lng, err, sizeof(err)), -EINVAL);
		ck_assert_str_eq(err, "longer than 2047 bytes");
		lng[PUSH_URL_MAX - 1] = 0;
		ck_assert_int_eq(push_url__check(lng, err, sizeof(err)), 0);
		free(lng);
	}
	ck_assert_int_eq(PARSE(MON, "--push", "pyroscope:4040"), -EINVAL);
	ASSERT_LOG("--push: invalid value 'pyroscope:4040' (it must start with http:// or "
		   "https://; e.g. http://pyroscope:4040)");
	ck_assert_int_eq(PARSE(MON, "--push", "http://pyroscope:4040"), 0);
	ck_assert_str_eq(O.mon.push, "http://pyroscope:4040");
	/* --oneshot removes the store cpa-push follows: its last windows would be lost */
	ck_assert_int_eq(PARSE(MON, "--push", "http://pyroscope:4040", "--oneshot"), -EINVAL);
	ASSERT_LOG("--push follows a store, --oneshot writes one profile and removes its store");
}
END_TEST

/* CPA's config files write "null" for an unset value: the default. */
START_TEST(test_null_is_default)
{
	char path[PATH_MAX];
	static struct test_run r;
	int fd = test_mkstemp(path, sizeof(path), "cli");

	ck_assert_int_eq(PARSE(MON, "--btf_path", "null", "--freq", "99", "--freq", "null", "-p",
			       "null", "--probe", "null", "--record_env_name=null"),
			 0);
	ck_assert_ptr_null(O.btf_path);
	ck_assert_int_eq(O.mon.freq, 49);
	ck_assert_int_eq(O.mon.pid, -1);
	ck_assert_ptr_null(O.mon.probe);
	ck_assert_ptr_null(O.mon.record_env_name);
	/* a later null empties the --probe list (the default: no probe), not only the last */
	ck_assert_int_eq(PARSE(MON, "--probe", "tracepoint:syscalls:sys_enter_getppid", "--probe",
			       "kprobe:vfs_read", "--probe", "null", "--probe_rate", "3"),
			 0);
	ck_assert_uint_eq(O.mon.nr_probes, 0);
	ck_assert_ptr_null(O.mon.probe);
	ck_assert(!cpa_opts__given(&O, "probe"));
	ASSERT_LOG("no --probe given: --probe_rate not used");
	/* ... and the ones after it are the list, from probe id 0 */
	ck_assert_int_eq(PARSE(MON, "--probe", "kprobe:vfs_read", "--probe", "null", "--probe",
			       "tracepoint:syscalls:sys_enter_getppid", "--probe",
			       "kprobe:vfs_read"),
			 0);
	ck_assert_uint_eq(O.mon.nr_probes, 2);
	ck_assert_str_eq(O.mon.probes[0], "tracepoint:syscalls:sys_enter_getppid");
	ck_assert_str_eq(O.mon.probes[1], "kprobe:vfs_read");
	/* --debug_option's parts go with it */
	ck_assert_int_eq(PARSE(MON, "--debug_option", "12,3,/tmp/cpa-dbg", "--debug_option=null"),
			 0);
	ck_assert_ptr_null(O.mon.debug_option);
	ck_assert_int_eq(O.mon.debug_pid, 0);
	ck_assert_int_eq(O.mon.debug_freq, 0);
	ck_assert_ptr_null(O.mon.debug_path);

	ck_assert_int_ge(fd, 0);
	close(fd);
	write_file(path, "btf_path: null\n"
			 "probe: null\n"
			 "comm: null\n"
			 "store_dir: null\n"
			 "persistent_day: null\n"
			 "debug_option: null\n"
			 "kernel_stack: null\n");
	ck_assert_int_eq(PARSE(MON, "-s", "/tmp/x", "-P", "3", "-K", "--probe", "kprobe:vfs_read",
			       "--debug_option", "12,3,/tmp/cpa-dbg", "--config", path),
			 0);
	ck_assert_ptr_null(O.btf_path);
	ck_assert_ptr_null(O.mon.probe);
	ck_assert_uint_eq(O.mon.nr_probes, 0);
	ck_assert_int_eq(O.mon.debug_pid, 0);
	ck_assert_ptr_null(O.mon.debug_path);
	ck_assert_ptr_null(O.mon.comm);
	ck_assert_str_eq(O.mon.store_dir, "/var/log/cpa");
	ck_assert_int_eq(O.mon.persistent_day, 7);
	ck_assert(!O.mon.kernel_stack);
	unlink(path);

	/* The binary: a null BTF path is no BTF path (the error is about the store). */
	RUN(&r, "show", "--btf_path", "null", "--read", "/nonexistent-cpa-store");
	ck_assert_int_eq(r.code, 1);
	ck_assert_ptr_null(strstr(r.err, "btf"));
	ck_assert_ptr_nonnull(
		strstr(r.err, "failed to open input file: '/nonexistent-cpa-store': No such file"));
}
END_TEST

/*
 * The parser knows which options were given, a default value given included,
 * on the command line or in --config (where `null` means not given); a given
 * option that the others make unused gets one warning line naming it.
 */
START_TEST(test_given_unused)
{
	char path[] = "/tmp/cpa-test-cli-XXXXXX";
	int fd = mkstemp(path);

	/* -n 1 is the default, and given */
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "-E", "12:00:05"), 0);
	ck_assert(!cpa_opts__given(&O, "output_num"));
	ck_assert(cpa_opts__given(&O, "endtime") && cpa_opts__given(&O, "read"));
	ck_assert_msg(!strstr(logbuf, "not used"), "%s", logbuf);
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "-n", "1", "-E", "12:00:05"), 0);
	ck_assert(cpa_opts__given(&O, "output_num"));
	ASSERT_LOG("WARNING: --endtime 12:00:05 decides the number of records: -n 1 not used");
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "--output_num=7", "--endtime", "12:00:05"), 0);
	ASSERT_LOG("--endtime 12:00:05 decides the number of records: -n 7 not used");
	ck_assert_ptr_null(strchr(strchr(logbuf, '\n') + 1, '\n')); /* one line */
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "-n", "7"), 0);
	ck_assert_str_eq(logbuf, "");
	/* --show_range and --use_cui name what they do not use in the export (once) */
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "-n", "7", "-E", "12:00:05", "-p"), 0);
	ck_assert_str_eq(logbuf, "");

	/* a switch given 0 was given; an option of another command is not */
	ck_assert_int_eq(PARSE(MON, "--offcpu", "0", "-F", "49"), 0);
	ck_assert(cpa_opts__given(&O, "offcpu") && cpa_opts__given(&O, "freq"));
	ck_assert(!cpa_opts__given(&O, "read") && !cpa_opts__given(&O, "no_such_option"));

	/* monitor: -o is --oneshot's, --store_dir is not --oneshot's */
	ck_assert_int_eq(PARSE(MON, "-o", "cpa.prof"), 0);
	ASSERT_LOG("-o is the profile of --oneshot: --output_prof 'cpa.prof' not used without "
		   "--oneshot");
	ck_assert_int_eq(PARSE(MON, "--oneshot", "-s", "/tmp/s", "-o", "/tmp/x.prof"), 0);
	ASSERT_LOG("--oneshot keeps its store next to -o and removes it: --store_dir '/tmp/s' not "
		   "used");
	ck_assert_int_eq(
		PARSE(MON, "--offcpu_min_us", "5", "--offcpu_state=S", "--probe_rate", "3"), 0);
	ASSERT_LOG("off-CPU sampling is off (no --offcpu): --offcpu_min_us, --offcpu_state not "
		   "used");
	ASSERT_LOG("no --probe given: --probe_rate not used");
	ck_assert_int_eq(PARSE(MON, "--offcpu", "--offcpu_min_us", "5", "--oneshot", "-o", "x"), 0);
	ck_assert_str_eq(logbuf, "");

	/* --config sets too; null there puts the default back, not given */
	ck_assert_int_ge(fd, 0);
	close(fd);
	write_file(path, "output_num: 2\n");
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "-E", "12:00:05", "--config", path), 0);
	ASSERT_LOG("-n 2 not used");
	write_file(path, "output_num: null\n");
	ck_assert_int_eq(PARSE(SHOW, "-r", "/tmp", "-n", "3", "-E", "12:00:05", "--config", path),
			 0);
	ck_assert(!cpa_opts__given(&O, "output_num"));
	ck_assert_msg(!strstr(logbuf, "not used"), "%s", logbuf);
	unlink(path);
}
END_TEST

/*
 * cpa show writes nothing into the store it reads: -o onto a segment (or
 * anywhere in a store dir), --sched_csv onto its conf, a root's own files, a
 * --split_path into the root (a second run of the day, read twice) are refused
 * before anything is read, exit 2, the store untouched. Elsewhere is fine.
 */
START_TEST(test_bin_output_in_store)
{
	static struct test_run r;
	char dir[PATH_MAX], root[PATH_MAX + 8], day[PATH_MAX + 24], seg[PATH_MAX + 48];
	char p[PATH_MAX + 48];
	const char *seg_text = "segment bytes\n";
	char *o;

	test_scratch_in(dir, sizeof(dir), "cli-out");
	snprintf(root, sizeof(root), "%s/root", dir);
	snprintf(day, sizeof(day), "%s/cpa_261129", root);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(mkdir(day, 0755), 0);
	snprintf(seg, sizeof(seg), "%s/seg_000001.cps", day);
	write_file(seg, seg_text);
	snprintf(p, sizeof(p), "%s/conf", day);
	write_file(p, "version: 1\n");
	snprintf(p, sizeof(p), "%s/exports", root);
	ck_assert_int_eq(mkdir(p, 0755), 0);

	RUN(&r, "show", "--read", root, "-o", seg);
	ck_assert_int_eq(r.code, 2);
	ck_assert_msg(strstr(r.err, "is inside the store") &&
			      strstr(r.err, "being read: show never writes into a store; write it "
					    "elsewhere"),
		      "%s", r.err);
	ck_assert_ptr_null(strstr(r.out, "Write"));
	RUN(&r, "show", "--read", day, "-o", seg);
	ck_assert_int_eq(r.code, 2);
	snprintf(p, sizeof(p), "%s/new.prof", day);
	RUN(&r, "show", "--read", day, "-o", p);
	ck_assert_int_eq(r.code, 2);
	snprintf(p, sizeof(p), "%s/conf", day);
	RUN(&r, "show", "--read", root, "--sched_csv", p);
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "--sched_csv '"));
	snprintf(p, sizeof(p), "%s/.storer-dict-1", root);
	RUN(&r, "show", "--read", root, "-o", p);
	ck_assert_int_eq(r.code, 2);
	RUN(&r, "show", "--read", root, "--split_path", root);
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "the split would be one of its runs"));
	RUN(&r, "show", "--read", day, "--split_path", root);
	ck_assert_int_eq(r.code, 2);
	ck_assert_ptr_nonnull(strstr(r.err, "is the root of the store"));
	o = test_cmd_out(NULL, "cat %s", seg);
	ck_assert_str_eq(o, seg_text);
	free(o);

	/* beside the store dirs, in a folder of the root, elsewhere: not refused
	 * here (this fake store then fails to read: exit 1) */
	snprintf(p, sizeof(p), "%s/x.prof", root);
	RUN(&r, "show", "--read", root, "-o", p);
	ck_assert_msg(r.code != 2 && !strstr(r.err, "being read"), "%s", r.err);
	snprintf(p, sizeof(p), "%s/exports/x.prof", root);
	RUN(&r, "show", "--read", root, "-o", p);
	ck_assert_msg(r.code != 2 && !strstr(r.err, "being read"), "%s", r.err);
	snprintf(p, sizeof(p), "%s/split", dir);
	RUN(&r, "show", "--read", day, "--split_path", p);
	ck_assert_msg(r.code != 2 && !strstr(r.err, "being read"), "%s", r.err);
	/* a folder of the root read: not one of its runs (cpa_* dirs) */
	snprintf(p, sizeof(p), "%s/split", root);
	RUN(&r, "show", "--read", root, "--split_path", p);
	ck_assert_msg(r.code != 2 && !strstr(r.err, "being read"), "%s", r.err);
	snprintf(p, sizeof(p), "%s/cpa_261130", root);
	RUN(&r, "show", "--read", root, "--split_path", p);
	ck_assert_int_eq(r.code, 2);
	snprintf(p, sizeof(p), "%s/x", day);
	RUN(&r, "show", "--read", root, "--split_path", p);
	ck_assert_int_eq(r.code, 2);
}
END_TEST

/*
 * Should cpa block on a FIFO (open or read), SIGALRM writes it a line that
 * is no valid content, so cpa goes on and the test fails on fifo_timed_out
 * instead of hanging. Re-armed: a file may be opened more than once.
 */
static const char *fifo_path;
static volatile sig_atomic_t fifo_timed_out;

static void fifo_unblock(int sig)
{
	int fd = open(fifo_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	(void)sig;
	fifo_timed_out = 1;
	if (fd >= 0) {
		if (write(fd, "x\n", 2) != 2)
			fifo_timed_out = 2;
		close(fd);
	}
	alarm(1);
}

/* cpa monitor --policy pol: exit 2, "--policy: POL: why" on stderr. */
static void assert_policy_refused(const char *pol, const char *store, const char *why)
{
	static struct test_run r;
	char want[PATH_MAX + 128];

	RUN(&r, "monitor", "--store_dir", store, "--policy", pol, "--duration", "1");
	snprintf(want, sizeof(want), "--policy: %s: %s", pol, why);
	ck_assert_msg(r.code == 2 && strstr(r.err, want), "exit %d: %s", r.code, r.err);
}

/* Files named by --policy, --config, --probe and --btf_path, in the forms of
 * an attack: each refused at the option check (exit 2, one clear line), at once. */
START_TEST(test_bin_input_files)
{
	static struct test_run r;
	struct sigaction sa = {.sa_handler = fifo_unblock, .sa_flags = SA_RESTART};
	char dir[PATH_MAX], pol[PATH_MAX + 64], fifo[PATH_MAX + 64], store[PATH_MAX + 64],
		spec[PATH_MAX + 128];

	test_scratch_in(dir, sizeof(dir), "in");
	snprintf(pol, sizeof(pol), "%s/boost.policy", dir);
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(store, sizeof(store), "%s/store", dir);
	write_file(pol, "policy=boost item=cpu_percent threshold=1 period=3 count=2 freq=10000 "
			"duration=5\n");
	ck_assert_int_eq(chmod(pol, 0644), 0);
	/* The same file, trusted, is accepted. */
	ck_assert_int_eq(PARSE(MON, "--policy", pol), 0);
	/* ... but not where no policy can be evaluated: a usage error (2), before any
	 * store is made */
	{
		static const char *const no[][2] = {
			{"--backend", "perf"}, {"--sched_metrics", "0"}, {"--oneshot", "1"}};
		char want[128];

		for (unsigned int i = 0; i < 3; i++) {
			RUN(&r, "monitor", "--store_dir", store, "--policy", pol, "--duration", "1",
			    no[i][0], no[i][1]);
			snprintf(want, sizeof(want),
				 "--policy needs the scheduler metrics and the BPF backend: not "
				 "with %s",
				 i == 1 ? "--sched_metrics=0" : no[i][0]);
			ck_assert_msg(r.code == 2 && strstr(r.err, want), "%s: exit %d: %s",
				      no[i][0], r.code, r.err);
			ck_assert_int_eq(access(store, F_OK), -1);
		}
	}
	ck_assert_int_eq(PARSE(MON, "--policy", pol, "--sched_metrics=sampled"), 0);

	/* Writable by anyone: anyone decides what cpa (root) boosts. */
	ck_assert_int_eq(chmod(pol, 0666), 0);
	assert_policy_refused(pol, store, "writable by anyone (mode 0666): refused");
	ck_assert_int_eq(chmod(pol, 0644), 0);
	if (geteuid() == 0) {
		/* Owned by nobody. */
		ck_assert_int_eq(chown(pol, 65534, 65534), 0);
		assert_policy_refused(pol, store,
				      "owned by uid 65534, not by root or uid 0: refused");
		/* Root's, but writable by nobody's group. */
		ck_assert_int_eq(chown(pol, 0, 65534), 0);
		ck_assert_int_eq(chmod(pol, 0664), 0);
		assert_policy_refused(pol, store, "writable by group 65534 (mode 0664): refused");
		ck_assert_int_eq(chown(pol, 0, 0), 0);
		ck_assert_int_eq(chmod(pol, 0644), 0);
	}

	/* A FIFO: refused without blocking, whichever flag names it. */
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	fifo_path = fifo;
	fifo_timed_out = 0;
	ck_assert_int_eq(sigaction(SIGALRM, &sa, NULL), 0);
	snprintf(spec, sizeof(spec), "uprobe:%s:main", fifo);
	{
		const char *const flags[][2] = {{"--policy", fifo},
						{"--probe", spec},
						{"--config", fifo},
						{"--btf_path", fifo}};

		for (unsigned int i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
			alarm(5);
			RUN(&r, "monitor", "--store_dir", store, flags[i][0], flags[i][1],
			    "--duration", "1");
			alarm(0);
			ck_assert_msg(!fifo_timed_out, "%s FIFO: cpa blocked on it (exit %d: %s)",
				      flags[i][0], r.code, r.err);
			ck_assert_msg(r.code == 2 && strstr(r.err, fifo) &&
					      strstr(r.err, "not a regular file (a FIFO): refused"),
				      "%s FIFO: exit %d: %s", flags[i][0], r.code, r.err);
		}
	}
	signal(SIGALRM, SIG_DFL);
	cpa_opts__free(&O);
	unlink(fifo);
	unlink(pol);
	rmdir(store);
	ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

/* A full disk before start (a tmpfs filled up; root only): cpa monitor says
 * why, and leaves no empty pid file that `cpa ctl` would trip on. */
START_TEST(test_bin_pidfile_full_disk)
{
	static struct test_run r;
	char dir[PATH_MAX], path[PATH_MAX + 64];
	static char chunk[4096];
	int fd;

	if (geteuid() != 0)
		return;
	fd = test_tmpfs(dir, sizeof(dir), "full", "size=64k,mode=0755");
	if (fd < 0) {
		fprintf(stderr, "test_bin_pidfile_full_disk: tmpfs: %s: skipped\n", strerror(-fd));
		return;
	}
	snprintf(path, sizeof(path), "%s/fill", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	while (write(fd, chunk, sizeof(chunk)) > 0)
		;
	close(fd);
	RUN(&r, "monitor", "--store_dir", dir, "--duration", "1");
	snprintf(path, sizeof(path), "%s/.cpa-monitor.pid", dir);
	fd = access(path, F_OK);
	ck_assert_int_eq(umount2(dir, MNT_DETACH), 0);
	rmdir(dir);
	ck_assert_msg(r.code == 1 && strstr(r.err, ".cpa-monitor.pid': No space left on device"),
		      "exit %d: %s", r.code, r.err);
	ck_assert_msg(fd < 0, "an empty pid file was left behind");
}
END_TEST

/* ---- as another user (root only: `test_cli nonroot`, else 77) ---- */

/* cpa show --read rd run as nobody: its stderr (2>&1), exit code in *rc. */
static char *show_as_nobody(const char *rd, int *rc)
{
	const char *b = getenv("CPA_BUILD_DIR");

	return test_cmd_out(rc,
			    "setpriv --reuid=65534 --regid=65534 --clear-groups '%s/bin/cpa' show "
			    "--read '%s' 2>&1",
			    b ? b : ".", rd);
}

/*
 * A store nobody may read (a root-owned 0700 store dir): cpa show says which
 * dir and "Permission denied" in one line, exit 1, not that there is no store.
 */
START_TEST(test_bin_store_not_readable)
{
	char nr_dir[PATH_MAX], root[PATH_MAX + 8], day[PATH_MAX + 32], want[PATH_MAX + 128], *o;
	int rc;

	test_scratch_in(nr_dir, sizeof(nr_dir), "nr");
	ck_assert_int_eq(chmod(nr_dir, 0755), 0); /* nobody walks in */
	snprintf(root, sizeof(root), "%s/root", nr_dir);
	snprintf(day, sizeof(day), "%s/cpa_261129", root);
	ck_assert_int_eq(mkdir(root, 0755), 0);
	ck_assert_int_eq(mkdir(day, 0700), 0);
	snprintf(want, sizeof(want), "%s/seg_000001.cps", day);
	write_file(want, "segment bytes\n");
	snprintf(want, sizeof(want), "failed to open input file: '%s': Permission denied", day);
	for (int i = 0; i < 2; i++) {
		/* the root, then the store dir itself */
		o = show_as_nobody(i ? day : root, &rc);
		ck_assert_msg(rc == 1 && strstr(o, want) && !strstr(o, "no cpa store") &&
				      !strstr(o, "store root"),
			      "exit %d: %s", rc, o);
		ck_assert_msg(strchr(o, '\n') == o + strlen(o) - 1, "not one line: %s", o);
		free(o);
	}
	/* a root nobody may not list: named, with the reason */
	ck_assert_int_eq(chmod(root, 0700), 0);
	snprintf(want, sizeof(want), "failed to open input file: '%s': Permission denied", root);
	o = show_as_nobody(root, &rc);
	ck_assert_msg(rc == 1 && strstr(o, want), "exit %d: %s", rc, o);
	free(o);
}
END_TEST

static Suite *cli_suite(void)
{
	Suite *s = suite_create("cli");
	TCase *tc = TEST_TCASE(s, "parser", test_defaults, test_value_forms, test_bool_stray_one,
			       test_sched_metrics_values, test_bad_values_named, test_stack_size,
			       test_cpulist, test_built_flags_accepted, test_config_file,
			       test_config_hostile, test_btf_path, test_time_of_day,
			       test_null_is_default, test_given_unused, test_push_url);

	tcase_add_checked_fixture(tc, setup, teardown);
	TEST_TCASE(s, "binary", test_bin_version_usage, test_bin_errors, test_bin_input_files,
		   test_bin_pidfile_full_disk, test_bin_output_in_store);
	return s;
}

/* nobody can run the built cpa here (setpriv, a build dir others may enter) */
static bool nobody_runs_cpa(void)
{
	const char *b = getenv("CPA_BUILD_DIR");
	char cmd[PATH_MAX + 128];

	if (geteuid() != 0)
		return false;
	snprintf(cmd, sizeof(cmd),
		 "setpriv --reuid=65534 --regid=65534 --clear-groups '%s/bin/cpa' version "
		 ">/dev/null 2>&1",
		 b ? b : ".");
	return system(cmd) == 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "nonroot")) {
		Suite *s = suite_create("cli_nonroot");

		if (!nobody_runs_cpa()) {
			fprintf(stderr, "needs root, setpriv and a cpa nobody may run: skipped\n");
			return TEST_SKIP;
		}
		TEST_TCASE(s, "nonroot", test_bin_store_not_readable);
		return test_run_suite(s);
	}
	return test_run_suite(cli_suite());
}
