#!/bin/sh
# SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
# The strip the package's install runs (scripts/build-deb.sh sets CMAKE_STRIP to this): as
# Debian's dh_strip strips, without the .comment and .note sections, and shared libraries
# down to their dynamic symbols.
for f; do :; done
case $f in
*.so | *.so.*) exec strip --remove-section=.comment --remove-section=.note --strip-unneeded "$@" ;;
*) exec strip --remove-section=.comment --remove-section=.note "$@" ;;
esac
