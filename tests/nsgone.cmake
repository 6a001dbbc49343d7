# Short-lived processes of another mount namespace named and unwound after
# they exit (docs/unwindd.md, "Binaries of gone processes"): the spin
# programs of test_priv (priv.cmake), and the same without frame pointers,
# whose walk needs .eh_frame. Root + BTF + unshare, else exit 77.
cpa_add_test(NAME test_nsgone SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_nsgone.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root TIMEOUT 300)
add_dependencies(test_nsgone cpa capture unwindd symd storer cpa-ns-spin-inside
  cpa-ns-spin-host)
foreach(tag inside host)
  add_executable(cpa-ns-spin-${tag}-nofp ${CMAKE_CURRENT_LIST_DIR}/workload/ns_spin.c)
  target_compile_options(cpa-ns-spin-${tag}-nofp PRIVATE -O1 -g -fomit-frame-pointer
    -fasynchronous-unwind-tables -fno-inline -fno-optimize-sibling-calls)
  target_compile_definitions(cpa-ns-spin-${tag}-nofp PRIVATE NS_LEAF=ns_${tag}_leaf
    NS_MID=ns_${tag}_mid)
  cpa_profiled_program(cpa-ns-spin-${tag}-nofp)
  add_dependencies(test_nsgone cpa-ns-spin-${tag}-nofp)
endforeach()
