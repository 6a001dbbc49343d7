/* SPDX-License-Identifier: MIT */
/*
 * JIT workloads with a known hot function (tests/test_jit.c, bench/fidelity.c):
 * hotLoop, an arithmetic loop called 50 times per work() call, for argv's
 * seconds of the process's CPU time (so a loaded machine does not shrink the
 * hot phase next to start-up). The JIT may inline hotLoop into work: a
 * sample names the hot code when hotLoop or work is on its stack.
 *
 * node --perf-basic-prof hot.js SECS; javac Hot.java && java -cp DIR Hot SECS.
 */
#ifndef CPA_TESTS_WORKLOAD_JIT_SRC_H
#define CPA_TESTS_WORKLOAD_JIT_SRC_H

static const char jit_node_src[] = "'use strict';\n"
				   "function hotLoop(n) {\n"
				   "  let x = 0;\n"
				   "  for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003;\n"
				   "  return x;\n"
				   "}\n"
				   "function work() {\n"
				   "  let s = 0;\n"
				   "  for (let k = 0; k < 50; k++) s += hotLoop(20000);\n"
				   "  return s;\n"
				   "}\n"
				   "const cpu = 1e6 * (Number(process.argv[2]) || 5);\n"
				   "let acc = 0;\n"
				   "for (;;) {\n"
				   "  const u = process.cpuUsage();\n"
				   "  if (u.user + u.system >= cpu) break;\n"
				   "  for (let r = 0; r < 10; r++) acc += work();\n"
				   "}\n"
				   "if (acc === 42) console.log(acc);\n";

static const char jit_java_src[] =
	"public class Hot {\n"
	"    static long hotLoop(long n) {\n"
	"        long x = 0;\n"
	"        for (long i = 0; i < n; i++) x = (x * 31 + i) % 1000003;\n"
	"        return x;\n"
	"    }\n"
	"    static long work() {\n"
	"        long s = 0;\n"
	"        for (int k = 0; k < 50; k++) s += hotLoop(20000);\n"
	"        return s;\n"
	"    }\n"
	"    public static void main(String[] a) {\n"
	"        long cpu = 1000000000L * (a.length > 0 ? Integer.parseInt(a[0]) : 5), acc = 0;\n"
	"        ProcessHandle.Info me = ProcessHandle.current().info();\n"
	"        while (me.totalCpuDuration().map(d -> d.toNanos()).orElse(cpu) < cpu) {\n"
	"            for (int r = 0; r < 10; r++) acc += work();\n"
	"            me = ProcessHandle.current().info();\n"
	"        }\n"
	"        if (acc == 42) System.out.println(acc);\n"
	"    }\n"
	"}\n";

#endif /* CPA_TESTS_WORKLOAD_JIT_SRC_H */
