# bench_unwind: CFI row evaluation and end-to-end walks (docs/unwinding.md), on
# the CFI fixture that tests/ uses too.
include(${CMAKE_SOURCE_DIR}/tests/fixtures/cfi/cfi_fixtures.cmake)
add_executable(bench_unwind bench_unwind.c)
target_link_libraries(bench_unwind PRIVATE cfi_capture cpa_cfi)
