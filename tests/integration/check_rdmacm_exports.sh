#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Checks that uroce's librdmacm.so.1 is link-compatible with rdma-core's:
#   1. it exports every (name, version, default|compat, type) tuple and version node of the
#      system's librdmacm.so.1, and beyond them only what some rdma-core release's does
#      (check_exports.sh --reference with verbs_api/abi/librdmacm.exports);
#   2. every symbol version and node (with its parent) of rdma-core 44, 50, 56 and the
#      newest release in that table ($UROCE_ABI_RELEASES; check_exports.sh --table);
#   3. every RDMACM_*-versioned symbol and version node that the rdmacm-utils programs
#      import is provided (they are linked with BIND_NOW: one missing symbol and they do
#      not start).
# usage: check_rdmacm_exports.sh OUR_LIB [REFERENCE_LIB]
# Exit status: 0 = compatible, 1 = differences found, 2 = usage/tool error.
set -euo pipefail

ours=${1:?usage: check_rdmacm_exports.sh OUR_LIB [REFERENCE_LIB]}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null ||
            gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
ref=${2:-${UROCE_REF_LIBRDMACM:-/usr/lib/$multiarch/librdmacm.so.1}}
[[ -r $ref ]] || { echo "reference library not readable: $ref" >&2; exit 2; }
command -v readelf >/dev/null || { echo "readelf (binutils) is required" >&2; exit 2; }

status=0
here=$(dirname "$0")
table=$here/../../verbs_api/abi/librdmacm.exports
bash "$here/check_exports.sh" --reference "$ref" "$ours" "$table" || status=1
bash "$here/check_exports.sh" --table "$table" "$ours" || status=1

# "name version" for every symbol our library defines.
provided=$(LC_ALL=C readelf --dyn-syms -W "$ours" | awk '
    $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 != "UND" {
        n = $8; p = index(n, "@"); if (p == 0) next
        v = substr(n, p + 1); sub(/^@/, "", v); print substr(n, 1, p - 1), v
    }' | LC_ALL=C sort -u)
nodes=$(LC_ALL=C readelf -V -W "$ours" | awk '
    /^Version definition section/ { d = 1; next }
    /^Version (needs|symbols) section/ { d = 0 }
    d && /Name:/ && !/Flags: BASE/ { sub(/.*Name: */, ""); sub(/ .*/, ""); print }' |
    LC_ALL=C sort -u)

for prog in rping rdma_server rdma_client ucmatose udaddy mckey cmtime riostream rstream \
            rdma_xserver rdma_xclient rcopy udpong; do
    bin=$(command -v "$prog" || true)
    [[ -n $bin ]] || continue
    bin=$(readlink -f "$bin")
    imports=$(LC_ALL=C readelf --dyn-syms -W "$bin" | awk '
        $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 == "UND" {
            n = $8; p = index(n, "@"); if (p == 0) next
            v = substr(n, p + 1); sub(/^@/, "", v)
            if (v ~ /^RDMACM_/) print substr(n, 1, p - 1), v
        }' | LC_ALL=C sort -u)
    needed=$(LC_ALL=C readelf -V -W "$bin" | awk '
        /^Version needs section/ { d = 1; next }
        /^Version (definition|symbols) section/ { d = 0 }
        d && /File:/ { f = $0; sub(/.*File: */, "", f); sub(/ .*/, "", f); next }
        d && /Name:/ && f ~ /^librdmacm\.so/ { n = $0; sub(/.*Name: */, "", n); sub(/ .*/, "", n); print n }' |
        LC_ALL=C sort -u)
    missing=$(LC_ALL=C comm -23 <(echo "$imports") <(echo "$provided") | sed '/^$/d')
    bad_nodes=$(LC_ALL=C comm -23 <(echo "$needed") <(echo "$nodes") | sed '/^$/d')
    if [[ -z $missing && -z $bad_nodes ]]; then
        echo "OK   $prog: $(echo "$imports" | sed '/^$/d' | wc -l) RDMACM symbols"
    else
        echo "FAIL $prog:"
        [[ -n $missing ]] && sed 's/^/  missing symbol: /' <<<"$missing"
        [[ -n $bad_nodes ]] && sed 's/^/  missing version node: /' <<<"$bad_nodes"
        status=1
    fi
done
exit $status
