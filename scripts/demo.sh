#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The main job: a uroce device plus an unmodified rdma-core program over it, with
# every packet written to a capture that tshark decodes.
# usage: scripts/demo.sh [CAPTURE_FILE]   (default: uroce-demo.pcap)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh build

pcap=$(realpath -m "${1:-uroce-demo.pcap}")
export UROCE_RUNTIME_DIR=${UROCE_RUNTIME_DIR:-$(mktemp -d /tmp/uroce-demo.XXXXXX)}
uroce=build/bin/uroce
trap '$uroce stop >/dev/null 2>&1 || true' EXIT

$uroce start --name uroce0 --addr 127.0.0.1 --pcap "$pcap"
$uroce list
echo "== ibv_devinfo"
$uroce run -- ibv_devinfo
echo "== ibv_rc_pingpong (server and client, two processes)"
$uroce run -- ibv_rc_pingpong -g 0 -n 100 &
server=$!
# The client connects once: wait until the server listens on its TCP port (18515, 0x4853),
# however long a loaded machine takes to start it.
for _ in $(seq 300); do
    grep -qs ':4853 0\+:0000 0A' /proc/net/tcp /proc/net/tcp6 && break
    kill -0 $server 2>/dev/null || break
    sleep 0.1
done
$uroce run -- ibv_rc_pingpong -g 0 -n 100 127.0.0.1
wait $server
echo "== device counters"
$uroce counters
$uroce stop
echo "== capture: $pcap"
# Decoded once into a variable: piping tshark into head would kill it with SIGPIPE, and
# pipefail would turn that into the script's exit status.
decoded=$(tshark -r "$pcap")
sed -n 1,12p <<<"$decoded"
echo "... $(wc -l <<<"$decoded") packets in $pcap"
