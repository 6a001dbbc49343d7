# CFI unwinder tests (docs/unwinding.md) on the fixture programs.
include(${CMAKE_SOURCE_DIR}/tests/fixtures/cfi/cfi_fixtures.cmake)

# libdw only in the test: an independent reader to cross-check the compiled rows against
cpa_add_test(NAME test_cfi SOURCES test_cfi.c LIBS cfi_capture cpa_cfi PkgConfig::LIBDW
  LABELS unwind TIMEOUT 120)
