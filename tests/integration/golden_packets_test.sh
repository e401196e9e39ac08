#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Packets nobody in uroce made (tests/integration/golden_packets.py): the ConnectX-4 Lx CNP
# from scapy's RoCE tests (tests/data/golden/connectx4lx_cnp.txt, IPv4 ID 0x718c, DF), the
# scapy-built packets kept in tests/data/golden/scapy_rxe_like.txt, and packets scapy builds
# now as kernel Soft-RoCE sends them (random IPv4 IDs, DF, UDP source ports
# 0xC000 + n, UDP checksum 0): SEND, WRITE, READ request, ACK, FETCH_ADD, CMP_SWAP, CNP. Each
# goes through a raw socket with its own IPv4 header to a device on its destination address
# (10.0.18.1, UDP 4791: the CNP's ICRC covers both), in a network namespace of its own. Then
#   - as made: every one is received under its opcode and accepted by the ICRC solver
#     (counters_icrc solved, the ID each really had being none uroce uses), none is bad_icrc;
#   - the device's capture records each with the IPv4 ID it really had, and its ICRC verifies
#     over that header (scapy recomputes it);
#   - each with one bit flipped: every one dropped as bad_icrc, none accepted;
#   - the scapy packets with DF clear: bad_icrc by default; accepted (counters_icrc solved_nodf)
#     by a device started with --icrc-nodf on, which still accepts the DF ones.
# Three rounds with different seeds. Root only (namespace, raw socket): skips otherwise.
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root (a network namespace and a raw socket)"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) is not installed"
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
    skip "/usr/bin/python3 with scapy (python3-scapy) is not installed"
HERE=$(cd "$(dirname "$0")" && pwd)
SEND="$HERE/golden_packets.py"
CNP="$HERE/../data/golden/connectx4lx_cnp.txt"
STORED="$HERE/../data/golden/scapy_rxe_like.txt"
ADDR=10.0.18.1
NS=uroce-$$-golden
DIR=$UROCE_RUNTIME_DIR/host
IN_NS=(ip netns exec "$NS" env "UROCE_RUNTIME_DIR=$DIR" UROCE_UDP_PORT=4791)
PCAP=$DIR/golden.pcap

golden_exit() {
    local rc=$? pid
    "${IN_NS[@]}" "$UROCE" stop >/dev/null 2>&1 || true
    for pid in $(ip netns pids "$NS" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del "$NS" 2>/dev/null || true
    (exit $rc)
    cleanup
}
trap golden_exit EXIT
echo "$NS" >>"$UROCE_RUNTIME_DIR/netns"  # lib.sh's watchdog deletes it if the test is killed
ip netns add "$NS" 2>/dev/null || skip "ip netns add is not allowed here"
ip -n "$NS" link set lo up || fail "lo up in $NS"
ip -n "$NS" addr add "$ADDR/32" dev lo || fail "cannot put $ADDR on the namespace's lo"
mkdir -m 700 "$DIR" || fail "mkdir $DIR"
"${IN_NS[@]}" "$UROCE" start --name uroce0 --addr "$ADDR" --pcap "$PCAP" >/dev/null ||
    fail "uroce start on $ADDR:4791"

counters() { "${IN_NS[@]}" "$UROCE" counters uroce0 || fail "uroce counters"; }
counter() {  # counter TEXT LINE_TAG KEY
    echo "$1" | awk -v t="$2" -v k="$3" '
        $1 == t { for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); f = 1 } }
        END { if (!f) exit 1 }' || fail "uroce counters has no $2 $3"
}
drop() { echo "$1" | awk -v r="$2" '$1 == "drop" && $2 == r { print $3 }'; }
op_rx() {
    echo "$1" | awk -v op="$2" '$1 == "counters_op" && $2 == "rx" && $3 == op { v = $5 }
        END { print v + 0 }'
}

# send MODE SEED: sends, waits until the device received all of it, prints the counter deltas.
send() {
    local mode=$1 seed=$2 before after total want
    before=$(counters)
    "${IN_NS[@]}" /usr/bin/python3 "$SEND" "$ADDR" "$CNP" --seed "$seed" "--$mode" \
        --stored "$STORED" \
        >"$RT_OUT" || fail "golden_packets.py --$mode failed: $(cat "$RT_OUT")"
    cat "$RT_OUT"
    total=$(awk '$1 == "total" { print $2 }' "$RT_OUT")
    want=$(( $(counter "$before" counters rx_pkts) + total ))
    for _ in $(seq 250); do
        after=$(counters)
        [ "$(counter "$after" counters rx_pkts)" -ge "$want" ] && break
        sleep 0.02
    done
    [ "$(counter "$after" counters rx_pkts)" = "$want" ] ||
        fail "the device received $(( $(counter "$after" counters rx_pkts) - want + total )) of $total packets"
    d_bad=$(( $(drop "$after" bad_icrc) - $(drop "$before" bad_icrc) ))
    d_solved=$(( $(counter "$after" counters_icrc solved) - $(counter "$before" counters_icrc solved) ))
    d_nodf=$(( $(counter "$after" counters_icrc solved_nodf) - $(counter "$before" counters_icrc solved_nodf) ))
    d_any=0
    for k in id0 train solved solved_nodf unchecked; do
        d_any=$(( d_any + $(counter "$after" counters_icrc "$k") - $(counter "$before" counters_icrc "$k") ))
    done
    local n op got
    while read -r n op; do
        got=$(( $(op_rx "$after" "$op") - $(op_rx "$before" "$op") ))
        [ "$got" = "$n" ] || fail "counters_op rx $op went up by $got, $n were sent"
    done < <(awk '$1 == "sent" { print $2 }' "$RT_OUT" | sort | uniq -c)
    echo "--- $mode seed $seed: $total sent, bad_icrc +$d_bad, accepted +$d_any (solved +$d_solved)"
    SENT_TOTAL=$total
}
RT_OUT=$UROCE_RUNTIME_DIR/golden.out

rejected=0  # packets sent that the device must drop as bad_icrc
for seed in 1 2 3; do
    send good "$seed"
    [ "$d_bad" = 0 ] || fail "$d_bad golden packets were dropped as bad_icrc"
    [ "$d_solved" = "$SENT_TOTAL" ] && [ "$d_any" = "$SENT_TOTAL" ] ||
        fail "of $SENT_TOTAL golden packets, $d_any were accepted, $d_solved by the ID solver"
    grep '^sent ' "$RT_OUT" | awk '{ print $3 }' >>"$UROCE_RUNTIME_DIR/ids"
    send flipped "$seed"
    [ "$d_bad" = "$SENT_TOTAL" ] || fail "$d_bad of $SENT_TOTAL flipped packets dropped as bad_icrc"
    [ "$d_any" = 0 ] || fail "$d_any flipped packets were accepted"
    rejected=$(( rejected + SENT_TOTAL ))
done
send nodf 4
[ "$d_bad" = "$SENT_TOTAL" ] && [ "$d_any" = 0 ] ||
    fail "DF clear without --icrc-nodf: $d_bad of $SENT_TOTAL bad_icrc, $d_any accepted"
rejected=$(( rejected + SENT_TOTAL ))

# The capture: the packets accepted carry the ID they were sent with, and the ICRC verifies over
# the recorded header (scapy recomputes it); the rejected ones are recorded too, with ID 0.
"${IN_NS[@]}" "$UROCE" stop >/dev/null || fail "uroce stop"  # flushes the capture
/usr/bin/python3 - "$PCAP" "$UROCE_RUNTIME_DIR/ids" "$rejected" <<'EOF' || fail "the capture does not show the real IDs"
import sys
from scapy.all import rdpcap, raw, Ether, IP
from scapy.contrib.roce import BTH
want = [int(l, 16) for l in open(sys.argv[2])]
got, bad = [], 0
for p in rdpcap(sys.argv[1]):
    e = Ether(raw(p))
    stored = e[BTH].icrc
    del e[BTH].icrc
    if Ether(raw(e))[BTH].icrc == stored:
        got.append(e[IP].id)
    else:
        bad += 1
print("capture: %d packets with a verifying ICRC, %d without" % (len(got), bad))
if got != want:
    print("IDs recorded %s, sent %s" % ([hex(i) for i in got], [hex(i) for i in want]))
    sys.exit(1)
if bad != int(sys.argv[3]):
    print("%s rejected packets sent, %d recorded without a verifying ICRC" % (sys.argv[3], bad))
    sys.exit(1)
EOF

# DF clear allowed.
"${IN_NS[@]}" "$UROCE" start --name uroce0 --addr "$ADDR" --icrc-nodf on >/dev/null ||
    fail "uroce start --icrc-nodf on"
counters | grep -q '^counters_icrc .* nodf on$' || fail "counters_icrc does not show nodf on"
send nodf 5
[ "$d_nodf" = "$SENT_TOTAL" ] && [ "$d_any" = "$SENT_TOTAL" ] && [ "$d_bad" = 0 ] ||
    fail "DF clear with --icrc-nodf on: $d_nodf of $SENT_TOTAL solved_nodf, $d_bad bad_icrc"
send good 6
[ "$d_solved" = "$SENT_TOTAL" ] && [ "$d_bad" = 0 ] ||
    fail "DF set with --icrc-nodf on: $d_solved of $SENT_TOTAL solved, $d_bad bad_icrc"
echo PASS
