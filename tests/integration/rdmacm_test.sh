#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance for the connection manager (docs/cm.md): unmodified rdmacm-utils programs
# over the drop-in librdmacm.so.1 and libibverbs.so.1, server and client as separate
# processes; connections are IB CM MADs on QP1 between the devices' CM agents.
# usage: rdmacm_test.sh MODE
#   rping          rping -C 1000 -v -V over one device (127.0.0.1)
#   rping_many N   N short rping pairs one after another over one device (127.0.0.1); every
#                  one must pass (rping's client destroys its event channel while its CM
#                  thread is blocked in rdma_get_cm_event, or about to call it again: nothing
#                  may wake or fail; docs/cm.md), and the device holds no object afterwards
#   rping_two      rping between two devices: server on 127.0.0.2, client on 127.0.0.3
#   rping_later    rping -s -a 0.0.0.0 listening, then a device started (uroce1, 127.0.0.2):
#                  the listener takes it, as the kernel's takes a device added later, and a
#                  client reaches the server through it
#   ipv6_loopback  rping -a ::1 over a device on ::1 (RoCEv2 over IPv6 without root),
#                  captured: the CM MADs and the data over IPv6, the REQ's IP CM header of
#                  IP version 6
#   rdma_server    rdma_server / rdma_client (synchronous ids, rdma_create_ep, get_request)
#   ucmatose       ucmatose -c 10 server and client (10 connections on one event channel)
#   udaddy         udaddy (UD QPs, SIDR_REQ/SIDR_REP)
#   rejected       a client connecting to a port nobody listens on: RDMA_CM_EVENT_REJECTED
#   addr_error     a destination no device can reach: RDMA_CM_EVENT_ADDR_ERROR
#   unreachable    a destination with no device behind it: RDMA_CM_EVENT_UNREACHABLE after
#                  the REQ retries (2.5 s), well within 10 s
#   capture        rping between two devices, captured on the client's: REQ, REP, RTU, data,
#                  DREQ, DREP, all decoded by tshark
#   xrc C          rdma_xserver / rdma_xclient -c C (x: XRC, r: RC) over one device
#                  (127.0.0.1), captured: the REQ asks for the transport the mode names
#                  (XRC: service type 3, extended type 1), the REP names the TGT QP as its EE
#                  context, data goes as XRC (or RC) SENDs, all decoded by tshark
#   xrc_two C      the same between two devices: server on 127.0.0.2 and 127.0.0.3 (wildcard
#                  listener), client from 127.0.0.3 (UROCE_RDMACM_SRC_ADDR) to 127.0.0.2
#   srq BINARY     tests/integration/rdmacm_srq_tests.cpp (GoogleTest): rdma_create_srq(3),
#                  one test per sentence, over two devices (127.0.0.10 and 127.0.0.11)
#   events BINARY  tests/integration/rdmacm_events_tests.cpp (GoogleTest): an id's unread
#                  events follow rdma_migrate_id and go with rdma_destroy_id, one device
#   api BINARY     tests/integration/rdmacm_api.cpp: private data sizes, reject, a slow
#                  server (MRA), rdma_init_qp_attr, destroy waiting for acks, ports; IPv6
#                  ids on a second device on ::1 (wildcards and afonly, link-local, GIDs)
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: rdmacm_test.sh MODE}
[ -e "$LIBDIR/librdmacm.so.1" ] || fail "$LIBDIR/librdmacm.so.1 is not built"
UDP=${UROCE_UDP_PORT:-4791}
PORT=$(tcp_port)

expect() {  # expect FILE REGEX WHAT
    grep -Eq "$2" "$1" || fail "$3 (no /$2/ in $(basename "$1"))"
}

# run_alone CMD...: a single program with the drop-in libraries; prints its output and
# leaves it in $UROCE_RUNTIME_DIR/alone.out; returns its exit status.
run_alone() {
    local out=$UROCE_RUNTIME_DIR/alone.out
    verbs timeout "${ALONE_TIMEOUT:-60}" "$@" >"$out" 2>&1
    local rc=$?
    echo "--- $* (exit $rc)"
    cat "$out"
    return $rc
}

# cm_pair LISTEN_PORT SERVER_CMD... -- CLIENT_CMD...: run_pair (lib.sh), except that the
# client starts as soon as the server's CM id listens on LISTEN_PORT (as `uroce res` shows
# it on any device of this test), not after a fixed pause: a loaded machine may take longer
# than that to start the server, and a REQ for a port nobody listens on is rejected.
cm_pair() {
    local port=$1
    shift
    CM_PORT=$port PAIR_READY=wait_listener run_pair "$@"
}

# wait_listener SERVER_PID: until the server listens on $CM_PORT (lib.sh).
wait_listener() { cm_listening_on "$CM_PORT" "$1"; }

case $mode in
rping)
    need rping
    start_device uroce0 127.0.0.1
    cm_pair "$PORT" rping -s -a 127.0.0.1 -p "$PORT" -v -V -- rping -c -a 127.0.0.1 -p "$PORT" -C 1000 -v -V
    c=$UROCE_RUNTIME_DIR/client.out
    # (stderr's "client DISCONNECT EVENT..." may land inside a line of stdout: count matches)
    n=$(grep -o 'rdma-ping-[0-9]*: ' "$c" | sort -u | wc -l)
    [ "$n" = 1000 ] || fail "client printed $n distinct pings, expected 1000"
    expect "$c" 'rdma-ping-999: ' "the last ping is missing"
    expect "$UROCE_RUNTIME_DIR/server.out" 'rdma-ping-999: ' "server did not see ping 999"
    expect "$UROCE_RUNTIME_DIR/server.out" 'server DISCONNECT EVENT' "server saw no DISCONNECTED event"
    ;;
rping_many)
    need rping
    pairs=${2:?usage: rdmacm_test.sh rping_many N}
    start_device uroce0 127.0.0.1
    for i in $(seq 1 "$pairs"); do
        # A subshell: run_pair's own fail exits it, not the loop, so its output is shown.
        (cm_pair "$PORT" rping -s -a 127.0.0.1 -p "$PORT" -C 5 -v -- \
            rping -c -a 127.0.0.1 -p "$PORT" -C 5 -v) >"$UROCE_RUNTIME_DIR/pair.out" 2>&1 ||
            { cat "$UROCE_RUNTIME_DIR/pair.out"; "$UROCE" res; fail "pair $i of $pairs failed"; }
        expect "$UROCE_RUNTIME_DIR/client.out" 'rdma-ping-4: ' "pair $i: the client's last ping is missing"
    done
    echo "$pairs rping pairs passed"
    expect_no_objects uroce0
    ;;
rping_later)
    need rping
    start_device uroce0 127.0.0.1
    # Ready when the wildcard listener is on uroce0; then uroce1 starts, and the client
    # goes once uroce1 shows the listener too.
    later_device() {
        cm_listening_on "$CM_PORT" "$1"
        start_device uroce1 127.0.0.2
        local i
        for i in $(seq 1 100); do
            "$UROCE" res uroce1 2>/dev/null | grep -Eq "^cm_id .* state listen .*:$CM_PORT remote" && return
            sleep 0.1
        done
        fail "uroce1, started after rdma_listen, never took the wildcard listener"
    }
    CM_PORT=$PORT PAIR_READY=later_device run_pair rping -s -a 0.0.0.0 -p "$PORT" -C 50 -v -- \
        rping -c -a 127.0.0.2 -p "$PORT" -C 50 -v
    expect "$UROCE_RUNTIME_DIR/client.out" 'rdma-ping-49: ' "the last ping is missing"
    # The connection went through uroce1 (the client's QP and the server's are both there).
    "$UROCE" counters uroce1 | awk '$1 == "counters" && $3 > 0 { ok = 1 } END { exit !ok }' ||
        fail "uroce1 carried nothing"
    ;;
rping_two)
    need rping
    start_device uroce0 127.0.0.2
    start_device uroce1 127.0.0.3
    cm_pair "$PORT" rping -s -a 127.0.0.2 -p "$PORT" -v -- rping -c -I 127.0.0.3 -a 127.0.0.2 -p "$PORT" -C 200 -v -V
    expect "$UROCE_RUNTIME_DIR/client.out" 'rdma-ping-199: ' "the last ping is missing"
    # Each device took part: the client's QP on uroce1, the server's on uroce0.
    for d in uroce0 uroce1; do
        "$UROCE" counters "$d" | awk '$1 == "counters" && $3 > 0 { ok = 1 } END { exit !ok }' ||
            fail "$d sent nothing"
    done
    ;;
rdma_server)
    need rdma_server
    need rdma_client
    start_device uroce0 127.0.0.1
    cm_pair "$PORT" rdma_server -p "$PORT" -- rdma_client -s 127.0.0.1 -p "$PORT"
    expect "$UROCE_RUNTIME_DIR/server.out" '^rdma_server: end 0$' "rdma_server did not end with 0"
    expect "$UROCE_RUNTIME_DIR/client.out" '^rdma_client: end 0$' "rdma_client did not end with 0"
    ;;
ucmatose)
    need ucmatose
    start_device uroce0 127.0.0.1
    cm_pair "$PORT" ucmatose -p "$PORT" -c 10 -C 20 -- ucmatose -s 127.0.0.1 -p "$PORT" -c 10 -C 20
    for f in server.out client.out; do
        expect "$UROCE_RUNTIME_DIR/$f" '^return status 0$' "ucmatose ($f) did not return 0"
        expect "$UROCE_RUNTIME_DIR/$f" '^data transfers complete$' "ucmatose ($f) moved no data"
    done
    ;;
udaddy)
    need udaddy
    start_device uroce0 127.0.0.1
    # udaddy has no port option: it always uses 7174 (the device is this test's alone).
    PAIR_TIMEOUT=60 cm_pair 7174 udaddy -- udaddy -s 127.0.0.1 || {
        if grep -qE "unable to create QP|failure creating address handle" \
            "$UROCE_RUNTIME_DIR"/server.out "$UROCE_RUNTIME_DIR"/client.out; then
            skip "UD QPs or address handles are not available from the device yet"
        fi
        exit 1
    }
    for f in server.out client.out; do
        expect "$UROCE_RUNTIME_DIR/$f" '^return status 0$' "udaddy ($f) did not return 0"
        expect "$UROCE_RUNTIME_DIR/$f" '^data transfers complete$' "udaddy ($f) moved no data"
    done
    ;;
rejected)
    need rping
    start_device uroce0 127.0.0.1
    run_alone rping -c -a 127.0.0.1 -p "$PORT" -C 1 && fail "rping connected to nobody"
    # The device answers a REQ for a service nobody listens on with REJ "invalid service
    # ID" (IBTA reason 8), as the kernel's CM does; rping prints the event and its status.
    expect "$UROCE_RUNTIME_DIR/alone.out" 'cma event RDMA_CM_EVENT_REJECTED, error 8' \
        "rping did not report RDMA_CM_EVENT_REJECTED with reason 8"
    ;;
addr_error)
    need rping
    # The only device is on 127.0.0.2; the host routes 127.0.0.9 from 127.0.0.1, where no
    # device is: address resolution fails.
    start_device uroce0 127.0.0.2
    run_alone rping -c -a 127.0.0.9 -p "$PORT" -C 1 && fail "rping connected to nobody"
    expect "$UROCE_RUNTIME_DIR/alone.out" 'cma event RDMA_CM_EVENT_ADDR_ERROR, error -19' \
        "rping did not report RDMA_CM_EVENT_ADDR_ERROR (-ENODEV)"
    ;;
unreachable)
    need rping
    # The device on 127.0.0.1 reaches 127.0.0.9, but no device answers there: the REQ is
    # sent 5 times, 500 ms apart, then the connection is UNREACHABLE (-ETIMEDOUT).
    start_device uroce0 127.0.0.1
    t0=$(date +%s%N)
    run_alone rping -c -a 127.0.0.9 -p "$PORT" -C 1 && fail "rping connected to nobody"
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    echo "failed after $ms ms"
    expect "$UROCE_RUNTIME_DIR/alone.out" 'cma event RDMA_CM_EVENT_UNREACHABLE, error -110' \
        "rping did not report RDMA_CM_EVENT_UNREACHABLE (-ETIMEDOUT)"
    [ "$ms" -ge 2000 ] || fail "UNREACHABLE after $ms ms: the REQ was not retried"
    [ "$ms" -le 10000 ] || fail "UNREACHABLE only after $ms ms (documented: 2.5 s)"
    ;;
ipv6_loopback)
    need rping
    need tshark
    pcap=$UROCE_RUNTIME_DIR/cm6.pcap
    start_device uroce0 ::1 --pcap "$pcap"
    cm_pair "$PORT" rping -s -a ::1 -p "$PORT" -v -V -- rping -c -a ::1 -p "$PORT" -C 100 -v -V
    expect "$UROCE_RUNTIME_DIR/client.out" 'rdma-ping-99: ' "the last ping is missing"
    "$UROCE" capture stop uroce0 >/dev/null || fail "uroce capture stop"
    ts() { tshark -n -r "$pcap" -d "udp.port==$UDP,infiniband" "$@" 2>/dev/null; }
    total=$(ts -T fields -e frame.number | wc -l)
    v6=$(ts -Y "ipv6 && infiniband" -T fields -e frame.number | wc -l)
    echo "$v6 of $total captured packets are RoCEv2 over IPv6"
    [ "$total" -gt 0 ] && [ "$v6" = "$total" ] || fail "$v6 of $total packets over IPv6"
    seq=$(ts -T fields -e infiniband.bth.opcode -e infiniband.mad.mgmtclass -e infiniband.mad.attributeid | cm_sequence)
    echo "sequence: $seq"
    # (one device: every packet is recorded twice, sent and received)
    [ "$seq" = "REQ REP RTU data DREQ DREP " ] || fail "unexpected CM sequence: $seq"
    hdr=$(ts -Y 'infiniband.mad.attributeid == 0x0010' -T fields -e infiniband.cm.req.ip_cm.ipv \
        -e infiniband.cm.req.ip_cm.sip6 -e infiniband.cm.req.ip_cm.dip6 | head -1)
    [ "$hdr" = "0x06	::1	::1" ] || fail "the REQ's IP CM header is $hdr, not IP version 6 from ::1 to ::1"
    ;;
capture)
    need rping
    need tshark
    # Two devices, the capture on the client's: every packet once, in the order the client
    # sent and received it (on one loopback device the received copy of a packet may be
    # recorded after later sends).
    pcap=$UROCE_RUNTIME_DIR/cm.pcap
    start_device uroce0 127.0.0.2
    start_device uroce1 127.0.0.3 --pcap "$pcap"
    cm_pair "$PORT" rping -s -a 127.0.0.2 -p "$PORT" -- rping -c -I 127.0.0.3 -a 127.0.0.2 -p "$PORT" -C 10 -v
    "$UROCE" capture stop uroce1 >/dev/null || fail "uroce capture stop"
    ts() { tshark -n -r "$pcap" -d "udp.port==$UDP,infiniband" "$@" 2>/dev/null; }
    total=$(ts -T fields -e frame.number | wc -l)
    [ "$total" -gt 0 ] || fail "empty capture"
    bad=$(ts -Y '_ws.malformed || _ws.expert.severity >= error' -T fields -e frame.number | wc -l)
    [ "$bad" = 0 ] || { ts -Y '_ws.malformed || _ws.expert.severity >= error' -V | head -60; fail "$bad malformed frames"; }
    ib=$(ts -Y 'infiniband.bth.opcode && infiniband.invariant.crc' -T fields -e frame.number | wc -l)
    [ "$ib" = "$total" ] || fail "$ib of $total frames decode as InfiniBand"
    # The sequence of events, one word each: CM messages by name, "data" for RC (lib.sh).
    seq=$(ts -T fields -e infiniband.bth.opcode -e infiniband.mad.mgmtclass -e infiniband.mad.attributeid | cm_sequence)
    echo "sequence: $seq"
    [ "$seq" = "REQ REP RTU data DREQ DREP " ] || fail "unexpected CM sequence: $seq"
    # tshark names them as the CM dissector does.
    for m in ConnectRequest ConnectReply ReadyToUse DisconnectRequest DisconnectReply; do
        ts -Y "infiniband.mad.mgmtclass == 0x07" | grep -q "CM: $m" || fail "tshark shows no CM $m"
    done
    # The REQ carries the RDMA CM IP header: the port rping connected to, the addresses.
    ts -Y 'infiniband.mad.attributeid == 0x0010' -V | grep -q "IP CM Destination IP: 127.0.0.2" ||
        fail "the REQ has no RDMA CM IP private data header"
    dport=$(ts -Y 'infiniband.mad.attributeid == 0x0010' -T fields -e infiniband.cm.req.serviceid.dport | head -1)
    [ "$((dport))" = "$PORT" ] || fail "REQ service ID port $dport, expected $PORT"
    # Every ICRC, the MADs' included, as scapy computes it.
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
        out=$(/usr/bin/python3 "$(dirname "$0")/../unit/icrc_scapy_check.py" "$pcap" --port "$UDP" 2>&1) ||
            fail "scapy ICRC check: $out"
        echo "$out"
        [ "$out" = "checked $total packets, 0 mismatches" ] || fail "scapy: $out (expected $total packets)"
    fi
    ;;
xrc | xrc_two)
    need rdma_xserver
    need rdma_xclient
    need tshark
    c=${2:?usage: rdmacm_test.sh $mode x|r}
    pcap=$UROCE_RUNTIME_DIR/xrc.pcap
    if [ "$mode" = xrc ]; then
        start_device uroce0 127.0.0.1 --pcap "$pcap"
        cm_pair "$PORT" rdma_xserver -p "$PORT" -c "$c" -- rdma_xclient -s 127.0.0.1 -p "$PORT" -c "$c"
        capdev=uroce0
    else
        start_device uroce0 127.0.0.2
        start_device uroce1 127.0.0.3 --pcap "$pcap"
        cm_pair "$PORT" rdma_xserver -p "$PORT" -c "$c" -- \
            env UROCE_RDMACM_SRC_ADDR=127.0.0.3 rdma_xclient -s 127.0.0.2 -p "$PORT" -c "$c"
        capdev=uroce1
        # The server answered on uroce0, the client sent from uroce1.
        for d in uroce0 uroce1; do
            "$UROCE" counters "$d" | awk '$1 == "counters" && $3 > 0 { ok = 1 } END { exit !ok }' ||
                fail "$d sent nothing"
        done
    fi
    expect "$UROCE_RUNTIME_DIR/server.out" '^rdma_xserver: end 0$' "rdma_xserver did not end with 0"
    expect "$UROCE_RUNTIME_DIR/client.out" '^rdma_xclient: end 0$' "rdma_xclient did not end with 0"
    "$UROCE" capture stop "$capdev" >/dev/null || fail "uroce capture stop"
    ts() { tshark -n -r "$pcap" -d "udp.port==$UDP,infiniband" "$@" 2>/dev/null; }
    bad=$(ts -Y '_ws.malformed || _ws.expert.severity >= error' -T fields -e frame.number | wc -l)
    [ "$bad" = 0 ] || { ts -Y '_ws.malformed || _ws.expert.severity >= error' -V | head -60; fail "$bad malformed frames"; }
    # One pass over the capture (tshark is slow to start): per packet the BTH opcode, the
    # MAD attribute, the REQ's transport service and extended transport types, the REP's
    # QPN, EECN and SRQ bit, and tshark's summary.
    dump=$UROCE_RUNTIME_DIR/xrc.txt
    ts -T fields -E occurrence=f -e infiniband.bth.opcode -e infiniband.mad.attributeid \
        -e infiniband.cm.req.transpsvctype -e infiniband.cm.req.ext_transport \
        -e infiniband.cm.rep.localqpn -e infiniband.cm.rep.localeecn -e infiniband.cm.rep.srq \
        -e _ws.col.Info >"$dump"
    cat "$dump"
    field() {  # field ATTRIBUTE COLUMN...: the columns of its first MAD, empty ones as 0
        awk -F'\t' -v a="$1" -v cols="${*:2}" '$2 == a {
            n = split(cols, c, " ")
            for (i = 1; i <= n; ++i) printf "%s ", ($c[i] == "" ? 0 : $c[i])
            exit }' "$dump"
    }
    read -r rq_t rq_x <<<"$(field 0x0010 3 4)"
    read -r rp_q rp_e rp_s <<<"$(field 0x0013 5 6 7)"
    req="$((rq_t)) $((rq_x))"
    rep="$((rp_q)) $((rp_e)) $((rp_s))"
    # Data packets (not QP1's UD SENDs): XRC SEND ONLY is opcode 164, RC's 4.
    ops=" $(awk -F'\t' '$1 != 100 { print $1 }' "$dump" | sort -un | tr '\n' ' ')"
    echo "REQ transport service type, extended type: $req; REP QPN, EECN, SRQ: $rep; data opcodes:$ops"
    if [ "$c" = x ]; then
        [ "$req" = "3 1" ] || fail "XRC REQ with transport types $req, want 3 1"
        read -r qpn eecn srq <<<"$rep"
        [ "$qpn" = 0 ] && [ "$eecn" != 0 ] && [ "$srq" = 1 ] ||
            fail "XRC REP with QPN $qpn EECN $eecn SRQ $srq: want the TGT QP as the EECN"
        [[ $ops == *" 164 "* ]] || fail "no XRC SEND ONLY (164) data packet"
    else
        [ "$req" = "0 0" ] || fail "RC REQ with transport types $req, want 0 0"
        read -r qpn eecn srq <<<"$rep"
        [ "$qpn" != 0 ] || fail "RC REP with no QPN"
        [[ $ops == *" 4 "* ]] || fail "no RC SEND ONLY (4) data packet"
    fi
    for m in ConnectRequest ConnectReply ReadyToUse DisconnectRequest DisconnectReply; do
        grep -q "CM: $m" "$dump" || fail "tshark shows no CM $m"
    done
    ;;
perftest)
    # perftest PROGRAM ARGS...: one unmodified perftest program with -R, server and client;
    # perftest makes two RDMA CM connections in a row on the port (one to exchange its
    # parameters, one for the test), re-creating its listener in between.
    prog=${2:?usage: rdmacm_test.sh perftest PROGRAM [ARGS...]}
    need "$prog"
    shift 2
    start_device uroce0 127.0.0.1
    cm_pair "$PORT" "$prog" -R -p "$PORT" "$@" -- "$prog" -R -p "$PORT" "$@" 127.0.0.1
    c=$UROCE_RUNTIME_DIR/client.out
    expect "$c" 'Data ex\. method *: rdma_cm' "$prog did not exchange its data through rdma_cm"
    check_perftest_results "$prog" "$c"
    # Both connections went through the device's CM agent: REQ, REP, RTU, DREQ, DREP each
    # (sent and received on one device).
    mads=$("$UROCE" res | awk '$1 == "cm" { for (i = 2; i < NF; ++i) if ($i == "mads_rx") print $(i + 1) }')
    echo "CM MADs received by the device: $mads"
    [ "${mads:-0}" -ge 10 ] || fail "only ${mads:-0} CM MADs: the connections did not go through the CM"
    ;;
srq)
    # rdmacm_srq_tests (GoogleTest): rdma_create_srq(3) sentence by sentence over two devices;
    # afterwards neither holds an object of the test's.
    gtests_on_two_devices "${2:?usage: rdmacm_test.sh srq BINARY}" 127.0.0.10 127.0.0.11
    ;;
events)
    # rdmacm_events_tests (GoogleTest): rdma_migrate_id and rdma_destroy_id with events
    # unread, over one device; a SEND posted right before rdma_disconnect, from a second
    # device; afterwards they hold no object of the test's.
    gtests_on_two_devices "${2:?usage: rdmacm_test.sh events BINARY}" 127.0.0.1 127.0.0.2
    ;;
api)
    start_device uroce0 127.0.0.1
    start_device uroce1 ::1  # IPv6 ids (test_ipv6)
    run_alone "${2:?usage: rdmacm_test.sh api BINARY}" 127.0.0.1 ::1 || fail "rdmacm_api failed"
    expect "$UROCE_RUNTIME_DIR/alone.out" '^PASS$' "rdmacm_api did not pass"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
echo PASS
