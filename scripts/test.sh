#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this); about 20
# minutes on 2 cores. It installs what is missing, then runs these phases, each
# configuration built once from a clean build directory:
#   asan-build   the asan preset (ASan + UBSan, Debug)
#   asan-unit    its unit and fuzz replay tiers, ctest -j2
#   asan-e2e     its e2e tier: the real stages, BPF and monitor (as root; else exit 77 = skipped)
#   release      the Release preset (-O3, -Werror, what packagers build), with the tests
#   fuzz         every libFuzzer target for 2 s (scripts/fuzz.sh: clang, ASan + UBSan)
#   tsan-build   the ring tests under TSan
# release, fuzz and tsan-build run at nice 19 in the background of asan-e2e,
# whose tests mostly wait out fixed durations (their output follows it); then
#   tsan-test    the ring tests under TSan
#   torture      the short kill and hang runs (torture tier) on the Release build, and
#                the e2e tests of label plain, which the sanitizer build leaves out
#                (test_e2e_faketime skips itself there; test_deb packages Release)
# Torture tests and the EXCLUSIVE e2e tests (those that count samples against a
# rate or measure a cost) run alone; the other e2e tests run two at a time
# (tests/CMakeLists.txt). Every phase runs;
# the script ends with the last ctest summary, a table of the phases (seconds,
# result) and a final line, and exits 1 if any failed. The long torture and
# fuzz campaigns are scripts/soak.sh; the day-to-day subset is `ctest --preset fast`.
# Each ctest run gets a fresh, empty TMPDIR; a run fails when a test that did
# not fail left anything there (a failed test keeps its scratch directory,
# named after it, and prints its path). The same check on a subset:
#
#   bash scripts/test.sh
#   bash scripts/test.sh --tmp-check BUILD_DIR [CTEST_ARGS...]   e.g. build -L unit
set -euo pipefail
cd "$(dirname "$0")/.."

# tmp_ours: the names in /tmp a test of ours could leave (sorted).
tmp_ours() {
	find /tmp -mindepth 1 -maxdepth 1 \( -name 'cpa*' -o -name 'tmux-*' -o -name 'perf-*.map' \
		-o -name 'hsperfdata_*' \) -printf '%f\n' 2>/dev/null | sort
}

# tmp_checked DIR CTEST_ARGS...: ctest with TMPDIR=DIR/tmpdir, fresh and empty;
# as root also in a mount namespace of its own where /tmp is DIR/tmp, empty, so
# that a fixed /tmp path shows too (where the tree and DIR are not under /tmp,
# which that would hide; else the names tmp_ours lists that are new in /tmp
# after the run count, linked into DIR/tmp). Then it fails naming what a test
# that passed or skipped left in either. A test's scratch is <test>-XXXXXX or <test>.XXXXXX;
# a failed test's stays.
tmp_checked() {
	local dir=$1 rc=0 out=$1.ctest failed leaks="" d e owner
	shift
	rm -rf "$dir"
	mkdir -p "$dir/tmpdir" "$dir/tmp"
	chmod 1777 "$dir/tmpdir" "$dir/tmp"
	local run=(env TMPDIR="$dir/tmpdir" ctest "$@") before="" private=0
	if [ "$(id -u)" -eq 0 ] && [[ $PWD/ != /tmp/* && $dir/ != /tmp/* ]] &&
		unshare -m --propagation private true 2>/dev/null; then
		run=(unshare -m --propagation private sh -c 'mount --bind "$0" /tmp && exec "$@"'
			"$dir/tmp" "${run[@]}")
		private=1
	else
		before=$(tmp_ours)
	fi
	"${run[@]}" 2>&1 | tee "$out" || rc=$?
	if [ "$private" -eq 0 ]; then
		comm -13 <(echo "$before") <(tmp_ours) | while read -r e; do
			if [ -n "$e" ]; then ln -s "/tmp/$e" "$dir/tmp/$e" || true; fi
		done
	fi
	failed=" $(sed -n 's/^[[:space:]]*[0-9]* - \([^ ]*\) (.*/\1/p' "$out" | tr '\n' ' ') "
	for d in tmpdir tmp; do
		for e in "$dir/$d"/* "$dir/$d"/.[!.]*; do
			[ -e "$e" ] || [ -L "$e" ] || continue
			e=${e#"$dir/"}
			owner=${e#*/}
			owner=${owner%[-.]??????}
			if [[ $e != */"$owner" && $failed == *" $owner "* ]]; then
				echo "== kept for the failed test $owner: $dir/$e"
			else
				leaks+=" $e"
			fi
		done
	done
	if [ -n "$leaks" ]; then
		echo "== left by tests that did not fail (tmpdir/: \$TMPDIR, tmp/: /tmp) in $dir:"
		for e in $leaks; do
			echo "   $e"
			find "$dir/$e" -mindepth 1 -maxdepth 2 | head -4 | sed "s|^$dir/|     |"
		done
		[ "$rc" -ne 0 ] || rc=1
	fi
	return "$rc"
}

if [ "${1:-}" = --tmp-check ]; then
	[ $# -ge 2 ] || { echo "usage: $0 --tmp-check BUILD_DIR [CTEST_ARGS...]" >&2; exit 2; }
	b=$(realpath "$2")
	shift 2
	tmp_checked "$b/test-tmp" --test-dir "$b" "$@"
	exit
fi

jobs=$(nproc)
logs=build-test-logs
rm -rf "$logs"
mkdir -p "$logs"
tmp=$PWD/$logs/tmp # each ctest phase's TMPDIR: tmp/<phase>
start=$SECONDS

# phase NAME CMD...: run CMD, append "NAME<TAB>seconds<TAB>result" to $logs/phases.
phase() {
	local name=$1 t0=$SECONDS rc=0
	shift
	echo "== $name: $*"
	"$@" || rc=$?
	local result=ok
	[ "$rc" -eq 0 ] || result="FAILED ($rc)"
	printf '%s\t%s\t%s\n' "$name" $((SECONDS - t0)) "$result" >>"$logs/phases"
	return "$rc"
}

skip() { # NAME WHY
	printf '%s\t0\tskipped: %s\n' "$1" "$2" >>"$logs/phases"
}

clean_build() { # preset [cmake -D...]
	local preset=$1
	shift
	rm -rf "build-$preset"
	cmake --preset "$preset" "$@" && cmake --build --preset "$preset" -j"$jobs"
}

tsan_build() {
	rm -rf build-tsan
	cmake --preset tsan && cmake --build --preset tsan -j"$jobs" --target test_ring test_arena test_view_load test_view_agg
}

background() {
	phase release clean_build release || true
	phase fuzz bash scripts/fuzz.sh 2 || true
	phase tsan-build tsan_build || true
}

phase deps bash scripts/deps.sh || exit 1

asan=ok
if phase asan-build clean_build asan; then
	phase asan-unit tmp_checked "$tmp/asan-unit" --preset asan -L '^(unit|fuzz)$' --timeout 1200 || true
else
	asan=
	skip asan-unit asan-build
fi

echo "== release, fuzz, tsan-build: nice 19 in the background ($logs/background.log)"
(renice -n 19 -p "$BASHPID" >/dev/null || true; background) >"$logs/background.log" 2>&1 </dev/null &
bg=$!
if [ -n "$asan" ]; then
	phase asan-e2e tmp_checked "$tmp/asan-e2e" --preset asan -L '^e2e$' -LE '^plain$' --timeout 1200 || true
else
	skip asan-e2e asan-build
fi
wait "$bg" || true
for p in release fuzz tsan-build; do
	grep -q "^$p	" "$logs/phases" || skip "$p" "the background job ended before it"
done
echo "== background phases (release, fuzz, tsan-build), $logs/background.log:"
cat "$logs/background.log"

if grep -q '^tsan-build	.*	ok$' "$logs/phases"; then
	phase tsan-test tmp_checked "$tmp/tsan-test" --preset tsan --timeout 900 || true
else
	skip tsan-test tsan-build
fi
if grep -q '^release	.*	ok$' "$logs/phases"; then
	phase torture tmp_checked "$tmp/torture" --preset release -L '^(torture|plain)$' --timeout 900 || true
else
	skip torture release
fi

printf '\n%-11s %8s  %s\n' phase seconds result
while IFS=$'\t' read -r name secs result; do
	printf '%-11s %8s  %s\n' "$name" "$secs" "$result"
done <"$logs/phases"
printf '%-11s %8s  %s\n' total $((SECONDS - start)) "(wall; release, fuzz and tsan-build overlap asan-e2e)"
failed=$(awk -F'\t' '$3 != "ok" {print $1}' "$logs/phases" | tr '\n' ' ')
if [ -n "$failed" ]; then
	echo "== FAILED: $failed"
	exit 1
fi
echo "== all test runs passed"
