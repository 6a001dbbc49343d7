# bench_torture: the crash-consistency torture (issue 14, docs/reliability.md
# "Kills and hangs"): random SIGKILLs of every stage and of the monitor under
# load, then the accounting. Its short ctest runs are in tests/torture.cmake,
# the long ones in scripts/soak.sh.
if(NOT TARGET cpa_store)
  return()
endif()
add_executable(bench_torture ${CMAKE_CURRENT_LIST_DIR}/torture.c)
set_target_properties(bench_torture PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
target_link_libraries(bench_torture PRIVATE cpa_store cpa_shm cpa_common Threads::Threads)
add_dependencies(bench_torture cpa capture unwindd symd storer)
