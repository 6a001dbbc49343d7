# Memory under churn (issue 27, docs/bench.md "bench_churn --mem"): the real `cpa monitor`
# (whole machine, 499 Hz, --max_cache_size_mb 64) under the fork/exec storm, 60 s of
# warm-up then 40 s in which each stage's RSS is read from /proc every second. Fails if a
# stage grew more than 10 % in the second half (its peak there against its peak in the
# first: a climb is end against mid; a cache refilled after an epoch or a trim is no
# growth), went above the cap + 40 MB (the program, its libraries, the 10 MB arena it
# maps), or if the dictionary journal is larger than the segments it serves + 2 MB. Ratios
# and sizes of memory, not timings. Root + BPF, else 77. The 160 s figures of
# docs/bench.md: `bench_churn --mem`.
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
# fails it: the journal 3.9-5.0 MB next to 1.4-1.6 MB of segments.
cpa_test(NAME test_mem_churn_default
  COMMAND bench_churn --mem --short --warmup 60 --seconds 40 --max_growth 10
    --max_journal_excess 2
  LABELS torture root TIMEOUT 400)
# The attack of issue 27 item 7 as it was made: 160 s of the storm of Debian programs (gzip,
# xz, bzip2, sed, awk, sort, sha256sum, perl) at 499 Hz from the monitor's start, the default
# cap; the first half is the warm-up. Fails if a stage's peak RSS grew more than 10 % in the
# second half or the journal outgrew the segments by 2 MB. 22ad4ed fails every check: each
# stage climbed all along (storer 12.2 -> 20.6 -> 27.0 MB, symd 14 -> 54 -> 96 MB).
cpa_test(NAME test_mem_churn_160s
  COMMAND bench_churn --mem --max_growth 10 --max_journal_excess 2
  LABELS torture root TIMEOUT 400 EXCLUSIVE)
