# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Shared helpers for the integration tests: each test gets its own runtime directory
# (so tests can run side by side) and stops every device it started.
set -u
if [ -n "${UROCE_PREFIX:-}" ]; then
    # An installed uroce (the Debian package's test): its command, and its libraries only
    # through `uroce run`, as a user of the package gets them.
    UROCE="$UROCE_PREFIX/bin/uroce"
    LIBDIR=""
else
    : "${UROCE_BUILD:?UROCE_BUILD must point at the build directory}"
    UROCE="$UROCE_BUILD/bin/uroce"
    LIBDIR="$UROCE_BUILD/lib"
fi
export UROCE_RUNTIME_DIR
UROCE_RUNTIME_DIR=$(mktemp -d /tmp/uroce-test.XXXXXX)
export UROCE_NO_AUTOSTART=1

cleanup() {
    local rc=$?
    "$UROCE" stop >/dev/null 2>&1 || true
    # A device that hit a sanitizer report (ASan build) fails the test even if the
    # programs over it passed.
    # (*/*.log: the devices of twohost_lib.sh's hosts, in runtime directories of their own.)
    if grep -l -E "ERROR: (Address|Leak)Sanitizer|runtime error:" "$UROCE_RUNTIME_DIR"/*.log \
        "$UROCE_RUNTIME_DIR"/*/*.log >/dev/null 2>&1; then
        echo "FAIL: sanitizer report in the device log:" >&2
        cat "$UROCE_RUNTIME_DIR"/*.log "$UROCE_RUNTIME_DIR"/*/*.log >&2 2>/dev/null
        rc=1
    fi
    rm -rf "$UROCE_RUNTIME_DIR"
    exit $rc
}
trap cleanup EXIT
# The watchdog is double-forked and in a session of its own, so that a kill of the test's
# process tree or group (ctest's timeout) does not take it along.
(setsid "$(dirname "${BASH_SOURCE[0]}")/watchdog.sh" $$ "$UROCE_RUNTIME_DIR" "$UROCE" \
    </dev/null >/dev/null 2>&1 &)

fail() {
    echo "FAIL: $*" >&2
    for log in "$UROCE_RUNTIME_DIR"/*.log "$UROCE_RUNTIME_DIR"/*/*.log; do
        [ -f "$log" ] && { echo "--- $log"; tail -20 "$log"; } >&2
    done
    exit 1
}

skip() {
    echo "SKIP: $*"
    exit 77
}

need() {
    command -v "$1" >/dev/null 2>&1 || skip "$1 is not installed (run scripts/setup.sh)"
}

# unprivileged_part: the part of a test run as an unprivileged user (65534), for a test run
# as root: NB_DIR is a runtime directory of that user's (its devices stopped and logs kept
# when the test ends) and AS_NOBODY the command prefix that runs as that user. Where that
# cannot be (not root, no setpriv, no user namespaces for the user) it says so and ends the
# test with PASS.
unprivileged_part() {
    local nobody=65534
    if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null ||
        ! setpriv --reuid=$nobody --regid=$nobody --clear-groups unshare -U -m true 2>/dev/null ||
        ! setpriv --reuid=$nobody --regid=$nobody --clear-groups test -x "$UROCE"; then
        echo "SKIP (part): the unprivileged run needs root, setpriv and user namespaces for $nobody"
        echo PASS
        exit 0
    fi
    AS_NOBODY=(setpriv --reuid=$nobody --regid=$nobody --clear-groups env XDG_RUNTIME_DIR=)
    NB_DIR=$(mktemp -d /tmp/uroce-test-nobody.XXXXXX)
    chown $nobody:$nobody "$NB_DIR"
    trap 'UROCE_RUNTIME_DIR=$NB_DIR "${AS_NOBODY[@]}" "$UROCE" stop >/dev/null 2>&1
          cat "$NB_DIR"/*.log >>"$UROCE_RUNTIME_DIR/nobody-devices.log" 2>/dev/null
          rm -rf "$NB_DIR"; cleanup' EXIT
}

# start_watched_device NAME ADDR: start_device, and the device's process id in $pid (for
# expect_survived_empty).
start_watched_device() {
    start_device "$1" "$2"
    pid=$(awk -v n="$1" '$1 == n { for (i = 1; i < NF; ++i) if ($i == "pid") print $(i + 1) }' \
          < <("$UROCE" list))
    [ -n "$pid" ] || fail "uroce list does not show $1's pid"
}

# expect_survived_empty NAME: after the test's programs exited, the process of device NAME
# ($pid) still runs, the device answers `uroce res` (shown, and left in $res) and every count
# it lists (sessions, pds, mrs, cqs, qps, ...) is zero.
expect_survived_empty() {
    local counts
    kill -0 "$pid" 2>/dev/null || fail "device process $pid died"
    sleep 0.2  # the device closes each session when it sees the socket hang up
    res=$("$UROCE" res "$1") || fail "uroce res failed: the device is not answering"
    echo "$res"
    counts=$(echo "$res" | grep '^counts ') || fail "no counts line in uroce res"
    echo "$counts" | awk '{ for (i = 2; i < NF; i += 2) if ($(i + 1) != 0) exit 1 }' ||
        fail "objects remain after the program exited: $counts"
}

# start_device NAME ADDR [extra uroce start args...]. The UDP port comes from
# UROCE_UDP_PORT (each ctest has its own, so tests on one address can run in parallel).
start_device() {
    local name=$1 addr=$2
    shift 2
    "$UROCE" start --name "$name" --addr "$addr" "$@" >/dev/null || fail "uroce start $name $addr"
}

# In a sanitizer build the drop-in library needs the ASan runtime loaded first into
# the (uninstrumented) Debian programs; their own leaks are not ours to report.
VERBS_ENV=(env ${LIBDIR:+"LD_LIBRARY_PATH=$LIBDIR"})
if [ -n "${UROCE_PRELOAD:-}" ]; then
    VERBS_ENV+=("LD_PRELOAD=$UROCE_PRELOAD" "ASAN_OPTIONS=detect_leaks=0:${ASAN_OPTIONS:-}")
fi

# op_pkts DEV tx|rx OPCODE_NAME: packets of that opcode the device counted.
op_pkts() {
    "$UROCE" counters "$1" | awk -v d="$2" -v op="$3" '
        $1 == "counters_op" && $2 == d && $3 == op { print $5; found = 1 }
        END { if (!found) print 0 }'
}

# Runs a program with the drop-in libraries.
verbs() {
    "${VERBS_ENV[@]}" "$@"
}

# expect_op_pkts "DEV tx|rx OPCODE_NAME N"...: each device counted exactly N packets of that
# opcode.
expect_op_pkts() {
    local c n
    for c in "$@"; do
        set -- $c
        n=$(op_pkts "$1" "$2" "$3")
        echo "$1 $2 $3: $n"
        [ "$n" = "$4" ] || fail "$1 $2 $3: $n packets, want $4"
    done
}

# run_checks NAME SECONDS PROGRAM [ARGS...]: runs, with the drop-in libraries and for SECONDS
# at most, a program that makes its own checks and prints "all checks passed" when every one
# held; shows its output (left in $out) and fails the test, naming NAME, unless it passed.
run_checks() {
    local name=$1 secs=$2 rc
    shift 2
    out=$UROCE_RUNTIME_DIR/prog.out
    verbs timeout "$secs" "$@" >"$out" 2>&1
    rc=$?
    cat "$out"
    [ $rc = 0 ] || fail "$name exited $rc"
    grep -q "^all checks passed$" "$out" || fail "$name did not finish its checks"
}

# A TCP port for the test programs' own out-of-band exchange, unlikely to collide
# with a parallel test.
tcp_port() {
    echo $(( 20000 + ($$ % 20000) ))
}

# run_pair SERVER_CMD... -- CLIENT_CMD...: starts the server, gives it a moment to
# listen, runs the client; both must exit 0 within the timeout.
run_pair() {
    local timeout_s=${PAIR_TIMEOUT:-120}
    local server=() client=() seen=0
    for a in "$@"; do
        if [ "$a" = "--" ] && [ $seen = 0 ]; then seen=1; continue; fi
        if [ $seen = 0 ]; then server+=("$a"); else client+=("$a"); fi
    done
    local slog=$UROCE_RUNTIME_DIR/server.out clog=$UROCE_RUNTIME_DIR/client.out
    verbs timeout "$timeout_s" "${server[@]}" >"$slog" 2>&1 &
    local spid=$!
    # PAIR_READY names a function that waits until the server is ready (given its pid);
    # without one, until its TCP port (the server's "-p PORT": the pingpongs, perftest and
    # ucx_perftest exchange their set-up over TCP and their clients connect once) listens.
    local prev= port=
    for a in "${server[@]}"; do
        [ "$prev" = -p ] && port=$a
        prev=$a
    done
    if [ -n "${PAIR_READY:-}" ]; then
        "$PAIR_READY" $spid
    elif [ -n "$port" ]; then
        tcp_port_ready "$port" $spid
    else
        sleep "${SERVER_WAIT:-0.5}"
    fi
    verbs timeout "$timeout_s" "${client[@]}" >"$clog" 2>&1
    local crc=$?
    wait $spid
    local src=$?
    echo "--- server: ${server[*]} (exit $src)"; cat "$slog"
    echo "--- client: ${client[*]} (exit $crc)"; cat "$clog"
    [ $src = 0 ] && [ $crc = 0 ] || fail "server exit $src, client exit $crc"
}

# pair_script PORT: a POSIX shell script, on stdout, for a shell of its own (a later CI step):
# an ibv_rc_pingpong server on TCP port PORT in the background, the client once the server
# listens; their output goes to $UROCE_RUNTIME_DIR/{server,client}.out and is printed after.
# It exits 0 when both did.
pair_script() {
    local listening
    listening=$(printf ':%04X 0\\+:0000 0A' "$1") # the server's port in /proc/net/tcp
    cat <<EOF
ibv_rc_pingpong -g 0 -p $1 >"$UROCE_RUNTIME_DIR/server.out" 2>&1 &
server=\$!
i=0
while [ \$i -lt 1200 ] && kill -0 \$server 2>/dev/null &&
    ! grep -qs '$listening' /proc/net/tcp /proc/net/tcp6; do
    i=\$((i + 1))
    sleep 0.05
done
ibv_rc_pingpong -g 0 -p $1 127.0.0.1 >"$UROCE_RUNTIME_DIR/client.out" 2>&1
c=\$?
wait \$server
s=\$?
echo "--- server (exit \$s)"; cat "$UROCE_RUNTIME_DIR/server.out"
echo "--- client (exit \$c)"; cat "$UROCE_RUNTIME_DIR/client.out"
[ \$c = 0 ] && [ \$s = 0 ]
EOF
}

# tcp_port_ready PORT PID: waits (up to 60 s) until something listens on TCP PORT in this
# network namespace, or process PID has ended.
tcp_port_ready() {
    local pat i
    pat=$(printf ':%04X 0\\+:0000 0A' "$1")
    for i in $(seq 1 1200); do
        grep -qs "$pat" /proc/net/tcp /proc/net/tcp6 && return 0
        kill -0 "$2" 2>/dev/null || return 0
        sleep 0.05
    done
}

# cm_listening_on PORT SERVER_PID: waits until a CM id listens on PORT on one of this test's
# devices (`uroce res`): up to a minute (a loaded host can be slow to start the server), but
# not once the server has died.
cm_listening_on() {
    local i
    for i in $(seq 1 600); do
        "$UROCE" res 2>/dev/null | grep -Eq "^cm_id .* state listen .*:$1 remote" && return
        kill -0 "$2" 2>/dev/null || return
        sleep 0.1
    done
}

# check_perftest_results PROGRAM CLIENT_LOG: the client printed its results table (the line
# under the "#bytes" header, all numbers) with a positive BW average (MB/s, 4th column)
# for the _bw programs or t_min (usec, 3rd) for the _lat ones. The row is left in $row.
# cm_sequence: reads tshark's "-e infiniband.bth.opcode -e infiniband.mad.mgmtclass -e
# infiniband.mad.attributeid" lines and prints what happened, one word per run of packets: CM
# messages by name (REQ REP RTU DREQ DREP REJ MRA), "data" for RC packets, ?OPCODE otherwise.
cm_sequence() {
    awk -F'\t' '
        BEGIN {
            name["0x0010"] = "REQ"; name["0x0013"] = "REP"; name["0x0014"] = "RTU"
            name["0x0015"] = "DREQ"; name["0x0016"] = "DREP"; name["0x0012"] = "REJ"
            name["0x0011"] = "MRA"
        }
        $1 == 100 && $2 == "0x07" {
            n = ($3 in name) ? name[$3] : ("MAD" $3)
            if (n != last) printf "%s ", n
            last = n
            next
        }
        $1 < 32 { if (last != "data") printf "data "; last = "data"; next }
        { printf "?%s ", $1; last = "" }'
}

check_perftest_results() {
    local prog=$1 clog=$2 col=3
    row=$(awk '/^ *#bytes +#iterations/ { hdr = 1; next }
               hdr && /^ *[0-9]+ +[0-9]+ +[0-9.]+/ { print; exit }' "$clog")
    [ -n "$row" ] || fail "the client printed no results table"
    case $prog in *_bw) col=4 ;; esac
    awk -v r="$row" -v c=$col 'BEGIN { split(r, f, " "); exit !(f[c] + 0 > 0) }' ||
        fail "results row has no positive figure: $row"
    echo "results: $row"
}

# expect_no_objects DEVICE...: after the test's processes exited, each device holds no
# object (every count of `uroce res`'s counts line is 0).
expect_no_objects() {
    local d counts
    sleep 0.2  # the device closes a session when it sees the socket hang up
    for d in "$@"; do
        counts=$("$UROCE" res "$d" | grep '^counts ')
        echo "$d: $counts"
        echo "$counts" | awk '{ for (i = 2; i < NF; i += 2) if ($(i + 1) != 0) exit 1 }' ||
            fail "objects remain on $d"
    done
}

# gtests_on_two_devices PROGRAM ADDR_A ADDR_B: the GoogleTest program PROGRAM passes (drop-in
# libraries, 120 s at most) over devices uroce0 on ADDR_A and uroce1 on ADDR_B, and then
# neither device holds an object (expect_no_objects).
gtests_on_two_devices() {
    start_device uroce0 "$2"
    start_device uroce1 "$3"
    verbs timeout 120 "$1" || fail "$(basename "$1") failed"
    expect_no_objects uroce0 uroce1
}

# offload_field NAME: from `uroce counters` output on stdin, NAME's value on the
# counters_offload line (docs/counters.md); gso and gro give "on", "off" or "off (ERRNO)".
offload_field() {
    awk -v k="$1" '$1 == "counters_offload" { for (i = 2; i < NF; i++) if ($i == k) {
        v = $(i + 1); if ((k == "gso" || k == "gro") && $(i + 2) ~ /^\(/) v = v " " $(i + 2)
        print v } }'
}

# offloads_on DEV: true when DEV sends GSO trains and receives GRO trains (`uroce counters`,
# counters_offload). A kernel without UDP_SEGMENT/UDP_GRO (before 4.18/5.0) refuses them with
# ENOPROTOOPT: then false, with a note, and the caller does not look for trains. Anything
# else (refused for another reason, or off) fails the test.
offloads_on() {
    local line
    line=$("$UROCE" counters "$1" | grep '^counters_offload') || fail "$1 shows no counters_offload"
    case $line in
    "counters_offload gso on gro on "*) return 0 ;;
    *"(ENOPROTOOPT)"*)
        echo "note: this kernel has no UDP GSO/GRO ($line): trains not checked"
        return 1
        ;;
    *) fail "$1: GSO/GRO not in use: $line" ;;
    esac
}

# ucx_perftest from UCX 1.18 on runs as an MPI application unless told not to (-P 1 is its
# default) and then refuses to run as one of two separate processes meeting over TCP: those
# need -P 0, where the option exists (UCX 1.13 has none).
ucx_perftest_p2p() {
    ucx_perftest -h 2>&1 | grep -q -- '-P <0|1>' && echo "-P 0"
    return 0
}
