// SPDX-License-Identifier: (MIT OR GPL-2.0)
/*
 * The rungs of bench_bpf_floor (bench/bpf_floor.c, docs/bench.md "The floor of a
 * BPF sample"): one cpu-clock program per part of a sample, each the one
 * before it plus that part, so the loader can subtract medians. Not cpa's
 * sampler (bpf/profile.bpf.c): only the parts any stack-copying sampler has.
 */
#include "vmlinux.h"

#include <bpf/bpf_helpers.h>

#include "bench/bpf_floor.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

const volatile __u32 copy_bytes = 0; /* user stack bytes per record, <= FLOOR_COPY_MAX */
const volatile __u32 stride = 4096;  /* pcpu record stride: power of two >= record */
const volatile __u32 ids = FLOOR_IDS_TIME | FLOOR_IDS_COMM; /* the ids rung's parts */

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} rb SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1); /* one per possible CPU, set by the loader */
	__type(key, __u32);
	__type(value, struct floor_pcpu);
} pcpu SEC(".maps");

SEC("perf_event")
int floor_empty(struct bpf_perf_event_data *ctx)
{
	return 0;
}

/* The ids every record carries (id: bpf_get_current_pid_tgid()). Every rung
 * but the empty one leaves first on the idle task, before anything else. */
static __always_inline void floor_ids(struct floor_rec *r, __u64 id)
{
	r->pid = id >> 32;
	r->tid = (__u32)id;
	if (ids & FLOOR_IDS_TIME)
		r->time_ns = bpf_ktime_get_boot_ns();
	if (ids & FLOOR_IDS_COMM)
		bpf_get_current_comm(r->comm, sizeof(r->comm));
}

/* Registers, then copy_bytes of user stack from sp (user mode samples only). */
static __always_inline void floor_fill(struct bpf_perf_event_data *ctx, struct floor_rec *r,
				       int copies)
{
	/* perf_event context reads are 8 bytes wide */
	__u64 cs = *(volatile __u64 *)&ctx->regs.cs;

	r->ip = ctx->regs.ip;
	r->sp = ctx->regs.sp;
	r->copied = 0;
	if (!copy_bytes || (cs & 3) != 3)
		return;
	for (int i = 0; i < 2; i++) {
		if (i >= copies)
			break;
		if (bpf_probe_read_user(r->stack, copy_bytes, (const void *)r->sp))
			return;
	}
	r->copied = copy_bytes;
}

SEC("perf_event")
int floor_idsonly(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct floor_rec r;

	if (!(__u32)id)
		return 0;
	r.comm[0] = 0;
	r.time_ns = 0;
	floor_ids(&r, id);
	return r.comm[0] == 1 || r.time_ns == 1;
}

/* ~3 KiB of executed straight-line code (x86 JIT: 440 adds of an imm32, 7
 * bytes each, a dependent chain: ~440 cycles warm): cpa_on_cpu's JIT image
 * is 3.3 KB against the rungs' few hundred bytes; this prices code that is
 * cold at every run. */
#define FLOOR_ADD(x, i)                     \
	do {                                \
		(x) += 1000 + (i);          \
		asm volatile("" : "+r"(x)); \
	} while (0)

static __always_inline __u64 floor_code(__u64 x)
{
	/* Unrolled, so the code runs straight through. */
#pragma unroll
	for (int i = 0; i < 440; i++)
		FLOOR_ADD(x, i);
	return x;
}

static __always_inline int floor_rb_rec(struct bpf_perf_event_data *ctx, bool code)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct floor_rec *r;

	if (!(__u32)id)
		return 0;
	r = bpf_ringbuf_reserve(&rb, sizeof(*r) + copy_bytes, 0);
	if (!r)
		return 0;
	floor_ids(r, id);
	floor_fill(ctx, r, 1);
	if (code)
		(void)floor_code(id); /* kept: the asm statements are volatile */
	bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("perf_event")
int floor_ringbuf(struct bpf_perf_event_data *ctx)
{
	return floor_rb_rec(ctx, false);
}

/* The same with ~3 KB more code run. */
SEC("perf_event")
int floor_ringbuf_code(struct bpf_perf_event_data *ctx)
{
	return floor_rb_rec(ctx, true);
}

static __always_inline int floor_pcpu_rec(struct bpf_perf_event_data *ctx, int copies)
{
	__u64 id = bpf_get_current_pid_tgid(), off;
	__u32 cpu = bpf_get_smp_processor_id();
	struct floor_pcpu *m;
	struct floor_rec *r;

	if (!(__u32)id)
		return 0;
	m = bpf_map_lookup_elem(&pcpu, &cpu);
	if (!m)
		return 0;
	off = m->prod & (FLOOR_PCPU_BYTES - 1);
	if (off > FLOOR_PCPU_BYTES - stride)
		off = 0; /* cannot happen with a power-of-two stride; for the verifier */
	r = (struct floor_rec *)(m->data + off);
	floor_ids(r, id);
	floor_fill(ctx, r, copies);
	__sync_fetch_and_add(&m->prod, stride);
	return 0;
}

SEC("perf_event")
int floor_pcpu(struct bpf_perf_event_data *ctx)
{
	return floor_pcpu_rec(ctx, 1);
}

/* The same copy twice: the second finds its lines in the cache. */
SEC("perf_event")
int floor_pcpu_twice(struct bpf_perf_event_data *ctx)
{
	return floor_pcpu_rec(ctx, 2);
}
