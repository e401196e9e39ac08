#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The Debian package (docs/packaging.md) on a fresh Debian system of release DIST: in a
# throwaway copy of a minimal DIST root kept for the package tests (made with
# scripts/test-distro.sh's debootstrap machinery in $UROCE_DISTRO_CACHE/package, or brought up
# to date here, with ibverbs-utils, rdmacm-utils, ucx-utils and iproute2 only), `apt-get
# install ./the.deb` and, as a user made there, the programs over it
# (tests/integration/package_in_root.sh); with IMAGE, the image ci/Containerfile describes
# (FROM IMAGE), built and run there (tests/integration/containerfile_script.sh).
# The package is package.build's (package_build_test.sh), in DEB_DIR: one build for every DIST.
# usage: package_test.sh SRC DEB_DIR DIST [IMAGE]   (root only; e.g. bookworm debian:12)
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
src=${1:?usage: package_test.sh SRC DEB_DIR DIST [IMAGE]}
debdir=${2:?usage: package_test.sh SRC DEB_DIR DIST [IMAGE]}
dist=${3:?usage: package_test.sh SRC DEB_DIR DIST [IMAGE]}
image=${4:-}
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, mount and PID namespaces)"
need dpkg-deb
# The package tests' roots hold only what these tests install: not the second system's root
# (scripts/test-distro.sh trixie), which holds the build packages, liburing and libpcap among
# them, so apt would have nothing to bring. Kept apart, in a directory of their own.
cache=${UROCE_DISTRO_CACHE:-/var/cache/uroce}/package
export UROCE_DISTRO_CACHE=$cache
mkdir -p "$cache"

# The root needs the archive (debootstrap, the package's dependencies): without it, a skip
# (e.g. in a network namespace with only a loopback).
url=$("$src/scripts/test-distro.sh" "$dist" --archive)
[ -n "$url" ] || skip "no Debian archive in the host's apt sources"
if ! /usr/lib/apt/apt-helper download-file "$url/dists/$dist/Release" "$UROCE_RUNTIME_DIR/Release" \
    >/dev/null 2>&1; then
    skip "the archive ($url) cannot be reached: no $dist root can be made or updated"
fi
# A fresh machine has no root yet: debootstrap makes it (scripts/test-distro.sh), once.
[ -f "$cache/$dist-root/.uroce-root-complete" ] || command -v debootstrap >/dev/null ||
    skip "debootstrap is not installed (scripts/setup.sh): no $dist root can be made"

# The package package.build made (package_build_test.sh; ctest runs it first, as this test's
# fixture), the same file for every DIST.
arch=$(dpkg --print-architecture)
debs=("$debdir"/uroce_*_"$arch".deb)
[ -f "${debs[0]}" ] || fail "no uroce_*_$arch.deb in $debdir: ctest package.build makes it"
deb=${debs[0]}
echo "the package: $deb (Depends: $(dpkg-deb -f "$deb" Depends))"
out=$UROCE_RUNTIME_DIR/host
mkdir -p "$out"
cp "$deb" "$out/"

# One test at a time uses the kept root (another build's ctest may run beside this one): an
# update of it under a throwaway copy's overlay would change what that copy sees.
exec 9>"$cache/$dist-root.lock"
flock 9
# The root: made (debootstrap) when it is not there yet, else brought up to date.
UROCE_DISTRO_PACKAGES="ibverbs-utils rdmacm-utils ucx-utils iproute2" \
    "$src/scripts/test-distro.sh" "$dist" --prepare || fail "scripts/test-distro.sh $dist --prepare"

# What the root runs: the package and the scripts (the helpers of lib.sh, for an installed
# uroce), bound read-only at /mnt/host of a throwaway copy of the root.
cp "$here/package_in_root.sh" "$here/lib.sh" "$here/watchdog.sh" "$out/"
"$src/scripts/test-distro.sh" "$dist" --throwaway "$out" -- \
    "bash package_in_root.sh ${deb##*/}" || fail "in the $dist root (above)"

# docs/ci.md's container recipe, ci/Containerfile (FROM IMAGE: for that release's root only),
# built and run as a container runtime would (containerfile_script.sh), in another throwaway
# copy of the root: the package is its context's.
if [ -n "$image" ]; then
    mkdir -p "$out/context/dist"
    cp "$deb" "$out/context/dist/"
    bash "$here/containerfile_script.sh" "$src/ci/Containerfile" /mnt/host/context "$image" \
        >"$out/containerfile.sh" || fail "ci/Containerfile: not understood"
    "$src/scripts/test-distro.sh" "$dist" --throwaway "$out" -- bash containerfile.sh \
        >"$UROCE_RUNTIME_DIR/container.out" 2>&1
    rc=$?
    grep -v -e '^Get:' -e '^Selecting' -e '^Preparing' -e '^Unpacking' "$UROCE_RUNTIME_DIR/container.out"
    ((rc == 0)) || fail "ci/Containerfile's image exited $rc"
    grep -q 'hca_id:[[:space:]]*uroce0' "$UROCE_RUNTIME_DIR/container.out" ||
        fail "ci/Containerfile's CMD showed no uroce0"
fi
echo PASS
