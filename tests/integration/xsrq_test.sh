#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: unmodified ibv_xsrq_pingpong (XRC: a shared XRC domain, an XRC SRQ, XRC
# INI and TGT QPs). usage: xsrq_test.sh CLIENTS [args...] - CLIENTS client processes
# against one server started with -c CLIENTS.
. "$(dirname "$0")/lib.sh"
need ibv_xsrq_pingpong
clients=$1
shift
start_device uroce0 127.0.0.1
port=$(tcp_port)
slog=$UROCE_RUNTIME_DIR/server.out
verbs timeout 120 ibv_xsrq_pingpong -g 0 -p "$port" -c "$clients" "$@" >"$slog" 2>&1 &
spid=$!
# The clients connect once: wait (up to a minute on a loaded host) until the server listens.
for _ in $(seq 600); do
    [ -n "$(ss -Hltn "sport = :$port")" ] && break
    kill -0 $spid 2>/dev/null || break
    sleep 0.1
done
pids=()
for i in $(seq "$clients"); do
    verbs timeout 120 ibv_xsrq_pingpong -g 0 -p "$port" "$@" 127.0.0.1 \
        >"$UROCE_RUNTIME_DIR/client$i.out" 2>&1 &
    pids+=($!)
done
rc=0
for i in $(seq "$clients"); do
    wait "${pids[$((i - 1))]}" || { echo "client $i failed"; rc=1; }
    echo "--- client $i"; cat "$UROCE_RUNTIME_DIR/client$i.out"
done
wait $spid || { echo "server failed"; rc=1; }
echo "--- server"; cat "$slog"
[ $rc = 0 ] || fail "xsrq_pingpong failed"
grep -q '^success$' "$slog" || fail "server did not report success"
for i in $(seq "$clients"); do
    grep -q '^success$' "$UROCE_RUNTIME_DIR/client$i.out" || fail "client $i did not report success"
done
# Every process is gone: nothing of the domain may be left in the device.
res=$("$UROCE" res)
echo "$res" | grep -q '^xrcd ' && fail "an XRC domain outlived every process: $res"
echo PASS
