# The store library, the storer stage and `cpa show` (storer/, export/show.c).
cpa_add_test(NAME test_store SOURCES test_store.c
  LIBS cpa_storer_stage cpa_store cpa_shm cpa_common LABELS store TIMEOUT 300)
add_dependencies(test_store storer) # test_stage_process runs build/bin/storer
# show_run() in-process (cpa_show, export/).
cpa_add_test(NAME test_show SOURCES test_show.c
  LIBS cpa_show cpa_export cpa_store cpa_common LABELS store show TIMEOUT 120)
add_dependencies(test_show cpa) # test_show_binary runs build/bin/cpa
# Damage, hostile files, accidents and full disks (docs/reliability.md, "Store").
# The same program with "disk" mounts a 2 MiB tmpfs: root only, else 77.
cpa_add_test(NAME test_store_reliability SOURCES test_store_reliability.c
  LIBS cpa_storer_stage cpa_store cpa_shm cpa_common LABELS store TIMEOUT 300)
add_dependencies(test_store_reliability cpa) # the show cases run build/bin/cpa
add_test(NAME test_store_disk COMMAND test_store_reliability disk)
set_tests_properties(test_store_disk PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 LABELS "unit;store"
  ENVIRONMENT "CPA_BUILD_DIR=${CMAKE_BINARY_DIR};CK_DEFAULT_TIMEOUT=300")
# The reader's sort of a segment's blocks against qsort() (storer/store_read_index.c).
cpa_add_test(NAME test_store_blocksort SOURCES test_store_blocksort.c
  LIBS cpa_store cpa_common LABELS store TIMEOUT 60)
