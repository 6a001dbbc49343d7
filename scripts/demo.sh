#!/usr/bin/env bash
# The main job on an embedded default: install what is missing, build, record
# a few seconds of the whole machine (with a known workload running) into a
# store under /tmp, and show the hottest stacks of the resulting profile.
#
#   bash scripts/demo.sh            (as root: BPF needs it)
# Environment: CPA_DEMO_STORE (default /tmp/cpa-demo), CPA_DEMO_SECONDS (5).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" >/dev/null

store=${CPA_DEMO_STORE:-/tmp/cpa-demo}
secs=${CPA_DEMO_SECONDS:-5}
rm -rf "$store"

# Something to look at: a two-thread program without frame pointers.
build/bin/cpa-workload-nofp --seconds $((secs + 2)) --threads 1 >/dev/null &
wl=$!
build/bin/cpa monitor --store_dir "$store" --duration "$secs" -F 99
wait "$wl" || true

echo
range=$(build/bin/cpa show --read "$store" --show_range)
echo "$range"
# Every second from the first record to the last: asking for more is an error.
read -r h0 m0 s0 h1 m1 s1 < <(sed -E 's/.*From \[ ([0-9]+):([0-9]+):([0-9]+)\.[0-9]+ \] to \[ ([0-9]+):([0-9]+):([0-9]+)\..*/\1 \2 \3 \4 \5 \6/' <<<"$range")
n=$(( (10#$h1 * 3600 + 10#$m1 * 60 + 10#$s1) - (10#$h0 * 3600 + 10#$m0 * 60 + 10#$s0) + 1 ))
((n > 0)) || n=$((n + 86400))
prof=$(mktemp /tmp/cpa-demo-XXXXXX.prof)
build/bin/cpa show --read "$store" --output_num "$n" --output_prof "$prof" --no_env
echo
echo "Hottest stacks (count, then stack root -> leaf):"
awk '{n=$NF; $NF=""; print n "\t" $0}' "$prof" | sort -rn | head -15 | cut -c1-220
echo
echo "Whole profile: $prof   (flamegraph.pl $prof > cpa.svg)"
