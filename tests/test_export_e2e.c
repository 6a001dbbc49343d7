// SPDX-License-Identifier: MIT
/*
 * Exports of a real run, read by the tools people use: `cpa monitor` (real
 * BPF) records while cpa-workload runs, then `cpa show` writes folded,
 * pprof and SVG, and we check them with `go tool pprof` (-top, -traces, -raw,
 * -diff_base), xmllint and headless Chromium: the workload's hot function
 * has the same share everywhere as in the folded export (+-0.5 points), the
 * mappings carry the build-ids of the workload's binaries, the SVG's script
 * runs without an error and its search reports the same share.
 *
 * Needs root and BTF (exit 77 otherwise), go (golang-go), xmllint
 * (libxml2-utils) and chromium: scripts/deps.sh installs them.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"

static char bin[1024], dir[PATH_MAX];

/* Share (percent) of folded samples whose stack holds ";fn;". */
static double folded_share(const char *prof, const char *fn)
{
	char pat[128];
	double all = 0, hit = 0;
	const char *l = prof;

	snprintf(pat, sizeof(pat), ";%s;", fn);
	while (l && *l) {
		const char *eol = strchr(l, '\n'), *sp;
		size_t len = eol ? (size_t)(eol - l) : strlen(l);
		char *line = strndup(l, len);
		double v;

		sp = strrchr(line, ' ');
		ck_assert_ptr_nonnull(sp);
		v = strtod(sp + 1, NULL);
		all += v;
		if (strstr(line, pat))
			hit += v;
		free(line);
		l = eol ? eol + 1 : NULL;
	}
	ck_assert(all > 0);
	return 100.0 * hit / all;
}

/* cum% of fn in `go tool pprof -top` output ("flat flat% sum% cum cum% name"). */
static double pprof_cum(const char *top, const char *fn)
{
	const char *l = top;

	while (l && *l) {
		const char *eol = strchr(l, '\n');
		size_t len = eol ? (size_t)(eol - l) : strlen(l);
		char *line = strndup(l, len), name[256];
		char f1[32], f2[32], f3[32], f4[32], f5[32];

		if (sscanf(line, "%31s %31s %31s %31s %31s %255s", f1, f2, f3, f4, f5, name) == 6 &&
		    !strcmp(name, fn)) {
			free(line);
			return strtod(f5, NULL);
		}
		free(line);
		l = eol ? eol + 1 : NULL;
	}
	ck_abort_msg("%s not in pprof -top:\n%.1500s", fn, top);
	return 0;
}

/* Build ID of an ELF file, from readelf -n. */
static void build_id(const char *path, char *buf, size_t len)
{
	int rc;
	char *o = test_cmd_out(&rc, "readelf -n '%s' | sed -n 's/.*Build ID: //p'", path);

	ck_assert_int_eq(rc, 0);
	o[strcspn(o, "\n")] = 0;
	ck_assert_msg(strlen(o) >= 16, "no build id in %s", path);
	snprintf(buf, len, "%s", o);
	free(o);
}

/*
 * --pc_locations: the hot function has several Locations, each at a file
 * offset (address - mapping start + mapping offset) inside the function's
 * symbol in the library (whose text has file offset == vaddr, checked).
 */
static void pc_locations(const char *raw, const char *lib, const char *fn)
{
	unsigned long long sym, size, start = 0, off, addr;
	const char *p = strstr(raw, "\nMappings\n"), *l;
	char pat[64], *o;
	int rc, map = -1, n = 0;

	o = test_cmd_out(&rc, "nm -S --defined-only '%s' | awk '$4 == \"%s\" {print $1, $2}'", lib,
			 fn);
	ck_assert_int_eq(sscanf(o, "%llx %llx", &sym, &size), 2);
	free(o);
	o = test_cmd_out(&rc, "readelf -lW '%s' | awk '$1 == \"LOAD\" && / E / {print $2, $3}'",
			 lib);
	ck_assert_msg(sscanf(o, "%llx %llx", &off, &addr) == 2 && off == addr,
		      "text of %s not at file offset == vaddr: %.1500s", lib, o);
	free(o);
	/* "27: 0x1a000000000/0x1b000000000/0x0 /path/libcpawl-fp.so BUILDID [FN]" */
	ck_assert_ptr_nonnull(p);
	for (l = p + 10; l && *l && *l != '\n'; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		unsigned long long st, lim, fo;
		int id;
		char path[512];

		if (sscanf(l, "%d: %llx/%llx/%llx %511s", &id, &st, &lim, &fo, path) == 5 &&
		    strstr(path, "/libcpawl-fp.so")) {
			map = id;
			start = st - fo;
		}
	}
	ck_assert_msg(map > 0, "no mapping of %s", lib);
	/* Locations: "1363: 0x1a000001123 M=27 wl_lib_spin :0 s=0" */
	snprintf(pat, sizeof(pat), " M=%d %s ", map, fn);
	for (l = strstr(raw, pat); l; l = strstr(l + 1, pat)) {
		const char *b = l;

		while (b > raw && b[-1] != ' ')
			b--;
		addr = strtoull(b, NULL, 16);
		off = addr - start;
		ck_assert_msg(off >= sym && off < sym + size,
			      "%s location at offset 0x%llx, outside [0x%llx, 0x%llx)", fn, off,
			      sym, sym + size);
		n++;
	}
	fprintf(stderr, "export e2e: %d pc locations in %s\n", n, fn);
	ck_assert_msg(n >= 2, "%s has %d locations: not per pc", fn, n);
}

static void need(const char *tool)
{
	int rc;
	char *o = test_cmd_out(&rc, "command -v %s", tool);

	free(o);
	ck_assert_msg(rc == 0, "%s is missing: run scripts/deps.sh", tool);
}

static pid_t monitor(int seconds, int freq)
{
	char cpa[1100], d[16], f[16];
	pid_t pid;

	snprintf(cpa, sizeof(cpa), "%s/cpa", bin);
	snprintf(d, sizeof(d), "%d", seconds);
	snprintf(f, sizeof(f), "%d", freq);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* --pc_locations: pprof Locations at the sampled instructions */
		execl(cpa, cpa, "monitor", "--store_dir", dir, "-F", f, "--duration", d,
		      "--pc_locations", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* First record's time of day, from --show_range; *ret_n: the seconds up to the
 * last one (asking past the end is an error, as in CPA). */
static int first_tod_n(int *ret_n)
{
	int rc, h, m, s, h1, m1, s1;
	char *o = test_cmd_out(&rc, "%s/cpa show --read %s --show_range", bin, dir);
	const char *p = strstr(o, "From [ ");

	ck_assert_msg(rc == 0 && p, "show_range: %.1500s", o);
	ck_assert_int_eq(
		sscanf(p, "From [ %d:%d:%d%*[.0-9] ] to [ %d:%d:%d", &h, &m, &s, &h1, &m1, &s1), 6);
	free(o);
	*ret_n = (h1 * 3600 + m1 * 60 + s1) - (h * 3600 + m * 60 + s) + 1;
	return h * 3600 + m * 60 + s;
}

static void export(int from, int n, const char *out, const char *extra)
{
	int rc;
	char *o = test_cmd_out(&rc, "%s/cpa show --read %s -B %02d:%02d:%02d -n %d -o %s/%s %s",
			       bin, dir, from / 3600, from / 60 % 60, from % 60, n, dir, out,
			       extra ? extra : "");

	ck_assert_msg(rc == 0 && strstr(o, "Write  [ "), "cpa show -o %s: %.1500s", out, o);
	free(o);
}

START_TEST(test_export_real_run)
{
	char wl[1100], lib[1100], bid[128], url[PATH_MAX + 256], *o, *prof, *top, *svg;
	double fshare, share;
	int rc, t0, status, n_all;
	pid_t mon;

	need("go");
	need("xmllint");
	need("chromium");
	need("readelf");
	test_scratch_in(dir, sizeof(dir), "export-e2e");

	mon = monitor(10, 199);
	sleep(2);
	o = test_cmd_out(&rc, "%s/cpa-workload --seconds 6 --threads 1 --depth 6", bin);
	ck_assert_int_eq(rc, 0);
	free(o);
	ck_assert_int_eq(waitpid(mon, &status, 0), mon);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	t0 = first_tod_n(&n_all);
	export(t0, n_all, "all.prof", NULL);
	export(t0, n_all, "all.pb.gz", NULL);
	export(t0, n_all, "all.svg", NULL);
	export(t0, n_all, "all.out", "--format speedscope");
	o = test_cmd_out(&rc, "head -c 200 %s/all.out", dir);
	ck_assert_ptr_nonnull(strstr(o, "speedscope"));
	free(o);

	prof = test_cmd_out(&rc, "cat %s/all.prof", dir);
	fshare = folded_share(prof, "wl_lib_spin");
	ck_assert_msg(fshare > 10, "workload's hot function at %.2f%% only", fshare);

	/* pprof -top: the same share (default sample type cpu/nanoseconds). */
	top = test_cmd_out(&rc, "go tool pprof -top -nodecount=200 %s/all.pb.gz 2>&1", dir);
	ck_assert_msg(rc == 0, "pprof -top: %.1500s", top);
	share = pprof_cum(top, "wl_lib_spin");
	fprintf(stderr, "export e2e: wl_lib_spin folded %.2f%%, pprof %.2f%%\n", fshare, share);
	ck_assert_msg(share > fshare - 0.5 && share < fshare + 0.5, "pprof %.2f%% vs folded %.2f%%",
		      share, fshare);
	free(top);
	/* -sample_index=samples: counts, the same share again */
	top = test_cmd_out(
		&rc, "go tool pprof -top -sample_index=samples -nodecount=200 %s/all.pb.gz 2>&1",
		dir);
	ck_assert_int_eq(rc, 0);
	share = pprof_cum(top, "wl_lib_spin");
	ck_assert(share > fshare - 0.5 && share < fshare + 0.5);
	free(top);

	/* -traces: the workload's chain, leaf first */
	o = test_cmd_out(&rc, "go tool pprof -traces %s/all.pb.gz 2>&1", dir);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(strstr(o, "wl_lib_spin\n") && strstr(o, "wl_path_a\n") &&
			      strstr(o, "wl_main_loop\n"),
		      "chain missing in -traces");
	free(o);

	/* labels per sample; mappings carry the build-ids of the workload's binaries */
	o = test_cmd_out(&rc, "go tool pprof -raw %s/all.pb.gz 2>&1", dir);
	ck_assert_int_eq(rc, 0);
	ck_assert_msg(strstr(o, "kind:[oncpu] process:[cpa-workload]") && strstr(o, " cpu:[") &&
			      strstr(o, " tid:[") && strstr(o, "cgroup:["),
		      "labels missing in -raw");
	snprintf(wl, sizeof(wl), "%s/cpa-workload", bin);
	build_id(wl, bid, sizeof(bid));
	ck_assert_msg(strstr(o, bid) != NULL, "build id %s of %s not in the mappings", bid, wl);
	snprintf(lib, sizeof(lib), "%s/../lib/libcpawl-fp.so", bin);
	build_id(lib, bid, sizeof(bid));
	ck_assert_msg(strstr(o, bid) != NULL, "build id %s of %s not in the mappings", bid, lib);
	pc_locations(o, lib, "wl_lib_spin");
	free(o);

	/* source lines from the binaries' DWARF: -lines names wl_lib.c:LINE, -list
	 * prints the hot function's source (from /: pprof trims a source path at the
	 * base name of its cwd); the header's File: is the host's (mapping 1) */
	o = test_cmd_out(&rc, "cd / && go tool pprof -top -lines -nodecount=400 %s/all.pb.gz 2>&1",
			 dir);
	ck_assert_msg(rc == 0 && strstr(o, "wl_lib_spin ") && strstr(o, "/wl_lib.c:") &&
			      !strstr(o, "File: libc") && !strstr(o, "File: cpa-workload"),
		      "pprof -lines: %.1500s", o);
	free(o);
	o = test_cmd_out(&rc, "cd / && go tool pprof -list '^wl_lib_spin$' %s/all.pb.gz 2>&1", dir);
	ck_assert_msg(rc == 0 && strstr(o, "ROUTINE ======================== wl_lib_spin in ") &&
			      strstr(o, "wl_lib_spin("),
		      "pprof -list wl_lib_spin: %.1500s", o);
	free(o);

	/* -diff_base between two exports of the run's two halves */
	export(t0, 5, "a.pb.gz", NULL);
	export(t0 + 5, n_all - 5, "b.pb.gz", NULL);
	o = test_cmd_out(&rc, "go tool pprof -top -diff_base %s/a.pb.gz %s/b.pb.gz 2>&1", dir, dir);
	ck_assert_msg(rc == 0 && strstr(o, "wl_lib_spin"), "pprof -diff_base (rc %d): %.1500s", rc,
		      o);
	free(o);

	/* SVG: well-formed, the hot frame's share in its titles */
	o = test_cmd_out(&rc, "xmllint --noout %s/all.svg 2>&1", dir);
	ck_assert_msg(rc == 0, "xmllint: %.1500s", o);
	free(o);
	svg = test_cmd_out(&rc, "cat %s/all.svg", dir);
	{
		const char *p = svg;
		double sum = 0;

		while ((p = strstr(p, "<title>wl_lib_spin ("))) {
			const char *e = strstr(p, "%)</title>"), *c;

			ck_assert_ptr_nonnull(e);
			for (c = e; c[-1] != ' '; c--)
				;
			sum += strtod(c, NULL);
			p = e;
		}
		fprintf(stderr, "export e2e: wl_lib_spin in SVG titles %.2f%%\n", sum);
		ck_assert_msg(sum > fshare - 0.5 && sum < fshare + 0.5,
			      "svg %.2f%% vs folded %.2f%%", sum, fshare);
	}
	free(svg);

	/* headless Chromium: the script runs (marker set), no error on the console,
	 * and its search reports the share of the matched frames */
	snprintf(url, sizeof(url), "file://%s/all.svg#search=%%5Ewl_lib_spin%%24", dir);
	o = test_cmd_out(
		&rc,
		"timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic "
		"--no-first-run --disable-background-networking --disable-component-update "
		"--disable-sync --user-data-dir=%s/chromium --enable-logging=stderr --v=0 "
		"--dump-dom '%s' 2>%s/chromium.log",
		dir, url, dir);
	ck_assert_msg(rc == 0, "chromium exited %d", rc);
	ck_assert_msg(strstr(o, "data-cpa-ready=\"") != NULL, "the SVG's script did not run");
	{
		const char *p = strstr(o, "data-cpa-matched=\"");

		ck_assert_ptr_nonnull(p);
		share = strtod(p + 18, NULL);
		fprintf(stderr, "export e2e: SVG search matched %.2f%%\n", share);
		ck_assert(share > fshare - 0.5 && share < fshare + 0.5);
	}
	free(o);
	o = test_cmd_out(&rc,
			 "grep -E 'Uncaught|SyntaxError|TypeError|ReferenceError' %s/chromium.log",
			 dir);
	ck_assert_msg(rc == 1, "script errors in Chromium:\n%.1500s", o);
	free(o);

	/* --split_path: the window as a new store; its folded export is the same file */
	o = test_cmd_out(&rc, "%s/cpa show --read %s -B %02d:%02d:%02d -n 4 --split_path %s/split",
			 bin, dir, (t0 + 2) / 3600, (t0 + 2) / 60 % 60, (t0 + 2) % 60, dir);
	ck_assert_msg(rc == 0 && strstr(o, "Split "), "split: %.1500s", o);
	free(o);
	export(t0 + 2, 4, "window.prof", NULL);
	o = test_cmd_out(&rc,
			 "%s/cpa show --read %s/split -B %02d:%02d:%02d -n 4 -o %s/split.prof && "
			 "cmp %s/window.prof %s/split.prof",
			 bin, dir, (t0 + 2) / 3600, (t0 + 2) / 60 % 60, (t0 + 2) % 60, dir, dir,
			 dir);
	ck_assert_msg(rc == 0, "split store reads back differently: %.1500s", o);
	free(o);
	o = test_cmd_out(&rc, "ls -A %s/split", dir);
	ck_assert_msg(!strstr(o, ".cpa-lock"), "a split left in its root: %s", o);
	free(o);

	/* onto a full 256 KiB tmpfs: cpa show fails, the previous files are whole,
	 * no temporary file, no store dir and no .cpa-lock of the split */
	o = test_cmd_out(&rc,
			 "m=%s/full && mkdir $m && mount -t tmpfs -o size=256k tmpfs $m && "
			 "echo old > $m/x.prof && echo old > $m/x.svg && "
			 "{ dd if=/dev/zero of=$m/filler bs=4k 2>/dev/null; true; } && "
			 "for f in x.prof x.svg; do %s/cpa show --read %s -B %02d:%02d:%02d -n %d "
			 "-o $m/$f >/dev/null 2>&1 && echo \"$f written\"; done; "
			 "%s/cpa show --read %s -B %02d:%02d:%02d -n %d --split_path $m/split "
			 ">/dev/null 2>&1 && echo split written; "
			 "cat $m/x.prof $m/x.svg; echo in root: $(ls -A $m); "
			 "echo in split: $(ls -A $m/split 2>/dev/null); umount $m",
			 dir, bin, dir, t0 / 3600, t0 / 60 % 60, t0 % 60, n_all, bin, dir,
			 t0 / 3600, t0 / 60 % 60, t0 % 60, n_all);
	ck_assert_msg(!strstr(o, "written") && strstr(o, "old\nold\n") &&
			      (strstr(o, "in root: filler split x.prof x.svg\n") ||
			       strstr(o, "in root: filler x.prof x.svg\n")) &&
			      strstr(o, "in split:\n"),
		      "exports onto a full disk: %.1500s", o);
	free(o);

	free(prof);
	test_rm_rf(dir);
}
END_TEST

static int tod_now(void)
{
	time_t t = time(NULL);
	struct tm tm;

	localtime_r(&t, &tm);
	return tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec;
}

/* The "base A%, new B%, +-C points" of the first frame titled name in a diff SVG. */
static void diff_title(const char *svg, const char *name, double *a, double *b, double *c)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "<title>%s (base ", name);
	p = strstr(svg, pat);
	ck_assert_msg(p != NULL, "no diff frame %s", name);
	ck_assert_int_eq(sscanf(p + strlen(pat), "%lf%%, new %lf%%, %lf points", a, b, c), 3);
}

/* Sums of the counts of folded lines holding ";fn;" (all when fn is NULL): the base
 * column of a diff (0 for a plain .prof) and the last one. */
static void diff_counts(const char *prof, const char *fn, long *base, long *now)
{
	char pat[128];
	const char *l = prof;

	*base = *now = 0;
	snprintf(pat, sizeof(pat), ";%s;", fn ? fn : "");
	while (l && *l) {
		const char *eol = strchr(l, '\n');
		char *line = strndup(l, eol ? (size_t)(eol - l) : strlen(l)), *sp;

		sp = strrchr(line, ' ');
		ck_assert_ptr_nonnull(sp);
		*sp = 0;
		if (!fn || strstr(line, pat)) {
			/* "stack; BASE" is left of a diff line, "stack;" of a plain one */
			char *semi = strrchr(line, ';');

			if (semi && semi[1] == ' ')
				*base += strtol(semi + 2, NULL, 10);
			*now += strtol(sp + 1, NULL, 10);
		}
		free(line);
		l = eol ? eol + 1 : NULL;
	}
}

/*
 * The hot path switches: first the workload runs path a alone (--threads 0),
 * then path a and path b (--threads 1). The diff of the second range against
 * the first shows wl_path_b grown and wl_path_a shrunk (opposite signs), by
 * what the two ranges exported apart say (the right magnitudes), in the
 * folded diff, the red/blue SVG and go tool pprof -diff_base.
 */
START_TEST(test_export_diff_switch)
{
	double fa0, fa1, fb0, fb1, a, b, c;
	long base, now, tb, tn;
	int rc, status, b0, b1, n0, n1;
	char extra[256], comm[16], only[64], *o, *p0, *p1, *svg, *fd;
	pid_t mon;

	need("go");
	test_scratch_in(dir, sizeof(dir), "export-e2e");
	/* Our own copy under our own name: the monitor sees the whole machine, where
	 * other tests may run cpa-workload, or this test in another build tree at the
	 * same time; --target_comm keeps to ours (a name of this run's, 15 bytes). */
	snprintf(comm, sizeof(comm), "wlsw%d", (int)(getpid() % 10000000));
	snprintf(only, sizeof(only), "--target_comm %s", comm);
	o = test_cmd_out(&rc, "cp %s/cpa-workload %s/%s", bin, dir, comm);
	ck_assert_int_eq(rc, 0);
	free(o);
	mon = monitor(15, 199);
	sleep(2);
	b0 = tod_now() + 1;
	o = test_cmd_out(&rc, "%s/%s --seconds 5 --threads 0", dir, comm);
	ck_assert_int_eq(rc, 0);
	free(o);
	b1 = tod_now() - 1;
	n0 = tod_now() + 1;
	o = test_cmd_out(&rc, "%s/%s --seconds 5 --threads 1 --depth 6", dir, comm);
	ck_assert_int_eq(rc, 0);
	free(o);
	n1 = tod_now() - 1;
	ck_assert_int_eq(waitpid(mon, &status, 0), mon);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ck_assert(b1 > b0 && n1 > n0);

	/* the two ranges apart, then the diff; --no_pid: the two runs are two pids */
	snprintf(extra, sizeof(extra), "--no_pid %s", only);
	export(b0, b1 - b0, "base.prof", extra);
	export(n0, n1 - n0, "new.prof", extra);
	export(b0, b1 - b0, "base.pb.gz", only);
	export(n0, n1 - n0, "new.pb.gz", only);
	snprintf(extra, sizeof(extra),
		 "--no_pid %s --diff_base_start %02d:%02d:%02d --diff_base_end %02d:%02d:%02d",
		 only, b0 / 3600, b0 / 60 % 60, b0 % 60, b1 / 3600, b1 / 60 % 60, b1 % 60);
	export(n0, n1 - n0, "diff.prof", extra);
	export(n0, n1 - n0, "diff.svg", extra);

	p0 = test_cmd_out(&rc, "cat %s/base.prof", dir);
	p1 = test_cmd_out(&rc, "cat %s/new.prof", dir);
	fa0 = folded_share(p0, "wl_path_a");
	fa1 = folded_share(p1, "wl_path_a");
	fb0 = folded_share(p0, "wl_path_b");
	fb1 = folded_share(p1, "wl_path_b");
	fprintf(stderr, "export e2e diff: path a %.2f%% -> %.2f%%, path b %.2f%% -> %.2f%%\n", fa0,
		fa1, fb0, fb1);
	ck_assert(fb0 == 0 && fb1 > 5 && fa1 < fa0);

	/* folded diff: the columns are the two ranges, stack by stack */
	fd = test_cmd_out(&rc, "cat %s/diff.prof", dir);
	diff_counts(fd, NULL, &base, &now);
	diff_counts(p0, NULL, &tb, &tn); /* a plain .prof has one count: read it as "now" */
	(void)tb;
	ck_assert_int_eq(base, tn);
	diff_counts(p1, NULL, &tb, &tn);
	ck_assert_int_eq(now, tn);
	diff_counts(fd, "wl_path_b", &base, &now);
	ck_assert(base == 0 && now > 0);

	/* SVG: shares of each range's total, opposite signs, the right magnitudes
	 * (within 1.5 points of the folded export: the samples of a path cut
	 * short, more of them on a loaded host, stand apart in the flamegraph). */
	svg = test_cmd_out(&rc, "cat %s/diff.svg", dir);
	diff_title(svg, "wl_path_a", &a, &b, &c);
	fprintf(stderr, "export e2e diff svg: wl_path_a base %.2f new %.2f %+.2f\n", a, b, c);
	ck_assert_msg(a > fa0 - 1.5 && a < fa0 + 1.5 && b > fa1 - 1.5 && b < fa1 + 1.5 && c < 0,
		      "svg a: %.2f -> %.2f (%+.2f), folded %.2f -> %.2f", a, b, c, fa0, fa1);
	diff_title(svg, "wl_path_b", &a, &b, &c);
	fprintf(stderr, "export e2e diff svg: wl_path_b base %.2f new %.2f %+.2f\n", a, b, c);
	ck_assert_msg(a == 0 && b > fb1 - 1.5 && b < fb1 + 1.5 && c > 0,
		      "svg b: %.2f -> %.2f (%+.2f), folded -> %.2f", a, b, c, fb1);
	ck_assert_ptr_nonnull(strstr(svg, "red: grew, blue: shrank"));

	/* go tool pprof -diff_base: path b grew by its samples in the new range */
	o = test_cmd_out(
		&rc,
		"go tool pprof -top -sample_index=samples -diff_base %s/base.pb.gz %s/new.pb.gz 2>&1",
		dir, dir);
	ck_assert_msg(rc == 0, "pprof -diff_base: %.1500s", o);
	{
		double cum = pprof_cum(o, "wl_path_b");

		ck_assert_msg(cum > 0, "wl_path_b did not grow in pprof -diff_base:\n%.1500s", o);
	}
	free(o);
	free(p0);
	free(p1);
	free(fd);
	free(svg);
	test_rm_rf(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("export_e2e");
	TCase *tc = tcase_create("export_e2e");
	const char *b = getenv("CPA_BUILD_DIR");

	if (geteuid() != 0 || access("/sys/kernel/btf/vmlinux", R_OK) != 0 || !b) {
		fprintf(stderr, "skip: needs root and BTF\n");
		return TEST_SKIP;
	}
	snprintf(bin, sizeof(bin), "%s/bin", b);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, test_export_real_run);
	tcase_add_test(tc, test_export_diff_switch);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
