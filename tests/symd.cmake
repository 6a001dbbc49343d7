# symd: symbol lookup, debug files, kallsyms, names, hostile ELF and the
# whole stage over a real arena. ~160 s under ASan on a quiet host; a README run at load
# 27 went past 300 s while still progressing: a hang guard of 600 s.
# Fixture library with known functions, built like any user binary
# (build-id, .symtab). -O1 keeps the calls; noinline keeps the functions.
add_library(symd_fixture SHARED ${CMAKE_SOURCE_DIR}/tests/fixtures/symd/fixture_lib.c)
target_compile_options(symd_fixture PRIVATE -O1 -g -fno-omit-frame-pointer)
target_link_options(symd_fixture PRIVATE -Wl,--build-id=sha1)
set_target_properties(symd_fixture PROPERTIES
  LIBRARY_OUTPUT_DIRECTORY ${CPA_TEST_DIR}/symd OUTPUT_NAME cpa_symd_fixture)

cpa_add_test(NAME test_symd SOURCES test_symd.c test_proc.c LIBS cpa_symd_core ${CMAKE_DL_LIBS}
  LABELS symd TIMEOUT 600)
add_dependencies(test_symd symd_fixture)
target_compile_definitions(test_symd PRIVATE
  SYMD_FIXTURE_SO="$<TARGET_FILE:symd_fixture>"
  SYMD_FIXTURE_DIR="${CMAKE_SOURCE_DIR}/tests/fixtures/symd")
# test_exec_drain_and_term spawns the real executable from CPA_BUILD_DIR/bin.
add_dependencies(test_symd symd)
