"""Pin calls are on record before they are made, for a next agent.

The record (``in-flight-pins.json`` under the state directory) must hold
where every pin call may put a guest's threads before the call is made,
unless it narrows pins seen; it is written at most once a tick, only
when it changed; a guest given back leaves it.
"""

import os

from ufo_agent.driver import base
from ufo_agent import state
from ufo_agent.tests.unit.service import fakes


class CountingRecord(state.InFlightRecord):
    """The record, counting its writes; ``broken`` makes them fail."""

    def __init__(self, directory):
        super().__init__(directory)
        self.saves = 0
        self.broken = False

    def save(self, entries):
        if self.broken:
            raise OSError(28, 'No space left on device')
        self.saves += 1
        super().save(entries)


def _agent(tmp_path, driver):
    store = state.StateStore(str(tmp_path))
    agent, tick = fakes.ticking_agent(driver, store=store)
    record = agent.enforcer.in_flight.record = CountingRecord(str(tmp_path))
    return agent, tick, record


def _guests(driver):
    a = driver.add(fakes.FakeGuest('a', 4, channel=False))
    b = driver.add(fakes.FakeGuest('b', 4, channel=False))
    c = driver.add(fakes.FakeGuest('c', 2, channel=False))
    return a, b, c


def _write_ahead(driver, record):
    """Check every pin against the record on disk as it is made."""
    seen = []
    for method, kind in (('pin_vcpus', 'vcpu'),
                         ('pin_emulator', 'emulator')):
        real = getattr(driver, method)

        def pin(uuid, cpus, real=real, kind=kind):
            guest = driver.all[uuid]
            live = guest.vcpu_pins if kind == 'vcpu' else \
                guest.emulator_pins
            recorded = record.load().get(uuid, {}).get(kind, frozenset())
            # Inside the pins seen, or on record.
            if live is None or not cpus <= live:
                assert cpus <= recorded, (uuid, kind, cpus, recorded)
            seen.append((uuid, kind))
            return real(uuid, cpus)
        setattr(driver, method, pin)
    return seen


def test_pins_are_recorded_before_they_are_made_once_a_tick(tmp_path):
    driver = fakes.FakeDriver(cores=5)
    a, b, c = _guests(driver)
    agent, tick, record = _agent(tmp_path, driver)
    pins = _write_ahead(driver, record)
    agent.start()
    writes = []
    for t in range(60):
        if t == 20:
            a.util, b.util = 390.0, 0.0
        elif t == 40:
            a.util, b.util, c.util = 0.0, 390.0, 190.0
        before = record.saves
        tick()
        writes.append(record.saves - before)
    assert pins and max(writes) == 1
    # Only when it changed: a steady host writes nothing.
    before = record.saves
    for _ in range(15):
        tick()
    assert record.saves == before
    assert not os.path.exists(record.path)


def test_pins_that_move_a_guest_wait_while_the_record_cannot_be_written(
        tmp_path):
    driver = fakes.FakeDriver(cores=5)
    a, b, c = _guests(driver)
    agent, tick, record = _agent(tmp_path, driver)
    outcomes = fakes.record_outcomes(agent)
    agent.start()
    for _ in range(15):
        tick()
    record.broken = True
    pins = {u: (g.vcpu_pins, g.emulator_pins)
            for u, g in driver.all.items()}
    a.util, b.util = 390.0, 0.0
    moved = False
    for _ in range(15):
        driver.calls.clear()
        plan = tick()
        for name, uuid, cpus in (c for c in driver.calls
                                 if c[0].startswith('pin_')):
            # Only narrows of the pins seen.
            assert cpus <= pins[uuid][name == 'pin_emulator'], (name, uuid)
        pins = {u: (g.vcpu_pins, g.emulator_pins)
                for u, g in driver.all.items()}
        moved = moved or any('pin withheld: the in-flight pin record '
                             'cannot be written ([Errno 28] No space left '
                             'on device)' in why
                             for why in outcomes[-1].failed.values())
    assert moved
    assert a.vcpu_pins != plan.vms['a'].cpus
    record.broken = False
    for _ in range(5):
        plan = tick()
    assert a.vcpu_pins == plan.vms['a'].cpus
    assert not outcomes[-1].failed


def test_a_started_agent_holds_the_recorded_cpus_until_its_pin_returns(
        tmp_path):
    driver = fakes.FakeDriver(cores=5)
    a, b, c = _guests(driver)
    # Where the agent that died left them (cores are (c, c + 5)).
    for guest, cpus in ((a, {1, 6}), (b, {3, 8}), (c, {4, 9})):
        guest.vcpu_pins, guest.emulator_pins = frozenset(cpus), \
            frozenset({0, 5})
    b.util = c.util = 390.0
    state.InFlightRecord(str(tmp_path)).save(
        {'a': {'vcpu': frozenset({2, 7})}})
    agent, tick, record = _agent(tmp_path, driver)
    agent.start()
    vcpu = agent.enforcer.ledger.get(('a', 'vcpu'))
    # Not seen there: guessed, no narrow may move it onto them.
    assert vcpu.cpus == {1, 2, 6, 7} and vcpu.guessed
    emulator = agent.enforcer.ledger.get(('a', 'emulator'))
    assert emulator.cpus == {0, 5} and emulator.exact
    # Its own calls hang: it stays on record, the CPUs held.
    driver.hung.add('a')
    for _ in range(6):
        tick()
        assert 'a' in agent.enforcer.in_flight.inherited
        assert agent.enforcer.in_flight.cpus(('a', 'vcpu')) >= {2, 7}
        for guest in (b, c):
            assert not (guest.vcpu_pins | guest.emulator_pins) & {2, 7}
    driver.hung.clear()
    tick()
    assert 'a' not in agent.enforcer.in_flight.inherited
    tick()
    assert agent.enforcer.in_flight.cpus(('a', 'vcpu')) == frozenset()


def test_a_stop_leaves_on_record_only_the_guests_it_could_not_give_back(
        tmp_path):
    driver = fakes.FakeDriver(cores=5)
    a, b, c = _guests(driver)
    agent, tick, record = _agent(tmp_path, driver)
    agent.start()
    for _ in range(10):
        tick()
    real = driver.release

    def release(uuid):
        if uuid == 'b':
            raise base.DriverError('release of b timed out')
        return real(uuid)
    driver.release = release
    assert agent.stop() == ['b']
    every = frozenset(range(64))        # FakeGuest's definition
    assert record.load() == {'b': {'vcpu': every, 'emulator': every}}
    driver.release = real
    agent.stop()
    assert not os.path.exists(record.path)


def test_a_started_agent_places_guests_whose_releases_all_failed(tmp_path):
    # A stop while libvirt failed every call: each guest's release (its
    # definition, every managed CPU) may still land. The next agent
    # holds those CPUs for each guest, so no pinning may widen onto
    # CPUs free of the others; each first narrows within where its
    # threads were read, which is safe whatever lands first.
    driver = fakes.FakeDriver(cores=5)
    a, b, c = _guests(driver)
    seen = {'a': {1, 6}, 'b': {3, 8}, 'c': {4, 9}}
    for guest in (a, b, c):
        guest.vcpu_pins = frozenset(seen[guest.info.uuid])
        guest.emulator_pins = frozenset({0, 5})
    b.util = c.util = 390.0
    every = frozenset(range(10))
    state.InFlightRecord(str(tmp_path)).save(
        {uuid: {'vcpu': every, 'emulator': every} for uuid in seen})
    agent, tick, record = _agent(tmp_path, driver)
    pins = _write_ahead(driver, record)
    agent.start()
    assert agent.enforcer.in_flight.inherited == set(seen)
    assert agent.enforcer.ledger.get(('a', 'vcpu')).guessed
    for _ in range(3):
        plan = tick()
    assert pins
    # Each guest's first vCPU pin kept its threads where they were seen.
    for uuid, cpus in seen.items():
        first = next(c for c in driver.calls
                     if c[:2] == ('pin_vcpus', uuid))
        assert first[2] <= cpus, (uuid, first)
    assert not agent.enforcer.in_flight.inherited
    for uuid, guest in driver.all.items():
        assert guest.vcpu_pins == plan.vms[uuid].cpus, uuid
        assert guest.emulator_pins == plan.emulator_cpus, uuid
    # The release CPUs left the record once the guests' pins returned.
    for _ in range(10):
        tick()
    assert not os.path.exists(record.path)
