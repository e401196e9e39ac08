#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Checks that uroce's libibverbs.so.1 (or another drop-in library) is link-compatible with
# rdma-core's, the system's library and every release in the repository's table.
#
#   check_exports.sh OUR_LIB
#       Both checks below for libibverbs: against the system's libibverbs.so.1 (or
#       $UROCE_REF_LIBIBVERBS) and against verbs_api/abi/libibverbs.exports for the
#       releases in $UROCE_ABI_RELEASES (default: 44 50 56 newest).
#
#   check_exports.sh --reference REF_LIB OUR_LIB [TABLE]
#       Every exported (name, version, default|compat, type[, size for data objects])
#       tuple of REF_LIB is exported by OUR_LIB, and every version node REF_LIB defines.
#       OUR_LIB may export more (what newer rdma-core releases added), but only what
#       TABLE records for some release; without TABLE the two sets must be equal.
#       Imports (UND) and the version-definition pseudo-symbols are ignored.
#
#   check_exports.sh --table TABLE OUR_LIB [RELEASE...]
#       For each RELEASE (a number, or "newest"; default as above) every version node of
#       that release, with its parent, is defined by OUR_LIB and every (name, version,
#       default|compat) it exports is exported by OUR_LIB; and OUR_LIB exports nothing
#       that no release in TABLE does. TABLE: verbs_api/abi/<lib>.exports.
#
#   In every mode the UROCE_PRIVATE_* nodes are left out: uroce's own, the private interface
#   its librdmacm uses (verbs_api/ibverbs/uroce_private.h), in no rdma-core release.
#
#   check_exports.sh --imports OUR_LIB BINARY_OR_LIB...
#       For each binary, checks that every IBVERBS_* version it needs
#       (.gnu.version_r) is defined by OUR_LIB and every IBVERBS_*-versioned
#       symbol it imports is exported by OUR_LIB with that version (default or
#       compat: a versioned reference binds to either). Binaries are looked up
#       on PATH when not given as a path. Weak imports that are missing are
#       reported but not fatal, as the loader tolerates them.
#
# Exit status: 0 = compatible, 1 = differences found, 2 = usage/tool error.
#
# Why tuples and not just names: binaries carry versioned references
# (ibv_open_device@IBVERBS_1.1), so a symbol exported under the wrong node is
# as fatal as a missing one; and default vs. compat decides what a program
# linked against *our* library would bind to. One exception: a node the newest
# release no longer defines (IBVERBS_PRIVATE_34, the provider interface of 44-56)
# holds compat versions in ours, because the newest node holds the defaults, as
# rdma-core would do if it kept old nodes; binaries bind to either.

set -euo pipefail

usage() {
    sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

here=$(cd "$(dirname "$0")" && pwd)
tables=$here/../../verbs_api/abi
abi_tool=$tables/rdma_core_exports.py

die() {
    echo "check_exports.sh: $*" >&2
    exit 2
}

command -v readelf >/dev/null || die "readelf (binutils) is required"

default_reference() {
    local multiarch
    multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null ||
                gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
    echo "/usr/lib/${multiarch}/libibverbs.so.1"
}

# Prints "name version default|compat type[ size]" for every symbol the
# library defines in its dynamic symbol table, one per line, sorted.
# readelf -W prints versioned names as name@@VER (default) or name@VER
# (hidden/compat); some binutils versions append " (N)".
exported_tuples() {
    local lib=$1
    local verdefs
    verdefs=$(version_definitions "$lib" | tr '\n' ' ')
    LC_ALL=C readelf --dyn-syms -W "$lib" | awk -v verdefs="$verdefs" '
        BEGIN { n = split(verdefs, v, " "); for (i = 1; i <= n; i++) isver[v[i]] = 1 }
        $1 ~ /^[0-9]+:$/ && NF >= 8 {
            type = $4; bind = $5; ndx = $7; name = $8
            if (ndx == "UND" || bind == "LOCAL") next
            if (type != "FUNC" && type != "OBJECT" && type != "IFUNC" &&
                type != "TLS" && type != "COMMON") next
            ver = "(none)"; kind = "default"
            if ((p = index(name, "@@")) > 0) {
                ver = substr(name, p + 2); name = substr(name, 1, p - 1)
            } else if ((p = index(name, "@")) > 0) {
                ver = substr(name, p + 1); name = substr(name, 1, p - 1)
                kind = "compat"
            }
            # The version-definition pseudo-symbols (ABS, named after a node).
            if (ndx == "ABS" && (name in isver)) next
            # uroce'"'"'s own node (the private interface of its librdmacm), not rdma-core'"'"'s.
            # (and its version-definition pseudo-symbol)
            if (ver ~ /^UROCE_PRIVATE_/ || name ~ /^UROCE_PRIVATE_/) next
            line = name " " ver " " kind " " type
            # Data objects are copy-relocated into executables: size is ABI.
            if (type == "OBJECT" || type == "TLS") line = line " size=" $3
            print line
        }' | LC_ALL=C sort -u
}

# version_section FILE definition|needs: the lines of one section of `readelf -V`.
version_section() {
    LC_ALL=C readelf -V -W "$1" | awk -v want="^Version $2 section" '
        /^Version (definition|needs|symbols) section/ { on = $0 ~ want; next }
        on'
}

# Version nodes the library defines (without the BASE entry = its soname).
version_definitions() {
    version_section "$1" definition | awk '
        /Flags:/ && /Name:/ {
            if ($0 ~ /Flags: BASE/) next
            sub(/.*Name: */, ""); sub(/ .*/, ""); if ($0 !~ /^UROCE_PRIVATE_/) print
        }' | LC_ALL=C sort -u
}

# Version nodes a binary needs from libibverbs.so.1.
needed_ibverbs_versions() {
    version_section "$1" needs | awk '
        /File:/ { file = $0; sub(/.*File: */, "", file); sub(/ .*/, "", file); next }
        /Name:/ && file ~ /^libibverbs\.so/ {
            n = $0; sub(/.*Name: */, "", n); sub(/ .*/, "", n); print n
        }' | LC_ALL=C sort -u
}

# Prints "name version bind" for each IBVERBS_*-versioned undefined symbol.
imported_ibverbs_symbols() {
    LC_ALL=C readelf --dyn-syms -W "$1" | awk '
        $1 ~ /^[0-9]+:$/ && NF >= 8 && $7 == "UND" {
            name = $8
            p = index(name, "@"); if (p == 0) next
            ver = substr(name, p + 1); sub(/^@/, "", ver); name = substr(name, 1, p - 1)
            if (ver !~ /^IBVERBS_/) next
            print name, ver, $5
        }' | LC_ALL=C sort -u
}

# "node parent" for every version node the library defines ("-": no parent).
version_parents() {
    version_section "$1" definition | awk '
        /Flags:/ && /Name:/ {
            if (node != "") print node, "-"
            node = ""
            if ($0 ~ /Flags: BASE/) next
            node = $0; sub(/.*Name: */, "", node); sub(/ .*/, "", node)
            if (node ~ /^UROCE_PRIVATE_/) node = ""
            next }
        /Parent 1:/ && node != "" {
            p = $0; sub(/.*Parent 1: */, "", p); sub(/ .*/, "", p); print node, p; node = "" }
        END { if (node != "") print node, "-" }' | LC_ALL=C sort -u
}

# Nodes of the newest release in TABLE (the nodes whose symbols keep their default kind).
newest_nodes() {
    python3 "$abi_tool" nodes "$1" newest | awk '{ print $1 }' | LC_ALL=C sort -u
}

# Prints the lines of $2 ("name version kind ...") that $3 lacks; a line whose version
# is not in $1 (nodes of the newest release) also matches a line of the other kind.
missing_tuples() {
    awk -v newest="$1" -v have="$3" '
        BEGIN { while ((getline l < newest) > 0) cur[l] = 1
                while ((getline l < have) > 0) { full[l] = 1; split(l, f, " ")
                                                  any[f[1] " " f[2]] = 1 } }
        { if ($0 in full) next
          if (!($2 in cur) && (($1 " " $2) in any)) next
          print }' "$2"
}

compare_exports() {
    local ref=$1 ours=$2 table=${3:-}
    [[ -r $ref ]] || die "reference library not readable: $ref"
    [[ -r $ours ]] || die "library not readable: $ours"

    exported_tuples "$ref" >"$tmp/ref"
    exported_tuples "$ours" >"$tmp/ours"
    version_definitions "$ref" >"$tmp/ref.vd"
    version_definitions "$ours" >"$tmp/ours.vd"

    local status=0
    local missing extra vd_missing vd_extra
    if [[ -n $table ]]; then
        newest_nodes "$table" >"$tmp/newest.nodes"
    else
        cp "$tmp/ref.vd" "$tmp/newest.nodes"
    fi
    missing=$(missing_tuples "$tmp/newest.nodes" "$tmp/ref" "$tmp/ours")
    vd_missing=$(LC_ALL=C comm -23 "$tmp/ref.vd" "$tmp/ours.vd")
    if [[ -n $table ]]; then
        # Beyond the reference: only what some rdma-core release exports.
        python3 "$abi_tool" symbols "$table" all | awk '{ print $1, $2 }' |
            LC_ALL=C sort -u >"$tmp/table.pairs"
        python3 "$abi_tool" nodes "$table" all | awk '{ print $1 }' |
            LC_ALL=C sort -u >"$tmp/table.nodes"
        extra=$(LC_ALL=C comm -13 "$tmp/ref" "$tmp/ours" | awk '{ print $1, $2 }' |
                LC_ALL=C sort -u | LC_ALL=C comm -23 - "$tmp/table.pairs")
        vd_extra=$(LC_ALL=C comm -13 "$tmp/ref.vd" "$tmp/ours.vd" |
                   LC_ALL=C comm -23 - "$tmp/table.nodes")
    else
        extra=$(LC_ALL=C comm -13 "$tmp/ref" "$tmp/ours")
        vd_extra=$(LC_ALL=C comm -13 "$tmp/ref.vd" "$tmp/ours.vd")
    fi

    echo "reference: $ref ($(wc -l <"$tmp/ref") symbols, $(wc -l <"$tmp/ref.vd") version nodes)"
    echo "ours:      $ours ($(wc -l <"$tmp/ours") symbols, $(wc -l <"$tmp/ours.vd") version nodes)"

    if [[ -n $vd_missing ]]; then
        echo "MISSING version definitions:"; sed 's/^/  - /' <<<"$vd_missing"; status=1
    fi
    if [[ -n $vd_extra ]]; then
        echo "EXTRA version definitions${table:+ (in no release of $table)}:"
        sed 's/^/  + /' <<<"$vd_extra"; status=1
    fi
    if [[ -n $missing ]]; then
        echo "MISSING symbols (name version kind type):"
        sed 's/^/  - /' <<<"$missing"; status=1
    fi
    if [[ -n $extra ]]; then
        echo "EXTRA symbols${table:+ (in no release of $table)}:"
        sed 's/^/  + /' <<<"$extra"; status=1
    fi
    if ((status == 0)); then
        if [[ -n $table ]]; then
            echo "OK: every export of the reference is exported; the $(($(wc -l <"$tmp/ours") - $(wc -l <"$tmp/ref") )) more are newer releases' (table)"
        else
            echo "OK: exported symbol set matches the reference"
        fi
    fi
    return $status
}

# check_table TABLE OUR_LIB [RELEASE...]
check_table() {
    local table=$1 ours=$2; shift 2
    [[ -r $table ]] || die "table not readable: $table"
    [[ -r $ours ]] || die "library not readable: $ours"
    local releases=("$@")
    ((${#releases[@]})) || read -r -a releases <<<"${UROCE_ABI_RELEASES:-44 50 56 newest}"

    exported_tuples "$ours" | awk '{ print $1, $2, $3 }' | LC_ALL=C sort -u >"$tmp/ours.nvk"
    awk '{ print $1, $2 }' "$tmp/ours.nvk" | LC_ALL=C sort -u >"$tmp/ours.pairs"
    version_parents "$ours" >"$tmp/ours.np"
    newest_nodes "$table" >"$tmp/newest.nodes"

    local status=0 rel r missing miss_nodes extra
    for rel in "${releases[@]}"; do
        r=$rel
        [[ $rel == newest ]] && r="$(python3 "$abi_tool" releases "$table" | tail -1) (newest)"
        python3 "$abi_tool" symbols "$table" "$rel" | LC_ALL=C sort -u >"$tmp/t.syms" ||
            die "cannot read release $rel from $table"
        python3 "$abi_tool" nodes "$table" "$rel" | LC_ALL=C sort -u >"$tmp/t.nodes"
        missing=$(missing_tuples "$tmp/newest.nodes" "$tmp/t.syms" "$tmp/ours.nvk")
        miss_nodes=$(LC_ALL=C comm -23 "$tmp/t.nodes" "$tmp/ours.np")
        if [[ -z $missing && -z $miss_nodes ]]; then
            echo "OK   rdma-core $r: all $(wc -l <"$tmp/t.syms") symbol versions and $(wc -l <"$tmp/t.nodes") nodes (with parents) of $(basename "$table" .exports)"
        else
            echo "FAIL rdma-core $r ($(basename "$table")):"
            [[ -n $miss_nodes ]] && sed 's/^/  missing node (node parent): /' <<<"$miss_nodes"
            [[ -n $missing ]] && sed 's/^/  missing symbol (name node kind): /' <<<"$missing"
            status=1
        fi
    done
    python3 "$abi_tool" symbols "$table" all | awk '{ print $1, $2 }' |
        LC_ALL=C sort -u >"$tmp/table.pairs"
    extra=$(LC_ALL=C comm -23 "$tmp/ours.pairs" "$tmp/table.pairs")
    if [[ -n $extra ]]; then
        echo "FAIL $(basename "$ours") exports what no release in $(basename "$table") does:"
        sed 's/^/  + /' <<<"$extra"
        status=1
    fi
    return $status
}

check_imports() {
    local ours=$1; shift
    [[ -r $ours ]] || die "library not readable: $ours"

    # "name version" pairs we provide, default or compat alike.
    exported_tuples "$ours" | awk '{ print $1, $2 }' | LC_ALL=C sort -u >"$tmp/provided"
    version_definitions "$ours" >"$tmp/verdefs"

    local status=0 arg bin
    for arg in "$@"; do
        if [[ $arg == */* ]]; then
            bin=$arg
        else
            bin=$(command -v -- "$arg" || true)
        fi
        if [[ -z $bin || ! -r $bin ]]; then
            echo "FAIL $arg: not found"; status=1; continue
        fi
        bin=$(readlink -f -- "$bin")

        needed_ibverbs_versions "$bin" >"$tmp/needed"
        imported_ibverbs_symbols "$bin" >"$tmp/imports"

        local nsyms bad_versions missing_strong missing_weak
        nsyms=$(wc -l <"$tmp/imports")
        bad_versions=$(LC_ALL=C comm -23 "$tmp/needed" "$tmp/verdefs")
        # Imports not in our "name version" set, split by binding.
        missing_strong=$(awk '$3 != "WEAK" { print $1, $2 }' "$tmp/imports" |
                         LC_ALL=C sort -u | LC_ALL=C comm -23 - "$tmp/provided")
        missing_weak=$(awk '$3 == "WEAK" { print $1, $2 }' "$tmp/imports" |
                       LC_ALL=C sort -u | LC_ALL=C comm -23 - "$tmp/provided")

        if [[ -z $bad_versions && -z $missing_strong ]]; then
            echo "OK   $arg: $nsyms IBVERBS symbols, versions: $(tr '\n' ' ' <"$tmp/needed")"
        else
            echo "FAIL $arg ($bin):"
            [[ -n $bad_versions ]] && sed 's/^/  missing version node: /' <<<"$bad_versions"
            [[ -n $missing_strong ]] && sed 's/^/  missing symbol: /' <<<"$missing_strong"
            status=1
        fi
        if [[ -n $missing_weak ]]; then
            sed 's/^/  note: missing weak import (tolerated): /' <<<"$missing_weak"
        fi
    done
    return $status
}

main() {
    [[ $# -ge 1 ]] || usage
    # Scratch directory for the helpers (global so the EXIT trap sees it).
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    case $1 in
    -h|--help)
        usage
        ;;
    --imports)
        shift
        [[ $# -ge 2 ]] || usage
        check_imports "$@"
        ;;
    --reference)
        [[ $# -eq 3 || $# -eq 4 ]] || usage
        compare_exports "$2" "$3" "${4:-}"
        ;;
    --table)
        [[ $# -ge 3 ]] || usage
        shift
        check_table "$@"
        ;;
    -*)
        usage
        ;;
    *)
        [[ $# -eq 1 ]] || usage
        local status=0
        compare_exports "${UROCE_REF_LIBIBVERBS:-$(default_reference)}" "$1" \
            "$tables/libibverbs.exports" || status=1
        check_table "$tables/libibverbs.exports" "$1" || status=1
        return $status
        ;;
    esac
}

main "$@"
