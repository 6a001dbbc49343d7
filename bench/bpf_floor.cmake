# bench_bpf_floor: the time per run of cpu-clock BPF programs that each add one
# part of a sample (bench/bpf_floor.c, docs/bench.md "The floor of a BPF sample").
# Its BPF object and skeleton land next to cpa's (bpf/CMakeLists.txt,
# cpa_bpf_program()), which also provides vmlinux.h. Its ctest round is in
# tests/bench.cmake.
set(CPA_BPF_OUT ${CMAKE_BINARY_DIR}/bpf)
cpa_bpf_program(bpf_floor)
add_executable(bench_bpf_floor ${CMAKE_CURRENT_LIST_DIR}/bpf_floor.c
  ${CMAKE_CURRENT_LIST_DIR}/benchutil.c)
add_dependencies(bench_bpf_floor bpf_floor_skel cpa-workload-nofp)
target_include_directories(bench_bpf_floor PRIVATE ${CPA_BPF_OUT})
target_link_libraries(bench_bpf_floor PRIVATE cpa_common PkgConfig::LIBBPF)
