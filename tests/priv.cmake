# Least privilege of the real pipeline (issue 14): which process holds BPF
# objects. Root + BTF, else exit 77.
cpa_add_test(NAME test_priv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_priv.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root TIMEOUT 300)
add_dependencies(test_priv cpa capture unwindd symd storer)

# The mount namespace case: one program, two sets of names. test_priv runs the
# "inside" build (stripped, its symbols in a debug file found by debuglink or by
# build-id) at a path where the host has the "host" build.
include(${CMAKE_CURRENT_LIST_DIR}/workload.cmake)
foreach(tag inside host)
  add_executable(cpa-ns-spin-${tag} ${CMAKE_CURRENT_LIST_DIR}/workload/ns_spin.c)
  target_compile_options(cpa-ns-spin-${tag} PRIVATE -O1 -g -fno-omit-frame-pointer
    -fno-inline -fno-optimize-sibling-calls)
  target_compile_definitions(cpa-ns-spin-${tag} PRIVATE NS_LEAF=ns_${tag}_leaf NS_MID=ns_${tag}_mid)
  cpa_profiled_program(cpa-ns-spin-${tag})
  add_dependencies(test_priv cpa-ns-spin-${tag})
endforeach()
# The build without frame pointers (nsgone.cmake): a build-id of its own for
# test_priv's debug file reached by build-id through an absolute symlink.
add_dependencies(test_priv cpa-ns-spin-inside-nofp)

# Paths cpa writes as root, through links user nobody planted in a sticky
# world-writable directory (common/safepath.h); the modes of a new store.
add_test(NAME test_paths COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_paths.sh)
set_tests_properties(test_paths PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  LABELS "e2e;root" ENVIRONMENT "CPA_BUILD_DIR=${CMAKE_BINARY_DIR};CPA_TEST_NAME=test_paths")

# common/safepath alone: links and files nobody planted, the temp file +
# renameat pattern of export -o and --split_path. Root, else exit 77.
cpa_add_test(NAME test_safepath SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_safepath.c
  LIBS cpa_common LABELS root)

# Permanent errors are one line, not five restarts (docs/supervisor.md,
# "Permanent errors"): nobody without capabilities, root without them, the
# verifier's refusal with --offcpu; a SIGKILLed capture still restarted.
# Root, BTF, setpriv, else exit 77.
cpa_test(NAME test_permanent COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_permanent.sh
  LABELS e2e root)
