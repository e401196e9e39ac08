#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Builds the libFuzzer targets (tests/fuzz, docs/fuzzing.md) in build-fuzz with clang and
# ASan + UBSan, generates the seed corpora, and runs the three targets (fuzz_decode,
# fuzz_device, fuzz_control) side by side for SECONDS each (default 60). Exits non-zero if a
# target crashes, leaks, hits a sanitizer report or a property check, or does not run for the
# whole time. Inputs that once failed (tests/fuzz/regress/TARGET/) are replayed first.
# usage: scripts/fuzz.sh [SECONDS]
# Environment: FUZZ_BUILD (default build-fuzz), FUZZ_JOBS (build parallelism), FUZZ_ARGS
# (extra libFuzzer flags for every target, e.g. "-seed=1").
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-60}
[[ "$secs" =~ ^[0-9]+$ ]] && [ "$secs" -gt 0 ] || { echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2; }
dir=${FUZZ_BUILD:-build-fuzz}
cxx=$(command -v clang++ || command -v clang++-14 || true)
cc=$(command -v clang || command -v clang-14 || true)
[ -n "$cxx" ] && [ -n "$cc" ] || { echo "fuzz: clang is not installed (run scripts/setup.sh)" >&2; exit 1; }

cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_C_COMPILER="$cc" -DUROCE_FUZZ=ON >/dev/null
cmake --build "$dir" -j"${FUZZ_JOBS:-$(nproc)}" --target fuzz_decode fuzz_device \
    fuzz_control make_corpus

out=$dir/fuzz-out
rm -rf "$out"
mkdir -p "$out"
"$dir/bin/make_corpus" "$out/seeds"

# Each target: the generated seeds (read-only) plus a working corpus it grows. libFuzzer exits
# non-zero on a crash, a leak (-detect_leaks, on by default with ASan), an ASan/UBSan report
# (UBSan set to abort) or a timeout of one input; -error_exitcode makes that explicit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}
targets=(decode device control)
pids=()
for t in "${targets[@]}"; do
    mkdir -p "$out/corpus-$t" "$out/artifacts-$t"
    regress=()
    [ -d "tests/fuzz/regress/$t" ] && regress=("tests/fuzz/regress/$t")
    # shellcheck disable=SC2086
    "$dir/bin/fuzz_$t" "$out/corpus-$t" "$out/seeds/$t" "${regress[@]}" -max_total_time="$secs" \
        -timeout=10 -rss_limit_mb=4096 -error_exitcode=77 -print_final_stats=1 \
        -artifact_prefix="$out/artifacts-$t/" ${FUZZ_ARGS:-} >"$out/$t.log" 2>&1 &
    pids+=($!)
done

rc=0
i=0
for t in "${targets[@]}"; do
    if wait "${pids[$i]}"; then r=0; else r=$?; fi
    i=$((i + 1))
    log=$out/$t.log
    runs=$(awk '/stat::number_of_executed_units:/ { print $2 }' "$log")
    took=$(awk '/^Done [0-9]+ runs in [0-9]+ second/ { print $(NF - 1) }' "$log")
    echo "fuzz_$t: exit $r, ${runs:-?} runs in ${took:-?} s, corpus $(ls "$out/corpus-$t" | wc -l) files"
    bad=""
    [ "$r" = 0 ] || bad="exit status $r"
    if grep -qE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|SUMMARY: " "$log"; then
        bad="${bad:+$bad, }a sanitizer or libFuzzer report"
    fi
    [ -n "$(ls -A "$out/artifacts-$t")" ] && bad="${bad:+$bad, }crash artifacts in $out/artifacts-$t"
    # It must really have fuzzed for the whole time, not stopped early.
    [ -n "$took" ] && [ "$took" -ge "$secs" ] || bad="${bad:+$bad, }ran ${took:-?} s, not $secs s"
    if [ -n "$bad" ]; then
        echo "FAIL: fuzz_$t: $bad" >&2
        tail -60 "$log" >&2
        rc=1
    fi
done
[ $rc = 0 ] && echo "fuzz: all ${#targets[@]} targets ran $secs s with no crash, leak or sanitizer report"
exit $rc
