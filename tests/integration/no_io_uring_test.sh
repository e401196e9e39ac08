#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Where io_uring is forbidden (a container's default seccomp profile, docs/ci.md), the
# device runs without it (net/udp_uring.h: sendmmsg, recvmmsg, ppoll) and says so once in its
# log: under such a seccomp filter `uroce run` starts a device, an ibv_rc_pingpong pair and an
# rping pair pass over it, and the device is gone afterwards.
# usage: no_io_uring_test.sh NO_IO_URING (tests/integration/no_io_uring.c)
. "$(dirname "$0")/lib.sh"
forbid=${1:?usage: no_io_uring_test.sh NO_IO_URING}
unset UROCE_NO_IO_URING  # the refusal is the seccomp filter's, not a choice

# The filter is inherited by everything started under it: uroce, uroced, the programs.
"$forbid" "$UROCE" start --name uroce0 --addr 127.0.0.1 >/dev/null || fail "uroce start under the filter"
grep "io_uring" "$UROCE_RUNTIME_DIR"/uroce0.log
grep -q "uroced: io_uring is not available here (Operation not permitted).*sendmmsg/recvmmsg" \
    "$UROCE_RUNTIME_DIR"/uroce0.log || fail "uroced did not say it runs without io_uring"
port=$(tcp_port)
run_pair "$forbid" ibv_rc_pingpong -g 0 -p "$port" -n 2000 -s 65536 -- \
    "$forbid" ibv_rc_pingpong -g 0 -p "$port" -n 2000 -s 65536 127.0.0.1
grep -q "2000 iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "ibv_rc_pingpong: no iterations reported"
wait_listener() { cm_listening_on "$port" "$1"; }
PAIR_READY=wait_listener run_pair "$forbid" rping -s -a 127.0.0.1 -p "$port" -C 50 -v -- \
    "$forbid" rping -c -a 127.0.0.1 -p "$port" -C 50 -v
[ "$(grep -c 'ping data' "$UROCE_RUNTIME_DIR/client.out")" -eq 50 ] || fail "rping: not 50 pings"
"$UROCE" stop >/dev/null

# uroce run as a whole job: a device of its own, without io_uring, gone when the job ends.
out=$(verbs "$forbid" "$UROCE" run -- ibv_devinfo 2>&1) || fail "uroce run -- ibv_devinfo under the filter: $out"
echo "$out" | grep -q 'hca_id:[[:space:]]*uroce0' || fail "ibv_devinfo shows no uroce0: $out"
[ -z "$("$UROCE" list)" ] || fail "a device is listed after uroce run"
echo PASS
