#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Builds the Debian package uroce_<version>_<arch>.deb into OUT_DIR (docs/packaging.md): a
# build directory of its own configured as Debian's tools configure a CMake package (prefix
# /usr, the compiler and linker flags of dpkg-buildflags, CMAKE_BUILD_TYPE=None, no tests),
# then CPack's DEB generator (packaging/deb.cmake). Prints the package's path.
# usage: scripts/build-deb.sh OUT_DIR [BUILD_DIR] [cmake options...]
#   BUILD_DIR defaults to build-deb in the source tree.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/build-deb.sh OUT_DIR [BUILD_DIR] [cmake options...]}
build=${2:-$src/build-deb}
shift $(($# >= 2 ? 2 : 1))
for tool in dpkg-buildflags dpkg-shlibdeps dpkg-deb; do
    command -v "$tool" >/dev/null || { echo "build-deb: $tool is missing (apt-get install dpkg-dev)" >&2; exit 1; }
done
mkdir -p "$out" "$build"
out=$(cd "$out" && pwd)
build=$(cd "$build" && pwd)

# Hardening and optimisation as Debian builds: CFLAGS, CXXFLAGS, CPPFLAGS, LDFLAGS.
# From the source tree, as dpkg-buildpackage runs it: its -ffile-prefix-map names that tree
# (and the flags are the same wherever this script is started, so ccache's results are reused).
eval "$(cd "$src" && DEB_BUILD_MAINT_OPTIONS=hardening=+all dpkg-buildflags --export=sh)"
export CFLAGS="$CFLAGS $CPPFLAGS" CXXFLAGS="$CXXFLAGS $CPPFLAGS"
# Dates in the package (the changelog's) are the last commit's: a rebuild gives the same files.
if [ -z "${SOURCE_DATE_EPOCH:-}" ] && git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    SOURCE_DATE_EPOCH=$(git -C "$src" log -1 --format=%ct)
    export SOURCE_DATE_EPOCH
fi

cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=None -DCMAKE_INSTALL_PREFIX=/usr \
    -DUROCE_TESTS=OFF -DCMAKE_STRIP="$src/packaging/strip.sh" "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
(cd "$build" && cpack -G DEB -B "$out" >"$build/cpack.log" 2>&1) || {
    cat "$build/cpack.log" >&2
    exit 1
}
rm -rf "$out/_CPack_Packages"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
deb=$out/uroce_${version}_$(dpkg --print-architecture).deb
[ -f "$deb" ] || { echo "build-deb: cpack made no $deb" >&2; cat "$build/cpack.log" >&2; exit 1; }
echo "$deb"
