#!/bin/bash
# cmake --install lays out bin/, the unit (install prefix substituted), the
# config and the docs; systemd-analyze verify accepts the installed unit.
# With "security": the installed unit's `systemd-analyze security` exposure is
# below CPA_MAX_EXPOSURE, and the shipped network drop-in allows AF_INET/AF_INET6.
# With "deb": cpack -G DEB builds the package and its -dbgsym with their
# dependencies, maintainer scripts and layout; lintian finds no error; as root,
# dpkg -i puts cpa, cpa-view and cpa-push on PATH, `cpa show --use_cui` runs
# cpa-view, and dpkg -r/-P leave nothing behind (but the conffile after -r).
# Exit 77 when a tool is missing (or, for the dpkg -i part, without root or
# when a cpa package is installed already).
set -euo pipefail
build=${CPA_BUILD_DIR:?}
. "$(dirname "$0")/test_scratch.sh" install
export TMPDIR=$tmp # lintian leaves mldbm-elf-* temp files: with the scratch they go
fail() { echo "FAIL: $*" >&2; exit 1; }
# The unit scores 3.0 with systemd 252 (5.1 before its sandboxing was tightened).
CPA_MAX_EXPOSURE=${CPA_MAX_EXPOSURE:-3.5}

# dpkg waits for no lock: retry while another dpkg/apt holds it (up to 2 min).
dpkg_retry() {
	local i
	for i in $(seq 60); do
		dpkg "$@" >"$tmp/dpkg.log" 2>&1 && return 0
		grep -q 'lock' "$tmp/dpkg.log" || break
		sleep 2
	done
	cat "$tmp/dpkg.log" >&2
	return 1
}

if [ "${1:-}" = deb ]; then
	for t in cpack dpkg-deb lintian; do command -v $t >/dev/null || exit 77; done
	(cd "$build" && cpack -G DEB -B "$tmp" >"$tmp/cpack.log" 2>&1) ||
		{ cat "$tmp/cpack.log"; fail "cpack -G DEB"; }
	deb=$(ls "$tmp"/cpa_*.deb)
	info=$(dpkg-deb -I "$deb")
	listing=$(dpkg-deb -c "$deb")
	files=$(awk '{print $6}' <<<"$listing")
	# libcurl4: cpa-push; libncursesw6: cpa-view. jemalloc is linked by nothing.
	for dep in libbpf1 libelf1 liburing2 libzstd1 libc6 systemd libcurl4 libncursesw6; do
		grep -q "Depends:.*$dep" <<<"$info" || fail "Depends lacks $dep: $info"
	done
	grep -q "Depends:.*jemalloc" <<<"$info" && fail "Depends names jemalloc: $info"
	grep -q '^ Description: .' <<<"$info" && grep -q '^  [A-Za-z]' <<<"$info" ||
		fail "no extended description: $info"
	for f in ./opt/cpa/bin/cpa ./opt/cpa/bin/capture ./opt/cpa/bin/unwindd ./opt/cpa/bin/symd \
		./opt/cpa/bin/storer ./opt/cpa/bin/cpa-push ./opt/cpa/bin/cpa-view \
		./lib/systemd/system/cpa.service ./etc/opt/cpa/cpa.conf \
		./opt/cpa/share/doc/cpa/export.md ./opt/cpa/share/doc/cpa/examples/cpa.service.d/network.conf \
		./usr/share/doc/cpa/copyright ./usr/bin/cpa ./usr/bin/cpa-view ./usr/bin/cpa-push \
		./usr/share/man/man1/cpa.1.gz ./usr/share/man/man1/cpa-view.1.gz; do
		grep -qx "$f" <<<"$files" || fail "$f not in the package"
	done
	for b in cpa cpa-view cpa-push; do
		grep -q " \./usr/bin/$b -> /opt/cpa/bin/$b\$" <<<"$listing" ||
			fail "/usr/bin/$b is not a link to /opt/cpa/bin/$b"
	done
	# Stripped binaries; their debug info in cpa-dbgsym, found by build-id.
	ddeb=$(ls "$tmp"/cpa-dbgsym_*.ddeb 2>/dev/null) || fail "no cpa-dbgsym package: $(ls "$tmp")"
	mkdir "$tmp/x"
	dpkg-deb -x "$deb" "$tmp/x"
	id=$(readelf -n "$tmp/x/opt/cpa/bin/cpa" | awk '/Build ID/ {print $3}')
	[ -n "$id" ] || fail "cpa has no build-id"
	grep -q '\.debug_info' <<<"$(readelf -S "$tmp/x/opt/cpa/bin/cpa")" &&
		fail "cpa in the package is not stripped"
	grep -q "\./usr/lib/debug/\.build-id/${id:0:2}/${id:2}\.debug\$" <<<"$(dpkg-deb -c "$ddeb")" ||
		fail "cpa-dbgsym lacks the debug file of cpa (build-id $id)"
	# lintian: no error (what stays a warning or is overridden: docs/packaging.md).
	(cd "$tmp" && lintian --no-cfg "$deb" "$ddeb" >"$tmp/lintian.log" 2>&1) || true
	grep -q '^E: ' "$tmp/lintian.log" && { cat "$tmp/lintian.log"; fail "lintian reports errors"; }
	grep -q '^[EW]: ' "$tmp/lintian.log" && { echo "lintian:"; cat "$tmp/lintian.log"; }
	grep -q '/var/log' <<<"$files" && fail "the package owns /var/log/cpa (it must survive removal)"
	dpkg-deb -e "$deb" "$tmp/control"
	grep -qx /etc/opt/cpa/cpa.conf "$tmp/control/conffiles" || fail "config is not a conffile"
	grep -q 'deb-systemd-helper enable cpa.service' "$tmp/control/postinst" || fail "postinst does not enable"
	grep -q 'deb-systemd-invoke restart cpa.service' "$tmp/control/postinst" || fail "postinst does not start"
	dpkg-deb --fsys-tarfile "$deb" | tar -xO ./lib/systemd/system/cpa.service >"$tmp/unit"
	grep -qx 'ExecStart=/opt/cpa/bin/cpa monitor --store_dir /var/log/cpa --config /etc/opt/cpa/cpa.conf' \
		"$tmp/unit" || fail "ExecStart in the package: $(grep ExecStart "$tmp/unit")"
	echo "deb ok: $(basename "$deb") $(basename "$ddeb")"

	# Into the real system: one such test at a time on the machine, and never
	# over a cpa the machine has.
	[ "$(id -u)" = 0 ] || { echo "not root: dpkg -i not tried"; exit 77; }
	exec 9>/run/lock/cpa-test-deb.lock
	flock -w 600 9 || fail "another test_deb holds /run/lock/cpa-test-deb.lock"
	if dpkg-query -W -f='${db:Status-Status}' cpa 2>/dev/null | grep -qv '^not-installed$' ||
		[ -e /opt/cpa ] || [ -e /etc/opt/cpa ]; then
		echo "a cpa package or /opt/cpa is on this machine: dpkg -i not tried"
		exit 77
	fi
	trap 'dpkg -P cpa-dbgsym cpa >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
	trap 'exit 1' TERM INT # a ctest timeout still purges
	dpkg_retry -i "$deb" "$ddeb" || fail "dpkg -i $deb $ddeb"
	[ -f "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] || fail "cpa's debug file not installed"
	for b in cpa cpa-view cpa-push; do
		[ "$(PATH=/usr/bin:/bin command -v $b)" = /usr/bin/$b ] || fail "$b is not on PATH"
		[ "$(readlink -f /usr/bin/$b)" = /opt/cpa/bin/$b ] ||
			fail "/usr/bin/$b -> $(readlink -f /usr/bin/$b)"
	done
	for b in /opt/cpa/bin/*; do
		! ldd "$b" | grep 'not found' || fail "$b: a library is missing"
	done
	# cpa-view is found and runs (and, with no terminal, refuses at once).
	out=$(PATH=/usr/bin:/bin timeout 10 cpa show --use_cui --read /nonexistent </dev/null 2>&1) &&
		fail "cpa show --use_cui without a terminal succeeded: $out"
	grep -q 'cannot run cpa-view' <<<"$out" && fail "cpa show --use_cui: $out"
	grep -q '^cpa-view: needs a terminal' <<<"$out" || fail "cpa show --use_cui: $out"
	[ -L /etc/systemd/system/multi-user.target.wants/cpa.service ] ||
		fail "postinst did not enable the unit"
	systemd-analyze verify /lib/systemd/system/cpa.service || fail "systemd-analyze verify (installed)"
	dpkg_retry -r cpa-dbgsym cpa || fail "dpkg -r cpa-dbgsym cpa"
	# The unit's enablement stays until purge (as debhelper's scripts do).
	for f in /opt/cpa /usr/bin/cpa /usr/bin/cpa-view /lib/systemd/system/cpa.service; do
		[ -e "$f" ] || [ -L "$f" ] && fail "$f left after dpkg -r"
	done
	[ -f /etc/opt/cpa/cpa.conf ] || fail "dpkg -r removed the conffile"
	[ -e "/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug" ] && fail "debug file left after dpkg -r"
	dpkg_retry -P cpa-dbgsym cpa || fail "dpkg -P cpa-dbgsym cpa"
	[ -e /etc/opt/cpa ] && fail "/etc/opt/cpa left after dpkg -P"
	dpkg-query -W -f='${db:Status-Status}' cpa 2>/dev/null | grep -qv '^not-installed$' &&
		fail "cpa still known to dpkg after -P"
	left=$(find /etc/systemd /var/lib/systemd -name 'cpa.service*' 2>/dev/null || true)
	[ -z "$left" ] || fail "systemd state left after dpkg -P: $left"
	echo "dpkg -i/-r/-P ok"
	exit 0
fi

if [ "${1:-}" = security ]; then
	command -v systemd-analyze >/dev/null || exit 77
	cmake --install "$build" --prefix "$tmp/p" >"$tmp/install.log" ||
		{ cat "$tmp/install.log"; fail install; }
	mkdir "$tmp/u"
	cp "$tmp/p/lib/systemd/system/cpa.service" "$tmp/u/"
	systemd-analyze security --offline=true --no-pager "$tmp/u/cpa.service" >"$tmp/sec" 2>&1 || {
		grep -q "unrecognized option" "$tmp/sec" && exit 77
		cat "$tmp/sec"
		fail "systemd-analyze security"
	}
	score=$(sed -n 's/.*Overall exposure level for cpa.service: \([0-9.]*\).*/\1/p' "$tmp/sec")
	[ -n "$score" ] || { cat "$tmp/sec"; fail "no exposure level"; }
	echo "exposure $score"
	awk -v s="$score" -v m="$CPA_MAX_EXPOSURE" 'BEGIN { exit !(s <= m) }' ||
		{ cat "$tmp/sec"; fail "exposure $score > $CPA_MAX_EXPOSURE"; }
	grep -a 'RestrictAddressFamilies=~AF_(INET|INET6)' "$tmp/sec" | grep -aq 'cannot allocate' ||
		fail "the unit allows AF_INET/AF_INET6"
	grep -a 'PrivateNetwork=' "$tmp/sec" | grep -aq "no access to the host's network" ||
		fail "the unit has the host's network"
	# The example drop-in (a drop-in next to the unit file is read as in /etc).
	net=$tmp/p/share/doc/cpa/examples/cpa.service.d/network.conf
	[ -f "$net" ] || fail "example drop-in not installed"
	mkdir "$tmp/u/cpa.service.d"
	cp "$net" "$tmp/u/cpa.service.d/"
	systemd-analyze security --offline=true --no-pager "$tmp/u/cpa.service" >"$tmp/sec2" 2>&1 ||
		{ cat "$tmp/sec2"; fail "systemd-analyze security with the drop-in"; }
	grep -a 'RestrictAddressFamilies=~AF_(INET|INET6)' "$tmp/sec2" | grep -aq 'may allocate' ||
		fail "the network drop-in does not allow AF_INET/AF_INET6"
	grep -a 'IPAddressDeny=' "$tmp/sec2" | grep -aq 'allow list with non-localhost' ||
		fail "the network drop-in leaves IP traffic denied: $(grep -a IPAddress "$tmp/sec2")"
	grep -a 'PrivateNetwork=' "$tmp/sec2" | grep -aq "access to the host's network" ||
		fail "the network drop-in leaves the network private: $(grep -a PrivateNetwork "$tmp/sec2")"
	echo "security ok"
	exit 0
fi

command -v systemd-analyze >/dev/null || exit 77
cmake --install "$build" --prefix "$tmp/p" >"$tmp/install.log" || { cat "$tmp/install.log"; fail install; }
for f in bin/cpa bin/capture bin/unwindd bin/symd bin/storer bin/cpa-push bin/cpa-view; do
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
