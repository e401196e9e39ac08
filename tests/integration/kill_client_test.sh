#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: SIGKILL of a client mid-run leaves the device running, the client's
# objects are gone, and the next pingpong works.
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
start_device uroce0 127.0.0.1
port=$(tcp_port)
"${VERBS_ENV[@]}" ibv_rc_pingpong -g 0 -p "$port" -n 100000000 \
    >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
spid=$!
sleep 0.5
# No `timeout` wrapper here: $! must be the pingpong process itself (env execs it).
"${VERBS_ENV[@]}" ibv_rc_pingpong -g 0 -p "$port" -n 100000000 127.0.0.1 \
    >"$UROCE_RUNTIME_DIR/client.out" 2>&1 &
cpid=$!
sleep 1.5
before=$("$UROCE" res) || fail "uroce res failed"
echo "$before"
echo "$before" | grep -q "^session .* pid $cpid " || fail "client session not visible before the kill"
kill -9 $cpid
wait $cpid 2>/dev/null
# The server sees its peer vanish only if it has a send outstanding: then its
# retries run out (IBV_WC_RETRY_EXC_ERR) and it exits. If it was only waiting for a
# message it waits forever, as on hardware; stop it after a while.
for _ in $(seq 50); do kill -0 $spid 2>/dev/null || break; sleep 0.1; done
if kill -0 $spid 2>/dev/null; then
    echo "server was waiting for a message; stopping it"
    kill $spid
    wait $spid
else
    wait $spid
    echo "server exited with status $?"
    cat "$UROCE_RUNTIME_DIR/server.out"
    grep -q "Failed status transport retry counter exceeded" "$UROCE_RUNTIME_DIR/server.out" ||
        fail "server exited without IBV_WC_RETRY_EXC_ERR"
fi
cat "$UROCE_RUNTIME_DIR/server.out"
sleep 0.2
after=$("$UROCE" res) || fail "device died with its client"
echo "$after"
echo "$after" | grep -q "pid $cpid" && fail "objects of the killed client remain"
echo "$after" | grep -q '^counts sessions 0 pds 0 mrs 0 cqs 0 qps 0 channels 0 srqs 0 mws 0$' ||
    fail "device still holds objects after both processes ended"
port=$((port + 1))
run_pair ibv_rc_pingpong -g 0 -p "$port" -- ibv_rc_pingpong -g 0 -p "$port" 127.0.0.1
echo PASS
