# bench_overhead: the issue-5 overhead harness (docs/bench.md). It runs the real
# `cpa monitor` and the stage executables next to it, and the FP-less workload.
add_executable(bench_overhead ${CMAKE_CURRENT_LIST_DIR}/overhead.c
  ${CMAKE_CURRENT_LIST_DIR}/overhead_proc.c)
target_link_libraries(bench_overhead PRIVATE cpa_shm cpa_common PkgConfig::LIBBPF m)
foreach(dep cpa capture unwindd symd storer cpa-workload-nofp)
  if(TARGET ${dep})
    add_dependencies(bench_overhead ${dep})
  endif()
endforeach()

# bench_overhead_wl: cpa-workload-nofp's chains for a fixed number of loops
# (bench_overhead --loops N), against the same FP-less shared library.
if(TARGET cpawl_nofp)
  add_executable(bench_overhead_wl ${CMAKE_CURRENT_LIST_DIR}/overhead_wl.c)
  target_compile_options(bench_overhead_wl PRIVATE -O2 -fomit-frame-pointer
    -fasynchronous-unwind-tables -fno-inline -fno-optimize-sibling-calls)
  target_include_directories(bench_overhead_wl PRIVATE ${CMAKE_SOURCE_DIR}/tests/workload)
  target_link_libraries(bench_overhead_wl PRIVATE cpawl_nofp Threads::Threads)
  set_target_properties(bench_overhead_wl PROPERTIES BUILD_RPATH ${CMAKE_BINARY_DIR}/lib)
  add_dependencies(bench_overhead bench_overhead_wl)
endif()
