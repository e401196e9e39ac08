#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# rdma-core's own test suite (Debian's python3-pyverbs: /usr/share/doc/rdma-core/tests, run
# by its run_tests.py -v with /usr/bin/python3) against a uroce device, with uroce's libraries
# (libibverbs, librdmacm and the mlx5/efa stand-ins) on the library path.
# Fails on any FAIL or ERROR, on a skip whose reason rdma_core_suite_skips.txt does not list,
# and when fewer than MIN_PASS tests pass. Prints the counts and every skip's reason.
# usage: rdma_core_suite_test.sh MIN_PASS
. "$(dirname "$0")/lib.sh"
min_pass=${1:?usage: rdma_core_suite_test.sh MIN_PASS}
suite=/usr/share/doc/rdma-core/tests
[ -f "$suite/run_tests.py" ] || skip "python3-pyverbs is not installed (run scripts/setup.sh)"
/usr/bin/python3 -c 'import pyverbs' 2>/dev/null || skip "pyverbs does not import"

start_device uroce0 127.0.0.1
# Debian gzips some of the suite's files: an unpacked copy.
work=$UROCE_RUNTIME_DIR/suite
mkdir -p "$work"
cp -r "$suite" "$work/tests"
gunzip -f "$work"/tests/*.gz
out=$UROCE_RUNTIME_DIR/suite.out
# Under `uroce run`: its system view (docs/system-view.md) gives the RDMA-CM tests the
# device's netdev in sysfs. Where the host allows no mount namespace they skip for that.
rules=$UROCE_RUNTIME_DIR/skips.txt
cp "$(dirname "$0")/rdma_core_suite_skips.txt" "$rules"
view=$(verbs "$UROCE" run -- true 2>&1)
if echo "$view" | grep -q "without the system view"; then
    echo "$view"
    echo "gap doesn't have net interface  no system view on this host ($view)" >>"$rules"
    min_pass=$((min_pass - 10))
fi
(cd "$work" && verbs timeout 900 "$UROCE" run -- /usr/bin/python3 tests/run_tests.py -v --dev uroce0) \
    >"$out" 2>&1
rc=$?
/usr/bin/python3 - "$out" "$rules" "$min_pass" "$rc" <<'PY'
import re, sys
out, rules_file, min_pass, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rules = []
for line in open(rules_file):
    line = line.rstrip("\n")
    if not line.strip() or line.lstrip().startswith("#"):
        continue
    kind, rest = line.split(" ", 1)
    pattern, why = (rest.split("  ", 1) + [""])[:2]
    rules.append((kind, pattern.strip(), why.strip()))
# A test's verdict ends its line; a test that prints leaves it alone on a line of its own.
result = re.compile(
    r"(?:\.\.\. |^)(ok|FAIL|ERROR|expected failure|unexpected success|skipped (['\"])(.*)\2)$")
test_line = re.compile(r"^(test\w*) \((tests\.[\w.]+)\)")
current, results = None, []
for line in open(out, errors="replace"):
    line = line.rstrip("\n")
    m = test_line.match(line)
    if m:
        current = m.group(2)
    r = result.search(line)
    if r and current:
        results.append((current, r.group(1).split(" ")[0], r.group(3) or ""))
        current = None
counts, bad, gaps = {}, [], {}
for test, status, reason in results:
    counts[status] = counts.get(status, 0) + 1
    if status in ("FAIL", "ERROR", "unexpected"):
        bad.append(f"{status}: {test}")
    if status != "skipped":
        continue
    module = test.split(".")[1]
    rule = next((r for r in rules if (r[0] == "module" and module.startswith(r[1])) or
                 (r[0] != "module" and r[1] in reason)), None)
    if rule is None:
        bad.append(f"skip not on the list: {test}: {reason}")
    elif rule[0] == "gap":
        gaps[rule[1]] = gaps.get(rule[1], 0) + 1
print("rdma-core suite:", ", ".join(f"{n} {s}" for s, n in sorted(counts.items())),
      f"({len(results)} tests)")
for g, n in sorted(gaps.items()):
    print(f"  not yet (skipped): {n} x {g}")
m = re.search(r"^Ran (\d+) tests", open(out, errors="replace").read(), re.M)
if not m or int(m.group(1)) != len(results):
    bad.append(f"the runner ran {m.group(1) if m else '?'} tests, {len(results)} results parsed")
if counts.get("ok", 0) < min_pass:
    bad.append(f"{counts.get('ok', 0)} tests passed, fewer than {min_pass}")
if rc != 0 and not bad:
    bad.append(f"run_tests.py exited {rc}")
for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
PY
status=$?
[ $status = 0 ] || { tail -40 "$out"; fail "rdma-core's test suite (full output: above)"; }
echo PASS
