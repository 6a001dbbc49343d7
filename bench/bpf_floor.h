/* SPDX-License-Identifier: MIT */
/*
 * bench_bpf_floor (bench/bpf_floor.c): what one run of a cpu-clock BPF program
 * costs for each part a sampler cannot do without, program by program ("rungs"):
 * an empty program, the ids, a record through the BPF ring buffer, a record
 * through a per-CPU ring of our own, a copy of the user stack. The record both
 * ring rungs write, and the per-CPU ring's layout, shared by the BPF side
 * (bench/bpf_floor.bpf.c) and the loader.
 */
#ifndef CPA_BENCH_BPF_FLOOR_H
#define CPA_BENCH_BPF_FLOOR_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define FLOOR_COPY_MAX	 4096	    /* largest copy_bytes knob */
#define FLOOR_PCPU_BYTES (1u << 20) /* data bytes of one CPU's ring */

/* The parts of the ids every record carries (the `ids` knob). */
#define FLOOR_IDS_TIME 1u /* bpf_ktime_get_boot_ns() */
#define FLOOR_IDS_COMM 2u /* bpf_get_current_comm() */

/* A record: this header, then copy_bytes of user stack from sp upward. */
struct floor_rec {
	__u64 time_ns; /* bpf_ktime_get_boot_ns() */
	__u32 pid;
	__u32 tid;
	__u32 copied; /* stack bytes that follow; 0 = not in user mode or the read failed */
	__u32 _pad;
	char comm[16];
	__u64 ip;
	__u64 sp;
	__u8 stack[];
};

/*
 * One CPU's ring (rung "pcpu"): an mmapable array element per CPU. The
 * program is its only producer (a cpu-clock program does not nest on its CPU):
 * it writes the record at prod % FLOOR_PCPU_BYTES with plain stores, then
 * publishes it with an atomic add to prod (a full barrier). Records have a
 * fixed power-of-two stride, so one never straddles the end. There is no
 * back-pressure: the bench measures the producer; its reader only counts
 * what was published and checks the last record.
 */
struct floor_pcpu {
	__u64 prod; /* bytes published, ever */
	__u8 _pad[56];
	__u8 data[FLOOR_PCPU_BYTES];
};

#endif /* CPA_BENCH_BPF_FLOOR_H */
