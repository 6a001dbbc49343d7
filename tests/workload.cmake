# The test workload, built twice: with frame pointers and without (-O2
# -fomit-frame-pointer), each with its own copy of the shared library. The e2e
# tests and bench_overhead use it; each includes this file, the first defines it.
include_guard(GLOBAL)

# The workloads stand for the programs users profile, so they are built as
# those are: without the sanitizer of an asan/tsan build (its interceptors and
# redzones would change the very stacks the e2e tests check), and with debug
# info whatever the build type (the tests symbolize them down to source lines;
# a Release build passes no -g).
function(cpa_profiled_program target)
  target_compile_options(${target} PRIVATE -g)
  if(CPA_SANITIZE)
    target_compile_options(${target} PRIVATE -fno-sanitize=all)
    target_link_options(${target} PRIVATE -fno-sanitize=all)
  endif()
endfunction()

foreach(variant fp nofp)
  if(variant STREQUAL "fp")
    set(wl_flags -O1 -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer)
    set(wl_name cpa-workload)
  else()
    set(wl_flags -O2 -fomit-frame-pointer -fasynchronous-unwind-tables)
    set(wl_name cpa-workload-nofp)
  endif()
  add_library(cpawl_${variant} SHARED ${CMAKE_CURRENT_LIST_DIR}/workload/wl_lib.c)
  target_compile_options(cpawl_${variant} PRIVATE ${wl_flags} -fno-inline -fno-optimize-sibling-calls)
  set_target_properties(cpawl_${variant} PROPERTIES OUTPUT_NAME cpawl-${variant}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
  add_executable(${wl_name} ${CMAKE_CURRENT_LIST_DIR}/workload/workload.c)
  target_compile_options(${wl_name} PRIVATE ${wl_flags} -fno-inline -fno-optimize-sibling-calls)
  target_include_directories(${wl_name} PRIVATE ${CMAKE_CURRENT_LIST_DIR}/workload)
  target_link_libraries(${wl_name} PRIVATE cpawl_${variant} Threads::Threads)
  set_target_properties(${wl_name} PROPERTIES BUILD_RPATH ${CMAKE_BINARY_DIR}/lib)
  cpa_profiled_program(cpawl_${variant})
  cpa_profiled_program(${wl_name})
endforeach()

# cpa-wl-offcpu: known blocking (nanosleep, pipe, mutex, fdatasync, preemption)
# for the off-CPU test, and a pipe ping-pong for bench_overhead. Built without
# frame pointers: off-CPU stacks must unwind through DWARF like on-CPU ones.
add_executable(cpa-wl-offcpu ${CMAKE_CURRENT_LIST_DIR}/workload/offcpu.c)
target_compile_options(cpa-wl-offcpu PRIVATE -O2 -fomit-frame-pointer
  -fasynchronous-unwind-tables -fno-inline -fno-optimize-sibling-calls)
target_include_directories(cpa-wl-offcpu PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(cpa-wl-offcpu PRIVATE Threads::Threads)
cpa_profiled_program(cpa-wl-offcpu)

# cpa-wl-churn: short-lived children (fork and fork+exec) working in the
# FP-less shared library, and a process that dlopen()s libcpawl-dl, works in
# it and dlclose()s it before it exits: the mapping history's e2e tests.
add_library(cpawl_dl SHARED ${CMAKE_CURRENT_LIST_DIR}/workload/wl_lib.c)
target_compile_options(cpawl_dl PRIVATE -O2 -fomit-frame-pointer -fasynchronous-unwind-tables
  -fno-inline -fno-optimize-sibling-calls)
target_compile_definitions(cpawl_dl PRIVATE WL_DL)
set_target_properties(cpawl_dl PROPERTIES OUTPUT_NAME cpawl-dl
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
add_executable(cpa-wl-churn ${CMAKE_CURRENT_LIST_DIR}/workload/churn.c)
target_compile_options(cpa-wl-churn PRIVATE -O2 -fomit-frame-pointer -fasynchronous-unwind-tables
  -fno-inline -fno-optimize-sibling-calls)
target_include_directories(cpa-wl-churn PRIVATE ${CMAKE_CURRENT_LIST_DIR}/workload)
# Bound at load (-z now): no lazy PLT resolution in every forked child, whose
# _dl_runtime_resolve xsave frames are a stack-copy matter, not a mapping one.
target_link_libraries(cpa-wl-churn PRIVATE cpawl_nofp ${CMAKE_DL_LIBS})
target_link_options(cpa-wl-churn PRIVATE -Wl,-z,now)
set_target_properties(cpa-wl-churn PROPERTIES BUILD_RPATH ${CMAKE_BINARY_DIR}/lib)
add_dependencies(cpa-wl-churn cpawl_dl)
cpa_profiled_program(cpawl_dl)
cpa_profiled_program(cpa-wl-churn)

# cpa-wl-malloc: malloc + free in a loop, the count in a shared file, for the
# probe budget (test_probe_budget: a uprobe on libc's malloc) and bench_probe.
add_executable(cpa-wl-malloc ${CMAKE_CURRENT_LIST_DIR}/workload/malloc_wl.c)
target_compile_options(cpa-wl-malloc PRIVATE -O2)
cpa_profiled_program(cpa-wl-malloc)
