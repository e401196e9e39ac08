#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The Debian package (docs/packaging.md), built once for the tests that install it
# (package.debian12, package.debian13: ctest fixture uroce_deb): scripts/build-deb.sh builds
# uroce_<version>_<arch>.deb from this tree into OUT_DIR; its control archive holds no
# maintainer script, trigger or shlibs file (nothing runs ldconfig) and its files no
# ld.so.conf entry; its copyright names the licence; lintian (when installed) reports no
# error or warning.
# usage: package_build_test.sh SRC OUT_DIR   (root only, as the tests that use the package)
. "$(dirname "$0")/lib.sh"
src=${1:?usage: package_build_test.sh SRC OUT_DIR}
out=${2:?usage: package_build_test.sh SRC OUT_DIR}
# The package is built only for the tests that install it into a root file system: they need
# root, so without root nothing is built (five minutes of a user's run for nothing).
[ "$(id -u)" = 0 ] || skip "needs root (the package tests install it into a Debian root)"
for tool in dpkg-deb dpkg-shlibdeps; do need "$tool"; done

# Built as scripts/build-deb.sh builds it, in a build directory kept beside this one (later
# runs rebuild what changed only), with this build's compiler launcher (ccache). A package
# left by an earlier run goes first: a failed build leaves none for the tests to take.
rm -rf "$out"
mkdir -p "$out"
launchers=()
for v in CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER; do
    l=$(sed -n "s/^$v:[A-Z]*=//p" "$UROCE_BUILD/CMakeCache.txt")
    [ -n "$l" ] && launchers+=("-D$v=$l")
done
deb=$("$src/scripts/build-deb.sh" "$UROCE_RUNTIME_DIR/deb" "$UROCE_BUILD/package-build" "${launchers[@]}" \
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
# The copyright file names the licence of LICENSE (GPL-2.0-only OR BSD-2-Clause, in DEP-5's names).
dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/doc/uroce/copyright >"$UROCE_RUNTIME_DIR/copyright" ||
    fail "the package has no usr/share/doc/uroce/copyright"
grep -qx 'License: GPL-2 or BSD-2-clause' "$UROCE_RUNTIME_DIR/copyright" ||
    fail "the copyright file does not name uroce's licence"
# Every tag lintian reports is fixed or, with its reason, overridden (docs/packaging.md).
if command -v lintian >/dev/null; then
    tags=$(lintian --fail-on error,warning -I -E --pedantic "$deb" 2>&1) ||
        fail "lintian reports errors or warnings: $tags"
    grep -v 'root privileges' <<<"$tags" || true
    echo "lintian: no error or warning"
else
    echo "note: lintian is not installed (scripts/setup.sh): the package is not checked with it"
fi
# Handed to the tests only once every check passed.
mv "$deb" "$out/"
echo "PASS: $out/${deb##*/}"
