# Exports of `cpa show` (export/export*.c): pprof, SVG, speedscope, diffs.
if(NOT TARGET cpa_export)
  return()
endif()

# speedscope's schema and ajv from npm into build/npm, once, as a ctest
# fixture: nothing is fetched at build time, nothing global.
add_test(NAME export_npm_setup
  COMMAND npm install --no-audit --no-fund --prefix ${CMAKE_BINARY_DIR}/npm speedscope@1.25.0 ajv@8)
set_tests_properties(export_npm_setup PROPERTIES FIXTURES_SETUP export_npm TIMEOUT 300
  LABELS "unit;export")

cpa_add_test(NAME test_export SOURCES test_export.c
  LIBS cpa_export cpa_store cpa_common z LABELS export TIMEOUT 120)
set_tests_properties(test_export PROPERTIES FIXTURES_REQUIRED export_npm)
add_dependencies(test_export cpa-workload) # test_pprof_lines reads its DWARF

# On the real kernel: cpa monitor + the workload, exports read by go tool
# pprof, xmllint, headless Chromium. Root + BTF, else exit 77.
cpa_add_test(NAME test_export_e2e SOURCES test_export_e2e.c
  LIBS cpa_common LABELS e2e root export TIMEOUT 600 EXCLUSIVE)
add_dependencies(test_export_e2e cpa capture unwindd symd storer cpa-workload cpa-workload-nofp)
