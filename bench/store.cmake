# The store's tail a restarted storer reads, and what format 1.2's seq trailer costs
# (docs/bench.md, "bench_store_tail").
add_executable(bench_store_tail ${CMAKE_CURRENT_LIST_DIR}/store_tail.c)
target_link_libraries(bench_store_tail PRIVATE cpa_store cpa_shm cpa_common)
