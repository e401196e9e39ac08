#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance for RDMA FLUSH (docs/verbs-support.md): PROGRAM (flush_pair) runs a requester
# process on device fla and a responder process on flb, both capturing; then
#   - the WRITE before the FLUSH landed, the FLUSHes completed with IBV_WC_FLUSH and the one to
#     an MR without the flush flags with IBV_WC_REM_ACCESS_ERR (the program checks),
#   - each device counted the 3 RC_FLUSH requests (fla tx = flb rx = 3) and the 2 zero-length
#     RDMA READ responses that answered the good ones (flb tx = fla rx = 2),
#   - tshark dissects every captured frame without error and shows the 3 requests with opcode
#     0x1c, their FETH (placement type, selectivity level) and RETH and no data (with
#     Wireshark 4.0, which does not know the opcode, as undissected bytes), the 2 responses as
#     RDMA READ Response Only with an ACK AETH and no data, and the NAK remote access error,
#   - scapy recomputes the ICRC of every frame and agrees.
# usage: flush_test.sh PROGRAM
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/capture_lib.sh"
prog=${1:?usage: flush_test.sh PROGRAM}
need tshark

# Wireshark 4.0 (Debian 12) does not know opcode 0x1c: it shows "Unknown (28)" and the rest as
# Unknown/Vendor Specific Data (FETH, RETH and ICRC undissected); a Wireshark that knows it
# dissects the FETH and RETH (docs/capture.md). Both are checked for what they show.
check_requests() {
    local f=$1 req=$2 want i bytes feth dmalen nak
    if [ "$3" -gt 0 ]; then
        echo "$req" | awk 'NF && ($1 != 128 && $1 != 0 && $1 != 64 || $2 != "") { exit 1 }' ||
            fail "$f: a request with data or an unexpected DMA length: $req"
    else
        # The undissected bytes: FETH (4), RETH: VA (8), R_Key (4), DMA length (4), ICRC (4).
        echo "$req" | awk 'length($1) != 48 { exit 1 }' ||
            fail "$f: request bytes are not FETH + RETH + ICRC (no data): $req"
        # In posting order: global range of 128 bytes, persistent whole MR (no range), global
        # range of 64 bytes (the MR without the flush flags).
        want=("00000001" "00000080" "00000012" "00000000" "00000001" "00000040")
        i=0
        while read -r bytes; do
            feth=${bytes:0:8}
            dmalen=${bytes:32:8}
            [ "$feth" = "${want[i]}" ] && [ "$dmalen" = "${want[i + 1]}" ] ||
                fail "$f: request $((i / 2 + 1)): FETH $feth DMA length $dmalen, want ${want[i]} ${want[i + 1]}"
            i=$((i + 2))
        done <<<"$req"
    fi
    # The good two are answered by an RDMA READ Response Only (0x10), ACK AETH, no data.
    check_empty_read_responses "$f" 2
    # The third by an ACKNOWLEDGE with NAK remote access error (syndrome 0x62).
    nak=$(frames "$f" 'infiniband.bth.opcode == 0x11 && infiniband.aeth.syndrome == 0x62') ||
        exit 1
    [ "$nak" = 1 ] || fail "$f: $nak NAKs remote access error, want 1"
    echo "$f: 3 RC_FLUSH requests (FETH, RETH, no data), 2 empty RDMA READ responses, 1 NAK"
}

new_opcode_pair_test "$prog" 0x1c 3 fla 127.0.0.14 flb 127.0.0.15 \
    "fla tx RC_FLUSH 3" "flb rx RC_FLUSH 3" "flb tx RC_RDMA_READ_RESPONSE_ONLY 2" \
    "fla rx RC_RDMA_READ_RESPONSE_ONLY 2"
