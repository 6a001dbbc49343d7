/* SPDX-License-Identifier: MIT */
/*
 * Python code objects named at the first user-space stage (docs/unwinding.md,
 * "Python"): before capture forwards a sample with Python frames, it reads
 * each frame's code object it has not sent yet for that process
 * (process_vm_readv, common/pycode.h) and emits it as CPA_REC_PYCODE right
 * before the sample. symd names the frames from it: by the time a loaded
 * host's pipeline brings it the sample, a short-lived process may be gone or
 * its interpreter may have freed its code objects.
 *
 * The set of what was sent is CAP_PYNAME_WAYS-way set-associative on (pid,
 * code, check): an evicted entry only costs a read and a record again (with
 * the budget below, a direct-mapped set's collisions among a thousand code
 * objects could take a poll's whole budget, every poll). A pid's entries go at its exit
 * or exec.
 *
 * The reads are bounded per poll (CAP_PYNAME_BUDGET_NS, longer while the
 * buffers have room: cap_pyname__set_room()): capture is the producer, and a
 * host starting many deep-stack Pythons at once must not keep it from
 * draining the BPF ring buffer. Past the budget a sample goes on without the
 * records of the code objects left (symd reads them itself, and the next poll
 * sends them when they are sampled again).
 */
#ifndef CPA_CAPTURE_CAP_PYNAME_H
#define CPA_CAPTURE_CAP_PYNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/profile.h"
#include "cap_emit.h"
#include "common/timeutil.h"
#include "shm/stage.h"

#define CAP_PYNAME_SLOTS 4096 /* (pid, code, check) sent */
#define CAP_PYNAME_WAYS	 4    /* ... in buckets of this many (a cache line) */
/*
 * A code object sent more than this many records ago is read and sent again
 * when sampled: symd's cache (symd/pysym.h: 8192 entries, 4-way, the least
 * recently used out) may have let it go meanwhile, under a flood of new
 * ones, and with this set still saying "sent" symd would read it itself,
 * after the process's exit for a sample of its last seconds. 1024 records
 * over symd's 2048 sets: four in one set, which could push it out, in ~0.2 %
 * of them. Only a host sending records gets here: a Python whose code
 * objects were all sent sends none, and reads none again. The age is kept
 * in a 16-bit stamp, wrap-safe: the entries past it go every 262,144
 * records (cap_pyname.c, sent_sweep()).
 */
#define CAP_PYNAME_RESEND 1024

struct cap_pyname;

/* Counts into st's CAP_CNT_PYCODE_* counters (shm/counters.h); NULL: none. */
int cap_pyname__new(struct cap_pyname **ret, struct shm_stage *st);
void cap_pyname__free(struct cap_pyname *n);

/*
 * The sample bs (size bytes, as the BPF ring buffer had it) is about to be
 * emitted into e: a CPA_REC_PYCODE for each of its Python frames' code
 * objects not sent yet for bs->pid. Does nothing for a sample without
 * Python frames (or a malformed one: cap_emit__record() counts it).
 */
void cap_pyname__sample(struct cap_pyname *n, struct cap_emit *e, const struct cpa_bpf_sample *bs,
			size_t size);
/*
 * A poll begins: CAP_PYNAME_BUDGET_NS of code object reads (the time spent in
 * process_vm_readv and its parsing, as measured) until the next one. 1 ms at
 * ~10 us a read is ~100 code objects; at most 5 % of a CPU at the
 * CAP_POLL_MIN_MS floor, 1 % at CAP_PYNAME_POLL_MS polls, and a poll of the BPF
 * ring buffer is late by at most 1 ms of samples.
 */
#define CAP_PYNAME_BUDGET_NS (1 * NSEC_PER_MSEC)
void cap_pyname__poll(struct cap_pyname *n);
/*
 * Past CAP_PYNAME_BUDGET_NS, a poll's reads go on while room(ctx) says the
 * buffers capture drains and fills have room (capture: the BPF ring buffer
 * at most 1/16 full, ring 0 at least half free), asked before each read, up
 * to max_ns of reads a poll (CAP_PYNAME_BUDGET_MAX_NS): what the budget is
 * for is that the BPF ring buffer never fills while capture reads, and a
 * read (~10 us) cannot fill 15/16 of a buffer sized for 2.5 s of samples.
 * The code objects so read are counted in CAP_CNT_PYCODE_PAST_BUDGET. Without
 * a room function (NULL, the default) the budget is CAP_PYNAME_BUDGET_NS.
 */
#define CAP_PYNAME_BUDGET_MAX_NS (10 * NSEC_PER_MSEC)
typedef bool cap_pyname_room_fn(void *ctx);
void cap_pyname__set_room(struct cap_pyname *n, cap_pyname_room_fn *room, void *ctx,
			  uint64_t max_ns);
/* As if k more records were sent, none read (tests: the set k sends later,
 * past the stamp's wrap). */
void cap_pyname__count_sends(struct cap_pyname *n, uint64_t k);
/* pid exited or exec'd: what was sent for it goes. */
void cap_pyname__drop_pid(struct cap_pyname *n, uint32_t pid);

/*
 * Code objects were sent for a process that has not exited (nor exec'd)
 * less than CAP_PYNAME_BUSY_NS before now_ns (CLOCK_MONOTONIC): a Python's
 * new code objects are being sampled. Capture's next poll is then at most
 * CAP_PYNAME_POLL_MS away rather than up to a second, so that the code
 * objects of a short-lived process are read while it runs (a program's later
 * phases bring new ones: its first poll is not enough). What starts it is
 * the process's first sample with Python frames: the BPF side submits it
 * with a forced wakeup (cpa_bpf_py_proc.woke, bpf/profile.h), whatever the
 * process's comm, and only for a Python that gets sampled. The last
 * CAP_PYNAME_BUSY_PIDS processes sent for are kept; a process's exit ends
 * its part at once.
 */
#define CAP_PYNAME_POLL_MS   100
#define CAP_PYNAME_BUSY_NS   (2 * NSEC_PER_SEC)
#define CAP_PYNAME_BUSY_PIDS 8
bool cap_pyname__soon(const struct cap_pyname *n, uint64_t now_ns);

#endif /* CPA_CAPTURE_CAP_PYNAME_H */
