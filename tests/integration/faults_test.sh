#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: RC under injected faults (docs/faults.md). Two devices, uroce0 on 127.0.0.4
# (the faulty one: its received and sent packets both pass through the injector, so every
# packet between the two devices is faulted exactly once) and uroce1 on 127.0.0.5.
# usage: faults_test.sh PROGRAM start SPEC [fault_transfer transfer args...]
#            faults from `uroce start --faults SPEC`
#        faults_test.sh PROGRAM runtime SPEC [fault_transfer transfer args...]
#            faults switched on at run time with `uroce faults SPEC uroce0`
#        faults_test.sh PROGRAM retry|rnr [args...]     no faults: the peer is gone / has no
#            receive posted
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: faults_test.sh PROGRAM MODE ...}
mode=${2:?usage: faults_test.sh PROGRAM MODE ...}
shift 2
out=$UROCE_RUNTIME_DIR/prog.out

# field LINE NAME: the number after NAME in LINE.
field() {
    echo "$1" | awk -v k="$2" '{ for (i = 1; i < NF; ++i) if ($i == k) { print $(i + 1); exit } }'
}

case $mode in
retry | rnr)
    start_device uroce0 127.0.0.4
    start_device uroce1 127.0.0.5
    run_checks "fault_transfer $mode" 120 "$prog" uroce0 uroce1 "$mode" "$@"
    echo PASS
    exit 0
    ;;
start | runtime) ;;
*) fail "unknown mode $mode" ;;
esac

spec=${1:?a fault spec}
shift
# A bad spec is refused with its reason, by the CLI and by the daemon.
"$UROCE" start --name bad --addr 127.0.0.4 --faults "loss=2" >/dev/null 2>"$UROCE_RUNTIME_DIR/bad.err" &&
    fail "uroce start accepted --faults loss=2"
grep -q "probability" "$UROCE_RUNTIME_DIR/bad.err" || fail "no reason given for loss=2: $(cat "$UROCE_RUNTIME_DIR/bad.err")"
"$UROCE_BUILD/bin/uroced" --name bad --addr 127.0.0.4 --faults "dup=0.1,delay=x" \
    2>"$UROCE_RUNTIME_DIR/bad.err" && fail "uroced accepted --faults delay=x"
grep -q "delay" "$UROCE_RUNTIME_DIR/bad.err" || fail "uroced gave no reason for delay=x"

if [ "$mode" = start ]; then
    start_device uroce0 127.0.0.4 --faults "$spec"
    start_device uroce1 127.0.0.5
else
    start_device uroce0 127.0.0.4
    start_device uroce1 127.0.0.5
    "$UROCE" faults "bogus=1" uroce0 >/dev/null 2>&1 && fail "uroce faults accepted bogus=1"
    "$UROCE" faults "$spec" uroce0 || fail "uroce faults $spec uroce0"
fi
before=$("$UROCE" res uroce0 | grep '^faults ' | head -1)
echo "$before"
# The spec the device runs with, seed included (replayable).
want=$(echo "$spec" | tr ',' '\n' | grep -v '^dir=' | sort)
got=$(echo "${before#faults }" | tr ',' '\n' | grep -v '^dir=' | sort)
[ "$want" = "$got" ] || fail "device runs '${before#faults }', want '$spec'"

start=$(date +%s.%N)
# On a failure the program shows the devices' QPs and counters before it exits.
export FAULT_TRANSFER_ON_FAIL="'$UROCE' res | grep -E '^(device|qp |counters |faults|drop)'"
verbs timeout 280 "$prog" uroce0 uroce1 transfer "$@" >"$out" 2>&1
rc=$?
end=$(date +%s.%N)
cat "$out"
counters=$("$UROCE" counters uroce0)
echo "$counters" | grep -E '^(faults|counters |drop bad_icrc)'
"$UROCE" counters uroce1 | grep -E '^(counters |drop bad_icrc)'
echo "elapsed $(awk "BEGIN { printf \"%.1f\", $end - $start }") s"
[ $rc = 0 ] || fail "fault_transfer exited $rc under $spec"
grep -q "^all checks passed$" "$out" || fail "fault_transfer did not finish its checks"

# The faults really happened, in both directions, and the transport recovered from them.
rx=$(echo "$counters" | grep '^faults rx ')
tx=$(echo "$counters" | grep '^faults tx ')
for line in "$rx" "$tx"; do
    for k in $(echo "$spec" | tr ',' '\n' | sed -n 's/^\(loss\|dup\|reorder\|corrupt\|delay\)=.*/\1/p'); do
        case $k in
        loss) name=dropped ;; dup) name=duplicated ;; reorder) name=reordered ;;
        corrupt) name=corrupted ;; delay) name=delayed ;;
        esac
        n=$(field "$line" "$name")
        [ -n "$n" ] && [ "$n" -gt 0 ] || fail "no packet was $name: $line"
    done
done
retx=$(field "$(echo "$counters" | grep '^counters ' | head -1)" retransmits)
[ -n "$retx" ] && [ "$retx" -gt 0 ] || fail "uroce0 retransmitted nothing under $spec"
if echo "$spec" | grep -q corrupt=; then
    bad=$(field "$("$UROCE" counters uroce1 | grep '^drop bad_icrc')" bad_icrc)
    [ -n "$bad" ] && [ "$bad" -gt 0 ] || fail "uroce1 counted no bad ICRC under $spec"
fi

# The packets crossed as UDP GSO/GRO trains (docs/performance.md), each still faulted on
# its own: data went both ways (WRITE and SEND one way, READ responses the other).
for d in uroce0 uroce1; do
    line=$("$UROCE" counters "$d" | grep '^counters_offload')
    echo "$d: $line"
    offloads_on "$d" || continue
    [ "$(field "$line" tx_trains)" -gt 0 ] || fail "$d sent no GSO train"
    [ "$(field "$line" rx_trains)" -gt 0 ] || fail "$d received no GRO train"
done

# Off at run time.
"$UROCE" faults off uroce0 | grep -q "uroce0: faults off" || fail "uroce faults off"
"$UROCE" res uroce0 | grep -qx "faults off" || fail "uroce res does not show faults off"
echo PASS
