#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The Soft-RoCE set-up of rxe_setup_test.sh on two hosts (network namespaces joined by a
# veth pair, twohost_lib.sh): on each, under `uroce run`, `modprobe rdma_rxe` and `rdma link
# add rxe0 type rxe netdev eth0` make the host's device of its veth end; an ibv_rc_pingpong
# pair with -d rxe0 and an rping pair cross the link; `rdma link delete rxe0` ends each.
# docs/system-view.md, "rdma link add".
# usage: rxe_setup_twohost_test.sh
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/twohost_lib.sh"
need ibv_rc_pingpong
need rping
twohost_setup
# The hosts start without a device: the script makes it.
"${HOST_A[@]}" "$UROCE" stop >/dev/null
"${HOST_B[@]}" "$UROCE" stop >/dev/null
PORT=$(tcp_port)
CM_PORT=$(tcp_port)

# ROLE server|client: the set-up, then its side of each pair, then the clean-up.
script=$UROCE_RUNTIME_DIR/setup.sh
cat >"$script" <<'SCRIPT'
#!/bin/bash
set -ex
role=$1 port=$2 cm_port=$3 server=$4
modprobe rdma_rxe
rdma link add rxe0 type rxe netdev eth0
rdma link show | grep 'rxe0/1 state ACTIVE .*netdev eth0'
ibv_devices | grep -q rxe0
if [ "$role" = server ]; then
    ibv_rc_pingpong -d rxe0 -g 0 -p "$port" -n 100
    rping -s -a "$server" -p "$cm_port" -C 20
else
    for _ in $(seq 1 100); do ibv_rc_pingpong -d rxe0 -g 0 -p "$port" -n 100 "$server" && break; sleep 0.1; done
    for _ in $(seq 1 100); do rping -c -a "$server" -p "$cm_port" -C 20 -v && break; sleep 0.1; done
fi
rdma link delete rxe0
! ibv_devices | grep -q rxe0
echo SETUP-PASSED
SCRIPT
chmod 755 "$script"
verbs "${HOST_A[@]}" timeout 120 "$UROCE" run -- "$script" server "$PORT" "$CM_PORT" "$ADDR_A" \
    >"$UROCE_RUNTIME_DIR/a.out" 2>&1 &
a=$!
verbs "${HOST_B[@]}" timeout 120 "$UROCE" run -- "$script" client "$PORT" "$CM_PORT" "$ADDR_A" \
    >"$UROCE_RUNTIME_DIR/b.out" 2>&1
b_rc=$?
wait $a
a_rc=$?
echo "--- host A (server), exit $a_rc"
cat "$UROCE_RUNTIME_DIR/a.out"
echo "--- host B (client), exit $b_rc"
cat "$UROCE_RUNTIME_DIR/b.out"
[ $a_rc = 0 ] && [ $b_rc = 0 ] || fail "the set-up script failed on a host"
grep -qx SETUP-PASSED "$UROCE_RUNTIME_DIR/a.out" && grep -qx SETUP-PASSED "$UROCE_RUNTIME_DIR/b.out" ||
    fail "a host's script did not finish"
grep -q 'rdma-ping-19: ' "$UROCE_RUNTIME_DIR/b.out" || fail "the rping client's last ping is missing"
grep -q '100 iters' "$UROCE_RUNTIME_DIR/b.out" || fail "the pingpong client did not finish"
echo PASS
