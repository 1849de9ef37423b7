import os
import sys

import pytest

from ufo_agent.channel import host_channel
from ufo_agent.driver.libvirt import driver as libvirt_driver
from ufo_agent.driver.libvirt import host as libvirt_host
from ufo_tools.fakes import fakehost
from ufo_tools.fakes import fakelibvirt

# Where the driver and its once-per-process event loop live.
DRIVER_CLASS = libvirt_driver.LibvirtDriver
EVENT_LOOP_MODULE = libvirt_host


@pytest.fixture
def hv(monkeypatch):
    """A fake libvirt, imported by the driver as ``libvirt``."""
    fake = fakelibvirt.FakeLibvirt()
    monkeypatch.setitem(sys.modules, 'libvirt', fake)
    # No event loop thread per test: the loop is started once per process.
    monkeypatch.setattr(EVENT_LOOP_MODULE, '_event_loop_started', True)
    return fake


class Host:
    """Fake /proc, /run/libvirt/qemu, /dev/shm and sysfs trees."""

    def __init__(self, root, hv):
        self.hv = hv
        self.proc = root / 'proc'
        self.run = root / 'run'
        self.shm = root / 'shm'
        self.sysfs = root / 'sys'
        for path in (self.proc, self.run, self.shm):
            path.mkdir()
        fakehost.write_sysfs(self.sysfs, '0-7')
        self.drivers = []

    def boot(self, uuid, xml, pid, vcpus=2, name='instance-0000002a',
             **kwargs):
        """A running domain: libvirt's view, its pid file and threads."""
        (self.run / (name + '.pid')).write_text('%d\n' % pid)
        fakehost.write_qemu(self.proc, pid, vcpus)
        return self.hv.add(uuid, xml, **kwargs)

    def driver(self, **kwargs):
        args = dict(managed_cpus=frozenset(range(8)),
                    shm_dir=str(self.shm), run_dir=str(self.run),
                    proc_root=str(self.proc), sysfs_root=str(self.sysfs),
                    attach_channels=False)
        args.update(kwargs)
        driver = DRIVER_CLASS('qemu:///system', **args)
        self.drivers.append(driver)
        return driver


@pytest.fixture
def host(hv, tmp_path, monkeypatch):
    h = Host(tmp_path, hv)
    # Tests need not run as root: "QEMU" is this test's own user.
    monkeypatch.setattr(host_channel, 'qemu_owner',
                        lambda *a: (os.getuid(), os.getgid()))
    yield h
    for driver in h.drivers:
        driver.close()
