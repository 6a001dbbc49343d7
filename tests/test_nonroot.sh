#!/bin/bash
# cpa without root (docs/packaging.md, "Without root"): the monitor runs as
# user nobody with (a) file capabilities on the stage binaries, (b) ambient
# capabilities (what AmbientCapabilities= in a unit gives), and records the
# workload's whole chain with symbolized kernel frames; (c) with none it
# fails. Needs root to set it up, BTF, setcap and setpriv; else exit 77.
set -euo pipefail
build=${CPA_BUILD_DIR:?}
[ "$(id -u)" = 0 ] && [ -r /sys/kernel/btf/vmlinux ] || exit 77
command -v setcap >/dev/null && command -v setpriv >/dev/null && id nobody >/dev/null || exit 77
tmp=$(mktemp -d /tmp/cpa-nonroot-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
chmod 755 "$tmp"
mkdir "$tmp/bin"
cp "$build"/bin/{cpa,capture,unwindd,symd,storer,cpa-workload-nofp} "$tmp/bin/"
chmod -R a+rX "$tmp/bin"
AMBIENT=+bpf,+perfmon,+sys_ptrace,+syslog

# run NAME [setpriv cap args...]: monitor as nobody while the workload runs
run() {
	local name=$1 store=$tmp/store-$1
	shift
	mkdir "$store" && chown nobody "$store"
	(cd "$tmp" && timeout 60 setpriv --reuid=nobody --regid=nogroup --clear-groups "$@" \
		"$tmp/bin/cpa" monitor --store_dir "$store" -F 99 --duration 7 >"$tmp/$name.log" 2>&1) &
	local mon=$!
	sleep 2
	"$tmp/bin/cpa-workload-nofp" --seconds 4 --depth 4 >"$tmp/$name.wl"
	wait $mon
}

check() {
	local name=$1 pid
	pid=$(awk '/^pid/ {print $2}' "$tmp/$name.wl")
	# Exactly the seconds the store holds: asking past the end is an error (as in CPA).
	local range n
	range=$("$tmp/bin/cpa" show --read "$tmp/store-$name" --show_range) || fail "$name: cpa show --show_range"
	n=$(echo "$range" | sed -n 's/.*From \[ \([0-9:]*\)\.[0-9]* \] to \[ \([0-9:]*\)\..*/\1 \2/p' |
		awk '{split($1, a, ":"); split($2, b, ":"); print (b[1]*3600 + b[2]*60 + b[3]) - (a[1]*3600 + a[2]*60 + a[3]) + 1}')
	"$tmp/bin/cpa" show --read "$tmp/store-$name" -B "$(echo "$range" | sed -n 's/.*From \[ \([0-9:]*\).*/\1/p')" \
		-n "$n" -o "$tmp/$name.prof" --no_env >/dev/null ||
		fail "$name: cpa show"
	local got
	got=$(awk -v p=":$pid;" '
		index($0, p) == 0 { next }
		/;main;wl_main_loop;wl_path_a;wl_lib_work;wl_lib_spin;/ { chain += $NF }
		{ all += $NF }
		END { print chain + 0, all + 0 }' "$tmp/$name.prof")
	[ "${got%% *}" -gt 0 ] || {
		grep ":$pid;" "$tmp/$name.prof" | sort -t' ' -k2 -nr | head -5 >&2
		fail "$name: no complete workload chain (chain, all samples of pid $pid: $got)"
	}
	local k kx
	k=$(awk '/_\[k\];/ {s += $NF} END {print s + 0}' "$tmp/$name.prof")
	kx=$(awk '/;0xffff[0-9a-f]*_\[k\];/ {s += $NF} END {print s + 0}' "$tmp/$name.prof")
	[ "$k" -gt 0 ] || fail "$name: no kernel frames"
	[ "$kx" -le $((k / 20)) ] || fail "$name: kernel frames unsymbolized ($kx of $k)"
	echo "$name: ok (kernel samples $k, hex $kx)"
}

# (a) file capabilities: each stage gets only what it uses
setcap cap_bpf,cap_perfmon=ep "$tmp/bin/capture"
setcap cap_sys_ptrace=ep "$tmp/bin/unwindd"
setcap cap_syslog=ep "$tmp/bin/symd"
run filecaps || fail "filecaps: monitor exited $? ($(tail -3 "$tmp/filecaps.log"))"
check filecaps

# (b) ambient capabilities on the monitor, inherited by the stages
for b in capture unwindd symd; do setcap -r "$tmp/bin/$b"; done
run ambient --inh-caps "$AMBIENT" --ambient-caps "$AMBIENT" ||
	fail "ambient: monitor exited $? ($(tail -3 "$tmp/ambient.log"))"
check ambient

# (c) no capabilities: capture cannot load BPF, the monitor gives up
if run nocaps; then fail "the monitor ran as nobody without capabilities"; fi
echo "nocaps: refused as expected"
