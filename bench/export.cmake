# bench_export: export time and peak memory of `cpa show` per format over
# 1 minute / 1 hour / 24 hours of a generated busy store (docs/bench.md).
if(TARGET cpa_store)
  add_executable(bench_export ${CMAKE_CURRENT_LIST_DIR}/bench_export.c)
  set_target_properties(bench_export PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
  target_link_libraries(bench_export PRIVATE cpa_store z)
  if(TARGET cpa)
    add_dependencies(bench_export cpa)
  endif()
endif()
