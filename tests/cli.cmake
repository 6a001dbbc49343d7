# The front command and the supervisor (cpa/).
# Parser cases in-process (cpa_cli) plus the built binary (CPA_BUILD_DIR/bin/cpa).
cpa_add_test(NAME test_cli SOURCES test_cli.c LIBS cpa_cli cpa_common LABELS cli TIMEOUT 60)
add_dependencies(test_cli cpa)
# The same program with "nonroot" runs cpa as nobody (setpriv): root only, else 77.
add_test(NAME test_cli_nonroot COMMAND test_cli nonroot)
set_tests_properties(test_cli_nonroot PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS "unit;cli"
  ENVIRONMENT "CPA_BUILD_DIR=${CMAKE_BINARY_DIR};CK_DEFAULT_TIMEOUT=60")

# Fake stages: one source built as capture, unwindd, symd and storer in their
# own directory, which test_monitor hands to the monitor as CPA_STAGE_DIR.
set(CPA_FAKE_STAGE_DIR ${CPA_TEST_DIR}/fake-stages)
foreach(stage capture unwindd symd storer)
  add_executable(fake_stage_${stage} test_monitor_stage.c)
  set_target_properties(fake_stage_${stage} PROPERTIES
    OUTPUT_NAME ${stage} RUNTIME_OUTPUT_DIRECTORY ${CPA_FAKE_STAGE_DIR})
  target_link_libraries(fake_stage_${stage} PRIVATE cpa_daemon)
  list(APPEND CPA_FAKE_STAGES fake_stage_${stage})
endforeach()

cpa_add_test(NAME test_monitor SOURCES test_monitor.c LIBS cpa_cli cpa_shm cpa_common
  LABELS monitor TIMEOUT 180)
add_dependencies(test_monitor cpa ${CPA_FAKE_STAGES})
