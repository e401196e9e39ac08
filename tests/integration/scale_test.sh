#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: a device holds many connected RC QPs and frees them (docs/performance.md).
# usage: scale_test.sh QP_SCALE PAIRS
#   1. qp_scale creates PAIRS pairs of RC QPs in one process, connects each pair, sends one
#      message over a sample of pairs spread over the range (each must arrive intact), and
#      destroys them all.
#   2. The same again, but the process exits with every QP connected: the device must
#      destroy them as the kernel does for a dead process.
# After each round the device has no QP left, and its file descriptors and ring mappings
# (each QP's SQ and RQ) are back to what they were before: nothing leaks. Not a timing test.
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: scale_test.sh QP_SCALE PAIRS}
pairs=${2:?usage: scale_test.sh QP_SCALE PAIRS}
start_device uroce0 127.0.0.1
pid=$("$UROCE" list | awk '$1 == "uroce0" { print $6 }')
[ -n "$pid" ] && kill -0 "$pid" || fail "no pid for uroce0"

qps_on_device() {
    "$UROCE" res uroce0 | awk '$1 == "counts" { for (i = 2; i < NF; ++i) if ($i == "qps") print $(i + 1) }'
}
fds() { ls "/proc/$pid/fd" | wc -l; }
# Ring mappings (memfd:uroce-sq, memfd:uroce-rq, ...); the heap's own mappings come and go.
maps() { grep -c 'memfd:uroce-' "/proc/$pid/maps"; }
fds0=$(fds)
maps0=$(maps)

# check_freed WHAT: no QP left, fds and mappings back to the start (within a few seconds:
# a dead process's cleanup runs when the device sees its socket close).
check_freed() {
    local n f m
    for _ in $(seq 50); do
        n=$(qps_on_device) f=$(fds) m=$(maps)
        [ "$n" = 0 ] && [ "$f" -le "$fds0" ] && [ "$m" -le "$maps0" ] && break
        sleep 0.1
    done
    kill -0 "$pid" || fail "$1: the device died"
    [ "$n" = 0 ] || fail "$1: the device still has $n QPs"
    [ "$f" -le "$fds0" ] || fail "$1: the device has $f fds, $fds0 before"
    [ "$m" -le "$maps0" ] || fail "$1: the device has $m ring mappings, $maps0 before"
    echo "$1: freed (qps $n, fds $f, ring mappings $m)"
}

verbs timeout 120 "$prog" uroce0 --pairs "$pairs" --pid "$pid" >"$UROCE_RUNTIME_DIR/run1.out" 2>&1
rc=$?
cat "$UROCE_RUNTIME_DIR/run1.out"
[ $rc = 0 ] || fail "qp_scale exited $rc"
grep -q "^qps=$((2 * pairs)) " "$UROCE_RUNTIME_DIR/run1.out" || fail "qp_scale did not create $((2 * pairs)) QPs"
grep -q "^all checks passed$" "$UROCE_RUNTIME_DIR/run1.out" || fail "qp_scale did not finish its checks"
check_freed "destroyed"

verbs timeout 120 "$prog" uroce0 --pairs "$pairs" --exit-connected >"$UROCE_RUNTIME_DIR/run2.out" 2>&1
rc=$?
cat "$UROCE_RUNTIME_DIR/run2.out"
[ $rc = 0 ] || fail "qp_scale --exit-connected exited $rc"
grep -q "^qps=$((2 * pairs)) " "$UROCE_RUNTIME_DIR/run2.out" || fail "qp_scale did not connect $((2 * pairs)) QPs"
check_freed "process exited"

# The device still works.
verbs timeout 60 "$prog" uroce0 --pairs 4 >"$UROCE_RUNTIME_DIR/run3.out" 2>&1 ||
    fail "a new process cannot use the device: $(cat "$UROCE_RUNTIME_DIR/run3.out")"
check_freed "after"
echo PASS
