/* SPDX-License-Identifier: MIT */
/*
 * Python processes for the BPF frame walk (docs/capture.md, "Python"):
 * capture tells the BPF program, through its "py_procs" map, where each
 * CPython 3.10-3.13 interpreter keeps its thread states and frames. A
 * process is found when an executable mapping of python3.X or
 * libpython3.X.so appears (the mapping events), or by a scan of /proc at
 * start for the processes already running. The interpreter's version
 * (Py_Version, else the file name) picks the offsets table; _PyRuntime's
 * address comes from the file's symbols and the mapping.
 */
#ifndef CPA_CAPTURE_CAP_PYTHON_H
#define CPA_CAPTURE_CAP_PYTHON_H

#include <stdbool.h>
#include <stdint.h>

#include "bpf/profile.h"
#include "shm/records.h"

struct cap_python;

/* The table entry of CPython 3.<minor>, or NULL: offsets only (runtime 0). */
const struct cpa_bpf_py_proc *cap_python__table(unsigned int minor);

/* Is path (a mapping's) a CPython interpreter file: its minor version
 * from the name (3.X), 0 if not. */
unsigned int cap_python__name_minor(const char *path);

/*
 * The entry of the interpreter file fd mapped at start from file offset pgoff
 * (an executable mapping): *ret with runtime set, status NOSYM or UNSUPPORTED
 * when it cannot be walked. name_minor: the version its name says (fallback
 * when the file has no Py_Version). 0, 1 when the file is a launcher that
 * links a libpython3.X.so (no entry: the library's mapping gives it), or
 * -errno (not an ELF file). *ret_exec_off: _PyRuntime's distance from the
 * process's mm->start_code (the exec program's template, py_execs).
 */
int cap_python__resolve(int fd, uint64_t start, uint64_t pgoff, unsigned int name_minor,
			struct cpa_bpf_py_proc *ret, uint64_t *ret_exec_off);

/* map_fd, slots_fd, execs_fd: the BPF maps "py_procs", "py_slots" and
 * "py_execs"; target_tgid: only that process (0 = all). */
int cap_python__new(int map_fd, int slots_fd, int execs_fd, uint32_t target_tgid,
		    struct cap_python **ret);
/* A mapping event (capture's, before it is emitted): MMAP of an interpreter
 * adds pid (a launcher's, python3.X linking libpython3.X.so: pending, its
 * next sample wakes capture for the library's mapping), FORK copies the
 * parent's entry, EXEC drops pid's (path: the new comm). Only a pid that
 * may have an entry costs a map syscall. */
void cap_python__map_event(struct cap_python *p, const struct cpa_map_event *ev, const char *path);
/* Mapping events were lost: the map's pids may have entries. */
void cap_python__lost(struct cap_python *p);
/* Tests: py_procs syscalls made for fork and exec events. */
uint64_t cap_python__map_ops(const struct cap_python *p);
/* The processes already running: /proc/PID/maps of each. Returns how many
 * Python processes it found. */
int cap_python__scan(struct cap_python *p);
/* Processes whose entry is in the map now. */
uint32_t cap_python__count(const struct cap_python *p);
void cap_python__free(struct cap_python *p);

#endif /* CPA_CAPTURE_CAP_PYTHON_H */
