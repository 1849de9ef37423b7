"""A pin call left hanging by a killed agent lands on no one else's CPUs.

libvirt runs a domain's pin calls one at a time. An agent whose pin
call on a guest hangs and that is then killed (SIGKILL) leaves the call
waiting in libvirtd; a new agent reads the guest's pins as they are
(queries answer meanwhile) and must not give the CPUs that call moves
the guest to to another guest: the call lands when the job before it
ends. Over the libvirt driver and a fake libvirt with libvirt's job
serialization; the plans are scripted, so that the new agent's plan
gives those CPUs away.
"""

import os
import threading
import time

from ufo_agent.controller import ControllerConfig
from ufo_agent.controller import plan as plans
from ufo_agent.service import loop
from ufo_agent.service import restore as restore_mod
from ufo_agent.service import settings as settings_mod
from ufo_agent import state
from ufo_tools.fakes.fakehost import nova_xml

MOVED = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
OTHER = '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e'
NAMES = {MOVED: 'instance-00000001', OTHER: 'instance-00000002'}
TIMEOUT = 0.3


def _pins(dom):
    return frozenset(i for bits in dom.vcpu_pins.values()
                     for i, on in enumerate(bits) if on)


def _bits(cpus):
    return tuple(c in cpus for c in range(8))


def _plan(vms, idle):
    """Host of 8 one-thread cores, emulator core 0; ``vms``: cores."""
    return plans.HostPlan(
        0.0, {uuid: plans.VmPlan(uuid, plans.VmMode.ACTIVE,
                                 frozenset(cores), frozenset(cores), 2,
                                 len(cores), False)
              for uuid, cores in vms.items()},
        frozenset({0}), frozenset({0}), frozenset(idle), frozenset(idle),
        8, 0.1, False, 0, (), frozenset(idle))


def _wait_until(condition, timeout=5.0):
    give_up = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < give_up, 'condition not reached'
        time.sleep(0.01)


class Agents:
    """Agents over one host and one state directory, one after another."""

    def __init__(self, host, state_dir):
        self.host = host
        self.state_dir = state_dir
        self.plan = None
        self.now = 1000.0

    def start(self):
        driver = self.host.driver(call_timeout=TIMEOUT)
        agent = loop.Agent(driver, frozenset(range(8)), ControllerConfig(),
                           settings_mod.AgentSettings(
                               drift_check_interval=0.0),
                           store=state.StateStore(self.state_dir),
                           clock=lambda: self.now)
        # The plans are the test's.
        agent.controller.tick = lambda *args: self.plan
        agent.start()
        return driver, agent

    def tick(self, agent, plan):
        self.plan = plan
        self.now += 1.0
        agent.tick()
        assert agent.invariant_violations == 0


def _boot_both(host):
    """MOVED and OTHER, two vCPUs each, defined over the whole host."""
    doms = {}
    for pid, uuid in enumerate((MOVED, OTHER), start=500):
        doms[uuid] = host.boot(uuid, nova_xml(uuid, name=NAMES[uuid],
                                              vcpus=2, cpuset='0-7'),
                               pid=pid, vcpus=2, name=NAMES[uuid])
    return doms


def test_a_pin_call_of_a_killed_agent_lands_on_no_other_guests_cpus(
        host, hv, tmp_path, monkeypatch):
    monkeypatch.setattr('os.cpu_count', lambda: 8)
    doms = _boot_both(host)
    moved, other = doms[MOVED], doms[OTHER]
    # No CPU in two pools at any moment: checked whenever a pin lands.
    shared = []

    def checked(dom, method):
        real = getattr(dom, method)

        def pin(*args):
            real(*args)
            both = _pins(moved) & _pins(other)
            if both:
                shared.append((dom.uuid, args, sorted(both)))
        setattr(dom, method, pin)

    for dom in doms.values():
        checked(dom, 'pinVcpuFlags')
    agents = Agents(host, str(tmp_path / 'state'))
    first = _plan({MOVED: {1, 2}, OTHER: {3, 4}}, {5, 6, 7})
    driver, agent = agents.start()
    for _ in range(2):
        agents.tick(agent, first)
    assert _pins(moved) == {1, 2} and _pins(other) == {3, 4}

    # Its QEMU stops answering as the agent moves it to CPUs 5-6.
    gate = moved.block['pinVcpuFlags'] = threading.Event()
    agents.tick(agent, _plan({MOVED: {5, 6}, OTHER: {3, 4}}, {1, 2, 7}))
    assert (MOVED, 'pinVcpuFlags') in hv.blocked
    assert _pins(moved) == {1, 2}
    # SIGKILL: nothing given back, its connection closes; its call goes
    # on waiting in libvirtd.
    driver.close()
    del moved.block['pinVcpuFlags']

    # A new agent, whose plan gives CPUs 5-6 to the other guest.
    driver, agent = agents.start()
    second = _plan({MOVED: {1, 2}, OTHER: {5, 6}}, {3, 4, 7})
    try:
        for _ in range(2):
            agents.tick(agent, second)
        assert not shared
    finally:
        # libvirtd finishes the old call.
        gate.set()
    landed = (MOVED, 'pinVcpuFlags', 0, _bits({5, 6}), 1)
    _wait_until(lambda: landed in hv.calls and
                not driver._host.deadlines.outstanding())
    assert not shared, shared
    for _ in range(3):
        agents.tick(agent, second)
    assert not shared, shared
    # Once its own pin returned, the new agent placed both.
    assert _pins(moved) == {1, 2} and _pins(other) == {5, 6}
    # Nothing is in flight any more: the record is gone.
    agents.tick(agent, second)
    assert not os.path.exists(tmp_path / 'state' / 'in-flight-pins.json')


def _hung_call(moved, gate, cpus):
    """A killed agent's pin call on ``moved``, waiting in libvirtd."""
    moved.block['pinVcpuFlags'] = gate
    thread = threading.Thread(target=moved.pinVcpuFlags,
                              args=(0, _bits(cpus), 1), daemon=True)
    thread.start()
    _wait_until(lambda: moved.job_holder == 'pinVcpuFlags')
    del moved.block['pinVcpuFlags']
    return thread


def test_restore_gives_a_guest_back_only_behind_the_old_call(
        host, hv, tmp_path, monkeypatch):
    monkeypatch.setattr('os.cpu_count', lambda: 8)
    doms = _boot_both(host)
    for uuid in (MOVED, OTHER):
        cpus = {1, 2} if uuid == MOVED else {3, 4}
        doms[uuid].vcpu_pins = {i: _bits(cpus) for i in range(2)}
        doms[uuid].emulator_pin = _bits({0})
    moved = doms[MOVED]
    record = state.InFlightRecord(str(tmp_path / 'state'))
    record.save({MOVED: {'vcpu': frozenset({1, 2, 5, 6})}})
    gate = threading.Event()
    old = _hung_call(moved, gate, {5, 6})
    outcome = None
    try:
        outcome = restore_mod.restore_guests(
            lambda: host.driver(call_timeout=TIMEOUT), budget=0.5,
            pause=0.05, in_flight_record=record)
        # The other guest is back; this one's release waits behind the
        # old call: not given back, and still on record with its
        # definition's CPUs, where the waiting release puts it.
        assert set(outcome.restored) == {OTHER}
        assert set(outcome.failed) == {MOVED}
        assert record.load() == {MOVED: {'vcpu': frozenset(range(8)),
                                         'emulator': frozenset(range(8))}}
    finally:
        gate.set()
        if outcome is not None and outcome.driver is not None:
            _wait_until(lambda: not outcome.driver._host.deadlines
                        .outstanding())
    old.join(5.0)
    outcome = restore_mod.restore_guests(
        lambda: host.driver(call_timeout=TIMEOUT), budget=2.0, pause=0.05,
        in_flight_record=record)
    assert outcome.ok and set(outcome.restored) == {MOVED, OTHER}
    # Exactly its definition: the old call landed before the release.
    assert _pins(moved) == set(range(8))
    assert record.load() == {}
    assert not os.path.exists(record.path)


def test_a_guest_libvirt_no_longer_has_leaves_the_record_at_start(
        host, hv, tmp_path, monkeypatch):
    monkeypatch.setattr('os.cpu_count', lambda: 8)
    host.boot(MOVED, nova_xml(MOVED, name=NAMES[MOVED], vcpus=2,
                              cpuset='0-7'),
              pid=500, vcpus=2, name=NAMES[MOVED])
    record = state.InFlightRecord(str(tmp_path / 'state'))
    record.save({MOVED: {'vcpu': frozenset({5})},
                 OTHER: {'vcpu': frozenset({3})}})
    agents = Agents(host, str(tmp_path / 'state'))
    _, agent = agents.start()
    in_flight = agent.enforcer.in_flight
    assert in_flight.uuids() == {MOVED}
    assert in_flight.inherited == {MOVED}
    agents.tick(agent, _plan({MOVED: {1, 2}}, {3, 4, 5, 6, 7}))
    # Its own pin returned: the old calls are over.
    assert in_flight.inherited == set()
    assert OTHER not in record.load()
