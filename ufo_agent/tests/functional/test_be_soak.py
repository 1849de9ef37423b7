"""BE soak mode on real guests: the BE guest idles in its cgroup, LC keeps.

An LC guest and a BE guest (Nova's ``ufo:class`` hint) on this two-CPU
host in small-host mode, ufo-agent with ``[controller] be_policy =
soak``. Checked from outside the agent: the BE guest's cgroup has
``cpu.idle = 1`` before its vCPUs may run beside the LC guest's, the LC
guest's pins are its own cores and its group stays at normal priority,
and SIGTERM gives both back as Nova defined them with ``cpu.idle = 0``.
"""

import os
import signal

import pytest

from ufo_tools.e2e import AgentProcess
from ufo_tools.e2e import host_online_cpus
from ufo_tools.e2e import live_pins
from ufo_tools.e2e import nova_guest
from ufo_tools.e2e import set_load
from ufo_tools.e2e import vm_status

AGENT_OPTIONS = {'controller__emulator_min_cores': '0',
                 'controller__idle_pool_min_cores': '0',
                 'controller__be_policy': 'soak'}


def _qemu_pid(guest):
    name = guest.dom.name().encode()
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as handle:
                args = handle.read().split(b'\0')
        except OSError:
            continue
        if b'guest=' + name + b',debug-threads=on' in args:
            return int(pid)
    raise AssertionError('no QEMU process for %s' % name)


def _cpu_mount():
    """Mount point of the hierarchy with the cpu controller (v1 or v2)."""
    with open('/proc/self/mountinfo') as handle:
        for line in handle:
            left, _, right = line.partition(' - ')
            fstype, _, options = right.split()[:3]
            point = left.split()[4]
            if fstype == 'cgroup' and 'cpu' in options.split(','):
                return point, False
            if fstype == 'cgroup2':
                unified = point
    return unified, True


def guest_cpu_idle(guest):
    """cpu.idle of the group that holds the guest (its vCPUs' parent).

    Read independently of the agent's code: libvirt puts each vCPU
    thread in a ``vcpuN`` group under the guest's group.
    """
    pid = _qemu_pid(guest)
    mount, v2 = _cpu_mount()
    for tid in os.listdir('/proc/%d/task' % pid):
        with open('/proc/%d/task/%s/comm' % (pid, tid)) as handle:
            if not handle.read().startswith('CPU '):
                continue
        with open('/proc/%d/task/%s/cgroup' % (pid, tid)) as handle:
            for line in handle:
                _, controllers, path = line.rstrip('\n').split(':', 2)
                if (v2 and not controllers) or \
                        'cpu' in controllers.split(','):
                    group = os.path.dirname(path.rstrip('/'))
                    if os.path.basename(group) == 'libvirt':
                        group = os.path.dirname(group)
                    with open(os.path.join(mount, group.lstrip('/'),
                                           'cpu.idle')) as idle:
                        return int(idle.read())
    raise AssertionError('no vCPU thread of %s' % guest.dom.name())


@pytest.fixture(scope='module')
def guests(guest_artifacts):
    with nova_guest(name='soak-lc') as lc, \
            nova_guest(name='soak-be', vm_class='be') as be:
        yield lc, be


def test_a_best_effort_guest_soaks_at_idle_priority_lc_pins_unchanged(
        guests, tmp_path):
    lc, be = guests
    lc_uuid, be_uuid = lc.dom.UUIDString(), be.dom.UUIDString()
    every = frozenset(host_online_cpus())
    assert guest_cpu_idle(be) == 0 and guest_cpu_idle(lc) == 0
    set_load(lc, 2000)
    agent = AgentProcess(tmp_path, **AGENT_OPTIONS).start()
    try:
        def soaking(status):
            vm = vm_status(status, be_uuid) or {}
            lc_vm = vm_status(status, lc_uuid) or {}
            return vm.get('mode') == 'be' and vm.get('idle_priority') and \
                lc_vm.get('cores') and live_pins(be)[0] == {every}
        agent.wait(soaking, timeout=120,
                   what='the BE guest soaking every CPU')
        # Its vCPU threads run beside the LC guest's at idle priority.
        assert guest_cpu_idle(be) == 1
        assert guest_cpu_idle(lc) == 0
        status = agent.status()
        lc_vm = vm_status(status, lc_uuid)
        lc_pins, _ = live_pins(lc)
        assert len(lc_pins) == 1
        (lc_cpus,) = lc_pins
        # LC pins are its own cores, as without soak: the status's pool.
        assert lc_cpus == frozenset(map(int, lc_vm['cpus'].split(',')))
        assert lc_cpus < every or len(every) == len(lc_cpus)
        assert 'idle priority' not in agent.log_text()
        assert agent.signal(signal.SIGTERM) == 0
    finally:
        if agent.proc.poll() is None:
            agent.proc.kill()
        set_load(lc, 0)
    # Given back: Nova's pins (every host CPU here), normal priority.
    assert live_pins(be)[0] == {every} and live_pins(lc)[0] == {every}
    assert guest_cpu_idle(be) == 0 and guest_cpu_idle(lc) == 0
