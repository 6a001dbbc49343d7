# CFI unwinder tests (docs/unwinding.md). The fixture programs are built with
# the plain compiler and fixed flags, NOT the project's (-fno-omit-frame-pointer,
# sanitizers): they must look like FP-less production code.
if(NOT TARGET cpa_cfi)
  include(${CMAKE_SOURCE_DIR}/unwindd/cfi.cmake)
endif()

set(CFI_FIX_SRC ${CMAKE_SOURCE_DIR}/tests/fixtures/cfi)
set(CFI_FIX_DIR ${CMAKE_BINARY_DIR}/tests/cfi)
set(CFI_FIX_FLAGS -O2 -g -fomit-frame-pointer -fasynchronous-unwind-tables -fno-sanitize=all)
add_custom_command(
  OUTPUT ${CFI_FIX_DIR}/libcfifix.so ${CFI_FIX_DIR}/libcfifp.so ${CFI_FIX_DIR}/cfi_fixture
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CFI_FIX_DIR}
  COMMAND ${CMAKE_C_COMPILER} ${CFI_FIX_FLAGS} -fPIC -shared
          -o ${CFI_FIX_DIR}/libcfifix.so ${CFI_FIX_SRC}/fixlib.c
  # frame pointers and no unwind tables (no -g: that would emit .debug_frame): the hybrid
  # FP fallback case
  COMMAND ${CMAKE_C_COMPILER} -O2 -fno-omit-frame-pointer -fno-asynchronous-unwind-tables
          -fno-unwind-tables -fno-sanitize=all -fPIC -shared
          -o ${CFI_FIX_DIR}/libcfifp.so ${CFI_FIX_SRC}/fplib.c
  COMMAND ${CMAKE_C_COMPILER} ${CFI_FIX_FLAGS} -Wl,-z,lazy -pthread
          -o ${CFI_FIX_DIR}/cfi_fixture ${CFI_FIX_SRC}/fixture.c
          -L${CFI_FIX_DIR} -lcfifix -lcfifp -Wl,-rpath,${CFI_FIX_DIR}
  DEPENDS ${CFI_FIX_SRC}/fixture.c ${CFI_FIX_SRC}/fixlib.c ${CFI_FIX_SRC}/fplib.c
  COMMENT "CFI fixtures (-O2 -fomit-frame-pointer)")
add_custom_target(cfi_fixtures DEPENDS ${CFI_FIX_DIR}/libcfifix.so ${CFI_FIX_DIR}/libcfifp.so
  ${CFI_FIX_DIR}/cfi_fixture)

add_library(cfi_capture STATIC ${CFI_FIX_SRC}/cfi_capture.c)
target_link_libraries(cfi_capture PUBLIC cpa_cfi PkgConfig::LIBELF)

# libdw only in the test: an independent reader to cross-check the compiled rows against
cpa_add_test(NAME test_cfi SOURCES test_cfi.c LIBS cfi_capture cpa_cfi PkgConfig::LIBDW
  LABELS unwind TIMEOUT 120)
add_dependencies(test_cfi cfi_fixtures)
target_compile_definitions(test_cfi PRIVATE CFI_FIXTURE_DIR="${CFI_FIX_DIR}"
  CFI_FIXTURE_SRC="${CFI_FIX_SRC}")
