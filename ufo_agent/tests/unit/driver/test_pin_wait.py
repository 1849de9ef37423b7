"""A hung guest's pin holds up no other guest's pin for a deadline.

The enforcer pins the guests one after the other. A pin call on a guest
whose QEMU does not answer is left in flight after the pin wait, handled
as one that missed its deadline (its guest busy until it returns), so
that the pins after it in the tick are made at once. Over the libvirt
driver and a fake libvirt whose pin calls on one domain block.
"""

import os
import threading
import time

import pytest

from ufo_agent.controller import ControllerConfig
from ufo_agent.driver import base
from ufo_agent.driver.libvirt import deadline
from ufo_agent.service import loop
from ufo_agent.service import settings as settings_mod
from ufo_tools.fakes.fakehost import nova_xml

A = '8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d'
B = '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e'
DEADLINE = 3.0


@pytest.fixture
def two_guests(host, hv, monkeypatch):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    doms = {}
    for pid, (uuid, name) in enumerate(((A, 'instance-00000001'),
                                        (B, 'instance-00000002')),
                                       start=500):
        doms[uuid] = host.boot(uuid, nova_xml(uuid, name=name,
                                              cpuset='0-7'),
                               pid=pid, name=name)
    driver = host.driver(call_timeout=DEADLINE)
    assert {g.uuid for g in driver.guests()} == {A, B}
    yield driver, doms
    for dom in doms.values():
        for gate in dom.block.values():
            gate.set()


def _bits(cpus):
    return tuple(cpu in cpus for cpu in range(8))


def _pins(cpus):
    return {vcpu: _bits(cpus) for vcpu in range(2)}


def _wait_returned(driver):
    give_up = time.monotonic() + 2 * DEADLINE
    while driver._host.deadlines.outstanding():
        assert time.monotonic() < give_up, 'the hung call never returned'
        time.sleep(0.01)


def test_the_pins_after_a_hung_one_are_made_well_within_the_deadline(
        two_guests):
    driver, doms = two_guests
    gate = doms[A].block['pinVcpuFlags'] = threading.Event()
    started = time.monotonic()
    # In the enforcer's order: a's pins, then b's.
    with pytest.raises(deadline.CallTimedOut) as raised:
        driver.pin_vcpus(A, frozenset({2, 3}))
    assert isinstance(raised.value, base.DriverError)
    assert not isinstance(raised.value, base.GuestBusy)
    with pytest.raises(base.GuestBusy):
        driver.pin_emulator(A, frozenset({0, 1}))
    driver.pin_vcpus(B, frozenset({4, 5}))
    driver.pin_emulator(B, frozenset({0, 1}))
    took = time.monotonic() - started
    assert took < DEADLINE / 2, took
    assert doms[B].vcpu_pins == _pins({4, 5})
    # a stays busy until its call returns; then its pins are made again.
    assert driver.busy_guests() == frozenset({A})
    gate.set()
    _wait_returned(driver)
    driver.pin_vcpus(A, frozenset({2, 3}))
    assert doms[A].vcpu_pins == _pins({2, 3})


def test_a_restore_waits_the_whole_deadline(two_guests):
    # Nothing waits behind a restore: a slow one is not given up early.
    driver, doms = two_guests
    gate = doms[A].block['pinVcpuFlags'] = threading.Event()
    threading.Timer(2 * driver._host.pin_wait, gate.set).start()
    driver._get(A).pin_vcpus(frozenset(range(8)), wait=None)
    assert not driver.busy_guests()


def _settled_agent(driver):
    now = [1000.0]
    agent = loop.Agent(driver, frozenset(range(8)), ControllerConfig(),
                       settings_mod.AgentSettings(),
                       clock=lambda: now[0])
    agent.start()
    for _ in range(3):
        now[0] += 1.0
        agent.tick()
    return agent, now


def _one_hangs(two_guests, method, act):
    """``act(agent, now)`` after someone re-pinned both guests.

    The first guest's ``method`` hangs. Returns (agent, now, the hung
    guest, the other, the hung call's gate, what ``act`` returned),
    once ``act`` took well within the deadline.
    """
    driver, doms = two_guests
    hung, other = sorted(doms)
    agent, now = _settled_agent(driver)
    for dom in doms.values():
        dom.vcpu_pins = {i: (True,) + (False,) * 7 for i in range(2)}
    gate = doms[hung].block[method] = threading.Event()
    started = time.monotonic()
    value = act(agent, now)
    took = time.monotonic() - started
    assert (hung, method) in doms[hung].hv.blocked
    assert took < DEADLINE / 2, took
    assert driver.busy_guests() == frozenset({hung})
    return agent, now, hung, other, gate, value


def _drift_tick(agent, now):
    now[0] += agent.settings.drift_check_interval + 1.0
    agent.tick()


def test_a_tick_pins_the_others_while_one_guest_pin_hangs(two_guests):
    # Someone re-pinned both guests: the drift check finds it and the
    # same tick pins them to the plan, the hung one first (the
    # enforcer's order), then the other, not held up by it.
    driver, doms = two_guests
    agent, now, hung, other, gate, _ = _one_hangs(
        two_guests, 'pinVcpuFlags', _drift_tick)
    plan = agent.last_plan
    assert plan.vms[other].cpus != {0}
    assert doms[other].vcpu_pins == _pins(plan.vms[other].cpus)
    assert doms[other].emulator_pin == _bits(plan.emulator_cpus)
    gate.set()
    _wait_returned(driver)
    _drift_tick(agent, now)
    assert doms[hung].vcpu_pins == _pins(agent.last_plan.vms[hung].cpus)
    agent.stop()


def test_a_hung_read_of_pins_holds_up_no_other_guest_read(two_guests):
    # The drift check reads the guests' pins one after the other.
    agent, _, _, other, gate, drifted = _one_hangs(
        two_guests, 'vcpuPinInfo',
        lambda agent, now: agent.enforcer.check_drift())
    assert drifted == [other]
    gate.set()
    _wait_returned(two_guests[0])
    agent.stop()
