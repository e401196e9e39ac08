#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# uroce against a scripted rxe-like RC peer (issue 26, acceptance 2): two hosts
# (twohost_lib.sh: network namespaces joined by a 1500-byte veth). Host A runs a device
# (UDP 4791, --offload off: one datagram per packet, UDP checksum 0, as rxe sends them) and
# PROGRAM (rxe_peer_verbs: one RC QP, path MTU 1024); host B has no device but rxe_peer.py,
# which puts packets on the wire as kernel Soft-RoCE does (scapy, raw sockets: IPv4 IDs from a
# per-pair counter in random steps, DF, TTL 64, UDP source port 0xC000 + hash of its QPN, UDP
# checksum 0, P_Key 0xffff, its own ICRC) and drives PROGRAM over pipes. Between them: SENDs
# (ONLY and FIRST/MIDDLE/LAST), RDMA WRITEs, RDMA READs, a FETCH_ADD, SENDs sent twice with the
# same PSNs (delivered once, every duplicate ACKed), and the other way the device's SENDs,
# WRITE, READ and FETCH_ADD answered by the peer; each byte-exact on both sides (rxe_peer.py
# says what each step checks). Then:
#   - every packet the device sent verified on the peer's side: ICRC (scapy over the IPv4
#     header received), DF, UDP checksum 0, P_Key, QPN; as many as the device counted sent;
#   - the device received every packet the peer sent, each under its opcode, all accepted by
#     the ICRC ID solver (counters_icrc solved), and dropped none.
# Two rounds with different seeds. Root only (namespaces, raw sockets): skips otherwise.
# usage: rxe_peer_test.sh PROGRAM
. "$(dirname "$0")/lib.sh"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
    skip "/usr/bin/python3 with scapy (python3-scapy) is not installed"
PROG=${1:?usage: rxe_peer_test.sh PROGRAM}
PEER="$(cd "$(dirname "$0")" && pwd)/rxe_peer.py"
# The hosts are namespaces of this test alone: the device takes RoCEv2's own port, which
# the peer's packets go to as rxe's do.
export UROCE_UDP_PORT=4791
. "$(dirname "$0")/twohost_lib.sh"
OUT=$UROCE_RUNTIME_DIR/peer.out

counters() { "${HOST_A[@]}" "$UROCE" counters uroce0 || fail "uroce counters on host A"; }
counter() {  # counter TEXT LINE_TAG KEY
    echo "$1" | awk -v t="$2" -v k="$3" '
        $1 == t { for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); f = 1 } }
        END { if (!f) exit 1 }' || fail "uroce counters has no $2 $3"
}
op_count() {  # op_count TEXT tx|rx OPCODE_NAME
    echo "$1" | awk -v d="$2" -v op="$3" '$1 == "counters_op" && $2 == d && $3 == op { v = $5 }
        END { print v + 0 }'
}

# round SEED: one run of the script with a device started afresh (its counters from 0).
round() {
    local seed=$1 c sent checked n op got k any drops
    twohost_setup --offload off
    # The peer's host has no device: only the peer's sockets on its address.
    "${HOST_B[@]}" "$UROCE" stop >/dev/null 2>&1
    timeout 25 ip netns exec "$NS_B" /usr/bin/python3 "$PEER" "$ADDR_B" "$ADDR_A" \
        --seed "$seed" -- "${HOST_A[@]}" "${VERBS_ENV[@]}" timeout 20 "$PROG" "$ADDR_B" \
        >"$OUT" 2>&1
    local rc=$?
    cat "$OUT"
    [ $rc = 0 ] || fail "rxe_peer.py (seed $seed) exit $rc"

    c=$(counters)
    sent=$(awk '$1 == "peer_sent" { print $2 }' "$OUT")
    checked=$(awk '$1 == "uroce_checked" { print $2 }' "$OUT")
    echo "$c" | grep -E '^(counters|counters_icrc) '
    # What the device sent, all of it seen and verified by the peer.
    [ "$(counter "$c" counters tx_pkts)" = "$checked" ] ||
        fail "the device sent $(counter "$c" counters tx_pkts) packets, the peer verified $checked"
    [ "$(counter "$c" counters retransmits)" = 0 ] || echo "note: the device retransmitted"
    # What the peer sent: all received, each under its opcode, all through the ID solver.
    [ "$(counter "$c" counters rx_pkts)" = "$sent" ] ||
        fail "the peer sent $sent packets, the device received $(counter "$c" counters rx_pkts)"
    for kv in $(awk '$1 == "peer_sent" { for (i = 3; i <= NF; i++) print $i }' "$OUT"); do
        op=${kv%=*} n=${kv#*=}
        got=$(op_count "$c" rx "$op")
        [ "$got" = "$n" ] || fail "counters_op rx $op is $got, the peer sent $n"
    done
    for kv in $(awk '$1 == "uroce_checked" { for (i = 3; i <= NF; i++) print $i }' "$OUT"); do
        op=${kv%=*} n=${kv#*=}
        got=$(op_count "$c" tx "$op")
        [ "$got" = "$n" ] || fail "counters_op tx $op is $got, the peer verified $n"
    done
    [ "$(counter "$c" counters_icrc solved)" = "$sent" ] ||
        fail "of the peer's $sent packets $(counter "$c" counters_icrc solved) went through the ICRC solver"
    any=0
    for k in id0 train solved_nodf unchecked; do any=$(( any + $(counter "$c" counters_icrc "$k") )); done
    [ "$any" = 0 ] || fail "$any of the peer's packets were accepted other than by the ICRC solver"
    drops=$(echo "$c" | awk '$1 == "drop" && $3 != 0')
    [ -z "$drops" ] || fail "the device dropped packets: $drops"
    echo "--- seed $seed: the peer sent $sent packets, all solved, none dropped; the device sent $checked, all verified"
    twohost_teardown
    TH_MADE=()
    # (Kept, for lib.sh's cleanup to look for sanitizer reports in their logs.)
    mv "$DIR_A" "$DIR_A-$seed" && mv "$DIR_B" "$DIR_B-$seed" || fail "keeping round $seed's logs"
}

round 1
round 2
echo PASS
