#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Wakeups and CPU per stage of two cpa builds, side by side on this host, by ftrace
# (sched_wakeup in a trace instance of our own). docs/bench.md, "Idle".
#
#   bench/idle_wakeups.sh A_BIN_DIR B_BIN_DIR SECONDS [cpa monitor options...]
#
# Both monitors run at once (the same seconds of the same host, defaults plus the options),
# each with a scratch store; after 30 s the trace runs SECONDS. A wakeup counts for the stage
# whose thread was woken; the storer's io_uring workers (iou-wrk-<tid>) count apart. Prints
# a table: stage, wakeups a second and µs of CPU a second of A and of B. Root only.
set -eu
[ $# -ge 3 ] || {
	echo "usage: $0 A_BIN_DIR B_BIN_DIR SECONDS [cpa monitor options...]" >&2
	exit 2
}
A=$1 B=$2 SECS=$3
shift 3
T=/sys/kernel/tracing
[ -d $T/instances ] || mount -t tracefs nodev $T
scr=$(mktemp -d "${TMPDIR:-/tmp}/cpa-idlewake.XXXXXX")
inst=$T/instances/cpa_idlewake_$$
pa= pb=
cleanup() {
	[ -n "$pa" ] && kill "$pa" 2>/dev/null
	[ -n "$pb" ] && kill "$pb" 2>/dev/null
	wait 2>/dev/null || true
	[ -d "$inst" ] && rmdir "$inst" 2>/dev/null
	rm -rf "$scr"
}
trap cleanup EXIT
"$A/cpa" monitor --store_dir "$scr/a" --duration $((SECS + 60)) "$@" >"$scr/a.log" 2>&1 &
pa=$!
"$B/cpa" monitor --store_dir "$scr/b" --duration $((SECS + 60)) "$@" >"$scr/b.log" 2>&1 &
pb=$!
sleep 30

# tid -> "side stage" for every thread of a monitor and its children
map() {
	local side=$1 mon=$2 p t comm
	for p in $mon $(pgrep -P "$mon"); do
		comm=$(cat /proc/$p/comm 2>/dev/null) || continue
		[ "$p" = "$mon" ] && comm=monitor
		for t in /proc/$p/task/*; do
			echo "${t##*/} $side $comm"
		done
	done
}
# "side stage ns-on-CPU" of every process of a monitor: its threads' schedstat (a thread
# that ended meanwhile, e.g. a retired io_uring worker, is missed)
cpu() {
	local side=$1 mon=$2 p comm
	for p in $mon $(pgrep -P "$mon"); do
		comm=$(cat /proc/$p/comm 2>/dev/null) || continue
		[ "$p" = "$mon" ] && comm=monitor
		cat /proc/$p/task/*/schedstat 2>/dev/null |
			awk -v s="$side" -v c="$comm" '{n += $1} END {print s, c, n}'
	done
}
mkdir "$inst"
echo 8192 >"$inst/buffer_size_kb"
{ map A $pa; map B $pb; } >"$scr/tids0"
{ cpu A $pa; cpu B $pb; } >"$scr/cpu0"
echo 1 >"$inst/events/sched/sched_wakeup/enable"
sleep "$SECS"
echo 0 >"$inst/events/sched/sched_wakeup/enable"
{ cpu A $pa; cpu B $pb; } >"$scr/cpu1"
{ map A $pa; map B $pb; } >"$scr/tids1"
cat "$inst/trace" >"$scr/trace"
sort -u "$scr/tids0" "$scr/tids1" >"$scr/tids"
awk -v secs="$SECS" -v hz=1000000000 '
	FILENAME ~ /tids$/ { st[$1] = $2 " " $3; next }
	FILENAME ~ /cpu0$/ { c0[$1 " " $2] = $3; next }
	FILENAME ~ /cpu1$/ { c1[$1 " " $2] = $3; next }
	/sched_wakeup:/ {
		comm = ""; pid = ""
		for (i = 1; i <= NF; i++) {
			if ($i ~ /^comm=/) comm = substr($i, 6)
			if ($i ~ /^pid=/) pid = substr($i, 5)
		}
		if (comm ~ /^iou-wrk-[0-9]+$/) {
			owner = substr(comm, 9)
			if (owner in st) { n[st[owner] "/iou-wrk"]++; seen[st[owner] "/iou-wrk"] = 1 }
		} else if (pid in st) {
			n[st[pid]]++; seen[st[pid]] = 1
		}
	}
	END {
		split("monitor capture unwindd symd storer storer/iou-wrk", order, " ")
		printf "%-16s %12s %12s %12s %12s\n", "stage", "A wakeups/s", "B wakeups/s",
		       "A µs CPU/s", "B µs CPU/s"
		for (k = 1; k <= 6; k++) {
			s = order[k]
			printf "%-16s %12.3f %12.3f", s, n["A " s] / secs, n["B " s] / secs
			if (s ~ /iou-wrk/) { printf "%12s %12s\n", "(in storer)", "(in storer)"; continue }
			printf " %12.1f %12.1f\n", (c1["A " s] - c0["A " s]) * 1e6 / hz / secs,
			       (c1["B " s] - c0["B " s]) * 1e6 / hz / secs
			ta += n["A " s]; tb += n["B " s]
			ca += c1["A " s] - c0["A " s]; cb += c1["B " s] - c0["B " s]
		}
		ta += n["A storer/iou-wrk"]; tb += n["B storer/iou-wrk"]
		printf "%-16s %12.3f %12.3f %12.1f %12.1f\n", "all", ta / secs, tb / secs,
		       ca * 1e6 / hz / secs, cb * 1e6 / hz / secs
	}' "$scr/tids" "$scr/cpu0" "$scr/cpu1" "$scr/trace"
