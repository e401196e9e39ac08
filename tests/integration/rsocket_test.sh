#!/usr/bin/env bash
# Acceptance for rsockets (docs/rsockets.md): unmodified rdmacm-utils programs over the
# drop-in librdmacm.so.1, server and client as separate processes on one device.
# usage: rsocket_test.sh MODE [ARGS...]
#   rstream ARGS...    rstream server and client with ARGS (e.g. -T bv -S 65536); both
#                      must end 0, and with -T v the data is checked by rstream itself
#   riostream ARGS...  riostream likewise (riomap/riowrite)
#   rcopy MIB          rcopy of a MIB MiB random file; the copy's checksum must match
#   preload TOOL MIB   TOOL (socat or nc) under librspreload.so carries a MIB MiB file;
#                      checksummed; the capture shows RoCE (RDMA WRITEs) and no TCP
#   killed             a client killed mid-stream: the server's rrecv fails within 2 s
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: rsocket_test.sh MODE [ARGS...]}
shift
[ -e "$LIBDIR/librdmacm.so.1" ] || fail "$LIBDIR/librdmacm.so.1 is not built"
PORT=$(tcp_port)
UDP=${UROCE_UDP_PORT:-4791}

# wait_listener SERVER_PID: until the server's CM id listens on $PORT (uroce res).
wait_listener() {
    local i
    for i in $(seq 1 600); do
        "$UROCE" res 2>/dev/null | grep -Eq "^cm_id .* state listen .*:$PORT remote" && return
        kill -0 "$1" 2>/dev/null || return
        sleep 0.1
    done
}

case $mode in
rstream | riostream)
    need "$mode"
    start_device uroce0 127.0.0.1
    PAIR_READY=wait_listener run_pair "$mode" -p "$PORT" "$@" -- "$mode" -s 127.0.0.1 -p "$PORT" "$@"
    c=$UROCE_RUNTIME_DIR/client.out
    # Every test of the series printed its result line (name, bytes, ..., time).
    n=$(grep -Ec "^[0-9a-z_]+( +[0-9.]+[kmg]?){4} +[0-9.]+s " "$c")
    [ "$n" -gt 0 ] || fail "$mode printed no results"
    echo "$n result lines"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
echo PASS
