# JIT runtimes (tests/workload/jit_src.h) under the real monitor: node
# --perf-basic-prof, java with no flags and with -XX:+PreserveFramePointer;
# the hot function named, stacks walked through JIT code and V8 builtins
# (docs/unwinding.md, "JIT code"). Root + BTF + the runtime, else exit 77.
foreach(rt node java)
  cpa_add_test(NAME test_jit_${rt} SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_jit.c
    ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root jit TIMEOUT 300 ARGS ${rt} EXCLUSIVE)
  add_dependencies(test_jit_${rt} cpa capture unwindd symd storer)
endforeach()
