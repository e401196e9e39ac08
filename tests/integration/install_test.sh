#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# `cmake --install` (docs/install.md): the build installed into a prefix, the prefix moved
# to another path, and from there `uroce run -- ibv_devinfo` and an ibv_rc_pingpong pair
# (Debian's binaries, two processes) over a device the moved prefix's uroced runs. As root
# the build tree is hidden (a tmpfs over it, in a mount namespace of the programs' own), so
# nothing installed can reach back into it. perftest's ib_send_bw resolves the providers
# to the prefix's stand-ins, and the library's autostart runs the prefix's uroce and
# uroced. Also: every shared object is in the private
# library directory, which the dynamic linker does not search, and a program that is not run
# through uroce loads the system's libibverbs even with the prefix's lib directories on
# LD_LIBRARY_PATH.
# usage: install_test.sh CMAKE
. "$(dirname "$0")/lib.sh"
need ibv_devinfo
need ibv_rc_pingpong
cmake=${1:?usage: install_test.sh CMAKE}

first=$UROCE_RUNTIME_DIR/prefix
"$cmake" --install "$UROCE_BUILD" --prefix "$first" >"$UROCE_RUNTIME_DIR/install.out" 2>&1 ||
    fail "cmake --install: $(cat "$UROCE_RUNTIME_DIR/install.out")"
libdir_rel=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$UROCE_BUILD/CMakeCache.txt")
libexec_rel=$(sed -n 's/^CMAKE_INSTALL_LIBEXECDIR:[A-Z]*=//p' "$UROCE_BUILD/CMakeCache.txt")
[ -n "$libdir_rel" ] && [ -n "$libexec_rel" ] || fail "no CMAKE_INSTALL_LIBDIR/LIBEXECDIR in the cache"

# Every file the install wrote is under the prefix (its own lines: install_manifest.txt in
# the build directory is shared with the other tests that install, such as ci.step).
written=$(sed -n 's/^-- \(Installing\|Up-to-date\): //p' "$UROCE_RUNTIME_DIR/install.out")
[ -n "$written" ] || fail "cmake --install named no file: $(cat "$UROCE_RUNTIME_DIR/install.out")"
outside=$(grep -v "^$first/" <<<"$written")
[ -z "$outside" ] || fail "installed outside the prefix: $outside"

moved=$UROCE_RUNTIME_DIR/elsewhere/uroce-moved
mkdir -p "$(dirname "$moved")"
mv "$first" "$moved" || fail "cannot move the prefix"
[ ! -e "$first" ] || fail "the prefix is still at $first"
priv=$moved/$libdir_rel/uroce
echo "prefix moved to $moved; private libraries in $priv"
(cd "$moved" && find . | sort)

for f in bin/uroce "$libexec_rel/uroce/uroced" share/doc/uroce/README.md \
    share/doc/uroce/install.md share/doc/uroce/ci.md share/doc/uroce/system-view.md; do
    [ -f "$moved/$f" ] || fail "not installed: $f"
done
# Each library the build made (build/lib) is installed in the private directory.
for lib in "$UROCE_BUILD"/lib/*.so.[0-9]; do
    [ -e "$priv/$(basename "$lib")" ] || fail "$(basename "$lib") is not in $priv"
done
# No shared object (or link to one) anywhere else in the prefix, no ld.so.conf snippet.
stray=$(cd "$moved" && find . \( -name '*.so' -o -name '*.so.*' -o -path '*ld.so.conf*' \) \
    -not -path "./$libdir_rel/uroce/*")
[ -z "$stray" ] || fail "outside the private library directory: $stray"
# Nothing installed names a library path but its own directory ($ORIGIN).
while read -r elf; do
    paths=$(readelf -d "$elf" 2>/dev/null | sed -n 's/.*(\(RPATH\|RUNPATH\)).*\[\(.*\)\]/\2/p')
    case $paths in '' | '$ORIGIN') ;; *) fail "$elf: run path $paths" ;; esac
done < <(find "$moved" -type f -exec sh -c 'head -c4 "$1" | grep -q ELF' sh {} \; -print)

# hidden CMD...: CMD (and whatever it starts) where the build tree is an empty directory.
hidden=("$UROCE_RUNTIME_DIR/hidden")
if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    cat >"${hidden[0]}" <<EOF
#!/bin/sh
exec unshare -m sh -c 'mount -t tmpfs -o ro,mode=755 uroce-hidden "\$0" && exec "\$@"' \
    "$UROCE_BUILD" "\$@"
EOF
    chmod +x "${hidden[0]}"
    "${hidden[@]}" sh -c "[ -z \"\$(ls -A '$UROCE_BUILD')\" ]" || fail "cannot hide the build tree"
    echo "the build tree is hidden from the programs run from the prefix"
else
    hidden=()
    echo "note: not root (or no mount namespace): the build tree stays visible"
fi
# The Debian programs get nothing of the build's: uroce run gives them the prefix's libraries.
# (In a sanitizer build they still need its runtime first, as lib.sh sets up.)
VERBS_ENV=(env -u LD_LIBRARY_PATH "${VERBS_ENV[@]:2}")
uroce=$moved/bin/uroce

# uroce run with no device running: it starts the prefix's uroced, and the program loads the
# prefix's libibverbs.
out=$("${VERBS_ENV[@]}" "${hidden[@]}" "$uroce" run -- env LD_DEBUG=libs ibv_devinfo 2>&1) ||
    fail "uroce run -- ibv_devinfo exited $?: $out"
echo "$out" | grep -v '^ *[0-9]*:' # ibv_devinfo's own lines
echo "$out" | grep -q 'hca_id:[[:space:]]*uroce0' || fail "ibv_devinfo shows no uroce0"
loaded=$(echo "$out" | sed -n 's/.*calling init: \(.*libibverbs\.so\.1\)$/\1/p')
[ "$loaded" = "$priv/libibverbs.so.1" ] || fail "ibv_devinfo loaded libibverbs from '$loaded'"
[ -z "$(UROCE_RUNTIME_DIR=$UROCE_RUNTIME_DIR "$uroce" list)" ] ||
    fail "the device uroce run started is still running"

# A device started from the prefix, and a pingpong pair over it, each side its own process.
"${hidden[@]}" "$uroce" start --name uroce0 --addr 127.0.0.1 >/dev/null || fail "uroce start"
pid=$(sed -n 's/^pid=//p' "$UROCE_RUNTIME_DIR/uroce0.info")
exe=$(readlink "/proc/$pid/exe")
[ "$exe" = "$moved/$libexec_rel/uroce/uroced" ] || fail "the device runs $exe"
# iproute2's rdma for the view comes from the prefix too (libexec/uroce/path/rdma -> bin/uroce).
link=$("${hidden[@]}" "$uroce" run -- sh -c 'command -v rdma; rdma link show -j' 2>&1) ||
    fail "uroce run -- rdma link show -j: $link"
echo "$link"
echo "$link" | head -1 | grep -q "^$moved/" || fail "uroce run's rdma is not the prefix's"
echo "$link" | grep -q '"ifname":"uroce0"' || fail "rdma link show -j from the prefix: no uroce0"
cat >"$UROCE_RUNTIME_DIR/in_prefix" <<EOF
#!/bin/sh
exec ${hidden[*]} "$uroce" run -- "\$@"
EOF
chmod +x "$UROCE_RUNTIME_DIR/in_prefix"
port=$(tcp_port)
run_pair "$UROCE_RUNTIME_DIR/in_prefix" ibv_rc_pingpong -g 0 -p "$port" -- \
    "$UROCE_RUNTIME_DIR/in_prefix" ibv_rc_pingpong -g 0 -p "$port" 127.0.0.1
grep -q "iters in" "$UROCE_RUNTIME_DIR/client.out" || fail "client did not report its iterations"
"$uroce" stop >/dev/null

# perftest's programs are linked against the provider libraries: under uroce run they
# resolve to the prefix's stand-ins.
if command -v ib_send_bw >/dev/null; then
    out=$("${VERBS_ENV[@]}" "${hidden[@]}" "$uroce" run --no-view -- \
        env LD_TRACE_LOADED_OBJECTS=1 "$(command -v ib_send_bw)" 2>&1) || fail "ib_send_bw's libraries: $out"
    for lib in libibverbs.so.1 libmlx5.so.1 libefa.so.1; do
        echo "$out" | grep -q "$lib => $priv/$lib " ||
            fail "ib_send_bw does not load $lib from the prefix: $out"
    done
    echo "ib_send_bw loads libibverbs, libmlx5 and libefa from $priv"
fi

# A program that opens the library with no device running (autostart on) starts one with
# the prefix's own uroce and uroced, found from the library's location.
out=$("${VERBS_ENV[@]}" "${hidden[@]}" env -u UROCE_NO_AUTOSTART LD_LIBRARY_PATH="$priv" \
    ibv_devinfo 2>&1) || fail "ibv_devinfo with autostart exited $?: $out"
echo "$out" | grep -q 'hca_id:[[:space:]]*uroce0' || fail "no device after autostart: $out"
pid=$(sed -n 's/^pid=//p' "$UROCE_RUNTIME_DIR/uroce0.info")
exe=$(readlink "/proc/$pid/exe")
[ "$exe" = "$moved/$libexec_rel/uroce/uroced" ] || fail "the autostarted device runs $exe"
echo "autostart ran $exe"
"$uroce" stop >/dev/null

# Outside uroce run, with the prefix's library directories on the path (as a prefix such as
# /usr/local is in the linker's default directories), programs load the system's library.
arch=$(gcc -print-multiarch 2>/dev/null || true)
out=$(env LD_LIBRARY_PATH="$moved/lib:$moved/lib/$arch:$moved/$libdir_rel" LD_DEBUG=libs \
    UROCE_NO_AUTOSTART=1 ibv_devices 2>&1)
loaded=$(echo "$out" | sed -n 's/.*calling init: \(.*libibverbs\.so\.1\)$/\1/p')
case $loaded in
"$moved"/* | "") fail "a program outside uroce run loaded libibverbs from '$loaded'" ;;
esac
echo "outside uroce run: $loaded"
echo PASS
