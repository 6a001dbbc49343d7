#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Capture's wakeups and CPU under cron-like Pythons, two cpa builds side by side
# (bench/idle_wakeups.sh), docs/bench.md "Python naming on an idle host".
#
#   bench/py_wakeups.sh A_BIN_DIR B_BIN_DIR SECONDS ROUNDS ["WORKLOAD..."]
#
# Per workload (default "pass compute"), ROUNDS runs of bench/idle_wakeups.sh A B SECONDS while it runs, A and B
# swapped every other round (the monitor started first is not always the same):
#   pass     `python3 -c pass` every 2 s (mostly never sampled)
#   compute  a python3 computing 0.3 s every 5 s (sampled, its code objects named)
#   none     no Python: the host's own (the baseline of the two above)
# PY (default python3, as found in PATH) is the interpreter the workloads run.
# Prints per round capture's and all of cpa's wakeups/s and µs of CPU a second, A and B.
# Root only.
set -eu
[ $# -eq 4 ] || [ $# -eq 5 ] || {
	echo "usage: $0 A_BIN_DIR B_BIN_DIR SECONDS ROUNDS [\"WORKLOAD...\"]" >&2
	exit 2
}
A=$1 B=$2 SECS=$3 ROUNDS=$4 WORKLOADS=${5:-pass compute} PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
load=
trap '[ -n "$load" ] && kill $load 2>/dev/null; wait 2>/dev/null || true' EXIT
workload() {
	case $1 in
	pass) while :; do "$PY" -c pass; sleep 2; done ;;
	compute) while :; do
		"$PY" -c 'import time
def f(n):
    return sum(i * i for i in range(n))
e = time.monotonic() + 0.3
while time.monotonic() < e:
    f(10000)'
		sleep 5
	done ;;
	none) exec sleep infinity ;;
	esac
}
printf "%-8s %5s %5s %14s %14s %14s %14s %12s %12s\n" workload round order "capture wk/s A" \
	"capture wk/s B" "capture µs/s A" "capture µs/s B" "all µs/s A" "all µs/s B"
for w in $WORKLOADS; do
	workload $w >/dev/null 2>&1 &
	load=$!
	for r in $(seq 1 "$ROUNDS"); do
		if [ $((r % 2)) -eq 1 ]; then
			out=$("$here/idle_wakeups.sh" "$A" "$B" "$SECS") order=AB
		else
			out=$("$here/idle_wakeups.sh" "$B" "$A" "$SECS") order=BA
		fi
		echo "$out" | awk -v w=$w -v r=$r -v o=$order '
			$1 == "capture" { cw[0] = $2; cw[1] = $3; cc[0] = $4; cc[1] = $5 }
			$1 == "all" { ac[0] = $4; ac[1] = $5 }
			END {
				a = o == "AB" ? 0 : 1; b = 1 - a
				printf "%-8s %5d %5s %14.3f %14.3f %14.1f %14.1f %12.1f %12.1f\n", w, r, o,
				       cw[a], cw[b], cc[a], cc[b], ac[a], ac[b]
			}'
	done
	kill $load 2>/dev/null
	wait $load 2>/dev/null || true
	load=
done
