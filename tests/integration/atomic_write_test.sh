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

# Wireshark 4.0 (Debian 12) does not know opcode 0x1d: it shows "Unknown (29)" and the rest
# as Unknown/Vendor Specific Data (RETH, payload and ICRC undissected); a Wireshark that knows
# it dissects the RETH (docs/capture.md). Both are checked for what they show.
check_requests() {
    local f=$1 req=$2
    if [ "$3" = 0 ]; then
        # The undissected bytes: VA (8), R_Key (4), DMA length 8 (4), the 8 bytes, ICRC (4).
        echo "$req" | awk 'length($1) != 56 || substr($1, 25, 8) != "00000008" { exit 1 }' ||
            fail "$f: request bytes are not RETH (DMA length 8) + 8 bytes + ICRC: $req"
        # The two values the program wrote, in memory order.
        echo "$req" | grep -q '^.\{32\}8877665544332211' ||
            fail "$f: the ibv_wr_atomic_write value is not in its request"
        echo "$req" | grep -q '^.\{32\}11100f0e0d0c0b0a' ||
            fail "$f: the ibv_post_send value is not in its request"
    else
        # The requests: RETH with DMA length 8, then 8 bytes of data.
        echo "$req" | awk 'NF && ($1 != 8 || $2 != 8) { exit 1 }' ||
            fail "$f: a request without DMA length 8 and 8 bytes of data: $req"
    fi
    # Each answered by an RDMA READ Response Only (0x10) with an ACK AETH and no data.
    check_empty_read_responses "$f" 2
    echo "$f: 2 RC_ATOMIC_WRITE requests with their 8 bytes, 2 empty RDMA READ responses"
}

new_opcode_pair_test "$prog" 0x1d 2 awa 127.0.0.12 awb 127.0.0.13 \
    "awa tx RC_ATOMIC_WRITE 2" "awb rx RC_ATOMIC_WRITE 2" "awb tx RC_RDMA_READ_RESPONSE_ONLY 2" \
    "awa rx RC_RDMA_READ_RESPONSE_ONLY 2"
