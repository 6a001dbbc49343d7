// SPDX-License-Identifier: MIT
/*
 * bench_fidelity: cpa's stacks next to `perf record --call-graph dwarf` on
 * real programs nobody here wrote (docs/bench.md, issue 10).
 *
 * For each program of --programs: the program is forked and held at a gate
 * (a pipe read) so its pid is known; `cpa monitor --pid PID` and
 * `perf record -p PID --call-graph dwarf -e cpu-clock` both attach to it;
 * then the gate opens (the child execs the program) and both sample the same
 * process at the same time. Afterwards `cpa show` and `perf script` are
 * folded the same way and printed per program:
 *
 *   - samples (cpa, perf; perf's own count when `perf script` aborted);
 *   - complete share: the stack holds the process or thread start
 *     (_start, __libc_start_main(_impl), __libc_start_call_main,
 *     start_thread, clone3, clone);
 *   - the share whose leaf is named (not "[unknown]");
 *   - cpa's stop reasons ([unwind stopped: ...], [degraded ...]) as shares;
 *   - the balance: what capture read (+ the kernel's drops), the store's loss
 *     rows, and what the store lacks of it (unaccounted);
 *   - top-10 self (leaf) shares side by side and the largest difference
 *     (frames without a symbol compare as "[unknown]": cpa names them
 *     lib+0xSTART, perf [unknown]);
 *   - cpa's CPU (all its processes, schedstat) and BPF time per sample.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macro.h"
#include "common/usage.h"
#include "benchutil.h"
#include "fold.h"
#include "overhead.h"
#include "tests/fixtures/go/burn_src.h"
#include "tests/workload/jit_src.h"

#define TOP 10

struct prog {
	const char *name;
	const char *cmd; /* sh -c, exec'd: the pid stays the one cpa and perf watch */
};

/* perf is attached to the running program, after its exec (see run_one()) */
static bool side_late(const struct prog *pg)
{
	return !strncmp(pg->name, "node", 4) || !strncmp(pg->name, "java", 4);
}

/* sh -c beside the program once the gate opens ({pid}: its pid), or NULL: a JVM
 * writes its perf map for perf when jcmd asks (cpa asks it itself) */
static const char *side_cmd(const struct prog *pg)
{
	return strncmp(pg->name, "java", 4)
		       ? NULL
		       : "sleep 10; jcmd {pid} Compiler.perfmap > /dev/null 2>&1";
}

/* perf's --call-graph: Go by frame pointer (Go keeps them), JIT code too (V8 keeps
 * them; perf has no CFI for it), the rest dwarf */
static const char *perf_cg(const struct prog *pg)
{
	return strncmp(pg->name, "go", 2) && strncmp(pg->name, "node", 4) &&
			       strncmp(pg->name, "java", 4)
		       ? "dwarf"
		       : "fp";
}

/* {in} is replaced by the generated text file, {dir} by --dir. */
static const struct prog progs[] = {
	{"gzip", "exec gzip -9 -c < {in} > /dev/null"},
	{"xz", "exec xz -9 -T1 -c < {in}.head > /dev/null"},
	{"bzip2", "exec bzip2 -9 -c < {in} > /dev/null"},
	{"perl", "exec perl -e 'my ($n, %h) = (0); while ($n++ < 500000) "
		 "{ $h{$_ % 1000} .= \"x\" for 1..100; %h = () if length($h{7}) > 400 }'"},
	{"sqlite3", "exec sqlite3 :memory: 'CREATE TABLE t(a, b); WITH RECURSIVE c(x) AS "
		    "(SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1500000) INSERT INTO t "
		    "SELECT x, hex(randomblob(8)) FROM c; CREATE INDEX ti ON t(b); SELECT count(*) "
		    "FROM t WHERE b > \"8\";' > /dev/null"},
	{"openssl", "exec openssl speed -seconds 2 -bytes 16384 -evp aes-128-gcm rsa2048 "
		    "> /dev/null 2>&1"},
	/* C++ -O2 without frame pointers (libstdc++ map, string, sort), built by the bench */
	{"cxx", "exec {dir}/cxx-nofp > /dev/null"},
	{"python3", "exec python3 -c 'import json; d = [{\"k\": i, \"v\": str(i) * 3} for i in "
		    "range(300000)]; [json.loads(json.dumps(d)) for _ in range(3)]'"},
	/* Go (tests/fixtures/go/burn_src.h), built by the bench when go is there; perf
	 * walks Go by frame pointer, as Go keeps them */
	{"go", "exec {dir}/go-burn 6 > /dev/null"},
	{"go-stripped", "exec {dir}/go-burn-s 6 > /dev/null"},
	/* JIT runtimes (tests/workload/jit_src.h), perf with perf maps: node writes its
	 * own; java runs with no flags (cpa asks the JVM), jcmd writes the map for perf
	 * (side_cmd()) */
	{"node", "cd {dir} && exec node --perf-basic-prof hot.js 15 > /dev/null"},
	{"java", "exec java -cp {dir} Hot 15 > /dev/null"},
	{"java-fp", "exec java -XX:+PreserveFramePointer -cp {dir} Hot 15 > /dev/null"},
};

/* 60 rounds of: 50,000 words into a std::map, its keys sorted (~3 s of CPU) */
static const char cxx_src[] =
	"#include <algorithm>\n#include <cstdio>\n#include <map>\n#include <string>\n"
	"#include <vector>\n"
	"static std::string word(unsigned x) { std::string s; do { s += char('a' + x % 26); "
	"x /= 26; } while (x); return s; }\n"
	"__attribute__((noinline)) static void fill(std::map<std::string, unsigned> &m, "
	"unsigned n, unsigned seed) { for (unsigned i = 0; i < n; i++) m[word(seed * "
	"2654435761u + i * 40503u)]++; }\n"
	"__attribute__((noinline)) static unsigned long sortsum(std::vector<std::string> &v) "
	"{ std::sort(v.begin(), v.end()); unsigned long s = 0; for (auto &x : v) s += "
	"x.size(); return s; }\n"
	"int main() { unsigned long t = 0; for (unsigned r = 0; r < 60; r++) { "
	"std::map<std::string, unsigned> m; fill(m, 50000, r); std::vector<std::string> v; "
	"for (auto &kv : m) v.push_back(kv.first); t += sortsum(v); } printf(\"%lu\\n\", t); "
	"return 0; }";

static pid_t spawn_sh(const char *cmd)
{
	pid_t pid = fork();

	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* The stage pids of a monitor: its children, by comm. */
static void stage_pids(pid_t mon, pid_t *ret, int *n, pid_t *capture)
{
	char path[128], buf[512], *tok, *save = NULL;
	FILE *f;

	*n = 0;
	*capture = 0;
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", mon, mon);
	f = fopen(path, "r");
	if (!f || !fgets(buf, sizeof(buf), f)) {
		if (f)
			fclose(f);
		return;
	}
	fclose(f);
	for (tok = strtok_r(buf, " \n", &save); tok && *n < 8; tok = strtok_r(NULL, " \n", &save)) {
		char comm[64] = "";
		pid_t p = atoi(tok);

		snprintf(path, sizeof(path), "/proc/%d/comm", p);
		f = fopen(path, "r");
		if (f) {
			if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "capture", 7))
				*capture = p;
			fclose(f);
		}
		ret[(*n)++] = p;
	}
}

static uint64_t agent_cpu_ns(pid_t mon, const pid_t *st, int n)
{
	struct cost_proc p;
	uint64_t sum = 0;
	int i;

	if (cost_proc_read(mon, &p) == 0)
		sum += p.cpu_ns;
	for (i = 0; i < n; i++)
		if (cost_proc_read(st[i], &p) == 0)
			sum += p.cpu_ns;
	return sum;
}

struct opts {
	const char *programs;
	const char *bin;
	const char *dir;
	int freq;
	int stack_size;
};

/* capture's "stopped: N samples, ... M lost in the kernel" lines in the monitor's log, summed
 * over its lives: what capture read from the BPF ring, and what the kernel dropped. */
static void capture_counts(const char *log, double *samples, double *rb_lost)
{
	char line[1024], *p;
	FILE *f = fopen(log, "re");

	*samples = *rb_lost = 0;
	while (f && fgets(line, sizeof(line), f)) {
		p = strstr(line, "stopped: ");
		if (!p || !strstr(line, "lost in the kernel"))
			continue;
		*samples += strtod(p + 9, NULL);
		p = strstr(p, " degraded, ");
		if (p)
			*rb_lost += strtod(p + 11, NULL);
	}
	if (f)
		fclose(f);
}

/* perf's own count of its samples (`perf report --stats`), when `perf script` aborted on
 * the recording (perf 6.1 on kernel 6.18, docs/bench.md): -1 if none. */
static double perf_stat_samples(const char *pdata)
{
	char cmd[4400], line[256];
	double n = -1;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "perf report -i '%s' --stats 2>/dev/null", pdata);
	f = popen(cmd, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (n < 0 && strstr(line, "SAMPLE events:"))
			n = strtod(strchr(line, ':') + 1, NULL);
	pclose(f);
	return n;
}

/* Of a side's samples: those whose leaf names a function (not "[unknown]", not a marker
 * alone), and (cpa) those in loss rows. */
static double named_share(const struct fold_side *a)
{
	double n = 0;

	for (int i = 0; i < a->self.n; i++)
		if (strcmp(a->self.names[i], "[unknown]"))
			n += a->self.counts[i];
	return a->samples ? 100 * n / a->samples : NAN;
}

static double lost_rows(const struct fold_side *a)
{
	double n = 0;

	for (int i = 0; i < a->stops.n; i++)
		if ((strstr(a->stops.names[i], "LOST") || strstr(a->stops.names[i], "lost")) &&
		    !strstr(a->stops.names[i], "WHILE DOWN") &&
		    !strstr(a->stops.names[i], "while_down"))
			n += a->stops.counts[i];
	return n;
}

static int run_one(const struct opts *o, const struct prog *pg, const char *in)
{
	char cmd[4096], d[16384], store[4200], pdata[4200], pscript[4200], prof[4200];
	static struct fold_side c, p;
	static struct tally top;
	struct cost_bpf_set bset = {0};
	struct cost_bpf b0 = {0}, b1 = {0};
	pid_t child, mon, perf = 0, side = 0, st[8], cap = 0;
	uint64_t cpu0, cpu1;
	int gate[2], nst = 0, i, j, status;
	char stack[32] = "";
	const char *s;
	size_t k = 0;
	double maxd = 0, cap_smp, cap_rb;

	/* the command with {in} filled */
	for (s = pg->cmd; *s && k < sizeof(cmd) - 256; s++) {
		if (!strncmp(s, "{in}", 4)) {
			k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, "%s", in);
			s += 3;
		} else if (!strncmp(s, "{dir}", 5)) {
			k += (size_t)snprintf(cmd + k, sizeof(cmd) - k, "%s", o->dir);
			s += 4;
		} else {
			cmd[k++] = *s;
		}
	}
	cmd[k] = 0;
	snprintf(d, 1024, "%s/%s", o->dir, pg->name);
	bench_sh("rm -rf '%s' && mkdir -p '%s'", d, d);
	snprintf(store, sizeof(store), "%.1000s/store", d);
	snprintf(pdata, sizeof(pdata), "%.1000s/perf.data", d);
	snprintf(pscript, sizeof(pscript), "%.1000s/perf.txt", d);
	snprintf(prof, sizeof(prof), "%.1000s/cpa.prof", d);

	if (pipe(gate) < 0)
		return -errno;
	child = fork();
	if (child == 0) {
		char x;

		close(gate[1]);
		if (read(gate[0], &x, 1) != 1)
			_exit(1);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(gate[0]);
	if (o->stack_size)
		snprintf(stack, sizeof(stack), "--stack_size %d", o->stack_size);
	snprintf(d, sizeof(d), "exec %s/cpa monitor --store_dir '%s' -F %d --pid %d %s 2>%s.log",
		 o->bin, store, o->freq, child, stack, store);
	mon = spawn_sh(d);
	snprintf(d, sizeof(d),
		 "exec perf record -q -B -N -e cpu-clock -F %d --call-graph %s -p %d -o '%s' "
		 "2>/dev/null >/dev/null",
		 o->freq, perf_cg(pg), child, pdata);
	/* -B -N: no build-id pass nor cache update at the end (perf 6.1
	 * aborted there, leaving a zero data size). On kernel 6.18 perf 6.1's
	 * `perf script` may still abort (build-id.c:1010, its vDSO copy):
	 * then the perf column is empty (docs/bench.md). It aborts so on every
	 * recording of a node or java that began before the exec, not on one
	 * attached to the running runtime: those start perf 0.3 s after the gate. */
	if (!side_late(pg))
		perf = spawn_sh(d);
	sleep(3); /* both attached: the stages RUNNING, perf's events open */
	/* capture's programs loaded (the verifier may take seconds on a busy host) */
	for (i = 0; i < 40 && !bset.n; i++) {
		stage_pids(mon, st, &nst, &cap);
		if (cap)
			cost_bpf_find(cap, &bset);
		if (!bset.n)
			usleep(250 * 1000);
	}
	cost_bpf_read(&bset, &b0);
	cpu0 = agent_cpu_ns(mon, st, nst);
	if (write(gate[1], "x", 1) != 1)
		return -EIO;
	close(gate[1]);
	if (side_late(pg)) {
		usleep(300 * 1000);
		perf = spawn_sh(d);
	}
	if (side_cmd(pg)) {
		/* {pid} filled: the program's pid */
		char sc[256];

		for (s = side_cmd(pg), k = 0; *s && k < sizeof(sc) - 32; s++) {
			if (!strncmp(s, "{pid}", 5)) {
				k += (size_t)snprintf(sc + k, sizeof(sc) - k, "%d", child);
				s += 4;
			} else {
				sc[k++] = *s;
			}
		}
		sc[k] = 0;
		side = spawn_sh(sc);
	}
	waitpid(child, &status, 0);
	if (side > 0)
		waitpid(side, NULL, 0);
	cost_bpf_read(&bset, &b1);
	cpu1 = agent_cpu_ns(mon, st, nst);
	sleep(2); /* the last samples through the pipeline */
	kill(mon, SIGINT);
	waitpid(mon, NULL, 0);
	waitpid(perf, NULL, 0);

	snprintf(d, sizeof(d), "%s/cpa", o->bin);
	ovh_cpa_export(d, store, prof);
	bench_sh("perf script -i '%s' -F comm,pid,tid,ip,sym,dso > '%s' 2>/dev/null", pdata,
		 pscript);
	memset(&c, 0, sizeof(c));
	memset(&p, 0, sizeof(p));
	fold_cpa_file(prof, &c);
	fold_perf_file(pscript, &p);

	printf("\n== %s: %s\n", pg->name, cmd);
	printf("  %-34s %12s %7s %-5s\n", "", "cpa", "perf", perf_cg(pg));
	printf("  %-34s %12.0f %12.0f\n", "samples", c.samples, p.samples);
	if (!p.samples)
		printf("  %-34s %12s %12.0f\n", "perf's samples (report --stats)", "-",
		       perf_stat_samples(pdata));
	printf("  %-34s %11.2f%% %11.2f%%\n", "complete (rooted at process/thread start)",
	       c.samples ? 100 * c.complete / c.samples : NAN,
	       p.samples ? 100 * p.complete / p.samples : NAN);
	printf("  %-34s %11.2f%% %11.2f%%\n", "leaf named (not [unknown])", named_share(&c),
	       named_share(&p));
	for (i = 0; i < c.stops.n; i++)
		printf("  %-34s %11.2f%% %12s\n", c.stops.names[i],
		       100 * c.stops.counts[i] / c.samples, "-");
	/* the balance: what capture read from the BPF ring (+ the kernel's drops) against
	 * the store's rows, samples and loss rows alike */
	snprintf(d, sizeof(d), "%.4100s.log", store);
	capture_counts(d, &cap_smp, &cap_rb);
	printf("  %-34s %12.0f %12s\n", "captured (+ lost in the kernel)", cap_smp + cap_rb, "-");
	printf("  %-34s %12.0f %12s\n", "in loss rows", lost_rows(&c), "-");
	printf("  %-34s %12.0f %12s\n", "unaccounted (captured - stored)",
	       cap_smp + cap_rb - c.samples, "-");
	/* top-10 self of either side, by the larger share */
	for (j = 0; j < 2; j++) {
		const struct fold_side *a = j ? &p : &c;
		bool used[FOLD_MAX_NAMES] = {false};

		for (i = 0; i < TOP; i++) {
			int best = tally_top(&a->self, used);

			if (best < 0)
				break;
			tally_add(&top, a->self.names[best], 0);
		}
	}
	printf("  top self shares:\n");
	for (i = 0; i < top.n; i++) {
		double sc = c.samples ? 100 * tally_get(&c.self, top.names[i]) / c.samples : 0;
		double sp = p.samples ? 100 * tally_get(&p.self, top.names[i]) / p.samples : 0;

		printf("    %-32.32s %11.2f%% %11.2f%%\n", top.names[i], sc, sp);
		maxd = fmax(maxd, fabs(sc - sp));
	}
	printf("  %-34s %11.2f points\n", "max self-share difference", maxd);
	printf("  %-34s %9.1f us\n", "cpa CPU per sample (all processes)",
	       c.samples ? (double)(cpu1 - cpu0) / 1e3 / c.samples : NAN);
	printf("  %-34s %9.2f us\n", "cpa BPF time per sample",
	       b1.sample_cnt > b0.sample_cnt ? (double)(b1.sample_ns - b0.sample_ns) / 1e3 /
						       (double)(b1.sample_cnt - b0.sample_cnt)
					     : NAN);
	fflush(stdout);
	tally_free(&top);
	fold_side_free(&c);
	fold_side_free(&p);
	return 0;
}

/* A workload's source into dir/name (its path in path): 0, or -1. */
static int put_src(const char *dir, const char *name, const char *text, char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "%s/%s", dir, name);
	f = fopen(path, "we");
	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) ? -1 : 0;
}

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: bench_fidelity [--programs LIST] [--freq HZ] [--stack_size BYTES]\n"
		   "                      [--bin DIR] [--dir DIR]\n"
		   "Runs each program under cpa monitor --pid and perf record --call-graph dwarf\n"
		   "at once and compares their stacks. Root. Programs (default all):");
	for (i = 0; i < ARRAY_SIZE(progs); i++)
		fprintf(f, " %s", progs[i].name);
	fprintf(f, "\n");
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"programs", required_argument, NULL, 'p'},
					   {"freq", required_argument, NULL, 'F'},
					   {"stack_size", required_argument, NULL, 's'},
					   {"bin", required_argument, NULL, 'b'},
					   {"dir", required_argument, NULL, 'd'},
					   {"help", no_argument, NULL, 'h'},
					   {}};
	char self[1024], bin[1024], in[1200], cxx[1200];
	struct opts o = {.freq = 99, .dir = "/tmp/bench_fidelity"};
	ssize_t n;
	size_t i;
	int c, stats_fd;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	self[n > 0 ? n : 0] = 0;
	snprintf(bin, sizeof(bin), "%.*s",
		 (int)(strrchr(self, '/') ? strrchr(self, '/') - self : 0), self);
	o.bin = bin;
	while ((c = getopt_or_usage(argc, argv, "h", lo, usage)) != -1) {
		switch (c) {
		case 'p':
			o.programs = optarg;
			break;
		case 'F':
			o.freq = atoi(optarg);
			break;
		case 's':
			o.stack_size = atoi(optarg);
			break;
		case 'b':
			o.bin = optarg;
			break;
		case 'd':
			o.dir = optarg;
			break;
		}
	}
	if (geteuid() != 0) {
		fprintf(stderr, "bench_fidelity: needs root (BPF, perf -p)\n");
		return 77;
	}
	/* bpf_stats on while this fd lives */
	stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
	bench_sh("mkdir -p '%s'", o.dir);
	snprintf(in, sizeof(in), "%s/input.txt", o.dir);
	/* ~50 MB of text that compresses like text; xz gets its first 5 MB */
	bench_sh("test -s '%s' || seq -f 'sample %%g of the unwind frame in a ring' 1 1400000 | "
		 "awk '{ print $0, NR * 7919 %% 10007 }' > '%s'; head -c 5000000 '%s' > '%s.head'",
		 in, in, in, in);
	/* the C++ workload: -O2, no frame pointers, libstdc++ inlined into it */
	if (put_src(o.dir, "cxx-nofp.cc", cxx_src, cxx, sizeof(cxx)) == 0)
		bench_sh("test -x '%s/cxx-nofp' || g++ -O2 -fomit-frame-pointer -o '%s/cxx-nofp' "
			 "'%s'",
			 o.dir, o.dir, cxx);
	/* the Go workload, normal and stripped, in a private build cache */
	if (put_src(o.dir, "go-burn.go", go_burn_src, cxx, sizeof(cxx)) == 0)
		bench_sh(
			"command -v go > /dev/null || exit 0; cd '%s' && export GOCACHE='%s/gocache' "
			"GOFLAGS=-mod=mod GOPROXY=off CGO_ENABLED=0 && { test -x go-burn || go build "
			"-o go-burn go-burn.go; } && { test -x go-burn-s || go build -ldflags='-s -w' "
			"-o go-burn-s go-burn.go; }",
			o.dir, o.dir);
	/* the JIT workloads */
	put_src(o.dir, "hot.js", jit_node_src, cxx, sizeof(cxx));
	if (put_src(o.dir, "Hot.java", jit_java_src, cxx, sizeof(cxx)) == 0)
		bench_sh(
			"command -v javac > /dev/null || exit 0; cd '%s' && { test -s Hot.class || "
			"javac -d . Hot.java; }",
			o.dir);
	printf("bench_fidelity: %d Hz, stack_size %s, cpa from %s\n", o.freq,
	       o.stack_size ? "set" : "default", o.bin);
	for (i = 0; i < ARRAY_SIZE(progs); i++) {
		if (o.programs) {
			const char *p = strstr(o.programs, progs[i].name);
			size_t l = strlen(progs[i].name);

			if (!p || (p != o.programs && p[-1] != ',') || (p[l] && p[l] != ','))
				continue;
		}
		run_one(&o, &progs[i], in);
	}
	if (stats_fd >= 0)
		close(stats_fd);
	return 0;
}
