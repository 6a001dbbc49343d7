# End-to-end tests: cpa monitor with the real stages on the real kernel, then
# cpa show. Root + BTF, else exit 77. They need every executable built
# (the workload comes from tests/workload.cmake).
# One executable, one ctest per case group (its argument): test_e2e (the sample
# count, --backend perf, the no-FP shares), test_e2e_pid (--pid), test_e2e_stop
# (SIGINT, SIGTERM), test_e2e_stack (the adaptive stack copy), test_e2e_stacksize
# (--stack_size above 8192 on the BPF backend, the fallback's line), test_e2e_oneshot
# (--oneshot), test_e2e_bench (--bench's CPA lines and the ctl cost), test_e2e_ctl
# (ctl rate and mem answer while the real pipeline runs),
# test_e2e_offcpu (--offcpu against the workload's measured blocking),
# test_e2e_faketime (the stages under LD_PRELOAD=libfaketime across a fake
# midnight; 77 without it), test_e2e_real and test_e2e_bigframes (Debian's own
# programs), test_e2e_churn (200 short-lived children) and test_e2e_dlopen (a
# dlopen/dlclose process): the mapping history. The groups that count samples
# against a rate or measure a cost (test_e2e, bench, offcpu, churn) are
# EXCLUSIVE (tests/CMakeLists.txt); the others run beside other e2e tests.
cpa_add_test(NAME test_e2e SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_e2e.c ${CMAKE_CURRENT_LIST_DIR}/test_proc.c
  LABELS e2e root TIMEOUT 600 ARGS e2e EXCLUSIVE)
add_dependencies(test_e2e cpa capture unwindd symd storer cpa-workload cpa-workload-nofp cpa-wl-offcpu
  cpa-wl-churn cpawl_dl)
# the CFI fixture's bigloop mode (6 KB frames 3 deep) for the adaptive stack copy
include(${CMAKE_SOURCE_DIR}/tests/fixtures/cfi/cfi_fixtures.cmake)
add_dependencies(test_e2e cfi_fixtures)
target_compile_definitions(test_e2e PRIVATE CFI_FIXTURE_DIR="${CMAKE_BINARY_DIR}/tests/cfi")
# test_e2e_oneshot is the smoke test of the fast preset; test_e2e_faketime
# skips itself in a sanitizer build, so it also carries `plain`: scripts/test.sh
# runs that label on the Release build.
foreach(group pid stop stack stacksize oneshot bench ctl offcpu faketime real bigframes churn dlopen)
  set(extra "")
  if(group STREQUAL "oneshot")
    set(extra smoke)
  elseif(group STREQUAL "faketime")
    set(extra plain)
  elseif(group MATCHES "^(bench|offcpu|churn)$")
    set(extra EXCLUSIVE)
  endif()
  cpa_test(NAME test_e2e_${group} COMMAND test_e2e ${group} LABELS e2e root ${extra} TIMEOUT 300)
endforeach()
