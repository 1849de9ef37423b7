"""vCPUs plugged and unplugged at run time, over a fake libvirt.

The kernel's view of each vCPU thread (``Cpus_allowed_list`` in the fake
/proc) follows what libvirt does: a pin call moves the thread, and a
plugged vCPU starts on the pin libvirt keeps for it (or on ``<vcpu
cpuset>`` when it has none). Every vCPU thread must end up on the CPUs
the plan gives the guest, whatever happened to it.
"""

import pytest

from ufo_agent.controller import ControllerConfig
from ufo_agent import cpuset
from ufo_agent.driver.libvirt import guest as libvirt_guest
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
PID = 500
DRIFT_CHECK = 3.0


def _set(bits):
    return frozenset(i for i, on in enumerate(bits) if on)


class World:
    """One guest of 4 vCPUs, 2 plugged, and the agent over it."""

    def __init__(self, host, hv, monkeypatch):
        self.host, self.hv = host, hv
        self.now = 1000.0
        monkeypatch.setattr(libvirt_guest.time, 'monotonic',
                            lambda: self.now)
        monkeypatch.setattr('os.cpu_count', lambda: 8)
        xml = nova_xml(U1, vcpus=4, cpuset='0-7').replace(
            "cpuset='0-7'>4</vcpu>", "cpuset='0-7' current='2'>4</vcpu>")
        self.dom = host.boot(U1, xml, pid=PID, vcpus=2)
        real_pin = lv.FakeDomain.pinVcpuFlags

        def pin(dom, vcpu, cpumap, flags):
            real_pin(dom, vcpu, cpumap, flags)
            if vcpu < dom.current_vcpus:
                self._affinity(vcpu, _set(cpumap))
        monkeypatch.setattr(lv.FakeDomain, 'pinVcpuFlags', pin)
        for index in range(2):
            self._affinity(index, frozenset(range(8)))
        self.agent = loop.Agent(
            host.driver(), frozenset(range(8)), ControllerConfig(),
            settings_mod.AgentSettings(drift_check_interval=DRIFT_CHECK),
            clock=lambda: self.now)

    def _task(self, index):
        return self.host.proc / str(PID) / 'task' / str(PID + 1 + index)

    def _affinity(self, index, cpus):
        """The kernel's view of vCPU ``index``'s thread."""
        (self._task(index) / 'status').write_text(
            'Name:\tCPU %d/KVM\nCpus_allowed_list:\t%s\n'
            % (index, cpuset.format_cpuset(cpus)))

    def kernel_view(self):
        """{vCPU index: CPUs its thread may run on} of plugged vCPUs."""
        out = {}
        for index in range(self.dom.current_vcpus):
            status = (self._task(index) / 'status').read_text()
            out[index] = cpuset.parse_cpuset(
                status.split('Cpus_allowed_list:')[1].strip())
        return out

    def plug(self):
        """virsh setvcpus +1: libvirt starts it on the pin it keeps."""
        index = self.dom.current_vcpus
        task = self._task(index)
        task.mkdir(parents=True)
        (task / 'comm').write_text('CPU %d/KVM\n' % index)
        (task / 'schedstat').write_text('100 20 3\n')
        self.dom.current_vcpus += 1
        self._affinity(index, _set(self.dom.vcpu_pins.get(
            index, self.dom.default_pin)))

    def unplug(self):
        self.dom.current_vcpus -= 1
        task = self._task(self.dom.current_vcpus)
        for name in ('comm', 'schedstat', 'status'):
            (task / name).unlink()
        task.rmdir()

    def tick(self, count=1):
        for _ in range(count):
            self.now += 1.0
            plan = self.agent.tick()
        return plan


@pytest.fixture
def world(host, hv, monkeypatch):
    return World(host, hv, monkeypatch)


def test_a_vcpu_plugged_later_starts_on_the_planned_cpus(world):
    world.agent.start()
    plan = world.tick(3)
    planned = plan.vms[U1].cpus
    assert planned != frozenset(range(8))       # not where it would start
    assert world.kernel_view() == {0: planned, 1: planned}
    world.plug()
    # On the planned CPUs from the start: libvirt kept the pin.
    assert world.kernel_view()[2] == planned
    plan = world.tick(2 * int(DRIFT_CHECK))
    planned = plan.vms[U1].cpus
    assert world.kernel_view() == {0: planned, 1: planned, 2: planned}
    assert set(world.dom.vcpuPinInfo(0)) == {world.dom.vcpu_pins[0]}
    assert world.agent.enforcer.pin_repairs == 0


def test_a_vcpu_plugged_back_on_another_pin_is_pinned_at_once(world, hv):
    world.agent.start()
    world.tick(3)
    world.unplug()
    # Someone pins the absent vCPU 1 (virsh vcpupin --live).
    world.dom.vcpu_pins[1] = tuple(c == 0 for c in range(8))
    world.tick()
    world.plug()
    assert world.kernel_view()[1] == {0}
    planned = world.tick().vms[U1].cpus
    # The tick after the plug moved it back, before any drift check.
    assert world.kernel_view() == {0: planned, 1: planned}


def test_a_vcpu_moved_behind_the_agents_back_is_repaired(world, caplog):
    world.agent.start()
    world.plug()
    # Until the idle guest is parked: its plan stays the same from then.
    world.tick(14)
    # taskset on vCPU 2's thread: libvirt does not know.
    world._affinity(2, frozenset({0}))
    planned = world.tick(int(DRIFT_CHECK) + 1).vms[U1].cpus
    assert world.agent.last_plan.vms[U1].mode.value == 'idle'
    assert world.kernel_view() == {0: planned, 1: planned, 2: planned}
    assert world.agent.enforcer.pin_repairs == 1
    assert 'changed behind ufo-agent' in caplog.text
    assert world.agent.snapshot['pin_repairs'] == 1
    # Repaired for good: no drift at the next checks.
    world.tick(2 * int(DRIFT_CHECK))
    assert world.agent.enforcer.pin_repairs == 1


def test_the_counters_follow_the_vcpus_plugged(world):
    driver = world.agent.driver
    world.agent.start()
    world.tick()
    assert driver.observe(U1).vcpu_slices == 6
    world.plug()
    assert driver.observe(U1).vcpu_slices == 9
    world.unplug()
    world.unplug()
    assert driver.observe(U1).vcpu_slices == 3
