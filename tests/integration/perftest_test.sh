#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: an unmodified perftest program (Debian's perftest package), server and
# client as two processes over one device, with perftest's default connection setup
# (QP numbers, PSNs, rkeys exchanged over TCP on -p PORT).
#   usage: perftest_test.sh [--two-devices] [--capture] PROGRAM [perftest args...]
# --two-devices: the server on uroce1 (127.0.0.7), the client on uroce0 (127.0.0.6).
# --capture: the device(s) record a pcap; afterwards tshark decodes every frame cleanly, the
# file holds what the device counted, and scapy agrees on every ICRC (capture_lib.sh).
# --two-devices --capture: also, the packets crossed the socket as UDP GSO trains and were
# received as GRO trains (`uroce counters`, counters_offload), in both directions.
# Checks: both sides exit 0; the client prints its results table (the line under the
# "#bytes" header, all numbers, with a nonzero bandwidth or latency); and the
# libmlx5.so.1/libefa.so.1 the programs load are uroce's stand-ins from the build
# directory, with none of Debian's provider libraries loaded (LD_DEBUG=libs).
. "$(dirname "$0")/lib.sh"
two=0 capture=0
if [ "${1:-}" = "--two-devices" ]; then two=1; shift; fi
if [ "${1:-}" = "--capture" ]; then capture=1; shift; fi
prog=$1
shift
need "$prog"
if [ $capture = 1 ]; then
    . "$(dirname "$0")/capture_lib.sh"
    need tshark
    pcap=$UROCE_RUNTIME_DIR/perftest.pcap
fi
if [ $two = 1 ] && [ $capture = 1 ]; then
    start_device uroce0 127.0.0.6 --pcap "$UROCE_RUNTIME_DIR/uroce0.pcap"
    start_device uroce1 127.0.0.7 --pcap "$UROCE_RUNTIME_DIR/uroce1.pcap"
    sdev=(-d uroce1) cdev=(-d uroce0) server_dev=uroce1
elif [ $two = 1 ]; then
    start_device uroce0 127.0.0.6
    start_device uroce1 127.0.0.7
    sdev=(-d uroce1) cdev=(-d uroce0) server_dev=uroce1
elif [ $capture = 1 ]; then
    start_device uroce0 127.0.0.1 --pcap "$pcap"
    sdev=() cdev=() server_dev=uroce0
else
    start_device uroce0 127.0.0.1
    sdev=() cdev=() server_dev=uroce0
fi
port=$(tcp_port)

lddir=$UROCE_RUNTIME_DIR/ld
mkdir -p "$lddir"

# run_pair (lib.sh), with LD_DEBUG on both sides and the device's counters on failure.
timeout_s=${PAIR_TIMEOUT:-60}
slog=$UROCE_RUNTIME_DIR/server.out
clog=$UROCE_RUNTIME_DIR/client.out
ld_debug=(LD_DEBUG=libs "LD_DEBUG_OUTPUT=$lddir/ld")
verbs "${ld_debug[@]}" timeout "$timeout_s" "$prog" "${sdev[@]}" -p "$port" "$@" >"$slog" 2>&1 &
spid=$!
tcp_port_ready "$port" $spid  # perftest's client does not retry its connect
verbs "${ld_debug[@]}" timeout "$timeout_s" "$prog" "${cdev[@]}" -p "$port" "$@" 127.0.0.1 >"$clog" 2>&1
crc=$?
wait $spid
src=$?
echo "--- server: $prog -p $port $* (exit $src)"; cat "$slog"
echo "--- client: $prog -p $port $* 127.0.0.1 (exit $crc)"; cat "$clog"
if [ $src != 0 ] || [ $crc != 0 ]; then
    # What the device sent and received, and what the kernel dropped at its socket
    # (ss "d" = datagrams dropped because the receive buffer was full).
    "$UROCE" counters | head -2
    ss -Huamn "sport = :$UROCE_UDP_PORT" | grep -o 'skmem:([^)]*)' | sed 's/^/device socket /'
    fail "server exit $src, client exit $crc"
fi

check_perftest_results "$prog" "$clog"

# Multicast (-g): every message reached the server's QP through the group (the server only
# exits 0 once it received all of them; the device counts copies handed to attached QPs).
case " $* " in *" -g "*)
    iters=$(echo "$row" | awk '{ print $2 }')
    got=$("$UROCE" counters "$server_dev" |
        awk '$1 == "counters_mcast" { for (i = 2; i < NF; i++) if ($i == "deliveries") print $(i + 1) }')
    echo "multicast copies delivered on $server_dev: $got (iterations $iters)"
    [ "${got:-0}" -ge "$iters" ] || fail "$server_dev delivered ${got:-0} multicast copies, expected $iters"
esac

# Which libraries the server and client loaded. LD_DEBUG writes one file per process
# (timeout's included); the perftest processes are those that loaded libmlx5.so.1.
inits=$(grep -h 'calling init:' "$lddir"/ld.* | sed 's/.*calling init: *//' | sort -u)
echo "libraries initialised:"; echo "$inits" | sed 's/^/  /'
n=$(grep -l 'calling init: .*libmlx5\.so\.1$' "$lddir"/ld.* | wc -l)
[ "$n" = 2 ] || fail "expected 2 processes loading libmlx5.so.1, saw $n"
for lib in libmlx5.so.1 libefa.so.1 libibverbs.so.1; do
    bad=$(echo "$inits" | grep "/$lib\$" | grep -v "^$LIBDIR/$lib\$" || true)
    [ -z "$bad" ] || fail "$lib was not uroce's: $bad"
    echo "$inits" | grep -qx "$LIBDIR/$lib" || fail "$LIBDIR/$lib was not loaded"
done
# Debian's provider plug-ins (libmlx5-rdmav34.so, ...) must not be loaded either.
if echo "$inits" | grep -E '/libibverbs/|-rdmav[0-9]+\.so'; then
    fail "a provider plug-in was loaded"
fi
offload() { "$UROCE" counters "$1" | offload_field "$2"; }  # offload DEV NAME
if [ $capture = 1 ]; then
    # Wireshark 4.0's RPC-over-RDMA heuristic claims ib_send_bw's small SEND payloads and
    # throws on them (malformed RPCoRDMA); they are perftest's bytes, not RPC-over-RDMA.
    TSHARK_EXTRA=(--disable-protocol rpcordma)
    devs=uroce0
    [ $two = 1 ] && devs="uroce0 uroce1"
    for d in $devs; do
        "$UROCE" capture stop "$d" >/dev/null
        counted=$("$UROCE" counters "$d" | awk '$1 == "counters" {
            for (i = 2; i < NF; i++) { if ($i == "tx_pkts") t = $(i + 1); if ($i == "rx_pkts") r = $(i + 1) }
            print t + r }')
        f=$pcap
        [ $two = 1 ] && f=$UROCE_RUNTIME_DIR/$d.pcap
        check_capture "$f" "$counted"
    done
    # The wire path used the offloads (docs/performance.md, "GSO and GRO"), both ways.
    if [ $two = 1 ] && offloads_on uroce0 && offloads_on uroce1; then
        "$UROCE" counters uroce0 | grep '^counters_offload'
        "$UROCE" counters uroce1 | grep '^counters_offload'
        # The data went as trains one way (the client's WRITEs and SENDs, the server's READ
        # responses) and arrived as trains on the other side.
        if ! { [ "$(offload uroce0 tx_trains)" -gt 0 ] && [ "$(offload uroce1 rx_trains)" -gt 0 ]; } &&
            ! { [ "$(offload uroce1 tx_trains)" -gt 0 ] && [ "$(offload uroce0 rx_trains)" -gt 0 ]; }; then
            fail "no GSO train crossed from one device to the other"
        fi
    fi
fi
echo PASS
