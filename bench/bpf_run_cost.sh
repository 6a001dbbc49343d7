#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/bpf_run_cost.sh [--reps N] [[--env VAR=VAL]... --cpa PATH]... "MONITOR ARGS" ...: the time
# cpa_on_cpu takes per run (kernel.bpf_stats_enabled, bpftool prog show) over
# a 12 s window, whole machine, while cpa-workload-nofp keeps two FP-less
# threads busy; once per argument string, e.g.
#   bash bench/bpf_run_cost.sh "-F 49" "-F 49 -K" "-F 999" "-F 999 -K"
# (-K: kernel stacks only, no user copy). Several --cpa builds run side by
# side: each round runs every build with every argument string, so a noisy
# host weighs on all of them alike; the medians come last, e.g.
#   bash bench/bpf_run_cost.sh --reps 5 --cpa old/bin/cpa --cpa build/bin/cpa "-F 49"
# --env sets a variable for the next --cpa only: one build two ways, e.g.
#   bash bench/bpf_run_cost.sh --env CPA_BPF_USTACK_COPY=unrolled --cpa build/bin/cpa \
#     --cpa build/bin/cpa "-F 49"
# docs/bench.md "BPF per run: a matter of cold lines". Root.
set -euo pipefail
reps=2
cpas=()
envs=() # per build: the --env assignments before its --cpa
env_next=""
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) reps=$2; shift 2 ;;
	--env) env_next="$env_next $2"; shift 2 ;;
	--cpa) cpas+=("$2"); envs+=("$env_next"); env_next=""; shift 2 ;;
	-h | --help) sed -n '4,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || set -- "-F 49" "-F 49 -K" "-F 999" "-F 999 -K"
[ "$(id -u)" = 0 ] || { echo "bpf_run_cost: needs root (BPF)" >&2; exit 77; }
command -v bpftool >/dev/null || { echo "bpf_run_cost: needs bpftool" >&2; exit 77; }
[ ${#cpas[@]} -gt 0 ] || { cpas=("$(dirname "$(realpath "$0")")/../build/bin/cpa"); envs=(""); }
for c in "${cpas[@]}"; do
	[ -x "$c" ] || { echo "bpf_run_cost: no cpa at '$c'" >&2; exit 2; }
done
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
dir=$(mktemp -d /tmp/cpa-bpf-run-cost.XXXXXX)
trap 'sysctl -qw kernel.bpf_stats_enabled="$stats_was"; rm -rf "$dir"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1

prog_now() { # "run_time_ns run_cnt" of program id $1 (this run's cpa_on_cpu, not another cpa's)
	bpftool prog show id "$1" | awk '/run_time_ns/ {
		for (i = 1; i <= NF; i++) { if ($i == "run_time_ns") t = $(i + 1)
			if ($i == "run_cnt") c = $(i + 1) } } END { print t + 0, c + 0 }'
}

# One run of build $1 with monitor args $2 and environment $3: prints ns per run and runs.
one_run() {
	local cpa=$1 args=$2 wl w m t0 c0 t1 c1 id
	# shellcheck disable=SC2206 # VAR=VAL words, none with spaces
	local vars=($3)
	wl=$(dirname "$(realpath "$cpa")")/cpa-workload-nofp
	rm -rf "$dir/store"
	"$wl" --seconds 20 --threads 1 >/dev/null 2>&1 &
	w=$!
	# shellcheck disable=SC2086 # the arguments are meant to split
	env ${vars[@]+"${vars[@]}"} "$cpa" monitor --store_dir "$dir/store" $args --duration 18 >"$dir/log" 2>&1 &
	m=$!
	for _ in $(seq 100); do grep -q "capture: sampling" "$dir/log" && break; sleep 0.1; done
	sleep 3
	id=$(sed -n 's/.*capture: sampling.*prog id \([0-9]*\).*/\1/p' "$dir/log" | tail -1)
	if [ -z "$id" ]; then
		echo "bpf_run_cost: no BPF backend with '$args':" >&2
		grep capture "$dir/log" >&2
		kill "$m" "$w" 2>/dev/null || true
		exit 1
	fi
	read -r t0 c0 < <(prog_now "$id")
	sleep 12
	read -r t1 c1 < <(prog_now "$id")
	wait "$m" || true
	kill "$w" 2>/dev/null || true
	wait "$w" 2>/dev/null || true
	echo $(((t1 - t0) / (c1 - c0 > 0 ? c1 - c0 : 1))) $((c1 - c0))
}

printf '%-4s %-24s %3s %10s %8s\n' build "monitor args" rep ns/run runs
for b in "${!cpas[@]}"; do echo "build $((b + 1)):${envs[$b]} ${cpas[$b]}"; done
for r in $(seq "$reps"); do
	for args in "$@"; do
		for b in "${!cpas[@]}"; do
			read -r ns n < <(one_run "${cpas[$b]}" "$args" "${envs[$b]}")
			printf '%-4s %-24s %3d %10d %8d\n' $((b + 1)) "$args" "$r" "$ns" "$n"
			echo "$b	$args	$ns" >>"$dir/all"
		done
	done
done
echo
printf '%-4s %-24s %10s %10s %10s\n' build "monitor args" median min max
for args in "$@"; do
	for b in "${!cpas[@]}"; do
		read -r med lo hi < <(awk -F'\t' -v b="$b" -v a="$args" '$1 == b && $2 == a { print $3 }' "$dir/all" |
			sort -n | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : int((v[NR / 2] + v[NR / 2 + 1]) / 2)), v[1], v[NR] }')
		printf '%-4s %-24s %10s %10s %10s\n' $((b + 1)) "$args" "$med" "$lo" "$hi"
	done
done
