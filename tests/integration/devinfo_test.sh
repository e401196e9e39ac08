#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: unmodified ibv_devices and ibv_devinfo -v list the device.
. "$(dirname "$0")/lib.sh"
need ibv_devinfo
start_device uroce0 127.0.0.1

out=$(verbs ibv_devices) || fail "ibv_devices exited $?"
echo "$out"
echo "$out" | grep -Eq '^\s+uroce0\s+[0-9a-f]{16}$' || fail "ibv_devices does not list uroce0"

out=$(verbs ibv_devinfo -v) || fail "ibv_devinfo exited $?"
echo "$out"
echo "$out" | grep -q 'hca_id:[[:space:]]*uroce0' || fail "no hca_id uroce0"
echo "$out" | grep -q 'state:[[:space:]]*PORT_ACTIVE (4)' || fail "port not active"
echo "$out" | grep -q 'link_layer:[[:space:]]*Ethernet' || fail "link layer is not Ethernet"
echo "$out" | grep -q 'max_mtu:[[:space:]]*4096 (5)' || fail "max_mtu is not 4096"
echo "$out" | grep -q 'active_mtu:[[:space:]]*4096 (5)' || fail "active_mtu is not 4096"
echo "$out" | grep -q 'GID\[  0\]:[[:space:]]*::ffff:127.0.0.1, RoCE v2' || fail "GID[0] is not ::ffff:127.0.0.1 RoCE v2"

# Without a running device and with autostart off, there is nothing to list.
"$UROCE" stop >/dev/null
out=$(verbs ibv_devices) || true
echo "$out" | grep -q uroce0 && fail "a stopped device is still listed"
echo PASS
