#!/bin/bash
# What scripts written for CPA grep for (docs/cli.md, "CPA's words"), through
# the real binaries as such a script runs them: help texts, the error lines of
# the option checks and their exit codes, and a complete --help and a
# conventional --version of every binary. No root, no BPF, no store needed.
set -uo pipefail
build=${CPA_BUILD_DIR:?}
bin=$build/bin
. "$(dirname "$0")/test_scratch.sh" compat
failed=0
fail() {
	echo "FAIL: $*" >&2
	failed=1
}

# run ARGS...: $code, $tmp/out, $tmp/err of "$bin/ARGS..."
run() {
	"$bin/$1" "${@:2}" >"$tmp/out" 2>"$tmp/err"
	code=$?
}
# expect CODE STREAM TEXT: the last run exited CODE and STREAM (out|err) holds TEXT (fixed string)
expect() {
	[ "$code" = "$1" ] || fail "$last: exit $code, want $1 ($(head -c 300 "$tmp/err"))"
	grep -qF -- "$3" "$tmp/$2" || fail "$last: '$3' not on std$2: $(head -c 600 "$tmp/$2")"
}
# lacks STREAM TEXT
lacks() {
	! grep -qF -- "$2" "$tmp/$1" || fail "$last: '$2' on std$1"
}
check() {
	last="$*"
	run "$@"
}

version=$("$bin/cpa" version | sed -n 's/^cpa //p')
[ -n "$version" ] || fail "cpa version: no 'cpa <version>' line"

# ---- help: CPA's words, and ours after them
check cpa --help
expect 0 out "Available COMMAND"
expect 0 out "ctl       a running monitor: status | cost | restart | rate | mem"
lacks out "as a folded .prof"
check cpa monitor --help
expect 0 out "output flamegraph file path"
expect 0 out "bpf or perf"
expect 0 out "--duration SEC"
check cpa show --help
expect 0 out "positive integer"
expect 0 out "reuse decompressed files"
expect 0 out "print available record time range"
# show and ctl do not list the monitor's global options
lacks out "--duration SEC"
lacks out "--btf_path PATH"
check cpa ctl --help
expect 0 out "cost [seconds, default 10]"
lacks out "--duration SEC"
lacks out "--btf_path PATH"

# ---- the option checks: CPA's words, exit 2 before anything starts
check cpa show -n 3
expect 2 err 'arg "read" required'
check cpa monitor --persistent_day 0
expect 2 err "> 0"
check cpa monitor --backend perf --offcpu --store_dir "$tmp/s1"
expect 2 err "perf backend only supports on-cpu continuous profiling"
[ ! -e "$tmp/s1" ] || fail "perf --offcpu: store dir created before the refusal"
check cpa monitor --backend perf --probe tracepoint:sched:sched_switch --store_dir "$tmp/s2"
expect 2 err "perf backend only supports on-cpu continuous profiling"
check cpa show -r "$tmp" -B 25:00:00
expect 2 err "invalid time"
check cpa show -r "$tmp/no-such-store" --show_range 1
expect 1 err "failed to open input file"

# ---- every binary: --help on stdout (exit 0), --version "<name> <version>"
for b in cpa cpa-push cpa-view capture unwindd symd storer; do
	check "$b" --help
	expect 0 out "Usage: "
	check "$b" --version
	[ "$code" = 0 ] || fail "$b --version: exit $code"
	[ "$(cat "$tmp/out")" = "$b $version" ] || fail "$b --version: '$(cat "$tmp/out")', want '$b $version'"
done
# cpa-push --help lists every option it takes
check cpa-push --help
for o in --store_dir --url --protocol --interval --name --host --org_id --backlog --retry_ms \
	--once --max_posts --verbose --help --version; do
	expect 0 out "$o"
done
check cpa-push --bogus
[ "$code" = 2 ] || fail "cpa-push --bogus: exit $code, want 2"

exit $failed
