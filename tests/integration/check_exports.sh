#!/usr/bin/env bash
# Checks that uroce's libibverbs.so.1 is link-compatible with rdma-core's.
#
#   check_exports.sh [--reference REF_LIB] OUR_LIB
#       Compares the exported dynamic symbols of OUR_LIB with those of the
#       system's rdma-core libibverbs.so.1 (or REF_LIB, or $UROCE_REF_LIBIBVERBS)
#       as (name, version, default|compat, type[, size for data objects])
#       tuples, plus the set of version definitions. Imports (UND) and the
#       version-definition pseudo-symbols (IBVERBS_1.5 itself, ...) are
#       ignored. Any missing or extra tuple is an error.
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
# linked against *our* library would bind to.

set -euo pipefail

usage() {
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

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
            line = name " " ver " " kind " " type
            # Data objects are copy-relocated into executables: size is ABI.
            if (type == "OBJECT" || type == "TLS") line = line " size=" $3
            print line
        }' | LC_ALL=C sort -u
}

# Version nodes the library defines (without the BASE entry = its soname).
version_definitions() {
    LC_ALL=C readelf -V -W "$1" | awk '
        /^Version definition section/ { in_def = 1; next }
        /^Version (needs|symbols) section/ { in_def = 0 }
        in_def && /Flags:/ && /Name:/ {
            if ($0 ~ /Flags: BASE/) next
            sub(/.*Name: */, ""); sub(/ .*/, ""); print
        }' | LC_ALL=C sort -u
}

# Version nodes a binary needs from libibverbs.so.1.
needed_ibverbs_versions() {
    LC_ALL=C readelf -V -W "$1" | awk '
        /^Version needs section/ { in_need = 1; next }
        /^Version (definition|symbols) section/ { in_need = 0 }
        in_need && /File:/ { file = $0; sub(/.*File: */, "", file); sub(/ .*/, "", file); next }
        in_need && /Name:/ && file ~ /^libibverbs\.so/ {
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

compare_exports() {
    local ref=$1 ours=$2
    [[ -r $ref ]] || die "reference library not readable: $ref"
    [[ -r $ours ]] || die "library not readable: $ours"

    exported_tuples "$ref" >"$tmp/ref"
    exported_tuples "$ours" >"$tmp/ours"
    version_definitions "$ref" >"$tmp/ref.vd"
    version_definitions "$ours" >"$tmp/ours.vd"

    local status=0
    local missing extra vd_missing vd_extra
    missing=$(LC_ALL=C comm -23 "$tmp/ref" "$tmp/ours")
    extra=$(LC_ALL=C comm -13 "$tmp/ref" "$tmp/ours")
    vd_missing=$(LC_ALL=C comm -23 "$tmp/ref.vd" "$tmp/ours.vd")
    vd_extra=$(LC_ALL=C comm -13 "$tmp/ref.vd" "$tmp/ours.vd")

    echo "reference: $ref ($(wc -l <"$tmp/ref") symbols, $(wc -l <"$tmp/ref.vd") version nodes)"
    echo "ours:      $ours ($(wc -l <"$tmp/ours") symbols, $(wc -l <"$tmp/ours.vd") version nodes)"

    if [[ -n $vd_missing ]]; then
        echo "MISSING version definitions:"; sed 's/^/  - /' <<<"$vd_missing"; status=1
    fi
    if [[ -n $vd_extra ]]; then
        echo "EXTRA version definitions:"; sed 's/^/  + /' <<<"$vd_extra"; status=1
    fi
    if [[ -n $missing ]]; then
        echo "MISSING symbols (name version kind type):"
        sed 's/^/  - /' <<<"$missing"; status=1
    fi
    if [[ -n $extra ]]; then
        echo "EXTRA symbols (name version kind type):"
        sed 's/^/  + /' <<<"$extra"; status=1
    fi
    if ((status == 0)); then
        echo "OK: exported symbol set matches the reference"
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
        [[ $# -eq 3 ]] || usage
        compare_exports "$2" "$3"
        ;;
    -*)
        usage
        ;;
    *)
        [[ $# -eq 1 ]] || usage
        compare_exports "${UROCE_REF_LIBIBVERBS:-$(default_reference)}" "$1"
        ;;
    esac
}

main "$@"
