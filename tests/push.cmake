# cpa-push against a loopback HTTP receiver in the test (push/, docs/push.md).
if(NOT TARGET cpa-push)
  return()
endif()
cpa_add_test(NAME test_push SOURCES test_push.c LIBS cpa_store cpa_common LABELS push TIMEOUT 180)
add_dependencies(test_push cpa-push)
# cpa monitor --push URL on the real kernel (root + BTF, else 77).
cpa_add_test(NAME test_push_monitor SOURCES test_push.c LIBS cpa_store cpa_common
  LABELS push e2e root TIMEOUT 180)
target_compile_definitions(test_push_monitor PRIVATE PUSH_MONITOR=1)
add_dependencies(test_push_monitor cpa-push cpa capture unwindd symd storer cpa-workload)
# cpa-push --once against a backend that is down or refuses (exit 1 within
# --timeout, nothing lost); a hang is this TIMEOUT, a failure.
cpa_add_test(NAME test_push_once SOURCES test_push.c LIBS cpa_store cpa_common LABELS push
  TIMEOUT 120)
target_compile_definitions(test_push_once PRIVATE PUSH_ONCE=1)
add_dependencies(test_push_once cpa-push)
