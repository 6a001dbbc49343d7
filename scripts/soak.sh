#!/usr/bin/env bash
# The long campaigns that do not fit the test suite (docs/reliability.md,
# "Soak runs"): the kill torture, the kill torture with ring 0 full, and every
# fuzz target for an hour. The suite (scripts/test.sh, ctest -L torture) keeps
# short runs of each. Needs root and BPF for the torture; one core for fuzzing.
#
#   bash scripts/soak.sh [torture] [stall] [fuzz]      (no argument: all three)
#
# Knobs (environment): SOAK_PER_STAGE=500 (torture: kills of each of the five
# victims), SOAK_STALL_KILLS=200 (stall: kills, unwindd stalled before half of
# them), SOAK_FUZZ_SECONDS=3600 (fuzz: seconds per target, scripts/fuzz.sh).
# The torture runs build the dev preset (build-dev); their output ends with
# the accounting table, which must show 0 unaccounted.
set -euo pipefail
cd "$(dirname "$0")/.."

per_stage=${SOAK_PER_STAGE:-500}
stall_kills=${SOAK_STALL_KILLS:-200}
fuzz_secs=${SOAK_FUZZ_SECONDS:-3600}
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(torture stall fuzz)

torture() {
	cmake --preset dev >/dev/null
	cmake --build --preset dev -j"$(nproc)" --target bench_torture
	echo "== bench_torture $*"
	build-dev/bin/bench_torture "$@"
}

declare -a phases=() secs=()
failed=0
for r in "${runs[@]}"; do
	t0=$SECONDS
	rc=0
	case $r in
	torture)
		# every stage and the monitor, 5 x SOAK_PER_STAGE kills (3,139 s for 500)
		torture --per_stage "$per_stage" --pace 200:800 --healthy 3000 --duty 30 || rc=$?
		;;
	stall)
		# every victim with unwindd stalled before half of the kills (440 s for 200)
		torture --kills "$stall_kills" --freq 999 --stall 50 --pace 500:2500 || rc=$?
		;;
	fuzz)
		bash scripts/fuzz.sh "$fuzz_secs" || rc=$?
		;;
	*)
		echo "soak: unknown run $r (torture, stall, fuzz)" >&2
		exit 2
		;;
	esac
	phases+=("$r")
	secs+=($((SECONDS - t0)))
	[ "$rc" -eq 0 ] || { echo "soak: $r failed (exit $rc)" >&2; failed=1; }
done

printf '\n%-8s %8s\n' run seconds
for i in "${!phases[@]}"; do
	printf '%-8s %8s\n' "${phases[$i]}" "${secs[$i]}"
done
[ "$failed" -eq 0 ] || { echo "soak: failed" >&2; exit 1; }
echo "soak: ${runs[*]} passed"
