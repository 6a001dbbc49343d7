# The store library, the storer stage and `cpa show` (storer/, cpa/show.c).
cpa_add_test(NAME test_store SOURCES test_store.c
  LIBS cpa_storer_stage cpa_store cpa_shm cpa_common LABELS store TIMEOUT 300)
add_dependencies(test_store storer) # test_stage_process runs build/bin/storer
# show.c is compiled in directly: the front command (cpa/) builds it the same way.
cpa_add_test(NAME test_show SOURCES test_show.c ${CMAKE_CURRENT_LIST_DIR}/../cpa/show.c
  ${CMAKE_CURRENT_LIST_DIR}/../cpa/show_export.c ${CMAKE_CURRENT_LIST_DIR}/../cpa/show_sched.c
  LIBS cpa_export cpa_store cpa_common LABELS store show TIMEOUT 120)
add_dependencies(test_show cpa) # test_show_binary runs build/bin/cpa
