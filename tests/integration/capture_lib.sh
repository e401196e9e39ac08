# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# tshark helpers shared by the tests that check captures (docs/capture.md). Source after
# lib.sh.
UDP=${UROCE_UDP_PORT:-4791}
SCAPY_CHECK="$(cd "$(dirname "${BASH_SOURCE[0]}")/../unit" && pwd)/icrc_scapy_check.py"

# start_capturing_pair A ADDR_A B ADDR_B: starts devices A and B, capturing to $pa and $pb
# (NAME.pcap in the runtime directory).
start_capturing_pair() {
    pa=$UROCE_RUNTIME_DIR/$1.pcap
    pb=$UROCE_RUNTIME_DIR/$3.pcap
    start_device "$1" "$2" --pcap "$pa"
    start_device "$3" "$4" --pcap "$pb"
}

# check_pair_captures: stops the captures of start_capturing_pair; $pa and $pb each decode
# cleanly (check_decodes) and scapy agrees on every ICRC in them.
check_pair_captures() {
    local f
    "$UROCE" capture stop >/dev/null || fail "uroce capture stop"
    for f in "$pa" "$pb"; do
        check_decodes "$f"
        check_icrc "$f" "$(frames "$f")"
    done
}

# tshark FILE [args...]: Wireshark dissects RoCEv2 on UDP 4791 by default; each test has
# its own port, so say it is InfiniBand too. Fails the test if tshark itself fails (a bad
# filter must not read as "zero matches"). TSHARK_EXTRA (an array) adds options.
TSHARK_EXTRA=()
ts() {
    local file=$1
    shift
    local err=$UROCE_RUNTIME_DIR/tshark.err
    tshark -n -r "$file" -d "udp.port==$UDP,infiniband" "${TSHARK_EXTRA[@]}" "$@" 2>"$err" ||
        fail "tshark -r $file $*: $(grep -v 'Running as user' "$err")"
}

# frames FILE [display filter]: number of frames (matching the filter).
frames() {
    local out
    if [ $# -gt 1 ]; then
        out=$(ts "$1" -Y "$2" -T fields -e frame.number) || exit 1
    else
        out=$(ts "$1" -T fields -e frame.number) || exit 1
    fi
    [ -z "$out" ] && echo 0 || echo "$out" | wc -l
}

# check_decodes FILE: every frame is Ethernet/IPv4/UDP/InfiniBand with a BTH and an ICRC,
# nothing malformed, no expert error, in the summary and in the full (-V) dissection.
# Wireshark 4.0 names the XRC opcodes (0xa0-0xbf) but does not dissect their XRCETH (it
# shows the rest as a "Vendor Specific or Unknown Header Sequence", without the ICRC), and
# does not know RC FLUSH (0x1c) and RC ATOMIC WRITE (0x1d) at all, so for those a BTH suffices.
check_decodes() {
    local f=$1 total ib bad verbose
    total=$(frames "$f") || exit 1
    [ "$total" -gt 0 ] || fail "$f holds no packets"
    ib=$(frames "$f" 'eth && ip && udp && infiniband.bth.opcode && (infiniband.invariant.crc ||
        (infiniband.bth.opcode >= 0xa0 && infiniband.bth.opcode <= 0xbf) ||
        infiniband.bth.opcode == 0x1c || infiniband.bth.opcode == 0x1d)') || exit 1
    [ "$ib" = "$total" ] || fail "$f: $ib of $total frames decode as InfiniBand over RoCEv2"
    bad=$(frames "$f" '_ws.malformed || _ws.expert.severity >= error') || exit 1
    [ "$bad" = 0 ] || {
        ts "$f" -Y '_ws.malformed || _ws.expert.severity >= error' -V | head -80 >&2
        fail "$f: $bad malformed frames or expert errors"
    }
    # The verbose dissection: one "Frame N:" per packet, no malformed or error expert item.
    verbose=$(ts "$f" -V | awk '
        /^Frame [0-9]+:/ { n++ }
        /Malformed Packet|Severity level: Error|\[Expert Info \(Error/ { bad++ }
        END { print n + 0, bad + 0 }') || exit 1
    [ "$verbose" = "$total 0" ] ||
        fail "$f: tshark -V: frames/errors = $verbose, expected $total frames and no error"
    echo "$f: $total frames, all InfiniBand over RoCEv2, none malformed"
}

# check_capture FILE N: the whole check of a closed capture of N counted packets: it holds
# exactly N frames, every one decodes cleanly (check_decodes), scapy agrees on every ICRC
# (check_icrc); prints the opcodes seen.
check_capture() {
    local got
    got=$(frames "$1") || exit 1
    [ "$got" = "$2" ] || fail "$1 holds $got frames, the device counted $2 packets"
    check_decodes "$1"
    echo "opcodes: $(ts "$1" -T fields -e infiniband.bth.opcode | sort -nu | tr '\n' ' ')"
    check_icrc "$1" "$2"
}

# check_icrc FILE N: scapy recomputes the ICRC of all N packets and agrees.
check_icrc() {
    local out
    out=$(/usr/bin/python3 "$SCAPY_CHECK" "$1" --port "$UDP" 2>&1) || fail "scapy ICRC check: $out"
    echo "$out"
    [ "$out" = "checked $2 packets, 0 mismatches" ] || fail "scapy checked: $out, expected $2 packets"
}

# wireshark_knows FILE OPCODE: how many frames of OPCODE tshark names (0 where it shows them
# as "Unknown OpCode": Wireshark 4.0 for RC FLUSH 0x1c and RC ATOMIC WRITE 0x1d).
wireshark_knows() {
    ts "$1" -Y "infiniband.bth.opcode == $2" | grep -c -v 'Unknown OpCode' || true
}

# check_empty_read_responses FILE N: FILE holds N RDMA READ Response Only frames (0x10), each
# an ACK (AETH syndrome 31) with no data, as FLUSH and ATOMIC WRITE are answered.
check_empty_read_responses() {
    local resp
    resp=$(ts "$1" -Y 'infiniband.bth.opcode == 0x10' -T fields -e infiniband.aeth.syndrome \
               -e data.len) || exit 1
    [ "$(echo "$resp" | grep -c .)" = "$2" ] || fail "$1: responses: $resp"
    echo "$resp" | awk '$1 != 31 || $2 != "" { exit 1 }' ||
        fail "$1: a response that is not an empty ACK (syndrome 31): $resp"
}

# opcode_requests FILE OPCODE N KNOWS: the N request frames of OPCODE (FLUSH, ATOMIC WRITE),
# a line each: "DMA_LENGTH DATA_LENGTH" where tshark knows the opcode (KNOWS > 0, from
# wireshark_knows), else its undissected bytes after the BTH in hex. Fails the test (call it
# as `x=$(opcode_requests ...) || exit 1`) unless there are N.
opcode_requests() {
    local req
    if [ "$4" -gt 0 ]; then
        req=$(ts "$1" -Y "infiniband.bth.opcode == $2" -T fields -e infiniband.reth.dmalen \
                  -e data.len) || exit 1
    else
        req=$(ts "$1" -Y "infiniband.bth.opcode == $2" -T fields -e infiniband.vendor |
              awk -F, '{ print $NF }') || exit 1
    fi
    [ "$(echo "$req" | grep -c .)" = "$3" ] || fail "$1: $(echo "$req" | grep -c .) requests, want $3"
    echo "$req"
}

# new_opcode_pair_test PROGRAM OPCODE N A ADDR_A B ADDR_B COUNT...: the acceptance of a pair
# program (rc_pair.h) for an RC opcode Wireshark 4.0 does not know (FLUSH 0x1c, ATOMIC WRITE
# 0x1d): devices A and B capture, `PROGRAM A B` passes its checks, the devices counted each
# COUNT ("DEV tx|rx OPCODE_NAME N", expect_op_pkts), both captures decode cleanly and scapy
# agrees on their ICRCs, and each holds N requests of OPCODE; the script's check_requests
# FILE REQUESTS KNOWS then checks the requests (opcode_requests) and the rest of FILE.
new_opcode_pair_test() {
    local prog=$1 opcode=$2 n=$3 a=$4 b=$6 knows f req
    start_capturing_pair "$4" "$5" "$6" "$7"
    shift 7
    run_checks "$(basename "$prog")" 60 "$prog" "$a" "$b"
    expect_op_pkts "$@"
    check_pair_captures
    knows=$(wireshark_knows "$pa" "$opcode")
    for f in "$pa" "$pb"; do
        req=$(opcode_requests "$f" "$opcode" "$n" "$knows") || exit 1
        check_requests "$f" "$req" "$knows"
    done
    echo PASS
}
