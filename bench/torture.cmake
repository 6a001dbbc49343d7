# bench_torture: the crash-consistency torture (issue 14, docs/reliability.md
# "Kills and hangs"): random SIGKILLs of every stage and of the monitor under
# load, then the accounting. `bench_torture --kills 500` is the long run; the
# ctest test_torture is the CI mode (50 kills), test_torture_full_ring the
# same with ring 0 full at the kills (unwindd stalled; 999 Hz; and with the
# monitor as the only victim: test_torture_monitor_full_ring), test_hang the
# SIGSTOP of each stage (root + BPF, else 77).
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
  # Kills while ring 0 is full: capture drops on a full ring and must still get
  # its loss records out, the monitor's death included (docs/reliability.md).
  add_test(NAME test_torture_full_ring
    COMMAND bench_torture --kills 30 --freq 999 --stall 60 --pace 1000:3000)
  set_tests_properties(test_torture_full_ring PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600
    LABELS "e2e;root;torture")
  # The same for the monitor alone, every kill: fails without the orphan wait.
  add_test(NAME test_torture_monitor_full_ring
    COMMAND bench_torture --kills 4 --victims monitor --stall 100 --freq 999 --pace 1500:2500)
  set_tests_properties(test_torture_monitor_full_ring PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 300 LABELS "e2e;root;torture")
  # Hangs: SIGSTOP of each stage in turn, found by its heartbeat (3 s here).
  add_test(NAME test_hang COMMAND bench_torture --kills 0 --hangs 3000)
  set_tests_properties(test_hang PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
    LABELS "e2e;root;torture")
endif()
