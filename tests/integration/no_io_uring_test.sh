#!/usr/bin/env bash
# Where io_uring is forbidden (a container's default seccomp profile, docs/ci.md), the
# device cannot start, and says why: `uroce start` and `uroce run` fail with uroced's
# "io_uring is not available here" line, and `uroce run` runs nothing.
# usage: no_io_uring_test.sh NO_IO_URING (tests/integration/no_io_uring.c)
. "$(dirname "$0")/lib.sh"
forbid=${1:?usage: no_io_uring_test.sh NO_IO_URING}

out=$("$forbid" "$UROCE" start 2>&1) && fail "uroce start succeeded without io_uring: $out"
echo "$out"
echo "$out" | grep -q "uroced: io_uring is not available here (Operation not permitted)" ||
    fail "uroce start did not say that io_uring is forbidden"
[ -z "$("$UROCE" list)" ] || fail "a device is listed"

out=$("$forbid" "$UROCE" run -- touch "$UROCE_RUNTIME_DIR/ran" 2>&1)
rc=$?
echo "$out"
[ $rc = 1 ] || fail "uroce run without io_uring exited $rc"
echo "$out" | grep -q "io_uring is not available here" || fail "uroce run did not say why"
[ ! -e "$UROCE_RUNTIME_DIR/ran" ] || fail "uroce run ran the command without a device"
echo PASS
