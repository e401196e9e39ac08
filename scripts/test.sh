#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The whole test suite, from a fresh Debian machine: installs what is needed, builds,
# runs every test (unit and integration) in a normal build, then again in an ASan/UBSan
# build (without the long throughput runs); the fuzz targets run for a minute each between.
# As root it then runs the normal pass again on a second system, Debian 13 (trixie), in a
# root file system of its own with that system's packages (scripts/test-distro.sh).
# usage: scripts/test.sh [--no-sanitize | --normal-only | --second-system]
#   --no-sanitize     no ASan/UBSan pass
#   --normal-only     the normal build and ctest only
#   --second-system   the normal build and ctest without the checks that run once, on the
#                     host (what scripts/test-distro.sh runs in the second system's root)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
start=$SECONDS
scripts/setup.sh

# Each pass's ctest summary, printed together at the end, with the minutes each step took.
summary=()
count() {  # LABEL LOG
    local line
    line=$(grep -E '^[0-9]+% tests passed' "$2" | tail -n1)
    summary+=("$1: ${line:-no ctest summary}")
    # The pass's ten slowest tests, where its time goes (ctest's "Test #N: NAME ... X sec").
    # (awk, not head, takes the first ten: every stage reads all its input, see setup.sh.)
    local slowest
    slowest=$(awk '/Test +#[0-9]+: / { for (i = 1; i < NF; i++) if ($(i + 1) == "sec") t = $i;
                   n = $0; sub(/.*Test +#[0-9]+: /, "", n); sub(/ .*/, "", n); print t, n }' "$2" |
        sort -rn | awk 'NR <= 10 { printf "%s%s %ss", (NR > 1 ? ", " : ""), $2, $1 }')
    if [ -n "$slowest" ]; then summary+=("    slowest: $slowest"); fi
}
step_at=$SECONDS
step() {  # LABEL: the time since the last step
    summary+=("  ($1: $(((SECONDS - step_at + 30) / 60)) min)")
    step_at=$SECONDS
}

# Slow checks of the device's own behaviour (fault seeds, long runs, the capture decodes and
# packet layouts, the symbol tables): they run once, in the host's normal pass. The ASan pass
# and the second system's pass run the same paths through the short checks; what the second
# system changes (its rdma-core, perftest, UCX, libfabric, MPI, pyverbs, tshark) keeps its
# checks there (capture.* per transport among them).
once='^(faults\.transfer|rdmacm\.rping_200|ip_marks\.sport|ladder\.(perf|loss|rnr)|wire_icrc\.'
once+='|golden_packets\.|capture\.(runtime|two_devices\.)'
once+='|ipv6\.(rstream|write_bw|rc_pingpong|ud_pingpong|xsrq)|flush$|format\.check'
once+='|exports\.(stubs|newer_program)|package\.)'
system=$(. /etc/os-release && echo "${NAME% GNU/Linux} ${VERSION_ID:-} (${VERSION_CODENAME:-?})")

# The second system (root only: debootstrap and namespaces; CI runs as root). Its root file
# system is made first: the host's exports.debian13_program ctest builds a program in it.
second=${UROCE_SECOND_SYSTEM:-trixie}
run_second=""
host_pass=""
case "$mode" in "" | --no-sanitize) host_pass=1 ;; esac
if [ -n "$host_pass" ] && [ "$(id -u)" = 0 ] && [ "$second" != none ] &&
    [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" != "$second" ]; then
    run_second=1
    scripts/test-distro.sh "$second" --prepare
fi
step "set-up"

scripts/build.sh build
step "normal build"
# The package tests (package.build, package.debian12, package.debian13) build the package
# once and use minimal Debian 12 and 13 roots of their own: they are among the checks that
# run once.
exclude=()
[ "$mode" = "--second-system" ] && exclude=(-E "$once")
(cd build && ctest -j2 --output-on-failure --timeout 300 "${exclude[@]}") 2>&1 | tee build/ctest.log
count "$system, normal" build/ctest.log
step "normal ctest"
case "$mode" in --normal-only | --second-system)
    printf '%s\n' "${summary[@]}"
    exit 0
    ;;
esac

scripts/fuzz.sh 60  # libFuzzer targets, 60 s each (docs/fuzzing.md)
step "fuzz"

if [ "$mode" != "--no-sanitize" ]; then
    scripts/build.sh build-asan -DUROCE_SANITIZE=ON
    step "ASan build"
    # Everything but the checks that run once, the long throughput runs (rstream's and
    # riostream's default series among them: their -T v runs check the same paths byte by
    # byte), every capture decode (tshark's share does not shrink under ASan) and the MPI
    # jobs on the cluster (cluster.lifecycle and cluster.tools run its code): under ASan they
    # only take longer, they reach no code the short runs do not. Nor the deployment checks
    # (the CI step, the GitLab template, `uroce run` for a job, an install moved elsewhere):
    # they check scripts and install rules, which the normal pass runs.
    (cd build-asan && ctest -j2 --output-on-failure --timeout 300 \
        -E "$once|\.many$|small_many|rc_pingpong\.large|perftest\.read_bw_1m|rsocket\.r(io)?stream\.default|capture\.|rdmacm\.capture|mcast\.mckey\.capture|^cluster\.(openmpi|openmpi_ofi|mpich|loss|nonroot)$|^ci\.(step|gitlab|run_job)$|^install\.moved_prefix$") \
        2>&1 | tee build-asan/ctest.log
    count "$system, ASan/UBSan" build-asan/ctest.log
    step "ASan ctest"
fi

if [ -n "$run_second" ]; then
    scripts/test-distro.sh "$second" 2>&1 | tee build/distro-"$second".log
    count "Debian $second (its own packages), normal" build/distro-"$second".log
    step "second system"
else
    summary+=("second system: not run (needs root; UROCE_SECOND_SYSTEM=${second})")
fi
summary+=("  (in all: $(((SECONDS - start + 30) / 60)) min)")
printf '%s\n' "${summary[@]}"
