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
 * The set of what was sent is direct-mapped on (pid, code, check): an evicted
 * entry only costs a read and a record again. A pid's entries go at its exit
 * or exec.
 */
#ifndef CPA_CAPTURE_CAP_PYNAME_H
#define CPA_CAPTURE_CAP_PYNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/profile.h"
#include "cap_emit.h"

#define CAP_PYNAME_SLOTS 4096 /* (pid, code, check) sent, direct-mapped */

struct cap_pyname;

int cap_pyname__new(struct cap_pyname **ret);
void cap_pyname__free(struct cap_pyname *n);

/*
 * The sample bs (size bytes, as the BPF ring buffer had it) is about to be
 * emitted into e: a CPA_REC_PYCODE for each of its Python frames' code
 * objects not sent yet for bs->pid. Does nothing for a sample without
 * Python frames (or a malformed one: cap_emit__record() counts it).
 */
void cap_pyname__sample(struct cap_pyname *n, struct cap_emit *e, const struct cpa_bpf_sample *bs,
			size_t size);
/* pid exited or exec'd: what was sent for it goes. */
void cap_pyname__drop_pid(struct cap_pyname *n, uint32_t pid);

/*
 * A Python started (an exec whose comm starts with python) or code objects
 * were sent less than CAP_PYNAME_BUSY_NS before now_ns (CLOCK_MONOTONIC): a
 * Python's new code objects are being sampled. Capture's next poll is then at
 * most CAP_PYNAME_POLL_MS away rather than up to a second, so that the code
 * objects of a short-lived process are read while it runs (a program's later
 * phases bring new ones: its first poll is not enough).
 */
#define CAP_PYNAME_POLL_MS 100
#define CAP_PYNAME_BUSY_NS (2 * NSEC_PER_SEC)
void cap_pyname__started(struct cap_pyname *n);
bool cap_pyname__soon(const struct cap_pyname *n, uint64_t now_ns);

struct cap_pyname_stats {
	uint64_t sent;	 /* CPA_REC_PYCODE records emitted */
	uint64_t failed; /* code objects that could not be read (symd tries later) */
	uint64_t scans;	 /* drops that looked through the slots */
};
void cap_pyname__stats(const struct cap_pyname *n, struct cap_pyname_stats *ret);

#endif /* CPA_CAPTURE_CAP_PYNAME_H */
