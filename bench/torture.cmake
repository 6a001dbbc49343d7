# bench_torture: the crash-consistency torture (issue 14, docs/reliability.md
# "Kills and hangs"): random SIGKILLs of every stage and of the monitor under
# load, then the accounting. `bench_torture --kills 500` is the long run; the
# ctest test_torture is the CI mode (50 kills), test_torture_monitor_full_ring
# monitor kills with ring 0 full (unwindd stalled; 999 Hz),
# test_torture_stop_after_kill_* a stop right after a capture kill,
# test_torture_replay the batch a producer killed between commit and release
# sends again, test_torture_mixed_full_ring every victim with ring 0 full now and
# then, test_hang the SIGSTOP of each stage (root + BPF, else 77).
if(NOT TARGET cpa_store)
  return()
endif()
add_executable(bench_torture ${CMAKE_CURRENT_LIST_DIR}/torture.c)
set_target_properties(bench_torture PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
target_link_libraries(bench_torture PRIVATE cpa_store cpa_shm cpa_common Threads::Threads)
add_dependencies(bench_torture cpa capture unwindd symd storer)
if(COMMAND add_test)
  add_test(NAME test_torture COMMAND bench_torture --kills 50)
  set_tests_properties(test_torture PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    LABELS "e2e;root;torture")
  # Monitor kills while ring 0 is full (unwindd stalled): capture drops on a
  # full ring and must still get its loss records out; fails without the
  # orphan wait.
  add_test(NAME test_torture_monitor_full_ring
    COMMAND bench_torture --kills 4 --victims monitor --stall 100 --freq 999 --pace 1500:2500)
  set_tests_properties(test_torture_monitor_full_ring PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 300 LABELS "e2e;root;torture")
  # A stop right after a capture kill: before the monitor reaped it (0 ms) and
  # while it waits out its restart backoff (50 ms); the monitor starts one to
  # fold the dead generation (docs/supervisor.md, "Stopping").
  foreach(ms 0 50)
    add_test(NAME test_torture_stop_after_kill_${ms}ms
      COMMAND bench_torture --kills 3 --victims capture --stop_after_kill ${ms} --freq 999
        --pace 1000:1500)
    set_tests_properties(test_torture_stop_after_kill_${ms}ms PROPERTIES SKIP_RETURN_CODE 77
      TIMEOUT 300 LABELS "e2e;root;torture")
  endforeach()
  # unwindd and symd kill themselves between the output commit and the input
  # release (CPA_FAULT_KILL_AFTER_COMMIT, shm/fault.h) four times each: the
  # consumer must skip the batch their successors send again (shm/dedup.h).
  add_test(NAME test_torture_replay
    COMMAND bench_torture --kills 4 --victims capture,storer --replay 5:4 --healthy 2000
      --freq 999 --pace 1500:2500)
  set_tests_properties(test_torture_replay PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    LABELS "e2e;root;torture")
  # Every victim, unwindd stalled before 60 % of the kills: where the replayed
  # batch was first seen (-256, docs/reliability.md).
  add_test(NAME test_torture_mixed_full_ring
    COMMAND bench_torture --kills 30 --freq 999 --stall 60 --pace 1000:3000)
  set_tests_properties(test_torture_mixed_full_ring PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 600 LABELS "e2e;root;torture")
  # Hangs: SIGSTOP of each stage in turn, found by its heartbeat (3 s here).
  add_test(NAME test_hang COMMAND bench_torture --kills 0 --hangs 3000)
  set_tests_properties(test_hang PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    LABELS "e2e;root;torture")
endif()
