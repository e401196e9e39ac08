#!/usr/bin/env bash
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
sleep 0.5
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
