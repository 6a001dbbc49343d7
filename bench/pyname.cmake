# bench_pyname: capture's cost per sample for naming Python code objects
# (capture/cap_pyname.c): native vs Python samples, side by side.
add_executable(bench_pyname ${CMAKE_CURRENT_LIST_DIR}/pyname.c ${CMAKE_CURRENT_LIST_DIR}/pychild.c)
target_link_libraries(bench_pyname PRIVATE cpa_capture_core)
