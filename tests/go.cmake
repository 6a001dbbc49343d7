# Go programs (built by the test with Debian's go, normal and stripped) under
# the real monitor: names from .gopclntab, stacks to goexit/mstart, no false
# stop markers (docs/unwinding.md, "Go"). Root + BTF + go, else exit 77.
cpa_add_test(NAME test_go SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_go.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root go TIMEOUT 300)
add_dependencies(test_go cpa capture unwindd symd storer)
# The same executable with "offcpu": a Go program that blocks and signals
# itself under `cpa monitor --offcpu`: no false stop markers off-CPU or on the
# signal stack. EXCLUSIVE: it weighs its stacks by time.
cpa_test(NAME test_go_offcpu COMMAND test_go offcpu LABELS e2e root go EXCLUSIVE TIMEOUT 300)
