#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The C++ sources are clang-format clean (.clang-format at the top). A change that is not
# fails here; `git clang-format` formats the lines a change touched.
# usage: format_check.sh SOURCE_DIR
src=${1:?usage: format_check.sh SOURCE_DIR}
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed (run scripts/setup.sh)"; exit 77; }
cd "$src" || exit 1
files=$(find emu net verbs_api tests -name '*.cpp' -o -name '*.h' | sort)
# One clang-format for all files (fast); on a failure, name the files.
# shellcheck disable=SC2086
clang-format --dry-run --Werror $files >/dev/null 2>&1 && bad="" || bad=" ?"
if [ -n "$bad" ]; then
    bad=""
    for f in $files; do
        clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
    done
fi
if [ -n "$bad" ]; then
    echo "not clang-format clean:$bad"
    echo "fix: clang-format -i$bad"
    exit 1
fi
echo "$(echo "$files" | wc -w) files clang-format clean"
