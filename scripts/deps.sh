#!/usr/bin/env bash
# Install the Debian packages cpa needs to build and test, if missing.
# Idempotent; needs root (or sudo) only when something is missing.
set -euo pipefail

pkgs=(
	build-essential cmake pkg-config clang llvm bpftool
	libclang-rt-dev
	libbpf-dev libelf-dev libdw-dev liburing-dev libzstd-dev
	zlib1g-dev liblzma-dev libiberty-dev libdebuginfod-dev binutils xz-utils check
	golang-go chromium libxml2-utils libcap2-bin libcurl4-openssl-dev
	libncurses-dev libncursesw6 tmux
	faketime libfaketime
	systemtap-sdt-dev
	linux-perf bzip2 perl
	lintian
)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
		missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
