# unwindd/: maps parsing, build-ids, pc translation, the maps cache, the stage
# over real arena rings, and the unwindd executable (drain, SIGTERM).
cpa_add_test(NAME test_unwindd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_unwindd.c
  LIBS cpa_unwindd LABELS unwindd)
add_dependencies(test_unwindd unwindd) # the process cases run build/bin/unwindd

# End to end through the DWARF seam on a real frame-pointer-less process: the
# CFI fixture and its ptrace helper (tests/fixtures/cfi/cfi_fixtures.cmake).
include(${CMAKE_SOURCE_DIR}/tests/fixtures/cfi/cfi_fixtures.cmake)
cpa_add_test(NAME test_unwindd_cfi SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_unwindd_cfi.c
  LIBS cpa_unwindd cfi_capture LABELS unwindd unwind TIMEOUT 120)

# --bench, the symd restart epoch, --parse_env_values, and --debug_option
# dumps replayed by build/bin/cpa-unwind-replay (which must equal live).
cpa_add_test(NAME test_unwindd_features SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_unwindd_features.c
  LIBS cpa_unwindd LABELS unwindd TIMEOUT 120)
add_dependencies(test_unwindd_features unwindd cpa-unwind-replay)

# The mapping history (maphist) and ucache fed the kernel's mapping events.
cpa_add_test(NAME test_maphist SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_maphist.c
  LIBS cpa_unwindd LABELS unwindd)
