# DWARF CFI unwinder library (docs/unwinding.md): table builder + hot-path walker.
# unwindd/CMakeLists.txt does include(cfi.cmake) and links cpa_cfi; tests and
# benches include it themselves when unwindd/ has not yet.
add_library(cpa_cfi STATIC
  ${CMAKE_SOURCE_DIR}/unwindd/cfi.c
  ${CMAKE_SOURCE_DIR}/unwindd/walk.c)
target_include_directories(cpa_cfi PUBLIC ${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/unwindd)
target_link_libraries(cpa_cfi PUBLIC PkgConfig::LIBELF)
# The walker is the hot path of unwindd: optimise it even in Debug builds
# unless a sanitizer build wants exact stacks.
if(NOT CPA_SANITIZE)
  target_compile_options(cpa_cfi PRIVATE -O2)
endif()
