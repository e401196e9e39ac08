#!/usr/bin/env bash
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
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/twohost_lib.sh"
mode=${1:?usage: ip_marks_test.sh ah|write_bw [PROGRAM]}
need tshark
PORT=$(tcp_port)
UDP=${UROCE_UDP_PORT:-4791}
PCAP_WIRE=$UROCE_RUNTIME_DIR/wire.pcap
PCAP_DEV=$UROCE_RUNTIME_DIR/device-b.pcap
case $mode in
ah) twohost_setup --offload off ;;
write_bw) twohost_setup ;;
*) fail "unknown mode $mode" ;;
esac
"${HOST_B[@]}" "$UROCE" capture start "$PCAP_DEV" uroce0 >/dev/null || fail "capture start on B"

tap_start "$PCAP_WIRE"  # before the first packet
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
esac
tap_stop

# fields FILE: one line per UDP packet: source, TOS, TTL, DF, UDP checksum, UDP length.
fields() {
    tshark -r "$1" -T fields -E separator=' ' -e ip.src -e ip.dsfield -e ip.ttl -e ip.flags.df \
        -e udp.checksum -e udp.length -Y "udp.port == $UDP" 2>/dev/null
}
fields "$PCAP_WIRE" >"$UROCE_RUNTIME_DIR/wire.txt"
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
    ;;
write_bw)
    MIN_A=1 check "$UROCE_RUNTIME_DIR/wire.txt" "on the veth" 1
    # The WRITEs went as GSO trains: datagrams longer than one packet at the port's MTU.
    trains=$(awk '$1 == "'"$ADDR_B"'" && $6 > 1200' "$UROCE_RUNTIME_DIR/wire.txt" | wc -l)
    echo "GSO trains seen on the veth: $trains"
    [ "$trains" -gt 0 ] || fail "host B sent no GSO train across the veth"
    MIN_A=1 check "$UROCE_RUNTIME_DIR/device.txt" "host B's device capture" 1000
    ;;
esac
echo PASS
