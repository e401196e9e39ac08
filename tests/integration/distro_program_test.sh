#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# A program built on another system, with that system's own rdma-core headers and libraries
# (Debian 13: rdma-core 56), loads uroce's libraries built here and gets the documented answers
# from the verbs added since 44: tests/integration/newer_abi.c compiled and linked (BIND_NOW)
# in the root file system scripts/test-distro.sh keeps, run on this host over uroce.
# usage: distro_program_test.sh DIST RELEASE   (e.g. trixie 56)
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
dist=${1:?usage: distro_program_test.sh DIST RELEASE}
rel=${2:?usage: distro_program_test.sh DIST RELEASE}
root=${UROCE_DISTRO_CACHE:-/var/cache/uroce}/$dist-root
[ "$(id -u)" = 0 ] || skip "needs root (chroot into the $dist root file system)"
[ -f "$root/.uroce-root-complete" ] && [ -r "$root/usr/include/infiniband/verbs.h" ] &&
    [ -x "$root/usr/bin/gcc" ] ||
    skip "no $dist root with rdma-core headers (scripts/test-distro.sh $dist --prepare makes it)"

# Built in the root, with its compiler, headers and libraries: nothing of this host's.
work=$root/tmp/uroce-distro-program.$$
mkdir -p "$work"
trap 'rm -rf "$work"; cleanup' EXIT
cp "$here/newer_abi.c" "$work/"
chroot "$root" /bin/sh -c "cd /tmp/${work##*/} && gcc -std=gnu11 -Wall -Wextra \
    -Wno-unused-parameter -DRELEASE=$rel -o newer_abi newer_abi.c -Wl,--no-as-needed \
    -libverbs -lrdmacm -lmlx5 -lefa -Wl,-z,now" || fail "building newer_abi.c in the $dist root"
chroot "$root" dpkg-query -W -f='built against ${Package} ${Version}\n' libibverbs-dev
LC_ALL=C readelf -d "$work/newer_abi" | grep -q 'FLAGS.*BIND_NOW\|FLAGS_1.*NOW' ||
    fail "the program is not linked with BIND_NOW"
# "file node" for each version the program needs.
LC_ALL=C readelf -V -W "$work/newer_abi" | awk '
    /^Version needs section/ { n = 1; next }
    /^Version (definition|symbols) section/ { n = 0 }
    n && /File:/ { f = $0; sub(/.*File: */, "", f); sub(/ .*/, "", f); next }
    n && /Name:/ { v = $0; sub(/.*Name: */, "", v); sub(/ .*/, "", v); print f, v }' |
    grep -v GLIBC >"$work/needs"
echo "the $dist program needs: $(awk '{ print $2 }' "$work/needs" | tr '\n' ' ')"

# It needs versions this host's rdma-core lacks: the host's own libraries refuse it.
newer=""
while read -r file node; do
    lib=$(ldconfig -p | awk -v l="$file" '$1 == l { print $NF; exit }')
    [ -n "$lib" ] && LC_ALL=C readelf -V -W "$lib" | grep -q "Name: $node\b" || newer="$newer $node"
done <"$work/needs"
[ -n "$newer" ] || fail "the $dist program needs no version this host's rdma-core lacks"
echo "versions this host's rdma-core lacks:$newer"

start_device uroce0 127.0.0.1
out=$(verbs "$work/newer_abi" 2>&1)
rc=$?
echo "$out"
((rc == 0)) || fail "the $dist program exited $rc over uroce's libraries"
echo "$out" | grep -q "^PASS rdma-core $rel program" || fail "no PASS line"
echo PASS
