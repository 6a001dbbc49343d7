# End-to-end tests: cpa monitor with the real stages on the real kernel, then
# cpa show. Root + BTF, else exit 77. They need every executable built
# (the workload comes from tests/workload.cmake).
cpa_add_test(NAME test_e2e SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e.c
  LABELS e2e root TIMEOUT 600)
add_dependencies(test_e2e cpa capture unwindd symd storer cpa-workload cpa-workload-nofp)
# the CFI fixture's bigloop mode (6 KB frames 3 deep) for the adaptive stack copy
include(${CMAKE_SOURCE_DIR}/tests/fixtures/cfi/cfi_fixtures.cmake)
add_dependencies(test_e2e cfi_fixtures)
target_compile_definitions(test_e2e PRIVATE CFI_FIXTURE_DIR="${CMAKE_BINARY_DIR}/tests/cfi")
