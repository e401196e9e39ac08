#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# iproute2's `rdma dev` / `rdma link` under `uroce run` (docs/system-view.md): answered for
# the device from the view, in iproute2's text and JSON forms, agreeing with libibverbs; the
# call rdma-core's pyverbs suite makes (`rdma link show -j`) finds the device's netdev; other
# commands reach the host's own tool.
. "$(dirname "$0")/lib.sh"
need python3
start_device uroce0 127.0.0.1
out=$("$UROCE" run -- true 2>&1)
echo "$out" | grep -q "without the system view" && skip "no system view here: $out"

json=$(verbs "$UROCE" run -- rdma link show -j) || fail "rdma link show -j failed: $json"
echo "$json"
lo_index=$(cat /sys/class/net/lo/ifindex)
python3 - "$json" "$lo_index" <<'PY' || fail "rdma link show -j: wrong answer"
import json, sys
rows = json.loads(sys.argv[1])
mine = [r for r in rows if r.get("ifname") == "uroce0" and r.get("port") == 1]
assert len(mine) == 1, rows
r = mine[0]
assert r["state"] == "ACTIVE" and r["physical_state"] == "LINK_UP", r
assert r["netdev"] == "lo" and r["netdev_index"] == int(sys.argv[2]), r
assert isinstance(r["ifindex"], int), r
PY
# The same call and lookup as pyverbs' tests/base.py get_net_name.
net=$(verbs "$UROCE" run -- python3 -c '
import json, subprocess
for row in json.loads(subprocess.check_output(["rdma", "link", "show", "-j"]).decode()):
    if row["ifname"] == "uroce0" and row["port"] == 1:
        print(row["netdev"])') || fail "pyverbs' lookup failed"
[ "$net" = lo ] || fail "pyverbs' lookup found '$net', not lo"

text=$(verbs "$UROCE" run -- rdma link) || fail "rdma link failed"
echo "$text"
echo "$text" | grep -qx "link uroce0/1 state ACTIVE physical_state LINK_UP netdev lo" ||
    fail "rdma link: not iproute2's line"
guid=$(verbs ibv_devinfo -d uroce0 | awk '/node_guid:/ { print $2 }')
dev=$(verbs "$UROCE" run -- rdma dev show uroce0) || fail "rdma dev show uroce0 failed"
echo "$dev"
echo "$dev" | grep -Eq "^0: uroce0: node_type ca protocol roce fw [^ ]+ node_guid $guid sys_image_guid [0-9a-f:]+$" ||
    fail "rdma dev: not iproute2's line, or not ibv_devinfo's node_guid $guid"
verbs "$UROCE" run -- rdma -j -p dev | python3 -c 'import json, sys; d = json.load(sys.stdin); assert d[0]["ifname"] == "uroce0", d' ||
    fail "rdma -j -p dev: not JSON"
err=$(verbs "$UROCE" run -- rdma link show nosuch/1 2>&1) && fail "a device that does not exist: exit 0"
echo "$err" | grep -q "Wrong device name" || fail "a device that does not exist: '$err'"

# Anything else is the host's tool: the same output and status as outside uroce run.
if command -v rdma >/dev/null; then
    host_out=$(rdma -V 2>&1)
    host_rc=$?
    view_out=$(verbs "$UROCE" run -- rdma -V 2>&1)
    view_rc=$?
    [ "$host_out" = "$view_out" ] && [ $host_rc = $view_rc ] ||
        fail "rdma -V: '$view_out' ($view_rc) under uroce run, '$host_out' ($host_rc) outside"
    echo "rdma -V passed on: $view_out"
fi
echo PASS
