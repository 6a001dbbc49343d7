/* SPDX-License-Identifier: MIT */
/*
 * symd: ask a HotSpot JVM for its perf map (jvm.c), through the attach
 * protocol jcmd speaks, without starting a JVM.
 */
#ifndef CPA_SYMD_JVM_H
#define CPA_SYMD_JVM_H

#include <stdbool.h>
#include <stdint.h>

/* Does pid map libjvm.so (a HotSpot JVM)? proc: "/proc" or a test's. */
bool jvm__is_jvm(const char *proc, uint32_t pid);

/*
 * Start `jcmd PID Compiler.perfmap` (JDK 17+: the JVM writes its code cache
 * to /tmp/perf-NSPID.map in its mount namespace) in a short-lived child that
 * takes the JVM's euid/egid (the JVM accepts peers of its own uid or root),
 * and wait up to wait_ns (0: not) for it. 1: the map is written, 0: started
 * (the child gives up after a few seconds: read the map later), -EBUSY (too
 * many requests still running), -EPERM (the JVM does not catch SIGQUIT: -Xrs,
 * where SIGQUIT would kill it), -errno. nspid: pid in the JVM's namespace.
 */
int jvm__request_perfmap(const char *proc, uint32_t pid, uint32_t nspid, uint64_t wait_ns);

/* Reap finished requests (called by jvm__request_perfmap too). */
void jvm__reap(void);

#endif /* CPA_SYMD_JVM_H */
