# capture: unit tests of the output side (no privileges), and the BPF
# integration test (root + BPF, else exit 77 = skipped).
cpa_add_test(NAME test_capture
  SOURCES test_capture.c ${CMAKE_SOURCE_DIR}/bench/pychild.c
  LIBS cpa_capture_core cpa_shm cpa_common
  LABELS capture
  TIMEOUT 60)

cpa_add_test(NAME test_capture_bpf
  SOURCES test_capture_bpf.c
  LIBS cpa_shm cpa_common PkgConfig::LIBBPF
  LABELS e2e capture bpf root
  TIMEOUT 120
  EXCLUSIVE)
add_dependencies(test_capture_bpf capture)

# test_cap_python: capture's Python process table against real BPF maps (root,
# else 77): the forks and execs of other processes cost no map syscall.
cpa_add_test(NAME test_cap_python
  SOURCES test_cap_python.c ${CMAKE_SOURCE_DIR}/capture/cap_python.c
  LIBS cpa_common PkgConfig::LIBBPF PkgConfig::LIBELF
  LABELS unit capture root
  TIMEOUT 60)
