#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Capture's extra wakeups for short Python launchers, two cpa builds side by side.
# docs/bench.md, "Launcher wakeups, two builds at once".
#
#   bench/launcher_wakeups.sh A_BIN_DIR B_BIN_DIR [ROUNDS [RUNS]]
#
# Both monitors run at once, each with a scratch store, so both count the same runs on
# the same host (its load moves more between two runs than the builds differ). As
# test_python_launcher does: RUNS (50) runs of pyenv's `python3.11 --version` 20 ms
# apart, then 2 s, against as many /bin/true, by turns, ROUNDS (4) times; capture's
# `wakeups` (cpa ctl status) over each batch. Prints the batches, then per build the
# launchers' wakeups, /bin/true's, and the extra. PY: the launcher. Root only.
set -eu
if [ $# -lt 2 ] || [ $# -gt 4 ]; then
	echo "usage: $0 A_BIN_DIR B_BIN_DIR [ROUNDS [RUNS]]" >&2
	exit 2
fi
A=$1 B=$2 ROUNDS=${3:-4} RUNS=${4:-50}
PY=${PY:-/root/.pyenv/versions/3.11.7/bin/python3.11}
scr=$(mktemp -d "${TMPDIR:-/tmp}/cpa-launchwake.XXXXXX")
pa='' pb=''
cleanup() {
	[ -n "$pa" ] && kill -INT "$pa" 2>/dev/null
	[ -n "$pb" ] && kill -INT "$pb" 2>/dev/null
	wait 2>/dev/null || true
	rm -rf "$scr"
}
trap cleanup EXIT
"$A/cpa" monitor --store_dir "$scr/a" >"$scr/a.log" 2>&1 &
pa=$!
"$B/cpa" monitor --store_dir "$scr/b" >"$scr/b.log" 2>&1 &
pb=$!
sleep 4
# capture's wakeups of build dir $1, store $2
wakeups() {
	"$1/cpa" ctl --store_dir "$2" status | sed -n '/capture:/,$p' |
		grep -o 'wakeups[ :=]*[0-9]*' | head -1 | grep -o '[0-9]*$'
}
# one batch of $1 (py or true): "arm wakeups-A wakeups-B"
batch() {
	local a0 b0 i
	a0=$(wakeups "$A" "$scr/a")
	b0=$(wakeups "$B" "$scr/b")
	for ((i = 0; i < RUNS; i++)); do
		if [ "$1" = py ]; then "$PY" --version >/dev/null; else /bin/true; fi
		sleep 0.02
	done
	sleep 2
	echo "$1 $(($(wakeups "$A" "$scr/a") - a0)) $(($(wakeups "$B" "$scr/b") - b0))"
}
for ((r = 0; r < ROUNDS; r++)); do
	if ((r % 2)); then batch true; batch py; else batch py; batch true; fi
done | tee "$scr/out"
awk '{ s[$1 " A"] += $2; s[$1 " B"] += $3 }
	END {
		for (b = 0; b < 2; b++) {
			k = b ? "B" : "A"
			printf "%s: launchers %d, /bin/true %d, extra %d\n", k, s["py " k],
				s["true " k], s["py " k] - s["true " k]
		}
	}' "$scr/out"
