#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# watchdog.sh PID RUNTIME_DIR UROCE: started by lib.sh outside the test's process tree.
# When the test's shell (PID) has gone, stops whatever it left behind. A test that ends
# normally has cleaned up already (the directory is gone) and this does nothing; a test
# killed outright (ctest's timeout sends SIGKILL, which no trap sees) would otherwise leave
# its devices running, and a two-host test its network namespaces.
pid=$1 dir=$2 uroce=$3
tail --pid="$pid" -f /dev/null 2>/dev/null
[ -d "$dir" ] || exit 0
if [ -f "$dir/netns" ]; then
    while read -r ns; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$ns" 2>/dev/null
        rm -rf "/etc/netns/$ns"  # a cluster host's /etc/hosts (uroce cluster)
    done <"$dir/netns"
fi
for d in "$dir" "$dir"/*/; do
    [ -d "$d" ] && UROCE_RUNTIME_DIR=${d%/} "$uroce" stop >/dev/null 2>&1
done
rm -rf "$dir"
