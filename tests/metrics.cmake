# Scheduler metrics end to end (docs/metrics.md): cpa monitor with the real
# stages and BPF, workloads forked by the test, cpa show --sched. Root + BTF, else 77.
cpa_add_test(NAME test_metrics SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_metrics.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LIBS cpa_common LABELS e2e root TIMEOUT 300)
add_dependencies(test_metrics cpa capture unwindd symd storer)
