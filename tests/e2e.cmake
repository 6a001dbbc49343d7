# End-to-end tests: cpa monitor with the real stages on the real kernel, then
# cpa show. Root + BTF, else exit 77. They need every executable built
# (the workload comes from tests/workload.cmake).
cpa_add_test(NAME test_e2e SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e.c
  LABELS e2e root TIMEOUT 600)
add_dependencies(test_e2e cpa capture unwindd symd storer cpa-workload cpa-workload-nofp cpa-wl-offcpu)
