# cpa-push against a loopback HTTP receiver in the test (push/, docs/push.md).
if(NOT TARGET cpa-push)
  return()
endif()
cpa_add_test(NAME test_push SOURCES test_push.c LIBS cpa_store cpa_common LABELS push TIMEOUT 180)
add_dependencies(test_push cpa-push)
