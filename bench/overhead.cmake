# bench_overhead: the issue-5 overhead harness (docs/bench.md). It runs the real
# `cpa monitor` and the stage executables next to it, and the FP-less workload.
add_executable(bench_overhead ${CMAKE_CURRENT_LIST_DIR}/overhead.c
  ${CMAKE_CURRENT_LIST_DIR}/overhead_proc.c ${CMAKE_CURRENT_LIST_DIR}/benchutil.c)
target_link_libraries(bench_overhead PRIVATE cpa_cost cpa_shm cpa_common PkgConfig::LIBBPF m)
include(${CMAKE_SOURCE_DIR}/tests/workload.cmake)
add_dependencies(bench_overhead cpa capture unwindd symd storer cpa-workload-nofp cpa-wl-offcpu)

# bench_fidelity: cpa next to perf --call-graph dwarf on real programs (issue 10).
add_executable(bench_fidelity ${CMAKE_CURRENT_LIST_DIR}/fidelity.c
  ${CMAKE_CURRENT_LIST_DIR}/overhead_proc.c ${CMAKE_CURRENT_LIST_DIR}/fold.c ${CMAKE_CURRENT_LIST_DIR}/benchutil.c)
target_link_libraries(bench_fidelity PRIVATE cpa_cost cpa_shm cpa_common PkgConfig::LIBBPF m)
add_dependencies(bench_fidelity cpa capture unwindd symd storer)

# bench_churn: cpa and perf record -a --call-graph dwarf at once on a churn workload (issue 9).
add_executable(bench_churn ${CMAKE_CURRENT_LIST_DIR}/churn.c
  ${CMAKE_CURRENT_LIST_DIR}/overhead_proc.c ${CMAKE_CURRENT_LIST_DIR}/fold.c ${CMAKE_CURRENT_LIST_DIR}/benchutil.c)
target_link_libraries(bench_churn PRIVATE cpa_cost cpa_shm cpa_common PkgConfig::LIBBPF m)
target_compile_definitions(bench_churn PRIVATE CPA_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_dependencies(bench_churn cpa capture unwindd symd storer)

# bench_sched_error: the scheduler metrics' task counters (the default) against
# the per-switch programs (--sched_metrics=full), same host, same seconds
# (docs/metrics.md "Error of the task counters").
add_executable(bench_sched_error ${CMAKE_CURRENT_LIST_DIR}/sched_error.c
  ${CMAKE_CURRENT_LIST_DIR}/benchutil.c)
add_dependencies(bench_sched_error sched_skel cpa-wl-offcpu)
target_link_libraries(bench_sched_error PRIVATE cpa_bpf_skel cpa_common m)

# bench_metrics_store: the metrics' bytes per second of stores, v1 to v5 encodings side by side, their v4 and v5 columns, the error of v4 and v5, and v5 with fewer rows (metrics_policy.c).
add_executable(bench_metrics_store ${CMAKE_CURRENT_LIST_DIR}/metrics_store.c
	${CMAKE_CURRENT_LIST_DIR}/metrics_policy.c)
target_link_libraries(bench_metrics_store PRIVATE cpa_store cpa_common)
