# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# tshark helpers shared by the tests that check captures (docs/capture.md). Source after
# lib.sh.
UDP=${UROCE_UDP_PORT:-4791}
SCAPY_CHECK="$(cd "$(dirname "${BASH_SOURCE[0]}")/../unit" && pwd)/icrc_scapy_check.py"

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
