# Hostile binaries (docs/reliability.md, "Fuzzing and hostile input"): a corpus
# made at test time from the symd fixture library, bombs, debuglink paths, and
# a library with hostile CFI, through symd's and unwindd's ELF/CFI code.
set(HOSTILE_DIR ${CMAKE_BINARY_DIR}/tests/hostile)
# Plain compiler and flags, like the CFI fixtures: the CFI is what is tested.
add_custom_command(
  OUTPUT ${HOSTILE_DIR}/libcfihostile.so
  COMMAND ${CMAKE_COMMAND} -E make_directory ${HOSTILE_DIR}
  COMMAND ${CMAKE_C_COMPILER} -O2 -fPIC -shared -fno-sanitize=all
          -o ${HOSTILE_DIR}/libcfihostile.so ${CMAKE_SOURCE_DIR}/tests/fixtures/hostile/cfi_hostile.c
  DEPENDS ${CMAKE_SOURCE_DIR}/tests/fixtures/hostile/cfi_hostile.c
  COMMENT "hostile CFI fixture")
add_custom_target(hostile_fixtures DEPENDS ${HOSTILE_DIR}/libcfihostile.so)

pkg_check_modules(LIBLZMA REQUIRED IMPORTED_TARGET liblzma)
pkg_check_modules(ZLIB REQUIRED IMPORTED_TARGET zlib)
cpa_add_test(NAME test_hostile_elf SOURCES test_hostile_elf.c test_proc.c
  LIBS cpa_symd_core cpa_unwindd PkgConfig::LIBLZMA PkgConfig::ZLIB LABELS symd unwind
  TIMEOUT 300)
add_dependencies(test_hostile_elf hostile_fixtures symd_fixture)
target_compile_definitions(test_hostile_elf PRIVATE
  SYMD_FIXTURE_SO="$<TARGET_FILE:symd_fixture>"
  HOSTILE_CFI_SO="${HOSTILE_DIR}/libcfihostile.so")
