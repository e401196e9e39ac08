#!/usr/bin/env bash
# Acceptance: unmodified ibv_rc_pingpong, server and client as two processes.
# usage: rc_pingpong_test.sh [--two-devices] [pingpong args...]
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
two=0
if [ "${1:-}" = "--two-devices" ]; then two=1; shift; fi
port=$(tcp_port)
if [ $two = 1 ]; then
    start_device uroce0 127.0.0.2
    start_device uroce1 127.0.0.3
    run_pair ibv_rc_pingpong -d uroce0 -g 0 -p "$port" "$@" -- \
             ibv_rc_pingpong -d uroce1 -g 0 -p "$port" "$@" 127.0.0.1
else
    start_device uroce0 127.0.0.1
    run_pair ibv_rc_pingpong -g 0 -p "$port" "$@" -- ibv_rc_pingpong -g 0 -p "$port" "$@" 127.0.0.1
fi
grep -q "iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "client did not report its iterations"
"$UROCE" res
echo PASS
