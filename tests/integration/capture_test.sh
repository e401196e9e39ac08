#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance for the packet capture (docs/capture.md): unmodified ibv_rc_pingpong over one
# device, its traffic recorded to a pcap, then
#   - tshark decodes every frame as InfiniBand over RoCEv2 with nothing malformed and no
#     expert error,
#   - the file holds exactly the packets the device counted (tx_pkts + rx_pkts; on one
#     loopback device every packet is recorded twice, once sent and once received),
#   - every ICRC equals scapy's (tests/unit/icrc_scapy_check.py).
# usage: capture_test.sh rc_pingpong [pingpong args...]   capture from `uroce start --pcap`
#        capture_test.sh runtime [pingpong args...]       `uroce capture start/stop` on a
#                                                         running device, and rotation
#        capture_test.sh program PROG [args...]           the same checks as rc_pingpong over
#                                                         `PROG -p PORT args` and its client
#                                                         (`... 127.0.0.1`): every other
#                                                         acceptance program's capture
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/capture_lib.sh"
need ibv_rc_pingpong
need tshark
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null ||
    skip "python3-scapy is not installed (run scripts/setup.sh)"

mode=${1:?usage: capture_test.sh rc_pingpong|runtime [pingpong args...]}
shift
TCP=$(tcp_port)
DEV=uroce0

# counter TEXT NAME: a device counter from the output of `uroce counters`.
counter() {
    echo "$1" | awk -v k="$2" '
        $1 == "counters" { for (i = 2; i < NF; i++) if ($i == k) { print $(i + 1); found = 1 } }
        END { if (!found) exit 1 }' || fail "uroce counters has no $2"
}

# Checks that `uroce counters` reports sent/received packets and drops by reason, and that
# a clean loopback run dropped nothing (but for the reasons in ALLOWED_DROPS). Prints
# tx_pkts + rx_pkts.
ALLOWED_DROPS=""
packets_counted() {
    local text
    text=$("$UROCE" counters "$DEV") || fail "uroce counters $DEV"
    echo "$text" >&2
    echo "$text" | grep -q "^device $DEV\$" || fail "uroce counters does not name the device"
    echo "$text" | grep -q "^drop bad_icrc [0-9]" || fail "uroce counters shows no drops by reason"
    local dropped
    dropped=$(echo "$text" | awk -v ok=" $ALLOWED_DROPS " '
        $1 == "drop" && index(ok, " " $2 " ") == 0 { s += $3 } END { print s + 0 }')
    [ "$dropped" = 0 ] || fail "the device dropped $dropped packets of a clean run"
    local tx rx
    tx=$(counter "$text" tx_pkts) || exit 1
    rx=$(counter "$text" rx_pkts) || exit 1
    echo $(( tx + rx ))
}

pingpong() {
    run_pair ibv_rc_pingpong -g 0 -p "$TCP" "$@" -- ibv_rc_pingpong -g 0 -p "$TCP" "$@" 127.0.0.1
    grep -q "iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "client did not report its iterations"
}

info_pcap() {
    awk -F= '$1 == "pcap" { print $2 }' "$UROCE_RUNTIME_DIR/$DEV.info"
}

case $mode in
program)
    prog=${1:?usage: capture_test.sh program PROG [args...]}
    shift
    need "$prog"
    pcap=$UROCE_RUNTIME_DIR/prog.pcap
    start_device "$DEV" 127.0.0.1 --pcap "$pcap"
    run_pair "$prog" -p "$TCP" "$@" -- "$prog" -p "$TCP" "$@" 127.0.0.1
    # A side that exits first destroys its QPs while the peer's last ACKs may still be on
    # the way: those are dropped as for a QP that no longer exists, as on hardware.
    ALLOWED_DROPS=bad_qp
    n=$(packets_counted) || exit 1
    "$UROCE" capture stop "$DEV" >/dev/null
    check_capture "$pcap" "$n"
    ;;
rc_pingpong)
    pcap=$UROCE_RUNTIME_DIR/rc.pcap
    start_device "$DEV" 127.0.0.1 --pcap "$pcap"
    pingpong "$@"
    n=$(packets_counted) || exit 1
    # The engine flushes once per loop turn, so an idle device's capture is complete on disk
    # while it is still open.
    live=$(frames "$pcap") || exit 1
    [ "$live" = "$n" ] || fail "open capture holds $live frames, the device counted $n packets"
    "$UROCE" capture stop "$DEV" | tee "$UROCE_RUNTIME_DIR/stop.out"
    grep -q "capture stopped, $n packets" "$UROCE_RUNTIME_DIR/stop.out" ||
        fail "uroce capture stop did not report $n packets"
    got=$(frames "$pcap") || exit 1
    [ "$got" = "$n" ] || fail "capture holds $got frames, uroce counters says tx+rx = $n"
    check_decodes "$pcap"
    # RC SEND First/Middle/Last (pingpong's 4096-byte messages over a 1024 MTU) and ACK.
    ops=$(ts "$pcap" -T fields -e infiniband.bth.opcode | sort -nu | tr '\n' ' ') || exit 1
    echo "opcodes: $ops"
    for op in 0 1 2 17; do
        case " $ops" in *" $op "*) ;; *) fail "no opcode $op in the capture (have: $ops)" ;; esac
    done
    check_icrc "$pcap" "$n"
    ;;
runtime)
    start_device "$DEV" 127.0.0.1
    [ -z "$(info_pcap)" ] || fail "a device started without --pcap lists a capture"
    n0=$(packets_counted) || exit 1
    # A relative FILE is taken from the caller's directory.
    (cd "$UROCE_RUNTIME_DIR" && "$UROCE" capture start live.pcap "$DEV") ||
        fail "uroce capture start"
    pcap=$UROCE_RUNTIME_DIR/live.pcap
    [ "$(info_pcap)" = "$pcap" ] || fail "info file pcap=$(info_pcap), expected $pcap"
    "$UROCE" list | grep -q " pcap $pcap\$" || fail "uroce list does not show the capture"
    pingpong "$@"
    n1=$(packets_counted) || exit 1
    "$UROCE" capture stop "$DEV" | tee "$UROCE_RUNTIME_DIR/stop.out"
    [ -z "$(info_pcap)" ] || fail "info file still lists $(info_pcap) after capture stop"
    "$UROCE" list | grep -q " pcap -\$" || fail "uroce list still shows a capture"
    n=$(( n1 - n0 ))
    grep -q "capture stopped, $n packets" "$UROCE_RUNTIME_DIR/stop.out" ||
        fail "uroce capture stop did not report $n packets"
    [ -s "$pcap" ] || fail "$pcap is empty"
    check_capture "$pcap" "$n"
    # Stopped means stopped: more traffic does not reach the file.
    size=$(stat -c %s "$pcap")
    pingpong -n 10
    [ "$(stat -c %s "$pcap")" = "$size" ] || fail "$pcap grew after capture stop"

    # Rotation: FILE is renamed FILE.1 before a packet would take it past --max-bytes.
    max=200000
    rot=$UROCE_RUNTIME_DIR/rot.pcap
    n0=$(packets_counted) || exit 1
    "$UROCE" capture start "$rot" --max-bytes $max "$DEV" || fail "uroce capture start --max-bytes"
    pingpong "$@"
    n1=$(packets_counted) || exit 1
    "$UROCE" capture stop "$DEV" | tee "$UROCE_RUNTIME_DIR/stop.out"
    n=$(( n1 - n0 ))
    grep -q "capture stopped, $n packets" "$UROCE_RUNTIME_DIR/stop.out" ||
        fail "uroce capture stop did not report $n packets"
    [ -f "$rot.1" ] || fail "no $rot.1 after $n packets with --max-bytes $max"
    [ ! -e "$rot.2" ] || fail "rotation kept more than one old file"
    kept=0
    for f in "$rot" "$rot.1"; do
        s=$(stat -c %s "$f")
        echo "$f: $s bytes"
        [ "$s" -le $max ] || fail "$f is $s bytes, over --max-bytes $max"
        check_decodes "$f"
        k=$(frames "$f") || exit 1
        kept=$(( kept + k ))
    done
    # Most traffic was rotated away; what is left is the newest, never more than was sent.
    [ "$kept" -lt "$n" ] || fail "rotated files hold $kept frames of $n: nothing was rotated away"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
echo PASS
