#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
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
# -t: receive completions carry the device clock (ibv_wc_read_completion_ts, nanoseconds).
# The average time between two receive completions is then the time per iteration the
# client measured with gettimeofday.
case " $* " in *" -t "*)
    awk '/usec\/iter/ { per_iter = $(NF - 1) }
         /^Min receive completion clock cycles/ { min = $NF }
         /^Average receive completion clock cycles/ { avg = $NF }
         END {
             printf "usec/iter %s, receive completions every %.3f usec (min %s ns)\n",
                    per_iter, avg / 1000, min
             r = avg / 1000 / per_iter
             exit !(min > 0 && r > 0.5 && r < 2)
         }' "$UROCE_RUNTIME_DIR/client.out" ||
        fail "completion timestamps do not match the time the client measured"
    ;;
esac
"$UROCE" res
echo PASS
