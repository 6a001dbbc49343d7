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
 *  - after lost mapping events the map's pids are looked up again;
 *  - a launcher (pyenv's python3.11, linking libpython3.11.so; skipped
 *    without it) gets a pending entry whose next sample wakes capture, and
 *    again after its first sample woke it while its library was not mapped;
 *    the library's mapping completes it with woke 0, so its first sample
 *    with Python frames wakes capture too.
 * Root + BPF maps, else 77.
 */
#include <bpf/bpf.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
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

#define PYENV_BIN "/root/.pyenv/versions/3.11.7/bin/python3.11"
#define PYENV_LIB "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0"

/* An executable mapping of path at start in pid (path read through
 * /proc/PID/root: pid is this process, the file is not mapped). */
static void mmap_ev(struct cap_python *p, uint32_t pid, const char *path, uint64_t start)
{
	struct cpa_map_event ev = {
		.kind = CPA_MAP_MMAP, .pid = pid, .tid = pid, .start = start, .len = 0x1000};
	struct stat st;

	ck_assert_int_eq(stat(path, &st), 0);
	ev.ino = st.st_ino;
	ev.dev_major = major(st.st_dev);
	ev.dev_minor = minor(st.st_dev);
	cap_python__map_event(p, &ev, path);
}

/* pid's entry: 0, or -1 when it has none. */
static int entry_of(const struct maps *m, uint32_t pid, struct cpa_bpf_py_proc *e)
{
	return bpf_map_lookup_elem(m->procs, &pid, e) == 0 ? 0 : -1;
}

/* What the sampler does with an entry's first sample (py_walk()). */
static void sampled(const struct maps *m, uint32_t pid)
{
	struct cpa_bpf_py_proc e;

	ck_assert_int_eq(entry_of(m, pid, &e), 0);
	e.woke = 1;
	ck_assert_int_eq(bpf_map_update_elem(m->procs, &pid, &e, BPF_ANY), 0);
}

START_TEST(test_cap_python_launcher)
{
	uint32_t pid = (uint32_t)getpid();
	struct cpa_bpf_py_proc e;
	struct cap_python *p;
	struct maps m;

	if (access(PYENV_BIN, R_OK) || access(PYENV_LIB, R_OK)) {
		fprintf(stderr, "launcher case skipped: no %s\n", PYENV_BIN);
		return;
	}
	ck_assert_int_eq(maps_open(&m), 0);
	ck_assert_int_eq(cap_python__new(m.procs, m.slots, m.execs, 0, &p), 0);

	/* its exec, then the launcher's mapping: pending, its sample wakes */
	exec_ev(p, pid, "python3");
	mmap_ev(p, pid, PYENV_BIN, 0x555500000000);
	ck_assert_int_eq(entry_of(&m, pid, &e), 0);
	ck_assert_uint_eq(e.status, CPA_BPF_PY_PENDING);
	ck_assert_uint_eq(e.woke, 0);
	/* its first sample woke us before the library was mapped: the next
	 * drain sees the launcher's mapping again (another process of it, from
	 * the cache) and re-arms the wakeup */
	sampled(&m, pid);
	mmap_ev(p, pid, PYENV_BIN, 0x555500000000);
	ck_assert_int_eq(entry_of(&m, pid, &e), 0);
	ck_assert_uint_eq(e.status, CPA_BPF_PY_PENDING);
	ck_assert_uint_eq(e.woke, 0);
	/* a sample woke us, the library is mapped: complete, woke 0 */
	sampled(&m, pid);
	mmap_ev(p, pid, PYENV_LIB, 0x7f0000000000);
	ck_assert_int_eq(entry_of(&m, pid, &e), 0);
	ck_assert_uint_eq(e.status, CPA_BPF_PY_OK);
	ck_assert_uint_ne(e.runtime, 0);
	ck_assert_uint_eq(e.woke, 0);
	/* its first sample with frames woke us: an OK entry keeps it, and a
	 * launcher's mapping seen late does not make it pending again */
	sampled(&m, pid);
	mmap_ev(p, pid, PYENV_LIB, 0x7f0000000000);
	mmap_ev(p, pid, PYENV_BIN, 0x555500000000);
	ck_assert_int_eq(entry_of(&m, pid, &e), 0);
	ck_assert_uint_eq(e.status, CPA_BPF_PY_OK);
	ck_assert_uint_eq(e.woke, 1);

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
	tcase_add_test(tc, test_cap_python_launcher);
	suite_add_tcase(s, tc);
	return test_run_suite(s);
}
