#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# A CI set-up written for kernel Soft-RoCE, in the form rust-ibverbs', Valkey's and QEMU's
# take, runs unchanged under `uroce run` (docs/system-view.md, "rdma link add"): modprobe,
# `rdma link add rxe0 type rxe netdev lo`, rdma link show, ibv_devices, an ibv_rc_pingpong
# pair with -d rxe0 and an rping pair (each two processes), `rdma link delete rxe0`, and
# ibv_devices no longer listing rxe0; `rdma statistic` counts the packets a capture of the
# pingpong holds, `rdma res show qp|pd|cq|mr|ctx` list a running pair's objects, `rdma res
# show srq` an SRQ pair's, `rdma res show cm_id` rping's listener. As the caller and, run as
# root, as an unprivileged user.
# usage: rxe_setup_test.sh
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
need rping
need ibv_srq_pingpong

script=$UROCE_RUNTIME_DIR/setup.sh
cat >"$script" <<'SCRIPT'
#!/bin/bash
set -ex
modprobe rdma_rxe
lsmod | grep -q rdma_rxe
rdma link add rxe0 type rxe netdev lo
rdma link show | grep 'rxe0/1 state ACTIVE'
ibv_devices | grep -q rxe0
# rdma statistic's packet counters grow by what a capture of the pair holds (one device:
# each packet is sent and received by it, and captured both ways).
# seen N KIND PATTERN: waits (20 s at most) until N rows of `rdma res show KIND` match.
seen() {
    for _ in $(seq 1 400); do
        [ "$(rdma res show "$2" | grep -c "$3")" = "$1" ] && return 0
        sleep 0.05
    done
    return 1
}
stat() { rdma statistic show link rxe0/1 | tr ' ' '\n' | grep -A1 -x "$1" | tail -n 1; }
sent0=$(stat sent_pkts) rcvd0=$(stat rcvd_pkts)
"$3" capture start "$4" rxe0
ibv_rc_pingpong -d rxe0 -g 0 -p "$1" -n 100 &
sleep 1
ibv_rc_pingpong -d rxe0 -g 0 -p "$1" -n 100 127.0.0.1
wait $!
"$3" capture stop rxe0
grown=$(( $(stat sent_pkts) - sent0 + $(stat rcvd_pkts) - rcvd0 ))
captured=$(python3 -c 'import struct, sys
d = open(sys.argv[1], "rb").read(); o = 24; n = 0
while o + 16 <= len(d): o += 16 + struct.unpack("<I", d[o + 8:o + 12])[0]; n += 1
print(n)' "$4")
echo "rdma statistic: sent_pkts + rcvd_pkts grew by $grown; the capture holds $captured packets"
[ "$captured" -ge 400 ] && [ "$grown" -ge "$captured" ]
# rdma res show qp lists a running pair's QPs (a pair that runs until it is looked at).
ibv_rc_pingpong -d rxe0 -g 0 -p "$1" -n 100000000 >/dev/null &
server=$!
sleep 1
ibv_rc_pingpong -d rxe0 -g 0 -p "$1" -n 100000000 127.0.0.1 >/dev/null &
client=$!
seen 2 qp '^link rxe0/1 .* type RC state RTS .* comm ibv_rc_pingpong' || true
rdma res show qp
[ "$(rdma -j res show qp | grep -o '"comm":"ibv_rc_pingpong"' | wc -l)" = 2 ]
# Each process's PD, CQ, MR and context, as the kernel's restrack lists them.
for k in pd cq mr ctx; do
    rdma res show $k dev rxe0
    [ "$(rdma res show $k dev rxe0 | grep -c "^dev rxe0 ${k}n [0-9]* .*comm ibv_rc_pingpong$")" = 2 ]
done
rdma res show cq | grep -q '^dev rxe0 cqn [0-9]* cqe [0-9]* users 2 adaptive-moderation off '
[ "$(rdma -j res show mr | grep -o '"mrlen":4096,"pdn":[0-9]*,"pid":[0-9]*,"comm":"ibv_rc_pingpong"' | wc -l)" = 2 ]
rdma res
rdma res | grep -Eq '^[0-9]+: rxe0: pd 2 cq 2 qp 2 cm_id 0 mr 2 ctx 2 srq 0$'
rdma -j res | grep -q '"ifname":"rxe0","pd":2,"cq":2,"qp":2,'
kill $client $server
wait $client $server || true
# An SRQ pair's SRQs, each with its QPs as a range of QPNs (the kernel's form); the pair is
# killed while its traffic runs and rping's pair comes next on the same device (the next
# sessions' watches once moved the reads the kernel still had in flight: udp_uring.h).
ibv_srq_pingpong -d rxe0 -g 0 -p "$1" -q 4 -n 100000000 >/dev/null &
server=$!
sleep 1
ibv_srq_pingpong -d rxe0 -g 0 -p "$1" -q 4 -n 100000000 127.0.0.1 >/dev/null &
client=$!
seen 2 srq '^dev rxe0 srqn [0-9]* type BASIC lqpn [0-9]*-[0-9]* pdn ' || true
rdma res show srq
[ "$(rdma -j res show srq | grep -o '"type":"BASIC","lqpn":\["[0-9]*-[0-9]*"\]' | wc -l)" = 2 ]
kill $client $server
wait $client $server || true
rping -s -a 127.0.0.1 -p "$2" -C 20 &
# Its listener, as rdma res show cm_id lists the kernel's.
seen 1 cm_id "state LISTEN ps TCP .*comm rping src-addr 127.0.0.1:$2\$" || true
rdma res show cm_id | grep "^link rxe0/1 cm-idn [0-9]* state LISTEN ps TCP .*comm rping src-addr 127.0.0.1:$2\$"
rping -c -a 127.0.0.1 -p "$2" -C 20 -v
wait $!
rdma link delete rxe0
! ibv_devices | grep -q rxe0
! rdma link show | grep -q rxe0
echo SETUP-PASSED
SCRIPT
chmod 755 "$script"

# setup WHO RUNDIR AS...: the script under `uroce run`, commands run as AS... in RUNDIR.
setup() {
    local who=$1 dir=$2
    shift 2
    local out=$UROCE_RUNTIME_DIR/setup-$who.out
    "$@" env UROCE_RUNTIME_DIR="$dir" "${VERBS_ENV[@]:1}" timeout 120 "$UROCE" run -- \
        "$script" "$(tcp_port)" "$(tcp_port)" "$UROCE" "$dir/rxe0.pcap" >"$out" 2>&1
    local rc=$?
    cat "$out"
    [ $rc = 0 ] && grep -qx SETUP-PASSED "$out" || fail "$who: the set-up script failed (exit $rc)"
    "$@" env UROCE_RUNTIME_DIR="$dir" "$UROCE" list | grep -q rxe0 &&
        fail "$who: rxe0 still runs after rdma link delete"
    echo "$who: the rxe set-up script ran unchanged"
}

setup "$(id -un)" "$UROCE_RUNTIME_DIR"

unprivileged_part
chmod 755 "$UROCE_RUNTIME_DIR" # the script, for nobody to run
setup nobody "$NB_DIR" "${AS_NOBODY[@]}"
echo PASS
