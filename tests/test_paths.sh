#!/bin/bash
# Paths cpa writes as root are not another user's links (common/safepath.h,
# docs/cli.md "Paths cpa writes"): in a world-writable sticky directory,
# user nobody plants links to root's directory and files; cpa monitor (root)
# must refuse --store_dir, --oneshot -o and --debug_option's file through
# them, with one line naming the path and the owner, and leave root's files
# as they were. Then: a new store is 0750/0640. Root and BTF, else exit 77.
set -euo pipefail
build=${CPA_BUILD_DIR:?}
[ "$(id -u)" = 0 ] && [ -r /sys/kernel/btf/vmlinux ] || exit 77
command -v setpriv >/dev/null && id nobody >/dev/null || exit 77
cpa=$build/bin/cpa
. "$(dirname "$0")/test_scratch.sh" paths
spin=
trap 'rc=$?; [ -z "$spin" ] || { kill "$spin" && wait "$spin"; } 2>/dev/null || true; scratch_done $rc' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

chmod 755 "$tmp"
shared=$tmp/shared # what /tmp is: world-writable, sticky
mkdir -m 1777 "$shared"
secret=$tmp/root # root's: a directory and a file nobody must not reach
mkdir -m 700 "$secret"
echo "root's file" >"$secret/file"
sum=$(sha256sum "$secret/file")

# refused NAME WHAT: the monitor failed, named the link and its owner, wrote nothing of root's
refused() {
	local name=$1 what=$2 rc=$3
	[ "$rc" != 0 ] || fail "$name: the monitor ran through nobody's link ($(tail -3 "$tmp/$name.log"))"
	grep -q "$what.*owned by uid 65534" "$tmp/$name.log" ||
		fail "$name: no line naming the link and its owner: $(cat "$tmp/$name.log")"
	[ "$(sha256sum "$secret/file")" = "$sum" ] || fail "$name: root's file was overwritten"
	[ "$(ls -A "$secret")" = file ] || fail "$name: cpa wrote into root's directory: $(ls -A "$secret")"
	echo "$name: refused: $(grep -m1 'owned by uid 65534' "$tmp/$name.log")"
}

# 1. --store_dir through nobody's link to root's directory
as_nobody ln -s "$secret" "$shared/store"
rc=0
timeout 60 "$cpa" monitor --store_dir "$shared/store" -F 49 --duration 2 >"$tmp/store.log" 2>&1 || rc=$?
refused store "symlink '[^']*store'" $rc

# 2. --oneshot -o through nobody's link to root's file
as_nobody ln -s "$secret/file" "$shared/out.prof"
rc=0
timeout 60 "$cpa" monitor --oneshot -o "$shared/out.prof" -F 49 --duration 2 >"$tmp/oneshot.log" 2>&1 ||
	rc=$?
refused oneshot "symlink 'out.prof'" $rc

# 3. --debug_option's dump through nobody's link to root's file: the stage
# runs on without its dump (a debug aid), root's file stays as it was.
as_nobody ln -s "$secret/file" "$shared/dump"
sleep 30 &
spin=$!
mkdir -m 700 "$tmp/store3"
timeout 60 "$cpa" monitor --store_dir "$tmp/store3" -F 49 --duration 2 \
	--debug_option "$spin,1,$shared/dump" >"$tmp/dump.log" 2>&1 || fail "dump: monitor failed"
grep -q "symlink 'dump' is owned by uid 65534" "$tmp/dump.log" ||
	fail "dump: no line naming the link and its owner: $(grep -i dump "$tmp/dump.log")"
[ "$(sha256sum "$secret/file")" = "$sum" ] || fail "dump: root's file was written"
echo "dump: refused: $(grep -m1 'owned by uid 65534' "$tmp/dump.log")"

# 4. a store cpa creates is not readable by others: directories 0750, files 0640
timeout 60 "$cpa" monitor --store_dir "$tmp/new/store" -F 49 --duration 2 >"$tmp/new.log" 2>&1 ||
	fail "new store: monitor failed ($(tail -3 "$tmp/new.log"))"
open=$(find "$tmp/new/store" -perm /o=rwx)
[ -z "$open" ] || fail "new store: open to others: $(ls -ld $open | head -5)"
[ "$(stat -c %a "$tmp/new/store")" -le 2750 ] || fail "new store: mode $(stat -c %a "$tmp/new/store")"
echo "new store: $(find "$tmp/new/store" -type f | wc -l) files, none open to others"

# 5. cpa show -o (folded and SVG) and --split_path through nobody's links to
# root's file and directory: refused at the write, root's file as it was.
as_nobody ln -s "$secret/file" "$shared/show.prof"
as_nobody ln -s "$secret/file" "$shared/show.svg"
as_nobody ln -s "$secret" "$shared/split"
for out in show.prof show.svg; do
	rc=0
	"$cpa" show --read "$tmp/new/store" -o "$shared/$out" >"$tmp/$out.log" 2>&1 || rc=$?
	refused "$out" "symlink '$out'" $rc
done
rc=0
"$cpa" show --read "$tmp/new/store" --split_path "$shared/split" >"$tmp/split.log" 2>&1 || rc=$?
refused split "symlink '[^']*split'" $rc
