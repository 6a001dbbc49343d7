#!/bin/bash
# SPDX-License-Identifier: MIT
#
# capture under many new Python code objects, two cpa builds by turns
# (docs/bench.md, "Python code objects named by capture"): per round and build,
# a monitor with cpa's defaults, N copies of tests/workload/py_many.py at once
# for SECONDS (each a new chain of 60 distinct functions every ~10 ms), and
# `cpa ctl cost` over the run. Prints per round and build the CPU (ms) of
# capture, symd and all of cpa's processes, capture's µs per sample, its BPF
# ring buffer losses, ring 0 drops and degradations, and its pycode_* counters.
#
#   bench/py_many.sh A_BIN_DIR B_BIN_DIR SECONDS ROUNDS [N]
#
# N defaults to 2 (one per CPU of the shared VM). A and B swap every other
# round. PY (default python3) is the interpreter. Root only.
set -eu
[ $# -ge 4 ] && [ $# -le 5 ] || {
	echo "usage: $0 A_BIN_DIR B_BIN_DIR SECONDS ROUNDS [N]" >&2
	exit 2
}
A=$1 B=$2 SECS=$3 ROUNDS=$4 N=${5:-2} PY=${PY:-python3}
here=$(cd "$(dirname "$0")" && pwd)
script=$here/../tests/workload/py_many.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpa-py-many.XXXXXX")
mon=
trap '[ -n "$mon" ] && kill -INT $mon 2>/dev/null; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT

# one run of build $1 (a bin dir), labelled $2
run() {
	local bin=$1 label=$2 store=$tmp/store cost status pids=
	rm -rf "$store"
	"$bin/cpa" monitor --store_dir "$store" >"$tmp/monitor.log" 2>&1 &
	mon=$!
	sleep 2
	for _ in $(seq 1 "$N"); do
		"$PY" "$script" "$SECS" >/dev/null 2>&1 &
		pids="$pids $!"
	done
	# py_many.py compiles its 30,000 functions first (a few seconds)
	cost=$("$bin/cpa" ctl --store_dir "$store" cost $((SECS - 2)))
	wait $pids
	sleep 3 # capture's last polls of the exits
	status=$("$bin/cpa" ctl --store_dir "$store" status)
	kill -INT $mon
	wait $mon || true
	mon=
	{
		echo "$cost" | awk '$1 == "capture" { print "cost", $3, $5 }
			$1 == "symd" { print "symd", $3 } $1 == "all" && !a { print "all", $2; a = 1 }'
		echo "$status" | awk '/^capture:/ { c = 1; next } /^[a-z]+:/ { c = 0 }
			c { for (i = 1; i <= NF; i++) print "cnt", $i }'
	} | awk -v l="$label" '
		$1 == "cost" { ms = $2; us = $3 }
		$1 == "symd" { sms = $2 }
		$1 == "all" { all = $2 }
		$1 == "cnt" { split($2, kv, "="); v[kv[1]] = kv[2] }
		END {
			printf "%-2s %8.1f %8.1f %8.1f %8.1f %8d %8d %8d %8d %8d %8d %8d\n", l, ms, sms,
			       all, us,
			       v["bpf_ringbuf_lost"], v["drop_ring_full"], v["degraded"],
			       v["pycode_sent"], v["pycode_deferred"], v["pycode_past_budget"],
			       v["samples"]
		}'
}

printf "%-5s %-2s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s\n" round b "cap ms" "symd ms" \
	"all ms" "cap us/sm" rb_lost ring_full degraded py_sent py_defer py_past samples
for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) -eq 1 ]; then order="A B"; else order="B A"; fi
	for b in $order; do
		if [ "$b" = A ]; then bin=$A; else bin=$B; fi
		printf "%-5d " "$r"
		run "$bin" "$b"
	done
done
