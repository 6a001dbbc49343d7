# Store roots with run dirs this user cannot read: `cpa show` and cpa-view as
# nobody name them (export/show.c, viewer/model.c). Root and setpriv, else 77.
if(NOT TARGET cpa_viewer OR NOT TARGET cpa_show)
  return()
endif()

cpa_add_test(NAME test_read_perm SOURCES test_read_perm.c
  LIBS cpa_viewer cpa_store cpa_shm cpa_common LABELS unit show TIMEOUT 120)
add_dependencies(test_read_perm cpa cpa-view) # runs build/bin/cpa and cpa-view as nobody
