#!/usr/bin/env bash
# The whole test suite, from a fresh Debian machine: installs what is needed, builds,
# runs every test (unit and integration) in a normal build, then the unit and
# integration tests again in an ASan/UBSan build.
# usage: scripts/test.sh [--no-sanitize]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

scripts/build.sh build
(cd build && ctest -j2 --output-on-failure --timeout 300)

if [ "${1:-}" != "--no-sanitize" ]; then
    scripts/build.sh build-asan -DUROCE_SANITIZE=ON
    (cd build-asan && ctest -j2 --output-on-failure --timeout 300)
fi
