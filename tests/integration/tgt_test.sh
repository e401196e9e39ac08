#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Debian's tgt (the user-space SCSI target) with its iSER transport over uroce's libraries,
# as a new user would start it: `tgtd --iser port=P` listens on every wildcard
# getaddrinfo(NULL, P, AI_PASSIVE) gives, 0.0.0.0 and then :: with RDMA_OPTION_ID_AFONLY.
# With only an IPv4 device running the second listener waits (the kernel's listen-any list),
# so tgtd comes up; an IPv6 device started afterwards takes it. docs/cm.md, "Listeners".
# usage: tgt_test.sh   (root: tgtd's control socket is in /var/run/tgtd)
. "$(dirname "$0")/lib.sh"
need tgtd
need tgtadm
[ "$(id -u)" = 0 ] || skip "tgtd needs root (its control socket in /var/run/tgtd)"
PORT=${UROCE_UDP_PORT:?}
ctl=$((PORT % 1000 + 100)) # tgtd's control port: /var/run/tgtd/socket.$ctl
start_device uroce0 127.0.0.1
listening() { # DEV FAMILY_ADDR: DEV shows a CM id listening on $PORT at that address
    "$UROCE" res "$1" 2>/dev/null | grep -Eq "^cm_id .* state listen .* local $2:$PORT remote"
}
verbs tgtd -f -C "$ctl" --iscsi portal=127.0.0.1:$((PORT + 1)) --iser port="$PORT" \
    >"$UROCE_RUNTIME_DIR/tgtd.out" 2>&1 &
tgtd_pid=$!
stop_tgtd() {
    tgtadm -C "$ctl" --mode system --op delete >/dev/null 2>&1
    sleep 0.5
    kill -9 "$tgtd_pid" 2>/dev/null
    wait "$tgtd_pid" 2>/dev/null
    rm -f /var/run/tgtd/socket."$ctl" /var/run/tgtd/socket."$ctl".lock # tgtd leaves them
}
trap 'stop_tgtd; cleanup' EXIT
up=0
for _ in $(seq 1 100); do
    kill -0 "$tgtd_pid" 2>/dev/null || break
    if listening uroce0 0.0.0.0 && tgtadm -C "$ctl" --mode target --op show >/dev/null 2>&1; then
        up=1
        break
    fi
    sleep 0.1
done
cat "$UROCE_RUNTIME_DIR/tgtd.out"
[ $up = 1 ] || fail "tgtd did not come up with only an IPv4 device (its iSER listeners)"
echo "tgtd is up: its iSER listener on 0.0.0.0:$PORT (uroce0), the :: one waiting"
start_device uroce1 ::1
for _ in $(seq 1 50); do
    listening uroce1 '\[?::\]?' && break
    sleep 0.1
done
"$UROCE" res uroce1 | grep '^cm_id'
listening uroce1 '\[?::\]?' || fail "uroce1 (::1), started after tgtd, did not take its :: listener"
kill -0 "$tgtd_pid" 2>/dev/null || fail "tgtd exited"
echo PASS
