#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine: installs what is needed, builds,
# runs every test (unit and integration) in a normal build, then again in an ASan/UBSan
# build (without the long throughput runs); the fuzz targets run for a minute each between.
# usage: scripts/test.sh [--no-sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

scripts/build.sh build
(cd build && ctest -j2 --output-on-failure --timeout 300)

scripts/fuzz.sh 60  # libFuzzer targets, 60 s each (docs/fuzzing.md)

if [ "${1:-}" != "--no-sanitize" ]; then
    scripts/build.sh build-asan -DUROCE_SANITIZE=ON
    # Everything but the long throughput runs (rstream's and riostream's default series among
    # them: their -T v runs check the same paths byte by byte), the capture decodes and the
    # format check, which the normal build already covered: under ASan they only take longer
    # (tshark's share does not shrink), they reach no code the short runs do not.
    (cd build-asan && ctest -j2 --output-on-failure --timeout 300 \
        -E '\.many$|small_many|rc_pingpong\.large|faults\.transfer|perftest\.read_bw_1m|rsocket\.r(io)?stream\.default|capture\.|rdmacm\.capture|mcast\.mckey\.capture|format\.check')
fi
