#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this):
# install what is missing, build from a clean build directory, run every
# test (BPF integration tests run for real as root and skip with 77
# otherwise), build the Release preset (no run: it must compile with
# -Werror at -O3), then the suite again under ASan+UBSan, the ring tests
# under TSan, and a short run of every fuzz target (scripts/fuzz.sh).
#
#   bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
jobs=$(nproc)

echo "== build (RelWithDebInfo) and test"
rm -rf build-ci
cmake -S . -B build-ci -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build-ci -j"$jobs"
(cd build-ci && ctest --output-on-failure --timeout 900)

echo "== Release (-O3, what packagers build): build only, -Werror"
rm -rf build-release
cmake --preset release
cmake --build --preset release -j"$jobs"

echo "== ASan + UBSan: the whole suite"
rm -rf build-asan
cmake --preset asan
cmake --build --preset asan -j"$jobs"
ctest --preset asan --timeout 1200

echo "== TSan: the ring tests"
rm -rf build-tsan
cmake --preset tsan
cmake --build --preset tsan -j"$jobs" --target test_ring test_arena
ctest --preset tsan --timeout 900

echo "== fuzz: every libFuzzer target for 4 s (clang, ASan + UBSan; scripts/fuzz.sh)"
bash scripts/fuzz.sh 4

echo "== all test runs passed"
