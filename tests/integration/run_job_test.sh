#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce run` for a whole CI job (docs/ci.md): with no device running it starts one, runs the
# command (here a shell that starts an ibv_rc_pingpong server in the background and runs a
# client), exits with the command's status, and stops the device when the command ends,
# leaving nothing in the runtime directory. A signal to `uroce run` reaches the command and
# still stops the device; `uroce run` killed outright takes its device along. With a device
# already running, `uroce run` leaves it running.
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
job=$UROCE_RUNTIME_DIR/job # the job's own runtime directory, empty before each case
mkdir -m 700 "$job"
port=$(tcp_port)
# The server in the background, then (as a job script would) wait until it listens on its TCP
# port before the client, which connects once, starts.
listening=$(printf ':%04X 0\\+:0000 0A' "$port")
pair="ibv_rc_pingpong -g 0 -p $port & i=0; while [ \$i -lt 1200 ] && kill -0 \$! &&
    ! grep -qs '$listening' /proc/net/tcp /proc/net/tcp6; do i=\$((i + 1)); sleep 0.05; done;"

# in_job CMD...: CMD under `uroce run` in the job's runtime directory; its output is left in
# $out and its exit status in $rc. Each run is also checked for what it must leave behind:
# no device, no process of the one it started, an empty runtime directory.
# RUN_OPTS: uroce run's own options.
in_job() {
    out=$(UROCE_RUNTIME_DIR=$job verbs timeout 120 "$UROCE" run ${RUN_OPTS:-} -- "$@" 2>&1)
    rc=$?
    echo "--- uroce run ${RUN_OPTS:-} -- $* (exit $rc)"
    echo "$out"
    expect_gone
}
expect_gone() {
    local pid
    [ -z "$(UROCE_RUNTIME_DIR=$job "$UROCE" list)" ] || fail "a device still runs in $job"
    pid=$(sed -n 's/^device pid //p' "$UROCE_RUNTIME_DIR/device.pid" 2>/dev/null)
    [ -n "$pid" ] || fail "the command did not see the device's pid"
    ! kill -0 "$pid" 2>/dev/null || fail "the device's process $pid still runs"
    rm -f "$UROCE_RUNTIME_DIR/device.pid"
    [ -z "$(ls -A "$job")" ] || fail "left in the runtime directory: $(ls -A "$job")"
}
# What the command runs first: it notes the pid of the device `uroce run` started.
note="sed -n 's/^pid=/device pid /p' \"\$UROCE_RUNTIME_DIR\"/*.info >'$UROCE_RUNTIME_DIR/device.pid';"

# A server and a client that succeed: 0.
in_job sh -c "$note $pair ibv_rc_pingpong -g 0 -p $port 127.0.0.1; c=\$?; wait \$!; s=\$?; exit \$((c | s))"
[ $rc = 0 ] || fail "a passing pair gave $rc"
echo "$out" | grep -q "iters in" || fail "the client did not report its iterations"

# A client that fails (it sends 8 KiB into the server's 4 KiB receive buffers, so both
# see error completions): the command exits with the client's status, 1. A shell's bare
# `wait` would exit 0 whatever its children did, so the job keeps the client's status.
# --trace: what the device saw is saved once the command has ended, before it stops: the
# error completions, and both processes detaching.
trace=$UROCE_RUNTIME_DIR/trace.txt
RUN_OPTS="--trace $trace" in_job sh -c "$note $pair ibv_rc_pingpong -g 0 -p $port -s 8192 127.0.0.1; c=\$?; wait; exit \$c"
[ $rc = 1 ] || fail "a failing client gave $rc, not its status 1"
echo "$out" | grep -q "Failed status" || fail "the client did not fail as it should"
echo "--- $trace"
cat "$trace"
grep -q "receive wr_id .* completed with LOC_LEN_ERR" "$trace" ||
    fail "the trace has no error completion of the server's receive"
[ "$(grep -c ' detached' "$trace")" -ge 2 ] || fail "the trace lacks the processes' detaching"

# Any status, and a signal as 128+N.
in_job sh -c "$note exit 7"
[ $rc = 7 ] || fail "exit 7 gave $rc"
in_job sh -c "$note kill -KILL \$\$"
[ $rc = 137 ] || fail "a command killed by SIGKILL gave $rc, not 137"

# SIGTERM to `uroce run` (a cancelled job) is passed on to the command; the device stops.
UROCE_RUNTIME_DIR=$job "${VERBS_ENV[@]}" "$UROCE" run -- sh -c "$note exec sleep 60" >/dev/null 2>&1 &
runner=$!
for _ in $(seq 600); do [ -s "$UROCE_RUNTIME_DIR/device.pid" ] && break; sleep 0.1; done
kill -TERM $runner
wait $runner
rc=$?
[ $rc = 143 ] || fail "uroce run sent SIGTERM gave $rc, not 143"
expect_gone

# `uroce run` killed outright (no cleanup of its own): its device ends with it.
UROCE_RUNTIME_DIR=$job "${VERBS_ENV[@]}" "$UROCE" run -- \
    sh -c "echo \$\$ >'$UROCE_RUNTIME_DIR/cmd.pid'; $note exec sleep 60" >/dev/null 2>&1 &
runner=$!
for _ in $(seq 600); do [ -s "$UROCE_RUNTIME_DIR/device.pid" ] && break; sleep 0.1; done
dpid=$(sed -n 's/^device pid //p' "$UROCE_RUNTIME_DIR/device.pid")
kill -KILL $runner
wait $runner 2>/dev/null
for _ in $(seq 100); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.05; done
! kill -0 "$dpid" 2>/dev/null || fail "the device of a killed uroce run still runs"
kill "$(cat "$UROCE_RUNTIME_DIR/cmd.pid")" # the orphaned command
rm -rf "${job:?}"/* "$UROCE_RUNTIME_DIR/device.pid"

# An unprivileged user (root runs the test): the same for nobody, whose command runs in the
# system view through a user namespace (docs/system-view.md) while uroce run, outside it,
# stops the device afterwards.
nobody=65534
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
    setpriv --reuid=$nobody --regid=$nobody --clear-groups test -x "$UROCE"; then
    nb_job=$(mktemp -d /tmp/uroce-test-nobody.XXXXXX)
    chown $nobody:$nobody "$nb_job"
    chmod 700 "$nb_job"
    nb_pid=$nb_job.pid # the device's pid, noted by the command
    install -o $nobody -m 600 /dev/null "$nb_pid"
    out=$(setpriv --reuid=$nobody --regid=$nobody --clear-groups env UROCE_RUNTIME_DIR="$nb_job" \
        XDG_RUNTIME_DIR= "${VERBS_ENV[@]:1}" timeout 120 "$UROCE" run -- sh -c "
            [ \$(id -u) = $nobody ] && [ -c /dev/infiniband/uverbs0 ] || exit 99
            sed -n 's/^pid=//p' \"\$UROCE_RUNTIME_DIR\"/*.info >'$nb_pid'
            $pair ibv_rc_pingpong -g 0 -p $port 127.0.0.1; c=\$?; wait \$!; exit \$((c | 6))" 2>&1)
    rc=$?
    echo "--- as uid $nobody (exit $rc)"
    echo "$out"
    left=$(ls -A "$nb_job")
    dpid=$(cat "$nb_pid")
    rm -rf "$nb_job" "$nb_pid"
    [ $rc = 6 ] || fail "as uid $nobody: exit $rc, not the command's 6"
    echo "$out" | grep -q "iters in" || fail "as uid $nobody: the pair did not run"
    [ -z "$left" ] || fail "as uid $nobody: left in the runtime directory: $left"
    [ -n "$dpid" ] || fail "as uid $nobody: the command did not see the device"
    echo "as uid $nobody: device pid $dpid, gone afterwards"
    ! kill -0 "$dpid" 2>/dev/null || fail "as uid $nobody: the device $dpid still runs"
else
    echo "note: the unprivileged case needs root and setpriv"
fi

# A device that was already running is the caller's: uroce run uses it and leaves it.
UROCE_RUNTIME_DIR=$job start_device uroce0 127.0.0.1
UROCE_RUNTIME_DIR=$job verbs "$UROCE" run -- ibv_devices >/dev/null || fail "uroce run with a device"
UROCE_RUNTIME_DIR=$job "$UROCE" list | grep -q '^uroce0 ' || fail "uroce run stopped a device it did not start"
UROCE_RUNTIME_DIR=$job "$UROCE" stop >/dev/null
echo PASS
