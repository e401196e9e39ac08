#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The README's two commands on a second system: a minimal root file system of Debian release
# DIST (debootstrap, from the archive the host's own apt sources name), entered as a container
# would be (its own mount and PID namespaces, its root a mount point), a clean clone of this
# checkout's HEAD copied in, then `scripts/demo.sh` and `scripts/test.sh --second-system` there
# with that system's own packages (rdma-core, perftest, UCX, libfabric, pyverbs).
#
# usage: scripts/test-distro.sh DIST                 (root only; e.g. trixie)
#        scripts/test-distro.sh DIST -- 'SHELL COMMAND'  runs that in the prepared root instead
#        scripts/test-distro.sh DIST --prepare   makes the root (or brings it up to date) with a
#                               C compiler and rdma-core's headers in it, and stops there
#                               (UROCE_DISTRO_PACKAGES, if set, names the packages instead)
#        scripts/test-distro.sh DIST --throwaway DIR -- 'SHELL COMMAND'
#                               runs it as root in a throwaway copy of the prepared root (an
#                               overlay: what it installs or writes is gone when it ends), DIR
#                               bound read-only at /mnt/host and the working directory; entered
#                               with pivot_root, so that its users may make user namespaces
#        scripts/test-distro.sh DIST --archive   prints the archive debootstrap would use
#
# The root is made once and kept in $UROCE_DISTRO_CACHE (default /var/cache/uroce/DIST-root).
# It is current when debootstrap finished (the stamp file) and `apt-get upgrade` inside it has
# nothing left to do: every run updates it from the archive before the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
dist=${1:?usage: scripts/test-distro.sh DIST [-- CMD...]}
shift
prepare="" throwaway="" print_archive=""
case ${1:-} in
--) shift ;;
--prepare) prepare=1; shift ;;
--archive) print_archive=1; shift ;;
--throwaway)
    throwaway=$(cd "${2:?--throwaway DIR}" && pwd)
    shift 2
    [ "${1:-}" = -- ] && shift
    [ $# -gt 0 ] || { echo "usage: scripts/test-distro.sh DIST --throwaway DIR -- CMD" >&2; exit 2; }
    ;;
esac
if [ "$(id -u)" != 0 ]; then
    echo "test-distro: SKIP: needs root (debootstrap, mount and PID namespaces)" >&2
    exit 77
fi

cache=${UROCE_DISTRO_CACHE:-/var/cache/uroce}
root=$cache/$dist-root
stamp=$root/.uroce-root-complete

# The host's Debian archive: the first non-security deb source in its apt configuration.
archive() {
    local f url
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # deb822: URIs of stanzas whose Types include deb.
        url=$(awk '/^Types:/ {deb = ($0 ~ /(^|[ \t])deb([ \t]|$)/)}
                   /^URIs:/ && deb {print $2}' "$f" | grep -v security | head -n1)
        [ -n "$url" ] && { echo "$url"; return; }
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        url=$(awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i !~ /^\[/) {print $i; break}}' \
            "$f" | grep -v security | head -n1)
        [ -n "$url" ] && { echo "$url"; return; }
    done
}

# For the scripts below. container_mounts NEW: the file systems a container runtime mounts in
# a new root: /proc of the PID namespace, the host's /sys and /dev, fresh /dev/shm, /run and
# /tmp. enter_root NEW DIR CMD: NEW (a mount point) swapped in as the root with pivot_root
# (not chroot: a chrooted process may make no user namespace, the kernel refuses it, and
# /proc/PID/exe of a process in a mount namespace made there names host paths), then CMD run
# in DIR with a clean environment.
container_mounts='
container_mounts() {
    mount -t proc proc "$1/proc"
    mount --rbind /sys "$1/sys"
    mount --rbind /dev "$1/dev"
    mount -t tmpfs -o mode=1777 tmpfs "$1/dev/shm"
    mount -t tmpfs tmpfs "$1/run"
    mount -t tmpfs -o mode=1777 tmpfs "$1/tmp"
}
enter_root() {
    cd "$1"
    mkdir -p .old-root
    pivot_root . .old-root
    umount -l /.old-root
    rmdir /.old-root
    exec /usr/bin/env -i HOME=/root TERM="${TERM:-dumb}" CI="${CI:-}" \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        /bin/bash -c "cd $2 && $3"
}'

if [ -n "$print_archive" ]; then
    archive
    exit 0
fi

if [ -n "$throwaway" ]; then
    [ -f "$stamp" ] || { echo "test-distro: no $dist root (scripts/test-distro.sh $dist --prepare)" >&2; exit 1; }
    # The overlay's upper layer is a tmpfs of the mount namespace's own: it goes with it.
    # The root is then swapped in with pivot_root (not chroot: the kernel refuses a user
    # namespace to a chrooted process, and `uroce run` as a user needs one).
    top=$(mktemp -d "$cache/$dist-throwaway.XXXXXX")
    trap 'rmdir "$top"' EXIT
    rc=0
    unshare --mount --pid --fork --propagation private -- /bin/bash -c "$container_mounts"'
set -e
root=$1 top=$2 host=$3; shift 3
mount -t tmpfs tmpfs "$top"
mkdir "$top/upper" "$top/work" "$top/new"
mount -t overlay overlay -o "lowerdir=$root,upperdir=$top/upper,workdir=$top/work" "$top/new"
new=$top/new
cp /etc/resolv.conf "$new/etc/resolv.conf" 2>/dev/null || true
# A container runtime writes /etc/hosts; debootstrap makes none, and without it "localhost"
# goes to DNS, which a network namespace cannot reach: seen as Debian 13'"'"'s ucx_perftest (Open
# MPI'"'"'s OFI layer over libfabric) hanging at exit, a libfabric thread left in accept().
[ -e "$new/etc/hosts" ] || printf "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" >"$new/etc/hosts"
container_mounts "$new"
mkdir -p "$new/mnt/host"
mount --bind "$host" "$new/mnt/host"
mount -o remount,bind,ro "$new/mnt/host"
enter_root "$new" /mnt/host "$*"
' test-distro "$root" "$top" "$throwaway" "$*" || rc=$?
    exit $rc
fi

if [ ! -f "$stamp" ]; then
    url=$(archive)
    [ -n "$url" ] || { echo "test-distro: no Debian archive in the host's apt sources" >&2; exit 1; }
    command -v debootstrap >/dev/null || {
        apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
    }
    echo "test-distro: making a $dist root in $root from $url"
    rm -rf "$root"
    mkdir -p "$cache"
    debootstrap --variant=minbase "$dist" "$root" "$url" >"$cache/$dist-debootstrap.log" 2>&1 || {
        tail -n 20 "$cache/$dist-debootstrap.log" >&2
        exit 1
    }
    touch "$stamp"
fi

if [ -n "$prepare" ]; then
    packages=${UROCE_DISTRO_PACKAGES:-gcc libc6-dev libibverbs-dev librdmacm-dev}
    # A bare chroot is enough for apt; what the tests run goes through the namespaces below.
    cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
    chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        /bin/sh -c 'apt-get update -q && apt-get upgrade -y -q &&
            apt-get install -y -q --no-install-recommends $0' "$packages" \
        >"$cache/$dist-prepare.log" 2>&1 || { tail -n 20 "$cache/$dist-prepare.log" >&2; exit 1; }
    echo "test-distro: $root is ready ($(chroot "$root" dpkg-query -W -f='rdma-core ${Version}' libibverbs1))"
    exit 0
fi

# A clean clone of HEAD: what a newcomer's checkout has, nothing from this work tree's builds.
# (A command of one's own runs in the clone already there, with its build, when there is one.)
if [ $# -eq 0 ] || [ ! -d "$root/src/uroce" ]; then
    rm -rf "$root/src"
    mkdir -p "$root/src"
    git clone -q --no-hardlinks "$PWD" "$root/src/uroce"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

if [ $# -gt 0 ]; then
    inner="$*"
else
    # Brought up to date first: the root made on an earlier run is kept only while current.
    # Then, with every package in place, the README's two commands in a network namespace of
    # the root's own (as a container's), its loopback up: no port or address of the host's
    # is shared, whatever else runs there (and a sysfs of that namespace).
    inner="export DEBIAN_FRONTEND=noninteractive; apt-get update -q && apt-get upgrade -y -q \
        && scripts/setup.sh && unshare --net /bin/bash -c 'mount -t sysfs sysfs /sys && ip link set lo up \
        && scripts/demo.sh && scripts/test.sh --second-system'"
fi

# Enter as a container runtime does: a private mount namespace whose root is a mount point
# (a bind mount of the root onto itself, swapped in with pivot_root; a bare chroot's / is not
# one, and mount propagation changes under `uroce run` need one), its own PID namespace and
# /proc, fresh /dev/shm, /run and /tmp. The network is the host's while packages are installed; the tests then run in a
# network namespace of their own.
exec unshare --mount --pid --fork --propagation private -- /bin/bash -c "$container_mounts"'
set -e
root=$1; shift
mount --bind "$root" "$root"
container_mounts "$root"
enter_root "$root" /src/uroce "$*"
' test-distro "$root" "$inner"
