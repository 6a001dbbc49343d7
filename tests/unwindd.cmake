# unwindd/: maps parsing, build-ids, pc translation, the maps cache, the stage
# over real arena rings, and the unwindd executable (drain, SIGTERM).
cpa_add_test(NAME test_unwindd SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_unwindd.c
  LIBS cpa_unwindd LABELS unwindd)

# End to end through the DWARF seam on a real frame-pointer-less process; uses
# the CFI fixture and its ptrace helper from tests/unwind_cfi.cmake.
if(TARGET cfi_capture AND TARGET cfi_fixtures AND TARGET cpa_unwindd)
  cpa_add_test(NAME test_unwindd_cfi SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_unwindd_cfi.c
    LIBS cpa_unwindd cfi_capture LABELS unwindd unwind TIMEOUT 120)
  add_dependencies(test_unwindd_cfi cfi_fixtures)
  target_include_directories(test_unwindd_cfi PRIVATE ${CMAKE_SOURCE_DIR}/tests/fixtures/cfi)
  target_compile_definitions(test_unwindd_cfi PRIVATE
    CFI_FIXTURE_DIR="${CMAKE_BINARY_DIR}/tests/cfi")
endif()

# --bench, the symd restart epoch, --parse_env_values, and --debug_option
# dumps replayed by build/bin/cpa-unwind-replay (which must equal live).
cpa_add_test(NAME test_unwindd_features SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_unwindd_features.c
  LIBS cpa_unwindd LABELS unwindd TIMEOUT 120)
foreach(tool unwindd cpa-unwind-replay)
  if(TARGET ${tool})
    add_dependencies(test_unwindd_features ${tool})
  endif()
endforeach()
