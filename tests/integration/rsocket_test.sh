#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance for rsockets (docs/rsockets.md): unmodified rdmacm-utils programs over the
# drop-in librdmacm.so.1, server and client as separate processes on one device.
# usage: rsocket_test.sh MODE [ARGS...]
#   rstream ARGS...    rstream server and client with ARGS (none: its default series);
#                      both must end 0; with -T v rstream checks every byte itself
#   riostream ARGS...  riostream likewise (riomap/riowrite)
#   sizes PROGRAM "SIZES" ARGS...  PROGRAM (rstream or riostream) once per -S size
#   rcopy MIB          rcopy of a MIB MiB random file; the copy's checksum must match
#   preload MIB        nc sends a MIB MiB file to socat, both under librspreload.so;
#                      checksummed; the capture shows RoCE (RDMA WRITEs) and no TCP
#   api BINARY         tests/integration/rsocket_api.cpp (GoogleTest): the calls' answers;
#                      afterwards the device holds no object
#   udpong ARGS...     udpong (SOCK_DGRAM) server bound to 127.0.0.1 and client, 1000 x 1000 B
#   killed client|server  that side of an rstream pair killed mid-stream: the other
#                      fails with ECONNRESET within 2 s
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: rsocket_test.sh MODE [ARGS...]}
shift
[ -e "$LIBDIR/librdmacm.so.1" ] || fail "$LIBDIR/librdmacm.so.1 is not built"
PORT=$(tcp_port)
UDP=${UROCE_UDP_PORT:-4791}

# wait_listener SERVER_PID: until the server's CM id listens on $PORT (lib.sh).
wait_listener() { cm_listening_on "$PORT" "$1"; }

# check_results OUTPUT: rstream/riostream printed at least one result line (name, bytes,
# transfers, iterations, total, time, ...); with -T v they checked every byte themselves.
check_results() {
    local n
    n=$(grep -Ec "^[0-9a-z_]+( +[0-9.]+[kmg]?){4} +[0-9.]+s " "$1")
    [ "$n" -gt 0 ] || fail "no result lines in $(basename "$1")"
    echo "$n result lines"
}

case $mode in
rstream | riostream)
    need "$mode"
    start_device uroce0 127.0.0.1
    PAIR_TIMEOUT=${PAIR_TIMEOUT:-600} PAIR_READY=wait_listener \
        run_pair "$mode" -p "$PORT" "$@" -- "$mode" -s 127.0.0.1 -p "$PORT" "$@"
    check_results "$UROCE_RUNTIME_DIR/client.out"
    ;;
sizes)
    # sizes PROGRAM "SIZE..." ARGS...: one run of PROGRAM (rstream or riostream) per
    # transfer size, 200 transfers each, on one device.
    prog=${1:?usage: rsocket_test.sh sizes PROGRAM SIZES ARGS...}
    sizes=${2:?usage: rsocket_test.sh sizes PROGRAM SIZES ARGS...}
    shift 2
    need "$prog"
    start_device uroce0 127.0.0.1
    for size in $sizes; do
        PAIR_READY=wait_listener run_pair "$prog" -p "$PORT" -S "$size" -C 200 "$@" -- \
            "$prog" -s 127.0.0.1 -p "$PORT" -S "$size" -C 200 "$@"
        check_results "$UROCE_RUNTIME_DIR/client.out"
    done
    ;;
rcopy)
    need rcopy
    mib=${1:?usage: rsocket_test.sh rcopy MIB}
    start_device uroce0 127.0.0.1
    src=$UROCE_RUNTIME_DIR/src.bin dst=$UROCE_RUNTIME_DIR/dst.bin
    head -c "$((mib << 20))" /dev/urandom >"$src"
    # The server serves until stopped.
    verbs timeout 300 rcopy -p "$PORT" >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
    spid=$!
    wait_listener $spid
    verbs timeout 300 rcopy "$src" "127.0.0.1:$dst" -p "$PORT" >"$UROCE_RUNTIME_DIR/client.out" 2>&1
    crc=$?
    kill $spid 2>/dev/null
    wait $spid 2>/dev/null
    echo "--- server"; cat "$UROCE_RUNTIME_DIR/server.out"
    echo "--- client (exit $crc)"; cat "$UROCE_RUNTIME_DIR/client.out"
    [ $crc = 0 ] || fail "rcopy exit $crc"
    a=$(sha256sum <"$src") b=$(sha256sum <"$dst")
    echo "source $a"
    echo "copy   $b"
    [ "$a" = "$b" ] || fail "the copy differs from the source"
    ;;
preload)
    # Unmodified TCP programs under librspreload.so (Debian's, calling our rsocket
    # functions through our librdmacm.so.1): socat receives a MIB MiB file that nc sends.
    # (Not the other way round: Debian's librspreload, rdma-core 44, has no accept4, which
    # nc's server calls, and socat's client calls recv before librspreload is initialised.)
    mib=${1:?usage: rsocket_test.sh preload MIB}
    need socat
    need nc
    need tshark
    preload=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so
    [ -e "$preload" ] || skip "$preload is not installed (librdmacm1)"
    pcap=$UROCE_RUNTIME_DIR/rs.pcap tcp=$UROCE_RUNTIME_DIR/tcp.pcap
    start_device uroce0 127.0.0.1 --pcap "$pcap"
    src=$UROCE_RUNTIME_DIR/src.bin dst=$UROCE_RUNTIME_DIR/dst.bin
    head -c "$((mib << 20))" /dev/urandom >"$src"
    # Any TCP segment on the port would mean the program's socket stayed a TCP socket.
    tshark -n -q -i lo -f "tcp port $PORT" -w "$tcp" >/dev/null 2>&1 &
    tpid=$!
    # (Capturing once the file has its header: dumpcap writes it when it has the interface.)
    for _ in $(seq 100); do [ -s "$tcp" ] && break; sleep 0.1; done
    # (In a sanitizer build the ASan runtime comes first, as lib.sh's VERBS_ENV has it.)
    pre=(env "LD_LIBRARY_PATH=$LIBDIR" "LD_PRELOAD=${UROCE_PRELOAD:+$UROCE_PRELOAD:}$preload")
    [ -n "${UROCE_PRELOAD:-}" ] && pre+=("ASAN_OPTIONS=detect_leaks=0:${ASAN_OPTIONS:-}")
    "${pre[@]}" timeout 300 socat -u "TCP-LISTEN:$PORT,bind=127.0.0.1,reuseaddr" "CREATE:$dst" \
        >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
    spid=$!
    wait_listener $spid
    t0=$(date +%s%N)
    "${pre[@]}" timeout 300 nc -N 127.0.0.1 "$PORT" <"$src" >"$UROCE_RUNTIME_DIR/client.out" 2>&1
    crc=$?
    wait $spid
    src_rc=$?
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    kill $tpid 2>/dev/null
    wait $tpid 2>/dev/null
    echo "--- server (exit $src_rc)"; cat "$UROCE_RUNTIME_DIR/server.out"
    echo "--- client (exit $crc)"; cat "$UROCE_RUNTIME_DIR/client.out"
    [ $crc = 0 ] && [ $src_rc = 0 ] || fail "socat exit $src_rc, nc exit $crc"
    a=$(sha256sum <"$src") b=$(sha256sum <"$dst")
    echo "source $a"
    echo "copy   $b ($mib MiB in $ms ms)"
    [ "$a" = "$b" ] || fail "the copy differs from the source"
    [ -s "$tcp" ] || fail "no capture of lo (tshark -i lo needs capture rights)"
    ntcp=$(tshark -n -r "$tcp" 2>/dev/null | wc -l)
    echo "TCP segments on port $PORT: $ntcp"
    [ "$ntcp" = 0 ] || fail "$ntcp TCP segments on port $PORT: the data went over TCP"
    "$UROCE" capture stop uroce0 >/dev/null || fail "uroce capture stop"
    # The data as RoCE: RC RDMA WRITEs (opcodes 6-11) carrying at least the file's bytes.
    bytes=$(tshark -n -r "$pcap" -d "udp.port==$UDP,infiniband" \
        -Y 'infiniband.bth.opcode >= 6 && infiniband.bth.opcode <= 11' \
        -T fields -e infiniband.reth.dmalen 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    echo "RDMA WRITE bytes in the capture (RETH DMA lengths): $bytes"
    [ "$bytes" -ge "$((mib << 20))" ] || fail "the capture shows $bytes RDMA WRITE bytes"
    ;;
api)
    start_device uroce0 127.0.0.1
    verbs timeout 120 "${1:?usage: rsocket_test.sh api BINARY}" 127.0.0.1 || fail "rsocket_api failed"
    expect_no_objects uroce0
    ;;
udpong)
    # udpong (datagram rsockets) ARGS...: 1000 datagrams of 1000 bytes; both end 0.
    need udpong
    start_device uroce0 127.0.0.1
    verbs timeout 60 udpong -b 127.0.0.1 -p "$PORT" >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
    spid=$!
    sleep 0.5
    verbs timeout 60 udpong -s 127.0.0.1 -p "$PORT" -C 1000 -S 1000 "$@" >"$UROCE_RUNTIME_DIR/client.out" 2>&1
    crc=$?
    kill $spid 2>/dev/null
    wait $spid 2>/dev/null
    echo "--- client (exit $crc)"; cat "$UROCE_RUNTIME_DIR/client.out"
    [ $crc = 0 ] || fail "udpong exit $crc"
    grep -Eq '^custom +1000 +[0-9]+k? ' "$UROCE_RUNTIME_DIR/client.out" || fail "udpong printed no result"
    ;;
killed)
    # killed client|server: rstream streams (the client sends first); the named side is
    # killed (SIGKILL) mid-stream; the other must fail (not hang, not end 0) within 2 s.
    need rstream
    victim=${1:?usage: rsocket_test.sh killed client|server}
    start_device uroce0 127.0.0.1
    args=(-S 1000000 -C 1000000 -T b)
    # No `timeout` wrapper: $! must be rstream itself (env execs it).
    "${VERBS_ENV[@]}" rstream -p "$PORT" "${args[@]}" >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
    spid=$!
    wait_listener $spid
    "${VERBS_ENV[@]}" rstream -s 127.0.0.1 -p "$PORT" "${args[@]}" >"$UROCE_RUNTIME_DIR/client.out" 2>&1 &
    cpid=$!
    sleep 1.5
    kill -0 $spid && kill -0 $cpid || fail "rstream ended before the kill"
    if [ "$victim" = client ]; then kpid=$cpid other=$spid; else kpid=$spid other=$cpid; fi
    kill -9 $kpid
    t0=$(date +%s%N)
    for _ in $(seq 100); do kill -0 $other 2>/dev/null || break; sleep 0.05; done
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if kill -0 $other 2>/dev/null; then
        kill $other
        fail "the $victim's peer still runs 5 s after the $victim was killed"
    fi
    wait $other
    rc=$?
    wait $kpid 2>/dev/null
    out=$UROCE_RUNTIME_DIR/$([ "$victim" = client ] && echo server || echo client).out
    echo "--- peer of the killed $victim (exit $rc after $ms ms)"; cat "$out"
    [ $rc != 0 ] || fail "the peer of the killed $victim ended 0"
    grep -Eq 'Connection reset by peer|Broken pipe' "$out" || fail "no ECONNRESET/EPIPE reported"
    [ "$ms" -le 2000 ] || fail "the error came after $ms ms (more than 2 s)"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
echo PASS
