#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The polling budget, `uroce start --poll-us US` (docs/performance.md, "Polling budget"):
# uroce hands it to uroced, which refuses what is not in 0..1000000 and says why; devices
# with a budget carry an ibv_rc_pingpong between them (their engines poll between packets).
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
for bad in abc -1 1000001 12x; do
    "$UROCE" start --name bad --addr 127.0.0.1 --poll-us "$bad" >"$UROCE_RUNTIME_DIR/bad.out" 2>&1 &&
        fail "uroce start accepted --poll-us '$bad'"
    grep -q "poll-us .*not in 0..1000000" "$UROCE_RUNTIME_DIR/bad.out" ||
        fail "no reason given for --poll-us '$bad': $(cat "$UROCE_RUNTIME_DIR/bad.out")"
done
start_device uroce0 127.0.0.2 --poll-us 300
start_device uroce1 127.0.0.3 --poll-us 300
pid=$(sed -n 's/^pid=//p' "$UROCE_RUNTIME_DIR/uroce0.info")
tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "--poll-us 300" ||
    fail "uroced was not given --poll-us 300: $(tr '\0' ' ' <"/proc/$pid/cmdline")"
port=$(tcp_port)
run_pair ibv_rc_pingpong -d uroce0 -g 0 -p "$port" -n 500 -- \
         ibv_rc_pingpong -d uroce1 -g 0 -p "$port" -n 500 127.0.0.1
grep -q "500 iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "client did not report 500 iterations"
echo PASS
