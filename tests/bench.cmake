# bench/fold.c: how the benches read `cpa show` folded output and `perf script` text.
cpa_add_test(NAME test_bench_fold SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bench_fold.c
  ${CMAKE_SOURCE_DIR}/bench/fold.c LABELS bench TIMEOUT 30)

# bench_bpf_floor, one short round: every rung loads, runs on the real kernel and
# delivers records that name a real task (the bench checks; no timing is asserted).
if(TARGET bench_bpf_floor)
  cpa_test(NAME test_bench_bpf_floor COMMAND bench_bpf_floor --seconds 1 --reps 1
    LABELS e2e bench root TIMEOUT 120)
endif()
