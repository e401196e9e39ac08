#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Checks uroce's libmlx5.so.1 / libefa.so.1 stand-ins (verbs_api/stubs/) against what
# the system's perftest binaries need, against the system's own libraries and against
# every rdma-core release's (verbs_api/abi/lib{mlx5,efa}.exports).
#
#   check_stub_exports.sh OUR_LIBMLX5 OUR_LIBEFA
#
# For each stand-in:
#   - its SONAME is the system library's;
#   - it exports every (name, version node, default or not, type) and defines every
#     version node the system's library (/usr/lib/<multiarch>/libmlx5.so.1, libefa.so.1)
#     does, so a program or Python module linked against it finds everything it binds
#     to; and beyond that only what some rdma-core release's library exports;
#   - every version node (with its parent) and symbol version of rdma-core 44, 50, 56 and
#     the newest release in the table is there ($UROCE_ABI_RELEASES);
#     (check_exports.sh --reference / --table do these two);
#   - it needs nothing but libc and imports nothing but glibc symbols (so it cannot
#     register a verbs driver or pull in a provider);
# and for every installed perftest binary (ib_*_bw, ib_*_lat, raw_ethernet_*): each
# MLX5_*/EFA_* version it needs is defined and each symbol it imports from them is
# exported by the stand-in with that version.
# Exit status: 0 = OK, 1 = a difference, 77 = Debian's libraries or perftest missing.
set -euo pipefail

[[ $# -eq 2 ]] || { sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
here=$(dirname "$0")
tables=$here/../../verbs_api/abi
ours_mlx5=$1
ours_efa=$2
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
ref_mlx5=${UROCE_REF_LIBMLX5:-/usr/lib/$multiarch/libmlx5.so.1}
ref_efa=${UROCE_REF_LIBEFA:-/usr/lib/$multiarch/libefa.so.1}
for f in "$ref_mlx5" "$ref_efa"; do
    [[ -r $f ]] || { echo "SKIP: $f is not installed (ibverbs-providers)"; exit 77; }
done
bins=()
for p in ib_send_bw ib_write_bw ib_read_bw ib_atomic_bw ib_send_lat ib_write_lat \
         ib_read_lat ib_atomic_lat raw_ethernet_bw raw_ethernet_lat \
         raw_ethernet_burst_lat raw_ethernet_fs_rate; do
    b=$(command -v "$p" || true)
    [[ -n $b ]] && bins+=("$b")
done
((${#bins[@]})) || { echo "SKIP: perftest is not installed"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
bad() { echo "FAIL: $*"; status=1; }

# "NODE PARENT" per version definition, without the BASE entry.
version_defs() {
    LC_ALL=C readelf -V -W "$1" | awk '
        /^Version definition section/ { d = 1; next }
        /^Version (needs|symbols) section/ { d = 0 }
        d && /Flags:/ && /Name:/ {
            if ($0 ~ /Flags: BASE/) { node = ""; next }
            node = $0; sub(/.*Name: */, "", node); sub(/ .*/, "", node); print node, "-"; next }
        d && /Parent 1:/ && node != "" { p = $0; sub(/.*Parent 1: */, "", p); print node, p }' |
        awk '{ if ($2 != "-") parent[$1] = $2; else if (!($1 in parent)) parent[$1] = "-" }
             END { for (n in parent) print n, parent[n] }' | LC_ALL=C sort
}

# "name version type default|compat" for every defined global symbol (compat: a
# non-default version, name@version, that only binaries linked against it bind to).
exports() {
    LC_ALL=C readelf --dyn-syms -W "$1" | awk '
        $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 != "UND" && $7 != "ABS" && $5 != "LOCAL" {
            name = $8; ver = "(none)"; kind = "default"
            if ((p = index(name, "@")) > 0) { ver = substr(name, p + 1)
                                              if (sub(/^@/, "", ver) == 0) kind = "compat"
                                              name = substr(name, 1, p - 1) }
            print name, ver, $4, kind }' | LC_ALL=C sort -u
}

# "name version" imported from nodes matching $2 (MLX5_ or EFA_).
imports() {
    LC_ALL=C readelf --dyn-syms -W "$1" | awk -v pfx="$2" '
        $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 == "UND" {
            name = $8; p = index(name, "@"); if (p == 0) next
            ver = substr(name, p + 1); sub(/^@/, "", ver); sub(/ .*/, "", ver)
            if (index(ver, pfx) != 1) next
            print substr(name, 1, p - 1), ver }' | LC_ALL=C sort -u
}

needed_nodes() {
    LC_ALL=C readelf -V -W "$1" | awk -v lib="$2" '
        /^Version needs section/ { n = 1; next }
        /^Version (definition|symbols) section/ { n = 0 }
        n && /File:/ { f = $0; sub(/.*File: */, "", f); sub(/ .*/, "", f); next }
        n && /Name:/ && f == lib { v = $0; sub(/.*Name: */, "", v); sub(/ .*/, "", v); print v }' |
        LC_ALL=C sort -u
}

check_lib() {
    local ours=$1 ref=$2 soname=$3 pfx=$4
    [[ -r $ours ]] || { bad "$ours not built"; return; }
    echo "== $ours (reference $ref)"

    local so
    so=$(LC_ALL=C readelf -d "$ours" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [[ $so == "$soname" ]] || bad "$ours: SONAME '$so', expected $soname"

    local table=$tables/${soname%.so.1}.exports
    bash "$here/check_exports.sh" --reference "$ref" "$ours" "$table" | sed 's/^/     /' ||
        bad "$ours: exports differ from the system's library (above)"
    bash "$here/check_exports.sh" --table "$table" "$ours" ||
        bad "$ours: exports lack an rdma-core release's (above)"

    version_defs "$ours" >"$tmp/ours.vd"
    exports "$ours" >"$tmp/ours.exp"
    exports "$ref" >"$tmp/ref.exp"
    [[ -s $tmp/ref.exp ]] || bad "$ref exports nothing (check the test)"

    local needed others
    needed=$(LC_ALL=C readelf -d "$ours" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    [[ $needed == "libc.so.6 " ]] || bad "$ours needs '$needed', expected only libc.so.6"
    others=$(LC_ALL=C readelf --dyn-syms -W "$ours" | awk '
        $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 == "UND" && $5 != "WEAK" && $8 !~ /@GLIBC_/ { print $8 }' | tr '\n' ' ')
    [[ -z $others ]] || bad "$ours imports non-glibc symbols: $others"
    [[ $needed == "libc.so.6 " && -z $others ]] && echo "OK   needs only libc; imports only glibc"

    local b
    for b in "${bins[@]}"; do
        needed_nodes "$b" "$soname" >"$tmp/needed"
        imports "$b" "$pfx" >"$tmp/imports"
        awk '{ print $1 }' "$tmp/ours.vd" | LC_ALL=C sort -u >"$tmp/ours.nodes"
        awk '{ print $1, $2 }' "$tmp/ours.exp" | LC_ALL=C sort -u >"$tmp/ours.pairs"
        local miss_nodes miss_syms
        miss_nodes=$(LC_ALL=C comm -23 "$tmp/needed" "$tmp/ours.nodes")
        miss_syms=$(LC_ALL=C comm -23 "$tmp/imports" "$tmp/ours.pairs")
        if [[ -n $miss_nodes || -n $miss_syms ]]; then
            bad "$(basename "$b") needs from $soname what the stand-in lacks:"
            [[ -n $miss_nodes ]] && sed 's/^/  node: /' <<<"$miss_nodes"
            [[ -n $miss_syms ]] && sed 's/^/  symbol: /' <<<"$miss_syms"
        else
            echo "OK   $(basename "$b"): $(wc -l <"$tmp/imports") symbols from $soname"
        fi
    done
    [[ -s $tmp/imports ]] || bad "no perftest binary imports anything from $soname (check the test)"
}

check_lib "$ours_mlx5" "$ref_mlx5" libmlx5.so.1 MLX5_
check_lib "$ours_efa" "$ref_efa" libefa.so.1 EFA_
((status == 0)) && echo PASS
exit $status
