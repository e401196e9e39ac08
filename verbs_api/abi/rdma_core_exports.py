#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
"""The exports of rdma-core's libraries, release by release: the tables in this directory.

    rdma_core_exports.py extract RDMA_CORE_GIT OUT_DIR [FIRST]
        Writes OUT_DIR/<lib>.exports for libibverbs, librdmacm, libmlx5 and libefa from
        a git clone of rdma-core (https://github.com/linux-rdma/rdma-core), one release per
        major number from FIRST (default 44) to the newest tag. Each release is read at its
        newest point release (vNN.M): stable releases only ever add symbols (MLX5_1.25.1
        came in 60.2), so that is the set a distribution's vNN carries.
    rdma_core_exports.py symbols TABLE RELEASE
        Prints "name node default|compat" for every symbol the release's library exports.
    rdma_core_exports.py nodes TABLE RELEASE
        Prints "node parent" ("-" for none) for every version node the release defines.
    RELEASE is a number, "newest", or "all" (the union over the table's releases).
    rdma_core_exports.py releases TABLE
        Prints the releases the table covers, oldest first.

What a release exports is read from rdma-core's own files, not from a built library:
  - the version script (libibverbs/libibverbs.map.in, librdmacm/librdmacm.map,
    providers/<p>/lib<p>.map): nodes, parents, and the names listed in each node, with
    @IBVERBS_PABI_VERSION@ replaced by CMakeLists.txt's value;
  - the library's C sources: LATEST_SYMVER_FUNC(name, _, "NODE") makes name@@NODE,
    COMPAT_SYMVER_FUNC(name, _, "NODE") makes name@NODE (a non-default version); any
    other listed name is name@@NODE if the sources define it. A listed name that no source
    defines is not exported (ld ignores it): ibv_query_device_ex and rdma_get_local_addr
    are static inline functions in the headers, but 44's version scripts still list them.
The result for 44 equals what Debian 12's rdma-core 44 libraries export
(tests/integration/check_abi_table.sh compares them where those libraries are installed).

Table format, one fact a line ("#" starts a comment):
    release NN [TAG]                  a release the table covers (and the tag read)
    node NAME PARENT|- RANGE          a version node, its parent, the releases defining it
    NAME NODE default|compat RANGE [object]
                                      an exported symbol version (object: a variable)
RANGE is "A-" (release A to the newest in the table), "A-B", or "A".

    rdma_core_exports.py older-private TABLE OUT_CPP
        Writes the C++ file that gives libibverbs's provider-interface functions their
        versions in the IBVERBS_PRIVATE_NN nodes of older releases (the newest one is in
        libibverbs.map): a tail jump to the function, bound to NAME@IBVERBS_PRIVATE_NN.
"""
import os
import re
import subprocess
import sys

LIBS = {
    # table name: (version script, source directories)
    "libibverbs": ("libibverbs/libibverbs.map.in", ["libibverbs", "util"]),
    "librdmacm": ("librdmacm/librdmacm.map", ["librdmacm"]),
    "libmlx5": ("providers/mlx5/libmlx5.map", ["providers/mlx5"]),
    "libefa": ("providers/efa/libefa.map", ["providers/efa"]),
}
SYMVER = re.compile(r'\b(LATEST|COMPAT)_SYMVER_FUNC\(\s*(\w+)\s*,\s*\w+\s*,\s*"([^"]+)"')


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout


def release_tags(repo, first):
    """{major: newest vMAJOR.MINOR tag} for majors >= first."""
    best = {}
    for tag in git(repo, "tag", "--list", "v*").split():
        m = re.fullmatch(r"v(\d+)\.(\d+)", tag)
        if m and int(m[1]) >= first:
            major, minor = int(m[1]), int(m[2])
            if major not in best or minor > best[major][0]:
                best[major] = (minor, tag)
    return {major: tag for major, (_, tag) in sorted(best.items())}


def parse_map(text, pabi):
    """[(node, parent or None, [names])] from a GNU ld version script."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S).replace("@IBVERBS_PABI_VERSION@", pabi)
    nodes = []
    for m in re.finditer(r"([\w.]+)\s*\{(.*?)\}\s*([\w.]*)\s*;", text, flags=re.S):
        body = m[2]
        if "local:" in body:
            body = body.split("local:")[0]
        names = [n.strip() for n in body.replace("global:", "").split(";") if n.strip()]
        nodes.append((m[1], m[3] or None, names))
    return nodes


def defined_names(repo, tag, dirs):
    """(plain definitions, {(name, node): kind} from the SYMVER macros) in the sources."""
    files = [f for f in git(repo, "ls-tree", "-r", "--name-only", tag, "--", *dirs).split()
             if f.endswith(".c")]
    plain, objects, symver = set(), set(), {}
    for f in files:
        src = git(repo, "show", f"{tag}:{f}")
        for m in SYMVER.finditer(src):
            symver[(m[2], m[3])] = "default" if m[1] == "LATEST" else "compat"
        # A definition starts in column 0 ("int name(", "*name(" under its return type,
        # "bool name;" for a variable) and is not static or extern; a function's is not
        # a declaration (";" ends the line). Every identifier before a "(" counts, so
        # "int __attribute__((const)) name(" finds name.
        for line in src.splitlines():
            if not line or line[0] in " \t#/" or re.match(r"(static|extern|typedef)\b", line):
                continue
            if line.rstrip().endswith(";"):
                m = re.fullmatch(r"[\w\s*]+?\b(\w+)\s*(=[^;]*)?;", line.rstrip())
                if m and "(" not in line:
                    objects.add(m[1])
                continue
            plain.update(re.findall(r"(\w+)\s*\(", line))
    return plain, objects, symver


def exports_of(repo, tag, lib):
    script, dirs = LIBS[lib]
    cmake = git(repo, "show", f"{tag}:CMakeLists.txt")
    m = re.search(r'set\(IBVERBS_PABI_VERSION\s+"(\d+)"\)', cmake)
    pabi = m[1] if m else ""
    nodes = parse_map(git(repo, "show", f"{tag}:{script}"), pabi)
    plain, objects, symver = defined_names(repo, tag, dirs)
    # verbs_register_driver_NN is defined through driver.h's macro (verbs_register_driver).
    plain.add(f"verbs_register_driver_{pabi}")
    syms = set()
    for node, _, names in nodes:
        for name in names:
            if (name, node) in symver:
                syms.add((name, node, symver[(name, node)]))
            elif any(n == name for n, _ in symver):
                pass  # listed for a version the macros bind elsewhere
            elif name in plain:
                syms.add((name, node, "default"))
            elif name in objects:
                syms.add((name, node, "default object"))
    return [(n, p) for n, p, _ in nodes], syms


def ranges(present, releases):
    """Compresses the sorted releases in `present` into "A-" / "A-B" / "A" runs."""
    out, run = [], []
    for r in releases:
        if r in present:
            run.append(r)
        elif run:
            out.append(run)
            run = []
    if run:
        out.append(run)
    text = []
    for run in out:
        if run[-1] == releases[-1] and len(run) > 1:
            text.append(f"{run[0]}-")
        elif len(run) == 1:
            text.append(f"{run[0]}")
        else:
            text.append(f"{run[0]}-{run[-1]}")
    return text


def extract(repo, out_dir, first):
    tags = release_tags(repo, first)
    releases = list(tags)
    for lib in LIBS:
        nodes, syms = {}, {}
        for rel, tag in tags.items():
            n, s = exports_of(repo, tag, lib)
            for node, parent in n:
                nodes.setdefault((node, parent or "-"), set()).add(rel)
            for key in s:
                syms.setdefault(key, set()).add(rel)
        lines = [
            f"# {lib}: the symbol versions each rdma-core release's library exports.",
            "# Generated by verbs_api/abi/rdma_core_exports.py from rdma-core's version",
            "# scripts and sources (format: that script's help). Do not edit by hand.", ""]
        lines += [f"release {rel} {tag}" for rel, tag in tags.items()]
        lines.append("")
        for (node, parent), rels in sorted(nodes.items(), key=lambda kv: node_key(kv[0][0])):
            for r in ranges(rels, releases):
                lines.append(f"node {node} {parent} {r}")
        lines.append("")
        for (name, node, kind), rels in sorted(syms.items(),
                                               key=lambda kv: (node_key(kv[0][1]), kv[0][0],
                                                               kv[0][2])):
            kind, _, obj = kind.partition(" ")
            for r in ranges(rels, releases):
                lines.append(f"{name} {node} {kind} {r}" + (f" {obj}" if obj else ""))
        with open(os.path.join(out_dir, f"{lib}.exports"), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def node_key(node):
    """IBVERBS_1.10 after IBVERBS_1.9, MLX5_1.25.1 after MLX5_1.25, private nodes last."""
    private = "PRIVATE" in node
    nums = [int(x) for x in re.findall(r"\d+", node)]
    return (private, nums, node)


def in_range(text, rel, newest):
    a, dash, b = text.partition("-")
    lo = int(a)
    hi = (int(b) if b else newest) if dash else lo
    return lo <= rel <= hi


def read_table(path):
    releases, nodes, syms = [], [], []
    for lineno, line in enumerate(open(path, encoding="utf-8"), 1):
        f = line.split("#", 1)[0].split()
        if not f:
            continue
        if f[0] == "release" and len(f) in (2, 3):
            releases.append(int(f[1]))
        elif f[0] == "node" and len(f) == 4:
            nodes.append((f[1], f[2], f[3]))
        elif len(f) in (4, 5) and f[2] in ("default", "compat") and f[4:] in ([], ["object"]):
            syms.append((f[0], f[1], f[2], f[3], len(f) == 5))
        else:
            sys.exit(f"{path}:{lineno}: cannot parse: {line.strip()}")
    if not releases:
        sys.exit(f"{path}: no releases")
    return releases, nodes, syms


def main():
    args = sys.argv[1:]
    if len(args) in (3, 4) and args[0] == "extract":
        extract(args[1], args[2], int(args[3]) if len(args) == 4 else 44)
        return
    if len(args) == 2 and args[0] == "releases":
        print("\n".join(str(r) for r in read_table(args[1])[0]))
        return
    if len(args) == 3 and args[0] in ("symbols", "nodes"):
        releases, nodes, syms = read_table(args[1])
        newest = releases[-1]
        wanted = {"newest": [newest], "all": releases}.get(args[2])
        if wanted is None:
            wanted = [int(args[2])] if args[2].isdigit() else []
            if not wanted or wanted[0] not in releases:
                sys.exit(f"{args[1]}: release {args[2]} is not in the table "
                         f"({releases[0]}-{newest})")
        out = set()
        for rel in wanted:
            if args[0] == "nodes":
                out |= {f"{n} {p}" for n, p, r in nodes if in_range(r, rel, newest)}
            else:
                out |= {f"{n} {v} {k}" for n, v, k, r, _ in syms if in_range(r, rel, newest)}
        print("\n".join(sorted(out)))
        return
    if len(args) == 3 and args[0] == "older-private":
        write_older_private(args[1], args[2])
        return
    sys.exit(__doc__)


def write_older_private(table, out):
    releases, nodes, syms = read_table(table)
    newest = releases[-1]
    current = {n for n, _, r in nodes if in_range(r, newest, newest)}
    older = {}  # function name -> [older private nodes]
    for name, node, kind, _, obj in syms:
        if "PRIVATE" in node and node not in current and not obj:
            older.setdefault(name, set()).add(node)
    t = os.path.basename(table)
    lines = [
        f"// Generated by verbs_api/abi/rdma_core_exports.py from {t}: do not edit.",
        "// The provider interface of older rdma-core releases (IBVERBS_PRIVATE_NN nodes the",
        "// newest release no longer has): each function also as NAME@IBVERBS_PRIVATE_NN, a",
        "// non-default version, through a tail jump to its current definition (the arguments",
        "// pass through untouched, whatever the release's prototype).",
        "#if defined(__x86_64__)",
        '#define UROCE_TAIL_JUMP(target) "jmp " target "@PLT"',
        "#elif defined(__aarch64__)",
        '#define UROCE_TAIL_JUMP(target) "b " target',
        "#else",
        '#error "older IBVERBS_PRIVATE nodes: no tail jump for this architecture"',
        "#endif",
        "#define UROCE_OLDER_PRIVATE(name, symvers)                                    \\",
        '    __asm__(".text\\n.globl uroce_older_" name "\\n.type uroce_older_" name   \\',
        '            ", %function\\nuroce_older_" name ":\\n\\t" UROCE_TAIL_JUMP(name) \\',
        '            "\\n.size uroce_older_" name ", .-uroce_older_" name "\\n" symvers);',
        ""]
    for name in sorted(older):
        vers = "".join(f'".symver uroce_older_{name}, {name}@{n}\\n"' for n in
                       sorted(older[name], key=node_key))
        lines.append(f'UROCE_OLDER_PRIVATE("{name}", {vers})')
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
