#!/bin/bash
# Tries the ufo-guest diskimage-builder element for real, end to end:
#  1. builds a Debian image with "debian-minimal ufo-guest" (-t tar, which
#     needs neither loop partitions nor device-mapper);
#  2. turns the tree into an ext4 disk with mkfs.ext4 -d (no mount);
#  3. boots it (its own kernel and initramfs, root on virtio) under libvirt
#     with a UFO channel, waits until the module that DKMS built is loaded
#     at boot and bound, and makes it follow two targets.
#
# Usage: tools/try-dib-image.sh [WORKDIR]   (root; default /var/tmp/ufo-dib)
# Python: the tox functional env's, or any with libvirt-python installed
# (PYTHON=...).
set -euo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/var/tmp/ufo-dib}
PYTHON=${PYTHON:-$TOP/.tox/functional/bin/python}
mkdir -p "$WORK"
chmod 755 "$WORK"

DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install \
    -y -q --no-install-recommends debootstrap qemu-utils e2fsprogs kpartx \
    squashfs-tools sudo >/dev/null
if [ ! -x "$WORK/venv/bin/disk-image-create" ]; then
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q diskimage-builder
fi

export PATH=$WORK/venv/bin:$PATH
export ELEMENTS_PATH=$TOP/guest_image/elements
export DIB_RELEASE=${DIB_RELEASE:-bookworm}
export DIB_DISTRIBUTION_MIRROR=${DIB_DISTRIBUTION_MIRROR:-http://deb.debian.org/debian}
export DIB_DEBIAN_SECURITY_MIRROR=${DIB_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
IMG=$WORK/ufo-guest-debian
if [ ! -f "$IMG.tar" ]; then
    disk-image-create -t tar -o "$IMG" debian-minimal ufo-guest \
        >"$WORK/dib.log" 2>&1 || {
        tail -30 "$WORK/dib.log"
        exit 1
    }
fi
echo "image: $IMG.tar"
tar -tf "$IMG.tar" | grep -E 'ufo_guest\.ko|modules-load.d/ufo-guest'

rm -rf "$WORK/root" "$WORK/disk.raw"
mkdir "$WORK/root"
tar -xf "$IMG.tar" -C "$WORK/root" --numeric-owner
mkdir -p "$WORK"/root/{proc,sys,dev,run,tmp}
LABEL=$(awk '$2 == "/" {sub("LABEL=", "", $1); print $1; exit}' \
    "$WORK/root/etc/fstab" 2>/dev/null || true)
truncate -s 4G "$WORK/disk.raw"
mkfs.ext4 -q -F -L "${LABEL:-cloudimg-rootfs}" -d "$WORK/root" \
    "$WORK/disk.raw"
KERNEL=$(ls "$WORK"/root/boot/vmlinuz-* | head -1)
INITRD=$(ls "$WORK"/root/boot/initrd.img-* | head -1)
cp "$KERNEL" "$WORK/vmlinuz"
cp "$INITRD" "$WORK/initrd.img"
rm -rf "$WORK/root"

"$TOP/tools/start-libvirtd.sh"
cd "$TOP"
exec "$PYTHON" - "$WORK" <<'PY'
import os
import sys
import time

from ufo_tools import testguest

work = sys.argv[1]
g = testguest.TestGuest(
    vcpus=4, memory_mib=1024, kernel=os.path.join(work, 'vmlinuz'),
    initrd=os.path.join(work, 'initrd.img'),
    disk=os.path.join(work, 'disk.raw'), test_init=False,
    cmdline='root=/dev/vda rw')
t0 = time.monotonic()
try:
    g.start()
    ch = g.channel
    deadline = t0 + 600
    while not ch.read_guest().ok:
        if time.monotonic() > deadline:
            print('\n'.join(g.console.lines()[-40:]))
            raise SystemExit('FAIL: the module did not bind within 600s')
        time.sleep(0.5)
    print('module loaded at boot and bound %.0fs after start'
          % (time.monotonic() - t0))
    for n in (2, 4):
        seq = ch.set_target(n)
        report, dt = ch.wait_ack(seq, 60)
        print('target %d: online %s, ack %.0f ms'
              % (n, report.sample.online_cpus, dt * 1000))
        assert report.sample.online_cpus == tuple(range(n))
    print('OK: DIB image with ufo-guest works')
finally:
    g.close()
    print('console log: %s' % g.log_path)
PY
