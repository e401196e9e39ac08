#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance between two hosts (twohost_lib.sh: two network namespaces joined by a 1500-byte
# veth pair, one device on each): unmodified Debian programs, the server on host A
# (10.77.0.1), the client on host B. The link's MTU makes the ports' active MTU 1024
# (docs/behaviour.md, "Port MTU"), so every run below also checks that what the programs and
# the CM take from the port fits the link: a 4096-byte packet would not arrive.
# usage: twohost_test.sh MODE
#   devinfo      ibv_devinfo -v on host A: active_mtu 1024, max_mtu 4096, GID ::ffff:10.77.0.1
#   rc_pingpong  ibv_rc_pingpong (4096-byte messages, -m 1024) and -s 65536
#   ud_pingpong  ibv_ud_pingpong -s 2048 is refused against the port MTU (as on hardware
#                with a 1024 MTU); without -s it exchanges 1024-byte messages
#   rping        rping -S 4000 -C 100 -V: RDMA READ/WRITE of four packets at the CM's MTU
#   write_bw     ib_write_bw (perftest's TCP setup; 64 KiB messages at the port's MTU); the
#                packets crossed the link as UDP GSO trains and arrived as GRO trains
#   write_bw_swgso  the same with the link's transmit checksum offload off: the kernel cuts
#                the trains into datagrams before the link, so host A receives each packet
#                on its own and checks ICRCs made for IPv4 IDs it cannot see (nothing dropped)
#   fi ENDPOINT  libfabric's fi_pingpong (libfabric-bin, unmodified) at its default sizes,
#                the server given no address: msg (-p verbs), rdm (-p "verbs;ofi_rxm"),
#                dgram (-p verbs; sizes up to the path MTU)
#   rstream      rstream -T v (data checked) at 64 KiB and 1 MB transfers; riostream -T v
#                (riomap/riowrite) at 64 KiB: rsockets across the link (docs/rsockets.md)
#   ucx TEST     ucx_perftest -t TEST (tag_bw, tag_lat) under `uroce run` on each host,
#                UCX_TLS=rc_verbs,ud_verbs,self and no workaround variable
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/twohost_lib.sh"
mode=${1:?usage: twohost_test.sh MODE}
PORT=$(tcp_port)

expect() {  # expect FILE REGEX WHAT
    grep -Eq "$2" "$1" || fail "$3 (no /$2/ in $(basename "$1"))"
}

# sent_by HOST: the host's device sent packets (the programs did talk across the link).
sent_by() {
    local n pre
    if [ "$1" = A ]; then pre=("${HOST_A[@]}"); else pre=("${HOST_B[@]}"); fi
    n=$("${pre[@]}" "$UROCE" counters uroce0 | awk '$1 == "counters" { print $3; exit }')
    echo "host $1 uroce0 sent ${n:-0} packets"
    [ "${n:-0}" -gt 0 ] || fail "host $1's device sent nothing"
}

# offload HOST NAME: a field of the host's counters_offload line (lib.sh, offload_field).
offload() {
    local pre
    if [ "$1" = A ]; then pre=("${HOST_A[@]}"); else pre=("${HOST_B[@]}"); fi
    "${pre[@]}" "$UROCE" counters uroce0 | offload_field "$2"
}

twohost_setup
c=$UROCE_RUNTIME_DIR/client.out
s=$UROCE_RUNTIME_DIR/server.out

case $mode in
devinfo)
    need ibv_devinfo
    out=$(on_host A ibv_devinfo -v) || fail "ibv_devinfo exited $?"
    echo "$out"
    echo "$out" | grep -q 'max_mtu:[[:space:]]*4096 (5)' || fail "max_mtu is not 4096"
    echo "$out" | grep -q 'active_mtu:[[:space:]]*1024 (3)' || fail "active_mtu is not 1024"
    echo "$out" | grep -q 'GID\[  0\]:[[:space:]]*::ffff:10.77.0.1, RoCE v2' ||
        fail "GID[0] is not ::ffff:10.77.0.1 RoCE v2"
    ;;
rc_pingpong)
    need ibv_rc_pingpong
    PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ibv_rc_pingpong -g 0 -p "$PORT" -- \
        "${HOST_B[@]}" ibv_rc_pingpong -g 0 -p "$PORT" "$ADDR_A"
    expect "$c" "iters in" "client did not report its iterations"
    PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ibv_rc_pingpong -g 0 -p "$PORT" -s 65536 -n 200 -- \
        "${HOST_B[@]}" ibv_rc_pingpong -g 0 -p "$PORT" -s 65536 -n 200 "$ADDR_A"
    expect "$c" "iters in" "client did not report its iterations (-s 65536)"
    sent_by A
    sent_by B
    ;;
ud_pingpong)
    need ibv_ud_pingpong
    # 2048 bytes are more than the port's MTU: the program refuses them itself, as on
    # hardware with a 1024 MTU.
    on_host A timeout 30 ibv_ud_pingpong -g 0 -p "$PORT" -s 2048 >"$s" 2>&1 &&
        fail "2048 bytes were accepted"
    cat "$s"
    expect "$s" 'Requested size larger than port MTU \(1024\)' "no refusal against the port MTU"
    # Without -s, Debian's ibv_ud_pingpong (whose help says 2048) sends the port's MTU.
    PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ibv_ud_pingpong -g 0 -p "$PORT" -n 500 -- \
        "${HOST_B[@]}" ibv_ud_pingpong -g 0 -p "$PORT" -n 500 "$ADDR_A"
    expect "$c" "^1024000 bytes in" "the client did not exchange 500 x 2 messages of 1024 bytes"
    sent_by A
    sent_by B
    ;;
rping)
    need rping
    PAIR_READY=cm_listening run_pair "${HOST_A[@]}" rping -s -a "$ADDR_A" -p "$PORT" -S 4000 -v -- \
        "${HOST_B[@]}" rping -c -a "$ADDR_A" -p "$PORT" -S 4000 -C 100 -v -V
    expect "$c" 'rdma-ping-99: ' "the last ping is missing"
    expect "$s" 'rdma-ping-99: ' "the server did not see ping 99"
    sent_by A
    sent_by B
    ;;
write_bw | write_bw_swgso)
    need ib_write_bw
    if [ $mode = write_bw_swgso ]; then
        command -v ethtool >/dev/null 2>&1 || skip "ethtool is not installed (run scripts/setup.sh)"
        for ns in "$NS_A" "$NS_B"; do
            ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null || fail "ethtool -K eth0 tx off"
        done
    fi
    PAIR_TIMEOUT=60 PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ib_write_bw -p "$PORT" -n 1000 -- \
        "${HOST_B[@]}" ib_write_bw -p "$PORT" -n 1000 "$ADDR_A"
    check_perftest_results ib_write_bw "$c"
    expect "$c" 'Mtu +: 1024\[B\]' "perftest did not take the port's MTU"
    sent_by A
    sent_by B
    for h in A B; do
        echo "host $h: gso $(offload $h gso), gro $(offload $h gro), tx_trains $(offload $h tx_trains), rx_trains $(offload $h rx_trains)"
    done
    if [ "$(offload B gso)" = "off (ENOPROTOOPT)" ]; then
        echo "note: this kernel has no UDP GSO/GRO: trains not checked"
    elif [ $mode = write_bw ]; then
        # The client's WRITEs went as trains and arrived as trains.
        [ "$(offload B gso)" = on ] && [ "$(offload A gro)" = on ] || fail "GSO/GRO not on"
        [ "$(offload B tx_trains)" -gt 0 ] || fail "host B sent no GSO train"
        [ "$(offload A rx_trains)" -gt 0 ] || fail "host A received no GRO train"
    else
        [ "$(offload B tx_trains)" -gt 0 ] || fail "host B sent no GSO train"
        [ "$(offload A rx_trains)" = 0 ] || fail "host A received trains: the link did not cut them"
        bad=$("${HOST_A[@]}" "$UROCE" counters uroce0 | awk '$1 == "drop" && $2 == "bad_icrc" { print $3 }')
        [ "$bad" = 0 ] || fail "host A dropped $bad packets for their ICRC"
    fi
    ;;
rstream)
    need rstream
    need riostream
    for size in 65536 1000000; do
        PAIR_READY=cm_listening run_pair "${HOST_A[@]}" rstream -p "$PORT" -S "$size" -C 200 -T v -- \
            "${HOST_B[@]}" rstream -s "$ADDR_A" -p "$PORT" -S "$size" -C 200 -T v
        expect "$c" '^custom ' "rstream -S $size printed no result"
    done
    PAIR_READY=cm_listening run_pair "${HOST_A[@]}" riostream -p "$PORT" -S 65536 -C 200 -T v -- \
        "${HOST_B[@]}" riostream -s "$ADDR_A" -p "$PORT" -S 65536 -C 200 -T v
    expect "$c" '^custom ' "riostream printed no result"
    sent_by A
    sent_by B
    ;;
fi)
    need fi_pingpong
    ep=${2:?usage: twohost_test.sh fi msg|rdm|dgram}
    prov=verbs
    [ "$ep" = rdm ] && prov="verbs;ofi_rxm"
    # The server binds nothing itself: libfabric's verbs provider finds the device from the
    # host's interfaces and listens there (docs/rdmacm-support.md, loopback and wildcards).
    PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" fi_pingpong -p "$prov" -e "$ep" -B "$PORT" -- \
        "${HOST_B[@]}" fi_pingpong -p "$prov" -e "$ep" -P "$PORT" "$ADDR_A"
    # The results table: one row per size, the last at the largest size the endpoint takes.
    rows=$(grep -cE '^[0-9]+[kmg]? +[0-9]+ +=[0-9]+ ' "$c" || true)
    echo "fi_pingpong -e $ep: $rows sizes"
    [ "$rows" -gt 0 ] || fail "fi_pingpong printed no results"
    if [ "$ep" = dgram ]; then
        # Default sizes stop at the path MTU (1024 on this link): nothing larger was tried.
        grep -qE '^1k ' "$c" || fail "no 1 KiB datagrams"
        ! grep -qE '^(2k|4k|[0-9]+m) ' "$c" || fail "datagrams above the path MTU were tried"
    else
        grep -qE '^1m ' "$c" || fail "no 1 MiB messages"
    fi
    sent_by A
    sent_by B
    ;;
ucx)
    need ucx_perftest
    test=${2:?usage: twohost_test.sh ucx TEST}
    # A wrapper: run_pair splits at the first "--", and `uroce run` takes one of its own.
    w=$UROCE_RUNTIME_DIR/ucx_perftest
    printf '#!/bin/sh\nexec env UCX_TLS=rc_verbs,ud_verbs,self "%s" run -- ucx_perftest %s "$@"\n' \
        "$UROCE" "$(ucx_perftest_p2p)" >"$w"
    chmod +x "$w"
    PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" "$w" -p "$PORT" -t "$test" -n 1000 -- \
        "${HOST_B[@]}" "$w" -p "$PORT" -t "$test" -n 1000 "$ADDR_A"
    grep '^Final:' "$c" || fail "the client printed no Final line"
    sent_by A
    sent_by B
    ;;
*) fail "unknown mode $mode" ;;
esac
echo PASS
