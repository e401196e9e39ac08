#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# With no device running, opening the library starts the default one on 127.0.0.1
# (unless UROCE_NO_AUTOSTART is set), so `ibv_devinfo` just works.
. "$(dirname "$0")/lib.sh"
need ibv_devinfo
[ -z "$("$UROCE" list)" ] || fail "a device is already running"
out=$(verbs env UROCE_NO_AUTOSTART=1 ibv_devices)
echo "$out" | grep -q uroce0 && fail "a device appeared although autostart was off"
[ -z "$("$UROCE" list)" ] || fail "autostart ran although UROCE_NO_AUTOSTART=1"
out=$(verbs env -u UROCE_NO_AUTOSTART ibv_devinfo) || fail "ibv_devinfo exited $?"
echo "$out"
echo "$out" | grep -q 'hca_id:[[:space:]]*uroce0' || fail "no device after autostart"
list=$("$UROCE" list)
echo "$list"
echo "$list" | grep -q '^uroce0 .*127\.0\.0\.1' || fail "the autostarted device is not uroce0 on 127.0.0.1"
echo PASS
