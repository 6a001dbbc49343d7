# bench/fold.c: how the benches read `cpa show` folded output and `perf script` text.
cpa_add_test(NAME test_bench_fold SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_fold.c
  ${CMAKE_SOURCE_DIR}/bench/fold.c LABELS bench TIMEOUT 30)
