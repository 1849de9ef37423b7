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
# ufo-agent runs as a user in the libvirt group (etc/systemd/
# ufo-agent.service; the functional tests run it so). Debian's libvirtd
# asks polkit about such users; without a system bus (CI containers) there
# is no polkit, so libvirtd gets what such hosts configure instead: the
# read-write socket for group libvirt, no further authentication.
CONF_ARGS=()
GROUP_SOCKET=""
if [ ! -S /run/dbus/system_bus_socket ] && getent group libvirt >/dev/null
then
    conf=/run/ufo-nova-libvirtd.conf
    printf '%s\n' 'unix_sock_group = "libvirt"' \
        'unix_sock_rw_perms = "0770"' 'auth_unix_rw = "none"' |
        $SUDO tee "$conf.new" >/dev/null
    $SUDO mv "$conf.new" "$conf"
    CONF_ARGS=(-f "$conf")
    GROUP_SOCKET=libvirt:770
fi
sock=/run/libvirt/libvirt-sock
if virsh -c qemu:///system version >/dev/null 2>&1; then
    if [ -z "$GROUP_SOCKET" ] || [ ! -S "$sock" ] ||
            [ "$(stat -c %G:%a "$sock")" = "$GROUP_SOCKET" ]; then
        exit 0
    fi
    # A libvirtd without group access (started before this script set it
    # up): restart that one daemon, by its pid file; the guests run on.
    pid=$(cat /run/libvirtd.pid)
    echo "start-libvirtd: restarting libvirtd (pid $pid) for group access"
    $SUDO kill "$pid"
    for _ in $(seq 1 60); do
        $SUDO kill -0 "$pid" 2>/dev/null || break
        sleep 0.5
    done
fi
# The daemons outlive this script: they must not inherit its descriptors.
# Run as `flock /tmp/realguest.lock tools/start-libvirtd.sh`, libvirtd
# would otherwise hold the lock for as long as it runs.
detached() {
    (
        for fd in $(ls "/proc/$BASHPID/fd"); do
            if [ "$fd" -gt 2 ]; then
                eval "exec $fd>&-" 2>/dev/null || true
            fi
        done
        exec "$@"
    )
}
if ! pgrep -x virtlogd >/dev/null; then
    detached $SUDO virtlogd -d
fi
if ! pgrep -x libvirtd >/dev/null; then
    detached $SUDO libvirtd -d "${CONF_ARGS[@]}"
fi
for _ in $(seq 1 60); do
    if virsh -c qemu:///system version >/dev/null 2>&1; then
        exit 0
    fi
    sleep 0.5
done
echo "start-libvirtd: libvirtd does not answer" >&2
exit 1
