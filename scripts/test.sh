#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine: installs what is needed, builds,
# runs every test (unit and integration) in a normal build, then again in an ASan/UBSan
# build (without the long throughput runs); the fuzz targets run for a minute each between.
# As root it then runs the normal pass again on a second system, Debian 13 (trixie), in a
# root file system of its own with that system's packages (scripts/test-distro.sh).
# usage: scripts/test.sh [--no-sanitize | --normal-only]
#   --no-sanitize   no ASan/UBSan pass
#   --normal-only   the normal build and ctest only (what the second system runs)
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
scripts/setup.sh

# Each pass's ctest summary, printed together at the end.
summary=()
count() {  # LABEL LOG
    local line
    line=$(grep -E '^[0-9]+% tests passed' "$2" | tail -n1)
    summary+=("$1: ${line:-no ctest summary}")
    # The pass's ten slowest tests, where its time goes (ctest's "Test #N: NAME ... X sec").
    slowest=$(awk '/Test +#[0-9]+: / { for (i = 1; i < NF; i++) if ($(i + 1) == "sec") t = $i;
                   n = $0; sub(/.*Test +#[0-9]+: /, "", n); sub(/ .*/, "", n); print t, n }' "$2" |
        sort -rn | head -n 10 | awk '{ printf "%s%s %ss", (NR > 1 ? ", " : ""), $2, $1 }')
    [ -n "$slowest" ] && summary+=("    slowest: $slowest")
}
system=$(. /etc/os-release && echo "${NAME% GNU/Linux} ${VERSION_ID:-} (${VERSION_CODENAME:-?})")

# The second system (root only: debootstrap and namespaces; CI runs as root). Its root file
# system is made first: the host's exports.debian13_program ctest builds a program in it.
second=${UROCE_SECOND_SYSTEM:-trixie}
run_second=""
if [ "$mode" != "--normal-only" ] && [ "$(id -u)" = 0 ] && [ "$second" != none ] &&
    [ "$(. /etc/os-release && echo "${VERSION_CODENAME:-}")" != "$second" ]; then
    run_second=1
    scripts/test-distro.sh "$second" --prepare
fi

scripts/build.sh build
# The package tests (package.build, package.debian12, package.debian13) build the package
# once and use minimal Debian 12 and 13 roots of their own: they run in the host's pass only,
# not again in the second system's root.
exclude=()
[ "$mode" = "--normal-only" ] && exclude=(-E '^package\.')
(cd build && ctest -j2 --output-on-failure --timeout 300 "${exclude[@]}") 2>&1 | tee build/ctest.log
count "$system, normal" build/ctest.log
[ "$mode" = "--normal-only" ] && { printf '%s\n' "${summary[@]}"; exit 0; }

scripts/fuzz.sh 60  # libFuzzer targets, 60 s each (docs/fuzzing.md)

if [ "$mode" != "--no-sanitize" ]; then
    scripts/build.sh build-asan -DUROCE_SANITIZE=ON
    # Everything but the long throughput runs (rstream's and riostream's default series among
    # them: their -T v runs check the same paths byte by byte), the capture decodes and the
    # format check, which the normal build already covered, and the package (built without
    # sanitizers, as Debian builds it): under ASan they only take longer
    # (tshark's share does not shrink), they reach no code the short runs do not.
    (cd build-asan && ctest -j2 --output-on-failure --timeout 300 \
        -E '\.many$|small_many|rc_pingpong\.large|faults\.transfer|perftest\.read_bw_1m|rsocket\.r(io)?stream\.default|capture\.|rdmacm\.capture|mcast\.mckey\.capture|format\.check|^package\.') \
        2>&1 | tee build-asan/ctest.log
    count "$system, ASan/UBSan" build-asan/ctest.log
fi

if [ -n "$run_second" ]; then
    scripts/test-distro.sh "$second" 2>&1 | tee build/distro-"$second".log
    count "Debian $second (its own packages), normal" build/distro-"$second".log
else
    summary+=("second system: not run (needs root; UROCE_SECOND_SYSTEM=${second})")
fi
printf '%s\n' "${summary[@]}"
