#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/offcpu_real.sh [--reps N] [--seconds S] CPA [CPA...]: the cost of
# `cpa monitor --offcpu` on the whole machine while Debian programs block in
# their usual ways: sqlite3 committing row by row (fdatasync, D), a
# `gzip -1 | xz -0` pipeline (pipe reads and writes, S), and `tar | gzip` of
# /usr/share (reads). Each CPA (a cpa executable; stages next to it) runs in
# turn, REPS times interleaved, over the same workload; per run, over an
# S-second window once the agent is up:
#   switch_us   cpa_offcpu_switch time per context switch (bpf_stats)
#   switch/s    context switches the program saw
#   bpf_cores   all cpa BPF programs' time, in CPUs
#   offcpu/s    off-CPU records out of BPF (capture's `offcpu`)
#   builds/s    stacks built into the stash (a block at a new place;
#               `offcpu_builds`, "-" for a cpa without the counter)
#   places      stash entries at the window's end (`offcpu_places`, ~38 KiB
#               of kernel memory each at the default stack size)
#   stages_ms/s CPU of capture + unwindd + symd + storer
# Prints one line per run and the medians per CPA. docs/bench.md
# "Off-CPU places on real programs". Root.
set -euo pipefail
reps=3
secs=10
while [ $# -gt 0 ]; do
	case "$1" in
	--reps) reps=$2; shift 2 ;;
	--seconds) secs=$2; shift 2 ;;
	-h | --help) sed -n '4,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) break ;;
	esac
done
[ $# -ge 1 ] || { echo "usage: $0 [--reps N] [--seconds S] CPA [CPA...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "offcpu_real: needs root (BPF)" >&2; exit 77; }
for t in sqlite3 gzip xz tar bpftool; do
	command -v $t >/dev/null || { echo "offcpu_real: needs $t" >&2; exit 77; }
done

dir=$(mktemp -d /var/tmp/cpa-offcpu-real.XXXXXX)
stats_was=$(sysctl -n kernel.bpf_stats_enabled)
wl=
cleanup() {
	[ -n "$wl" ] && kill -- -"$wl" 2>/dev/null || true
	sysctl -qw kernel.bpf_stats_enabled="$stats_was"
	rm -rf "$dir"
}
trap cleanup EXIT
sysctl -qw kernel.bpf_stats_enabled=1

# The workload, in its own process group, until killed.
cat >"$dir/wl.sh" <<'EOS'
#!/bin/bash
d=$1
while :; do
	rm -f "$d/db"
	{ echo "create table t(a, b);"
	  for i in $(seq 2000); do echo "insert into t values($i, randomblob(200));"; done
	} | sqlite3 "$d/db"
done &
while :; do head -c 20M /dev/urandom | gzip -1 | xz -T1 -0 >/dev/null; done &
while :; do tar -C /usr/share -cf - doc 2>/dev/null | gzip -1 >/dev/null; done &
wait
EOS
setsid bash "$dir/wl.sh" "$dir" >/dev/null 2>&1 &
wl=$!
sleep 3

# "run_time_ns run_cnt" of every cpa program, summed; and of the switch one.
bpf_now() {
	bpftool prog show 2>/dev/null | awk '
		/ name cpa_/ { n = $0; sub(/.* name /, "", n); sub(/ .*/, "", n)
			t = $0; sub(/.*run_time_ns /, "", t); sub(/ .*/, "", t)
			c = $0; sub(/.*run_cnt /, "", c); sub(/ .*/, "", c)
			all += t; if (n == "cpa_offcpu_switch") { st += t; sc += c } }
		END { printf "%d %d %d\n", all, st, sc }'
}
ctl_val() { # FILE NAME -> the first NAME=value of capture's block
	sed -n '/^capture:/,/^unwindd:/p' "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -1
}
stage_ms() { # CTL-FILE -> CPU ms of the four stages (utime + stime)
	local tot=0 pid
	for pid in $(grep -o 'pid [0-9]*' "$1" | sed -n '2,$p' | awk '{print $2}'); do
		[ -r /proc/$pid/stat ] || continue
		tot=$((tot + $(awk '{print $14 + $15}' /proc/$pid/stat)))
	done
	echo $((tot * 1000 / $(getconf CLK_TCK)))
}

printf '%-28s %3s %9s %9s %9s %9s %9s %7s %11s\n' cpa rep switch_us switch/s bpf_cores \
	offcpu/s builds/s places stages_ms/s
for r in $(seq "$reps"); do
	for cpa in "$@"; do
		store="$dir/store"
		rm -rf "$store"
		"$cpa" monitor --offcpu --store_dir "$store" >"$dir/mon.log" 2>&1 &
		mon=$!
		for _ in $(seq 200); do grep -q "capture: off-CPU" "$dir/mon.log" && break; sleep 0.1; done
		sleep 2
		"$cpa" ctl status --store_dir "$store" >"$dir/ctl0" 2>&1
		read -r a0 s0 c0 < <(bpf_now)
		m0=$(stage_ms "$dir/ctl0")
		sleep "$secs"
		"$cpa" ctl status --store_dir "$store" >"$dir/ctl1" 2>&1
		read -r a1 s1 c1 < <(bpf_now)
		m1=$(stage_ms "$dir/ctl1")
		kill -INT "$mon"
		wait "$mon" || true
		o0=$(ctl_val "$dir/ctl0" offcpu) o1=$(ctl_val "$dir/ctl1" offcpu)
		b0=$(ctl_val "$dir/ctl0" offcpu_builds) b1=$(ctl_val "$dir/ctl1" offcpu_builds)
		p1=$(ctl_val "$dir/ctl1" offcpu_places)
		awk -v cpa="$cpa" -v r="$r" -v s="$secs" -v sd=$((s1 - s0)) -v cd=$((c1 - c0)) \
			-v ad=$((a1 - a0)) -v od=$((o1 - o0)) -v b0="$b0" -v b1="$b1" \
			-v p1="${p1:--}" -v md=$((m1 - m0)) 'BEGIN {
			printf "%-28s %3d %9.2f %9.0f %9.4f %9.1f %9s %7s %11.1f\n", cpa, r,
				cd ? sd / cd / 1000 : 0, cd / s, ad / s / 1e9, od / s,
				b0 == "" ? "-" : sprintf("%.1f", (b1 - b0) / s), p1, md / s }' |
			tee -a "$dir/rows"
	done
done
echo
echo "medians over $reps runs of ${secs} s (whole machine, cpa monitor --offcpu):"
for cpa in "$@"; do
	awk -v cpa="$cpa" '$1 == cpa' "$dir/rows" | awk -v cpa="$cpa" '
		{ for (i = 3; i <= 9; i++) v[i, NR] = $i; n = NR }
		function med(c,   a, i, j, t) {
			for (i = 1; i <= n; i++) a[i] = v[c, i]
			for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
				if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
			return a[int((n + 1) / 2)]
		}
		END { printf "%-28s %3s %9s %9s %9s %9s %9s %7s %11s\n", cpa, "med",
			med(3), med(4), med(5), med(6), med(7), med(8), med(9) }'
done
