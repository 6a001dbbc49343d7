#!/bin/bash
# SPDX-License-Identifier: MIT
#
# Memory caps under a process that maps thousands of distinct binaries
# (issue 14): N tiny shared objects, each with its own build-id, dlopen()ed by
# one process that spins in every one of them in turn, profiled by the real
# `cpa monitor --pid` with a small --max_cache_size_mb. Prints symd's and
# unwindd's peak RSS, their evictions and cache gauges, and how many samples
# were symbolized. Root (BPF) needed.
#
#   bash bench/manylibs.sh [build-dir] [libs] [cache-mb] [seconds]
set -euo pipefail
B=$(realpath "${1:-build}")
N=${2:-2000}
MB=${3:-32}
SECS=${4:-30}
W=$(mktemp -d /tmp/cpa-manylibs-XXXXXX)
trap 'kill $WL $MON 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

# Each library: the spinning pair plus 3,000 small functions, so that every
# binary costs symd and unwindd something (symbols, unwind rows).
python3 - > "$W/lib.c" <<'PY'
print("volatile unsigned long sink;")
for i in range(3000):
    print("void manylib_pad_function_number_%04d(unsigned long n) { sink += n * %d; }" % (i, i + 1))
print("""__attribute__((noinline)) void manylib_leaf(unsigned long n)
{
	for (unsigned long i = 0; i < n; i++)
		sink += i * 7;
}
__attribute__((noinline)) void manylib_spin(unsigned long n)
{
	manylib_leaf(n);
	sink++;
}""")
PY
cat > "$W/drv.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int n = atoi(argv[1]);
	void (**fn)(unsigned long) = calloc(n, sizeof(*fn));
	char p[4096];

	for (int i = 0; i < n; i++) {
		snprintf(p, sizeof(p), "%s/lib%05d.so", argv[2], i);
		void *h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
		if (!h || !(fn[i] = (void (*)(unsigned long))dlsym(h, "manylib_spin"))) {
			fprintf(stderr, "%s: %s\n", p, dlerror());
			return 1;
		}
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		for (int i = 0; i < n; i++)
			fn[i](20000);
}
C
gcc -O1 -fno-omit-frame-pointer -fPIC -shared -Wl,--build-id=sha1 -o "$W/lib.so" "$W/lib.c"
gcc -O1 -o "$W/drv" "$W/drv.c" -ldl
mkdir "$W/libs"
# Distinct binaries: each copy gets its own build-id (the note's 20 bytes).
python3 - "$W/lib.so" "$W/libs" "$N" <<'PY'
import sys, subprocess, re
src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
data = open(src, 'rb').read()
bid = re.search(r'Build ID: ([0-9a-f]+)', subprocess.run(['readelf', '-n', src], capture_output=True, text=True).stdout).group(1)
raw = bytes.fromhex(bid)
off = data.index(raw)
for i in range(n):
    new = (b'CPAML' + i.to_bytes(4, 'big')).ljust(len(raw), b'\x5a')
    open('%s/lib%05d.so' % (out, i), 'wb').write(data[:off] + new + data[off + len(raw):])
PY
"$W/drv" "$N" "$W/libs" > "$W/drv.out" &
WL=$!
until grep -q ready "$W/drv.out" 2>/dev/null; do sleep 0.2; done
maps=$(grep -o 'lib[0-9]*\.so' /proc/$WL/maps | sort -u | wc -l || true)

"$B/bin/cpa" monitor --store_dir "$W/store" --pid $WL -F 499 --max_cache_size_mb "$MB" \
	--duration "$SECS" --log_print_cycles 0 > "$W/mon.log" 2>&1 &
MON=$!
peak_sym=0 peak_unw=0
while kill -0 $MON 2>/dev/null; do
	for st in symd unwindd; do
		pid=$(pgrep -P $MON -x $st || true)
		[ -n "$pid" ] || continue
		rss=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
		if [ $st = symd ]; then [ "${rss:-0}" -gt $peak_sym ] && peak_sym=$rss
		else [ "${rss:-0}" -gt $peak_unw ] && peak_unw=$rss; fi
	done
	"$B/bin/cpa" ctl --store_dir "$W/store" status > "$W/ctl.tmp" 2>/dev/null && mv "$W/ctl.tmp" "$W/ctl.last"
	sleep 1
done
wait $MON || true
kill $WL; wait $WL 2>/dev/null || true
cnt() { # stage counter from the last ctl status
	awk -v s="$1:" -v k="$2" '$1 == s {on = 1; next} /^[a-z]+:/ {on = 0}
		on { for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == k) print a[2] } }' "$W/ctl.last"
}
range=$("$B/bin/cpa" show --read "$W/store" --show_range 2>/dev/null | head -1)
from=$(echo "$range" | sed -n 's/.*From \[ \([0-9:]*\)\..*/\1/p')
to=$(echo "$range" | sed -n 's/.*to \[ \([0-9:]*\)\..*/\1/p')
"$B/bin/cpa" show --read "$W/store" -B "$from" -E "$to" --output_prof "$W/out.prof" > /dev/null 2>&1 || true
total=$(awk '{s += $NF} END {print s + 0}' "$W/out.prof" 2>/dev/null || echo 0)
named=$(awk '/manylib_leaf|manylib_spin/ {s += $NF} END {print s + 0}' "$W/out.prof" 2>/dev/null || echo 0)
printf '| libs mapped | cap MiB | s | symd peak RSS MiB | unwindd peak RSS MiB | symd cache_evict | symd cache_bytes MiB | unwindd cache_evict | unwindd cache_bytes MiB | samples | named manylib_* |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
printf '| %s | %s | %s | %.1f | %.1f | %s | %.1f | %s | %.1f | %s | %s |\n' "$maps" "$MB" "$SECS" \
	"$(echo "$peak_sym / 1024" | bc -l)" "$(echo "$peak_unw / 1024" | bc -l)" \
	"$(cnt symd cache_evict)" "$(echo "$(cnt symd cache_bytes) / 1048576" | bc -l)" \
	"$(cnt unwindd cache_evict)" "$(echo "$(cnt unwindd cache_bytes) / 1048576" | bc -l)" \
	"$total" "$named"
grep -E "memory:|ERROR|cache cap" "$W/mon.log" | head -5 || true
