# Memory under churn (issue 27, docs/bench.md "bench_churn --mem"): the real `cpa monitor`
# (whole machine, 499 Hz, --max_cache_size_mb 64) under the fork/exec storm, 60 s of
# warm-up then 40 s in which each stage's RSS is read from /proc every second. Fails if a
# stage's RSS grew more than 10 % in the second half, went above the cap + 40 MB (the
# program, its libraries, the 10 MB arena it maps), or if the dictionary journal is larger
# than the segments it serves + 2 MB. Ratios and sizes of memory, not timings. Root + BPF,
# else 77. The 160 s figures of docs/bench.md: `bench_churn --mem`.
if(NOT TARGET bench_churn)
  return()
endif()
cpa_test(NAME test_mem_churn
  COMMAND bench_churn --mem --warmup 60 --seconds 40 --max_growth 10 --mem_cap 64
    --mem_slack 40 --max_journal_excess 2
  LABELS torture root TIMEOUT 400)
# The same at the defaults (1024 MiB cap), under the storm of few-ms programs (`--short`:
# gcc -c, sh, coreutils): nothing but churn bounds the caches there (symd's epoch budget,
# the storer's segment dictionary, idle binaries). Fails if a stage grew more than 10 % in
# the second half or the journal outgrew the segments by 2 MB. 22ad4ed (before the caps)
# fails it, 4 runs in 4: the journal 3.9-5.0 MB next to 1.3-1.6 MB of segments
# (docs/reliability.md, "Memory").
cpa_test(NAME test_mem_churn_default
  COMMAND bench_churn --mem --short --warmup 60 --seconds 40 --max_growth 10
    --max_journal_excess 2
  LABELS torture root TIMEOUT 400)
