# Go programs (built by the test with Debian's go, normal and stripped) under
# the real monitor: names from .gopclntab, stacks to goexit/mstart, no false
# stop markers (docs/unwinding.md, "Go"). Root + BTF + go, else exit 77.
cpa_add_test(NAME test_go SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_go.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root go TIMEOUT 300)
add_dependencies(test_go cpa capture unwindd symd storer)
