#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/probe_budget.sh [REPS [BUILD_DIR]]: a malloc loop (cpa-wl-malloc)
# side by side, whole machine, defaults otherwise: without cpa, under `cpa
# monitor --pid WL --probe uprobe:LIBC:malloc` with the default --probe_budget
# (measured 6 s after the attach: thinned, then detached) and with
# --probe_budget 0 (no budget: the probe stays). Each round runs the three
# once; the table shows the medians of malloc calls per second (wall) and per
# second of the loop's own CPU, and each against no cpa. REPS 3, BUILD_DIR
# build/. Root (BPF).
# docs/bench.md "Probe budget".
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '4,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;; esac
reps=${1:-3}
build=${2:-$(dirname "$(realpath "$0")")/../build}
[ "$(id -u)" = 0 ] || { echo "probe_budget: needs root (BPF)" >&2; exit 77; }
bin=$build/bin
for f in cpa cpa-wl-malloc; do
	[ -x "$bin/$f" ] || { echo "probe_budget: no $bin/$f (build cpa, cpa-wl-malloc)" >&2; exit 2; }
done
dir=$(mktemp -d /tmp/cpa-probe-budget.XXXXXX)
wl=0 mon=0
cleanup() {
	[ "$mon" != 0 ] && kill -INT "$mon" 2>/dev/null && wait "$mon" 2>/dev/null
	[ "$wl" != 0 ] && kill "$wl" 2>/dev/null && wait "$wl" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT

# R_WALL, R_CPU: calls/s and calls per CPU second of the running loop over 2 s.
measure() {
	local c0 c1 n0 n1
	c0=$(od -An -tu8 -N8 "$dir/count"); n0=$(cut -d' ' -f1 "/proc/$wl/schedstat")
	sleep 2
	c1=$(od -An -tu8 -N8 "$dir/count"); n1=$(cut -d' ' -f1 "/proc/$wl/schedstat")
	R_WALL=$(((c1 - c0) / 2))
	R_CPU=$(((c1 - c0) * 1000000000 / (n1 - n0)))
}

# One run: $1 = none | default | 0 (the budget).
one_run() {
	local libc args
	rm -f "$dir/count"
	"$bin/cpa-wl-malloc" "$dir/count" >/dev/null &
	wl=$!
	sleep 0.3
	if [ "$1" != none ]; then
		libc=$(grep -m1 -o '/[^ ]*libc\.so\.6' "/proc/$wl/maps")
		args=(monitor --store_dir "$dir/store" --pid "$wl" --probe "uprobe:$libc:malloc")
		[ "$1" = default ] || args+=(--probe_budget "$1")
		"$bin/cpa" "${args[@]}" >"$dir/mon.log" 2>&1 &
		mon=$!
		for _ in $(seq 300); do
			grep -q "all stages running" "$dir/mon.log" && break
			sleep 0.1
		done
		grep -q "all stages running" "$dir/mon.log" ||
			{ echo "probe_budget: cpa monitor did not start:" >&2; cat "$dir/mon.log" >&2; exit 1; }
		sleep 6
	else
		sleep 1
	fi
	measure
	if [ "$mon" != 0 ]; then
		kill -INT "$mon"
		wait "$mon" || true
		mon=0
		grep -h "trap time\|detached:\|thinned to" "$dir/mon.log" | sed 's/^.*capture: /    /' >&2 || true
		rm -rf "$dir/store"
	fi
	kill "$wl"
	wait "$wl" 2>/dev/null || true
	wl=0
}

declare -A wall cpu
for r in $(seq "$reps"); do
	for b in none default 0; do
		one_run "$b"
		wall[$b]+="$R_WALL "
		cpu[$b]+="$R_CPU "
		echo "round $r, budget $b: $R_WALL calls/s, $R_CPU per CPU s" >&2
	done
done
med() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR] = $1} END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf "%-34s %14s %14s %10s\n" "malloc loop (median of $reps)" "calls/s" "calls/CPU-s" "vs no cpa"
base=$(echo "${cpu[none]}" | med)
for b in none default 0; do
	case $b in
	none) name="no cpa" ;;
	default) name="probe, default --probe_budget" ;;
	0) name="probe, --probe_budget 0" ;;
	esac
	w=$(echo "${wall[$b]}" | med); c=$(echo "${cpu[$b]}" | med)
	printf "%-34s %14.0f %14.0f %9.3fx\n" "$name" "$w" "$c" "$(echo "$c / $base" | bc -l)"
done
