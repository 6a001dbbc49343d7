#!/usr/bin/env bash
# Build the fuzz preset (clang, libFuzzer + ASan + UBSan) and run every fuzz
# target for N seconds, one after the other on one core (-jobs is not used:
# the machine is shared). docs/reliability.md, "Fuzzing and hostile input".
#
#   bash scripts/fuzz.sh [seconds-per-target] [target...]
#
# CI (scripts/test.sh) runs 2 s per target (~30 s for all 14); the long run,
# an hour per target, is scripts/soak.sh fuzz (`scripts/fuzz.sh 3600`). Seeds come from real files (fuzz_seeds:
# a store the real writer makes, ring records, ELF files of /usr/bin and
# /usr/lib, /proc/self/maps, /proc/kallsyms); inputs found that add coverage are
# kept in build-fuzz/corpus/<target>/ across runs. A crash, leak, timeout or
# out-of-memory leaves build-fuzz/crashes/<target>-*: the script then fails;
# fix the bug and copy the file into tests/fuzz_regress/<target>/ (replayed by
# ctest in every build: tests fuzz_replay_<target>).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-4}
shift || true
all=(store_seg store_index journal ring_storer ring_symd procmaps elfid cfi elfsym ksyms jitmap gopclntab config opts)
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

command -v clang >/dev/null || { echo "fuzz: clang missing (scripts/deps.sh)" >&2; exit 1; }
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j"$(nproc)"

b=build-fuzz
mkdir -p "$b/crashes" "$b/corpus" "$b/logs"
rm -rf "$b/seeds"
"$b/bin/fuzz_seeds" "$b/seeds" "$PWD" >/dev/null
# and the library with hostile CFI test_hostile_elf uses (tests/fixtures/hostile)
cc -O2 -fPIC -shared -o "$b/seeds/cfi/cfi_hostile.so" tests/fixtures/hostile/cfi_hostile.c
cp "$b/seeds/cfi/cfi_hostile.so" "$b/seeds/elfsym/"

failed=()
printf '%-12s %8s %10s %8s %6s %6s %8s %7s\n' target seconds execs execs/s cov ft corpus rss_mb
for t in "${targets[@]}"; do
	exe="$b/bin/fuzz_$t"
	[ -x "$exe" ] || { echo "fuzz: no target $t" >&2; exit 2; }
	mkdir -p "$b/corpus/$t"
	dirs=("$b/corpus/$t")
	[ -d "$b/seeds/$t" ] && dirs+=("$b/seeds/$t")
	[ -d "tests/fuzz_regress/$t" ] && dirs+=("tests/fuzz_regress/$t")
	log="$b/logs/$t.log"
	rc=0
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$exe" -max_total_time="$secs" -timeout=20 -rss_limit_mb=1536 \
		-max_len=131072 -print_final_stats=1 -close_fd_mask=1 \
		-artifact_prefix="$b/crashes/$t-" "${dirs[@]}" >"$log" 2>&1 || rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
	eps=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
	rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
	last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
	printf '%-12s %8s %10s %8s %6s %6s %8s %7s\n' "$t" "$secs" "${execs:--}" "${eps:--}" \
		"${cov:--}" "${ft:--}" "${corp:--}" "${rss:--}"
	if [ "$rc" -ne 0 ]; then
		failed+=("$t")
		echo "---- $t failed (exit $rc), $log:" >&2
		grep -E 'ERROR|SUMMARY|runtime error|Test unit written|deadly signal|out-of-memory|timeout' \
			"$log" | head -20 >&2 || true
	fi
done
if [ ${#failed[@]} -ne 0 ]; then
	echo "fuzz: findings in ${failed[*]} (inputs in $b/crashes/)" >&2
	exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${secs} s each, no findings"
