# cmake --install and the .deb (packaging/, docs/packaging.md).
add_test(NAME test_install COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_install.sh)
add_test(NAME test_deb COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_install.sh deb)
set_tests_properties(test_install test_deb PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  LABELS packaging ENVIRONMENT "CPA_BUILD_DIR=${CMAKE_BINARY_DIR}")
# Without root: file capabilities and ambient capabilities, as user nobody.
add_test(NAME test_nonroot COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_nonroot.sh)
set_tests_properties(test_nonroot PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
  LABELS "packaging;root" ENVIRONMENT "CPA_BUILD_DIR=${CMAKE_BINARY_DIR}")
