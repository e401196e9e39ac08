#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Every source file states uroce's licence (LICENSE) in an SPDX line near its top: C, C++,
# linker version scripts, shell, Python, CMake, YAML, Containerfiles and every file that
# starts with "#!". Data, documentation and the licence texts themselves are not sources.
# usage: licence_check.sh SOURCE_DIR
src=${1:?usage: licence_check.sh SOURCE_DIR}
cd "$src" || exit 1
id='SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause'
[ -f LICENSE ] && grep -qF "$id" LICENSE || { echo "LICENSE does not name $id"; exit 1; }
for t in GPL-2.0-only BSD-2-Clause; do
    [ -s "LICENSES/$t.txt" ] || { echo "LICENSES/$t.txt is missing"; exit 1; }
done
# The tree's files: git's list in a checkout, else every file but the build's.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    files=$(git ls-files)
else
    files=$(find . -path ./build -prune -o -path './build-*' -prune -o -type f -print | sed 's|^\./||')
fi
is_source() {
    case $1 in
    LICENSES/*) return 1 ;;
    *.cpp | *.h | *.c | *.map | *.py | *.sh | *.cmake | *.yml | */CMakeLists.txt | CMakeLists.txt | */Containerfile) return 0 ;;
    esac
    [ "$(head -c2 "$1" 2>/dev/null | tr -d '\0')" = '#!' ]
}
n=0 bad=""
while IFS= read -r f; do
    [ -f "$f" ] && [ ! -L "$f" ] || continue
    is_source "$f" || continue
    n=$((n + 1))
    head -n 3 "$f" | grep -qF "$id" || bad="$bad $f"
done <<<"$files"
if [ -n "$bad" ]; then
    echo "no SPDX line ($id) in its first 3 lines:$bad"
    exit 1
fi
[ "$n" -gt 300 ] || { echo "only $n source files found: the list is wrong"; exit 1; }
echo "$n source files carry: $id"
