#!/bin/bash
# Starts virtlogd and libvirtd when they do not run (machines without
# systemd, such as CI containers) and waits until qemu:///system answers.
set -euo pipefail

SUDO=""
if [ "$(id -u)" != 0 ]; then
    SUDO=sudo
fi
# Without udev, /dev/kvm stays root:root 0600. QEMU probed as root finds KVM
# while libvirt judges it unusable for its qemu user, so libvirt re-probes
# QEMU (tens of seconds) on every domain start. Set what Debian's udev rule
# sets.
if [ -c /dev/kvm ] && getent group kvm >/dev/null &&
        [ "$(stat -c %G:%a /dev/kvm)" != kvm:660 ]; then
    $SUDO chgrp kvm /dev/kvm
    $SUDO chmod 0660 /dev/kvm
fi
if virsh -c qemu:///system version >/dev/null 2>&1; then
    exit 0
fi
if ! pgrep -x virtlogd >/dev/null; then
    $SUDO virtlogd -d
fi
if ! pgrep -x libvirtd >/dev/null; then
    $SUDO libvirtd -d
fi
for _ in $(seq 1 60); do
    if virsh -c qemu:///system version >/dev/null 2>&1; then
        exit 0
    fi
    sleep 0.5
done
echo "start-libvirtd: libvirtd does not answer" >&2
exit 1
