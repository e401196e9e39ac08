#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The CI step (action.yml runs it; docs/ci.md): builds uroce from this checkout, installs it
# into a prefix, starts a device, and exports the environment that later steps need to use
# it: to $GITHUB_ENV and $GITHUB_PATH when they are set (GitHub Actions), and always as
# shell export lines on stdout, for `eval "$(scripts/ci-step.sh)"` (GitLab, a shell).
# Everything else it prints goes to stderr. ctest ci.step runs this script.
#
# Settings (environment; all optional):
#   UROCE_SETUP=0          do not install the build's Debian packages (scripts/setup.sh --build-only)
#   UROCE_BUILD_DIR=DIR    build directory (default $RUNNER_TEMP/uroce-build, else build-ci here);
#                          one already configured is built as it is
#   UROCE_PREFIX=DIR       where to install (default $RUNNER_TEMP/uroce, else /tmp/uroce-ci-UID)
#   UROCE_ADDR=IPV4        the device's address (default 127.0.0.1)
#   UROCE_CAPTURE=FILE     write every packet to this pcap (docs/capture.md)
#   UROCE_FAULTS=SPEC      inject faults, e.g. loss=0.01,seed=1 (docs/faults.md)
#   UROCE_RUNTIME_DIR, UROCE_UDP_PORT: as for uroce itself
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
tmp=${RUNNER_TEMP:-}
build=${UROCE_BUILD_DIR:-${tmp:+$tmp/uroce-build}}
build=${build:-$src/build-ci}
prefix=${UROCE_PREFIX:-${tmp:+$tmp/uroce}}
prefix=${prefix:-/tmp/uroce-ci-$(id -u)}
exec 3>&1 1>&2 # stdout is for the environment only

if [ "${UROCE_SETUP:-1}" != 0 ]; then "$src/scripts/setup.sh" --build-only; fi
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DUROCE_TESTS=OFF >/dev/null
fi
# What is installed, and no more (not the tests).
cmake --build "$build" -j"$(nproc)" --target uroce uroced ibverbs rdmacm uroce_mlx5_stub \
    uroce_efa_stub
cmake --install "$build" --prefix "$prefix" >/dev/null
uroce=$prefix/bin/uroce

args=(--addr "${UROCE_ADDR:-127.0.0.1}")
if [ -n "${UROCE_CAPTURE:-}" ]; then args+=(--pcap "$(realpath -m "$UROCE_CAPTURE")"); fi
if [ -n "${UROCE_FAULTS:-}" ]; then args+=(--faults "$UROCE_FAULTS"); fi
# The runtime directory is fixed now, so the later steps find the device whatever their own
# XDG_RUNTIME_DIR.
UROCE_RUNTIME_DIR=$(eval "$("$uroce" env 2>/dev/null)" && echo "$UROCE_RUNTIME_DIR")
export UROCE_RUNTIME_DIR
name=$("$uroce" start "${args[@]}")
echo "uroce: device $name runs from $prefix ($("$uroce" list))"

if [ -n "${GITHUB_ENV:-}" ]; then "$uroce" env --github >>"$GITHUB_ENV"; fi
if [ -n "${GITHUB_PATH:-}" ]; then echo "$prefix/bin" >>"$GITHUB_PATH"; fi
# The action's outputs: where the device's log (and so the artifacts of a failed job) are.
if [ -n "${GITHUB_OUTPUT:-}" ]; then
    printf 'device=%s\nprefix=%s\nruntime-dir=%s\n' "$name" "$prefix" "$UROCE_RUNTIME_DIR" \
        >>"$GITHUB_OUTPUT"
fi
"$uroce" env >&3
