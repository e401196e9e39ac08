# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Two hosts on one machine, sourced after lib.sh: hosts A and B are network namespaces
# joined by a veth pair (MTU 1500, as an Ethernet link), A at 10.77.0.1/24 and B at
# 10.77.0.2/24, each with one device uroce0 on its address, registered in a runtime
# directory of the host's own. Programs run "on a host" with on_host or the HOST_A/HOST_B
# command prefixes. Everything (devices, namespaces, the veth pair) goes at exit, failed or
# not. Without root, or where network namespaces are not allowed, the test skips (77).
#   twohost_setup [ARGS...]   make the hosts and start their devices (ARGS: more uroce start
#                             options for both, e.g. --offload off)
#   on_host A|B CMD...        run CMD on a host with the drop-in libraries
#   "${HOST_A[@]}" CMD...     the same as a command prefix (for run_pair: pass it to verbs)
#   tcp_listening PID         PAIR_READY for run_pair: waits until the server (PID) on host A
#                             listens on TCP port $PORT (pingpongs, perftest)
#   tap_start FILE [MIB [SNAP]]  tshark on host A's eth0 writes the devices' UDP traffic to
#                             FILE (MIB: its buffer, for long runs; SNAP: bytes kept of each
#                             packet, for tests that read headers only: a 64 KiB GSO train
#                             then takes SNAP bytes of the buffer, not 64 KiB)
#   tap_stop                  ends it once the last packets are in (it says what it kept);
#                             TAP_DROPPED counts the packets the tap lost (its buffer full)
[ "$(id -u)" = 0 ] || skip "two hosts need root (network namespaces and a veth pair)"
command -v ip >/dev/null 2>&1 || skip "ip (iproute2) is not installed"

ADDR_A=10.77.0.1
ADDR_B=10.77.0.2
# TWOHOST_IPV6=1 (set before sourcing): the hosts also have fd77::1/64 and fd77::2/64, and
# the devices those (DEV_A, DEV_B); the IPv4 addresses stay for the programs' own TCP
# exchanges (the pingpongs and perftest bind the IPv4 wildcard first: an IPv6-only host
# cannot reach their servers).
ADDR6_A=fd77::1
ADDR6_B=fd77::2
if [ -n "${TWOHOST_IPV6:-}" ]; then DEV_A=$ADDR6_A DEV_B=$ADDR6_B; else DEV_A=$ADDR_A DEV_B=$ADDR_B; fi
NS_A=uroce-$$-a
NS_B=uroce-$$-b
DIR_A=$UROCE_RUNTIME_DIR/host-a
DIR_B=$UROCE_RUNTIME_DIR/host-b
HOST_A=(ip netns exec "$NS_A" env "UROCE_RUNTIME_DIR=$DIR_A")
HOST_B=(ip netns exec "$NS_B" env "UROCE_RUNTIME_DIR=$DIR_B")
TH_MADE=()  # the namespaces made so far

# Stops the hosts' devices, then ends whatever still runs in a namespace (only what this
# test started can be there) and deletes the namespaces, which takes the veth pair along.
twohost_teardown() {
    local ns pid
    "${HOST_A[@]}" "$UROCE" stop >/dev/null 2>&1 || true
    "${HOST_B[@]}" "$UROCE" stop >/dev/null 2>&1 || true
    for ns in "${TH_MADE[@]}"; do
        for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null || true
    done
}

twohost_exit() {
    local rc=$?
    twohost_teardown
    (exit $rc)
    cleanup  # lib.sh's: sanitizer reports in the device logs, the runtime directory
}
trap twohost_exit EXIT

twohost_setup() {
    # (Listed in the runtime directory too: lib.sh's watchdog deletes them if the test is
    # killed before its own teardown can.)
    echo "$NS_A" >>"$UROCE_RUNTIME_DIR/netns"
    ip netns add "$NS_A" 2>/dev/null || skip "ip netns add is not allowed here"
    TH_MADE+=("$NS_A")
    echo "$NS_B" >>"$UROCE_RUNTIME_DIR/netns"
    ip netns add "$NS_B" || fail "ip netns add $NS_B"
    TH_MADE+=("$NS_B")
    ip link add eth0 netns "$NS_A" type veth peer name eth0 netns "$NS_B" ||
        skip "cannot make a veth pair between namespaces"
    local h ns addr
    for h in A B; do
        if [ $h = A ]; then ns=$NS_A addr=$ADDR_A; else ns=$NS_B addr=$ADDR_B; fi
        ip -n "$ns" link set lo up &&
            ip -n "$ns" link set eth0 up &&
            ip -n "$ns" addr add "$addr/24" dev eth0 || fail "cannot address host $h"
        if [ -n "${TWOHOST_IPV6:-}" ]; then
            # nodad: usable at once, not after duplicate address detection's second or so.
            ip -n "$ns" addr add "$([ $h = A ] && echo $ADDR6_A || echo $ADDR6_B)/64" dev eth0 nodad ||
                fail "cannot give host $h an IPv6 address"
        fi
    done
    mkdir -m 700 "$DIR_A" "$DIR_B" || fail "mkdir runtime directories"
    "${HOST_A[@]}" "$UROCE" start --name uroce0 --addr "$DEV_A" "$@" >/dev/null ||
        fail "uroce start on host A"
    "${HOST_B[@]}" "$UROCE" start --name uroce0 --addr "$DEV_B" "$@" >/dev/null ||
        fail "uroce start on host B"
    echo "host A: $NS_A $DEV_A (eth0 $(ip -n "$NS_A" -o link show eth0 | grep -o 'mtu [0-9]*'))"
    echo "host B: $NS_B $DEV_B"
}

on_host() {
    local h=$1
    shift
    if [ "$h" = A ]; then verbs "${HOST_A[@]}" "$@"; else verbs "${HOST_B[@]}" "$@"; fi
}

tcp_listening() {
    local i
    for i in $(seq 1 600); do
        ip netns exec "$NS_A" ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q . && return
        kill -0 "$1" 2>/dev/null || return
        sleep 0.1
    done
}

# A capture on the link itself, as another receiver on it sees the packets. A large buffer
# keeps a busy host's tap from dropping packets of a long run, but it is not yet capturing for
# a moment after it says so: a short run takes the default one.
tap_start() {
    TAP_OUT=$UROCE_RUNTIME_DIR/tshark.out
    rm -f "$1"
    ip netns exec "$NS_A" tshark -q ${2:+-B "$2"} ${3:+-s "$3"} -i eth0 -f "udp port ${UROCE_UDP_PORT:-4791}" -w "$1" \
        >"$TAP_OUT" 2>&1 &
    TAP_PID=$!
    # Ready when the file has its header: dumpcap writes it once it has the interface (and
    # its filter). Not "Capturing on", which tshark prints before that (the first 100-200 ms
    # were lost), nor the "Capture started." log message, which CI's tshark did not print.
    for _ in $(seq 100); do
        [ -s "$1" ] && return
        kill -0 "$TAP_PID" 2>/dev/null || break
        sleep 0.1
    done
    fail "tshark did not start capturing into $1: $(cat "$TAP_OUT")"
}
tap_stop() {
    sleep 0.5  # the last packets reach the tap
    kill -INT "$TAP_PID"
    wait "$TAP_PID"
    grep -i "captured\|dropped" "$TAP_OUT"
    TAP_DROPPED=$(sed -n 's/^\([0-9]*\) packets\{0,1\} dropped.*/\1/p' "$TAP_OUT" | head -1)
    TAP_DROPPED=${TAP_DROPPED:-0}
}

# Readiness for run_pair: a CM listener on $PORT on host A (rping, perftest -R).
cm_listening() {
    local i
    for i in $(seq 1 600); do
        "${HOST_A[@]}" "$UROCE" res 2>/dev/null |
            grep -Eq "^cm_id .* state listen .*:$PORT remote" && return
        kill -0 "$1" 2>/dev/null || return
        sleep 0.1
    done
}
