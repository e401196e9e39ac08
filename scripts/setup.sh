#!/usr/bin/env bash
# Installs every Debian package uroce needs to build, test, and run its acceptance
# programs. Safe to run again: it only calls apt-get when something is missing.
# usage: scripts/setup.sh [--build-only]   (--build-only: what building and installing uroce
# needs, without the tests' packages: scripts/ci-step.sh, docs/ci.md)
set -euo pipefail

build_packages=(
    build-essential cmake pkg-config python3
    liburing-dev libasio-dev libpcap-dev
    libibverbs-dev librdmacm-dev
)
# ...and the tests' and the acceptance programs'.
packages=(
    "${build_packages[@]}" git libgtest-dev
    ibverbs-utils rdmacm-utils perftest
    ucx-utils libfabric-bin infiniband-diags
    tshark python3-scapy python3-pyverbs python3-yaml
    iproute2 procps ethtool
    socat netcat-openbsd
    librpma-dev
    clang libclang-rt-14-dev clang-format
)
if [ "${1:-}" = --build-only ]; then packages=("${build_packages[@]}"); fi

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# tshark asks whether non-root users may capture; answer no, nothing here needs it.
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
