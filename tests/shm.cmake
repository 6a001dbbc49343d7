# shm/: arena and ring. Label "ring" is what the tsan preset runs.
cpa_add_test(NAME test_ring SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ring.c
  LIBS cpa_shm LABELS ring shm TIMEOUT 600)
cpa_add_test(NAME test_arena SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_arena.c
  LIBS cpa_shm LABELS ring shm)
cpa_add_test(NAME test_stage_loop SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stage_loop.c
  LIBS cpa_shm LABELS shm monitor)
