#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/bpf_run_cost.sh [--reps N] [--cpa PATH] "MONITOR ARGS" ...: the time
# cpa_on_cpu takes per run (kernel.bpf_stats_enabled, bpftool prog show) over
# a 12 s window, whole machine, while cpa-workload-nofp keeps two FP-less
# threads busy; once per argument string, e.g.
#   bash bench/bpf_run_cost.sh "-F 49" "-F 49 -K" "-F 999" "-F 999 -K"
# (-K: kernel stacks only, no user copy). docs/bench.md "BPF per run: a
# matter of cold lines". Root.
set -euo pipefail
reps=2
cpa=
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) reps=$2; shift 2 ;;
	--cpa) cpa=$2; shift 2 ;;
	-h | --help) sed -n '4,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || set -- "-F 49" "-F 49 -K" "-F 999" "-F 999 -K"
[ "$(id -u)" = 0 ] || { echo "bpf_run_cost: needs root (BPF)" >&2; exit 77; }
command -v bpftool >/dev/null || { echo "bpf_run_cost: needs bpftool" >&2; exit 77; }
bin=$(dirname "$(realpath "$0")")/../build/bin
[ -n "$cpa" ] || cpa=$bin/cpa
wl=$(dirname "$(realpath "$cpa")")/cpa-workload-nofp
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
dir=$(mktemp -d /tmp/cpa-bpf-run-cost.XXXXXX)
trap 'sysctl -qw kernel.bpf_stats_enabled="$stats_was"; rm -rf "$dir"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1

prog_now() { # "run_time_ns run_cnt" of cpa_on_cpu
	bpftool prog show name cpa_on_cpu | awk '/run_time_ns/ {
		for (i = 1; i <= NF; i++) { if ($i == "run_time_ns") t = $(i + 1)
			if ($i == "run_cnt") c = $(i + 1) } } END { print t + 0, c + 0 }'
}

printf '%-24s %3s %10s %8s\n' "monitor args" rep ns/run runs
for args in "$@"; do
	for r in $(seq "$reps"); do
		rm -rf "$dir/store"
		"$wl" --seconds 20 --threads 1 >/dev/null 2>&1 &
		w=$!
		# shellcheck disable=SC2086 # the arguments are meant to split
		"$cpa" monitor --store_dir "$dir/store" $args --duration 18 >"$dir/log" 2>&1 &
		m=$!
		for _ in $(seq 100); do grep -q "capture: sampling" "$dir/log" && break; sleep 0.1; done
		sleep 3
		read -r t0 c0 < <(prog_now)
		sleep 12
		read -r t1 c1 < <(prog_now)
		wait "$m" || true
		kill "$w" 2>/dev/null || true
		wait "$w" 2>/dev/null || true
		printf '%-24s %3d %10d %8d\n' "$args" "$r" $(((t1 - t0) / (c1 - c0 > 0 ? c1 - c0 : 1))) \
			$((c1 - c0))
	done
done
