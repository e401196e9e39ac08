#!/usr/bin/env bash
# Acceptance: an unmodified perftest program (Debian's perftest package), server and
# client as two processes over one device, with perftest's default connection setup
# (QP numbers, PSNs, rkeys exchanged over TCP on -p PORT).
#   usage: perftest_test.sh PROGRAM [perftest args...]
# Checks: both sides exit 0; the client prints its results table (the line under the
# "#bytes" header, all numbers, with a nonzero bandwidth or latency); and the
# libmlx5.so.1/libefa.so.1 the programs load are uroce's stand-ins from the build
# directory, with none of Debian's provider libraries loaded (LD_DEBUG=libs).
. "$(dirname "$0")/lib.sh"
prog=$1
shift
need "$prog"
start_device uroce0 127.0.0.1
port=$(tcp_port)

lddir=$UROCE_RUNTIME_DIR/ld
mkdir -p "$lddir"
LD_DEBUG=libs LD_DEBUG_OUTPUT=$lddir/ld run_pair \
    "$prog" -p "$port" "$@" -- "$prog" -p "$port" "$@" 127.0.0.1

# The results table: the header line, then one line of numbers per size.
clog=$UROCE_RUNTIME_DIR/client.out
row=$(awk '/^ *#bytes +#iterations/ { hdr = 1; next }
           hdr && /^ *[0-9]+ +[0-9]+ +[0-9.]+/ { print; exit }' "$clog")
[ -n "$row" ] || fail "the client printed no results table"
# Third column: BW peak (MB/s) for the _bw programs, t_min (usec) for the _lat ones.
awk -v r="$row" 'BEGIN { split(r, f, " "); exit !(f[3] + 0 > 0) }' ||
    fail "results row has no positive figure: $row"
echo "results: $row"

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
echo PASS
