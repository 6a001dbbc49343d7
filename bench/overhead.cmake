# bench_overhead: the issue-5 overhead harness (docs/bench.md). It runs the real
# `cpa monitor` and the stage executables next to it, and the FP-less workload.
add_executable(bench_overhead ${CMAKE_CURRENT_LIST_DIR}/overhead.c
  ${CMAKE_CURRENT_LIST_DIR}/overhead_proc.c)
target_link_libraries(bench_overhead PRIVATE cpa_shm cpa_common PkgConfig::LIBBPF m)
include(${CMAKE_SOURCE_DIR}/tests/workload.cmake)
add_dependencies(bench_overhead cpa capture unwindd symd storer cpa-workload-nofp cpa-wl-offcpu)

# bench_fidelity: cpa next to perf --call-graph dwarf on real programs (issue 10).
add_executable(bench_fidelity ${CMAKE_CURRENT_LIST_DIR}/fidelity.c
  ${CMAKE_CURRENT_LIST_DIR}/overhead_proc.c)
target_link_libraries(bench_fidelity PRIVATE cpa_shm cpa_common PkgConfig::LIBBPF m)
add_dependencies(bench_fidelity cpa capture unwindd symd storer)
