"""A resize to the same host: a new QEMU of a new definition, same uuid.

Nova destroys the guest, defines its new flavor and starts it again. If
libvirtd restarts meanwhile, the agent sees none of the events, and the
new domain can even show its old ID: libvirt numbers domains again from
the highest running one when it starts (checked with libvirt 9.0).
"""

import os

import pytest

from ufo_agent.controller import ControllerConfig
from ufo_agent.driver import base
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_tools.fakes import fakehost
from ufo_tools.fakes.fakehost import nova_xml
from ufo_tools.fakes import fakelibvirt as lv

U1 = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
NAME = 'instance-0000002a'
LIVE = lv.VIR_DOMAIN_AFFECT_LIVE


def _bits(cpus):
    return tuple(cpu in cpus for cpu in range(8))


@pytest.fixture
def agent(host, hv, monkeypatch):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    host.boot(U1, nova_xml(U1, vcpus=2, cpuset='2-7'), pid=500)
    fakehost.write_qemu(host.proc, 500, 2, start_time=1000)
    agent = loop.Agent(host.driver(), frozenset(range(8)),
                       ControllerConfig(), settings_mod.AgentSettings())
    agent.start()
    agent.tick()
    assert agent.guests[U1].vcpus == 2
    return agent


def _resize(host, hv, dom_id, libvirtd_restarts):
    """Destroy, define 4 vCPUs on 4-7, start: a new QEMU, pid 700."""
    if libvirtd_restarts:
        hv.conn.alive = False           # the agent's connection drops
    xml = nova_xml(U1, vcpus=4, cpuset='4-7')
    dom = hv.add(U1, xml, dom_id=dom_id)
    for name in os.listdir(host.proc / '500' / 'task'):
        task = host.proc / '500' / 'task' / name
        for item in task.iterdir():
            item.unlink()
        task.rmdir()
    (host.run / (NAME + '.pid')).write_text('700\n')
    fakehost.write_qemu(host.proc, 700, 4, start_time=2000)
    return dom


@pytest.mark.parametrize('dom_id', [1, 2])
def test_a_resize_during_a_libvirtd_restart_is_a_new_guest(
        agent, host, hv, dom_id):
    _resize(host, hv, dom_id, libvirtd_restarts=True)
    for _ in range(3):
        agent.tick()
    guest = agent.guests[U1]
    # The new flavor and the new definition's pins, the new QEMU's
    # threads.
    assert guest.vcpus == 4
    assert guest.restore_vcpu_cpus == frozenset(range(4, 8))
    assert agent.controller.last_plan.vms[U1].max_cores == 4
    assert agent.driver.observe(U1).vcpu_slices == 12
    hv.calls.clear()
    agent.stop()
    assert [c[2:] for c in hv.calls if c[1] == 'pinVcpuFlags'] == [
        (index, _bits(range(4, 8)), LIVE) for index in range(4)]


def test_a_new_qemu_with_the_old_id_and_pid_is_told_by_its_start(
        agent, host, hv):
    hv.conn.alive = False
    hv.add(U1, nova_xml(U1, vcpus=4, cpuset='4-7'), dom_id=1)
    # The pid came back too; the process started later.
    fakehost.write_qemu(host.proc, 500, 4, start_time=3000)
    agent.tick()
    assert agent.guests[U1].vcpus == 4


def test_the_same_qemu_after_a_libvirtd_restart_is_kept(agent, host, hv):
    driver = agent.driver
    before = driver.driver._guests[U1]
    hv.conn.alive = False
    agent.tick()
    assert driver.driver._guests[U1] is before
    assert agent.guests[U1].vcpus == 2


def test_a_new_qemu_unseen_yet_is_never_pinned_as_the_old_one(
        agent, host, hv):
    # The guest was resized to a dedicated flavor while the listing
    # failed and its events were lost: the driver still holds the old
    # QEMU. A pin for the old one must not reach the new one.
    hv.list_error = lv.libvirtError('internal error: client socket is '
                                    'closed')
    dom = hv.add(U1, nova_xml(U1, vcpus=2, cpuset='4-7',
                              specs={'hw:cpu_policy': 'dedicated'},
                              vcpupins={0: '4', 1: '5'}, emulatorpin='4-5'),
                 dom_id=2)
    hv.calls.clear()
    agent.tick()
    driver = agent.driver
    for call in (lambda: driver.pin_vcpus(U1, frozenset({2, 3})),
                 lambda: driver.pin_emulator(U1, frozenset({0, 1})),
                 lambda: driver.read_pins(U1)):
        with pytest.raises(base.DriverError, match='another QEMU'):
            call()
    assert [c for c in hv.calls if c[0] == U1 and c[1].startswith('pin')] \
        == [], hv.calls
    assert dom.ID() == 2
