#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce run`'s system view (docs/system-view.md): under it, Debian's ibv_devinfo, ibstat
# (libibumad, which reads only sysfs), pyverbs and ucx_info find the device; the sysfs files
# hold what ibv_query_* report; the host's /dev and /sys are as they were afterwards. Run as
# root, the test also runs the view as an unprivileged user (a user namespace, with data
# moving between two programs in it) and where neither namespace may be made (the fallback).
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need ibv_devinfo

host_state() {
    for p in /dev/infiniband /sys/class/infiniband /sys/class/infiniband_verbs; do
        if [ -e "$p" ]; then echo "$p: $(ls -A "$p" | tr '\n' ' ')"; else echo "$p: absent"; fi
    done
}
before=$(host_state)

start_device uroce0 127.0.0.1
run() { "${VERBS_ENV[@]}" "$UROCE" run -- "$@"; }

# The device node: a character device the user may read and write, named as the library's
# ibv_device.dev_name, and the class directories that name each other.
run bash -c '
    set -e
    [ -c /dev/infiniband/uverbs0 ] && [ -r /dev/infiniband/uverbs0 ] && [ -w /dev/infiniband/uverbs0 ]
    [ -c /dev/infiniband/rdma_cm ]
    [ "$(cat /sys/class/infiniband_verbs/uverbs0/ibdev)" = uroce0 ]
    [ "$(cat /sys/class/infiniband_verbs/abi_version)" = 6 ]
    # What else /dev and /sys/class hold still works.
    echo x >/dev/null
    [ -d /dev/shm ] && [ -d /dev/pts ] && [ -r /sys/class/net/lo/ifindex ]
' || fail "the device files are not as the kernel makes them"

out=$(run ibv_devinfo -v 2>&1) || fail "ibv_devinfo exited $?: $out"
echo "$out" | grep -q 'hca_id:[[:space:]]*uroce0' || fail "ibv_devinfo: no uroce0: $out"

out=$(run ibstat 2>&1) || fail "ibstat exited $?: $out"
echo "$out"
echo "$out" | grep -q "^CA 'uroce0'" || fail "ibstat does not list uroce0"
echo "$out" | grep -q 'State: Active' || fail "ibstat: the port is not active"
echo "$out" | grep -q 'Physical state: LinkUp' || fail "ibstat: the link is not up"
echo "$out" | grep -q 'Link layer: Ethernet' || fail "ibstat: link layer is not Ethernet"

py=/usr/bin/python3
if [ -x "$py" ] && "$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("pyverbs") is None)'; then
    out=$(run "$py" -c 'import pyverbs.device as d; print([x.name.decode() for x in d.get_device_list()])' 2>&1) ||
        fail "pyverbs get_device_list: $out"
    echo "$out" | grep -q "'uroce0'" || fail "pyverbs does not list uroce0: $out"
    # Every file against what the library answers (ibv_query_device/port/gid/gid_ex/pkey).
    run "$py" - <<'EOF' || fail "the sysfs files disagree with ibv_query_*"
import socket, sys
import pyverbs.device as d
base = "/sys/class/infiniband/uroce0"
def rd(p):
    return open(f"{base}/{p}").read().rstrip("\n")
bad = []
def check(p, want):
    got = rd(p)
    print(f"{p}: {got}")
    if got != want:
        bad.append(f"{p}: {got!r}, ibv_query_* says {want!r}")
def guid(v):  # the attribute holds the __be64 as read on a little-endian host
    h = v.to_bytes(8, "little").hex()
    return ":".join(h[i:i + 4] for i in range(0, 16, 4))
c = d.Context(name="uroce0")
a = c.query_device()
check("node_type", "1: CA")
check("node_guid", guid(a.node_guid))
check("sys_image_guid", guid(a.sys_image_guid))
check("fw_ver", a.fw_version.decode() if isinstance(a.fw_version, bytes) else a.fw_version)
check("hw_rev", hex(a.hw_ver))
states = {1: "DOWN", 2: "INIT", 3: "ARMED", 4: "ACTIVE", 5: "ACTIVE_DEFER"}
phys = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp"}
widths = {1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
speeds = {1: (2.5, ""), 2: (5, " DDR"), 4: (10, " QDR"), 8: (10, " FDR10"), 16: (14, " FDR"),
          32: (25, " EDR"), 64: (50, " HDR"), 128: (100, " NDR")}
for port in range(1, a.phys_port_cnt + 1):
    p = c.query_port(port)
    pd = f"ports/{port}"
    check(f"{pd}/state", f"{p.state}: {states[p.state]}")
    check(f"{pd}/phys_state", f"{p.phys_state}: {phys[p.phys_state]}")
    check(f"{pd}/link_layer", "Ethernet" if p.link_layer == 2 else "InfiniBand")
    check(f"{pd}/lid", hex(p.lid))
    check(f"{pd}/sm_lid", hex(p.sm_lid))
    check(f"{pd}/lid_mask_count", str(p.lmc))
    check(f"{pd}/cap_mask", f"0x{p.port_cap_flags:08x}")
    lanes, (gbps, name) = widths[p.active_width], speeds[p.active_speed]
    check(f"{pd}/rate", f"{lanes * gbps:g} Gb/sec ({lanes}X{name})")
    check(f"{pd}/pkeys/0", f"0x{c.query_pkey(port, 0):04x}")
    for i in range(p.gid_tbl_len):
        check(f"{pd}/gids/{i}", str(c.query_gid(port, i)))
        try:
            e = c.query_gid_ex(port, i)
        except Exception:
            continue  # an empty entry
        check(f"{pd}/gid_attrs/types/{i}", {1: "IB/RoCE v1", 2: "RoCE v2"}[e.gid_type])
        check(f"{pd}/gid_attrs/ndevs/{i}", socket.if_indextoname(e.ndev_ifindex))
        import os
        if not os.path.isdir(f"{base}/device/net/{socket.if_indextoname(e.ndev_ifindex)}"):
            bad.append("device/net does not hold the GID's interface")
if bad:
    print("\n".join(bad), file=sys.stderr)
    sys.exit(1)
EOF
else
    echo "pyverbs is not installed: the sysfs values are not compared (run scripts/setup.sh)"
fi

if command -v ucx_info >/dev/null; then
    out=$(run ucx_info -d 2>&1) || fail "ucx_info -d exited $?"
    for tl in rc_verbs ud_verbs; do
        echo "$out" | grep -A1 "Transport: $tl" | grep -q 'Device: uroce0:1' ||
            fail "ucx_info -d does not list $tl on uroce0:1: $(echo "$out" | grep -E 'Transport|Device')"
    done
    echo "ucx_info -d lists rc_verbs and ud_verbs on uroce0:1"
else
    echo "SKIP (part): ucx_info is not installed (ucx-utils; run scripts/setup.sh)"
fi

after=$(host_state)
[ "$before" = "$after" ] || fail "the host's files changed: before: $before; after: $after"
echo "host unchanged: $after"

if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
    echo "SKIP (part): the unprivileged and fallback runs need root and setpriv"
    echo PASS
    exit 0
fi

# The fallback: no mount namespace may be made (no capabilities) nor a user namespace (their
# count is 0 in the user namespace the test makes for it); CMD runs without the view.
if unshare -U --map-root-user true 2>/dev/null; then
    out=$(unshare -U --map-root-user sh -c 'echo 0 >/proc/sys/user/max_user_namespaces &&
            exec setpriv --securebits +noroot,+noroot_locked,+no_setuid_fixup,+no_setuid_fixup_locked \
              --inh-caps -all --bounding-set -all "$@"' sh \
            "${VERBS_ENV[@]}" "$UROCE" run -- sh -c 'ls /sys/class/infiniband 2>/dev/null; echo ran' 2>&1) ||
        fail "uroce run without namespaces: $out"
    echo "$out"
    [ "$(echo "$out" | grep -c 'running without the system view')" = 1 ] ||
        fail "no one-line reason for running without the view"
    echo "$out" | grep -qx ran || fail "CMD did not run (or saw a view) without namespaces"
else
    echo "SKIP (part): no user namespace for the fallback run"
fi

# An unprivileged user: the view in a user namespace. nobody's own device (a device serves
# its own user) in a runtime directory of nobody's, on the address root's device had.
"$UROCE" stop >/dev/null
nobody=65534
if ! setpriv --reuid=$nobody --regid=$nobody --clear-groups test -x "$UROCE"; then
    echo "SKIP (part): user $nobody cannot run $UROCE"
    echo PASS
    exit 0
fi
nb_dir=$(mktemp -d /tmp/uroce-test-nobody.XXXXXX)
chown $nobody:$nobody "$nb_dir"
as_nobody() {
    setpriv --reuid=$nobody --regid=$nobody --clear-groups env UROCE_RUNTIME_DIR="$nb_dir" \
        XDG_RUNTIME_DIR= "${VERBS_ENV[@]:1}" "$@"
}
nb_cleanup() {
    local rc=$?  # for cleanup, which exits with it
    as_nobody "$UROCE" stop >/dev/null 2>&1
    cat "$nb_dir"/*.log >>"$UROCE_RUNTIME_DIR/nobody-devices.log" 2>/dev/null
    rm -rf "$nb_dir"
    return $rc
}
trap 'nb_cleanup; cleanup' EXIT
as_nobody "$UROCE" start --name uroce0 --addr 127.0.0.1 >/dev/null || fail "nobody: uroce start"
if ! setpriv --reuid=$nobody --regid=$nobody --clear-groups unshare -U -m true 2>/dev/null; then
    echo "SKIP (part): user $nobody may not make a user namespace here"
    echo PASS
    exit 0
fi
out=$(as_nobody "$UROCE" run -- sh -c 'id -u; [ -c /dev/infiniband/uverbs0 ] && [ -w /dev/infiniband/uverbs0 ] &&
        cat /sys/class/infiniband/uroce0/ports/1/gid_attrs/types/0 && ibv_devinfo -l' 2>&1) ||
    fail "nobody: uroce run: $out"
echo "$out"
echo "$out" | grep -qx $nobody || fail "nobody: the command did not run as uid $nobody"
echo "$out" | grep -qx 'RoCE v2' || fail "nobody: no gid_attrs/types/0"
echo "$out" | grep -q 'uroce0' || fail "nobody: ibv_devinfo -l does not list uroce0"
echo "$out" | grep -q 'without the system view' && fail "nobody: no view: $out"
# Data moves: the device, outside the namespaces, reads and writes both programs' memory.
port=$(tcp_port)
as_nobody timeout 60 "$UROCE" run -- ibv_rc_pingpong -g 0 -p "$port" -n 50 \
    >"$UROCE_RUNTIME_DIR/nb-server.out" 2>&1 &
server=$!
sleep 1
as_nobody timeout 60 "$UROCE" run -- ibv_rc_pingpong -g 0 -p "$port" -n 50 127.0.0.1 \
    >"$UROCE_RUNTIME_DIR/nb-client.out" 2>&1 ||
    fail "nobody: rc_pingpong client: $(cat "$UROCE_RUNTIME_DIR/nb-client.out")"
wait $server || fail "nobody: rc_pingpong server: $(cat "$UROCE_RUNTIME_DIR/nb-server.out")"
grep -q '50 iters' "$UROCE_RUNTIME_DIR/nb-client.out" || fail "nobody: rc_pingpong did not finish"
if command -v ucx_info >/dev/null; then
    out=$(as_nobody "$UROCE" run -- ucx_info -d 2>&1)
    echo "$out" | grep -A1 'Transport: rc_verbs' | grep -q 'Device: uroce0:1' ||
        fail "nobody: ucx_info -d does not list rc_verbs on uroce0:1"
fi
[ "$before" = "$(host_state)" ] || fail "the host's files changed after the unprivileged runs"
echo PASS
