#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance (docs/xrc.md): XRC domains, SRQs and TGT/INI QPs through the public verbs API.
# xrc_verbs (built against the system's verbs.h, run over the drop-in library) makes the
# calls and checks every answer and errno; here we check that it passed, that the device
# survived, and that nothing of it is left in the device afterwards.
# usage: xrc_test.sh PROGRAM rules|share
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: xrc_test.sh PROGRAM rules|share}
mode=${2:?usage: xrc_test.sh PROGRAM rules|share}
start_device uroce0 127.0.0.1
pid=$(awk '$1 == "uroce0" { for (i = 1; i < NF; ++i) if ($i == "pid") print $(i + 1) }' \
      < <("$UROCE" list))
[ -n "$pid" ] || fail "uroce list does not show uroce0's pid"

work=$UROCE_RUNTIME_DIR/xrc
mkdir -p "$work"
out=$UROCE_RUNTIME_DIR/prog.out
verbs timeout 60 "$prog" uroce0 "$UROCE" "$mode" "$work" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || fail "xrc_verbs $mode exited $rc"
grep -q "^all checks passed$" "$out" || fail "xrc_verbs $mode did not finish its checks"

kill -0 "$pid" 2>/dev/null || fail "device process $pid died"
sleep 0.2  # the device closes each session when it sees the socket hang up
res=$("$UROCE" res uroce0) || fail "uroce res failed: the device is not answering"
counts=$(echo "$res" | grep '^counts ') || fail "no counts line in uroce res"
echo "$counts" | awk '{ for (i = 2; i < NF; i += 2) if ($(i + 1) != 0) exit 1 }' ||
    fail "objects remain after the program exited: $counts"
echo "$res" | grep -E '^(xrcd|srq|qp) ' && fail "XRC objects remain after every process exited"
# The kind filter of `uroce res` prints only lines of that kind.
"$UROCE" res uroce0 xrcd srq qp | grep -v -E '^(xrcd|srq|qp) ' && fail "uroce res KIND printed other lines"
echo PASS
