# cpa-view on a big store: bench_view_gen writes one through the real writer,
# bench_view times the viewer's own code on it (docs/bench.md, "bench_view").
if(NOT TARGET cpa_viewer)
  return()
endif()
add_executable(bench_view_gen ${CMAKE_CURRENT_LIST_DIR}/view_gen.c)
target_link_libraries(bench_view_gen PRIVATE cpa_store cpa_shm cpa_common m)
add_executable(bench_view ${CMAKE_CURRENT_LIST_DIR}/bench_view.c ${CMAKE_CURRENT_LIST_DIR}/benchutil.c)
target_link_libraries(bench_view PRIVATE cpa_viewer)
