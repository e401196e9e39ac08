#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Run by package_test.sh as root in a throwaway Debian root, in the directory holding the
# package: records the system's libibverbs and librdmacm, `apt-get install ./DEB`, checks
# they are unchanged (files, ldconfig's cache) and no uroce library is in that cache, makes
# a user and runs as that user (in a network namespace of its own, loopback up):
# `uroce run -- ibv_devinfo`, and ibv_rc_pingpong, rping and ucx_perftest pairs over a device
# the user started, each side under `uroce run`; a program outside `uroce run` still loads
# the system's libibverbs.
# usage: package_in_root.sh DEB        (as root)  |  package_in_root.sh --user (the user's part)
set -u
if [ "${1:-}" != --user ]; then
    deb=${1:?usage: package_in_root.sh DEB}
    fail() { echo "FAIL: $*" >&2; exit 1; }
    # The multiarch directory (x86_64-linux-gnu): libc6's (dpkg-architecture is not installed).
    multiarch=$(dpkg -L libc6 | sed -n 's|^\(/usr\)\?/lib/\([^/]*-linux-[^/]*\)$|\2|p' | head -n 1)
    [ -n "$multiarch" ] || fail "no multiarch directory of libc6's"
    # The system's verbs libraries: files, their checksums, ldconfig's view of them.
    system_libs() {
        ldconfig
        ldconfig -p | tee /tmp/libs.all | grep -E 'lib(ibverbs|rdmacm|mlx5|efa)\.so' | sort
        (cd /usr/lib && find . \( -name 'libibverbs*' -o -name 'librdmacm*' \
            -o -name 'libmlx5*' -o -name 'libefa*' \) -not -type d -not -path '*/uroce/*' | sort |
            while read -r f; do echo "$f $(sha256sum <"$f" | cut -c1-16)"; done)
    }
    system_libs >/tmp/libs.before
    # What the package needs at run time comes with it: apt installs it from its Depends. The
    # libraries, not the packages, are looked for: their packages' names change between
    # releases (Debian 13's libpcap0.8t64 provides libpcap0.8).
    needed='liburing\.so\.2|libpcap\.so\.0\.8'
    grep -E "^[[:space:]]*($needed) " /tmp/libs.all && fail "the root has uroce's libraries before the package"
    grep -q "^[[:space:]]*libibverbs.so.1 .*=> \(/usr\)\?/lib/$multiarch/libibverbs.so.1\$" /tmp/libs.before ||
        fail "no system libibverbs in ldconfig's cache: $(cat /tmp/libs.before)"
    echo "--- apt-get install ./$deb"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "./$deb" \
        >/tmp/apt.out 2>&1 || { cat /tmp/apt.out; fail "apt-get install ./$deb"; }
    grep '^Setting up' /tmp/apt.out
    dpkg-query -W -f='installed ${Package} ${Version} ${Architecture}\n' uroce
    # dpkg configures a package only once its Depends are met; every library its programs
    # and libraries need is then found (the private ones in its own directory).
    [ "$(dpkg-query -W -f='${Status}' uroce)" = "install ok installed" ] || fail "uroce is not configured"
    missing=$(dpkg -L uroce | while read -r f; do
        [ -f "$f" ] && [ ! -L "$f" ] && head -c 4 "$f" | grep -q ELF && ldd "$f" 2>&1 | grep 'not found' | sed "s|^|$f: |"
    done)
    [ -z "$missing" ] || fail "libraries not found after apt-get install: $missing"
    for lib in liburing libpcap; do
        ldconfig -p | grep -E "^[[:space:]]*$lib\.so\.[0-9.]* " || fail "apt brought no $lib"
    done
    system_libs >/tmp/libs.after
    diff /tmp/libs.before /tmp/libs.after || fail "installing uroce changed the system's libraries"
    ldconfig -p | grep uroce && fail "a uroce library is in ldconfig's cache"
    grep -rl uroce /etc/ld.so.conf /etc/ld.so.conf.d 2>/dev/null && fail "an ld.so.conf entry names uroce"
    echo "ldconfig's cache and /usr/lib: the system's verbs libraries, unchanged:"
    grep libibverbs /tmp/libs.after

    useradd -m uroce-user
    cp lib.sh watchdog.sh package_in_root.sh /home/uroce-user/
    chown uroce-user: /home/uroce-user/*
    exec unshare --net /bin/bash -c 'ip link set lo up &&
        exec runuser -u uroce-user -- env HOME=/home/uroce-user MULTIARCH='"$multiarch"' \
            bash /home/uroce-user/package_in_root.sh --user'
fi

# The user's part: lib.sh for an installed uroce (UROCE_PREFIX).
export UROCE_PREFIX=/usr
cd "$HOME"
. ./lib.sh
echo "--- as $(id -un) (uid $(id -u))"
priv=/usr/lib/$MULTIARCH/uroce

# No device running: uroce run starts one, the program loads the package's library, and the
# device is gone when it ends.
out=$(uroce run -- env LD_DEBUG=libs ibv_devinfo 2>&1) || fail "uroce run -- ibv_devinfo: $out"
echo "$out" | grep -v '^ *[0-9]*:'
echo "$out" | grep -q 'hca_id:[[:space:]]*uroce0' || fail "ibv_devinfo shows no uroce0"
echo "$out" | grep -q 'running without the system view' && fail "uroce run had no system view"
loaded=$(echo "$out" | sed -n 's/.*calling init: \(.*libibverbs\.so\.1\)$/\1/p')
[ "$loaded" = "$priv/libibverbs.so.1" ] || fail "ibv_devinfo loaded libibverbs from '$loaded'"
[ -z "$(uroce list)" ] || fail "the device uroce run started is still running"

# Outside uroce run: the system's library.
out=$(env LD_DEBUG=libs UROCE_NO_AUTOSTART=1 ibv_devices 2>&1)
loaded=$(echo "$out" | sed -n 's/.*calling init: \(.*libibverbs\.so\.1\)$/\1/p')
[ "$loaded" = "/lib/$MULTIARCH/libibverbs.so.1" ] || [ "$loaded" = "/usr/lib/$MULTIARCH/libibverbs.so.1" ] ||
    fail "outside uroce run, ibv_devices loaded libibverbs from '$loaded'"
echo "outside uroce run: $loaded; ldd: $(ldd "$(command -v ibv_devices)" | grep libibverbs)"

# Pairs over one device, each side a process of its own under uroce run.
start_device uroce0 127.0.0.1
in_uroce=$UROCE_RUNTIME_DIR/in_uroce
printf '#!/bin/sh\nexec uroce run -- "$@"\n' >"$in_uroce"
chmod +x "$in_uroce"
port=$(tcp_port)

echo "--- ibv_rc_pingpong"
run_pair "$in_uroce" ibv_rc_pingpong -g 0 -p "$port" -- "$in_uroce" ibv_rc_pingpong -g 0 -p "$port" 127.0.0.1
grep -q "iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "ibv_rc_pingpong: no iterations reported"

echo "--- rping"
wait_listener() { cm_listening_on "$port" "$1"; }
PAIR_READY=wait_listener run_pair "$in_uroce" rping -s -a 127.0.0.1 -p "$port" -C 20 -v -- \
    "$in_uroce" rping -c -a 127.0.0.1 -p "$port" -C 20 -v
[ "$(grep -c 'ping data' "$UROCE_RUNTIME_DIR/client.out")" -eq 20 ] || fail "rping: not 20 pings"

echo "--- ucx_perftest (UCX $(ucx_info -v 2>/dev/null | sed -n -e 's/^# Version //p' -e 's/^# Library version: //p'))"
w=$UROCE_RUNTIME_DIR/ucx_perftest
printf '#!/bin/sh\nexec env UCX_NET_DEVICES=uroce0:1 uroce run -- ucx_perftest %s "$@"\n' \
    "$(ucx_perftest_p2p)" >"$w"
chmod +x "$w"
run_pair "$w" -p "$port" -t put_bw -x rc_verbs -d uroce0:1 -n 1000 -s 65536 -D zcopy -- \
    "$w" -p "$port" -t put_bw -x rc_verbs -d uroce0:1 -n 1000 -s 65536 -D zcopy 127.0.0.1
grep '^Final:' "$UROCE_RUNTIME_DIR/client.out" || fail "ucx_perftest: the client printed no Final line"
uroce stop >/dev/null
echo "PASS in the root"
