#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance (docs/behaviour.md, "When the device goes away"): SIGKILL of the device under a
# running pair of unmodified programs makes both sides exit, with an error, within 2 s; then
# a device started again under the same name serves a new ibv_rc_pingpong pair.
#   usage: device_death_test.sh [CASE...]    (default: all four)
# rc_pingpong: ibv_rc_pingpong -n 100000000, busy-polling its CQ: a flush completion ends it.
# rc_pingpong_events: the same with -e, blocked in ibv_get_cq_event: the CQ's event comes,
#              then the flush completion.
# write_bw:    ib_write_bw -D 30 (duration mode): the client's flush completion ends it, and
#              the server, which waits for the client over TCP, follows.
# rping:       rping -C 100000000: librdmacm's RDMA_CM_EVENT_DEVICE_REMOVAL (or, first, EIO
#              from a verb) ends both.
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong

dev=uroce0
addr=127.0.0.1
port=$(tcp_port)
start_device $dev $addr

device_pid() {
    sed -n 's/^pid=//p' "$UROCE_RUNTIME_DIR/$dev.info"
}

# Both programs must be running when the device is killed.
expect_running() {
    local p
    for p in "$@"; do
        kill -0 "$p" 2>/dev/null || fail "a program ended before the device was killed"
    done
}

# kill_device_expect_exit NAME PID...: SIGKILL the device; each PID (a `timeout` wrapping a
# program: its status is the program's) must exit within 2 s, with a status that is neither
# 0 nor timeout's 124.
kill_device_expect_exit() {
    local name=$1 p rc
    shift
    local dpid
    dpid=$(device_pid)
    [ -n "$dpid" ] || fail "no pid in $dev.info"
    local t0=$EPOCHREALTIME
    kill -9 "$dpid"
    local deadline
    deadline=$(awk -v t="$t0" 'BEGIN { printf "%.6f", t + 2 }')
    for p in "$@"; do
        while kill -0 "$p" 2>/dev/null &&
            awk -v now="$EPOCHREALTIME" -v d="$deadline" 'BEGIN { exit !(now < d) }'; do
            sleep 0.02
        done
    done
    local elapsed
    elapsed=$(awk -v t="$t0" -v now="$EPOCHREALTIME" 'BEGIN { printf "%.3f", now - t }')
    for p in "$@"; do
        if kill -0 "$p" 2>/dev/null; then
            kill "$p" 2>/dev/null
            wait "$p"
            show_outputs
            fail "$name: pid $p still running 2 s after the device was killed"
        fi
        wait "$p"
        rc=$?
        echo "$name: pid $p exited with status $rc (all gone $elapsed s after the kill)"
        [ "$rc" != 0 ] || { show_outputs; fail "$name: pid $p exited 0 after its device died"; }
        [ "$rc" != 124 ] || { show_outputs; fail "$name: pid $p ran into its timeout"; }
    done
    show_outputs
}

show_outputs() {
    echo "--- server"; cat "$UROCE_RUNTIME_DIR/server.out"
    echo "--- client"; cat "$UROCE_RUNTIME_DIR/client.out"
}

case_rc_pingpong() {
    port=$((port + 1))
    verbs timeout 60 ibv_rc_pingpong -g 0 -p "$port" -n 100000000 "$@" \
        >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
    local spid=$!
    sleep 0.5
    verbs timeout 60 ibv_rc_pingpong -g 0 -p "$port" -n 100000000 "$@" $addr \
        >"$UROCE_RUNTIME_DIR/client.out" 2>&1 &
    local cpid=$!
    sleep 1.5
    expect_running $spid $cpid
    kill_device_expect_exit "rc_pingpong${*:+ $*}" $spid $cpid
    grep -q "Failed status" "$UROCE_RUNTIME_DIR/server.out" "$UROCE_RUNTIME_DIR/client.out" ||
        fail "no side reported a failed completion"
}

case_rc_pingpong_events() {
    case_rc_pingpong -e
}

case_write_bw() {
    need ib_write_bw
    port=$((port + 1))
    verbs timeout 60 ib_write_bw -p "$port" -D 30 >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
    local spid=$!
    for _ in $(seq 100); do
        ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
        kill -0 $spid 2>/dev/null || break
        sleep 0.1
    done
    verbs timeout 60 ib_write_bw -p "$port" -D 30 $addr >"$UROCE_RUNTIME_DIR/client.out" 2>&1 &
    local cpid=$!
    sleep 3  # connected, and past the warm-up into the measured duration
    expect_running $spid $cpid
    kill_device_expect_exit write_bw $spid $cpid
}

# rping (librdmacm): RDMA_CM_EVENT_DEVICE_REMOVAL reaches both sides' CM threads, which exit.
case_rping() {
    need rping
    port=$((port + 1))
    verbs timeout 60 rping -s -a $addr -p "$port" -C 100000000 >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
    local spid=$!
    for _ in $(seq 100); do
        "$UROCE" res 2>/dev/null | grep -Eq "^cm_id .* state listen .*:$port remote" && break
        kill -0 $spid 2>/dev/null || break
        sleep 0.1
    done
    verbs timeout 60 rping -c -a $addr -p "$port" -C 100000000 >"$UROCE_RUNTIME_DIR/client.out" 2>&1 &
    local cpid=$!
    sleep 1.5
    expect_running $spid $cpid
    kill_device_expect_exit rping $spid $cpid
    # Each side's CM thread gets DEVICE_REMOVAL; its main thread's next verb fails with EIO at
    # the same time, and which of the two ends the process first is the scheduler's choice,
    # with the kernel's devices as here (rping 56's client often stops at the failed send).
    # At least one side must have read the event; the other read it or failed with EIO.
    local side saw=0
    for side in server client; do
        if grep -q "cma detected device removal" "$UROCE_RUNTIME_DIR/$side.out"; then
            saw=$((saw + 1))
        elif ! grep -Eq "(post send|post recv|send|recv) error 5|error -5|status 5" \
            "$UROCE_RUNTIME_DIR/$side.out"; then
            fail "the rping $side got no RDMA_CM_EVENT_DEVICE_REMOVAL and no EIO"
        fi
    done
    ((saw > 0)) || fail "neither rping side got RDMA_CM_EVENT_DEVICE_REMOVAL"
}

cases=("$@")
[ ${#cases[@]} -gt 0 ] || cases=(rc_pingpong rc_pingpong_events write_bw rping)
for c in "${cases[@]}"; do
    echo "=== $c"
    "case_$c"
    # A device started again under the same name serves a new pair.
    start_device $dev $addr
    port=$((port + 1))
    PAIR_TIMEOUT=60 run_pair ibv_rc_pingpong -g 0 -p "$port" -- \
        ibv_rc_pingpong -g 0 -p "$port" $addr
done
echo PASS
