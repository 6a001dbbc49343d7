#!/bin/bash
# cmake --install lays out bin/, the unit (install prefix substituted), the
# config and the docs; systemd-analyze verify accepts the installed unit.
# With "deb": cpack -G DEB builds the package with its dependencies,
# maintainer scripts and layout. Exit 77 when a tool is missing.
set -euo pipefail
build=${CPA_BUILD_DIR:?}
tmp=$(mktemp -d /tmp/cpa-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${1:-}" = deb ]; then
	command -v cpack >/dev/null && command -v dpkg-deb >/dev/null || exit 77
	(cd "$build" && cpack -G DEB -B "$tmp" >"$tmp/cpack.log" 2>&1) ||
		{ cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
	deb=$(ls "$tmp"/cpa_*.deb)
	info=$(dpkg-deb -I "$deb")
	files=$(dpkg-deb -c "$deb" | awk '{print $6}')
	for dep in libbpf1 libelf1 liburing2 libzstd1 libc6 systemd; do
		grep -q "Depends:.*$dep" <<<"$info" || fail "Depends lacks $dep: $info"
	done
	for f in ./opt/cpa/bin/cpa ./opt/cpa/bin/capture ./opt/cpa/bin/unwindd ./opt/cpa/bin/symd \
		./opt/cpa/bin/storer ./lib/systemd/system/cpa.service ./etc/opt/cpa/cpa.conf \
		./opt/cpa/share/doc/cpa/export.md; do
		grep -qx "$f" <<<"$files" || fail "$f not in the package"
	done
	grep -q '/var/log' <<<"$files" && fail "the package owns /var/log/cpa (it must survive removal)"
	dpkg-deb -e "$deb" "$tmp/control"
	grep -qx /etc/opt/cpa/cpa.conf "$tmp/control/conffiles" || fail "config is not a conffile"
	grep -q 'systemctl enable cpa.service' "$tmp/control/postinst" || fail "postinst does not enable"
	grep -q 'systemctl restart cpa.service' "$tmp/control/postinst" || fail "postinst does not start"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO ./lib/systemd/system/cpa.service >"$tmp/unit"
	grep -qx 'ExecStart=/opt/cpa/bin/cpa monitor --store_dir /var/log/cpa --config /etc/opt/cpa/cpa.conf' \
		"$tmp/unit" || fail "ExecStart in the package: $(grep ExecStart "$tmp/unit")"
	echo "deb ok: $(basename "$deb")"
	exit 0
fi

command -v systemd-analyze >/dev/null || exit 77
cmake --install "$build" --prefix "$tmp/p" >"$tmp/install.log" || { cat "$tmp/install.log"; fail install; }
for f in bin/cpa bin/capture bin/unwindd bin/symd bin/storer bin/cpa-push; do
	[ -x "$tmp/p/$f" ] || fail "$f not installed"
done
[ -f "$tmp/p/share/doc/cpa/export.md" ] || fail "docs not installed"
[ -f "$tmp/p/etc/cpa/cpa.conf" ] || fail "config not installed"
unit=$tmp/p/lib/systemd/system/cpa.service
grep -qx "ExecStart=$tmp/p/bin/cpa monitor --store_dir /var/log/cpa --config $tmp/p/etc/cpa/cpa.conf" \
	"$unit" || fail "prefix not substituted: $(grep ExecStart "$unit")"
grep -q /opt/cpa "$unit" && fail "a /opt/cpa path is left in the unit"
systemd-analyze verify "$unit" || fail "systemd-analyze verify"
echo "install ok"
