#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Corrupted packets (docs/counters.md): while an unmodified `ibv_rc_pingpong -n 20000` pair runs
# over one device, bad_packets.py sends crafted datagrams to the device's UDP port, aimed at the
# pingpong's QPs: bad ICRC, truncated (0 bytes, shorter than a BTH, missing RETH), pad beyond
# the payload, a header-only opcode with stray bytes, BTH version 1, an unknown opcode, a wrong
# P_Key, a nonexistent destination QP, a UD SEND to an RC QP. Then
#   - each drop reason in `uroce counters` went up by exactly what was sent for it, every other
#     reason by 0; per-opcode rx counts went up by exactly what was sent; the RC QPs count the
#     UD SEND drops aimed at them (qp_counters ... drop op_not_for_qp);
#   - the pingpong completes (both sides exit 0) and the device sent nothing but the
#     pingpong's SEND FIRST/MIDDLE/LAST and ACKs, in the numbers the iterations need;
#   - per-opcode counters: per device, tx_pkts/tx_bytes/rx_pkts/rx_bytes equal the sums over
#     opcodes; per QP (snapshot while the pingpong runs), the qp line's tx/rx equal the sums of
#     its qp_counters lines, and each QP sent SENDs and ACKs.
# If the pingpong ended before the injection did (a loaded machine), the run proves nothing and
# is repeated with 4x the iterations (up to three tries).
# usage: bad_packets_test.sh [ITERS] [COUNT]
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
[ -x /usr/bin/python3 ] || skip "/usr/bin/python3 is not installed"
INJECT="$(cd "$(dirname "$0")" && pwd)/bad_packets.py"

ITERS=${1:-2000}
COUNT=${2:-20}
UDP=${UROCE_UDP_PORT:-4791}
TCP=$(tcp_port)
DEV=uroce0
RT=$UROCE_RUNTIME_DIR

# field TEXT AWK_CONDITION COLUMN: the column of the one line matching the condition, or 0.
field() {
    echo "$1" | awk "$2 { v = \$$3; n++ } END { if (n > 1) exit 1; print v + 0 }" ||
        fail "more than one line matches $2"
}
drop() { field "$1" "\$1 == \"drop\" && \$2 == \"$2\"" 3; }
op_pkts() { field "$1" "\$1 == \"counters_op\" && \$2 == \"$2\" && \$3 == \"$3\"" 5; }
counter() {
    echo "$1" | awk -v k="$2" '
        $1 == "counters" { for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); found = 1 } }
        END { if (!found) exit 1 }' || fail "uroce counters has no $2"
}
# sum TEXT AWK_CONDITION COLUMN: the sum of the column over the matching lines.
sum() { echo "$1" | awk "$2 { s += \$$3 } END { print s + 0 }"; }

start_device "$DEV" 127.0.0.1

# One run: the pingpong pair in the background (run_pair fails unless both sides do all their
# iterations and exit 0), the injection once both QPs are in RTS, a snapshot right after it.
# Returns 3 when the pingpong ended before the injection did (a loaded machine can delay the
# injector past a short pingpong): the run proved nothing, and the caller retries longer.
attempt() {
    local iters=$1 tcp=$2 prc
    base=$("$UROCE" counters "$DEV") || fail "uroce counters"
    (
        run_pair ibv_rc_pingpong -g 0 -p "$tcp" -n "$iters" -- \
            ibv_rc_pingpong -g 0 -p "$tcp" -n "$iters" 127.0.0.1
        grep -q "$iters iters in" "$RT/client.out" || fail "client did not report $iters iterations"
    ) >"$RT/pair.log" 2>&1 &
    pair=$!

    qpns=""
    for _ in $(seq 400); do
        qpns=$(rts_qps | paste -sd, -)
        [ "$(echo "$qpns" | tr ',' '\n' | grep -c .)" = 2 ] && break
        kill -0 $pair 2>/dev/null || break
        sleep 0.02
    done
    [ "$(echo "$qpns" | tr ',' '\n' | grep -c .)" = 2 ] || {
        cat "$RT/pair.log"
        fail "the pingpong's two RC QPs never reached RTS (have: '$qpns')"
    }
    echo "pingpong QPs: $qpns ($iters iterations)"

    before=$("$UROCE" counters "$DEV") || fail "uroce counters"
    /usr/bin/python3 "$INJECT" 127.0.0.1 "$UDP" "$qpns" --count "$COUNT" >"$RT/inject.out" ||
        fail "bad_packets.py failed: $(cat "$RT/inject.out")"
    # A snapshot while the pingpong still runs: proves the bad packets were interleaved with
    # its traffic, and the per-QP counters can only be read while the QPs exist.
    mid=$("$UROCE" res "$DEV") || fail "uroce res"
    cat "$RT/inject.out"
    zero_sent=$(( zero_sent + $(awk '$1 == "zero_length" { print $2 }' "$RT/inject.out") ))

    wait $pair
    prc=$?
    cat "$RT/pair.log"
    [ $prc = 0 ] || fail "the pingpong failed (exit $prc) while bad packets were injected"
    after=$("$UROCE" counters "$DEV") || fail "uroce counters"
    echo "--- uroce counters after the run"
    echo "$after"
    for q in ${qpns//,/ }; do
        echo "$mid" | grep -q "^qp $q .* state RTS " || return 3
    done
}

# The pingpong's QPs, once both are in RTS (qp 0xN type RC state RTS ...).
rts_qps() {
    "$UROCE" res "$DEV" | awk '$1 == "qp" {
        for (i = 3; i < NF; i++) { if ($i == "type") t = $(i + 1); if ($i == "state") s = $(i + 1) }
        if (t == "RC" && s == "RTS") print $2 }'
}

zero_sent=0  # 0-byte datagrams over all tries: the device counts them under no opcode
for try in 1 2 3; do
    rc=0
    attempt "$ITERS" $(( TCP + try )) || rc=$?
    [ $rc = 3 ] || break
    echo "--- the pingpong ended before the injection did: again with $(( ITERS * 4 )) iterations"
    ITERS=$(( ITERS * 4 ))
done
[ $rc = 0 ] || fail "the pingpong ended before the injection in every try"

# 1. Every bad packet was dropped under its reason, exactly; nothing else was dropped.
for r in $(echo "$after" | awk '$1 == "drop" { print $2 }'); do
    want=$(sum "$(cat "$RT/inject.out")" "\$1 == \"sent\" && \$5 == \"$r\"" 3)
    got=$(( $(drop "$after" "$r") - $(drop "$before" "$r") ))
    [ "$got" = "$want" ] || fail "drop $r went up by $got, expected $want"
    echo "drop $r +$got (expected $want)"
done
for r in $(awk '$1 == "sent" { print $5 }' "$RT/inject.out" | sort -u); do
    echo "$after" | grep -q "^drop $r " || fail "uroce counters has no drop reason $r"
done

# 2. Per-opcode rx went up by exactly the bad datagrams of that first byte (the pingpong uses
#    none of these opcodes but the ACK).
while read -r _ name k; do
    got=$(( $(op_pkts "$after" rx "$name") - $(op_pkts "$before" rx "$name") ))
    if [ "$name" = RC_ACKNOWLEDGE ]; then
        [ "$got" -ge "$k" ] || fail "counters_op rx $name went up by $got, sent $k bad ones alone"
    else
        [ "$got" = "$k" ] || fail "counters_op rx $name went up by $got, expected $k"
    fi
done < <(grep '^rx_op ' "$RT/inject.out")

# 3. Per QP (snapshot): drops of the UD SENDs aimed at it, SENDs and ACKs sent, and the qp
#    line's tx/rx equal to the sums of its per-opcode counters.
for q in ${qpns//,/ }; do
    want=$(awk -v q="$q" '$1 == "qp_drop" && $2 == q { print $4 }' "$RT/inject.out")
    got=$(field "$mid" "\$1 == \"qp_counters\" && \$2 == \"$q\" && \$3 == \"drop\" && \$4 == \"op_not_for_qp\"" 5)
    [ "$got" = "$want" ] || fail "QP $q counts $got op_not_for_qp drops, $want were aimed at it"
    for op in RC_SEND_FIRST RC_SEND_LAST RC_ACKNOWLEDGE; do
        n=$(field "$mid" "\$1 == \"qp_counters\" && \$2 == \"$q\" && \$3 == \"tx\" && \$4 == \"$op\"" 6)
        [ "$n" -gt 0 ] || fail "QP $q: no tx $op in its per-opcode counters"
    done
    for dir in tx rx; do
        line=$(echo "$mid" | awk -v q="$q" -v d="$dir" '$1 == "qp" && $2 == q {
            for (i = 3; i < NF; i++) if ($i == d) print $(i + 1) }')
        s=$(sum "$mid" "\$1 == \"qp_counters\" && \$2 == \"$q\" && \$3 == \"$dir\"" 6)
        [ -n "$line" ] && [ "$line" = "$s" ] ||
            fail "QP $q: $dir '$line' on its qp line, $s in its qp_counters $dir lines"
        echo "QP $q: $dir $line = sum over opcodes"
    done
done

# 4. The device sent only the pingpong's traffic, in the numbers ITERS iterations of 4096-byte
#    messages over a 1024-byte MTU need (both sides: FIRST, 2 MIDDLE, LAST per message).
txops=$(echo "$after" | awk '$1 == "counters_op" && $2 == "tx" { print $3 }' | sort | tr '\n' ' ')
[ "$txops" = "RC_ACKNOWLEDGE RC_SEND_FIRST RC_SEND_LAST RC_SEND_MIDDLE " ] ||
    fail "tx opcodes: $txops; expected only the pingpong's SENDs and ACKs"
retx=$(counter "$after" retransmits)
for spec in RC_SEND_FIRST:2 RC_SEND_MIDDLE:4 RC_SEND_LAST:2; do
    op=${spec%:*}
    want=$(( ${spec#*:} * ITERS ))
    got=$(( $(op_pkts "$after" tx "$op") - $(op_pkts "$base" tx "$op") ))
    if [ "$retx" = 0 ]; then
        [ "$got" = "$want" ] || fail "counters_op tx $op = $got, expected $want"
    else
        [ "$got" -ge "$want" ] || fail "counters_op tx $op = $got, expected at least $want"
    fi
done

# 5. Device totals equal the sums over opcodes (0-byte datagrams have no opcode).
for spec in tx_pkts:tx:5:0 tx_bytes:tx:7:0 rx_pkts:rx:5:$zero_sent rx_bytes:rx:7:0; do
    IFS=: read -r name dir col extra <<<"$spec"
    total=$(counter "$after" "$name")
    s=$(sum "$after" "\$1 == \"counters_op\" && \$2 == \"$dir\"" "$col")
    [ "$total" = $(( s + extra )) ] ||
        fail "$name = $total, but the counters_op $dir lines sum to $s (+ $extra without opcode)"
    echo "$name $total = sum over opcodes + $extra"
done
echo PASS
