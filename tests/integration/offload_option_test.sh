#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce start --offload on|off` (docs/performance.md, "GSO and GRO"): uroce hands it to
# uroced, which refuses anything else and says why. A device with offloads off sends one
# datagram per packet and receives without GRO; its peer (offloads on) still sends trains,
# which the kernel cuts before that device's socket: each packet then arrives without the
# IPv4 ID its ICRC was made for being known, and none is dropped. `uroce counters` says
# which offloads each device uses.
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
"$UROCE" start --name bad --addr 127.0.0.1 --offload maybe >"$UROCE_RUNTIME_DIR/bad.out" 2>&1 &&
    fail "uroce start accepted --offload maybe"
grep -q "offload maybe is not on or off" "$UROCE_RUNTIME_DIR/bad.out" ||
    fail "no reason given for --offload maybe: $(cat "$UROCE_RUNTIME_DIR/bad.out")"
start_device uroce0 127.0.0.2 --offload off
start_device uroce1 127.0.0.3
port=$(tcp_port)
run_pair ibv_rc_pingpong -d uroce0 -g 0 -p "$port" -s 65536 -n 200 -- \
         ibv_rc_pingpong -d uroce1 -g 0 -p "$port" -s 65536 -n 200 127.0.0.1
grep -q "200 iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "client did not report 200 iterations"

line() { "$UROCE" counters "$1" | grep '^counters_offload'; }
field() { echo "$1" | offload_field "$2"; }  # field LINE NAME (lib.sh)
off=$(line uroce0) on=$(line uroce1)
echo "uroce0: $off"
echo "uroce1: $on"
case $off in "counters_offload gso off gro off tx_trains 0 "*) ;; *) fail "uroce0: $off" ;; esac
[ "$(field "$off" rx_trains)" = 0 ] || fail "uroce0 received GRO trains with GRO off"
if offloads_on uroce1; then
    [ "$(field "$on" tx_trains)" -gt 0 ] || fail "uroce1 sent no GSO train"
fi
[ "$(field "$on" rx_trains)" = 0 ] || fail "uroce1 received trains from a device that sends none"
for d in uroce0 uroce1; do
    bad=$("$UROCE" counters "$d" | awk '$1 == "drop" && $2 == "bad_icrc" { print $3 }')
    [ "$bad" = 0 ] || fail "$d dropped $bad packets for their ICRC"
done
echo PASS
