# Least privilege of the real pipeline (issue 14): which process holds BPF
# objects. Root + BTF, else exit 77.
cpa_add_test(NAME test_priv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_priv.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root TIMEOUT 300)
add_dependencies(test_priv cpa capture unwindd symd storer)
