#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# uroce cluster (docs/cluster.md): N RDMA hosts in network namespaces on one bridge.
#   lifecycle  up with a bad fault spec: an error, nothing left; up 4 (with captures): the host list's forms, a device and the host's own name on each host,
#              every name resolving on every host, an ibv_rc_pingpong pair between two hosts
#              by name; a second up refused while its creator lives, a cluster whose creator
#              was killed (kill -9) replaced by the next up; down leaves no namespace, bridge, device,
#              /etc/netns file or runtime directory
#   openmpi    up 4, Open MPI (pml ucx) job of 4 ranks, one per host, started by an unmodified
#              mpirun through the cluster's agent (tests/integration/mpi_check.c checks
#              point-to-point, Allreduce, Alltoall and Bcast), then down
#   mpich      the same with MPICH (ch4:ucx) and its mpiexec (hydra)
#   openmpi_ofi  the Open MPI job over libfabric (pml cm, mtl ofi, verbs;ofi_rxm)
#   loss       the Open MPI (ucx) job with 1% loss both ways on the link between hosts 1 and 3:
#              it completes, checked; both ends dropped packets both ways (only each other's)
#              and retransmitted
#   tools      ucx_perftest tag_bw and fi_pingpong (verbs;ofi_rxm) between two hosts; then
#              up --link-delay: an ibv_rc_pingpong's round trip takes twice the delay
#   nonroot    as uid 65534: up 2 (in a user namespace), an ibv_rc_pingpong pair across, down
# Root only (network namespaces); the MPI modes skip where that MPI is not installed.
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: cluster_test.sh lifecycle|openmpi|mpich|openmpi_ofi|loss|tools|nonroot}
[ "$(id -u)" = 0 ] || skip "a cluster needs root (network namespaces, veth pairs, a bridge)"
need ip
NAME=t$$x  # namespaces are the machine's: a name of this test's own
N=4

# The namespaces for lib.sh's watchdog, should the test be killed before its own cleanup.
for i in hub $(seq 1 $N); do echo "uroce-$NAME-$i" >>"$UROCE_RUNTIME_DIR/netns"; done
cluster_exit() {
    local rc=$?
    "$UROCE" cluster down --name "$NAME" >/dev/null 2>&1 || true
    (exit $rc)
    cleanup
}
trap cluster_exit EXIT

# Runs CMD on a host with the drop-in libraries (in a sanitizer build, the ASan runtime first).
on() {
    local h=$1
    shift
    verbs "$UROCE" cluster exec "$h" -- "$@"
}

up() {
    "$UROCE" cluster up $N --name "$NAME" "$@" >"$UROCE_RUNTIME_DIR/up.out" 2>&1 ||
        fail "cluster up: $(cat "$UROCE_RUNTIME_DIR/up.out")"
    cat "$UROCE_RUNTIME_DIR/up.out"
    ip netns list | grep -q "^uroce-$NAME-hub" || fail "no bridge namespace"
}

# Nothing of the cluster left: namespaces, their /etc/netns files, devices, directories.
check_gone() {
    local left
    left=$(ip netns list | grep -c "^uroce-$NAME-" || true)
    [ "$left" = 0 ] || fail "namespaces left: $(ip netns list | grep "^uroce-$NAME-")"
    ls -d /etc/netns/uroce-"$NAME"-* >/dev/null 2>&1 && fail "/etc/netns files left"
    [ -e "$UROCE_RUNTIME_DIR/cluster-$NAME" ] && fail "the cluster's directory is left"
    local p
    for p in "$@"; do running "$p" && fail "device pid $p still runs"; done
    return 0
}

# A process that runs: not a zombie (a stopped device's parent is init, which may be slow to
# reap it, or here a pid 1 that never does).
running() {
    local st
    st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    st=${st##*) }
    [ "${st%% *}" != Z ]
}

# The devices' pids (for check_gone).
device_pids() {
    local h
    for h in $(seq 1 $N); do ip netns pids "uroce-$NAME-$h"; done
}

# Every host sent and received RC packets (the job used the devices).
check_rc_traffic() {
    local h line tx rx
    for h in $(seq 1 $N); do
        line=$(on "$NAME$h" "$UROCE" counters uroce0 | grep '^counters tx_pkts') ||
            fail "counters of $NAME$h"
        tx=$(echo "$line" | awk '{print $3}') rx=$(echo "$line" | awk '{print $5}')
        echo "$NAME$h: $line"
        [ "$tx" -gt 100 ] && [ "$rx" -gt 100 ] || fail "$NAME$h: tx $tx rx $rx packets"
    done
}

PORT=$(tcp_port)

# host_pair S C CMD...: CMD on host S (a server on TCP port $PORT), then CMD with host S's
# name on host C (its client); both must succeed.
host_pair() {
    local s=$NAME$1 c=$NAME$2 so=$UROCE_RUNTIME_DIR/server.out co=$UROCE_RUNTIME_DIR/client.out
    shift 2
    on "$s" timeout 60 "$@" >"$so" 2>&1 &
    local spid=$!
    # (tcp_port_ready reads /proc/net/tcp*, which show the namespace of who reads them.)
    ip netns exec "uroce-$NAME-${s#"$NAME"}" bash -c "$(declare -f tcp_port_ready); tcp_port_ready $PORT $spid"
    on "$c" timeout 60 "$@" "$s" >"$co" 2>&1 || fail "client on $c: $(cat "$co"; cat "$so")"
    wait $spid || fail "server on $s: $(cat "$so")"
    echo "--- server on $s: $*"
    cat "$so"
    echo "--- client on $c"
    cat "$co"
}

# MPI_CHECK: mpi_check.c built with the MPI's own wrapper ($1).
build_check() {
    need "$1"
    MPI_CHECK=$UROCE_RUNTIME_DIR/mpi_check
    "$1" -O2 -o "$MPI_CHECK" "$(dirname "$0")/mpi_check.c" || fail "$1 mpi_check.c"
}

# mpi_up MPICC LAUNCHER: the check program built with MPICC, LAUNCHER there, the cluster up; its
# devices' processes in $old (for down_and_gone), the job's output to go to $out.
mpi_up() {
    build_check "$1"
    need "$2"
    up
    old=$(device_pids)
    out=$UROCE_RUNTIME_DIR/job.out
}

# down_and_gone: the cluster down, and nothing of it left (check_gone $old).
down_and_gone() {
    "$UROCE" cluster down --name "$NAME" || fail "down"
    check_gone $old
}

# The job's output: one "ok" line per rank, each on its own host.
check_ranks() {
    local out=$1 r
    cat "$out"
    for r in $(seq 0 $((N - 1))); do
        grep -q "^rank $r of $N on $NAME$((r + 1)): ok$" "$out" || fail "rank $r: no ok line"
    done
}

case $mode in
lifecycle)
    # A bad fault spec, found when the first device starts: a clear error, nothing left.
    "$UROCE" cluster up 2 --name "$NAME" --faults loss=2 >"$UROCE_RUNTIME_DIR/bad.out" 2>&1 &&
        fail "up with --faults loss=2 succeeded"
    grep -q "probability" "$UROCE_RUNTIME_DIR/bad.out" || fail "up with a bad spec: $(cat "$UROCE_RUNTIME_DIR/bad.out")"
    check_gone
    echo "up with a bad fault spec: $(tail -1 "$UROCE_RUNTIME_DIR/bad.out"), nothing left"
    up --pcap-dir "$UROCE_RUNTIME_DIR/pcaps"
    [ "$("$UROCE" cluster hosts --name "$NAME" --format comma)" = "${NAME}1,${NAME}2,${NAME}3,${NAME}4" ] ||
        fail "hosts --format comma: $("$UROCE" cluster hosts --name "$NAME" --format comma)"
    [ "$("$UROCE" cluster hosts --name "$NAME" --format hydra | head -1)" = "${NAME}1:1" ] ||
        fail "hosts --format hydra"
    [ "$("$UROCE" cluster hosts --name "$NAME" --format openmpi | tail -1)" = "${NAME}4 slots=1" ] ||
        fail "hosts --format openmpi"
    [ "$("$UROCE" cluster hosts --name "$NAME" | sed -n 3p)" = "${NAME}3 10.79.0.3" ] ||
        fail "hosts: $("$UROCE" cluster hosts --name "$NAME")"
    for h in $(seq 1 $N); do
        out=$(on "$NAME$h" sh -c 'hostname; ibv_devices; for n in '"${NAME}1 ${NAME}2 ${NAME}3 ${NAME}4"'; do getent hosts $n; done; ip -o -4 addr show eth0') ||
            fail "exec on $NAME$h: $out"
        echo "$out" | head -1 | grep -qx "$NAME$h" || fail "$NAME$h's host name: $out"
        echo "$out" | grep -q "uroce0 " || fail "$NAME$h: no device uroce0: $out"
        for k in $(seq 1 $N); do
            echo "$out" | grep -Eq "^10\.79\.0\.$k +$NAME$k\$" || fail "$NAME$h does not resolve $NAME$k: $out"
        done
        echo "$out" | grep -q "inet 10.79.0.$h/24" || fail "$NAME$h's address: $out"
    done
    echo "every host: its name, uroce0, every host's name resolves"
    host_pair 1 3 ibv_rc_pingpong -d uroce0 -g 0 -p "$PORT" -n 200 -s 8192

    # Refused while its creator (this shell) lives.
    "$UROCE" cluster up 2 --name "$NAME" >"$UROCE_RUNTIME_DIR/up2.out" 2>&1 &&
        fail "a second up of a cluster in use succeeded"
    grep -q "cluster $NAME is up (made by pid $$)" "$UROCE_RUNTIME_DIR/up2.out" ||
        fail "second up: $(cat "$UROCE_RUNTIME_DIR/up2.out")"
    echo "second up refused: $(cat "$UROCE_RUNTIME_DIR/up2.out")"
    old=$(device_pids)
    down_and_gone
    echo "down: nothing left"
    # The pingpong's 200 x 8 KiB each way, in the captures of both its hosts.
    for h in 1 3; do
        size=$(stat -c %s "$UROCE_RUNTIME_DIR/pcaps/$NAME$h.pcap" 2>/dev/null || echo 0)
        [ "$size" -gt 3000000 ] || fail "$NAME$h's capture has $size bytes"
    done

    # A cluster whose creator was killed (kill -9 of the shell that ran up): the next up
    # replaces it.
    bash -c '"$1" cluster up 2 --name "$2" >/dev/null && echo made && exec sleep 600' \
        creator "$UROCE" "$NAME" >"$UROCE_RUNTIME_DIR/creator.out" 2>&1 &
    creator=$!
    for _ in $(seq 300); do grep -q made "$UROCE_RUNTIME_DIR/creator.out" && break; sleep 0.1; done
    grep -q made "$UROCE_RUNTIME_DIR/creator.out" || fail "up from a shell: $(cat "$UROCE_RUNTIME_DIR/creator.out")"
    "$UROCE" cluster list | grep -q "^cluster $NAME (creator $creator)" || fail "list: $("$UROCE" cluster list)"
    kill -KILL $creator
    wait $creator 2>/dev/null
    old=$(ip netns pids "uroce-$NAME-1"; ip netns pids "uroce-$NAME-2")
    [ -n "$old" ] || fail "no devices in the subshell's cluster"
    "$UROCE" cluster list | grep -A2 "^cluster $NAME (creator gone)" || fail "list: $("$UROCE" cluster list)"
    up
    grep -q "removing cluster $NAME, whose creator is gone" "$UROCE_RUNTIME_DIR/up.out" ||
        fail "the old cluster was not removed: $(cat "$UROCE_RUNTIME_DIR/up.out")"
    for p in $old; do running "$p" && fail "the old cluster's device $p still runs"; done
    [ "$("$UROCE" cluster hosts --name "$NAME" | wc -l)" = $N ] || fail "the new cluster's hosts"
    old=$(device_pids)
    down_and_gone
    echo "a cluster whose creator was killed: replaced, then down, nothing left"
    ;;
openmpi)
    mpi_up mpicc.openmpi mpirun.openmpi
    "$UROCE" cluster hosts --name "$NAME" --format openmpi >"$UROCE_RUNTIME_DIR/hostfile"
    # As root Open MPI wants to be told twice; UCX only over the devices (no TCP, no shared
    # memory: one rank per host anyway), so the counters below show the job's traffic.
    on "${NAME}1" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        UCX_TLS=rc_verbs,ud_verbs,self timeout 200 mpirun.openmpi -np $N \
        --hostfile "$UROCE_RUNTIME_DIR/hostfile" --mca pml ucx "$MPI_CHECK" >"$out" 2>&1 ||
        fail "mpirun: $(cat "$out")"
    check_ranks "$out"
    check_rc_traffic
    down_and_gone
    ;;
openmpi_ofi | loss)
    mpi_up mpicc.openmpi mpirun.openmpi
    if [ "$mode" = openmpi_ofi ]; then
        # libfabric's verbs provider under its RDM layer (Open MPI's cm pml, ofi mtl).
        job=(--mca pml cm --mca mtl ofi --mca mtl_ofi_provider_include "verbs;ofi_rxm")
    else
        job=(--mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs,self)
        # 1% of the packets between hosts 1 and 3 lost, both ways.
        "$UROCE" cluster faults "${NAME}1" "${NAME}3" loss=0.01,seed=3 || fail "cluster faults"
    fi
    on "${NAME}1" env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 200 \
        mpirun.openmpi -np $N --host "$("$UROCE" cluster hosts --name "$NAME" --format comma)" \
        "${job[@]}" "$MPI_CHECK" >"$out" 2>&1 || fail "mpirun: $(cat "$out")"
    check_ranks "$out"
    check_rc_traffic
    if [ "$mode" = loss ]; then
        # Both ends of the link dropped packets, and looked at no other host's: the packets
        # they saw are fewer than those they sent and received. (About 1,500 packets cross
        # the link each way: 1% of them is 15 +- 4 a count, so the sum of the four, about 60,
        # is what is checked to be well above nothing; as is the retransmitting, which a lost
        # ACK that a later one covers does not need.)
        drops=0 retx=0
        for h in 1 3; do
            c=$(on "$NAME$h" "$UROCE" counters uroce0)
            echo "$c" | grep '^faults'
            mine=0
            for d in rx tx; do
                n=$(echo "$c" | awk -v d=$d '$1 == "faults" && $2 == d {print $6}')
                mine=$((mine + ${n:-0}))
                seen=$(echo "$c" | awk -v d=$d '$1 == "faults" && $2 == d {print $4}')
                all=$(echo "$c" | awk -v d=$d '$1 == "counters" && $2 == "tx_pkts" {print (d == "tx" ? $3 : $5)}')
                [ "$seen" -lt "$all" ] || fail "$NAME$h saw $seen of $all $d packets: not only the link's"
            done
            [ "$mine" -gt 0 ] || fail "$NAME$h's device dropped nothing"
            drops=$((drops + mine))
            retx=$((retx + $(echo "$c" | awk '$1 == "counters" && $2 == "tx_pkts" {print $11}')))
        done
        echo "the link: $drops packets dropped, $retx retransmissions at its ends"
        [ "$drops" -ge 20 ] || fail "only $drops packets dropped on the link"
        [ "$retx" -gt 0 ] || fail "nothing retransmitted across the link"
        on "${NAME}2" "$UROCE" counters uroce0 | grep -q '^faults off' || fail "host 2 has faults"
    fi
    down_and_gone
    ;;
tools)
    # ucx_perftest and libfabric's fi_pingpong from host 2 to host 1.
    need ucx_perftest
    need fi_pingpong
    up
    host_pair 1 2 env UCX_TLS=rc_verbs,ud_verbs,self ucx_perftest $(ucx_perftest_p2p) -p "$PORT" \
        -t tag_bw -s 65536 -n 1000
    grep '^Final:' "$UROCE_RUNTIME_DIR/client.out" || fail "ucx_perftest printed no Final line"
    host_pair 1 2 fi_pingpong -p "verbs;ofi_rxm" -e rdm -B "$PORT" -P "$PORT"
    grep -qE '^1m ' "$UROCE_RUNTIME_DIR/client.out" || fail "fi_pingpong: no 1 MiB messages"
    for h in 1 2; do
        tx=$(on "$NAME$h" "$UROCE" counters uroce0 | awk '$1 == "counters" {print $3}')
        [ "$tx" -gt 1000 ] || fail "$NAME$h sent $tx packets"
    done
    # --link-delay 3000: a pingpong's round trip takes at least twice that.
    "$UROCE" cluster down --name "$NAME" || fail "down"
    N=2 up --link-delay 3000
    host_pair 1 2 ibv_rc_pingpong -d uroce0 -g 0 -p "$PORT" -n 50 -s 64
    us=$(sed -n 's/.* = \([0-9.]*\) usec\/iter/\1/p' "$UROCE_RUNTIME_DIR/client.out")
    echo "with --link-delay 3000: $us usec/iter"
    awk -v u="$us" 'BEGIN { exit !(u >= 6000) }' || fail "$us usec a round trip with 3 ms each way"
    for h in 1 2; do
        on "$NAME$h" "$UROCE" counters uroce0 | grep -Eq '^faults delay=3000,(seed=[0-9]+,)?dir=tx$' ||
            fail "$NAME$h's fault spec"
    done
    ;;
nonroot)
    # As nobody (CI runs as root): the cluster lives in a user namespace the command makes.
    command -v setpriv >/dev/null || skip "setpriv (util-linux) is not installed"
    nb=(setpriv --reuid=65534 --regid=65534 --clear-groups)
    "${nb[@]}" test -x "$UROCE" || skip "uid 65534 cannot run $UROCE (the build tree is not readable)"
    "${nb[@]}" unshare -U -r -m -n true 2>/dev/null ||
        skip "this system gives uid 65534 no user namespace (kernel.unprivileged_userns_clone, user.max_user_namespaces)"
    nbrt=$(mktemp -d /tmp/uroce-test-nobody.XXXXXX)
    chown 65534:65534 "$nbrt"
    chmod 700 "$nbrt"
    echo "$nbrt" >"$UROCE_RUNTIME_DIR/nobody-dir"
    as_nobody() { "${nb[@]}" env "UROCE_RUNTIME_DIR=$nbrt" XDG_RUNTIME_DIR= "${VERBS_ENV[@]:1}" "$@"; }
    cluster_exit() {
        local rc=$?
        as_nobody "$UROCE" cluster down >/dev/null 2>&1 || true
        rm -rf "$nbrt"
        (exit $rc)
        cleanup
    }
    as_nobody "$UROCE" cluster up 2 --name "$NAME" >"$UROCE_RUNTIME_DIR/up.out" 2>&1 ||
        fail "cluster up as nobody: $(cat "$UROCE_RUNTIME_DIR/up.out")"
    cat "$UROCE_RUNTIME_DIR/up.out"
    cdir=$nbrt/cluster-$NAME
    [ "$(cat "$cdir/mode")" = userns ] || fail "mode $(cat "$cdir/mode"), not userns"
    ip netns list | grep -q "uroce-$NAME-" && fail "named namespaces made without root"
    pids="$(cat "$cdir/keeper") $(awk '{print $3}' "$cdir/hosts")"
    for p in $pids; do
        [ "$(stat -c %u "/proc/$p")" = 65534 ] || fail "holder $p is not nobody's"
    done
    so=$UROCE_RUNTIME_DIR/server.out
    as_nobody "$UROCE" cluster exec "${NAME}1" -- timeout 60 ibv_rc_pingpong -g 0 -p "$PORT" -n 200 \
        -s 8192 >"$so" 2>&1 &
    spid=$!
    for _ in $(seq 100); do
        as_nobody "$UROCE" cluster exec "${NAME}1" -- grep -qi ":$(printf %04X "$PORT") 0\+:0000 0A" \
            /proc/net/tcp /proc/net/tcp6 && break
        sleep 0.1
    done
    as_nobody "$UROCE" cluster exec "${NAME}2" -- timeout 60 ibv_rc_pingpong -g 0 -p "$PORT" -n 200 \
        -s 8192 "${NAME}1" || fail "client on ${NAME}2: $(cat "$so")"
    wait $spid || fail "server on ${NAME}1: $(cat "$so")"
    cat "$so"
    out=$(as_nobody "$UROCE" cluster exec "${NAME}2" -- "$UROCE" counters uroce0 | grep '^counters tx')
    echo "${NAME}2: $out"
    [ "$(echo "$out" | awk '{print $3}')" -gt 200 ] || fail "${NAME}2's device sent too little"
    dev=$(as_nobody "$UROCE" cluster exec "${NAME}1" -- sh -c 'sed -n "s/^pid=//p" "$UROCE_CLUSTER_DIR"/net-*/uroce0.info')
    as_nobody "$UROCE" cluster down || fail "down as nobody"
    for p in $pids $dev; do running "$p" && fail "process $p of the cluster still runs"; done
    [ -z "$(ls -A "$nbrt")" ] || fail "left in nobody's runtime directory: $(ls -A "$nbrt")"
    echo "as nobody: up 2, a pingpong across, down: nothing left"
    ;;
mpich)
    mpi_up mpicc.mpich mpiexec.mpich
    on "${NAME}2" env UCX_TLS=rc_verbs,ud_verbs,self timeout 200 mpiexec.mpich -n $N \
        -hosts "$("$UROCE" cluster hosts --name "$NAME" --format comma)" "$MPI_CHECK" >"$out" 2>&1 ||
        fail "mpiexec: $(cat "$out")"
    check_ranks "$out"
    check_rc_traffic
    down_and_gone
    ;;
*) fail "unknown mode $mode" ;;
esac
echo PASS
