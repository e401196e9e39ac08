#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# RoCEv2 over IPv6 between two hosts (issue 27): twohost_lib.sh with TWOHOST_IPV6=1, each
# device on its host's IPv6 address (fd77::1, fd77::2), GID index 0 that address. Unmodified
# Debian programs; their own TCP exchange goes over the hosts' IPv4 addresses (their servers
# bind the IPv4 wildcard first), the RDMA traffic over IPv6 only: a tshark tap on host A's
# end of the veth must see every RoCEv2 packet over IPv6, none over IPv4, decode each as
# InfiniBand, and the ICRC of each is recomputed (tests/unit/icrc_scapy_check.py).
# usage: ipv6_test.sh MODE
#   devinfo      ibv_devinfo -v: GID[0] fd77::1, RoCE v2; ibv_devices; uroce res
#   rc_pingpong  ibv_rc_pingpong -g 0 (4096 and 65536-byte messages), captured and checked
#   write_bw     ib_write_bw -x 0, 64 KiB messages (GSO trains over IPv6), captured and checked
#   xsrq         ibv_xsrq_pingpong -g 0: XRC INI/TGT QPs and an XRC SRQ over IPv6
#   ud_pingpong  ibv_ud_pingpong -g 0 (the port MTU's 1024-byte messages): UD address handles
#                with IPv6 destinations, the receiver's reply AH from the IPv6 header in the
#                GRH area (ibv_create_ah_from_wc), captured and checked
#   ucx          ucx_perftest -t tag_bw under `uroce run` on each host (UCX_TLS=rc_verbs,
#                ud_verbs,self): UCX picks the IPv6 GID itself; RC and UD over IPv6 only
#   ifname       host A's device started with --addr eth0: every address eth0 has (its link-local
#                one, 10.77.0.1, fd77::1) in rxe's order (ibv_devinfo -v); ibv_rc_pingpong -g 2
#                from host B's fd77::2 against it
#   multi        host A's device with three addresses, given as fd77::1,10.77.0.1,fd77::11:
#                ibv_query_gid_table (pyverbs) lists ::ffff:10.77.0.1, fd77::1, fd77::11 (rxe's
#                order: IPv4 before IPv6), each RoCE v2 on eth0; host B has a device on its
#                IPv4 address and one on its IPv6 address, and two ibv_rc_pingpong pairs run
#                against host A's device at once, one over each version
#   rping        rping -s -a fd77::1 / rping -c -a fd77::1 -C 100 -V through librdmacm: the CM
#                MADs (REQ with the RDMA CM header of IP version 6, REP, RTU, DREQ, DREP) and
#                the data over IPv6, captured and checked; uroce res names the listener's
#                IPv6 address
#   ucmatose     ucmatose -b fd77::1 / -s fd77::1 -t 32, 4 connections of 20 messages each,
#                captured and checked, every packet with traffic class 0x20 (the client's TOS)
#   rstream      rstream -b fd77::1 / -s fd77::1 -T v and riostream (riomap/riowrite): rsockets
#                over IPv6 (rsocket(AF_INET6)), captured and checked
#   wildcard     ucmatose -b ::0 on host A with a second device on 10.77.0.1: the IPv6
#                wildcard listens on both (IPV6_V6ONLY off, as the kernel's), a client over
#                IPv6 and one over IPv4 connect; with net.ipv6.bindv6only=1 the IPv4 one is
#                rejected and the IPv6 one still connects
#   mckey        mckey -m ff0e::77:1 (rdma_join_multicast with an IPv6 group): a receiver on
#                host A, a sender on host B, every message received; the datagrams to the
#                group over IPv6 only, captured and checked; no membership left afterwards
#                (uroce res, ip -6 maddr)
#   udaddy       udaddy -b fd77::1 / -s fd77::1: UD ids over IPv6 (SIDR_REQ/SIDR_REP, then UD
#                SENDs to the AH from the ESTABLISHED event's IPv6 DGID), captured and checked
#   linklocal    the devices on the hosts' eth0 link-local addresses (fe80::...%eth0, as the
#                kernel gave them), rping -a fe80::...%eth0 through librdmacm, captured and
#                checked
. "$(dirname "$0")/lib.sh"
TWOHOST_IPV6=1
. "$(dirname "$0")/twohost_lib.sh"
mode=${1:?usage: ipv6_test.sh MODE}
PORT=$(tcp_port)
UDP=${UROCE_UDP_PORT:-4791}
SCAPY_CHECK="$(cd "$(dirname "$0")/../unit" && pwd)/icrc_scapy_check.py"
c=$UROCE_RUNTIME_DIR/client.out
s=$UROCE_RUNTIME_DIR/server.out
PCAP=$UROCE_RUNTIME_DIR/wire.pcap

expect() {  # expect FILE REGEX WHAT
    grep -Eq "$2" "$1" || fail "$3 (no /$2/ in $(basename "$1"))"
}

# frames FILTER: how many of the tap's packets (RoCEv2 decoded as InfiniBand) FILTER matches.
frames() {
    tshark -n -r "$PCAP" -d "udp.port==$UDP,infiniband" -Y "$1" -T fields -e frame.number 2>/dev/null | wc -l
}

# The tap's packets (or FILE's: a device's own capture): all RoCEv2 over IPv6 between the two
# addresses, decoded as InfiniBand, each ICRC right. MIN: the fewest packets there must be.
check_capture() {
    local min=$1 f=${2:-$PCAP} v4 v6 ib out n
    # What the tap lost (its buffer full on a busy host: not the devices' doing, and tshark
    # says how many; the devices' own captures have every packet) is not there to check.
    [ "$f" = "$PCAP" ] && min=$((min - ${TAP_DROPPED:-0}))
    v4=$(tshark -r "$f" -Y "ip && udp.dstport == $UDP" -T fields -e frame.number 2>/dev/null | wc -l)
    v6=$(tshark -r "$f" -Y "ipv6 && udp.dstport == $UDP" -T fields -e frame.number 2>/dev/null | wc -l)
    ib=$(tshark -r "$f" -d "udp.port==$UDP,infiniband" -Y "ipv6 && infiniband" -T fields -e frame.number 2>/dev/null | wc -l)
    echo "$(basename "$f"): $v6 RoCEv2 packets over IPv6 ($ib decoded as InfiniBand), $v4 over IPv4"
    [ "$v4" = 0 ] || fail "$v4 RoCEv2 packets went over IPv4"
    [ "$v6" -ge "$min" ] || fail "only $v6 RoCEv2 packets over IPv6 (expected $min or more)"
    [ "$ib" = "$v6" ] || fail "tshark decoded $ib of the $v6 packets as InfiniBand"
    tshark -r "$f" -d "udp.port==$UDP,infiniband" -Y "ipv6 && infiniband" -T fields -e ipv6.src -e ipv6.dst 2>/dev/null |
        sort -u | grep -Evq "^($ADDR6_A	$ADDR6_B|$ADDR6_B	$ADDR6_A)\$" &&
        fail "packets between other addresses than $ADDR6_A and $ADDR6_B"
    out=$(/usr/bin/python3 "$SCAPY_CHECK" "$f" --port "$UDP" 2>&1) || fail "ICRC check: $out"
    echo "$out"
    n=$(echo "$out" | awk '/^checked/ { print $2 }')
    [ "${n:-0}" = "$v6" ] || fail "the ICRC check saw ${n:-0} of $v6 packets"
    echo "$out" | grep -q "over IPv6" || fail "no packet was checked over IPv6"
}

# Both devices' own captures (uroce capture, docs/capture.md), with the IPv6 framing they
# write: dev_captures_start before a run, dev_captures_check MIN after it.
dev_captures_start() {
    "${HOST_A[@]}" "$UROCE" capture start "$UROCE_RUNTIME_DIR/device-a.pcap" uroce0 >/dev/null &&
        "${HOST_B[@]}" "$UROCE" capture start "$UROCE_RUNTIME_DIR/device-b.pcap" uroce0 >/dev/null ||
        fail "uroce capture start"
}
dev_captures_check() {
    "${HOST_A[@]}" "$UROCE" capture stop uroce0 >/dev/null &&
        "${HOST_B[@]}" "$UROCE" capture stop uroce0 >/dev/null || fail "uroce capture stop"
    check_capture "$1" "$UROCE_RUNTIME_DIR/device-a.pcap"
    check_capture "$1" "$UROCE_RUNTIME_DIR/device-b.pcap"
}

# Around a run of the modes that check both kinds of capture: capture_all [TAP_START ARGS...]
# starts the tap on the link and both devices' captures; captured_all MIN stops them and
# checks each (check_capture, dev_captures_check).
capture_all() {
    need_capture_tools
    dev_captures_start
    tap_start "$PCAP" "$@"
}
captured_all() {
    tap_stop
    check_capture "$1"
    dev_captures_check "$1"
}

# expect_ipv6_icrcs MESSAGE: host A's device checked the ICRC of packets that came over IPv6
# (counters_icrc); fails with MESSAGE if of none.
expect_ipv6_icrcs() {
    local n
    n=$("${HOST_A[@]}" "$UROCE" counters uroce0 | awk '$1 == "counters_icrc" {
        for (i = 2; i < NF; i++) if ($i == "ipv6") print $(i + 1) }')
    echo "host A checked ${n:-0} ICRCs over IPv6"
    [ "${n:-0}" -gt 0 ] || fail "$1"
}

# tcp_pair PROGRAM ARGS...: PROGRAM ARGS -p $PORT, the server on host A and the client on
# host B towards $ADDR_A (run_pair), for the programs that meet over TCP.
tcp_pair() {
    PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" "$@" -p "$PORT" -- \
        "${HOST_B[@]}" "$@" -p "$PORT" "$ADDR_A"
}

# The link-local address the kernel gave host $1's eth0, once duplicate address detection is
# done with it (a tentative address cannot be bound).
link_local() {
    local ns=$NS_A ll=
    [ "$1" = B ] && ns=$NS_B
    for _ in $(seq 100); do
        ll=$(ip -n "$ns" -6 -o addr show dev eth0 scope link -tentative | awk '{ sub("/.*", "", $4); print $4; exit }')
        [ -n "$ll" ] && break
        sleep 0.1
    done
    [ -n "$ll" ] || fail "host $1's eth0 has no link-local address"
    echo "$ll"
}

# The tap's tools, and each packet on its own on the link: with the veth's transmit checksum
# offload off the kernel cuts GSO trains before the link (wire_icrc_test.sh says why).
need_capture_tools() {
    need tshark
    need ethtool
    [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
        skip "/usr/bin/python3 with scapy (python3-scapy) is not installed"
    for ns in "$NS_A" "$NS_B"; do
        ip netns exec "$ns" ethtool -K eth0 tx off >/dev/null || fail "ethtool -K eth0 tx off"
    done
}

# The CM's part of the capture: the MADs of a connection and its end over IPv6 (SEQ: in that
# order; "each": each kind at least once, for several connections), and the REQ naming the
# client (CLIENT) and server (SERVER) by their IPv6 addresses, in its GIDs and in the RDMA CM
# header (IP version 6) of its private data; data packets too.
check_cm_capture() {
    local client=$1 server=$2 want=${3:-REQ REP RTU data DREQ DREP } seq ts_ib m
    ts_ib() { tshark -n -r "$PCAP" -d "udp.port==$UDP,infiniband" "$@" 2>/dev/null; }
    seq=$(ts_ib -Y ipv6 -T fields -e infiniband.bth.opcode -e infiniband.mad.mgmtclass \
        -e infiniband.mad.attributeid | cm_sequence)
    echo "over IPv6: $seq"
    if [ "$want" = each ]; then
        for m in REQ REP RTU data DREQ DREP; do
            echo " $seq" | grep -q " $m " || fail "no $m over IPv6"
        done
    else
        [ "$seq" = "$want" ] || fail "unexpected CM sequence over IPv6: $seq"
    fi
    local req
    req=$(ts_ib -Y 'infiniband.mad.attributeid == 0x0010' -T fields -e ipv6.src -e ipv6.dst \
        -e infiniband.cm.req.prim_localgid -e infiniband.cm.req.prim_remotegid \
        -e infiniband.cm.req.ip_cm.ipv -e infiniband.cm.req.ip_cm.sip6 -e infiniband.cm.req.ip_cm.dip6 | head -1)
    echo "REQ (source, destination, its GIDs, IP CM version and addresses): $req"
    [ "$req" = "$client	$server	$client	$server	0x06	$client	$server" ] ||
        fail "the REQ does not name $client and $server over IPv6 (IP CM version 6)"
}

# PAIR_READY for a CM server on host A: a listener on $PORT, what uroce res says then kept.
cm_listening_res() {
    cm_listening "$1"
    "${HOST_A[@]}" "$UROCE" res >"$UROCE_RUNTIME_DIR/res.out" 2>&1
}

twohost_setup
case $mode in
devinfo)
    need ibv_devinfo
    out=$(on_host A ibv_devinfo -v) || fail "ibv_devinfo exited $?"
    echo "$out" | grep -E "GID|mtu|link_layer"
    echo "$out" | grep -q "GID\[  0\]:[[:space:]]*$ADDR6_A, RoCE v2" ||
        fail "GID[0] is not $ADDR6_A RoCE v2"
    echo "$out" | grep -q "::ffff:" && fail "an IPv4-mapped GID on an IPv6 device"
    # 1500-byte link: 1024 with IPv6's 40-byte header too.
    echo "$out" | grep -q 'active_mtu:[[:space:]]*1024 (3)' || fail "active_mtu is not 1024"
    "${HOST_A[@]}" "$UROCE" res | grep -q "^device uroce0 addr $ADDR6_A " ||
        fail "uroce res does not name the IPv6 address"
    ;;
rc_pingpong)
    need ibv_rc_pingpong
    capture_all
    tcp_pair ibv_rc_pingpong -g 0 -n 200
    expect "$c" "iters in" "client did not report its iterations"
    tcp_pair ibv_rc_pingpong -g 0 -s 65536 -n 20
    expect "$c" "iters in" "client did not report its iterations (-s 65536)"
    # 200 x 2 messages of 4 KiB and 20 x 2 of 64 KiB at the 1024-byte MTU, and their ACKs.
    captured_all 4000
    ;;
write_bw)
    need ib_write_bw
    capture_all 128
    PAIR_TIMEOUT=60 tcp_pair ib_write_bw -x 0 -s 65536 -n 50
    check_perftest_results ib_write_bw "$c"
    trains=$("${HOST_B[@]}" "$UROCE" counters uroce0 | offload_field tx_trains)
    echo "host B sent $trains GSO trains over IPv6"
    if [ "$("${HOST_B[@]}" "$UROCE" counters uroce0 | offload_field gso)" != "off (ENOPROTOOPT)" ]; then
        [ "${trains:-0}" -gt 0 ] || fail "host B sent no GSO train"
    fi
    # 50 WRITEs of 64 packets at the 1024-byte MTU.
    captured_all 3200
    ;;
xsrq)
    need ibv_xsrq_pingpong
    capture_all
    tcp_pair ibv_xsrq_pingpong -g 0
    expect "$c" "^success" "the client did not finish"
    captured_all 20
    # XRC opcodes (0xa0..: the XRC SENDs through the TGT QPs) crossed over IPv6.
    [ "$(frames "ipv6 && infiniband.bth.opcode >= 0xa0 && infiniband.bth.opcode <= 0xb7")" -gt 0 ] ||
        fail "no XRC packet on the link"
    expect_ipv6_icrcs "host A received nothing over IPv6"
    ;;
ud_pingpong)
    need ibv_ud_pingpong
    capture_all
    tcp_pair ibv_ud_pingpong -g 0 -n 500
    expect "$c" "^1024000 bytes in" "the client did not exchange 500 x 2 messages of 1024 bytes"
    captured_all 1000
    ;;
ucx)
    need ucx_perftest
    need_capture_tools
    w=$UROCE_RUNTIME_DIR/ucx_perftest  # (run_pair splits at the first "--")
    printf '#!/bin/sh\nexec env UCX_TLS=rc_verbs,ud_verbs,self "%s" run -- ucx_perftest %s "$@"\n' \
        "$UROCE" "$(ucx_perftest_p2p)" >"$w"
    chmod +x "$w"
    tap_start "$PCAP" 128 256
    PAIR_TIMEOUT=60 tcp_pair "$w" -t tag_bw -n 200
    tap_stop
    grep '^Final:' "$c" || fail "the client printed no Final line"
    for h in A B; do
        if [ $h = A ]; then pre=("${HOST_A[@]}"); else pre=("${HOST_B[@]}"); fi
        echo "host $h: $("${pre[@]}" "$UROCE" counters uroce0 | grep -E '^counters (tx|rx)|^counters_retx' | tr '\n' ' ')"
    done
    v4=$(tshark -r "$PCAP" -Y "ip && udp.dstport == $UDP" -T fields -e frame.number 2>/dev/null | wc -l)
    v6=$(tshark -r "$PCAP" -d "udp.port==$UDP,infiniband" -Y "ipv6 && infiniband.bth.opcode == 0x64" \
        -T fields -e frame.number 2>/dev/null | wc -l)
    echo "on the link: $v4 RoCEv2 packets over IPv4, $v6 UD SENDs over IPv6 (UCX's wire-up)"
    [ "$v4" = 0 ] || fail "RoCEv2 over IPv4"
    [ "$v6" -gt 0 ] || fail "no UD SEND over IPv6: UCX did not use ud_verbs over IPv6"
    check_capture 1000
    ;;
ifname)
    need ibv_rc_pingpong
    need ibv_devinfo
    ll=$(link_local A)
    "${HOST_A[@]}" "$UROCE" stop uroce0 >/dev/null
    "${HOST_A[@]}" "$UROCE" start --name uroce0 --addr eth0 >/dev/null || fail "uroce start --addr eth0"
    gids=$(on_host A ibv_devinfo -v -d uroce0 | grep 'GID\[') || fail "ibv_devinfo failed"
    echo "$gids"
    want=$(printf '%s\n' "GID[  0]: $ll, RoCE v2" "GID[  1]: ::ffff:$ADDR_A, RoCE v2" "GID[  2]: $ADDR6_A, RoCE v2")
    [ "$(echo "$gids" | sed 's/^[[:space:]]*//; s/:[[:space:]]*/: /')" = "$want" ] ||
        fail "the GID table is not eth0's link-local, IPv4 and IPv6 addresses in that order"
    PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ibv_rc_pingpong -g 2 -p "$PORT" -n 200 -- \
        "${HOST_B[@]}" ibv_rc_pingpong -g 0 -p "$PORT" -n 200 "$ADDR_A"
    expect "$c" "remote address: .*GID $ADDR6_A\$" "the client did not talk to $ADDR6_A"
    expect "$c" "200 iters in" "the client did not finish"
    ;;
multi)
    need ibv_rc_pingpong
    [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import pyverbs.device' 2>/dev/null ||
        skip "pyverbs (python3-pyverbs) is not installed"
    ip -n "$NS_A" addr add fd77::11/64 dev eth0 nodad || fail "cannot add fd77::11 on host A"
    "${HOST_A[@]}" "$UROCE" stop uroce0 >/dev/null
    "${HOST_A[@]}" "$UROCE" start --name uroce0 --addr "$ADDR6_A" --addr "$ADDR_A" \
        --addr fd77::11 >/dev/null || fail "uroce start with three addresses"
    # Host B: an IPv6 peer (uroce0, from twohost_setup) and an IPv4 one.
    "${HOST_B[@]}" "$UROCE" start --name uroce1 --addr "$ADDR_B" >/dev/null ||
        fail "uroce start uroce1 on host B"
    table=$(on_host A /usr/bin/python3 -c '
import pyverbs.device as d
import socket
ctx = d.Context(name="uroce0")
for e in ctx.query_gid_table(16):
    a = socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, e.gid_str()))
    print(e.gid_index, e.gid_type, socket.if_indextoname(e.ndev_ifindex), a)
') || fail "ibv_query_gid_table failed: $table"
    echo "$table"
    # (gid_type 2: IBV_GID_TYPE_ROCE_V2)
    want="0 2 eth0 ::ffff:10.77.0.1
1 2 eth0 fd77::1
2 2 eth0 fd77::11"
    [ "$table" = "$want" ] ||
        fail "the GID table is not IPv4, then the two IPv6 addresses"
    PORT6=$((PORT + 1))
    on_host A timeout 60 ibv_rc_pingpong -d uroce0 -g 0 -p "$PORT" -n 2000 >"$s" 2>&1 &
    a4=$!
    on_host A timeout 60 ibv_rc_pingpong -d uroce0 -g 1 -p "$PORT6" -n 2000 >"$s.6" 2>&1 &
    a6=$!
    for p in "$PORT" "$PORT6"; do
        for _ in $(seq 100); do
            ip netns exec "$NS_A" ss -Hltn "sport = :$p" | grep -q . && break
            sleep 0.1
        done
    done
    on_host B timeout 60 ibv_rc_pingpong -d uroce1 -g 0 -p "$PORT" -n 2000 "$ADDR_A" >"$c" 2>&1 &
    b4=$!
    on_host B timeout 60 ibv_rc_pingpong -d uroce0 -g 0 -p "$PORT6" -n 2000 "$ADDR_A" >"$c.6" 2>&1 &
    b6=$!
    rc=0
    for pid in $a4 $a6 $b4 $b6; do wait "$pid" || rc=$?; done
    cat "$s" "$s.6" "$c" "$c.6"
    [ "$rc" = 0 ] || fail "a pingpong failed ($rc)"
    expect "$c" "remote address: .*GID ::ffff:10.77.0.1" "the IPv4 client did not talk to ::ffff:10.77.0.1"
    expect "$c.6" "remote address: .*GID fd77::1\$" "the IPv6 client did not talk to fd77::1"
    for f in "$c" "$c.6"; do expect "$f" "2000 iters in" "a client did not finish"; done
    expect_ipv6_icrcs "host A's device received nothing over IPv6"
    ;;
rping)
    need rping
    need_capture_tools
    tap_start "$PCAP"
    PAIR_READY=cm_listening_res run_pair "${HOST_A[@]}" rping -s -a "$ADDR6_A" -p "$PORT" -v -- \
        "${HOST_B[@]}" rping -c -a "$ADDR6_A" -p "$PORT" -C 100 -v -V
    tap_stop
    expect "$c" 'rdma-ping-99: ' "the last ping is missing"
    expect "$s" 'rdma-ping-99: ' "the server did not see ping 99"
    grep "^cm_id" "$UROCE_RUNTIME_DIR/res.out"
    expect "$UROCE_RUNTIME_DIR/res.out" "^cm_id .* state listen .* local \\[$ADDR6_A\\]:$PORT " \
        "uroce res does not show the listener on [$ADDR6_A]:$PORT"
    # 100 pings: each a SEND, an RDMA READ, a SEND, an RDMA WRITE and a SEND, and their ACKs.
    check_capture 500
    check_cm_capture "$ADDR6_B" "$ADDR6_A"
    "${HOST_B[@]}" "$UROCE" trace uroce0 | grep -q "cm tx REQ to $ADDR6_A " ||
        fail "host B's trace has no REQ to $ADDR6_A"
    ;;
ucmatose)
    need ucmatose
    need_capture_tools
    tap_start "$PCAP"
    PAIR_READY=cm_listening_res run_pair "${HOST_A[@]}" ucmatose -b "$ADDR6_A" -p "$PORT" -c 4 -C 20 -- \
        "${HOST_B[@]}" ucmatose -s "$ADDR6_A" -p "$PORT" -c 4 -C 20 -t 32
    tap_stop
    for f in "$s" "$c"; do
        expect "$f" '^return status 0$' "ucmatose ($(basename "$f")) did not return 0"
        expect "$f" '^data transfers complete$' "ucmatose ($(basename "$f")) moved no data"
    done
    expect "$UROCE_RUNTIME_DIR/res.out" "^cm_id .* state listen .* local \\[$ADDR6_A\\]:$PORT " \
        "uroce res does not show the listener on [$ADDR6_A]:$PORT"
    check_capture 160
    check_cm_capture "$ADDR6_B" "$ADDR6_A" each
    # The client's TOS (-t 32) is the connections' traffic class: every MAD and data packet
    # of both sides carries it (the passive side's from the REQ), as over IPv4 (ip_marks.cm).
    all=$(tshark -n -r "$PCAP" -Y "ipv6 && udp.dstport == $UDP" -T fields -e frame.number 2>/dev/null | wc -l)
    marked=$(tshark -n -r "$PCAP" -Y "ipv6 && udp.dstport == $UDP && ipv6.tclass == 0x20" -T fields -e frame.number 2>/dev/null | wc -l)
    echo "$marked of $all packets with traffic class 0x20"
    [ "$all" -gt 0 ] && [ "$marked" = "$all" ] || fail "$((all - marked)) packets over IPv6 without traffic class 0x20"
    ;;
rstream)
    need rstream
    need riostream
    need_capture_tools
    tap_start "$PCAP" 64
    PAIR_READY=cm_listening run_pair "${HOST_A[@]}" rstream -b "$ADDR6_A" -p "$PORT" -S 65536 -C 100 -T v -- \
        "${HOST_B[@]}" rstream -s "$ADDR6_A" -p "$PORT" -S 65536 -C 100 -T v
    expect "$c" '^custom ' "rstream printed no result"
    PAIR_READY=cm_listening run_pair "${HOST_A[@]}" riostream -b "$ADDR6_A" -p "$PORT" -S 65536 -C 100 -T v -- \
        "${HOST_B[@]}" riostream -s "$ADDR6_A" -p "$PORT" -S 65536 -C 100 -T v
    expect "$c" '^custom ' "riostream printed no result"
    tap_stop
    # 2 x 100 x 2 transfers of 64 KiB at the 1024-byte MTU each way.
    [ "$TAP_DROPPED" = 0 ] && check_capture 25600 || check_capture 6400
    check_cm_capture "$ADDR6_B" "$ADDR6_A" each
    ;;
wildcard)
    need ucmatose
    "${HOST_A[@]}" "$UROCE" start --name uroce1 --addr "$ADDR_A" >/dev/null || fail "uroce start $ADDR_A on host A"
    "${HOST_B[@]}" "$UROCE" start --name uroce1 --addr "$ADDR_B" >/dev/null || fail "uroce start $ADDR_B on host B"
    # One server of two connections, two clients of one each, one per IP version.
    on_host A timeout 60 ucmatose -b ::0 -p "$PORT" -c 2 -C 10 >"$s" 2>&1 &
    spid=$!
    cm_listening $spid
    "${HOST_A[@]}" "$UROCE" res uroce1 >"$UROCE_RUNTIME_DIR/res.out" 2>&1
    on_host B timeout 60 ucmatose -s "$ADDR_A" -p "$PORT" -c 1 -C 10 >"$c.4" 2>&1 &
    pid4=$!
    on_host B timeout 60 ucmatose -s "$ADDR6_A" -p "$PORT" -c 1 -C 10 >"$c.6" 2>&1
    rc6=$?
    wait $pid4
    rc4=$?
    wait $spid
    rc=$?
    for f in "$s" "$c.4" "$c.6"; do
        echo "--- $(basename "$f")"
        cat "$f"
    done
    [ $rc = 0 ] && [ $rc4 = 0 ] && [ $rc6 = 0 ] || fail "server exit $rc, IPv4 client $rc4, IPv6 client $rc6"
    expect "$s" '^data transfers complete$' "the server moved no data"
    expect "$UROCE_RUNTIME_DIR/res.out" "^cm_id .* state listen .* local \\[::\\]:$PORT " \
        "the IPv4 device has no [::]:$PORT listener"
    # IPV6_V6ONLY: net.ipv6.bindv6only=1 makes the wildcard IPv6 only. The IPv4 client is
    # refused (no listener for it: REJ, "invalid service ID"), the IPv6 one connects.
    ip netns exec "$NS_A" sysctl -qw net.ipv6.bindv6only=1 || fail "sysctl net.ipv6.bindv6only"
    # Once the server listens: the IPv4 device's listeners, and an IPv4 client, refused.
    v6only_ready() {
        cm_listening "$1"
        "${HOST_A[@]}" "$UROCE" res uroce1 >"$UROCE_RUNTIME_DIR/res.out" 2>&1
        on_host B timeout 20 ucmatose -s "$ADDR_A" -p "$PORT" -c 1 -C 10 >"$UROCE_RUNTIME_DIR/client4.out" 2>&1
    }
    PAIR_READY=v6only_ready run_pair "${HOST_A[@]}" ucmatose -b ::0 -p "$PORT" -c 1 -C 10 -- \
        "${HOST_B[@]}" ucmatose -s "$ADDR6_A" -p "$PORT" -c 1 -C 10
    expect "$c" '^data transfers complete$' "the IPv6 client moved no data under bindv6only=1"
    echo "--- IPv4 client under bindv6only=1"
    cat "$UROCE_RUNTIME_DIR/client4.out"
    grep "^cm_id .* state listen" "$UROCE_RUNTIME_DIR/res.out" && fail "the IPv4 device listens under bindv6only=1"
    expect "$UROCE_RUNTIME_DIR/client4.out" "RDMA_CM_EVENT_REJECTED" "the IPv4 client was not rejected"
    ;;
mckey)
    need mckey
    need_capture_tools
    GROUP6=$(printf 'ff0e::77:%x' "$PORT")  # a group of this run's own
    # The device's membership: its uroce res mcast line (GID as it prints it) and eth0's.
    attached6() {
        "${HOST_A[@]}" "$UROCE" res uroce0 2>/dev/null | awk -v g="$GROUP6" '$1 == "mcast" && $2 == g { print NF - 5 }' |
            grep . || echo 0
    }
    maddr_has() { ip -n "$NS_A" -6 maddr show dev eth0 | grep -qw "$GROUP6"; }
    tap_start "$PCAP"
    on_host A timeout 60 mckey -m "$GROUP6" -b "$ADDR6_A" -C 100 >"$s" 2>&1 &
    rpid=$!
    for _ in $(seq 200); do
        [ "$(attached6)" = 1 ] && break
        sleep 0.05
    done
    "${HOST_A[@]}" "$UROCE" res uroce0 | grep "^mcast"
    [ "$(attached6)" = 1 ] || fail "host A's receiver QP is not attached to $GROUP6"
    maddr_has || fail "host A's eth0 is no member of $GROUP6 (ip -6 maddr)"
    on_host B timeout 60 mckey -m "$GROUP6" -b "$ADDR6_B" -s -C 100 >"$c" 2>&1 || {
        cat "$c"
        fail "the sender failed"
    }
    wait "$rpid" || { cat "$s"; fail "the receiver failed"; }
    tap_stop
    cat "$s" "$c"
    expect "$c" "joined dgid: $GROUP6 mlid 0x0" "the sender's MULTICAST_JOIN did not carry $GROUP6"
    expect "$s" '^data transfers complete$' "the receiver did not receive every message"
    v4=$(frames "ip && udp.dstport == $UDP")
    n=$(frames "ipv6.dst == $GROUP6 && ipv6.src == $ADDR6_B && infiniband")
    echo "on the link: $n datagrams from $ADDR6_B to $GROUP6 decoded as InfiniBand, $v4 RoCEv2 packets over IPv4"
    [ "$v4" = 0 ] || fail "$v4 RoCEv2 packets went over IPv4"
    [ "$n" -ge 100 ] || fail "only $n datagrams to $GROUP6 over IPv6"
    out=$(/usr/bin/python3 "$SCAPY_CHECK" "$PCAP" --port "$UDP" 2>&1) || fail "ICRC check: $out"
    echo "$out"
    sleep 0.2  # the device closes a session when it sees the socket hang up
    [ "$(attached6)" = 0 ] || fail "host A's device still has $GROUP6"
    "${HOST_A[@]}" "$UROCE" res | grep '^mcast ' && fail "a device on host A still has multicast groups"
    "${HOST_B[@]}" "$UROCE" res | grep '^mcast ' && fail "a device on host B still has multicast groups"
    if maddr_has; then fail "host A's eth0 is still a member of $GROUP6"; fi
    ;;
udaddy)
    need udaddy
    need_capture_tools
    PORT=7174  # udaddy has no port option (the devices are this test's alone)
    tap_start "$PCAP"
    PAIR_READY=cm_listening_res PAIR_TIMEOUT=60 run_pair "${HOST_A[@]}" udaddy -b "$ADDR6_A" -- \
        "${HOST_B[@]}" udaddy -s "$ADDR6_A" -b "$ADDR6_B"
    tap_stop
    for f in "$s" "$c"; do
        expect "$f" '^return status 0$' "udaddy ($(basename "$f")) did not return 0"
        expect "$f" '^data transfers complete$' "udaddy ($(basename "$f")) moved no data"
    done
    expect "$UROCE_RUNTIME_DIR/res.out" "^cm_id .* state listen .* local \\[$ADDR6_A\\]:$PORT " \
        "uroce res does not show the listener on [$ADDR6_A]:$PORT"
    # SIDR_REQ (attribute 0x0017) and SIDR_REP (0x0018), then the datagrams both ways.
    for a in 0x0017 0x0018; do
        n=$(frames "ipv6 && infiniband.mad.attributeid == $a")
        [ "$n" -ge 1 ] || fail "no MAD of attribute $a over IPv6"
    done
    check_capture 4
    ;;
linklocal)
    need rping
    need_capture_tools
    for h in A B; do
        ll=$(link_local $h)
        if [ $h = A ]; then LL_A=$ll; else LL_B=$ll; fi
    done
    for h in A B; do
        pre=("${HOST_A[@]}") ll=$LL_A
        [ $h = B ] && pre=("${HOST_B[@]}") ll=$LL_B
        "${pre[@]}" "$UROCE" stop uroce0 >/dev/null || fail "uroce stop on host $h"
        "${pre[@]}" "$UROCE" start --name uroce0 --addr "$ll%eth0" >/dev/null ||
            fail "uroce start --addr $ll%eth0 on host $h"
    done
    echo "host A: $LL_A%eth0, host B: $LL_B%eth0"
    ADDR6_A=$LL_A ADDR6_B=$LL_B  # what check_capture expects on the link
    tap_start "$PCAP"
    PAIR_READY=cm_listening_res run_pair "${HOST_A[@]}" rping -s -a "$LL_A%eth0" -p "$PORT" -v -- \
        "${HOST_B[@]}" rping -c -a "$LL_A%eth0" -p "$PORT" -C 100 -v -V
    tap_stop
    expect "$c" 'rdma-ping-99: ' "the last ping is missing"
    grep "^cm_id" "$UROCE_RUNTIME_DIR/res.out"
    expect "$UROCE_RUNTIME_DIR/res.out" "^cm_id .* state listen .* local \\[$LL_A%eth0\\]:$PORT " \
        "uroce res does not show the listener on [$LL_A%eth0]:$PORT"
    check_capture 500
    check_cm_capture "$LL_B" "$LL_A"
    # Without its scope a link-local address names no interface: rping cannot bind it
    # (EINVAL, as the kernel's cma_check_linklocal).
    out=$(on_host A timeout 10 rping -s -a "$LL_A" -p "$PORT" -v 2>&1) && fail "rping -s bound $LL_A without a scope"
    echo "rping -s -a $LL_A: $out"
    echo "$out" | grep -q "rdma_bind_addr: Invalid argument" || fail "rping -s -a $LL_A did not fail with EINVAL"
    ;;
*) fail "unknown mode $mode" ;;
esac
echo PASS
