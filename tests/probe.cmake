# Probe-triggered stacks (--probe): cpa monitor with the real stages on the
# real kernel against a workload of known call counts, then cpa show
# --probe_id. Root + BPF, else exit 77.
include(${CMAKE_CURRENT_LIST_DIR}/workload.cmake)
# No frame pointers: the stacks must come from the same CFI unwinding as
# on-CPU samples. The USDT probe needs <sys/sdt.h> (systemtap-sdt-dev).
add_executable(cpa-probe-wl ${CMAKE_CURRENT_LIST_DIR}/workload/probe_wl.c)
target_compile_options(cpa-probe-wl PRIVATE -O2 -g -fomit-frame-pointer
  -fasynchronous-unwind-tables -fno-inline -fno-optimize-sibling-calls)
cpa_add_test(NAME test_probe SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_probe.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root TIMEOUT 300)
add_dependencies(test_probe cpa capture unwindd symd storer cpa-probe-wl cpa-wl-malloc)
# The probe budget: a uprobe on libc's malloc under a malloc loop is thinned,
# then detached; the loop's rate before/after is compared, so it runs alone.
cpa_test(NAME test_probe_budget COMMAND test_probe budget LABELS e2e root EXCLUSIVE TIMEOUT 300)
