#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: wrong verbs calls fail as documented and leave no trace. verbs_bad_input
# (built against the system's verbs.h, run over the drop-in library) makes the calls and
# checks each answer; here we check that the device survived and holds no objects after.
# usage: verbs_bad_input_test.sh PROGRAM
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: verbs_bad_input_test.sh PROGRAM}
start_device uroce0 127.0.0.1
pid=$(awk '$1 == "uroce0" { for (i = 1; i < NF; ++i) if ($i == "pid") print $(i + 1) }' \
      < <("$UROCE" list))
[ -n "$pid" ] || fail "uroce list does not show uroce0's pid"

out=$UROCE_RUNTIME_DIR/prog.out
verbs timeout 60 "$prog" uroce0 "$UROCE" >"$out" 2>&1
rc=$?
cat "$out"
[ $rc = 0 ] || fail "verbs_bad_input exited $rc"
grep -q "^all checks passed$" "$out" || fail "verbs_bad_input did not finish its checks"

kill -0 "$pid" 2>/dev/null || fail "device process $pid died"
sleep 0.2  # the device closes the session when it sees the socket hang up
res=$("$UROCE" res uroce0) || fail "uroce res failed: the device is not answering"
echo "$res"
counts=$(echo "$res" | grep '^counts ') || fail "no counts line in uroce res"
# Every count (sessions, pds, mrs, cqs, qps, ... whatever the device lists) is zero.
echo "$counts" | awk '{ for (i = 2; i < NF; i += 2) if ($(i + 1) != 0) exit 1 }' ||
    fail "objects remain after the program exited: $counts"
echo PASS
