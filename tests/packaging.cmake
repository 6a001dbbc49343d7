# cmake --install and the .deb (packaging/, docs/packaging.md).
cpa_test(NAME test_install COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_install.sh LABELS packaging
  LOCK packaging)
# test_deb also installs the package into the real system (dpkg -i, as root)
# and runs lintian over it: e2e, and `plain` (scripts/test.sh runs it on the
# Release build, what packagers ship, not under ASan).
cpa_test(NAME test_deb COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_install.sh deb
  LABELS e2e packaging root plain LOCK packaging)
cpa_test(NAME test_unit_security COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_install.sh security
  LABELS packaging LOCK packaging)
# Without root: file capabilities and ambient capabilities, as user nobody, the
# monitor on the real kernel.
cpa_test(NAME test_nonroot COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_nonroot.sh
  LABELS e2e packaging root)
