#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# librpma (Debian's librpma, docs/librpma.md) over the drop-in libibverbs and librdmacm:
# PROGRAM (tests/integration/rpma_tests.cpp) as a server process and a client process per
# round, ROUNDS rounds in a row, each with fresh processes (a race in connection set-up or
# teardown shows as one failed round). The programs check what they receive themselves
# (private data, bytes, immediates) and print an "ok" line; both must exit 0 and print it.
# usage: rpma_test.sh PROGRAM local|twohost CASE ROUNDS [CLIENTS]
#   local     one device on 127.0.0.1, server and client on it
#   twohost   the server on host A, the clients on host B (twohost_lib.sh; root only)
#   CASE      a case of rpma_tests (conn rw flush atomic msg rcq srq imm multi)
#   CLIENTS   srq: that many client processes at once against one server (default 3)
# Afterwards the devices hold no object.
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: rpma_test.sh PROGRAM local|twohost CASE ROUNDS [CLIENTS]}
where=${2:?usage: rpma_test.sh PROGRAM local|twohost CASE ROUNDS [CLIENTS]}
kase=${3:?usage: rpma_test.sh PROGRAM local|twohost CASE ROUNDS [CLIENTS]}
rounds=${4:?usage: rpma_test.sh PROGRAM local|twohost CASE ROUNDS [CLIENTS]}
clients=${5:-3}
[ -x "$prog" ] || skip "rpma_tests was not built: librpma-dev is not installed (scripts/setup.sh)"
PORT=$(tcp_port)

case $where in
local)
    start_device uroce0 127.0.0.1
    SERVER=(verbs)
    CLIENT=(verbs)
    addr=127.0.0.1
    ;;
twohost)
    . "$(dirname "$0")/twohost_lib.sh"
    twohost_setup
    SERVER=(on_host A)
    CLIENT=(on_host B)
    addr=$ADDR_A
    ;;
*) fail "unknown place $where" ;;
esac

ncl=1
[ "$kase" = srq ] && ncl=$clients
s=$UROCE_RUNTIME_DIR/server.out

# round N: one server and ncl clients, all must exit 0 within 30 s with their "ok" line.
round() {
    local n=$1 i rc=0 spid pids=()
    : >"$s"
    "${SERVER[@]}" timeout 30 "$prog" server "$kase" "$addr" "$PORT" "$n" "$ncl" >"$s" 2>&1 &
    spid=$!
    # The server prints "listening" once its endpoint listens.
    for i in $(seq 1 600); do
        grep -q '^listening$' "$s" && break
        kill -0 $spid 2>/dev/null || break
        sleep 0.01
    done
    for i in $(seq 1 "$ncl"); do
        # (srq: each client is told its index; the others take 1)
        "${CLIENT[@]}" timeout 30 "$prog" client "$kase" "$addr" "$PORT" "$n" "$i" \
            >"$UROCE_RUNTIME_DIR/client$i.out" 2>&1 &
        pids+=($!)
    done
    for i in $(seq 1 "$ncl"); do
        wait "${pids[$((i - 1))]}" || { echo "client $i exited $?"; rc=1; }
        grep -q "^client $kase round $n: ok" "$UROCE_RUNTIME_DIR/client$i.out" || rc=1
    done
    wait $spid || { echo "server exited $?"; rc=1; }
    grep -q "^server $kase round $n: ok" "$s" || rc=1
    if [ $rc != 0 ]; then
        echo "--- server"; cat "$s"
        for i in $(seq 1 "$ncl"); do echo "--- client $i"; cat "$UROCE_RUNTIME_DIR/client$i.out"; done
    fi
    return $rc
}

t0=$(date +%s%N)
for n in $(seq 1 "$rounds"); do
    round "$n" || fail "round $n of $rounds failed"
done
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
echo "--- last round"
cat "$s" "$UROCE_RUNTIME_DIR"/client*.out
echo "$kase: $rounds rounds passed ($where, $ms ms)"
if [ "$where" = local ]; then
    expect_no_objects uroce0
else
    sleep 0.2  # (as expect_no_objects: the device closes a session when it sees it hang up)
    for h in A B; do
        if [ $h = A ]; then pre=("${HOST_A[@]}"); else pre=("${HOST_B[@]}"); fi
        counts=$("${pre[@]}" "$UROCE" res uroce0 | grep '^counts ')
        echo "host $h uroce0: $counts"
        echo "$counts" | awk '{ for (i = 2; i < NF; i += 2) if ($(i + 1) != 0) exit 1 }' ||
            fail "objects remain on host $h"
    done
fi
echo PASS
