"""Helpers of the ufo-agent end-to-end tests.

``AgentProcess`` runs the real ``ufo-agent`` command with its own
configuration and reads its /status endpoint; ``nova_guest`` boots a test
guest carrying Nova's instance metadata, as Nova writes it.
"""

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from ufo_agent.channel import testguest

VCPUS = 2
WATCHDOG_MS = 3000
NOVA_NS = 'http://openstack.org/xmlns/libvirt/nova/1.1'
NOVA_META = """<instance>
  <name>e2e-web</name>
  <flavor name="lc.small"><vcpus>%d</vcpus>
    <extraSpecs><extraSpec name="ufo:class">lc</extraSpec></extraSpecs>
  </flavor>
</instance>""" % VCPUS


def free_port():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def host_online_cpus():
    with open('/sys/devices/system/cpu/online') as handle:
        text = handle.read().strip()
    cpus = set()
    for part in text.split(','):
        first, _, last = part.partition('-')
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


class AgentProcess:
    def __init__(self, tmp_path, **options):
        self.port = free_port()
        self.state = tmp_path / 'state'
        self.log = tmp_path / 'agent.log'
        conf = {
            'agent': {'state_path': str(self.state),
                      'metrics_port': str(self.port)},
            'controller': {'idle_after': '600'},
            # No broker here: the messaging path has its own test.
            'publishers': {'enabled': ''},
        }
        for key, value in options.items():
            group, name = key.split('__')
            conf.setdefault(group, {})[name] = value
        self.conf = tmp_path / 'ufo-agent.conf'
        self.conf.write_text(''.join(
            '[%s]\n%s\n' % (group, ''.join('%s = %s\n' % kv
                                           for kv in values.items()))
            for group, values in conf.items()))
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'ufo_agent.cmd.agent', '--config-file',
             str(self.conf), '--log-file', str(self.log)])
        return self

    def status(self):
        url = 'http://127.0.0.1:%d/status' % self.port
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read().decode())

    def wait(self, pred, timeout=90.0, what='condition'):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError('ufo-agent exited with %d:\n%s' % (
                    self.proc.returncode, self.log.read_text()[-3000:]))
            try:
                last = self.status()
                if pred(last):
                    return last
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError('timeout waiting for %s; last status %s\n%s'
                             % (what, last, self.log.read_text()[-3000:]))

    def signal(self, signum, timeout=60.0):
        self.proc.send_signal(signum)
        return self.proc.wait(timeout)


@contextlib.contextmanager
def nova_guest(vcpus=VCPUS, **kwargs):
    """A test guest carrying Nova's instance metadata, as Nova writes it.

    On exit the guest is destroyed and the channel page ufo-agent attached
    is removed (a running agent would remove it itself).
    """
    import libvirt
    g = testguest.TestGuest(vcpus=vcpus, channel=False, **kwargs)
    g.start()
    uuid = g.dom.UUIDString()
    try:
        g.dom.setMetadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT,
                          NOVA_META.replace('<vcpus>%d' % VCPUS,
                                            '<vcpus>%d' % vcpus),
                          'nova', NOVA_NS, libvirt.VIR_DOMAIN_AFFECT_LIVE)
        yield g
    finally:
        g.close()
        try:
            os.unlink('/dev/shm/ufo-' + uuid)
        except FileNotFoundError:
            pass


def vm_status(status, uuid):
    for vm in status['vms']:
        if vm['uuid'] == uuid:
            return vm
    return None


def live_pins(guest):
    vcpus = {frozenset(i for i, on in enumerate(m) if on)
             for m in guest.dom.vcpuPinInfo(1)}
    emulator = frozenset(i for i, on in enumerate(
        guest.dom.emulatorPinInfo(1)) if on)
    return vcpus, emulator


def wait_guest_online(guest, want, timeout=60.0):
    deadline = time.monotonic() + timeout
    while True:
        online = guest.online_cpus()
        if online == want or time.monotonic() > deadline:
            return online
        time.sleep(0.5)
