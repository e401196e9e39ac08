#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The device's threads run at a higher priority than the host's other work (uroced --nice,
# default -10): the thread nice values and, for a device started by `uroce start` (its own
# session), its autogroup's. Where the process may not raise it (no CAP_SYS_NICE) the device
# says so in its log and runs at the default priority. docs/faults.md, "A loaded host".
. "$(dirname "$0")/lib.sh"

# nices PID: the nice value of each of PID's threads, one line each.
nices() {
    local t
    for t in /proc/"$1"/task/*; do
        sed 's/^.*) //' "$t/stat" | awk '{ print $17 }'
    done
}

start_device uroce0 127.0.0.1
pid=$(sed -n 's/^pid=//p' "$UROCE_RUNTIME_DIR/uroce0.info")
echo "uroce0 pid $pid threads' nice: $(nices "$pid" | tr '\n' ' ')"
if grep -q "running at the default priority" "$UROCE_RUNTIME_DIR/uroce0.log"; then
    cat "$UROCE_RUNTIME_DIR/uroce0.log"
    [ "$(nices "$pid" | sort -u)" = 0 ] || fail "refused, yet the threads' nice is not 0"
    echo "this host does not let the device raise its priority; the rest checks --nice 5"
else
    [ "$(nices "$pid" | sort -u)" = -10 ] || fail "the device's threads do not run at nice -10"
    if [ -e "/proc/$pid/autogroup" ]; then
        cat "/proc/$pid/autogroup"
        grep -q ' nice -10$' "/proc/$pid/autogroup" || fail "the device's autogroup is not at nice -10"
    fi
fi

# An explicit value, which any process may set (lowering its own priority), and a bad one,
# on the address and port uroce0 gives up.
"$UROCE" stop uroce0 >/dev/null || fail "uroce stop uroce0"
"$UROCE_BUILD/bin/uroced" --name prio --addr 127.0.0.1 --port "${UROCE_UDP_PORT:-4791}" --nice 5 >"$UROCE_RUNTIME_DIR/prio.out" 2>&1 &
ppid=$!
for _ in $(seq 100); do [ -e "$UROCE_RUNTIME_DIR/prio.info" ] && break; sleep 0.1; done
[ -e "$UROCE_RUNTIME_DIR/prio.info" ] || fail "uroced --nice 5 did not start: $(cat "$UROCE_RUNTIME_DIR/prio.out")"
got=$(nices $ppid | sort -u)
kill $ppid
wait $ppid
[ "$got" = 5 ] || fail "uroced --nice 5 runs at nice $got"
"$UROCE_BUILD/bin/uroced" --name bad --addr 127.0.0.1 --port "${UROCE_UDP_PORT:-4791}" --nice 20 2>"$UROCE_RUNTIME_DIR/bad.err" &&
    fail "uroced accepted --nice 20"
grep -q "not in -20..19" "$UROCE_RUNTIME_DIR/bad.err" || fail "no reason given for --nice 20"
echo PASS
