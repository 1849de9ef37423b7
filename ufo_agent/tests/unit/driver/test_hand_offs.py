"""Reads handed to the libvirt call thread together.

Over the libvirt driver and a fake libvirt: the drift check's reads of
every guest due, and the pins of an enforcement pass, go to the call
thread at once, and a guest whose call hangs holds up the calls after it
by the pin wait only, as one by one; a tick's listing of the domains is
one hand-off.
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
from ufo_tools.fakes import fakelibvirt as lv

UUIDS = ('8f1d3c2e-1111-4a5b-9c0d-2e3f4a5b6c7d',
         '3b7e0a52-6c1d-4f0e-a9b8-7d6c5b4a3f2e',
         '5c2a9e41-2222-4b6c-8d1e-3f4a5b6c7d8e')
DEADLINE = 3.0


@pytest.fixture
def guests(host, hv, monkeypatch):
    monkeypatch.setattr(os, 'cpu_count', lambda: 8)
    doms = {}
    for pid, uuid in enumerate(UUIDS, start=500):
        name = 'instance-%08x' % pid
        doms[uuid] = host.boot(uuid, nova_xml(uuid, name=name,
                                              cpuset='0-7'),
                               pid=pid, name=name)
    driver = host.driver(call_timeout=DEADLINE)
    yield driver, doms
    for dom in doms.values():
        for gate in dom.block.values():
            gate.set()


def _hand_offs(driver, monkeypatch):
    deadlines = driver._host.deadlines
    count = []
    real = deadlines._hand_over

    def counted(*args):
        count.append(args)
        return real(*args)
    monkeypatch.setattr(deadlines, '_hand_over', counted)
    return count


def test_the_drift_check_reads_every_guest_in_one_hand_off(guests,
                                                           monkeypatch):
    driver, doms = guests
    agent = loop.Agent(driver, frozenset(range(8)), ControllerConfig(),
                       settings_mod.AgentSettings())
    agent.start()
    agent.tick()
    one_by_one = {uuid: driver.read_pins(uuid) for uuid in UUIDS}
    hand_offs = _hand_offs(driver, monkeypatch)
    assert agent.enforcer.check_drift(UUIDS) == []
    # One by one (before): one hand-off a guest.
    assert len(hand_offs) == 1
    assert driver.read_pins_many(UUIDS) == one_by_one


def test_a_hung_read_holds_up_the_reads_after_it_by_the_pin_wait(guests):
    driver, doms = guests
    driver.guests()
    hung = UUIDS[1]
    gate = doms[hung].block['vcpuPinInfo'] = threading.Event()
    started = time.monotonic()
    found = driver.read_pins_many(UUIDS)
    took = time.monotonic() - started
    assert took < DEADLINE / 2, took
    assert isinstance(found[hung], deadline.CallInFlight)
    assert isinstance(found[hung], base.DriverError)
    for uuid in (UUIDS[0], UUIDS[2]):
        assert found[uuid] == driver.read_pins(uuid)
    # The hung guest is busy until its read returns.
    assert driver.busy_guests() == frozenset({hung})
    gate.set()


def test_a_listing_of_the_guests_is_one_hand_off(guests, monkeypatch):
    driver, doms = guests
    assert {g.uuid for g in driver.guests()} == set(UUIDS)
    hand_offs = _hand_offs(driver, monkeypatch)
    assert {g.uuid for g in driver.guests()} == set(UUIDS)
    # The active and the running domains (two before).
    assert len(hand_offs) == 1


def _pins_made(hv, start):
    return [call for call in hv.calls[start:]
            if call[1] in ('pinVcpuFlags', 'pinEmulator')]


def test_the_pins_of_a_pass_go_to_the_call_thread_at_once(guests, hv,
                                                          monkeypatch):
    driver, doms = guests
    agent = loop.Agent(driver, frozenset(range(8)), ControllerConfig(),
                       settings_mod.AgentSettings())
    agent.start()
    hand_offs = _hand_offs(driver, monkeypatch)
    during_apply = []
    apply = agent.enforcer.apply

    def counted(*args, **kwargs):
        start = len(hand_offs)
        outcome = apply(*args, **kwargs)
        during_apply.append((len(hand_offs) - start, outcome.pinned))
        return outcome
    monkeypatch.setattr(agent.enforcer, 'apply', counted)
    start = len(hv.calls)
    plan = agent.tick()
    made = _pins_made(hv, start)
    # Every guest's vCPUs and emulator leave Nova's 0-7 for the plan.
    assert {call[0] for call in made} == set(UUIDS)
    for uuid, dom in doms.items():
        assert driver.read_pins(uuid)[0] == {plan.vms[uuid].cpus}
    # Six narrows from Nova's CPUs, in one hand-off (one a pin before).
    assert during_apply == [(1, 6)]


def test_a_hung_pin_holds_up_the_pins_after_it_by_the_pin_wait(guests,
                                                               hv):
    driver, doms = guests
    driver.guests()
    hung = UUIDS[1]
    gate = doms[hung].block['pinVcpuFlags'] = threading.Event()
    doms[UUIDS[2]].fail['pinEmulator'] = lv.libvirtError('no emulator')
    pins = [(uuid, kind, frozenset({i, 4 + i}))
            for i, uuid in enumerate(UUIDS)
            for kind in (base.VCPU, base.EMULATOR)]
    started = time.monotonic()
    outcomes = driver.pin_many(pins)
    took = time.monotonic() - started
    assert took < DEADLINE / 2, took
    by_pin = dict(zip([pin[:2] for pin in pins], outcomes))
    # Left in flight, then skipped as busy without a call.
    assert isinstance(by_pin[(hung, base.VCPU)], deadline.CallInFlight)
    assert isinstance(by_pin[(hung, base.EMULATOR)], base.GuestBusy)
    assert isinstance(by_pin[(UUIDS[2], base.EMULATOR)], base.DriverError)
    # The others are made, as one by one.
    for uuid, kind in ((UUIDS[0], base.VCPU), (UUIDS[0], base.EMULATOR),
                       (UUIDS[2], base.VCPU)):
        assert by_pin[(uuid, kind)] is None
    vcpus, emulator = driver.read_pins(UUIDS[0])
    assert (vcpus, emulator) == ({frozenset({0, 4})}, frozenset({0, 4}))
    assert driver.read_pins(UUIDS[2])[0] == {frozenset({2, 6})}
    assert driver.busy_guests() == frozenset({hung})
    gate.set()
