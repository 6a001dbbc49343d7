add_executable(bench_ring ${CMAKE_CURRENT_LIST_DIR}/bench_ring.c)
target_link_libraries(bench_ring PRIVATE cpa_shm)
