#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: an unmodified rdma-core pingpong example, server and client as two
# processes over one device. usage: pingpong_test.sh PROGRAM [args...]
. "$(dirname "$0")/lib.sh"
prog=$1
shift
need "$prog"
start_device uroce0 127.0.0.1
port=$(tcp_port)
run_pair "$prog" -g 0 -p "$port" "$@" -- "$prog" -g 0 -p "$port" "$@" 127.0.0.1
grep -q "iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "client did not report its iterations"
echo PASS
