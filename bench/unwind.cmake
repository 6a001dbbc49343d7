# bench_unwind: CFI row evaluation and end-to-end walks (docs/unwinding.md), on
# the CFI fixture that tests/ uses too.
include(${CMAKE_SOURCE_DIR}/tests/fixtures/cfi/cfi_fixtures.cmake)
add_executable(bench_unwind bench_unwind.c)
target_link_libraries(bench_unwind PRIVATE cfi_capture cpa_cfi)

# bench_root_stat: a mapping event's lookup of its file in the process's root
# (unwindd/ucache.c bin_of_event(), common/procroot.c), three ways side by side.
add_executable(bench_root_stat root_stat.c)
target_link_libraries(bench_root_stat PRIVATE cpa_common)
