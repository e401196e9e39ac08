#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# UCX (Debian's ucx-utils, unmodified) over uroce, under `uroce run` (docs/system-view.md),
# with no UCX workaround variable: server and client are separate ucx_perftest processes.
# usage: ucx_test.sh MODE
#   info            ucx_info -d lists rc_verbs and ud_verbs on uroce0:1
#   uct TEST TL [ucx_perftest args...]
#                   a UCT test (put_bw, get, am_bw) over one transport (rc_verbs,
#                   ud_verbs) of uroce0:1
#   ucp TEST        a UCP test (tag_bw, tag_lat) with UCX_TLS=rc_verbs,ud_verbs,self
. "$(dirname "$0")/lib.sh"
mode=${1:?usage: ucx_test.sh MODE}
need ucx_info
need ucx_perftest
PORT=$(tcp_port)

# in_view CMD...: CMD under `uroce run`, with the drop-in libraries.
in_view() {
    verbs "$UROCE" run -- "$@"
}

# The view needs a mount namespace: where the host allows none, `uroce run` says so and
# UCX finds no device. That is a host limit, not a failure.
view_or_skip() {
    local out=$UROCE_RUNTIME_DIR/view.out
    in_view true >"$out" 2>&1 || fail "uroce run failed: $(cat "$out")"
    if grep -q "without the system view" "$out"; then skip "$(head -1 "$out")"; fi
}

# perf_pair ENV... -- PERFTEST_ARGS...: server and client ucx_perftest on the device's
# address, each under `uroce run` with ENV (through a wrapper: run_pair splits its arguments
# at the first "--", and `uroce run` has one of its own).
perf_pair() {
    local envs=() seen=0 args=()
    for a in "$@"; do
        if [ "$a" = "--" ] && [ $seen = 0 ]; then seen=1; continue; fi
        if [ $seen = 0 ]; then envs+=("$a"); else args+=("$a"); fi
    done
    local w=$UROCE_RUNTIME_DIR/ucx_perftest
    printf '#!/bin/sh\nexec env %s "%s" run -- ucx_perftest %s "$@"\n' "${envs[*]}" "$UROCE" \
        "$(ucx_perftest_p2p)" >"$w"
    chmod +x "$w"
    PAIR_TIMEOUT=120 run_pair "$w" -p "$PORT" "${args[@]}" -- "$w" -p "$PORT" "${args[@]}" 127.0.0.1
    grep -q '^Final:' "$UROCE_RUNTIME_DIR/client.out" || fail "the client printed no Final line"
    grep '^Final:' "$UROCE_RUNTIME_DIR/client.out"
}

start_device uroce0 127.0.0.1
view_or_skip
case $mode in
info)
    out=$UROCE_RUNTIME_DIR/info.out
    in_view ucx_info -d >"$out" 2>&1 || { cat "$out"; fail "ucx_info -d failed"; }
    for tl in rc_verbs ud_verbs; do
        awk -v tl="$tl" '/Transport:/ { t = $3 } /Device:/ && t == tl && $3 == "uroce0:1" { ok = 1 }
                         END { exit !ok }' "$out" || { cat "$out"; fail "no $tl on uroce0:1"; }
        echo "ucx_info: $tl on uroce0:1"
    done
    ;;
uct)
    test=${2:?usage: ucx_test.sh uct TEST TL}
    tl=${3:?usage: ucx_test.sh uct TEST TL}
    shift 3
    perf_pair UCX_NET_DEVICES=uroce0:1 -- -t "$test" -x "$tl" -d uroce0:1 -n 1000 "$@"
    ;;
ucp)
    test=${2:?usage: ucx_test.sh ucp TEST}
    perf_pair UCX_TLS=rc_verbs,ud_verbs,self -- -t "$test" -n 1000
    ;;
*) fail "unknown mode $mode" ;;
esac
