#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# Turns a Containerfile (ci/Containerfile) into a shell script, on stdout, that does what an
# image build and `docker run IMAGE` would, for a root file system of the FROM image's
# release: COPY from CONTEXT (a directory as the script will see it), RUN as root or the
# USER, WORKDIR, and the CMD (exec form) last, in a network namespace of its own as a
# container has. Instructions it does not know fail it.
# usage: containerfile_script.sh CONTAINERFILE CONTEXT IMAGE   (IMAGE: what FROM must name)
set -euo pipefail
file=${1:?usage: containerfile_script.sh CONTAINERFILE CONTEXT IMAGE}
context=${2:?}
image=${3:?}
user=root
as_user() { [ "$user" = root ] && echo "$1" || echo "runuser -u $user -- $1"; }
echo "set -e"
# Continued lines joined; comments and blank lines dropped.
sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$file" | grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' |
    while read -r op args; do
        case $op in
        FROM) [ "$args" = "$image" ] || { echo "containerfile: FROM $args, not $image" >&2; exit 1; } ;;
        COPY) src=${args% *} dest=${args##* }; echo "mkdir -p $dest && cp $context/$src $dest" ;;
        RUN) printf '%s\n' "$(as_user "bash -ec $(printf %q "$args")")" ;;
        USER) user=$args ;;
        WORKDIR) echo "mkdir -p $args && cd $args" ;;
        CMD)
            cmd=$(python3 -c 'import json, shlex, sys; print(shlex.join(json.loads(sys.argv[1])))' "$args")
            printf 'echo "--- CMD %s"\n' "$cmd"
            printf 'unshare --net /bin/bash -c %q\n' "ip link set lo up && $(as_user "$cmd")"
            ;;
        *) echo "containerfile: $op is not handled" >&2; exit 1 ;;
        esac
    done
