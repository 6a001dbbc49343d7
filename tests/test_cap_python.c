// SPDX-License-Identifier: MIT
/*
 * capture's Python process table (capture/cap_python.h) against real BPF maps
 * of the program's shapes (py_procs, py_slots, py_execs), without the program:
 *  - the forks and execs of processes that are not Python cost no map
 *    syscall (a churning host's new processes);
 *  - a child of a Python process gets its parent's entry, an exec of a
 *    Python process into something else drops its entry, and so does a fork
 *    into a reused pid;
 *  - an exec named python... may have been entered by the exec program: its
 *    fork is looked up;
 *  - after lost mapping events the map's pids are looked up again.
 * Root + BPF maps, else 77.
 */
#include <bpf/bpf.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bpf/profile.h"
#include "capture/cap_python.h"
#include "test_util.h"

struct maps {
	int procs, slots, execs;
};

static int maps_open(struct maps *m)
{
	m->procs = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "py_procs", 4,
				  sizeof(struct cpa_bpf_py_proc), CPA_BPF_PY_PROCS, NULL);
	m->slots = bpf_map_create(BPF_MAP_TYPE_ARRAY, "py_slots", 4, 4, CPA_BPF_PY_SLOTS, NULL);
	m->execs = bpf_map_create(BPF_MAP_TYPE_HASH, "py_execs", sizeof(struct cpa_bpf_py_exec),
				  sizeof(struct cpa_bpf_py_proc), CPA_BPF_PY_EXECS, NULL);
	return m->procs >= 0 && m->slots >= 0 && m->execs >= 0 ? 0 : -errno;
}

static void maps_close(struct maps *m)
{
	close(m->procs);
	close(m->slots);
	close(m->execs);
}

static void fork_ev(struct cap_python *p, uint32_t pid, uint32_t ppid)
{
	struct cpa_map_event ev = {.kind = CPA_MAP_FORK, .pid = pid, .tid = pid, .ppid = ppid};

	cap_python__map_event(p, &ev, "");
}

static void exec_ev(struct cap_python *p, uint32_t pid, const char *comm)
{
	struct cpa_map_event ev = {.kind = CPA_MAP_EXEC, .pid = pid, .tid = pid};

	cap_python__map_event(p, &ev, comm);
}

/* What the exec program does for an interpreter it knows (py_exec()). */
static void bpf_enter(const struct maps *m, uint32_t pid, uint64_t runtime)
{
	struct cpa_bpf_py_proc e = {.runtime = runtime, .version = 0x030b, .status = CPA_BPF_PY_OK};
	uint32_t slot = pid % CPA_BPF_PY_SLOTS;

	ck_assert_int_eq(bpf_map_update_elem(m->procs, &pid, &e, BPF_ANY), 0);
	ck_assert_int_eq(bpf_map_update_elem(m->slots, &slot, &pid, BPF_ANY), 0);
}

static uint64_t runtime_of(const struct maps *m, uint32_t pid)
{
	struct cpa_bpf_py_proc e;

	return bpf_map_lookup_elem(m->procs, &pid, &e) == 0 ? e.runtime : 0;
}

START_TEST(test_cap_python_churn)
{
	struct cap_python *p;
	struct maps m;
	uint64_t ops;

	ck_assert_int_eq(maps_open(&m), 0);
	ck_assert_int_eq(cap_python__new(m.procs, m.slots, m.execs, 0, &p), 0);

	/* 5000 short programs: fork from a shell, exec, none of them Python */
	for (uint32_t pid = 10000; pid < 15000; pid++) {
		fork_ev(p, pid, 9999);
		exec_ev(p, pid, "sort");
	}
	ck_assert_uint_eq(cap_python__map_ops(p), 0);

	/* a python the exec program entered: its fork child gets its entry */
	exec_ev(p, 20000, "python3.11");
	bpf_enter(&m, 20000, 0x7000);
	fork_ev(p, 20001, 20000);
	ck_assert_uint_eq(runtime_of(&m, 20001), 0x7000);
	ck_assert_uint_eq(cap_python__count(p), 1);
	/* the child execs a non-Python program: its entry goes */
	exec_ev(p, 20001, "sh");
	ck_assert_uint_eq(runtime_of(&m, 20001), 0);
	/* so does the parent's */
	exec_ev(p, 20000, "ls");
	ck_assert_uint_eq(runtime_of(&m, 20000), 0);

	/* a reused pid whose old entry we made: the fork drops it */
	exec_ev(p, 20002, "python3");
	bpf_enter(&m, 20002, 0x8000);
	fork_ev(p, 20003, 20002);
	ck_assert_uint_eq(runtime_of(&m, 20003), 0x8000);
	fork_ev(p, 20003, 9999); /* 20003 exited unseen, reused by a shell's child */
	ck_assert_uint_eq(runtime_of(&m, 20003), 0);

	/* none of it made the plain processes cost anything */
	ops = cap_python__map_ops(p);
	for (uint32_t pid = 30000; pid < 31000; pid++) {
		fork_ev(p, pid, 9999);
		exec_ev(p, pid, "gzip");
	}
	ck_assert_uint_eq(cap_python__map_ops(p), ops);

	/* lost events: an entry the exec program made unseen is found again */
	bpf_enter(&m, 40000, 0x9000);
	fork_ev(p, 40001, 40000);
	ck_assert_uint_eq(runtime_of(&m, 40001), 0); /* missed: the exec was not seen */
	cap_python__lost(p);
	fork_ev(p, 40002, 40000);
	ck_assert_uint_eq(runtime_of(&m, 40002), 0x9000);

	cap_python__free(p);
	maps_close(&m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cap_python");
	TCase *tc = tcase_create("cap_python");
	struct maps m;

	if (maps_open(&m) < 0) {
		fprintf(stderr, "skip: BPF maps: %s\n", strerror(errno));
		return 77;
	}
	maps_close(&m);
	tcase_add_test(tc, test_cap_python_churn);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
