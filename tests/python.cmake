# Python (docs/unwinding.md, "Python"): test_python runs tests/workload/py_hot.py
# under the real monitor with Debian's python3.11 (and pyenv's 3.11.7 when
# there) and counts its samples: EXCLUSIVE. Root + BTF + python3.11, else 77.
# test_pysym: symd's code object reader and line tables against the Pythons
# the machine has (each version's own co_lines()); none, 77.
cpa_add_test(NAME test_python SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_python.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root python TIMEOUT 300 EXCLUSIVE)
# test_python_reuse (the same source, PY_REUSE 1): tests/workload/py_reuse.py frees a
# code object symd named and runs hot() from its address; hot() must be named.
cpa_add_test(NAME test_python_reuse SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_python.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root python TIMEOUT 180 EXCLUSIVE)
# test_python_gone (PY_GONE 1): py_hot.py runs 3 s and exits while symd is stopped; its
# samples reach symd after it is gone and must still name hot() (capture's CPA_REC_PYCODE).
cpa_add_test(NAME test_python_gone SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_python.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root python TIMEOUT 180 EXCLUSIVE)
# test_python_many (PY_MANY 1): py_many.py samples 30,000 distinct code objects, more per
# poll than capture's base read budget: it grows while the BPF ring buffer is nearly empty,
# so those of the process's last seconds are read while it lives (under 1 % "process gone").
cpa_add_test(NAME test_python_many SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_python.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root python TIMEOUT 180 EXCLUSIVE)
# test_python_alias (PY_ALIAS 1): a link named pyworker to python3.11 (its comm not
# python...) lives 1 s, twice, while symd is stopped: its samples still name hot().
cpa_add_test(NAME test_python_alias SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_python.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root python TIMEOUT 180 EXCLUSIVE)
# test_python_launcher (PY_LAUNCHER 1): pyenv's python3.11 (a launcher: libpython3.11.so) lives
# 0.8 s, twice, while symd is stopped: hot() named; its `--version` runs cost capture fewer
# than half a wakeup each over /bin/true's, plus one per launcher sampled (no exec wakeup, no
# timed polls for a launcher).
# Without pyenv's 3.11.7, 77.
cpa_add_test(NAME test_python_launcher SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_python.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LABELS e2e root python TIMEOUT 180 EXCLUSIVE)
foreach(t test_python test_python_reuse test_python_gone test_python_many test_python_alias
    test_python_launcher)
  add_dependencies(${t} cpa capture unwindd symd storer)
  target_compile_definitions(${t} PRIVATE
    PY_HOT_SCRIPT="${CMAKE_SOURCE_DIR}/tests/workload/py_hot.py"
    PY_REUSE_SCRIPT="${CMAKE_SOURCE_DIR}/tests/workload/py_reuse.py"
    PY_MANY_SCRIPT="${CMAKE_SOURCE_DIR}/tests/workload/py_many.py")
  # PY_<SUFFIX> 1 in test_python_<suffix>, the others 0
  foreach(f REUSE GONE MANY ALIAS LAUNCHER)
    string(TOLOWER ${f} suffix)
    if(t STREQUAL "test_python_${suffix}")
      target_compile_definitions(${t} PRIVATE PY_${f}=1)
    else()
      target_compile_definitions(${t} PRIVATE PY_${f}=0)
    endif()
  endforeach()
endforeach()
cpa_add_test(NAME test_pysym SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pysym.c
  ${CMAKE_CURRENT_LIST_DIR}/test_proc.c LIBS cpa_symd_core LABELS unit python TIMEOUT 60)
