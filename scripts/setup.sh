#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Installs every Debian package uroce needs to build, test, and run its acceptance
# programs. Safe to run again: it only calls apt-get when something is missing.
# Tested on Debian 12 and 13; by the same rules expected to work on Ubuntu 22.04/24.04. No
# package is named by a version: what differs between systems (the sanitizer runtime that
# goes with the installed clang, a package a system does not have) is chosen from what apt
# offers there.
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
    openmpi-bin libopenmpi-dev mpich libmpich-dev
    tshark python3-scapy python3-pyverbs python3-yaml
    iproute2 procps ethtool
    debootstrap lintian
    socat netcat-openbsd
    clang clang-format
    librsvg2-bin
)
# Where the archive has them (librpma is not in every Debian-family release; Ubuntu's
# chromium is a snap stub, so the ladder tests' HTML check skips there; tgt for tgt.iser_listeners).
optional=(librpma-dev chromium tgt)
build_only=""
if [ "${1:-}" = --build-only ]; then
    packages=("${build_packages[@]}")
    build_only=1
fi

# grep reads all its input (no -q): under pipefail, a grep that stops early can end the
# writer with SIGPIPE and the test reads as false (librpma-dev was once "not in the archive").
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep "install ok installed" >/dev/null; }
available() { apt-cache policy "$1" 2>/dev/null | grep "Candidate: [^(]" >/dev/null; }
# The ASan/UBSan/libFuzzer runtime of the clang that is installed (Debian splits it out by
# clang's major version since clang 14).
clang_runtime() {
    local v
    v=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9]\+\).*/\1/p' | head -n1)
    [ -n "$v" ] && echo "libclang-rt-$v-dev"
}

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
updated=""
install() {
    [ $# -gt 0 ] || return 0
    echo "setup: installing $*"
    if [ -z "$updated" ]; then
        # tshark asks whether non-root users may capture; answer no, nothing here needs it.
        echo "wireshark-common wireshark-common/install-setuid boolean false" |
            $SUDO debconf-set-selections
        $SUDO apt-get update -q
        updated=1
    fi
    $SUDO apt-get install -y -q --no-install-recommends "$@"
}

missing=()
for p in "${packages[@]}"; do installed "$p" || missing+=("$p"); done
install "${missing[@]}"

# Second round: what depends on the first (the clang version) or on the archive's offer.
extra=()
if [ -n "$build_only" ]; then
    [ ${#missing[@]} -gt 0 ] || echo "setup: all packages present"
    exit 0
fi
rt=$(clang_runtime)
if [ -n "$rt" ] && ! installed "$rt"; then
    extra+=("$rt")
fi
for p in "${optional[@]}"; do installed "$p" || extra+=("$p"); done
if [ ${#extra[@]} -gt 0 ] && [ -z "$updated" ]; then
    $SUDO apt-get update -q
    updated=1
fi
wanted=()
for p in "${extra[@]}"; do
    if available "$p"; then wanted+=("$p"); else echo "setup: $p is not in this system's archive, skipping it"; fi
done
install "${wanted[@]}"
[ ${#missing[@]} -gt 0 ] || [ ${#wanted[@]} -gt 0 ] || echo "setup: all packages present"
