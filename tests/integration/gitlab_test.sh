#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The GitLab CI template (ci/uroce.gitlab-ci.yml, docs/ci.md) run as a runner runs a job that
# extends it: the template's variables (the job overriding where uroce is installed and where
# the device lives, as a job may), before_script and the job's script in one shell,
# after_script in another. The script is an ibv_rc_pingpong pair; afterwards the job's
# directory holds the capture, the trace and the device's log, and no device runs.
# usage: gitlab_test.sh SOURCE_DIR
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong
src=${1:?usage: gitlab_test.sh SOURCE_DIR}
python3 -c 'import yaml' 2>/dev/null || skip "python3-yaml is not installed (run scripts/setup.sh)"
project=$UROCE_RUNTIME_DIR/project # $CI_PROJECT_DIR
mkdir -p "$project"
job=$UROCE_RUNTIME_DIR/job
mkdir -p "$job"

# The template's lines, as files a shell runs; its variables as NAME=value lines (expanded by
# the shell below, as GitLab expands $CI_PROJECT_DIR in them).
python3 - "$src/ci/uroce.gitlab-ci.yml" "$job" <<'PY' || fail "cannot read the template"
import sys, yaml
t = yaml.safe_load(open(sys.argv[1]))[".uroce"]
out = sys.argv[2]
with open(f"{out}/variables", "w") as f:
    for k, v in t["variables"].items():
        f.write(f"{k}={v}\n")
for part in ("before_script", "after_script"):
    with open(f"{out}/{part}", "w") as f:
        f.write("\n".join(t[part]) + "\n")
with open(f"{out}/artifacts", "w") as f:
    f.write("\n".join(t["artifacts"]["paths"]) + "\n")
PY
pair_script "$(tcp_port)" >"$job/script"

# runner_shell FILE...: a new shell with the job's environment running FILEs in order, each
# line stopping it on failure (as GitLab's generated script does).
runner_shell() {
    local lines=() f
    for f in "$@"; do lines+=(". '$f'"); done
    env -i HOME="$HOME" PATH=/usr/local/bin:/usr/bin:/bin "${VERBS_ENV[@]:2}" \
        CI=true CI_PROJECT_DIR="$project" UROCE_UDP_PORT="$UROCE_UDP_PORT" \
        UROCE_SRC="$src" UROCE_SETUP=0 UROCE_BUILD_DIR="$UROCE_BUILD" \
        bash -c 'set -eo pipefail
            while IFS= read -r v; do export "$(eval "echo \"$v\"")"; done <"$1"
            # The job overrides the template: the prefix and the runtime directory in the test.
            export UROCE_PREFIX="$2" UROCE_RUNTIME_DIR="$3"
            shift 3
            for c in "$@"; do eval "$c"; done' - "$job/variables" "$UROCE_RUNTIME_DIR/prefix" \
        "$UROCE_RUNTIME_DIR/ci" "${lines[@]}"
}
trap 'rc=$?; UROCE_RUNTIME_DIR=$UROCE_RUNTIME_DIR/ci "$UROCE" stop >/dev/null 2>&1; (exit $rc); cleanup' EXIT

echo "--- before_script and script"
runner_shell "$job/before_script" "$job/script" >"$job/job.out" 2>&1
rc=$?
cat "$job/job.out"
[ $rc = 0 ] || fail "the job failed ($rc)"
grep -q "iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "the client did not report its iterations"
echo "--- after_script"
runner_shell "$job/after_script" || fail "after_script failed"

ls -l "$project"
[ -z "$(UROCE_RUNTIME_DIR=$UROCE_RUNTIME_DIR/ci "$UROCE" list)" ] || fail "a device still runs"
while read -r pattern; do
    # shellcheck disable=SC2086 # the artifact paths are globs
    set -- "$project"/$pattern
    [ -s "$1" ] || fail "no artifact $pattern"
done <"$job/artifacts"
grep -q ' attached (session ' "$project/uroce-trace.txt" || fail "the trace shows no process"
# The capture holds the pair's packets: more than the 24-byte pcap header.
[ "$(stat -c %s "$project/uroce.pcap")" -gt 10000 ] || fail "the capture is (nearly) empty"
echo PASS
