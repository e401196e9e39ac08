#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance for memory windows, invalidation and fences (docs/memory-windows.md): the
# GoogleTest program PROGRAM runs over two devices, each capturing its traffic; then
#   - neither device holds an object the program made (windows included),
#   - SEND_WITH_INVALIDATE went out of one device and into the other, counted per opcode
#     alike on both sides,
#   - tshark decodes every captured frame, nothing is malformed, and each invalidating SEND
#     carries its IETH.
# usage: mw_inv_test.sh PROGRAM
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/capture_lib.sh"
prog=${1:?usage: mw_inv_test.sh PROGRAM}
need tshark

start_capturing_pair mwa 127.0.0.6 mwb 127.0.0.7

out=$UROCE_RUNTIME_DIR/prog.out
UROCE_MW_DEV_A=mwa UROCE_MW_DEV_B=mwb UROCE_CLI=$UROCE verbs timeout 120 "$prog" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || fail "$(basename "$prog") exited $rc"

# A process that dies holding bound windows of both types leaves nothing behind either.
UROCE_MW_KILL=1 UROCE_MW_DEV_A=mwa UROCE_MW_DEV_B=mwb verbs timeout 60 "$prog" \
    --gtest_filter=MwTest.KilledWithBoundWindows >"$out" 2>&1
rc=$?
[ $rc = 137 ] || { cat "$out"; fail "the killed program exited $rc, expected SIGKILL (137)"; }

sleep 0.2  # the devices close the session when they see the socket hang up
for dev in mwa mwb; do
    counts=$("$UROCE" res "$dev" | grep '^counts ') || fail "uroce res $dev"
    echo "$dev: $counts"
    echo "$counts" | awk '{ for (i = 2; i < NF; i += 2) if ($(i + 1) != 0) exit 1 }' ||
        fail "objects remain on $dev after the program exited: $counts"
done

for op in RC_SEND_ONLY_WITH_INVALIDATE RC_SEND_LAST_WITH_INVALIDATE XRC_SEND_ONLY_WITH_INVALIDATE \
          XRC_SEND_LAST_WITH_INVALIDATE; do
    tx=$(op_pkts mwa tx $op)
    rx=$(op_pkts mwb rx $op)
    echo "$op: mwa tx $tx, mwb rx $rx"
    [ "$tx" -gt 0 ] || fail "mwa sent no $op"
    [ "$tx" = "$rx" ] || fail "$op: mwa sent $tx, mwb received $rx"
done

"$UROCE" capture stop >/dev/null || fail "uroce capture stop"
# Wireshark 4.0's RPC-over-RDMA heuristic throws on any SEND with an empty payload (a plain
# zero-length RC_SEND_ONLY as well) and marks the frame malformed; the program sends
# empty SEND_WITH_INVALIDATEs on purpose, and none of its payloads is RPC-over-RDMA.
TSHARK_EXTRA=(--disable-protocol rpcordma)
for f in "$pa" "$pb"; do
    check_decodes "$f"
    # One line per SEND_{LAST,ONLY}_WITH_INVALIDATE: its IETH R_Key (empty if none decoded).
    keys=$(ts "$f" -Y 'infiniband.bth.opcode == 0x16 || infiniband.bth.opcode == 0x17' \
              -T fields -e infiniband.ieth) || exit 1
    inv=$(echo "$keys" | grep -c .)
    ieth=$(echo "$keys" | grep -c -E '^[0-9a-f]{8}(,|$)')
    [ "$inv" -gt 0 ] || fail "$f holds no SEND_WITH_INVALIDATE"
    [ "$ieth" = "$inv" ] || fail "$f: $inv invalidating SENDs but $ieth with an IETH: $keys"
    echo "$f: $inv SEND_WITH_INVALIDATE frames, each with its IETH"
done
echo PASS
