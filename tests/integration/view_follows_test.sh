#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce run`'s view follows the devices (docs/system-view.md, "Devices that come and go"):
# a device started in another shell after `uroce run` began appears in its
# /sys/class/infiniband, /dev/infiniband and ibv_devices, an ibv_rc_pingpong pair uses it
# by name (-d), and once it is stopped it is gone from all three; the view keeps CMD's exit
# status. As the caller (root: a mount namespace) and, run as root, as an unprivileged user
# (a user namespace).
# usage: view_follows_test.sh
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
need ibv_devices

# follows WHO RUNDIR AS...: the check, with commands run as AS... (a prefix) in RUNDIR.
follows() {
    local who=$1 dir=$2
    shift 2
    local as=("$@") port
    port=$(tcp_port)
    "${as[@]}" env UROCE_RUNTIME_DIR="$dir" "$UROCE" start --name uroce0 --addr 127.0.0.1 \
        >/dev/null || fail "$who: uroce start uroce0"
    # CMD: waits for uroce5 in the view, uses it, asks for it to stop, waits for it to go.
    # shellcheck disable=SC2016
    "${as[@]}" env UROCE_RUNTIME_DIR="$dir" "${VERBS_ENV[@]:1}" timeout 120 "$UROCE" run -- bash -c '
        dir=$1 port=$2
        seen() { [ -e /sys/class/infiniband/uroce5 ] && [ -e /dev/infiniband/uverbs5 ]; }
        for _ in $(seq 1 200); do seen && break; sleep 0.05; done
        seen || { echo "uroce5 never appeared in the view"; exit 1; }
        grep -qx uroce5 /sys/class/infiniband_verbs/uverbs5/ibdev || exit 1
        ibv_devices | grep -q uroce5 || { echo "ibv_devices does not list uroce5"; exit 1; }
        ibv_rc_pingpong -d uroce5 -g 0 -p "$port" -n 20 >"$dir/follow-server.out" 2>&1 &
        server=$!
        sleep 0.5
        ibv_rc_pingpong -d uroce5 -g 0 -p "$port" -n 20 127.0.0.5 >"$dir/follow-client.out" 2>&1 ||
            { cat "$dir/follow-client.out"; exit 1; }
        wait $server || { cat "$dir/follow-server.out"; exit 1; }
        grep -q "20 iters" "$dir/follow-client.out" || exit 1
        touch "$dir/follow-stop"
        for _ in $(seq 1 200); do seen || break; sleep 0.05; done
        seen && { echo "uroce5 stayed in the view after it stopped"; exit 1; }
        ibv_devices | grep -q uroce5 && { echo "ibv_devices still lists uroce5"; exit 1; }
        [ -e /sys/class/infiniband/uroce0 ] || { echo "uroce0 left the view"; exit 1; }
        exit 7' _ "$dir" "$port" >"$UROCE_RUNTIME_DIR/follow.out" 2>&1 &
    local cmd=$!
    sleep 0.3
    "${as[@]}" env UROCE_RUNTIME_DIR="$dir" "$UROCE" start --name uroce5 --addr 127.0.0.5 \
        >/dev/null || fail "$who: uroce start uroce5"
    for _ in $(seq 1 600); do
        [ -e "$dir/follow-stop" ] && break
        kill -0 $cmd 2>/dev/null || break
        sleep 0.1
    done
    "${as[@]}" env UROCE_RUNTIME_DIR="$dir" "$UROCE" stop uroce5 >/dev/null
    wait $cmd
    local rc=$?
    cat "$UROCE_RUNTIME_DIR/follow.out"
    grep -q 'without the system view' "$UROCE_RUNTIME_DIR/follow.out" && fail "$who: no view"
    [ $rc = 7 ] || fail "$who: the command exited $rc (7 when every check passed)"
    "${as[@]}" env UROCE_RUNTIME_DIR="$dir" "$UROCE" stop >/dev/null
    echo "$who: uroce5 came into the view, carried a pingpong by name, and left it"
}

follows "$(id -un)" "$UROCE_RUNTIME_DIR"

unprivileged_part
follows nobody "$NB_DIR" "${AS_NOBODY[@]}"
echo PASS
