#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance (docs/xrc.md): XRC domains, SRQs and TGT/INI QPs through the public verbs API.
# xrc_verbs (built against the system's verbs.h, run over the drop-in library) makes the
# calls and checks every answer and errno; here we check that it passed, that the device
# survived, and that nothing of it is left in the device afterwards.
# usage: xrc_test.sh PROGRAM rules|share
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: xrc_test.sh PROGRAM rules|share}
mode=${2:?usage: xrc_test.sh PROGRAM rules|share}
start_watched_device uroce0 127.0.0.1
work=$UROCE_RUNTIME_DIR/xrc
mkdir -p "$work"
run_checks "xrc_verbs $mode" 60 "$prog" uroce0 "$UROCE" "$mode" "$work"
expect_survived_empty uroce0
echo "$res" | grep -E '^(xrcd|srq|qp) ' && fail "XRC objects remain after every process exited"
# The kind filter of `uroce res` prints only lines of that kind.
"$UROCE" res uroce0 xrcd srq qp | grep -v -E '^(xrcd|srq|qp) ' && fail "uroce res KIND printed other lines"
echo PASS
