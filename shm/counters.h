/* SPDX-License-Identifier: MIT */
/*
 * Stage-specific counter slots (from SHM_CNT_STAGE_BASE). Each stage owns its
 * list; names live in shm/stage.c so `cpa ctl` and the bench can print them.
 * Add a slot here and its name there, in the same commit.
 */
#ifndef CPA_SHM_COUNTERS_H
#define CPA_SHM_COUNTERS_H

#include "stage.h"

enum capture_counter {
	CAP_CNT_SAMPLES = SHM_CNT_STAGE_BASE, /* samples read from the BPF ring buffer */
	CAP_CNT_BPF_RB_LOST,		      /* BPF ring buffer full in the kernel */
	CAP_CNT_BPF_NO_USTACK,		      /* user stack copy failed or refused */
	CAP_CNT_BPF_FILTERED,		      /* dropped by pid/comm filters in BPF */
	CAP_CNT_TASK_EVENTS,		      /* exec/exit events forwarded */
	CAP_CNT_USTACK_BYTES,		      /* user stack bytes forwarded */
	CAP_CNT_OFFCPU,			      /* off-CPU records read from BPF */
	CAP_CNT_OFFCPU_NS,		      /* blocked ns those records carry */
	CAP_CNT_OFFCPU_UNTRACKED,	      /* BPF: blocks not tracked or torn (lost) */
	CAP_CNT_PROBE_SKIPPED,		      /* probe hits over --probe_rate (no sample) */
	CAP_CNT_USTACK_HINTS,		      /* unwindd's copy size hints applied */
	CAP_CNT_MAP_EVENTS,		      /* mapping history records (CPA_REC_MAP) sent */
	CAP_CNT_MAP_LOST,		      /* perf mmap/task events lost in the kernel */
	/*
	 * Accounting across a killed capture (docs/reliability.md, "Kills and
	 * hangs"). PRODUCED: on-CPU/probe samples the BPF side produced, every
	 * generation (a dead one's last second added by its successor); LOST_DIED:
	 * the part a dead generation never delivered to ring 0 (its BPF ring
	 * buffer, uncommitted records, pending loss aggregates), sent as a LOSS
	 * record of that reason. The GEN_* slots are gauges of the running
	 * generation, reset by the next one once it has read them.
	 */
	CAP_CNT_PRODUCED,
	CAP_CNT_LOST_DIED,
	CAP_CNT_GEN_ACCT_DONE, /* samples + sample losses committed to ring 0 */
	CAP_CNT_GEN_ACCT_NEXT, /* ... once the commit to GEN_ACCT_HEAD is published */
	CAP_CNT_GEN_ACCT_HEAD, /* ring 0 position that commit publishes */
	CAP_CNT_GEN_CARRY,     /* LOST_DIED of the generation before, while not yet sent */
	CAP_CNT_GEN_SYNCED,    /* BPF PRODUCED already added to CAP_CNT_PRODUCED */
	CAP_CNT_GEN_TICK_NS,   /* kernel CLOCK_MONOTONIC of that sync (once a second) */
	CAP_CNT_GEN_RATE,      /* samples produced in the second before it */
	CAP_CNT_GEN_PINNED,    /* 1: this arena's capture pinned its stats map */
	/* Samples estimated not taken while no capture ran (from a killed
	 * generation's last sample to the next one's attach, at the rate it
	 * had): a LOSS record of this reason marks the hole. */
	CAP_CNT_DOWN_EST,
	CAP_CNT_OFFCPU_BUILDS, /* BPF: off-CPU stacks built (a block at a new place) */
	CAP_CNT_OFFCPU_PLACES, /* gauge: off-CPU stash entries at the last flush */
	/* Gauges that carry a capture gap across kills until its DOWN_EST LOSS
	 * record is committed to ring 0: a gap not yet estimated (a generation
	 * died before it attached), and an estimate not yet committed. */
	CAP_CNT_DOWN_SINCE_NS,	   /* kernel CLOCK_MONOTONIC the open gap began */
	CAP_CNT_DOWN_RATE,	   /* ... and the samples/s it is estimated at (0: none open) */
	CAP_CNT_DOWN_PENDING,	   /* estimated samples not yet committed as a LOSS record */
	CAP_CNT_DOWN_PENDING_TIME, /* ... CLOCK_REALTIME of their gap's start */
	/* Its heartbeat, copied each poll: when a generation killed before its
	 * first sync was last alive, for its rate since its attach (GEN_TICK_NS). */
	CAP_CNT_GEN_ALIVE_NS,
	/* Gauge: samples in loss aggregates a stopping capture could not send
	 * (ring 0 stayed full); the monitor stores them if it must kill the
	 * consumer that kept it full (shm_loss__held()). */
	CAP_CNT_LOSS_PENDING,
	/* Samples estimated not taken by probes --probe_budget detached, at
	 * the rate each recorded before (LOSS records of kind probe). */
	CAP_CNT_PROBE_DETACHED,
	/* Python code objects named by capture (capture/cap_pyname.h) */
	CAP_CNT_PYCODE_SENT,	 /* CPA_REC_PYCODE records sent */
	CAP_CNT_PYCODE_FAILED,	 /* code objects that could not be read (symd tries) */
	CAP_CNT_PYCODE_DEFERRED, /* samples whose unread code objects the per-poll
				  * read budget left to symd */
	/* Probes left out at attach (the kernel refused them, or their file
	 * was gone), one per capture life: a LOSS record of kind probe each. */
	CAP_CNT_PROBE_REFUSED,
	/* Code objects read past a poll's base read budget while the buffers
	 * had room (capture/cap_pyname.h, cap_pyname__set_room()). */
	CAP_CNT_PYCODE_PAST_BUDGET,
	CAP_CNT_MAX_,
};

enum unwindd_counter {
	UNW_CNT_FRAMES = SHM_CNT_STAGE_BASE,
	UNW_CNT_STOP_END,     /* reached the outermost frame */
	UNW_CNT_STOP_NO_MAP,  /* PC in no known mapping */
	UNW_CNT_STOP_NO_CFI,  /* no unwind info for the PC */
	UNW_CNT_STOP_READ,    /* stack read outside the copied bytes */
	UNW_CNT_STOP_DEPTH,   /* depth limit */
	UNW_CNT_STOP_ANON,    /* JIT / anonymous executable region */
	UNW_CNT_STOP_BAD,     /* CFA or RA did not make sense */
	UNW_CNT_MAPS_REFRESH, /* /proc/PID/maps re-read */
	UNW_CNT_MAPS_FAIL,    /* /proc/PID/maps could not be read */
	UNW_CNT_MODULES,      /* module definitions sent */
	UNW_CNT_CFI_EXPR,     /* rows needing the DWARF expression evaluator */
	UNW_CNT_FP_DEEPER,    /* kernel FP chain deeper than the CFI walk */
	UNW_CNT_CACHE_EVICT,  /* binaries evicted under the cache cap */
	UNW_CNT_CACHE_BYTES,  /* (gauge) bytes held by unwind tables */
	UNW_CNT_ENV_SKIPPED,  /* not unwound: env value not in --parse_env_values */
	UNW_CNT_DUMP_ERRORS,  /* --debug_option dump writes that failed */
	UNW_CNT_USTACK_HINTS, /* copy size hints sent to capture */
	UNW_CNT_STOP_DELETED, /* binary deleted before it could be opened */
	UNW_CNT_MAP_EVENTS,   /* mapping history records taken in */
	UNW_CNT_HIST_HITS,    /* pcs resolved from the mapping history */
	UNW_CNT_UCOPY_MISS,   /* a lowered copy size proved too small */
	/* (gauge) samples in LOSS aggregates not sent yet whose input is
	 * released: a killed unwindd's successor sends them (LOST_AT_KILL) */
	UNW_CNT_LOSS_PENDING,
	UNW_CNT_LOST_AT_KILL, /* ... as this reason */
	UNW_CNT_STOP_EXEC,    /* samples inside execve after the old image went */
	UNW_CNT_STOP_EXIT,    /* samples of an exiting process, its mm torn down */
	/* Held by an unwindd killed at stop (it did not drain): counted by the
	 * monitor from its input ring (docs/pipeline.md, "Stopping") */
	UNW_CNT_LOST_AT_STOP,
	UNW_CNT_MAX_,
};

enum symd_counter {
	SYM_CNT_LOOKUPS = SHM_CNT_STAGE_BASE,
	SYM_CNT_HITS,	       /* resolved to a name */
	SYM_CNT_MISSES,	       /* printed as 0x<offset> [binary] */
	SYM_CNT_KSYMS,	       /* kernel frames resolved */
	SYM_CNT_BIN_OPEN_FAIL, /* binary could not be opened */
	SYM_CNT_BIN_REJECTED,  /* hostile/oversized ELF refused */
	SYM_CNT_STRINGS,       /* frame strings interned */
	SYM_CNT_STACKS,	       /* stacks interned */
	SYM_CNT_CACHE_EVICT,
	SYM_CNT_CACHE_BYTES, /* (gauge) */
	SYM_CNT_JIT_REFUSED, /* perf maps refused: too big, or not the process's own */
	/* (gauge) samples in LOSS aggregates not sent yet whose input is
	 * released: a killed symd's successor sends them (LOST_AT_KILL) */
	SYM_CNT_LOSS_PENDING,
	SYM_CNT_LOST_AT_KILL, /* ... as this reason */
	SYM_CNT_LOST_AT_STOP, /* held by a symd killed at stop (UNW_CNT_LOST_AT_STOP) */
	SYM_CNT_MAX_,
};

enum storer_counter {
	STO_CNT_SAMPLES = SHM_CNT_STAGE_BASE,
	STO_CNT_BLOCKS,	       /* blocks written */
	STO_CNT_BYTES_RAW,     /* before compression */
	STO_CNT_BYTES_DISK,    /* after compression, as written */
	STO_CNT_WRITE_ERRORS,  /* failed writes (ENOSPC, EIO) */
	STO_CNT_TRIMMED_FILES, /* removed by retention */
	STO_CNT_LOST_SAMPLES,  /* loss records stored as [lost: ...] frames */
	STO_CNT_LOST_AT_STOP,  /* held by a storer killed at stop (UNW_CNT_LOST_AT_STOP) */
	STO_CNT_MAX_,
};

_Static_assert((int)CAP_CNT_MAX_ <= SHM_CNT_MAX, "capture counters fit");
_Static_assert((int)UNW_CNT_MAX_ <= SHM_CNT_MAX, "unwindd counters fit");
_Static_assert((int)SYM_CNT_MAX_ <= SHM_CNT_MAX, "symd counters fit");
_Static_assert((int)STO_CNT_MAX_ <= SHM_CNT_MAX, "storer counters fit");

#endif /* CPA_SHM_COUNTERS_H */
