#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# pyverbs (python3-pyverbs: rdma-core's Python bindings, whose provider modules are
# linked against libmlx5.so.1 and libefa.so.1) imports its mlx5 and efa modules over
# uroce's libraries: the stand-ins export every symbol those modules bind to, and
# uroce's libibverbs/librdmacm the verbs and CM symbols pyverbs binds to (Python loads
# extension modules with RTLD_NOW, so a missing one fails the import). The test also
# checks that the four libraries were loaded from the build, not from the system.
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

py=/usr/bin/python3
[ -x "$py" ] || skip "$py is not installed"
# find_spec of a top-level package does not load it (nor rdma-core's libraries).
"$py" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("pyverbs") is None)' ||
    skip "python3-pyverbs is not installed (run scripts/setup.sh)"

verbs "$py" -c '
import os, sys
import pyverbs.providers.mlx5.mlx5dv, pyverbs.providers.efa.efadv
libdir = os.path.realpath(sys.argv[1])
want = ("libibverbs.so", "librdmacm.so", "libmlx5.so", "libefa.so")
seen = {}
for line in open("/proc/self/maps"):
    path = line.split()[-1]
    base = os.path.basename(path)
    for w in want:
        if base.startswith(w):
            seen.setdefault(w, set()).add(os.path.dirname(os.path.realpath(path)))
bad = [f"{w}: {sorted(seen.get(w, []))}" for w in want if seen.get(w) != {libdir}]
if bad:
    sys.exit(f"not loaded (only) from {libdir}: " + "; ".join(bad))
names = " ".join(want)
print(f"pyverbs mlx5dv and efadv imported; {names} from {libdir}")
' "$LIBDIR" || fail "pyverbs does not import over uroce's libraries"
echo PASS
