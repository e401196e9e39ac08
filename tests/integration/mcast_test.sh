#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance for UD multicast (docs/multicast.md): unmodified mckey (rdmacm-utils) joins a
# group with rdma_join_multicast, the receivers' QPs are attached, the sender's datagrams go
# to the group's IPv4 address and every attached QP gets each one; leaving, exiting or dying
# leaves no membership behind, in the devices or in the kernel.
# usage: mcast_test.sh MODE
#   one_device   receiver with 2 QPs (mckey -c 2) and sender, both on one device
#   two_devices  sender on uroce0, receivers on uroce1 (2 QPs) and uroce2 (1 QP)
#   kill         a receiver killed with SIGKILL while joined: the device detaches its QP,
#                leaves the group, and the host's IGMP table no longer lists it
#   api BINARY   mcast_tests (GoogleTest, tests/integration/mcast_tests.cpp) over uroce0
#                (127.0.0.6) and uroce1 (127.0.0.7); afterwards no object is left
#   capture      two devices, a send-only sender (mckey -o, rdma_join_multicast_ex) with a
#                capture: the datagrams decode in tshark with the group as IPv4 destination
#                and BTH destination QP 0xFFFFFF
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: mcast_test.sh MODE}
[ "$mode" = api ] || need mckey
UDP=${UROCE_UDP_PORT:-4791}
COUNT=20
# A group of this test's own (tests run side by side, each on its own UDP port).
GROUP=239.77.$(( (UDP >> 8) & 255 )).$(( UDP & 255 ))
MGID="::ffff:$GROUP"

# The number of QPs device $1 lists as attached to the group (uroce res: "mcast GID ... qps").
attached() {
    "$UROCE" res "$1" 2>/dev/null | awk -v g="$MGID" '$1 == "mcast" && $2 == g { print NF - 5 }' |
        grep . || echo 0
}
# wait_attached DEVICE N: until N QPs of DEVICE are attached (10 s at most).
wait_attached() {
    for _ in $(seq 200); do
        [ "$(attached "$1")" = "$2" ] && return 0
        sleep 0.05
    done
    fail "$1 has $(attached "$1") QPs attached to $GROUP, expected $2"
}
# counter DEVICE KEY: the value after KEY on the device's counters_mcast line.
counter() {
    "$UROCE" counters "$1" | awk -v k="$2" '
        $1 == "counters_mcast" { for (i = 2; i < NF; i++) if ($i == k) print $(i + 1) }'
}
drops() {
    "$UROCE" counters "$1" | awk -v r="$2" '$1 == "drop" && $2 == r { print $3 }'
}
# In the host's IGMP memberships (/proc/net/igmp lists groups as the hex of the address in
# host order); "" when the table cannot be read.
igmp_has_group() {
    [ -r /proc/net/igmp ] || return 2
    local hex
    hex=$(echo "$GROUP" | awk -F. '{ printf "%02X%02X%02X%02X", $4, $3, $2, $1 }')
    grep -q "^[[:space:]]*$hex " /proc/net/igmp
}

# receiver NAME ADDR ARGS...: mckey receiving in the background ($rpids, $UROCE_RUNTIME_DIR/NAME.out).
rpids=()
receiver() {
    local name=$1 addr=$2
    shift 2
    verbs timeout 60 mckey -m "$GROUP" -b "$addr" -C "$COUNT" "$@" >"$UROCE_RUNTIME_DIR/$name.out" 2>&1 &
    rpids+=($!)
}
# The receivers must all exit 0 having received everything.
check_receivers() {
    local rc=0 i=0 name
    for name in "$@"; do
        wait "${rpids[$i]}" || rc=$?
        echo "--- receiver $name (exit $rc)"; cat "$UROCE_RUNTIME_DIR/$name.out"
        [ $rc = 0 ] || fail "receiver $name exited $rc"
        grep -q '^data transfers complete$' "$UROCE_RUNTIME_DIR/$name.out" ||
            fail "receiver $name did not complete its transfers"
        i=$((i + 1))
    done
}
# send ADDR [mckey args...]
send() {
    local addr=$1
    shift
    verbs timeout 60 mckey -m "$GROUP" -b "$addr" -s -C "$COUNT" "$@" >"$UROCE_RUNTIME_DIR/sender.out" 2>&1
    local rc=$?
    echo "--- sender (exit $rc)"; cat "$UROCE_RUNTIME_DIR/sender.out"
    [ $rc = 0 ] || fail "sender exited $rc"
    grep -q "joined dgid: $MGID mlid 0x0" "$UROCE_RUNTIME_DIR/sender.out" ||
        fail "the sender's MULTICAST_JOIN did not carry the group's GID $MGID"
}
# No device keeps a group, and the host is no member any more.
check_no_membership() {
    local d
    sleep 0.2  # the device closes a session when it sees the socket hang up
    for d in "$@"; do
        "$UROCE" res "$d" | grep '^mcast ' && fail "$d still has multicast groups"
    done
    if igmp_has_group; then fail "the host is still a member of $GROUP (/proc/net/igmp)"; fi
    return 0
}

case $mode in
one_device)
    start_device uroce0 127.0.0.1
    receiver recv 127.0.0.1 -c 2
    wait_attached uroce0 2
    igmp_has_group || [ $? = 2 ] || fail "the device joined $GROUP, but the host is no member"
    send 127.0.0.1
    check_receivers recv
    "$UROCE" counters uroce0 | grep -E '^(counters_mcast|drop)'
    # One device: each datagram comes back once (the device's socket for the group) and goes
    # to every attached QP: the receiver's two, and the sender's own while it was attached
    # (it posts no receive: those copies are no_recv drops).
    [ "$(counter uroce0 tx_pkts)" = $COUNT ] || fail "sent $(counter uroce0 tx_pkts), expected $COUNT"
    [ "$(counter uroce0 rx_pkts)" = $COUNT ] || fail "received $(counter uroce0 rx_pkts), expected $COUNT"
    d=$(counter uroce0 deliveries)
    n=$(drops uroce0 no_recv)
    [ $((d - n)) = $((2 * COUNT)) ] ||
        fail "$d copies delivered, $n without a receive: expected $((2 * COUNT)) received"
    check_no_membership uroce0
    ;;
two_devices)
    start_device uroce0 127.0.0.6
    start_device uroce1 127.0.0.7
    start_device uroce2 127.0.0.8
    receiver recv1 127.0.0.7 -c 2
    receiver recv2 127.0.0.8
    wait_attached uroce1 2
    wait_attached uroce2 1
    send 127.0.0.6
    check_receivers recv1 recv2
    "$UROCE" counters | grep -E '^(device|counters_mcast)'
    [ "$(counter uroce0 tx_pkts)" = $COUNT ] || fail "uroce0 sent $(counter uroce0 tx_pkts)"
    for d in uroce1 uroce2; do
        [ "$(counter $d rx_pkts)" = $COUNT ] || fail "$d received $(counter $d rx_pkts), expected $COUNT"
        [ "$(counter $d tx_pkts)" = 0 ] || fail "$d sent to the group"
    done
    [ "$(counter uroce1 deliveries)" = $((2 * COUNT)) ] || fail "uroce1 delivered $(counter uroce1 deliveries)"
    [ "$(counter uroce2 deliveries)" = $COUNT ] || fail "uroce2 delivered $(counter uroce2 deliveries)"
    check_no_membership uroce0 uroce1 uroce2
    ;;
kill)
    start_device uroce0 127.0.0.6
    COUNT=10000 receiver recv 127.0.0.6 -c 3
    wait_attached uroce0 3
    igmp_has_group || [ $? = 2 ] || fail "the device joined $GROUP, but the host is no member"
    # The receiver's pid, as the device knows it ("session ID pid PID ...").
    victim=$("$UROCE" res uroce0 | awk '$1 == "session" { print $4; exit }')
    [ -n "$victim" ] || fail "no session on uroce0"
    kill -KILL "$victim"
    wait "${rpids[0]}" 2>/dev/null
    check_no_membership uroce0
    res=$("$UROCE" res uroce0)
    echo "$res" | grep '^counts '
    echo "$res" | grep -q '^counts sessions 0 ' || fail "the killed process's session remains"
    ;;
api)
    gtests_on_two_devices "${2:?usage: mcast_test.sh api BINARY}" 127.0.0.6 127.0.0.7
    check_no_membership uroce0 uroce1
    ;;
capture)
    need tshark
    pcap=$UROCE_RUNTIME_DIR/mcast.pcap
    start_device uroce0 127.0.0.6 --pcap "$pcap"
    start_device uroce1 127.0.0.7
    receiver recv 127.0.0.7
    wait_attached uroce1 1
    # A send-only member (rdma_join_multicast_ex): its QP is not attached, so uroce0 is no
    # member and its capture holds exactly what it sent.
    send 127.0.0.6 -o
    check_receivers recv
    [ "$(counter uroce0 rx_pkts)" = 0 ] || fail "the send-only sender's device received from the group"
    "$UROCE" capture stop uroce0 >/dev/null || fail "uroce capture stop"
    ts() { tshark -n -r "$pcap" -d "udp.port==$UDP,infiniband" "$@" 2>/dev/null; }
    total=$(ts -T fields -e frame.number | wc -l)
    bad=$(ts -Y '_ws.malformed || _ws.expert.severity >= error' -T fields -e frame.number | wc -l)
    [ "$bad" = 0 ] || { ts -Y '_ws.malformed || _ws.expert.severity >= error' -V | head -60; fail "$bad malformed frames"; }
    # Every datagram the sender sent to the group: UD SEND with immediate (mckey), to the
    # group's address, DETH Q_Key RDMA_UDP_QKEY, BTH destination QP 0xFFFFFF, ICRC present.
    mc=$(ts -Y "ip.dst == $GROUP && ip.src == 127.0.0.6 && udp.dstport == $UDP" \
            -T fields -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.deth.q_key \
            -e infiniband.invariant.crc)
    echo "$mc" | head -3
    n=$(echo "$mc" | grep -c . || true)
    [ "$n" = $COUNT ] || fail "$n datagrams to $GROUP in the capture, expected $COUNT (of $total frames)"
    good=$(echo "$mc" | awk -F'\t' '$1 == 101 && $2 == "0xffffff" && $3 ~ /^0x0*1234567$/ && $4 != ""' | wc -l)
    [ "$good" = $COUNT ] || fail "$good of $COUNT datagrams are UD SEND_ONLY_IMM to QP 0xFFFFFF with Q_Key 0x01234567"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
echo PASS
