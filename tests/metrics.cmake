# Scheduler metrics end to end (docs/metrics.md): cpa monitor with the real
# stages and BPF, workloads forked by the test, cpa show --sched. Root + BTF, else 77.
cpa_add_test(NAME test_metrics SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_metrics.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LIBS cpa_common LABELS e2e root TIMEOUT 300 EXCLUSIVE)
add_dependencies(test_metrics cpa capture unwindd symd storer)

# Trigger policies beyond cpu_percent: offcpu_percent, probe_rate, cgroup=, env=,
# attach= (end to end: root + BTF, else 77), and the policy file's errors.
# The workload children are the test binary itself (--child MODE), uprobed.
cpa_add_test(NAME test_policy SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_policy.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LIBS cpa_common LABELS e2e root TIMEOUT 300 EXCLUSIVE)
add_dependencies(test_policy cpa capture unwindd symd storer)

# The metrics section's encodings (storer/store_metrics.c): v5 round trip,
# frozen v1, v3 and v4 sections and v2 still read, interleaved writers,
# damage, a newer version skipped (section and store).
cpa_add_test(NAME test_store_metrics SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_store_metrics.c
  LIBS cpa_store cpa_shm cpa_common LABELS unit TIMEOUT 60)
target_compile_definitions(test_store_metrics PRIVATE
  CPA_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures")
