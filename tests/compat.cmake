# CPA compatibility through the real binaries, as a script written for CPA
# runs them (docs/cli.md, "CPA's words"): help texts, option-check errors and
# exit codes, --help and --version of every binary. No root: unit tier.
cpa_test(NAME test_cpa_compat COMMAND ${CMAKE_CURRENT_LIST_DIR}/test_cpa_compat.sh
  LABELS unit TIMEOUT 60)
