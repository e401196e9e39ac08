#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# A program built against a newer rdma-core than the system's loads uroce's libraries
# (built here, on the system's rdma-core) with BIND_NOW and gets the documented answers
# from the verbs added since 44 (docs/verbs-support.md, "Newer releases' verbs").
#
#   newer_abi_test.sh [RELEASE...]     (default: 56 and the newest in the tables)
#
# For each RELEASE it builds what a build on that release's system links against: for
# libibverbs, librdmacm, libmlx5 and libefa a library with that release's version nodes
# and default symbol versions (from verbs_api/abi/<lib>.exports; the functions are empty,
# nothing runs them), then tests/integration/newer_abi.c against them with -z now, with
# that release's declarations. The program's version needs are checked to be that
# release's (e.g. ibv_wr_opcode_str@IBVERBS_PRIVATE_64, IBVERBS_1.17, MLX5_1.27), and it
# runs over uroce's libraries and a uroce device.
. "$(dirname "$0")/lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
tables=$here/../../verbs_api/abi
tool=$tables/rdma_core_exports.py
cc=${CC:-cc}
command -v "$cc" >/dev/null || skip "no C compiler ($cc)"
[ -r /usr/include/rdma/rdma_cma.h ] || skip "librdmacm-dev is not installed (run scripts/setup.sh)"
work=$UROCE_RUNTIME_DIR/newer_abi
mkdir -p "$work"

releases=("$@")
((${#releases[@]})) || releases=(56 "$(python3 "$tool" releases "$tables/libibverbs.exports" | tail -1)")

# fake_lib TABLE RELEASE DIR SONAME: DIR/SONAME with the release's nodes and defaults.
fake_lib() {
    local table=$1 rel=$2 dir=$3 soname=$4 base=$3/${4%.so.1}
    python3 "$tool" nodes "$table" "$rel" >"$base.nodes" || fail "no release $rel in $table"
    python3 "$tool" symbols "$table" "$rel" | awk '$3 == "default"' >"$base.syms"
    # Parents before children: order the nodes so each parent is written first.
    awk 'NR == FNR { syms[$2] = syms[$2] "    " $1 ";\n"; next }
         { node[++n] = $1; parent[$1] = $2 }
         END { done["-"] = 1
               for (left = n; left > 0;)
                   for (i = 1; i <= n; i++) {
                       v = node[i]
                       if ((v in done) || !(parent[v] in done)) continue
                       printf "%s {\n  global:\n%s", v, syms[v]
                       if (!first++) printf "  local: *;\n"
                       printf "}%s;\n", parent[v] == "-" ? "" : " " parent[v]
                       done[v] = 1; left--
                   } }' "$base.syms" "$base.nodes" >"$base.map"
    awk '{ print "void " $1 "(void) {}" }' "$base.syms" | sort -u >"$base.c"
    "$cc" -shared -fPIC -o "$dir/$soname" -Wl,-soname,"$soname" \
        -Wl,--version-script="$base.map" "$base.c" || fail "building the rdma-core $rel $soname"
}

# needs BINARY: "file node" for each version the binary needs.
needs() {
    LC_ALL=C readelf -V -W "$1" | awk '
        /^Version needs section/ { n = 1; next }
        /^Version (definition|symbols) section/ { n = 0 }
        n && /File:/ { f = $0; sub(/.*File: */, "", f); sub(/ .*/, "", f); next }
        n && /Name:/ { v = $0; sub(/.*Name: */, "", v); sub(/ .*/, "", v); print f, v }'
}

start_device uroce0 127.0.0.1
for rel in "${releases[@]}"; do
    dir=$work/$rel
    mkdir -p "$dir"
    fake_lib "$tables/libibverbs.exports" "$rel" "$dir" libibverbs.so.1
    fake_lib "$tables/librdmacm.exports" "$rel" "$dir" librdmacm.so.1
    fake_lib "$tables/libmlx5.exports" "$rel" "$dir" libmlx5.so.1
    fake_lib "$tables/libefa.exports" "$rel" "$dir" libefa.so.1
    # -Wl,--no-as-needed: every library stays a dependency, as it does for perftest.
    "$cc" -std=gnu11 -Wall -Wextra -Wno-unused-parameter -DRELEASE="$rel" \
        -o "$dir/newer_abi" "$here/newer_abi.c" -L"$dir" -Wl,--no-as-needed \
        -l:libibverbs.so.1 -l:librdmacm.so.1 -l:libmlx5.so.1 -l:libefa.so.1 \
        -Wl,-z,now -Wl,-rpath-link,"$dir" || fail "building the rdma-core $rel program"

    needs "$dir/newer_abi" >"$dir/needs"
    echo "rdma-core $rel program needs: $(grep -v GLIBC "$dir/needs" | awk '{ print $2 }' | tr '\n' ' ')"
    pabi=$(awk '$1 ~ /^IBVERBS_PRIVATE_/ { print $1 }' "$dir/libibverbs.nodes")
    grep -qx "libibverbs.so.1 $pabi" "$dir/needs" ||
        fail "the rdma-core $rel program does not import from $pabi (ibv_wr_opcode_str)"
    LC_ALL=C readelf -d "$dir/newer_abi" | grep -q 'FLAGS.*BIND_NOW\|FLAGS_1.*NOW' ||
        fail "the program is not linked with BIND_NOW"

    # The system's rdma-core refuses it when it is older than RELEASE (the loader checks
    # every version the program needs, BIND_NOW every symbol): what uroce's must avoid.
    sys_lib=$(ldconfig -p | awk '$1 == "libibverbs.so.1" { print $NF; exit }')
    if [ -n "$sys_lib" ] && ! LC_ALL=C readelf -V -W "$sys_lib" | grep -q "Name: $pabi\b"; then
        out=$("$dir/newer_abi" 2>&1) && fail "the rdma-core $rel program ran over $sys_lib"
        echo "$out" | grep -q "version \`.*' not found" ||
            fail "the rdma-core $rel program over $sys_lib: $out"
        echo "over the system's $sys_lib it does not load: $(echo "$out" | head -1)"
    fi
    # Over uroce's libraries (the rpath-link above does not apply at run time).
    out=$(verbs "$dir/newer_abi" 2>&1)
    rc=$?
    echo "$out"
    ((rc == 0)) || fail "the rdma-core $rel program exited $rc over uroce's libraries"
    echo "$out" | grep -q "^PASS rdma-core $rel program" || fail "no PASS line"
done
echo PASS
