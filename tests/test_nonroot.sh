#!/bin/bash
# cpa without root (docs/packaging.md, "Without root"): the monitor runs as
# user nobody with (a) file capabilities on the stage binaries, set by
# cpa-setcap, nobody in the install's group cpa, (b) ambient capabilities
# (what AmbientCapabilities= in a unit gives), and records the workload's
# whole chain with symbolized kernel frames; (c) with none it fails. The
# attack of issue 27: (d) nobody, not in the group, is refused by every
# capability stage; (e) nobody in the group cannot --debug_option a root
# process's memory; (f) (a)'s install under no_new_privs (NoNewPrivileges=)
# is one cause line and exit 78. Needs root to set it up, BTF, setcap and setpriv (and
# the group cpa, created for the test if the host has none); else exit 77.
set -euo pipefail
build=${CPA_BUILD_DIR:?}
[ "$(id -u)" = 0 ] && [ -r /sys/kernel/btf/vmlinux ] || exit 77
command -v setcap >/dev/null && command -v setpriv >/dev/null && id nobody >/dev/null || exit 77
command -v groupadd >/dev/null || exit 77
. "$(dirname "$0")/test_scratch.sh" nonroot
made_group= spin=
cleanup() {
	local rc=$?
	[ -z "$spin" ] || { kill "$spin" && wait "$spin"; } 2>/dev/null || true
	[ -z "$made_group" ] || groupdel cpa || true
	scratch_done $rc
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
chmod 755 "$tmp"
mkdir "$tmp/bin"
cp "$build"/bin/{cpa,capture,unwindd,symd,storer,cpa-setcap,cpa-workload-nofp} "$tmp/bin/"
chmod -R a+rX "$tmp/bin"
AMBIENT=+bpf,+perfmon,+sys_ptrace,+syslog
getent group cpa >/dev/null || { groupadd --system cpa && made_group=1; }
CPA_GID=$(getent group cpa | cut -d: -f3)
GROUPS_NONE=--clear-groups
GROUPS_CPA=--groups=$CPA_GID

# run NAME GROUPS [setpriv cap args...]: monitor as nobody while the workload runs
run() {
	local name=$1 groups=$2 store=$tmp/store-$1
	shift 2
	mkdir "$store" && chown nobody "$store"
	(cd "$tmp" && timeout 60 setpriv --reuid=nobody --regid=nogroup "$groups" "$@" \
		"$tmp/bin/cpa" monitor --store_dir "$store" -F 99 --duration 7 "${EXTRA[@]}" \
		>"$tmp/$name.log" 2>&1) &
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

EXTRA=()

# (a) file capabilities, each stage only what it uses, root:cpa 0750: the
# documented install command
"$tmp/bin/cpa-setcap" "$tmp/bin" >/dev/null
for b in capture unwindd symd; do
	[ "$(stat -c '%a %U %G' "$tmp/bin/$b")" = "750 root cpa" ] ||
		fail "cpa-setcap: $b is $(stat -c '%a %U %G' "$tmp/bin/$b")"
done
run filecaps "$GROUPS_CPA" || fail "filecaps: monitor exited $? ($(tail -3 "$tmp/filecaps.log"))"
check filecaps

# (f) the same install under no_new_privs (NoNewPrivileges=): an exec gains no
# file capabilities, so the monitor says so in one line, exit 78, no restart
# (where kernel.perf_event_paranoid is above 0: else the perf backend runs)
if [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -gt 0 ]; then
	rc=0
	run nnp "$GROUPS_CPA" --no-new-privs || rc=$?
	[ "$rc" = 78 ] || fail "nnp: exit $rc, not 78: $(tail -3 "$tmp/nnp.log")"
	grep -q "capture: needs root or CAP_PERFMON+CAP_BPF" "$tmp/nnp.log" ||
		fail "nnp: no cause line: $(cat "$tmp/nnp.log")"
	[ "$(wc -l <"$tmp/nnp.log")" = 1 ] ||
		fail "nnp: more than the cause line: $(cat "$tmp/nnp.log")"
	echo "nnp: refused: $(cat "$tmp/nnp.log")"
fi

# (d) the same install, nobody not in the group: refused with one line, nothing recorded
chmod 755 "$tmp/bin"/{capture,unwindd,symd} # as the attack had it: world-executable
setcap cap_bpf,cap_perfmon=ep "$tmp/bin/capture"
setcap cap_sys_ptrace=ep "$tmp/bin/unwindd"
setcap cap_syslog=ep "$tmp/bin/symd"
if run nogroup "$GROUPS_NONE"; then fail "nogroup: the monitor ran for nobody outside group cpa"; fi
grep -q "neither root nor in group 'cpa'" "$tmp/nogroup.log" ||
	fail "nogroup: no line saying why: $(tail -3 "$tmp/nogroup.log")"
# and each stage on its own (not through the monitor's check), capabilities dropped first
for b in capture unwindd symd; do
	out=$(setpriv --reuid=nobody --regid=nogroup --clear-groups "$tmp/bin/$b" 2>&1) &&
		fail "nogroup: $b ran"
	echo "$out" | grep -q "neither root nor in group 'cpa'" || fail "nogroup: $b said: $out"
done
echo "nogroup: refused: $(grep -m1 'neither root' "$tmp/nogroup.log")"

# (e) nobody in the group: --debug_option on a root process is refused, no byte dumped
chmod 750 "$tmp/bin"/{capture,unwindd,symd}
setcap cap_sys_ptrace=ep "$tmp/bin/unwindd"
setcap cap_syslog=ep "$tmp/bin/symd"
setcap cap_bpf,cap_perfmon=ep "$tmp/bin/capture"
"$tmp/bin/cpa-workload-nofp" --seconds 12 --depth 4 >/dev/null &
spin=$!
mkdir "$tmp/dumps" && chown nobody "$tmp/dumps"
EXTRA=(--debug_option "$spin,1,$tmp/dumps/root.dump")
run dump "$GROUPS_CPA" || fail "dump: monitor exited $? ($(tail -3 "$tmp/dump.log"))"
EXTRA=()
kill "$spin" 2>/dev/null || true
spin=
grep -q "could not ptrace pid" "$tmp/dump.log" ||
	fail "dump: no line refusing it: $(grep -i 'dump' "$tmp/dump.log")"
[ ! -s "$tmp/dumps/root.dump" ] || fail "dump: nobody dumped a root process ($(stat -c %s "$tmp/dumps/root.dump") bytes)"
echo "dump: refused: $(grep -m1 'could not ptrace' "$tmp/dump.log")"

# (b) ambient capabilities on the monitor, inherited by the stages
for b in capture unwindd symd; do setcap -r "$tmp/bin/$b"; done
chmod 755 "$tmp/bin"/{capture,unwindd,symd}
run ambient "$GROUPS_NONE" --inh-caps "$AMBIENT" --ambient-caps "$AMBIENT" ||
	fail "ambient: monitor exited $? ($(tail -3 "$tmp/ambient.log"))"
check ambient

# (c) no capabilities: capture cannot sample, the monitor says so (exit 78)
rc=0
run nocaps "$GROUPS_NONE" || rc=$?
[ "$rc" != 0 ] || fail "the monitor ran as nobody without capabilities"
[ "$rc" = 78 ] || fail "nocaps: exit $rc, not 78: $(tail -3 "$tmp/nocaps.log")"
echo "nocaps: refused as expected"
