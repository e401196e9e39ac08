#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce cluster`: N RDMA hosts on one machine (docs/cluster.md). Each host is a network
# namespace with one end of a veth pair on a bridge, an address, a uroce device (uroce0) on
# it, a runtime directory of its own and an /etc/hosts naming every host. The bridge lives in
# a namespace of its own, so nothing of a cluster is in the caller's network namespace.
# Two ways to hold the namespaces:
#   root      named network namespaces (ip netns: uroce-C-1.., uroce-C-hub); ip netns exec
#             binds /etc/netns/NS/hosts over /etc/hosts
#   userns    (anyone else, where unprivileged user namespaces are allowed) one user
#             namespace, with the caller as its root, and a mount namespace, both held by a
#             keeper process whose network namespace is the bridge's; each host's network
#             namespace is held by a process of its own (its pid is the host's reference);
#             a host's commands get a sysfs of its namespace and /etc/hosts bound over
# `uroce` (emu/cli/cluster.cpp) runs this file with UROCE (its own path) and
# UROCE_RUNTIME_DIR set.
set -euo pipefail

UROCE=${UROCE:?run as uroce cluster}
RT=${UROCE_RUNTIME_DIR:?run as uroce cluster}

die() {
    echo "uroce cluster: $*" >&2
    exit 1
}

usage() {
    cat >&2 <<'EOF'
usage:
  uroce cluster up N [--name C] [--net CIDR] [--mtu M] [--faults SPEC | --link-delay US]
                     [--pcap-dir DIR]
                     hosts C1..CN (C: node), each with a device uroce0
  uroce cluster down [--name C]   remove cluster C, or every cluster
  uroce cluster list              the clusters and their hosts' devices
  uroce cluster hosts [--name C] [--format table|comma|openmpi|hydra]
  uroce cluster exec HOST [--] CMD...
                     run CMD on HOST with the drop-in libraries and the system view
  uroce cluster faults HOST [HOST2] SPEC|off
                     faults on HOST's link, or between HOST and HOST2 only, both ways
                     (their devices' injectors, docs/faults.md)
  uroce cluster agent [SSH OPTIONS] HOST CMD...
                     the remote shell for launchers (also as uroce-cluster-agent)
EOF
    exit 2
}

# Where a cluster's files are: `hosts` (name, address, reference: the namespace's name or
# the holder's pid, the namespace's inode), `creator`, `mode` (root or userns), `keeper`
# (userns), `etc-hosts`, and a runtime directory per host (net-INODE, its namespace's).
cluster_dir() { echo "$RT/cluster-$1"; }
# Namespace names: uroce-C-1..N, the bridge's uroce-C-hub. C starts with a letter, so
# none is a two-host test's uroce-PID-a.
host_ns() { echo "uroce-$1-$2"; }
hub_ns() { echo "uroce-$1-hub"; }

valid_name() { [[ $1 =~ ^[a-z][a-z0-9]{0,15}$ && ! $1 =~ [0-9]$ ]]; }

# A process's identity that survives pid reuse: its pid and its start time (/proc's stat).
proc_id() {
    local pid=$1 stat
    stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    set -- $stat
    echo "$pid ${20}"
}

# The clusters this runtime directory holds (one whose up was cut short too: it has its
# mode, not yet its hosts).
clusters() {
    local d
    for d in "$RT"/cluster-*; do
        [ -f "$d/mode" ] && basename "$d" | sed 's/^cluster-//'
    done
    return 0
}

userns_mode() { [ "$(cat "$1/mode" 2>/dev/null)" = userns ]; }

# host_prefix CDIR REF: PFX, the command prefix that runs a command in host REF's network
# namespace (and, userns, the cluster's user and mount namespaces), as root there.
host_prefix() {
    if userns_mode "$1"; then
        # (No -U from inside the user namespace already: a process may not enter its own.)
        if [ "$(readlink /proc/self/ns/user)" = "$(readlink "/proc/$2/ns/user")" ]; then
            PFX=(nsenter -t "$2" -m -n --)
        else
            PFX=(nsenter -t "$2" -U --preserve-credentials -m -n --)
        fi
    else
        PFX=(ip netns exec "$2")
    fi
}

# in_host CDIR REF CMD...: CMD on that host.
in_host() {
    local PFX
    host_prefix "$1" "$2"
    shift 2
    "${PFX[@]}" "$@"
}

# The processes of ours in the network namespace with inode $1 (userns: no ip netns pids,
# but /proc shows our own processes' namespaces). Never our own namespace's (a record gone
# wrong must not make `down` kill the caller's processes).
pids_in_netns() {
    local p
    [ "$(readlink /proc/self/ns/net)" = "net:[$1]" ] && return 0
    for p in /proc/[0-9]*; do
        [ "$(readlink "$p/ns/net" 2>/dev/null)" = "net:[$1]" ] && echo "${p#/proc/}"
    done
    return 0
}

# SIGKILL to PIDS, and back once they are gone (a zombie is gone: its parent may be a pid 1
# that never reaps), so that `down` returns with nothing of the cluster left running.
kill_wait() {
    local p st left
    for p in "$@"; do kill -KILL "$p" 2>/dev/null || true; done
    for _ in $(seq 500); do
        left=0
        for p in "$@"; do
            st=$(cat "/proc/$p/stat" 2>/dev/null) || continue
            st=${st##*) }
            [ "${st%% *}" = Z ] || left=1
        done
        [ $left = 0 ] && return 0
        sleep 0.01
    done
    echo "uroce cluster: processes $* did not end" >&2
}

# Removes everything of cluster $1 that exists: its devices, whatever still runs in its
# namespaces (only what the cluster started, or ran on it, can be there), the namespaces
# (which take the veths and the bridge along), their /etc/netns files, its directory.
teardown() {
    local c=$1 dir ns pid h addr ref ino keeper
    dir=$(cluster_dir "$c")
    local f
    for f in "$dir/hosts" "$dir/hosts.new"; do
        [ -f "$f" ] || continue
        while read -r h addr ref ino; do
            in_host "$dir" "$ref" env "UROCE_RUNTIME_DIR=$dir" "$UROCE" stop \
                </dev/null >/dev/null 2>&1 || true
        done <"$f"
    done
    local pids=()
    if userns_mode "$dir"; then
        for ino in $(awk '{print $4}' "$dir/hosts" "$dir/hosts.new" 2>/dev/null); do
            pids+=($(pids_in_netns "$ino"))
        done
        keeper=$(cat "$dir/keeper" 2>/dev/null || true)
        if [ -n "$keeper" ] && ino=$(readlink "/proc/$keeper/ns/net" 2>/dev/null); then
            ino=${ino#net:[}
            pids+=($(pids_in_netns "${ino%]}"))
        fi
        kill_wait "${pids[@]}"
    elif [ "$(id -u)" = 0 ]; then
        local gone=()
        for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^uroce-$c-([0-9]+|hub)\$"); do
            pids+=($(ip netns pids "$ns" 2>/dev/null))
            gone+=("$ns")
        done
        kill_wait "${pids[@]}"
        for ns in "${gone[@]}"; do
            ip netns del "$ns" 2>/dev/null || true
            rm -rf "/etc/netns/$ns"
        done
    fi
    rm -rf "$dir"
}

# A cluster is in use while the process that made it (the caller of `up`: a shell, a CI
# job's step) lives; one whose creator is gone is removed by the next `up` of its name.
creator_alive() {
    local want now
    want=$(cat "$(cluster_dir "$1")/creator" 2>/dev/null) || return 1
    now=$(proc_id "${want%% *}") || return 1
    [ "$now" = "$want" ]
}

ip_to_int() {
    local IFS=. a b c d
    read -r a b c d <<<"$1"
    echo $(((a << 24) | (b << 16) | (c << 8) | d))
}
int_to_ip() { echo "$((($1 >> 24) & 255)).$((($1 >> 16) & 255)).$((($1 >> 8) & 255)).$(($1 & 255))"; }

cmd_up() {
    local n=${1:-} name=node net=10.79.0.0/24 mtu=1500 faults="" pcapdir="" delay=""
    [[ $n =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] || usage
    shift
    while [ $# -gt 0 ]; do
        case $1 in
        --name) name=${2:?}; shift 2 ;;
        --net) net=${2:?}; shift 2 ;;
        --mtu) mtu=${2:?}; shift 2 ;;
        --faults) faults=${2:?}; shift 2 ;;
        --link-delay) delay=${2:?}; shift 2 ;;
        --pcap-dir) pcapdir=$(realpath -m "${2:?}"); shift 2 ;;
        *) usage ;;
        esac
    done
    valid_name "$name" || die "bad --name '$name': 1 to 16 of a-z and 0-9, a letter first, not a digit last"
    [[ $net =~ ^([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)/([0-9]+)$ ]] || die "bad --net '$net' (an IPv4 CIDR)"
    local prefix=${BASH_REMATCH[2]} base
    [ "$prefix" -ge 8 ] && [ "$prefix" -le 30 ] || die "--net $net: a prefix of 8 to 30 bits"
    base=$(($(ip_to_int "${BASH_REMATCH[1]}") & ~((1 << (32 - prefix)) - 1) & 0xffffffff))
    [ "$n" -le $(((1 << (32 - prefix)) - 2)) ] || die "$n hosts do not fit in $net"
    [[ $mtu =~ ^[0-9]+$ ]] && [ "$mtu" -ge 1280 ] && [ "$mtu" -le 65535 ] || die "bad --mtu '$mtu'"
    if [ -n "$delay" ]; then
        # Each packet held once, by its sender: one way takes US longer.
        [[ $delay =~ ^[0-9]+$ ]] || die "bad --link-delay '$delay' (microseconds)"
        [ -z "$faults" ] || die "--link-delay with --faults: give the delay in --faults (delay=US,dir=tx)"
        faults=delay=$delay,dir=tx
    fi
    command -v ip >/dev/null || die "ip (iproute2) is not installed"
    local mode=root
    if [ "$(id -u)" != 0 ]; then
        mode=userns
        command -v nsenter >/dev/null && command -v unshare >/dev/null ||
            die "without root a cluster needs unshare and nsenter (util-linux)"
        unshare -U -r -m -n true 2>/dev/null ||
            die "without root a cluster lives in a user namespace, and this system allows none to uid $(id -u) (kernel.unprivileged_userns_clone, user.max_user_namespaces, or a seccomp filter): run as root"
    fi

    local dir
    dir=$(cluster_dir "$name")
    if [ -e "$dir" ] || { [ $mode = root ] && ip netns list 2>/dev/null | grep -qE "^uroce-$name-([0-9]+|hub)( |\$)"; }; then
        if creator_alive "$name"; then
            die "cluster $name is up (made by pid $(cut -d' ' -f1 "$dir/creator")): uroce cluster down --name $name first"
        fi
        echo "uroce cluster: removing cluster $name, whose creator is gone" >&2
        teardown "$name"
    fi
    mkdir -p "$RT"
    mkdir -m 700 "$dir"
    echo $mode >"$dir/mode"
    proc_id "$PPID" >"$dir/creator" || die "cannot read /proc/$PPID"
    trap 'teardown "$name"' ERR
    trap 'teardown "$name"; exit 130' INT TERM

    local i ns addr h ino
    : >"$dir/hosts.new"
    if [ $mode = root ]; then
        local hub
        hub=$(hub_ns "$name")
        ip netns add "$hub" || die "ip netns add $hub is not allowed here"
        ip -n "$hub" link add br0 type bridge mcast_snooping 0
        ip -n "$hub" link set br0 mtu "$mtu" up
        for i in $(seq 1 "$n"); do
            h=$name$i ns=$(host_ns "$name" "$i") addr=$(int_to_ip $((base + i)))
            ip netns add "$ns"
            ip link add eth0 netns "$ns" mtu "$mtu" type veth peer name "$h" netns "$hub" mtu "$mtu"
            ip -n "$hub" link set "$h" master br0 up
            echo "$h $addr $ns $(stat -L -c %i "/run/netns/$ns")" >>"$dir/hosts.new"
        done
    else
        # The keeper: the user and mount namespaces, and the bridge's network namespace.
        local keeper holder
        setsid unshare -U -r -m -n --propagation private sleep infinity </dev/null >/dev/null 2>&1 &
        keeper=$!
        echo "$keeper" >"$dir/keeper"
        wait_new_ns "$keeper" user
        nsenter -t "$keeper" -U --preserve-credentials -m -n -- sh -c "ip link set lo up && ip link add br0 type bridge mcast_snooping 0 && ip link set br0 mtu $mtu up"
        for i in $(seq 1 "$n"); do
            h=$name$i addr=$(int_to_ip $((base + i)))
            setsid nsenter -t "$keeper" -U --preserve-credentials -m -n -- unshare -n sleep infinity </dev/null >/dev/null 2>&1 &
            holder=$!
            wait_new_ns "$holder" net "$keeper"
            ino=$(readlink "/proc/$holder/ns/net")
            ino=${ino#net:[}
            echo "$h $addr $holder ${ino%]}" >>"$dir/hosts.new"
            nsenter -t "$keeper" -U --preserve-credentials -m -n -- sh -c "ip link add $h mtu $mtu type veth peer name eth0 netns $holder mtu $mtu && ip link set $h master br0 up"
        done
    fi
    {
        echo "127.0.0.1 localhost"
        echo "::1 localhost ip6-localhost ip6-loopback"
        awk '{print $2, $1}' "$dir/hosts.new"
    } >"$dir/etc-hosts"
    local ref
    while read -r h addr ref ino; do
        if [ $mode = root ]; then
            mkdir -p "/etc/netns/$ref"
            cp "$dir/etc-hosts" "/etc/netns/$ref/hosts"
        fi
        in_host "$dir" "$ref" sh -c "ip link set lo up && ip link set eth0 up && ip addr add $addr/$prefix dev eth0" </dev/null
        # The host's runtime directory: the one of its network namespace (emu/abi/runtime.h),
        # so every host's processes can share one UROCE_RUNTIME_DIR, the cluster's.
        mkdir -m 700 "$dir/net-$ino"
        local opts=(--name uroce0 --addr "$addr")
        [ -n "$faults" ] && opts+=(--faults "$faults")
        [ -n "$pcapdir" ] && mkdir -p "$pcapdir" && opts+=(--pcap "$pcapdir/$h.pcap")
        in_host "$dir" "$ref" env "UROCE_RUNTIME_DIR=$dir" "$UROCE" start "${opts[@]}" </dev/null >/dev/null ||
            { teardown "$name"; die "uroce start on $h failed"; }
    done <"$dir/hosts.new"
    mv "$dir/hosts.new" "$dir/hosts"
    trap - ERR INT TERM
    echo "cluster $name: $n hosts on $net (mtu $mtu), each with device uroce0"
    awk '{print "  " $1, $2}' "$dir/hosts"
}

# Waits until process $1 has made its own $2 namespace: one that is neither ours nor (with
# $3) process $3's. A holder passes through the keeper's namespaces on its way to its own
# (nsenter, then unshare): its namespace before that is ours, and taking that one for the
# host's would put the host's veth, and later `down`'s kills, in the caller's namespace.
wait_new_ns() {
    local mine theirs=""
    mine=$(readlink "/proc/self/ns/$2")
    [ -n "${3:-}" ] && theirs=$(readlink "/proc/$3/ns/$2")
    for _ in $(seq 500); do
        local now
        now=$(readlink "/proc/$1/ns/$2" 2>/dev/null) || die "the $2 namespace's holder $1 died"
        [ "$now" != "$mine" ] && [ "$now" != "$theirs" ] && return 0
        sleep 0.01
    done
    die "process $1 made no $2 namespace"
}

cmd_down() {
    local name=""
    while [ $# -gt 0 ]; do
        case $1 in
        --name) name=${2:?}; shift 2 ;;
        *) usage ;;
        esac
    done
    if [ -n "$name" ]; then
        valid_name "$name" || die "bad --name '$name'"
        teardown "$name"
        return
    fi
    local c
    for c in $(clusters); do teardown "$c"; done
}

# Finds HOST (a host's name or address) among the clusters, the one this command runs in
# (UROCE_CLUSTER_DIR, set by exec) first: sets H (name), NS (the reference), ADDR and CDIR.
find_host() {
    local want=$1 d h addr ns ino
    local dirs=()
    [ -n "${UROCE_CLUSTER_DIR:-}" ] && dirs+=("$UROCE_CLUSTER_DIR")
    for d in $(clusters); do dirs+=("$(cluster_dir "$d")"); done
    for d in "${dirs[@]}"; do
        [ -f "$d/hosts" ] || continue
        while read -r h addr ns ino; do
            if [ "$want" = "$h" ] || [ "$want" = "$addr" ]; then
                H=$h NS=$ns CDIR=$d ADDR=$addr
                return 0
            fi
        done <"$d/hosts"
    done
    return 1
}

# Runs CMD on host H, as `uroce run` would there (the host's device already runs): its
# network namespace, its /etc/hosts, its own host name (a UTS namespace), the cluster's
# runtime directory (where each host's processes find their own host's devices); launchers
# started there use the agent to reach the other hosts.
run_on_host() {
    # userns: the host's own sysfs (what ip netns exec mounts) and its /etc/hosts.
    local setup='hostname "$0" && exec "$@"'
    userns_mode "$CDIR" &&
        setup='mount -t sysfs sysfs /sys && mount --bind "$UROCE_CLUSTER_DIR/etc-hosts" /etc/hosts && '$setup
    local PFX
    host_prefix "$CDIR" "$NS"
    exec "${PFX[@]}" env "UROCE_RUNTIME_DIR=$CDIR" "UROCE_CLUSTER_DIR=$CDIR" \
        "OMPI_MCA_plm_rsh_agent=${OMPI_MCA_plm_rsh_agent:-uroce-cluster-agent}" \
        "PRTE_MCA_plm_ssh_agent=${PRTE_MCA_plm_ssh_agent:-uroce-cluster-agent}" \
        "HYDRA_LAUNCHER=${HYDRA_LAUNCHER:-ssh}" \
        "HYDRA_LAUNCHER_EXEC=${HYDRA_LAUNCHER_EXEC:-uroce-cluster-agent}" \
        unshare --uts -m -- sh -c "$setup" "$H" "$UROCE" run -- "$@"
}

cmd_exec() {
    local host=${1:-}
    [ -n "$host" ] || usage
    shift
    [ "${1:-}" = "--" ] && shift
    [ $# -gt 0 ] || usage
    find_host "$host" || die "no host $host in any cluster (uroce cluster hosts)"
    run_on_host "$@"
}

# ssh's calling convention, as launchers use it: options, [user@]host, then the command's
# words, which a shell on the host runs joined by spaces.
cmd_agent() {
    while [ $# -gt 0 ]; do
        case $1 in
        -[bcEeFIiJLlmOoPpQRSWw]) shift 2 ;;
        -?*) shift ;;
        *) break ;;
        esac
    done
    [ $# -ge 2 ] || die "agent: HOST and a command needed (no interactive logins)"
    local host=${1#*@}
    shift
    find_host "$host" || die "agent: no host $host in any cluster"
    run_on_host sh -c "$*"
}

# Faults on HOST's link, both ways, or only between HOST and HOST2: their devices' fault
# injectors (docs/faults.md; with peer= the other's address). The kernel's netem would do on
# the veths, but it is not in every kernel (nor in this one's CI's).
cmd_faults() {
    [ $# = 2 ] || [ $# = 3 ] || usage
    local spec=${!#} a b
    if [ $# = 2 ]; then
        find_host "$1" || die "no host $1 in any cluster (uroce cluster hosts)"
        in_host "$CDIR" "$NS" env "UROCE_RUNTIME_DIR=$CDIR" "$UROCE" faults "$spec" uroce0
        return
    fi
    find_host "$1" || die "no host $1 in any cluster (uroce cluster hosts)"
    a=$ADDR
    find_host "$2" || die "no host $2 in any cluster (uroce cluster hosts)"
    b=$ADDR
    [ "$a" != "$b" ] || die "a link needs two hosts"
    local with=",peer=$a"
    case $spec in off | none | "") with="" ;; esac
    in_host "$CDIR" "$NS" env "UROCE_RUNTIME_DIR=$CDIR" "$UROCE" faults "$spec$with" uroce0
    find_host "$1"
    with=",peer=$b"
    case $spec in off | none | "") with="" ;; esac
    in_host "$CDIR" "$NS" env "UROCE_RUNTIME_DIR=$CDIR" "$UROCE" faults "$spec$with" uroce0
}

cmd_hosts() {
    local name="" format=table
    while [ $# -gt 0 ]; do
        case $1 in
        --name) name=${2:?}; shift 2 ;;
        --format) format=${2:?}; shift 2 ;;
        *) usage ;;
        esac
    done
    if [ -z "$name" ]; then
        if [ -n "${UROCE_CLUSTER_DIR:-}" ]; then
            name=$(basename "$UROCE_CLUSTER_DIR" | sed 's/^cluster-//')
        else
            name=$(clusters | head -1)
        fi
    fi
    local f
    f=$(cluster_dir "$name")/hosts
    [ -n "$name" ] && [ -f "$f" ] || die "no cluster${name:+ $name} (uroce cluster up N)"
    case $format in
    table) awk '{print $1, $2}' "$f" ;;
    comma) awk '{printf "%s%s", (NR > 1 ? "," : ""), $1} END {print ""}' "$f" ;;
    openmpi) awk '{print $1, "slots=1"}' "$f" ;;
    hydra) awk '{print $1 ":1"}' "$f" ;;
    *) die "bad --format '$format' (table, comma, openmpi, hydra)" ;;
    esac
}

cmd_list() {
    local c h addr ns ino state
    for c in $(clusters); do
        state=$(creator_alive "$c" && echo "creator $(cut -d' ' -f1 "$(cluster_dir "$c")/creator")" ||
            echo "creator gone")
        if [ ! -f "$(cluster_dir "$c")/hosts" ]; then
            echo "cluster $c ($state, its up did not finish: uroce cluster down --name $c)"
            continue
        fi
        echo "cluster $c ($state)"
        while read -r h addr ns ino; do
            if in_host "$(cluster_dir "$c")" "$ns" env "UROCE_RUNTIME_DIR=$(cluster_dir "$c")" "$UROCE" list \
                </dev/null 2>/dev/null | grep -q uroce0; then
                echo "  $h $addr uroce0 running"
            else
                echo "  $h $addr uroce0 not running"
            fi
        done <"$(cluster_dir "$c")/hosts"
    done
}

what=${1:-}
[ $# -gt 0 ] && shift
case $what in
up) cmd_up "$@" ;;
down) cmd_down "$@" ;;
list) cmd_list "$@" ;;
hosts) cmd_hosts "$@" ;;
exec) cmd_exec "$@" ;;
agent) cmd_agent "$@" ;;
faults) cmd_faults "$@" ;;
*) usage ;;
esac
