#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance for RDMA ATOMIC WRITE (docs/verbs-support.md): PROGRAM (atomic_write_pair) runs
# a requester process on device awa and a responder process on awb, both capturing; then
#   - the 8 bytes landed and nothing else changed (the program checks),
#   - each device counted the RC_ATOMIC_WRITE requests (awa tx = awb rx = 2) and their
#     zero-length RDMA READ responses (awb tx = awa rx = 2),
#   - tshark dissects every captured frame without error and shows the two requests with
#     opcode 0x1d, their RETH (DMA length 8) and 8 bytes of data (with Wireshark 4.0, which
#     does not know the opcode, as undissected bytes), and the responses as RDMA READ
#     Response Only with an ACK AETH and no data,
#   - scapy recomputes the ICRC of every frame and agrees.
# usage: atomic_write_test.sh PROGRAM
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/capture_lib.sh"
prog=${1:?usage: atomic_write_test.sh PROGRAM}
need tshark

pa=$UROCE_RUNTIME_DIR/awa.pcap
pb=$UROCE_RUNTIME_DIR/awb.pcap
start_device awa 127.0.0.12 --pcap "$pa"
start_device awb 127.0.0.13 --pcap "$pb"

out=$UROCE_RUNTIME_DIR/prog.out
verbs timeout 60 "$prog" awa awb >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || fail "$(basename "$prog") exited $rc"
grep -q "^all checks passed$" "$out" || fail "the program did not finish its checks"

for c in "awa tx RC_ATOMIC_WRITE" "awb rx RC_ATOMIC_WRITE" "awb tx RC_RDMA_READ_RESPONSE_ONLY" \
         "awa rx RC_RDMA_READ_RESPONSE_ONLY"; do
    set -- $c
    n=$(op_pkts "$1" "$2" "$3")
    echo "$c: $n"
    [ "$n" = 2 ] || fail "$c: $n packets, want 2"
done

"$UROCE" capture stop >/dev/null || fail "uroce capture stop"
# Wireshark 4.0 (Debian 12) does not know opcode 0x1d: it shows "Unknown (29)" and the rest
# as Unknown/Vendor Specific Data (RETH, payload and ICRC undissected); a Wireshark that knows
# it dissects the RETH (docs/capture.md). Both are checked for what they show.
knows=$(ts "$pa" -Y 'infiniband.bth.opcode == 0x1d' | grep -c -v 'Unknown OpCode') || true
for f in "$pa" "$pb"; do
    check_decodes "$f"
    check_icrc "$f" "$(frames "$f")"
    if [ "$knows" -gt 0 ]; then
        # The requests: RETH with DMA length 8, then 8 bytes of data.
        req=$(ts "$f" -Y 'infiniband.bth.opcode == 0x1d' -T fields -e infiniband.reth.dmalen \
                  -e data.len) || exit 1
        echo "$req" | awk 'NF && ($1 != 8 || $2 != 8) { exit 1 }' ||
            fail "$f: a request without DMA length 8 and 8 bytes of data: $req"
    else
        # The undissected bytes: VA (8), R_Key (4), DMA length 8 (4), the 8 bytes, ICRC (4).
        req=$(ts "$f" -Y 'infiniband.bth.opcode == 0x1d' -T fields -e infiniband.vendor |
              awk -F, '{ print $NF }') || exit 1
        echo "$req" | awk 'length($1) != 56 || substr($1, 25, 8) != "00000008" { exit 1 }' ||
            fail "$f: request bytes are not RETH (DMA length 8) + 8 bytes + ICRC: $req"
        # The two values the program wrote, in memory order.
        echo "$req" | grep -q '^.\{32\}8877665544332211' ||
            fail "$f: the ibv_wr_atomic_write value is not in its request"
        echo "$req" | grep -q '^.\{32\}11100f0e0d0c0b0a' ||
            fail "$f: the ibv_post_send value is not in its request"
    fi
    [ "$(echo "$req" | grep -c .)" = 2 ] || fail "$f: $(echo "$req" | grep -c .) requests, want 2"
    # Each answered by an RDMA READ Response Only (0x10) with an ACK AETH and no data.
    resp=$(ts "$f" -Y 'infiniband.bth.opcode == 0x10' -T fields -e infiniband.aeth.syndrome \
               -e data.len) || exit 1
    [ "$(echo "$resp" | grep -c .)" = 2 ] || fail "$f: responses: $resp"
    echo "$resp" | awk '$1 != 31 || $2 != "" { exit 1 }' ||
        fail "$f: a response that is not an empty ACK (syndrome 31): $resp"
    echo "$f: 2 RC_ATOMIC_WRITE requests with their 8 bytes, 2 empty RDMA READ responses"
done
echo PASS
