#!/usr/bin/env bash
# The Debian package (docs/packaging.md) on a fresh Debian system: scripts/build-deb.sh builds
# uroce_<version>_<arch>.deb from this tree; its control archive holds no maintainer script,
# trigger or shlibs file (nothing runs ldconfig) and its files no ld.so.conf entry; lintian
# (when installed) reports no error or warning; then, in a
# throwaway copy of the DIST root scripts/test-distro.sh keeps (made or brought up to date
# here, with ibverbs-utils, rdmacm-utils and ucx-utils), `apt-get install ./the.deb` and, as a
# user made there, the programs over it (tests/integration/package_in_root.sh); and the image
# ci/Containerfile describes, built and run there (tests/integration/containerfile_script.sh).
# usage: package_test.sh SRC DIST   (root only; e.g. bookworm)
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
src=${1:?usage: package_test.sh SRC DIST}
dist=${2:?usage: package_test.sh SRC DIST}
[ "$(id -u)" = 0 ] || skip "needs root (debootstrap, mount and PID namespaces)"
for tool in dpkg-deb dpkg-shlibdeps; do need "$tool"; done
cache=${UROCE_DISTRO_CACHE:-/var/cache/uroce}
mkdir -p "$cache"

# The root needs the archive (debootstrap, the package's dependencies): without it, a skip,
# before anything is built (e.g. in a network namespace with only a loopback).
url=$("$src/scripts/test-distro.sh" "$dist" --archive)
[ -n "$url" ] || skip "no Debian archive in the host's apt sources"
if ! /usr/lib/apt/apt-helper download-file "$url/dists/$dist/Release" "$UROCE_RUNTIME_DIR/Release" \
    >/dev/null 2>&1; then
    skip "the archive ($url) cannot be reached: no $dist root can be made or updated"
fi

# The package, built as scripts/build-deb.sh builds it, in a build directory kept beside this
# one (later runs rebuild what changed only), with this build's compiler launcher (ccache).
out=$UROCE_RUNTIME_DIR/host
mkdir -p "$out"
launchers=()
for v in CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER; do
    l=$(sed -n "s/^$v:[A-Z]*=//p" "$UROCE_BUILD/CMakeCache.txt")
    [ -n "$l" ] && launchers+=("-D$v=$l")
done
deb=$("$src/scripts/build-deb.sh" "$out" "$UROCE_BUILD/package-build" "${launchers[@]}" \
    2>"$UROCE_RUNTIME_DIR/build-deb.err" |
    tail -n 1) && [ -f "$deb" ] || fail "scripts/build-deb.sh: $(tail -n 30 "$UROCE_RUNTIME_DIR/build-deb.err")"
echo "built $deb"
dpkg-deb -I "$deb"
dpkg-deb -e "$deb" "$UROCE_RUNTIME_DIR/control"
extra=$(cd "$UROCE_RUNTIME_DIR/control" && ls | grep -v -x -e control -e md5sums)
[ -z "$extra" ] || fail "the control archive holds $extra (maintainer scripts, triggers or shlibs)"
dpkg-deb -c "$deb" | grep -E 'ld\.so\.conf|/etc/' && fail "the package installs files in /etc"
arch=$(dpkg --print-architecture)
[ "$(dpkg-deb -f "$deb" Architecture)" = "$arch" ] || fail "Architecture is not $arch"
grep -q liburing <<<"$(dpkg-deb -f "$deb" Depends)" || fail "Depends does not name liburing"
# Every tag lintian reports is fixed or, with its reason, overridden (docs/packaging.md).
if command -v lintian >/dev/null; then
    tags=$(lintian --fail-on error,warning -I -E --pedantic "$deb" 2>&1) ||
        fail "lintian reports errors or warnings: $tags"
    grep -v 'root privileges' <<<"$tags" || true
    echo "lintian: no error or warning"
else
    echo "note: lintian is not installed (scripts/setup.sh): the package is not checked with it"
fi

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

# docs/ci.md's container recipe, ci/Containerfile, built and run as a container runtime would
# (containerfile_script.sh), in another throwaway copy of the root: the package is its context's.
mkdir -p "$out/context/dist"
cp "$deb" "$out/context/dist/"
bash "$here/containerfile_script.sh" "$src/ci/Containerfile" /mnt/host/context debian:12 \
    >"$out/containerfile.sh" || fail "ci/Containerfile: not understood"
"$src/scripts/test-distro.sh" "$dist" --throwaway "$out" -- bash containerfile.sh \
    >"$UROCE_RUNTIME_DIR/container.out" 2>&1
rc=$?
grep -v -e '^Get:' -e '^Selecting' -e '^Preparing' -e '^Unpacking' "$UROCE_RUNTIME_DIR/container.out"
((rc == 0)) || fail "ci/Containerfile's image exited $rc"
grep -q 'hca_id:[[:space:]]*uroce0' "$UROCE_RUNTIME_DIR/container.out" ||
    fail "ci/Containerfile's CMD showed no uroce0"
echo PASS
