#!/bin/bash
# SPDX-License-Identifier: MIT
#
# bench/execstorm.sh [BUILD] [EXECS] [FREQ]: one process (/bin/sh) that execs
# itself EXECS times (default 3000), profiled by `cpa monitor --pid -F FREQ`
# (default 999); prints how its samples end: rooted at _start, inside execve
# (<# EXEC: IMAGE REPLACED #>), each stop marker, and the rest (incomplete,
# shown). docs/bench.md "Exec, exit, entry points and deep stacks". Root.
set -euo pipefail
build=$(realpath "${1:-build}")
n=${2:-3000}
freq=${3:-999}
[ "$(id -u)" = 0 ] || { echo "execstorm: needs root (BPF)" >&2; exit 77; }
dir=$(mktemp -d /tmp/cpa-execstorm.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT
cat >"$dir/self.sh" <<EOS
#!/bin/sh
[ "\$1" -gt 0 ] && exec /bin/sh "$dir/self.sh" \$((\$1 - 1))
EOS
mkfifo "$dir/gate"
sh -c "read x < '$dir/gate'; exec /bin/sh '$dir/self.sh' $n" &
pid=$!
"$build/bin/cpa" monitor --pid "$pid" -F "$freq" --store_dir "$dir/store" >"$dir/log" 2>&1 &
mon=$!
# Until capture samples (its BPF programs loaded).
for _ in $(seq 100); do grep -q "capture: sampling" "$dir/log" && break; sleep 0.1; done
sleep 2
echo go >"$dir/gate"
wait "$pid" || true
sleep 1
kill -INT "$mon"
wait "$mon" || true
# "Record Time From [ HH:MM:SS.mmm ] to [ HH:MM:SS.mmm ] ..."
range=$("$build/bin/cpa" show --read "$dir/store" -p 2>&1 | grep -m1 "Record Time From")
a=$(awk '{print $5}' <<<"$range")
b=$(awk '{print $9}' <<<"$range")
secs=$(($(date -d "$b" +%s) - $(date -d "$a" +%s) + 1))
"$build/bin/cpa" show --read "$dir/store" -B "${a%.*}" -n "$secs" -o "$dir/out.prof" >/dev/null 2>&1 ||
	"$build/bin/cpa" show --read "$dir/store" -B "${a%.*}" -n $((secs - 1)) -o "$dir/out.prof" >/dev/null
awk -v n="$n" '
{ c = $NF; total += c
  if ($0 ~ /;_start;/) rooted += c
  else if (match($0, /<# [^#]* #>/)) m[substr($0, RSTART, RLENGTH)] += c
  else { other += c; if (shown++ < 5) print "  incomplete: " substr($0, 1, 160) } }
END { printf "execstorm: %d execs, %d samples\n", n, total
      printf "  %-34s %7d %6.2f %%\n", "rooted at _start", rooted, 100 * rooted / total
      for (k in m) printf "  %-34s %7d %6.2f %%\n", k, m[k], 100 * m[k] / total
      printf "  %-34s %7d %6.2f %%\n", "other (no root, no marker)", other, 100 * other / total }
' "$dir/out.prof"
