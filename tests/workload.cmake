# The test workload, built twice: with frame pointers and without (-O2
# -fomit-frame-pointer), each with its own copy of the shared library. The e2e
# tests and bench_overhead use it; each includes this file, the first defines it.
include_guard(GLOBAL)
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
endforeach()

# cpa-wl-offcpu: known blocking (nanosleep, pipe, mutex, fdatasync, preemption)
# for the off-CPU test, and a pipe ping-pong for bench_overhead. Built without
# frame pointers: off-CPU stacks must unwind through DWARF like on-CPU ones.
add_executable(cpa-wl-offcpu ${CMAKE_CURRENT_LIST_DIR}/workload/offcpu.c)
target_compile_options(cpa-wl-offcpu PRIVATE -O2 -fomit-frame-pointer
  -fasynchronous-unwind-tables -fno-inline -fno-optimize-sibling-calls)
target_include_directories(cpa-wl-offcpu PRIVATE ${CMAKE_SOURCE_DIR})
target_link_libraries(cpa-wl-offcpu PRIVATE Threads::Threads)
