# common/: the shared helpers (time, whole-file read, hash + intern table,
# cpu list, rate limiter, --probe specs), one test case each.
cpa_add_test(NAME test_common SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_common.c
  LIBS cpa_common cpa_probespec LABELS common TIMEOUT 60)
