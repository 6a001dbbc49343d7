# Exactly once at stop (docs/pipeline.md, "Stopping"; docs/reliability.md, "How
# each kill is accounted"), in the form of the attack, with bench_torture's
# balance (produced = stored + lost rows):
# - test_stop_hung_<stage>: the stage SIGSTOPped, then SIGINT to the monitor;
#   it is killed after the drain timeout (3 s here) and what it held must be
#   in the store as [lost: <stage> lost_killed_at_stop];
# - test_stop_kill_after_landed: the storer killed at its drain's release,
#   once its last blocks' writes landed (--kill_at_stop storer): the monitor
#   counts nothing the store holds as lost (before: every sample twice,
#   stored and lost_killed_at_stop);
# - test_stop_capture_quick_kills: three capture kills 0.3 s apart; every gap
#   must be stored as [lost: capture not_sampled_while_down] (the rows equal
#   capture's not_sampled_while_down counter, and there are some).
if(NOT TARGET bench_torture)
  return()
endif()
foreach(stage unwindd symd storer)
  cpa_test(NAME test_stop_hung_${stage}
    COMMAND bench_torture --kills 0 --hang_at_stop ${stage} --freq 999 LABELS torture root)
endforeach()
cpa_test(NAME test_stop_kill_after_landed
  COMMAND bench_torture --kills 0 --kill_at_stop storer --freq 999 LABELS torture root)
cpa_test(NAME test_stop_capture_quick_kills
  COMMAND bench_torture --kills 3 --victims capture --pace 300:300 --freq 999
  LABELS torture root)
