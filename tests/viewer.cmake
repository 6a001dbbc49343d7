# cpa-view (viewer/): unit tests of the layout, key map, filters; the TUI
# through tmux on a synthetic store; the TUI on a store recorded by real BPF.
if(NOT TARGET cpa_viewer)
  return()
endif()

cpa_add_test(NAME test_view SOURCES test_view.c LIBS cpa_viewer LABELS viewer TIMEOUT 60)
cpa_add_test(NAME test_view_tui SOURCES test_view_tui.c
  LIBS cpa_store cpa_shm cpa_common LABELS viewer TIMEOUT 900)
add_dependencies(test_view_tui cpa-view)
if(TARGET cpa)
  add_dependencies(test_view_tui cpa)
endif()
cpa_add_test(NAME test_view_bpf SOURCES test_view_tui.c ARGS bpf
  LIBS cpa_store cpa_shm cpa_common LABELS viewer e2e root TIMEOUT 300)
add_dependencies(test_view_bpf cpa-view cpa capture unwindd symd storer cpa-workload)
# The aggregation against the sums of reading sample by sample.
# The sums of one and of two reading threads; label tsan: the tsan preset runs it.
cpa_add_test(NAME test_view_agg SOURCES test_view_agg.c LIBS cpa_viewer cpa_shm
  LABELS viewer tsan TIMEOUT 300)
# The loader thread and the chunk cache; label tsan: the tsan preset runs it.
cpa_add_test(NAME test_view_load SOURCES test_view_load.c LIBS cpa_viewer cpa_shm
  LABELS viewer tsan TIMEOUT 300)
