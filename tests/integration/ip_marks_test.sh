#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The IPv4 header as rxe and RoCE NICs set it, seen on the wire (issue 26, acceptance 4): two
# hosts (twohost_lib.sh: network namespaces joined by a veth pair, a device on each), packets
# whose GRH has traffic class 0x68 (DSCP 26, ECN 0), and tshark on host A's end of the veth
# (the interface, not the device's capture). Every RoCEv2 packet must carry TOS 0x68, DF, and
# the TTL the GRH's hop limit gives (docs/behaviour.md, "IPv4 and UDP headers"); host B's
# device's own capture must say the same of what it sent and received.
# usage: ip_marks_test.sh MODE [PROGRAM]
#   ah        PROGRAM (ip_marks_send) on host B: UD SENDs through an AH and an RC SEND (sent
#             again until retry_cnt runs out) through a QP's address vector, both with
#             traffic class 0x68 and hop limit 17; devices with --offload off, so every packet
#             also has UDP checksum 0, as rxe sends it
#   write_bw  ib_write_bw --tclass 0x68 (unmodified perftest, which sets hop limit 0xff for
#             RoCE; its -L is for raw Ethernet QPs only), 64 KiB messages, offloads on: the
#             WRITEs leave as GSO trains (the tap on the veth sees a train as one datagram)
#             and the ACKs come back, both with the GRH's TOS and TTL
#   cm        ib_write_bw -R (rdma_cm) with --tos 104 (0x68) on the client only (perftest sets
#             RDMA_OPTION_ID_TOS): the CM's MADs both ways (REQ, REP, RTU, DREQ, DREP) and
#             both QPs' packets carry TOS 0x68 and TTL 64, as with the kernel's CM, whose
#             passive side takes the path, traffic class included, from the REQ
#   sport     ib_write_bw -q 4 (no TOS): each QP's UDP source port is rxe's (net/udp_sport.h)
#             in `uroce res` and on the wire both ways, the four differ, B's GSO trains leave
#             from them, and once the QPs are gone only the CM's port keeps a socket
# Every mode also checks the UDP source ports it sees (udp_sport_check.py): UD packets from
# their QP's port (ah), the CM's MADs from QP1's (cm).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/twohost_lib.sh"
mode=${1:?usage: ip_marks_test.sh ah|write_bw|cm|sport [PROGRAM]}
need tshark
PORT=$(tcp_port)
UDP=${UROCE_UDP_PORT:-4791}
PCAP_WIRE=$UROCE_RUNTIME_DIR/wire.pcap
PCAP_DEV=$UROCE_RUNTIME_DIR/device-b.pcap
case $mode in
ah) twohost_setup --offload off ;;
write_bw | cm | sport) twohost_setup ;;
*) fail "unknown mode $mode" ;;
esac
"${HOST_B[@]}" "$UROCE" capture start "$PCAP_DEV" uroce0 >/dev/null || fail "capture start on B"

# Before the first packet; headers only (400 bytes hold a MAD whole) and a large buffer, so a
# loaded machine's tshark keeps every packet (CI's once lost 41, the test connection's REQ
# among them).
tap_start "$PCAP_WIRE" 64 400
case $mode in
ah)
    on_host B "${2:?ip_marks_test.sh ah PROGRAM}" "$ADDR_A" 0x68 17 || fail "ip_marks_send failed"
    TTL=17
    ;;
write_bw)
    need ib_write_bw
    PAIR_TIMEOUT=60 PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ib_write_bw \
        --tclass 0x68 -s 65536 -p "$PORT" -n 1000 -- \
        "${HOST_B[@]}" ib_write_bw --tclass 0x68 -s 65536 -p "$PORT" -n 1000 "$ADDR_A"
    check_perftest_results ib_write_bw "$UROCE_RUNTIME_DIR/client.out"
    TTL=255
    ;;
cm)
    need ib_write_bw
    PAIR_TIMEOUT=60 PAIR_READY=cm_listening run_pair "${HOST_A[@]}" ib_write_bw -R \
        -s 65536 -p "$PORT" -n 200 -- \
        "${HOST_B[@]}" ib_write_bw -R --tos 104 -s 65536 -p "$PORT" -n 200 "$ADDR_A"
    check_perftest_results ib_write_bw "$UROCE_RUNTIME_DIR/client.out"
    TTL=64
    ;;
sport)
    need ib_write_bw
    # Host B's QPs as `uroce res` shows them while all four are in RTS (-D: for 2 seconds).
    (for _ in $(seq 300); do
        "${HOST_B[@]}" "$UROCE" res 2>/dev/null | grep -E '^qp .* type RC state RTS' >"$UROCE_RUNTIME_DIR/res.tmp"
        if [ "$(wc -l <"$UROCE_RUNTIME_DIR/res.tmp")" -ge 4 ]; then
            mv "$UROCE_RUNTIME_DIR/res.tmp" "$UROCE_RUNTIME_DIR/res.txt"
            break
        fi
        sleep 0.1
    done) &
    poller=$!
    PAIR_TIMEOUT=60 PAIR_READY=tcp_listening run_pair "${HOST_A[@]}" ib_write_bw \
        -q 4 -D 2 -s 65536 -p "$PORT" -- \
        "${HOST_B[@]}" ib_write_bw -q 4 -D 2 -s 65536 -p "$PORT" "$ADDR_A"
    wait "$poller"
    [ -s "$UROCE_RUNTIME_DIR/res.txt" ] || fail "uroce res never showed host B's 4 QPs in RTS"
    ;;
esac
tap_stop
[ "$TAP_DROPPED" = 0 ] || fail "the tap on the veth lost $TAP_DROPPED packets: the check needs them all"

# fields FILE: one line per UDP packet: source, TOS, TTL, DF, UDP checksum, UDP length.
fields() {
    tshark -r "$1" -T fields -E separator=' ' -e ip.src -e ip.dsfield -e ip.ttl -e ip.flags.df \
        -e udp.checksum -e udp.length -Y "udp.port == $UDP" 2>/dev/null
}
fields "$PCAP_WIRE" >"$UROCE_RUNTIME_DIR/wire.txt"
# The UDP source ports (udp_sport_check.py's fields).
tshark -r "$PCAP_WIRE" -d "udp.port==$UDP,infiniband" -T fields -E separator=, -e ip.src \
    -e udp.srcport -e infiniband.bth.destqp -e infiniband.deth.srcqp -e udp.length \
    -Y "udp.port == $UDP" 2>/dev/null >"$UROCE_RUNTIME_DIR/sport.txt"
sport_check() { python3 "$(dirname "$0")/udp_sport_check.py" "$@" || fail "UDP source ports ($1)"; }
# check FILE WHAT MIN_B [CSUM0]: every packet TOS 0x68, TTL $TTL, DF (CSUM0: UDP checksum 0);
# host B sent MIN_B at least (MIN_A: host A as many).
check() {
    local f=$1 what=$2 min_b=$3 csum0=${4:-}
    awk -v a="$ADDR_A" -v b="$ADDR_B" -v ttl="$TTL" -v csum0="$csum0" -v min_b="$min_b" \
        -v min_a="${MIN_A:-0}" -v what="$what" '
        { n[$1]++
          df = ($4 == "1" || $4 == "True" || $4 == "Set")
          if ($2 != "0x68" || $3 != ttl || !df || (csum0 && $5 != "0x0000")) {
              if (bad++ < 5) print what ": wrong header: " $0; } }
        END { printf "%s: %d packets from %s, %d from %s, %d wrong\n", what, n[b], b, n[a], a, bad
              exit !(n[a] >= min_a && n[b] >= min_b && bad == 0) }' "$f" ||
        fail "$what: not every packet has TOS 0x68, TTL $TTL, DF${csum0:+, UDP checksum 0}, or too few"
}
# Host B's device capture: what it sent, and what it received with the TOS and TTL the
# socket reported (IP_RECVTOS, IP_RECVTTL).
"${HOST_B[@]}" "$UROCE" capture stop uroce0 >/dev/null || fail "capture stop on B"
fields "$PCAP_DEV" >"$UROCE_RUNTIME_DIR/device.txt"
csum=$("${HOST_B[@]}" "$UROCE" counters uroce0 | offload_field udp_csum)
echo "host B: udp_csum $csum"
case $mode in
ah)
    [ "$csum" = zero ] || fail "host B without offloads says udp_csum $csum, not zero"
    # 8 UD SENDs, the RC SEND and its 2 retries (ip_marks_send.cpp).
    check "$UROCE_RUNTIME_DIR/wire.txt" "on the veth" 11 csum0
    check "$UROCE_RUNTIME_DIR/device.txt" "host B's device capture" 11 csum0
    sport_check ud "$UROCE_RUNTIME_DIR/sport.txt" "$ADDR_B"
    ;;
write_bw)
    MIN_A=1 check "$UROCE_RUNTIME_DIR/wire.txt" "on the veth" 1
    # The WRITEs went as GSO trains: datagrams longer than one packet at the port's MTU.
    trains=$(awk '$1 == "'"$ADDR_B"'" && $6 > 1200' "$UROCE_RUNTIME_DIR/wire.txt" | wc -l)
    echo "GSO trains seen on the veth: $trains"
    [ "$trains" -gt 0 ] || fail "host B sent no GSO train across the veth"
    MIN_A=1 check "$UROCE_RUNTIME_DIR/device.txt" "host B's device capture" 1000
    ;;
cm)
    # perftest -R makes two connections: one of its own to exchange parameters (TOS 0: no
    # --tos on it), then the test's, whose id has the TOS. On the wire (A's end of the veth):
    # the test connection is the REQ with traffic class 0x68; its QPs are that REQ's QPN (B)
    # and its REP's (A). Every MAD of it (REQ, REP, RTU, DREQ, DREP, either side) and every
    # packet either QP sends must carry TOS 0x68 and TTL 64, host A's (passive, no --tos) as
    # well: its path is the REQ's. Any other packet, TOS 0. A REQ's IP TOS is its traffic class.
    tshark -r "$PCAP_WIRE" -d "udp.port==$UDP,infiniband" -T fields -E separator=, \
        -e ip.src -e ip.dsfield -e ip.ttl -e ip.flags.df -e infiniband.bth.destqp \
        -e infiniband.mad.attributeid -e infiniband.cm.req.localqpn \
        -e infiniband.cm.req.prim_tfcclass -e infiniband.cm.rep.localqpn \
        -Y "udp.port == $UDP" 2>/dev/null >"$UROCE_RUNTIME_DIR/cm.txt"
    awk -F, -v a="$ADDR_A" -v b="$ADDR_B" '
        function df(x) { return x == "1" || x == "True" || x == "Set" }
        # tshark prints QPNs in hex; "0x12" + 0 is 18 to some awks, 0 to others (mawk 2025).
        function hex(x,  i, v) {
            x = tolower(x); sub(/^0x/, "", x); v = 0
            for (i = 1; i <= length(x); i++) v = v * 16 + index("0123456789abcdef", substr(x, i, 1)) - 1
            return v }
        { src[NR] = $1; tos[NR] = $2; ttl[NR] = $3; dff[NR] = $4; dqp[NR] = hex($5); attr[NR] = $6
          if ($6 == "0x0010" && $1 == b && $2 == "0x68") qb = hex($7)
          if ($6 == "0x0010" && $2 != $8) { print "REQ with TOS " $2 " and traffic class " $8; bad++ }
          if ($6 == "0x0013" && $1 == a && $2 == "0x68") qa = hex($9) }
        END {
          if (!qa || !qb) { print "no REQ and REP with TOS 0x68"; exit 1 }
          for (i = 1; i <= NR; i++) {
              test = (src[i] == b && dqp[i] == qa) || (src[i] == a && dqp[i] == qb)
              if (dqp[i] == 1) { m[attr[i] " " tos[i]]++; continue }
              want = test ? "0x68" : "0x00"
              if (tos[i] != want || ttl[i] != 64 || !df(dff[i])) {
                  if (bad++ < 5) print "packet " i ": " src[i] " TOS " tos[i] " TTL " ttl[i] " DF " dff[i] " to QP " dqp[i]
              }
              if (test) n[src[i]]++
          }
          printf "test QPs: A 0x%x B 0x%x; %d packets from B, %d from A\n", qa, qb, n[b], n[a]
          for (k in m) print "MAD attribute, TOS: " k " x" m[k]
          split("0x0010 0x0013 0x0014 0x0015 0x0016", want_mads, " ")
          for (j in want_mads) if (!m[want_mads[j] " 0x68"]) { print "no " want_mads[j] " with TOS 0x68"; bad++ }
          exit !(bad == 0 && n[b] >= 200 && n[a] >= 1) }' "$UROCE_RUNTIME_DIR/cm.txt" ||
        fail "the test connection is not TOS 0x68 / TTL 64 throughout (MADs and both QPs)"
    sport_check cm "$UROCE_RUNTIME_DIR/sport.txt"
    ;;
sport)
    sport_check rc "$UROCE_RUNTIME_DIR/res.txt" "$UROCE_RUNTIME_DIR/sport.txt" "$ADDR_A" "$ADDR_B"
    # The QPs are gone, and their sockets with them: the CM's port alone is left.
    line=$("${HOST_B[@]}" "$UROCE" counters uroce0 | grep '^counters_sport')
    echo "host B: $line"
    case $line in
    "counters_sport ports 1 sockets 1 fallbacks 0 "*) ;;
    *) fail "host B after the test: $line (want the CM's port alone, no fallback)" ;;
    esac
    ;;
esac
echo PASS
