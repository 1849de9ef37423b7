#!/bin/bash
# Runs the kernel's checkpatch.pl (--no-tree -f) over the ufo_guest module
# sources. checkpatch.pl and its data files come from Debian's linux-source
# package of the same kernel series as the test guest, downloaded once and
# cached next to the test guest artifacts.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${UFO_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ufo-nova/guest}
mkdir -p "$CACHE"
exec 9>"$CACHE/.checkpatch.lock"
flock 9

PKG=$(apt-cache depends linux-source 2>/dev/null |
    awk '/Depends: linux-source-[0-9]/ {print $2; exit}')
PKG=${PKG:-linux-source-6.1}
DIR=$CACHE/checkpatch-$PKG
if [ ! -x "$DIR/scripts/checkpatch.pl" ]; then
    TMP=$(mktemp -d "$CACHE/.checkpatch.XXXXXX")
    trap 'rm -rf "$TMP"' EXIT
    (cd "$TMP" && apt-get download "$PKG" >&2)
    dpkg-deb --fsys-tarfile "$TMP"/*.deb |
        tar -x -C "$TMP" --wildcards './usr/src/linux-source-*.tar.xz'
    tar -xJf "$TMP"/usr/src/linux-source-*.tar.xz -C "$TMP" --wildcards \
        '*/scripts/checkpatch.pl' '*/scripts/spelling.txt' \
        '*/scripts/const_structs.checkpatch'
    mkdir -p "$DIR.new/scripts"
    cp "$TMP"/linux-source-*/scripts/{checkpatch.pl,spelling.txt,const_structs.checkpatch} \
        "$DIR.new/scripts/"
    rm -rf "$DIR"
    mv "$DIR.new" "$DIR"
fi
cd "$TOP/guest_image/ufo-guest"
exec perl "$DIR/scripts/checkpatch.pl" --no-tree --strict -f \
    ufo_guest.c ufo_channel.h
