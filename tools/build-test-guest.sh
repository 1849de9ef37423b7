#!/bin/bash
# Builds the UFO test guest: a Debian cloud kernel (version resolved now from
# the archive), the ufo_guest module built against the same kernel ABI, a
# static ufo-workload, the kernel's virtio NIC modules and a busybox initramfs
# with /init.
#
# Artifacts are cached by a content hash of every input (package versions,
# sources, this script) under
#   ${UFO_GUEST_CACHE:-${XDG_CACHE_HOME:-~/.cache}/ufo-nova/guest}/<hash>/
# so a second build is instant. Output: KEY=VALUE lines (KERNEL, INITRD,
# MODULE, WORKLOAD, KRELEASE, KDIR, DIR).
#
# Needs: apt-get, dpkg, gcc, make, busybox-static, cpio, gzip, kmod.
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
SRC_MOD=$TOP/guest_image/ufo-guest
SRC_TG=$TOP/guest_image/test-guest
CACHE=${UFO_GUEST_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ufo-nova/guest}
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9

log() { echo "build-test-guest: $*" >&2; }

resolve() {
    IMG_PKG=$(apt-cache depends linux-image-cloud-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
    [ -n "$IMG_PKG" ] || return 1
    KRELEASE=${IMG_PKG#linux-image-}
    HDR_PKG=linux-headers-$KRELEASE
    local deps
    deps=$(apt-cache depends "$HDR_PKG")
    COMMON_PKG=$(echo "$deps" |
        awk '/Depends: linux-headers-.*-common/ {print $2; exit}')
    KBUILD_PKG=$(echo "$deps" | awk '/Depends: linux-kbuild-/ {print $2; exit}')
    [ -n "$COMMON_PKG" ] && [ -n "$KBUILD_PKG" ] || return 1
    # One apt-cache call for the four candidates: "pkg=version" words.
    VERSIONS=$(apt-cache policy "$IMG_PKG" "$HDR_PKG" "$COMMON_PKG" \
        "$KBUILD_PKG" | awk '/^[^ ].*:$/ {p = substr($1, 1, length($1) - 1)}
        /Candidate:/ && $2 != "(none)" {printf " %s=%s", p, $2}')
    [ "$(echo "$VERSIONS" | wc -w)" = 4 ] || return 1
}

apt_update() {
    apt-get -o DPkg::Lock::Timeout=600 update -q >&2
}

if ! resolve; then
    log "kernel packages not known to apt: apt-get update"
    apt_update
    resolve
fi

BUSYBOX=$(command -v busybox || true)
if [ -z "$BUSYBOX" ] || ! "$BUSYBOX" --list >/dev/null 2>&1 ||
        ldd "$BUSYBOX" >/dev/null 2>&1; then
    log "a static busybox is needed (apt-get install busybox-static)"
    exit 1
fi

HASH=$( {
    echo "$VERSIONS"
    "$BUSYBOX" 2>&1 | head -1
    gcc --version | head -1
    cat "$0" "$SRC_MOD/ufo_guest.c" "$SRC_MOD/ufo_channel.h" \
        "$SRC_MOD/Makefile" "$SRC_TG/init" "$SRC_TG/ufo_workload.c"
} | sha256sum | cut -c1-16)
OUT=$CACHE/$HASH

print_result() {
    cat "$OUT/artifacts.env"
}

if [ -f "$OUT/artifacts.env" ]; then
    print_result
    exit 0
fi

# 1. Kernel image and headers, unpacked without installing.
KCACHE=$CACHE/kernel-$KRELEASE-$(echo "$VERSIONS" | sha256sum | cut -c1-8)
KDIR=$KCACHE/root/usr/src/linux-headers-$KRELEASE
if [ ! -f "$KCACHE/done" ]; then
    log "downloading $VERSIONS"
    rm -rf "$KCACHE"
    mkdir -p "$KCACHE/debs"
    # shellcheck disable=SC2086
    pkgs=$(echo $VERSIONS)
    if ! (cd "$KCACHE/debs" && apt-get download $pkgs >&2); then
        # Stale package lists: the archive dropped that ABI. Refresh and
        # start over once, with the versions resolved again.
        if [ -n "${UFO_GUEST_RETRIED:-}" ]; then
            exit 1
        fi
        apt_update
        rm -rf "$KCACHE"
        flock -u 9
        UFO_GUEST_RETRIED=1 exec bash "$0" "$@"
    fi
    for deb in "$KCACHE"/debs/*.deb; do
        dpkg -x "$deb" "$KCACHE/root"
    done
    # The headers' Makefile includes the -common tree by absolute path.
    sed -i "s#^include /usr/src/#include $KCACHE/root/usr/src/#" \
        "$KDIR/Makefile"
    rm -rf "$KCACHE/debs"
    touch "$KCACHE/done"
fi

TMP=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

# 2. The module, out of tree, without warnings.
mkdir -p "$TMP/mod"
cp "$SRC_MOD/ufo_guest.c" "$SRC_MOD/ufo_channel.h" "$SRC_MOD/Makefile" \
    "$TMP/mod/"
make -C "$TMP/mod" KDIR="$KDIR" >"$TMP/mod.log" 2>&1 || {
    cat "$TMP/mod.log" >&2
    exit 1
}
if grep -E 'warning:|error:' "$TMP/mod.log" >&2; then
    log "the module build has warnings"
    exit 1
fi

# 3. The workload, static.
gcc -O2 -Wall -Werror -static -pthread -o "$TMP/ufo-workload" \
    "$SRC_TG/ufo_workload.c" -lm

# 4. The initramfs.
R=$TMP/initramfs
mkdir -p "$R"/{bin,sbin,dev,proc,sys,tmp,lib/modules}
cp "$BUSYBOX" "$R/bin/busybox"
ln -s busybox "$R/bin/sh"
cp "$SRC_TG/init" "$R/init"
chmod 755 "$R/init"
cp "$TMP/mod/ufo_guest.ko" "$R/lib/modules/"
cp "$TMP/ufo-workload" "$R/bin/"

# The virtio NIC's drivers are modules in this kernel: with ufo.net=1, /init
# loads those of lib/modules/net in the order of its file "order",
# dependencies first.
MODDIR=$KCACHE/root/lib/modules/$KRELEASE/kernel
mkdir -p "$R/lib/modules/net"
NET_ORDER=
add_module() {
    local path deps dep
    case " $NET_ORDER " in *" $1 "*) return 0 ;; esac
    path=$(find "$MODDIR" -name "$1.ko" -print -quit)
    if [ -z "$path" ]; then
        log "no $1.ko in $MODDIR"
        exit 1
    fi
    deps=$(modinfo -F depends "$path")
    for dep in ${deps//,/ }; do
        add_module "$dep"
    done
    cp "$path" "$R/lib/modules/net/"
    NET_ORDER="$NET_ORDER $1"
}
add_module virtio_pci
add_module virtio_net
echo "${NET_ORDER# }" >"$R/lib/modules/net/order"
(cd "$R" && find . | LC_ALL=C sort |
    cpio --quiet -o -H newc --reproducible --owner=0:0) |
    gzip -n -6 >"$TMP/initrd.gz"

mkdir -p "$OUT.new"
cp "$KCACHE/root/boot/vmlinuz-$KRELEASE" "$OUT.new/vmlinuz"
cp "$TMP/initrd.gz" "$TMP/mod/ufo_guest.ko" "$TMP/ufo-workload" "$OUT.new/"
cat >"$OUT.new/artifacts.env" <<EOF
DIR=$OUT
KERNEL=$OUT/vmlinuz
INITRD=$OUT/initrd.gz
MODULE=$OUT/ufo_guest.ko
WORKLOAD=$OUT/ufo-workload
KRELEASE=$KRELEASE
KDIR=$KDIR
EOF
rm -rf "$OUT"
mv "$OUT.new" "$OUT"
log "built $OUT"
print_result
