#!/bin/bash
# Permanent errors are one clear line, not five restarts (docs/supervisor.md,
# "Permanent errors"): the real monitor and stages on the real kernel.
# (a) user nobody without capabilities: the monitor's preflight says the one
#     cause line and exits 78 before a store dir or a stage exists;
# (b) root with CAP_PERFMON, CAP_BPF and CAP_SYS_ADMIN out of the bounding set
#     (past the preflight): capture finds it, exits 78 with its cause, the
#     monitor says it once, restarts nothing and exits 78, and the stop is
#     one line before the last (its drain steps only with --verbose);
#     --verbose keeps the detail (libbpf's messages, each refused
#     perf_event_open);
# (c) the verifier refusing the unrolled copy of --stack_size 16384 with
#     --offcpu (no fallback): the same, naming --stack_size;
# (d) a capture killed with SIGKILL is still restarted (test_monitor's
#     test_crash_restart and test_crash_loop_keeps_trying on fake stages,
#     test_stop_capture_quick_kills under bench_torture).
# Needs root, BTF, setpriv and user nobody; else exit 77. (a) and (b) need
# kernel.perf_event_paranoid above 0 (else an unprivileged perf backend runs).
set -euo pipefail
build=${CPA_BUILD_DIR:?}
[ "$(id -u)" = 0 ] && [ -r /sys/kernel/btf/vmlinux ] || exit 77
command -v setpriv >/dev/null && id nobody >/dev/null || exit 77
. "$(dirname "$0")/test_scratch.sh" permanent
fail() { echo "FAIL: $*" >&2; exit 1; }
chmod 755 "$tmp"
mkdir "$tmp/bin"
cp "$build"/bin/{cpa,capture,unwindd,symd,storer} "$tmp/bin/"
chmod -R a+rX "$tmp/bin"
paranoid=$(cat /proc/sys/kernel/perf_event_paranoid)
cause="capture: needs root or CAP_PERFMON+CAP_BPF (kernel.perf_event_paranoid=$paranoid)"

# permanent NAME: the run's log went to $tmp/NAME.log with exit code $rc
permanent() {
	local name=$1 log=$tmp/$1.log
	[ "$rc" = 78 ] || fail "$name: exit $rc, not 78: $(tail -5 "$log")"
	# a restart is "restarting in N ms" or "... restarted"; not the stats
	# line's "restarts 0" (--verbose, a stop slow enough for a stats tick)
	! grep -Eq "restart(ing|ed)" "$log" ||
		fail "$name: restarted: $(grep -E 'restart(ing|ed)' "$log" | head -3)"
	! grep -q "giving up" "$log" || fail "$name: retried until it gave up"
	! grep -q "libbpf: libbpf:" "$log" || fail "$name: doubled libbpf prefix"
	grep -q "stopped with errors (exit code 78)" "$log" || [ "$name" = nobody ] ||
		fail "$name: no final line: $(tail -3 "$log")"
	case $name in
	nobody) ;;
	*-v) # --verbose: the stop's steps are there, at debug level
		grep -q "monitor: debug: draining unwindd" "$log" ||
			fail "$name: no drain step at debug level: $(tail -5 "$log")" ;;
	*) # from the cause on the monitor says one line that the pipeline stops and
		# the last line (a stage's start may still print between them); no drain steps
		sed -n '/monitor: ERROR: /,$p' "$log" | grep "monitor: " >"$log.stop" || true
		[ "$(wc -l <"$log.stop")" = 3 ] &&
			sed -n 2p "$log.stop" | grep -q "monitor: stopping (a stage cannot run)$" ||
			fail "$name: more than the cause, the stop and the last line: $(cat "$log.stop")"
		! grep -i "drain" "$log" || fail "$name: drain steps at the default level" ;;
	esac
	echo "$name: exit 78 in $(wc -l <"$log") lines: $(grep -m1 'ERROR' "$log")"
}

if [ "$paranoid" -gt 0 ]; then
	# (a) nobody, no capabilities: one line, nothing created
	mkdir "$tmp/a" && chown nobody "$tmp/a"
	rc=0
	(cd "$tmp" && timeout 60 setpriv --reuid=nobody --regid=nogroup --clear-groups \
		"$tmp/bin/cpa" monitor --store_dir "$tmp/a/store" --duration 5) >"$tmp/nobody.log" 2>&1 ||
		rc=$?
	permanent nobody
	[ "$(wc -l <"$tmp/nobody.log")" = 1 ] || fail "nobody: more than the cause line: $(cat "$tmp/nobody.log")"
	grep -qF "$cause" "$tmp/nobody.log" || fail "nobody: not the cause line: $(cat "$tmp/nobody.log")"
	grep -q "cpa-setcap" "$tmp/nobody.log" || fail "nobody: no remedy"
	[ ! -e "$tmp/a/store" ] || fail "nobody: a store dir was created for a run that cannot record"

	# (b) root without the capabilities: capture's own cause, said once by the monitor
	rc=0
	timeout 120 setpriv --bounding-set -perfmon,-bpf,-sys_admin --inh-caps -all \
		"$tmp/bin/cpa" monitor --store_dir "$tmp/b" --duration 5 >"$tmp/nocaps.log" 2>&1 || rc=$?
	permanent nocaps
	[ "$(grep -cF "$cause" "$tmp/nocaps.log")" = 1 ] ||
		fail "nocaps: the cause line not once: $(cat "$tmp/nocaps.log")"
	# What follows from the same cause (no mapping history, BPF unusable, the
	# perf fallback failing too) is in that line; --verbose has the detail.
	! grep -E "capture: (ERROR|WARNING)" "$tmp/nocaps.log" ||
		fail "nocaps: capture's detail at the default level"
	rc=0
	timeout 120 setpriv --bounding-set -perfmon,-bpf,-sys_admin --inh-caps -all \
		"$tmp/bin/cpa" monitor --store_dir "$tmp/b" --duration 5 --verbose >"$tmp/nocaps-v.log" 2>&1 ||
		rc=$?
	permanent nocaps-v
	grep -q "capture: debug: libbpf: " "$tmp/nocaps-v.log" || fail "nocaps --verbose: no libbpf detail"
	grep -q "capture: debug: .*perf_event_open .*Permission denied" "$tmp/nocaps-v.log" ||
		fail "nocaps --verbose: no perf_event_open detail"
else
	echo "kernel.perf_event_paranoid=$paranoid: (a) and (b) skipped (the perf backend may run unprivileged)"
fi

# (c) a configuration the kernel refuses: the unrolled 64 KiB copy of --offcpu
rc=0
CPA_BPF_USTACK_COPY=unrolled timeout 200 "$tmp/bin/cpa" monitor --store_dir "$tmp/c" \
	--offcpu --stack_size 16384 --duration 2 >"$tmp/verifier.log" 2>&1 || rc=$?
if [ "$rc" = 0 ]; then
	echo "verifier: this kernel takes the unrolled copy: (c) skipped"
else
	permanent verifier
	[ "$(grep -c "capture: --stack_size 16384: .* too complex .* use a lower --stack_size" \
		"$tmp/verifier.log")" = 1 ] || fail "verifier: the cause line not once: $(cat "$tmp/verifier.log")"
fi

# (d) a crash is not permanent: capture killed with SIGKILL is restarted
"$tmp/bin/cpa" monitor --store_dir "$tmp/d" --duration 20 >"$tmp/kill.log" 2>&1 &
mon=$!
for _ in $(seq 300); do
	grep -q "all stages running" "$tmp/kill.log" && break
	sleep 0.2
done
grep -q "all stages running" "$tmp/kill.log" || { kill $mon; fail "kill: never running: $(tail -5 "$tmp/kill.log")"; }
cap=$(pgrep -P $mon -x capture) || { kill $mon; fail "kill: no capture under the monitor"; }
kill -9 "$cap"
for _ in $(seq 300); do
	grep -q "capture restarted" "$tmp/kill.log" && break
	sleep 0.2
done
kill -INT $mon
rc=0
wait $mon || rc=$?
grep -q "capture (pid $cap) killed by SIGKILL; restarting" "$tmp/kill.log" ||
	fail "kill: no restart line: $(grep capture "$tmp/kill.log" | tail -5)"
grep -q "capture restarted" "$tmp/kill.log" || fail "kill: capture not restarted"
[ "$rc" = 0 ] || fail "kill: monitor exit $rc: $(tail -5 "$tmp/kill.log")"
echo "kill: capture (pid $cap) killed by SIGKILL was restarted"
