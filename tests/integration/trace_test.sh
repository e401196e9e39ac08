#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce trace` (docs/trace.md) over unmodified programs on one device, followed live by
# `uroce trace -f` from the start:
#   1. rping: the listener, the connect, the CM messages both ways (REQ, REP, RTU, DREQ,
#      DREP) and the CM events the device hands each process (CONNECT_REQUEST,
#      CONNECT_RESPONSE, ESTABLISHED, DISCONNECTED);
#   2. ibv_xsrq_pingpong: the XRC domain created through a file's inode by the server and
#      joined by the client, its TGT QPs, and the domain outliving the first close, then
#      destroyed by the last;
#   3. qp_scale (1,000 QPs): more lines than the device keeps: the reader is told how many it
#      missed;
#   4. `uroce trace -f` saw all of it, and exits 0 when the device stops.
# usage: trace_test.sh QP_SCALE
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: trace_test.sh QP_SCALE}
need rping
need ibv_xsrq_pingpong
RT=$UROCE_RUNTIME_DIR
start_device tr 127.0.0.1
"$UROCE" trace -f tr >"$RT/follow.out" 2>&1 &
follow=$!

# has TEXT PATTERN WHAT: TEXT has a line matching the extended regex PATTERN.
has() { echo "$1" | grep -Eq "$2" || { echo "$1"; fail "no trace line for $3 (/$2/)"; }; }

# 1. rping. The listener is up once the trace says so.
port=$(tcp_port)
listening() {
    for _ in $(seq 300); do
        "$UROCE" trace tr | grep -Eq "cm pid [0-9]+ listen id [0-9]+ [0-9.]+:$port " && return
        kill -0 "$1" 2>/dev/null || return
        sleep 0.02
    done
}
PAIR_READY=listening run_pair rping -s -a 127.0.0.1 -p "$port" -C 5 -- \
    rping -c -a 127.0.0.1 -p "$port" -C 5 -v >"$RT/rping.log" 2>&1 ||
    { cat "$RT/rping.log"; fail "rping failed"; }
t=$("$UROCE" trace tr) || fail "uroce trace"
has "$t" "cm pid [0-9]+ connect id [0-9]+ to 127.0.0.1:$port qp 0x" "rdma_connect"
for m in REQ REP RTU DREQ DREP; do
    has "$t" "cm tx $m to 127.0.0.1 comm 0x" "the $m sent"
    has "$t" "cm rx $m from 127.0.0.1 comm 0x" "the $m received"
done
# (the active side's ESTABLISHED comes from its library, after the RTU: not the device's)
has "$t" "cm event CONNECT_REQUEST id [0-9]+ status 0 -> pid" "the server's CONNECT_REQUEST"
has "$t" "cm event CONNECT_RESPONSE id [0-9]+ status 0 -> pid" "the client's CONNECT_RESPONSE"
has "$t" "cm event ESTABLISHED id [0-9]+ status 0 -> pid" "the server's ESTABLISHED"
# (one DISCONNECTED at least: a side that destroys its id before the DREP comes gets none)
has "$t" "cm event DISCONNECTED id [0-9]+ status 0 -> pid" "DISCONNECTED"
echo "rping: listen, connect, REQ/REP/RTU/DREQ/DREP both ways, the CM events: traced"

# 2. ibv_xsrq_pingpong, one client.
port=$(( port + 1 ))
verbs timeout 60 ibv_xsrq_pingpong -g 0 -p "$port" -c 1 >"$RT/xs.out" 2>&1 &
spid=$!
sleep 0.5
verbs timeout 60 ibv_xsrq_pingpong -g 0 -p "$port" 127.0.0.1 >"$RT/xc.out" 2>&1 ||
    { cat "$RT/xc.out"; fail "xsrq client failed"; }
wait $spid || { cat "$RT/xs.out"; fail "xsrq server failed"; }
t=$("$UROCE" trace tr)
created=$(echo "$t" | grep -E "pid [0-9]+ open_xrcd xrcd [0-9]+ handle [0-9]+ inode [0-9:]+ created, 1 handles")
[ -n "$created" ] || { echo "$t"; fail "no line for the server creating the domain"; }
x=$(echo "$created" | sed -E 's/.* xrcd ([0-9]+) .*/\1/' | tail -1)
inode=$(echo "$created" | sed -E 's/.* inode ([0-9:]+) .*/\1/' | tail -1)
has "$t" "pid [0-9]+ open_xrcd xrcd $x handle [0-9]+ inode $inode joined, 2 handles" "the client joining"
spid=$(echo "$created" | sed -E 's/.* pid ([0-9]+) open_xrcd .*/\1/' | tail -1)
has "$t" "pid $spid create_qp qp 0x[0-9a-f]+ type XRC_TGT" "the server's TGT QP"
has "$t" "pid $spid create_srq srq [0-9]+ type XRC" "the server's XRC SRQ"
has "$t" "close_xrcd handle [0-9]+: xrcd $x lives on \(1 handles" "the first close"
has "$t" "close_xrcd handle [0-9]+: xrcd $x destroyed \(last handle\)" "the last close"
echo "xsrq_pingpong: domain $x on inode $inode created, joined, outlived its first close, destroyed: traced"

# 3. More lines than the device keeps.
verbs timeout 120 "$prog" tr --pairs 500 >"$RT/scale.out" 2>&1 || { cat "$RT/scale.out"; fail "qp_scale"; }
t=$("$UROCE" trace tr)
lost=$(echo "$t" | head -1 | sed -nE 's/^- +tr ([0-9]+) earlier lines were overwritten.*/\1/p')
[ -n "$lost" ] && [ "$lost" -gt 0 ] || { echo "$t" | head -3; fail "the first line does not say lines were lost"; }
n=$(echo "$t" | wc -l)
[ "$n" = 4097 ] || fail "expected 4096 lines after the lost-lines line, got $(( n - 1 ))"
echo "qp_scale: $lost lines overwritten, the last 4096 kept"

# 4. The follower saw everything from the start, and ends with the device.
"$UROCE" stop tr >/dev/null
for _ in $(seq 50); do kill -0 $follow 2>/dev/null || break; sleep 0.1; done
kill -0 $follow 2>/dev/null && { kill $follow; fail "uroce trace -f still runs after the device stopped"; }
wait $follow || fail "uroce trace -f exited $?"
f=$(cat "$RT/follow.out")
has "$f" "cm tx REQ to 127.0.0.1" "(following) the REQ"
has "$f" "open_xrcd xrcd $x handle [0-9]+ inode $inode created" "(following) the domain"
echo "$f" | grep -q "earlier lines were overwritten" &&
    fail "the follower missed lines (it polls every 100 ms; the ring holds 4096)"
echo "uroce trace -f: $(echo "$f" | wc -l) lines, none missed, exited with the device"
echo PASS
