#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `uroce env` for later CI steps (docs/ci.md): one step starts a device and exports the
# environment (the shell form and the --github form for $GITHUB_ENV) and ends, its device
# running on; later steps, separate shells with nothing but that environment, run an
# ibv_rc_pingpong pair (Debian's binaries, two processes) over it.
# usage: env_test.sh [STEP_SCRIPT]: STEP_SCRIPT is the CI step to run (scripts/ci-step.sh);
# without it, the step is `uroce start` and `uroce env` themselves.
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
step=${1:-}
ci=$UROCE_RUNTIME_DIR/ci # the CI job's runtime directory
shell_env=$UROCE_RUNTIME_DIR/env.sh github_env=$UROCE_RUNTIME_DIR/github_env
github_path=$UROCE_RUNTIME_DIR/github_path
# The job's device is stopped however the test ends (lib.sh's cleanup sees only its own).
trap 'rc=$?; UROCE_RUNTIME_DIR=$ci "$UROCE" stop >/dev/null 2>&1; (exit $rc); cleanup' EXIT

# The step: in a command substitution, which ends only when nothing holds its output open,
# so a device that kept the step's stdout would hang it here (timeout).
: >"$github_env"
: >"$github_path"
if [ -n "$step" ]; then
    # As a GitHub step: $GITHUB_ENV, $GITHUB_PATH and $RUNNER_TEMP set; the build's packages
    # are there, and the build directory is this one (built already: nothing to do).
    # The action's one step is this script.
    grep -q '^ *run: .*"$GITHUB_ACTION_PATH/scripts/ci-step.sh"' "$(dirname "$step")/../action.yml" ||
        fail "action.yml does not run scripts/ci-step.sh"
    log=$UROCE_RUNTIME_DIR/step.log github_output=$UROCE_RUNTIME_DIR/github_output
    env -u LD_LIBRARY_PATH UROCE_RUNTIME_DIR="$ci" GITHUB_ENV="$github_env" \
        GITHUB_PATH="$github_path" GITHUB_OUTPUT="$github_output" \
        RUNNER_TEMP="$UROCE_RUNTIME_DIR" UROCE_SETUP=0 \
        UROCE_BUILD_DIR="$UROCE_BUILD" timeout 600 bash "$step" >"$shell_env" 2>"$log" ||
        fail "the step exited $?: $(cat "$log")"
    out=$(cat "$log")
    # Its stdout is the environment alone, for eval; and it ran from the prefix it installed.
    grep -qv '^export [A-Z_]*=' "$shell_env" && fail "the step printed more than export lines"
    grep -q "^LD_LIBRARY_PATH=$UROCE_RUNTIME_DIR/uroce/" "$github_env" ||
        fail "\$GITHUB_ENV does not name the installed libraries"
    echo "--- \$GITHUB_OUTPUT"
    cat "$github_output"
    grep -qx "runtime-dir=$ci" "$github_output" && grep -qx "device=uroce0" "$github_output" &&
        grep -qx "prefix=$UROCE_RUNTIME_DIR/uroce" "$github_output" ||
        fail "the step's outputs are not the device, the prefix and the runtime directory"
else
    out=$(env -u LD_LIBRARY_PATH UROCE_RUNTIME_DIR="$ci" timeout 60 bash -c '
        "$1" start --addr 127.0.0.1 && "$1" env >"$2" && "$1" env --github >>"$3"' \
        - "$UROCE" "$shell_env" "$github_env" 2>&1) || fail "the step exited $?: $out"
    dirname "$UROCE" >>"$github_path"
fi
echo "--- the step"
echo "$out"
echo "--- \$GITHUB_ENV"
cat "$github_env"
[ -n "$(UROCE_RUNTIME_DIR=$ci "$UROCE" list)" ] || fail "no device runs after the step"
# The job's UDP port (ctest gives each test its own) goes along, for devices started later.
grep -qx "UROCE_UDP_PORT=$UROCE_UDP_PORT" "$github_env" || fail "\$GITHUB_ENV lacks UROCE_UDP_PORT"

# A later step's pair (lib.sh's pair_script).
pair_script "$(tcp_port)" >"$UROCE_RUNTIME_DIR/pair.sh"
# (In a sanitizer build, the Debian programs need its runtime first: lib.sh's VERBS_ENV.)
sanitizer=("${VERBS_ENV[@]:2}")
base=(env -i "HOME=$HOME" "PATH=/usr/local/bin:/usr/bin:/bin" "${sanitizer[@]}")

if [ -s "$shell_env" ]; then
    echo "--- a later shell: eval \"\$(uroce env)\""
    cat "$shell_env"
    "${base[@]}" timeout 120 sh -c '. "$1" && uroce list && . "$2"' - "$shell_env" \
        "$UROCE_RUNTIME_DIR/pair.sh" || fail "the pair failed in a shell with uroce env's environment"
fi

# The runner gives each later step $GITHUB_ENV's variables and $GITHUB_PATH's directories.
echo "--- a later step with \$GITHUB_ENV and \$GITHUB_PATH"
mapfile -t vars <"$github_env"
[ ${#vars[@]} -gt 0 ] || fail "nothing was written to \$GITHUB_ENV"
path=/usr/local/bin:/usr/bin:/bin
while read -r d; do path=$d:$path; done <"$github_path"
env -i "HOME=$HOME" "PATH=$path" "${sanitizer[@]}" "${vars[@]}" timeout 120 sh -c 'uroce list && . "$1"' - \
    "$UROCE_RUNTIME_DIR/pair.sh" || fail "the pair failed in a step with \$GITHUB_ENV's environment"
grep -q "iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "client did not report its iterations"
echo PASS
