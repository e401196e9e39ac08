#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Acceptance: wrong verbs calls fail as documented and leave no trace. verbs_bad_input
# (built against the system's verbs.h, run over the drop-in library) makes the calls and
# checks each answer; here we check that the device survived and holds no objects after.
# usage: verbs_bad_input_test.sh PROGRAM
. "$(dirname "$0")/lib.sh"
prog=${1:?usage: verbs_bad_input_test.sh PROGRAM}
start_watched_device uroce0 127.0.0.1
run_checks verbs_bad_input 60 "$prog" uroce0 "$UROCE"
expect_survived_empty uroce0
echo PASS
