# The crash-consistency torture (bench/torture.c, docs/reliability.md "Kills and
# hangs"), short runs: random SIGKILLs of every stage and of the monitor under
# load, then the accounting (root + BPF, else 77). scripts/soak.sh runs the long
# campaigns. test_torture: every victim, 15 kills.
if(NOT TARGET bench_torture)
  return()
endif()
cpa_test(NAME test_torture COMMAND bench_torture --kills 15 LABELS torture root TIMEOUT 600)
# Monitor kills while ring 0 is full (unwindd stalled; 999 Hz): capture drops on
# a full ring and must still get its loss records out; fails without the
# orphan wait.
cpa_test(NAME test_torture_monitor_full_ring
  COMMAND bench_torture --kills 4 --victims monitor --stall 100 --freq 999 --pace 1500:2500
  LABELS torture root)
# A stop right after a capture kill: before the monitor reaped it (0 ms) and
# while it waits out its restart backoff (50 ms); the monitor starts one to
# fold the dead generation (docs/supervisor.md, "Stopping").
foreach(ms 0 50)
  cpa_test(NAME test_torture_stop_after_kill_${ms}ms
    COMMAND bench_torture --kills 3 --victims capture --stop_after_kill ${ms} --freq 999
      --pace 1000:1500
    LABELS torture root)
endforeach()
# unwindd and symd kill themselves between the output commit and the input
# release (CPA_FAULT_KILL_AFTER_COMMIT, shm/fault.h) four times each: the
# consumer must skip the batch their successors send again (shm/dedup.h); the
# storer four times once a block's write landed, before its release: its
# successor must skip what the store holds.
cpa_test(NAME test_torture_replay
  COMMAND bench_torture --kills 4 --victims capture,storer --replay 5:4 --healthy 2000
    --freq 999 --pace 1500:2500
  LABELS torture root)
# Every victim, unwindd stalled before 60 % of the kills: where the replayed
# batch was first seen (-256, docs/reliability.md).
cpa_test(NAME test_torture_mixed_full_ring
  COMMAND bench_torture --kills 10 --freq 999 --stall 60 --pace 1000:3000
  LABELS torture root TIMEOUT 600)
# Hangs: SIGSTOP of each stage in turn, found by its heartbeat (3 s here).
cpa_test(NAME test_hang COMMAND bench_torture --kills 0 --hangs 3000 LABELS torture root)
